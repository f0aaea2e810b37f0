//! CPU reference of the measurements, for the tests and `--cpu` only:
//! every region's sums in f64 over its pixels in raster order, written out
//! plainly. The streamed chain's host code (`segment::host::Accumulator`)
//! takes the pixels in runs and must give these sums bit for bit.

use super::*;

pub fn regionprops(
    labels: &[i32],
    values: &[f32],
    shape: &[usize],
    n_labels: usize,
) -> Result<Vec<Region>> {
    check(labels, values, shape, n_labels)?;
    let nd = shape.len();
    let mut regions: Vec<Region> = (1..=n_labels as u32)
        .map(|label| Region {
            label,
            area: 0,
            bbox_min: vec![usize::MAX; nd],
            bbox_max: vec![0; nd],
            centroid: vec![0.0; nd],
            centroid_weighted: vec![0.0; nd],
            intensity_sum: 0.0,
            intensity_mean: 0.0,
            intensity_min: f64::INFINITY,
            intensity_max: f64::NEG_INFINITY,
        })
        .collect();
    for (i, (&l, &v)) in labels.iter().zip(values).enumerate() {
        if l == 0 {
            continue;
        }
        // The pixel's coordinates, slowest axis first.
        let mut coord = vec![0usize; nd];
        let mut rest = i;
        for a in (0..nd).rev() {
            coord[a] = rest % shape[a];
            rest /= shape[a];
        }
        let r = &mut regions[l as usize - 1];
        let v = f64::from(v);
        r.area += 1;
        r.intensity_sum += v;
        r.intensity_min = r.intensity_min.min(v);
        r.intensity_max = r.intensity_max.max(v);
        for (a, &c) in coord.iter().enumerate() {
            r.bbox_min[a] = r.bbox_min[a].min(c);
            r.bbox_max[a] = r.bbox_max[a].max(c + 1);
            r.centroid[a] += c as f64;
            r.centroid_weighted[a] += c as f64 * v;
        }
    }
    for r in &mut regions {
        let n = r.area as f64;
        for a in 0..nd {
            r.centroid[a] /= n;
            r.centroid_weighted[a] /= r.intensity_sum;
        }
        r.intensity_mean = r.intensity_sum / n;
    }
    Ok(regions)
}

//! Production host code of the segmentation family: the streamed source
//! chain's threshold and measurements (`sources::sources_stream`), which
//! run on the host slab by slab. Tested against the CPU references
//! (`threshold::cpu`, `measure::cpu`), which they must equal bit for bit.

use crate::error::{Error, Result};
use crate::segment::measure::Region;
use crate::segment::threshold::check_value;

/// Appends the mask `values > value` to `out` (the comparison in f64, as
/// `threshold::cpu` makes it for float32 data). NaN values are never above.
pub fn above(values: &[f32], value: f64, out: &mut Vec<bool>) -> Result<()> {
    check_value(value)?;
    out.extend(values.iter().map(|&x| f64::from(x) > value));
    Ok(())
}

/// Regions accumulated from consecutive runs of pixels in raster order.
pub struct Accumulator {
    shape: Vec<usize>,
    /// Raster index of the next pixel.
    next: usize,
    regions: Vec<Region>,
}

impl Accumulator {
    pub fn new(shape: &[usize]) -> Accumulator {
        Accumulator {
            shape: shape.to_vec(),
            next: 0,
            regions: Vec::new(),
        }
    }

    fn empty(label: u32, nd: usize) -> Region {
        Region {
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
        }
    }

    /// The next `labels.len()` pixels (labels >= 0) and their values.
    pub fn add(&mut self, labels: &[i32], values: &[f32]) -> Result<()> {
        if labels.len() != values.len() {
            return Err(Error::InvalidInput(format!(
                "{} labels for {} intensities",
                labels.len(),
                values.len()
            )));
        }
        let nd = self.shape.len();
        let mut coord = vec![0usize; nd];
        for (k, (&l, &v)) in labels.iter().zip(values).enumerate() {
            if l <= 0 {
                if l < 0 {
                    return Err(Error::InvalidInput(format!("negative label {l}")));
                }
                continue;
            }
            let mut rest = self.next + k;
            for a in (0..nd).rev() {
                coord[a] = rest % self.shape[a];
                rest /= self.shape[a];
            }
            let l = l as usize;
            if l > self.regions.len() {
                let from = self.regions.len() as u32 + 1;
                self.regions
                    .extend((from..=l as u32).map(|id| Self::empty(id, nd)));
            }
            let r = &mut self.regions[l - 1];
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
        self.next += labels.len();
        Ok(())
    }

    /// Regions 1..=n_labels with their means.
    pub fn finish(mut self, n_labels: usize) -> Vec<Region> {
        let nd = self.shape.len();
        let from = self.regions.len() as u32 + 1;
        self.regions
            .extend((from..=n_labels as u32).map(|id| Self::empty(id, nd)));
        self.regions.truncate(n_labels);
        for r in &mut self.regions {
            let n = r.area as f64;
            for a in 0..nd {
                r.centroid[a] /= n;
                r.centroid_weighted[a] /= r.intensity_sum;
            }
            r.intensity_mean = r.intensity_sum / n;
        }
        self.regions
    }
}

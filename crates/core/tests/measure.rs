//! Region measurements on the GPU (integer atomics, fixed-point sums)
//! against the CPU reference (f64 sums): integer properties exact, float
//! ones within 1e-9 relative (the fixed point keeps 48 bits of each value);
//! 2-D and 3-D, negative intensities, chunked through 64 KiB bindings.

mod common;

use common::{gpu, noise, tiny_gpu};
use gpuscope_core::segment::label::cpu::label;
use gpuscope_core::segment::measure::{Region, cpu, regionprops};

fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-9 * b.abs().max(1e-3),
        "{what}: gpu {a} cpu {b}"
    );
}

fn both(values: &[f32], shape: &[usize], threshold: f64, c: usize) -> Vec<Region> {
    let mask: Vec<bool> = values.iter().map(|&v| f64::from(v) > threshold).collect();
    let l = label(&mask, shape, c).unwrap();
    let want = cpu::regionprops(&l.labels, values, shape, l.count).unwrap();
    for g in [gpu(), tiny_gpu()] {
        let got = pollster::block_on(regionprops(g, &l.labels, values, shape, l.count)).unwrap();
        assert_eq!(got.len(), want.len());
        for (a, b) in got.iter().zip(&want) {
            assert_eq!(
                (a.label, a.area, &a.bbox_min, &a.bbox_max),
                (b.label, b.area, &b.bbox_min, &b.bbox_max)
            );
            assert_eq!(
                (a.intensity_min, a.intensity_max),
                (b.intensity_min, b.intensity_max)
            );
            for k in 0..shape.len() {
                close(a.centroid[k], b.centroid[k], "centroid");
                close(
                    a.centroid_weighted[k],
                    b.centroid_weighted[k],
                    "weighted centroid",
                );
            }
            close(a.intensity_sum, b.intensity_sum, "sum");
            close(a.intensity_mean, b.intensity_mean, "mean");
        }
    }
    want
}

#[test]
fn regions_2d_and_3d_match_the_reference() {
    let shape = [150, 170];
    let v: Vec<f32> = noise(150 * 170, 4)
        .iter()
        .map(|&x| (x * 1000.0) as f32)
        .collect();
    let r = both(&v, &shape, 600.0, 1);
    assert!(r.len() > 100);
    both(&v, &shape, 300.0, 2);
    let shape = [20, 30, 40];
    let v: Vec<f32> = noise(24_000, 5).iter().map(|&x| x as f32).collect();
    assert!(!both(&v, &shape, 0.7, 1).is_empty());
}

#[test]
fn negative_and_tiny_intensities_and_one_region_everywhere() {
    let shape = [64, 64];
    let v: Vec<f32> = noise(4096, 6)
        .iter()
        .map(|&x| (x - 0.5) as f32 * 1e-3)
        .collect();
    // Threshold below everything: one region of the whole image.
    let r = both(&v, &shape, -1.0, 1);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].area, 4096);
    assert_eq!(
        (r[0].bbox_min.clone(), r[0].bbox_max.clone()),
        (vec![0, 0], vec![64, 64])
    );
    both(&v, &shape, 0.0, 2);
}

#[test]
fn no_regions_and_bad_input() {
    assert!(
        pollster::block_on(regionprops(gpu(), &[0, 0], &[1.0, 2.0], &[2], 0))
            .unwrap()
            .is_empty()
    );
    let e = cpu::regionprops(&[0, 3], &[1.0, 2.0], &[2], 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("label 3"), "{e}");
    assert!(cpu::regionprops(&[1, 1], &[1.0, f32::NAN], &[2], 1).is_err());
    assert!(cpu::regionprops(&[1, 1], &[1.0], &[2], 1).is_err());
}

/// The streamed chain's host measurements (`segment::host::Accumulator`,
/// pixels in runs of any length) equal the CPU reference bit for bit.
#[test]
fn host_accumulator_in_runs_equals_the_reference() {
    use gpuscope_core::segment::host::Accumulator;
    for (shape, threshold, c) in [(vec![90, 110], 175.0, 1), (vec![12, 30, 40], 420.0, 3)] {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = noise(n, 17)
            .iter()
            .map(|&x| (x - 0.3) as f32 * 700.0)
            .collect();
        let mask: Vec<bool> = v.iter().map(|&x| f64::from(x) > threshold).collect();
        let l = label(&mask, &shape, c).unwrap();
        assert!(l.count > 10);
        let want = cpu::regionprops(&l.labels, &v, &shape, l.count).unwrap();
        for run in [1, 7, 113, shape[shape.len() - 1], n] {
            let mut acc = Accumulator::new(&shape);
            for (labels, values) in l.labels.chunks(run).zip(v.chunks(run)) {
                acc.add(labels, values).unwrap();
            }
            assert_eq!(acc.finish(l.count), want, "runs of {run}");
        }
    }
}

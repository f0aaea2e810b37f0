//! The source-finding chain on the GPU (resident on the default device,
//! step by step in chunks on the 64 KiB-binding device) against the chain
//! of CPU references: same clipped statistics, identical labels, same
//! catalogue.

mod common;

use common::{gpu, noise, tiny_gpu};
use gpuscope_core::segment::sources::{Level, Sources, cpu, sources};
use gpuscope_core::stats::clip::ClipOptions;

/// Noise (sum of uniforms) plus Gaussian blobs every 37 pixels.
fn sky(shape: &[usize], seed: u64) -> Vec<f32> {
    let n: usize = shape.iter().product();
    let u = noise(4 * n, seed);
    let w = *shape.last().unwrap();
    (0..n)
        .map(|i| {
            let g: f64 = u[4 * i..4 * i + 4].iter().sum::<f64>() - 2.0;
            let (y, x) = ((i / w) % 37, i % 37);
            let r2 = ((y as f64 - 18.0).powi(2) + (x as f64 - 18.0).powi(2)) / 4.0;
            (0.05 * g + 2.0 * (-r2).exp()) as f32
        })
        .collect()
}

fn check(data: &[f32], shape: &[usize], clip: &ClipOptions, level: Level, c: usize) -> Sources {
    let want = cpu::sources(data, shape, clip, level, c).unwrap();
    for g in [gpu(), tiny_gpu()] {
        let got = pollster::block_on(sources(g, data, shape, clip, level, c)).unwrap();
        assert_eq!(got.stats.n_kept, want.stats.n_kept);
        assert!((got.stats.std - want.stats.std).abs() <= 1e-6 * want.stats.std);
        assert!((got.threshold - want.threshold).abs() <= 1e-6 * want.threshold.abs());
        assert_eq!(got.labels, want.labels);
        assert_eq!(got.regions.len(), want.regions.len());
        for (a, b) in got.regions.iter().zip(&want.regions) {
            assert_eq!(
                (a.area, &a.bbox_min, &a.bbox_max),
                (b.area, &b.bbox_min, &b.bbox_max)
            );
            assert_eq!(a.intensity_max, b.intensity_max);
            let d = (a.intensity_sum - b.intensity_sum).abs();
            assert!(d <= 1e-9 * b.intensity_sum.abs(), "{a:?} {b:?}");
            for k in 0..shape.len() {
                assert!(
                    (a.centroid_weighted[k] - b.centroid_weighted[k]).abs()
                        <= 1e-9 * b.centroid_weighted[k].abs().max(1.0)
                );
            }
        }
    }
    want
}

#[test]
fn chain_equals_the_reference_2d_and_3d() {
    let shape = [200, 230];
    let d = sky(&shape, 1);
    let s = check(
        &d,
        &shape,
        &ClipOptions::default(),
        Level::AboveMedian(5.0),
        1,
    );
    assert!(s.labels.count > 20, "{}", s.labels.count);
    check(
        &d,
        &shape,
        &ClipOptions::workshop(3.0),
        Level::Workshop(5.0),
        2,
    );
    let shape = [24, 40, 40];
    let d = sky(&shape, 2);
    check(
        &d,
        &shape,
        &ClipOptions::default(),
        Level::AboveMedian(4.0),
        3,
    );
}

#[test]
fn nothing_above_and_bad_input() {
    let shape = [50, 60];
    let mut d = sky(&shape, 3);
    let s = check(
        &d,
        &shape,
        &ClipOptions::default(),
        Level::AboveMedian(1e6),
        1,
    );
    assert_eq!(s.labels.count, 0);
    // NaN pixels are neither clipped values nor sources.
    d[7] = f32::NAN;
    check(
        &d,
        &shape,
        &ClipOptions::default(),
        Level::AboveMedian(5.0),
        1,
    );
    let nan = vec![f32::NAN; 100];
    assert!(
        pollster::block_on(sources(
            gpu(),
            &nan,
            &[10, 10],
            &ClipOptions::default(),
            Level::AboveMedian(5.0),
            1
        ))
        .is_err()
    );
    assert!(
        cpu::sources(
            &d,
            &shape,
            &ClipOptions::default(),
            Level::AboveMedian(5.0),
            3
        )
        .is_err()
    );
    assert!(
        cpu::sources(
            &d,
            &shape,
            &ClipOptions::default(),
            Level::AboveMedian(f64::NAN),
            1
        )
        .is_err()
    );
}

#[test]
fn repeated_calls_and_failures_leave_no_device_memory_behind() {
    // A device of its own: the shared one is busy with the other tests.
    let device =
        pollster::block_on(gpuscope_core::Gpu::new(gpuscope_core::GpuOptions::default())).unwrap();
    let o = ClipOptions::default();
    for (k, n) in [40usize, 130, 17, 90].into_iter().enumerate() {
        let shape = [n, n + 3];
        let d = sky(&shape, k as u64);
        let s = pollster::block_on(sources(&device, &d, &shape, &o, Level::AboveMedian(5.0), 1))
            .unwrap();
        let mask: Vec<bool> = s.labels.labels.iter().map(|&l| l != 0).collect();
        pollster::block_on(gpuscope_core::segment::label(&device, &mask, &shape, 2)).unwrap();
        // Fails after the image, mask and label buffers are allocated.
        let bad = Level::AboveMedian(f64::NAN);
        assert!(pollster::block_on(sources(&device, &d, &shape, &o, bad, 1)).is_err());
    }
    device.trim();
    assert_eq!(device.live_bytes(), 0);
}

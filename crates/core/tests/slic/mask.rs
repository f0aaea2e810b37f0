//! SLIC with a mask: the GPU against the CPU twin, seeds on the grid
//! inside the mask and seeds anywhere in it (scikit-image's k-means of the
//! mask's coordinates). Part of tests/slic.rs.

use super::*;

#[test]
fn gpu_equals_cpu_with_mask() {
    let shape = [50, 44];
    let img = blobs(&shape, 5);
    let mask: Vec<bool> = (0..50 * 44)
        .map(|i| {
            let (y, x) = ((i / 44) as f64 - 25.0, (i % 44) as f64 - 22.0);
            y * y + x * x < 400.0
        })
        .collect();
    let p = gray(SlicParams {
        n_segments: 20,
        mask: Some(mask.clone()),
        ..SlicParams::default()
    });
    let s = both(Samples::F32(&img), &shape, &p);
    for (l, m) in s.labels.iter().zip(&mask) {
        assert_eq!(*l == 0, !m, "masked pixels (and only those) are 0");
    }
}

/// A masked image's seeds lie anywhere in the mask (scikit-image's
/// k-means of the mask's coordinates): the GPU finds them through cells of
/// the window step and must equal the twin, which loops over the centres
/// as skimage does, in 2-D and 3-D, grayscale and multichannel, with SLICO,
/// spacing and without the connectivity step.
#[test]
fn gpu_equals_cpu_with_mask_seeds_anywhere() {
    let ring = |shape: &[usize]| -> Vec<bool> {
        let n: usize = shape.iter().product();
        (0..n)
            .map(|i| {
                let mut c = [0f64; 3];
                let mut rest = i;
                for a in (0..shape.len()).rev() {
                    c[a] = (rest % shape[a]) as f64 - shape[a] as f64 / 2.0;
                    rest /= shape[a];
                }
                let r2: f64 = c.iter().map(|v| v * v).sum();
                let s = shape[shape.len() - 1] as f64 / 2.0;
                r2 < s * s && r2 > s * s / 6.0
            })
            .collect()
    };
    // 2-D grayscale, SLICO, no connectivity step.
    let shape = [40, 52];
    let img = blobs(&shape, 31);
    let mask = ring(&shape);
    for (slic_zero, enforce) in [(false, true), (true, false)] {
        let p = gray(SlicParams {
            n_segments: 25,
            compactness: 0.2,
            slic_zero,
            enforce_connectivity: enforce,
            mask: Some(mask.clone()),
            ..SlicParams::default()
        });
        let s = both(Samples::F32(&img), &shape, &p);
        assert!(s.n_segments > 10, "{}", s.n_segments);
        for (l, m) in s.labels.iter().zip(&mask) {
            assert_eq!(*l == 0, !m);
        }
    }
    // 2-D RGB (Lab) and 4 channels, channel last.
    let r = noise(36 * 44 * 4, 37);
    for nc in [3usize, 4] {
        let img: Vec<f32> = (0..36 * 44 * nc)
            .map(|i| {
                let (y, x) = (i / nc / 44, i / nc % 44);
                (((x / 9 + y / 7 + i % nc) % 2) as f64 * 0.7 + 0.3 * r[i]) as f32
            })
            .collect();
        let p = SlicParams {
            n_segments: 18,
            mask: Some(ring(&[36, 44])),
            ..SlicParams::default()
        };
        let s = both(Samples::F32(&img), &[36, 44, nc], &p);
        assert!(s.n_segments > 8, "{}", s.n_segments);
    }
    // 3-D grayscale with spacing, and 3-D with two channels.
    let shape = [14, 18, 20];
    let img = blobs(&shape, 41);
    let mask = ring(&shape);
    let p = gray(SlicParams {
        n_segments: 30,
        compactness: 0.5,
        spacing: Some(vec![2.0, 1.0, 1.0]),
        mask: Some(mask.clone()),
        ..SlicParams::default()
    });
    let s = both(Samples::F32(&img), &shape, &p);
    assert!(s.n_segments > 10, "{}", s.n_segments);
    let two: Vec<f32> = img.iter().flat_map(|&v| [v, 1.0 - 0.5 * v]).collect();
    let p = SlicParams {
        n_segments: 30,
        compactness: 0.5,
        mask: Some(mask),
        ..SlicParams::default()
    };
    let s = both(Samples::F32(&two), &[14, 18, 20, 2], &p);
    assert!(s.n_segments > 10, "{}", s.n_segments);
    // More centres and cells than `bin_centres` has threads (runs of
    // cells per thread in its prefix sum).
    let shape = [100, 110];
    let img = blobs(&shape, 47);
    let p = gray(SlicParams {
        n_segments: 900,
        compactness: 0.3,
        mask: Some(ring(&shape)),
        ..SlicParams::default()
    });
    let s = both(Samples::F32(&img), &shape, &p);
    assert!(s.n_segments > 500, "{}", s.n_segments);
    // One seed: skimage's step is 0, every distance inf or NaN, and no
    // pixel is ever assigned.
    let shape = [40, 52];
    let img = blobs(&shape, 43);
    let p = gray(SlicParams {
        n_segments: 1,
        mask: Some(ring(&shape)),
        ..SlicParams::default()
    });
    let s = both(Samples::F32(&img), &shape, &p);
    assert!(s.labels.iter().all(|&l| l == 0));
}

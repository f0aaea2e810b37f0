//! Sigma clipping on the GPU against the CPU reference (astropy's loop in
//! f64 with a sorted median): the same number of kept values and rounds
//! exactly, mean/median/std within 1e-6 relative; NaN/inf/masks excluded;
//! bad parameters refused.

mod common;

use common::{gpu, noise, tiny_gpu};
use gpuscope_core::Samples;
use gpuscope_core::stats::clip::{CenFunc, ClipOptions, ClipStats, cpu, sigma_clipped_stats};

fn close(a: f64, b: f64, what: &str) {
    if a.is_nan() && b.is_nan() {
        return;
    }
    assert!(
        (a - b).abs() <= 1e-6 * b.abs().max(1e-30),
        "{what}: gpu {a} cpu {b}"
    );
}

fn both(data: &[f32], mask: Option<&[bool]>, o: &ClipOptions) -> ClipStats {
    let c = cpu::sigma_clipped_stats(Samples::F32(data), mask, o).unwrap();
    for g in [gpu(), tiny_gpu()] {
        let s = pollster::block_on(sigma_clipped_stats(g, data, mask, o)).unwrap();
        assert_eq!((s.n_kept, s.iterations), (c.n_kept, c.iterations), "{o:?}");
        close(s.mean, c.mean, "mean");
        close(s.median, c.median, "median");
        close(s.std, c.std, "std");
    }
    c
}

/// Gaussian noise (Box-Muller) around `level` plus bright outliers.
fn sky(n: usize, level: f32, sigma: f32, seed: u64) -> Vec<f32> {
    let u = noise(2 * n, seed);
    (0..n)
        .map(|i| {
            let g = (-2.0 * u[2 * i].max(1e-300).ln()).sqrt()
                * (std::f64::consts::TAU * u[2 * i + 1]).cos();
            let v = level + sigma * g as f32;
            if i % 97 == 0 { v + 40.0 * sigma } else { v }
        })
        .collect()
}

#[test]
fn astropy_defaults_and_until_convergence() {
    let d = sky(100_003, 10.0, 0.5, 1);
    let s = both(&d, None, &ClipOptions::default());
    assert!(s.n_kept < d.len() && s.iterations >= 1);
    let o = ClipOptions {
        maxiters: None,
        ..ClipOptions::default()
    };
    let s = both(&d, None, &o);
    assert!(s.iterations >= 2);
    // Even and odd counts, and a round limit of one.
    for n in [2, 3, 1000, 1001] {
        both(&d[..n], None, &ClipOptions::default());
    }
    // Even counts: the upper middle value in the same radix bucket as the
    // lower one (adjacent floats) or in another one.
    let s = both(&[1.0, 1.0 + f32::EPSILON], None, &ClipOptions::default());
    assert_eq!(s.median, 1.0 + f64::from(f32::EPSILON) / 2.0);
    assert_eq!(
        both(&[1.0, 2.0, -5.0, 7.5], None, &ClipOptions::default()).median,
        1.5
    );
    // A level a million times the noise: sums around a shift keep the std.
    let far = sky(50_000, 1.0e4, 0.01, 9);
    both(&far, None, &ClipOptions::default());
    let o = ClipOptions {
        maxiters: Some(1),
        ..ClipOptions::default()
    };
    assert_eq!(both(&d, None, &o).iterations, 1);
}

#[test]
fn float_float_sums_survive_shader_compilers() {
    // A mean 1e-4 of the spread: plain f32 sums (what a compiler leaves when
    // it rewrites (a + b) - a as b) miss it by far more than 1e-9 std.
    let d = sky(400_000, 1e-4, 1.0, 12);
    let c = cpu::sigma_clipped_stats(Samples::F32(&d), None, &ClipOptions::default()).unwrap();
    let g = pollster::block_on(sigma_clipped_stats(
        gpu(),
        &d,
        None,
        &ClipOptions::default(),
    ))
    .unwrap();
    assert_eq!(g.n_kept, c.n_kept);
    assert!(
        (g.mean - c.mean).abs() <= 1e-9 * c.std,
        "{} {}",
        g.mean,
        c.mean
    );
    assert!((g.std - c.std).abs() <= 1e-9 * c.std, "{} {}", g.std, c.std);
}

#[test]
fn mean_centre_asymmetric_sigmas_and_the_workshop_variant() {
    let d = sky(65_536, -3.0, 2.0, 2);
    both(
        &d,
        None,
        &ClipOptions {
            cenfunc: CenFunc::Mean,
            sigma: 2.5,
            maxiters: None,
            ..ClipOptions::default()
        },
    );
    both(
        &d,
        None,
        &ClipOptions {
            sigma_lower: Some(4.0),
            sigma_upper: Some(1.5),
            ..ClipOptions::default()
        },
    );
    let w = both(&d, None, &ClipOptions::workshop(3.0));
    // Strict comparisons never keep more than the inclusive ones.
    let inclusive = ClipOptions {
        maxiters: None,
        ..ClipOptions::default()
    };
    assert!(w.n_kept <= both(&d, None, &inclusive).n_kept);
}

#[test]
fn constant_and_integer_like_data_keep_ties() {
    // std 0: the bounds equal the centre and every value stays.
    let s = both(&[2.5; 1000], None, &ClipOptions::default());
    assert_eq!((s.n_kept, s.std), (1000, 0.0));
    // Many equal values around the median (ties at the radix-select bins).
    let d: Vec<f32> = noise(50_000, 5)
        .iter()
        .map(|v| (v * 7.0).floor() as f32)
        .collect();
    both(&d, None, &ClipOptions::workshop(1.0));
    both(&d, None, &ClipOptions::default());
    // Strict bounds at std 0 remove every value: NaN statistics, as the
    // workshop's loop gives, never a crash.
    let s = both(&[2.0, 3.0, 4.0], None, &ClipOptions::workshop(1.0));
    assert_eq!((s.n_kept, s.iterations), (0, 2));
    assert!(s.mean.is_nan() && s.median.is_nan() && s.std.is_nan());
}

#[test]
fn nan_inf_and_masked_values_are_excluded() {
    let mut d = sky(10_000, 1.0, 0.1, 3);
    d[5] = f32::NAN;
    d[6] = f32::INFINITY;
    d[7] = f32::NEG_INFINITY;
    d[8] = -0.0;
    let mask: Vec<bool> = (0..d.len()).map(|i| i % 10 == 3).collect();
    let a = both(&d, Some(&mask), &ClipOptions::default());
    let b = both(&d, None, &ClipOptions::default());
    assert!(a.n_kept < b.n_kept);
}

#[test]
fn bad_input_is_refused_with_a_reason() {
    let o = ClipOptions::default();
    for d in [
        vec![],
        vec![f32::NAN; 5],
        vec![f32::INFINITY, f32::NEG_INFINITY],
    ] {
        let e = cpu::sigma_clipped_stats(Samples::F32(&d), None, &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no finite"), "{e}");
        assert!(pollster::block_on(sigma_clipped_stats(gpu(), &d, None, &o)).is_err());
    }
    let all_masked = vec![true; 3];
    assert!(
        cpu::sigma_clipped_stats(Samples::F32(&[1.0, 2.0, 3.0]), Some(&all_masked), &o).is_err()
    );
    for sigma in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let bad = ClipOptions { sigma, ..o };
        let e = cpu::sigma_clipped_stats(Samples::F32(&[1.0]), None, &bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("sigma"), "{e}");
        assert!(pollster::block_on(sigma_clipped_stats(gpu(), &[1.0], None, &bad)).is_err());
    }
    let e = cpu::sigma_clipped_stats(Samples::F32(&[1.0, 2.0]), Some(&[false]), &o)
        .unwrap_err()
        .to_string();
    assert!(e.contains("mask"), "{e}");
    // One value: kept, std 0.
    let s = both(&[4.0], None, &o);
    assert_eq!((s.n_kept, s.median, s.std), (1, 4.0, 0.0));
}

/// The GPU's radix levels: key bits 31..21, 20..10, 9..0 of the ordered key.
fn key(x: f32) -> u32 {
    let b = if x == 0.0 { 0 } else { x.to_bits() };
    if b >> 31 == 1 { !b } else { b | 0x8000_0000 }
}

#[test]
fn even_counts_with_the_middle_values_in_different_radix_bins() {
    let o = ClipOptions::default();
    let ulp = |x: f32, k: u32| f32::from_bits(x.to_bits() + k);
    // Upper middle value in another level-0 bin, another level-1 bucket of
    // the same level-0 bin, another level-2 bin of the same bucket.
    for (k, want_level) in [(1u32 << 22, 0), (1 << 12, 1), (1 << 10, 1), (3, 2), (1, 2)] {
        let (a, b) = (1.0f32, ulp(1.0, k));
        // The first radix level at which a and b part.
        let level = if key(a) >> 21 != key(b) >> 21 {
            0
        } else if key(a) >> 10 != key(b) >> 10 {
            1
        } else {
            2
        };
        assert_eq!(level, want_level);
        let s = both(&[b, a], None, &o);
        assert_eq!(s.median, (f64::from(a) + f64::from(b)) / 2.0);
        // Many copies, with a cluster below and one above, in this order:
        // with small bindings they sit in different chunks, and the last
        // workgroups see a larger smallest value above a's bucket than
        // the middle ones (all must combine to b).
        let (below, above) = (f32::from_bits(a.to_bits() - k), ulp(b, k));
        let mut d = vec![below; 10_000];
        d.extend(vec![a; 15_000]);
        d.extend(vec![b; 15_000]);
        d.extend(vec![above; 10_000]);
        let s = both(&d, None, &o);
        assert_eq!(s.median, (f64::from(a) + f64::from(b)) / 2.0);
        assert_eq!(s.n_kept, d.len());
        let s = both(&d, None, &ClipOptions::workshop(3.0));
        assert!(s.n_kept > 0);
    }
}

#[test]
fn values_concentrated_in_one_radix_bin() {
    // Every value in one level-0 bin, spread over its level-1 buckets.
    let d = sky(60_001, 1000.0, 2.0e-3, 21);
    let top: std::collections::BTreeSet<u32> = d.iter().map(|&x| key(x) >> 21).collect();
    assert_eq!(top.len(), 1, "the data must sit in one level-0 bin");
    both(&d, None, &ClipOptions::default());
    both(&d, None, &ClipOptions::workshop(3.0));
    // Every value in one level-2 bucket (1024 consecutive keys), even and
    // odd counts.
    let base = 7.0f32.to_bits() & !0x3ff;
    for n in [40_000, 40_001] {
        let d: Vec<f32> = noise(n, 22)
            .iter()
            .map(|&u| f32::from_bits(base + (u * u * 1000.0) as u32))
            .collect();
        both(&d, None, &ClipOptions::default());
        both(&d, None, &ClipOptions::workshop(2.0));
    }
}

#[test]
fn slow_convergence_runs_past_the_first_batch_of_rounds() {
    // Heavy tails (Cauchy-like): every round removes a few more values.
    let d: Vec<f32> = noise(30_000, 23)
        .iter()
        .map(|&u| (std::f64::consts::PI * (u - 0.5)).tan() as f32)
        .collect();
    let s = both(&d, None, &ClipOptions::workshop(3.0));
    assert!(s.iterations > 12, "{s:?}");
    let s = both(
        &d,
        None,
        &ClipOptions {
            maxiters: Some(10),
            ..ClipOptions::default()
        },
    );
    assert_eq!(s.iterations, 10);
    // maxiters 0: the statistics of every finite value.
    let s = both(
        &d,
        None,
        &ClipOptions {
            maxiters: Some(0),
            ..ClipOptions::default()
        },
    );
    assert_eq!((s.iterations, s.n_kept), (0, d.len()));
}

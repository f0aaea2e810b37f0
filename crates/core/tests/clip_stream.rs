//! Streamed sigma-clipped statistics (slab by slab, exact radix median)
//! against the CPU reference on the whole array: equal bit for bit, for
//! every option, slab size, NaN/inf, ties and odd/even counts.

mod common;

use common::noise;
use gpuscope_core::Samples;
use gpuscope_core::stats::CenFunc;
use gpuscope_core::stats::clip::stream::{
    ClipSample, InMemory, clipped_stats, sigma_clipped_stats,
};
use gpuscope_core::stats::clip::{ClipOptions, ClipStats, cpu};
use gpuscope_core::stream::SliceSource;

fn streamed(d: &[f32], plane: usize, per: usize, o: &ClipOptions) -> ClipStats {
    let mut src = InMemory { data: d, plane };
    sigma_clipped_stats(&mut src, d.len() / plane, per, o, &mut |_| {}).unwrap()
}

fn same(a: &ClipStats, b: &ClipStats) -> bool {
    let eq = |x: f64, y: f64| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
    eq(a.mean, b.mean)
        && eq(a.median, b.median)
        && eq(a.std, b.std)
        && a.n_kept == b.n_kept
        && a.iterations == b.iterations
}

/// Noise with sources, NaN, inf, ties.
fn image(n: usize, seed: u64) -> Vec<f32> {
    noise(n, seed)
        .iter()
        .enumerate()
        .map(|(i, &u)| match i % 97 {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => 50.0 + u as f32,
            3 => -0.0,
            4 => 0.0,
            _ => ((u - 0.5) * 2.0) as f32 * if i % 5 == 0 { 0.3 } else { 1.0 },
        })
        .collect()
}

#[test]
fn streamed_clip_equals_the_reference_bit_for_bit() {
    let plane = 64;
    let options = [
        ClipOptions::default(),
        ClipOptions {
            maxiters: None,
            ..ClipOptions::default()
        },
        ClipOptions {
            maxiters: None,
            strict: true,
            ..ClipOptions::default()
        },
        ClipOptions {
            cenfunc: CenFunc::Mean,
            sigma_lower: Some(1.5),
            sigma_upper: Some(2.5),
            ..ClipOptions::default()
        },
        ClipOptions {
            maxiters: Some(1),
            sigma: 1.0,
            ..ClipOptions::default()
        },
    ];
    for (nz, seed) in [(1, 1), (7, 2), (30, 3)] {
        let d = image(nz * plane, seed);
        for o in &options {
            let want = cpu::sigma_clipped_stats(Samples::F32(&d), None, o).unwrap();
            for per in [1, 4, nz] {
                let got = streamed(&d, plane, per, o);
                assert!(
                    same(&got, &want),
                    "nz={nz} per={per} {o:?}: {got:?} vs {want:?}"
                );
            }
        }
    }
    // Odd and even counts, duplicates straddling the middle.
    for n in [1usize, 2, 3, 4, 10, 11] {
        let d: Vec<f32> = (0..n).map(|i| (i / 2) as f32).collect();
        let want =
            cpu::sigma_clipped_stats(Samples::F32(&d), None, &ClipOptions::default()).unwrap();
        assert!(
            same(&streamed(&d, 1, 2, &ClipOptions::default()), &want),
            "n={n}"
        );
    }
}

#[test]
fn constant_data_and_nothing_finite() {
    // Strict comparisons with std 0 remove everything: NaN statistics.
    let d = vec![2.5f32; 40];
    let strict = ClipOptions {
        strict: true,
        maxiters: None,
        ..ClipOptions::default()
    };
    for o in [ClipOptions::default(), strict] {
        let want = cpu::sigma_clipped_stats(Samples::F32(&d), None, &o).unwrap();
        assert!(same(&streamed(&d, 8, 2, &o), &want), "{o:?}");
    }
    let bad = vec![f32::NAN; 16];
    let mut src = InMemory {
        data: &bad,
        plane: 4,
    };
    let e = sigma_clipped_stats(&mut src, 4, 1, &ClipOptions::default(), &mut |_| {});
    assert!(e.unwrap_err().to_string().contains("no finite"));
}

fn streamed_of<T: ClipSample>(
    d: &[T],
    mask: Option<&[bool]>,
    per: usize,
    o: &ClipOptions,
) -> ClipStats {
    let plane = 8;
    let mut src = InMemory { data: d, plane };
    let mut m = mask.map(|m| InMemory { data: m, plane });
    let mask_src = m.as_mut().map(|m| m as &mut dyn SliceSource<bool>);
    clipped_stats(
        &mut src,
        mask_src,
        d.len().div_ceil(plane),
        per,
        o,
        &mut |_| {},
    )
    .unwrap()
}

/// Every dtype, with and without a mask, against the reference.
#[test]
fn streamed_clip_of_every_dtype_equals_the_reference() {
    let n = 8 * 53;
    let u = noise(n, 7);
    // Skewed values with ties and outliers in each dtype's range.
    let base: Vec<f64> = u
        .iter()
        .enumerate()
        .map(|(i, &x)| if i % 41 == 0 { 1.0 } else { x * x })
        .collect();
    let mask: Vec<bool> = (0..n).map(|i| i % 13 == 0).collect();
    let options = [
        ClipOptions::default(),
        ClipOptions {
            maxiters: None,
            strict: true,
            ..ClipOptions::default()
        },
        ClipOptions {
            cenfunc: CenFunc::Mean,
            sigma: 1.5,
            ..ClipOptions::default()
        },
    ];
    macro_rules! check {
        ($t:ty, $variant:ident, $scale:expr, $offset:expr) => {{
            let d: Vec<$t> = base.iter().map(|&x| (x * $scale + $offset) as $t).collect();
            for o in &options {
                for m in [None, Some(&mask[..])] {
                    let want = cpu::sigma_clipped_stats(Samples::$variant(&d), m, o).unwrap();
                    for per in [1, 5, 53] {
                        let got = streamed_of(&d, m, per, o);
                        assert!(
                            same(&got, &want),
                            "{} per={per} mask={} {o:?}: {got:?} vs {want:?}",
                            stringify!($t),
                            m.is_some()
                        );
                    }
                }
            }
        }};
    }
    check!(u8, U8, 250.0, 0.0);
    check!(i8, I8, 250.0, -125.0);
    check!(u16, U16, 60000.0, 0.0);
    check!(i16, I16, 60000.0, -30000.0);
    check!(u32, U32, 4.0e9, 0.0);
    check!(i32, I32, 4.0e9, -2.0e9);
    check!(f32, F32, 3.0, -1.0);
    check!(u64, U64, 1.0e19, 12345.0);
    check!(i64, I64, 1.0e18, -5.0e17);
    check!(f64, F64, 1.0e-3, -7.0e-4);
    // Values close together: 64-bit keys sharing their upper 48 bits.
    let close: Vec<f64> = base.iter().map(|&x| 1.0 + x * 1e-12).collect();
    for o in &options {
        let want = cpu::sigma_clipped_stats(Samples::F64(&close), None, o).unwrap();
        assert!(same(&streamed_of(&close, None, 3, o), &want), "{o:?}");
    }
}

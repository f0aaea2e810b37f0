//! Flat/dark normalisation: the GPU pass against the CPU twin (within
//! WGSL's float32 division accuracy), the averaged fields against sums
//! written independently here, chunked projections, and bad input.

mod common;

use gpuscope_core::tomo::{self, Averaging, DENOMINATOR_FLOOR, Fields, NormalizeParams};

/// A small deterministic generator (no dependency, same on every run).
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * scale
        })
        .collect()
}

fn ulps(a: f32, b: f32) -> u32 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() {
            0
        } else {
            u32::MAX
        };
    }
    let key = |v: f32| {
        let bits = v.to_bits() as i64;
        if bits < 0x8000_0000 {
            bits
        } else {
            0x8000_0000 - bits
        }
    };
    (key(a) - key(b)).unsigned_abs().min(u64::from(u32::MAX)) as u32
}

/// WGSL allows float32 division within 2.5 ULP of the exact quotient; the
/// twin's is correctly rounded (0.5 ULP): at most 3 apart.
const GPU_ULPS: u32 = 3;

fn assert_close(gpu: &[f32], cpu: &[f32]) {
    assert_eq!(gpu.len(), cpu.len());
    for (i, (&g, &c)) in gpu.iter().zip(cpu).enumerate() {
        assert!(ulps(g, c) <= GPU_ULPS, "element {i}: GPU {g}, CPU {c}");
    }
}

fn scene(ny: usize, nx: usize, nf: usize, nd: usize) -> (Vec<f32>, Vec<f32>) {
    let n = ny * nx;
    let mut flats = values(nf * n, 1, 1000.0);
    flats.iter_mut().for_each(|v| *v += 500.0);
    let mut darks = values(nd * n, 2, 100.0);
    // Some pixels where the dark is brighter than the flat (denominator
    // floored), one NaN flat, one infinite dark.
    for i in (0..n).step_by(7) {
        darks[i] = 5000.0;
    }
    let last = flats.len() - 1;
    flats[3.min(last)] = f32::NAN;
    darks[n - 1] = f32::INFINITY;
    (flats, darks)
}

#[test]
fn mean_fields_are_numpys_float32_mean() {
    let (ny, nx, nf) = (5, 6, 4);
    let (flats, darks) = scene(ny, nx, nf, 3);
    let f = Fields::new(&flats, &darks, [ny, nx], Averaging::Mean).unwrap();
    let n = ny * nx;
    for i in 0..n {
        let mut flat = 0f32;
        for k in 0..nf {
            flat += flats[k * n + i];
        }
        flat /= nf as f32;
        let dark = (darks[i] + darks[n + i] + darks[2 * n + i]) / 3.0;
        let floor = |v: f32| {
            if v < DENOMINATOR_FLOOR {
                DENOMINATOR_FLOOR
            } else {
                v
            }
        };
        assert_eq!(f.dark[i].to_bits(), dark.to_bits(), "dark {i}");
        assert_eq!(
            f.denominator[i].to_bits(),
            floor(flat - dark).to_bits(),
            "denominator {i}"
        );
    }
}

#[test]
fn median_fields_take_the_middle_or_the_mean_of_the_two() {
    let plane = [1, 3];
    // Three frames: odd count; the NaN column gives NaN.
    let flats = [1.0, 9.0, f32::NAN, 5.0, 2.0, 1.0, 3.0, 7.0, 2.0];
    let darks = [0.0, 1.0, 0.0, 2.0, 1.0, 0.0]; // two frames: mean of the two
    let f = Fields::new(&flats, &darks, plane, Averaging::Median).unwrap();
    assert_eq!(f.dark, vec![1.0, 1.0, 0.0]);
    assert_eq!(f.denominator[0], 3.0 - 1.0);
    assert_eq!(f.denominator[1], 7.0 - 1.0);
    assert!(f.denominator[2].is_nan());
}

#[test]
fn gpu_equals_the_twin_on_stacks_with_and_without_cutoff() {
    let gpu = common::gpu();
    for &(nz, ny, nx) in &[(1, 1, 1), (3, 17, 23), (2, 64, 65)] {
        let (flats, darks) = scene(ny, nx, 3, 2);
        let mut data = values(nz * ny * nx, 9, 4000.0);
        data[0] = f32::NAN;
        if data.len() > 2 {
            data[2] = f32::NEG_INFINITY;
        }
        for averaging in [Averaging::Mean, Averaging::Median] {
            let fields = Fields::new(&flats, &darks, [ny, nx], averaging).unwrap();
            for cutoff in [None, Some(1.5)] {
                let params = NormalizeParams { cutoff, averaging };
                let shape = [nz, ny, nx];
                let want = tomo::cpu::normalize(&data, &shape, &fields, &params).unwrap();
                let got =
                    pollster::block_on(tomo::gpu::normalize(gpu, &data, &shape, &fields, &params))
                        .unwrap();
                assert_close(&got, &want);
                if let Some(c) = cutoff {
                    assert!(got.iter().all(|&v| v.is_nan() || v <= c as f32));
                }
            }
        }
    }
}

#[test]
fn projections_split_into_chunks_meet_their_own_pixels_fields() {
    // 64 KiB bindings: a 3 x 100 x 97 stack is cut inside projections, so
    // each chunk must find its pixels' fields by their place in the plane.
    let gpu = common::tiny_gpu();
    let (nz, ny, nx) = (3, 100, 97);
    let (flats, darks) = scene(ny, nx, 2, 2);
    let fields = Fields::new(&flats, &darks, [ny, nx], Averaging::Mean).unwrap();
    let data = values(nz * ny * nx, 4, 3000.0);
    let params = NormalizeParams::default();
    let shape = [nz, ny, nx];
    let want = tomo::cpu::normalize(&data, &shape, &fields, &params).unwrap();
    let got =
        pollster::block_on(tomo::gpu::normalize(gpu, &data, &shape, &fields, &params)).unwrap();
    assert_close(&got, &want);
}

#[test]
fn the_twin_is_tomopys_formula() {
    // (x - dark) / max(flat - dark, 1e-6), cutoff as min: written out.
    let fields = Fields::new(&[10.0, 2.0], &[2.0, 3.0], [1, 2], Averaging::Mean).unwrap();
    let out =
        tomo::cpu::normalize(&[6.0, 4.0], &[1, 2], &fields, &NormalizeParams::default()).unwrap();
    assert_eq!(out, vec![0.5, (4.0f32 - 3.0) / 1e-6]);
    let capped = NormalizeParams {
        cutoff: Some(2.0),
        ..Default::default()
    };
    let out = tomo::cpu::normalize(&[6.0, 4.0], &[1, 2], &fields, &capped).unwrap();
    assert_eq!(out, vec![0.5, 2.0]);
}

#[test]
fn bad_input_gets_a_clear_error() {
    let plane = [2, 2];
    let err = Fields::new(&[1.0; 3], &[0.0; 4], plane, Averaging::Mean).unwrap_err();
    assert!(err.to_string().contains("flat"), "{err}");
    let err = Fields::new(&[1.0; 4], &[], plane, Averaging::Mean).unwrap_err();
    assert!(err.to_string().contains("dark"), "{err}");
    let fields = Fields::new(&[1.0; 4], &[0.0; 4], plane, Averaging::Mean).unwrap();
    let params = NormalizeParams::default();
    let err = tomo::cpu::normalize(&[0.0; 6], &[2, 3], &fields, &params).unwrap_err();
    assert!(err.to_string().contains("same size"), "{err}");
    let err = tomo::cpu::normalize(&[0.0; 4], &[4], &fields, &params).unwrap_err();
    assert!(err.to_string().contains("3-D"), "{err}");
    let nan = NormalizeParams {
        cutoff: Some(f64::NAN),
        ..Default::default()
    };
    let err = pollster::block_on(tomo::gpu::normalize(
        common::gpu(),
        &[0.0; 4],
        &[2, 2],
        &fields,
        &nan,
    ))
    .unwrap_err();
    assert!(err.to_string().contains("cutoff"), "{err}");
    let err = pollster::block_on(tomo::gpu::normalize(
        common::gpu(),
        &[0.0; 3],
        &[2, 2],
        &fields,
        &params,
    ))
    .unwrap_err();
    assert!(err.to_string().contains("values for shape"), "{err}");
}

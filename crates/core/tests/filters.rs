//! The filters' GPU path against their CPU reference on lavapipe, for every
//! mode, 1-D to 3-D, separable and full kernels, float and integer outputs,
//! and through the chunk planner.

mod common;

use common::{gpu, noise, tiny_gpu};
use gpuscope_core::Gpu;
use gpuscope_core::filters::{self, Boundary, Filter, Mode, Output};

const MODES: [Mode; 5] = [
    Mode::Reflect,
    Mode::Mirror,
    Mode::Nearest,
    Mode::Wrap,
    Mode::Constant,
];

/// GPU values are f32 sums of f32 products; the reference sums in f64.
/// Tolerance: 1e-5 of the largest magnitude in the reference (f32 has 24
/// bits; kernels here have at most a few hundred taps).
fn assert_close(gpu: &[f32], cpu: &[f64], what: &str) {
    assert_eq!(gpu.len(), cpu.len(), "{what}: length");
    let scale = cpu.iter().fold(1e-30f64, |m, v| m.max(v.abs()));
    for (i, (&g, &c)) in gpu.iter().zip(cpu).enumerate() {
        assert!(
            (f64::from(g) - c).abs() <= 1e-5 * scale,
            "{what}: element {i}: gpu {g} cpu {c}"
        );
    }
}

fn run_both(
    device: &Gpu,
    filter: &Filter,
    shape: &[usize],
    boundary: Boundary,
    seed: u64,
) -> (Vec<f32>, Vec<f64>) {
    let n = shape.iter().product();
    let input: Vec<f64> = noise(n, seed).iter().map(|v| v * 10.0 - 3.0).collect();
    let input32: Vec<f32> = input.iter().map(|&v| v as f32).collect();
    let input_rounded: Vec<f64> = input32.iter().map(|&v| f64::from(v)).collect();
    let g = pollster::block_on(filters::apply(
        device,
        filter,
        &input32,
        shape,
        boundary,
        Output::Float,
    ))
    .unwrap();
    let c = filters::cpu::apply(filter, &input_rounded, shape, boundary, Output::Float).unwrap();
    (g, c)
}

#[test]
fn gaussian_matches_reference_in_every_mode_and_dimension() {
    for mode in MODES {
        let boundary = Boundary { mode, cval: 1.5 };
        for (shape, sigma) in [
            (vec![37], vec![2.0]),
            (vec![23, 31], vec![1.0, 2.5]),
            (vec![9, 11, 13], vec![1.0, 0.0, 1.7]),
            (vec![3, 2], vec![4.0]), // kernel much wider than the image
        ] {
            let f = Filter::gaussian(shape.len(), &sigma, 4.0).unwrap();
            let (g, c) = run_both(gpu(), &f, &shape, boundary, 1);
            assert_close(&g, &c, &format!("gaussian {mode:?} {shape:?}"));
        }
    }
}

#[test]
fn convolve_and_correlate_match_reference_for_odd_and_even_kernels() {
    let k: Vec<f64> = noise(5 * 4, 7).iter().map(|v| v - 0.4).collect();
    for mode in MODES {
        let boundary = Boundary { mode, cval: -2.0 };
        let conv = Filter::convolve(2, &k, &[5, 4]).unwrap();
        let corr = Filter::correlate(2, &k, &[4, 5]).unwrap();
        for f in [&conv, &corr] {
            let (g, c) = run_both(gpu(), f, &[19, 26], boundary, 2);
            assert_close(&g, &c, &format!("2-D kernel {mode:?}"));
        }
        let k3: Vec<f64> = noise(27, 9);
        let f3 = Filter::convolve(3, &k3, &[3, 3, 3]).unwrap();
        let (g, c) = run_both(gpu(), &f3, &[6, 7, 8], boundary, 3);
        assert_close(&g, &c, &format!("3-D kernel {mode:?}"));
    }
}

#[test]
fn chunked_runs_equal_reference_on_every_mode() {
    // 64 KiB bindings: 16384 floats per box, so these split on z and y.
    for mode in MODES {
        let boundary = Boundary { mode, cval: 0.25 };
        let gauss = Filter::gaussian(3, &[1.0, 2.0, 1.5], 4.0).unwrap();
        let (g, c) = run_both(tiny_gpu(), &gauss, &[12, 70, 60], boundary, 4);
        assert_close(&g, &c, &format!("chunked gaussian {mode:?}"));
        let k: Vec<f64> = noise(7 * 7, 5);
        let conv = Filter::convolve(2, &k, &[7, 7]).unwrap();
        let (g, c) = run_both(tiny_gpu(), &conv, &[300, 200], boundary, 5);
        assert_close(&g, &c, &format!("chunked convolve {mode:?}"));
        // A 1-D signal longer than a binding splits along its only axis.
        let g1 = Filter::gaussian(1, &[3.0], 4.0).unwrap();
        let (g, c) = run_both(tiny_gpu(), &g1, &[50_000], boundary, 6);
        assert_close(&g, &c, &format!("chunked 1-D {mode:?}"));
    }
}

#[test]
fn integer_outputs_truncate_and_wrap_between_passes_like_scipy() {
    let shape = [40, 33];
    let input: Vec<f64> = noise(40 * 33, 11)
        .iter()
        .map(|v| (v * 255.0).floor())
        .collect();
    let input32: Vec<f32> = input.iter().map(|&v| v as f32).collect();
    let out = Output::Integer {
        bits: 8,
        signed: false,
    };
    let boundary = Boundary::default();
    let f = Filter::gaussian(2, &[1.5], 4.0).unwrap();
    let g = pollster::block_on(filters::apply(gpu(), &f, &input32, &shape, boundary, out)).unwrap();
    let c = filters::cpu::apply(&f, &input, &shape, boundary, out).unwrap();
    // f32 and f64 sums can straddle an integer: allow 1 count on <0.5% of pixels.
    let off: Vec<_> = g
        .iter()
        .zip(&c)
        .filter(|(g, c)| f64::from(**g) != **c)
        .collect();
    assert!(
        off.iter().all(|(g, c)| (f64::from(**g) - **c).abs() <= 1.0),
        "{off:?}"
    );
    assert!(
        off.len() * 200 < g.len(),
        "{} of {} differ",
        off.len(),
        g.len()
    );
    // A Laplacian goes negative: uint8 wraps around as scipy's C cast does.
    let lap = Filter::convolve(2, &[0., 1., 0., 1., -4., 1., 0., 1., 0.], &[3, 3]).unwrap();
    let g =
        pollster::block_on(filters::apply(gpu(), &lap, &input32, &shape, boundary, out)).unwrap();
    let c = filters::cpu::apply(&lap, &input, &shape, boundary, out).unwrap();
    assert!(c.iter().all(|v| (0.0..256.0).contains(v)));
    assert_eq!(g.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), c);
}

#[test]
fn input_larger_than_one_lavapipe_binding_is_chunked_correctly() {
    // 9000 x 4000 f32 = 144 MB > lavapipe's 128 MiB binding limit (capped
    // to that on devices that offer more, so the test means the same anywhere).
    let device = pollster::block_on(Gpu::new(gpuscope_core::GpuOptions {
        max_binding_size: Some(128 << 20),
        ..Default::default()
    }))
    .unwrap();
    let shape = [9000, 4000];
    let n: usize = 9000 * 4000;
    assert!(4 * n as u64 > device.max_binding_size());
    let input: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32).collect();
    let f = Filter::gaussian(2, &[1.0], 4.0).unwrap();
    let boundary = Boundary {
        mode: Mode::Mirror,
        cval: 0.0,
    };
    let g = pollster::block_on(filters::apply(
        &device,
        &f,
        &input,
        &shape,
        boundary,
        Output::Float,
    ))
    .unwrap();
    // Check rows around every possible chunk border against the reference on
    // a band of the image (the reference on the whole would take minutes).
    let rows = 9000;
    let chunk_rows = (device.max_binding_size() / 4 / 4000) as usize;
    for border in (chunk_rows / 2..rows)
        .step_by(chunk_rows / 2)
        .chain([0, rows - 8])
    {
        let lo = border.saturating_sub(8);
        let hi = (border + 8).min(rows);
        // The band with 4 rows of context (the kernel's radius) each side,
        // mirrored at the image edges exactly as the full reference would.
        let ctx_lo = lo.saturating_sub(4);
        let ctx_hi = (hi + 4).min(rows);
        let band: Vec<f64> = input[ctx_lo * 4000..ctx_hi * 4000]
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        let c = filters::cpu::apply(&f, &band, &[ctx_hi - ctx_lo, 4000], boundary, Output::Float)
            .unwrap();
        // Only rows whose context is complete (or is the true image edge) are comparable.
        for r in lo..hi {
            let complete = (r >= ctx_lo + 4 || ctx_lo == 0) && (r + 4 < ctx_hi || ctx_hi == rows);
            if !complete {
                continue;
            }
            let got = &g[r * 4000..(r + 1) * 4000];
            let want = &c[(r - ctx_lo) * 4000..(r - ctx_lo + 1) * 4000];
            assert_close(got, want, &format!("row {r}"));
        }
    }
}

#[test]
fn repeated_calls_of_many_sizes_leave_no_device_memory_behind() {
    // A device of its own: the shared one is busy with the other tests.
    let device = pollster::block_on(Gpu::new(gpuscope_core::GpuOptions::default())).unwrap();
    let f = Filter::gaussian(2, &[1.0], 4.0).unwrap();
    let mut peak = 0;
    for n in [10, 300, 17, 129, 64, 1000, 3, 1000, 1] {
        let input = vec![1.0f32; n * n];
        let out = pollster::block_on(filters::apply(
            &device,
            &f,
            &input,
            &[n, n],
            Boundary::default(),
            Output::Float,
        ))
        .unwrap();
        assert!(out.iter().all(|&v| (v - 1.0).abs() < 1e-5));
        peak = peak.max(device.live_bytes());
    }
    // The pool keeps buffers for reuse, bounded by a quarter of the budget.
    assert!(
        peak <= device.memory_budget() / 4 + (16 << 20),
        "peak {peak}"
    );
    device.trim();
    assert_eq!(device.live_bytes(), 0);
}

#[test]
fn separable_kernels_match_reference_in_every_mode_whole_and_chunked() {
    // Outer products run as one 1-D pass per axis on the GPU (not in constant
    // mode with a non-zero cval); the answers must not change.
    let a = [0.2, 1.0, -0.5, 0.3, 2.0];
    let b = [1.5, -0.25, 0.75];
    let k2: Vec<f64> = a
        .iter()
        .flat_map(|&u| b.iter().map(move |&v| u * v))
        .collect();
    let k3: Vec<f64> = b
        .iter()
        .flat_map(|&u| k2.iter().map(move |&v| u * v))
        .collect();
    for mode in MODES {
        for cval in [0.0, 1.25] {
            let boundary = Boundary { mode, cval };
            let conv = Filter::convolve(2, &k2, &[5, 3]).unwrap();
            let (g, c) = run_both(gpu(), &conv, &[21, 17], boundary, 11);
            assert_close(&g, &c, &format!("separable 2-D {mode:?} cval {cval}"));
            let (g, c) = run_both(tiny_gpu(), &conv, &[300, 200], boundary, 12);
            assert_close(&g, &c, &format!("separable chunked {mode:?} cval {cval}"));
            let corr = Filter::correlate(3, &k3, &[3, 5, 3]).unwrap();
            let (g, c) = run_both(gpu(), &corr, &[7, 9, 8], boundary, 13);
            assert_close(&g, &c, &format!("separable 3-D {mode:?} cval {cval}"));
        }
    }
    // A kernel above the unrolling limit takes the loop over the weights.
    let big: Vec<f64> = noise(25 * 25, 14).iter().map(|v| v - 0.5).collect();
    let f = Filter::correlate(2, &big, &[25, 25]).unwrap();
    let (g, c) = run_both(gpu(), &f, &[30, 40], Boundary::default(), 15);
    assert_close(&g, &c, "25x25 kernel");
}

#[test]
fn integer_outputs_of_large_values_equal_the_reference_exactly() {
    // uint16 near the top of the range and int16 of both signs: an f32
    // window sum there lands on the wrong side of an integer for several
    // percent of the pixels; the two-word sums truncate as scipy's f64 does.
    let (h, w) = (48, 61);
    let r = noise(h * w, 21);
    let u16_in: Vec<f64> = r.iter().map(|v| (40000.0 + v * 25535.0).floor()).collect();
    let i16_in: Vec<f64> = r.iter().map(|v| (v * 65535.0 - 32768.0).floor()).collect();
    let k: Vec<f64> = noise(25, 4).iter().map(|v| v - 0.3).collect();
    let sum: f64 = k.iter().sum();
    let k: Vec<f64> = k.iter().map(|v| v / sum).collect();
    let filters = [
        Filter::gaussian(2, &[2.0], 4.0).unwrap(),
        Filter::gaussian(2, &[0.7, 1.3], 4.0).unwrap(),
        Filter::convolve(2, &k, &[5, 5]).unwrap(),
    ];
    for (input, out) in [
        (
            &u16_in,
            Output::Integer {
                bits: 16,
                signed: false,
            },
        ),
        (
            &i16_in,
            Output::Integer {
                bits: 16,
                signed: true,
            },
        ),
    ] {
        let input32: Vec<f32> = input.iter().map(|&v| v as f32).collect();
        for (fi, f) in filters.iter().enumerate() {
            for mode in MODES {
                let boundary = Boundary { mode, cval: 1000.0 };
                let c = filters::cpu::apply(f, input, &[h, w], boundary, out).unwrap();
                for device in [gpu(), tiny_gpu()] {
                    let g = pollster::block_on(filters::apply(
                        device,
                        f,
                        &input32,
                        &[h, w],
                        boundary,
                        out,
                    ))
                    .unwrap();
                    let off = g
                        .iter()
                        .zip(&c)
                        .filter(|(g, c)| f64::from(**g) != **c)
                        .count();
                    assert_eq!(off, 0, "filter {fi} {mode:?} {out:?}: {off} pixels differ");
                }
            }
        }
    }
    // A 3-D Gaussian: three truncating passes.
    let v: Vec<f64> = noise(9 * 20 * 23, 5)
        .iter()
        .map(|v| (30000.0 + v * 35000.0).floor())
        .collect();
    let v32: Vec<f32> = v.iter().map(|&x| x as f32).collect();
    let out = Output::Integer {
        bits: 16,
        signed: false,
    };
    let f = Filter::gaussian(3, &[1.5], 4.0).unwrap();
    let b = Boundary::default();
    let g = pollster::block_on(filters::apply(gpu(), &f, &v32, &[9, 20, 23], b, out)).unwrap();
    let c = filters::cpu::apply(&f, &v, &[9, 20, 23], b, out).unwrap();
    assert_eq!(g.iter().map(|&x| f64::from(x)).collect::<Vec<_>>(), c);
}

#[test]
fn quad_kernels_equal_reference_at_every_edge() {
    // Kernels of up to nine taps on widths that are whole vec4 words run
    // four outputs per invocation (correlate_quads.wgsl); images narrower
    // than a window, and every mode's edges, take its lane-by-lane path.
    let k3: Vec<f64> = noise(9, 31).iter().map(|v| v - 0.4).collect();
    let k8: Vec<f64> = noise(8, 33).iter().map(|v| v - 0.4).collect();
    let filters = [
        (
            "gaussian sigma 1",
            Filter::gaussian(2, &[1.0], 4.0).unwrap(),
        ),
        (
            "gaussian sigma 0.6, 1.3",
            Filter::gaussian(2, &[0.6, 1.3], 4.0).unwrap(),
        ),
        ("3x3", Filter::correlate(2, &k3, &[3, 3]).unwrap()),
        ("2x4, even", Filter::convolve(2, &k8, &[2, 4]).unwrap()),
        ("1x1", Filter::correlate(2, &[0.75], &[1, 1]).unwrap()),
    ];
    for mode in MODES {
        let boundary = Boundary { mode, cval: 1.5 };
        for (what, f) in &filters {
            for shape in [[1, 4], [5, 4], [9, 8], [13, 12], [37, 64], [6, 20]] {
                let (g, c) = run_both(gpu(), f, &shape, boundary, 30);
                assert_close(&g, &c, &format!("{what} {mode:?} {shape:?}"));
            }
        }
        // Taps along z and x of a 3-D array, whole and split into chunks.
        let k9: Vec<f64> = noise(9, 32).iter().map(|v| v - 0.4).collect();
        let f3 = Filter::correlate(3, &k9, &[3, 1, 3]).unwrap();
        let g3 = Filter::gaussian(3, &[1.0, 0.0, 0.8], 4.0).unwrap();
        for (what, f) in [("3x1x3", &f3), ("gaussian 3-D", &g3)] {
            for shape in [[4, 6, 8], [3, 9, 24]] {
                let (g, c) = run_both(gpu(), f, &shape, boundary, 34);
                assert_close(&g, &c, &format!("{what} {mode:?} {shape:?}"));
            }
            let (g, c) = run_both(tiny_gpu(), f, &[12, 70, 60], boundary, 35);
            assert_close(&g, &c, &format!("{what} {mode:?} chunked"));
        }
    }
}

#[test]
fn chunks_of_rows_equal_the_reference_into_every_kind_of_sink() {
    // A 2-D image split along y (64 KiB bindings): interior chunks are read
    // in place and their rows written into an array in memory in place; a
    // sink that only takes whole slices (a Vec) gets them assembled; a
    // stack whose slices are split the same way passes slice by slice.
    use gpuscope_core::stream::{MemorySink, MemorySource};
    let f = Filter::gaussian(2, &[1.5], 4.0).unwrap();
    for mode in MODES {
        let boundary = Boundary { mode, cval: 0.5 };
        let (g, c) = run_both(tiny_gpu(), &f, &[300, 200], boundary, 40);
        assert_close(&g, &c, &format!("in place {mode:?}"));
        let input: Vec<f32> = noise(300 * 200, 40)
            .iter()
            .map(|v| (v * 10.0 - 3.0) as f32)
            .collect();
        let mut whole_slices: Vec<f32> = Vec::new();
        let mut source = MemorySource::new(&input, [1, 300, 200]);
        pollster::block_on(filters::apply_stream(
            tiny_gpu(),
            &f,
            &[300, 200],
            boundary,
            Output::Float,
            &mut source,
            &mut whole_slices,
            &mut |_, _| {},
        ))
        .unwrap();
        assert_eq!(
            whole_slices, g,
            "{mode:?}: assembled slices against rows in place"
        );
        let g3 = Filter::gaussian(3, &[0.0, 1.5, 1.5], 4.0).unwrap();
        let stack: Vec<f32> = [input.clone(), input.iter().map(|v| -v).collect()].concat();
        let mut out = vec![0f32; stack.len()];
        let mut source = MemorySource::new(&stack, [2, 300, 200]);
        let mut sink = MemorySink::new(&mut out);
        pollster::block_on(filters::apply_stream(
            tiny_gpu(),
            &g3,
            &[2, 300, 200],
            boundary,
            Output::Float,
            &mut source,
            &mut sink,
            &mut |_, _| {},
        ))
        .unwrap();
        assert_eq!(&out[..g.len()], &g[..], "{mode:?}: slice 0 of the stack");
        let negated: Vec<f32> = g.iter().map(|v| -v).collect();
        if mode != Mode::Constant {
            assert_eq!(
                &out[g.len()..],
                &negated[..],
                "{mode:?}: slice 1 of the stack"
            );
        }
    }
}

#[test]
fn images_cut_into_three_chunks_for_overlap_equal_the_whole_image() {
    // From 12 MiB, an image from memory into memory runs in about three
    // chunks (one's upload, kernel and download overlapping the others');
    // into a sink that takes whole slices only it runs whole. Same values.
    use gpuscope_core::Samples;
    use gpuscope_core::filters::median::{self, Footprint};
    use gpuscope_core::stream::MemorySource;
    let shape = [1700, 2000];
    let n = 1700 * 2000;
    assert!(4 * n >= 12 << 20);
    let input: Vec<f32> = noise(n, 41)
        .iter()
        .map(|v| (v * 10.0 - 3.0) as f32)
        .collect();
    let f = Filter::gaussian(2, &[2.0], 4.0).unwrap();
    let footprint = Footprint::size(2, &[3]).unwrap();
    for mode in [Mode::Reflect, Mode::Constant, Mode::Wrap] {
        let boundary = Boundary { mode, cval: 0.5 };
        let cut = pollster::block_on(filters::apply(
            gpu(),
            &f,
            &input,
            &shape,
            boundary,
            Output::Float,
        ))
        .unwrap();
        let mut whole: Vec<f32> = Vec::new();
        let mut source = MemorySource::new(&input, [1, 1700, 2000]);
        pollster::block_on(filters::apply_stream(
            gpu(),
            &f,
            &shape,
            boundary,
            Output::Float,
            &mut source,
            &mut whole,
            &mut |_, _| {},
        ))
        .unwrap();
        assert!(cut == whole, "gaussian {mode:?}: cut against whole");

        let mut cut = vec![std::mem::MaybeUninit::<f32>::uninit(); n];
        pollster::block_on(median::median_filter_f32_into(
            gpu(),
            &input,
            &shape,
            &footprint,
            boundary,
            &mut cut,
        ))
        .unwrap();
        // SAFETY: Ok means every value was written.
        let cut: Vec<f32> = cut
            .into_iter()
            .map(|v| unsafe { v.assume_init() })
            .collect();
        let bits: Vec<u32> = input.iter().map(|v| v.to_bits()).collect();
        let mut source = MemorySource::new(&bits, [1, 1700, 2000]);
        let mut whole: Vec<u32> = Vec::new();
        pollster::block_on(median::median_filter_stream(
            gpu(),
            Samples::F32(&input),
            &shape,
            &footprint,
            boundary,
            &mut source,
            &mut whole,
            &mut |_, _| {},
        ))
        .unwrap();
        let whole: Vec<f32> = whole.into_iter().map(f32::from_bits).collect();
        assert!(cut == whole, "median {mode:?}: cut against whole");
    }
}

/// Detector gaps: flat regions at the top of uint16 (2^16 - 1), where
/// scipy's f64 sum of a flat window falls just below the integer (65534),
/// on the GPU; and samples beyond float32 (uint32 gaps at 2^32 - 1, int32,
/// 64-bit integers near their tops), which the GPU cannot hold: `gpu_exact`
/// sends them to the host's float64 path, equal to the reference bit for bit.
#[test]
fn detector_gaps_and_integers_near_their_top_equal_the_reference() {
    let (h, w) = (20, 27);
    let r = noise(h * w, 8);
    let gaps = |top: f64, low: f64| -> Vec<f64> {
        (0..h * w)
            .map(|i| {
                let (y, x) = (i / w, i % w);
                if y == 9 || x == 13 || (y > 14 && x < 6) {
                    top
                } else {
                    (low + r[i] * 40.0).floor()
                }
            })
            .collect()
    };
    let b = Boundary::default();
    let filters = [
        Filter::gaussian(2, &[1.5], 4.0).unwrap(),
        Filter::gaussian(2, &[2.0, 0.7], 4.0).unwrap(),
        Filter::correlate(2, &[0.25, 0.5, 0.125, 0.125], &[2, 2]).unwrap(),
    ];
    let u16_out = Output::Integer {
        bits: 16,
        signed: false,
    };
    let v16 = gaps(65535.0, 0.0);
    let v16_32: Vec<f32> = v16.iter().map(|&v| v as f32).collect();
    let u16s: Vec<u16> = v16.iter().map(|&v| v as u16).collect();
    assert!(filters::gpu_exact(gpuscope_core::Samples::U16(&u16s), b));
    for f in &filters {
        let c = filters::cpu::apply(f, &v16, &[h, w], b, u16_out).unwrap();
        let g = pollster::block_on(filters::apply(gpu(), f, &v16_32, &[h, w], b, u16_out)).unwrap();
        let g: Vec<f64> = g.iter().map(|&x| f64::from(x)).collect();
        let off = g.iter().zip(&c).filter(|(g, c)| g != c).count();
        assert_eq!(off, 0, "uint16 gaps: {off} pixels differ");
    }
    let int = |bits, signed| Output::Integer { bits, signed };
    let u32s: Vec<u32> = gaps(4294967295.0, 0.0).iter().map(|&v| v as u32).collect();
    let i32s: Vec<i32> = gaps(2147483647.0, -20.0)
        .iter()
        .map(|&v| v as i32)
        .collect();
    let i64s: Vec<i64> = gaps(9.2e18, 0.0).iter().map(|&v| v as i64).collect();
    let u64s: Vec<u64> = gaps(1.8e19, 0.0).iter().map(|&v| v as u64).collect();
    let cases: [(gpuscope_core::Samples<'_>, Output); 4] = [
        (gpuscope_core::Samples::U32(&u32s), int(32, false)),
        (gpuscope_core::Samples::I32(&i32s), int(32, true)),
        (gpuscope_core::Samples::I64(&i64s), int(64, true)),
        (gpuscope_core::Samples::U64(&u64s), int(64, false)),
    ];
    for (samples, out) in cases {
        assert!(!filters::gpu_exact(samples, b), "{out:?}");
        let v: Vec<f64> = match samples {
            gpuscope_core::Samples::U32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            gpuscope_core::Samples::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            gpuscope_core::Samples::I64(v) => v.iter().map(|&x| x as f64).collect(),
            gpuscope_core::Samples::U64(v) => v.iter().map(|&x| x as f64).collect(),
            _ => unreachable!(),
        };
        for f in &filters {
            for mode in [Mode::Reflect, Mode::Constant] {
                let b = Boundary { mode, cval: 3.0 };
                let c = filters::cpu::apply(f, &v, &[h, w], b, out).unwrap();
                let host = filters::host::apply(f, &v, &[h, w], b, out).unwrap();
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&host), bits(&c), "{out:?} {mode:?}");
            }
        }
    }
    // A flat 2^32 - 1 as scipy truncates its sum: 4294967294 or
    // 4294967295, never 0.
    let flat = vec![4294967295.0; h * w];
    let c = filters::host::apply(&filters[0], &flat, &[h, w], b, int(32, false)).unwrap();
    assert!(c.iter().all(|&v| v >= 4294967294.0));
}

/// scipy's test_gauss03: the sum of a float32 Gaussian within 1.5 of the
/// input's. f32 weights rounded each to nearest summed 2e-8 above 1, a bias
/// of 1.75 in this sum.
#[test]
fn float32_gaussian_keeps_the_sum_as_scipy_requires() {
    let x: Vec<f32> = (0..10000).map(|i| i as f32).collect();
    let f = Filter::gaussian(2, &[1.0, 1.0], 4.0).unwrap();
    for device in [gpu(), tiny_gpu()] {
        let g = pollster::block_on(filters::apply(
            device,
            &f,
            &x,
            &[100, 100],
            Boundary::default(),
            Output::Float,
        ))
        .unwrap();
        let sum: f64 = g.iter().map(|&v| f64::from(v)).sum();
        assert!((sum - 49995000.0).abs() < 1.5, "sum {sum}");
    }
    for p in &f.passes {
        let w32 = p.f32_weights();
        let exact: f64 = p.weights.iter().sum();
        let got: f64 = w32.iter().map(|&v| f64::from(v)).sum();
        assert!((got - exact).abs() < 1e-10, "{got} {exact}");
        for (a, b) in w32.iter().zip(&p.weights) {
            assert!((f64::from(*a) - b).abs() <= b.abs() * 2f64.powi(-18));
        }
        assert!(w32.iter().eq(w32.iter().rev()), "symmetric");
    }
}

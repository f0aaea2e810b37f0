//! Median filter and outlier removal: the GPU path against the CPU reference
//! on lavapipe, exactly (selections are exact), for every dtype, mode,
//! footprint kind (sorting network and bitwise search), NaN, and through the
//! chunk planner; plus device memory left behind after many calls.

mod common;

use common::{gpu, noise, tiny_gpu};
use gpuscope_core::filters::median::{self, Footprint, NETWORK_MAX, OutlierRemoval, Outliers, cpu};
use gpuscope_core::filters::{Boundary, Mode};
use gpuscope_core::keys::SampleVec;
use gpuscope_core::{Gpu, GpuOptions, Samples};

const MODES: [Mode; 5] = [
    Mode::Reflect,
    Mode::Mirror,
    Mode::Nearest,
    Mode::Wrap,
    Mode::Constant,
];

/// Samples of every supported dtype, with many ties for the integers.
fn dtypes(n: usize, seed: u64) -> Vec<SampleVec> {
    let r = noise(n, seed);
    vec![
        SampleVec::U8(r.iter().map(|v| (v * 256.0) as u8).collect()),
        SampleVec::U16(r.iter().map(|v| (v * 65536.0) as u16).collect()),
        SampleVec::I16(r.iter().map(|v| (v * 65536.0 - 32768.0) as i16).collect()),
        SampleVec::U32(r.iter().map(|v| (v * 4e9) as u32).collect()),
        SampleVec::I32(r.iter().map(|v| (v * 4e9 - 2e9) as i32).collect()),
        SampleVec::F32(r.iter().map(|v| (v * 200.0 - 100.0) as f32).collect()),
        // f64 values that differ below f32 precision: rounding would tie them.
        SampleVec::F64(r.iter().map(|v| 1.0 + v * 1e-9).collect()),
        SampleVec::I64(r.iter().map(|v| ((v - 0.5) * 9e18) as i64).collect()),
    ]
}

/// Bit patterns, so that NaN equals NaN (both paths give the canonical NaN).
fn bits(v: &SampleVec) -> Vec<u64> {
    match v {
        SampleVec::F32(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
        SampleVec::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
        other => match other.as_samples().keys(0..other.as_samples().len()) {
            gpuscope_core::keys::Keys::K32(k) => k.into_iter().map(u64::from).collect(),
            gpuscope_core::keys::Keys::K64(k) => k,
        },
    }
}

fn median_both(device: &Gpu, input: &SampleVec, shape: &[usize], fp: &Footprint, b: Boundary) {
    let s = input.as_samples();
    let g = pollster::block_on(median::median_filter(device, s, shape, fp, b)).unwrap();
    let c = cpu::median_filter(s, shape, fp, b).unwrap();
    assert_eq!(g.as_samples().dtype_name(), s.dtype_name());
    assert_eq!(
        bits(&g),
        bits(&c),
        "{} {shape:?} {} elements {b:?}",
        s.dtype_name(),
        fp.len()
    );
}

#[test]
fn median_equals_reference_for_every_dtype_and_mode() {
    let shape = [19, 23];
    for (i, input) in dtypes(19 * 23, 3).iter().enumerate() {
        for mode in MODES {
            let b = Boundary { mode, cval: 7.0 };
            for size in [3, 4] {
                let fp = Footprint::size(2, &[size]).unwrap();
                median_both(gpu(), input, &shape, &fp, b);
            }
        }
        // One non-square size per dtype keeps the run short.
        let fp = Footprint::size(2, &[5, 1 + 2 * (i % 3)]).unwrap();
        median_both(gpu(), input, &shape, &fp, Boundary::default());
    }
}

#[test]
fn workgroup_tiles_equal_the_reference_at_every_edge() {
    // At least 32 x 8 outputs per slice: the grid entries run, from the
    // workgroup tile for footprints of 10 elements or more where it fits
    // (x and y not multiples of 32 and 8, so the last tiles are partial);
    // the 49-tall column fills a 64-bit tile to 14 KiB; 3x3 in the plane
    // takes the rows entry (four outputs per invocation; 61 rows leave a
    // partial last group), 3x3x3 and 49 along z (too large a tile) the
    // plain grid entry.
    let shape = [3, 61, 70];
    let n = 3 * 61 * 70;
    let mut cross = Footprint::from_mask(
        2,
        &[false, true, false, true, true, true, false, true, false],
        &[3, 3],
    )
    .unwrap();
    cross.offsets.pop(); // even count: the upper median, off-centre
    let footprints = [
        Footprint::size(3, &[1, 3, 3]).unwrap(),
        Footprint::size(3, &[1, 7, 7]).unwrap(),
        Footprint::size(3, &[1, 4, 6]).unwrap(),
        Footprint::size(3, &[3, 3, 3]).unwrap(),
        Footprint::size(3, &[1, 49, 1]).unwrap(),
        Footprint::size(3, &[49, 1, 1]).unwrap(),
    ];
    for (i, input) in dtypes(n, 17).iter().enumerate() {
        for (k, fp) in footprints.iter().enumerate() {
            // Every mode on the 3x3 and 7x7 windows, one per dtype otherwise.
            let modes: Vec<Mode> = if k < 2 {
                MODES.to_vec()
            } else {
                vec![MODES[(i + k) % MODES.len()]]
            };
            for mode in modes {
                median_both(gpu(), input, &shape, fp, Boundary { mode, cval: 3.0 });
            }
        }
    }
    let v = dtypes(45 * 70, 4);
    median_both(gpu(), &v[5], &[45, 70], &cross, Boundary::default());
    median_both(gpu(), &v[6], &[45, 70], &cross, Boundary::default());
}

#[test]
fn large_footprints_use_the_search_kernel_and_agree() {
    let fp = Footprint::size(2, &[9, 7]).unwrap();
    assert!(fp.len() > NETWORK_MAX);
    for input in dtypes(21 * 17, 5) {
        for mode in [Mode::Reflect, Mode::Constant] {
            median_both(gpu(), &input, &[21, 17], &fp, Boundary { mode, cval: 0.0 });
        }
    }
}

#[test]
fn three_d_footprints_1d_arrays_and_masks() {
    let v = dtypes(7 * 9 * 11, 11);
    let cube = Footprint::size(3, &[3]).unwrap();
    let slices = Footprint::size(3, &[1, 5, 5]).unwrap();
    let big = Footprint::size(3, &[5, 3, 5]).unwrap(); // 75: search kernel
    for input in [&v[1], &v[5], &v[6]] {
        for fp in [&cube, &slices, &big] {
            median_both(gpu(), input, &[7, 9, 11], fp, Boundary::default());
        }
    }
    // A cross-shaped footprint with an even count (upper median).
    let cross = Footprint::from_mask(
        2,
        &[false, true, false, true, true, true, false, true, false],
        &[3, 3],
    )
    .unwrap();
    let mut even = cross.clone();
    even.offsets.pop();
    median_both(gpu(), &v[5], &[7, 99], &cross, Boundary::default());
    median_both(gpu(), &v[0], &[7, 99], &even, Boundary::default());
    let line = dtypes(50, 2);
    median_both(
        gpu(),
        &line[0],
        &[50],
        &Footprint::size(1, &[5]).unwrap(),
        Boundary::default(),
    );
}

/// NaN at every `nan_step`-th element; from `inf_from`, every `inf_step`-th
/// element +inf (even index) or -inf (odd).
fn with_nan_and_inf(
    mut v: Vec<f32>,
    nan_step: usize,
    inf_from: usize,
    inf_step: usize,
) -> Vec<f32> {
    for i in (0..v.len()).step_by(nan_step) {
        v[i] = f32::NAN;
    }
    for i in (inf_from..v.len()).step_by(inf_step) {
        v[i] = if i % 2 == 0 {
            f32::INFINITY
        } else {
            f32::NEG_INFINITY
        };
    }
    v
}

#[test]
fn nan_neighbours_count_as_minus_infinity_and_nan_stays() {
    let mut v: Vec<f32> = noise(15 * 15, 9).iter().map(|&x| x as f32).collect();
    for i in (0..v.len()).step_by(4) {
        v[i] = f32::NAN;
    }
    v[17] = f32::INFINITY;
    v[40] = f32::NEG_INFINITY;
    let input = SampleVec::F32(v.clone());
    let fp = Footprint::size(2, &[3]).unwrap();
    for mode in MODES {
        let b = Boundary {
            mode,
            cval: f64::NAN,
        };
        median_both(gpu(), &input, &[15, 15], &fp, b);
    }
    let SampleVec::F32(out) =
        cpu::median_filter(input.as_samples(), &[15, 15], &fp, Boundary::default()).unwrap()
    else {
        panic!("f32 output expected")
    };
    assert!(out[0].is_nan() && out[4].is_nan(), "NaN elements stay NaN");
    assert!(out[1].is_finite() || out[1] == f32::NEG_INFINITY);
    // An f64 volume with NaN goes through the 64-bit keys.
    let mut d: Vec<f64> = noise(6 * 6 * 6, 1).to_vec();
    d[100] = f64::NAN;
    median_both(
        gpu(),
        &SampleVec::F64(d),
        &[6, 6, 6],
        &Footprint::size(3, &[3]).unwrap(),
        Boundary::default(),
    );
    // Large enough for the 3x3 rows entry: NaN and infinities in its
    // sorted rows, at the edges and inside.
    let w = with_nan_and_inf(
        noise(61 * 70, 5).iter().map(|&x| x as f32).collect(),
        7,
        3,
        11,
    );
    for mode in MODES {
        let b = Boundary { mode, cval: 0.5 };
        median_both(gpu(), &SampleVec::F32(w.clone()), &[61, 70], &fp, b);
    }
    // 136 wide: the quads entry, whose plain median keeps a NaN centre
    // without finish(); a NaN cval makes the edges NaN there too.
    let q = with_nan_and_inf(
        noise(70 * 136, 6).iter().map(|&x| x as f32).collect(),
        5,
        2,
        13,
    );
    for mode in MODES {
        for cval in [f64::NAN, 0.5] {
            let b = Boundary { mode, cval };
            median_both(gpu(), &SampleVec::F32(q.clone()), &[70, 136], &fp, b);
        }
    }
}

#[test]
fn quads_3x3_equal_the_reference_for_every_dtype_mode_and_outlier_kind() {
    // Rows of whole quads, 132 = 4 x 33 wide, 61 tall (a partial last group
    // of 8 rows): the 3x3 quads entry (at least 32 x 8 invocations) for the
    // 32-bit keys, the rows entry for the 64-bit ones.
    let shape = [2, 61, 132];
    let plane = Footprint::size(3, &[1, 3, 3]).unwrap();
    let square = Footprint::size(2, &[3]).unwrap();
    for (input, first) in dtypes(2 * 61 * 132, 23).iter().zip(dtypes(61 * 132, 24)) {
        for mode in MODES {
            median_both(gpu(), input, &shape, &plane, Boundary { mode, cval: 3.0 });
        }
        median_both(gpu(), &first, &[61, 132], &square, Boundary::default());
        let diff = outlier_diff(input);
        for kind in OUTLIER_KINDS {
            let r = OutlierRemoval::new(diff, 3, kind).unwrap();
            outliers_both(gpu(), &first, &[61, 132], &r);
        }
    }
}

#[test]
fn rows_and_quads_3x3_outliers_with_nan_and_a_split_along_y() {
    // The 3x3 entries on f32 with NaN and infinities inside and on every
    // edge, 136 wide (the quads entry) and 134 (not whole quads: the rows
    // entry): every mode, 2-D and per-slice footprints, the outlier kinds
    // (NaN centres stay, NaN neighbours count as -inf), and a run split
    // along y by a tiny binding limit.
    for width in [136, 134] {
        nan_outliers_and_a_split_along_y_at_width(width);
    }
}

fn nan_outliers_and_a_split_along_y_at_width(width: usize) {
    let shape = [2, 61, width];
    let n = 2 * 61 * width;
    let w = with_nan_and_inf(
        noise(n, 31).iter().map(|&x| (100.0 * x) as f32).collect(),
        7,
        3,
        11,
    );
    let input = SampleVec::F32(w.clone());
    let plane = Footprint::size(3, &[1, 3, 3]).unwrap();
    for mode in MODES {
        let b = Boundary { mode, cval: 0.5 };
        median_both(gpu(), &input, &shape, &plane, b);
    }
    let first = SampleVec::F32(w[..61 * width].to_vec());
    median_both(
        gpu(),
        &first,
        &[61, width],
        &Footprint::size(2, &[3]).unwrap(),
        Boundary::default(),
    );
    for kind in OUTLIER_KINDS {
        let r = OutlierRemoval::new(20.0, 3, kind).unwrap();
        outliers_both(gpu(), &first, &[61, width], &r);
    }
    // 64 KiB bindings hold 128 rows of 128 (126 of 130): two boxes along y.
    let tall_width = if width.is_multiple_of(4) { 128 } else { 130 };
    let tall = [3, 130, tall_width];
    let v: Vec<f32> = noise(3 * 130 * tall_width, 32)
        .iter()
        .map(|&x| x as f32)
        .collect();
    for mode in [Mode::Wrap, Mode::Constant, Mode::Reflect] {
        let b = Boundary { mode, cval: -1.0 };
        let s = Samples::F32(&v);
        let g = pollster::block_on(median::median_filter(tiny_gpu(), s, &tall, &plane, b)).unwrap();
        assert_eq!(
            g,
            cpu::median_filter(s, &tall, &plane, b).unwrap(),
            "{mode:?}"
        );
    }
}

#[test]
fn tiny_images_and_absurd_parameters() {
    let one = SampleVec::U16(vec![42]);
    for mode in MODES {
        let b = Boundary { mode, cval: 3.0 };
        median_both(gpu(), &one, &[1, 1], &Footprint::size(2, &[7]).unwrap(), b);
    }
    let two = SampleVec::F32(vec![1.0, 5.0, -2.0, 8.0]);
    median_both(
        gpu(),
        &two,
        &[2, 2],
        &Footprint::size(2, &[15]).unwrap(),
        Boundary::default(),
    );
    let s = Samples::U8(&[1, 2, 3, 4]);
    let fp = Footprint::size(2, &[3]).unwrap();
    let err = |r: gpuscope_core::Result<SampleVec>| r.unwrap_err().to_string();
    let e = err(pollster::block_on(median::median_filter(
        gpu(),
        s,
        &[2, 3],
        &fp,
        Boundary::default(),
    )));
    assert!(e.contains("4 values for shape"), "{e}");
    let e = err(pollster::block_on(median::median_filter(
        gpu(),
        s,
        &[2, 2],
        &fp,
        Boundary {
            mode: Mode::Constant,
            cval: 300.0,
        },
    )));
    assert!(e.contains("cval") && e.contains("uint8"), "{e}");
    let e = err(pollster::block_on(median::median_filter(
        gpu(),
        s,
        &[4],
        &fp,
        Boundary::default(),
    )));
    assert!(e.contains("2-D footprint"), "{e}");
    assert!(Footprint::size(2, &[2000]).is_err());
}

#[test]
fn chunked_median_equals_unchunked() {
    // 64 KiB bindings: 16 Ki keys per box, so these split on z and y with halos.
    let shape = [5, 70, 90];
    let n = 5 * 70 * 90;
    let v = dtypes(n, 21);
    for input in [&v[5], &v[6]] {
        for fp in [
            Footprint::size(3, &[3]).unwrap(),
            Footprint::size(3, &[1, 7, 7]).unwrap(),
        ] {
            for mode in [Mode::Wrap, Mode::Constant, Mode::Mirror] {
                let b = Boundary { mode, cval: -1.0 };
                let s = input.as_samples();
                let g = pollster::block_on(median::median_filter(tiny_gpu(), s, &shape, &fp, b))
                    .unwrap();
                let c = cpu::median_filter(s, &shape, &fp, b).unwrap();
                assert_eq!(g, c, "{} {mode:?} {}", s.dtype_name(), fp.len());
            }
        }
    }
}

/// scipy's `output=`: results written into an existing array equal fresh
/// ones, for every dtype, streamed in many chunks and with a halo on z; a wrong dtype or length is an
/// error that leaves the array as it was.
#[test]
fn into_an_existing_array_equals_a_fresh_result() {
    // 64 KiB bindings: 16 Ki words per box, so 400 slices of 16x16 take
    // seven chunks of up to 64 slices.
    let shape = [400, 16, 16];
    let n = 400 * 16 * 16;
    let b = Boundary {
        mode: Mode::Reflect,
        cval: 0.0,
    };
    let r = OutlierRemoval::new(20.0, 3, Outliers::Both).unwrap();
    for input in dtypes(n, 31) {
        let s = input.as_samples();
        for fp in [
            Footprint::size(3, &[1, 3, 3]).unwrap(),
            Footprint::size(3, &[3, 3, 3]).unwrap(),
        ] {
            let fresh =
                pollster::block_on(median::median_filter(tiny_gpu(), s, &shape, &fp, b)).unwrap();
            let mut kept = fresh.clone();
            if let SampleVec::F32(v) = &mut kept {
                v.iter_mut().for_each(|x| *x = f32::NAN);
            }
            let fresh_bits = bits(&fresh);
            pollster::block_on(median::median_filter_into(
                tiny_gpu(),
                s,
                &shape,
                &fp,
                b,
                &mut kept,
            ))
            .unwrap();
            assert_eq!(bits(&kept), fresh_bits, "{} {}", s.dtype_name(), fp.len());
        }
        if matches!(s, Samples::F32(_) | Samples::U16(_)) {
            let r = OutlierRemoval::new(outlier_diff(&input), 3, r.outliers).unwrap();
            let fresh =
                pollster::block_on(median::remove_outliers(tiny_gpu(), s, &shape, &r)).unwrap();
            let mut kept = input.clone();
            pollster::block_on(median::remove_outliers_into(
                tiny_gpu(),
                s,
                &shape,
                &r,
                &mut kept,
            ))
            .unwrap();
            assert_eq!(bits(&kept), bits(&fresh), "outliers {}", s.dtype_name());
        }
    }
    let input: Vec<f32> = noise(n, 5).iter().map(|&v| v as f32).collect();
    let fp = Footprint::size(3, &[1, 3, 3]).unwrap();
    for mut wrong in [
        SampleVec::F64(vec![7.0; n]),
        SampleVec::F32(vec![7.0; n - 1]),
    ] {
        let before = wrong.clone();
        let e = pollster::block_on(median::median_filter_into(
            gpu(),
            Samples::F32(&input),
            &shape,
            &fp,
            b,
            &mut wrong,
        ))
        .unwrap_err();
        assert!(e.to_string().contains("output"), "{e}");
        assert_eq!(wrong, before);
    }
}

const OUTLIER_KINDS: [Outliers; 4] = [
    Outliers::Bright,
    Outliers::Dark,
    Outliers::Both,
    Outliers::Tomopy,
];

/// An outlier `diff` of about a tenth of `input`'s range (dtypes()): it
/// catches a fair share.
fn outlier_diff(input: &SampleVec) -> f64 {
    match input.as_samples() {
        Samples::U8(_) => 25.0,
        Samples::U16(_) | Samples::I16(_) => 6553.5,
        Samples::U32(_) | Samples::I32(_) => 4e8,
        Samples::F32(_) => 20.0,
        Samples::F64(_) => 1e-10,
        _ => 9e17,
    }
}

fn outliers_both(device: &Gpu, input: &SampleVec, shape: &[usize], r: &OutlierRemoval) {
    let s = input.as_samples();
    let g = pollster::block_on(median::remove_outliers(device, s, shape, r)).unwrap();
    let c = cpu::remove_outliers(s, shape, r).unwrap();
    // Bits, so that NaN compares equal to NaN.
    assert_eq!(g.as_samples().dtype_name(), s.dtype_name());
    assert_eq!(bits(&g), bits(&c), "{} {r:?}", s.dtype_name());
}

#[test]
fn outliers_equal_reference_for_every_kind_and_dtype() {
    // Large enough for the 3x3 rows entry (32 x 8 invocations of 8 rows).
    let shape = [2, 61, 40];
    for input in dtypes(2 * 61 * 40, 13) {
        let diff = outlier_diff(&input);
        for kind in OUTLIER_KINDS {
            let r = OutlierRemoval::new(diff, 3, kind).unwrap();
            outliers_both(gpu(), &input, &shape, &r);
        }
    }
    // Integer differences exactly at the threshold: > versus >=.
    let v = SampleVec::U8(vec![10, 10, 10, 10, 15, 10, 10, 10, 10]);
    for (kind, replaced) in [(Outliers::Bright, false), (Outliers::Tomopy, true)] {
        let r = OutlierRemoval::new(5.0, 3, kind).unwrap();
        let SampleVec::U8(out) = cpu::remove_outliers(v.as_samples(), &[3, 3], &r).unwrap() else {
            panic!()
        };
        assert_eq!(out[4] == 10, replaced, "{kind:?}");
        outliers_both(gpu(), &v, &[3, 3], &r);
    }
    // Unsigned data darker than the median: no numpy wrap-around.
    let v = SampleVec::U16(vec![100, 100, 100, 100, 3, 100, 100, 100, 100]);
    let r = OutlierRemoval::new(50.0, 3, Outliers::Bright).unwrap();
    assert_eq!(
        cpu::remove_outliers(v.as_samples(), &[3, 3], &r).unwrap(),
        v
    );
    outliers_both(gpu(), &v, &[3, 3], &r);
}

#[test]
fn repeated_calls_of_many_sizes_leave_no_device_memory_behind() {
    // A device of its own: other tests share gpu() concurrently.
    let device = &pollster::block_on(Gpu::new(GpuOptions::default())).unwrap();
    let before = device.live_bytes();
    for (k, n) in [(3usize, 10usize), (5, 40), (9, 33), (3, 128), (7, 65)] {
        let v = SampleVec::F32(noise(n * n, k as u64).iter().map(|&x| x as f32).collect());
        let fp = Footprint::size(2, &[k]).unwrap();
        pollster::block_on(median::median_filter(
            device,
            v.as_samples(),
            &[n, n],
            &fp,
            Boundary::default(),
        ))
        .unwrap();
    }
    // The pool may keep buffers for reuse; trim() must return to the start.
    device.trim();
    assert_eq!(device.live_bytes(), before);
}

/// A sink that fails once it has taken `limit` values (a full disk).
struct FailingSink {
    taken: usize,
    limit: usize,
}

impl gpuscope_core::stream::SliceSink<u32> for FailingSink {
    fn write(&mut self, slices: &[u32]) -> gpuscope_core::Result<()> {
        if self.taken + slices.len() > self.limit {
            return Err(gpuscope_core::Error::InvalidInput(
                "the disk is full".into(),
            ));
        }
        self.taken += slices.len();
        Ok(())
    }
}

#[test]
fn a_sink_failing_mid_stream_fails_the_call_and_leaves_no_device_memory() {
    // 64 KiB bindings: many chunks, so the failure comes while later chunks
    // are in flight and the next upload is being written.
    let device = &pollster::block_on(Gpu::new(GpuOptions {
        max_binding_size: Some(64 << 10),
        ..GpuOptions::default()
    }))
    .unwrap();
    let shape = [8usize, 70, 90];
    let plane = 70 * 90;
    let v: Vec<f32> = noise(8 * plane, 5).iter().map(|&x| x as f32).collect();
    let words: &[u32] = bytemuck::cast_slice(&v);
    let fp = Footprint::size(3, &[1, 3, 3]).unwrap();
    for limit in [0, 3 * plane, 7 * plane] {
        let before = device.live_bytes();
        let mut source = gpuscope_core::stream::MemorySource::new(words, shape);
        let mut sink = FailingSink { taken: 0, limit };
        let mut written = 0;
        let r = pollster::block_on(median::median_filter_stream(
            device,
            Samples::F32(&[]),
            &shape,
            &fp,
            Boundary::default(),
            &mut source,
            &mut sink,
            &mut |done, _| written = done,
        ));
        let e = r.expect_err("the sink's failure must fail the call");
        assert!(e.to_string().contains("the disk is full"), "{e}");
        assert!(
            written * plane <= limit,
            "{written} slices reported written"
        );
        device.trim();
        assert_eq!(device.live_bytes(), before, "limit {limit}");
    }
}

/// scipy 1.17 `median_filter(a, size, mode="constant", cval=nan)` of the
/// 6x7 float32 `a = arange(42).reshape(6, 7) * 7 % 17`, NaN as None.
fn scipy_nan_cval(size: &[usize]) -> Vec<Option<f32>> {
    let n = None;
    let rows: Vec<Vec<Option<f32>>> = match size {
        [3] => vec![
            vec![15., 15., 14., 12., 16., 16., 6.],
            vec![15., 10., 5., 9., 7., 8., 4.],
            vec![13., 10., 5., 8., 9., 7., 2.],
            vec![-1., 9., 8., 7., 10., 5., 0.],
            vec![16., 8., 11., 6., 10., 5., -1.],
            vec![-1., -1., 6., -1., 3., -1., -1.],
        ],
        [3, 5] => vec![
            vec![14., 15., 15., 16., 16., 16., 16.],
            vec![15., 13., 7., 7., 8., 6., -1.],
            vec![13., -1., 8., 8., 8., 5., 2.],
            vec![16., 16., 8., 8., 7., 4., 0.],
            vec![16., 16., 8., 8., 8., 12., 2.],
            vec![-1., -1., -1., 6., -1., 10., -1.],
        ],
        _ => unreachable!(),
    }
    .into_iter()
    .map(|r| {
        r.into_iter()
            .map(|v| if v < 0.0 { n } else { Some(v) })
            .collect()
    })
    .collect();
    rows.concat()
}

#[test]
fn nan_cval_gives_nan_wherever_scipy_does_and_never_minus_infinity() {
    let (h, w) = (6usize, 7usize);
    let a: Vec<f32> = (0..h * w).map(|i| (i * 7 % 17) as f32).collect();
    let b = Boundary {
        mode: Mode::Constant,
        cval: f64::NAN,
    };
    for (size, reach) in [(vec![3], [1, 1]), (vec![3, 5], [1, 2])] {
        let fp = Footprint::size(2, &size).unwrap();
        let scipy = scipy_nan_cval(&size);
        let inputs = [
            SampleVec::F32(a.clone()),
            SampleVec::F64(a.iter().map(|&v| f64::from(v)).collect()),
        ];
        for input in inputs {
            median_both(gpu(), &input, &[h, w], &fp, b);
            median_both(tiny_gpu(), &input, &[h, w], &fp, b);
            let out = cpu::median_filter(input.as_samples(), &[h, w], &fp, b).unwrap();
            let out: Vec<f64> = match out {
                SampleVec::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
                SampleVec::F64(v) => v,
                _ => panic!("float output expected"),
            };
            for (i, (&got, want)) in out.iter().zip(&scipy).enumerate() {
                let (y, x) = (i / w, i % w);
                let edge = y < reach[0] || y + reach[0] >= h || x < reach[1] || x + reach[1] >= w;
                assert!(got != f64::NEG_INFINITY, "{size:?} ({y}, {x}): -inf");
                match want {
                    None => assert!(got.is_nan(), "{size:?} ({y}, {x}): scipy NaN, got {got}"),
                    Some(v) if !edge => assert_eq!(got, f64::from(*v), "{size:?} ({y}, {x})"),
                    Some(_) => assert!(got.is_nan(), "{size:?} ({y}, {x}): window reaches out"),
                }
            }
        }
    }
}

/// Windows of thousands of elements, past what one invocation's loops may
/// run on llvmpipe (lavapipe and GL there stop every invocation's loops
/// after 65535 iterations in all, silently): 47 x 47 and 63 x 63 gave
/// half-finished searches. Up to the largest footprint (65 025 elements of
/// 255 x 255, on an image smaller than the window: scipy's modes repeat it),
/// for 32-bit and 64-bit keys.
#[test]
fn windows_of_thousands_of_elements_equal_the_reference() {
    // (shape, window, dtype index in `dtypes`, mode)
    let cases = [
        ([8, 9], 47, 5, Mode::Reflect),
        ([6, 7], 63, 5, Mode::Wrap),
        ([4, 5], 63, 7, Mode::Mirror),
        ([3, 4], 127, 1, Mode::Reflect),
        ([2, 2], 255, 7, Mode::Reflect),
    ];
    for (shape, size, dtype, mode) in cases {
        let fp = Footprint::size(2, &[size]).unwrap();
        let input = dtypes(shape[0] * shape[1], size as u64).swap_remove(dtype);
        median_both(gpu(), &input, &shape, &fp, Boundary { mode, cval: 0.0 });
    }
}

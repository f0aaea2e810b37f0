//! The filter workloads: 2-D medians and Gaussians on a 2048² image, the
//! stack workloads (host array in, host array out), and the one-tap pass the
//! memory-bound 2-D kernels are reported against.

use gpuscope_core::Samples;
use gpuscope_core::filters::median::{self, Footprint, OutlierRemoval, Outliers};
use gpuscope_core::filters::{self, Boundary, Filter, Output};
use gpuscope_core::keys::SampleVec;
use gpuscope_core::{Gpu, Result as CoreResult};
use serde_json::{Value, json};

use super::inputs::uniform;
use super::{Bench, N2};
use crate::common::CliResult;
use crate::spread::RunStream;

/// The 2048² workloads whose rows carry `copy_kernel_ms` and
/// `bandwidth_fraction`.
const PER_IMAGE: [&str; 4] = ["median-3", "median-7", "gauss-2", "conv-gauss15"];

/// Our own read-and-write-once of the 2048² f32 image (a one-tap
/// correlation, timed like the others): the floor the memory-bound 2048²
/// kernels are reported against. Measured only when one of them runs.
pub fn copy_kernel_ms(b: &Bench) -> CliResult<Option<f64>> {
    if !PER_IMAGE.iter().any(|w| b.want(w)) {
        return Ok(None);
    }
    let one = Filter::convolve(2, &[1.0], &[1, 1])?;
    Ok(pollster::block_on(filters::kernel_ms(
        b.gpu(),
        &one,
        &b.image,
        &[2048, 2048],
        Boundary::default(),
        b.args.repeat.max(30),
    ))?)
}

/// copy-2048-wgsl: plain WGSL copies of the 2048² f32 image, in f32 words
/// and vec4 words, one and four per invocation: how close a WGSL kernel
/// comes to the device's copy bandwidth (CuPy's copy of the same bytes is
/// the peer), against our one-tap pass.
pub fn wgsl_copies(b: &Bench) -> CliResult<Vec<Value>> {
    use gpuscope_core::bandwidth::{Width, copy_ms};
    if !b.want("copy-2048-wgsl") {
        return Ok(Vec::new());
    }
    let mut rows = Vec::new();
    for (width, per_thread, name) in [
        (Width::F32, 1, "f32 x1"),
        (Width::F32, 4, "f32 x4"),
        (Width::Vec4, 1, "vec4 x1"),
        (Width::Vec4, 4, "vec4 x4"),
    ] {
        let ms = pollster::block_on(copy_ms(
            b.gpu(),
            &b.image,
            width,
            per_thread,
            b.args.repeat.max(30),
        ))?;
        rows.push(json!({
            "workload": "copy-2048-wgsl", "variant": name, "device": b.device,
            "backend": b.backend, "resident_kernel_ms": ms, "bytes": 8 * N2,
            "gb_per_s": ms.map(|ms| 8.0 * N2 as f64 / ms / 1e6),
        }));
    }
    Ok(rows)
}

/// Adds the copy's time and the bandwidth fraction (copy time / kernel
/// time) to the 2048² rows, and the `copy-2048` row itself.
pub fn add_copy_rows(b: &Bench, rows: &mut Vec<Value>, copy: f64) {
    for row in rows.iter_mut() {
        let name = row["workload"].as_str().unwrap_or_default();
        if let (true, Some(k)) = (
            PER_IMAGE.contains(&name),
            row["resident_kernel_ms"].as_f64(),
        ) {
            row["copy_kernel_ms"] = json!(copy);
            row["bandwidth_fraction"] = json!(copy / k);
        }
    }
    rows.push(json!({
        "workload": "copy-2048", "device": b.device, "backend": b.backend,
        "resident_kernel_ms": copy, "bytes": 8 * N2,
        "gb_per_s": 8.0 * N2 as f64 / copy / 1e6,
    }));
}

/// median-K: a K×K median of the 2048² image, mode reflect.
pub fn median_2d(b: &Bench, k: usize) -> CliResult<Vec<Value>> {
    let name = format!("median-{k}");
    if !b.want(&name) {
        return Ok(vec![]);
    }
    let gpu = b.gpu();
    let fp = Footprint::size(2, &[k])?;
    b.hot(0.5)?;
    let resident = pollster::block_on(median::median_kernel_ms(
        gpu,
        &b.image,
        &[2048, 2048],
        &fp,
        Boundary::default(),
        b.args.repeat.max(30),
    ))?;
    let row = b.time(
        &name,
        8 * N2,
        &mut || {
            pollster::block_on(median::median_filter(
                gpu,
                Samples::F32(&b.image),
                &[2048, 2048],
                &fp,
                Boundary::default(),
            ))?;
            Ok(())
        },
        resident,
    )?;
    Ok(vec![row])
}

/// gauss-2: a Gaussian of sigma 2 on the 2048² image.
pub fn gauss_2(b: &Bench) -> CliResult<Vec<Value>> {
    if !b.want("gauss-2") {
        return Ok(vec![]);
    }
    let f = Filter::gaussian(2, &[2.0], 4.0)?;
    filter_2d(b, "gauss-2", &f, &b.image)
}

/// conv-gauss15: the workshop's 15×15 Gaussian written out as a matrix, on
/// a 2048² image with a delta every 16 pixels.
pub fn conv_gauss15(b: &Bench) -> CliResult<Vec<Value>> {
    if !b.want("conv-gauss15") {
        return Ok(vec![]);
    }
    let mut deltas = vec![0f32; N2];
    for y in (8..2048).step_by(16) {
        for x in (8..2048).step_by(16) {
            deltas[y * 2048 + x] = 1.0;
        }
    }
    let g: Vec<f64> = (0..225)
        .map(|i| {
            let (y, x) = ((i / 15) as f64 / 3.5 - 2.0, (i % 15) as f64 / 3.5 - 2.0);
            (-(x * x + y * y) / 2.0).exp()
        })
        .collect();
    let f = Filter::convolve(2, &g, &[15, 15])?;
    filter_2d(b, "conv-gauss15", &f, &deltas)
}

/// A correlation workload on a 2048² image: resident kernel time, then the
/// host-to-host call.
fn filter_2d(b: &Bench, name: &str, f: &Filter, image: &[f32]) -> CliResult<Vec<Value>> {
    let gpu = b.gpu();
    b.hot(0.5)?;
    let resident = pollster::block_on(filters::kernel_ms(
        gpu,
        f,
        image,
        &[2048, 2048],
        Boundary::default(),
        b.args.repeat.max(30),
    ))?;
    let row = b.time(
        name,
        8 * N2,
        &mut || {
            pollster::block_on(filters::apply(
                gpu,
                f,
                image,
                &[2048, 2048],
                Boundary::default(),
                Output::Float,
            ))?;
            Ok(())
        },
        resident,
    )?;
    Ok(vec![row])
}

/// The stack of the stack workloads: `--slices` × 2048² f32 in host memory.
struct Stack {
    data: Vec<f32>,
    shape: [usize; 3],
}

/// The stack workloads, on one generated stack: median-stack,
/// stack-roundtrip, median-stack-into, outliers-stack.
pub fn stacks(b: &Bench) -> CliResult<Vec<Value>> {
    let names = [
        "median-stack",
        "median-stack-into",
        "outliers-stack",
        "stack-roundtrip",
    ];
    if !names.iter().any(|w| b.want(w)) {
        return Ok(vec![]);
    }
    let nz = b.args.slices;
    let s = Stack {
        data: uniform(nz * N2, 1),
        shape: [nz, 2048, 2048],
    };
    let mut rows = Vec::new();
    // median-stack, and stack-roundtrip: a one-element footprint, i.e. the
    // stack up and down through the same streaming path with a trivial
    // kernel (the bus limit of this path).
    for (name, size) in [
        ("median-stack", &[1usize, 3, 3][..]),
        ("stack-roundtrip", &[1]),
    ] {
        if b.want(name) {
            rows.push(median_stack(b, &s, name, size)?);
        }
    }
    if b.want("median-stack-into") {
        rows.push(median_stack_into(b, &s)?);
    }
    if b.want("outliers-stack") {
        rows.push(outliers_stack(b, &s)?);
    }
    Ok(rows)
}

/// Several contexts (--adapters): one z-range (and the footprint's halo)
/// per context, each streamed as the plain call streams the whole stack,
/// straight into one output. One context: the plain call itself.
fn split(
    b: &Bench,
    s: &Stack,
    halo: usize,
    plain: &dyn Fn(&Gpu) -> CoreResult<SampleVec>,
    stream: &RunStream<'_, u32>,
) -> CliResult {
    if b.gpus.len() >= 2 {
        let mut out: Vec<f32> = gpuscope_core::stream::zeroed_output(s.data.len());
        crate::spread::spread_in_memory(
            &b.gpus,
            bytemuck::cast_slice(&s.data),
            &s.shape,
            halo,
            bytemuck::cast_slice_mut(&mut out),
            stream,
        )?;
    } else {
        plain(b.gpu())?;
    }
    Ok(())
}

/// f32 samples travel as their raw bits (u32 words).
const F32_TAG: Samples<'static> = Samples::F32(&[]);

/// median-stack (1×3×3) or stack-roundtrip (1×1×1): the median filter of
/// the stack into a fresh output.
fn median_stack(b: &Bench, s: &Stack, name: &str, size: &[usize]) -> CliResult<Value> {
    let fp = Footprint::size(3, size)?;
    let reflect = Boundary::default();
    b.time(
        name,
        8 * s.data.len(),
        &mut || {
            split(
                b,
                s,
                fp.reach()[0],
                &|g| {
                    pollster::block_on(median::median_filter(
                        g,
                        Samples::F32(&s.data),
                        &s.shape,
                        &fp,
                        reflect,
                    ))
                },
                &|g, sh, source, sink, progress| {
                    pollster::block_on(median::median_filter_stream(
                        g, F32_TAG, sh, &fp, reflect, source, sink, progress,
                    ))
                },
            )
        },
        None,
    )
}

/// median-stack-into: the same call into one output array kept across
/// calls (scipy's `output=`): no fresh pages to fault in.
fn median_stack_into(b: &Bench, s: &Stack) -> CliResult<Value> {
    let fp = Footprint::size(3, &[1, 3, 3])?;
    let mut out = SampleVec::F32(vec![0.0; s.data.len()]);
    b.time(
        "median-stack-into",
        8 * s.data.len(),
        &mut || {
            pollster::block_on(median::median_filter_into(
                b.gpu(),
                Samples::F32(&s.data),
                &s.shape,
                &fp,
                Boundary::default(),
                &mut out,
            ))?;
            Ok(())
        },
        None,
    )
}

/// outliers-stack: Mantid's bright outlier removal (diff 0.5, size 3).
fn outliers_stack(b: &Bench, s: &Stack) -> CliResult<Value> {
    let r = OutlierRemoval::new(0.5, 3, Outliers::Bright)?;
    b.time(
        "outliers-stack",
        8 * s.data.len(),
        &mut || {
            split(
                b,
                s,
                0,
                &|g| {
                    pollster::block_on(median::remove_outliers(
                        g,
                        Samples::F32(&s.data),
                        &s.shape,
                        &r,
                    ))
                },
                &|g, sh, source, sink, progress| {
                    pollster::block_on(median::remove_outliers_stream(
                        g, F32_TAG, sh, &r, source, sink, progress,
                    ))
                },
            )
        },
        None,
    )
}

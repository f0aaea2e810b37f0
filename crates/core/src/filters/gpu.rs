//! GPU path of the linear filters: chunks planned from the device limits,
//! each chunk uploaded once, every pass run on the GPU (ping-pong between
//! two buffers), the core downloaded once.

use bytemuck::{Pod, Zeroable};

use crate::chunk::{Chunk, Shape3, shape3};
use crate::engine::{Gpu, Recorder};
use crate::error::{Error, Result};
use crate::shaders;
use crate::stream::{
    self, MemorySink, MemorySource, Progress, STREAM_CHUNK_BYTES, SliceSink, SliceSource,
    StreamSpec,
};

use super::{Boundary, Filter, Output};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    in_shape: [u32; 4],
    out_shape: [u32; 4],
    offset: [u32; 4],
    left: [u32; 4],
    klen: [u32; 4],
    mode: u32,
    quantize_bits: u32,
    quantize_signed: u32,
    cval: f32,
    valid_lo: [u32; 4],
    valid_hi: [u32; 4],
}

/// The (x, y, z) order the shader's vec4s use.
fn xyz(s: Shape3) -> [u32; 4] {
    [s[2] as u32, s[1] as u32, s[0] as u32, 0]
}

/// Applies `filter` to `input` of `shape` on the GPU. Same semantics as
/// [`super::cpu::apply`]; values are computed in f32.
pub async fn apply(
    gpu: &Gpu,
    filter: &Filter,
    input: &[f32],
    shape: &[usize],
    boundary: Boundary,
    output: Output,
) -> Result<Vec<f32>> {
    let s = shape3(shape)?;
    if shape.len() != filter.ndim {
        return Err(Error::InvalidInput(format!(
            "a filter for {}-D arrays applied to a {}-D array",
            filter.ndim,
            shape.len()
        )));
    }
    if s.iter().product::<usize>() != input.len() {
        return Err(Error::InvalidInput(format!(
            "{} values for shape {shape:?}",
            input.len()
        )));
    }
    if filter.passes.is_empty() {
        return Ok(input.to_vec());
    }
    let mut result = vec![0f32; input.len()];
    let mut source = MemorySource::new(input, s);
    let mut sink = MemorySink::new(&mut result);
    apply_stream(
        gpu,
        filter,
        shape,
        boundary,
        output,
        &mut source,
        &mut sink,
        &mut |_, _| {},
    )
    .await?;
    Ok(result)
}

/// [`apply`] streamed from `source` to `sink` (f32 values, z slices in
/// order), for stacks larger than memory.
#[allow(clippy::too_many_arguments)]
pub async fn apply_stream(
    gpu: &Gpu,
    filter: &Filter,
    shape: &[usize],
    boundary: Boundary,
    output: Output,
    source: &mut dyn SliceSource<f32>,
    sink: &mut dyn SliceSink<f32>,
    progress: Progress<'_>,
) -> Result<()> {
    run(
        gpu, filter, shape, boundary, output, source, sink, progress, None,
    )
    .await
    .map(|_| ())
}

/// Device time of `filter` on an image already on the GPU (min over
/// `repeats` runs, in ms): the kernel-only figure benchmarks compare.
pub async fn kernel_ms(
    gpu: &Gpu,
    filter: &Filter,
    input: &[f32],
    shape: &[usize],
    boundary: Boundary,
    repeats: usize,
) -> Result<Option<f64>> {
    let s = shape3(shape)?;
    let mut source = MemorySource::new(input, s);
    let mut sink: Vec<f32> = Vec::new();
    let ns = run(
        gpu,
        filter,
        shape,
        boundary,
        Output::Float,
        &mut source,
        &mut sink,
        &mut |_, _| {},
        Some((input, repeats)),
    )
    .await?;
    Ok(ns.map(|ns| ns as f64 / 1e6))
}

#[allow(clippy::too_many_arguments)]
async fn run(
    gpu: &Gpu,
    filter: &Filter,
    shape: &[usize],
    boundary: Boundary,
    output: Output,
    source: &mut dyn SliceSource<f32>,
    sink: &mut dyn SliceSink<f32>,
    progress: Progress<'_>,
    resident: Option<(&[f32], usize)>,
) -> Result<Option<u64>> {
    let s = shape3(shape)?;
    if shape.len() != filter.ndim {
        return Err(Error::InvalidInput(format!(
            "a filter for {}-D arrays applied to a {}-D array",
            filter.ndim,
            shape.len()
        )));
    }
    if filter.passes.is_empty() {
        let n = s.iter().product::<usize>();
        let mut all = Vec::with_capacity(n);
        source.read(0..s[0], &mut all)?;
        sink.write(&all)?;
        progress(s[0], s[0]);
        return Ok(None);
    }
    let pipeline = gpu.pipeline(shaders::CORRELATE, "correlate")?;
    let mut weight_buffers = Vec::with_capacity(filter.passes.len());
    for pass in &filter.passes {
        let w: Vec<f32> = pass.weights.iter().map(|&v| v as f32).collect();
        match gpu.storage(4 * w.len() as u64, "filter weights").await {
            Ok(buffer) => {
                gpu.upload(&buffer, bytemuck::cast_slice(&w));
                weight_buffers.push(buffer);
            }
            Err(e) => {
                for b in weight_buffers {
                    gpu.recycle(b);
                }
                return Err(e);
            }
        }
    }
    let kernel = |rec: &mut Recorder<'_>,
                  src: &wgpu::Buffer,
                  dst: &wgpu::Buffer,
                  c: &Chunk|
     -> Result<bool> {
        record_chunk(
            gpu,
            rec,
            &pipeline,
            filter,
            &weight_buffers,
            [src, dst],
            s,
            c,
            boundary,
            output,
        )?;
        Ok(filter.passes.len() % 2 == 1)
    };
    // Two ping-pong buffers per chunk, two chunks in flight.
    let max_elements = (gpu.max_binding_size() / 4)
        .min(gpu.memory_budget() / 16)
        .min(STREAM_CHUNK_BYTES / 4);
    let spec = StreamSpec {
        shape: s,
        halo: filter.halo(),
        mode: boundary.mode,
        cval: boundary.cval as f32,
    };
    let outcome = match resident {
        Some((data, repeats)) => stream::time_resident(gpu, spec, data, &kernel, repeats).await,
        None => stream::run(gpu, spec, source, sink, &kernel, max_elements, progress)
            .await
            .map(|()| None),
    };
    for b in weight_buffers {
        gpu.recycle(b);
    }
    outcome
}

/// Records every pass of `filter` for chunk `c`, ping-ponging between the
/// two buffers; the result ends in `buffers[passes % 2]`.
#[allow(clippy::too_many_arguments)]
fn record_chunk(
    gpu: &Gpu,
    rec: &mut Recorder<'_>,
    pipeline: &wgpu::ComputePipeline,
    filter: &Filter,
    weights: &[wgpu::Buffer],
    buffers: [&wgpu::Buffer; 2],
    shape: Shape3,
    c: &Chunk,
    boundary: Boundary,
    output: Output,
) -> Result<()> {
    let cval = boundary.cval as f32;
    let (bits, signed) = match output {
        Output::Float => (0, false),
        Output::Integer { bits, signed } => (bits, signed),
    };
    let mut in_shape = c.box_shape();
    // Halo still unconsumed on each side, per axis.
    let mut pad = c.pad;
    for (i, pass) in filter.passes.iter().enumerate() {
        let reach = pass.reach();
        let mut offset = [0; 3];
        let mut out_shape = in_shape;
        for a in 0..3 {
            // Split axes consume their halo; whole axes keep their length and
            // the kernel applies the mode.
            if pad[a] > 0 {
                offset[a] = reach[a];
                out_shape[a] = in_shape[a] - 2 * reach[a];
            }
        }
        let valid = |a: usize| -> (u32, u32) {
            // Box positions that hold real array elements after this pass.
            let after = pad[a] - offset[a];
            let lo = c.core_lo[a] as i64 - after as i64;
            let first = (-lo).max(0) as u32;
            let last = (shape[a] as i64 - lo).min(out_shape[a] as i64).max(0) as u32;
            (first, last)
        };
        let (vz, vy, vx) = (valid(0), valid(1), valid(2));
        let p = Params {
            in_shape: xyz(in_shape),
            out_shape: xyz(out_shape),
            offset: xyz(offset),
            left: xyz(pass.left),
            klen: xyz(pass.shape),
            mode: boundary.mode.code(),
            quantize_bits: bits,
            quantize_signed: u32::from(signed),
            cval,
            valid_lo: [vx.0, vy.0, vz.0, 0],
            valid_hi: [vx.1, vy.1, vz.1, 0],
        };
        let uniform = gpu.uniform(&p);
        let (src, dst) = (buffers[i % 2], buffers[(i + 1) % 2]);
        let threads = out_shape.iter().product::<usize>() as u64;
        rec.dispatch(pipeline, &[&uniform, src, &weights[i], dst], threads)?;
        for a in 0..3 {
            pad[a] -= offset[a];
        }
        in_shape = out_shape;
    }
    debug_assert_eq!(in_shape, c.core_shape());
    Ok(())
}

//! GPU path of the linear filters: chunks planned from the device limits,
//! each chunk uploaded once, every pass run on the GPU (ping-pong between
//! two buffers), the core downloaded once.

use bytemuck::{Pod, Zeroable};

use crate::chunk::{self, Chunk, Shape3, shape3};
use crate::engine::Gpu;
use crate::error::{Error, Result};
use crate::shaders;

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
    // Two ping-pong buffers of one box each must fit the binding and the budget.
    let mut max_elements = (gpu.max_binding_size() / 4).min(gpu.memory_budget() / 8);
    loop {
        match run(gpu, filter, input, s, boundary, output, max_elements).await {
            Err(Error::OutOfMemory { .. }) if max_elements > 1 << 16 => {
                gpu.trim();
                max_elements /= 2;
            }
            other => return other,
        }
    }
}

async fn run(
    gpu: &Gpu,
    filter: &Filter,
    input: &[f32],
    shape: Shape3,
    boundary: Boundary,
    output: Output,
    max_elements: u64,
) -> Result<Vec<f32>> {
    let chunks = chunk::plan(shape, filter.halo(), max_elements)?;
    let largest = chunks
        .iter()
        .map(|c| c.box_shape().iter().product::<usize>())
        .max()
        .unwrap_or(0) as u64;
    let source = shaders::CORRELATE;
    let pipeline = gpu.pipeline(source, "correlate")?;
    let mut weight_buffers = Vec::with_capacity(filter.passes.len());
    for pass in &filter.passes {
        let w: Vec<f32> = pass.weights.iter().map(|&v| v as f32).collect();
        let buffer = gpu.storage(4 * w.len() as u64, "filter weights").await?;
        gpu.upload(&buffer, bytemuck::cast_slice(&w));
        weight_buffers.push(buffer);
    }
    let ping = gpu.storage(4 * largest, "filter input").await;
    let pong = gpu.storage(4 * largest, "filter output").await;
    let (ping, pong) = match (ping, pong) {
        (Ok(a), Ok(b)) => (a, b),
        (a, b) => {
            for buf in [a, b].into_iter().flatten().chain(weight_buffers) {
                gpu.recycle(buf);
            }
            return Err(Error::OutOfMemory {
                what: "filter buffers".into(),
            });
        }
    };
    let mut result = vec![0f32; input.len()];
    let outcome = async {
        for c in &chunks {
            let part = run_chunk(
                gpu,
                &pipeline,
                filter,
                &weight_buffers,
                [&ping, &pong],
                input,
                shape,
                c,
                boundary,
                output,
            )
            .await?;
            chunk::scatter(&mut result, shape, c, &part);
        }
        Ok::<_, Error>(())
    }
    .await;
    for buf in weight_buffers.into_iter().chain([ping, pong]) {
        gpu.recycle(buf);
    }
    outcome.map(|()| result)
}

#[allow(clippy::too_many_arguments)]
async fn run_chunk(
    gpu: &Gpu,
    pipeline: &wgpu::ComputePipeline,
    filter: &Filter,
    weights: &[wgpu::Buffer],
    buffers: [&wgpu::Buffer; 2],
    input: &[f32],
    shape: Shape3,
    c: &Chunk,
    boundary: Boundary,
    output: Output,
) -> Result<Vec<f32>> {
    let cval = boundary.cval as f32;
    let data = chunk::gather(input, shape, c, boundary.mode, cval);
    gpu.upload(buffers[0], bytemuck::cast_slice(&data));
    let (bits, signed) = match output {
        Output::Float => (0, false),
        Output::Integer { bits, signed } => (bits, signed),
    };
    let mut in_shape = c.box_shape();
    // Halo still unconsumed on each side, per axis.
    let mut pad = c.pad;
    let mut params = Vec::with_capacity(filter.passes.len());
    let mut rec = gpu.recorder();
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
        params.push(uniform);
        for a in 0..3 {
            pad[a] -= offset[a];
        }
        in_shape = out_shape;
    }
    rec.submit().await?;
    debug_assert_eq!(in_shape, c.core_shape());
    let last = buffers[filter.passes.len() % 2];
    let n = in_shape.iter().product::<usize>();
    let bytes = gpu.read(last, 4 * n as u64).await?;
    drop(params);
    Ok(bytemuck::pod_collect_to_vec(&bytes))
}

//! GPU path of the linear filters: chunks planned from the device limits,
//! each chunk uploaded once, every pass run on the GPU (ping-pong between
//! two buffers), the core downloaded once.

use bytemuck::{Pod, Zeroable};

use crate::chunk::{Chunk, Shape3, shape3};
use crate::device_array::{self, DeviceArray, Elements};
use crate::engine::{Gpu, Module, Recorder};
use crate::error::{Error, Result};
use crate::stream::{
    self, Drive, MemorySink, MemorySource, Progress, SliceSink, SliceSource, StreamSpec,
};

use super::wgsl::{default_quad_rows, pass_module, quads_module, quads_suit};
use super::{Boundary, Filter, Mode, Output, Pass};

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
    /// 0 (correlate.wgsl: a value the shader compiler cannot fold).
    zero: u32,
    _pad: [u32; 3],
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
    let mut result: Vec<f32> = Vec::with_capacity(input.len());
    apply_into(
        gpu,
        filter,
        input,
        shape,
        boundary,
        output,
        &mut result.spare_capacity_mut()[..input.len()],
    )
    .await?;
    // SAFETY: `apply_into` returned Ok, so it wrote every value.
    unsafe { result.set_len(input.len()) };
    Ok(result)
}

/// [`apply`] into `out` of the input's length (a caller's buffer: a fresh
/// numpy array, no intermediate vector), every value of which is written
/// when it returns Ok: memory not yet initialised will do.
pub async fn apply_into(
    gpu: &Gpu,
    filter: &Filter,
    input: &[f32],
    shape: &[usize],
    boundary: Boundary,
    output: Output,
    out: &mut [std::mem::MaybeUninit<f32>],
) -> Result<()> {
    let s = shape3(shape)?;
    if shape.len() != filter.ndim {
        return Err(Error::InvalidInput(format!(
            "a filter for {}-D arrays applied to a {}-D array",
            filter.ndim,
            shape.len()
        )));
    }
    if s.iter().product::<usize>() != input.len() || out.len() != input.len() {
        return Err(Error::InvalidInput(format!(
            "{} values in, {} out, for shape {shape:?}",
            input.len(),
            out.len()
        )));
    }
    if filter.passes.is_empty() {
        for (o, &v) in out.iter_mut().zip(input) {
            o.write(v);
        }
        return Ok(());
    }
    let mut source = MemorySource::new(input, s);
    let mut sink = MemorySink::uninit(out);
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
    .await
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
        gpu,
        filter,
        shape,
        boundary,
        output,
        source,
        sink,
        progress,
        Drive::Stream,
    )
    .await
    .map(|_| ())
}

/// [`apply`] (float output) on a float32 array already on the GPU; the
/// result stays there.
pub async fn apply_on_device(
    gpu: &Gpu,
    filter: &Filter,
    input: &DeviceArray,
    boundary: Boundary,
) -> Result<DeviceArray> {
    input.require(Elements::F32, "this filter")?;
    let shape = input.shape().to_vec();
    let mut source = MemorySource::new(&[], input.shape3()?);
    let mut sink: Vec<f32> = Vec::new();
    let mut out = None;
    run(
        gpu,
        filter,
        &shape,
        boundary,
        Output::Float,
        &mut source,
        &mut sink,
        &mut |_, _| {},
        Drive::OnDevice(&input.buffer, &mut out),
    )
    .await?;
    match out {
        Some(buffer) => Ok(DeviceArray::wrap(buffer, &shape, Elements::F32)),
        None => Err(Error::Device(
            "the filter left no result on the device (an internal error of gpuscope; please report it)".into(),
        )),
    }
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
        Drive::Time(input, repeats),
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
    drive: Drive<'_, f32>,
) -> Result<Option<u64>> {
    let s = shape3(shape)?;
    if shape.len() != filter.ndim {
        return Err(Error::InvalidInput(format!(
            "a filter for {}-D arrays applied to a {}-D array",
            filter.ndim,
            shape.len()
        )));
    }
    if filter.passes.is_empty() && !matches!(drive, Drive::OnDevice(..)) {
        let n = s.iter().product::<usize>();
        let mut all = Vec::with_capacity(n);
        source.read(0..s[0], &mut all)?;
        sink.write(&all)?;
        progress(s[0], s[0]);
        return Ok(None);
    }
    let passes = gpu_passes(filter, boundary, output);
    // Per pass its shader; pipelines come from the device's cache per chunk
    // (the 1-D entry is compiled only for boxes the 3-D grid cannot cover).
    let modules = passes
        .iter()
        .map(|p| pass_module(gpu, p))
        .collect::<Result<Vec<_>>>()?;
    // Float passes of small kernels also get the quad kernel, run where a
    // chunk's rows are whole vec4 words.
    let quads = passes
        .iter()
        .map(|p| match quad_rows(p, output) {
            Some(rows) => quads_module(gpu, p, rows).map(|m| Some((m, rows))),
            None => Ok(None),
        })
        .collect::<Result<Vec<_>>>()?;
    let mut weight_buffers = Vec::with_capacity(passes.len());
    for pass in &passes {
        let w: Vec<f32> = match output {
            Output::Float => pass.f32_weights(),
            Output::Integer { .. } => pass.weights.iter().flat_map(|&v| split_weight(v)).collect(),
        };
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
            &modules,
            &quads,
            &passes,
            &weight_buffers,
            [src, dst],
            s,
            c,
            boundary,
            output,
        )?;
        Ok(passes.len() % 2 == 1)
    };
    // Two ping-pong buffers per chunk, two chunks in flight.
    let max_elements = (gpu.max_binding_size() / 4)
        .min(gpu.memory_budget() / 16)
        .min(stream::stream_chunk_bytes() / 4);
    let spec = StreamSpec {
        shape: s,
        halo: filter.halo(),
        mode: boundary.mode,
        cval: boundary.cval as f32,
    };
    let outcome = match drive {
        Drive::Time(data, repeats) => {
            stream::time_resident(gpu, spec, data, &kernel, repeats).await
        }
        Drive::OnDevice(input, out) => device_array::apply_kernel(gpu, spec, input, &kernel)
            .await
            .map(|b| {
                *out = Some(b);
                None
            }),
        Drive::Stream => stream::run(gpu, spec, source, sink, &kernel, max_elements, progress)
            .await
            .map(|()| None),
    };
    for b in weight_buffers {
        gpu.recycle(b);
    }
    outcome
}

/// The passes the GPU runs for `filter`. An n-D kernel that is the outer
/// product of 1-D kernels (a Gaussian built by hand, as the workshop's 15x15
/// one) runs as one 1-D pass per axis: the same sums in 15 + 15 taps instead
/// of 225. Only for float output (an integer dtype rounds once, after the
/// whole sum) and where the boundary is separable too: every mode maps each
/// axis on its own, but a non-zero constant would pad the intermediate
/// result with cval instead of cval times the row's weight sum.
fn gpu_passes(filter: &Filter, boundary: Boundary, output: Output) -> Vec<Pass> {
    let separable_boundary = boundary.mode != Mode::Constant || boundary.cval == 0.0;
    if output != Output::Float || !separable_boundary {
        return filter.passes.clone();
    }
    filter
        .passes
        .iter()
        .flat_map(|pass| separate(pass).unwrap_or_else(|| vec![pass.clone()]))
        .collect()
}

/// `pass` as 1-D passes (axis 0 first) when its weights are an outer
/// product to within 1e-7 of their largest magnitude, far below the f32
/// rounding of the sums; None when they are not, or are 1-D already.
fn separate(pass: &Pass) -> Option<Vec<Pass>> {
    let [nz, ny, nx] = pass.shape;
    if pass.shape.iter().filter(|&&n| n > 1).count() < 2 {
        return None;
    }
    let w = &pass.weights;
    let at = |z: usize, y: usize, x: usize| w[(z * ny + y) * nx + x];
    let peak = (0..w.len()).max_by(|&a, &b| w[a].abs().total_cmp(&w[b].abs()))?;
    let m = w[peak];
    if m == 0.0 || !m.is_finite() {
        return None;
    }
    let (z0, y0, x0) = (peak / (ny * nx), peak / nx % ny, peak % nx);
    // w[z, y, x] = fz[z] * fy[y] * fx[x], the peak's row scaled to carry m.
    let fz: Vec<f64> = (0..nz).map(|z| at(z, y0, x0) / m).collect();
    let fy: Vec<f64> = (0..ny).map(|y| at(z0, y, x0) / m).collect();
    let fx: Vec<f64> = (0..nx).map(|x| at(z0, y0, x)).collect();
    let mut i = 0;
    for a in &fz {
        for b in &fy {
            for c in &fx {
                if (w[i] - a * b * c).abs() > 1e-7 * m.abs() {
                    return None;
                }
                i += 1;
            }
        }
    }
    let passes = [(0, fz), (1, fy), (2, fx)]
        .into_iter()
        .filter(|(a, _)| pass.shape[*a] > 1)
        .map(|(a, weights)| {
            let mut shape = [1; 3];
            let mut left = [0; 3];
            shape[a] = pass.shape[a];
            left[a] = pass.left[a];
            Pass {
                shape,
                left,
                weights,
                one_d: true,
            }
        })
        .collect();
    Some(passes)
}

/// An f64 weight as four f32 parts for the two-word sums of integer outputs
/// (correlate.wgsl, exact_sum): three with 12-bit significands, so that
/// their products with 12-bit parts of a sample are exact, and the rest.
fn split_weight(w: f64) -> [f32; 4] {
    let top12 = |x: f64| f32::from_bits((x as f32).to_bits() & 0xffff_f000);
    let w1 = top12(w);
    let r1 = w - f64::from(w1);
    let w2 = top12(r1);
    let r2 = r1 - f64::from(w2);
    let w3 = top12(r2);
    [w1, w2, w3, (r2 - f64::from(w3)) as f32]
}

/// Rows of quads per invocation for `pass` (correlate_quads.wgsl), or None
/// where it has no quad kernel: integer outputs (exact sums), large kernels.
/// `GPUSCOPE_QUAD_ROWS` sets the rows for benchmarks (0: no quads); the
/// values do not change.
fn quad_rows(pass: &Pass, output: Output) -> Option<usize> {
    if output != Output::Float || !quads_suit(pass) {
        return None;
    }
    match quad_rows_set() {
        Some(rows) => (rows > 0).then_some(rows.min(16)),
        None => Some(default_quad_rows(pass)),
    }
}

/// `GPUSCOPE_QUAD_ROWS`, read once per process.
fn quad_rows_set() -> Option<usize> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        static SET: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
        *SET.get_or_init(|| {
            std::env::var("GPUSCOPE_QUAD_ROWS")
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
        })
    }
    #[cfg(target_arch = "wasm32")]
    None
}

/// Records every pass for chunk `c`, ping-ponging between the two buffers;
/// the result ends in `buffers[passes % 2]`.
#[allow(clippy::too_many_arguments)]
fn record_chunk(
    gpu: &Gpu,
    rec: &mut Recorder<'_>,
    modules: &[Module],
    quads: &[Option<(Module, usize)>],
    passes: &[Pass],
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
    for (i, pass) in passes.iter().enumerate() {
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
            zero: 0,
            _pad: [0; 3],
        };
        let uniform = gpu.uniform(&p);
        let (src, dst) = (buffers[i % 2], buffers[(i + 1) % 2]);
        let buffers = [&uniform, src, &weights[i], dst];
        let extent = [out_shape[2], out_shape[1], out_shape[0]];
        let whole_quads = [in_shape[2], out_shape[2], offset[2]]
            .iter()
            .all(|n| n.is_multiple_of(4));
        let quad_grid = quads[i].map(|(module, rows)| {
            (
                module,
                [out_shape[2] / 4, out_shape[1].div_ceil(rows), out_shape[0]],
            )
        });
        if let Some((module, grid)) =
            quad_grid.filter(|(_, g)| whole_quads && rec.grid_in_limits(*g))
        {
            let pipeline = gpu.pipeline(module, "correlate_quads")?;
            rec.dispatch_grid(&pipeline, &buffers, grid)?;
        } else if rec.grid_fits(extent) {
            let grid = gpu.pipeline(modules[i], "correlate_grid")?;
            rec.dispatch_grid(&grid, &buffers, extent)?;
        } else {
            let linear = gpu.pipeline(modules[i], "correlate")?;
            rec.dispatch(
                &linear,
                &buffers,
                out_shape.iter().product::<usize>() as u64,
            )?;
        }
        for a in 0..3 {
            pad[a] -= offset[a];
        }
        in_shape = out_shape;
    }
    debug_assert_eq!(in_shape, c.core_shape());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outer(a: &[f64], b: &[f64]) -> Vec<f64> {
        a.iter()
            .flat_map(|&u| b.iter().map(move |&v| u * v))
            .collect()
    }

    #[test]
    fn outer_products_separate_into_one_pass_per_axis() {
        let (a, b) = ([0.5, -2.0, 1.0], [3.0, 0.25, 1.0, -1.0, 2.0]);
        let f = Filter::correlate(2, &outer(&a, &b), &[3, 5]).unwrap();
        let passes = separate(&f.passes[0]).unwrap();
        assert_eq!(passes.len(), 2);
        assert_eq!((passes[0].shape, passes[0].left), ([1, 3, 1], [0, 1, 0]));
        assert_eq!((passes[1].shape, passes[1].left), ([1, 1, 5], [0, 0, 2]));
        for (i, w) in f.passes[0].weights.iter().enumerate() {
            let product = passes[0].weights[i / 5] * passes[1].weights[i % 5];
            assert!((w - product).abs() < 1e-12, "{i}: {w} vs {product}");
        }
    }

    #[test]
    fn weights_split_into_parts_that_sum_to_them() {
        for w in [0.1, -0.2440974, 1.0 / 3.0, 5.0e-7, 1234.5678, 0.0] {
            let p = split_weight(w);
            let back: f64 = p.iter().map(|&x| f64::from(x)).sum();
            assert!((back - w).abs() <= 1e-15 * w.abs(), "{w}: {p:?}");
            for x in &p[..3] {
                assert_eq!(x.to_bits() & 0xfff, 0, "{w}: {p:?}");
            }
        }
    }

    #[test]
    fn other_kernels_are_left_whole() {
        let mut k = outer(&[1.0, 2.0, 3.0], &[1.0, 1.0, 1.0]);
        k[4] += 1e-3; // rank 2
        let f = Filter::correlate(2, &k, &[3, 3]).unwrap();
        assert!(separate(&f.passes[0]).is_none());
        assert!(separate(&Filter::correlate(2, &[0.0; 9], &[3, 3]).unwrap().passes[0]).is_none());
        let one_d = Filter::correlate(2, &[1.0, 2.0, 1.0], &[1, 3]).unwrap();
        assert!(separate(&one_d.passes[0]).is_none());
        // Integer output and a non-zero constant keep the n-D pass.
        let g = Filter::correlate(2, &outer(&[1.0, 2.0], &[1.0, 3.0]), &[2, 2]).unwrap();
        let reflect = Boundary::default();
        assert_eq!(gpu_passes(&g, reflect, Output::Float).len(), 2);
        let int = Output::Integer {
            bits: 8,
            signed: false,
        };
        assert_eq!(gpu_passes(&g, reflect, int).len(), 1);
        let constant = |cval| Boundary {
            mode: Mode::Constant,
            cval,
        };
        assert_eq!(gpu_passes(&g, constant(1.0), Output::Float).len(), 1);
        assert_eq!(gpu_passes(&g, constant(0.0), Output::Float).len(), 2);
    }
}

#[cfg(test)]
mod wgsl_layouts {
    use super::*;
    use crate::layout::mirror_layout;

    mirror_layout!(
        params_matches_wgsl,
        Params,
        crate::shaders::CORRELATE,
        "Params",
        [
            in_shape,
            out_shape,
            offset,
            left,
            klen,
            mode,
            quantize_bits,
            quantize_signed,
            cval,
            valid_lo,
            valid_hi
        ]
    );
}

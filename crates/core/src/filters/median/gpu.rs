//! The median's GPU driver: parameters, chunked streaming through
//! [`crate::stream`], and the choice of entry point per chunk.

use std::mem::MaybeUninit;

use bytemuck::{Pod, Zeroable};

use crate::chunk::{self, Shape3, shape3};
use crate::device_array::{self, DeviceArray, Elements};
use crate::engine::{Gpu, Recorder};
use crate::error::{Error, Result};
use crate::keys::{Keys, SampleVec, Samples, unkey_f32};
use crate::shaders::Shader;
use crate::stream::{
    self, Drive, MemorySink, MemorySource, Progress, SliceSink, SliceSource, StreamSpec,
};

use super::wgsl::{network_source, tile_extent};
use super::{
    Boundary, Footprint, NETWORK_MAX, OutlierRemoval, Outliers, check_input, cval_key, in_band,
    nan_band, outlier_key,
};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    in_shape: [u32; 4],
    out_shape: [u32; 4],
    offset: [u32; 4],
    mode: u32,
    nan_aware: u32,
    count: u32,
    rank: u32,
    cval: [u32; 2],
    outliers: u32,
    diff_f32: u32,
    diff: [u32; 2],
    f32_bits: u32,
    neg_inf_bits: u32,
}

/// `scipy.ndimage.median_filter(input, footprint=..., mode=..., cval=...)` on
/// the GPU, exact for every dtype.
pub async fn median_filter(
    gpu: &Gpu,
    input: Samples<'_>,
    shape: &[usize],
    footprint: &Footprint,
    boundary: Boundary,
) -> Result<SampleVec> {
    run(gpu, input, shape, footprint, boundary, None).await
}

/// [`median_filter`] into an existing array of the input's dtype and
/// length, like scipy's `output=` argument. An f32 stack streams straight
/// into it: an array kept across calls saves the first touch of a fresh
/// result's pages, which costs more than copying the results into them
/// (`gpuscope bench` workloads median-stack-into and median-stack compare
/// the two). Other dtypes are computed as by [`median_filter`], then copied
/// in. On an error `output` may hold part of the result.
pub async fn median_filter_into(
    gpu: &Gpu,
    input: Samples<'_>,
    shape: &[usize],
    footprint: &Footprint,
    boundary: Boundary,
    output: &mut SampleVec,
) -> Result<()> {
    run_into(gpu, input, shape, footprint, boundary, None, output).await
}

/// [`median_filter`] of float32 values into `output` of the same length
/// (a caller's buffer: a numpy array, no intermediate vector).
pub async fn median_filter_f32_into(
    gpu: &Gpu,
    input: &[f32],
    shape: &[usize],
    footprint: &Footprint,
    boundary: Boundary,
    output: &mut [MaybeUninit<f32>],
) -> Result<()> {
    let s = check_input(Samples::F32(input), shape, footprint)?;
    if output.len() != input.len() {
        return Err(Error::InvalidInput(format!(
            "an output of {} values for an input of {}",
            output.len(),
            input.len()
        )));
    }
    run_f32(gpu, input, s, footprint, boundary, None, output).await
}

/// Mantid Imaging's outlier removal on the GPU: each element replaced by the
/// median of its `size × size` slice neighbourhood (mode reflect) where it is
/// an outlier of the chosen kind.
pub async fn remove_outliers(
    gpu: &Gpu,
    input: Samples<'_>,
    shape: &[usize],
    removal: &OutlierRemoval,
) -> Result<SampleVec> {
    let footprint = removal.footprint(shape.len())?;
    run(
        gpu,
        input,
        shape,
        &footprint,
        OutlierRemoval::boundary(),
        Some(removal),
    )
    .await
}

/// [`remove_outliers`] into an existing array of the input's dtype and
/// length (see [`median_filter_into`]).
pub async fn remove_outliers_into(
    gpu: &Gpu,
    input: Samples<'_>,
    shape: &[usize],
    removal: &OutlierRemoval,
    output: &mut SampleVec,
) -> Result<()> {
    let footprint = removal.footprint(shape.len())?;
    run_into(
        gpu,
        input,
        shape,
        &footprint,
        OutlierRemoval::boundary(),
        Some(removal),
        output,
    )
    .await
}

async fn run_into(
    gpu: &Gpu,
    input: Samples<'_>,
    shape: &[usize],
    footprint: &Footprint,
    boundary: Boundary,
    removal: Option<&OutlierRemoval>,
    output: &mut SampleVec,
) -> Result<()> {
    let expected = input.dtype_name();
    let given = output.as_samples().dtype_name();
    if given != expected || output.as_samples().len() != input.len() {
        return Err(Error::InvalidInput(format!(
            "the output array holds {} {given} values; this input needs {} {expected} values \
             (allocate the output with the input's dtype and shape)",
            output.as_samples().len(),
            input.len(),
        )));
    }
    if let (Samples::F32(v), SampleVec::F32(out)) = (input, &mut *output) {
        let s = check_input(input, shape, footprint)?;
        return run_f32(gpu, v, s, footprint, boundary, removal, init_as_uninit(out)).await;
    }
    let result = run(gpu, input, shape, footprint, boundary, removal).await?;
    output.copy_from(&result)
}

/// Initialised memory seen as memory to write: sound because the sinks
/// only store initialised values.
fn init_as_uninit(v: &mut [f32]) -> &mut [MaybeUninit<f32>] {
    // SAFETY: same layout; only initialised values are stored through it.
    unsafe { &mut *(v as *mut [f32] as *mut [MaybeUninit<f32>]) }
}

/// f32 samples stream as their raw bits (converted to keys in the kernel)
/// from `input` into `output`, of the same length.
async fn run_f32(
    gpu: &Gpu,
    input: &[f32],
    shape: Shape3,
    footprint: &Footprint,
    boundary: Boundary,
    removal: Option<&OutlierRemoval>,
    output: &mut [MaybeUninit<f32>],
) -> Result<()> {
    let mut source = MemorySource::new(bytemuck::cast_slice::<f32, u32>(input), shape);
    // SAFETY: f32 and u32 have one layout; the words are f32 bits.
    let words = unsafe { &mut *(output as *mut [MaybeUninit<f32>] as *mut [MaybeUninit<u32>]) };
    let mut sink = MemorySink::uninit(words);
    stream_keys(
        gpu,
        Samples::F32(input),
        shape,
        footprint,
        boundary,
        removal,
        &mut source,
        &mut sink,
        &mut |_, _| {},
        Drive::Stream,
    )
    .await?;
    Ok(())
}

async fn run(
    gpu: &Gpu,
    input: Samples<'_>,
    shape: &[usize],
    footprint: &Footprint,
    boundary: Boundary,
    removal: Option<&OutlierRemoval>,
) -> Result<SampleVec> {
    let s = check_input(input, shape, footprint)?;
    let mut none = |_: usize, _: usize| {};
    if let Samples::F32(v) = input {
        let mut out: Vec<f32> = crate::stream::zeroed_output(v.len());
        run_f32(
            gpu,
            v,
            s,
            footprint,
            boundary,
            removal,
            init_as_uninit(&mut out),
        )
        .await?;
        return Ok(SampleVec::F32(out));
    }
    let out = match input.keys(0..input.len()) {
        Keys::K32(k) => {
            let mut out = Vec::with_capacity(k.len());
            let mut source = MemorySource::new(&k, s);
            stream_keys(
                gpu,
                input,
                s,
                footprint,
                boundary,
                removal,
                &mut source,
                &mut out,
                &mut none,
                Drive::Stream,
            )
            .await?;
            Keys::K32(out)
        }
        Keys::K64(k) => {
            let mut out = Vec::with_capacity(k.len());
            let mut source = MemorySource::new(&k, s);
            stream_keys(
                gpu,
                input,
                s,
                footprint,
                boundary,
                removal,
                &mut source,
                &mut out,
                &mut none,
                Drive::Stream,
            )
            .await?;
            // 64-bit dtypes finish the outlier test on the host (no f64 on GPUs).
            if let Some(r) = removal {
                for (m, &x) in out.iter_mut().zip(&k) {
                    *m = outlier_key(input, x, *m, r);
                }
            }
            Keys::K64(out)
        }
    };
    Ok(input.from_keys(out))
}

/// The median filter streamed from `source` to `sink` as ordered keys of
/// `dtype` (u32 words for dtypes up to 32 bits, u64 for 64-bit dtypes; see
/// [`Samples::keys`]), except f32 samples, which travel as their raw bits:
/// for stacks larger than memory, read and written slice by slice.
#[allow(clippy::too_many_arguments)]
pub async fn median_filter_stream<T: Pod>(
    gpu: &Gpu,
    dtype: Samples<'_>,
    shape: &[usize],
    footprint: &Footprint,
    boundary: Boundary,
    source: &mut dyn SliceSource<T>,
    sink: &mut dyn SliceSink<T>,
    progress: Progress<'_>,
) -> Result<()> {
    let s = stream_shape(shape, footprint)?;
    stream_keys(
        gpu,
        dtype,
        s,
        footprint,
        boundary,
        None,
        source,
        sink,
        progress,
        Drive::Stream,
    )
    .await
    .map(|_| ())
}

/// Outlier removal streamed as ordered keys (see [`median_filter_stream`]).
/// 64-bit dtypes are refused here: their outlier test runs on the host, use
/// [`remove_outliers`].
pub async fn remove_outliers_stream(
    gpu: &Gpu,
    dtype: Samples<'_>,
    shape: &[usize],
    removal: &OutlierRemoval,
    source: &mut dyn SliceSource<u32>,
    sink: &mut dyn SliceSink<u32>,
    progress: Progress<'_>,
) -> Result<()> {
    let footprint = removal.footprint(shape.len())?;
    let s = stream_shape(shape, &footprint)?;
    stream_keys(
        gpu,
        dtype,
        s,
        &footprint,
        OutlierRemoval::boundary(),
        Some(removal),
        source,
        sink,
        progress,
        Drive::Stream,
    )
    .await
    .map(|_| ())
}

fn stream_shape(shape: &[usize], footprint: &Footprint) -> Result<Shape3> {
    let s = shape3(shape)?;
    if shape.len() != footprint.ndim {
        return Err(Error::InvalidInput(format!(
            "a {}-D footprint applied to a {}-D array",
            footprint.ndim,
            shape.len()
        )));
    }
    Ok(s)
}

/// The median (or, with `removal`, the outlier removal) of a float32
/// array already on the GPU; the result stays there.
pub async fn median_on_device(
    gpu: &Gpu,
    input: &DeviceArray,
    footprint: &Footprint,
    boundary: Boundary,
    removal: Option<&OutlierRemoval>,
) -> Result<DeviceArray> {
    input.require(Elements::F32, "the median filter")?;
    let shape = input.shape().to_vec();
    let s = stream_shape(&shape, footprint)?;
    let none: &[f32] = &[];
    let mut source = MemorySource::new(bytemuck::cast_slice::<f32, u32>(none), s);
    let mut sink: Vec<u32> = Vec::new();
    let mut out = None;
    stream_keys(
        gpu,
        Samples::F32(none),
        s,
        footprint,
        boundary,
        removal,
        &mut source,
        &mut sink,
        &mut |_, _| {},
        Drive::OnDevice(&input.buffer, &mut out),
    )
    .await?;
    match out {
        Some(buffer) => Ok(DeviceArray::wrap(buffer, &shape, Elements::F32)),
        None => Err(Error::Device(
            "the median left no result on the device (an internal error of gpuscope; please report it)".into(),
        )),
    }
}

/// Device time of the median of an f32 image already on the GPU (min over
/// `repeats` runs, in ms): the kernel-only figure benchmarks compare.
pub async fn median_kernel_ms(
    gpu: &Gpu,
    input: &[f32],
    shape: &[usize],
    footprint: &Footprint,
    boundary: Boundary,
    repeats: usize,
) -> Result<Option<f64>> {
    let s = check_input(Samples::F32(input), shape, footprint)?;
    let words: &[u32] = bytemuck::cast_slice(input);
    let mut source = MemorySource::new(words, s);
    let mut sink: Vec<u32> = Vec::new();
    let ns = stream_keys(
        gpu,
        Samples::F32(input),
        s,
        footprint,
        boundary,
        None,
        &mut source,
        &mut sink,
        &mut |_, _| {},
        Drive::Time(words, repeats),
    )
    .await?;
    Ok(ns.map(|ns| ns as f64 / 1e6))
}

#[allow(clippy::too_many_arguments)]
async fn stream_keys<T: Pod>(
    gpu: &Gpu,
    dtype: Samples<'_>,
    shape: Shape3,
    footprint: &Footprint,
    boundary: Boundary,
    removal: Option<&OutlierRemoval>,
    source: &mut dyn SliceSource<T>,
    sink: &mut dyn SliceSink<T>,
    progress: Progress<'_>,
    drive: Drive<'_, T>,
) -> Result<Option<u64>> {
    let word = std::mem::size_of::<T>() as u64;
    let wide = dtype.wide();
    if word != if wide { 8 } else { 4 } {
        return Err(Error::InvalidInput(format!(
            "{}-byte keys given for {} samples",
            word,
            dtype.dtype_name()
        )));
    }
    let cval = cval_key(dtype, boundary)?;
    let mut params = Params {
        in_shape: [0; 4],
        out_shape: [0; 4],
        offset: [0; 4],
        mode: boundary.mode.code(),
        nan_aware: u32::from(dtype.is_float()),
        count: footprint.len() as u32,
        rank: footprint.rank() as u32,
        cval: [cval as u32, (cval >> 32) as u32],
        outliers: 0,
        diff_f32: 0,
        diff: [0; 2],
        f32_bits: u32::from(matches!(dtype, Samples::F32(_))),
        neg_inf_bits: f32::NEG_INFINITY.to_bits(),
    };
    if let (Some(r), false) = (removal, wide) {
        params.outliers = r.outliers.code();
        if matches!(dtype, Samples::F32(_)) {
            params.diff_f32 = 1;
            params.diff[0] = (r.diff as f32).to_bits();
        } else {
            // difference > t, with t = floor(diff) (strict) or ceil(diff) - 1 (>=).
            let t = if r.outliers == Outliers::Tomopy {
                r.diff.ceil() - 1.0
            } else {
                r.diff.floor()
            };
            params.diff[0] = t.min(f64::from(u32::MAX)) as u32;
        }
    }
    let network = footprint.len() <= NETWORK_MAX;
    let template = match dtype {
        Samples::F32(_) if network => Shader::MedianF32,
        _ if wide => Shader::Median64,
        _ => Shader::Median32,
    };
    // A network is generated per footprint, once per device.
    let module = if network {
        let key = format!("median {template:?} {word} {:?}", footprint.offsets);
        gpu.generated(key, || {
            network_source(footprint, template.source(), word as usize)
        })?
    } else {
        template.into()
    };
    // Large windows share each output's search among a workgroup, which
    // keeps every invocation's loops short (median_search.wgsl says why).
    let group_search = !network && footprint.len() > SEARCH_ALONE_MAX;
    let entry = if network {
        "median_network"
    } else if group_search {
        "median_search_group"
    } else {
        "median_search"
    };
    // Networks run on the 3-D grid entry, from a workgroup tile when the
    // tile fits workgroup memory; the 1-D entry (the search's only one) is
    // compiled when a box needs it.
    let grid_entry = network.then_some(if tile_extent(footprint, word as usize).is_some() {
        "median_network_tile"
    } else {
        "median_network_grid"
    });
    // The full in-plane 3x3 runs on its own entry where its grid fits: on
    // vec4 words where the box's rows are whole quads of 32-bit keys.
    let rows_3x3 = network && is_plane_3x3(footprint);
    let quads_source = match dtype {
        _ if !rows_3x3 || wide => None,
        Samples::F32(_) => Some(Shader::MedianF32Quads),
        _ => Some(Shader::Median32Quads),
    };
    let first_entry = match grid_entry {
        _ if rows_3x3 => "median_3x3_rows",
        Some(e) => e,
        None => entry,
    };
    gpu.pipeline(module, first_entry)?;
    let offsets = if network {
        None
    } else {
        let o: Vec<[i32; 4]> = footprint
            .offsets
            .iter()
            .map(|o| [o[2], o[1], o[0], 0])
            .collect();
        let b = gpu.storage(16 * o.len() as u64, "median footprint").await?;
        gpu.upload(&b, bytemuck::cast_slice(&o));
        Some(b)
    };
    let kernel = |rec: &mut Recorder<'_>,
                  src: &wgpu::Buffer,
                  dst: &wgpu::Buffer,
                  c: &chunk::Chunk|
     -> Result<bool> {
        let mut p = params;
        let core = c.core_shape();
        p.in_shape = xyz(c.box_shape());
        p.out_shape = xyz(core);
        p.offset = xyz(c.pad);
        let uniform = gpu.uniform(&p);
        let mut buffers = vec![&uniform, src, dst];
        if let Some(o) = &offsets {
            buffers.push(o);
        }
        let extent = [core[2], core[1], core[0]];
        let quads = [core[2] / 4, core[1].div_ceil(QUAD_ROWS), core[0]];
        if let Some(quads_source) = quads_source
            && core[2].is_multiple_of(4)
            && c.pad[2] == 0
            && rec.grid_fits(quads)
        {
            let pipeline = gpu.pipeline(quads_source, "median_3x3_quads")?;
            rec.dispatch_grid(&pipeline, &buffers, quads)?;
            return Ok(true);
        }
        let extent_3x3 = [core[2], core[1].div_ceil(ROWS_3X3), core[0]];
        if rows_3x3 && rec.grid_fits(extent_3x3) {
            let pipeline = gpu.pipeline(module, "median_3x3_rows")?;
            rec.dispatch_grid(&pipeline, &buffers, extent_3x3)?;
            return Ok(true);
        }
        let outputs = core.iter().product::<usize>() as u64;
        if group_search {
            rec.dispatch_workgroups(&gpu.pipeline(module, entry)?, &buffers, outputs)?;
            return Ok(true);
        }
        match grid_entry {
            Some(e) if rec.grid_fits(extent) => {
                rec.dispatch_grid(&gpu.pipeline(module, e)?, &buffers, extent)?
            }
            _ => rec.dispatch(&gpu.pipeline(module, entry)?, &buffers, outputs)?,
        }
        Ok(true)
    };
    // In and out buffers of two chunks in flight.
    let max_elements = (gpu.max_binding_size() / word)
        .min(gpu.memory_budget() / (4 * word))
        .min(stream::stream_chunk_bytes() / word);
    // Halo words gathered on the host are in the buffers' encoding.
    let cval_bits = if params.f32_bits != 0 {
        u64::from(unkey_f32(cval as u32).to_bits())
    } else {
        cval
    };
    let cval_word: T = bytemuck::pod_read_unaligned(&cval_bits.to_le_bytes()[..word as usize]);
    let spec = StreamSpec {
        shape,
        halo: footprint.reach(),
        mode: boundary.mode,
        cval: cval_word,
    };
    // A NaN cval makes every window reaching outside the array NaN.
    let nan_bits: u64 = if params.f32_bits != 0 { 0x7fc0_0000 } else { 0 };
    let mut banded;
    let sink: &mut dyn SliceSink<T> = match nan_band(dtype, boundary, footprint) {
        Some(band) => {
            banded = NanBand {
                inner: sink,
                band,
                shape,
                z: 0,
                nan: bytemuck::pod_read_unaligned(&nan_bits.to_le_bytes()[..word as usize]),
                buf: Vec::new(),
            };
            &mut banded
        }
        None => sink,
    };
    let outcome = match drive {
        Drive::Time(data, repeats) => {
            stream::time_resident(gpu, spec, data, &kernel, repeats).await
        }
        Drive::OnDevice(_, _) if nan_band(dtype, boundary, footprint).is_some() => {
            Err(Error::InvalidInput(
                "a NaN cval with mode='constant' is not supported on device arrays; \
                 filter the array in host memory"
                    .into(),
            ))
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
    if let Some(o) = offsets {
        gpu.recycle(o);
    }
    outcome
}

/// A sink that sets the outputs within a NaN cval's reach to NaN (in the
/// stream's word encoding) before passing whole slices on.
struct NanBand<'a, T> {
    inner: &'a mut dyn SliceSink<T>,
    band: [[usize; 2]; 3],
    shape: Shape3,
    z: usize,
    nan: T,
    buf: Vec<T>,
}

impl<T: Pod> NanBand<'_, T> {
    fn mark(&mut self, slices: &[T]) {
        self.buf.clear();
        self.buf.extend_from_slice(slices);
        let band = self.band;
        let [_, h, w] = self.shape;
        let plane = (h * w).max(1);
        for (dz, p) in self.buf.chunks_mut(plane).enumerate() {
            let z = self.z + dz;
            for (i, v) in p.iter_mut().enumerate() {
                if in_band(&band, self.shape, [z, i / w.max(1), i % w.max(1)]) {
                    *v = self.nan;
                }
            }
        }
        self.z += slices.len() / plane;
    }
}

impl<T: Pod> SliceSink<T> for NanBand<'_, T> {
    fn write(&mut self, slices: &[T]) -> Result<()> {
        self.mark(slices);
        self.inner.write(&self.buf)
    }

    fn write_alone(&mut self, slices: &[T]) -> Result<()> {
        self.mark(slices);
        self.inner.write_alone(&self.buf)
    }
}

/// Largest footprint searched by one invocation per output: its loops
/// run at most 512 * 65 < 65535 iterations (median_search.wgsl). Larger
/// ones use the workgroup entry.
const SEARCH_ALONE_MAX: usize = 512;

/// Outputs per invocation of `median_3x3_rows`, stacked along y.
const ROWS_3X3: usize = 4;

/// Rows of four outputs per invocation of `median_3x3_quads`
/// (median_quads.wgsl: QUAD_ROWS).
const QUAD_ROWS: usize = 8;

/// The full 3 x 3 footprint in the x-y plane (size (3, 3) or (1, 3, 3)),
/// which `median_3x3_rows` filters from sorted rows shared by neighbouring
/// outputs.
fn is_plane_3x3(footprint: &Footprint) -> bool {
    let mut offsets = footprint.offsets.clone();
    offsets.sort_unstable();
    let plane: Vec<[i32; 3]> = (-1..=1)
        .flat_map(|y| (-1..=1).map(move |x| [0, y, x]))
        .collect();
    offsets == plane
}

/// The (x, y, z) order the shader's vec4s use.
fn xyz(s: Shape3) -> [u32; 4] {
    [s[2] as u32, s[1] as u32, s[0] as u32, 0]
}

#[cfg(test)]
mod wgsl_layouts {
    use super::*;
    use crate::layout::mirror_layout;

    mirror_layout!(
        params_matches_wgsl,
        Params,
        crate::shaders::MEDIAN32,
        "Params",
        [
            in_shape,
            out_shape,
            offset,
            mode,
            nan_aware,
            count,
            rank,
            cval,
            outliers,
            diff_f32,
            diff,
            f32_bits,
            neg_inf_bits
        ]
    );
}

//! The normalisation on the GPU: projections stream through one pass (see
//! `shaders/tomo/normalize.wgsl`) with the two fields resident.

use bytemuck::{Pod, Zeroable};

use super::{Fields, NormalizeParams};
use crate::chunk::{Chunk, shape3};
use crate::engine::{Gpu, Recorder};
use crate::error::{Error, Result};
use crate::shaders::Shader;
use crate::stream::{self, MemorySink, MemorySource, Progress, SliceSink, SliceSource, StreamSpec};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    box_shape: [u32; 4],
    origin: [u32; 4],
    plane: [u32; 4],
    cutoff: f32,
    has_cutoff: u32,
    _pad0: u32,
    _pad1: u32,
}

/// [`super::cpu::normalize`] on the GPU. Subtraction is exact; WGSL allows
/// float32 division 2.5 ULP from the correctly rounded quotient, so results
/// may differ from tomopy's by that much (docs/tomo.md).
pub async fn normalize(
    gpu: &Gpu,
    data: &[f32],
    shape: &[usize],
    fields: &Fields,
    params: &NormalizeParams,
) -> Result<Vec<f32>> {
    let s = shape3(shape)?;
    if s.iter().product::<usize>() != data.len() {
        return Err(Error::InvalidInput(format!(
            "{} values for shape {shape:?}",
            data.len()
        )));
    }
    let mut result = vec![0f32; data.len()];
    let mut source = MemorySource::new(data, s);
    let mut sink = MemorySink::new(&mut result);
    normalize_stream(
        gpu,
        shape,
        fields,
        params,
        &mut source,
        &mut sink,
        &mut |_, _| {},
    )
    .await?;
    Ok(result)
}

/// [`normalize`] streamed from `source` to `sink` (float32 projections, z
/// slices in order), for stacks larger than memory.
pub async fn normalize_stream(
    gpu: &Gpu,
    shape: &[usize],
    fields: &Fields,
    params: &NormalizeParams,
    source: &mut dyn SliceSource<f32>,
    sink: &mut dyn SliceSink<f32>,
    progress: Progress<'_>,
) -> Result<()> {
    params.validate()?;
    fields.check(shape)?;
    let s = shape3(shape)?;
    if s.contains(&0) {
        return Ok(());
    }
    let field_bytes = 4 * fields.dark.len() as u64;
    if field_bytes > gpu.max_binding_size() {
        return Err(Error::InvalidInput(format!(
            "projections of {} pixels: a flat field of {field_bytes} bytes exceeds the device's binding limit of {} bytes",
            fields.dark.len(),
            gpu.max_binding_size()
        )));
    }
    let dark = gpu.storage(field_bytes, "normalize dark").await?;
    let denominator = match gpu.storage(field_bytes, "normalize denominator").await {
        Ok(b) => b,
        Err(e) => {
            gpu.recycle(dark);
            return Err(e);
        }
    };
    gpu.upload(&dark, bytemuck::cast_slice(&fields.dark));
    gpu.upload(&denominator, bytemuck::cast_slice(&fields.denominator));
    let cutoff = params.cutoff_f32();
    let [ny, nx] = fields.plane;
    let kernel = |rec: &mut Recorder<'_>,
                  src: &wgpu::Buffer,
                  dst: &wgpu::Buffer,
                  c: &Chunk|
     -> Result<bool> {
        let b = c.box_shape();
        let uniform = gpu.uniform(&Params {
            box_shape: [b[2] as u32, b[1] as u32, b[0] as u32, 0],
            origin: [
                c.core_lo[2] as u32,
                c.core_lo[1] as u32,
                c.core_lo[0] as u32,
                0,
            ],
            plane: [nx as u32, ny as u32, 0, 0],
            cutoff: cutoff.unwrap_or(0.0),
            has_cutoff: u32::from(cutoff.is_some()),
            _pad0: 0,
            _pad1: 0,
        });
        rec.dispatch(
            &gpu.pipeline(Shader::Normalize, "normalize")?,
            &[&uniform, src, dst, &dark, &denominator],
            b.iter().product::<usize>() as u64,
        )?;
        Ok(true)
    };
    let spec = StreamSpec {
        shape: s,
        halo: [0; 3],
        mode: crate::boundary::Mode::Nearest,
        cval: 0f32,
    };
    // In and out buffers of two chunks in flight, beside the two fields.
    let max_elements = (gpu.max_binding_size() / 4)
        .min(gpu.memory_budget().saturating_sub(2 * field_bytes) / 16)
        .clamp(1 << 16, stream::stream_chunk_bytes() / 4);
    let outcome = stream::run(gpu, spec, source, sink, &kernel, max_elements, progress).await;
    gpu.recycle(dark);
    gpu.recycle(denominator);
    outcome
}

#[cfg(test)]
mod wgsl_layouts {
    use super::*;
    use crate::layout::mirror_layout;

    mirror_layout!(
        params_matches_wgsl,
        Params,
        crate::shaders::NORMALIZE,
        "Params",
        [box_shape, origin, plane, cutoff, has_cutoff, _pad0, _pad1]
    );
}

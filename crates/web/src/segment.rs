//! Target-independent half of the web API for clipping, labelling and the
//! source pipeline: parameters from JS checked here, the CPU reference and
//! the GPU path on plain Rust types (the wasm bindings only convert).

use gpuscope_core::segment::label::{self, Labels};
use gpuscope_core::segment::sources::{self, Sources};
use gpuscope_core::segment::{LabelParams, SourcesParams};
use gpuscope_core::slic::{self, Segments, SlicParams};
use gpuscope_core::stats::SigmaClipParams;
use gpuscope_core::stats::clip::{self, ClipStats};
use gpuscope_core::{Gpu, Result, Samples};

use crate::ops::shape_of;

pub fn clip_cpu(data: &[f32], shape: &[u32], p: &SigmaClipParams) -> Result<ClipStats> {
    shape_of(shape, data.len())?;
    p.validate()?;
    clip::cpu::sigma_clipped_stats(Samples::F32(data), None, &p.options())
}

pub async fn clip_gpu(
    gpu: &Gpu,
    data: &[f32],
    shape: &[u32],
    p: &SigmaClipParams,
) -> Result<ClipStats> {
    shape_of(shape, data.len())?;
    p.validate()?;
    clip::sigma_clipped_stats(gpu, data, None, &p.options()).await
}

/// Labels of `data != background`, scipy's numbering.
pub fn label_cpu(data: &[f32], shape: &[u32], p: &LabelParams) -> Result<Labels> {
    let shape = shape_of(shape, data.len())?;
    p.validate()?;
    let fg = label::foreground(Samples::F32(data), p.background);
    label::cpu::label(&fg, &shape, p.connectivity)
}

pub async fn label_gpu(gpu: &Gpu, data: &[f32], shape: &[u32], p: &LabelParams) -> Result<Labels> {
    let shape = shape_of(shape, data.len())?;
    p.validate()?;
    let fg = label::foreground(Samples::F32(data), p.background);
    label::label(gpu, &fg, &shape, p.connectivity).await
}

/// The whole chain: clip, threshold, label, measure.
pub fn sources_cpu(data: &[f32], shape: &[u32], p: &SourcesParams) -> Result<Sources> {
    let shape = shape_of(shape, data.len())?;
    p.validate()?;
    let o = p.clip().options();
    sources::cpu::sources(data, &shape, &o, p.level(), p.connectivity)
}

pub async fn sources_gpu(
    gpu: &Gpu,
    data: &[f32],
    shape: &[u32],
    p: &SourcesParams,
) -> Result<Sources> {
    let shape = shape_of(shape, data.len())?;
    p.validate()?;
    let o = p.clip().options();
    sources::sources(gpu, data, &shape, &o, p.level(), p.connectivity).await
}

// ---- SLIC (gpuscope_core::slic) ----

pub fn slic_cpu(data: &[f32], shape: &[u32], p: &SlicParams) -> Result<Segments> {
    let shape = shape_of(shape, data.len())?;
    p.validate()?;
    slic::cpu::slic(Samples::F32(data), &shape, p)
}

pub async fn slic_gpu(gpu: &Gpu, data: &[f32], shape: &[u32], p: &SlicParams) -> Result<Segments> {
    let shape = shape_of(shape, data.len())?;
    p.validate()?;
    slic::slic(gpu, Samples::F32(data), &shape, p).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label_params(connectivity: usize) -> LabelParams {
        LabelParams {
            connectivity,
            ..LabelParams::default()
        }
    }

    #[test]
    fn parameters_are_checked_with_the_core_messages() {
        let e = serde_json::from_value::<SigmaClipParams>(serde_json::json!({"cenfunc": "mode"}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cenfunc"), "{e}");
        let o = SigmaClipParams {
            sigma: 0.0,
            maxiters: None,
            ..SigmaClipParams::default()
        };
        assert!(clip_cpu(&[1.0, 2.0], &[2], &o).is_err());
        assert!(label_cpu(&[1.0; 4], &[2, 2], &label_params(3)).is_err());
        assert!(label_cpu(&[1.0; 4], &[3, 2], &label_params(1)).is_err());
    }

    #[test]
    fn the_chain_runs_on_the_cpu() {
        // Two bright pixels apart on a flat background with a little noise.
        let mut d: Vec<f32> = (0..100).map(|i| (i % 7) as f32 * 0.01).collect();
        d[11] = 50.0;
        d[88] = 60.0;
        let s = sources_cpu(&d, &[10, 10], &SourcesParams::default()).unwrap();
        assert_eq!(s.labels.count, 2);
        assert_eq!(s.regions[1].intensity_max, 60.0);
        let l = label_cpu(&d, &[10, 10], &label_params(2)).unwrap();
        assert!(l.count >= 1);
    }
}

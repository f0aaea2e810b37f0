//! Target-independent half of the web API for clipping, labelling and the
//! source pipeline: parameters from JS checked here, the CPU reference and
//! the GPU path on plain Rust types (the wasm bindings only convert).

use gpuscope_core::segment::label::{self, Labels};
use gpuscope_core::segment::sources::{self, Level, Sources};
use gpuscope_core::slic::{self, Segments, SlicParams};
use gpuscope_core::stats::clip::{self, ClipOptions, ClipStats};
use gpuscope_core::{Gpu, Result, Samples};

use crate::ops::shape_of;

/// astropy's parameters as the page passes them: `None` for the defaults
/// (sigma_lower/upper = sigma, maxiters = none means until convergence).
pub fn clip_options(
    sigma: f64,
    sigma_lower: Option<f64>,
    sigma_upper: Option<f64>,
    maxiters: Option<u32>,
    cenfunc: &str,
    workshop: bool,
) -> Result<ClipOptions> {
    Ok(ClipOptions {
        sigma,
        sigma_lower,
        sigma_upper,
        maxiters: if workshop { None } else { maxiters },
        cenfunc: cenfunc.parse()?,
        strict: workshop,
    })
}

pub fn clip_cpu(data: &[f32], shape: &[u32], o: &ClipOptions) -> Result<ClipStats> {
    shape_of(shape, data.len())?;
    clip::cpu::sigma_clipped_stats(Samples::F32(data), None, o)
}

pub async fn clip_gpu(
    gpu: &Gpu,
    data: &[f32],
    shape: &[u32],
    o: &ClipOptions,
) -> Result<ClipStats> {
    shape_of(shape, data.len())?;
    clip::sigma_clipped_stats(gpu, data, None, o).await
}

/// Labels of `data != background`, scipy's numbering.
pub fn label_cpu(
    data: &[f32],
    shape: &[u32],
    connectivity: usize,
    background: f64,
) -> Result<Labels> {
    let shape = shape_of(shape, data.len())?;
    let fg = label::foreground(Samples::F32(data), background);
    label::cpu::label(&fg, &shape, connectivity)
}

pub async fn label_gpu(
    gpu: &Gpu,
    data: &[f32],
    shape: &[u32],
    connectivity: usize,
    background: f64,
) -> Result<Labels> {
    let shape = shape_of(shape, data.len())?;
    let fg = label::foreground(Samples::F32(data), background);
    label::label(gpu, &fg, &shape, connectivity).await
}

fn level(nsigma: f64, workshop: bool) -> Level {
    if workshop {
        Level::Workshop(nsigma)
    } else {
        Level::AboveMedian(nsigma)
    }
}

/// The whole chain: clip, threshold, label, measure.
pub fn sources_cpu(
    data: &[f32],
    shape: &[u32],
    o: &ClipOptions,
    nsigma: f64,
    connectivity: usize,
) -> Result<Sources> {
    let shape = shape_of(shape, data.len())?;
    sources::cpu::sources(data, &shape, o, level(nsigma, o.strict), connectivity)
}

pub async fn sources_gpu(
    gpu: &Gpu,
    data: &[f32],
    shape: &[u32],
    o: &ClipOptions,
    nsigma: f64,
    connectivity: usize,
) -> Result<Sources> {
    let shape = shape_of(shape, data.len())?;
    sources::sources(gpu, data, &shape, o, level(nsigma, o.strict), connectivity).await
}

// ---- SLIC (gpuscope_core::slic) ----

/// skimage.segmentation.slic's parameters as the page passes them (no
/// mask): `sigma` one value or one per spatial axis; `spacing` empty or
/// all ones = isotropic; `channel_axis` None = grayscale; `convert2lab`
/// None = Lab for 3 channels.
#[allow(clippy::too_many_arguments)]
pub fn slic_params(
    n_segments: u32,
    compactness: f64,
    max_num_iter: u32,
    sigma: &[f64],
    spacing: &[f64],
    channel_axis: Option<i32>,
    convert2lab: Option<bool>,
    enforce_connectivity: bool,
    min_size_factor: f64,
    max_size_factor: f64,
    slic_zero: bool,
    start_label: i32,
) -> SlicParams {
    SlicParams {
        n_segments: n_segments as usize,
        compactness,
        max_num_iter: max_num_iter as usize,
        sigma: if sigma.is_empty() {
            vec![0.0]
        } else {
            sigma.to_vec()
        },
        spacing: if spacing.iter().all(|&s| s == 1.0) {
            None
        } else {
            Some(spacing.to_vec())
        },
        channel_axis: channel_axis.map(|a| a as isize),
        convert2lab,
        enforce_connectivity,
        min_size_factor,
        max_size_factor,
        slic_zero,
        start_label,
        mask: None,
    }
}

pub fn slic_cpu(data: &[f32], shape: &[u32], p: &SlicParams) -> Result<Segments> {
    let shape = shape_of(shape, data.len())?;
    slic::cpu::slic(Samples::F32(data), &shape, p)
}

pub async fn slic_gpu(gpu: &Gpu, data: &[f32], shape: &[u32], p: &SlicParams) -> Result<Segments> {
    let shape = shape_of(shape, data.len())?;
    slic::slic(gpu, Samples::F32(data), &shape, p).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_checked_with_the_core_messages() {
        let e = clip_options(3.0, None, None, Some(5), "mode", false)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("cenfunc"), "{e}");
        let o = clip_options(0.0, None, None, None, "median", false).unwrap();
        assert!(clip_cpu(&[1.0, 2.0], &[2], &o).is_err());
        assert!(label_cpu(&[1.0; 4], &[2, 2], 3, 0.0).is_err());
        assert!(label_cpu(&[1.0; 4], &[3, 2], 1, 0.0).is_err());
    }

    #[test]
    fn the_chain_runs_on_the_cpu() {
        // Two bright pixels apart on a flat background with a little noise.
        let mut d: Vec<f32> = (0..100).map(|i| (i % 7) as f32 * 0.01).collect();
        d[11] = 50.0;
        d[88] = 60.0;
        let o = clip_options(3.0, None, None, Some(5), "median", false).unwrap();
        let s = sources_cpu(&d, &[10, 10], &o, 5.0, 1).unwrap();
        assert_eq!(s.labels.count, 2);
        assert_eq!(s.regions[1].intensity_max, 60.0);
        let l = label_cpu(&d, &[10, 10], 2, 0.0).unwrap();
        assert!(l.count >= 1);
    }
}

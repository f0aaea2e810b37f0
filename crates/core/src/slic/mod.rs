//! SLIC superpixels with skimage.segmentation.slic's parameters, defaults
//! and numbering, in 2-D and 3-D, grayscale or multichannel.
//!
//! Where the parts live:
//! - `mod.rs`: the parameters and the public functions;
//! - `host.rs`: production host code: the features prepared exactly as
//!   skimage does (rescale to [0, 1] ignoring masked pixels, Lab for RGB,
//!   Gaussian smoothing, scaling by 1/compactness) and the seed grid
//!   (`regular_grid`); `host/mask_seeds.rs`: a masked image's seeds,
//!   scikit-image's `_get_mask_centroids` bit for bit (numpy's legacy
//!   MT19937, scipy's kmeans2); `host/connect.rs`: the connectivity step on
//!   the host for volumes beyond one binding;
//! - `gpu.rs`: the k-means iterations (shaders/slic/kmeans.wgsl; in resident
//!   z-slabs sharing the centres when the features exceed one binding,
//!   `gpu/streamed.rs`: streamed z-slabs when they exceed the memory
//!   budget), `gpu/cells.rs`: a masked image's assignment through cells
//!   of its free seeds (shaders/slic/cells.wgsl), `gpu/connect.rs`: the
//!   connectivity step
//!   (shaders/slic/connect.wgsl) and `gpu/lab.rs`: Lab from 8-bit RGB
//!   (shaders/slic/lab.wgsl);
//! - `cpu.rs`: the twin, called only by tests and `--cpu`: the same f32
//!   arithmetic in the same order, so labels are equal on lavapipe, and
//!   its own connectivity step (a flood fill) that the host's and the
//!   GPU's are compared with.
//!
//! Choices (see docs/slic.md):
//! - Assignment is pixel-centric: a pixel looks at the centres seeded in
//!   the grid cells around its own, as many on each side as the windows
//!   and the centres' largest drift from their seeds can reach
//!   (`host::search_radius`; 2 while they stay near their seeds), and
//!   applies skimage's window test to each; ties go to the lower index.
//!   Equal float32 distances are ordered by the exact sums of their parts
//!   (cpu.rs: `Dist`) unless the input is float32, as skimage's float64
//!   sums order them.
//! - A masked image is seeded as skimage seeds it (k-means of the mask's
//!   coordinates, anywhere in the mask) and runs skimage's position-only
//!   pass before the full one; its centres are binned into cells of the
//!   window step every iteration and a pixel tests the centres of every
//!   cell its windows can reach, so no centre is missed however far it
//!   drifts.
//! - Centres are means of exact integer sums (coordinates) and 64-bit
//!   fixed-point sums (features, 2^-k with |feature|·2^k ≤ 2^30), so they do
//!   not depend on the order of atomics.
//! - Connectivity: face-connected pieces of each superpixel are numbered in
//!   raster order of their first pixel (skimage's order); a piece smaller
//!   than min_size joins the neighbouring piece that comes last among those
//!   before it (skimage: the last one its breadth-first search meets), or,
//!   with none, shares the next piece's label as skimage does. skimage's
//!   search stops at max_size pixels: when a piece is that large, the host
//!   runs that search as written (`host/connect.rs: capped`).

pub mod cpu;
mod gpu;
pub mod host;

use crate::engine::Gpu;
use crate::error::{Error, Result};
use crate::keys::Samples;

/// A pixel no centre reached (masked, or outside every window).
pub const NONE: u32 = u32::MAX;
/// The z of a dead centre (shaders/slic/kmeans.wgsl: DEAD_Z).
pub(crate) const DEAD_Z: f32 = -3.0e38;

/// skimage.segmentation.slic's parameters with its defaults.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SlicParams {
    pub n_segments: usize,
    pub compactness: f64,
    pub max_num_iter: usize,
    /// One value for every spatial axis, or one per spatial axis.
    pub sigma: Vec<f64>,
    /// One per spatial axis; None = isotropic.
    pub spacing: Option<Vec<f64>>,
    /// None = grayscale; negative values count from the end.
    pub channel_axis: Option<isize>,
    /// None = Lab when there are 3 channels.
    pub convert2lab: Option<bool>,
    pub enforce_connectivity: bool,
    pub min_size_factor: f64,
    pub max_size_factor: f64,
    pub slic_zero: bool,
    pub start_label: i32,
    /// Spatial shape; true = segment this pixel.
    pub mask: Option<Vec<bool>>,
}

impl Default for SlicParams {
    fn default() -> Self {
        SlicParams {
            n_segments: 100,
            compactness: 10.0,
            max_num_iter: 10,
            sigma: vec![0.0],
            spacing: None,
            channel_axis: Some(-1),
            convert2lab: None,
            enforce_connectivity: true,
            min_size_factor: 0.5,
            max_size_factor: 3.0,
            slic_zero: false,
            start_label: 1,
            mask: None,
        }
    }
}

/// The labels (int32, the spatial shape of the input) and how many
/// distinct segments they hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segments {
    pub labels: Vec<i32>,
    pub shape: Vec<usize>,
    pub n_segments: usize,
    /// k-means iterations run (fewer than max_num_iter after an early stop).
    pub iterations: usize,
}

impl SlicParams {
    /// The checks that need no input (axes and shapes are checked by `slic`).
    pub fn validate(&self) -> Result<()> {
        check_params(self)
    }
}

fn check_params(p: &SlicParams) -> Result<()> {
    if p.n_segments == 0 {
        return Err(Error::param("n_segments", "0 (must be at least 1)"));
    }
    if p.max_num_iter == 0 {
        // skimage leaves its labels uninitialised then.
        return Err(Error::param("max_num_iter", "0 (must be at least 1)"));
    }
    if !p.compactness.is_finite() || p.compactness <= 0.0 {
        return Err(Error::param(
            "compactness",
            format!("{} (must be a positive number)", p.compactness),
        ));
    }
    if p.start_label != 0 && p.start_label != 1 {
        return Err(Error::param(
            "start_label",
            format!("{} (should be 0 or 1, as in scikit-image)", p.start_label),
        ));
    }
    for (name, v) in [
        ("min_size_factor", p.min_size_factor),
        ("max_size_factor", p.max_size_factor),
    ] {
        if !v.is_finite() || v < 0.0 {
            return Err(Error::param(
                name,
                format!("{v} (must be zero or a positive number)"),
            ));
        }
    }
    if p.sigma.iter().any(|s| !s.is_finite() || *s < 0.0) {
        return Err(Error::param(
            "sigma",
            format!("{:?} (must be zero or positive numbers)", p.sigma),
        ));
    }
    if let Some(sp) = &p.spacing
        && sp.iter().any(|s| !s.is_finite() || *s <= 0.0)
    {
        return Err(Error::param(
            "spacing",
            format!("{sp:?} (must be positive numbers)"),
        ));
    }
    Ok(())
}

/// SLIC on the GPU.
pub async fn slic(
    gpu: &Gpu,
    samples: Samples<'_>,
    shape: &[usize],
    p: &SlicParams,
) -> Result<Segments> {
    let clock = gpu.host_clock();
    let mut prep = host::prepare(samples, shape, p, true)?;
    gpu.host_done("slic prepare", clock);
    // k-means buffers: features, labels and mask bits per pixel.
    let resident = prep.n() as u64 * (4 * prep.nc as u64 + 4) + prep.n() as u64 / 8;
    if resident > gpu.memory_budget() {
        if prep.gpu_rescale || prep.lab_table.is_some() {
            prep = host::prepare(samples, shape, p, false)?;
        }
        return gpu::run_streamed(gpu, &prep).await;
    }
    let input = match (samples, gpu::byte_samples(samples)) {
        (Samples::F32(v), _) if prep.gpu_rescale => gpu::GpuInput::Rescale(v),
        (_, Some(bytes)) if prep.lab_table.is_some() => gpu::GpuInput::Rgb8(bytes),
        _ => gpu::GpuInput::Features,
    };
    let clock = gpu.host_clock();
    let segments = gpu::run(gpu, prep, input).await;
    gpu.host_done("slic run", clock);
    segments
}

/// The features SLIC on the GPU computes for an 8-bit RGB image (channel
/// last, no mask, no smoothing; 3 per pixel, Lab times 1 / compactness):
/// what `slic` gives its k-means, for comparison with the CPU twin's
/// float64 Lab ([`cpu::features`]) and for running the twin on them
/// ([`cpu::slic_on_features`]). Other images are an error.
pub async fn lab_features(
    gpu: &Gpu,
    samples: Samples<'_>,
    shape: &[usize],
    p: &SlicParams,
) -> Result<Vec<f32>> {
    let prep = host::prepare(samples, shape, p, true)?;
    let (Some(table), Some(bytes)) = (&prep.lab_table, gpu::byte_samples(samples)) else {
        return Err(Error::InvalidInput(
            "the GPU computes Lab features only for 8-bit RGB images, channel last, without mask or smoothing"
                .into(),
        ));
    };
    gpu::lab_features(gpu, &prep, table, bytes).await
}

/// The largest difference, in Lab units, between a feature from
/// shaders/slic/lab.wgsl and skimage's float64 Lab (tested on every 8-bit
/// colour); a just noticeable colour difference is about 1.
pub const LAB_TOLERANCE: f64 = 1e-3;

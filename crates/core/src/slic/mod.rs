//! SLIC superpixels with skimage.segmentation.slic's parameters, defaults
//! and numbering, in 2-D and 3-D, grayscale or multichannel.
//!
//! The host prepares the features exactly as skimage does (rescale to
//! [0, 1] ignoring masked pixels, Lab for RGB, Gaussian smoothing, scaling
//! by 1/compactness) and the seed grid (`regular_grid`). The GPU then runs
//! the k-means iterations (shaders/slic/kmeans.wgsl; in resident z-slabs
//! sharing the centres when the features exceed one binding, streamed
//! z-slabs when they exceed the memory budget) and the connectivity step
//! (shaders/slic/connect.wgsl; on the host for volumes beyond one binding).
//! `cpu` is the twin: the same f32 arithmetic in the same order, so labels
//! are equal on lavapipe.
//!
//! Choices (see docs/slic.md):
//! - Assignment is pixel-centric: a pixel looks at the centres seeded in
//!   the 5^3 grid cells around its own (±2 cells, the reach of skimage's
//!   ±2·step windows) and applies skimage's window test to each; ties go
//!   to the lower index. This is skimage's answer unless a centre drifts
//!   more than about half a step from its seed.
//! - Centres are means of exact integer sums (coordinates) and 64-bit
//!   fixed-point sums (features, 2^-k with |feature|·2^k ≤ 2^30), so they do
//!   not depend on the order of atomics.
//! - Connectivity: face-connected pieces of each superpixel are numbered in
//!   raster order of their first pixel (skimage's order); a piece smaller
//!   than min_size joins the neighbouring piece that comes last among those
//!   before it (skimage: the last one its breadth-first search meets), or,
//!   with none, shares the next piece's label as skimage does. skimage's
//!   max_size cap on the search is not reproduced (it only sizes a buffer).

pub mod cpu;

use bytemuck::{Pod, Zeroable};

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::copies::Prefaulted;
use crate::engine::{Gpu, Pending, Recorder, split_parts, vec_from_bytes};
use crate::error::{Error, Result};
use crate::filters::{Boundary, Filter, Mode, Output};
use crate::keys::Samples;
use crate::shaders;

/// A pixel no centre reached (masked, or outside every window).
pub(crate) const NONE: u32 = u32::MAX;
/// The z of a dead centre (shaders/slic/kmeans.wgsl: DEAD_Z).
pub(crate) const DEAD_Z: f32 = -3.0e38;
/// Pixels per thread of `assign`, consecutive along x (kmeans.wgsl: LANES).
const ASSIGN_LANES: usize = 4;
/// Seed cells searched on each side of a pixel's own cell.
pub(crate) const RADIUS: usize = 2;

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

/// The seed grid along one axis: seeds at start, start + step, ...
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Axis {
    pub start: usize,
    pub step: usize,
    pub count: usize,
}

/// Everything the k-means and connectivity steps need, prepared on the host.
#[derive(Clone, Debug)]
pub(crate) struct Prepared {
    /// (depth, height, width); depth 1 for 2-D images.
    pub dims: [usize; 3],
    pub nc: usize,
    /// Pixel-major features (nc per pixel), already divided by compactness.
    pub features: Vec<f32>,
    pub mask: Option<Vec<bool>>,
    pub grid: [Axis; 3],
    /// skimage's integer window half-widths / 2 (`step_z, step_y, step_x`).
    pub win: [usize; 3],
    pub spacing: [f32; 3],
    pub spatial_weight: f32,
    /// Fixed-point exponent of the feature sums.
    pub shift: i32,
    /// 1 / compactness.
    pub ratio: f32,
    /// The GPU rescales the raw float32 input itself (`features` is empty).
    pub gpu_rescale: bool,
    /// 8-bit RGB whose Lab features the GPU computes (shaders/slic/lab.wgsl;
    /// `features` is empty): each byte value's gamma expansion.
    pub lab_table: Option<Vec<f32>>,
    pub max_num_iter: usize,
    pub slic_zero: bool,
    pub start_label: i32,
    pub enforce: bool,
    pub min_size: usize,
    pub out_shape: Vec<usize>,
}

impl Prepared {
    pub fn n(&self) -> usize {
        self.dims.iter().product()
    }
    pub fn n_centres(&self) -> usize {
        self.grid.iter().map(|a| a.count).product()
    }
    /// Initial centres: seed positions, features zero (as skimage), as
    /// (z, y, x, alive, features) per centre.
    pub fn seeds(&self) -> Vec<f32> {
        let stride = 4 + self.nc;
        let mut c = vec![0f32; self.n_centres() * stride];
        self.each_seed(|k, zyx, alive| {
            c[k * stride..k * stride + 3].copy_from_slice(&zyx);
            c[k * stride + 3] = if alive { 1.0 } else { 0.0 };
        });
        c
    }

    /// Calls `f(k, [z, y, x], alive)` for each seed, in index order: alive
    /// unless outside the mask. A dead centre's z is DEAD_Z, which no
    /// window holds (the GPU's `assign` tests the z window instead of
    /// loading a flag).
    fn each_seed(&self, mut f: impl FnMut(usize, [f32; 3], bool)) {
        let g = &self.grid;
        let mut k = 0;
        for iz in 0..g[0].count {
            let z = g[0].start + iz * g[0].step;
            for iy in 0..g[1].count {
                let y = g[1].start + iy * g[1].step;
                for ix in 0..g[2].count {
                    let x = g[2].start + ix * g[2].step;
                    let alive = self
                        .mask
                        .as_ref()
                        .is_none_or(|m| m[(z * self.dims[1] + y) * self.dims[2] + x]);
                    let zf = if alive { z as f32 } else { DEAD_Z };
                    f(k, [zf, y as f32, x as f32], alive);
                    k += 1;
                }
            }
        }
    }

    pub fn scale(&self) -> f32 {
        2f32.powi(self.shift)
    }
}

/// skimage.util.regular_grid for a 3-D shape: (start, step) per axis
/// (a `slice(None)` is (0, 1)).
pub(crate) fn regular_grid(shape: [usize; 3], n_points: usize) -> [(usize, usize); 3] {
    let space = shape.iter().map(|&v| v as f64).product::<f64>();
    let n = n_points as f64;
    if space <= n {
        return [(0, 1); 3];
    }
    // numpy's argsort of three values is stable (insertion sort).
    let mut order = [0usize, 1, 2];
    order.sort_by_key(|&a| shape[a]);
    let sorted: Vec<f64> = order.iter().map(|&a| shape[a] as f64).collect();
    let mut steps = [(space / n).powf(1.0 / 3.0); 3];
    if (0..3).any(|d| sorted[d] < steps[d]) {
        for dim in 0..3 {
            steps[dim] = sorted[dim];
            if dim + 1 < 3 {
                let rest: f64 = sorted[dim + 1..].iter().product();
                let s = (rest / n).powf(1.0 / (3 - dim - 1) as f64);
                for v in steps.iter_mut().skip(dim + 1) {
                    *v = s;
                }
            }
            if (0..3).all(|d| sorted[d] >= steps[d]) {
                break;
            }
        }
    }
    let mut out = [(0, 1); 3];
    for (rank, &axis) in order.iter().enumerate() {
        let start = (steps[rank] / 2.0).floor() as usize;
        // numpy rounds half to even; a step below 0.5 would be a Python error.
        let step = (steps[rank].round_ties_even() as usize).max(1);
        out[axis] = (start, step);
    }
    out
}

fn to_f64(samples: Samples<'_>) -> Vec<f64> {
    fn f<T: Copy + Into<f64>>(v: &[T]) -> Vec<f64> {
        v.iter().map(|&x| x.into()).collect()
    }
    match samples {
        Samples::U8(v) => f(v),
        Samples::I8(v) => f(v),
        Samples::U16(v) => f(v),
        Samples::I16(v) => f(v),
        Samples::U32(v) => f(v),
        Samples::I32(v) => f(v),
        Samples::F32(v) => f(v),
        Samples::F64(v) => v.to_vec(),
        Samples::U64(v) => v.iter().map(|&x| x as f64).collect(),
        Samples::I64(v) => v.iter().map(|&x| x as f64).collect(),
    }
}

/// skimage.color.rgb2lab's gamma expansion of one sRGB value in [0, 1].
fn srgb_to_linear(v: f64) -> f64 {
    if v > 0.04045 {
        ((v + 0.055) / 1.055).powf(2.4)
    } else {
        v / 12.92
    }
}

/// Linear RGB to CIE Lab (D65, 2°): skimage.color.rgb2lab after the gamma
/// expansion.
fn linear_rgb2lab(lin: [f64; 3]) -> [f64; 3] {
    const M: [[f64; 3]; 3] = [
        [0.412453, 0.357580, 0.180423],
        [0.212671, 0.715160, 0.072169],
        [0.019334, 0.119193, 0.950227],
    ];
    const WHITE: [f64; 3] = [0.95047, 1.0, 1.08883];
    let mut f = [0.0; 3];
    for i in 0..3 {
        let xyz = M[i][0] * lin[0] + M[i][1] * lin[1] + M[i][2] * lin[2];
        let t = xyz / WHITE[i];
        f[i] = if t > 0.008856 {
            t.cbrt()
        } else {
            7.787 * t + 16.0 / 116.0
        };
    }
    [
        116.0 * f[1] - 16.0,
        500.0 * (f[0] - f[1]),
        200.0 * (f[1] - f[2]),
    ]
}

/// Runs `work(start, part)` over `data` split into parts of whole `unit`s,
/// one part per core (native builds; one part in the browser); `start` is
/// the part's first index in `data`.
fn on_every_core<T: Send>(data: &mut [T], unit: usize, work: impl Fn(usize, &mut [T]) + Sync) {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cores > 1 && data.len() >= 1 << 16 {
            let per = (data.len() / unit).div_ceil(cores).max(1) * unit;
            std::thread::scope(|scope| {
                for (k, part) in data.chunks_mut(per).enumerate() {
                    let work = &work;
                    scope.spawn(move || work(k * per, part));
                }
            });
            return;
        }
    }
    #[cfg(target_arch = "wasm32")]
    let _ = unit;
    work(0, data)
}

/// A mask as one bit per pixel, 32 to a word (the shaders' `maskw`).
fn mask_bits(mask: &[bool]) -> Vec<u32> {
    let mut bits = vec![0u32; mask.len().div_ceil(32)];
    for (i, &v) in mask.iter().enumerate() {
        if v {
            bits[i / 32] |= 1 << (i % 32);
        }
    }
    bits
}

/// The smallest and largest of 8-bit samples, as float64.
fn byte_range<T: Copy + Ord + Into<f64>>(v: &[T]) -> (f64, f64) {
    let lo = v.iter().copied().min();
    let hi = v.iter().copied().max();
    match (lo, hi) {
        (Some(l), Some(h)) => (l.into(), h.into()),
        _ => (f64::INFINITY, f64::NEG_INFINITY),
    }
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

fn inf_error() -> Error {
    Error::InvalidInput(
        "the image contains infinite values (scikit-image refuses unmasked inf too); mask those pixels out or replace them".into(),
    )
}

fn nan_error() -> Error {
    Error::InvalidInput(
        "the image contains NaN (scikit-image refuses unmasked NaN too); mask those pixels out or replace them".into(),
    )
}

/// Validates the input and parameters and prepares features and seeds as
/// skimage.segmentation.slic does before its Cython loop.
///
/// `on_gpu`: float32 grayscale input without smoothing or mask is rescaled
/// by the GPU itself (`features` stays empty; see `run`).
pub(crate) fn prepare(
    samples: Samples<'_>,
    shape: &[usize],
    p: &SlicParams,
    on_gpu: bool,
) -> Result<Prepared> {
    check_params(p)?;
    let len: Option<usize> = shape.iter().try_fold(1usize, |a, &b| a.checked_mul(b));
    if len != Some(samples.len()) {
        return Err(Error::InvalidInput(format!(
            "shape {shape:?} does not match the {} values given",
            samples.len()
        )));
    }
    if samples.is_empty() {
        return Err(Error::InvalidInput("the image is empty".into()));
    }
    let ndim = shape.len();
    let fast = match samples {
        Samples::F32(v)
            if p.channel_axis.is_none()
                && p.mask.is_none()
                && p.sigma.iter().all(|&s| s == 0.0) =>
        {
            Some(v)
        }
        _ => None,
    };
    // 8-bit RGB, channel last, no mask and no smoothing (a colour
    // photograph): the Lab features straight from the bytes in one pass,
    // without float64 copies of the image (each pass over one cost
    // milliseconds on the benchmark host).
    let rgb8 = match samples {
        Samples::U8(_) | Samples::I8(_)
            if matches!(p.channel_axis, Some(a) if a == -1 || a == ndim as isize - 1)
                && (3..=4).contains(&ndim)
                && shape[ndim - 1] == 3
                && p.mask.is_none()
                && p.sigma.iter().all(|&s| s == 0.0)
                && p.convert2lab != Some(false) =>
        {
            Some(samples)
        }
        _ => None,
    };
    // Move the channel axis last.
    let (spatial, nc, values): (Vec<usize>, usize, Vec<f64>) = match p.channel_axis {
        None => {
            if !(2..=3).contains(&ndim) {
                return Err(Error::InvalidInput(format!(
                    "a grayscale image must be 2-D or 3-D, got shape {shape:?}"
                )));
            }
            // Grayscale float32 without smoothing: features straight from
            // the input, without a float64 copy (large volumes).
            let values = if fast.is_some() {
                Vec::new()
            } else {
                to_f64(samples)
            };
            (shape.to_vec(), 1, values)
        }
        Some(a) => {
            if ndim == 2 {
                return Err(Error::param(
                    "channel_axis",
                    format!(
                        "{a} makes a 2-D image multichannel, which scikit-image does not support; \
                         use channel_axis=None (--channel-axis none) for a grayscale image"
                    ),
                ));
            }
            if !(3..=4).contains(&ndim) {
                return Err(Error::InvalidInput(format!(
                    "a multichannel image must be 3-D or 4-D (channels included), got shape {shape:?}"
                )));
            }
            let axis = if a < 0 { a + ndim as isize } else { a };
            if axis < 0 || axis >= ndim as isize {
                return Err(Error::param(
                    "channel_axis",
                    format!("{a} for a {ndim}-D image"),
                ));
            }
            let axis = axis as usize;
            let v = if rgb8.is_some() {
                Vec::new()
            } else {
                to_f64(samples)
            };
            let nc = shape[axis];
            let mut sp = shape.to_vec();
            sp.remove(axis);
            if axis == ndim - 1 {
                // Already channel-last: no copy (a pass over a fresh 6 MB
                // vector took milliseconds on the benchmark host).
                (sp, nc, v)
            } else {
                let outer: usize = shape[..axis].iter().product();
                let inner: usize = shape[axis + 1..].iter().product();
                let mut moved = vec![0.0; v.len()];
                for o in 0..outer {
                    for c in 0..nc {
                        for i in 0..inner {
                            moved[(o * inner + i) * nc + c] = v[(o * nc + c) * inner + i];
                        }
                    }
                }
                (sp, nc, moved)
            }
        }
    };
    let is_2d = spatial.len() == 2;
    let dims = if is_2d {
        [1, spatial[0], spatial[1]]
    } else {
        [spatial[0], spatial[1], spatial[2]]
    };
    let n: usize = dims.iter().product();
    if n == 0 || nc == 0 {
        return Err(Error::InvalidInput(format!(
            "the image of shape {shape:?} is empty"
        )));
    }
    if n >= NONE as usize {
        return Err(Error::InvalidInput(format!(
            "{n} pixels: at most 2^32-2 are supported"
        )));
    }
    let mask = match &p.mask {
        None => None,
        Some(m) => {
            if m.len() != n {
                return Err(Error::InvalidInput(format!(
                    "the mask has {} values but the image has {n} pixels (the mask must have the image's spatial shape)",
                    m.len()
                )));
            }
            if !m.iter().any(|&v| v) {
                return Err(Error::InvalidInput("the mask selects no pixel".into()));
            }
            Some(m.clone())
        }
    };
    // Rescale to [0, 1] over the unmasked values.
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    let gpu_rescale = fast.is_some() && on_gpu;
    if let Some(v) = fast.filter(|_| !gpu_rescale) {
        let (mut l, mut h) = (f32::INFINITY, f32::NEG_INFINITY);
        let mut nan = false;
        for &x in v {
            nan |= x.is_nan();
            l = l.min(x);
            h = h.max(x);
        }
        if nan {
            lo = f64::NAN;
        } else {
            (lo, hi) = (f64::from(l), f64::from(h));
        }
    }
    match rgb8 {
        Some(Samples::U8(v)) => (lo, hi) = byte_range(v),
        Some(Samples::I8(v)) => (lo, hi) = byte_range(v),
        _ => {}
    }
    if lo.is_nan() {
        return Err(nan_error());
    }
    for (i, &v) in values.iter().enumerate() {
        if mask.as_ref().is_some_and(|m| !m[i / nc]) {
            continue;
        }
        if v.is_nan() {
            return Err(nan_error());
        }
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !gpu_rescale && (lo.is_infinite() || hi.is_infinite()) {
        return Err(inf_error());
    }
    let f32_input = matches!(samples, Samples::F32(_));
    let rescale = |v: f64| -> f64 {
        if f32_input {
            // skimage keeps float32 input in float32.
            let (v, lo, hi) = (v as f32, lo as f32, hi as f32);
            let d = v - lo;
            (if hi != lo { d / (hi - lo) } else { d }) as f64
        } else {
            let d = v - lo;
            if hi != lo { d / (hi - lo) } else { d }
        }
    };
    // In place, without a second fresh vector of the image's size.
    let mut img = values;
    for v in img.iter_mut() {
        *v = rescale(*v);
    }
    // Masked-out values may fall outside [0, 1] and may be NaN/inf: they
    // never enter a centre, but keep them finite for the fixed-point sums.
    if let Some(m) = &mask {
        for (i, v) in img.iter_mut().enumerate() {
            if !m[i / nc] {
                *v = 0.0;
            }
        }
    }
    let multichannel = p.channel_axis.is_some();
    let mut lab = false;
    let ratio = 1.0 / p.compactness;
    let mut rgb8_features = None;
    let mut lab_table = None;
    if let Some(bytes) = rgb8 {
        // The same arithmetic as the float64 path below, each 8-bit value's
        // rescaled gamma expansion taken from a table.
        let (raw, value): (&[u8], fn(u8) -> f64) = match bytes {
            Samples::I8(v) => (bytemuck::cast_slice(v), |b| f64::from(b as i8)),
            Samples::U8(v) => (v, f64::from),
            _ => (&[], f64::from),
        };
        let table: Vec<f64> = (0..=255u8)
            .map(|b| srgb_to_linear(rescale(value(b))))
            .collect();
        lab = true;
        if on_gpu {
            // Three cube roots a pixel took most of a call's host time
            // for a photograph; the GPU does it in a small fraction of
            // that, in float32 (LAB_TOLERANCE).
            lab_table = Some(table.iter().map(|&v| v as f32).collect());
            rgb8_features = Some(Vec::new());
        } else {
            let mut out = vec![0f32; raw.len()];
            on_every_core(&mut out, 3, |start, part| {
                let src = &raw[start..start + part.len()];
                for (px, rgb) in part.chunks_exact_mut(3).zip(src.chunks_exact(3)) {
                    let lab = linear_rgb2lab([rgb[0], rgb[1], rgb[2]].map(|b| table[b as usize]));
                    for (f, v) in px.iter_mut().zip(lab) {
                        *f = (v * ratio) as f32;
                    }
                }
            });
            rgb8_features = Some(out);
        }
    } else if multichannel && p.convert2lab != Some(false) {
        if nc != 3 && p.convert2lab == Some(true) {
            return Err(Error::param(
                "convert2lab",
                format!("Lab conversion requires an RGB image (3 channels, got {nc})"),
            ));
        } else if nc == 3 {
            // Three powers and three cube roots per pixel: most of the
            // host time of a colour image, so on every core. 8-bit images
            // hold at most 257 distinct values (0 for masked pixels): their
            // powers come from a table of the same function's values.
            let table: Vec<(u64, f64)> = match samples {
                Samples::U8(_) | Samples::I8(_) => {
                    let offset = if matches!(samples, Samples::I8(_)) {
                        -128.0
                    } else {
                        0.0
                    };
                    let mut t: Vec<(u64, f64)> = (0..256)
                        .map(|v| rescale(f64::from(v) + offset))
                        .chain([0.0])
                        .map(|v| (v.to_bits(), srgb_to_linear(v)))
                        .collect();
                    t.sort_unstable_by_key(|e| e.0);
                    t
                }
                _ => Vec::new(),
            };
            let linear = |v: f64| -> f64 {
                match table.binary_search_by_key(&v.to_bits(), |e| e.0) {
                    Ok(i) => table[i].1,
                    Err(_) => srgb_to_linear(v),
                }
            };
            on_every_core(&mut img, 3, |_, part| {
                for px in part.chunks_exact_mut(3) {
                    let v = linear_rgb2lab([linear(px[0]), linear(px[1]), linear(px[2])]);
                    px.copy_from_slice(&v);
                }
            });
            lab = true;
        }
    }
    let spacing: [f64; 3] = match &p.spacing {
        None => [1.0; 3],
        Some(s) if is_2d && s.len() == 2 => [1.0, s[0], s[1]],
        Some(s) if !is_2d && s.len() == 3 => [s[0], s[1], s[2]],
        Some(s) => {
            return Err(Error::param(
                "spacing",
                format!(
                    "{} values for a {}-D image (give one per spatial axis)",
                    s.len(),
                    spatial.len()
                ),
            ));
        }
    };
    let sigma: [f64; 3] = match p.sigma.len() {
        1 => [0, 1, 2].map(|a| p.sigma[0] / spacing[a]),
        2 if is_2d => [0.0, p.sigma[0], p.sigma[1]],
        3 if !is_2d => [p.sigma[0], p.sigma[1], p.sigma[2]],
        k => {
            return Err(Error::param(
                "sigma",
                format!(
                    "{k} values for a {}-D image (give one, or one per spatial axis)",
                    spatial.len()
                ),
            ));
        }
    };
    if sigma.iter().any(|&s| s > 0.0) {
        let filter = Filter::gaussian(3, &sigma, 4.0)?;
        let boundary = Boundary {
            mode: Mode::Reflect,
            cval: 0.0,
        };
        let mut plane = vec![0.0; n];
        for c in 0..nc {
            for (i, v) in plane.iter_mut().enumerate() {
                *v = img[i * nc + c];
            }
            let smooth =
                crate::filters::cpu::apply(&filter, &plane, &dims, boundary, Output::Float)?;
            for (i, v) in smooth.iter().enumerate() {
                img[i * nc + c] = *v;
            }
        }
    }
    // Seeds: skimage's regular_grid(n_segments). With a mask, skimage seeds
    // by k-means on the mask's pixels (numpy's random generator); we take
    // the grid for n_segments·N/|mask| seeds and keep those inside the mask.
    let in_mask = mask
        .as_ref()
        .map_or(n, |m| m.iter().filter(|&&v| v).count());
    let wanted = if in_mask == n {
        p.n_segments
    } else {
        ((p.n_segments as f64) * n as f64 / in_mask as f64).round() as usize
    };
    let g = regular_grid(dims, wanted);
    let grid = [0, 1, 2].map(|a| Axis {
        start: g[a].0,
        step: g[a].1,
        count: (dims[a] - g[a].0).div_ceil(g[a].1),
    });
    let n_centres: usize = grid.iter().map(|a| a.count).product();
    if n_centres >= NONE as usize {
        return Err(Error::param("n_segments", "too many segments"));
    }
    // The Cython loop recomputes the windows from the number of centres.
    let w = regular_grid(dims, n_centres);
    let win = [w[0].1, w[1].1, w[2].1];
    let step = grid
        .iter()
        .map(|a| a.step as f64)
        .fold(f64::NEG_INFINITY, f64::max) as f32;
    let spatial_weight = (1.0 / f64::from(step * step)) as f32;
    let features: Vec<f32> = if let Some(f) = rgb8_features {
        f
    } else if gpu_rescale {
        Vec::new()
    } else if let Some(v) = fast {
        let (r, lo, hi) = (ratio as f32, lo as f32, hi as f32);
        v.iter()
            .map(|&x| {
                let d = x - lo;
                (if hi != lo { d / (hi - lo) } else { d }) * r
            })
            .collect()
    } else if f32_input && !lab {
        let r = ratio as f32;
        img.iter().map(|&v| v as f32 * r).collect()
    } else {
        img.iter().map(|&v| (v * ratio) as f32).collect()
    };
    // Rescaled values lie in [0, 1] (the maximum maps to exactly 1): the
    // GPU-rescaled features' largest magnitude is the ratio itself (or 0 for
    // a constant image, whose sums are 0 whatever the scale).
    let max_abs = if gpu_rescale {
        ratio as f32
    } else if lab_table.is_some() {
        (LAB_BOUND * ratio) as f32
    } else {
        features.iter().fold(0f32, |m, v| m.max(v.abs()))
    };
    if !max_abs.is_finite() {
        return Err(Error::param(
            "compactness",
            format!(
                "{} makes the scaled features overflow float32",
                p.compactness
            ),
        ));
    }
    // Largest k with max|feature|·2^k ≤ 2^30.
    let shift = if max_abs > 0.0 {
        (30 - (max_abs.log2().floor() as i32) - 1).clamp(-100, 100)
    } else {
        0
    };
    let mut prep = Prepared {
        dims,
        nc,
        features,
        mask,
        grid,
        win,
        spacing: spacing.map(|v| v as f32),
        spatial_weight,
        shift,
        ratio: ratio as f32,
        gpu_rescale,
        lab_table,
        max_num_iter: p.max_num_iter,
        slic_zero: p.slic_zero,
        start_label: p.start_label,
        enforce: p.enforce_connectivity,
        min_size: 0,
        out_shape: spatial,
    };
    let alive = if prep.mask.is_none() {
        prep.n_centres()
    } else {
        let mut alive = 0;
        prep.each_seed(|_, _, a| alive += usize::from(a));
        alive
    };
    let segment_size = in_mask as f64 / alive.max(1) as f64;
    prep.min_size = (p.min_size_factor * segment_size) as usize;
    Ok(prep)
}

/// Final int32 labels from the k-means labels (no connectivity step).
pub(crate) fn plain_labels(raw: &[u32], start: i32) -> Vec<i32> {
    raw.iter()
        .map(|&k| {
            if k == NONE {
                start - 1
            } else {
                k as i32 + start
            }
        })
        .collect()
}

pub(crate) fn count_segments(labels: &[i32], start: i32) -> usize {
    let max = labels.iter().copied().max().unwrap_or(0);
    if max < start {
        return 0;
    }
    let mut seen = vec![false; (max - start + 1) as usize];
    for &l in labels {
        if l >= start {
            seen[(l - start) as usize] = true;
        }
    }
    seen.iter().filter(|&&s| s).count()
}

// ---------------------------------------------------------------- GPU path

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct KParams {
    nx: u32,
    ny: u32,
    nz: u32,
    nc: u32,
    n: u32,
    n_centres: u32,
    start_x: u32,
    start_y: u32,
    start_z: u32,
    step_x: u32,
    step_y: u32,
    step_z: u32,
    count_x: u32,
    count_y: u32,
    count_z: u32,
    win_x: u32,
    win_y: u32,
    win_z: u32,
    radius: u32,
    slic_zero: u32,
    use_mask: u32,
    sx: f32,
    sy: f32,
    sz: f32,
    spatial_weight: f32,
    scale: f32,
    inv_scale: f32,
    ratio: f32,
    z0: u32,
}

/// shaders/slic/lab.wgsl's parameters.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct LabParams {
    n: u32,
    ratio: f32,
    pad: [u32; 2],
    linear: [f32; 256],
}

/// Records shaders/slic/lab.wgsl over `n` pixels: `rgb` (3 bytes a pixel)
/// to `features` (3 floats a pixel), each byte's gamma expansion from
/// `table`.
fn record_lab(
    gpu: &Gpu,
    rec: &mut Recorder<'_>,
    table: &[f32],
    ratio: f32,
    n: usize,
    rgb: &wgpu::Buffer,
    features: &wgpu::Buffer,
) -> Result<()> {
    let linear: [f32; 256] = table
        .try_into()
        .map_err(|_| Error::Device("the gamma table needs 256 values".into()))?;
    let params = gpu.uniform(&LabParams {
        n: n as u32,
        ratio,
        pad: [0; 2],
        linear,
    });
    let lab = gpu.pipeline(shaders::SLIC_LAB, "lab")?;
    rec.dispatch(&lab, &[&params, rgb, features], n as u64)
}

/// The bytes of 8-bit samples.
fn byte_samples<'a>(samples: Samples<'a>) -> Option<&'a [u8]> {
    match samples {
        Samples::U8(v) => Some(v),
        Samples::I8(v) => Some(bytemuck::cast_slice(v)),
        _ => None,
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct CParams {
    nx: u32,
    ny: u32,
    nz: u32,
    n: u32,
    min_size: u32,
    start_label: i32,
    n_blocks: u32,
}

/// Elements per workgroup of the connectivity step's ranking kernels.
const BLOCK: usize = 1024;

/// SLIC on the GPU.
pub async fn slic(
    gpu: &Gpu,
    samples: Samples<'_>,
    shape: &[usize],
    p: &SlicParams,
) -> Result<Segments> {
    let clock = gpu.host_clock();
    let mut prep = prepare(samples, shape, p, true)?;
    gpu.host_done("slic prepare", clock);
    // k-means buffers: features, labels and mask bits per pixel.
    let resident = prep.n() as u64 * (4 * prep.nc as u64 + 4) + prep.n() as u64 / 8;
    if resident > gpu.memory_budget() {
        if prep.gpu_rescale || prep.lab_table.is_some() {
            prep = prepare(samples, shape, p, false)?;
        }
        return run_streamed(gpu, &prep).await;
    }
    let input = match (samples, byte_samples(samples)) {
        (Samples::F32(v), _) if prep.gpu_rescale => GpuInput::Rescale(v),
        (_, Some(bytes)) if prep.lab_table.is_some() => GpuInput::Rgb8(bytes),
        _ => GpuInput::Features,
    };
    let clock = gpu.host_clock();
    let segments = run(gpu, &prep, input).await;
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
    let prep = prepare(samples, shape, p, true)?;
    let (Some(table), Some(bytes)) = (&prep.lab_table, byte_samples(samples)) else {
        return Err(Error::InvalidInput(
            "the GPU computes Lab features only for 8-bit RGB images, channel last, without mask or smoothing"
                .into(),
        ));
    };
    let n = prep.n();
    let mut bufs = Buffers {
        gpu,
        list: Vec::new(),
    };
    let rgb = bufs
        .get(4 * (bytes.len() as u64).div_ceil(4), "slic 8-bit RGB")
        .await?;
    let features = bufs.get(12 * n as u64, "slic features").await?;
    let mut padded = bytes.to_vec();
    padded.resize(bytes.len().div_ceil(4) * 4, 0);
    gpu.upload(&rgb, &padded);
    let mut rec = gpu.recorder();
    record_lab(gpu, &mut rec, table, prep.ratio, n, &rgb, &features)?;
    rec.submit().await?;
    gpu.read_vec::<f32>(&features, 3 * n).await
}

/// What [`run`] uploads: the prepared features, or the input from which
/// the GPU computes them.
#[derive(Clone, Copy)]
enum GpuInput<'a> {
    Features,
    /// Float32 grey values, rescaled on the GPU (`Prepared::gpu_rescale`).
    Rescale(&'a [f32]),
    /// 8-bit RGB (3 bytes a pixel), converted to Lab on the GPU
    /// (`Prepared::lab_table`).
    Rgb8(&'a [u8]),
}

/// Lab's largest magnitude for RGB in [0, 1] is below 128 (L <= 100,
/// |a| < 99, |b| < 108): the scale of the fixed-point sums of features the
/// GPU computes (`Prepared::lab_table`).
const LAB_BOUND: f64 = 128.0;

/// The largest difference, in Lab units, between a feature from
/// shaders/slic/lab.wgsl and skimage's float64 Lab (tested on every 8-bit
/// colour); a just noticeable colour difference is about 1.
pub const LAB_TOLERANCE: f64 = 1e-3;

/// The k-means with the volume kept on the host: each iteration streams
/// z-slabs sized from the memory budget through one set of slab buffers
/// (features and current labels up, labels down); the centres and their
/// sums stay on the device. The connectivity step then runs on the host.
async fn run_streamed(gpu: &Gpu, prep: &Prepared) -> Result<Segments> {
    let n = prep.n();
    let k = prep.n_centres();
    let nc = prep.nc;
    let plane = prep.dims[1] * prep.dims[2];
    let per_pixel = 4 * nc as u64 + 4 + 1;
    let budget = (gpu.memory_budget() / 2).min(gpu.max_binding_size() / (4 * nc as u64) * 4);
    let depth = ((budget / per_pixel) as usize / plane).min(prep.dims[0]);
    if depth == 0 {
        return Err(Error::InvalidInput(format!(
            "one {}x{} plane does not fit the memory budget of {} bytes; raise --memory-budget or use --cpu",
            prep.dims[1],
            prep.dims[2],
            gpu.memory_budget()
        )));
    }
    let mut bufs = Buffers {
        gpu,
        list: Vec::new(),
    };
    let m_max = depth * plane;
    let stride = 1 + 2 * (3 + nc);
    let centres = bufs
        .get(4 * (k * gpu_stride(nc)) as u64, "slic centres")
        .await?;
    let accum = bufs.get(4 * (k * stride) as u64, "slic sums").await?;
    let maxdist = maxdist_buffer(gpu, &mut bufs, prep).await?;
    // [iteration (finalize counts it up), min key, max key, NaN/inf flags,
    // change flag of iteration 0]: reset before every iteration.
    let changed = bufs.get(20, "slic change flag").await?;
    let features = bufs.get(4 * (m_max * nc) as u64, "slic features").await?;
    let labels = bufs.get(4 * m_max as u64, "slic labels").await?;
    let mask = bufs.get(4 * m_max.div_ceil(32) as u64, "slic mask").await?;
    gpu.upload(&centres, bytemuck::cast_slice(&gpu_centres(prep)));
    let kp = kparams(prep);
    let slabs: Vec<(usize, usize)> = (0..prep.dims[0])
        .step_by(depth)
        .map(|z0| (z0, depth.min(prep.dims[0] - z0) * plane))
        .collect();
    let uniforms: Vec<wgpu::Buffer> = slabs
        .iter()
        .map(|&(z0, m)| gpu.uniform(&slab_params(&kp, z0, m)))
        .collect();
    let bound = |i: usize| -> [wgpu::Buffer; 8] {
        [
            &uniforms[i],
            &features,
            &centres,
            &labels,
            &accum,
            &maxdist,
            &mask,
            &changed,
        ]
        .map(|b| b.clone())
    };
    // Uploads slab i's features, labels and mask bits.
    let load = |i: usize, host: &[u32]| {
        let (z0, m) = slabs[i];
        let lo = z0 * plane;
        gpu.upload(
            &features,
            bytemuck::cast_slice(&prep.features[lo * nc..(lo + m) * nc]),
        );
        gpu.upload(&labels, bytemuck::cast_slice(&host[lo..lo + m]));
        if let Some(mk) = &prep.mask {
            gpu.upload(&mask, bytemuck::cast_slice(&mask_bits(&mk[lo..lo + m])));
        }
    };
    let assign = gpu.pipeline(shaders::SLIC_KMEANS, "assign")?;
    let accumulate = gpu.pipeline(shaders::SLIC_KMEANS, "accumulate")?;
    let finalize = gpu.pipeline(shaders::SLIC_KMEANS, "finalize")?;
    let colour_max = gpu.pipeline(shaders::SLIC_KMEANS, "colour_max")?;
    let init = gpu.pipeline(shaders::SLIC_KMEANS, "init")?;
    {
        // Sums to 0 (the slab's labels are uploaded before every use).
        let b = bound(0);
        let refs: Vec<&wgpu::Buffer> = b.iter().collect();
        let mut rec = gpu.recorder();
        rec.dispatch(&init, &refs, (k * stride).max(slabs[0].1) as u64)?;
        rec.submit().await?;
    }
    let mut host = vec![NONE; n];
    let mut iterations = 0;
    for _ in 0..prep.max_num_iter {
        gpu.upload(&changed, &[0u8; 20]);
        for (i, &(z0, m)) in slabs.iter().enumerate() {
            load(i, &host);
            let b = bound(i);
            let refs: Vec<&wgpu::Buffer> = b.iter().collect();
            let mut rec = gpu.recorder();
            rec.dispatch(&assign, &refs, m as u64)?;
            rec.dispatch(&accumulate, &refs, m as u64)?;
            rec.submit().await?;
            let got: Vec<u32> = gpu.read_vec(&labels, m).await?;
            host[z0 * plane..z0 * plane + m].copy_from_slice(&got);
        }
        let b = bound(0);
        let refs: Vec<&wgpu::Buffer> = b.iter().collect();
        let mut rec = gpu.recorder();
        rec.dispatch(&finalize, &refs, k as u64)?;
        rec.submit().await?;
        if prep.slic_zero {
            for (i, &(_, m)) in slabs.iter().enumerate() {
                load(i, &host);
                let b = bound(i);
                let refs: Vec<&wgpu::Buffer> = b.iter().collect();
                let mut rec = gpu.recorder();
                rec.dispatch(&colour_max, &refs, m as u64)?;
                rec.submit().await?;
            }
        }
        iterations += 1;
        if gpu.read(&changed, 20).await?[16..] == [0u8; 4] {
            break;
        }
    }
    Ok(host_segments(&host, prep, iterations))
}

/// The final segments from k-means labels on the host: the connectivity
/// step of the CPU twin when enforced.
fn host_segments(raw: &[u32], prep: &Prepared, iterations: usize) -> Segments {
    let labels = if prep.enforce {
        cpu::connect(raw, prep.dims, prep.min_size, prep.start_label)
    } else {
        plain_labels(raw, prep.start_label)
    };
    let n_segments = count_segments(&labels, prep.start_label);
    Segments {
        labels,
        shape: prep.out_shape.clone(),
        n_segments,
        iterations,
    }
}

/// Buffers of one run, recycled together whatever happens.
struct Buffers<'g> {
    gpu: &'g Gpu,
    list: Vec<wgpu::Buffer>,
}

impl Buffers<'_> {
    async fn get(&mut self, bytes: u64, what: &str) -> Result<wgpu::Buffer> {
        let max = self.gpu.max_binding_size();
        if bytes > max {
            return Err(Error::InvalidInput(format!(
                "the {what} need {bytes} bytes, more than the device's largest binding ({max} bytes); \
                 volumes this large are not chunked by slic yet: use --cpu or a smaller volume"
            )));
        }
        let b = self.gpu.storage(bytes, what).await?;
        self.list.push(b.clone());
        Ok(b)
    }
}

impl Drop for Buffers<'_> {
    fn drop(&mut self) {
        for b in self.list.drain(..) {
            self.gpu.recycle(b);
        }
    }
}

/// The k-means kernels' parameters of `prep` (slab fields set per slab).
fn kparams(prep: &Prepared) -> KParams {
    let g = &prep.grid;
    KParams {
        nx: prep.dims[2] as u32,
        ny: prep.dims[1] as u32,
        nz: 0,
        nc: prep.nc as u32,
        n: 0,
        n_centres: prep.n_centres() as u32,
        start_x: g[2].start as u32,
        start_y: g[1].start as u32,
        start_z: g[0].start as u32,
        step_x: g[2].step as u32,
        step_y: g[1].step as u32,
        step_z: g[0].step as u32,
        count_x: g[2].count as u32,
        count_y: g[1].count as u32,
        count_z: g[0].count as u32,
        win_x: prep.win[2] as u32,
        win_y: prep.win[1] as u32,
        win_z: prep.win[0] as u32,
        radius: RADIUS as u32,
        slic_zero: u32::from(prep.slic_zero),
        use_mask: u32::from(prep.mask.is_some()),
        sx: prep.spacing[2],
        sy: prep.spacing[1],
        sz: prep.spacing[0],
        spatial_weight: prep.spatial_weight,
        scale: prep.scale(),
        inv_scale: 2f32.powi(-prep.shift),
        ratio: prep.ratio,
        z0: 0,
    }
}

/// The slab fields of the k-means parameters: first plane `z0`, `pixels`
/// pixels.
fn slab_params(kp: &KParams, z0: usize, pixels: usize) -> KParams {
    KParams {
        z0: z0 as u32,
        nz: (pixels / (kp.nx as usize * kp.ny as usize)) as u32,
        n: pixels as u32,
        ..*kp
    }
}

/// SLIC on the GPU with the volume resident, in z-slabs that fit a
/// binding each; `input` is what it uploads.
async fn run(gpu: &Gpu, prep: &Prepared, input: GpuInput<'_>) -> Result<Segments> {
    let clock = gpu.host_clock();
    let n = prep.n();
    let k = prep.n_centres();
    let nc = prep.nc;
    let plane = prep.dims[1] * prep.dims[2];
    let mut bufs = Buffers {
        gpu,
        list: Vec::new(),
    };
    // Slabs along z, each within one binding (features: 4·nc bytes per
    // pixel); the centres and their sums are shared by all slabs.
    let per_slab = (gpu.max_binding_size() / (4 * nc as u64)) as usize / plane;
    if per_slab == 0 {
        return Err(Error::InvalidInput(format!(
            "one {}x{} plane of {nc} channel(s) exceeds the device's largest binding ({} bytes); use --cpu",
            prep.dims[1],
            prep.dims[2],
            gpu.max_binding_size()
        )));
    }
    let n_slabs = prep.dims[0].div_ceil(per_slab);
    let depth = prep.dims[0].div_ceil(n_slabs);
    let centres = bufs
        .get(4 * (k * gpu_stride(nc)) as u64, "slic centres")
        .await?;
    let stride = 1 + 2 * (3 + nc);
    let accum = bufs.get(4 * (k * stride) as u64, "slic sums").await?;
    let maxdist = maxdist_buffer(gpu, &mut bufs, prep).await?;
    // [change flag, min key, max key, NaN/inf flags], then one change flag
    // per iteration of a submission.
    let changed = bufs
        .get(16 + 4 * ITERATIONS_PER_SUBMIT as u64, "slic change flags")
        .await?;
    gpu.upload(&centres, bytemuck::cast_slice(&gpu_centres(prep)));
    let mut flags = vec![0u32; 4 + ITERATIONS_PER_SUBMIT];
    flags[1] = u32::MAX;
    gpu.upload(&changed, bytemuck::cast_slice(&flags));
    gpu.host_done("slic upload: centres", clock);
    let kp = kparams(prep);
    struct Slab {
        z0: usize,
        n: usize,
        features: wgpu::Buffer,
        labels: wgpu::Buffer,
        mask: wgpu::Buffer,
        /// The slab's 8-bit RGB (GpuInput::Rgb8).
        rgb: Option<wgpu::Buffer>,
    }
    // Every slab's buffers, then the first submission's recording, then
    // the input.
    let mut slabs = Vec::new();
    for z0 in (0..prep.dims[0]).step_by(depth) {
        let m = depth.min(prep.dims[0] - z0) * plane;
        let rgb = match input {
            GpuInput::Rgb8(_) => Some(
                bufs.get(4 * (3 * m as u64).div_ceil(4), "slic 8-bit RGB")
                    .await?,
            ),
            _ => None,
        };
        let slab = Slab {
            z0,
            n: m,
            features: bufs.get(4 * (m * nc) as u64, "slic features").await?,
            labels: bufs.get(4 * m as u64, "slic labels").await?,
            mask: bufs.get(4 * m.div_ceil(32) as u64, "slic mask").await?,
            rgb,
        };
        if let Some(mk) = &prep.mask {
            let lo = z0 * plane;
            gpu.upload(
                &slab.mask,
                bytemuck::cast_slice(&mask_bits(&mk[lo..lo + m])),
            );
        }
        slabs.push(slab);
    }
    // One uniform per slab (its offset and size), rebuilt when `kp` changes.
    let uniforms = |kp: &KParams| -> Vec<wgpu::Buffer> {
        slabs
            .iter()
            .map(|s| gpu.uniform(&slab_params(kp, s.z0, s.n)))
            .collect()
    };
    let bind = |u: &[wgpu::Buffer], i: usize| -> [wgpu::Buffer; 8] {
        let s = &slabs[i];
        [
            &u[i],
            &s.features,
            &centres,
            &s.labels,
            &accum,
            &maxdist,
            &s.mask,
            &changed,
        ]
        .map(|b| b.clone())
    };
    let u = uniforms(&kp);
    let assign = gpu.pipeline(shaders::SLIC_KMEANS, "assign")?;
    let accumulate = gpu.pipeline(shaders::SLIC_KMEANS, "accumulate")?;
    let finalize = gpu.pipeline(shaders::SLIC_KMEANS, "finalize")?;
    let colour_max = gpu.pipeline(shaders::SLIC_KMEANS, "colour_max")?;
    // Labels to NONE, sums to 0.
    let init = gpu.pipeline(shaders::SLIC_KMEANS, "init")?;
    // The connectivity step on the GPU when one slab holds the volume and
    // its search queue (8 bytes per pixel) fits a binding; otherwise on
    // the host from the k-means labels (the CPU twin's code).
    let gpu_connect = prep.enforce && slabs.len() == 1 && 8 * n as u64 <= gpu.max_binding_size();
    // Several iterations to a submission on small images, where the
    // round trip costs more than an iteration: one change flag each, and
    // the iterations after the first without a change repeat its fixed
    // point (the same labels give the same centres), so the result is
    // skimage's early stop. The rescaling and the first batch share a
    // submission; the NaN/inf flags come back with its change flags.
    let per_submit = if n <= BATCHED_ITERATIONS_MAX_PIXELS {
        ITERATIONS_PER_SUBMIT
    } else {
        1
    };
    // One iteration's dispatches: assign and accumulate over every slab,
    // finalize (which counts the batch's iteration up on the GPU, so the
    // iterations of a batch share these bind groups), then SLICO's colour
    // maxima.
    let slab_binds: Vec<[wgpu::Buffer; 8]> = (0..slabs.len()).map(|i| bind(&u, i)).collect();
    let slab_refs: Vec<Vec<&wgpu::Buffer>> =
        slab_binds.iter().map(|b| b.iter().collect()).collect();
    let row_threads =
        |s: &Slab, lanes: usize| (s.n / plane * prep.dims[1] * prep.dims[2].div_ceil(lanes)) as u64;
    let mut steps: Vec<(&wgpu::ComputePipeline, &[&wgpu::Buffer], u64)> = Vec::new();
    for (s, refs) in slabs.iter().zip(&slab_refs) {
        steps.push((&assign, refs, row_threads(s, ASSIGN_LANES)));
    }
    for (s, refs) in slabs.iter().zip(&slab_refs) {
        steps.push((&accumulate, refs, row_threads(s, 1)));
    }
    steps.push((&finalize, &slab_refs[0], k as u64));
    if prep.slic_zero {
        for (s, refs) in slabs.iter().zip(&slab_refs) {
            steps.push((&colour_max, refs, row_threads(s, 1)));
        }
    }
    // The first submission: the GPU's own features (rescaling or Lab),
    // init and the first batch of iterations.
    let first_count = per_submit.min(prep.max_num_iter);
    let record_first = || -> Result<Recorder<'_>> {
        let mut rec = gpu.recorder();
        if let GpuInput::Rescale(_) = input {
            // skimage's rescaling to [0, 1], then 1 / compactness.
            for entry in ["minmax", "rescale"] {
                let pipeline = gpu.pipeline(shaders::SLIC_KMEANS, entry)?;
                for (s, refs) in slabs.iter().zip(&slab_refs) {
                    rec.dispatch(&pipeline, refs, row_threads(s, 1))?;
                }
            }
        }
        if let Some(table) = &prep.lab_table {
            for s in &slabs {
                let rgb = s
                    .rgb
                    .as_ref()
                    .ok_or_else(|| Error::Device("an 8-bit RGB slab has no buffer".into()))?;
                record_lab(gpu, &mut rec, table, prep.ratio, s.n, rgb, &s.features)?;
            }
        }
        for (s, refs) in slabs.iter().zip(&slab_refs) {
            rec.dispatch(&init, refs, s.n.max(k * stride) as u64)?;
        }
        rec.dispatch_repeated(&steps, first_count as u32)?;
        Ok(rec)
    };
    // Every slab's input through a pooled mapped buffer (a fresh staging
    // buffer of this size per call, `queue.write_buffer`, costs more than
    // the copy), then the upload buffer back to the pool whatever
    // happened. The first slab is copied on the copy threads while this
    // thread records the first submission (the two take about as long;
    // a single thread started for the copy was slower than doing both in
    // turn: BENCHMARKS.md).
    let mut up = gpu.upload_buffer(4 * (depth * plane * nc) as u64);
    let uploaded: Result<Recorder<'_>> = async {
        let mut first = None;
        for s in &slabs {
            let (lo, hi) = (s.z0 * plane, s.z0 * plane + s.n);
            let bytes: &[u8] = match input {
                GpuInput::Features => bytemuck::cast_slice(&prep.features[lo * nc..hi * nc]),
                GpuInput::Rescale(v) => bytemuck::cast_slice(&v[lo..hi]),
                GpuInput::Rgb8(v) => &v[3 * lo..3 * hi],
            };
            if first.is_none() {
                let threads = crate::copies::upload_threads();
                first = Some(
                    gpu.fill_during(&mut up, bytes, threads, async { record_first() })
                        .await??,
                );
            } else {
                gpu.fill(&mut up, bytes).await?;
            }
            let mut rec = gpu.recorder();
            let to = s.rgb.as_ref().unwrap_or(&s.features);
            rec.copy_in(&up, to, bytes.len() as u64);
            rec.submit_refilling(&mut up).await?;
        }
        first.ok_or_else(|| Error::Device("a volume without slabs".into()))
    }
    .await;
    gpu.release_upload(up);
    let first = uploaded?;
    gpu.host_done("slic upload", clock);
    // The labels' host memory is faulted in while the host waits for the
    // GPU, not during the upload: beside the upload's copies it made
    // large volumes markedly slower.
    let labels_out = Prefaulted::new(if gpu_connect { n } else { 0 });
    let clock = gpu.host_clock();
    // The host waits for a batch's change flags only once the next batch
    // is submitted, so the GPU runs the batches back to back; a batch past
    // the early stop repeats its fixed point (at most one batch of wasted
    // work, the same labels). When the connectivity step follows on the
    // GPU, the host records it while the last batches run and reads their
    // flags after its readback.
    let mut iterations = 0;
    let mut submitted = 0;
    let mut stopped = false;
    let mut in_flight: VecDeque<(Pending, usize)> = VecDeque::new();
    let mut first = Some((first, first_count));
    loop {
        while in_flight.len() < 2 && submitted < prep.max_num_iter {
            let (rec, count) = match first.take() {
                Some(batch) => batch,
                None => {
                    let count = per_submit.min(prep.max_num_iter - submitted);
                    // The iteration counter and this batch's change flags
                    // to 0 (the min/max keys and NaN/inf flags stay).
                    gpu.upload_at(&changed, 0, &[0u8; 4]);
                    gpu.upload_at(&changed, 16, &vec![0u8; 4 * count]);
                    let mut rec = gpu.recorder();
                    rec.dispatch_repeated(&steps, count as u32)?;
                    (rec, count)
                }
            };
            submitted += count;
            let flags = [(&changed, 0, flag_bytes(count))];
            in_flight.push_back((rec.submit_with_readback_parts(&flags, None), count));
        }
        if gpu_connect && submitted == prep.max_num_iter {
            break;
        }
        let Some((pending, count)) = in_flight.pop_front() else {
            break;
        };
        let (done, stop) = collect_batch(gpu, pending, count).await?;
        iterations += done;
        if stop {
            stopped = true;
            break;
        }
    }
    gpu.host_done("slic k-means", clock);
    if gpu_connect {
        let clock = gpu.host_clock();
        let (labels, n_segments) =
            connect(gpu, prep, &slabs[0].labels, &mut bufs, labels_out).await?;
        gpu.host_done("slic connectivity", clock);
        // The batches still in flight are done by now (the connectivity
        // step came back after them); past an early stop they are not read.
        if !stopped {
            for (pending, count) in in_flight {
                let (done, stop) = collect_batch(gpu, pending, count).await?;
                iterations += done;
                if stop {
                    break;
                }
            }
        }
        return Ok(Segments {
            labels,
            shape: prep.out_shape.clone(),
            n_segments,
            iterations,
        });
    }
    // Batches submitted past the early stop: nothing to read.
    drop(in_flight);
    let mut raw: Vec<u32> = Vec::with_capacity(n);
    for s in &slabs {
        raw.extend(gpu.read_vec::<u32>(&s.labels, s.n).await?);
    }
    Ok(host_segments(&raw, prep, iterations))
}

/// A k-means batch's change flags once it is done: the iterations it
/// counts and whether it stopped early ([`batch_iterations`]).
async fn collect_batch(gpu: &Gpu, pending: Pending, count: usize) -> Result<(usize, bool)> {
    let words: Vec<u32> = gpu
        .finish_with(pending, |b| Ok(bytemuck::pod_collect_to_vec(b)))
        .await?;
    batch_iterations(&words, count)
}

/// kmeans.wgsl's `maxdist` binding, filled with [`maxdist_words`].
async fn maxdist_buffer(
    gpu: &Gpu,
    bufs: &mut Buffers<'_>,
    prep: &Prepared,
) -> Result<wgpu::Buffer> {
    let words = maxdist_words(prep);
    let maxdist = bufs
        .get(4 * words.len() as u64, "slic colour maxima and ranges")
        .await?;
    gpu.upload(&maxdist, bytemuck::cast_slice(&words));
    Ok(maxdist)
}

/// The words of kmeans.wgsl's `maxdist` binding: each centre's SLICO
/// colour maximum (1.0 to start), then the range of z over each layer of
/// seeds and of y over each row (kmeans.wgsl: layer_word, row_word), from
/// the live seeds; a layer or row without one has the empty range
/// [+inf, 0].
fn maxdist_words(prep: &Prepared) -> Vec<u32> {
    let [cz, cy, _] = [0, 1, 2].map(|a| prep.grid[a].count);
    let k = prep.n_centres();
    let mut words = vec![1f32.to_bits(); k];
    let empty = [f32::INFINITY.to_bits(), 0];
    words.extend(std::iter::repeat_n(empty, cz + cz * cy).flatten());
    let cx = prep.grid[2].count;
    prep.each_seed(|k_seed, [z, y, _], alive| {
        if !alive {
            return;
        }
        let (iz, iy) = (k_seed / (cy * cx), k_seed / cx % cy);
        for (at, v) in [(k + 2 * iz, z), (k + 2 * cz + 2 * (iz * cy + iy), y)] {
            words[at] = words[at].min(v.to_bits());
            words[at + 1] = words[at + 1].max(v.to_bits());
        }
    });
    words
}

/// Floats per centre on the GPU (kmeans.wgsl: stride): z, y, x, then the
/// features, padded to whole vec4s, so that `assign` loads a grey centre's
/// coordinates and feature in one 16-byte load. No alive flag: a dead
/// centre's z is DEAD_Z.
fn gpu_stride(nc: usize) -> usize {
    (3 + nc).div_ceil(4) * 4
}

/// The seeds in the GPU's layout ([`gpu_stride`]).
fn gpu_centres(prep: &Prepared) -> Vec<f32> {
    let stride = gpu_stride(prep.nc);
    let mut out = vec![0f32; prep.n_centres() * stride];
    prep.each_seed(|k, zyx, _| out[k * stride..k * stride + 3].copy_from_slice(&zyx));
    out
}

/// Bytes of the change flags a batch of `count` iterations reads back:
/// [iteration, min key, max key, NaN/inf flags], then one flag each.
fn flag_bytes(count: usize) -> u64 {
    16 + 4 * count as u64
}

/// A batch's change flags read back: the iterations it counts (up to and
/// including the first that changed no label) and whether that early stop
/// came; an error for NaN or inf input (minmax's flags).
fn batch_iterations(words: &[u32], count: usize) -> Result<(usize, bool)> {
    let (Some(&flags), Some(changes)) = (words.get(3), words.get(4..4 + count)) else {
        return Err(Error::Device("the k-means flags came back short".into()));
    };
    if flags & 1 != 0 {
        return Err(nan_error());
    }
    if flags & 2 != 0 {
        return Err(inf_error());
    }
    Ok(match changes.iter().position(|&f| f == 0) {
        Some(j) => (j + 1, true),
        None => (count, false),
    })
}

/// k-means iterations recorded per submission on images of up to
/// [`BATCHED_ITERATIONS_MAX_PIXELS`] pixels (larger ones submit each
/// iteration alone: an iteration past the early stop costs more there than
/// a round trip).
const ITERATIONS_PER_SUBMIT: usize = 5;
const BATCHED_ITERATIONS_MAX_PIXELS: usize = 1 << 22;

/// Counters of blocked searches, one per round modulo 4.
const ROUNDS: u32 = 4;

/// Search rounds recorded per submission of the connectivity step (a
/// multiple of [`ROUNDS`]; with the pieces' 9 passes within
/// MAX_TIMED_PASSES).
const ROUNDS_PER_BATCH: u32 = 8 * ROUNDS;

/// Search rounds of the first batch at least, and at most: each round
/// costs GPU time (a few microseconds with its `advance`), many volumes
/// resolve in a few (binary_blobs, coins and camera in 8), and a further
/// batch costs a round trip (astronaut needs 28, so it gains from a larger
/// first batch, while small volumes that resolve in 8 lose by it; the
/// first batch is sized from the previous call).
const FIRST_ROUNDS: u32 = 2 * ROUNDS;
const MAX_FIRST_ROUNDS: u32 = 8 * ROUNDS;

/// The rounds the last connectivity step needed (a multiple of ROUNDS,
/// within FIRST_ROUNDS..=MAX_FIRST_ROUNDS): the next call's first batch,
/// so that a series of similar images resolves in one round trip. Only
/// the time depends on it, never the labels.
static FIRST_ROUNDS_HINT: AtomicU32 = AtomicU32::new(FIRST_ROUNDS);

/// The connectivity step on the GPU, recorded while the k-means batches
/// submitted before it run; returns the final labels (in `labels_out`)
/// and their number of distinct values.
async fn connect(
    gpu: &Gpu,
    prep: &Prepared,
    labels: &wgpu::Buffer,
    bufs: &mut Buffers<'_>,
    labels_out: Prefaulted<i32>,
) -> Result<(Vec<i32>, usize)> {
    let mut labels_out = Some(labels_out);
    let n = prep.n();
    let n_blocks = n.div_ceil(BLOCK);
    let clock = gpu.host_clock();
    let parent = bufs.get(4 * n as u64, "slic pieces").await?;
    let size = bufs.get(4 * n as u64, "slic piece sizes").await?;
    // Per root, then 4 blocked-search counters, the largest label + 1, the
    // next round's number, the number of kept pieces, a spare word and a
    // bit per pixel for the small pieces waiting (connect.wgsl).
    let waiting_words = n.div_ceil(32) as u64;
    let state = bufs
        .get(4 * (n as u64 + 8 + waiting_words), "slic piece states")
        .await?;
    let out = bufs.get(4 * n as u64, "slic piece labels").await?;
    let blocks = bufs.get(4 * (n_blocks as u64 + 1), "slic blocks").await?;
    let queue = bufs.get(8 * n as u64, "slic search queue").await?;
    let params = gpu.uniform(&CParams {
        nx: prep.dims[2] as u32,
        ny: prep.dims[1] as u32,
        nz: prep.dims[0] as u32,
        n: n as u32,
        min_size: prep.min_size.min(u32::MAX as usize) as u32,
        start_label: prep.start_label,
        n_blocks: n_blocks as u32,
    });
    let mut rec = gpu.recorder();
    let refs = [
        &params, labels, &parent, &size, &state, &blocks, &out, &queue,
    ];
    for (entry, threads) in [
        ("init", n as u64),
        ("unite_faces", n as u64),
        ("flatten", n as u64),
        ("measure", n as u64),
        ("count_kept", (n_blocks * 256) as u64),
        ("scan_blocks", 256),
        ("rank_pieces", (n_blocks * 256) as u64),
        ("find_candidates", n as u64),
    ] {
        let pipeline = gpu.pipeline(shaders::SLIC_CONNECT, entry)?;
        rec.dispatch(&pipeline, &refs, threads)?;
    }
    // Then search rounds until none is blocked by an unresolved earlier
    // piece, FIRST_ROUNDS in the same submission as the pieces, then
    // ROUNDS_PER_BATCH to a submission: chains of small pieces are short once a
    // piece waits only for the candidate it needs (28 rounds on astronaut).
    // Batches are multiples of 4, so the last round of each uses counter 3,
    // which holds that round's count alone: zero means the last round was
    // blocked nowhere, so every piece is resolved.
    let clear = gpu.pipeline(shaders::SLIC_CONNECT, "clear_pending")?;
    let bfs = gpu.pipeline(shaders::SLIC_CONNECT, "bfs_round")?;
    let advance = gpu.pipeline(shaders::SLIC_CONNECT, "advance")?;
    let gather = gpu.pipeline(shaders::SLIC_CONNECT, "gather")?;
    // Every pixel's label, and the largest label + 1 and the number of
    // kept pieces copied next to counter 3 (state words n + 3 ... n + 6).
    // gather does nothing while counter 3 is not zero, so it can follow a
    // batch of rounds before the host knows whether they resolved every
    // piece.
    let gather_into = |rec: &mut Recorder<'_>| -> Result<()> {
        rec.dispatch(&gather, &refs, n as u64)?;
        rec.copy(&blocks, 4 * n_blocks as u64, &state, 4 * (n as u64 + 6), 4);
        Ok(())
    };
    let tail_at = 4 * (n as u64 + u64::from(ROUNDS) - 1);
    let first_rounds = FIRST_ROUNDS_HINT.load(Ordering::Relaxed);
    rec.dispatch(&clear, &refs, 4)?;
    rec.dispatch_repeated(
        &[(&bfs, &refs, waiting_words), (&advance, &refs, 1)],
        first_rounds,
    )?;
    // gather in this submission too (it waits for the rounds to resolve
    // every piece), read back with the labels where they fit a pooled
    // readback buffer: when the first batch resolves every piece (the
    // usual case, sized from the previous call), one round trip serves the
    // whole call. Later batches read the counts alone (labels that are
    // not final would cross the bus for nothing), and
    // the labels follow once resolved.
    let whole = n <= ONE_READBACK_MAX_PIXELS;
    gather_into(&mut rec)?;
    // Submits `rec` and reads back the tail of the search state and, with
    // `with_labels`, the labels, kept once they are final.
    let submit_and_read = async |rec: Recorder<'_>,
                                 with_labels: bool,
                                 labels_out: &mut Option<Prefaulted<i32>>|
           -> Result<(Vec<u32>, Option<Vec<i32>>)> {
        let mut parts: Vec<(&wgpu::Buffer, u64, u64)> = vec![(&state, tail_at, 20)];
        if with_labels {
            parts.push((&parent, 0, 4 * n as u64));
        }
        let sizes: Vec<u64> = parts.iter().map(|p| p.2).collect();
        let pending = rec.submit_with_readback_parts(&parts, None);
        gpu.finish_with(pending, |bytes| {
            let mut parts = split_parts(bytes, &sizes)?.into_iter();
            let mut next = || {
                parts
                    .next()
                    .ok_or_else(|| Error::Device("a readback part is missing".into()))
            };
            let tail: Vec<u32> = bytemuck::pod_collect_to_vec(next()?);
            let labels = match tail.first() {
                Some(0) if with_labels => {
                    let room = labels_out.take().map_or_else(Vec::new, Prefaulted::take);
                    Some(vec_from_bytes(room, next()?))
                }
                _ => None,
            };
            Ok((tail, labels))
        })
        .await
    };
    gpu.host_done("slic connectivity: recorded", clock);
    let (mut tail, mut labels) = submit_and_read(rec, whole, &mut labels_out).await?;
    let mut round = 1 + first_rounds;
    while tail.first() != Some(&0) {
        if round > 1 << 20 {
            return Err(Error::Device(
                "the connectivity step did not converge".into(),
            ));
        }
        let mut rec = gpu.recorder();
        rec.dispatch_repeated(
            &[(&bfs, &refs, waiting_words), (&advance, &refs, 1)],
            ROUNDS_PER_BATCH,
        )?;
        round += ROUNDS_PER_BATCH;
        gather_into(&mut rec)?;
        (tail, labels) = submit_and_read(rec, false, &mut labels_out).await?;
    }
    gpu.host_done("slic connectivity: pieces and searches", clock);
    let labels = match labels {
        Some(labels) => labels,
        None => {
            let clock = gpu.host_clock();
            let room = labels_out.take().map_or_else(Vec::new, Prefaulted::take);
            let labels = gpu.read_vec_into(&parent, 0, room, n).await?;
            gpu.host_done("slic connectivity: labels to the host", clock);
            labels
        }
    };
    // [blocked in the last round, largest label + 1, next round, kept
    // pieces, last round that resolved a piece]
    let (Some(&top), Some(&kept), Some(&needed)) = (tail.get(1), tail.get(3), tail.get(4)) else {
        return Err(Error::Device(
            "the connectivity counts came back short".into(),
        ));
    };
    FIRST_ROUNDS_HINT.store(
        needed
            .div_ceil(ROUNDS)
            .saturating_mul(ROUNDS)
            .clamp(FIRST_ROUNDS, MAX_FIRST_ROUNDS),
        Ordering::Relaxed,
    );
    let top = i64::from(top) - 1;
    let kept = i64::from(kept);
    // Kept piece j has label start + j; small pieces take one of those
    // labels or start + kept (a counter value not yet given to a piece).
    let count = kept + i64::from(top == i64::from(prep.start_label) + kept);
    Ok((labels, count as usize))
}

/// Volumes of up to this many pixels read their labels back with the
/// connectivity counts of the first batch of search rounds (a 64 MB
/// readback buffer).
const ONE_READBACK_MAX_PIXELS: usize = 1 << 24;

#[cfg(test)]
mod tests {
    use super::*;

    /// The 8-bit RGB path (features from the bytes through a table) gives
    /// the float64 path's features bit for bit: the same values as 16-bit
    /// samples take the general path.
    #[test]
    fn rgb8_features_equal_the_general_path() {
        let (h, w) = (37, 29);
        let bytes: Vec<u8> = (0..h * w * 3)
            .map(|i| ((i * 7919 + i / 3 * 104_729) % 251 + 2) as u8)
            .collect();
        let signed: Vec<i8> = bytes.iter().map(|&b| b.wrapping_sub(128) as i8).collect();
        let wide: Vec<u16> = bytes.iter().map(|&b| u16::from(b)).collect();
        let wide_signed: Vec<i16> = signed.iter().map(|&b| i16::from(b)).collect();
        for compactness in [10.0, 0.37] {
            let p = SlicParams {
                compactness,
                ..SlicParams::default()
            };
            let shape = [h, w, 3];
            let features = |s: Samples<'_>| prepare(s, &shape, &p, false).map(|r| r.features);
            let (a, b) = (features(Samples::U8(&bytes)), features(Samples::U16(&wide)));
            assert!(matches!((&a, &b), (Ok(x), Ok(y)) if x == y && x.len() == h * w * 3));
            let (a, b) = (
                features(Samples::I8(&signed)),
                features(Samples::I16(&wide_signed)),
            );
            assert!(matches!((&a, &b), (Ok(x), Ok(y)) if x == y && x.len() == h * w * 3));
        }
    }
}

#[cfg(test)]
mod wgsl_layouts {
    use super::*;
    use crate::layout::mirror_layout;

    mirror_layout!(
        k_params_matches_wgsl,
        KParams,
        crate::shaders::SLIC_KMEANS,
        "Params",
        [
            nx,
            ny,
            nz,
            nc,
            n,
            n_centres,
            start_x,
            start_y,
            start_z,
            step_x,
            step_y,
            step_z,
            count_x,
            count_y,
            count_z,
            win_x,
            win_y,
            win_z,
            radius,
            slic_zero,
            use_mask,
            sx,
            sy,
            sz,
            spatial_weight,
            scale,
            inv_scale,
            ratio,
            z0
        ]
    );
    mirror_layout!(
        lab_params_matches_wgsl,
        LabParams,
        crate::shaders::SLIC_LAB,
        "Params",
        [n, ratio, pad, linear]
    );
    mirror_layout!(
        c_params_matches_wgsl,
        CParams,
        crate::shaders::SLIC_CONNECT,
        "Params",
        [nx, ny, nz, n, min_size, start_label, n_blocks]
    );
}

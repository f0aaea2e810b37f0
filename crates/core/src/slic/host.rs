//! Production host code of SLIC: the features and seeds prepared as
//! skimage.segmentation.slic prepares them before its Cython loop, and the
//! final labels from the k-means labels (`connect`: the connectivity step
//! on the host, for volumes whose k-means ran beyond one binding;
//! `mask_seeds`: the seeds of a masked image, scikit-image's
//! `_get_mask_centroids`).

mod colour;
mod connect;
mod grid;
mod mask_seeds;

pub use connect::connect;
pub(crate) use grid::{Axis, regular_grid, search_radius};

use super::{DEAD_Z, NONE, Segments, SlicParams};
use crate::error::{Error, Remedy, Result, Setting};
use crate::filters::{Boundary, Filter, Mode};
use crate::keys::Samples;

/// Everything the k-means and connectivity steps need, prepared on the host.
#[derive(Clone, Debug)]
pub(crate) struct Prepared {
    /// (depth, height, width); depth 1 for 2-D images.
    pub dims: [usize; 3],
    pub nc: usize,
    /// Pixel-major features (nc per pixel), already divided by compactness.
    pub features: Vec<f32>,
    pub mask: Option<Vec<bool>>,
    /// The seed grid; with a mask (`free_seeds`), one row of all the
    /// centres ([1, 1, K]), which only sizes kmeans.wgsl's ranges.
    pub grid: [Axis; 3],
    /// A masked image's seeds (z, y, x) from `mask_seeds`, anywhere: the
    /// k-means runs a position-only pass first (skimage's
    /// `update_centroids`) and finds the centres near a pixel through
    /// cells of the window step (`cells`, counts per axis).
    pub free_seeds: Option<Vec<[f32; 3]>>,
    pub cells: [usize; 3],
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
    /// Distances whose float32 sums are equal are compared by the exact
    /// sums of their spatial and colour parts (cpu.rs: `Dist`): skimage
    /// works in float64 for input other than float32, where a large colour
    /// term no longer swallows the spatial one.
    pub exact_ties: bool,
    /// 8-bit RGB whose Lab features the GPU computes (shaders/slic/lab.wgsl;
    /// `features` is empty): each byte value's gamma expansion.
    pub lab_table: Option<Vec<f32>>,
    pub max_num_iter: usize,
    pub slic_zero: bool,
    pub start_label: i32,
    pub enforce: bool,
    pub min_size: usize,
    /// skimage's cap on a piece: its search stops at this many pixels
    /// (at least one), and the rest of the superpixel starts new pieces.
    pub max_size: usize,
    pub out_shape: Vec<usize>,
}

impl Prepared {
    pub fn n(&self) -> usize {
        self.dims.iter().product()
    }
    pub fn n_centres(&self) -> usize {
        match &self.free_seeds {
            Some(s) => s.len(),
            None => self.grid.iter().map(|a| a.count).product(),
        }
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

    /// Calls `f(k, [z, y, x], alive)` for each seed, in index order: the
    /// grid's seeds (no mask) all live; a masked image's free seeds are
    /// dead only where they can win no pixel (`mask_seeds::seeds`). A dead
    /// centre's z is DEAD_Z, which no window holds (the GPU's `assign`
    /// tests the z window instead of loading a flag).
    pub(crate) fn each_seed(&self, mut f: impl FnMut(usize, [f32; 3], bool)) {
        if let Some(seeds) = &self.free_seeds {
            for (k, &zyx) in seeds.iter().enumerate() {
                f(k, zyx, zyx[0] != DEAD_Z);
            }
            return;
        }
        let g = &self.grid;
        let mut k = 0;
        for iz in 0..g[0].count {
            let z = g[0].start + iz * g[0].step;
            for iy in 0..g[1].count {
                let y = g[1].start + iy * g[1].step;
                for ix in 0..g[2].count {
                    let x = g[2].start + ix * g[2].step;
                    f(k, [z as f32, y as f32, x as f32], true);
                    k += 1;
                }
            }
        }
    }

    pub fn scale(&self) -> f32 {
        2f32.powi(self.shift)
    }

    /// How far along axis `a` (z, y, x) from the seed of a pixel's own
    /// cell (`own_cell`) a centre that sits on its own seed can be and
    /// still hold the pixel in its window: the pixel lies within
    /// `own_offset` of its seed, and a window holds pixels less than
    /// `2·win + 1` from its centre ([`search_radius`] adds the drift).
    pub(crate) fn reach(&self, a: usize) -> f32 {
        (self.grid[a].own_offset(self.dims[a]) + 2 * self.win[a] + 1) as f32
    }
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

/// Calls `f(i, sample i as float64)` for every sample in order (the
/// values of [`to_f64`], without the copy).
fn each_f64(samples: Samples<'_>, f: &mut dyn FnMut(usize, f64)) {
    fn go<T: Copy>(v: &[T], to: impl Fn(T) -> f64, f: &mut dyn FnMut(usize, f64)) {
        for (i, &x) in v.iter().enumerate() {
            f(i, to(x));
        }
    }
    match samples {
        Samples::U8(v) => go(v, f64::from, f),
        Samples::I8(v) => go(v, f64::from, f),
        Samples::U16(v) => go(v, f64::from, f),
        Samples::I16(v) => go(v, f64::from, f),
        Samples::U32(v) => go(v, f64::from, f),
        Samples::I32(v) => go(v, f64::from, f),
        Samples::F32(v) => go(v, f64::from, f),
        Samples::F64(v) => go(v, |x| x, f),
        Samples::U64(v) => go(v, |x| x as f64, f),
        Samples::I64(v) => go(v, |x| x as f64, f),
    }
}

/// No smoothing and no Lab on the host, channel axis last or none: the
/// features can come straight from the samples (`direct_f32`).
fn direct_features(shape: &[usize], p: &SlicParams) -> bool {
    if p.sigma.iter().any(|&s| s != 0.0) {
        return false;
    }
    let Some(a) = p.channel_axis else {
        return true;
    };
    let ndim = shape.len() as isize;
    let nc = shape.last().copied().unwrap_or(0);
    (a == -1 || a == ndim - 1) && !(p.convert2lab != Some(false) && nc == 3)
}

/// The features of `direct_features` inputs: each sample rescaled (0 where
/// masked out), times `ratio`, as the float64 path computes them.
fn direct_f32(
    samples: Samples<'_>,
    len: usize,
    rescale: Rescale,
    mask: Option<&[bool]>,
    nc: usize,
    ratio: f64,
) -> Vec<f32> {
    let mut out = Vec::with_capacity(len);
    let r = ratio as f32;
    each_f64(samples, &mut |i, x| {
        let v = if mask.is_none_or(|m| m[i / nc]) {
            rescale.apply(x)
        } else {
            0.0
        };
        out.push(if rescale.f32_input {
            v as f32 * r
        } else {
            (v * ratio) as f32
        });
    });
    out
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

pub(super) fn inf_error() -> Error {
    Error::InvalidInput(
        "the image contains infinite values (scikit-image refuses unmasked inf too); mask those pixels out or replace them".into(),
    )
}

pub(super) fn nan_error() -> Error {
    Error::InvalidInput(
        "the image contains NaN (scikit-image refuses unmasked NaN too); mask those pixels out or replace them".into(),
    )
}

/// Validates the input and parameters and prepares features and seeds as
/// skimage.segmentation.slic does before its Cython loop.
///
/// `on_gpu`: float32 grayscale input without smoothing or mask is rescaled
/// by the GPU itself, and 8-bit RGB is converted to Lab by the GPU
/// (`features` stays empty; see `gpu::run`).
pub(crate) fn prepare(
    samples: Samples<'_>,
    shape: &[usize],
    p: &SlicParams,
    on_gpu: bool,
) -> Result<Prepared> {
    p.validate()?;
    check_len(samples, shape)?;
    let fast = float_gray(samples, p);
    let rgb8 = colour::rgb8_input(samples, shape, p);
    // Features straight from the samples: no float64 copy of the image.
    let direct = fast.is_some() || rgb8.is_some() || direct_features(shape, p);
    let (spatial, nc, values) = channel_last(samples, shape, p, direct)?;
    let is_2d = spatial.len() == 2;
    let dims = if is_2d {
        [1, spatial[0], spatial[1]]
    } else {
        [spatial[0], spatial[1], spatial[2]]
    };
    let n = pixel_count(dims, nc, shape)?;
    let mask = checked_mask(p, n)?;
    let gpu_rescale = fast.is_some() && on_gpu;
    let from_samples = direct && fast.is_none() && rgb8.is_none();
    let range = value_range(
        fast,
        rgb8,
        gpu_rescale,
        |visit| {
            if from_samples {
                each_f64(samples, visit);
            } else {
                values.iter().enumerate().for_each(|(i, &v)| visit(i, v));
            }
        },
        mask.as_deref(),
        nc,
    )?;
    let rescale = Rescale {
        lo: range.0,
        hi: range.1,
        f32_input: matches!(samples, Samples::F32(_)),
    };
    // In place, without a second fresh vector of the image's size.
    let mut img = values;
    rescale_in_place(&mut img, rescale, mask.as_deref(), nc);
    let ratio = 1.0 / p.compactness;
    let colour = colour::convert(samples, rgb8, &mut img, nc, p, rescale, ratio, on_gpu)?;
    let (spacing, sigma) = spacing_and_sigma(p, is_2d)?;
    smooth(&mut img, nc, dims, sigma)?;
    let in_mask = mask
        .as_ref()
        .map_or(n, |m| m.iter().filter(|&&v| v).count());
    let (grid, win, spatial_weight, free_seeds) = match &mask {
        Some(m) => {
            let s = mask_seeds::seeds(m, dims, p.n_segments, p.channel_axis.is_some());
            let one = Axis {
                start: 0,
                step: 1,
                count: 1,
            };
            let row = Axis {
                count: s.zyx.len(),
                ..one
            };
            ([one, one, row], s.win, s.spatial_weight, Some(s.zyx))
        }
        None => {
            let (grid, win, sw) = seed_grid(dims, p.n_segments)?;
            (grid, win, sw, None)
        }
    };
    let cells = [0, 1, 2].map(|a| dims[a].div_ceil(win[a]));
    let features: Vec<f32> = if let Some(f) = colour.rgb8_features {
        f
    } else if gpu_rescale {
        Vec::new()
    } else if let Some(v) = fast {
        rescale.features_f32(v, ratio)
    } else if from_samples {
        direct_f32(samples, n * nc, rescale, mask.as_deref(), nc, ratio)
    } else if rescale.f32_input && !colour.lab {
        let r = ratio as f32;
        img.iter().map(|&v| v as f32 * r).collect()
    } else {
        img.iter().map(|&v| (v * ratio) as f32).collect()
    };
    drop(img);
    let shift = fixed_point_shift(&features, gpu_rescale, colour.lab_table.is_some(), p)?;
    let mut prep = Prepared {
        dims,
        nc,
        features,
        mask,
        grid,
        free_seeds,
        cells,
        win,
        spacing: spacing.map(|v| v as f32),
        spatial_weight,
        shift,
        ratio: ratio as f32,
        gpu_rescale,
        exact_ties: !matches!(samples, Samples::F32(_)),
        lab_table: colour.lab_table,
        max_num_iter: p.max_num_iter,
        slic_zero: p.slic_zero,
        start_label: p.start_label,
        enforce: p.enforce_connectivity,
        min_size: 0,
        max_size: 0,
        out_shape: spatial,
    };
    // skimage: the mask's (or image's) pixels over the number of centres.
    let segment_size = in_mask as f64 / prep.n_centres().max(1) as f64;
    prep.min_size = (p.min_size_factor * segment_size) as usize;
    prep.max_size = (p.max_size_factor * segment_size) as usize;
    Ok(prep)
}

/// The shape must hold the samples, and at least one.
fn check_len(samples: Samples<'_>, shape: &[usize]) -> Result<()> {
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
    Ok(())
}

/// Float32 grayscale without mask or smoothing: its features come straight
/// from the input, without a float64 copy (large volumes).
fn float_gray<'a>(samples: Samples<'a>, p: &SlicParams) -> Option<&'a [f32]> {
    match samples {
        Samples::F32(v)
            if p.channel_axis.is_none()
                && p.mask.is_none()
                && p.sigma.iter().all(|&s| s == 0.0) =>
        {
            Some(v)
        }
        _ => None,
    }
}

/// The spatial shape, the number of channels and the values as float64
/// with the channel axis last (empty where `fast` or `rgb8` inputs are
/// read directly).
fn channel_last(
    samples: Samples<'_>,
    shape: &[usize],
    p: &SlicParams,
    direct: bool,
) -> Result<(Vec<usize>, usize, Vec<f64>)> {
    let ndim = shape.len();
    let Some(a) = p.channel_axis else {
        if !(2..=3).contains(&ndim) {
            return Err(Error::InvalidInput(format!(
                "a grayscale image must be 2-D or 3-D, got shape {shape:?}"
            )));
        }
        let values = if direct { Vec::new() } else { to_f64(samples) };
        return Ok((shape.to_vec(), 1, values));
    };
    if ndim == 2 {
        return Err(Error::beyond(
            format!(
                "invalid channel_axis: {a} makes a 2-D image multichannel, which scikit-image \
                 does not support; a grayscale image has no channel axis"
            ),
            &[Remedy::Set {
                param: "channel_axis",
                value: Setting::Nothing,
            }],
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
    let v = if direct { Vec::new() } else { to_f64(samples) };
    let nc = shape[axis];
    let mut sp = shape.to_vec();
    sp.remove(axis);
    if axis == ndim - 1 {
        // Already channel-last: no copy (a pass over a fresh 6 MB vector
        // took milliseconds on the benchmark host).
        return Ok((sp, nc, v));
    }
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
    Ok((sp, nc, moved))
}

/// The number of pixels, which must be at least 1 and below NONE.
fn pixel_count(dims: [usize; 3], nc: usize, shape: &[usize]) -> Result<usize> {
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
    Ok(n)
}

/// The mask, which must have a value per pixel and select one at least.
fn checked_mask(p: &SlicParams, n: usize) -> Result<Option<Vec<bool>>> {
    let Some(m) = &p.mask else {
        return Ok(None);
    };
    if m.len() != n {
        return Err(Error::InvalidInput(format!(
            "the mask has {} values but the image has {n} pixels (the mask must have the image's spatial shape)",
            m.len()
        )));
    }
    if !m.iter().any(|&v| v) {
        return Err(Error::InvalidInput("the mask selects no pixel".into()));
    }
    Ok(Some(m.clone()))
}

/// The smallest and largest unmasked value (skimage rescales over them);
/// NaN is an error, and so is inf unless the GPU rescales (it checks).
fn value_range(
    fast: Option<&[f32]>,
    rgb8: Option<Samples<'_>>,
    gpu_rescale: bool,
    values: impl FnOnce(&mut dyn FnMut(usize, f64)),
    mask: Option<&[bool]>,
    nc: usize,
) -> Result<(f64, f64)> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
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
    let mut nan = false;
    values(&mut |i, v| {
        if mask.is_none_or(|m| m[i / nc]) {
            nan |= v.is_nan();
            lo = lo.min(v);
            hi = hi.max(v);
        }
    });
    if nan {
        return Err(nan_error());
    }
    if !gpu_rescale && (lo.is_infinite() || hi.is_infinite()) {
        return Err(inf_error());
    }
    Ok((lo, hi))
}

/// skimage's rescaling to [0, 1] over the range of the unmasked values.
#[derive(Clone, Copy)]
pub(super) struct Rescale {
    lo: f64,
    hi: f64,
    /// skimage keeps float32 input in float32.
    f32_input: bool,
}

impl Rescale {
    pub(super) fn apply(self, v: f64) -> f64 {
        if self.f32_input {
            let (v, lo, hi) = (v as f32, self.lo as f32, self.hi as f32);
            let d = v - lo;
            (if hi != lo { d / (hi - lo) } else { d }) as f64
        } else {
            let d = v - self.lo;
            if self.hi != self.lo {
                d / (self.hi - self.lo)
            } else {
                d
            }
        }
    }

    /// Features of float32 grayscale straight from the input: rescaled in
    /// float32, times `ratio`.
    fn features_f32(self, v: &[f32], ratio: f64) -> Vec<f32> {
        let (r, lo, hi) = (ratio as f32, self.lo as f32, self.hi as f32);
        v.iter()
            .map(|&x| {
                let d = x - lo;
                (if hi != lo { d / (hi - lo) } else { d }) * r
            })
            .collect()
    }
}

/// Rescales `img` in place; masked-out values may fall outside [0, 1] and
/// may be NaN/inf: they never enter a centre, but are set to 0 to keep them
/// finite for the fixed-point sums.
fn rescale_in_place(img: &mut [f64], rescale: Rescale, mask: Option<&[bool]>, nc: usize) {
    for v in img.iter_mut() {
        *v = rescale.apply(*v);
    }
    if let Some(m) = mask {
        for (i, v) in img.iter_mut().enumerate() {
            if !m[i / nc] {
                *v = 0.0;
            }
        }
    }
}

/// The spacing and the Gaussian's sigma (in pixels) per axis (z, y, x).
fn spacing_and_sigma(p: &SlicParams, is_2d: bool) -> Result<([f64; 3], [f64; 3])> {
    let ndim = if is_2d { 2 } else { 3 };
    let spacing: [f64; 3] = match &p.spacing {
        None => [1.0; 3],
        Some(s) if is_2d && s.len() == 2 => [1.0, s[0], s[1]],
        Some(s) if !is_2d && s.len() == 3 => [s[0], s[1], s[2]],
        Some(s) => {
            return Err(Error::param(
                "spacing",
                format!(
                    "{} values for a {ndim}-D image (give one per spatial axis)",
                    s.len()
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
                format!("{k} values for a {ndim}-D image (give one, or one per spatial axis)"),
            ));
        }
    };
    Ok((spacing, sigma))
}

/// skimage's Gaussian pre-smoothing of each channel (mode reflect,
/// truncate 4).
fn smooth(img: &mut [f64], nc: usize, dims: [usize; 3], sigma: [f64; 3]) -> Result<()> {
    if sigma.iter().all(|&s| s <= 0.0) {
        return Ok(());
    }
    let filter = Filter::gaussian(3, &sigma, 4.0)?;
    let boundary = Boundary {
        mode: Mode::Reflect,
        cval: 0.0,
    };
    for c in 0..nc {
        crate::filters::host::apply_1d_in_place(&filter, img, dims, nc, c, boundary)?;
    }
    Ok(())
}

/// The seed grid of an image without mask (skimage's regular_grid of
/// n_segments), skimage's window half-widths and its spatial weight.
fn seed_grid(dims: [usize; 3], n_segments: usize) -> Result<([Axis; 3], [usize; 3], f32)> {
    let g = regular_grid(dims, n_segments);
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
    Ok((grid, win, spatial_weight))
}

/// The fixed-point exponent of the feature sums: the largest k with
/// max|feature|·2^k ≤ 2^30.
fn fixed_point_shift(
    features: &[f32],
    gpu_rescale: bool,
    gpu_lab: bool,
    p: &SlicParams,
) -> Result<i32> {
    let ratio = 1.0 / p.compactness;
    // Rescaled values lie in [0, 1] (the maximum maps to exactly 1): the
    // GPU-rescaled features' largest magnitude is the ratio itself (or 0
    // for a constant image, whose sums are 0 whatever the scale).
    let max_abs = if gpu_rescale {
        ratio as f32
    } else if gpu_lab {
        (colour::LAB_BOUND * ratio) as f32
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
    Ok(if max_abs > 0.0 {
        (30 - (max_abs.log2().floor() as i32) - 1).clamp(-100, 100)
    } else {
        0
    })
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

/// The final segments from k-means labels on the host, the connectivity
/// step ([`connect`]) when enforced.
pub(crate) fn segments(raw: Vec<u32>, prep: &Prepared, iterations: usize) -> Segments {
    let labels = if prep.enforce {
        connect(
            raw,
            prep.dims,
            prep.min_size,
            prep.max_size,
            prep.start_label,
        )
    } else {
        plain_labels(&raw, prep.start_label)
    };
    let n_segments = count_segments(&labels, prep.start_label);
    Segments {
        labels,
        shape: prep.out_shape.clone(),
        n_segments,
        iterations,
    }
}

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

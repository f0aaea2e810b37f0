//! X-ray diffraction spot finding: DIALS' `dispersion` and
//! `dispersion_extended` thresholds (dials/algorithms/image/threshold/local.h),
//! pixel for pixel, then spots = 4-connected strong pixels measured as DIALS
//! does (centroid of pixel centres, its variance).
//!
//! Exactness on the GPU (shaders/spots/dispersion.wgsl): window sums are
//! exact integers (count and Σv in u32, Σv² in two u32 words). DIALS decides
//! in f64; the GPU evaluates each comparison in f32 with an error margin
//! (see `MARGIN` below) and only where the two sides are closer than that
//! margin does it leave the pixel *undecided*, appending its exact sums to
//! a list. The host then decides those pixels with DIALS' f64 formulas
//! (`host`), so every decision is DIALS' f64 decision. Comparisons with an
//! exactly zero right-hand side (all-zero windows, sigma 0) are decided
//! with integers on the GPU.
//!
//! The family's files: this one (parameters, results, the public GPU
//! functions), `gpu` (buffers and dispatch), `frames` (frames in flight,
//! sums read back, the exact slow path), `host` (the host's decisions and
//! whole frames decided on the host), `series` (series fed batch by batch)
//! and `cpu` (the reference, for the tests and `--cpu` only).

pub mod cpu;
mod frames;
mod gpu;
pub mod host;
mod series;

pub use series::{CompressedFrames, FrameBatch, FrameDone, SeriesResult, SpotSeries};

use crate::engine::Gpu;
use crate::error::{Error, Result};
use crate::segment::label;
use frames::{Slots, run_series};
use gpu::{check_window, frame_bytes, setup};

/// Pixels at or above 2^24 counts are left out of the window sums (DIALS' BIG).
pub(crate) const BIG: i64 = 1 << 24;

/// The two DIALS thresholding algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Dispersion,
    DispersionExtended,
}

named_enum!(Algorithm);

impl std::str::FromStr for Algorithm {
    type Err = Error;
    fn from_str(s: &str) -> Result<Algorithm> {
        Algorithm::parse(s)
    }
}

impl Algorithm {
    /// DIALS' name of the algorithm.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Dispersion => "dispersion",
            Algorithm::DispersionExtended => "dispersion_extended",
        }
    }

    pub fn parse(s: &str) -> Result<Algorithm> {
        match s {
            "dispersion" => Ok(Algorithm::Dispersion),
            "dispersion_extended" => Ok(Algorithm::DispersionExtended),
            _ => Err(Error::param(
                "algorithm",
                format!("'{s}' (use dispersion_extended, DIALS' default, or dispersion)"),
            )),
        }
    }
}

/// The detector gain: none (DIALS' formulas without gain), one number for
/// every pixel, or a per-pixel map (DIALS' `_w_gain` formulas). As a
/// parameter: null, a number, or an array of one number per pixel.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum Gain {
    #[default]
    None,
    Scalar(f64),
    Map(Vec<f64>),
}

impl Gain {
    pub(crate) fn at(&self, i: usize) -> Option<f64> {
        match self {
            Gain::None => None,
            Gain::Scalar(g) => Some(*g),
            Gain::Map(m) => Some(m[i]),
        }
    }
}

/// DIALS' spot-finding parameters, with DIALS' defaults.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SpotOptions {
    pub algorithm: Algorithm,
    /// Half-widths (rows, columns) of the local window: 3,3 is 7 x 7.
    pub kernel_size: [usize; 2],
    pub sigma_background: f64,
    pub sigma_strong: f64,
    pub min_local: usize,
    pub global_threshold: f64,
    pub gain: Gain,
    pub min_spot_size: usize,
    pub max_spot_size: usize,
}

impl Default for SpotOptions {
    fn default() -> Self {
        SpotOptions {
            algorithm: Algorithm::DispersionExtended,
            kernel_size: [3, 3],
            sigma_background: 6.0,
            sigma_strong: 3.0,
            min_local: 2,
            global_threshold: 0.0,
            gain: Gain::None,
            min_spot_size: 3,
            max_spot_size: 1000,
        }
    }
}

impl SpotOptions {
    /// The checks DIALS asserts, as clear errors.
    pub fn validate(&self) -> Result<()> {
        let [ky, kx] = self.kernel_size;
        if ky == 0 || kx == 0 || ky > 1000 || kx > 1000 {
            return Err(Error::param(
                "kernel-size",
                format!("{ky},{kx} (half-widths from 1 to 1000; DIALS' default is 3,3)"),
            ));
        }
        for (name, v) in [
            ("sigma-background", self.sigma_background),
            ("sigma-strong", self.sigma_strong),
            ("global-threshold", self.global_threshold),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(Error::param(
                    name,
                    format!("{v} (give a finite number >= 0)"),
                ));
            }
        }
        let window = (2 * ky + 1) * (2 * kx + 1);
        // DIALS: min_count <= 0 means the whole window; otherwise 1 < n <= window.
        if self.min_local != 0 && (self.min_local < 2 || self.min_local > window) {
            return Err(Error::param(
                "min-local",
                format!(
                    "{} (give 2 to {window}, the window's size, or 0 for the whole window)",
                    self.min_local
                ),
            ));
        }
        match &self.gain {
            Gain::Scalar(g) if !(g.is_finite() && *g > 0.0) => {
                return Err(Error::param(
                    "gain",
                    format!("{g} (give a finite number > 0)"),
                ));
            }
            Gain::Map(m) => {
                if let Some((i, g)) = m
                    .iter()
                    .enumerate()
                    .find(|(_, g)| !(g.is_finite() && **g > 0.0))
                {
                    return Err(Error::param(
                        "gain",
                        format!(
                            "the gain map holds {g} at pixel {i} (every gain must be finite and > 0)"
                        ),
                    ));
                }
            }
            _ => {}
        }
        if self.min_spot_size > self.max_spot_size {
            return Err(Error::param(
                "min-spot-size",
                format!(
                    "{} exceeds max-spot-size {}",
                    self.min_spot_size, self.max_spot_size
                ),
            ));
        }
        Ok(())
    }

    /// DIALS' min_count: 0 stands for the whole window.
    pub(crate) fn min_count(&self) -> i64 {
        let [ky, kx] = self.kernel_size;
        if self.min_local == 0 {
            ((2 * ky + 1) * (2 * kx + 1)) as i64
        } else {
            self.min_local as i64
        }
    }
}

/// Detector counts of one or more frames, as read: 16-bit and 32-bit data
/// travel to the GPU packed as they are.
#[derive(Clone, Copy, Debug)]
pub enum Counts<'a> {
    U16(&'a [u16]),
    U32(&'a [u32]),
    /// Signed counts (CBF): negative values mark gaps and bad pixels.
    I32(&'a [i32]),
}

impl<'a> Counts<'a> {
    pub fn len(&self) -> usize {
        match self {
            Counts::U16(v) => v.len(),
            Counts::U32(v) => v.len(),
            Counts::I32(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: usize) -> i64 {
        match self {
            Counts::U16(v) => i64::from(v[i]),
            Counts::U32(v) => i64::from(v[i]),
            Counts::I32(v) => i64::from(v[i]),
        }
    }

    pub fn slice(&self, r: std::ops::Range<usize>) -> Counts<'a> {
        match *self {
            Counts::U16(v) => Counts::U16(&v[r]),
            Counts::U32(v) => Counts::U32(&v[r]),
            Counts::I32(v) => Counts::I32(&v[r]),
        }
    }
}

pub(crate) fn check_frame(
    len: usize,
    shape: [usize; 2],
    mask: Option<&[bool]>,
    options: &SpotOptions,
) -> Result<()> {
    options.validate()?;
    let [h, w] = shape;
    if h.checked_mul(w) != Some(len) || len == 0 {
        return Err(Error::InvalidInput(format!(
            "a frame of shape {h} x {w} does not match its {len} values (frames must be non-empty 2-D images)"
        )));
    }
    if h > 65535 || w > 65535 {
        return Err(Error::InvalidInput(format!(
            "a frame of {h} x {w} pixels: spot finding takes frames up to 65535 pixels a side"
        )));
    }
    if let Some(m) = mask
        && m.len() != len
    {
        return Err(Error::InvalidInput(format!(
            "the mask has {} pixels but a frame has {len} ({h} x {w})",
            m.len()
        )));
    }
    if let Gain::Map(g) = &options.gain
        && g.len() != len
    {
        return Err(Error::InvalidInput(format!(
            "the gain map has {} pixels but a frame has {len} ({h} x {w})",
            g.len()
        )));
    }
    Ok(())
}

// ---- Spots.

/// Exact per-spot sums over its pixels (coordinates z, row, col).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpotSums {
    pub n: u64,
    pub sum_v: u128,
    pub sum_v2: u128,
    pub lo: [u64; 3],
    pub hi: [u64; 3],
    pub sum_vc: [u128; 3],
    pub sum_vc2: [u128; 3],
}

impl SpotSums {
    pub(crate) fn add(&mut self, c: [u64; 3], v: u64) {
        if self.n == 0 {
            self.lo = c;
            self.hi = c;
        }
        self.n += 1;
        let v = u128::from(v);
        self.sum_v += v;
        self.sum_v2 += v * v;
        for (a, &ca) in c.iter().enumerate() {
            self.lo[a] = self.lo[a].min(ca);
            self.hi[a] = self.hi[a].max(ca);
            let ca = u128::from(ca);
            self.sum_vc[a] += v * ca;
            self.sum_vc2[a] += v * ca * ca;
        }
    }

    /// Adds the sums of another part of the same spot.
    pub(crate) fn merge(&mut self, o: &SpotSums) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = o.clone();
            return;
        }
        self.n += o.n;
        self.sum_v += o.sum_v;
        self.sum_v2 += o.sum_v2;
        for a in 0..3 {
            self.lo[a] = self.lo[a].min(o.lo[a]);
            self.hi[a] = self.hi[a].max(o.hi[a]);
            self.sum_vc[a] += o.sum_vc[a];
            self.sum_vc2[a] += o.sum_vc2[a];
        }
    }
}

/// One spot, as DIALS' spot finder reports it. Axes are (x = column,
/// y = row, z = frame); centroids are of pixel centres (pixel (r, c) has
/// its centre at (c + 0.5, r + 0.5)), weighted by counts.
#[derive(Clone, Debug, PartialEq)]
pub struct Spot {
    pub id: usize,
    /// bounding box: x0, x1, y0, y1, z0, z1 (ends exclusive), as DIALS' bbox.
    pub bbox: [u64; 6],
    pub n_pixels: u64,
    pub intensity: f64,
    pub centroid: [f64; 3],
    /// DIALS' xyzobs.px.variance: the unbiased standard error² of the centroid.
    pub variance: [f64; 3],
}

impl Spot {
    fn from_sums(id: usize, s: &SpotSums) -> Spot {
        let w = s.sum_v as f64;
        let w2 = s.sum_v2 as f64;
        let mut centroid = [0.0; 3];
        let mut variance = [0.0; 3];
        // Axis order of the output: x (col, axis 2), y (row, axis 1), z (axis 0).
        for (out, a) in [2usize, 1, 0].into_iter().enumerate() {
            if s.sum_v == 0 {
                // No weight: DIALS' centroid is undefined; give the plain mean.
                centroid[out] = (s.lo[a] + s.hi[a]) as f64 / 2.0 + 0.5;
                continue;
            }
            // Σv(c+½) and Σv(c+½)² from the exact integer sums.
            let s1 = s.sum_vc[a] as f64 + 0.5 * w;
            let s2 = s.sum_vc2[a] as f64 + s.sum_vc[a] as f64 + 0.25 * w;
            let mean = s1 / w;
            let delta_sq = (s2 - s1 * mean).max(0.0);
            centroid[out] = mean;
            let denom = w * w - w2;
            variance[out] = if denom > 0.0 {
                delta_sq * w / denom / w
            } else {
                0.0
            };
        }
        Spot {
            id,
            bbox: [
                s.lo[2],
                s.hi[2] + 1,
                s.lo[1],
                s.hi[1] + 1,
                s.lo[0],
                s.hi[0] + 1,
            ],
            n_pixels: s.n,
            intensity: w,
            centroid,
            variance,
        }
    }
}

/// Strong pixels and spots of a stack of frames.
#[derive(Clone, Debug, PartialEq)]
pub struct SpotResult {
    /// Strong-pixel mask, frames x rows x columns.
    pub strong: Vec<bool>,
    pub n_strong: u64,
    /// Spots within [min_spot_size, max_spot_size] pixels, numbered from 1
    /// in the order of their first pixel.
    pub spots: Vec<Spot>,
    /// Connected regions before the size filters.
    pub n_regions: usize,
}

impl SpotResult {
    pub(crate) fn from_sums(strong: Vec<bool>, sums: &[SpotSums], o: &SpotOptions) -> SpotResult {
        let n_strong = strong.iter().filter(|&&s| s).count() as u64;
        let spots = sums
            .iter()
            .filter(|s| s.n >= o.min_spot_size as u64 && s.n <= o.max_spot_size as u64)
            .enumerate()
            .map(|(i, s)| Spot::from_sums(i + 1, s))
            .collect();
        SpotResult {
            strong,
            n_strong,
            spots,
            n_regions: sums.len(),
        }
    }
}

// ---- The public GPU functions.

/// Strong pixels of one frame on the GPU (DIALS' definition, exactly).
pub async fn strong_pixels(
    gpu: &Gpu,
    counts: Counts<'_>,
    shape: [usize; 2],
    mask: Option<&[bool]>,
    options: &SpotOptions,
) -> Result<Vec<bool>> {
    let r = find_spots(gpu, counts, [1, shape[0], shape[1]], mask, options, false).await?;
    Ok(r.strong)
}

/// Strong pixels and spots of `shape` = [frames, rows, cols] on the GPU.
/// See [`find_spots_with`]; this one also returns the strong-pixel mask.
pub async fn find_spots(
    gpu: &Gpu,
    counts: Counts<'_>,
    shape: [usize; 3],
    mask: Option<&[bool]>,
    options: &SpotOptions,
    three_d: bool,
) -> Result<SpotResult> {
    find_spots_with(gpu, counts, shape, mask, options, three_d, true).await
}

/// Strong pixels and spots of a series on the GPU. Per frame the
/// thresholds, the 4-connected labelling and the exact spot sums run in one
/// submission and only the sums come back (plus the strong-pixel mask when
/// `want_mask`, or for `three_d`, where the strong pixels of all frames are
/// then labelled 6-connected through the stack). Two frames are in flight:
/// the upload of one overlaps the kernels of the other. A frame with
/// undecided pixels (rare) is redone on the exact slow path.
pub async fn find_spots_with(
    gpu: &Gpu,
    counts: Counts<'_>,
    shape: [usize; 3],
    mask: Option<&[bool]>,
    options: &SpotOptions,
    three_d: bool,
    want_mask: bool,
) -> Result<SpotResult> {
    spots_of(gpu, counts, shape, 0, mask, options, three_d, want_mask).await
}

/// [`find_spots_with`] (2-D) on frames `first_frame..` of a longer series:
/// spot z coordinates are those of the whole series, summed as the whole
/// series sums them, so the spots of contiguous frame ranges, joined range
/// after range, are bit for bit those of one call on the whole series (the
/// CLI's `--adapters` runs one range per GPU).
pub async fn find_spots_from(
    gpu: &Gpu,
    counts: Counts<'_>,
    shape: [usize; 3],
    first_frame: usize,
    mask: Option<&[bool]>,
    options: &SpotOptions,
    want_mask: bool,
) -> Result<SpotResult> {
    spots_of(
        gpu,
        counts,
        shape,
        first_frame,
        mask,
        options,
        false,
        want_mask,
    )
    .await
}

#[allow(clippy::too_many_arguments)]
async fn spots_of(
    gpu: &Gpu,
    counts: Counts<'_>,
    shape: [usize; 3],
    z0: usize,
    mask: Option<&[bool]>,
    options: &SpotOptions,
    three_d: bool,
    want_mask: bool,
) -> Result<SpotResult> {
    let [nz, h, w] = shape;
    let n = h * w;
    if nz == 0 || counts.len() != nz * n {
        return Err(Error::InvalidInput(format!(
            "{} values do not fill {nz} frames of {h} x {w}",
            counts.len()
        )));
    }
    check_frame(n, [h, w], mask, options)?;
    check_window(options)?;
    let s = setup(h, w, options, mask);
    let want_mask = want_mask || three_d;
    let frame_len = frame_bytes(counts.slice(0..n)).len().div_ceil(4) * 4;
    // Two frames in flight, three upload buffers (see run_series).
    let mut slots = Slots::open(gpu, &s, nz.min(2), nz.min(2) + 1, frame_len as u64).await?;
    let result = run_series(gpu, &mut slots, &s, counts, nz, z0, want_mask).await;
    slots.close(gpu);
    let (strong, mut sums) = result?;
    if three_d {
        let l = label::label(gpu, &strong, &[nz, h, w], 1).await?;
        sums = vec![SpotSums::default(); l.count];
        for (i, &lab) in l.labels.iter().enumerate() {
            if lab > 0 {
                let (z, r, c) = (z0 + i / n, (i / w) % h, i % w);
                let v = counts.get(i).max(0) as u64;
                sums[lab as usize - 1].add([z as u64, r as u64, c as u64], v);
            }
        }
    }
    let mut r = SpotResult::from_sums(strong, &sums, options);
    if !want_mask {
        r.n_strong = sums.iter().map(|s| s.n).sum();
    }
    Ok(r)
}

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
//! a list. The host then decides those pixels with the very f64 functions
//! of the CPU reference (`decide` here), so every decision is DIALS' f64
//! decision. Comparisons with an exactly zero right-hand side (all-zero
//! windows, sigma 0) are decided with integers on the GPU.

pub mod cpu;
mod gpu;
mod series;

pub use gpu::{find_spots, find_spots_from, find_spots_with, strong_pixels};
pub use series::{FrameBatch, FrameDone, SeriesResult, SpotSeries};

use crate::error::{Error, Result};

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

// ---- DIALS' decisions in f64, operation by operation as local.h writes them.
// Window sums arrive as exact integers and are converted to f64 once, as
// DIALS' (exact, for integer data) summed-area tables give them.

/// dispersion_extended's first test: a valid pixel is not background.
pub(crate) fn dispersion_nonbackground(
    m: i64,
    x: i64,
    y: i128,
    gain: Option<f64>,
    o: &SpotOptions,
) -> bool {
    if m < o.min_count() || x < 0 {
        return false;
    }
    let (m, x, y) = (m as f64, x as f64, y as f64);
    let nsig_b = o.sigma_background;
    match gain {
        None => {
            let a = m * y - x * x - x * (m - 1.0);
            let c = x * nsig_b * (2.0 * (m - 1.0)).sqrt();
            a > c
        }
        Some(g) => {
            let a = m * y - x * x;
            let c = g * x * (m - 1.0 + nsig_b * (2.0 * (m - 1.0)).sqrt());
            a > c
        }
    }
}

/// The `dispersion` algorithm's test of a valid pixel of value `v`.
pub(crate) fn dispersion_strong(
    m: i64,
    x: i64,
    y: i128,
    v: i64,
    gain: Option<f64>,
    o: &SpotOptions,
) -> bool {
    if !(m >= o.min_count() && x >= 0 && (v as f64) > o.global_threshold) {
        return false;
    }
    let (m, x, y, src) = (m as f64, x as f64, y as f64, v as f64);
    let (nsig_b, nsig_s) = (o.sigma_background, o.sigma_strong);
    let b = m * src - x;
    match gain {
        None => {
            let a = m * y - x * x - x * (m - 1.0);
            let c = x * nsig_b * (2.0 * (m - 1.0)).sqrt();
            let d = nsig_s * (x * m).sqrt();
            a > c && b > d
        }
        Some(g) => {
            let a = m * y - x * x;
            let c = g * x * (m - 1.0 + nsig_b * (2.0 * (m - 1.0)).sqrt());
            let d = nsig_s * (g * x * m).sqrt();
            a > c && b > d
        }
    }
}

/// dispersion_extended's final test of a candidate pixel, with the sums
/// (m, x) over the background pixels of the widened window.
pub(crate) fn final_strong(m: i64, x: i64, v: i64, gain: Option<f64>, o: &SpotOptions) -> bool {
    if !(m >= 0 && x >= 0) {
        return false;
    }
    let (m, x, src) = (m as f64, x as f64, v as f64);
    let global = src > o.global_threshold;
    let mean = if m >= 2.0 { x / m } else { 0.0 };
    let local = match gain {
        None => src >= mean + o.sigma_strong * mean.sqrt(),
        Some(g) => src >= mean + o.sigma_strong * (g * mean).sqrt(),
    };
    global && local
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

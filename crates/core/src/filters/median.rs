//! Median filter (`scipy.ndimage.median_filter`) and outlier removal (Mantid
//! Imaging's `remove_outlier`, tomopy's `remove_outlier`).
//!
//! Both select on ordered integer keys ([`crate::keys`]), so the output is
//! exactly one of the input values (or the constant), whatever the dtype:
//! f64 is compared as 64-bit keys, never rounded to f32. Output dtype equals
//! input dtype, as in scipy.
//!
//! NaN follows Mantid Imaging (scipy leaves it undefined): a NaN neighbour is
//! taken as -inf, and a NaN element stays NaN. A NaN `cval` (mode constant)
//! makes every output whose window reaches outside the array NaN: scipy's
//! result there is undefined too (its selection compares NaN), and it gives
//! NaN only at some of these outputs, never elsewhere.
//!
//! Small footprints (up to [`NETWORK_MAX`] elements) are compiled into the
//! shader as a pruned sorting network; larger ones use a bitwise search over
//! the window. Shader: `shaders/filters/median*.wgsl`; CPU reference: [`cpu`].

use std::fmt::Write as _;
use std::str::FromStr;

use bytemuck::{Pod, Zeroable};

use crate::chunk::{self, Shape3, shape3};
use crate::engine::{Gpu, Recorder};
use crate::error::{Error, Result};
use crate::keys::{Keys, NEG_INF_KEY_F32, NEG_INF_KEY_F64, SampleVec, Samples, unkey_f32};
use crate::shaders;
use crate::stream::{
    self, MemorySink, MemorySource, Progress, STREAM_CHUNK_BYTES, SliceSink, SliceSource,
    StreamSpec,
};

use super::{Boundary, Mode};

/// Largest footprint compiled into a sorting network (7×7 and 3×3×3 fit).
pub const NETWORK_MAX: usize = 49;

/// Largest footprint accepted (a 15×15×15 cube is 3375 elements).
const FOOTPRINT_MAX: usize = 1 << 16;

/// Largest extent of a footprint axis.
pub const EXTENT_MAX: usize = 1025;

/// The neighbourhood of a rank filter: offsets from the output element, in
/// scipy's raster order, with the centre of each axis at `extent // 2`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Footprint {
    pub ndim: usize,
    /// Offsets (z, y, x) of the selected elements.
    pub offsets: Vec<[i32; 3]>,
}

impl Footprint {
    /// `size=`: a full box of the given extent per axis (one value for all axes,
    /// or one per axis, axis 0 first).
    pub fn size(ndim: usize, size: &[usize]) -> Result<Footprint> {
        let extents = match size.len() {
            1 => vec![size[0]; ndim],
            n if n == ndim => size.to_vec(),
            n => {
                return Err(Error::param(
                    "size",
                    format!("{n} values for a {ndim}-D array (give one value or one per axis)"),
                ));
            }
        };
        // Checked before the mask is allocated: a huge --size must be an
        // error, not gigabytes of mask (or an abort).
        if let Some(&n) = extents.iter().find(|&&n| n == 0 || n > EXTENT_MAX) {
            return Err(Error::param(
                "size",
                format!(
                    "{n} (each extent must be 1..={EXTENT_MAX}: a window of at most \
                     {FOOTPRINT_MAX} elements is what the median can select from)"
                ),
            ));
        }
        let count = extents
            .iter()
            .try_fold(1usize, |acc, &n| acc.checked_mul(n))
            .filter(|&c| c <= FOOTPRINT_MAX)
            .ok_or_else(|| {
                Error::param(
                    "size",
                    format!(
                        "{extents:?} gives more than {FOOTPRINT_MAX} elements per window, \
                         the largest the median can select from (use a smaller --size)"
                    ),
                )
            })?;
        Footprint::from_mask(ndim, &vec![true; count], &extents)
    }

    /// `footprint=`: a boolean array with one axis per array axis.
    pub fn from_mask(ndim: usize, mask: &[bool], shape: &[usize]) -> Result<Footprint> {
        if !(1..=3).contains(&ndim) {
            return Err(Error::InvalidInput(format!(
                "arrays of {ndim} dimensions are not supported; gpuscope filters 1-D, 2-D and 3-D arrays"
            )));
        }
        if shape.len() != ndim {
            return Err(Error::param(
                "footprint",
                format!(
                    "{} axes for a {ndim}-D array (give one extent per array axis)",
                    shape.len()
                ),
            ));
        }
        if shape.iter().any(|&n| n == 0 || n > EXTENT_MAX) {
            return Err(Error::param(
                "size",
                format!("{shape:?} (each extent must be 1..={EXTENT_MAX})"),
            ));
        }
        let count: usize = shape.iter().product();
        if count != mask.len() {
            return Err(Error::param(
                "footprint",
                format!("{} values for shape {shape:?}", mask.len()),
            ));
        }
        let selected = mask.iter().filter(|&&m| m).count();
        if selected == 0 {
            return Err(Error::param(
                "footprint",
                "no element selected (a footprint needs at least one true value)",
            ));
        }
        if selected > FOOTPRINT_MAX {
            return Err(Error::param(
                "size",
                format!("{selected} elements per window; the largest supported is {FOOTPRINT_MAX}"),
            ));
        }
        let mut s3 = [1usize; 3];
        s3[3 - ndim..].copy_from_slice(shape);
        let mut offsets = Vec::with_capacity(selected);
        for z in 0..s3[0] {
            for y in 0..s3[1] {
                for x in 0..s3[2] {
                    if mask[(z * s3[1] + y) * s3[2] + x] {
                        let o = |i: usize, a: usize| i as i32 - (s3[a] / 2) as i32;
                        offsets.push([o(z, 0), o(y, 1), o(x, 2)]);
                    }
                }
            }
        }
        Ok(Footprint { ndim, offsets })
    }

    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// scipy's median rank: element `n // 2` of the sorted window.
    pub fn rank(&self) -> usize {
        self.len() / 2
    }

    /// Largest |offset| per axis (z, y, x): the halo a chunk needs.
    pub fn reach(&self) -> Shape3 {
        [0, 1, 2].map(|a| {
            self.offsets
                .iter()
                .map(|o| o[a].unsigned_abs() as usize)
                .max()
                .unwrap_or(0)
        })
    }
}

/// Which outliers `remove_outliers` replaces by the local median.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outliers {
    /// Mantid Imaging: `x - median > diff`.
    Bright,
    /// Mantid Imaging: `median - x > diff`.
    Dark,
    /// Both of the above.
    Both,
    /// tomopy `remove_outlier`: bright only, `x - median >= diff`.
    Tomopy,
}

impl FromStr for Outliers {
    type Err = Error;
    fn from_str(s: &str) -> Result<Outliers> {
        match s {
            "bright" => Ok(Outliers::Bright),
            "dark" => Ok(Outliers::Dark),
            "both" => Ok(Outliers::Both),
            "tomopy" => Ok(Outliers::Tomopy),
            other => Err(Error::param(
                "mode",
                format!("'{other}' (expected bright, dark, both or tomopy)"),
            )),
        }
    }
}

named_enum!(Outliers);

/// The names of [`Outliers`]' values, default first.
pub const OUTLIERS: [&str; 4] = ["bright", "dark", "both", "tomopy"];

impl Outliers {
    pub fn name(self) -> &'static str {
        OUTLIERS[self.code() as usize - 1]
    }

    fn code(self) -> u32 {
        match self {
            Outliers::Bright => 1,
            Outliers::Dark => 2,
            Outliers::Both => 3,
            Outliers::Tomopy => 4,
        }
    }
}

/// The parameters of an outlier removal (`remove_outliers` in the
/// catalogue): Mantid Imaging's `diff` (required), `size` and `mode`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutlierRemoval {
    /// No default: NaN stands for "not given" (and fails `validate`).
    pub diff: f64,
    pub size: usize,
    #[serde(rename = "mode")]
    pub outliers: Outliers,
}

impl Default for OutlierRemoval {
    fn default() -> Self {
        OutlierRemoval {
            diff: f64::NAN,
            size: 3,
            outliers: Outliers::Bright,
        }
    }
}

impl OutlierRemoval {
    /// The parameters, checked.
    pub fn new(diff: f64, size: usize, outliers: Outliers) -> Result<OutlierRemoval> {
        let r = OutlierRemoval {
            diff,
            size,
            outliers,
        };
        r.validate()?;
        Ok(r)
    }

    pub fn validate(&self) -> Result<()> {
        let (diff, size) = (self.diff, self.size);
        if !(diff.is_finite() && diff > 0.0) {
            return Err(Error::param(
                "diff",
                format!("{diff} (must be a positive number, as in Mantid Imaging)"),
            ));
        }
        if size == 0 || size > EXTENT_MAX {
            return Err(Error::param(
                "size",
                format!("{size} (must be 1..={EXTENT_MAX})"),
            ));
        }
        Ok(())
    }

    /// The median footprint: `size × size` in each 2-D slice (Mantid filters
    /// stacks slice by slice), `size` for 1-D arrays.
    pub fn footprint(&self, ndim: usize) -> Result<Footprint> {
        let size: Vec<usize> = (0..ndim)
            .map(|a| if ndim == 3 && a == 0 { 1 } else { self.size })
            .collect();
        Footprint::size(ndim, &size)
    }

    /// The boundary Mantid uses for the median: reflect.
    pub fn boundary() -> Boundary {
        Boundary {
            mode: Mode::Reflect,
            cval: 0.0,
        }
    }
}

/// `x - m > diff` (or `>=` for tomopy) on keys of `dtype`, as numpy computes
/// it: in f32 for f32, in f64 for f64, exactly for integers (numpy would wrap
/// around for unsigned dtypes; gpuscope does not). `x > m` is required.
fn exceeds(dtype: Samples<'_>, x: u64, m: u64, r: &OutlierRemoval) -> bool {
    let tomopy = r.outliers == Outliers::Tomopy;
    match dtype {
        Samples::F32(_) => {
            let d = unkey_f32(x as u32) - unkey_f32(m as u32);
            let t = r.diff as f32;
            if tomopy { d >= t } else { d > t }
        }
        Samples::F64(_) => {
            let d = crate::keys::unkey_f64(x) - crate::keys::unkey_f64(m);
            if tomopy { d >= r.diff } else { d > r.diff }
        }
        // Keys of integers differ exactly by the difference of the values.
        _ => {
            let d = i128::from(x) - i128::from(m);
            if tomopy {
                d >= r.diff.ceil() as i128
            } else {
                d > r.diff.floor() as i128
            }
        }
    }
}

/// The outlier decision for one element, on keys: the output key.
fn outlier_key(dtype: Samples<'_>, x: u64, m: u64, r: &OutlierRemoval) -> u64 {
    if dtype.is_float() && x == 0 {
        return x; // NaN stays NaN
    }
    let bright = x > m && exceeds(dtype, x, m, r);
    let dark = m > x && exceeds(dtype, m, x, r);
    let replace = match r.outliers {
        Outliers::Bright | Outliers::Tomopy => bright,
        Outliers::Dark => dark,
        Outliers::Both => bright || dark,
    };
    if replace { m } else { x }
}

/// Key of the constant for `mode = constant`: cval converted into the dtype
/// (NaN selects as -inf, like NaN samples; every window that holds it then
/// gives NaN, see [`nan_band`]).
fn cval_key(input: Samples<'_>, boundary: Boundary) -> Result<u64> {
    if boundary.mode != Mode::Constant {
        return Ok(0);
    }
    let key = input
        .key_of_value(boundary.cval)
        .map_err(|e| Error::param("cval", e))?;
    Ok(key.unwrap_or(if input.wide() {
        NEG_INF_KEY_F64
    } else {
        u64::from(NEG_INF_KEY_F32)
    }))
}

fn check_input(input: Samples<'_>, shape: &[usize], footprint: &Footprint) -> Result<Shape3> {
    let s = shape3(shape)?;
    if shape.len() != footprint.ndim {
        return Err(Error::InvalidInput(format!(
            "a {}-D footprint applied to a {}-D array",
            footprint.ndim,
            shape.len()
        )));
    }
    if s.iter().product::<usize>() != input.len() {
        return Err(Error::InvalidInput(format!(
            "{} values for shape {shape:?}",
            input.len()
        )));
    }
    Ok(s)
}

// ---------------------------------------------------------------- GPU path

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
        return run_f32(gpu, v, s, footprint, boundary, removal, out).await;
    }
    let result = run(gpu, input, shape, footprint, boundary, removal).await?;
    output.copy_from(&result)
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
    output: &mut [f32],
) -> Result<()> {
    let mut source = MemorySource::new(bytemuck::cast_slice::<f32, u32>(input), shape);
    let mut sink = MemorySink::new(bytemuck::cast_slice_mut::<f32, u32>(output));
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
        None,
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
        run_f32(gpu, v, s, footprint, boundary, removal, &mut out).await?;
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
                None,
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
                None,
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
        gpu, dtype, s, footprint, boundary, None, source, sink, progress, None,
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
        None,
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
        Some((words, repeats)),
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
    resident: Option<(&[T], usize)>,
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
    let source_text = if network {
        let template = match dtype {
            Samples::F32(_) => shaders::MEDIAN_F32,
            _ if wide => shaders::MEDIAN64,
            _ => shaders::MEDIAN32,
        };
        network_source(footprint, template, word as usize)
    } else if wide {
        shaders::MEDIAN64.to_string()
    } else {
        shaders::MEDIAN32.to_string()
    };
    let entry = if network {
        "median_network"
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
        Samples::F32(_) => Some(shaders::MEDIAN_F32_QUADS),
        _ => Some(shaders::MEDIAN32_QUADS),
    };
    let first_entry = match grid_entry {
        _ if rows_3x3 => "median_3x3_rows",
        Some(e) => e,
        None => entry,
    };
    gpu.pipeline(&source_text, first_entry)?;
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
            let pipeline = gpu.pipeline(&source_text, "median_3x3_rows")?;
            rec.dispatch_grid(&pipeline, &buffers, extent_3x3)?;
            return Ok(true);
        }
        match grid_entry {
            Some(e) if rec.grid_fits(extent) => {
                rec.dispatch_grid(&gpu.pipeline(&source_text, e)?, &buffers, extent)?
            }
            _ => rec.dispatch(
                &gpu.pipeline(&source_text, entry)?,
                &buffers,
                core.iter().product::<usize>() as u64,
            )?,
        }
        Ok(true)
    };
    // In and out buffers of two chunks in flight.
    let max_elements = (gpu.max_binding_size() / word)
        .min(gpu.memory_budget() / (4 * word))
        .min(STREAM_CHUNK_BYTES / word);
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
    let outcome = match resident {
        Some((data, repeats)) => stream::time_resident(gpu, spec, data, &kernel, repeats).await,
        None => stream::run(gpu, spec, source, sink, &kernel, max_elements, progress)
            .await
            .map(|()| None),
    };
    if let Some(o) = offsets {
        gpu.recycle(o);
    }
    outcome
}

/// Where a NaN cval reaches: per axis (z, y, x), the outputs closer than
/// `lo` to the start or `hi` to the end have a window element outside.
fn nan_band(
    dtype: Samples<'_>,
    boundary: Boundary,
    footprint: &Footprint,
) -> Option<[[usize; 2]; 3]> {
    if boundary.mode != Mode::Constant || !boundary.cval.is_nan() || !dtype.is_float() {
        return None;
    }
    Some([0, 1, 2].map(|a| {
        let lo = footprint.offsets.iter().map(|o| o[a]).min().unwrap_or(0);
        let hi = footprint.offsets.iter().map(|o| o[a]).max().unwrap_or(0);
        [(-lo).max(0) as usize, hi.max(0) as usize]
    }))
}

/// Whether output `p` of an array of shape `s` lies in the band.
fn in_band(band: &[[usize; 2]; 3], s: Shape3, p: [usize; 3]) -> bool {
    (0..3).any(|a| p[a] < band[a][0] || p[a] + band[a][1] >= s[a])
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

/// One step of a selection network on variables `v{a}`, `v{b}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// `v{a}, v{b} = min, max`
    Exchange(usize, usize),
    /// `v{a} = min(v{a}, v{b})`
    Min(usize, usize),
    /// `v{b} = max(v{a}, v{b})`
    Max(usize, usize),
}

/// Steps that leave element `rank` of `n` inputs (sorted ascending) in the
/// returned variable: Batcher's odd-even merge sort on the next power of two,
/// with the padding wires (+inf) folded away and the steps the output does
/// not depend on pruned.
fn selection_network(n: usize, rank: usize) -> (Vec<Step>, usize) {
    let p = n.next_power_of_two();
    let mut wire: Vec<Option<usize>> = (0..p).map(|i| (i < n).then_some(i)).collect();
    let mut steps = Vec::new();
    let mut half = 1;
    while half < p {
        let mut k = half;
        while k >= 1 {
            let mut j = k % half;
            while j + k < p {
                for i in 0..k.min(p - j - k) {
                    if (i + j) / (2 * half) == (i + j + k) / (2 * half) {
                        let (lo, hi) = (i + j, i + j + k);
                        match (wire[lo], wire[hi]) {
                            (_, None) => {}
                            (None, Some(_)) => wire.swap(lo, hi),
                            (Some(a), Some(b)) => steps.push((a, b)),
                        }
                    }
                }
                j += 2 * k;
            }
            k /= 2;
        }
        half *= 2;
    }
    let out = wire[rank].unwrap_or(0);
    let mut needed = vec![false; n];
    needed[out] = true;
    let mut kept = Vec::new();
    for &(a, b) in steps.iter().rev() {
        match (needed[a], needed[b]) {
            (true, true) => kept.push(Step::Exchange(a, b)),
            (true, false) => {
                kept.push(Step::Min(a, b));
                needed[b] = true;
            }
            (false, true) => {
                kept.push(Step::Max(a, b));
                needed[a] = true;
            }
            (false, false) => {}
        }
    }
    kept.reverse();
    (kept, out)
}

/// Workgroup memory a tile may use: WebGPU's guaranteed minimum.
const TILE_BYTES: usize = 16384;

/// The footprint's reach below and above the centre per axis (z, y, x).
fn reach(footprint: &Footprint) -> ([i32; 3], [i32; 3]) {
    let lo = [0, 1, 2].map(|a| footprint.offsets.iter().map(|o| -o[a]).max().unwrap_or(0));
    let hi = [0, 1, 2].map(|a| footprint.offsets.iter().map(|o| o[a]).max().unwrap_or(0));
    (lo, hi)
}

/// Footprints up to this many elements run without a tile: a 3x3 reads
/// its inputs from the L1 cache faster than from a tile, while a 7x7 is
/// faster with the tile (measured on 2048² f32; BENCHMARKS.md).
const TILE_MIN_ELEMENTS: usize = 10;

/// The (x, y, z) extent of the input a grid workgroup's outputs read, when
/// the footprint is large enough to gain from a tile and the tile fits
/// [`TILE_BYTES`] with keys of `key_bytes`.
fn tile_extent(footprint: &Footprint, key_bytes: usize) -> Option<[usize; 3]> {
    if footprint.len() < TILE_MIN_ELEMENTS {
        return None;
    }
    let (lo, hi) = reach(footprint);
    let span = |a: usize| (lo[a].max(0) + hi[a].max(0)) as usize;
    let [gx, gy, gz] = crate::engine::GRID_WORKGROUP.map(|g| g as usize);
    let extent = [gx + span(2), gy + span(1), gz + span(0)];
    (extent.iter().product::<usize>() * key_bytes <= TILE_BYTES).then_some(extent)
}

/// The min/max steps of a selection network on variables `v0..`.
fn write_steps(f: &mut String, steps: &[Step]) {
    for s in steps {
        match *s {
            Step::Exchange(a, b) => {
                let _ = writeln!(
                    f,
                    "    {{ let t = key_min(v{a}, v{b}); v{b} = key_max(v{a}, v{b}); v{a} = t; }}"
                );
            }
            Step::Min(a, b) => {
                let _ = writeln!(f, "    v{a} = key_min(v{a}, v{b});");
            }
            Step::Max(a, b) => {
                let _ = writeln!(f, "    v{b} = key_max(v{a}, v{b});");
            }
        }
    }
}

/// The median shader with `footprint` compiled in as a selection network
/// (keys of `key_bytes`): `network_select` reads interior elements without
/// the boundary mapping; `median_network_tile`, generated when its tile
/// fits workgroup memory, loads the input of its 32 x 8 outputs once into
/// the tile (every element through the boundary mapping, about two per
/// invocation) and runs each output's network from there: neighbouring
/// outputs share all but a row or column of their windows, so the grid
/// entry loads each element up to 49 times.
fn network_source(footprint: &Footprint, template: &str, key_bytes: usize) -> String {
    let (steps, out) = selection_network(footprint.len(), footprint.rank());
    let (lo, hi) = reach(footprint);
    let mut f = String::new();
    let n = footprint.len();
    // Writing to a String cannot fail.
    let _ = writeln!(f, "fn network_select(c: vec3<i32>) -> Key {{");
    for i in 0..n {
        let _ = writeln!(f, "    var v{i}: Key;");
    }
    let _ = writeln!(f, "    let n = vec3<i32>(p.in_shape.xyz);");
    let _ = writeln!(
        f,
        "    if (c.x >= {} && c.x < n.x - {} && c.y >= {} && c.y < n.y - {} && c.z >= {} && c.z < n.z - {}) {{",
        lo[2], hi[2], lo[1], hi[1], lo[0], hi[0]
    );
    let _ = writeln!(f, "        let sy = n.x;\n        let sz = n.x * n.y;");
    let _ = writeln!(f, "        let base = i32(centre_index(c));");
    for (i, o) in footprint.offsets.iter().enumerate() {
        let _ = writeln!(
            f,
            "        v{i} = fetch(u32(base + ({}) * sz + ({}) * sy + ({})));",
            o[0], o[1], o[2]
        );
    }
    let _ = writeln!(f, "    }} else {{");
    for (i, o) in footprint.offsets.iter().enumerate() {
        let _ = writeln!(
            f,
            "        v{i} = load(c + vec3<i32>({}, {}, {}));",
            o[2], o[1], o[0]
        );
    }
    let _ = writeln!(f, "    }}");
    write_steps(&mut f, &steps);
    let _ = writeln!(f, "    return v{out};\n}}");
    if let Some([tx, ty, tz]) = tile_extent(footprint, key_bytes) {
        let n = tx * ty * tz;
        let lo = lo.map(|v| v.max(0));
        let _ = writeln!(f, "\nvar<workgroup> tile: array<Key, {n}>;\n");
        let _ = writeln!(f, "@compute @workgroup_size(32, 8, 1)");
        let _ = writeln!(
            f,
            "fn median_network_tile(@builtin(workgroup_id) wid: vec3<u32>, \
             @builtin(local_invocation_id) lid: vec3<u32>, \
             @builtin(local_invocation_index) li: u32) {{"
        );
        let _ = writeln!(f, "    let first = wid * vec3<u32>(32u, 8u, 1u);");
        let _ = writeln!(
            f,
            "    let origin = vec3<i32>(first + p.offset.xyz) - vec3<i32>({}, {}, {});",
            lo[2], lo[1], lo[0]
        );
        let _ = writeln!(f, "    for (var j = li; j < {n}u; j += 256u) {{");
        let _ = writeln!(
            f,
            "        tile[j] = load(origin + vec3<i32>(i32(j % {tx}u), i32((j / {tx}u) % {ty}u), i32(j / {}u)));",
            tx * ty
        );
        let _ = writeln!(f, "    }}\n    workgroupBarrier();");
        let _ = writeln!(f, "    let gid = first + lid;");
        let _ = writeln!(
            f,
            "    if (any(gid >= p.out_shape.xyz)) {{\n        return;\n    }}"
        );
        let _ = writeln!(
            f,
            "    let centre = i32(({}u * {ty}u + lid.y + {}u) * {tx}u + lid.x + {}u);",
            lo[0], lo[1], lo[2]
        );
        for (i, o) in footprint.offsets.iter().enumerate() {
            let at = (o[0] as i64 * ty as i64 + o[1] as i64) * tx as i64 + o[2] as i64;
            let _ = writeln!(f, "    var v{i} = tile[u32(centre + ({at}))];");
        }
        write_steps(&mut f, &steps);
        let _ = writeln!(
            f,
            "    let i = (gid.z * p.out_shape.y + gid.y) * p.out_shape.x + gid.x;"
        );
        let _ = writeln!(
            f,
            "    key_store(i, finish(key_at(centre_index(vec3<i32>(gid + p.offset.xyz))), v{out}));\n}}"
        );
    }
    shaders::splice_generated(template, &f)
}

// ---------------------------------------------------------------- CPU reference

pub mod cpu {
    //! CPU reference: every window gathered, the rank selected with
    //! `select_nth_unstable` on the same keys.
    use super::*;
    use crate::chunk::map_coordinate;

    pub fn median_filter(
        input: Samples<'_>,
        shape: &[usize],
        footprint: &Footprint,
        boundary: Boundary,
    ) -> Result<SampleVec> {
        run(input, shape, footprint, boundary, None)
    }

    pub fn remove_outliers(
        input: Samples<'_>,
        shape: &[usize],
        removal: &OutlierRemoval,
    ) -> Result<SampleVec> {
        let footprint = removal.footprint(shape.len())?;
        run(
            input,
            shape,
            &footprint,
            OutlierRemoval::boundary(),
            Some(removal),
        )
    }

    fn run(
        input: Samples<'_>,
        shape: &[usize],
        footprint: &Footprint,
        boundary: Boundary,
        removal: Option<&OutlierRemoval>,
    ) -> Result<SampleVec> {
        let s = check_input(input, shape, footprint)?;
        let cval = cval_key(input, boundary)?;
        let keys: Vec<u64> = match input.keys(0..input.len()) {
            Keys::K32(k) => k.into_iter().map(u64::from).collect(),
            Keys::K64(k) => k,
        };
        let float = input.is_float();
        let neg_inf = if input.wide() {
            NEG_INF_KEY_F64
        } else {
            u64::from(NEG_INF_KEY_F32)
        };
        let band = nan_band(input, boundary, footprint);
        let mut window = vec![0u64; footprint.len()];
        let mut out = vec![0u64; keys.len()];
        for z in 0..s[0] {
            for y in 0..s[1] {
                for x in 0..s[2] {
                    let i = (z * s[1] + y) * s[2] + x;
                    for (w, o) in window.iter_mut().zip(&footprint.offsets) {
                        let at = |a: usize, p: usize| {
                            map_coordinate(p as i64 + i64::from(o[a]), s[a], boundary.mode)
                        };
                        *w = match (at(0, z), at(1, y), at(2, x)) {
                            (Some(cz), Some(cy), Some(cx)) => {
                                let k = keys[(cz * s[1] + cy) * s[2] + cx];
                                if float && k == 0 { neg_inf } else { k }
                            }
                            _ => cval,
                        };
                    }
                    let rank = footprint.rank();
                    let med = *window.select_nth_unstable(rank).1;
                    let nan_cval = band.is_some_and(|b| in_band(&b, s, [z, y, x]));
                    out[i] = if (float && keys[i] == 0) || nan_cval {
                        0
                    } else {
                        match removal {
                            None => med,
                            Some(r) => outlier_key(input, keys[i], med, r),
                        }
                    };
                }
            }
        }
        Ok(input.from_keys(if input.wide() {
            Keys::K64(out)
        } else {
            Keys::K32(out.into_iter().map(|k| k as u32).collect())
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_steps(steps: &[Step], values: &mut [u32]) {
        for &s in steps {
            match s {
                Step::Exchange(a, b) => {
                    let (x, y) = (values[a].min(values[b]), values[a].max(values[b]));
                    values[a] = x;
                    values[b] = y;
                }
                Step::Min(a, b) => values[a] = values[a].min(values[b]),
                Step::Max(a, b) => values[b] = values[a].max(values[b]),
            }
        }
    }

    #[test]
    fn selection_networks_select_the_rank_for_every_size() {
        let mut seed = 7u64;
        for n in 1..=NETWORK_MAX {
            for rank in [0, n / 2, n - 1] {
                let (steps, out) = selection_network(n, rank);
                for trial in 0..200 {
                    let mut v: Vec<u32> = (0..n)
                        .map(|_| {
                            seed ^= seed << 13;
                            seed ^= seed >> 7;
                            seed ^= seed << 17;
                            // Few distinct values in some trials: ties matter.
                            (seed % if trial % 2 == 0 { 4 } else { 1000 }) as u32
                        })
                        .collect();
                    let mut sorted = v.clone();
                    sorted.sort_unstable();
                    run_steps(&steps, &mut v);
                    assert_eq!(v[out], sorted[rank], "n {n} rank {rank}");
                }
            }
        }
        // Pruning pays: the median of 9 needs far fewer than the 19 exchanges
        // of a full 9-sort network on 16 wires.
        let (steps, _) = selection_network(9, 4);
        assert!(steps.len() <= 30, "{} steps", steps.len());
    }

    #[test]
    fn generated_shaders_validate() {
        for (size, ndim) in [(1, 1), (3, 2), (4, 2), (7, 2), (3, 3)] {
            let fp = Footprint::size(ndim, &[size]).unwrap();
            for template in [shaders::MEDIAN32, shaders::MEDIAN64, shaders::MEDIAN_F32] {
                let key_bytes = if template == shaders::MEDIAN64 { 8 } else { 4 };
                let src = network_source(&fp, template, key_bytes);
                assert!(src.contains("v0 = fetch"), "body spliced in");
                assert_eq!(
                    src.contains("fn median_network_tile"),
                    fp.len() >= TILE_MIN_ELEMENTS,
                    "{size}: a tile where it pays"
                );
                let module = naga::front::wgsl::parse_str(&src)
                    .unwrap_or_else(|e| panic!("{size}: {}", e.emit_to_string(&src)));
                naga::valid::Validator::new(
                    naga::valid::ValidationFlags::all(),
                    naga::valid::Capabilities::empty(),
                )
                .validate(&module)
                .unwrap_or_else(|e| panic!("{size}: {e:?}"));
            }
        }
    }

    #[test]
    fn tiles_are_generated_only_where_they_fit_workgroup_memory() {
        let column = Footprint::size(3, &[1, 49, 1]).unwrap();
        // (32) x (8 + 48) x 1 keys: 7 KiB of u32, 14 KiB of 64-bit keys.
        assert_eq!(tile_extent(&column, 8), Some([32, 56, 1]));
        let deep = Footprint::size(3, &[49, 1, 1]).unwrap();
        assert_eq!(tile_extent(&deep, 4), None); // 32 x 8 x 49 keys
        let src = network_source(&deep, shaders::MEDIAN32, 4);
        assert!(!src.contains("fn median_network_tile"));
        assert_eq!(
            tile_extent(&Footprint::size(2, &[7]).unwrap(), 4),
            Some([38, 14, 1])
        );
    }

    #[test]
    fn footprints_follow_scipy_centres_and_reject_bad_sizes() {
        let fp = Footprint::size(2, &[1, 4]).unwrap();
        assert_eq!(
            fp.offsets,
            vec![[0, 0, -2], [0, 0, -1], [0, 0, 0], [0, 0, 1]]
        );
        assert_eq!(fp.rank(), 2);
        assert_eq!(fp.reach(), [0, 0, 2]);
        assert!(Footprint::size(2, &[0]).is_err());
        assert!(Footprint::size(2, &[3, 3, 3]).is_err());
        assert!(Footprint::size(4, &[3]).is_err());
        assert!(Footprint::from_mask(2, &[false; 9], &[3, 3]).is_err());
        assert!(Footprint::from_mask(2, &[true; 8], &[3, 3]).is_err());
        assert!(OutlierRemoval::new(0.0, 3, Outliers::Bright).is_err());
        assert!(OutlierRemoval::new(f64::NAN, 3, Outliers::Bright).is_err());
        assert!("up".parse::<Outliers>().is_err());
    }
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

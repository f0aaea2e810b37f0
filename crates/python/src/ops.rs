//! The operations: options JSON into the core's parameter type, validated,
//! then the GPU path (without the GIL) or the CPU reference.

use gpuscope_core::Result;
use gpuscope_core::filters::median::{self, OutlierRemoval};
use gpuscope_core::filters::{self, ConvolveParams, GaussianParams, MedianParams, NdArray, Output};
use gpuscope_core::keys::SampleVec;
use gpuscope_core::segment::{self, LabelParams, label::foreground};
use gpuscope_core::slic::{self as core_slic, SlicParams};
use gpuscope_core::stats::clip::stream::clipped_stats_in_place;
use gpuscope_core::stats::{self, SigmaClipParams};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::de::DeserializeOwned;

use crate::arrays::{self, Floats, Input};
use crate::device::{Engine, engine, interruptible, parse, py_err};

fn params<T: DeserializeOwned>(options: &str) -> PyResult<T> {
    parse(options)
}

/// An array-valued parameter (a kernel, a footprint) as the core takes it.
fn nd_array(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<NdArray> {
    let (values, shape) = arrays::typed::<f64>(obj, what)?;
    Ok(NdArray { shape, values })
}

/// How scipy stores a filter's result in `dtype`.
pub(crate) fn output_of(dtype: &str) -> PyResult<Output> {
    let int = |bits, signed| Output::Integer { bits, signed };
    Ok(match dtype {
        "float32" | "float64" => Output::Float,
        "uint8" => int(8, false),
        "int8" => int(8, true),
        "uint16" => int(16, false),
        "int16" => int(16, true),
        "uint32" => int(32, false),
        "int32" => int(32, true),
        "uint64" => int(64, false),
        "int64" => int(64, true),
        other => {
            return Err(PyTypeError::new_err(format!(
                "output dtype {other} is not supported (give an integer dtype, float32 or float64)"
            )));
        }
    })
}

enum Linear {
    Gaussian(GaussianParams),
    Kernel(ConvolveParams, bool),
}

/// `gaussian_filter`, `convolve`, `correlate`, `median_filter` and
/// `remove_outliers`: `op` names the catalogue entry, `options` its
/// parameters as JSON, `array` the kernel or footprint, `dtype` the output
/// dtype of the linear filters (default: the input's, as scipy). `out`:
/// the caller's `output=` array, written in place where the GPU path can
/// (the returned object is then `out` itself; otherwise a new array,
/// which the caller copies into `out`).
#[pyfunction]
#[pyo3(signature = (op, input, options, array=None, dtype=None, out=None))]
pub fn filter<'py>(
    py: Python<'py>,
    op: &str,
    input: &Bound<'py, PyAny>,
    options: &str,
    array: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
    out: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    if let Some(result) = crate::inplace::filter(py, op, input, options, array, dtype, out)? {
        return Ok(result);
    }
    let Input { values, shape } = arrays::input(input)?;
    let linear = match op {
        "gaussian_filter" => Linear::Gaussian(params(options)?),
        "convolve" | "correlate" => {
            let mut p: ConvolveParams = params(options)?;
            if let Some(w) = array {
                p.weights = nd_array(w, "weights")?;
            }
            Linear::Kernel(p, op == "convolve")
        }
        "median_filter" => {
            let mut p: MedianParams = params(options)?;
            if let Some(f) = array {
                p.footprint = Some(nd_array(f, "footprint")?);
            }
            p.validate().map_err(py_err)?;
            let fp = p.footprint(shape.len()).map_err(py_err)?;
            let boundary = p.boundary();
            return rank(py, values, shape, move |gpu, s, shape| match gpu {
                Some(gpu) => {
                    pollster::block_on(median::median_filter(gpu, s, shape, &fp, boundary))
                }
                None => median::cpu::median_filter(s, shape, &fp, boundary),
            });
        }
        "remove_outliers" => {
            let p: OutlierRemoval = params(options)?;
            p.validate().map_err(py_err)?;
            return rank(py, values, shape, move |gpu, s, shape| match gpu {
                Some(gpu) => pollster::block_on(median::remove_outliers(gpu, s, shape, &p)),
                None => median::cpu::remove_outliers(s, shape, &p),
            });
        }
        other => return Err(PyValueError::new_err(format!("no filter named {other}"))),
    };
    let (filter, boundary) = match &linear {
        Linear::Gaussian(p) => {
            p.validate().map_err(py_err)?;
            (p.filter(shape.len()).map_err(py_err)?, p.boundary())
        }
        Linear::Kernel(p, flip) => {
            p.validate().map_err(py_err)?;
            (p.filter(shape.len(), *flip).map_err(py_err)?, p.boundary())
        }
    };
    let dtype = dtype
        .unwrap_or(values.as_samples().dtype_name())
        .to_string();
    let output = output_of(&dtype)?;
    let engine = engine(py)?;
    let n = values.as_samples().len();
    let run_shape = shape.clone();
    let result: Result<Floats> = interruptible(py, n, move || {
        if values.as_samples().is_empty() {
            return Ok(Floats::F64(Vec::new()));
        }
        let exact = output == Output::Float || filters::gpu_exact(values.as_samples(), boundary);
        match engine.as_ref() {
            // Integer samples beyond float32 (uint32 detector gaps at
            // 2^32 - 1) are filtered in float64 on the host, as scipy.
            Engine::Gpu(_) if !exact => filters::host::apply(
                &filter,
                &arrays::to_f64(&values),
                &run_shape,
                boundary,
                output,
            )
            .map(Floats::F64),
            Engine::Gpu(gpu) => {
                let input = arrays::into_f32(values);
                pollster::block_on(filters::apply(
                    gpu, &filter, &input, &run_shape, boundary, output,
                ))
                .map(Floats::F32)
            }
            Engine::Cpu => filters::cpu::apply(
                &filter,
                &arrays::to_f64(&values),
                &run_shape,
                boundary,
                output,
            )
            .map(Floats::F64),
        }
    })?;
    arrays::cast_array(py, result.map_err(py_err)?, &shape, &dtype)
}

/// A float32 filter parsed from its catalogue options, for the paths that
/// hand the core whole arrays (numpy in place, device arrays).
pub(crate) enum FilterKind {
    Linear(filters::Filter, filters::Boundary),
    /// A median, or with the removal, outlier removal.
    Median(median::Footprint, filters::Boundary, Option<OutlierRemoval>),
}

/// `op`'s filter for `ndim` axes (`None`: not one of these filters).
pub(crate) fn filter_kind(
    op: &str,
    options: &str,
    array: Option<&Bound<'_, PyAny>>,
    ndim: usize,
) -> PyResult<Option<FilterKind>> {
    Ok(Some(match op {
        "gaussian_filter" => {
            let p: GaussianParams = params(options)?;
            p.validate().map_err(py_err)?;
            FilterKind::Linear(p.filter(ndim).map_err(py_err)?, p.boundary())
        }
        "convolve" | "correlate" => {
            let mut p: ConvolveParams = params(options)?;
            if let Some(w) = array {
                p.weights = nd_array(w, "weights")?;
            }
            p.validate().map_err(py_err)?;
            let f = p.filter(ndim, op == "convolve").map_err(py_err)?;
            FilterKind::Linear(f, p.boundary())
        }
        "median_filter" => {
            let mut p: MedianParams = params(options)?;
            if let Some(f) = array {
                p.footprint = Some(nd_array(f, "footprint")?);
            }
            p.validate().map_err(py_err)?;
            FilterKind::Median(p.footprint(ndim).map_err(py_err)?, p.boundary(), None)
        }
        "remove_outliers" => {
            let p: OutlierRemoval = params(options)?;
            p.validate().map_err(py_err)?;
            let fp = p.footprint(ndim).map_err(py_err)?;
            FilterKind::Median(fp, OutlierRemoval::boundary(), Some(p))
        }
        _ => return Ok(None),
    }))
}

/// A rank filter in the input's dtype, on the engine in use.
fn rank<'py, F>(
    py: Python<'py>,
    values: SampleVec,
    shape: Vec<usize>,
    run: F,
) -> PyResult<Bound<'py, PyAny>>
where
    F: FnOnce(
            Option<&gpuscope_core::Gpu>,
            gpuscope_core::Samples<'_>,
            &[usize],
        ) -> Result<SampleVec>
        + Send
        + 'static,
{
    let engine = engine(py)?;
    let n = values.as_samples().len();
    let run_shape = shape.clone();
    let result = interruptible(py, n, move || {
        if values.as_samples().is_empty() {
            return Ok(values.clone());
        }
        let gpu = match engine.as_ref() {
            Engine::Gpu(g) => Some(g.as_ref()),
            Engine::Cpu => None,
        };
        run(gpu, values.as_samples(), &run_shape)
    })?;
    arrays::samples_array(py, result.map_err(py_err)?, &shape)
}

/// An array read in place, or a copy of it.
enum Either {
    Borrowed(arrays::Borrowed),
    Copied(SampleVec),
}

impl Either {
    fn samples(&self) -> gpuscope_core::Samples<'_> {
        match self {
            Either::Borrowed(x) => x.samples(),
            Either::Copied(v) => v.as_samples(),
        }
    }
}

/// scipy.ndimage.label / skimage.measure.label: int32 labels and their
/// number.
#[pyfunction]
pub fn label<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    options: &str,
) -> PyResult<(Bound<'py, PyAny>, usize)> {
    let p: LabelParams = params(options)?;
    p.validate().map_err(py_err)?;
    // Read in place where the array allows (the mask made on threads).
    let (values, shape) = match arrays::borrowed(input) {
        Some((x, shape)) => (Either::Borrowed(x), shape),
        None => {
            let Input { values, shape } = arrays::input(input)?;
            (Either::Copied(values), shape)
        }
    };
    let engine = engine(py)?;
    let run_shape = shape.clone();
    let n = shape.iter().product();
    let labels = interruptible(py, n, move || {
        let mask = match &values {
            Either::Borrowed(x) => crate::convert::foreground(
                x.samples(),
                p.background,
                crate::convert::threads_for(n, false),
            ),
            Either::Copied(v) => foreground(v.as_samples(), p.background),
        };
        match engine.as_ref() {
            Engine::Gpu(gpu) => {
                pollster::block_on(segment::label(gpu, &mask, &run_shape, p.connectivity))
            }
            Engine::Cpu => segment::label::cpu::label(&mask, &run_shape, p.connectivity),
        }
    })?;
    let labels = labels.map_err(py_err)?;
    Ok((arrays::array(py, labels.labels, &shape)?, labels.count))
}

/// skimage.measure.regionprops of int32 labels and float32 intensities:
/// one numpy column per measurement (per-axis ones as rows x axes), for the
/// labels present.
#[pyfunction]
pub fn regionprops<'py>(
    py: Python<'py>,
    labels: &Bound<'py, PyAny>,
    intensity: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let (labels, shape) = arrays::shared::<i32>(labels).ok_or_else(|| {
        PyTypeError::new_err("label_image must be a C-contiguous numpy array of int32")
    })?;
    let Some((values, vshape)) = arrays::borrowed(intensity) else {
        return Err(PyTypeError::new_err(
            "intensity_image must be a C-contiguous numpy array of a numeric dtype",
        ));
    };
    if vshape != shape {
        return Err(PyValueError::new_err(format!(
            "intensity_image has the shape {vshape:?} but label_image {shape:?} (give arrays of one shape)"
        )));
    }
    let engine = engine(py)?;
    let ndim = shape.len();
    let n = labels.as_slice().len();
    let regions = interruptible(py, n, move || {
        let threads = crate::convert::threads_for(n, false);
        let converted;
        let values: &[f32] = match values.samples() {
            gpuscope_core::Samples::F32(v) => v,
            other => {
                converted = crate::convert::to_f32(other, threads);
                &converted
            }
        };
        let labels = labels.as_slice();
        let scan = scan_regions(labels, values, threads)?;
        match engine.as_ref() {
            Engine::Gpu(gpu) => pollster::block_on(segment::measure::regionprops_scanned(
                gpu, labels, values, &shape, scan.n, scan.vmax,
            )),
            Engine::Cpu => segment::measure::cpu::regionprops(labels, values, &shape, scan.n),
        }
    })?;
    // skimage lists the labels present only.
    let regions: Vec<_> = regions
        .map_err(py_err)?
        .into_iter()
        .filter(|r| r.area > 0)
        .collect();
    regions_dict(py, &regions, ndim)
}

/// What one pass over the labels and intensities finds: the largest label
/// and the largest |intensity| of a labelled pixel.
struct RegionScan {
    n: usize,
    vmax: f32,
}

/// Labels and intensities checked in one pass on threads: no negative
/// label (the first one named), every labelled intensity finite.
fn scan_regions(labels: &[i32], values: &[f32], threads: usize) -> Result<RegionScan> {
    #[derive(Default)]
    struct Part {
        negative: Option<usize>,
        not_finite: Option<usize>,
        max: i32,
        vmax: f32,
    }
    let parts = crate::convert::scan(labels.len(), threads, |r| {
        let mut p = Part::default();
        for (i, (&l, &v)) in labels[r.clone()].iter().zip(&values[r.clone()]).enumerate() {
            if l == 0 {
                continue;
            }
            if l < 0 {
                p.negative.get_or_insert(r.start + i);
            } else {
                p.max = p.max.max(l);
            }
            if !v.is_finite() {
                p.not_finite.get_or_insert(r.start + i);
            }
            p.vmax = p.vmax.max(v.abs());
        }
        p
    });
    if let Some(i) = parts.iter().find_map(|p| p.negative) {
        return Err(gpuscope_core::Error::InvalidInput(format!(
            "label {} is negative (labels are 0 for background and 1.. for regions)",
            labels[i]
        )));
    }
    if let Some(i) = parts.iter().find_map(|p| p.not_finite) {
        return Err(gpuscope_core::Error::InvalidInput(format!(
            "the intensity at pixel {i} of region {} is {}; region sums need finite values",
            labels[i], values[i]
        )));
    }
    Ok(RegionScan {
        n: parts.iter().map(|p| p.max).max().unwrap_or(0).max(0) as usize,
        vmax: parts.iter().map(|p| p.vmax).fold(0f32, f32::max),
    })
}

/// Measurements as numpy columns (per-axis ones as rows x axes).
pub fn regions_dict<'py>(
    py: Python<'py>,
    regions: &[segment::Region],
    ndim: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let rows = [regions.len(), ndim];
    let per_axis = |f: &dyn Fn(&segment::Region) -> Vec<f64>| -> Vec<f64> {
        regions.iter().flat_map(f).collect()
    };
    let d = PyDict::new(py);
    let col = |f: &dyn Fn(&segment::Region) -> f64| -> Vec<f64> { regions.iter().map(f).collect() };
    d.set_item(
        "label",
        arrays::array(
            py,
            regions.iter().map(|r| i64::from(r.label)).collect(),
            &[regions.len()],
        )?,
    )?;
    d.set_item(
        "area",
        arrays::array(py, col(&|r| r.area as f64), &[regions.len()])?,
    )?;
    let bbox_min: Vec<i64> = regions
        .iter()
        .flat_map(|r| r.bbox_min.iter().map(|&v| v as i64))
        .collect();
    let bbox_max: Vec<i64> = regions
        .iter()
        .flat_map(|r| r.bbox_max.iter().map(|&v| v as i64))
        .collect();
    d.set_item("bbox_min", arrays::array(py, bbox_min, &rows)?)?;
    d.set_item("bbox_max", arrays::array(py, bbox_max, &rows)?)?;
    d.set_item(
        "centroid",
        arrays::array(py, per_axis(&|r| r.centroid.clone()), &rows)?,
    )?;
    d.set_item(
        "centroid_weighted",
        arrays::array(py, per_axis(&|r| r.centroid_weighted.clone()), &rows)?,
    )?;
    d.set_item(
        "intensity_sum",
        arrays::array(py, col(&|r| r.intensity_sum), &[regions.len()])?,
    )?;
    d.set_item(
        "intensity_mean",
        arrays::array(py, col(&|r| r.intensity_mean), &[regions.len()])?,
    )?;
    d.set_item(
        "intensity_min",
        arrays::array(py, col(&|r| r.intensity_min), &[regions.len()])?,
    )?;
    d.set_item(
        "intensity_max",
        arrays::array(py, col(&|r| r.intensity_max), &[regions.len()])?,
    )?;
    Ok(d)
}

/// skimage.segmentation.slic: int32 labels of the spatial shape.
#[pyfunction]
#[pyo3(signature = (image, options, mask=None))]
pub fn slic<'py>(
    py: Python<'py>,
    image: &Bound<'py, PyAny>,
    options: &str,
    mask: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let (values, shape) = match arrays::borrowed(image) {
        Some((x, shape)) => (Either::Borrowed(x), shape),
        None => {
            let Input { values, shape } = arrays::input(image)?;
            (Either::Copied(values), shape)
        }
    };
    let mut p: SlicParams = params(options)?;
    if let Some(m) = mask {
        p.mask = Some(arrays::typed::<bool>(m, "mask")?.0);
    }
    p.validate().map_err(py_err)?;
    let engine = engine(py)?;
    let n = shape.iter().product();
    let segments = interruptible(py, n, move || {
        let samples = values.samples();
        match engine.as_ref() {
            Engine::Gpu(gpu) => pollster::block_on(core_slic::slic(gpu, samples, &shape, &p)),
            Engine::Cpu => core_slic::cpu::slic(samples, &shape, &p),
        }
    })?;
    let s = segments.map_err(py_err)?;
    // int64, as scikit-image returns its labels.
    let labels: Vec<i64> = s.labels.into_iter().map(i64::from).collect();
    arrays::array(py, labels, &s.shape)
}

/// astropy.stats.sigma_clipped_stats: (mean, median, std, values kept;
/// the Python layer applies `std_ddof` from the count). The GPU path
/// computes in float32, as the command line does.
#[pyfunction]
#[pyo3(signature = (data, options, mask=None))]
pub fn sigma_clipped_stats<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    options: &str,
    mask: Option<&Bound<'py, PyAny>>,
) -> PyResult<(f64, f64, f64, usize)> {
    let p: SigmaClipParams = params(options)?;
    p.validate().map_err(py_err)?;
    let options = p.options();
    let engine = engine(py)?;
    if let Engine::Gpu(_) = engine.as_ref()
        && let Some((x, _)) = arrays::borrowed(data)
    {
        // The GPU path: the data read in place (float32) or converted to
        // float32 on threads, masked values made NaN in the same pass.
        let mask = match mask {
            Some(m) => Some(
                arrays::shared::<bool>(m)
                    .ok_or_else(|| {
                        PyTypeError::new_err("mask must be a C-contiguous numpy array of bool")
                    })?
                    .0,
            ),
            None => None,
        };
        let n = x.samples().len();
        if let Some(m) = &mask
            && m.as_slice().len() != n
        {
            return Err(PyValueError::new_err(format!(
                "the mask has {} values but the data {n}; give a mask of the data's shape",
                m.as_slice().len()
            )));
        }
        let stats = interruptible(py, n, move || {
            let Engine::Gpu(gpu) = engine.as_ref() else {
                return Err(gpuscope_core::Error::Device("no GPU".into()));
            };
            // Beyond the budget the GPU cannot hold the float32 words: the
            // streamed passes read the array where it lies instead (host
            // memory: one slab and three histograms), exact as the
            // reference (float64 sums), as the command line clips.
            if n as u64 * 4 > gpu.memory_budget() {
                return clipped_stats_in_place(
                    x.samples(),
                    mask.as_ref().map(|m| m.as_slice()),
                    &options,
                );
            }
            let threads = crate::convert::threads_for(n, false);
            let run =
                |v: &[f32]| pollster::block_on(stats::sigma_clipped_stats(gpu, v, None, &options));
            match (x.samples(), &mask) {
                (gpuscope_core::Samples::F32(v), None) => run(v),
                (s, None) => run(&crate::convert::to_f32(s, threads)),
                (s, Some(m)) => run(&crate::convert::masked_f32(s, m.as_slice(), threads)),
            }
        })?;
        let s = stats.map_err(py_err)?;
        return Ok((s.mean, s.median, s.std, s.n_kept));
    }
    let Input { values, .. } = arrays::input(data)?;
    let mask = match mask {
        Some(m) => Some(arrays::typed::<bool>(m, "mask")?.0),
        None => None,
    };
    let n = values.as_samples().len();
    let stats = interruptible(py, n, move || match engine.as_ref() {
        Engine::Gpu(gpu) if n as u64 * 4 > gpu.memory_budget() => {
            clipped_stats_in_place(values.as_samples(), mask.as_deref(), &options)
        }
        Engine::Gpu(gpu) => pollster::block_on(stats::sigma_clipped_stats(
            gpu,
            &arrays::to_f32(&values),
            mask.as_deref(),
            &options,
        )),
        Engine::Cpu => {
            stats::clip::cpu::sigma_clipped_stats(values.as_samples(), mask.as_deref(), &options)
        }
    })?;
    let s = stats.map_err(py_err)?;
    Ok((s.mean, s.median, s.std, s.n_kept))
}

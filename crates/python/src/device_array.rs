//! `gpuscope.DeviceArray`: an array kept on the GPU between operations, as
//! CuPy users keep `cupy.ndarray`s. `gpuscope.asarray(x)` uploads it; the
//! filters, `x > t`, `label` and `regionprops_table` take device arrays and
//! leave their results there; `.get()` (or `numpy.asarray`) brings one back.

use std::sync::{Arc, Mutex};

use gpuscope_core::filters::{self, median};
use gpuscope_core::segment::{LabelParams, on_device};
use gpuscope_core::{DeviceArray, Elements, Gpu};
use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::basic::CompareOp;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::arrays;
use crate::device::{Engine, engine, interruptible, parse, py_err};
use crate::ops::{FilterKind, filter_kind, regions_dict};

/// An array on the GPU of the engine that made it.
#[pyclass(module = "gpuscope._gpuscope", name = "DeviceArray", frozen)]
pub struct PyDeviceArray {
    engine: Arc<Engine>,
    /// None once freed (never, today, before the object goes).
    array: Mutex<Option<DeviceArray>>,
    shape: Vec<usize>,
    elements: Elements,
}

impl Drop for PyDeviceArray {
    fn drop(&mut self) {
        let taken = self.array.get_mut().map(Option::take).unwrap_or(None);
        if let (Some(a), Engine::Gpu(gpu)) = (taken, self.engine.as_ref()) {
            a.free(gpu);
        }
    }
}

fn no_gpu() -> PyErr {
    PyRuntimeError::new_err(
        "device arrays need a GPU adapter, and gpuscope runs on the CPU reference path \
         (no adapter, or set_device('cpu')); use numpy arrays",
    )
}

impl PyDeviceArray {
    fn new(engine: Arc<Engine>, array: DeviceArray) -> Self {
        PyDeviceArray {
            shape: array.shape().to_vec(),
            elements: array.elements(),
            array: Mutex::new(Some(array)),
            engine,
        }
    }

    /// Runs `work` on this array's device and array without the GIL; the
    /// array must live on the engine in use.
    fn with<T: Send + 'static>(
        slf: &Bound<'_, Self>,
        work: impl FnOnce(&Gpu, &DeviceArray) -> gpuscope_core::Result<T> + Send + 'static,
    ) -> PyResult<T> {
        let py = slf.py();
        let this = slf.clone().unbind();
        let current = engine(py)?;
        if !Arc::ptr_eq(&current, &slf.get().engine) {
            return Err(PyValueError::new_err(
                "this device array lives on another device than the one in use (set_device changed it); \
                 bring it back with .get() and upload it again with gpuscope.asarray",
            ));
        }
        let n = slf.get().shape.iter().product();
        interruptible(py, n, move || {
            let me = this.get();
            let Engine::Gpu(gpu) = me.engine.as_ref() else {
                return Err(gpuscope_core::Error::Device("no GPU".into()));
            };
            let guard = me.array.lock().unwrap_or_else(|e| e.into_inner());
            match guard.as_ref() {
                Some(a) => work(gpu, a),
                None => Err(gpuscope_core::Error::InvalidInput(
                    "this device array was freed".into(),
                )),
            }
        })?
        .map_err(py_err)
    }

    fn wrap<'py>(slf: &Bound<'py, Self>, array: DeviceArray) -> PyResult<Bound<'py, Self>> {
        Bound::new(
            slf.py(),
            PyDeviceArray::new(slf.get().engine.clone(), array),
        )
    }
}

#[pymethods]
impl PyDeviceArray {
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    #[getter]
    fn ndim(&self) -> usize {
        self.shape.len()
    }

    #[getter]
    fn size(&self) -> usize {
        self.shape.iter().product()
    }

    /// The numpy dtype's name: float32, int32 or bool.
    #[getter]
    fn dtype_name(&self) -> &'static str {
        self.elements.name()
    }

    /// A numpy array of the values (one download).
    fn get<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let shape = slf.get().shape.clone();
        match slf.get().elements {
            Elements::F32 => {
                let (out, mut w) = arrays::empty_f32(py, &shape);
                Self::with(slf, move |gpu, a| {
                    pollster::block_on(a.read_into_uninit(gpu, w.as_mut_slice()))
                })?;
                Ok(out)
            }
            Elements::I32 => {
                let v = Self::with(slf, |gpu, a| {
                    let mut v = vec![0i32; a.len()];
                    pollster::block_on(a.read_into(gpu, &mut v)).map(|()| v)
                })?;
                arrays::array(py, v, &shape)
            }
            Elements::Bool => {
                let v = Self::with(slf, |gpu, a| {
                    let mut v = vec![0u8; a.len()];
                    pollster::block_on(a.read_into(gpu, &mut v)).map(|()| v)
                })?;
                Ok(arrays::array(py, v, &shape)?.call_method1("view", ("bool",))?)
            }
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "gpuscope.DeviceArray(shape={:?}, dtype={})",
            self.shape,
            self.elements.name()
        )
    }

    /// The numpy dtype.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("numpy")?
            .getattr("dtype")?
            .call1((self.elements.name(),))
    }

    /// numpy's implicit conversion is refused, as CuPy refuses it: a hidden
    /// download would cost what device arrays are for. `.get()` downloads.
    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__(&self, dtype: Option<&Bound<'_, PyAny>>, copy: Option<bool>) -> PyResult<()> {
        let _ = (dtype, copy);
        Err(PyTypeError::new_err(
            "implicit conversion of a gpuscope.DeviceArray to a numpy array is not allowed \
             (as CuPy); bring it back with .get()",
        ))
    }

    /// `x > value` on the device (a bool device array); `==` and `!=` are
    /// identity, as for any object; other comparisons are not offered.
    fn __richcmp__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
        op: CompareOp,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        match op {
            CompareOp::Eq | CompareOp::Ne => return Ok(py.NotImplemented()),
            CompareOp::Gt => {}
            _ => {
                return Err(PyTypeError::new_err(
                    "device arrays offer the comparison x > value only (a threshold); \
                     for others bring the array back with .get()",
                ));
            }
        }
        let value: f64 = other.extract().map_err(|_| {
            PyTypeError::new_err("x > value takes a number as the value (a threshold)")
        })?;
        let mask = Self::with(slf, move |gpu, a| {
            pollster::block_on(on_device::threshold_above(gpu, a, value))
        })?;
        Ok(Self::wrap(slf, mask)?.into_any().unbind())
    }
}

/// Uploads a C-contiguous numpy array of float32, int32 or bool.
#[pyfunction]
pub fn to_device<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDeviceArray>> {
    let engine = engine(py)?;
    if !matches!(engine.as_ref(), Engine::Gpu(_)) {
        return Err(no_gpu());
    }
    enum Host {
        F32(Vec<f32>),
        I32(Vec<i32>),
        Bool(Vec<bool>),
    }
    let (host, shape) = if let Ok(a) = input.cast::<PyArrayDyn<f32>>() {
        (Host::F32(a.to_vec()?), a.shape().to_vec())
    } else if let Ok(a) = input.cast::<PyArrayDyn<i32>>() {
        (Host::I32(a.to_vec()?), a.shape().to_vec())
    } else if let Ok(a) = input.cast::<PyArrayDyn<bool>>() {
        (Host::Bool(a.to_vec()?), a.shape().to_vec())
    } else {
        return Err(PyTypeError::new_err(
            "device arrays hold float32, int32 (labels) or bool; convert first, e.g. x.astype(np.float32)",
        ));
    };
    let n = shape.iter().product();
    let run_engine = engine.clone();
    let array = interruptible(py, n, move || {
        let Engine::Gpu(gpu) = run_engine.as_ref() else {
            return Err(gpuscope_core::Error::Device("no GPU".into()));
        };
        match &host {
            Host::F32(v) => pollster::block_on(DeviceArray::from_f32(gpu, v, &shape)),
            Host::I32(v) => pollster::block_on(DeviceArray::from_i32(gpu, v, &shape)),
            Host::Bool(v) => pollster::block_on(DeviceArray::from_bool(gpu, v, &shape)),
        }
    })?
    .map_err(py_err)?;
    Bound::new(py, PyDeviceArray::new(engine, array))
}

/// `gaussian_filter`, `convolve`, `correlate`, `median_filter` and
/// `remove_outliers` of a float32 device array (options as [`crate::ops::filter`]).
#[pyfunction]
#[pyo3(signature = (op, input, options, array=None))]
pub fn device_filter<'py>(
    op: &str,
    input: &Bound<'py, PyDeviceArray>,
    options: &str,
    array: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDeviceArray>> {
    let ndim = input.get().shape.len();
    let Some(kind) = filter_kind(op, options, array, ndim)? else {
        return Err(PyValueError::new_err(format!("no filter named {op}")));
    };
    let result = PyDeviceArray::with(input, move |gpu, a| match &kind {
        FilterKind::Linear(f, b) => pollster::block_on(filters::apply_on_device(gpu, f, a, *b)),
        FilterKind::Median(fp, b, removal) => {
            pollster::block_on(median::median_on_device(gpu, a, fp, *b, removal.as_ref()))
        }
    })?;
    PyDeviceArray::wrap(input, result)
}

/// Labels of a bool device array: (int32 labels on the device, their number).
#[pyfunction]
pub fn device_label<'py>(
    input: &Bound<'py, PyDeviceArray>,
    options: &str,
) -> PyResult<(Bound<'py, PyDeviceArray>, usize)> {
    let p: LabelParams = parse(options)?;
    p.validate().map_err(py_err)?;
    let (labels, count) = PyDeviceArray::with(input, move |gpu, a| {
        pollster::block_on(on_device::label(gpu, a, p.connectivity))
    })?;
    Ok((PyDeviceArray::wrap(input, labels)?, count))
}

/// `regionprops` of int32 labels and float32 intensities, both device
/// arrays of one engine: the measurements as [`crate::ops::regionprops`]
/// gives them.
#[pyfunction]
pub fn device_regionprops<'py>(
    labels: &Bound<'py, PyDeviceArray>,
    intensity: &Bound<'py, PyDeviceArray>,
) -> PyResult<Bound<'py, PyDict>> {
    let py = labels.py();
    if labels.get().elements != Elements::I32 || intensity.get().elements != Elements::F32 {
        return Err(PyTypeError::new_err(format!(
            "regionprops on device arrays takes int32 labels and float32 intensities, not {} and {}",
            labels.get().elements.name(),
            intensity.get().elements.name()
        )));
    }
    if !Arc::ptr_eq(&labels.get().engine, &intensity.get().engine) {
        return Err(PyValueError::new_err(
            "label_image and intensity_image live on different devices; upload both to the device in use",
        ));
    }
    let ndim = labels.get().shape.len();
    let values = intensity.clone().unbind();
    let regions = PyDeviceArray::with(labels, move |gpu, l| {
        let v = values.get();
        let guard = v.array.lock().unwrap_or_else(|e| e.into_inner());
        match guard.as_ref() {
            // The same array as labels and intensities would lock twice.
            Some(x) => pollster::block_on(on_device::regionprops(gpu, l, x)),
            None => Err(gpuscope_core::Error::InvalidInput(
                "the intensity device array was freed".into(),
            )),
        }
    })?;
    let regions: Vec<_> = regions.into_iter().filter(|r| r.area > 0).collect();
    regions_dict(py, &regions, ndim)
}

/// Waits until the GPU in use has finished the work queued so far
/// (operations on device arrays return before it is done, as CuPy's do);
/// for timing. Nothing to wait for on the CPU path.
#[pyfunction]
pub fn synchronize(py: Python<'_>) -> PyResult<()> {
    let engine = engine(py)?;
    py.detach(move || match engine.as_ref() {
        Engine::Gpu(gpu) => gpu.synchronize(),
        Engine::Cpu => Ok(()),
    })
    .map_err(py_err)
}

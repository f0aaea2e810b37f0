//! One engine per process: the GPU context, opened on first use and reused
//! (pipelines are compiled once per device), or the CPU reference when no
//! adapter exists; the catalogue; errors as Python exceptions.

use std::sync::{Arc, Mutex};

use gpuscope_core::{Error, Gpu, GpuOptions};
use pyo3::exceptions::{PyRuntimeError, PyRuntimeWarning, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// Where operations run.
pub enum Engine {
    Gpu(Box<Gpu>),
    Cpu,
}

/// The engine `set_device` chose; None: the default one.
static ENGINE: Mutex<Option<Arc<Engine>>> = Mutex::new(None);
/// The default engine, opened once per process.
static DEFAULT: Mutex<Option<Arc<Engine>>> = Mutex::new(None);

fn lock(
    m: &'static Mutex<Option<Arc<Engine>>>,
) -> std::sync::MutexGuard<'static, Option<Arc<Engine>>> {
    // A panic elsewhere while the lock was held leaves a usable value.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn slot() -> std::sync::MutexGuard<'static, Option<Arc<Engine>>> {
    lock(&ENGINE)
}

/// The engine in use, the default one opened on first use. Called with the
/// GIL held (the locks are never awaited by a thread that holds the GIL
/// while their owner needs it back).
pub fn engine(py: Python<'_>) -> PyResult<Arc<Engine>> {
    if let Some(e) = slot().as_ref() {
        return Ok(e.clone());
    }
    let mut guard = lock(&DEFAULT);
    if let Some(e) = guard.as_ref() {
        return Ok(e.clone());
    }
    let engine = match pollster::block_on(Gpu::new(GpuOptions::default())) {
        Ok(gpu) => Engine::Gpu(Box::new(gpu)),
        Err(e) => {
            let why = match e {
                Error::NoAdapter(m) => format!("no GPU adapter ({m})"),
                other => python_words(&other.to_string()),
            };
            let msg = format!("{why}; gpuscope runs on the CPU reference path");
            let text = std::ffi::CString::new(msg).unwrap_or_default();
            PyErr::warn(py, &py.get_type::<PyRuntimeWarning>(), &text, 2)?;
            Engine::Cpu
        }
    };
    let engine = Arc::new(engine);
    *guard = Some(engine.clone());
    Ok(engine)
}

/// The core's messages name the command line's flags; say what a Python
/// user does instead.
fn python_words(msg: &str) -> String {
    msg.replace("(see `gpuscope devices`)", "(see gpuscope.devices())")
        .replace("run with --cpu", "call gpuscope.set_device('cpu')")
        .replace("use --cpu", "call gpuscope.set_device('cpu')")
        .replace("--cpu", "gpuscope.set_device('cpu')")
}

/// A core error as the Python exception a caller expects: bad arguments are
/// ValueError, the device's troubles RuntimeError.
pub fn py_err(e: Error) -> PyErr {
    let msg = python_words(&e.to_string());
    match e {
        Error::InvalidParameter { .. } | Error::InvalidInput(_) => PyValueError::new_err(msg),
        Error::NoAdapter(_)
        | Error::OutOfMemory { .. }
        | Error::Device(_)
        | Error::Nonconformant { .. } => PyRuntimeError::new_err(msg),
    }
}

/// Options JSON that does not fit the parameter type: a wrong type is a
/// TypeError, a bad value (an unknown mode name) a ValueError.
pub fn options_err(e: serde_json::Error) -> PyErr {
    let msg = e.to_string();
    // serde_json appends " at line 1 column N", meaningless to the caller.
    let msg = match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg,
    };
    if msg.starts_with("invalid type") || msg.starts_with("unknown field") {
        PyTypeError::new_err(msg)
    } else {
        PyValueError::new_err(msg)
    }
}

/// The operation catalogue (crates/core/src/catalogue.rs) as JSON.
#[pyfunction]
pub fn catalogue_json() -> PyResult<String> {
    serde_json::to_string(&gpuscope_core::catalogue::catalogue())
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// The adapters this machine offers, in the order `set_device(index)` counts.
#[pyfunction]
pub fn devices(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for a in gpuscope_core::engine::adapters() {
        let d = PyDict::new(py);
        d.set_item("index", a.index)?;
        d.set_item("name", a.name)?;
        d.set_item("backend", a.backend)?;
        d.set_item("software", a.software)?;
        list.append(d)?;
    }
    Ok(list)
}

/// Chooses the engine: an adapter by index or by (part of) its name,
/// "cpu" for the CPU reference, or None for the default (the
/// high-performance adapter, else the CPU with a warning). Returns what
/// `device()` then returns.
#[pyfunction]
#[pyo3(signature = (spec=None))]
pub fn set_device<'py>(
    py: Python<'py>,
    spec: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let Some(spec) = spec else {
        *slot() = None;
        return device(py);
    };
    let engine = if let Ok(i) = spec.extract::<usize>() {
        open(format!("#{i}"))?
    } else if let Ok(s) = spec.extract::<String>() {
        if s.eq_ignore_ascii_case("cpu") {
            Engine::Cpu
        } else {
            open(s)?
        }
    } else {
        return Err(PyTypeError::new_err(
            "give an adapter's index, (part of) its name, or 'cpu' (see gpuscope.devices())",
        ));
    };
    *slot() = Some(Arc::new(engine));
    device(py)
}

fn open(adapter: String) -> PyResult<Engine> {
    let options = GpuOptions {
        adapter: Some(adapter),
        ..GpuOptions::default()
    };
    let gpu = pollster::block_on(Gpu::new(options)).map_err(py_err)?;
    Ok(Engine::Gpu(Box::new(gpu)))
}

/// The engine in use (opening it if needed): name, backend and limits.
#[pyfunction]
pub fn device(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    match engine(py)?.as_ref() {
        Engine::Cpu => {
            d.set_item("name", "cpu")?;
            d.set_item("backend", "cpu")?;
        }
        Engine::Gpu(gpu) => {
            let s = gpu.summary();
            d.set_item("name", s.name)?;
            d.set_item("backend", s.backend)?;
            d.set_item("device_type", s.device_type)?;
            d.set_item("driver", s.driver)?;
            d.set_item("max_binding_size", s.max_binding_size)?;
            d.set_item("max_buffer_size", s.max_buffer_size)?;
            d.set_item("memory_budget", s.memory_budget)?;
        }
    }
    Ok(d)
}

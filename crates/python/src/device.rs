//! One engine per process: the GPU context, opened on first use and reused
//! (pipelines are compiled once per device), or the CPU reference when no
//! adapter exists; the catalogue; errors as Python exceptions.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpuscope_core::{Error, Gpu, GpuOptions, Remedy, Setting};
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
    let engine = default_engine(py, None)?;
    let engine = Arc::new(engine);
    *guard = Some(engine.clone());
    Ok(engine)
}

/// The default adapter (with `memory_budget`, bytes), or the CPU reference
/// with a RuntimeWarning where it cannot be opened.
fn default_engine(py: Python<'_>, memory_budget: Option<u64>) -> PyResult<Engine> {
    let options = GpuOptions {
        memory_budget,
        untimed: true,
        ..GpuOptions::default()
    };
    Ok(match pollster::block_on(Gpu::new(options)) {
        Ok(gpu) => Engine::Gpu(Box::new(gpu)),
        Err(e) => {
            let why = match e {
                Error::NoAdapter(m) => format!("no GPU adapter ({m})"),
                other => python_words(&other),
            };
            let msg = format!("{why}; gpuscope runs on the CPU reference path");
            let text = std::ffi::CString::new(msg).unwrap_or_default();
            PyErr::warn(py, &py.get_type::<PyRuntimeWarning>(), &text, 2)?;
            Engine::Cpu
        }
    })
}

/// Inputs from this many elements run on a worker thread (see
/// [`interruptible`]); smaller ones in the calling thread, which spares
/// them the thread's start.
const WATCHED: usize = 1 << 18;

/// Runs `work` without the GIL and returns its result. An operation on a
/// large input (`elements` from [`WATCHED`]) runs on a worker thread while
/// this one checks for signals every 20 ms, so that Ctrl-C raises
/// KeyboardInterrupt at once; the abandoned work then finishes in the
/// background and its result is dropped (the core has no cancellation
/// between its dispatches).
pub fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    elements: usize,
    work: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    if elements < WATCHED {
        return Ok(py.detach(work));
    }
    let (tx, mut rx) = mpsc::channel();
    run_on_worker(Box::new(move || {
        // The caller may have gone (KeyboardInterrupt): nobody to tell.
        let _ = tx.send(work());
    }))?;
    loop {
        let (back, got) = py.detach(move || {
            let got = rx.recv_timeout(Duration::from_millis(20));
            (rx, got)
        });
        rx = back;
        match got {
            Ok(v) => return Ok(v),
            Err(RecvTimeoutError::Timeout) => py.check_signals()?,
            Err(RecvTimeoutError::Disconnected) => {
                return Err(PyRuntimeError::new_err(
                    "the operation stopped without a result (an internal error of gpuscope; please report it)",
                ));
            }
        }
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// Worker threads waiting for a job. A thread's start measured a sizeable
/// share of a short operation's host time, so threads are kept; a job
/// goes to an idle one, or to a new one while every other is busy (one
/// still finishing work abandoned by a KeyboardInterrupt, another Python
/// thread's call), so that no call waits behind another's work.
static IDLE: Mutex<Vec<mpsc::Sender<Job>>> = Mutex::new(Vec::new());

fn idle_workers() -> std::sync::MutexGuard<'static, Vec<mpsc::Sender<Job>>> {
    IDLE.lock().unwrap_or_else(|e| e.into_inner())
}

fn run_on_worker(job: Job) -> PyResult<()> {
    let mut job = job;
    while let Some(worker) = idle_workers().pop() {
        match worker.send(job) {
            Ok(()) => return Ok(()),
            // That thread has ended: try the next one.
            Err(mpsc::SendError(back)) => job = back,
        }
    }
    let (tx, rx) = mpsc::channel::<Job>();
    tx.send(job)
        .map_err(|_| PyRuntimeError::new_err("could not hand work to a thread"))?;
    std::thread::Builder::new()
        .name("gpuscope".into())
        .spawn(move || {
            while let Ok(job) = rx.recv() {
                job();
                let mut idle = idle_workers();
                // Enough threads kept for a few Python threads' calls.
                if idle.len() >= 4 {
                    return;
                }
                idle.push(tx.clone());
            }
        })
        .map_err(|e| PyRuntimeError::new_err(format!("could not start a thread: {e}")))?;
    Ok(())
}

/// A remedy in a Python user's words.
pub fn python_remedy(r: Remedy) -> String {
    match r {
        Remedy::UseCpu => "call gpuscope.set_device('cpu')".into(),
        Remedy::LargerBudget => {
            "give a larger memory_budget to gpuscope.set_device, or a device with more memory"
                .into()
        }
        Remedy::SmallerBudget => "give a smaller memory_budget to gpuscope.set_device".into(),
        Remedy::OtherAdapter => "pick another adapter (see gpuscope.devices())".into(),
        Remedy::SmallerInput => "give a smaller input".into(),
        Remedy::Set {
            param,
            value: Setting::Nothing,
        } => format!("pass {param}=None"),
        Remedy::Set {
            param,
            value: Setting::Off,
        } => format!("pass {param}=False"),
    }
}

/// A core error in Python's words: its remedies as calls and keywords,
/// parameters as Python spells them (`kernel-size`: `kernel_size`).
pub fn python_words(e: &Error) -> String {
    let mut out = e.render(python_remedy);
    for name in parameter_names() {
        out = out.replace(&name.replace('_', "-"), name);
    }
    out
}

/// Every catalogue parameter name with an underscore.
fn parameter_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = gpuscope_core::catalogue::catalogue()
        .iter()
        .flat_map(|op| op.params.iter().map(|p| p.name))
        .filter(|n| n.contains('_'))
        .collect();
    // Longer names first, so that one is not rewritten inside another.
    names.sort_unstable();
    names.dedup();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    names
}

/// A core error as the Python exception a caller expects: bad arguments are
/// ValueError, the device's troubles RuntimeError.
pub fn py_err(e: Error) -> PyErr {
    let msg = python_words(&e);
    match e {
        Error::InvalidParameter { .. } | Error::InvalidInput(_) => PyValueError::new_err(msg),
        // A limit that a parameter's value avoids is that value's fault.
        Error::Beyond { .. } if e.parameter().is_some() => PyValueError::new_err(msg),
        Error::NoAdapter(_)
        | Error::OutOfMemory { .. }
        | Error::Device(_)
        | Error::Nonconformant { .. }
        | Error::Beyond { .. } => PyRuntimeError::new_err(msg),
    }
}

/// The options JSON as parameter type `T`; an error names the parameter
/// at fault (serde's messages for a struct's field do not).
pub fn parse<T: serde::de::DeserializeOwned>(options: &str) -> PyResult<T> {
    let err = match serde_json::from_str(options) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    if let Ok(serde_json::Value::Object(map)) = serde_json::from_str(options) {
        for (key, value) in map {
            let alone = serde_json::Value::Object([(key.clone(), value)].into_iter().collect());
            if let Err(e) = serde_json::from_value::<T>(alone)
                && !e.to_string().starts_with("missing field")
            {
                return Err(options_err(e, Some(&key)));
            }
        }
    }
    Err(options_err(err, None))
}

/// Options JSON that does not fit the parameter type: a wrong type is a
/// TypeError, a bad value (an unknown mode name) a ValueError.
fn options_err(e: serde_json::Error, key: Option<&str>) -> PyErr {
    let msg = e.to_string();
    // serde_json appends " at line 1 column N", meaningless to the caller.
    let msg = match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg,
    };
    let type_error = msg.starts_with("invalid type") || msg.starts_with("unknown field");
    let msg = match key {
        Some(k) if !msg.starts_with("unknown field") => format!("{k}: {msg}"),
        _ => msg,
    };
    if type_error {
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
/// high-performance adapter, else the CPU with a warning).
/// `memory_budget`: the device memory (bytes) the operations may use at
/// once, as the command line's --memory-budget (default: planned from the
/// device). Returns what `device()` then returns.
#[pyfunction]
#[pyo3(signature = (spec=None, *, memory_budget=None))]
pub fn set_device<'py>(
    py: Python<'py>,
    spec: Option<&Bound<'py, PyAny>>,
    memory_budget: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    if memory_budget == Some(0) {
        return Err(PyValueError::new_err(
            "memory_budget must be a positive number of bytes (or None)",
        ));
    }
    let Some(spec) = spec else {
        *slot() = match memory_budget {
            None => None,
            Some(_) => Some(Arc::new(default_engine(py, memory_budget)?)),
        };
        return device(py);
    };
    let engine = if let Ok(i) = spec.extract::<usize>() {
        open(format!("#{i}"), memory_budget)?
    } else if let Ok(s) = spec.extract::<String>() {
        if s.eq_ignore_ascii_case("cpu") {
            Engine::Cpu
        } else {
            open(s, memory_budget)?
        }
    } else {
        return Err(PyTypeError::new_err(
            "give an adapter's index, (part of) its name, or 'cpu' (see gpuscope.devices())",
        ));
    };
    *slot() = Some(Arc::new(engine));
    device(py)
}

fn open(adapter: String, memory_budget: Option<u64>) -> PyResult<Engine> {
    let options = GpuOptions {
        adapter: Some(adapter),
        memory_budget,
        untimed: true,
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

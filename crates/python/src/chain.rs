//! Chains that stay on the GPU (`gpuscope.Pipeline`): the core's resident
//! chain of sigma clipping, threshold, labelling and measurement, one
//! upload and one download; and the engine's bus counter that shows it.

use gpuscope_core::segment::{SourcesParams, sources};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrays::{self, Input};
use crate::device::{Engine, engine, interruptible, parse, py_err};
use crate::ops::regions_dict;

/// Clip, threshold above `median + nsigma * std` (workshop: `nsigma *
/// std`), label and measure `image` (as float32), in one chain: returns the
/// clipped statistics, the threshold, the int32 labels, their number and
/// the measurements (as `regionprops` gives them).
#[pyfunction]
pub fn sources_chain<'py>(
    py: Python<'py>,
    image: &Bound<'py, PyAny>,
    options: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let Input { values, shape } = arrays::input(image)?;
    let p: SourcesParams = parse(options)?;
    p.validate().map_err(py_err)?;
    let clip = p.clip().options();
    let engine = engine(py)?;
    let n = values.as_samples().len();
    let run_shape = shape.clone();
    let found = interruptible(py, n, move || {
        let data = arrays::to_f32(&values);
        match engine.as_ref() {
            Engine::Gpu(gpu) => pollster::block_on(sources::sources(
                gpu,
                &data,
                &run_shape,
                &clip,
                p.level(),
                p.connectivity,
            )),
            Engine::Cpu => {
                sources::cpu::sources(&data, &run_shape, &clip, p.level(), p.connectivity)
            }
        }
    })?;
    let found = found.map_err(py_err)?;
    let d = PyDict::new(py);
    d.set_item("mean", found.stats.mean)?;
    d.set_item("median", found.stats.median)?;
    d.set_item("std", found.stats.std)?;
    d.set_item("threshold", found.threshold)?;
    d.set_item("num_features", found.labels.count)?;
    d.set_item("labels", arrays::array(py, found.labels.labels, &shape)?)?;
    let regions: Vec<_> = found.regions.into_iter().filter(|r| r.area > 0).collect();
    d.set_item("regions", regions_dict(py, &regions, shape.len())?)?;
    Ok(d)
}

/// Bytes the engine in use has copied to the device and back since it was
/// opened ((0, 0) on the CPU).
#[pyfunction]
pub fn bus_bytes(py: Python<'_>) -> PyResult<(u64, u64)> {
    Ok(match engine(py)?.as_ref() {
        Engine::Gpu(gpu) => gpu.bus_bytes(),
        Engine::Cpu => (0, 0),
    })
}

/// The engine's per-pass profile when GPUSCOPE_PROFILE was set before it
/// was opened: (entry point or "host: phase", milliseconds, passes),
/// emptied by the call; empty otherwise (and on the CPU). For finding
/// where a call's time goes.
#[pyfunction]
pub fn pass_profile(py: Python<'_>) -> PyResult<Vec<(String, f64, u64)>> {
    Ok(match engine(py)?.as_ref() {
        Engine::Gpu(gpu) => {
            let p = gpu.pass_profile();
            gpu.reset_profile();
            p
        }
        Engine::Cpu => Vec::new(),
    })
}

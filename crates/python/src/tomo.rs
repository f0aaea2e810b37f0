//! `gpuscope.tomo.normalize`: tomopy's flat/dark correction in float32.

use gpuscope_core::tomo::{self, Fields, NormalizeParams};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use gpuscope_core::keys::{SampleVec, Samples};

use crate::arrays::{self, Input};
use crate::convert;

/// The projections, read in place or copied.
enum Data {
    Borrowed(arrays::Borrowed),
    Copied(SampleVec),
}
use crate::device::{Engine, engine, interruptible, parse, py_err};

/// The frames of a flat or dark field as float32, with the plane they
/// must match (a 2-D array is one frame).
fn frames(obj: &Bound<'_, PyAny>, what: &str, plane: [usize; 2]) -> PyResult<Vec<f32>> {
    let Input { values, shape } = arrays::input(obj)?;
    let ok = match shape[..] {
        [y, x] | [_, y, x] => [y, x] == plane,
        _ => false,
    };
    if !ok {
        return Err(PyValueError::new_err(format!(
            "{what} has shape {shape:?}; give frames of the projections' {}x{} pixels, \
             as a 2-D array or a 3-D stack (frame, row, column)",
            plane[0], plane[1]
        )));
    }
    Ok(arrays::into_f32(values))
}

/// `normalize(arr, flat, dark, options)`: `(arr - dark) / max(flat - dark,
/// 1e-6)` per pixel with the averaged fields, as a float32 array.
#[pyfunction]
pub fn normalize<'py>(
    py: Python<'py>,
    arr: &Bound<'py, PyAny>,
    flat: &Bound<'py, PyAny>,
    dark: &Bound<'py, PyAny>,
    options: &str,
) -> PyResult<Bound<'py, PyAny>> {
    // Read in place where the array allows; converted to float32 on
    // threads (float32 as it lies).
    let (values, shape) = match arrays::borrowed(arr) {
        Some((x, shape)) => (Data::Borrowed(x), shape),
        None => {
            let Input { values, shape } = arrays::input(arr)?;
            (Data::Copied(values), shape)
        }
    };
    let plane = match shape[..] {
        [y, x] | [_, y, x] => [y, x],
        _ => {
            return Err(PyValueError::new_err(format!(
                "arr has shape {shape:?}; give a 2-D projection or a 3-D stack (projection, row, column)"
            )));
        }
    };
    let p: NormalizeParams = parse(options)?;
    p.validate().map_err(py_err)?;
    let flats = frames(flat, "flat", plane)?;
    let darks = frames(dark, "dark", plane)?;
    let engine = engine(py)?;
    let run_shape = shape.clone();
    let n = shape.iter().product();
    let result = interruptible(py, n, move || {
        let fields = Fields::new(&flats, &darks, plane, p.averaging)?;
        let converted;
        let data: &[f32] = match &values {
            Data::Borrowed(x) => match x.samples() {
                Samples::F32(v) => v,
                other => {
                    converted = convert::to_f32(other, convert::threads_for(n, false));
                    &converted
                }
            },
            Data::Copied(v) => {
                converted = arrays::to_f32(v);
                &converted
            }
        };
        if data.is_empty() {
            return Ok(Vec::new());
        }
        match engine.as_ref() {
            Engine::Gpu(gpu) => {
                pollster::block_on(tomo::gpu::normalize(gpu, data, &run_shape, &fields, &p))
            }
            Engine::Cpu => tomo::cpu::normalize(data, &run_shape, &fields, &p),
        }
    })?;
    arrays::array(py, result.map_err(py_err)?, &shape)
}

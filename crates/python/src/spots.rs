//! DIALS' spot finding (`gpuscope.spots`) and the file reader
//! (`gpuscope.io`).

use gpuscope_core::spots::{self, Counts, Gain, SpotOptions};
use numpy::PyArrayDyn;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrays;
use crate::device::{Engine, engine, interruptible, parse, py_err};

/// Detector counts, copied out of a numpy array of uint16, uint32 or int32.
enum Owned {
    U16(Vec<u16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
}

impl Owned {
    fn counts(&self) -> Counts<'_> {
        match self {
            Owned::U16(v) => Counts::U16(v),
            Owned::U32(v) => Counts::U32(v),
            Owned::I32(v) => Counts::I32(v),
        }
    }
}

fn counts(obj: &Bound<'_, PyAny>) -> PyResult<(Owned, Vec<usize>)> {
    if obj.cast::<PyArrayDyn<u16>>().is_ok() {
        let (v, s) = arrays::typed::<u16>(obj, "frames")?;
        return Ok((Owned::U16(v), s));
    }
    if obj.cast::<PyArrayDyn<u32>>().is_ok() {
        let (v, s) = arrays::typed::<u32>(obj, "frames")?;
        return Ok((Owned::U32(v), s));
    }
    let (v, s) = arrays::typed::<i32>(obj, "frames")
        .map_err(|_| PyTypeError::new_err("frames must be counts of uint16, uint32 or int32"))?;
    Ok((Owned::I32(v), s))
}

/// Strong pixels and spots of one frame (2-D) or a series (3-D). `options`:
/// the catalogue's `find_spots` parameters as JSON; `gain`: a per-pixel
/// gain map (a scalar gain travels in the JSON). Returns the strong-pixel
/// mask (frames x rows x cols, when `want_mask`) and the spot table.
#[pyfunction]
#[pyo3(signature = (frames, options, mask=None, gain=None, three_d=false, want_mask=true))]
#[allow(clippy::too_many_arguments)]
pub fn find_spots<'py>(
    py: Python<'py>,
    frames: &Bound<'py, PyAny>,
    options: &str,
    mask: Option<&Bound<'py, PyAny>>,
    gain: Option<&Bound<'py, PyAny>>,
    three_d: bool,
    want_mask: bool,
) -> PyResult<(Option<Bound<'py, PyAny>>, Bound<'py, PyDict>)> {
    let (values, shape) = counts(frames)?;
    let shape3 = match shape[..] {
        [h, w] => [1, h, w],
        [n, h, w] => [n, h, w],
        _ => {
            return Err(PyValueError::new_err(format!(
                "frames has {} axes (give one 2-D frame or a 3-D series of frames)",
                shape.len()
            )));
        }
    };
    let mut o: SpotOptions = parse(options)?;
    let plane = [shape3[1], shape3[2]];
    if let Some(g) = gain {
        let (g, gs) = arrays::typed::<f64>(g, "gain")?;
        if gs != plane {
            return Err(PyValueError::new_err(format!(
                "the gain map has the shape {gs:?} but a frame {plane:?} (give one gain per pixel)"
            )));
        }
        o.gain = Gain::Map(g);
    }
    let mask = match mask {
        Some(m) => {
            let (m, ms) = arrays::typed::<bool>(m, "mask")?;
            if ms != plane {
                return Err(PyValueError::new_err(format!(
                    "the mask has the shape {ms:?} but a frame {plane:?} (give one value per pixel, true = use it)"
                )));
            }
            Some(m)
        }
        None => None,
    };
    o.validate().map_err(py_err)?;
    let engine = engine(py)?;
    let found = interruptible(py, values.counts().len(), move || match engine.as_ref() {
        Engine::Gpu(gpu) => pollster::block_on(spots::find_spots_with(
            gpu,
            values.counts(),
            shape3,
            mask.as_deref(),
            &o,
            three_d,
            want_mask,
        )),
        Engine::Cpu => {
            spots::cpu::find_spots(values.counts(), shape3, mask.as_deref(), &o, three_d)
        }
    })?;
    let found = found.map_err(py_err)?;
    let strong = if want_mask {
        Some(arrays::array(py, found.strong, &shape3)?)
    } else {
        None
    };
    Ok((strong, table(py, &found.spots)?))
}

/// The spot table, one numpy column per field of the command line's CSV.
fn table<'py>(py: Python<'py>, spots: &[spots::Spot]) -> PyResult<Bound<'py, PyDict>> {
    let n = [spots.len()];
    let d = PyDict::new(py);
    let ints = |f: &dyn Fn(&spots::Spot) -> u64| -> Vec<i64> {
        spots.iter().map(|s| f(s) as i64).collect()
    };
    let floats = |f: &dyn Fn(&spots::Spot) -> f64| -> Vec<f64> { spots.iter().map(f).collect() };
    d.set_item("id", arrays::array(py, ints(&|s| s.id as u64), &n)?)?;
    for (i, name) in ["x0", "x1", "y0", "y1", "z0", "z1"].iter().enumerate() {
        d.set_item(*name, arrays::array(py, ints(&|s| s.bbox[i]), &n)?)?;
    }
    d.set_item("n_pixels", arrays::array(py, ints(&|s| s.n_pixels), &n)?)?;
    d.set_item(
        "intensity",
        arrays::array(py, floats(&|s| s.intensity), &n)?,
    )?;
    for (i, name) in ["x", "y", "z"].iter().enumerate() {
        d.set_item(*name, arrays::array(py, floats(&|s| s.centroid[i]), &n)?)?;
    }
    for (i, name) in ["variance_x", "variance_y", "variance_z"]
        .iter()
        .enumerate()
    {
        d.set_item(*name, arrays::array(py, floats(&|s| s.variance[i]), &n)?)?;
    }
    Ok(d)
}

/// A file's array (npy, TIFF, PNG, JPEG, CBF and .cbf.gz, FITS, HDF5,
/// Zarr), as the command line reads it; `allow_links_outside`: follow
/// links to files outside the input's folder.
#[pyfunction]
#[pyo3(signature = (path, allow_links_outside = false))]
pub fn read<'py>(
    py: Python<'py>,
    path: std::path::PathBuf,
    allow_links_outside: bool,
) -> PyResult<Bound<'py, PyAny>> {
    use gpuscope_io::ArrayData as D;
    let options = gpuscope_io::ReadOptions::allow_links_outside(allow_links_outside);
    let image = py
        .detach(|| gpuscope_io::read_with(&path, &options))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let a = image.array;
    let s = &a.shape;
    match a.data {
        D::Bool(v) => arrays::array(py, v, s),
        D::U8(v) => arrays::array(py, v, s),
        D::U16(v) => arrays::array(py, v, s),
        D::U32(v) => arrays::array(py, v, s),
        D::U64(v) => arrays::array(py, v, s),
        D::I8(v) => arrays::array(py, v, s),
        D::I16(v) => arrays::array(py, v, s),
        D::I32(v) => arrays::array(py, v, s),
        D::I64(v) => arrays::array(py, v, s),
        D::F32(v) => arrays::array(py, v, s),
        D::F64(v) => arrays::array(py, v, s),
    }
}

//! gpuscope's Python extension module (`gpuscope._gpuscope`): the core's
//! operations on numpy arrays. It is thin on purpose: every operation takes
//! its options as JSON text that deserialises into the core's parameter
//! type (the catalogue's names and defaults), array-valued parameters as
//! numpy arrays beside it. The Python package gives the reference
//! libraries' signatures on top (crates/python/python/gpuscope).

mod arrays;
mod chain;
mod convert;
mod device;
mod device_array;
mod inplace;
mod ops;
mod spots;
mod tomo;

use pyo3::prelude::*;

#[pymodule]
fn _gpuscope(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(device::catalogue_json, m)?)?;
    m.add_function(wrap_pyfunction!(device::devices, m)?)?;
    m.add_function(wrap_pyfunction!(device::set_device, m)?)?;
    m.add_function(wrap_pyfunction!(device::device, m)?)?;
    m.add_function(wrap_pyfunction!(ops::filter, m)?)?;
    m.add_function(wrap_pyfunction!(ops::label, m)?)?;
    m.add_function(wrap_pyfunction!(ops::regionprops, m)?)?;
    m.add_function(wrap_pyfunction!(ops::slic, m)?)?;
    m.add_function(wrap_pyfunction!(ops::sigma_clipped_stats, m)?)?;
    m.add_function(wrap_pyfunction!(tomo::normalize, m)?)?;
    m.add_function(wrap_pyfunction!(spots::find_spots, m)?)?;
    m.add_function(wrap_pyfunction!(spots::read, m)?)?;
    m.add_function(wrap_pyfunction!(chain::sources_chain, m)?)?;
    m.add_function(wrap_pyfunction!(chain::bus_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(chain::pass_profile, m)?)?;
    m.add_class::<device_array::PyDeviceArray>()?;
    m.add_function(wrap_pyfunction!(device_array::to_device, m)?)?;
    m.add_function(wrap_pyfunction!(device_array::device_filter, m)?)?;
    m.add_function(wrap_pyfunction!(device_array::device_label, m)?)?;
    m.add_function(wrap_pyfunction!(device_array::device_regionprops, m)?)?;
    m.add_function(wrap_pyfunction!(device_array::synchronize, m)?)?;
    Ok(())
}

//! gpuscope's shared core: the GPU engine, every operation (WGSL kernels
//! driven through wgpu) and the CPU reference of each. No file I/O here: the
//! same crate runs natively and in the browser.

pub mod boundary;
pub mod chunk;
mod copies;
pub mod engine;
pub mod error;
pub mod filters;
pub mod keys;
#[cfg(test)]
mod layout;
pub mod probe;
pub mod segment;
pub mod shaders;
pub mod slic;
pub mod spots;
pub mod stats;
pub mod stream;

pub use engine::{DeviceSummary, Gpu, GpuOptions};
pub use error::{Error, Result};
pub use keys::Samples;

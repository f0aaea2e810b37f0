//! gpuscope in the browser: a wasm-bindgen API over `gpuscope-core` (WebGPU
//! and the CPU reference of every operation) and `gpuscope-io` (decoding any
//! supported file from bytes). The page in `web/` imports the module that
//! `cargo xtask build-web` generates in `web/pkg/`.
//!
//! [`ops`] holds everything that does not touch JS and builds natively; the
//! bindings exist only in the wasm32 build.

pub mod ops;
pub mod segment;
pub mod spots;
pub mod words;

#[cfg(target_arch = "wasm32")]
mod bindings;
#[cfg(target_arch = "wasm32")]
mod h5_bindings;
#[cfg(target_arch = "wasm32")]
mod spots_bindings;
#[cfg(target_arch = "wasm32")]
mod zarr_bindings;

//! gpuscope's shared core: the GPU engine, every operation (WGSL kernels
//! driven through wgpu) and the CPU reference of each. No file I/O here: the
//! same crate runs natively and in the browser.

/// `Display`, `Serialize` and `Deserialize` for a parameter enum with a
/// `name()` and a `FromStr`: the reference library's spelling both ways, and
/// the core's own message for a bad value.
macro_rules! named_enum {
    ($t:ty) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <String as serde::Deserialize>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub mod bandwidth;
pub mod boundary;
pub mod catalogue;
pub mod chunk;
#[cfg(not(target_arch = "wasm32"))]
pub mod conveyor;
mod copies;
pub mod decode;
pub mod device_array;
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
pub mod tomo;

pub use device_array::{DeviceArray, Elements};
pub use engine::{DeviceSummary, Gpu, GpuOptions};
pub use error::{Error, Remedy, Result, Setting};
pub use keys::Samples;

//! numpy `.npy` files: header versions 1–3, every numeric dtype in either
//! byte order, Fortran or C order. Written as little-endian C order, v1 (v2
//! when the header needs it).
//!
//! By role: `header` (parsing and writing the header), `decode` (a whole
//! file in memory), `reader` (leading-axis slabs of a file, `.npy` or raw),
//! `writer` (slab by slab, or slabs at their offsets); the samples' byte
//! codecs are shared with the other formats in [`crate::elements`].

use crate::array::Array;
use crate::elements::write_data;
use crate::error::{IoError, Result};
use std::io::Write;

mod decode;
mod header;
#[cfg(not(target_arch = "wasm32"))]
mod reader;
#[cfg(not(target_arch = "wasm32"))]
mod writer;

pub use decode::decode;
pub use header::{Header, header_bytes, parse_header};
#[cfg(not(target_arch = "wasm32"))]
pub use reader::NpyReader;
#[cfg(not(target_arch = "wasm32"))]
pub use writer::{NpySlabWriter, NpyWriter};

/// Encode an array as a complete `.npy` file (v1, little-endian, C order).
pub fn encode(array: &Array) -> Vec<u8> {
    let mut out = header_bytes(&array.shape, array.dtype());
    out.extend_from_slice(&crate::elements::data_le_bytes(&array.data));
    out
}

/// Stream an array to a writer as `.npy`.
pub fn write_to<W: Write + ?Sized>(w: &mut W, array: &Array) -> Result<()> {
    array.validate()?;
    w.write_all(&header_bytes(&array.shape, array.dtype()))
        .and_then(|_| write_data(w, &array.data))
        .map_err(|e| IoError::io("cannot write the file", e))
}

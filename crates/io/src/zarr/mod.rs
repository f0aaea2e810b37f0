//! Zarr stores (directories named `.zarr`): v3 and v2 arrays read chunk by
//! chunk, v3 arrays written chunk by chunk with OME-Zarr metadata.
//!
//! An array is named `STORE.zarr` or `STORE.zarr::path/in/store`. A group
//! (the store's root or the path named) is followed to its array when it
//! carries OME-Zarr `multiscales` metadata: the first dataset of the first
//! multiscale, the full-resolution level.
//!
//! Codecs decoded: bytes (either byte order), transpose, gzip, zstd,
//! blosc, crc32c and sharding (v3); zlib, gzip, zstd and blosc
//! compressors and C or F order (v2). Others (v2 filters, unknown codecs)
//! are refused by name before any chunk is read; blosc's snappy streams
//! when met.
//!
//! Written in pure Rust on `flate2`, `ruzstd` and `lz4_flex` rather than
//! on the `zarrs` crate: zarrs decodes zstd (zarr-python's default v3
//! codec) and blosc (its default v2 compressor) only through the C
//! libraries, and its `serde_json` features (`preserve_order`) would
//! change every JSON document the workspace writes.

mod blosc;
mod codec;
mod meta;
mod reader;
pub mod store;
#[cfg(not(target_arch = "wasm32"))]
mod writer;

pub use reader::ZarrArray;
pub use store::{CallbackStore, Store};
#[cfg(not(target_arch = "wasm32"))]
pub use writer::{ZarrWriter, write};

/// `STORE.zarr::path` as (store, path in the store); `None` when the store
/// part does not end in `.zarr` (a trailing `/` allowed).
pub fn split_name(name: &str) -> Option<(&str, Option<&str>)> {
    let (store, path) = match name.find("::") {
        Some(i) => (&name[..i], Some(&name[i + 2..])),
        None => (name, None),
    };
    store
        .trim_end_matches('/')
        .to_ascii_lowercase()
        .ends_with(".zarr")
        .then_some((store, path.filter(|p| !p.trim_matches('/').is_empty())))
}

/// Whether `name` names a Zarr store (with or without `::path`).
pub fn is_zarr_name(name: &str) -> bool {
    split_name(name).is_some()
}

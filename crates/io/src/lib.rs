//! Pure-Rust readers and writers for scientific arrays: npy, TIFF (stacks),
//! PNG/JPEG, CBF (diffraction), FITS (primary HDU) and headerless raw
//! arrays (shape and dtype from a sidecar or the caller).
//!
//! Everything that parses input is written for hostile files: declared sizes
//! are checked against the bytes actually present before anything is
//! allocated, so a damaged file gives an [`IoError`], never a panic or an
//! out-of-memory abort. [`decode`] and [`encode`] work on byte slices and are
//! what the wasm build uses; [`read`] and [`write`] and the streaming
//! readers/writers are native only.
//! HDF5 is read natively by [`hdf5`] and, from bytes or byte ranges (the
//! page), by [`h5bytes`].

mod array;
#[cfg(not(target_arch = "wasm32"))]
mod atomic;
pub mod cbf;
mod elements;
mod error;
pub mod fits;
#[cfg(not(target_arch = "wasm32"))]
mod fortran;
pub mod h5bytes;
#[cfg(not(target_arch = "wasm32"))]
pub mod hdf5;
#[cfg(not(target_arch = "wasm32"))]
mod links;
pub mod npy;
#[cfg(not(target_arch = "wasm32"))]
mod pair;
pub mod png;
pub mod raw;
#[cfg(not(target_arch = "wasm32"))]
pub mod stack;
pub mod tiff;
pub mod zarr;

pub use array::{Array, ArrayData, DType, Stats, checked_product};
#[cfg(not(target_arch = "wasm32"))]
pub use atomic::{
    PendingOutput, ScratchDir, ScratchFile, TEMP_TAG, remove_stale_temporary,
    remove_unfinished_outputs, stale_temporaries, take_stale_temp_files, write_bytes_atomic,
};
pub use error::{ErrorKind, IoError, Result};
#[cfg(not(target_arch = "wasm32"))]
pub use links::ReadOptions;

#[cfg(not(target_arch = "wasm32"))]
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    Npy,
    Tiff,
    Png,
    Jpeg,
    Cbf,
    Fits,
    Raw,
    Hdf5,
    Zarr,
}

impl Format {
    pub fn name(&self) -> &'static str {
        match self {
            Format::Npy => "npy",
            Format::Tiff => "tiff",
            Format::Png => "png",
            Format::Jpeg => "jpeg",
            Format::Cbf => "cbf",
            Format::Fits => "fits",
            Format::Raw => "raw",
            Format::Hdf5 => "hdf5",
            Format::Zarr => "zarr",
        }
    }
}

/// A decoded file: the array plus whatever header fields the format carries
/// (CBF MIME and Pilatus header lines, FITS cards, TIFF page count).
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    pub array: Array,
    pub format: Format,
    pub header: Vec<(String, String)>,
}

impl Image {
    /// The first header value stored under `key`.
    pub fn header_value(&self, key: &str) -> Option<&str> {
        self.header
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

const EXTENSIONS: &str = ".npy .tif .tiff .png .jpg .jpeg .cbf .cbf.gz .fits .fit .fts .raw .h5 .hdf5 .nxs .nx5 .hdf .zarr";

/// HDF5 names, `FILE.h5` or `FILE.h5::/path/to/dataset`.
pub(crate) const HDF5_EXTENSIONS: [&str; 5] = [".h5", ".hdf5", ".nxs", ".nx5", ".hdf"];

/// The format named by a file name's extension (case-insensitive).
pub fn format_from_name(name: &str) -> Result<Format> {
    let lower = name.to_ascii_lowercase();
    let file_part = lower.split("::").next().unwrap_or(&lower);
    if HDF5_EXTENSIONS.iter().any(|e| file_part.ends_with(e)) {
        return Ok(Format::Hdf5);
    }
    if zarr::is_zarr_name(name) {
        return Ok(Format::Zarr);
    }
    let table: [(&str, Format); 12] = [
        (".npy", Format::Npy),
        (".tif", Format::Tiff),
        (".tiff", Format::Tiff),
        (".png", Format::Png),
        (".jpg", Format::Jpeg),
        (".jpeg", Format::Jpeg),
        (".cbf", Format::Cbf),
        (".cbf.gz", Format::Cbf),
        (".fits", Format::Fits),
        (".fit", Format::Fits),
        (".fts", Format::Fits),
        (".raw", Format::Raw),
    ];
    table
        .iter()
        .find(|(ext, _)| lower.ends_with(ext))
        .map(|&(_, f)| f)
        .ok_or_else(|| {
            IoError::unsupported(
                "unknown file extension",
                format!("name the file with one of {EXTENSIONS}"),
            )
            .in_file(name)
        })
}

/// Decode a whole file held in memory; the format comes from `name`'s
/// extension and `name` is what error messages cite.
pub fn decode(name: &str, bytes: &[u8]) -> Result<Image> {
    let format = format_from_name(name)?;
    let result = match format {
        Format::Npy => npy::decode(bytes).map(|array| Image {
            array,
            format,
            header: Vec::new(),
        }),
        Format::Tiff => tiff::decode(bytes),
        Format::Png => png::decode_png(bytes),
        Format::Jpeg => png::decode_jpeg(bytes),
        Format::Cbf => cbf::decode(bytes),
        Format::Fits => fits::decode(bytes),
        Format::Raw => Err(raw_needs_layout()),
        Format::Hdf5 => Err(IoError::unsupported(
            "HDF5 files are read from disk, not from memory",
            "give the file's path",
        )),
        Format::Zarr => Err(IoError::unsupported(
            "Zarr stores are directories, read from disk, not from memory",
            "give the store's path",
        )),
    };
    result.map_err(|e| e.in_file(name))
}

fn raw_needs_layout() -> IoError {
    IoError::unsupported(
        "a .raw file has no header, so its shape and dtype must be given",
        "write them beside it in NAME.raw.json as {\"shape\": [64, 2048, 2048], \"dtype\": \"uint16\"}, \
         or give gpuscope --raw-shape and --raw-dtype",
    )
}

/// Encode an array as a complete file. Only npy, TIFF, PNG and raw (the
/// samples alone; the layout is the caller's to keep) can be written.
pub fn encode(format: Format, array: &Array) -> Result<Vec<u8>> {
    let name = format!("({} output)", format.name());
    if let Err(e) = array.validate() {
        return Err(e.in_file(&name));
    }
    let result = match format {
        Format::Npy => Ok(npy::encode(array)),
        Format::Tiff => tiff::encode(array),
        Format::Png => png::encode_png(array),
        Format::Raw => {
            let mut bytes = Vec::with_capacity(array.len() * array.dtype().size_bytes());
            elements::write_data(&mut bytes, &array.data)
                .map_err(|e| IoError::io("cannot encode the samples", e))?;
            Ok(bytes)
        }
        Format::Jpeg | Format::Cbf | Format::Fits | Format::Hdf5 | Format::Zarr => {
            Err(IoError::unsupported(
                format!("writing {} is not supported", format.name()),
                "write .npy, .tif or .png instead",
            ))
        }
    };
    result.map_err(|e| e.in_file(&name))
}

/// Read a file; the format comes from the extension. A `.raw` file takes
/// its layout from its sidecar (see [`raw`]). Links out of the input's
/// folder are refused (see [`read_with`]).
#[cfg(not(target_arch = "wasm32"))]
pub fn read(path: &Path) -> Result<Image> {
    read_with(path, &ReadOptions::default())
}

/// [`read`] with the options on what a file may link to (HDF5 external
/// links and virtual-dataset sources, Zarr symlinks).
#[cfg(not(target_arch = "wasm32"))]
pub fn read_with(path: &Path, opts: &ReadOptions) -> Result<Image> {
    let name = path.to_string_lossy();
    // Check the name first so an unknown extension is reported without reading.
    if format_from_name(&name)? == Format::Raw {
        let layout = raw::read_sidecar(path)?.ok_or_else(|| raw_needs_layout().in_file(&name))?;
        return read_raw(path, &layout);
    }
    if format_from_name(&name)? == Format::Hdf5 {
        return read_hdf5(&name, opts);
    }
    if format_from_name(&name)? == Format::Zarr {
        return read_zarr(&name, opts);
    }
    let bytes = links::read_regular(path).map_err(|e| e.in_file(&name))?;
    decode(&name, &bytes)
}

/// Read an HDF5 dataset (`FILE.h5[::/path]`) whole; the header lists its
/// layout and the file's NeXus detector fields.
#[cfg(not(target_arch = "wasm32"))]
fn read_hdf5(name: &str, opts: &ReadOptions) -> Result<Image> {
    let mut stack = hdf5::Hdf5Stack::open_with(name, opts)?;
    let mut header = vec![("datasets".to_string(), stack.dataset_paths().join(" "))];
    if let Some(c) = stack.chunks() {
        header.push(("chunks".into(), format!("{c:?}")));
    }
    header.push(("filters".into(), stack.filters().join(", ")));
    header.extend(stack.detector()?.fields);
    Ok(Image {
        array: stack.read_all()?,
        format: Format::Hdf5,
        header,
    })
}

/// Read a Zarr array (`STORE.zarr[::path]`) whole; the header lists its
/// layout.
#[cfg(not(target_arch = "wasm32"))]
fn read_zarr(name: &str, opts: &ReadOptions) -> Result<Image> {
    let mut z = zarr::ZarrArray::open_with(name, opts)?;
    let mut header = vec![
        ("zarr_format".to_string(), z.zarr_format().to_string()),
        ("array".into(), z.path().to_string()),
        ("chunks".into(), format!("{:?}", z.chunks())),
    ];
    if let Some(inner) = z.inner_chunks() {
        header.push(("inner_chunks".into(), format!("{inner:?}")));
    }
    header.push(("codecs".into(), z.codecs().join(", ")));
    Ok(Image {
        array: z.read_all()?,
        format: Format::Zarr,
        header,
    })
}

/// Read a headerless file whole with the layout given.
#[cfg(not(target_arch = "wasm32"))]
pub fn read_raw(path: &Path, layout: &raw::RawLayout) -> Result<Image> {
    Ok(Image {
        array: raw::read(path, layout)?,
        format: Format::Raw,
        header: Vec::new(),
    })
}

/// Write a file, format by extension (`.raw`: the samples and a sidecar). The data go to a temporary file in the
/// same directory which is renamed over `path` only once complete, so a
/// failure never leaves a partial output file.
#[cfg(not(target_arch = "wasm32"))]
pub fn write(path: &Path, array: &Array) -> Result<()> {
    let name = path.to_string_lossy();
    let format = format_from_name(&name)?;
    array.validate().map_err(|e| e.in_file(&name))?;
    match format {
        // npy streams straight to disk: no second copy of a large array.
        Format::Npy => atomic::write_atomic(path, |w| npy::write_to(w, array)),
        Format::Raw => raw::write(path, array),
        Format::Zarr => zarr::write(path, array),
        _ => {
            let bytes = encode(format, array).map_err(|mut e| {
                e.file = error::display_name(&name);
                e
            })?;
            atomic::write_atomic(path, |w| {
                std::io::Write::write_all(w, &bytes)
                    .map_err(|e| IoError::io("cannot write the file", e))
            })
        }
    }
    .map_err(|e| e.in_file(&name))
}

/// Sanity bound on the decoded size of compressed images (PNG, JPEG, TIFF):
/// generous for real files, but a tiny file cannot make us allocate gigabytes.
/// Deflate cannot expand more than ~1032:1, hence the factor.
pub(crate) fn decoded_size_limit(input_len: usize) -> usize {
    const FLOOR: usize = 512 << 20;
    FLOOR.max(input_len.saturating_mul(1100))
}

//! HDF5 and NeXus from bytes or byte ranges, for the page: the native
//! reader (`rust-hdf5`, module [`crate::hdf5`]) reads only through
//! `std::fs::File`, which wasm32 lacks, so the page reads through
//! `hdf5-reader`, whose storage is any byte-range source (a `File.slice()`
//! in the decoding worker). Filters: deflate, shuffle, Fletcher-32, LZ4
//! (32004) and bitshuffle-LZ4 (32008, decoded here). External links resolve
//! against the other files given with the first (an Eiger master picked
//! with its data files). Virtual datasets are not read (`hdf5-reader` has
//! none).
//!
//! Which dataset a file means without a path follows the native reader:
//! the NeXus default (`default` attributes to an NXdata `signal`), else an
//! Eiger master's `/entry/data/data_*` links as one series of frames.

mod bitshuffle;

pub use bitshuffle::encode_lz4 as encode_bitshuffle_lz4;

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use hdf5_reader::group::Group;
use hdf5_reader::storage::{BlockCacheStorage, DynStorage, RangeRequestStorage};
use hdf5_reader::{
    Dataset, Datatype, ExternalLinkResolver, FilterRegistry, Hdf5File, OpenOptions, SliceInfo,
    SliceInfoElem,
};

use crate::{Array, ArrayData, DType, IoError, Result};

type H5Error = hdf5_reader::error::Error;

/// Reads `len` bytes at `offset` of one file; the error is a message.
pub type RangeReader = dyn Fn(u64, usize) -> std::result::Result<Vec<u8>, String> + Send + Sync;

/// One file given to the reader: its name (external links name files by
/// it), length and a range reader.
#[derive(Clone)]
pub struct Source {
    pub name: String,
    pub len: u64,
    pub read: Arc<RangeReader>,
}

impl Source {
    /// A file held whole in memory.
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Source {
        let bytes = Arc::new(bytes);
        Source {
            name: name.to_string(),
            len: bytes.len() as u64,
            read: Arc::new(move |offset, len| {
                let start = usize::try_from(offset).map_err(|_| "offset out of range")?;
                start
                    .checked_add(len)
                    .and_then(|end| bytes.get(start..end))
                    .map(<[u8]>::to_vec)
                    .ok_or_else(|| "read past the end of the file".to_string())
            }),
        }
    }
}

/// One entry of the file's tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// `/entry/data/data`.
    pub path: String,
    /// Datasets: shape and dtype name (`None` for groups, and for datasets
    /// of a type gpuscope does not read, with `note` saying why).
    pub shape: Option<Vec<usize>>,
    pub dtype: Option<String>,
    pub note: String,
}

/// Nodes listed before the tree is cut short.
const MAX_NODES: usize = 2000;
/// `default` hops followed before a loop is assumed.
const MAX_HOPS: usize = 16;
/// Read requests are served from cached blocks of this size.
const BLOCK: usize = 256 << 10;

/// An opened file (and the files its links reach).
pub struct H5Bytes {
    name: String,
    file: Hdf5File,
    limit: usize,
}

/// A dataset, or an Eiger series of datasets, read frame by frame.
pub struct H5Series {
    name: String,
    parts: Vec<(String, Dataset, usize)>,
    shape: Vec<usize>,
    dtype: DType,
    limit: usize,
}

/// Runs one call into `hdf5-reader`; its error, or a panic inside it,
/// becomes an [`IoError`] about `what`.
fn guard<T>(what: &str, f: impl FnOnce() -> std::result::Result<T, H5Error>) -> Result<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(convert(what, e)),
        Err(_) => Err(IoError::corrupt(format!(
            "{what}: the HDF5 decoder failed on damaged data"
        ))),
    }
}

fn convert(what: &str, e: H5Error) -> IoError {
    let inner = |e: &H5Error| -> String { e.to_string() };
    let mut root = &e;
    while let H5Error::Context { source, .. } = root {
        root = source;
    }
    match root {
        H5Error::UnexpectedEof { .. } | H5Error::OffsetOutOfBounds(_) => {
            IoError::truncated(format!("{what}: the file ends early"))
        }
        H5Error::Other(m) if m.starts_with(MISSING) => IoError::new(
            crate::ErrorKind::Io,
            format!("{what}: {m}"),
            "pick the Eiger data files together with their master file",
        ),
        H5Error::DatasetNotFound(_) | H5Error::GroupNotFound(_) => IoError::invalid(
            format!("{what}: no dataset or group {}", inner(root)),
            "pick a dataset from the file's tree",
        ),
        H5Error::UnsupportedLayoutClass(3) => IoError::unsupported(
            format!("{what}: a virtual dataset, which the page does not read"),
            "read it with the gpuscope command line, or pick one of its source datasets",
        ),
        H5Error::UnsupportedFilter(f) => IoError::unsupported(
            format!("{what}: compressed with {f}, which the page does not decode"),
            "re-save it with bitshuffle-LZ4, LZ4 or deflate (h5repack -f, or hdf5plugin in h5py)",
        ),
        H5Error::Io(_) | H5Error::InvalidData(_) if e.to_string().contains(READ_FAILED) => {
            IoError::new(
                crate::ErrorKind::Io,
                format!("{what}: {e}"),
                "pick the file again",
            )
        }
        _ => IoError::corrupt(format!("{what}: {e}")),
    }
}

/// Message start of a link into a file that was not given.
const MISSING: &str = "the external link points into ";
/// Message start of a failed range read.
const READ_FAILED: &str = "cannot read the file: ";

fn storage(src: &Source) -> DynStorage {
    let read = src.read.clone();
    let ranges = RangeRequestStorage::new(src.len, move |offset, len| {
        read(offset, len).map_err(|m| H5Error::InvalidData(format!("{READ_FAILED}{m}")))
    });
    Arc::new(BlockCacheStorage::new(Arc::new(ranges), BLOCK, 64))
}

fn options(limit: usize) -> OpenOptions {
    let mut filters = FilterRegistry::new();
    filters.register(
        32008,
        Box::new(move |f, data, elem| {
            bitshuffle::decode(&f.client_data, data, elem, limit)
                .map_err(H5Error::DecompressionError)
        }),
    );
    OpenOptions::default()
        .with_filter_registry(filters)
        .with_max_chunk_bytes(limit)
        .with_max_read_bytes(limit)
}

/// External links resolve against the other files given, by file name
/// (directories in the link are ignored: the picker gives names only).
struct Linked {
    files: Vec<Source>,
    limit: usize,
    opened: Mutex<HashMap<String, Hdf5File>>,
}

fn base_name(name: &str) -> &str {
    name.rsplit(['/', '\\']).next().unwrap_or(name)
}

impl ExternalLinkResolver for Linked {
    fn resolve_external_link(
        &self,
        filename: &str,
    ) -> std::result::Result<Option<Hdf5File>, H5Error> {
        let want = base_name(filename);
        let mut opened = self
            .opened
            .lock()
            .map_err(|_| H5Error::Other("lock".into()))?;
        if let Some(f) = opened.get(want) {
            return Ok(Some(f.clone()));
        }
        let Some(src) = self.files.iter().find(|s| base_name(&s.name) == want) else {
            return Err(H5Error::Other(format!(
                "{MISSING}{want}, which was not given with this file"
            )));
        };
        // Data files are opened without a link resolver: links out of them
        // (or back into the master) are not followed, so they cannot loop.
        let f = Hdf5File::from_storage_with_options(storage(src), options(self.limit))?;
        opened.insert(want.to_string(), f.clone());
        Ok(Some(f))
    }
}

impl H5Bytes {
    /// Opens `files[0]`; the others are what its external links may reach.
    pub fn open(files: &[Source]) -> Result<H5Bytes> {
        let Some(main) = files.first() else {
            return Err(IoError::invalid("no file given", "give an HDF5 file"));
        };
        let all: u64 = files.iter().map(|f| f.len).sum();
        let limit = crate::decoded_size_limit(usize::try_from(all).unwrap_or(usize::MAX));
        let linked = Arc::new(Linked {
            files: files[1..].to_vec(),
            limit,
            opened: Mutex::new(HashMap::new()),
        });
        let opts = options(limit).with_external_link_resolver(linked);
        let file = guard("cannot open the HDF5 file", || {
            Hdf5File::from_storage_with_options(storage(main), opts)
        })
        .map_err(|e| e.in_file(&main.name))?;
        Ok(H5Bytes {
            name: main.name.clone(),
            file,
            limit,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn group(&self, path: &str) -> Option<Group> {
        guard(path, || self.file.group(path)).ok()
    }

    fn attr(g: &Group, name: &str) -> Option<String> {
        guard(name, || g.attribute(name)?.read_string()).ok()
    }

    fn is_dataset(&self, path: &str) -> Result<bool> {
        match guard(path, || self.file.dataset(path)) {
            Ok(_) => Ok(true),
            Err(e) if e.kind == crate::ErrorKind::InvalidArgument => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Every group and dataset, depth first in name order (cut at
    /// 2000 entries). A link into a file not given makes it an error.
    pub fn tree(&self) -> Result<Vec<Node>> {
        let mut out = Vec::new();
        self.walk("/", &mut out)
            .map_err(|e| e.in_file(&self.name))?;
        Ok(out)
    }

    fn walk(&self, at: &str, out: &mut Vec<Node>) -> Result<()> {
        let g = guard(at, || self.file.group(at))?;
        let (mut groups, mut datasets) = guard(at, || g.member_names())?;
        groups.sort();
        datasets.sort();
        for d in datasets {
            if out.len() >= MAX_NODES {
                return Ok(());
            }
            let path = join(at, &d);
            // A dataset the page cannot read (a virtual one) is listed with
            // the reason; a link into a file not given stays an error.
            let ds = match guard(&path, || self.file.dataset(&path)) {
                Ok(ds) => ds,
                Err(e) if e.kind == crate::ErrorKind::Unsupported => {
                    out.push(Node {
                        path,
                        shape: None,
                        dtype: None,
                        note: e.message,
                    });
                    continue;
                }
                Err(e) => return Err(e),
            };
            let shape: Vec<usize> = ds.shape().iter().map(|&s| s as usize).collect();
            let (dtype, note) = match dtype_of(&path, ds.dtype()) {
                Ok(t) => (Some(t.name().to_string()), String::new()),
                Err(e) => (None, e.message),
            };
            out.push(Node {
                path,
                shape: Some(shape),
                dtype,
                note,
            });
        }
        for sub in groups {
            if out.len() >= MAX_NODES {
                return Ok(());
            }
            let path = join(at, &sub);
            out.push(Node {
                path: path.clone(),
                shape: None,
                dtype: None,
                note: String::new(),
            });
            self.walk(&path, out)?;
        }
        Ok(())
    }

    /// The dataset paths `path` means: a dataset itself, or the NeXus
    /// default of a group; with none, the file's NeXus default, else an
    /// Eiger master's `/entry/data/data_*` series.
    pub fn resolve(&self, path: Option<&str>) -> Result<Vec<String>> {
        self.resolve_inner(path).map_err(|e| e.in_file(&self.name))
    }

    fn resolve_inner(&self, path: Option<&str>) -> Result<Vec<String>> {
        if let Some(p) = path.filter(|p| !p.is_empty()) {
            let p = join("/", p);
            if self.is_dataset(&p)? {
                return Ok(vec![p]);
            }
            if self.group(&p).is_none() {
                return Err(IoError::invalid(
                    format!("no dataset or group {p}"),
                    "pick a dataset from the file's tree",
                ));
            }
            if let Some(d) = self.follow_default(&p)? {
                return Ok(vec![d]);
            }
            return match self.eiger_series(&p)? {
                Some(s) => Ok(s),
                None => Err(IoError::invalid(
                    format!("{p} is a group without a NeXus default (`default`/`signal`)"),
                    "pick a dataset from the file's tree",
                )),
            };
        }
        if let Some(d) = self.follow_default("/")? {
            return Ok(vec![d]);
        }
        if let Some(s) = self.eiger_series("/entry/data")? {
            return Ok(s);
        }
        if let Some(d) = self.follow_default("/entry/data")? {
            return Ok(vec![d]);
        }
        Err(IoError::invalid(
            "the file names no default dataset (no NeXus `default` attribute, no Eiger /entry/data/data_* links)",
            "pick a dataset from the file's tree",
        ))
    }

    fn follow_default(&self, start: &str) -> Result<Option<String>> {
        let mut at = start.to_string();
        for _ in 0..MAX_HOPS {
            let Some(g) = self.group(&at) else {
                return Ok(None);
            };
            if let Some(signal) = Self::attr(&g, "signal") {
                let d = join(&at, &signal);
                return Ok(self.is_dataset(&d)?.then_some(d));
            }
            let Some(next) = Self::attr(&g, "default") else {
                return Ok(None);
            };
            let next = join(&at, &next);
            if self.is_dataset(&next)? {
                return Ok(Some(next));
            }
            at = next;
        }
        Err(IoError::corrupt(format!(
            "the NeXus `default` attributes from {start} go round in a loop"
        )))
    }

    fn eiger_series(&self, at: &str) -> Result<Option<Vec<String>>> {
        let Some(g) = self.group(at) else {
            return Ok(None);
        };
        let (_, names) = guard(at, || g.member_names())?;
        let mut names: Vec<String> = names
            .into_iter()
            .filter(|n| n.starts_with("data_"))
            .collect();
        names.sort();
        Ok((!names.is_empty()).then(|| names.iter().map(|n| join(at, n)).collect()))
    }

    /// What spot finding leaves out, as DIALS does for Eiger files: the
    /// detector's pixel mask (non-zero: bad; `None` when absent or not of
    /// `frame`'s shape) and the count cutoff (`saturation_value`, else
    /// `countrate_correction_count_cutoff`).
    pub fn detector_mask(&self, frame: &[usize]) -> Result<(Option<Vec<u32>>, Option<f64>)> {
        let mask_path = "/entry/instrument/detector/detectorSpecific/pixel_mask";
        let mut mask = None;
        if self.is_dataset(mask_path)? {
            let ds = guard(mask_path, || self.file.dataset(mask_path))?;
            let shape: Vec<usize> = ds.shape().iter().map(|&s| s as usize).collect();
            if shape == frame && bytes_of(&shape, 8).is_some_and(|b| b <= self.limit) {
                let t = dtype_of(mask_path, ds.dtype())?;
                let a = Array::new(
                    shape.clone(),
                    read(&ds, mask_path, t, &SliceInfo::all(shape.len()))?,
                )?;
                mask = Some(
                    a.to_f64_vec()
                        .into_iter()
                        .map(|v| {
                            if v == 0.0 {
                                0
                            } else {
                                v.min(u32::MAX as f64) as u32
                            }
                        })
                        .collect(),
                );
            }
        }
        let mut cutoff = None;
        for p in [
            "/entry/instrument/detector/saturation_value",
            "/entry/instrument/detector/detectorSpecific/countrate_correction_count_cutoff",
        ] {
            if cutoff.is_none() && self.is_dataset(p)? {
                let ds = guard(p, || self.file.dataset(p))?;
                if guard(p, || ds.num_elements())? == 1 {
                    let t = dtype_of(p, ds.dtype())?;
                    let v = read(&ds, p, t, &SliceInfo::all(ds.ndim()))?;
                    cutoff = Array::new(vec![1], v)
                        .ok()
                        .and_then(|a| a.to_f64_vec().first().copied());
                }
            }
        }
        Ok((mask, cutoff.filter(|c| c.is_finite() && *c >= 0.0)))
    }

    /// Opens the datasets `path` means (see [`H5Bytes::resolve`]) as one
    /// series along the first axis.
    pub fn series(&self, path: Option<&str>) -> Result<H5Series> {
        let paths = self.resolve(path)?;
        self.series_of(&paths).map_err(|e| e.in_file(&self.name))
    }

    fn series_of(&self, paths: &[String]) -> Result<H5Series> {
        let mut parts = Vec::with_capacity(paths.len());
        let mut first: Option<(Vec<usize>, DType)> = None;
        for p in paths {
            let ds = guard(p, || self.file.dataset(p))?;
            let s: Vec<usize> = ds.shape().iter().map(|&s| s as usize).collect();
            let t = dtype_of(p, ds.dtype())?;
            match &first {
                Some((s0, t0))
                    if s.len() != 3 || s0.len() != 3 || s[1..] != s0[1..] || t != *t0 =>
                {
                    return Err(IoError::corrupt(format!(
                        "{p}: {s:?} {} does not continue the series of {:?} {} frames",
                        t.name(),
                        s0.get(1..).unwrap_or(&[]),
                        t0.name()
                    )));
                }
                Some(_) => {}
                None => first = Some((s.clone(), t)),
            }
            let frames = s.first().copied().unwrap_or(1);
            parts.push((p.clone(), ds, frames));
        }
        let Some((mut shape, dtype)) = first else {
            return Err(IoError::corrupt("the file holds no dataset to read"));
        };
        if parts.len() > 1 {
            shape[0] = parts.iter().map(|p| p.2).sum();
        }
        let frame = shape.get(1..).unwrap_or(&[]);
        if bytes_of(frame, dtype.size_bytes()).is_none_or(|b| b > self.limit) {
            return Err(IoError::too_large(format!(
                "a frame of {frame:?} {} is more than this file can hold",
                dtype.name()
            )));
        }
        Ok(H5Series {
            name: self.name.clone(),
            parts,
            shape,
            dtype,
            limit: self.limit,
        })
    }
}

impl H5Series {
    /// The whole shape (an Eiger series: the frames of all data files).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The dataset paths read, in order.
    pub fn dataset_paths(&self) -> Vec<String> {
        self.parts.iter().map(|p| p.0.clone()).collect()
    }

    /// Frames along the first axis (1 for a dataset of fewer than 3 axes,
    /// which is read whole as one frame).
    pub fn frames(&self) -> usize {
        if self.shape.len() >= 3 {
            self.shape[0]
        } else {
            1
        }
    }

    /// Frame `z` (of [`H5Series::frames`]), shape `shape[1..]`; a dataset of
    /// fewer than 3 axes whole.
    pub fn frame(&self, z: usize) -> Result<Array> {
        self.frame_inner(z).map_err(|e| e.in_file(&self.name))
    }

    fn frame_inner(&self, z: usize) -> Result<Array> {
        if self.shape.len() < 3 {
            let (path, ds, _) = &self.parts[0];
            if bytes_of(&self.shape, self.dtype.size_bytes()).is_none_or(|b| b > self.limit) {
                return Err(IoError::too_large(format!(
                    "{path}: too large to read whole"
                )));
            }
            let data = read(ds, path, self.dtype, &SliceInfo::all(self.shape.len()))?;
            return Array::new(self.shape.clone(), data);
        }
        let mut first = 0;
        for (path, ds, n) in &self.parts {
            if z < first + n && self.dtype == DType::Bool {
                // Read whole (bounded), then cut: see `read`.
                let whole: Vec<usize> = std::iter::once(*n)
                    .chain(self.shape[1..].iter().copied())
                    .collect();
                if bytes_of(&whole, 1).is_none_or(|b| b > self.limit) {
                    return Err(IoError::too_large(format!(
                        "{path}: too large to read whole"
                    )));
                }
                let ArrayData::Bool(all) =
                    read(ds, path, self.dtype, &SliceInfo::all(whole.len()))?
                else {
                    return Err(IoError::corrupt("a boolean read gave another dtype"));
                };
                let per = all.len() / n.max(&1);
                let frame = all
                    .get((z - first) * per..(z - first + 1) * per)
                    .unwrap_or(&[])
                    .to_vec();
                return Array::new(self.shape[1..].to_vec(), ArrayData::Bool(frame));
            }
            if z < first + n {
                let mut sel = SliceInfo::all(self.shape.len());
                sel.selections[0] = SliceInfoElem::Slice {
                    start: (z - first) as u64,
                    end: (z - first + 1) as u64,
                    step: 1,
                };
                let data = read(ds, path, self.dtype, &sel)?;
                return Array::new(self.shape[1..].to_vec(), data);
            }
            first += n;
        }
        Err(IoError::invalid(
            format!("frame {z} asked of a series of {} frames", self.frames()),
            "ask for a frame within the series",
        ))
    }
}

fn join(base: &str, child: &str) -> String {
    if child.starts_with('/') {
        child.to_string()
    } else {
        format!("{}/{}", base.trim_end_matches('/'), child)
    }
}

fn bytes_of(shape: &[usize], elem: usize) -> Option<usize> {
    crate::checked_product(shape)?.checked_mul(elem)
}

fn read(ds: &Dataset, path: &str, dtype: DType, sel: &SliceInfo) -> Result<ArrayData> {
    let what = format!("{path}: cannot read the data");
    macro_rules! get {
        ($t:ty) => {
            guard(&what, || ds.read_slice::<$t>(sel))?
                .into_raw_vec_and_offset()
                .0
        };
    }
    Ok(match dtype {
        DType::U8 => ArrayData::U8(get!(u8)),
        DType::I8 => ArrayData::I8(get!(i8)),
        DType::U16 => ArrayData::U16(get!(u16)),
        DType::I16 => ArrayData::I16(get!(i16)),
        DType::U32 => ArrayData::U32(get!(u32)),
        DType::I32 => ArrayData::I32(get!(i32)),
        DType::U64 => ArrayData::U64(get!(u64)),
        DType::I64 => ArrayData::I64(get!(i64)),
        DType::F32 => ArrayData::F32(get!(f32)),
        DType::F64 => ArrayData::F64(get!(f64)),
        // h5py's bool is an enum, which the crate reads as raw bytes only.
        DType::Bool => {
            let all = sel.selections.iter().all(|s| {
                matches!(
                    s,
                    SliceInfoElem::Slice {
                        start: 0,
                        end: u64::MAX,
                        step: 1
                    }
                )
            });
            if !all {
                return Err(IoError::unsupported(
                    format!("{path}: frames of a boolean dataset"),
                    "pick a dataset of integers or floats",
                ));
            }
            let raw = guard(&what, || ds.read_raw_bytes())?;
            ArrayData::Bool(raw.into_iter().map(|b| b != 0).collect())
        }
    })
}

/// The array dtype of an HDF5 datatype, as the native reader maps them.
fn dtype_of(path: &str, t: &Datatype) -> Result<DType> {
    let unsupported = |what: String| {
        IoError::unsupported(
            format!("{path}: {what} is not an array gpuscope reads"),
            "pick a dataset of integers or floats",
        )
    };
    Ok(match t {
        Datatype::FixedPoint { size, signed, .. } => {
            crate::elements::integer_dtype(*size as usize, *signed)
                .ok_or_else(|| unsupported(format!("a {size}-byte integer")))?
        }
        Datatype::FloatingPoint { size, .. } => crate::elements::float_dtype(*size as usize)
            .ok_or_else(|| unsupported(format!("a {size}-byte float")))?,
        Datatype::Enum { base, members }
            if matches!(**base, Datatype::FixedPoint { size: 1, .. })
                && members.len() == 2
                && members.iter().any(|m| m.name == "FALSE")
                && members.iter().any(|m| m.name == "TRUE") =>
        {
            DType::Bool
        }
        _ => return Err(unsupported("this datatype (text, compound, ...)".into())),
    })
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;

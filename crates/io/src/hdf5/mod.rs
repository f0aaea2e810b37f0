//! HDF5 and NeXus files (.h5 .hdf5 .nxs .nx5 .hdf), read through the
//! pure-Rust `rust-hdf5` crate (no libhdf5): chunked and contiguous
//! datasets, deflate, shuffle, LZ4, bitshuffle-LZ4, external links and
//! virtual datasets.
//!
//! A dataset is named as silx names it, `FILE.h5::/path/to/dataset`. Without
//! a path the file's NeXus default (`default` attributes down to an NXdata
//! group's `signal`) is read, or, for an Eiger master file, every
//! `/entry/data/data_*` link in name order as one series of frames.
//!
//! [`Hdf5Stack`] reads frames (slices along the first axis) on demand,
//! decoding only the chunks they touch, so a series larger than memory is
//! never held whole. Every call into the crate goes through [`guard`]: its
//! errors become [`IoError`]s and, as a last resort because the crate is
//! large and its behaviour on every damaged file cannot be audited, a panic
//! inside it is caught and reported as a damaged file. Sizes the file
//! declares (frames, chunks) are checked before anything is allocated.

mod checksum;
mod links;
mod nexus;

use std::panic::AssertUnwindSafe;
use std::path::Path;

use rust_hdf5::{DatatypeMessage, H5Dataset, H5File, Hdf5Error};

use crate::{Array, ArrayData, DType, IoError, ReadOptions, Result};

pub use nexus::Detector;

/// The file-name endings read as HDF5.
pub const EXTENSIONS: [&str; 5] = crate::HDF5_EXTENSIONS;

/// Filters the reader decodes: deflate, shuffle, Fletcher-32, szip, n-bit,
/// scale-offset, LZ4 (32004) and bitshuffle (32008).
const DECODED_FILTERS: [u16; 8] = [1, 2, 3, 4, 5, 6, 32004, 32008];

/// `FILE.h5::/path` as (file, dataset path); `None` when the file part does
/// not end in an HDF5 extension.
pub fn split_name(name: &str) -> Option<(&str, Option<&str>)> {
    let (file, path) = match name.find("::") {
        Some(i) => (&name[..i], Some(&name[i + 2..])),
        None => (name, None),
    };
    let lower = file.to_ascii_lowercase();
    EXTENSIONS
        .iter()
        .any(|e| lower.ends_with(e))
        .then_some((file, path.filter(|p| !p.is_empty())))
}

/// Whether `name` names an HDF5 file (with or without `::path`).
pub fn is_hdf5_name(name: &str) -> bool {
    split_name(name).is_some()
}

/// Runs one call into `rust-hdf5`: its error, or a panic inside it, becomes
/// an [`IoError`] about `what`.
pub(crate) fn guard<T>(
    what: &str,
    f: impl FnOnce() -> std::result::Result<T, Hdf5Error>,
) -> Result<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(convert(what, e)),
        Err(_) => Err(IoError::corrupt(format!(
            "{what}: the HDF5 decoder failed on damaged data"
        ))),
    }
}

fn convert(what: &str, e: Hdf5Error) -> IoError {
    match e {
        Hdf5Error::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            IoError::truncated(format!("{what}: the file ends early"))
        }
        Hdf5Error::Io(io) => IoError::io(what, io),
        Hdf5Error::ExternalFileNotFound { link, file, .. } => IoError::new(
            crate::ErrorKind::Io,
            format!("{what}: the link {link} points into {file}, which cannot be opened"),
            format!(
                "keep {file} beside the file that links to it (Eiger data files go with their master)"
            ),
        ),
        Hdf5Error::NotFound(name) => IoError::invalid(
            format!("{what}: no dataset or group {name}"),
            "`gpuscope info FILE.h5` lists the datasets; name one as FILE.h5::/path/to/dataset",
        ),
        Hdf5Error::DanglingLink { link, target } => IoError::corrupt(format!(
            "{what}: the link {link} points to {target}, which does not exist (or the links loop)"
        )),
        Hdf5Error::Unsupported(s) => IoError::unsupported(
            format!("{what}: {s}"),
            "re-save the dataset with a supported layout (e.g. h5repack)",
        ),
        other => IoError::corrupt(format!("{what}: {other}")),
    }
}

/// One dataset of a series: its path in the opened file and frame count.
#[derive(Debug, Clone)]
struct Part {
    path: String,
    frames: usize,
}

/// A dataset (or an Eiger series of datasets) read frame by frame.
pub struct Hdf5Stack {
    /// The file name errors cite.
    name: String,
    file: H5File,
    /// What the file's links may reach.
    links: links::Links,
    parts: Vec<Part>,
    shape: Vec<usize>,
    dtype: DType,
    /// Largest frame or chunk, in bytes, the file may make us decode.
    limit: usize,
    /// The caller's bound on one chunk's decoded bytes.
    max_chunk_bytes: Option<usize>,
    /// The part last read, kept open.
    current: Option<(usize, H5Dataset)>,
    chunks: Option<Vec<usize>>,
    filters: Vec<String>,
    /// Every part stores each frame as one bitshuffle-LZ4 chunk of
    /// little-endian elements (see [`Hdf5Stack::read_frame_chunk`]).
    bslz4_frames: bool,
}

impl Hdf5Stack {
    /// Opens `FILE.h5[::/path]`: the dataset named, else the NeXus default
    /// or the Eiger series.
    pub fn open(name: &str) -> Result<Hdf5Stack> {
        Self::open_with(name, &ReadOptions::default())
    }

    /// [`Hdf5Stack::open`] with the options on links out of the input's
    /// folder (external links, virtual-dataset sources, Eiger data files).
    pub fn open_with(name: &str, opts: &ReadOptions) -> Result<Hdf5Stack> {
        let (file_name, path) = split_name(name).ok_or_else(|| {
            IoError::unsupported(
                "not an HDF5 file name",
                format!("name HDF5 files with one of {}", EXTENSIONS.join(" ")),
            )
            .in_file(name)
        })?;
        Self::open_parts(file_name, path, opts).map_err(|e| e.in_file(file_name))
    }

    fn open_parts(file_name: &str, path: Option<&str>, opts: &ReadOptions) -> Result<Hdf5Stack> {
        let file_path = Path::new(file_name);
        // A clear message for a missing file before the crate's own; a FIFO
        // or device is refused before the crate blocks on it.
        crate::links::regular_file(file_path)?;
        let len = std::fs::metadata(file_path)
            .map_err(|e| IoError::io("cannot open the file", e))?
            .len();
        let file = guard("cannot open the HDF5 file", || H5File::open(file_path))?;
        let links = links::Links::new(file_path, opts);
        let paths = nexus::resolve(&file, &links, path)?;
        let mut parts = Vec::with_capacity(paths.len());
        let mut shape: Option<Vec<usize>> = None;
        let mut dtype = None;
        let mut chunks = None;
        let mut filters = Vec::new();
        let mut linked_bytes = 0u64;
        let mut bslz4_frames = true;
        let mut grid = Vec::new();
        for p in &paths {
            links.check(&file, p)?;
            let ds = guard(p, || file.dataset(p))?;
            let s = guard(p, || Ok(ds.shape()))?;
            let t = dtype_of(p, &guard(p, || ds.datatype())?)?;
            let fl = guard(p, || ds.filters())?;
            check_filters(p, &fl)?;
            let ch = guard(p, || Ok(ds.chunk_dims()))?;
            if let Some(c) = &ch {
                grid.push((p.clone(), chunk_count(&s, c)));
            }
            bslz4_frames &= is_bslz4_frames(&s, ch.as_deref(), &fl)
                && little_endian(&guard(p, || ds.datatype())?);
            bytes_of(&s, t.size_bytes())
                .ok_or_else(|| IoError::too_large(format!("{p}: the shape {s:?} overflows")))?;
            linked_bytes =
                linked_bytes.saturating_add(nexus::linked_file_bytes(&file, file_path, p));
            match (&shape, dtype) {
                (Some(s0), Some(t0))
                    if s.len() != 3 || s0.len() != 3 || s[1..] != s0[1..] || t != t0 =>
                {
                    return Err(IoError::corrupt(format!(
                        "{p}: {s:?} {} does not continue the series of {:?} {} frames",
                        t.name(),
                        s0.get(1..).unwrap_or(&[]),
                        t0.name()
                    )));
                }
                (None, _) => {
                    shape = Some(s.clone());
                    dtype = Some(t);
                    chunks = ch;
                    filters = fl.iter().map(|f| filter_name(f.id, &f.cd_values)).collect();
                }
                _ => {}
            }
            let frames = s.first().copied().unwrap_or(1);
            parts.push(Part {
                path: p.clone(),
                frames,
            });
        }
        let (Some(mut shape), Some(dtype)) = (shape, dtype) else {
            return Err(IoError::corrupt("the file holds no dataset to read"));
        };
        if parts.len() > 1 {
            shape[0] = parts.iter().map(|p| p.frames).sum();
        }
        let stored = usize::try_from(len.saturating_add(linked_bytes)).unwrap_or(usize::MAX);
        // The crate lists a chunk index entry (24 bytes) for every chunk the
        // shape declares, written or not: bound the count by what the files
        // could index (every written chunk takes bytes of its index).
        let most_chunks = MIN_CHUNKS.max(stored);
        if let Some((p, n)) = grid.iter().find(|(_, n)| *n > most_chunks) {
            return Err(IoError::too_large(format!(
                "{p}: its shape declares {n} chunks, more than files of {stored} bytes can hold"
            )));
        }
        let limit = crate::decoded_size_limit(stored);
        let stack = Hdf5Stack {
            name: file_name.to_string(),
            file,
            links,
            parts,
            shape,
            dtype,
            limit,
            max_chunk_bytes: opts.max_chunk_bytes,
            current: None,
            chunks,
            filters,
            bslz4_frames,
        };
        stack.check_sizes()?;
        Ok(stack)
    }

    /// Frames and chunks must be decodable within the limit.
    fn check_sizes(&self) -> Result<()> {
        let elem = self.dtype.size_bytes();
        bytes_of(self.shape.get(1..).unwrap_or(&[]), elem)
            .filter(|&b| b <= self.limit)
            .ok_or_else(|| {
                IoError::too_large(format!(
                    "a frame of {:?} {} is more than this file can hold",
                    self.shape.get(1..).unwrap_or(&[]),
                    self.dtype.name()
                ))
            })?;
        if let (Some(ch), Some(most)) = (&self.chunks, self.max_chunk_bytes)
            && let Some(b) = bytes_of(ch, elem).filter(|&b| b > most)
        {
            return Err(crate::links::chunk_too_large(
                ch,
                self.dtype.name(),
                b,
                most,
            ));
        }
        if let Some(ch) = &self.chunks {
            bytes_of(ch, elem)
                .filter(|&b| b <= self.limit)
                .ok_or_else(|| {
                    IoError::too_large(format!(
                        "chunks of {ch:?} {} are more than this file can hold",
                        self.dtype.name()
                    ))
                })?;
        }
        Ok(())
    }

    /// The file name errors cite.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The whole shape (an Eiger series: all frames of all data files).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Chunk shape of the (first) dataset, `None` when contiguous.
    pub fn chunks(&self) -> Option<&[usize]> {
        self.chunks.as_deref()
    }

    /// The filter pipeline of the (first) dataset, by name.
    pub fn filters(&self) -> &[String] {
        &self.filters
    }

    /// The dataset paths read, in order (one, or an Eiger series' links).
    pub fn dataset_paths(&self) -> Vec<String> {
        self.parts.iter().map(|p| p.path.clone()).collect()
    }

    /// NeXus detector metadata of the file (empty where absent).
    pub fn detector(&self) -> Result<Detector> {
        nexus::detector(&self.file, &self.links, &self.shape, self.limit)
            .map_err(|e| e.in_file(&self.name))
    }

    /// Frames `z0..z0 + nz` (slices along the first axis) of a dataset of
    /// two or more dimensions, shape `[nz, ...]`.
    pub fn read_slab(&mut self, z0: usize, nz: usize) -> Result<Array> {
        self.read_slab_inner(z0, nz)
            .map_err(|e| e.in_file(&self.name))
    }

    fn read_slab_inner(&mut self, z0: usize, nz: usize) -> Result<Array> {
        let total = self.shape.first().copied().unwrap_or(0);
        if self.shape.len() < 2 || z0.checked_add(nz).is_none_or(|e| e > total) {
            return Err(IoError::invalid(
                format!(
                    "frames {z0}..{} asked of a dataset of shape {:?}",
                    z0.saturating_add(nz),
                    self.shape
                ),
                "ask for frames within the first axis",
            ));
        }
        let mut out_shape = self.shape.clone();
        out_shape[0] = nz;
        let mut pieces = Vec::new();
        let mut first = 0usize;
        for k in 0..self.parts.len() {
            let n = self.parts[k].frames;
            let lo = z0.max(first);
            let hi = (z0 + nz).min(first + n);
            if lo < hi {
                pieces.push(self.read_part(k, lo - first, hi - lo)?);
            }
            first += n;
        }
        join(out_shape, pieces)
    }

    /// Rows `y` (along the second axis) of frame `z`: part of a frame, for
    /// frames too large to hold whole; shape `[1, y.len(), ...]`.
    pub fn read_rows(&mut self, z: usize, y: std::ops::Range<usize>) -> Result<Array> {
        self.read_rows_inner(z, y)
            .map_err(|e| e.in_file(&self.name))
    }

    fn read_rows_inner(&mut self, z: usize, y: std::ops::Range<usize>) -> Result<Array> {
        let total = self.shape.first().copied().unwrap_or(0);
        let ny = self.shape.get(1).copied().unwrap_or(0);
        if self.shape.len() < 2 || z >= total || y.start > y.end || y.end > ny {
            return Err(IoError::invalid(
                format!(
                    "rows {y:?} of frame {z} asked of a dataset of shape {:?}",
                    self.shape
                ),
                "ask for rows within the frame",
            ));
        }
        let mut first = 0usize;
        let mut k = 0;
        while k < self.parts.len() && z >= first + self.parts[k].frames {
            first += self.parts[k].frames;
            k += 1;
        }
        let mut starts = vec![0; self.shape.len()];
        starts[0] = z - first;
        starts[1] = y.start;
        let mut counts = self.shape.clone();
        counts[0] = 1;
        counts[1] = y.len();
        let data = self.read_box(k, &starts, &counts)?;
        Array::new(counts, data)
    }

    fn read_part(&mut self, k: usize, z: usize, n: usize) -> Result<ArrayData> {
        let mut starts = vec![0; self.shape.len()];
        starts[0] = z;
        let mut counts = self.shape.clone();
        counts[0] = n;
        self.read_box(k, &starts, &counts)
    }

    /// The box `starts`, `counts` of part `k` (its own frame numbers).
    fn read_box(&mut self, k: usize, starts: &[usize], counts: &[usize]) -> Result<ArrayData> {
        if k >= self.parts.len() {
            return Err(IoError::corrupt("a frame beyond the dataset's parts"));
        }
        if self.current.as_ref().is_none_or(|(i, _)| *i != k) {
            let path = self.parts[k].path.clone();
            let ds = guard(&path, || self.file.dataset(&path))?;
            self.current = Some((k, ds));
        }
        let Some((_, ds)) = &self.current else {
            return Err(IoError::corrupt("no dataset open"));
        };
        let path = &self.parts[k].path;
        read_selection(ds, path, self.dtype, starts, counts, self.limit)
    }

    /// Whether every frame is stored as one bitshuffle-LZ4 chunk of
    /// little-endian elements, as the Eiger detectors write them:
    /// [`Hdf5Stack::read_frame_chunk`] then hands frames out compressed.
    pub fn frames_are_bslz4_chunks(&self) -> bool {
        self.bslz4_frames
    }

    /// Frame `z` as stored: its bitshuffle-LZ4 chunk, still compressed
    /// (HDF5's direct chunk read), for a decoder of its own (the GPU's).
    /// `None` where the file skipped the filter for this chunk; an error
    /// unless [`Hdf5Stack::frames_are_bslz4_chunks`].
    pub fn read_frame_chunk(&mut self, z: usize) -> Result<Option<Vec<u8>>> {
        self.read_frame_chunk_inner(z)
            .map_err(|e| e.in_file(&self.name))
    }

    fn read_frame_chunk_inner(&mut self, z: usize) -> Result<Option<Vec<u8>>> {
        if !self.bslz4_frames {
            return Err(IoError::invalid(
                "the frames are not stored as one bitshuffle-LZ4 chunk each",
                "read them decoded (read_slab)",
            ));
        }
        let mut first = 0usize;
        let Some((k, part)) = self.parts.iter().enumerate().find(|(_, p)| {
            first += p.frames;
            z < first
        }) else {
            return Err(IoError::invalid(
                format!("frame {z} asked of a series of {} frames", first),
                "ask for frames within the first axis",
            ));
        };
        let local = z - (first - part.frames);
        let path = part.path.clone();
        if self.current.as_ref().is_none_or(|(i, _)| *i != k) {
            let ds = guard(&path, || self.file.dataset(&path))?;
            self.current = Some((k, ds));
        }
        let Some((_, ds)) = &self.current else {
            return Err(IoError::corrupt("no dataset open"));
        };
        let mut coords = vec![0; self.shape.len()];
        coords[0] = local;
        let what = format!("{path}: cannot read the chunk of frame {local}");
        let (bytes, mask) = guard(&what, || ds.read_chunk_raw_at(&coords))?;
        Ok((mask & 1 == 0).then_some(bytes))
    }

    /// The whole dataset (or series) in memory, if its size is within what
    /// the file can hold.
    pub fn read_all(&mut self) -> Result<Array> {
        let bytes = bytes_of(&self.shape, self.dtype.size_bytes());
        if bytes.is_none_or(|b| b > self.limit) {
            return Err(IoError::too_large(format!(
                "the dataset of {:?} {} is too large to read whole",
                self.shape,
                self.dtype.name()
            ))
            .in_file(&self.name));
        }
        if self.shape.len() >= 2 {
            return self.read_slab(0, self.shape[0]);
        }
        let path = self.parts[0].path.clone();
        let ds = guard(&path, || self.file.dataset(&path))?;
        let counts = self.shape.clone();
        let starts = vec![0; counts.len()];
        let data = read_selection(&ds, &path, self.dtype, &starts, &counts, self.limit)
            .map_err(|e| e.in_file(&self.name))?;
        Array::new(self.shape.clone(), data).map_err(|e| e.in_file(&self.name))
    }
}

/// Concatenates the pieces (same dtype) into one array of `shape`.
fn join(shape: Vec<usize>, mut pieces: Vec<ArrayData>) -> Result<Array> {
    if pieces.len() == 1
        && let Some(only) = pieces.pop()
    {
        return Array::new(shape, only);
    }
    let mut it = pieces.into_iter();
    let Some(mut all) = it.next() else {
        return Array::new(shape, ArrayData::U8(Vec::new()));
    };
    for p in it {
        append(&mut all, p)?;
    }
    Array::new(shape, all)
}

fn append(to: &mut ArrayData, more: ArrayData) -> Result<()> {
    use ArrayData as D;
    match (to, more) {
        (D::U8(a), D::U8(b)) => a.extend(b),
        (D::I8(a), D::I8(b)) => a.extend(b),
        (D::U16(a), D::U16(b)) => a.extend(b),
        (D::I16(a), D::I16(b)) => a.extend(b),
        (D::U32(a), D::U32(b)) => a.extend(b),
        (D::I32(a), D::I32(b)) => a.extend(b),
        (D::U64(a), D::U64(b)) => a.extend(b),
        (D::I64(a), D::I64(b)) => a.extend(b),
        (D::F32(a), D::F32(b)) => a.extend(b),
        (D::F64(a), D::F64(b)) => a.extend(b),
        _ => return Err(IoError::corrupt("the series changes dtype")),
    }
    Ok(())
}

/// Reads the hyperslab `starts`/`counts` as `dtype`, in host byte order,
/// after the Fletcher-32 checksums of its chunks (where the dataset has
/// them) are verified.
fn read_selection(
    ds: &H5Dataset,
    path: &str,
    dtype: DType,
    starts: &[usize],
    counts: &[usize],
    limit: usize,
) -> Result<ArrayData> {
    checksum::verify_box(ds, path, starts, counts, limit)?;
    let what = format!("{path}: cannot read the data");
    Ok(match dtype {
        DType::U8 => ArrayData::U8(guard(&what, || ds.read_slice::<u8>(starts, counts))?),
        DType::I8 => ArrayData::I8(guard(&what, || ds.read_slice::<i8>(starts, counts))?),
        DType::U16 => ArrayData::U16(guard(&what, || ds.read_slice::<u16>(starts, counts))?),
        DType::I16 => ArrayData::I16(guard(&what, || ds.read_slice::<i16>(starts, counts))?),
        DType::U32 => ArrayData::U32(guard(&what, || ds.read_slice::<u32>(starts, counts))?),
        DType::I32 => ArrayData::I32(guard(&what, || ds.read_slice::<i32>(starts, counts))?),
        DType::U64 => ArrayData::U64(guard(&what, || ds.read_slice::<u64>(starts, counts))?),
        DType::I64 => ArrayData::I64(guard(&what, || ds.read_slice::<i64>(starts, counts))?),
        DType::F32 => ArrayData::F32(guard(&what, || ds.read_slice::<f32>(starts, counts))?),
        DType::F64 => ArrayData::F64(guard(&what, || ds.read_slice::<f64>(starts, counts))?),
        DType::Bool => {
            let v = guard(&what, || ds.read_slice::<u8>(starts, counts))?;
            ArrayData::Bool(v.into_iter().map(|b| b != 0).collect())
        }
    })
}

/// The array dtype of an HDF5 datatype: integers of 1-8 bytes, IEEE floats
/// of 4 and 8 bytes (either byte order), h5py's boolean enum.
fn dtype_of(path: &str, t: &DatatypeMessage) -> Result<DType> {
    let unsupported = |what: String| {
        IoError::unsupported(
            format!("{path}: {what} is not an array gpuscope reads"),
            "give a dataset of integers or floats (FILE.h5::/path/to/dataset)",
        )
    };
    Ok(match t {
        DatatypeMessage::FixedPoint { size, signed, .. } => {
            crate::elements::integer_dtype(*size as usize, *signed)
                .ok_or_else(|| unsupported(format!("a {size}-byte integer")))?
        }
        DatatypeMessage::FloatingPoint { size, .. } => crate::elements::float_dtype(*size as usize)
            .ok_or_else(|| unsupported(format!("a {size}-byte float")))?,
        DatatypeMessage::Enum { base, members }
            if matches!(**base, DatatypeMessage::FixedPoint { size: 1, .. })
                && members.len() == 2
                && members.iter().any(|m| m.name == "FALSE")
                && members.iter().any(|m| m.name == "TRUE") =>
        {
            DType::Bool
        }
        _ => return Err(unsupported("this datatype (text, compound, ...)".into())),
    })
}

fn check_filters(path: &str, filters: &[rust_hdf5::Filter]) -> Result<()> {
    match filters.iter().find(|f| !DECODED_FILTERS.contains(&f.id)) {
        None => Ok(()),
        Some(f) => Err(IoError::unsupported(
            format!(
                "{path}: compressed with {}, which gpuscope does not decode",
                filter_name(f.id, &f.cd_values)
            ),
            "re-save it with bitshuffle-LZ4, LZ4 or deflate (h5repack -f, or hdf5plugin in h5py)",
        )),
    }
}

/// One bitshuffle-LZ4 chunk per frame: the only filter is bitshuffle with
/// LZ4 (cd_values[4] = 2), chunks of (1, rows, columns) over 3-D frames.
fn is_bslz4_frames(
    shape: &[usize],
    chunks: Option<&[usize]>,
    filters: &[rust_hdf5::Filter],
) -> bool {
    let one_frame = chunks
        .is_some_and(|c| shape.len() == 3 && c.len() == 3 && c[0] == 1 && c[1..] == shape[1..]);
    let bslz4 = matches!(filters, [f] if f.id == 32008 && f.cd_values.get(4) == Some(&2));
    one_frame && bslz4
}

/// Elements stored little-endian (the GPU's byte order), or single bytes.
fn little_endian(t: &DatatypeMessage) -> bool {
    use rust_hdf5::ByteOrder::LittleEndian;
    match t {
        DatatypeMessage::FixedPoint {
            size, byte_order, ..
        }
        | DatatypeMessage::FloatingPoint {
            size, byte_order, ..
        } => *size == 1 || *byte_order == LittleEndian,
        _ => false,
    }
}

/// A filter's usual name (HDF Group's registered filter list).
fn filter_name(id: u16, cd: &[u32]) -> String {
    let name = match id {
        1 => "deflate",
        2 => "shuffle",
        3 => "fletcher32",
        4 => "szip",
        5 => "nbit",
        6 => "scaleoffset",
        307 => "bzip2",
        32000 => "lzf",
        32001 => "blosc",
        32004 => "lz4",
        32008 if cd.get(4) == Some(&2) => "bitshuffle-lz4",
        32008 if cd.get(4) == Some(&3) => "bitshuffle-zstd",
        32008 => "bitshuffle",
        32015 => "zstd",
        32017 => "sz",
        32026 => "blosc2",
        _ => return format!("filter {id}"),
    };
    format!("{name} ({id})")
}

/// Chunks a dataset may declare whatever its file's size (1 Mi: 24 MiB of
/// index entries).
const MIN_CHUNKS: usize = 1 << 20;

/// Chunks of `chunk` in `shape` (saturating).
fn chunk_count(shape: &[usize], chunk: &[usize]) -> usize {
    shape
        .iter()
        .zip(chunk)
        .map(|(&s, &c)| s.div_ceil(c.max(1)))
        .fold(1usize, usize::saturating_mul)
}

/// Bytes of an array of `shape` with `elem`-byte samples, `None` on overflow.
fn bytes_of(shape: &[usize], elem: usize) -> Option<usize> {
    crate::checked_product(shape)?.checked_mul(elem)
}

//! Disk-to-disk streaming of stacks: .npy, headerless .raw, multi-page
//! TIFF, HDF5 and Zarr read slice by slice and written slice by slice, so a stack larger
//! than memory never sits in RAM. The core sees them as slice sources and
//! sinks.

use std::io::{IsTerminal, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Instant;

use gpuscope_core::Samples;
use gpuscope_core::conveyor::{BlockSink, BlockSource};
use gpuscope_core::keys::{Keys, SampleVec};
use gpuscope_core::stream::{SliceSink, SliceSource};
use gpuscope_io::hdf5::Hdf5Stack;
use gpuscope_io::npy::{NpyReader, NpyWriter};
use gpuscope_io::stack::{StackSink, StackSource};
use gpuscope_io::tiff::{TiffStackReader, TiffStackWriter};
use gpuscope_io::zarr::{ZarrArray, ZarrWriter, is_zarr_name};
use gpuscope_io::{Array, ArrayData, DType};

use crate::common::{CliResult, Failure, raw_layout, samples};

/// A stack on disk read slice by slice.
pub enum StackReader {
    Npy(NpyReader),
    Tiff(Box<TiffStackReader>),
    /// `FILE.h5[::/path]`: frames decoded chunk by chunk.
    Hdf5(Box<Hdf5Stack>),
    /// `STORE.zarr[::path]`: slices decoded chunk by chunk.
    Zarr(Box<ZarrArray>),
}

fn extension(path: &Path) -> String {
    path.extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default()
}

impl StackReader {
    /// A reader when `path` is a 3-D .npy or .raw or a multi-page TIFF of 2-D pages;
    /// `None` for anything better loaded whole.
    pub fn open(path: &Path) -> CliResult<Option<StackReader>> {
        Ok(Self::open_stack(path)?.filter(|r| r.dtype() != DType::Bool))
    }

    /// As [`StackReader::open`], boolean stacks included (masks to label).
    pub fn open_stack(path: &Path) -> CliResult<Option<StackReader>> {
        let name = path.to_string_lossy();
        let reader = match extension(path).as_str() {
            _ if gpuscope_io::hdf5::is_hdf5_name(&name) => StackReader::Hdf5(Box::new(
                Hdf5Stack::open_with(&name, &crate::common::read_options())?,
            )),
            _ if is_zarr_name(&name) => StackReader::Zarr(Box::new(ZarrArray::open_with(
                &name,
                &crate::common::read_options(),
            )?)),
            "npy" => StackReader::Npy(NpyReader::open(path)?),
            // A headerless file is an npy file whose header is the layout.
            "raw" => StackReader::Npy(NpyReader::open_raw(path, &raw_layout(path)?)?),
            "tif" | "tiff" => StackReader::Tiff(Box::new(TiffStackReader::open(path)?)),
            _ => return Ok(None),
        };
        Ok((reader.shape().len() == 3).then_some(reader))
    }

    pub fn shape(&self) -> Vec<usize> {
        match self {
            StackReader::Npy(r) => r.shape().to_vec(),
            StackReader::Tiff(r) => r.shape(),
            StackReader::Hdf5(r) => r.shape().to_vec(),
            StackReader::Zarr(r) => r.shape().to_vec(),
        }
    }

    pub fn dtype(&self) -> DType {
        match self {
            StackReader::Npy(r) => r.dtype(),
            StackReader::Tiff(r) => r.dtype(),
            StackReader::Hdf5(r) => r.dtype(),
            StackReader::Zarr(r) => r.dtype(),
        }
    }

    /// Whether frames can be handed out as their bitshuffle-LZ4 chunks of
    /// uint32 counts ([`StackReader::read_chunks`]): an Eiger series.
    pub fn has_bslz4_u32_frames(&self) -> bool {
        matches!(self, StackReader::Hdf5(r) if r.frames_are_bslz4_chunks() && r.dtype() == DType::U32)
    }

    /// Frames `z0..z0 + nz` as their bitshuffle-LZ4 chunks, still
    /// compressed; None when the file skipped the filter for one of them.
    pub fn read_chunks(&mut self, z0: usize, nz: usize) -> CliResult<Option<Vec<Vec<u8>>>> {
        let StackReader::Hdf5(r) = self else {
            return Err(Failure("only HDF5 frames are read as chunks".into()));
        };
        let mut chunks = Vec::with_capacity(nz);
        for z in z0..z0 + nz {
            match r.read_frame_chunk(z)? {
                Some(c) => chunks.push(c),
                None => return Ok(None),
            }
        }
        Ok(Some(chunks))
    }

    /// The same reader as the io crate's block source (the conveyor's).
    pub fn into_source(self) -> StackSource {
        match self {
            StackReader::Npy(r) => StackSource::Npy(r),
            StackReader::Tiff(r) => StackSource::Tiff(r),
            StackReader::Hdf5(r) => StackSource::Hdf5(r),
            StackReader::Zarr(r) => StackSource::Zarr(r),
        }
    }

    /// Whether [`StackReader::read_rows`] reads part of a slice (every
    /// format but TIFF, whose pages are read whole).
    pub fn reads_rows(&self) -> bool {
        !matches!(self, StackReader::Tiff(_))
    }

    /// Rows `y` of slice `z`, shape `[1, y.len(), x]`.
    pub fn read_rows(&mut self, z: usize, y: std::ops::Range<usize>) -> CliResult<Array> {
        Ok(match self {
            StackReader::Npy(r) => r.read_rows(z, y)?,
            StackReader::Tiff(_) => {
                return Err(Failure("TIFF stacks are read one page at a time".into()));
            }
            StackReader::Hdf5(r) => r.read_rows(z, y)?,
            StackReader::Zarr(r) => r.read_rows(z, y)?,
        })
    }

    pub fn read(&mut self, z0: usize, nz: usize) -> CliResult<Array> {
        Ok(match self {
            StackReader::Npy(r) => r.read_slab(z0, nz)?,
            StackReader::Tiff(r) => {
                if nz != 1 {
                    return Err(Failure("TIFF stacks are read one page at a time".into()));
                }
                r.read_page(z0)?
            }
            StackReader::Hdf5(r) => r.read_slab(z0, nz)?,
            StackReader::Zarr(r) => r.read_slab(z0, nz)?,
        })
    }
}

/// A stack written slice by slice; the file appears only on `finish`.
pub enum StackWriter {
    Npy(NpyWriter),
    Tiff(TiffStackWriter),
    /// Zarr v3, chunks one slice deep: every slab is whole chunks.
    Zarr(ZarrWriter),
}

impl StackWriter {
    /// A writer when `path` is .npy, .raw (with its sidecar), .tif or
    /// .zarr; `None` for other formats.
    pub fn create(path: &Path, shape: &[usize], dtype: DType) -> CliResult<Option<StackWriter>> {
        if is_zarr_name(&path.to_string_lossy()) {
            return Ok(Some(StackWriter::Zarr(ZarrWriter::create(
                path,
                shape.to_vec(),
                dtype,
            )?)));
        }
        Ok(Some(match extension(path).as_str() {
            "npy" => StackWriter::Npy(NpyWriter::create(path, shape.to_vec(), dtype)?),
            "raw" => StackWriter::Npy(NpyWriter::create_raw(path, shape.to_vec(), dtype)?),
            "tif" | "tiff" => {
                let bytes = shape.iter().product::<usize>() as u64 * dtype.size_bytes() as u64;
                // Classic TIFF stops at 4 GiB.
                StackWriter::Tiff(if bytes > 3 << 30 {
                    TiffStackWriter::create_bigtiff(path, shape[1], shape[2], dtype)?
                } else {
                    TiffStackWriter::create(path, shape[1], shape[2], dtype)?
                })
            }
            _ => return Ok(None),
        }))
    }

    pub fn write(&mut self, slab: &Array) -> CliResult {
        match self {
            StackWriter::Npy(w) => w.write_slab(slab)?,
            StackWriter::Zarr(w) => w.write_slab(slab)?,
            StackWriter::Tiff(w) => {
                // Page by page as stored (no float64 copy of the slab).
                let plane = slab.shape[1..].to_vec();
                for z in 0..slab.shape[0] {
                    w.write_page(&gpuscope_io::stack::slice_of(slab, z, &plane)?)?;
                }
            }
        }
        Ok(())
    }

    pub fn finish(self) -> CliResult {
        match self {
            StackWriter::Npy(w) => w.finish()?,
            StackWriter::Tiff(w) => w.finish()?,
            StackWriter::Zarr(w) => w.finish()?,
        }
        Ok(())
    }
}

/// Converts a slab of samples to the words the GPU kernel reads.
pub type ToWords<W> = fn(&Array) -> CliResult<Vec<W>>;
/// Converts words back to a slab of the output dtype (shape given).
pub type FromWords<W> = fn(Vec<usize>, DType, &[W]) -> CliResult<Array>;

/// A stack reader as a slice source of words.
pub struct Source<W> {
    pub reader: StackReader,
    pub to_words: ToWords<W>,
}

impl<W> SliceSource<W> for Source<W> {
    fn read(&mut self, z: std::ops::Range<usize>, out: &mut Vec<W>) -> gpuscope_core::Result<()> {
        let mut go = || -> CliResult {
            for i in z.clone() {
                let slab = self.reader.read(i, 1)?;
                out.extend((self.to_words)(&slab)?);
            }
            Ok(())
        };
        go().map_err(|Failure(m)| gpuscope_core::Error::InvalidInput(m))
    }
}

/// A stack writer as a slice sink of words.
pub struct Sink<W> {
    pub writer: StackWriter,
    pub plane: Vec<usize>,
    pub dtype: DType,
    pub from_words: FromWords<W>,
}

impl<W> SliceSink<W> for Sink<W> {
    fn write(&mut self, slices: &[W]) -> gpuscope_core::Result<()> {
        let n: usize = self.plane.iter().product();
        let mut shape = vec![slices.len() / n.max(1)];
        shape.extend(&self.plane);
        let go = || -> CliResult {
            let slab = (self.from_words)(shape, self.dtype, slices)?;
            self.writer.write(&slab)
        };
        go().map_err(|Failure(m)| gpuscope_core::Error::InvalidInput(m))
    }
}

/// The median kernels' words of a slab: ordered keys, raw bits for f32.
pub fn keys32(a: &Array) -> CliResult<Vec<u32>> {
    if let ArrayData::F32(v) = &a.data {
        return Ok(v.iter().map(|x| x.to_bits()).collect());
    }
    match samples(a)?.keys(0..a.len()) {
        Keys::K32(k) => Ok(k),
        Keys::K64(_) => Err(Failure(
            "64-bit samples where 32-bit keys were expected".into(),
        )),
    }
}

pub fn keys64(a: &Array) -> CliResult<Vec<u64>> {
    match samples(a)?.keys(0..a.len()) {
        Keys::K64(k) => Ok(k),
        Keys::K32(k) => Ok(k.into_iter().map(u64::from).collect()),
    }
}

/// A slab of `dtype` from its keys.
pub fn from_keys32(shape: Vec<usize>, dtype: DType, keys: &[u32]) -> CliResult<Array> {
    if dtype == DType::F32 {
        let v = keys.iter().map(|&b| f32::from_bits(b)).collect();
        return Ok(Array::new(shape, ArrayData::F32(v))?);
    }
    let tag = empty_samples(dtype)?;
    Ok(sample_vec_array(
        shape,
        tag.from_keys(Keys::K32(keys.to_vec())),
    )?)
}

pub fn from_keys64(shape: Vec<usize>, dtype: DType, keys: &[u64]) -> CliResult<Array> {
    let tag = empty_samples(dtype)?;
    Ok(sample_vec_array(
        shape,
        tag.from_keys(Keys::K64(keys.to_vec())),
    )?)
}

pub fn f32_words(a: &Array) -> CliResult<Vec<f32>> {
    Ok(a.to_f32_vec())
}

pub fn from_f32_words(shape: Vec<usize>, dtype: DType, v: &[f32]) -> CliResult<Array> {
    Ok(Array::from_f32(shape, v.to_vec())?.cast(dtype))
}

/// A dtype tag for key conversions.
pub fn empty_samples(dtype: DType) -> CliResult<Samples<'static>> {
    Ok(match dtype {
        DType::U8 => Samples::U8(&[]),
        DType::I8 => Samples::I8(&[]),
        DType::U16 => Samples::U16(&[]),
        DType::I16 => Samples::I16(&[]),
        DType::U32 => Samples::U32(&[]),
        DType::I32 => Samples::I32(&[]),
        DType::F32 => Samples::F32(&[]),
        DType::U64 => Samples::U64(&[]),
        DType::I64 => Samples::I64(&[]),
        DType::F64 => Samples::F64(&[]),
        DType::Bool => {
            return Err(Failure(
                "a boolean array cannot be median-filtered (convert it to uint8)".into(),
            ));
        }
    })
}

pub fn sample_vec_array(shape: Vec<usize>, v: SampleVec) -> gpuscope_io::Result<Array> {
    let data = match v {
        SampleVec::U8(v) => ArrayData::U8(v),
        SampleVec::I8(v) => ArrayData::I8(v),
        SampleVec::U16(v) => ArrayData::U16(v),
        SampleVec::I16(v) => ArrayData::I16(v),
        SampleVec::U32(v) => ArrayData::U32(v),
        SampleVec::I32(v) => ArrayData::I32(v),
        SampleVec::F32(v) => ArrayData::F32(v),
        SampleVec::U64(v) => ArrayData::U64(v),
        SampleVec::I64(v) => ArrayData::I64(v),
        SampleVec::F64(v) => ArrayData::F64(v),
    };
    Array::new(shape, data)
}

pub fn from_i32_words(shape: Vec<usize>, _dtype: DType, v: &[i32]) -> CliResult<Array> {
    Ok(Array::from_i32(shape, v.to_vec())?)
}

/// A raw file of u32 slices (native byte order) beside an output, written in order then read
/// back (provisional labels between the two passes of streamed labelling);
/// created as temporary outputs are (unpredictable name, never through a
/// symlink) and removed when dropped or on interrupt.
pub struct ScratchFile {
    inner: gpuscope_io::ScratchFile,
    plane: usize,
}

impl ScratchFile {
    pub fn create(beside: &Path, plane: usize) -> CliResult<ScratchFile> {
        let inner = gpuscope_io::ScratchFile::create(beside)?;
        Ok(ScratchFile { inner, plane })
    }

    fn fail(&self, e: std::io::Error) -> gpuscope_core::Error {
        gpuscope_core::Error::InvalidInput(format!("{}: {e}", self.inner.path().display()))
    }
}

impl SliceSink<u32> for ScratchFile {
    fn write(&mut self, slices: &[u32]) -> gpuscope_core::Result<()> {
        // Native byte order: the same process reads it back.
        let r = self.inner.file().write_all(bytemuck::cast_slice(slices));
        r.map_err(|e| self.fail(e))
    }
}

impl SliceSource<u32> for ScratchFile {
    fn read(&mut self, z: std::ops::Range<usize>, out: &mut Vec<u32>) -> gpuscope_core::Result<()> {
        let at = (z.start * self.plane * 4) as u64;
        let r = self.inner.file().seek(SeekFrom::Start(at));
        r.map_err(|e| self.fail(e))?;
        let start = out.len();
        out.resize(start + z.len() * self.plane, 0);
        let r = self
            .inner
            .file()
            .read_exact(bytemuck::cast_slice_mut(&mut out[start..]));
        r.map_err(|e| self.fail(e))
    }
}

/// A progress line on stderr with throughput and ETA, only on a terminal.
pub struct ProgressBar {
    start: Instant,
    bytes_per_slice: f64,
    enabled: bool,
    unit: &'static str,
}

impl ProgressBar {
    pub fn new(bytes_per_slice: usize) -> Self {
        Self::counting(bytes_per_slice, "slices")
    }

    /// A bar counting `unit` (slices, frames) of `bytes_per_item` each.
    pub fn counting(bytes_per_item: usize, unit: &'static str) -> Self {
        ProgressBar {
            start: Instant::now(),
            bytes_per_slice: bytes_per_item as f64,
            enabled: std::io::stderr().is_terminal(),
            unit,
        }
    }

    pub fn update(&mut self, done: usize, total: usize) {
        if !self.enabled {
            return;
        }
        let t = self.start.elapsed().as_secs_f64().max(1e-9);
        let rate = done as f64 / t;
        let eta = (total - done.min(total)) as f64 / rate.max(1e-9);
        eprint!(
            "\r{done}/{total} {unit}  {rate:.0} {unit}/s  {:.2} GB/s  ETA {eta:.1} s   ",
            rate * self.bytes_per_slice / 1e9,
            unit = self.unit
        );
        if done >= total {
            eprintln!();
        }
    }
}

/// Slices made in order by a background thread (reading, decoding,
/// thresholding), at most `ahead` of them waiting: the disk and the host's
/// conversions overlap the GPU's work on the slab before.
pub struct Prefetch<T> {
    rx: std::sync::mpsc::Receiver<CliResult<Vec<T>>>,
    next: usize,
}

impl<T: Send + 'static> Prefetch<T> {
    pub fn spawn(
        nz: usize,
        ahead: usize,
        mut make: impl FnMut(usize) -> CliResult<Vec<T>> + Send + 'static,
    ) -> Prefetch<T> {
        let (tx, rx) = std::sync::mpsc::sync_channel(ahead.max(1));
        std::thread::spawn(move || {
            for z in 0..nz {
                let slice = make(z);
                let failed = slice.is_err();
                // A closed channel: the consumer stopped (it failed).
                if tx.send(slice).is_err() || failed {
                    return;
                }
            }
        });
        Prefetch { rx, next: 0 }
    }
}

impl<T> SliceSource<T> for Prefetch<T> {
    fn read(&mut self, z: std::ops::Range<usize>, out: &mut Vec<T>) -> gpuscope_core::Result<()> {
        let fail = |m: String| gpuscope_core::Error::InvalidInput(m);
        if z.start != self.next {
            return Err(fail(format!(
                "slice {} asked for where {} comes next (prefetched slices are read once, in order)",
                z.start, self.next
            )));
        }
        for _ in z.clone() {
            let slice = self
                .rx
                .recv()
                .map_err(|_| fail("the reading thread stopped early".into()))?;
            out.extend(slice.map_err(|Failure(m)| fail(m))?);
        }
        self.next = z.end;
        Ok(())
    }
}

/// A stack writer fed from a background thread: the file is written while
/// the next slab is prepared. `finish` waits for it and completes the file.
pub struct WriteBehind {
    tx: Option<std::sync::mpsc::SyncSender<Vec<i32>>>,
    done: Option<std::thread::JoinHandle<CliResult<StackWriter>>>,
}

impl WriteBehind {
    pub fn spawn(mut writer: StackWriter, plane: Vec<usize>) -> WriteBehind {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<i32>>(1);
        let done = std::thread::spawn(move || {
            let n: usize = plane.iter().product();
            for slab in rx {
                let mut shape = vec![slab.len() / n.max(1)];
                shape.extend(&plane);
                writer.write(&Array::from_i32(shape, slab)?)?;
            }
            Ok(writer)
        });
        WriteBehind {
            tx: Some(tx),
            done: Some(done),
        }
    }

    /// Waits for the writes; the writer, or the first error.
    fn join(&mut self) -> CliResult<StackWriter> {
        drop(self.tx.take());
        match self.done.take().map(|h| h.join()) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(Failure("the writing thread panicked".into())),
            None => Err(Failure("the writer is already finished".into())),
        }
    }

    pub fn finish(mut self) -> CliResult {
        self.join()?.finish()
    }
}

/// On failure: waits for the thread, so the writer's temporary file is
/// removed before the process exits.
impl Drop for WriteBehind {
    fn drop(&mut self) {
        if self.done.is_some() {
            let _ = self.join();
        }
    }
}

impl SliceSink<i32> for WriteBehind {
    fn write(&mut self, slices: &[i32]) -> gpuscope_core::Result<()> {
        let sent = match &self.tx {
            Some(tx) => tx.send(slices.to_vec()).is_ok(),
            None => false,
        };
        if sent {
            return Ok(());
        }
        // The thread stopped: its error says why.
        let e = match self.join() {
            Err(Failure(m)) => m,
            Ok(_) => "the writing thread stopped early".into(),
        };
        Err(gpuscope_core::Error::InvalidInput(e))
    }
}

/// A stack on disk as the conveyor's block source.
pub struct FileSource {
    source: StackSource,
    shape: [usize; 3],
    dtype: Samples<'static>,
}

impl FileSource {
    pub fn new(reader: StackReader) -> CliResult<FileSource> {
        let shape = match reader.shape()[..] {
            [z, y, x] => [z, y, x],
            ref other => return Err(Failure(format!("a stack of shape {other:?} is not 3-D"))),
        };
        let dtype = empty_samples(reader.dtype())?;
        Ok(FileSource {
            source: reader.into_source(),
            shape,
            dtype,
        })
    }
}

impl BlockSource for FileSource {
    fn shape(&self) -> [usize; 3] {
        self.shape
    }

    fn dtype(&self) -> Samples<'static> {
        self.dtype
    }

    fn read(
        &mut self,
        z: std::ops::Range<usize>,
        spare: Option<SampleVec>,
    ) -> gpuscope_core::Result<SampleVec> {
        let block = self
            .source
            .read_block(z.start, z.len(), spare.map(array_data))
            .map_err(core_error)?;
        sample_vec(block.data)
            .ok_or_else(|| gpuscope_core::Error::InvalidInput("a boolean block".into()))
    }

    fn reads_rows(&self) -> bool {
        self.source.reads_rows()
    }

    fn read_rows(
        &mut self,
        z: usize,
        y: std::ops::Range<usize>,
        spare: Option<SampleVec>,
    ) -> gpuscope_core::Result<SampleVec> {
        let rows = self
            .source
            .read_rows(z, y, spare.map(array_data))
            .map_err(core_error)?;
        sample_vec(rows.data)
            .ok_or_else(|| gpuscope_core::Error::InvalidInput("a boolean block".into()))
    }
}

/// An output stack as the conveyor's block sink. It takes rows of a slice
/// into every format: written in place where the format can (npy, raw),
/// else gathered into the slice, written whole when its last row comes.
pub struct FileSink {
    sink: StackSink,
    plane: [usize; 2],
    /// The slice being gathered from rows, and its samples so far.
    gathering: Option<(usize, SampleVec)>,
}

impl FileSink {
    /// A sink when `path` is a stack format; None otherwise.
    pub fn create(path: &Path, shape: &[usize], dtype: DType) -> CliResult<Option<FileSink>> {
        let plane = match shape {
            [_, y, x] => [*y, *x],
            _ => return Ok(None),
        };
        Ok(StackSink::create(path, shape, dtype)?.map(|sink| FileSink {
            sink,
            plane,
            gathering: None,
        }))
    }
}

impl BlockSink for FileSink {
    fn write(&mut self, z0: usize, block: SampleVec) -> gpuscope_core::Result<Option<SampleVec>> {
        let n = block.as_samples().len() / (self.plane[0] * self.plane[1]).max(1);
        let array = Array::new(vec![n, self.plane[0], self.plane[1]], array_data(block))
            .map_err(core_error)?;
        let spare = self.sink.write_block(z0, array).map_err(core_error)?;
        Ok(spare.and_then(sample_vec))
    }

    fn takes_rows(&self) -> bool {
        true
    }

    fn write_rows(
        &mut self,
        z: usize,
        y0: usize,
        block: SampleVec,
    ) -> gpuscope_core::Result<Option<SampleVec>> {
        let [ny, nx] = self.plane;
        if self.sink.takes_rows() {
            let n = block.as_samples().len() / nx.max(1);
            let rows = Array::new(vec![1, n, nx], array_data(block)).map_err(core_error)?;
            let spare = self.sink.write_rows(z, y0, rows).map_err(core_error)?;
            return Ok(spare.and_then(sample_vec));
        }
        let out_of_order = || {
            gpuscope_core::Error::InvalidInput(format!(
                "rows from {y0} of slice {z} out of order (an internal error of gpuscope; please report it)"
            ))
        };
        let slice = match self.gathering.take() {
            Some((at, mut slice)) if at == z && slice.as_samples().len() == y0 * nx => {
                if !append(&mut slice, &block) {
                    return Err(out_of_order());
                }
                slice
            }
            None if y0 == 0 => block,
            _ => return Err(out_of_order()),
        };
        if slice.as_samples().len() < ny * nx {
            self.gathering = Some((z, slice));
            return Ok(None);
        }
        let array = Array::new(vec![1, ny, nx], array_data(slice)).map_err(core_error)?;
        self.sink.write_block(z, array).map_err(core_error)?;
        Ok(None)
    }

    fn finish(self: Box<Self>, sync: bool) -> gpuscope_core::Result<()> {
        if let Some((z, _)) = self.gathering {
            return Err(gpuscope_core::Error::InvalidInput(format!(
                "slice {z} was left part written"
            )));
        }
        self.sink.finish(sync).map_err(core_error)
    }
}

/// Appends `rows` to `slice` where both are of one dtype.
fn append(slice: &mut SampleVec, rows: &SampleVec) -> bool {
    macro_rules! join {
        ($($v:ident),*) => {
            match (slice, rows) {
                $((SampleVec::$v(a), SampleVec::$v(b)) => {
                    a.extend_from_slice(b);
                    true
                })*
                _ => false,
            }
        };
    }
    join!(U8, I8, U16, I16, U32, I32, F32, U64, I64, F64)
}

/// An io error as the core's (the stream reports it as the input's).
fn core_error(e: gpuscope_io::IoError) -> gpuscope_core::Error {
    gpuscope_core::Error::InvalidInput(e.to_string())
}

/// Samples as an array's data (a move, no copy).
pub fn array_data(v: SampleVec) -> ArrayData {
    match v {
        SampleVec::U8(v) => ArrayData::U8(v),
        SampleVec::I8(v) => ArrayData::I8(v),
        SampleVec::U16(v) => ArrayData::U16(v),
        SampleVec::I16(v) => ArrayData::I16(v),
        SampleVec::U32(v) => ArrayData::U32(v),
        SampleVec::I32(v) => ArrayData::I32(v),
        SampleVec::F32(v) => ArrayData::F32(v),
        SampleVec::U64(v) => ArrayData::U64(v),
        SampleVec::I64(v) => ArrayData::I64(v),
        SampleVec::F64(v) => ArrayData::F64(v),
    }
}

/// An array's data as samples (a move); None for booleans.
pub fn sample_vec(d: ArrayData) -> Option<SampleVec> {
    Some(match d {
        ArrayData::Bool(_) => return None,
        ArrayData::U8(v) => SampleVec::U8(v),
        ArrayData::I8(v) => SampleVec::I8(v),
        ArrayData::U16(v) => SampleVec::U16(v),
        ArrayData::I16(v) => SampleVec::I16(v),
        ArrayData::U32(v) => SampleVec::U32(v),
        ArrayData::I32(v) => SampleVec::I32(v),
        ArrayData::F32(v) => SampleVec::F32(v),
        ArrayData::U64(v) => SampleVec::U64(v),
        ArrayData::I64(v) => SampleVec::I64(v),
        ArrayData::F64(v) => SampleVec::F64(v),
    })
}

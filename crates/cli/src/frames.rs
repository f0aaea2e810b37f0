//! Frames of a detector series read lazily from disk, in batches: a list of
//! 2-D files (CBF, CBF.gz, TIFF, npy, ...) read one file at a time, a
//! multi-page TIFF page by page, a 3-D .npy slab by slab. u16 and u32
//! counts stay packed; other integer dtypes (and floats holding whole
//! numbers) become i32 as DIALS reads them.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;

use gpuscope_core::spots::{CompressedFrames, FrameBatch};
use gpuscope_io::{Array, ArrayData};

use crate::common::{CliResult, Failure};
use crate::stream::StackReader;

/// One input of the series.
#[derive(Clone)]
enum Kind {
    /// A 3-D .npy or multi-page TIFF of this many frames, read frame by frame.
    Stack(usize),
    /// One frame, read whole when its turn comes.
    Frame,
}

/// The frames of all inputs, in order.
pub struct FrameSource {
    inputs: Vec<(PathBuf, Kind)>,
    total: usize,
    shape: [usize; 2],
    any_stack: bool,
    /// The first frame, read to learn the shape (handed out first).
    first: Option<Frame>,
    /// The frames handed out (all of them, or one GPU's share).
    window: Range<usize>,
    /// Counts above this are masked (a NeXus file's count cutoff).
    cutoff: Option<i64>,
    /// Hand out bitshuffle-LZ4 frames of uint32 counts (an Eiger series)
    /// compressed, for the GPU to decode.
    compressed: bool,
}

/// One frame's counts, packed as read.
#[derive(Clone)]
struct Frame {
    batch: FrameBatch,
    dtype: Packed,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Packed {
    U16,
    U32,
    I32,
    Compressed,
}

fn name(path: &Path) -> String {
    path.display().to_string()
}

/// `path`'s frames: `Some(frames)` for a 3-D .npy or multi-page TIFF.
fn stack_frames(path: &Path) -> CliResult<Option<(StackReader, usize)>> {
    Ok(StackReader::open(path)?.map(|r| {
        let z = r.shape()[0];
        (r, z)
    }))
}

impl FrameSource {
    /// Opens the inputs: stacks are counted from their headers, 2-D files
    /// count one frame each (checked when read); the first frame is read
    /// to learn the frame shape.
    pub fn open(inputs: &[PathBuf]) -> CliResult<FrameSource> {
        let mut list = Vec::with_capacity(inputs.len());
        let mut total = 0usize;
        let mut any_stack = false;
        for path in inputs {
            let kind = match stack_frames(path)? {
                Some((_, 0)) => {
                    return Err(Failure(format!("{}: the stack holds no frame", name(path))));
                }
                Some((_, z)) => {
                    any_stack = true;
                    Kind::Stack(z)
                }
                None => Kind::Frame,
            };
            total += match kind {
                Kind::Stack(z) => z,
                Kind::Frame => 1,
            };
            list.push((path.clone(), kind));
        }
        let Some((path, kind)) = list.first() else {
            return Err(Failure("no input frames".into()));
        };
        let (array, label) = match kind {
            Kind::Stack(_) => {
                let mut r = StackReader::open(path)?
                    .ok_or_else(|| Failure(format!("{}: not a stack any more", name(path))))?;
                (r.read(0, 1)?, format!("{}: frame 0", name(path)))
            }
            Kind::Frame => (crate::common::read_image(path)?.array, name(path)),
        };
        let shape = frame_shape(&array, &label)?;
        let first = packed(array, &label)?;
        Ok(FrameSource {
            inputs: list,
            total,
            shape,
            any_stack,
            first: Some(first),
            window: 0..total,
            cutoff: None,
            compressed: false,
        })
    }

    /// The same frames with counts above `cutoff` masked (set to -1, as
    /// DIALS masks counts outside the detector's trusted range).
    pub fn with_cutoff(mut self, cutoff: Option<i64>) -> FrameSource {
        self.cutoff = cutoff;
        self
    }

    /// Hands out the frames of bitshuffle-LZ4 HDF5 stacks of uint32 counts
    /// (Eiger series) still compressed when `on`, for the GPU to decode;
    /// other inputs, and a count cutoff below 0, are read as before. Set
    /// after [`FrameSource::with_cutoff`]. Returns whether any input is
    /// handed out compressed.
    pub fn with_compressed_frames(mut self, on: bool) -> CliResult<(FrameSource, bool)> {
        let cutoff_ok = self.cutoff.is_none_or(|c| c >= 0);
        let mut any = false;
        if on && cutoff_ok {
            for (i, (path, kind)) in self.inputs.iter().enumerate() {
                if let Kind::Stack(_) = kind
                    && StackReader::open(path)?.is_some_and(|r| r.has_bslz4_u32_frames())
                {
                    any = true;
                    if i == 0 {
                        // Frame 0 compressed too, not the one read for the shape.
                        self.first = None;
                    }
                }
            }
        }
        self.compressed = any;
        Ok((self, any))
    }

    /// The series index of the first frame handed out.
    pub fn first_frame(&self) -> usize {
        self.window.start
    }

    /// The same inputs handing out only `frames` (one GPU's share of a
    /// series split over several).
    pub fn window(&self, frames: Range<usize>) -> FrameSource {
        FrameSource {
            inputs: self.inputs.clone(),
            total: self.total,
            shape: self.shape,
            any_stack: self.any_stack,
            first: self.first.clone().filter(|_| frames.start == 0),
            window: frames.start.min(self.total)..frames.end.min(self.total),
            cutoff: self.cutoff,
            compressed: self.compressed,
        }
    }

    /// Frames in all inputs.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Rows and columns of every frame.
    pub fn shape(&self) -> [usize; 2] {
        self.shape
    }

    /// Whether any input is a 3-D stack (the output masks are then 3-D).
    pub fn any_stack(&self) -> bool {
        self.any_stack
    }

    /// Bytes of one frame as it travels (u16: 2, others: 4 a pixel).
    pub fn frame_bytes(&self) -> usize {
        let n = self.shape[0] * self.shape[1];
        match self.first.as_ref().map(|f| f.dtype) {
            Some(Packed::U16) => 2 * n,
            _ => 4 * n,
        }
    }

    /// Sends the frames in batches of up to `batch_frames` frames of one
    /// dtype, then stops; on a read error sends the error and stops. Stops
    /// early when the receiver is gone.
    pub fn send_batches(mut self, batch_frames: usize, tx: SyncSender<CliResult<FrameBatch>>) {
        let mut batch: Option<Frame> = None;
        let mut frames_in_batch = 0;
        let frame_len = (self.shape[0] * self.shape[1]).max(1);
        let emit = |f: Frame, batch: &mut Option<Frame>, k: &mut usize| -> bool {
            // A change of dtype ends the batch early.
            if batch.as_ref().is_some_and(|b| b.dtype != f.dtype)
                && let Some(b) = batch.take()
            {
                *k = 0;
                if tx.send(Ok(b.batch)).is_err() {
                    return false;
                }
            }
            *k += f.batch.len() / frame_len;
            match batch {
                Some(b) => append(&mut b.batch, f.batch),
                None => *batch = Some(f),
            }
            // A full batch goes at once, not with the next frame read.
            if *k >= batch_frames
                && let Some(b) = batch.take()
            {
                *k = 0;
                return tx.send(Ok(b.batch)).is_ok();
            }
            true
        };
        let first = self.first.take();
        let cutoff = self.cutoff;
        let result = self.for_each_frame(batch_frames, first, &mut |f| {
            emit(cut(f, cutoff), &mut batch, &mut frames_in_batch)
        });
        match result {
            Ok(true) => {
                if let Some(b) = batch {
                    let _ = tx.send(Ok(b.batch));
                }
            }
            Ok(false) => {}
            Err(e) => {
                let _ = tx.send(Err(e));
            }
        }
    }

    /// Calls `each` with every frame of the window in order (the first one
    /// given when the window starts at 0); stops when `each` returns false
    /// (Ok(false)).
    fn for_each_frame(
        &mut self,
        group: usize,
        first: Option<Frame>,
        each: &mut dyn FnMut(Frame) -> bool,
    ) -> CliResult<bool> {
        let window = self.window.clone();
        let mut first = first;
        let mut i = 0;
        // The series index of input i's first frame.
        let mut g = 0;
        while i < self.inputs.len() && g < window.end {
            let (path, kind) = &self.inputs[i];
            match kind {
                Kind::Frame => {
                    // A run of 2-D files, up to a batch, decoded in parallel
                    // (CBF.gz inflates at a few frames/s per core).
                    let mut end = i + 1;
                    while end < self.inputs.len()
                        && end - i < group
                        && matches!(self.inputs[end].1, Kind::Frame)
                    {
                        end += 1;
                    }
                    // Input k is frame g + k - i; keep those in the window.
                    let lo = i + window.start.saturating_sub(g).min(end - i);
                    let hi = i + window.end.saturating_sub(g).min(end - i);
                    let from = if lo == 0 && first.is_some() { 1 } else { 0 };
                    let paths: Vec<&Path> = self.inputs[(lo + from).min(hi)..hi]
                        .iter()
                        .map(|(p, _)| p.as_path())
                        .collect();
                    let read = self.read_files(&paths);
                    let head = if lo == 0 { first.take() } else { None };
                    for f in head.map(Ok).into_iter().chain(read) {
                        if !each(f?) {
                            return Ok(false);
                        }
                    }
                    g += end - i;
                    i = end;
                }
                Kind::Stack(nz) => {
                    let nz = *nz;
                    let lo = window.start.saturating_sub(g).min(nz);
                    let hi = window.end.saturating_sub(g).min(nz);
                    if lo < hi {
                        let mut reader = StackReader::open(path)?.ok_or_else(|| {
                            Failure(format!("{}: no longer a stack of frames", name(path)))
                        })?;
                        let mut z = lo;
                        if i == 0
                            && z == 0
                            && let Some(f) = first.take()
                        {
                            if !each(f) {
                                return Ok(false);
                            }
                            z = 1;
                        }
                        while self.compressed
                            && z < hi
                            && reader.has_bslz4_u32_frames()
                            && let Some(f) = self
                                .compressed_batch(&mut reader, z, group.max(1).min(hi - z))
                                .map_err(|Failure(m)| at_frame(m, path, z))?
                        {
                            z += f.batch.len() / (self.shape[0] * self.shape[1]);
                            if !each(f) {
                                return Ok(false);
                            }
                        }
                        // Native-order u16/u32/i32 .npy: whole batches read
                        // straight into the frames' memory (one copy, parallel
                        // reads) instead of one decoded frame at a time. (A
                        // first frame already handed out starts the first batch.)
                        let mut count = if z == 1 {
                            group.max(2) - 1
                        } else {
                            group.max(1)
                        };
                        while z < hi
                            && let Some(f) =
                                read_raw_batch(&mut reader, z, count.min(hi - z), self.shape)
                                    .map_err(|Failure(m)| at_frame(m, path, z))?
                        {
                            count = group.max(1);
                            z += f.batch.len() / (self.shape[0] * self.shape[1]);
                            if !each(f) {
                                return Ok(false);
                            }
                        }
                        while z < hi {
                            let label = format!("{}: frame {z}", name(path));
                            let frame = reader
                                .read(z, 1)
                                .map_err(|Failure(m)| at_frame(m, path, z))?;
                            self.check_shape(&frame, &label)?;
                            if !each(packed(frame, &label)?) {
                                return Ok(false);
                            }
                            z += 1;
                        }
                    }
                    g += nz;
                    i += 1;
                }
            }
        }
        Ok(true)
    }

    /// `count` frames from `z` as their chunks (None where one is stored
    /// unfiltered: those are read decoded). The count cutoff goes with
    /// them: a cutoff at or above 2^31 - 1 leaves uint32 counts as they
    /// are, as [`cut`] does.
    fn compressed_batch(
        &self,
        reader: &mut StackReader,
        z: usize,
        count: usize,
    ) -> CliResult<Option<Frame>> {
        let Some(chunks) = reader.read_chunks(z, count)? else {
            return Ok(None);
        };
        let cutoff = self
            .cutoff
            .filter(|&c| c < i64::from(i32::MAX))
            .map(|c| c as u32);
        let frames = CompressedFrames::new(chunks, self.shape[0] * self.shape[1], cutoff)?;
        Ok(Some(Frame {
            batch: FrameBatch::Compressed(frames),
            dtype: Packed::Compressed,
        }))
    }

    /// One 2-D file's frame.
    fn read_file(&self, path: &Path) -> CliResult<Frame> {
        let label = name(path);
        let a = crate::common::read_image(path)?.array;
        self.check_shape(&a, &label)?;
        packed(a, &label)
    }

    /// The frames of `paths`, in order, decoded by up to 8 threads.
    fn read_files(&self, paths: &[&Path]) -> Vec<CliResult<Frame>> {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(8)
            .min(paths.len());
        if threads <= 1 {
            return paths.iter().map(|p| self.read_file(p)).collect();
        }
        let next = AtomicUsize::new(0);
        let slots: Vec<Mutex<Option<CliResult<Frame>>>> =
            paths.iter().map(|_| Mutex::new(None)).collect();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= paths.len() {
                            break;
                        }
                        let r = self.read_file(paths[k]);
                        if let Ok(mut slot) = slots[k].lock() {
                            *slot = Some(r);
                        }
                    }
                });
            }
        });
        slots
            .into_iter()
            .map(|m| {
                m.into_inner()
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| Err(Failure("a file reader thread failed".into())))
            })
            .collect()
    }

    /// Checks a frame (2-D, or one slice of a stack) against the first's shape.
    fn check_shape(&self, a: &Array, label: &str) -> CliResult {
        let [h, w] = frame_shape(a, label)?;
        let [h0, w0] = self.shape;
        if [h, w] != self.shape {
            return Err(Failure(format!(
                "{label}: frames of {h} x {w} do not match the first frame's {h0} x {w0}"
            )));
        }
        Ok(())
    }
}

/// A reader's message about `path` (which names the file first) with the
/// frame index after the file name.
fn at_frame(m: String, path: &Path, z: usize) -> Failure {
    let base = path
        .file_name()
        .map(|b| b.to_string_lossy().into_owned())
        .unwrap_or_default();
    match m.strip_prefix(&format!("{base}: ")) {
        Some(rest) => Failure(format!("{base}: frame {z}: {rest}")),
        None => Failure(format!("{}: frame {z}: {m}", name(path))),
    }
}

/// A single frame's shape: (rows, cols), or (1, rows, cols).
fn frame_shape(a: &Array, label: &str) -> CliResult<[usize; 2]> {
    match a.shape[..] {
        [h, w] | [1, h, w] => Ok([h, w]),
        [_, _, _] => Err(Failure(format!(
            "{label}: a stack of shape {:?} in a format read whole; save it as .npy or a multi-page TIFF to stream it frame by frame",
            a.shape
        ))),
        _ => Err(Failure(format!(
            "{label}: shape {:?} is neither a frame (rows, cols) nor a series (frames, rows, cols)",
            a.shape
        ))),
    }
}

/// Appends `more` (same dtype) to `to`.
/// Frames z..z+count of a native-order u16/u32/i32 .npy stack of `shape`
/// frames, read raw into one batch; None for other stacks (decoded frame
/// by frame instead).
fn read_raw_batch(
    reader: &mut StackReader,
    z: usize,
    count: usize,
    shape: [usize; 2],
) -> CliResult<Option<Frame>> {
    let StackReader::Npy(r) = reader else {
        return Ok(None);
    };
    if !r.native_order() || r.shape()[1..] != shape[..] {
        return Ok(None);
    }
    let len = count * shape[0] * shape[1];
    // Fresh memory the read fills once (huge pages where the OS gives them).
    let frame = match r.dtype() {
        gpuscope_io::DType::U16 => {
            let mut v: Vec<u16> = gpuscope_core::stream::zeroed_output(len);
            r.read_slab_raw(z, count, bytemuck::cast_slice_mut(&mut v))?;
            Frame {
                batch: FrameBatch::U16(v),
                dtype: Packed::U16,
            }
        }
        gpuscope_io::DType::U32 => {
            let mut v: Vec<u32> = gpuscope_core::stream::zeroed_output(len);
            r.read_slab_raw(z, count, bytemuck::cast_slice_mut(&mut v))?;
            Frame {
                batch: FrameBatch::U32(v),
                dtype: Packed::U32,
            }
        }
        gpuscope_io::DType::I32 => {
            let mut v: Vec<i32> = gpuscope_core::stream::zeroed_output(len);
            r.read_slab_raw(z, count, bytemuck::cast_slice_mut(&mut v))?;
            Frame {
                batch: FrameBatch::I32(v),
                dtype: Packed::I32,
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(frame))
}

fn append(to: &mut FrameBatch, more: FrameBatch) {
    match (to, more) {
        (FrameBatch::U16(a), FrameBatch::U16(b)) => a.extend(b),
        (FrameBatch::U32(a), FrameBatch::U32(b)) => a.extend(b),
        (FrameBatch::I32(a), FrameBatch::I32(b)) => a.extend(b),
        (FrameBatch::Compressed(a), FrameBatch::Compressed(b)) => a.append(b),
        // Batches are cut where the dtype changes: never reached.
        _ => {}
    }
}

/// `f` with counts above `cutoff` set to -1 (masked). u16 and u32 frames
/// become i32 unless no u16 can exceed the cutoff; a cutoff beyond i32
/// leaves u32 frames as they are.
fn cut(f: Frame, cutoff: Option<i64>) -> Frame {
    let Some(c) = cutoff else {
        return f;
    };
    let to_i32 = |x: i64| if x > c { -1 } else { x as i32 };
    let batch = match f.batch {
        FrameBatch::U16(v) if c < 65535 => {
            FrameBatch::I32(v.iter().map(|&x| to_i32(i64::from(x))).collect())
        }
        FrameBatch::U32(v) if c < i64::from(i32::MAX) => {
            FrameBatch::I32(v.iter().map(|&x| to_i32(i64::from(x))).collect())
        }
        FrameBatch::I32(mut v) => {
            v.iter_mut().for_each(|x| *x = to_i32(i64::from(*x)));
            FrameBatch::I32(v)
        }
        other => return Frame { batch: other, ..f },
    };
    Frame {
        batch,
        dtype: Packed::I32,
    }
}

/// The counts of an array, packed as read (u16, u32) or as i32.
fn packed(a: Array, label: &str) -> CliResult<Frame> {
    Ok(match a.data {
        ArrayData::U16(v) => Frame {
            batch: FrameBatch::U16(v),
            dtype: Packed::U16,
        },
        ArrayData::U32(v) => Frame {
            batch: FrameBatch::U32(v),
            dtype: Packed::U32,
        },
        ArrayData::I32(v) => Frame {
            batch: FrameBatch::I32(v),
            dtype: Packed::I32,
        },
        _ => Frame {
            batch: FrameBatch::I32(to_i32(&a, label)?),
            dtype: Packed::I32,
        },
    })
}

/// Integer counts of an array; floats must hold integers.
pub fn to_i32(a: &Array, name: &str) -> CliResult<Vec<i32>> {
    let bad = || {
        Failure(format!(
            "{name}: spot finding needs integer detector counts between -2^31 and 2^31 (found {} data out of range or not whole numbers)",
            a.dtype().name()
        ))
    };
    let conv = |x: f64| -> Option<i32> {
        (x.fract() == 0.0 && x >= f64::from(i32::MIN) && x <= f64::from(i32::MAX))
            .then_some(x as i32)
    };
    let v: Option<Vec<i32>> = match &a.data {
        ArrayData::I32(v) => Some(v.clone()),
        ArrayData::U8(v) => Some(v.iter().map(|&x| i32::from(x)).collect()),
        ArrayData::I8(v) => Some(v.iter().map(|&x| i32::from(x)).collect()),
        ArrayData::I16(v) => Some(v.iter().map(|&x| i32::from(x)).collect()),
        ArrayData::U16(v) => Some(v.iter().map(|&x| i32::from(x)).collect()),
        ArrayData::U32(v) => v.iter().map(|&x| i32::try_from(x).ok()).collect(),
        ArrayData::U64(v) => v.iter().map(|&x| i32::try_from(x).ok()).collect(),
        ArrayData::I64(v) => v.iter().map(|&x| i32::try_from(x).ok()).collect(),
        ArrayData::F32(v) => v.iter().map(|&x| conv(f64::from(x))).collect(),
        ArrayData::F64(v) => v.iter().map(|&x| conv(x)).collect(),
        ArrayData::Bool(_) => None,
    };
    v.ok_or_else(bad)
}

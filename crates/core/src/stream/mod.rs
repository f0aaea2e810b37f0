//! Streaming: an array passes through the GPU chunk by chunk, read slice by
//! slice from a [`SliceSource`] and written in order to a [`SliceSink`], so
//! neither device nor host ever holds more than a few chunks. Arrays in
//! memory use the same path ([`MemorySource`], a `Vec` as sink).
//!
//! Chunks come from the planner ([`crate::chunk::plan`]) with the stencil's
//! halo; two chunks are in flight at once, so the upload and kernels of one
//! overlap the download of the other and the host's gathering of the next.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;

use bytemuck::Pod;

use crate::boundary::Mode;
use crate::chunk::{self, Chunk, Shape3};
use crate::copies::{STREAM_UPLOAD_THREADS, copy_threads, parallel_copy_with, upload_threads};
pub use crate::copies::{parallel_copy, zeroed_output};
use crate::engine::{Gpu, Pending, Recorder, UploadBuffer};
use crate::error::{Error, Result};

mod parts;
use parts::{Assembly, Bands, row_runs};

/// Slices (z first, each a whole y×x plane) of an array, read on demand.
pub trait SliceSource<T> {
    /// Appends slices `z` to `out`.
    fn read(&mut self, z: Range<usize>, out: &mut Vec<T>) -> Result<()>;

    /// Slice `z` without copying, for sources already in memory.
    fn borrow(&self, _z: usize) -> Option<&[T]> {
        None
    }

    /// Slices `z` as one contiguous run without copying, when in memory.
    fn borrow_range(&self, _z: Range<usize>) -> Option<&[T]> {
        None
    }

    /// Makes slices `z` borrowable where the source can (a conveyor's
    /// read-ahead blocks); called before each chunk, in z order.
    fn fetch(&mut self, _z: Range<usize>) -> Result<()> {
        Ok(())
    }

    /// Slices `z` as runs lying one after the other in the source's memory
    /// (blocks read ahead), without copying.
    fn borrow_runs(&self, z: Range<usize>) -> Option<Vec<&[T]>> {
        self.borrow_range(z).map(|run| vec![run])
    }

    /// Whether the source reads rows of a slice ([`SliceSource::read_rows`])
    /// instead of whole slices: slices too large to hold several of.
    fn reads_rows(&self) -> bool {
        false
    }

    /// Appends rows `y` of slice `z` to `out`, where [`SliceSource::reads_rows`].
    fn read_rows(&mut self, z: usize, y: Range<usize>, out: &mut Vec<T>) -> Result<()> {
        let _ = (z, y, out);
        Err(Error::InvalidInput(
            "this source reads whole slices only (an internal error of gpuscope; please report it)"
                .into(),
        ))
    }
}

/// Receives the output slices in order.
pub trait SliceSink<T> {
    fn write(&mut self, slices: &[T]) -> Result<()>;

    /// [`SliceSink::write`] while the stream does nothing else on the host
    /// (its last chunks): a sink copying on threads may take them all.
    fn write_alone(&mut self, slices: &[T]) -> Result<()> {
        self.write(slices)
    }

    /// Writes `values` at element `offset` of the array (whole rows of a
    /// slice not yet written), where the sink can take part of a slice: an
    /// array in memory. Ok(false) when it cannot; the stream then
    /// assembles whole slices and writes them in order.
    fn write_at(&mut self, _offset: usize, _values: &[T], _alone: bool) -> Result<bool> {
        Ok(false)
    }

    /// After [`SliceSink::write_at`] filled the next `n` elements whole:
    /// the next [`SliceSink::write`] goes after them.
    fn skip(&mut self, _n: usize) -> Result<()> {
        Ok(())
    }

    /// Whether [`SliceSink::write_at`] takes rows (an array in memory).
    fn takes_rows(&self) -> bool {
        false
    }
}

/// An array in memory as a source.
pub struct MemorySource<'a, T> {
    data: &'a [T],
    plane: usize,
}

impl<'a, T> MemorySource<'a, T> {
    pub fn new(data: &'a [T], shape: Shape3) -> Self {
        MemorySource {
            data,
            plane: shape[1] * shape[2],
        }
    }
}

impl<T: Copy> SliceSource<T> for MemorySource<'_, T> {
    fn read(&mut self, z: Range<usize>, out: &mut Vec<T>) -> Result<()> {
        out.extend_from_slice(&self.data[z.start * self.plane..z.end * self.plane]);
        Ok(())
    }

    fn borrow(&self, z: usize) -> Option<&[T]> {
        self.data.get(z * self.plane..(z + 1) * self.plane)
    }

    fn borrow_range(&self, z: Range<usize>) -> Option<&[T]> {
        self.data.get(z.start * self.plane..z.end * self.plane)
    }
}

impl<T: Copy> SliceSink<T> for Vec<T> {
    fn write(&mut self, slices: &[T]) -> Result<()> {
        self.extend_from_slice(slices);
        Ok(())
    }
}

/// A sink filling a preallocated array in order (copies in parallel).
pub struct MemorySink<'a, T> {
    data: &'a mut [std::mem::MaybeUninit<T>],
    filled: usize,
}

impl<'a, T> MemorySink<'a, T> {
    pub fn new(data: &'a mut [T]) -> Self {
        // SAFETY: same layout; the sink only stores initialised values, so
        // `data` stays initialised.
        let data = unsafe { &mut *(data as *mut [T] as *mut [std::mem::MaybeUninit<T>]) };
        MemorySink { data, filled: 0 }
    }

    /// A sink into memory not yet initialised (a fresh numpy array): the
    /// stream writes every element before the caller may read it.
    pub fn uninit(data: &'a mut [std::mem::MaybeUninit<T>]) -> Self {
        MemorySink { data, filled: 0 }
    }
}

impl<T: Pod> SliceSink<T> for MemorySink<'_, T> {
    fn write(&mut self, slices: &[T]) -> Result<()> {
        // The stream writes the next chunk's upload on other cores meanwhile.
        self.write_on(slices, copy_threads().saturating_sub(STREAM_UPLOAD_THREADS))
    }

    fn write_alone(&mut self, slices: &[T]) -> Result<()> {
        self.write_on(slices, copy_threads())
    }

    fn write_at(&mut self, offset: usize, values: &[T], alone: bool) -> Result<bool> {
        if offset < self.filled {
            return Err(Error::InvalidInput(format!(
                "values written at {offset}, before the {} already written",
                self.filled
            )));
        }
        let threads = if alone {
            copy_threads()
        } else {
            copy_threads().saturating_sub(STREAM_UPLOAD_THREADS)
        };
        self.copy_at(offset, values, threads)?;
        Ok(true)
    }

    fn takes_rows(&self) -> bool {
        true
    }

    fn skip(&mut self, n: usize) -> Result<()> {
        let end = self.filled + n;
        if end > self.data.len() {
            return Err(Error::InvalidInput(format!(
                "{end} values written into an array of {}",
                self.data.len()
            )));
        }
        self.filled = end;
        Ok(())
    }
}

impl<T: Pod> MemorySink<'_, T> {
    fn write_on(&mut self, slices: &[T], threads: usize) -> Result<()> {
        self.copy_at(self.filled, slices, threads)?;
        self.filled += slices.len();
        Ok(())
    }

    fn copy_at(&mut self, offset: usize, slices: &[T], threads: usize) -> Result<()> {
        let end = offset + slices.len();
        let Some(dst) = self.data.get_mut(offset..end) else {
            return Err(Error::InvalidInput(format!(
                "{end} values written into an array of {}",
                self.data.len()
            )));
        };
        let bytes = std::mem::size_of_val(dst);
        // SAFETY: `dst` is `bytes` bytes of memory we may write; T is Pod,
        // so its bytes may be written one by one.
        let dst = unsafe {
            std::slice::from_raw_parts_mut(
                dst.as_mut_ptr().cast::<std::mem::MaybeUninit<u8>>(),
                bytes,
            )
        };
        parallel_copy_with(dst, bytemuck::cast_slice(slices), threads.max(1));
        Ok(())
    }
}

/// Called after each write with (slices written, total slices).
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize);

/// Records one chunk's kernels: reads the box from `src`, leaves the core in
/// `dst` (returns `true`) or back in `src` (`false`).
pub(crate) type ChunkKernel<'k> =
    &'k dyn Fn(&mut Recorder<'_>, &wgpu::Buffer, &wgpu::Buffer, &Chunk) -> Result<bool>;

/// How an operation drives its chunk kernel.
pub(crate) enum Drive<'a, T> {
    /// From a source to a sink, chunk by chunk.
    Stream,
    /// Timed on `data` uploaded once, `repeats` times ([`time_resident`]).
    Time(&'a [T], usize),
    /// Once on a whole array already on the GPU; the buffer holding the
    /// result is put in the option ([`crate::device_array::apply_kernel`]).
    OnDevice(&'a wgpu::Buffer, &'a mut Option<wgpu::Buffer>),
}

/// The array and stencil a streaming run covers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamSpec<T> {
    pub shape: Shape3,
    pub halo: Shape3,
    pub mode: Mode,
    pub cval: T,
}

/// Chunks in flight at once.
const SLOTS: usize = 2;

/// Largest chunk buffer when streaming: big enough to keep the bus busy,
/// small enough that several chunks of a large stack overlap.
pub(crate) const STREAM_CHUNK_BYTES: u64 = 64 << 20;

/// [`STREAM_CHUNK_BYTES`], or for benchmarks `GPUSCOPE_STREAM_CHUNK_BYTES`
/// (at least 1 MiB; it also turns [`overlap_elements`] off); the results
/// do not change.
pub(crate) fn stream_chunk_bytes() -> u64 {
    chunk_bytes_set().unwrap_or(STREAM_CHUNK_BYTES)
}

/// `GPUSCOPE_STREAM_CHUNK_BYTES`, read once per process.
fn chunk_bytes_set() -> Option<u64> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        static SET: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
        *SET.get_or_init(|| {
            std::env::var("GPUSCOPE_STREAM_CHUNK_BYTES")
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|b| b.max(1 << 20))
        })
    }
    #[cfg(target_arch = "wasm32")]
    None
}

/// Arrays from this size up to twice [`STREAM_CHUNK_BYTES`] are cut into
/// about three chunks where the source and the sink are in memory.
const OVERLAP_FROM_BYTES: u64 = 12 << 20;

/// The chunk size (elements) that cuts an array of `elements` words of
/// `word` bytes into about three chunks, so that one chunk's upload, kernel
/// and download overlap the others' (a 2048² float32 image measured faster
/// so than whole, from memory to memory: BENCHMARKS.md); None where the
/// array is smaller or larger, either end is not in memory (reading or
/// writing a file, a chunk that is part of a slice costs a gather or an
/// assembly), or the stencil reaches across slices (3-D boxes would be
/// gathered).
fn overlap_elements(elements: u64, word: u64, eligible: bool) -> Option<u64> {
    let bytes = elements.saturating_mul(word);
    let fits = (OVERLAP_FROM_BYTES..=2 * STREAM_CHUNK_BYTES).contains(&bytes);
    (fits && eligible && chunk_bytes_set().is_none()).then(|| elements.div_ceil(2))
}

/// Streams `source` through `kernel` into `sink`. Chunks hold at most
/// `max_elements` words (halved on out-of-memory before anything is written).
pub(crate) async fn run<T: Pod>(
    gpu: &Gpu,
    spec: StreamSpec<T>,
    source: &mut dyn SliceSource<T>,
    sink: &mut dyn SliceSink<T>,
    kernel: ChunkKernel<'_>,
    mut max_elements: u64,
    progress: Progress<'_>,
) -> Result<()> {
    let word = std::mem::size_of::<T>() as u64;
    let elements = spec.shape.iter().product::<usize>() as u64;
    let eligible = source.borrow(0).is_some() && sink.takes_rows() && spec.halo[0] == 0;
    if let Some(overlap) = overlap_elements(elements, word, eligible) {
        max_elements = max_elements.min(overlap);
    }
    loop {
        let chunks = chunk::plan(spec.shape, spec.halo, max_elements)?;
        let largest = chunks.largest_box() as u64;
        let mut buffers = Vec::with_capacity(2 * SLOTS);
        let mut failure = None;
        for _ in 0..2 * SLOTS {
            match gpu.storage(word * largest, "stream chunk").await {
                Ok(b) => buffers.push(b),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        match failure {
            Some(Error::OutOfMemory { .. }) if max_elements > 1 << 16 => {
                for b in buffers {
                    gpu.recycle(b);
                }
                gpu.trim();
                max_elements /= 2;
                continue;
            }
            Some(e) => {
                for b in buffers {
                    gpu.recycle(b);
                }
                return Err(e);
            }
            None => {}
        }
        let mut uploads: Vec<UploadBuffer> = (0..SLOTS)
            .map(|_| gpu.upload_buffer(word * largest))
            .collect();
        // A kernel the device rejects (e.g. a shader its compiler refuses)
        // must fail the call, not leave stale buffer contents as a result.
        let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let outcome = stream_chunks(
            gpu,
            &spec,
            &chunks,
            &buffers,
            &mut uploads,
            source,
            sink,
            kernel,
            progress,
        )
        .await;
        // The validation error explains a failed readback better than the
        // readback's own error.
        let outcome = match (outcome, scope.pop().await) {
            (_, Some(e)) => Err(Error::Device(format!("the GPU rejected the work: {e}"))),
            (other, None) => other,
        };
        for b in buffers {
            gpu.recycle(b);
        }
        for u in uploads {
            gpu.release_upload(u);
        }
        return outcome;
    }
}

#[allow(clippy::too_many_arguments)]
async fn stream_chunks<T: Pod>(
    gpu: &Gpu,
    spec: &StreamSpec<T>,
    chunks: &chunk::Plan,
    buffers: &[wgpu::Buffer],
    uploads: &mut [UploadBuffer],
    source: &mut dyn SliceSource<T>,
    sink: &mut dyn SliceSink<T>,
    kernel: ChunkKernel<'_>,
    progress: Progress<'_>,
) -> Result<()> {
    let shape = spec.shape;
    let plane = shape[1] * shape[2];
    let word = std::mem::size_of::<T>() as u64;
    let mut cache: BTreeMap<usize, Vec<T>> = BTreeMap::new();
    let mut in_flight: VecDeque<(Chunk, Pending)> = VecDeque::new();
    let mut output = Assembly::new(shape);
    // The gathered box, its memory kept from chunk to chunk.
    let mut gathered: Vec<T> = Vec::new();
    // Rows read for the current box where the source reads rows.
    let mut bands = Bands::new();
    // A row of the constant, for the halo rows of constant mode.
    let constant_row = vec![spec.cval; shape[2]];
    let largest_core = chunks.largest_core() as u64;
    for (i, c) in chunks.iter().enumerate() {
        let c = &c;
        // The oldest chunk is collected while this one is copied into upload
        // memory: one copy runs over the bus, the other in host memory.
        let oldest = if in_flight.len() == SLOTS {
            in_flight.pop_front()
        } else {
            None
        };
        let slot = i % SLOTS;
        let (src, dst) = (&buffers[2 * slot], &buffers[2 * slot + 1]);
        let zs: Vec<Option<usize>> = chunk::box_coordinates(shape, c, spec.mode, 0);
        let whole_planes = c.pad[1] == 0
            && c.pad[2] == 0
            && c.core_hi[1] - c.core_lo[1] == shape[1]
            && c.core_hi[2] - c.core_lo[2] == shape[2];
        let first = zs.first().copied().flatten().unwrap_or(0);
        let consecutive = zs.iter().enumerate().all(|(k, z)| *z == Some(first + k));
        if let (Some(lo), Some(hi)) = (zs.iter().flatten().min(), zs.iter().flatten().max()) {
            source.fetch(*lo..*hi + 1)?;
        }
        let direct = if whole_planes && consecutive {
            source.borrow_runs(first..first + zs.len())
        } else {
            row_runs(&*source, shape, c, spec.mode, &constant_row)
        };
        let up = &mut uploads[slot];
        let box_bytes = word * c.box_shape().iter().product::<usize>() as u64;
        let pieces: Vec<&[u8]> = if let Some(runs) = direct {
            // In memory: copied from where they lie, no gather.
            runs.into_iter().map(bytemuck::cast_slice).collect()
        } else if source.reads_rows() {
            bands.read(&mut *source, shape, c, spec.mode)?;
            let row = |z: usize, y: usize| bands.row(z, y);
            chunk::gather_rows_into(row, shape, c, spec.mode, spec.cval, &mut gathered);
            vec![bytemuck::cast_slice(&gathered)]
        } else {
            let zs: Vec<usize> = zs.into_iter().flatten().collect();
            if !zs.iter().all(|&z| source.borrow(z).is_some()) {
                // Keep only the slices this chunk needs; chunks come in z order.
                cache.retain(|z, _| zs.contains(z));
                for &z in &zs {
                    if let std::collections::btree_map::Entry::Vacant(e) = cache.entry(z) {
                        let mut slice = Vec::with_capacity(plane);
                        source.read(z..z + 1, &mut slice)?;
                        if slice.len() != plane {
                            return Err(Error::InvalidInput(format!(
                                "slice {z} has {} values, expected {plane}",
                                slice.len()
                            )));
                        }
                        e.insert(slice);
                    }
                }
            }
            {
                let src: &dyn SliceSource<T> = source;
                let slice = |z: usize| -> &[T] {
                    src.borrow(z)
                        .or_else(|| cache.get(&z).map(Vec::as_slice))
                        .unwrap_or(&[])
                };
                chunk::gather_into(slice, shape, c, spec.mode, spec.cval, &mut gathered);
            };
            vec![bytemuck::cast_slice(&gathered)]
        };
        let collect = async {
            match oldest {
                Some((done, pending)) => {
                    gpu.finish_with(pending, |bytes| {
                        output.place_bytes(&done, bytes, sink, progress, false)
                    })
                    .await
                }
                None => Ok(()),
            }
        };
        // The first chunks' uploads have nothing to overlap with.
        let threads = if i < SLOTS {
            upload_threads()
        } else {
            STREAM_UPLOAD_THREADS
        };
        gpu.fill_pieces_during(up, &pieces, threads, collect)
            .await??;
        let mut rec = gpu.recorder();
        rec.copy_in(up, src, box_bytes);
        let in_dst = kernel(&mut rec, src, dst, c)?;
        let n = c.core_shape().iter().product::<usize>() as u64;
        let result = if in_dst { dst } else { src };
        in_flight.push_back((
            *c,
            rec.submit_with_readback_in(result, word * n, Some(up), word * largest_core),
        ));
    }
    while let Some((done, pending)) = in_flight.pop_front() {
        gpu.finish_with(pending, |bytes| {
            output.place_bytes(&done, bytes, sink, progress, true)
        })
        .await?;
    }
    output.flush(sink, progress, true)
}

/// GPU time of `kernel` on the whole array with the data already on the
/// device (what peers report as device time): the minimum over `repeats`
/// runs, in nanoseconds; `None` without timestamp queries. The array must
/// fit one binding.
pub(crate) async fn time_resident<T: Pod>(
    gpu: &Gpu,
    spec: StreamSpec<T>,
    data: &[T],
    kernel: ChunkKernel<'_>,
    repeats: usize,
) -> Result<Option<u64>> {
    let chunks = chunk::plan(spec.shape, spec.halo, u64::MAX)?;
    let Some(c) = chunks.single() else {
        return Ok(None);
    };
    let c = &c;
    let bytes = std::mem::size_of_val(data) as u64;
    let src = gpu.storage(bytes, "timed input").await?;
    let dst = match gpu.storage(bytes, "timed output").await {
        Ok(b) => b,
        Err(e) => {
            gpu.recycle(src);
            return Err(e);
        }
    };
    gpu.upload(&src, bytemuck::cast_slice(data));
    let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
    let outcome = async {
        // Repeats run back to back in one submission (as many as the
        // timestamp slots allow): separate submissions leave the GPU idle in
        // between, and it clocks down (the same kernel then takes several
        // times longer). The time of a batch is its mean; the best batch wins.
        let mut best: Option<u64> = None;
        let mut left = repeats.max(1);
        let mut batch = 1;
        while left > 0 {
            let n = batch.min(left);
            let mut rec = gpu.recorder();
            for _ in 0..n {
                kernel(&mut rec, &src, &dst, c)?;
            }
            let passes_per_repeat = (rec.timed_passes() as usize / n).max(1);
            rec.submit().await?;
            if let Some(ns) = gpu.last_kernel_ns() {
                let mean = ns / n as u64;
                best = Some(best.map_or(mean, |b| b.min(mean)));
            }
            left -= n;
            batch = (crate::engine::MAX_TIMED_PASSES as usize / passes_per_repeat).max(1);
        }
        Ok::<_, Error>(best)
    }
    .await;
    let outcome = match (outcome, scope.pop().await) {
        (_, Some(e)) => Err(Error::Device(format!("the GPU rejected the work: {e}"))),
        (other, None) => other,
    };
    gpu.recycle(src);
    gpu.recycle(dst);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Faulting pages in changes no byte, even while another thread fills
    /// them, and the vector comes back empty with its capacity.
    #[test]
    fn prefaulting_keeps_what_is_written_meanwhile() {
        let count = 5 << 20; // 20 MiB of u32: a populating thread runs
        let mut data: Vec<u32> = zeroed_output(count);
        let populating = crate::copies::Populating::start(data.as_ptr() as usize, 4 * count);
        for (i, v) in data.iter_mut().enumerate().rev() {
            *v = i as u32;
        }
        drop(populating);
        assert!(data.iter().enumerate().all(|(i, &v)| v == i as u32));

        let room = crate::copies::Prefaulted::<u32>::new(count).take();
        assert!(room.is_empty() && room.capacity() >= count);
        let src: Vec<u8> = (0..4 * count).map(|i| (i % 251) as u8).collect();
        let out: Vec<u32> = crate::engine::vec_from_bytes(room, &src);
        assert_eq!(bytemuck::cast_slice::<u32, u8>(&out), &src[..]);
    }
}

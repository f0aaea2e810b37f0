//! Several GPUs (`--adapters`): a 3-D stack filtered disk to disk is split
//! along z into one contiguous range per context, each run by its own
//! thread on its own device, reading its range plus the footprint's halo
//! from the source and writing its output slices at their place in one
//! pre-sized .npy (renamed over the output only when every range is done).
//!
//! A range's sub-stack is its slices with `halo` more on each side that is
//! inside the stack: the output of a slice depends only on inputs within
//! `halo` slices of it, and at the stack's own first and last slice the
//! sub-stack ends where the stack does, so the boundary mode sees the same
//! neighbours (except `wrap`, which reads the other end: callers keep one
//! context then). The output is the same, bit for bit, as one context's.

use std::ops::Range;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use gpuscope_core::Gpu;
use gpuscope_core::stream::{SliceSink, SliceSource};
use gpuscope_io::DType;
use gpuscope_io::npy::NpySlabWriter;
use serde_json::{Value, json};

use crate::common::{CliResult, Failure, split_ranges};
use crate::stream::{FromWords, ProgressBar, Source, StackReader, ToWords};

/// One context's share of a spread run.
pub struct Share {
    pub adapter: String,
    pub z: Range<usize>,
    pub kernel_ms: Option<f64>,
}

impl Share {
    pub fn json(&self) -> Value {
        json!({ "adapter": self.adapter, "z": [self.z.start, self.z.end], "kernel_ms": self.kernel_ms })
    }
}

/// Runs a stream of one sub-stack on one GPU: (gpu, sub-stack shape,
/// source, sink, progress).
pub type RunStream<'a, W> = dyn Fn(
        &Gpu,
        &[usize],
        &mut dyn SliceSource<W>,
        &mut dyn SliceSink<W>,
        &mut dyn FnMut(usize, usize),
    ) -> gpuscope_core::Result<()>
    + Sync
    + 'a;

/// How many of `contexts` a stack of `nz` slices is split over: ranges at
/// least as long as the halo (shorter ones would mostly recompute halo),
/// and only for .npy output (TIFF pages are written in order: one
/// context), and never with `wrap` across z.
/// Waits for every worker thread of one spread run; a thread that panicked
/// becomes a failure, not a crash.
pub fn join_workers<T>(
    workers: Vec<std::thread::ScopedJoinHandle<'_, CliResult<T>>>,
) -> Vec<CliResult<T>> {
    workers
        .into_iter()
        .map(|w| {
            w.join()
                .unwrap_or_else(|_| Err(Failure("a GPU worker thread failed".into())))
        })
        .collect()
}

pub fn parts(contexts: usize, nz: usize, halo: usize, output: &Path, wrap: bool) -> usize {
    let npy = output
        .extension()
        .is_some_and(|e| e.to_string_lossy().eq_ignore_ascii_case("npy"));
    if !npy || (wrap && halo > 0) {
        return 1;
    }
    contexts.min(nz / halo.max(1)).max(1)
}

/// Filters the stack at `input` into `output` (.npy of `out_dtype`) on
/// every GPU of `gpus`, one z-range each.
#[allow(clippy::too_many_arguments)]
pub fn spread_stack<W: Send>(
    gpus: &[&Gpu],
    input: &Path,
    output: &Path,
    shape: &[usize],
    out_dtype: DType,
    halo: usize,
    to_words: ToWords<W>,
    from_words: FromWords<W>,
    run: &RunStream<'_, W>,
) -> CliResult<Vec<Share>> {
    let nz = shape[0];
    let ranges = split_ranges(nz, gpus.len());
    let writer = NpySlabWriter::create(output, shape.to_vec(), out_dtype)?;
    let plane: usize = shape[1..].iter().product();
    let progress = Mutex::new((
        ProgressBar::new(plane * out_dtype.size_bytes()),
        vec![0usize; ranges.len()],
    ));
    // A failed worker stops the others at their next write.
    let stop = AtomicBool::new(false);
    let results: Vec<CliResult> = std::thread::scope(|s| {
        let workers: Vec<_> = gpus
            .iter()
            .zip(&ranges)
            .enumerate()
            .map(|(k, (gpu, range))| {
                let (writer, progress, stop) = (&writer, &progress, &stop);
                let gpu: &Gpu = gpu;
                s.spawn(move || {
                    let lo = range.start.saturating_sub(halo);
                    let hi = (range.end + halo).min(nz);
                    let result = (|| -> CliResult {
                        let reader = StackReader::open(input)?.ok_or_else(|| {
                            Failure(format!("{}: no longer a 3-D stack", input.display()))
                        })?;
                        let mut source = Offset {
                            inner: Source { reader, to_words },
                            lo,
                        };
                        let mut sink = RangeSink {
                            writer,
                            trailing: shape[1..].to_vec(),
                            dtype: out_dtype,
                            from_words,
                            next: lo,
                            keep: range.clone(),
                            stop,
                        };
                        let mut bar = |done: usize, _: usize| {
                            if let Ok(mut p) = progress.lock() {
                                p.1[k] = done.saturating_sub(range.start - lo).min(range.len());
                                let sum = p.1.iter().sum();
                                p.0.update(sum, nz);
                            }
                        };
                        let sub = [hi - lo, shape[1], shape[2]];
                        run(gpu, &sub, &mut source, &mut sink, &mut bar)?;
                        Ok(())
                    })();
                    if result.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    result
                })
            })
            .collect();
        join_workers(workers)
    });
    // The first real error, not a "stopped" of the others.
    if let Some(e) = results
        .into_iter()
        .filter_map(Result::err)
        .min_by_key(|Failure(m)| m.contains(STOPPED))
    {
        return Err(e);
    }
    writer.finish()?;
    Ok(gpus
        .iter()
        .zip(ranges)
        .map(|(g, z)| Share {
            adapter: g.summary().name,
            z,
            kernel_ms: g.kernel_ns_total().map(|ns| ns as f64 / 1e6),
        })
        .collect())
}

const STOPPED: &str = "stopped: another GPU's part failed";

/// A source seen from slice `lo` on.
struct Offset<W> {
    inner: Source<W>,
    lo: usize,
}

impl<W> SliceSource<W> for Offset<W> {
    fn read(&mut self, z: Range<usize>, out: &mut Vec<W>) -> gpuscope_core::Result<()> {
        self.inner.read(z.start + self.lo..z.end + self.lo, out)
    }
}

/// Output slices of a sub-stack: those in `keep` go to the file at their
/// place, the halo's are dropped.
struct RangeSink<'a, W> {
    writer: &'a NpySlabWriter,
    trailing: Vec<usize>,
    dtype: DType,
    from_words: FromWords<W>,
    /// The stack index of the next slice received.
    next: usize,
    keep: Range<usize>,
    stop: &'a AtomicBool,
}

impl<W> SliceSink<W> for RangeSink<'_, W> {
    fn write(&mut self, slices: &[W]) -> gpuscope_core::Result<()> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(gpuscope_core::Error::InvalidInput(STOPPED.into()));
        }
        let plane: usize = self.trailing.iter().product::<usize>().max(1);
        let n = slices.len() / plane;
        let (z0, z1) = (self.next, self.next + n);
        self.next = z1;
        let (a, b) = (z0.max(self.keep.start), z1.min(self.keep.end));
        if a >= b {
            return Ok(());
        }
        let part = &slices[(a - z0) * plane..(b - z0) * plane];
        let mut shape = vec![b - a];
        shape.extend(&self.trailing);
        let go = || -> CliResult {
            let slab = (self.from_words)(shape, self.dtype, part)?;
            self.writer.write_at(a, &slab)?;
            Ok(())
        };
        go().map_err(|Failure(m)| gpuscope_core::Error::InvalidInput(m))
    }
}

/// A filter of a sub-stack in memory on one GPU: (gpu, values, shape).
pub type SubFilter<'a, T, R> = dyn Fn(&Gpu, &[T], &[usize]) -> CliResult<R> + Sync + 'a;

/// The in-memory twin of [`spread_stack`] (`gpuscope bench`): `filter`
/// runs on each context's sub-stack (its range and halo, borrowed from
/// `data`) and the ranges' slices are copied into one output.
pub fn spread_in_memory<T: bytemuck::Pod + Default + Send + Sync>(
    gpus: &[&Gpu],
    data: &[T],
    shape: &[usize],
    halo: usize,
    filter: &SubFilter<'_, T, Vec<T>>,
) -> CliResult<Vec<T>> {
    let nz = shape[0];
    let plane: usize = shape[1..].iter().product();
    if data.len() != nz * plane {
        return Err(Failure(format!(
            "{} values for a stack of shape {shape:?}",
            data.len()
        )));
    }
    let ranges = split_ranges(nz, gpus.len());
    let mut out = vec![T::default(); data.len()];
    let mut parts = Vec::with_capacity(ranges.len());
    let mut rest: &mut [T] = &mut out;
    for r in &ranges {
        let (part, tail) = rest.split_at_mut(r.len() * plane);
        parts.push(part);
        rest = tail;
    }
    let results: Vec<CliResult> = std::thread::scope(|s| {
        let workers: Vec<_> = gpus
            .iter()
            .zip(&ranges)
            .zip(parts)
            .map(|((gpu, range), part)| {
                let gpu: &Gpu = gpu;
                s.spawn(move || -> CliResult {
                    let lo = range.start.saturating_sub(halo);
                    let hi = (range.end + halo).min(nz);
                    let mut sub = shape.to_vec();
                    sub[0] = hi - lo;
                    let result = filter(gpu, &data[lo * plane..hi * plane], &sub)?;
                    let keep = (range.start - lo) * plane..(range.end - lo) * plane;
                    let core = result.get(keep).ok_or_else(|| {
                        Failure("a GPU part returned fewer values than its slices".into())
                    })?;
                    // On every core: this copy is the split path's one extra
                    // pass over the stack (the path measured 979 ms against
                    // the plain path's 162 ms on an H100 with a one-core
                    // copy; not measured since).
                    gpuscope_core::stream::parallel_copy(
                        bytemuck::cast_slice_mut(part),
                        bytemuck::cast_slice(core),
                    );
                    Ok(())
                })
            })
            .collect();
        join_workers(workers)
    });
    for r in results {
        r?;
    }
    Ok(out)
}

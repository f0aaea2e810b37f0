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
use gpuscope_core::stream::{MemorySource, SliceSink, SliceSource, parallel_copy};
use gpuscope_io::DType;
use gpuscope_io::npy::NpySlabWriter;
use serde_json::{Value, json};

use crate::common::{CliResult, Failure, split_ranges};
use crate::stream::{FromWords, ProgressBar, Source, StackReader, ToWords};

/// One context's share of a spread run.
pub struct Share {
    pub adapter: String,
    pub backend: String,
    pub z: Range<usize>,
    pub kernel_ms: Option<f64>,
}

impl Share {
    pub fn json(&self) -> Value {
        json!({ "adapter": self.adapter, "backend": self.backend, "z": [self.z.start, self.z.end], "kernel_ms": self.kernel_ms })
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

/// How many of `contexts` a stack of `nz` slices is split over: ranges at
/// least as long as the halo (shorter ones would mostly recompute halo),
/// and only for .npy or .raw output (TIFF pages are written in order: one
/// context), and never with `wrap` across z.
pub fn parts(contexts: usize, nz: usize, halo: usize, output: &Path, wrap: bool) -> usize {
    let at_offsets = output
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npy") || e.eq_ignore_ascii_case("raw"));
    if !at_offsets || (wrap && halo > 0) {
        return 1;
    }
    contexts.min(nz / halo.max(1)).max(1)
}

/// Filters the stack at `input` into `output` (.npy or .raw of `out_dtype`) on
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
    let writer = if crate::common::is_raw(output) {
        NpySlabWriter::create_raw(output, shape.to_vec(), out_dtype)?
    } else {
        NpySlabWriter::create(output, shape.to_vec(), out_dtype)?
    };
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
            backend: g.summary().backend,
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

/// The in-memory twin of [`spread_stack`] (`gpuscope bench --adapters`):
/// each context streams its sub-stack (its range and halo, borrowed from
/// `data`) through `run` as the one-GPU path streams the whole stack, and
/// its range's output slices are written straight to their place in `out`
/// (no result array per context, no second pass over the output).
pub fn spread_in_memory<W: bytemuck::Pod + Send + Sync>(
    gpus: &[&Gpu],
    data: &[W],
    shape: &[usize],
    halo: usize,
    out: &mut [W],
    run: &RunStream<'_, W>,
) -> CliResult {
    let &[nz, h, w] = shape else {
        return Err(Failure(format!("a stack of shape {shape:?} is not 3-D")));
    };
    let plane = h * w;
    if data.len() != nz * plane || out.len() != data.len() {
        return Err(Failure(format!(
            "{} values in, {} out, for a stack of shape {shape:?}",
            data.len(),
            out.len()
        )));
    }
    let ranges = split_ranges(nz, gpus.len());
    let mut parts = Vec::with_capacity(ranges.len());
    let mut rest: &mut [W] = out;
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
                    let sub = [hi - lo, h, w];
                    let mut source = MemorySource::new(&data[lo * plane..hi * plane], sub);
                    let mut sink = KeepSink {
                        part,
                        plane,
                        next: lo,
                        keep: range.clone(),
                        written: 0,
                    };
                    run(gpu, &sub, &mut source, &mut sink, &mut |_, _| {})?;
                    if sink.written != sink.part.len() {
                        return Err(Failure(
                            "a GPU part returned fewer values than its slices".into(),
                        ));
                    }
                    Ok(())
                })
            })
            .collect();
        join_workers(workers)
    });
    results.into_iter().collect()
}

/// Output slices of a sub-stack in memory: those in `keep` go to their
/// place in `part` (the range's share of the output), the halo's are
/// dropped.
struct KeepSink<'a, W> {
    part: &'a mut [W],
    plane: usize,
    /// The stack index of the next slice received.
    next: usize,
    keep: Range<usize>,
    written: usize,
}

impl<W: bytemuck::Pod> SliceSink<W> for KeepSink<'_, W> {
    fn write(&mut self, slices: &[W]) -> gpuscope_core::Result<()> {
        let n = slices.len() / self.plane.max(1);
        let (z0, z1) = (self.next, self.next + n);
        self.next = z1;
        let (a, b) = (z0.max(self.keep.start), z1.min(self.keep.end));
        if a >= b {
            return Ok(());
        }
        let (k, p) = (self.keep.start, self.plane);
        let dst = self
            .part
            .get_mut((a - k) * p..(b - k) * p)
            .ok_or_else(|| gpuscope_core::Error::InvalidInput("slices past the range".into()))?;
        parallel_copy(
            bytemuck::cast_slice_mut(dst),
            bytemuck::cast_slice(&slices[(a - z0) * p..(b - z0) * p]),
        );
        self.written += (b - a) * p;
        Ok(())
    }
}

/// Contexts on the default adapter (lavapipe in CI) shared by the unit
/// tests of the in-memory spread paths: a plain one, one whose bindings are
/// capped at 64 KiB (many chunks, so ranges are written in several parts)
/// and one more.
#[cfg(test)]
pub(crate) fn test_gpus() -> [&'static Gpu; 3] {
    use std::sync::OnceLock;
    static GPUS: OnceLock<Vec<Gpu>> = OnceLock::new();
    let gpus = GPUS.get_or_init(|| {
        [None, Some(64 << 10), None]
            .into_iter()
            .map(|cap| {
                let options = gpuscope_core::GpuOptions {
                    max_binding_size: cap,
                    ..Default::default()
                };
                pollster::block_on(Gpu::new(options))
                    .unwrap_or_else(|e| panic!("the tests need a Vulkan driver (lavapipe): {e}"))
            })
            .collect()
    });
    [&gpus[0], &gpus[1], &gpus[2]]
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuscope_core::Samples;
    use gpuscope_core::filters::Boundary;
    use gpuscope_core::filters::median::{self, Footprint, OutlierRemoval, Outliers};
    use gpuscope_core::keys::SampleVec;

    fn noise(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / 1000.0
            })
            .collect()
    }

    /// `gpuscope bench --adapters`' stack path: the ranges streamed into one
    /// output are bit for bit the plain call on the whole stack, over two
    /// and three contexts, with and without a z-halo.
    #[test]
    fn in_memory_split_equals_the_plain_call() {
        let [g0, g1, g2] = test_gpus();
        let shape = [9usize, 64, 60];
        let mut stack = noise(shape.iter().product(), 3);
        stack[5] = f32::NAN;
        let fp = Footprint::size(3, &[3, 3, 3]).unwrap();
        let b = Boundary::default();
        let removal = OutlierRemoval::new(300.0, 3, Outliers::Bright).unwrap();
        let tag = Samples::F32(&[]);
        let median_run: &RunStream<'_, u32> = &|g, sh, src, snk, p| {
            pollster::block_on(median::median_filter_stream(
                g, tag, sh, &fp, b, src, snk, p,
            ))
        };
        let outliers_run: &RunStream<'_, u32> = &|g, sh, src, snk, p| {
            pollster::block_on(median::remove_outliers_stream(
                g, tag, sh, &removal, src, snk, p,
            ))
        };
        let plain_median = pollster::block_on(median::median_filter(
            g0,
            Samples::F32(&stack),
            &shape,
            &fp,
            b,
        ))
        .unwrap();
        let plain_outliers = pollster::block_on(median::remove_outliers(
            g0,
            Samples::F32(&stack),
            &shape,
            &removal,
        ))
        .unwrap();
        let bits = |v: &SampleVec| -> Vec<u32> {
            match v {
                SampleVec::F32(v) => v.iter().map(|x| x.to_bits()).collect(),
                _ => panic!("float32 in, another dtype out"),
            }
        };
        let input: &[u32] = bytemuck::cast_slice(&stack);
        for (name, run, halo, plain) in [
            ("median 3x3x3", median_run, 1, bits(&plain_median)),
            ("outliers", outliers_run, 0, bits(&plain_outliers)),
        ] {
            assert_ne!(plain, input, "{name}: the filter changed nothing");
            for gpus in [vec![g1, g2], vec![g2, g1, g0]] {
                let mut out = vec![0u32; input.len()];
                spread_in_memory(&gpus, input, &shape, halo, &mut out, run)
                    .unwrap_or_else(|Failure(m)| panic!("{name}: {m}"));
                assert!(out == plain, "{name} on {} contexts", gpus.len());
            }
        }
        // An output of the wrong size is refused, not half filled.
        let mut short = vec![0u32; input.len() - 1];
        let e = spread_in_memory(&[g0, g1], input, &shape, 1, &mut short, median_run);
        assert!(e.is_err());
    }
}

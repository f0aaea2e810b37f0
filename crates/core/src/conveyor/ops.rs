//! The operations the conveyor runs: each picks the words its kernels read
//! and hands the stream the two queues.

use std::time::Instant;

use bytemuck::Pod;

use super::words::{Codec, MEDIAN32, MEDIAN64, VALUES32};
use super::{BlockSink, BlockSource, Options, ReadAhead, Report, WriteBehind};
use crate::engine::Gpu;
use crate::error::{Error, Result};
use crate::filters::median::{self, Footprint, OutlierRemoval};
use crate::filters::{self, Boundary, Filter, Output};
use crate::keys::Samples;
use crate::stream::{Progress, SliceSink, SliceSource};

/// `scipy.ndimage.median_filter` of a stack from `source` into `sink` (of
/// the source's dtype), exact for every dtype.
pub fn median(
    gpu: &Gpu,
    footprint: &Footprint,
    boundary: Boundary,
    source: Box<dyn BlockSource>,
    sink: Box<dyn BlockSink>,
    options: Options,
    progress: Progress<'_>,
) -> Result<Report> {
    let dtype = source.dtype();
    let shape = source.shape();
    if dtype.wide() {
        return convey(source, sink, &MEDIAN64, dtype, options, |src, snk| {
            pollster::block_on(median::median_filter_stream(
                gpu, dtype, &shape, footprint, boundary, src, snk, progress,
            ))
        });
    }
    convey(source, sink, &MEDIAN32, dtype, options, |src, snk| {
        pollster::block_on(median::median_filter_stream(
            gpu, dtype, &shape, footprint, boundary, src, snk, progress,
        ))
    })
}

/// Outlier removal (Mantid Imaging's) of a stack from `source` into `sink`;
/// 64-bit dtypes finish the test on the host and are refused here.
pub fn outliers(
    gpu: &Gpu,
    removal: &OutlierRemoval,
    source: Box<dyn BlockSource>,
    sink: Box<dyn BlockSink>,
    options: Options,
    progress: Progress<'_>,
) -> Result<Report> {
    let dtype = source.dtype();
    let shape = source.shape();
    if dtype.wide() {
        return Err(Error::InvalidInput(
            "64-bit outlier removal finishes on the host and is not streamed".into(),
        ));
    }
    convey(source, sink, &MEDIAN32, dtype, options, |src, snk| {
        pollster::block_on(median::remove_outliers_stream(
            gpu, dtype, &shape, removal, src, snk, progress,
        ))
    })
}

/// A linear filter (Gaussian, any kernel) of a stack from `source` into
/// `sink` of dtype `out` (its words are float32).
#[allow(clippy::too_many_arguments)]
pub fn filter(
    gpu: &Gpu,
    filter: &Filter,
    boundary: Boundary,
    output: Output,
    out: Samples<'static>,
    source: Box<dyn BlockSource>,
    sink: Box<dyn BlockSink>,
    options: Options,
    progress: Progress<'_>,
) -> Result<Report> {
    let shape = source.shape();
    convey(source, sink, &VALUES32, out, options, |src, snk| {
        pollster::block_on(filters::apply_stream(
            gpu, filter, &shape, boundary, output, src, snk, progress,
        ))
    })
}

/// Runs `run` between the two queues; on an error the sink is dropped
/// unfinished (no output appears).
fn convey<W: Pod + Send>(
    source: Box<dyn BlockSource>,
    sink: Box<dyn BlockSink>,
    codec: &'static Codec<W>,
    out: Samples<'static>,
    options: Options,
    run: impl FnOnce(&mut dyn SliceSource<W>, &mut dyn SliceSink<W>) -> Result<()>,
) -> Result<Report> {
    let [_, ny, nx] = source.shape();
    let plane = (ny * nx).max(1);
    let word = std::mem::size_of::<W>() as u64;
    // A slice larger than a block is read and written in rows where the
    // source and the sink can (a few chunks of memory, not several slices).
    let large = plane as u64 * word > options.block_bytes;
    let rows = (large && sink.takes_rows()).then_some(nx);
    let mut reader = if large && source.reads_rows() {
        ReadAhead::rows(source, codec)
    } else {
        let block_slices = (options.block_bytes / (plane as u64 * word)).max(1) as usize;
        ReadAhead::spawn(source, codec, block_slices, options.depth)
    };
    let mut writer = WriteBehind::spawn(sink, codec, out, plane, rows, options.depth);
    let t = Instant::now();
    let result = run(&mut reader, &mut writer);
    let stream = t.elapsed();
    let (read, load, wait_read, read_bytes) = reader.finish();
    result?;
    let (store, wait_write, write, finish, write_bytes) = writer.finish(options.sync)?;
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    Ok(Report {
        read_ms: ms(read),
        load_ms: ms(load),
        store_ms: ms(store),
        write_ms: ms(write),
        finish_ms: ms(finish),
        wait_read_ms: ms(wait_read),
        wait_write_ms: ms(wait_write),
        stream_ms: ms(stream),
        read_bytes,
        write_bytes,
    })
}

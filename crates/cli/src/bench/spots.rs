//! The spot-finding workloads (benchmarks.md), on the Eiger 16M frame of the
//! shared data: spots-eiger, one frame (int32 as the CBF holds it),
//! dispersion_extended, labelled and measured; spots-series, that frame
//! repeated as uint16 (gaps set to 0 and masked by a mask array, so the
//! answer is the same), host memory in to spot table out; spots-series-disk,
//! the same frames as a 3-D .npy on disk streamed in batches (disk in to
//! spot table out). With several contexts (--adapters) the series workloads
//! are split over them; one context runs the plain path.

use std::time::Instant;

use gpuscope_core::spots::{self, Counts, SeriesResult, SpotOptions};
use gpuscope_io::npy::NpyWriter;
use gpuscope_io::{Array, ArrayData, DType};
use serde_json::Value;

use super::Bench;
use crate::common::{CliResult, Failure, peak_rss_bytes};
use crate::frames::FrameSource;
use crate::spots::{find_in_memory_spread, find_spread, plan_batch, stream_spots};

/// The Eiger frame, read once for the three workloads.
struct Frame {
    counts: Vec<i32>,
    h: usize,
    w: usize,
    /// As uint16, gaps (negative counts) set to 0.
    as_u16: Vec<u16>,
    /// The mask of the uint16 form: false at the gaps.
    valid: Vec<bool>,
}

pub fn spots(b: &Bench) -> CliResult<Vec<Value>> {
    if !(b.want("spots-eiger") || b.want("spots-series") || b.want("spots-series-disk")) {
        return Ok(vec![]);
    }
    let path = b.args.data.join("diffraction/dlsnxs2cbf_therm_0001.cbf.gz");
    let a = crate::common::read_image(&path)?.array;
    let (h, w) = (a.shape[0], a.shape[1]);
    let ArrayData::I32(counts) = a.data else {
        return Err(Failure(format!(
            "{}: expected int32 counts",
            path.display()
        )));
    };
    let as_u16: Vec<u16> = counts.iter().map(|&v| v.clamp(0, 65535) as u16).collect();
    let valid: Vec<bool> = counts.iter().map(|&v| v >= 0).collect();
    let frame = Frame {
        counts,
        h,
        w,
        as_u16,
        valid,
    };
    let o = SpotOptions::default();
    let mut rows = Vec::new();
    if b.want("spots-eiger") {
        rows.push(spots_eiger(b, &frame, &o)?);
    }
    if b.want("spots-series") {
        rows.push(spots_series(b, &frame, &o)?);
    }
    if b.want("spots-series-disk") {
        rows.push(spots_series_disk(b, &frame, &o)?);
    }
    Ok(rows)
}

/// spots-eiger: one frame, host array in, spot table out.
fn spots_eiger(b: &Bench, f: &Frame, o: &SpotOptions) -> CliResult<Value> {
    let mut found = 0;
    let row = b.time(
        "spots-eiger",
        4 * f.h * f.w,
        &mut || {
            let r = pollster::block_on(spots::find_spots_with(
                b.gpu(),
                Counts::I32(&f.counts),
                [1, f.h, f.w],
                None,
                o,
                false,
                false,
            ))?;
            found = r.spots.len();
            Ok(())
        },
        None,
    )?;
    eprintln!("spots-eiger: {found} spots");
    Ok(row)
}

/// spots-series-<frames>: `--frames` copies of the uint16 frame in host
/// memory, to one spot table.
fn spots_series(b: &Bench, f: &Frame, o: &SpotOptions) -> CliResult<Value> {
    let (nz, h, w) = (b.args.frames.max(1), f.h, f.w);
    let mut series = Vec::with_capacity(nz * h * w);
    for _ in 0..nz {
        series.extend_from_slice(&f.as_u16);
    }
    b.time(
        &format!("spots-series-{nz}"),
        2 * nz * h * w,
        &mut || {
            let t = Instant::now();
            let r = if b.gpus.len() >= 2 {
                find_in_memory_spread(&b.gpus, &series, [nz, h, w], Some(&f.valid), o)?
            } else {
                let r = pollster::block_on(spots::find_spots_with(
                    b.gpu(),
                    Counts::U16(&series),
                    [nz, h, w],
                    Some(&f.valid),
                    o,
                    false,
                    false,
                ))?;
                SeriesResult {
                    n_frames: nz,
                    n_strong: r.n_strong,
                    n_regions: r.n_regions,
                    spots: r.spots,
                }
            };
            eprintln!(
                "spots-series: {nz} frames, {} spots, {:.1} frames/s",
                r.spots.len(),
                nz as f64 / t.elapsed().as_secs_f64()
            );
            Ok(())
        },
        None,
    )
}

/// spots-series-disk-<frames>: the same series as a 3-D .npy on disk,
/// streamed from it in batches (the file is written once, outside the
/// timing; it may sit in the page cache).
fn spots_series_disk(b: &Bench, f: &Frame, o: &SpotOptions) -> CliResult<Value> {
    let (nz, h, w) = (b.args.frames.max(1), f.h, f.w);
    let gpus = &b.gpus;
    // In a private folder of a name nobody can guess (see ScratchDir).
    let scratch = gpuscope_io::ScratchDir::create(&std::env::temp_dir(), "spots-series")?;
    let path = scratch.path().join("series.npy");
    let timed = (|| -> CliResult<Value> {
        let mut wr = NpyWriter::create(&path, vec![nz, h, w], DType::U16)?;
        let slab = Array::new(vec![1, h, w], ArrayData::U16(f.as_u16.clone()))?;
        for _ in 0..nz {
            wr.write_slab(&slab)?;
        }
        wr.finish()?;
        let batch = plan_batch(b.gpu().memory_budget() / gpus.len() as u64, 2 * h * w);
        b.time(
            &format!("spots-series-disk-{nz}"),
            2 * nz * h * w,
            &mut || {
                let t = Instant::now();
                let source = FrameSource::open(std::slice::from_ref(&path))?;
                let r = if gpus.len() >= 2 {
                    let ranges = crate::common::split_ranges(nz, gpus.len());
                    let ((r, _), _) =
                        find_spread(gpus, &source, &ranges, o, Some(f.valid.clone()), batch)?;
                    r
                } else {
                    stream_spots(
                        Some(b.gpu()),
                        source,
                        o.clone(),
                        Some(f.valid.clone()),
                        false,
                        false,
                        batch,
                        &mut |_| Ok(()),
                    )?
                };
                eprintln!(
                    "spots-series-disk: {nz} frames in batches of {batch}, {} spots, {:.1} frames/s, peak RSS {:.0} MB",
                    r.spots.len(),
                    nz as f64 / t.elapsed().as_secs_f64(),
                    peak_rss_bytes().unwrap_or(0) as f64 / 1e6
                );
                Ok(())
            },
            None,
        )
    })();
    drop(scratch);
    timed
}

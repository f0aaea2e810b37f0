//! `gpuscope spots`: DIALS' spot finding on one frame or a series (many
//! files, a multi-page TIFF, an npy stack).

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use gpuscope_core::spots::{
    self, Algorithm, Counts, FrameDone, Gain, SeriesResult, Spot, SpotOptions, SpotSeries,
};
use gpuscope_io::{Array, ArrayData, DType};
use serde_json::{Value, json};

use crate::Cli;
use crate::common::{CliResult, Engine, Failure, open_contexts, peak_rss_bytes};
use crate::frames::FrameSource;
use crate::spread::join_workers;
use crate::stream::{ProgressBar, StackWriter};

#[derive(Args)]
pub struct SpotsCmd {
    /// Frames: CBF (.cbf, .cbf.gz), TIFF (multi-page = a series), npy (2-D or a 3-D stack),
    /// HDF5/NeXus (an Eiger master: its whole series; FILE.h5::/path: one dataset), ...
    #[arg(required = true, value_name = "IN")]
    pub inputs: Vec<PathBuf>,
    /// dispersion_extended (DIALS' default) or dispersion.
    #[arg(long, default_value_t = SpotOptions::default().algorithm.to_string())]
    pub algorithm: String,
    /// Half-widths of the local window, rows,columns (3,3 = 7 x 7).
    #[arg(long, default_value_t = kernel_text(SpotOptions::default().kernel_size), value_name = "KY,KX")]
    pub kernel_size: String,
    #[arg(long, default_value_t = SpotOptions::default().sigma_background, allow_negative_numbers = true)]
    pub sigma_background: f64,
    #[arg(long, default_value_t = SpotOptions::default().sigma_strong, allow_negative_numbers = true)]
    pub sigma_strong: f64,
    /// Fewest valid pixels in the window (0: the whole window).
    #[arg(long, default_value_t = SpotOptions::default().min_local)]
    pub min_local: usize,
    #[arg(long, default_value_t = SpotOptions::default().global_threshold, allow_negative_numbers = true)]
    pub global_threshold: f64,
    /// The detector gain: a number, or a per-pixel map (.npy of a frame's shape).
    #[arg(long, value_name = "G|GAIN.npy", allow_hyphen_values = true)]
    pub gain: Option<String>,
    /// Pixels to use (DIALS' convention): non-zero = valid, 0 = masked.
    /// Negative counts are masked anyway (detector gaps and bad pixels).
    #[arg(long, value_name = "M.npy")]
    pub mask: Option<PathBuf>,
    /// Ignore an HDF5/NeXus input's pixel mask
    /// (detectorSpecific/pixel_mask, non-zero = bad), applied by default.
    #[arg(long)]
    pub no_pixel_mask: bool,
    /// Ignore an HDF5/NeXus input's count cutoff (saturation_value, else
    /// countrate_correction_count_cutoff), applied by default.
    #[arg(long)]
    pub no_count_cutoff: bool,
    /// Spots with fewer pixels are dropped (DIALS: 3 for pixel-array detectors).
    #[arg(long, default_value_t = SpotOptions::default().min_spot_size)]
    pub min_spot_size: usize,
    #[arg(long, default_value_t = SpotOptions::default().max_spot_size)]
    pub max_spot_size: usize,
    /// Join strong pixels across frames (6-connected) instead of per frame.
    #[arg(long = "3d")]
    pub three_d: bool,
    /// Write the strong-pixel mask (uint8, the input's shape).
    #[arg(long, value_name = "OUT.npy")]
    pub signal: Option<PathBuf>,
    /// Write the spot table: .csv or .json by extension.
    #[arg(long, value_name = "spots.csv")]
    pub out: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
    /// Frames per batch read from disk (test knob; planned from the memory
    /// budget otherwise).
    #[arg(long, hide = true)]
    pub batch_frames: Option<usize>,
    /// Where bitshuffle-LZ4 HDF5 frames of uint32 counts (an Eiger series)
    /// are decoded: host (the decoded frames cross the bus) or gpu (the
    /// compressed chunks cross it and the GPU decodes them). Other inputs
    /// are read as with host.
    #[arg(long, default_value = "host", value_parser = ["host", "gpu"])]
    pub decode: String,
}

/// Half-widths as the command line writes them: `3,3`.
fn kernel_text([ky, kx]: [usize; 2]) -> String {
    format!("{ky},{kx}")
}

pub fn parse_kernel(s: &str) -> CliResult<[usize; 2]> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    let parse = |t: &str| t.parse::<usize>().ok();
    match parts[..] {
        [a] => parse(a).map(|v| [v, v]),
        [a, b] => parse(a).zip(parse(b)).map(|(a, b)| [a, b]),
        _ => None,
    }
    .ok_or_else(|| {
        Failure(format!(
            "invalid kernel-size: '{s}' (give half-widths such as 3,3)"
        ))
    })
}

fn read_mask(path: &Path, n: usize) -> CliResult<Vec<bool>> {
    let a = crate::common::read_image(path)?.array;
    if a.len() != n {
        return Err(Failure(format!(
            "{}: the mask has {} values, a frame has {n}",
            path.display(),
            a.len()
        )));
    }
    Ok(a.to_f64_vec().iter().map(|&v| v != 0.0).collect())
}

fn parse_gain(s: &str, n: usize) -> CliResult<Gain> {
    if let Ok(g) = s.trim().parse::<f64>() {
        return Ok(Gain::Scalar(g));
    }
    let a = crate::common::read_image(Path::new(s))?.array;
    if a.len() != n {
        return Err(Failure(format!(
            "{s}: the gain map has {} values, a frame has {n}",
            a.len()
        )));
    }
    Ok(Gain::Map(a.to_f64_vec()))
}

pub fn options(args: &SpotsCmd, n: usize) -> CliResult<SpotOptions> {
    let o = SpotOptions {
        algorithm: Algorithm::parse(&args.algorithm)?,
        kernel_size: parse_kernel(&args.kernel_size)?,
        sigma_background: args.sigma_background,
        sigma_strong: args.sigma_strong,
        min_local: args.min_local,
        global_threshold: args.global_threshold,
        gain: match &args.gain {
            Some(g) => parse_gain(g, n)?,
            None => Gain::None,
        },
        min_spot_size: args.min_spot_size,
        max_spot_size: args.max_spot_size,
    };
    o.validate()?;
    Ok(o)
}

/// Frames per batch: host memory holds at most five batches at once (the
/// files of the next one being decoded, the one being filled, one queued,
/// the one on the GPU and the one before it while its last frames are in
/// flight), so a batch takes a tenth of the memory budget and the frames
/// held stay within half of it.
pub fn plan_batch(budget: u64, frame_bytes: usize) -> usize {
    ((budget / 10) / frame_bytes.max(1) as u64).clamp(1, 4096) as usize
}

/// Spot finding over the frames of `source`, read on a separate thread
/// batch by batch while the GPU (or the CPU reference) works; `on_frame`
/// gets every finished frame in order.
#[allow(clippy::too_many_arguments)]
pub fn stream_spots(
    gpu: Option<&gpuscope_core::Gpu>,
    source: FrameSource,
    options: SpotOptions,
    mask: Option<Vec<bool>>,
    three_d: bool,
    want_mask: bool,
    batch_frames: usize,
    on_frame: &mut dyn FnMut(FrameDone) -> CliResult,
) -> CliResult<SeriesResult> {
    let shape = source.shape();
    let first = source.first_frame();
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        scope.spawn(move || source.send_batches(batch_frames, tx));
        // The receiver ends with this call, so an error here stops the reader.
        pollster::block_on(async move {
            let mut series = SpotSeries::new(gpu, shape, mask, options, three_d, want_mask)
                .await?
                .starting_at(first)?;
            for batch in rx {
                for done in series.push(batch?).await? {
                    on_frame(done)?;
                }
            }
            let (last, result) = series.finish().await?;
            for done in last {
                on_frame(done)?;
            }
            Ok(result)
        })
    })
}

/// Where the strong-pixel masks go, frame by frame.
enum SignalOut {
    /// One 2-D frame: written whole at the end (any image format).
    Frame(PathBuf, Vec<u8>),
    /// A series: .npy or TIFF written frame by frame.
    Stack(StackWriter),
}

pub fn spots_cmd(cli: &Cli, args: &SpotsCmd) -> CliResult {
    let out_json = match &args.out {
        None => None,
        Some(p) => match p.extension().and_then(|e| e.to_str()) {
            Some("csv") => Some(false),
            Some("json") => Some(true),
            _ => {
                return Err(Failure(format!(
                    "{}: the spot table must end in .csv or .json",
                    p.display()
                )));
            }
        },
    };
    if args.batch_frames == Some(0) {
        return Err(Failure("--batch-frames must be at least 1".into()));
    }
    let source = FrameSource::open(&args.inputs)?;
    let nz = source.total();
    let [h, w] = source.shape();
    let n = h * w;
    let o = options(args, n)?;
    let mask = args.mask.as_deref().map(|p| read_mask(p, n)).transpose()?;
    let (mask, cutoff) = crate::nexus::spot_masks(
        &args.inputs,
        n,
        mask,
        !args.no_pixel_mask,
        !args.no_count_cutoff,
    )?;
    let (source, compressed) = source
        .with_cutoff(cutoff)
        .with_compressed_frames(args.decode == "gpu")?;
    let mut signal = match &args.signal {
        None => None,
        Some(path) if nz == 1 && !source.any_stack() => {
            Some(SignalOut::Frame(path.clone(), Vec::new()))
        }
        Some(path) => Some(SignalOut::Stack(
            StackWriter::create(path, &[nz, h, w], DType::U8)?.ok_or_else(|| {
                Failure(format!(
                    "{}: the mask of a series is written frame by frame to .npy or .tif; give one of those",
                    path.display()
                ))
            })?,
        )),
    };
    let mut contexts = open_contexts(cli)?;
    // Frames are independent in 2-D: one contiguous frame range per GPU.
    // `--3d` joins spots across frames and `--signal` writes the masks in
    // frame order: those run on the first adapter.
    if contexts.len() >= 2 && !args.three_d && signal.is_none() && nz >= 2 {
        contexts.truncate(nz);
        let gpus: Vec<&gpuscope_core::Gpu> = contexts.iter().collect();
        return spots_spread(&gpus, args, source, o, mask, out_json);
    }
    let spread = cli.adapters.is_some();
    let engine = Engine::first_of(cli, contexts)?;
    let gpu = match &engine {
        Engine::Gpu(g) => Some(g.as_ref()),
        Engine::Cpu => None,
    };
    let budget = gpu.map_or(cli.memory_budget.unwrap_or(1 << 30), |g| g.memory_budget());
    let batch_frames = args
        .batch_frames
        .unwrap_or_else(|| plan_batch(budget, source.frame_bytes()));
    let mut progress = ProgressBar::counting(source.frame_bytes(), "frames");
    let start = Instant::now();
    let found = stream_spots(
        gpu,
        source,
        o,
        mask,
        args.three_d,
        signal.is_some(),
        batch_frames,
        &mut |done| {
            progress.update(done.z + 1, nz);
            let strong = done.strong.unwrap_or_default();
            let bytes: Vec<u8> = strong.iter().map(|&s| u8::from(s)).collect();
            match &mut signal {
                None => {}
                Some(SignalOut::Frame(_, all)) => *all = bytes,
                Some(SignalOut::Stack(wr)) => {
                    wr.write(&Array::new(vec![1, h, w], ArrayData::U8(bytes))?)?
                }
            }
            Ok(())
        },
    )?;
    let seconds = start.elapsed().as_secs_f64();
    eprintln!(
        "spots: {nz} frame(s) of {h} x {w} in {seconds:.3} s ({:.1} frames/s) on {}",
        nz as f64 / seconds.max(1e-9),
        engine.name()
    );
    match signal {
        None => {}
        Some(SignalOut::Frame(path, bytes)) => {
            gpuscope_io::write(&path, &Array::new(vec![h, w], ArrayData::U8(bytes))?)?
        }
        Some(SignalOut::Stack(wr)) => wr.finish()?,
    }
    write_table(args, out_json, &found)?;
    if args.json {
        let mut summary = json!({
            "n_strong_pixels": found.n_strong,
            "n_spots": found.spots.len(),
            "n_frames": nz,
            "seconds": seconds,
            "frames_per_second": nz as f64 / seconds.max(1e-9),
            "device": engine.name(), "backend": engine.backend(),
            "batch_frames": batch_frames,
            "frames_decoded_on_gpu": compressed && gpu.is_some(),
        });
        if let Some(ms) = engine.kernel_ms() {
            summary["kernel_ms"] = json!(ms);
        }
        if let Some(b) = peak_rss_bytes() {
            summary["peak_rss_bytes"] = json!(b);
        }
        if spread {
            summary["adapters"] = json!([engine.name()]);
            summary["n_adapters"] = json!(1);
        }
        println!("{summary}");
    }
    Ok(())
}

/// The spot table (`--out`), .json or .csv.
fn write_table(args: &SpotsCmd, out_json: Option<bool>, found: &SeriesResult) -> CliResult {
    if let (Some(path), Some(as_json)) = (&args.out, out_json) {
        let text = if as_json {
            json!({
                "n_strong_pixels": found.n_strong,
                "n_spots": found.spots.len(),
                "spots": found.spots.iter().map(spot_json).collect::<Vec<_>>(),
            })
            .to_string()
        } else {
            spots_csv(&found.spots)
        };
        gpuscope_io::write_bytes_atomic(path, text.as_bytes())?;
    }
    Ok(())
}

/// Spot finding on several GPUs: `spots_cmd` with one contiguous frame
/// range per context, each streamed by its own threads; the tables are
/// joined in frame order and numbered as one run numbers them.
fn spots_spread(
    gpus: &[&gpuscope_core::Gpu],
    args: &SpotsCmd,
    source: FrameSource,
    o: SpotOptions,
    mask: Option<Vec<bool>>,
    out_json: Option<bool>,
) -> CliResult {
    let nz = source.total();
    let [h, w] = source.shape();
    // Each context holds its own batches: the budget is shared.
    let budget = gpus[0].memory_budget() / gpus.len() as u64;
    let batch_frames = args
        .batch_frames
        .unwrap_or_else(|| plan_batch(budget, source.frame_bytes()));
    let ranges = crate::common::split_ranges(nz, gpus.len());
    let (found, shares) = find_spread(gpus, &source, &ranges, &o, mask, batch_frames)?;
    let seconds = found.1;
    let found = found.0;
    let names: Vec<String> = gpus.iter().map(|g| g.summary().name).collect();
    eprintln!(
        "spots: {nz} frame(s) of {h} x {w} in {seconds:.3} s ({:.1} frames/s) on {} adapters",
        nz as f64 / seconds.max(1e-9),
        gpus.len()
    );
    write_table(args, out_json, &found)?;
    if args.json {
        let kernel: Option<f64> = shares.iter().map(|s| s.kernel_ms).sum();
        let mut summary = json!({
            "n_strong_pixels": found.n_strong,
            "n_spots": found.spots.len(),
            "n_frames": nz,
            "seconds": seconds,
            "frames_per_second": nz as f64 / seconds.max(1e-9),
            "device": names[0],
            "backend": gpus[0].summary().backend,
            "batch_frames": batch_frames,
            "adapters": names,
            "n_adapters": gpus.len(),
            "frames": shares.iter().map(crate::spread::Share::json).collect::<Vec<_>>(),
            "kernel_ms": kernel,
        });
        if let Some(b) = peak_rss_bytes() {
            summary["peak_rss_bytes"] = json!(b);
        }
        println!("{summary}");
    }
    Ok(())
}

/// The spots of `source`'s frames, `ranges[k]` found on `gpus[k]`, joined
/// in frame order and numbered from 1 (as one run: ranges are contiguous
/// and each numbers its spots in order of their first pixel); also the
/// seconds it took, and each context's share.
pub fn find_spread(
    gpus: &[&gpuscope_core::Gpu],
    source: &FrameSource,
    ranges: &[std::ops::Range<usize>],
    o: &SpotOptions,
    mask: Option<Vec<bool>>,
    batch_frames: usize,
) -> CliResult<((SeriesResult, f64), Vec<crate::spread::Share>)> {
    let nz = source.total();
    let progress = std::sync::Mutex::new((
        ProgressBar::counting(source.frame_bytes(), "frames"),
        0usize,
    ));
    let start = Instant::now();
    let parts: Vec<CliResult<SeriesResult>> = std::thread::scope(|s| {
        let workers: Vec<_> = gpus
            .iter()
            .zip(ranges)
            .map(|(gpu, range)| {
                let gpu: &gpuscope_core::Gpu = gpu;
                let part = source.window(range.clone());
                let (o, mask, progress) = (o.clone(), mask.clone(), &progress);
                s.spawn(move || {
                    stream_spots(
                        Some(gpu),
                        part,
                        o,
                        mask,
                        false,
                        false,
                        batch_frames,
                        &mut |_| {
                            if let Ok(mut p) = progress.lock() {
                                p.1 += 1;
                                let done = p.1;
                                p.0.update(done, nz);
                            }
                            Ok(())
                        },
                    )
                })
            })
            .collect();
        join_workers(workers)
    });
    let seconds = start.elapsed().as_secs_f64();
    let all = merge_parts(parts)?;
    let shares = gpus
        .iter()
        .zip(ranges)
        .map(|(g, z)| crate::spread::Share {
            adapter: g.summary().name,
            backend: g.summary().backend,
            z: z.clone(),
            kernel_ms: g.kernel_ns_total().map(|ns| ns as f64 / 1e6),
        })
        .collect();
    Ok(((all, seconds), shares))
}

pub fn spots_csv(spots: &[Spot]) -> String {
    let mut out = String::from(
        "id,x0,x1,y0,y1,z0,z1,n_pixels,intensity,x,y,z,variance_x,variance_y,variance_z\n",
    );
    for s in spots {
        let mut row: Vec<String> = vec![s.id.to_string()];
        row.extend(s.bbox.iter().map(|v| v.to_string()));
        row.push(s.n_pixels.to_string());
        row.push(s.intensity.to_string());
        row.extend(s.centroid.iter().chain(&s.variance).map(|v| v.to_string()));
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

pub fn spot_json(s: &Spot) -> Value {
    json!({
        "id": s.id, "bbox": s.bbox, "n_pixels": s.n_pixels, "intensity": s.intensity,
        "xyzobs_px": s.centroid, "xyzobs_px_variance": s.variance,
    })
}

/// The results of contiguous frame ranges, in order, as one series: spots
/// numbered from 1 in that order.
fn merge_parts(parts: Vec<CliResult<SeriesResult>>) -> CliResult<SeriesResult> {
    let mut all = SeriesResult {
        spots: Vec::new(),
        n_strong: 0,
        n_regions: 0,
        n_frames: 0,
    };
    for part in parts {
        let part = part?;
        all.spots.extend(part.spots);
        all.n_strong += part.n_strong;
        all.n_regions += part.n_regions;
        all.n_frames += part.n_frames;
    }
    for (i, s) in all.spots.iter_mut().enumerate() {
        s.id = i + 1;
    }
    Ok(all)
}

/// 2-D spot finding over a series in host memory on several GPUs (`gpuscope
/// bench --adapters`): one contiguous frame range per context, each found
/// as the one-GPU path finds the whole series (`find_spots_with`, here
/// `find_spots_from` for the range's frame numbers) on its borrowed part of
/// `frames`, no copy; the tables are joined in frame order and numbered as
/// one run numbers them.
pub fn find_in_memory_spread(
    gpus: &[&gpuscope_core::Gpu],
    frames: &[u16],
    shape: [usize; 3],
    valid: Option<&[bool]>,
    o: &SpotOptions,
) -> CliResult<SeriesResult> {
    let [nz, h, w] = shape;
    let n = h * w;
    if frames.len() != nz * n {
        return Err(Failure(format!(
            "{} values for {nz} frames of {h} x {w}",
            frames.len()
        )));
    }
    let ranges = crate::common::split_ranges(nz, gpus.len());
    let parts: Vec<CliResult<SeriesResult>> = std::thread::scope(|s| {
        let workers: Vec<_> = gpus
            .iter()
            .zip(&ranges)
            .map(|(gpu, range)| {
                let gpu: &gpuscope_core::Gpu = gpu;
                s.spawn(move || -> CliResult<SeriesResult> {
                    let part = &frames[range.start * n..range.end * n];
                    let r = pollster::block_on(spots::find_spots_from(
                        gpu,
                        Counts::U16(part),
                        [range.len(), h, w],
                        range.start,
                        valid,
                        o,
                        false,
                    ))?;
                    Ok(SeriesResult {
                        n_frames: range.len(),
                        n_strong: r.n_strong,
                        n_regions: r.n_regions,
                        spots: r.spots,
                    })
                })
            })
            .collect();
        join_workers(workers)
    });
    merge_parts(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `gpuscope bench --adapters`' series path: the ranges' spot tables,
    /// joined, are bit for bit (ids, frame numbers, sums) those of the plain
    /// call on the whole series, over two and three contexts.
    #[test]
    fn in_memory_split_equals_the_plain_call() {
        let [g0, g1, g2] = crate::spread::test_gpus();
        let (nz, h, w) = (7usize, 48usize, 56usize);
        let n = h * w;
        let mut s = 0x2545_F491_4F6C_DD1Du64;
        let mut frames: Vec<u16> = (0..nz * n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 60) as u16
            })
            .collect();
        // Two bright blobs a frame, one moving, one of changing brightness.
        for z in 0..nz {
            for (r0, c0, v) in [(5 + 3 * z, 7 + 5 * z, 400u16), (30, 40, 90 + 20 * z as u16)] {
                for (dr, dc) in [(0, 0), (0, 1), (1, 0), (1, 1), (2, 1)] {
                    frames[z * n + (r0 + dr) * w + c0 + dc] += v;
                }
            }
        }
        let valid: Vec<bool> = (0..n).map(|i| i % 97 != 5).collect();
        let o = SpotOptions::default();
        let plain = pollster::block_on(spots::find_spots_with(
            g0,
            Counts::U16(&frames),
            [nz, h, w],
            Some(&valid),
            &o,
            false,
            false,
        ))
        .unwrap();
        assert!(plain.spots.len() >= 2 * nz, "{} spots", plain.spots.len());
        assert!(plain.spots.iter().any(|s| s.bbox[4] == nz as u64 - 1));
        for gpus in [vec![g1, g2], vec![g2, g1, g0]] {
            let r = find_in_memory_spread(&gpus, &frames, [nz, h, w], Some(&valid), &o)
                .unwrap_or_else(|Failure(m)| panic!("{m}"));
            assert!(r.spots == plain.spots, "{} contexts", gpus.len());
            assert_eq!(r.n_strong, plain.n_strong);
            assert_eq!(r.n_regions, plain.n_regions);
            assert_eq!(r.n_frames, nz);
        }
        // Frames that do not fill the shape are refused.
        let e = find_in_memory_spread(&[g0, g1], &frames[1..], [nz, h, w], None, &o);
        assert!(e.is_err());
    }
}

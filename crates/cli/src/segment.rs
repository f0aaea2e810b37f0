//! Segmentation and statistics commands: threshold, clip, label, sources.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use gpuscope_core::segment::label::{self, Labels};
use gpuscope_core::segment::measure::Region;
use gpuscope_core::segment::sources::{self, Level};
use gpuscope_core::segment::threshold;
use gpuscope_core::segment::{LabelParams, SourcesParams};
use gpuscope_core::stats::SigmaClipParams;
use gpuscope_core::stats::clip::{self, CenFunc, ClipOptions, ClipStats};
use gpuscope_io::{Array, ArrayData, Format};
use serde_json::{Value, json};

use crate::Cli;
use crate::clipping;
use crate::common::{CliResult, Engine, Failure, peak_rss_bytes, samples};
use crate::filters::stream_output;
use crate::stream::{
    Prefetch, ProgressBar, ScratchFile, Sink, Source, StackReader, StackWriter, WriteBehind,
    f32_words, from_i32_words,
};
use gpuscope_core::Gpu;
use gpuscope_io::DType;

/// astropy's sigma_clip parameters, shared by clip, threshold and sources.
#[derive(Args, Clone, Debug)]
pub struct ClipArgs {
    /// Clipping limit in standard deviations (both sides unless overridden).
    #[arg(long, default_value_t = SigmaClipParams::default().sigma)]
    pub sigma: f64,
    /// Lower limit in standard deviations (default: --sigma).
    #[arg(long, value_name = "S")]
    pub sigma_lower: Option<f64>,
    /// Upper limit in standard deviations (default: --sigma).
    #[arg(long, value_name = "S")]
    pub sigma_upper: Option<f64>,
    /// Rounds at most (astropy's default 5), or `none` until convergence.
    #[arg(long, value_name = "N|none", default_value_t = Maxiters(SigmaClipParams::default().maxiters),
          value_parser = parse_maxiters)]
    pub maxiters: Maxiters,
    /// Centre of the interval: median or mean.
    #[arg(long, default_value_t = SigmaClipParams::default().cenfunc, value_parser = parse_cenfunc)]
    pub cenfunc: CenFunc,
    /// The workshop's loop: strict comparisons until nothing changes
    /// (overrides --maxiters); with threshold/sources also `image > N*std`.
    #[arg(long)]
    pub workshop: bool,
}

#[derive(Clone, Copy, Debug)]
pub struct Maxiters(Option<u32>);

impl std::fmt::Display for Maxiters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(n) => write!(f, "{n}"),
            None => f.write_str("none"),
        }
    }
}

fn parse_maxiters(s: &str) -> Result<Maxiters, String> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(Maxiters(None));
    }
    s.parse::<u32>()
        .map(|n| Maxiters(Some(n)))
        .map_err(|_| format!("'{s}' is not a number of rounds (give e.g. 5, or none)"))
}

fn parse_cenfunc(s: &str) -> Result<CenFunc, String> {
    s.parse().map_err(|e: gpuscope_core::Error| e.to_string())
}

impl ClipArgs {
    pub fn params(&self) -> SigmaClipParams {
        SigmaClipParams {
            sigma: self.sigma,
            sigma_lower: self.sigma_lower,
            sigma_upper: self.sigma_upper,
            maxiters: self.maxiters.0,
            cenfunc: self.cenfunc,
            workshop: self.workshop,
        }
    }

    pub(crate) fn options(&self) -> ClipOptions {
        self.params().options()
    }
}

#[derive(Args)]
pub struct ClipCmd {
    pub input: PathBuf,
    #[command(flatten)]
    pub clip: ClipArgs,
    /// Values to exclude: an array of the input's shape, non-zero = masked.
    #[arg(long, value_name = "M.npy")]
    pub mask: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("level").required(true).args(["above", "nsigma"])))]
pub struct ThresholdCmd {
    pub input: PathBuf,
    pub output: PathBuf,
    /// Keep pixels strictly greater than V.
    #[arg(long, value_name = "V", allow_negative_numbers = true)]
    pub above: Option<f64>,
    /// Keep pixels above the clipped median + N clipped std (--workshop: above N std).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub nsigma: Option<f64>,
    #[command(flatten)]
    pub clip: ClipArgs,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct LabelCmd {
    pub input: PathBuf,
    pub output: PathBuf,
    /// 1 = faces only (scipy's default: 4 in 2-D, 6 in 3-D), 2 (8 or 18),
    /// 3 (26 in 3-D); scikit-image's meaning.
    #[arg(long, default_value_t = LabelParams::default().connectivity)]
    pub connectivity: usize,
    /// Pixels equal to this value are background (scikit-image's option;
    /// scipy: 0).
    #[arg(long, default_value_t = LabelParams::default().background, allow_negative_numbers = true)]
    pub background: f64,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct SourcesCmd {
    pub input: PathBuf,
    /// The catalogue: .csv or .json by extension.
    #[arg(long, value_name = "OUT.csv")]
    pub catalogue: PathBuf,
    /// Also write the label image (int32).
    #[arg(long, value_name = "L.npy")]
    pub labels: Option<PathBuf>,
    /// Threshold: clipped median + N clipped std (--workshop: N std).
    #[arg(long, default_value_t = SourcesParams::default().nsigma, allow_negative_numbers = true)]
    pub nsigma: f64,
    #[arg(long, default_value_t = SourcesParams::default().connectivity)]
    pub connectivity: usize,
    #[command(flatten)]
    pub clip: ClipArgs,
    #[arg(long)]
    pub json: bool,
}

/// The input as one channel. Colour PNG/JPEG (last axis of 3 or 4) becomes
/// luminance 0.2125 R + 0.7154 G + 0.0721 B (scikit-image's rgb2gray
/// weights, on the stored values, alpha dropped); grey + alpha keeps grey.
fn read_one_channel(path: &Path) -> CliResult<Array> {
    let image = crate::common::read_image(path)?;
    let a = image.array;
    let colour = matches!(image.format, Format::Png | Format::Jpeg)
        && a.ndim() == 3
        && matches!(a.shape[2], 2..=4);
    if !colour {
        return Ok(a);
    }
    let c = a.shape[2];
    let v = a.to_f32_vec();
    let grey: Vec<f32> = v
        .chunks_exact(c)
        .map(|p| {
            if c == 2 {
                p[0]
            } else {
                0.2125 * p[0] + 0.7154 * p[1] + 0.0721 * p[2]
            }
        })
        .collect();
    Ok(Array::from_f32(a.shape[..2].to_vec(), grey)?)
}

/// float32 data for the GPU chain (exact for float32 and integers up to 16 bits).
fn f32_data(a: &Array) -> CliResult<Vec<f32>> {
    match &a.data {
        ArrayData::F32(v) => Ok(v.clone()),
        ArrayData::U8(_) | ArrayData::I8(_) | ArrayData::U16(_) | ArrayData::I16(_) => {
            Ok(a.to_f32_vec())
        }
        ArrayData::Bool(_) => Err(Failure(
            "the input is a boolean mask; give the image itself".into(),
        )),
        _ => Ok(a.to_f32_vec()),
    }
}

/// The statistics, on the GPU for float32 within the budget, otherwise by
/// the streamed passes over the rows in memory (the CPU reference's answer
/// without its float64 copies).
fn clip_stats(
    engine: &Engine,
    a: &Array,
    mask: Option<Vec<bool>>,
    o: &ClipOptions,
) -> CliResult<ClipStats> {
    Ok(
        match (clipping::gpu_clips(engine, a.dtype(), a.len()), &a.data) {
            (Some(gpu), ArrayData::F32(v)) => {
                pollster::block_on(clip::sigma_clipped_stats(gpu, v, mask.as_deref(), o))?
            }
            _ => clipping::clip_array(a, mask.map(clipping::Mask::Whole), o)?,
        },
    )
}

pub(crate) fn stats_json(s: &ClipStats) -> Value {
    json!({
        "mean": s.mean, "median": s.median, "std": s.std,
        "n_kept": s.n_kept, "iterations": s.iterations,
    })
}

pub(crate) fn timing(engine: &Engine, start: Instant) -> (Value, f64) {
    let kernel = match engine {
        Engine::Gpu(g) => g.kernel_ns_total().map(|ns| ns as f64 / 1e6),
        Engine::Cpu => None,
    };
    (json!(kernel), start.elapsed().as_secs_f64() * 1e3)
}

pub(crate) fn reset(engine: &Engine) {
    if let Engine::Gpu(g) = engine {
        g.reset_kernel_time();
    }
}

pub fn clip_cmd(cli: &Cli, args: &ClipCmd) -> CliResult {
    let o = args.clip.options();
    // A stack on disk is read slab by slab unless the GPU clips it whole.
    if let Some(mut reader) = StackReader::open(&args.input)? {
        let shape = reader.shape();
        let mask = match &args.mask {
            Some(p) => Some(clipping::Mask::open(p, &shape)?),
            None => None,
        };
        let engine = Engine::open(cli)?;
        let n = shape.iter().product();
        if clipping::gpu_clips(&engine, reader.dtype(), n).is_none() {
            let start = Instant::now();
            let s = clipping::clip_stack(&mut reader, mask, &o)?;
            return print_clip(args, &s, "cpu".into(), "cpu".into(), json!(null), start);
        }
    }
    let a = read_one_channel(&args.input)?;
    let mask = match &args.mask {
        Some(p) => Some(clipping::whole_mask(p, &a.shape)?),
        None => None,
    };
    let engine = Engine::open(cli)?;
    reset(&engine);
    let start = Instant::now();
    let gpu = clipping::gpu_clips(&engine, a.dtype(), a.len()).is_some();
    let s = clip_stats(&engine, &a, mask, &o)?;
    let (kernel_ms, _) = timing(&engine, start);
    let device = if gpu { engine.name() } else { "cpu".into() };
    let backend = if gpu { engine.backend() } else { "cpu".into() };
    print_clip(args, &s, device, backend, kernel_ms, start)
}

fn print_clip(
    args: &ClipCmd,
    s: &ClipStats,
    device: String,
    backend: String,
    kernel_ms: Value,
    start: Instant,
) -> CliResult {
    if args.json {
        let mut out = stats_json(s);
        out["device"] = json!(device);
        out["backend"] = json!(backend);
        out["kernel_ms"] = kernel_ms;
        out["total_ms"] = json!(start.elapsed().as_secs_f64() * 1e3);
        out["peak_rss_bytes"] = json!(peak_rss_bytes());
        println!("{out}");
    } else {
        println!(
            "mean {}  median {}  std {}  kept {}  iterations {}",
            s.mean, s.median, s.std, s.n_kept, s.iterations
        );
    }
    Ok(())
}

pub(crate) fn level(args: &ClipArgs, n: f64) -> Level {
    if args.workshop {
        Level::Workshop(n)
    } else {
        Level::AboveMedian(n)
    }
}

pub fn threshold_cmd(cli: &Cli, args: &ThresholdCmd) -> CliResult {
    // A stack on disk to a stack format goes slab by slab unless the GPU
    // clips it whole.
    if stream_output(&args.output)
        && let Some(reader) = StackReader::open(&args.input)?
    {
        let engine = Engine::open(cli)?;
        let n = reader.shape().iter().product();
        let gpu = clipping::gpu_clips(&engine, reader.dtype(), n);
        if args.nsigma.is_none() || gpu.is_none() {
            return clipping::threshold_stack(&engine, reader, args);
        }
    }
    let a = read_one_channel(&args.input)?;
    let engine = Engine::open(cli)?;
    reset(&engine);
    let start = Instant::now();
    let (value, stats) = match (args.above, args.nsigma) {
        (Some(v), _) => (v, None),
        (None, Some(n)) => {
            let s = clip_stats(&engine, &a, None, &args.clip.options())?;
            (level(&args.clip, n).value(&s)?, Some(s))
        }
        (None, None) => return Err(Failure("give --above V or --nsigma N".into())),
    };
    let s = samples(&a)?;
    let mask = match &engine {
        Engine::Gpu(gpu) => pollster::block_on(threshold::threshold_above(gpu, s, value))?,
        Engine::Cpu => threshold::cpu::threshold_above(s, value)?,
    };
    let (kernel_ms, total_ms) = timing(&engine, start);
    let count = mask.iter().filter(|&&m| m).count();
    let result = Array::from_bool(a.shape.clone(), mask)?;
    gpuscope_io::write(&args.output, &result)?;
    if args.json {
        println!(
            "{}",
            json!({
                "shape": a.shape, "n_above": count, "threshold": value,
                "clip": stats.as_ref().map(stats_json),
                "device": engine.name(), "backend": engine.backend(), "kernel_ms": kernel_ms, "total_ms": total_ms,
                "streamed": false, "peak_rss_bytes": peak_rss_bytes(),
            })
        );
    }
    Ok(())
}

fn foreground(a: &Array, background: f64) -> CliResult<Vec<bool>> {
    if background.is_nan() {
        return Err(Failure(
            "--background NaN matches nothing; give a number".into(),
        ));
    }
    Ok(match &a.data {
        ArrayData::Bool(v) => v
            .iter()
            .map(|&b| f64::from(u8::from(b)) != background)
            .collect(),
        _ => label::foreground(samples(a)?, background),
    })
}

pub fn label_cmd(cli: &Cli, args: &LabelCmd) -> CliResult {
    let engine = Engine::open(cli)?;
    // A 3-D .npy or TIFF stack larger than one box goes disk to disk.
    if let Engine::Gpu(gpu) = &engine
        && stream_output(&args.output)
        && let Some(reader) = StackReader::open_stack(&args.input)?
    {
        // One plane is read whole anyway: the in-memory path splits its rows.
        let shape = reader.shape();
        if shape.iter().product::<usize>() > label::max_box(gpu) && shape[0] > 1 {
            return label_streamed(&engine, gpu, reader, args);
        }
    }
    let a = read_one_channel(&args.input)?;
    let fg = foreground(&a, args.background)?;
    reset(&engine);
    let start = Instant::now();
    let l = match &engine {
        Engine::Gpu(gpu) => {
            pollster::block_on(label::label(gpu, &fg, &a.shape, args.connectivity))?
        }
        Engine::Cpu => label::cpu::label(&fg, &a.shape, args.connectivity)?,
    };
    let (kernel_ms, total_ms) = timing(&engine, start);
    let Labels { labels, count } = l;
    gpuscope_io::write(&args.output, &Array::from_i32(a.shape.clone(), labels)?)?;
    if args.json {
        println!(
            "{}",
            json!({
                "n_labels": count, "shape": a.shape, "connectivity": args.connectivity,
                "device": engine.name(), "backend": engine.backend(), "kernel_ms": kernel_ms, "total_ms": total_ms,
                "streamed": false, "peak_rss_bytes": peak_rss_bytes(),
            })
        );
    }
    Ok(())
}

/// `label` on a stack larger than the device's box: disk to disk.
fn label_streamed(engine: &Engine, gpu: &Gpu, reader: StackReader, args: &LabelCmd) -> CliResult {
    let shape = reader.shape();
    reset(engine);
    let start = Instant::now();
    let count = label_stack(
        gpu,
        reader,
        &args.output,
        args.connectivity,
        args.background,
        label::max_box(gpu),
    )?;
    let (kernel_ms, total_ms) = timing(engine, start);
    if args.json {
        println!(
            "{}",
            json!({
                "n_labels": count, "shape": shape, "connectivity": args.connectivity,
                "device": engine.name(), "backend": engine.backend(), "kernel_ms": kernel_ms, "total_ms": total_ms,
                "streamed": true, "peak_rss_bytes": peak_rss_bytes(),
            })
        );
    }
    Ok(())
}

/// Labels a stack slab by slab (slabs planned from the memory budget):
/// provisional labels in a temporary file beside `output`, then the final
/// labels written through the output's own temporary file, so a failure
/// leaves no output. Slabs hold at most `max_pixels`. Returns the number
/// of components.
pub(crate) fn label_stack(
    gpu: &Gpu,
    reader: StackReader,
    output: &Path,
    connectivity: usize,
    background: f64,
    max_pixels: usize,
) -> CliResult<usize> {
    if background.is_nan() {
        return Err(Failure(
            "--background NaN matches nothing; give a number".into(),
        ));
    }
    let shape = reader.shape();
    let plane = shape[1] * shape[2];
    let mut bar = ProgressBar::new(plane * reader.dtype().size_bytes());
    let Some(writer) = StackWriter::create(output, &shape, DType::I32)? else {
        return Err(Failure("stacks are written as .npy or .tif".into()));
    };
    let mut provisional = ScratchFile::create(output, plane)?;
    // One slab read ahead while the GPU labels the one before.
    let ahead = (max_pixels / plane.max(1)).max(1);
    let mut reader = reader;
    let mut mask = Prefetch::spawn(shape[0], ahead, move |z| {
        foreground(&reader.read(z, 1)?, background)
    });
    let mut sink = WriteBehind::spawn(writer, shape[1..].to_vec());
    let count = pollster::block_on(label::label_stream(
        gpu,
        &shape,
        connectivity,
        max_pixels,
        &mut mask,
        &mut provisional,
        &mut sink,
        &mut |done, total| bar.update(done, total),
    ))?;
    drop(provisional);
    sink.finish()?;
    Ok(count)
}

pub fn sources_cmd(cli: &Cli, args: &SourcesCmd) -> CliResult {
    let catalogue_json = match args
        .catalogue
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("csv") => false,
        Some("json") => true,
        _ => {
            return Err(Failure(format!(
                "{}: the catalogue must end in .csv or .json",
                args.catalogue.display()
            )));
        }
    };
    // Created first, published last: a catalogue that cannot be written
    // fails the run before the labels are written.
    let catalogue = gpuscope_io::PendingOutput::create(&args.catalogue)?;
    let engine = Engine::open(cli)?;
    // A 3-D .npy or TIFF stack larger than one box goes disk to disk.
    let labels_streamable = args.labels.as_deref().is_none_or(stream_output);
    if let Engine::Gpu(gpu) = &engine
        && labels_streamable
        && let Some(reader) = StackReader::open(&args.input)?
    {
        let shape = reader.shape();
        if shape.iter().product::<usize>() > label::max_box(gpu) && shape[0] > 1 {
            return sources_streamed(&engine, gpu, reader, args, catalogue, catalogue_json);
        }
    }
    let a = read_one_channel(&args.input)?;
    let data = f32_data(&a)?;
    reset(&engine);
    let start = Instant::now();
    let o = args.clip.options();
    let level = if args.clip.workshop {
        Level::Workshop(args.nsigma)
    } else {
        Level::AboveMedian(args.nsigma)
    };
    let found = match &engine {
        Engine::Gpu(gpu) => pollster::block_on(sources::sources(
            gpu,
            &data,
            &a.shape,
            &o,
            level,
            args.connectivity,
        ))?,
        Engine::Cpu => sources::cpu::sources(&data, &a.shape, &o, level, args.connectivity)?,
    };
    let (kernel_ms, total_ms) = timing(&engine, start);
    let text = if catalogue_json {
        let rows: Vec<Value> = found.regions.iter().map(region_json).collect();
        serde_json::to_string_pretty(&rows)?
    } else {
        catalogue_csv(&found.regions, a.shape.len())
    };
    if let Some(path) = &args.labels {
        let l = Array::from_i32(a.shape.clone(), found.labels.labels.clone())?;
        gpuscope_io::write(path, &l)?;
    }
    publish_catalogue(catalogue, &text, args.labels.as_deref())?;
    if args.json {
        println!(
            "{}",
            json!({
                "n_sources": found.labels.count, "threshold": found.threshold,
                "clip": stats_json(&found.stats), "shape": a.shape,
                "device": engine.name(), "backend": engine.backend(), "kernel_ms": kernel_ms, "total_ms": total_ms,
                "streamed": false, "peak_rss_bytes": peak_rss_bytes(),
            })
        );
    } else {
        println!(
            "{} sources above {} (clipped median {}, std {})",
            found.labels.count, found.threshold, found.stats.median, found.stats.std
        );
    }
    Ok(())
}

/// Publishes the catalogue; if that fails, removes the labels just written
/// with it, so that a failed run leaves no output.
fn publish_catalogue(
    catalogue: gpuscope_io::PendingOutput,
    text: &str,
    labels: Option<&Path>,
) -> CliResult {
    catalogue.commit(text.as_bytes()).inspect_err(|_| {
        if let Some(path) = labels {
            let _ = std::fs::remove_file(path);
        }
    })?;
    Ok(())
}

/// `sources` on a stack larger than the device's box: the input read slice
/// by slice (several passes), labels (if asked) written slice by slice.
fn sources_streamed(
    engine: &Engine,
    gpu: &Gpu,
    reader: StackReader,
    args: &SourcesCmd,
    catalogue: gpuscope_io::PendingOutput,
    catalogue_json: bool,
) -> CliResult {
    let shape = reader.shape();
    let plane = shape[1] * shape[2];
    let in_bytes = plane * reader.dtype().size_bytes();
    let mut data = Source {
        reader,
        to_words: f32_words,
    };
    let mut provisional = ScratchFile::create(&args.catalogue, plane)?;
    let mut sink = match &args.labels {
        Some(path) => {
            let Some(writer) = StackWriter::create(path, &shape, DType::I32)? else {
                return Err(Failure("label stacks are written as .npy or .tif".into()));
            };
            Some(Sink {
                writer,
                plane: shape[1..].to_vec(),
                dtype: DType::I32,
                from_words: from_i32_words,
            })
        }
        None => None,
    };
    let level = if args.clip.workshop {
        Level::Workshop(args.nsigma)
    } else {
        Level::AboveMedian(args.nsigma)
    };
    // The bar times the labelling's passes, from their first slab.
    let mut bar: Option<ProgressBar> = None;
    let terminal = std::io::stderr().is_terminal();
    reset(engine);
    let start = Instant::now();
    let found = pollster::block_on(sources::sources_stream(
        gpu,
        &shape,
        &args.clip.options(),
        level,
        args.connectivity,
        label::max_box(gpu),
        &mut data,
        &mut provisional,
        sink.as_mut()
            .map(|s| s as &mut dyn gpuscope_core::stream::SliceSink<i32>),
        &mut |what, done, total| {
            if total > 0 {
                bar.get_or_insert_with(|| ProgressBar::new(in_bytes))
                    .update(done, total);
            } else if terminal {
                eprintln!("{what} {done} done");
            }
        },
    ))?;
    drop(provisional);
    if let Some(sink) = sink {
        sink.writer.finish()?;
    }
    let (kernel_ms, total_ms) = timing(engine, start);
    let text = if catalogue_json {
        let rows: Vec<Value> = found.regions.iter().map(region_json).collect();
        serde_json::to_string_pretty(&rows)?
    } else {
        catalogue_csv(&found.regions, shape.len())
    };
    publish_catalogue(catalogue, &text, args.labels.as_deref())?;
    if args.json {
        println!(
            "{}",
            json!({
                "n_sources": found.count, "threshold": found.threshold,
                "clip": stats_json(&found.stats), "shape": shape,
                "device": engine.name(), "backend": engine.backend(), "kernel_ms": kernel_ms, "total_ms": total_ms,
                "streamed": true, "peak_rss_bytes": peak_rss_bytes(),
            })
        );
    } else {
        println!(
            "{} sources above {} (clipped median {}, std {})",
            found.count, found.threshold, found.stats.median, found.stats.std
        );
    }
    Ok(())
}

/// Column names as skimage.measure.regionprops_table writes them.
fn catalogue_csv(regions: &[Region], ndim: usize) -> String {
    let mut cols = vec!["label".to_string(), "area".to_string()];
    cols.extend((0..2 * ndim).map(|k| format!("bbox-{k}")));
    cols.extend((0..ndim).map(|k| format!("centroid-{k}")));
    cols.extend((0..ndim).map(|k| format!("centroid_weighted-{k}")));
    cols.extend(
        [
            "intensity_sum",
            "intensity_mean",
            "intensity_min",
            "intensity_max",
        ]
        .map(String::from),
    );
    let mut out = cols.join(",");
    out.push('\n');
    for r in regions {
        let mut row = vec![r.label.to_string(), r.area.to_string()];
        row.extend(r.bbox_min.iter().chain(&r.bbox_max).map(|v| v.to_string()));
        row.extend(
            r.centroid
                .iter()
                .chain(&r.centroid_weighted)
                .map(|v| v.to_string()),
        );
        row.extend(
            [
                r.intensity_sum,
                r.intensity_mean,
                r.intensity_min,
                r.intensity_max,
            ]
            .map(|v| v.to_string()),
        );
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

fn region_json(r: &Region) -> Value {
    let bbox: Vec<usize> = r.bbox_min.iter().chain(&r.bbox_max).copied().collect();
    json!({
        "label": r.label, "area": r.area, "bbox": bbox, "centroid": r.centroid,
        "centroid_weighted": r.centroid_weighted, "intensity_sum": r.intensity_sum,
        "intensity_mean": r.intensity_mean, "intensity_min": r.intensity_min,
        "intensity_max": r.intensity_max,
    })
}

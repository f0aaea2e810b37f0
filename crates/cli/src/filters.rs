//! Filter commands: convolve (Gaussian or any kernel), median, outliers.
//! Stacks (.npy, multi-page TIFF) in and out are streamed slice by slice on
//! the GPU path.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use gpuscope_core::Gpu;
use gpuscope_core::filters::median::{self, Footprint, OutlierRemoval, Outliers};
use gpuscope_core::filters::{self, Boundary, Filter, GaussianParams, MedianParams, Mode, Output};
use gpuscope_io::{Array, DType};
use serde_json::json;

use crate::common::{CliResult, Engine, Failure, integer_output, open_contexts, samples};
use crate::spread;
use crate::stream::{
    FileSink, FileSource, ProgressBar, Sink, Source, StackReader, StackWriter, ToWords,
    empty_samples, f32_words, from_f32_words, from_keys32, from_keys64, keys32, keys64,
    sample_vec_array,
};
use crate::{Cli, parse_dtype, parse_mode};
use gpuscope_core::conveyor::{self, Options, Report};

#[derive(Args)]
pub struct ConvolveArgs {
    pub input: PathBuf,
    pub output: PathBuf,
    /// Gaussian sigma: one value, or one per axis (axis 0 first).
    #[arg(
        long,
        value_name = "SIGMA[,SIGMA...]",
        value_delimiter = ',',
        allow_negative_numbers = true,
        conflicts_with = "kernel",
        required_unless_present = "kernel"
    )]
    pub gaussian: Option<Vec<f64>>,
    /// Kernel weights as an .npy (or any readable) array with one axis per image axis.
    #[arg(long, value_name = "K.npy")]
    pub kernel: Option<PathBuf>,
    /// Correlate with the kernel instead of convolving (scipy.ndimage.correlate: no flip).
    #[arg(long, requires = "kernel")]
    pub correlate: bool,
    #[arg(long, default_value_t = GaussianParams::default().mode, value_parser = parse_mode)]
    pub mode: Mode,
    /// Value outside the image in constant mode.
    #[arg(long, default_value_t = GaussianParams::default().cval, allow_negative_numbers = true)]
    pub cval: f64,
    /// Gaussian radius in sigmas: int(truncate * sigma + 0.5) taps each side.
    #[arg(long, default_value_t = GaussianParams::default().truncate)]
    pub truncate: f64,
    /// Output dtype (numpy name); default: the input's, as scipy.
    #[arg(long, value_name = "DTYPE", value_parser = parse_dtype)]
    pub dtype: Option<DType>,
    /// Skip the final sync of a streamed output (scratch outputs): it
    /// still appears only complete, but a crash of the system soon after
    /// may lose it.
    #[arg(long)]
    pub no_sync: bool,
    #[arg(long)]
    pub json: bool,
}

pub fn convolve(cli: &Cli, args: &ConvolveArgs) -> CliResult {
    let start = Instant::now();
    let mut contexts = open_contexts(cli)?;
    if contexts.len() >= 2
        && stream_output(&args.output)
        && let Some(reader) = stack_to_stream(args)?
    {
        let (shape, in_dtype) = (reader.shape(), reader.dtype());
        drop(reader);
        let out_dtype = args.dtype.unwrap_or(in_dtype);
        let filter = make_filter(args, shape.len())?;
        let output = integer_output(out_dtype)?;
        let to_words = words_for(output);
        let halo = filter.halo()[0];
        let wrap = args.mode == Mode::Wrap;
        let n = spread::parts(contexts.len(), shape[0], halo, &args.output, wrap);
        if n >= 2 {
            contexts.truncate(n);
            let gpus: Vec<&Gpu> = contexts.iter().collect();
            let shares = spread::spread_stack(
                &gpus,
                &args.input,
                &args.output,
                &shape,
                out_dtype,
                halo,
                to_words,
                from_f32_words,
                &|gpu, sub, source, sink, progress| {
                    pollster::block_on(filters::apply_stream(
                        gpu,
                        &filter,
                        sub,
                        boundary(args),
                        output,
                        source,
                        sink,
                        progress,
                    ))
                },
            )?;
            if args.json {
                let summary = json!({ "shape": shape, "dtype": out_dtype.name() });
                println!("{}", spread_json(summary, &shares, start));
            }
            return Ok(());
        }
    }
    let spread = cli.adapters.is_some();
    let engine = Engine::first_of(cli, contexts)?;
    let reader = match &engine {
        Engine::Gpu(_) if stream_output(&args.output) => stack_to_stream(args)?,
        _ => None,
    };
    let (shape, in_dtype) = match &reader {
        Some(r) => (r.shape(), r.dtype()),
        None => (Vec::new(), DType::F32),
    };
    let (shape, out_dtype, streamed) = match (reader, &engine) {
        (Some(reader), Engine::Gpu(gpu)) => {
            let out_dtype = args.dtype.unwrap_or(in_dtype);
            let filter = make_filter(args, shape.len())?;
            let output = integer_output(out_dtype)?;
            let mut bar = ProgressBar::new(shape[1] * shape[2] * in_dtype.size_bytes());
            // A window wrapping around z needs the last slices first: the
            // slice-by-slice road, which caches them.
            let wraps = args.mode == Mode::Wrap && filter.halo()[0] > 0;
            if !wraps && out_dtype != DType::Bool {
                let Some(sink) = FileSink::create(&args.output, &shape, out_dtype)? else {
                    return Err(Failure(
                        "stacks are written as .npy, .raw, .tif or Zarr".into(),
                    ));
                };
                let source = Box::new(FileSource::new(reader)?);
                let report = conveyor::filter(
                    gpu,
                    &filter,
                    boundary(args),
                    output,
                    empty_samples(out_dtype)?,
                    source,
                    Box::new(sink),
                    Options::for_budget(gpu.memory_budget(), !args.no_sync),
                    &mut |done, total| bar.update(done, total),
                )?;
                let summary = (shape, out_dtype);
                return finish_convolve(args, start, spread, &engine, summary, Some(report));
            }
            let Some(writer) = StackWriter::create(&args.output, &shape, out_dtype)? else {
                return Err(Failure("stacks are written as .npy or .tif".into()));
            };
            let mut source = Source {
                reader,
                to_words: words_for(output),
            };
            let mut sink = Sink {
                writer,
                plane: shape[1..].to_vec(),
                dtype: out_dtype,
                from_words: from_f32_words,
            };
            pollster::block_on(filters::apply_stream(
                gpu,
                &filter,
                &shape,
                boundary(args),
                output,
                &mut source,
                &mut sink,
                &mut |done, total| bar.update(done, total),
            ))?;
            sink.writer.finish()?;
            (shape, out_dtype, true)
        }
        _ => {
            let image = crate::common::read_image(&args.input)?;
            let input = image.array;
            if input.dtype() == DType::Bool && args.dtype.is_none() {
                return Err(Failure(format!(
                    "{}: boolean input; give --dtype uint8 or --dtype float32 for the output",
                    args.input.display()
                )));
            }
            let out_dtype = args.dtype.unwrap_or(input.dtype());
            let output = integer_output(out_dtype)?;
            let filter = make_filter(args, input.ndim())?;
            let shape = input.shape.clone();
            // Integer samples beyond float32 (uint32 detector gaps at
            // 2^32 - 1) are filtered in float64 on the host, as scipy.
            let exact = output == Output::Float
                || input.dtype() == DType::Bool
                || filters::gpu_exact(samples(&input)?, boundary(args));
            // The decoded image is dropped once converted, before the
            // filter's output is allocated.
            let result = match &engine {
                Engine::Gpu(_) if !exact => {
                    let values = input.to_f64_vec();
                    drop(input);
                    let values =
                        filters::host::apply(&filter, &values, &shape, boundary(args), output)?;
                    Array::from_f64(shape.clone(), values)?
                }
                Engine::Gpu(gpu) => {
                    let values = input.to_f32_vec();
                    drop(input);
                    let values = pollster::block_on(filters::apply(
                        gpu,
                        &filter,
                        &values,
                        &shape,
                        boundary(args),
                        output,
                    ))?;
                    Array::from_f32(shape.clone(), values)?
                }
                Engine::Cpu => {
                    let values = input.to_f64_vec();
                    drop(input);
                    let values =
                        filters::cpu::apply(&filter, &values, &shape, boundary(args), output)?;
                    Array::from_f64(shape.clone(), values)?
                }
            };
            // A float32 result is written as it is, not copied by a cast.
            let result = if result.dtype() == out_dtype {
                result
            } else {
                result.cast(out_dtype)
            };
            gpuscope_io::write(&args.output, &result)?;
            (shape, out_dtype, false)
        }
    };
    if args.json {
        let elapsed = start.elapsed().as_secs_f64() * 1e3;
        let summary = json!({
            "shape": shape, "dtype": out_dtype.name(), "device": engine.name(), "backend": engine.backend(),
            "kernel_ms": engine.kernel_ms(), "total_ms": elapsed, "streamed": streamed,
        });
        print_json(summary, spread, &engine);
    }
    Ok(())
}

/// The summary of a convolution streamed through the conveyor.
fn finish_convolve(
    args: &ConvolveArgs,
    start: Instant,
    spread: bool,
    engine: &Engine,
    (shape, out_dtype): (Vec<usize>, DType),
    report: Option<Report>,
) -> CliResult {
    if args.json {
        let elapsed = start.elapsed().as_secs_f64() * 1e3;
        let mut summary = json!({
            "shape": shape, "dtype": out_dtype.name(), "device": engine.name(), "backend": engine.backend(),
            "kernel_ms": engine.kernel_ms(), "total_ms": elapsed, "streamed": true,
        });
        add_report(&mut summary, report.as_ref());
        print_json(summary, spread, engine);
    }
    Ok(())
}

impl ConvolveArgs {
    /// The Gaussian's parameters (sigma empty when --kernel is given).
    pub fn gaussian_params(&self) -> GaussianParams {
        GaussianParams {
            sigma: self.gaussian.clone().unwrap_or_default(),
            mode: self.mode,
            cval: self.cval,
            truncate: self.truncate,
        }
    }
}

impl MedianArgs {
    /// The median's parameters (a --footprint file is read by `median`).
    pub fn params(&self) -> MedianParams {
        MedianParams {
            size: self.size.clone().unwrap_or_default(),
            footprint: None,
            mode: self.mode,
            cval: self.cval,
        }
    }
}

impl OutliersArgs {
    pub fn params(&self) -> OutlierRemoval {
        OutlierRemoval {
            diff: self.diff,
            size: self.size,
            outliers: self.mode,
        }
    }
}

/// The input as a stack to stream, if it is one whose samples the stream's
/// float32 words hold exactly wherever the output is an integer dtype:
/// 32- and 64-bit integers and float64 may hold others (uint32 detector
/// gaps at 2^32 - 1), so those are filtered in memory, where the samples
/// decide between the GPU and the host's float64 (scipy's answer either way).
fn stack_to_stream(args: &ConvolveArgs) -> CliResult<Option<StackReader>> {
    let Some(reader) = StackReader::open(&args.input)? else {
        return Ok(None);
    };
    let in_dtype = reader.dtype();
    let integer_out = matches!(
        integer_output(args.dtype.unwrap_or(in_dtype)),
        Ok(Output::Integer { .. })
    );
    let wide = matches!(
        in_dtype,
        DType::U32 | DType::I32 | DType::U64 | DType::I64 | DType::F64
    );
    Ok((!(integer_out && wide)).then_some(reader))
}

/// The stream's float32 words of a slab. For an integer output the GPU's
/// answer is scipy's only when every sample is a float32 value (integers up
/// to 2^24): a slab holding others (uint32 gaps at 2^32 - 1) stops the
/// command with an error instead of a rounded result.
fn words_for(output: Output) -> ToWords<f32> {
    match output {
        Output::Float => f32_words,
        Output::Integer { .. } => exact_f32_words,
    }
}

fn exact_f32_words(a: &Array) -> CliResult<Vec<f32>> {
    if a.dtype() != DType::Bool && !filters::gpu_exact(samples(a)?, Boundary::default()) {
        return Err(Failure(format!(
            "this {} stack holds values beyond 2^24 (such as detector gaps at 2^32 - 1), which \
             the streamed GPU filter would round (float32); run with --cpu for scipy's exact answer",
            a.dtype().name()
        )));
    }
    f32_words(a)
}

fn boundary(args: &ConvolveArgs) -> Boundary {
    Boundary {
        mode: args.mode,
        cval: args.cval,
    }
}

fn make_filter(args: &ConvolveArgs, ndim: usize) -> CliResult<Filter> {
    Ok(match (&args.gaussian, &args.kernel) {
        (Some(_), _) => args.gaussian_params().filter(ndim)?,
        (None, Some(k)) => {
            let kernel = crate::common::read_image(k)?.array;
            let w = kernel.to_f64_vec();
            if args.correlate {
                Filter::correlate(ndim, &w, &kernel.shape)?
            } else {
                Filter::convolve(ndim, &w, &kernel.shape)?
            }
        }
        (None, None) => return Err(Failure("give --gaussian SIGMA or --kernel K.npy".into())),
    })
}

#[derive(Args)]
pub struct MedianArgs {
    pub input: PathBuf,
    pub output: PathBuf,
    /// Window extent: one value for every axis, or one per axis (1,K,K filters each slice of a stack).
    #[arg(
        long,
        value_name = "K[,K...]",
        value_delimiter = ',',
        conflicts_with = "footprint",
        required_unless_present = "footprint"
    )]
    pub size: Option<Vec<usize>>,
    /// Footprint as a boolean (or 0/1) array with one axis per image axis.
    #[arg(long, value_name = "F.npy")]
    pub footprint: Option<PathBuf>,
    #[arg(long, default_value_t = MedianParams::default().mode, value_parser = parse_mode)]
    pub mode: Mode,
    /// Value outside the image in constant mode (converted to the input dtype).
    #[arg(long, default_value_t = MedianParams::default().cval, allow_negative_numbers = true)]
    pub cval: f64,
    /// Skip the final sync of a streamed output (scratch outputs): it
    /// still appears only complete, but a crash of the system soon after
    /// may lose it.
    #[arg(long)]
    pub no_sync: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct OutliersArgs {
    pub input: PathBuf,
    pub output: PathBuf,
    /// Replace an element when it differs from its median by more than D (Mantid Imaging's diff).
    #[arg(long, value_name = "D", allow_negative_numbers = true)]
    pub diff: f64,
    /// Median window extent in each 2-D slice.
    #[arg(long, default_value_t = OutlierRemoval::default().size)]
    pub size: usize,
    /// bright (x - median > D), dark (median - x > D), both, or tomopy (bright, >=).
    #[arg(long, default_value_t = OutlierRemoval::default().outliers, value_parser = parse_outliers)]
    pub mode: Outliers,
    /// Skip the final sync of a streamed output (scratch outputs): it
    /// still appears only complete, but a crash of the system soon after
    /// may lose it.
    #[arg(long)]
    pub no_sync: bool,
    #[arg(long)]
    pub json: bool,
}

fn parse_outliers(s: &str) -> Result<Outliers, String> {
    s.parse().map_err(|e: gpuscope_core::Error| e.to_string())
}

/// A rank-filter run: the median itself or outlier removal.
enum RankOp {
    Median(Footprint, Boundary),
    Outliers(OutlierRemoval),
}

pub fn median(cli: &Cli, args: &MedianArgs) -> CliResult {
    let footprint = |ndim: usize| -> CliResult<Footprint> {
        Ok(match (&args.size, &args.footprint) {
            (Some(_), _) => args.params().footprint(ndim)?,
            (None, Some(path)) => {
                let f = crate::common::read_image(path)?.array;
                let mask: Vec<bool> = f.to_f64_vec().iter().map(|&v| v != 0.0).collect();
                Footprint::from_mask(ndim, &mask, &f.shape)?
            }
            (None, None) => return Err(Failure("give --size K or --footprint F.npy".into())),
        })
    };
    let boundary = args.params().boundary();
    let flags = (args.json, !args.no_sync);
    rank_filter(cli, &args.input, &args.output, flags, &|ndim| {
        Ok(RankOp::Median(footprint(ndim)?, boundary))
    })
}

pub fn outliers(cli: &Cli, args: &OutliersArgs) -> CliResult {
    let removal = args.params();
    removal.validate()?;
    let flags = (args.json, !args.no_sync);
    rank_filter(cli, &args.input, &args.output, flags, &|_| {
        Ok(RankOp::Outliers(removal))
    })
}

fn rank_filter(
    cli: &Cli,
    input: &Path,
    output: &Path,
    (json, sync): (bool, bool),
    op: &dyn Fn(usize) -> CliResult<RankOp>,
) -> CliResult {
    let start = Instant::now();
    let mut contexts = open_contexts(cli)?;
    if contexts.len() >= 2
        && stream_output(output)
        && let Some(reader) = StackReader::open(input)?
    {
        let (shape, dtype) = (reader.shape(), reader.dtype());
        drop(reader);
        let op = op(shape.len())?;
        let wide = empty_samples(dtype)?.wide();
        let (halo, wrap) = match &op {
            RankOp::Median(fp, b) => (fp.reach()[0], b.mode == Mode::Wrap),
            // Outliers work slice by slice.
            RankOp::Outliers(_) => (0, false),
        };
        let n = spread::parts(contexts.len(), shape[0], halo, output, wrap);
        // The 64-bit outlier test finishes on the host: not streamed.
        if n >= 2 && !(wide && matches!(op, RankOp::Outliers(_))) {
            contexts.truncate(n);
            let gpus: Vec<&Gpu> = contexts.iter().collect();
            let shares = rank_spread(&gpus, input, output, &shape, dtype, &op, wide, halo)?;
            if json {
                println!(
                    "{}",
                    spread_json(
                        json!({ "shape": shape, "dtype": dtype.name() }),
                        &shares,
                        start
                    )
                );
            }
            return Ok(());
        }
    }
    let spread = cli.adapters.is_some();
    let engine = Engine::first_of(cli, contexts)?;
    let reader = match &engine {
        Engine::Gpu(_) if stream_output(output) => StackReader::open(input)?,
        _ => None,
    };
    let mut report = None;
    let (shape, dtype, streamed) = match (reader, &engine) {
        (Some(reader), Engine::Gpu(gpu)) => {
            let shape = reader.shape();
            let dtype = reader.dtype();
            let op = op(shape.len())?;
            let wide = empty_samples(dtype)?.wide();
            if wide && matches!(op, RankOp::Outliers(_)) {
                // The 64-bit outlier test finishes on the host: not streamed.
                run_in_memory(&engine, input, output, &op)?;
            } else {
                report = rank_streamed(gpu, reader, output, &op, wide, sync)?;
            }
            (shape, dtype, true)
        }
        _ => {
            let image = crate::common::read_image(input)?;
            let op = op(image.array.ndim())?;
            let (shape, dtype) = (image.array.shape.clone(), image.array.dtype());
            rank_in_memory(&engine, &image.array, output, &op)?;
            (shape, dtype, false)
        }
    };
    let elapsed = start.elapsed().as_secs_f64() * 1e3;
    if json {
        let mut summary = json!({
            "shape": shape, "dtype": dtype.name(), "device": engine.name(), "backend": engine.backend(),
            "kernel_ms": engine.kernel_ms(), "total_ms": elapsed, "streamed": streamed,
        });
        add_report(&mut summary, report.as_ref());
        print_json(summary, spread, &engine);
    }
    Ok(())
}

/// The JSON summary; with `--adapters`, the one adapter used.
fn print_json(mut summary: serde_json::Value, spread: bool, engine: &Engine) {
    if spread {
        summary["adapters"] = json!([engine.name()]);
        summary["n_adapters"] = json!(1);
    }
    println!("{summary}");
}

/// The JSON summary of a run spread over several adapters: per-adapter
/// z-ranges and GPU times; `kernel_ms` is their sum.
fn spread_json(
    mut summary: serde_json::Value,
    shares: &[spread::Share],
    start: Instant,
) -> serde_json::Value {
    let kernel: Option<f64> = shares.iter().map(|s| s.kernel_ms).sum();
    summary["device"] = json!(shares.first().map(|s| s.adapter.clone()));
    summary["backend"] = json!(shares.first().map(|s| s.backend.clone()));
    summary["adapters"] = json!(shares.iter().map(|s| s.adapter.clone()).collect::<Vec<_>>());
    summary["n_adapters"] = json!(shares.len());
    summary["slices"] = json!(shares.iter().map(spread::Share::json).collect::<Vec<_>>());
    summary["kernel_ms"] = json!(kernel);
    summary["total_ms"] = json!(start.elapsed().as_secs_f64() * 1e3);
    summary["streamed"] = json!(true);
    summary
}

/// A rank filter of a stack on several GPUs, one z-range each.
#[allow(clippy::too_many_arguments)]
fn rank_spread(
    gpus: &[&Gpu],
    input: &Path,
    output: &Path,
    shape: &[usize],
    dtype: DType,
    op: &RankOp,
    wide: bool,
    halo: usize,
) -> CliResult<Vec<spread::Share>> {
    let tag = empty_samples(dtype)?;
    if wide {
        let RankOp::Median(fp, b) = op else {
            return Err(Failure("64-bit outlier removal is not streamed".into()));
        };
        spread::spread_stack(
            gpus,
            input,
            output,
            shape,
            dtype,
            halo,
            keys64,
            from_keys64,
            &|gpu, sub, source, sink, progress| {
                pollster::block_on(median::median_filter_stream(
                    gpu, tag, sub, fp, *b, source, sink, progress,
                ))
            },
        )
    } else {
        spread::spread_stack(
            gpus,
            input,
            output,
            shape,
            dtype,
            halo,
            keys32,
            from_keys32,
            &|gpu, sub, source, sink, progress| match op {
                RankOp::Median(fp, b) => pollster::block_on(median::median_filter_stream(
                    gpu, tag, sub, fp, *b, source, sink, progress,
                )),
                RankOp::Outliers(r) => pollster::block_on(median::remove_outliers_stream(
                    gpu, tag, sub, r, source, sink, progress,
                )),
            },
        )
    }
}

pub(crate) fn stream_output(path: &Path) -> bool {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    matches!(ext.as_str(), "npy" | "raw" | "tif" | "tiff")
        || gpuscope_io::zarr::is_zarr_name(&path.to_string_lossy())
}

fn run_in_memory(engine: &Engine, input: &Path, output: &Path, op: &RankOp) -> CliResult {
    let image = crate::common::read_image(input)?;
    rank_in_memory(engine, &image.array, output, op)
}

fn rank_in_memory(engine: &Engine, a: &Array, output: &Path, op: &RankOp) -> CliResult {
    let s = samples(a)?;
    let out = match (engine, op) {
        (Engine::Gpu(gpu), RankOp::Median(fp, b)) => {
            pollster::block_on(median::median_filter(gpu, s, &a.shape, fp, *b))?
        }
        (Engine::Gpu(gpu), RankOp::Outliers(r)) => {
            pollster::block_on(median::remove_outliers(gpu, s, &a.shape, r))?
        }
        (Engine::Cpu, RankOp::Median(fp, b)) => median::cpu::median_filter(s, &a.shape, fp, *b)?,
        (Engine::Cpu, RankOp::Outliers(r)) => median::cpu::remove_outliers(s, &a.shape, r)?,
    };
    gpuscope_io::write(output, &sample_vec_array(a.shape.clone(), out)?)?;
    Ok(())
}

/// The conveyor's timings and bytes in a JSON summary; `compute_ms` is the
/// stream's time less its waits for reads and writes.
fn add_report(summary: &mut serde_json::Value, report: Option<&Report>) {
    let Some(r) = report else {
        return;
    };
    if let (Some(s), serde_json::Value::Object(fields)) = (summary.as_object_mut(), r.to_json()) {
        s.extend(fields);
        s.insert(
            "compute_ms".into(),
            json!((r.stream_ms - r.wait_read_ms - r.wait_write_ms - r.store_ms).max(0.0)),
        );
    }
}

/// A rank filter of a stack from disk to disk on one GPU: through the
/// conveyor, except a median whose window wraps around z (its first chunk
/// needs the last slices: the slice-by-slice road, which caches them).
fn rank_streamed(
    gpu: &Gpu,
    reader: StackReader,
    output: &Path,
    op: &RankOp,
    wide: bool,
    sync: bool,
) -> CliResult<Option<Report>> {
    let shape = reader.shape();
    let dtype = reader.dtype();
    let tag = empty_samples(dtype)?;
    let wraps = matches!(op, RankOp::Median(fp, b) if b.mode == Mode::Wrap && fp.reach()[0] > 0);
    if !wraps {
        let Some(sink) = FileSink::create(output, &shape, dtype)? else {
            return Err(Failure(format!(
                "{}: stacks are written as .npy, .raw, .tif or Zarr",
                output.display()
            )));
        };
        let source = Box::new(FileSource::new(reader)?);
        let options = Options::for_budget(gpu.memory_budget(), sync);
        let mut bar = ProgressBar::new(shape[1] * shape[2] * dtype.size_bytes());
        let mut progress = |done: usize, total: usize| bar.update(done, total);
        let report = match op {
            RankOp::Median(fp, b) => {
                conveyor::median(gpu, fp, *b, source, Box::new(sink), options, &mut progress)?
            }
            RankOp::Outliers(r) => {
                conveyor::outliers(gpu, r, source, Box::new(sink), options, &mut progress)?
            }
        };
        return Ok(Some(report));
    }
    let Some(writer) = StackWriter::create(output, &shape, dtype)? else {
        return Err(Failure(format!(
            "{}: stacks are written as .npy or .tif",
            output.display()
        )));
    };
    let mut bar = ProgressBar::new(shape[1] * shape[2] * dtype.size_bytes());
    let mut progress = |done: usize, total: usize| bar.update(done, total);
    let plane = shape[1..].to_vec();
    if wide {
        let mut source = Source {
            reader,
            to_words: keys64,
        };
        let mut sink = Sink {
            writer,
            plane,
            dtype,
            from_words: from_keys64,
        };
        let RankOp::Median(fp, b) = op else {
            return Err(Failure("64-bit outlier removal is not streamed".into()));
        };
        pollster::block_on(median::median_filter_stream(
            gpu,
            tag,
            &shape,
            fp,
            *b,
            &mut source,
            &mut sink,
            &mut progress,
        ))?;
        sink.writer.finish()?;
        Ok(None)
    } else {
        let mut source = Source {
            reader,
            to_words: keys32,
        };
        let mut sink = Sink {
            writer,
            plane,
            dtype,
            from_words: from_keys32,
        };
        match op {
            RankOp::Median(fp, b) => pollster::block_on(median::median_filter_stream(
                gpu,
                tag,
                &shape,
                fp,
                *b,
                &mut source,
                &mut sink,
                &mut progress,
            ))?,
            RankOp::Outliers(r) => pollster::block_on(median::remove_outliers_stream(
                gpu,
                tag,
                &shape,
                r,
                &mut source,
                &mut sink,
                &mut progress,
            ))?,
        }
        sink.writer.finish()?;
        Ok(None)
    }
}

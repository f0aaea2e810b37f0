//! `gpuscope`, the native command line. The contract (commands, exit codes,
//! one-line errors, JSON summaries) is in docs/cli.md of the shared docs and
//! the README.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use gpuscope_core::filters::{self, Boundary, Filter, Mode, Output};
use gpuscope_core::segment::threshold;
use gpuscope_core::{Gpu, GpuOptions, Samples};
use gpuscope_io::{Array, ArrayData, DType};
use serde_json::json;

#[derive(Parser)]
#[command(
    name = "gpuscope",
    version,
    about = "Scientific image analysis on any GPU"
)]
struct Cli {
    /// Run the CPU reference path instead of the GPU.
    #[arg(long, global = true)]
    cpu: bool,
    /// Pick the GPU adapter whose name contains NAME (see `gpuscope devices`).
    #[arg(long, global = true, value_name = "NAME")]
    adapter: Option<String>,
    /// Device memory the operations may use at once (bytes, or with K/M/G).
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_size)]
    memory_budget: Option<u64>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Shape, dtype and statistics of an array file.
    Info {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// The GPU adapters this machine offers.
    Devices {
        #[arg(long)]
        json: bool,
    },
    /// Gaussian filter or convolution with any kernel (scipy.ndimage semantics).
    Convolve(ConvolveArgs),
    /// Pixels above a value, as a boolean mask (`image > value`).
    Threshold {
        input: PathBuf,
        output: PathBuf,
        /// Keep pixels strictly greater than V.
        #[arg(long, value_name = "V", allow_negative_numbers = true)]
        above: f64,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
struct ConvolveArgs {
    input: PathBuf,
    output: PathBuf,
    /// Gaussian sigma: one value, or one per axis (axis 0 first).
    #[arg(
        long,
        value_name = "SIGMA[,SIGMA...]",
        value_delimiter = ',',
        allow_negative_numbers = true,
        conflicts_with = "kernel",
        required_unless_present = "kernel"
    )]
    gaussian: Option<Vec<f64>>,
    /// Kernel weights as an .npy (or any readable) array with one axis per image axis.
    #[arg(long, value_name = "K.npy")]
    kernel: Option<PathBuf>,
    /// Correlate with the kernel instead of convolving (scipy.ndimage.correlate: no flip).
    #[arg(long, requires = "kernel")]
    correlate: bool,
    #[arg(long, default_value = "reflect", value_parser = parse_mode)]
    mode: Mode,
    /// Value outside the image in constant mode.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    cval: f64,
    /// Gaussian radius in sigmas: int(truncate * sigma + 0.5) taps each side.
    #[arg(long, default_value_t = 4.0)]
    truncate: f64,
    /// Output dtype (numpy name); default: the input's, as scipy.
    #[arg(long, value_name = "DTYPE", value_parser = parse_dtype)]
    dtype: Option<DType>,
    #[arg(long)]
    json: bool,
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse().map_err(|e: gpuscope_core::Error| e.to_string())
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    use DType::*;
    [Bool, U8, U16, U32, U64, I8, I16, I32, I64, F32, F64]
        .into_iter()
        .find(|d| d.name() == s)
        .ok_or_else(|| format!("unknown dtype '{s}' (use a numpy name such as uint8 or float32)"))
}

fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, scale) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let scale = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("unknown size suffix in '{s}' (use K, M, G or T)")),
            };
            (&t[..i], scale)
        }
        _ => (t, 1),
    };
    let n: f64 = digits
        .parse()
        .map_err(|_| format!("'{s}' is not a size (e.g. 512M or 2G)"))?;
    if !(n.is_finite() && n >= 1.0) {
        return Err(format!("'{s}' is not a positive size"));
    }
    Ok((n * scale as f64) as u64)
}

/// A failure reported as one `error: ...` line with exit status 1.
struct Failure(String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(e.to_string())
    }
}

type CliResult<T = ()> = Result<T, Failure>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(1)
        }
    }
}

/// Where an operation runs: the GPU, or the CPU reference.
enum Engine {
    Gpu(Box<Gpu>),
    Cpu,
}

impl Engine {
    fn open(cli: &Cli) -> CliResult<Engine> {
        if cli.cpu {
            return Ok(Engine::Cpu);
        }
        let options = GpuOptions {
            adapter: cli.adapter.clone(),
            memory_budget: cli.memory_budget,
            max_binding_size: None,
        };
        match pollster::block_on(Gpu::new(options)) {
            Ok(gpu) => Ok(Engine::Gpu(Box::new(gpu))),
            // An adapter asked for by name and missing is the user's error.
            Err(e) if cli.adapter.is_some() => Err(e.into()),
            Err(e) => {
                eprintln!("warning: {e}; running on the CPU");
                Ok(Engine::Cpu)
            }
        }
    }

    fn name(&self) -> String {
        match self {
            Engine::Gpu(g) => g.summary().name,
            Engine::Cpu => "cpu".into(),
        }
    }

    fn kernel_ms(&self) -> Option<f64> {
        match self {
            Engine::Gpu(g) => g.last_kernel_ns().map(|ns| ns as f64 / 1e6),
            Engine::Cpu => None,
        }
    }
}

fn run(cli: Cli) -> CliResult {
    match &cli.command {
        Command::Info { file, json } => info(file, *json),
        Command::Devices { json } => devices(*json),
        Command::Convolve(args) => convolve(&cli, args),
        Command::Threshold {
            input,
            output,
            above,
            json,
        } => threshold_cmd(&cli, input, output, *above, *json),
    }
}

fn info(file: &Path, json: bool) -> CliResult {
    let image = gpuscope_io::read(file)?;
    let a = &image.array;
    let s = a.stats();
    let finite = |v: f64| {
        if s.n_finite > 0 {
            json!(v)
        } else {
            json!(null)
        }
    };
    if json {
        let out = json!({
            "shape": a.shape,
            "dtype": a.dtype().name(),
            "min": finite(s.min),
            "max": finite(s.max),
            "mean": finite(s.mean),
            "format": image.format.name(),
        });
        println!("{out}");
    } else {
        println!("file:   {}", file.display());
        println!("format: {}", image.format.name());
        println!("shape:  {:?}", a.shape);
        println!("dtype:  {}", a.dtype().name());
        println!("min {}  max {}  mean {}", s.min, s.max, s.mean);
        for (k, v) in image.header.iter().take(40) {
            println!("  {k}: {v}");
        }
    }
    Ok(())
}

fn devices(json: bool) -> CliResult {
    let adapters = gpuscope_core::engine::list_adapters();
    let default = pollster::block_on(Gpu::new(GpuOptions::default()))
        .map(|g| g.summary())
        .ok();
    if json {
        let d = default.as_ref().map(|d| {
            json!({
                "name": d.name, "backend": d.backend, "type": d.device_type, "driver": d.driver,
                "max_binding_size": d.max_binding_size, "max_buffer_size": d.max_buffer_size,
                "memory_budget": d.memory_budget, "timestamps": d.timestamps,
            })
        });
        println!("{}", json!({ "adapters": adapters, "default": d }));
    } else {
        if adapters.is_empty() {
            println!("no GPU adapters (operations run on the CPU)");
        }
        for a in &adapters {
            println!("{a}");
        }
        if let Some(d) = default {
            println!(
                "default: {} ({}), bindings up to {} MiB, timestamps {}",
                d.name,
                d.backend,
                d.max_binding_size >> 20,
                if d.timestamps { "yes" } else { "no" }
            );
        }
    }
    Ok(())
}

fn integer_output(dtype: DType) -> CliResult<Output> {
    use DType::*;
    Ok(match dtype {
        F32 | F64 => Output::Float,
        U8 => Output::Integer {
            bits: 8,
            signed: false,
        },
        I8 => Output::Integer {
            bits: 8,
            signed: true,
        },
        U16 => Output::Integer {
            bits: 16,
            signed: false,
        },
        I16 => Output::Integer {
            bits: 16,
            signed: true,
        },
        U32 => Output::Integer {
            bits: 32,
            signed: false,
        },
        I32 => Output::Integer {
            bits: 32,
            signed: true,
        },
        U64 => Output::Integer {
            bits: 64,
            signed: false,
        },
        I64 => Output::Integer {
            bits: 64,
            signed: true,
        },
        Bool => {
            return Err(Failure(
                "a boolean output dtype is not supported for filters (use --dtype uint8 or float32)".into(),
            ));
        }
    })
}

fn convolve(cli: &Cli, args: &ConvolveArgs) -> CliResult {
    let image = gpuscope_io::read(&args.input)?;
    let input = image.array;
    if input.dtype() == DType::Bool && args.dtype.is_none() {
        return Err(Failure(format!(
            "{}: boolean input; give --dtype uint8 or --dtype float32 for the output",
            args.input.display()
        )));
    }
    let out_dtype = args.dtype.unwrap_or(input.dtype());
    let output = integer_output(out_dtype)?;
    let ndim = input.ndim();
    let filter = match (&args.gaussian, &args.kernel) {
        (Some(sigma), _) => Filter::gaussian(ndim, sigma, args.truncate)?,
        (None, Some(k)) => {
            let kernel = gpuscope_io::read(k)?.array;
            let w = kernel.to_f64_vec();
            if args.correlate {
                Filter::correlate(ndim, &w, &kernel.shape)?
            } else {
                Filter::convolve(ndim, &w, &kernel.shape)?
            }
        }
        (None, None) => return Err(Failure("give --gaussian SIGMA or --kernel K.npy".into())),
    };
    let boundary = Boundary {
        mode: args.mode,
        cval: args.cval,
    };
    let engine = Engine::open(cli)?;
    let start = Instant::now();
    let result = match &engine {
        Engine::Gpu(gpu) => {
            let values = pollster::block_on(filters::apply(
                gpu,
                &filter,
                &input.to_f32_vec(),
                &input.shape,
                boundary,
                output,
            ))?;
            Array::from_f32(input.shape.clone(), values)?
        }
        Engine::Cpu => {
            let values =
                filters::cpu::apply(&filter, &input.to_f64_vec(), &input.shape, boundary, output)?;
            Array::from_f64(input.shape.clone(), values)?
        }
    };
    let elapsed = start.elapsed().as_secs_f64() * 1e3;
    let result = result.cast(out_dtype);
    gpuscope_io::write(&args.output, &result)?;
    if args.json {
        println!(
            "{}",
            json!({
                "shape": result.shape, "dtype": out_dtype.name(), "device": engine.name(),
                "kernel_ms": engine.kernel_ms(), "total_ms": elapsed,
            })
        );
    }
    Ok(())
}

fn samples(a: &Array) -> CliResult<Samples<'_>> {
    Ok(match &a.data {
        ArrayData::U8(v) => Samples::U8(v),
        ArrayData::I8(v) => Samples::I8(v),
        ArrayData::U16(v) => Samples::U16(v),
        ArrayData::I16(v) => Samples::I16(v),
        ArrayData::U32(v) => Samples::U32(v),
        ArrayData::I32(v) => Samples::I32(v),
        ArrayData::F32(v) => Samples::F32(v),
        ArrayData::U64(v) => Samples::U64(v),
        ArrayData::I64(v) => Samples::I64(v),
        ArrayData::F64(v) => Samples::F64(v),
        ArrayData::Bool(_) => {
            return Err(Failure("the input is already a boolean mask".into()));
        }
    })
}

fn threshold_cmd(cli: &Cli, input: &Path, output: &Path, above: f64, json: bool) -> CliResult {
    let image = gpuscope_io::read(input)?;
    let a = image.array;
    let engine = Engine::open(cli)?;
    let s = samples(&a)?;
    let start = Instant::now();
    let mask = match &engine {
        Engine::Gpu(gpu) => pollster::block_on(threshold::threshold_above(gpu, s, above))?,
        Engine::Cpu => threshold::cpu::threshold_above(s, above)?,
    };
    let elapsed = start.elapsed().as_secs_f64() * 1e3;
    let count = mask.iter().filter(|&&m| m).count();
    let result = Array::from_bool(a.shape.clone(), mask)?;
    gpuscope_io::write(output, &result)?;
    if json {
        println!(
            "{}",
            json!({
                "shape": a.shape, "n_above": count, "device": engine.name(),
                "kernel_ms": engine.kernel_ms(), "total_ms": elapsed,
            })
        );
    }
    Ok(())
}

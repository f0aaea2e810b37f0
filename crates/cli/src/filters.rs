//! Filter commands: convolve (Gaussian or any kernel).

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use gpuscope_core::filters::{self, Boundary, Filter, Mode};
use gpuscope_io::{Array, DType};
use serde_json::json;

use crate::common::{CliResult, Engine, Failure, integer_output};
use crate::{Cli, parse_dtype, parse_mode};

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
    #[arg(long, default_value = "reflect", value_parser = parse_mode)]
    pub mode: Mode,
    /// Value outside the image in constant mode.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub cval: f64,
    /// Gaussian radius in sigmas: int(truncate * sigma + 0.5) taps each side.
    #[arg(long, default_value_t = 4.0)]
    pub truncate: f64,
    /// Output dtype (numpy name); default: the input's, as scipy.
    #[arg(long, value_name = "DTYPE", value_parser = parse_dtype)]
    pub dtype: Option<DType>,
    #[arg(long)]
    pub json: bool,
}

pub fn convolve(cli: &Cli, args: &ConvolveArgs) -> CliResult {
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

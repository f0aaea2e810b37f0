//! `normalize`: flat/dark correction of tomography projections (tomopy's
//! `normalize`, Mantid Imaging's flat-fielding). Projections stream slice
//! by slice on the GPU path; an NXtomo file gives projections, flats and
//! darks by its `image_key`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use gpuscope_core::stream::{SliceSink, SliceSource};
use gpuscope_core::tomo::{self, AVERAGINGS, Averaging, Fields, NormalizeParams};
use gpuscope_io::{Array, DType};
use serde_json::json;

use crate::Cli;
use crate::common::{CliResult, Engine, Failure, read_image};
use crate::filters::stream_output;
use crate::stream::{ProgressBar, StackReader, StackWriter};

#[derive(Args)]
pub struct NormalizeArgs {
    /// Projections: a stack (projection, row, column) or one 2-D projection;
    /// an NXtomo file's projections are its image_key 0 frames.
    pub input: PathBuf,
    pub output: PathBuf,
    /// Flat (open-beam) frames; default: an NXtomo input's image_key 1 frames.
    #[arg(long, value_name = "FLATS")]
    pub flat: Option<PathBuf>,
    /// Dark frames; default: an NXtomo input's image_key 2 frames.
    #[arg(long, value_name = "DARKS")]
    pub dark: Option<PathBuf>,
    /// Largest value of the result (tomopy's cutoff); default: none (no limit).
    #[arg(long, allow_negative_numbers = true)]
    pub cutoff: Option<f64>,
    /// How the flats and darks are combined per pixel: mean or median.
    #[arg(long, default_value_t = NormalizeParams::default().averaging, value_parser = parse_averaging)]
    pub averaging: Averaging,
    #[arg(long)]
    pub json: bool,
}

impl NormalizeArgs {
    /// The catalogue's parameter type of these arguments.
    pub fn params(&self) -> NormalizeParams {
        NormalizeParams {
            cutoff: self.cutoff,
            averaging: self.averaging,
        }
    }
}

fn parse_averaging(s: &str) -> Result<Averaging, String> {
    match s {
        "mean" => Ok(Averaging::Mean),
        "median" => Ok(Averaging::Median),
        _ => Err(format!("give one of {}", AVERAGINGS.join(", "))),
    }
}

/// Which frames of the input are projections, flats and darks.
struct Frames {
    projections: Vec<usize>,
    flats: Vec<usize>,
    darks: Vec<usize>,
}

pub fn normalize(cli: &Cli, args: &NormalizeArgs) -> CliResult {
    let start = Instant::now();
    let params = args.params();
    params.validate()?;
    let input = args.input.to_string_lossy();
    let reader = StackReader::open(&args.input)?;
    let key = match &reader {
        Some(StackReader::Hdf5(h)) => h.detector()?.image_key,
        _ => None,
    };
    let Some(mut reader) = reader else {
        return normalize_image(cli, args, &params, start);
    };
    let shape = reader.shape();
    let frames = match &key {
        Some(key) => from_image_key(key, shape[0], &input)?,
        None => Frames {
            projections: (0..shape[0]).collect(),
            flats: Vec::new(),
            darks: Vec::new(),
        },
    };
    let plane = [shape[1], shape[2]];
    let flats = field_frames(
        &mut reader,
        args.flat.as_deref(),
        &frames.flats,
        plane,
        "flat",
        "--flat",
    )?;
    let darks = field_frames(
        &mut reader,
        args.dark.as_deref(),
        &frames.darks,
        plane,
        "dark",
        "--dark",
    )?;
    let fields = Fields::new(&flats.0, &darks.0, plane, params.averaging)?;
    drop((flats.0, darks.0));
    let out_shape = vec![frames.projections.len(), plane[0], plane[1]];
    let engine = Engine::open(cli)?;
    let streamed = match &engine {
        Engine::Gpu(gpu) if stream_output(&args.output) => {
            let Some(writer) = StackWriter::create(&args.output, &out_shape, DType::F32)? else {
                return Err(Failure("stacks are written as .npy or .tif".into()));
            };
            let mut bar = ProgressBar::new(plane[0] * plane[1] * reader.dtype().size_bytes());
            let mut source = Selected {
                reader,
                frames: frames.projections.clone(),
            };
            let mut sink = F32Sink { writer, plane };
            pollster::block_on(tomo::gpu::normalize_stream(
                gpu,
                &out_shape,
                &fields,
                &params,
                &mut source,
                &mut sink,
                &mut |done, total| bar.update(done, total),
            ))?;
            sink.writer.finish()?;
            true
        }
        _ => {
            let mut data = Vec::with_capacity(out_shape.iter().product());
            Selected {
                reader,
                frames: frames.projections.clone(),
            }
            .read(0..out_shape[0], &mut data)?;
            let result = run(&engine, &data, &out_shape, &fields, &params)?;
            drop(data);
            gpuscope_io::write(&args.output, &Array::from_f32(out_shape.clone(), result)?)?;
            false
        }
    };
    if args.json {
        println!(
            "{}",
            json!({
                "shape": out_shape, "dtype": "float32", "projections": frames.projections.len(),
                "flats": flats.1, "darks": darks.1, "device": engine.name(), "backend": engine.backend(),
                "kernel_ms": engine.kernel_ms(), "total_ms": start.elapsed().as_secs_f64() * 1e3,
                "streamed": streamed,
            })
        );
    }
    Ok(())
}

/// A 2-D projection (or any image the stack readers do not stream).
fn normalize_image(
    cli: &Cli,
    args: &NormalizeArgs,
    params: &NormalizeParams,
    start: Instant,
) -> CliResult {
    let image = read_image(&args.input)?.array;
    let shape = image.shape.clone();
    let plane = match shape[..] {
        [y, x] | [_, y, x] => [y, x],
        _ => {
            return Err(Failure(format!(
                "{}: projections of shape {shape:?}; give a 2-D projection or a 3-D stack (projection, row, column)",
                args.input.display()
            )));
        }
    };
    let data = image.to_f32_vec();
    drop(image);
    let flats = whole_field(args.flat.as_deref(), plane, "flat", "--flat")?;
    let darks = whole_field(args.dark.as_deref(), plane, "dark", "--dark")?;
    let fields = Fields::new(&flats.0, &darks.0, plane, params.averaging)?;
    let engine = Engine::open(cli)?;
    let result = run(&engine, &data, &shape, &fields, params)?;
    gpuscope_io::write(&args.output, &Array::from_f32(shape.clone(), result)?)?;
    if args.json {
        println!(
            "{}",
            json!({
                "shape": shape, "dtype": "float32", "flats": flats.1, "darks": darks.1,
                "device": engine.name(), "backend": engine.backend(), "kernel_ms": engine.kernel_ms(),
                "total_ms": start.elapsed().as_secs_f64() * 1e3, "streamed": false,
            })
        );
    }
    Ok(())
}

fn run(
    engine: &Engine,
    data: &[f32],
    shape: &[usize],
    fields: &Fields,
    params: &NormalizeParams,
) -> CliResult<Vec<f32>> {
    Ok(match engine {
        Engine::Gpu(gpu) => {
            pollster::block_on(tomo::gpu::normalize(gpu, data, shape, fields, params))?
        }
        Engine::Cpu => tomo::cpu::normalize(data, shape, fields, params)?,
    })
}

/// Projections, flats and darks by NXtomo's image_key (0, 1, 2; 3 invalid).
fn from_image_key(key: &[i64], frames: usize, input: &str) -> CliResult<Frames> {
    if key.len() != frames {
        return Err(Failure(format!(
            "{input}: image_key has {} entries for {frames} frames",
            key.len()
        )));
    }
    let with = |k: i64| -> Vec<usize> { (0..frames).filter(|&i| key[i] == k).collect() };
    let f = Frames {
        projections: with(0),
        flats: with(1),
        darks: with(2),
    };
    if f.projections.is_empty() {
        return Err(Failure(format!(
            "{input}: no projections (image_key 0) in the file"
        )));
    }
    Ok(f)
}

/// The float32 frames of a flat or dark field and their count: from the
/// option's file if given, else the input's `frames`.
fn field_frames(
    reader: &mut StackReader,
    file: Option<&Path>,
    frames: &[usize],
    plane: [usize; 2],
    what: &str,
    flag: &str,
) -> CliResult<(Vec<f32>, usize)> {
    if file.is_some() || frames.is_empty() {
        return whole_field(file, plane, what, flag);
    }
    let mut values = Vec::with_capacity(frames.len() * plane[0] * plane[1]);
    for &i in frames {
        values.extend(reader.read(i, 1)?.to_f32_vec());
    }
    Ok((values, frames.len()))
}

fn whole_field(
    file: Option<&Path>,
    plane: [usize; 2],
    what: &str,
    flag: &str,
) -> CliResult<(Vec<f32>, usize)> {
    let Some(file) = file else {
        return Err(Failure(format!(
            "no {what} frames: give {flag} FILE (or an NXtomo input whose image_key marks them)"
        )));
    };
    let a = read_image(file)?.array;
    let frames = match a.shape[..] {
        [y, x] if [y, x] == plane => 1,
        [n, y, x] if [y, x] == plane => n,
        _ => {
            return Err(Failure(format!(
                "{}: {what} frames of shape {:?}; the projections are {}x{}: give frames of the same size",
                file.display(),
                a.shape,
                plane[0],
                plane[1]
            )));
        }
    };
    Ok((a.to_f32_vec(), frames))
}

/// Chosen frames of a stack, read as float32 (numpy's astype(float32)).
struct Selected {
    reader: StackReader,
    frames: Vec<usize>,
}

impl SliceSource<f32> for Selected {
    fn read(&mut self, z: std::ops::Range<usize>, out: &mut Vec<f32>) -> gpuscope_core::Result<()> {
        for i in z {
            let Some(&frame) = self.frames.get(i) else {
                return Err(gpuscope_core::Error::InvalidInput(format!(
                    "no projection {i}"
                )));
            };
            let slab = self
                .reader
                .read(frame, 1)
                .map_err(|Failure(m)| gpuscope_core::Error::InvalidInput(m))?;
            out.extend(slab.to_f32_vec());
        }
        Ok(())
    }
}

struct F32Sink {
    writer: StackWriter,
    plane: [usize; 2],
}

impl SliceSink<f32> for F32Sink {
    fn write(&mut self, slices: &[f32]) -> gpuscope_core::Result<()> {
        let n = self.plane[0] * self.plane[1];
        let shape = vec![slices.len() / n.max(1), self.plane[0], self.plane[1]];
        let go = || -> CliResult {
            let slab = Array::from_f32(shape, slices.to_vec())?;
            self.writer.write(&slab)
        };
        go().map_err(|Failure(m)| gpuscope_core::Error::InvalidInput(m))
    }
}

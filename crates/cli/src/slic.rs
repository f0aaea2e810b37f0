//! `gpuscope slic`: skimage.segmentation.slic's parameters in kebab-case.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use gpuscope_core::keys::Samples;
use gpuscope_core::slic::{self, Segments, SlicParams};
use gpuscope_io::{Array, ArrayData};
use serde_json::json;

use crate::Cli;
use crate::common::{CliResult, Engine, Failure, samples};

#[derive(Args)]
pub struct SlicCmd {
    pub input: PathBuf,
    /// Labels (int32): .npy, .tif or .png.
    pub output: PathBuf,
    /// The approximate number of superpixels.
    #[arg(long, default_value_t = SlicParams::default().n_segments)]
    pub n_segments: usize,
    /// Balance of colour against space (higher: more compact superpixels).
    #[arg(long, default_value_t = SlicParams::default().compactness)]
    pub compactness: f64,
    #[arg(long, default_value_t = SlicParams::default().max_num_iter)]
    pub max_num_iter: usize,
    /// Gaussian smoothing: one value, or one per spatial axis (comma-separated).
    #[arg(long, value_name = "S[,S...]", default_value_t = Floats(SlicParams::default().sigma),
          value_parser = parse_list)]
    pub sigma: Floats,
    /// Voxel spacing, one per spatial axis (z,y,x or y,x).
    #[arg(long, value_name = "z,y,x", value_parser = parse_list)]
    pub spacing: Option<Floats>,
    /// The channel axis, or `none` for grayscale (scikit-image's default is
    /// -1: a 2-D image needs `--channel-axis none`).
    #[arg(long, value_name = "N|none", default_value_t = ChannelAxis(SlicParams::default().channel_axis),
          allow_hyphen_values = true, value_parser = parse_axis)]
    pub channel_axis: ChannelAxis,
    /// Convert RGB to Lab (the default for 3 channels).
    #[arg(long, conflicts_with = "no_convert2lab")]
    pub convert2lab: bool,
    #[arg(long)]
    pub no_convert2lab: bool,
    #[arg(long)]
    pub no_enforce_connectivity: bool,
    #[arg(long, default_value_t = SlicParams::default().min_size_factor)]
    pub min_size_factor: f64,
    #[arg(long, default_value_t = SlicParams::default().max_size_factor)]
    pub max_size_factor: f64,
    /// SLICO: per-superpixel adaptive colour scale.
    #[arg(long)]
    pub slic_zero: bool,
    /// 0 or 1.
    #[arg(long, default_value_t = SlicParams::default().start_label, allow_hyphen_values = true)]
    pub start_label: i32,
    /// Segment only where the mask (the image's spatial shape) is non-zero.
    #[arg(long, value_name = "M.npy")]
    pub mask: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug)]
pub struct ChannelAxis(Option<isize>);

impl std::fmt::Display for ChannelAxis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(a) => write!(f, "{a}"),
            None => f.write_str("none"),
        }
    }
}

fn parse_axis(s: &str) -> Result<ChannelAxis, String> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(ChannelAxis(None));
    }
    s.parse::<isize>()
        .map(|a| ChannelAxis(Some(a)))
        .map_err(|_| format!("'{s}' is not an axis (give e.g. -1, 0, or none)"))
}

/// A comma-separated list of numbers.
#[derive(Clone, Debug)]
pub struct Floats(pub Vec<f64>);

impl std::fmt::Display for Floats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text: Vec<String> = self.0.iter().map(f64::to_string).collect();
        f.write_str(&text.join(","))
    }
}

fn parse_list(s: &str) -> Result<Floats, String> {
    s.split(',')
        .map(|t| {
            t.trim()
                .parse::<f64>()
                .map_err(|_| format!("'{t}' is not a number in '{s}'"))
        })
        .collect::<Result<Vec<f64>, String>>()
        .map(Floats)
}

impl SlicCmd {
    pub fn params(&self, mask: Option<Vec<bool>>) -> SlicParams {
        SlicParams {
            n_segments: self.n_segments,
            compactness: self.compactness,
            max_num_iter: self.max_num_iter,
            sigma: self.sigma.0.clone(),
            spacing: self.spacing.as_ref().map(|f| f.0.clone()),
            channel_axis: self.channel_axis.0,
            convert2lab: if self.convert2lab {
                Some(true)
            } else if self.no_convert2lab {
                Some(false)
            } else {
                None
            },
            enforce_connectivity: !self.no_enforce_connectivity,
            min_size_factor: self.min_size_factor,
            max_size_factor: self.max_size_factor,
            slic_zero: self.slic_zero,
            start_label: self.start_label,
            mask,
        }
    }
}

/// Runs SLIC on an array with the engine; booleans count as 0/1.
pub fn run_slic(engine: &Engine, a: &Array, p: &SlicParams) -> CliResult<Segments> {
    let bytes: Vec<u8>;
    let s = match &a.data {
        ArrayData::Bool(v) => {
            bytes = v.iter().map(|&b| u8::from(b)).collect();
            Samples::U8(&bytes)
        }
        _ => samples(a)?,
    };
    Ok(match engine {
        Engine::Gpu(gpu) => pollster::block_on(slic::slic(gpu, s, &a.shape, p))?,
        Engine::Cpu => slic::cpu::slic(s, &a.shape, p)?,
    })
}

pub fn slic_cmd(cli: &Cli, args: &SlicCmd) -> CliResult {
    let a = crate::common::read_image(&args.input)?.array;
    let mask = match &args.mask {
        None => None,
        Some(path) => {
            let m = crate::common::read_image(path)?.array;
            let v: Vec<bool> = match &m.data {
                ArrayData::Bool(v) => v.clone(),
                _ => m.to_f64_vec().iter().map(|&x| x != 0.0).collect(),
            };
            Some(v)
        }
    };
    let engine = Engine::open(cli)?;
    if let Engine::Gpu(g) = &engine {
        g.reset_kernel_time();
    }
    let start = Instant::now();
    let seg = run_slic(&engine, &a, &args.params(mask))?;
    let kernel_ms = match &engine {
        Engine::Gpu(g) => g.kernel_ns_total().map(|ns| ns as f64 / 1e6),
        Engine::Cpu => None,
    };
    let total_ms = start.elapsed().as_secs_f64() * 1e3;
    if seg.labels.is_empty() {
        return Err(Failure("no labels were produced".into()));
    }
    gpuscope_io::write(
        &args.output,
        &Array::from_i32(seg.shape.clone(), seg.labels)?,
    )?;
    if args.json {
        println!(
            "{}",
            json!({
                "n_segments": seg.n_segments, "shape": seg.shape, "iterations": seg.iterations,
                "device": engine.name(), "backend": engine.backend(), "kernel_ms": kernel_ms, "total_ms": total_ms,
            })
        );
    }
    Ok(())
}

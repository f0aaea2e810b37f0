//! `gpuscope`, the native command line. The contract (commands, exit codes,
//! one-line errors, JSON summaries) is in docs/cli.md.
// Built as the argv fuzz target (crates/fuzz), check.rs holds the entry.
#![cfg_attr(fuzzing, no_main)]

mod bench;
#[cfg(any(test, fuzzing))]
pub(crate) mod check;
mod clipping;
mod common;
mod filters;
mod frames;
mod heap;
mod nexus;
mod ops;
mod runtime_dir;
mod segment;
mod slic;
mod spots;
mod spread;
mod stream;
mod tomo;
mod zarr_info;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use common::{CliResult, Failure};
use gpuscope_core::filters::Mode;
use gpuscope_core::{Gpu, GpuOptions};
use gpuscope_io::DType;
use serde_json::json;

#[cfg(not(fuzzing))]
#[global_allocator]
static HEAP: heap::Counting = heap::Counting;

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
    /// Spread stack filters and spot series over several adapters: `all`
    /// (every GPU; software ones only when there is no other), or names
    /// (substrings) and `#N` indices, comma-separated; a name repeated opens
    /// several contexts on one adapter.
    #[arg(
        long,
        global = true,
        value_name = "LIST",
        conflicts_with_all = ["adapter", "cpu"]
    )]
    adapters: Option<String>,
    /// Device memory the operations may use at once (bytes, or with K/M/G).
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_size)]
    memory_budget: Option<u64>,
    /// Shape of headerless .raw inputs, C order (e.g. 64,2048,2048); with
    /// --raw-dtype. Without them a .raw input needs its sidecar
    /// NAME.raw.json, which gpuscope writes beside every .raw output.
    #[arg(
        long,
        global = true,
        value_name = "N,N,..",
        value_delimiter = ',',
        requires = "raw_dtype"
    )]
    raw_shape: Option<Vec<usize>>,
    /// Sample type of .raw inputs (numpy name: uint16, float32, ...).
    #[arg(long, global = true, value_name = "DTYPE", value_parser = parse_dtype, requires = "raw_shape")]
    raw_dtype: Option<DType>,
    /// Bytes to skip at the start of .raw inputs (a foreign header).
    #[arg(long, global = true, value_name = "BYTES", requires = "raw_shape")]
    raw_offset: Option<u64>,
    /// Byte order of .raw inputs.
    #[arg(
        long,
        global = true,
        value_name = "ORDER",
        value_parser = ["little", "big"],
        requires = "raw_shape"
    )]
    raw_byte_order: Option<String>,
    /// Follow links in input files (HDF5 external links, virtual-dataset
    /// sources, Eiger data files, Zarr symlinks) to files outside the
    /// input's folder (a Zarr store: outside the store). Off by default:
    /// a file from elsewhere cannot make gpuscope read other files.
    #[arg(long, global = true)]
    allow_links_outside: bool,
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
    /// The operations: parameters, defaults, limits, reference functions.
    Ops {
        #[arg(long)]
        json: bool,
    },
    /// Gaussian filter or convolution with any kernel (scipy.ndimage semantics).
    Convolve(filters::ConvolveArgs),
    /// Median filter (scipy.ndimage.median_filter semantics, exact for every dtype).
    Median(filters::MedianArgs),
    /// Replace bright/dark outliers by the local median (Mantid Imaging, tomopy).
    Outliers(filters::OutliersArgs),
    /// Flat/dark correction of tomography projections (tomopy.normalize).
    Normalize(tomo::NormalizeArgs),
    /// Time the benchmark workloads on this machine's GPU.
    Bench(bench::BenchArgs),
    /// Pixels above a value, as a boolean mask (`image > value`), the value
    /// given or from kappa-sigma clipping (`--nsigma`).
    Threshold(segment::ThresholdCmd),
    /// Sigma-clipped statistics (astropy's sigma_clipped_stats).
    Clip(segment::ClipCmd),
    /// Connected components as int32 labels (scipy.ndimage.label numbering).
    Label(segment::LabelCmd),
    /// The workshop pipeline: clip, threshold, label, measure; a catalogue.
    Sources(segment::SourcesCmd),
    /// SLIC superpixels (skimage.segmentation.slic), 2-D and 3-D.
    Slic(slic::SlicCmd),
    /// X-ray diffraction spot finding (DIALS' dispersion thresholds, pixel for pixel).
    Spots(spots::SpotsCmd),
    /// Remove the temporary files and folders that killed gpuscope runs left
    /// in DIR (default: the current folder): only names of gpuscope's own
    /// pattern, owned by you, whose process is gone from this machine.
    Clean {
        dir: Option<PathBuf>,
        /// List them, remove nothing.
        #[arg(long)]
        dry_run: bool,
        #[arg(long)]
        json: bool,
    },
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse().map_err(|e: gpuscope_core::Error| e.to_string())
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    DType::from_name(s)
        .ok_or_else(|| format!("unknown dtype '{s}' (use a numpy name such as uint8 or float32)"))
}

pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
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

fn main() -> ExitCode {
    runtime_dir::ensure();
    let cli = Cli::parse();
    // Ctrl-C (or SIGTERM) mid-write: outputs go to temporary files renamed
    // only when complete; remove those so nothing partial is left behind.
    let _ = ctrlc::set_handler(|| {
        gpuscope_io::remove_unfinished_outputs();
        eprintln!("error: interrupted; no output file was written");
        interrupted_exit();
    });
    let result = run(cli);
    warn_stale_temp_files();
    heap::report();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(1)
        }
    }
}

/// Ends the process with status 130 from the Ctrl-C handler's thread.
/// `_exit`, not `exit`: `exit` runs the C library's exit handlers, and
/// Mesa's tear down the GL display while the main thread may still be
/// using it (wgpu then panics, and the process dies by a signal instead of
/// exiting with 130).
fn interrupted_exit() -> ! {
    #[cfg(unix)]
    // SAFETY: _exit only ends the process; the outputs were cleaned up and
    // the message written (stderr is unbuffered) before it.
    unsafe {
        libc::_exit(130)
    }
    #[cfg(not(unix))]
    std::process::exit(130)
}

/// One line naming the temporary files that killed runs left where this
/// one wrote (see docs/files.md) and the command that removes them.
fn warn_stale_temp_files() {
    let stale = gpuscope_io::take_stale_temp_files();
    if !stale.is_empty() {
        let names: Vec<String> = stale.iter().map(|p| p.display().to_string()).collect();
        let mut dirs: Vec<String> = stale
            .iter()
            .map(|p| {
                p.parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .map_or_else(|| ".".to_string(), |d| d.display().to_string())
            })
            .collect();
        dirs.dedup();
        let commands: Vec<String> = dirs
            .iter()
            .map(|d| format!("`gpuscope clean {d}`"))
            .collect();
        eprintln!(
            "warning: temporary files left by interrupted runs (their process is gone): {}; \
             {} removes them",
            names.join(", "),
            commands.join(", ")
        );
    }
}

fn run(cli: Cli) -> CliResult {
    common::set_raw_layout(&cli);
    common::set_read_options(gpuscope_io::ReadOptions {
        allow_links_outside: cli.allow_links_outside,
        // The streamed commands hold about 8 times the budget (memory.md):
        // a chunk that alone decodes to more is refused before it is read.
        max_chunk_bytes: cli
            .memory_budget
            .map(|b| usize::try_from(b.saturating_mul(8)).unwrap_or(usize::MAX)),
    });
    match &cli.command {
        Command::Info { file, json } => info(file, *json),
        Command::Devices { json } => devices(*json),
        Command::Ops { json } => ops::ops(*json),
        Command::Convolve(args) => filters::convolve(&cli, args),
        Command::Median(args) => filters::median(&cli, args),
        Command::Outliers(args) => filters::outliers(&cli, args),
        Command::Normalize(args) => tomo::normalize(&cli, args),
        Command::Bench(args) => bench::bench(&cli, args),
        Command::Threshold(args) => segment::threshold_cmd(&cli, args),
        Command::Clip(args) => segment::clip_cmd(&cli, args),
        Command::Label(args) => segment::label_cmd(&cli, args),
        Command::Sources(args) => segment::sources_cmd(&cli, args),
        Command::Slic(args) => slic::slic_cmd(&cli, args),
        Command::Spots(args) => spots::spots_cmd(&cli, args),
        Command::Clean { dir, dry_run, json } => clean(dir.as_deref(), *dry_run, *json),
    }
}

/// `gpuscope clean [DIR]`: the leftovers of killed runs, removed one by one
/// (each checked again just before).
fn clean(dir: Option<&Path>, dry_run: bool, json: bool) -> CliResult {
    let dir = dir.unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(Failure(format!(
            "{}: not a folder (give the folder of the interrupted run's outputs)",
            dir.display()
        )));
    }
    let found = gpuscope_io::stale_temporaries(dir);
    let mut removed = Vec::new();
    let mut failed = Vec::new();
    for p in &found {
        if dry_run {
            continue;
        }
        match gpuscope_io::remove_stale_temporary(p) {
            Ok(()) => removed.push(p.display().to_string()),
            Err(e) => failed.push(format!("{}: {e}", p.display())),
        }
    }
    let names: Vec<String> = found.iter().map(|p| p.display().to_string()).collect();
    if json {
        println!(
            "{}",
            json!({ "found": names, "removed": removed, "failed": failed, "dry_run": dry_run })
        );
    } else if names.is_empty() {
        println!(
            "no leftovers of interrupted gpuscope runs in {}",
            dir.display()
        );
    } else {
        let verb = if dry_run { "would remove" } else { "removed" };
        for n in if dry_run { &names } else { &removed } {
            println!("{verb} {n}");
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure(format!("cannot remove {}", failed.join("; "))))
    }
}

fn info(file: &Path, json: bool) -> CliResult {
    if gpuscope_io::hdf5::is_hdf5_name(&file.to_string_lossy()) {
        return nexus::info(file, json);
    }
    if gpuscope_io::zarr::is_zarr_name(&file.to_string_lossy()) {
        return zarr_info::info(file, json);
    }
    let image = common::read_image(file)?;
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
    // Every adapter opens and runs the conformance probe, so that one that
    // would give wrong answers is named here, with what it got wrong.
    let checks: Vec<Option<String>> = (0..adapters.len())
        .map(|i| {
            let options = GpuOptions {
                adapter: Some(format!("#{i}")),
                ..GpuOptions::default()
            };
            pollster::block_on(Gpu::new(options))
                .err()
                .map(|e| e.to_string())
        })
        .collect();
    let default = pollster::block_on(Gpu::new(GpuOptions::default())).map(|g| g.summary());
    if json {
        let d = default.as_ref().ok().map(|d| {
            json!({
                "name": d.name, "backend": d.backend, "type": d.device_type, "driver": d.driver,
                "max_binding_size": d.max_binding_size, "max_buffer_size": d.max_buffer_size,
                "memory_budget": d.memory_budget, "pool_limit": d.pool_limit,
                "timestamps": d.timestamps,
            })
        });
        let checks: Vec<_> = checks
            .iter()
            .enumerate()
            .map(|(i, e)| json!({ "adapter": format!("#{i}"), "usable": e.is_none(), "error": e }))
            .collect();
        println!(
            "{}",
            json!({
                "adapters": adapters, "checks": checks, "default": d,
                "default_error": default.as_ref().err().map(|e| e.to_string()),
            })
        );
    } else {
        if adapters.is_empty() {
            println!("no GPU adapters (operations run on the CPU)");
        }
        // `#N` picks that one (--adapter, --adapters), also among twins.
        for (i, (a, e)) in adapters.iter().zip(&checks).enumerate() {
            match e {
                None => println!("#{i} {a}"),
                Some(e) => println!("#{i} {a}: refused: {e}"),
            }
        }
        match default {
            Ok(d) => println!(
                "default: {} ({}), bindings up to {} MiB, memory budget {} MiB, buffer pool up to {} MiB, timestamps {}",
                d.name,
                d.backend,
                d.max_binding_size >> 20,
                d.memory_budget >> 20,
                d.pool_limit >> 20,
                if d.timestamps { "yes" } else { "no" }
            ),
            Err(e) => println!("default: none ({e}); operations run on the CPU"),
        }
    }
    Ok(())
}

//! What every command shares: the one-line failure, the engine choice
//! (GPU or CPU reference) and conversions from I/O arrays to core types.

use gpuscope_core::filters::Output;
use gpuscope_core::{Gpu, GpuOptions, Remedy, Samples, Setting};
use gpuscope_io::raw::RawLayout;
use gpuscope_io::{Array, ArrayData, DType, Format, Image};
use std::path::Path;
use std::sync::OnceLock;

use crate::Cli;

/// A failure reported as one `error: ...` line with exit status 1.
pub struct Failure(pub String);

impl<E: std::fmt::Display + 'static> From<E> for Failure {
    fn from(e: E) -> Self {
        // The core's errors carry typed remedies, worded here as flags.
        match (&e as &dyn std::any::Any).downcast_ref::<gpuscope_core::Error>() {
            Some(core) => Failure(core.render(cli_remedy)),
            None => Failure(e.to_string()),
        }
    }
}

/// A remedy in the command line's words.
pub fn cli_remedy(r: Remedy) -> String {
    match r {
        Remedy::UseCpu => "run with --cpu".into(),
        Remedy::LargerBudget => "give a larger --memory-budget".into(),
        Remedy::SmallerBudget => "try a smaller --memory-budget".into(),
        Remedy::OtherAdapter => "pick another --adapter (see `gpuscope devices`)".into(),
        Remedy::SmallerInput => "give a smaller input".into(),
        Remedy::Set {
            param,
            value: Setting::Nothing,
        } => format!("--{} none", param.replace('_', "-")),
        Remedy::Set {
            param,
            value: Setting::Off,
        } => format!("leave out --{}", param.replace('_', "-")),
    }
}

pub type CliResult<T = ()> = Result<T, Failure>;

/// Where an operation runs: the GPU, or the CPU reference.
pub enum Engine {
    Gpu(Box<Gpu>),
    Cpu,
}

impl Engine {
    pub fn open(cli: &Cli) -> CliResult<Engine> {
        if cli.cpu {
            return Ok(Engine::Cpu);
        }
        // With --adapters, commands that do not spread use the first one.
        let first = adapter_specs(cli)?.into_iter().next();
        let named = cli.adapter.is_some() || first.is_some();
        let options = GpuOptions {
            adapter: first.or_else(|| cli.adapter.clone()),
            memory_budget: cli.memory_budget,
            // The command line reports GPU time (--json, GPUSCOPE_PROFILE).
            ..GpuOptions::default()
        };
        match pollster::block_on(Gpu::new(options)) {
            Ok(gpu) => Ok(Engine::Gpu(Box::new(gpu))),
            // An adapter asked for by name and missing is the user's error.
            Err(e) if named => Err(e.into()),
            Err(e) => {
                eprintln!("warning: {e}; running on the CPU");
                Ok(Engine::Cpu)
            }
        }
    }

    /// The engine of a command that opened its `--adapters` contexts and
    /// runs on one of them: the first, or the usual adapter when none.
    pub fn first_of(cli: &Cli, mut contexts: Vec<Gpu>) -> CliResult<Engine> {
        if contexts.is_empty() {
            return Engine::open(cli);
        }
        Ok(Engine::Gpu(Box::new(contexts.swap_remove(0))))
    }

    pub fn name(&self) -> String {
        match self {
            Engine::Gpu(g) => g.summary().name,
            Engine::Cpu => "cpu".into(),
        }
    }

    /// The wgpu backend (Vulkan, Metal, Dx12, Gl, BrowserWebGpu) or `cpu`:
    /// one adapter can show up under several backends with one name.
    pub fn backend(&self) -> String {
        match self {
            Engine::Gpu(g) => g.summary().backend,
            Engine::Cpu => "cpu".into(),
        }
    }

    pub fn kernel_ms(&self) -> Option<f64> {
        match self {
            Engine::Gpu(g) => g.kernel_ns_total().map(|ns| ns as f64 / 1e6),
            Engine::Cpu => None,
        }
    }
}

/// The adapters `--adapters` names, one `GpuOptions::adapter` value per
/// context (empty without the option). `all`: every adapter that is not a
/// CPU rasteriser, or the software ones when there is nothing else, of one
/// backend (Vulkan, Metal or DX12 before GL: one GPU often shows up once
/// per backend).
pub fn adapter_specs(cli: &Cli) -> CliResult<Vec<String>> {
    let Some(list) = &cli.adapters else {
        return Ok(Vec::new());
    };
    let items: Vec<&str> = list.split(',').map(str::trim).collect();
    if items.iter().any(|s| s.is_empty()) {
        return Err(Failure(format!(
            "--adapters '{list}': give `all` or names separated by commas (see `gpuscope devices`)"
        )));
    }
    if items != ["all"] {
        if items.contains(&"all") {
            return Err(Failure(format!(
                "--adapters '{list}': `all` cannot be combined with names"
            )));
        }
        return Ok(items.into_iter().map(String::from).collect());
    }
    let found = gpuscope_core::engine::adapters();
    let any_hardware = found.iter().any(|a| !a.software);
    let usable: Vec<_> = found
        .into_iter()
        .filter(|a| a.software != any_hardware)
        .collect();
    let backend = ["Vulkan", "Metal", "Dx12", "Gl"]
        .into_iter()
        .find(|b| usable.iter().any(|a| a.backend == *b))
        .or_else(|| usable.first().map(|a| a.backend.as_str()))
        .map(String::from);
    let specs: Vec<String> = usable
        .iter()
        .filter(|a| Some(&a.backend) == backend.as_ref())
        .map(|a| format!("#{}", a.index))
        .collect();
    if specs.is_empty() {
        return Err(Failure(
            "--adapters all: this machine offers no GPU adapter (run without --adapters, or with --cpu)".into(),
        ));
    }
    Ok(specs)
}

/// The GPU contexts of `--adapters`: one per entry, each with its own
/// device and queue (several on one adapter when a name repeats). Empty
/// without the option.
pub fn open_contexts(cli: &Cli) -> CliResult<Vec<Gpu>> {
    open_contexts_from(cli, 0)
}

/// The contexts of `--adapters` after the first `skip` ones (those a
/// command opened as its [`Engine`]).
pub fn open_contexts_from(cli: &Cli, skip: usize) -> CliResult<Vec<Gpu>> {
    adapter_specs(cli)?
        .into_iter()
        .skip(skip)
        .map(|spec| {
            let options = GpuOptions {
                adapter: Some(spec.clone()),
                memory_budget: cli.memory_budget,
                ..GpuOptions::default()
            };
            pollster::block_on(Gpu::new(options))
                .map_err(|e| Failure(format!("--adapters: {}", e.render(cli_remedy))))
        })
        .collect()
}

/// `n` items split into `parts` contiguous ranges, sizes differing by at
/// most one, the larger ones first.
pub fn split_ranges(n: usize, parts: usize) -> Vec<std::ops::Range<usize>> {
    let parts = parts.clamp(1, n.max(1));
    let (q, r) = (n / parts, n % parts);
    let mut start = 0;
    (0..parts)
        .map(|k| {
            let len = q + usize::from(k < r);
            let range = start..start + len;
            start += len;
            range
        })
        .collect()
}

/// With GPUSCOPE_PROFILE set, the GPU time per entry point goes to stderr
/// when the command ends (where a workload spends its time).
impl Drop for Engine {
    fn drop(&mut self) {
        if let Engine::Gpu(g) = self {
            let rows = g.pass_profile();
            if !rows.is_empty() {
                eprintln!("profile: GPU time per entry point ({}):", g.summary().name);
                for (name, ms, n) in rows {
                    eprintln!("  {ms:10.3} ms  {n:6} passes  {name}");
                }
            }
        }
    }
}

pub fn integer_output(dtype: DType) -> CliResult<Output> {
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

pub fn samples(a: &Array) -> CliResult<Samples<'_>> {
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

/// This process's peak resident memory (VmHWM) in bytes, where the system
/// reports it (Linux); streamed commands print it to show their bound.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The layout `--raw-shape`/`--raw-dtype` give every .raw input, if given.
static RAW_FLAGS: OnceLock<Option<RawLayout>> = OnceLock::new();

pub fn set_raw_layout(cli: &Cli) {
    let layout = match (&cli.raw_shape, cli.raw_dtype) {
        (Some(shape), Some(dtype)) => Some(RawLayout {
            shape: shape.clone(),
            dtype,
            offset: cli.raw_offset.unwrap_or(0),
            big_endian: cli.raw_byte_order.as_deref() == Some("big"),
        }),
        _ => None,
    };
    let _ = RAW_FLAGS.set(layout);
}

/// What input files may link to (`--allow-links-outside`).
static READ_OPTIONS: OnceLock<gpuscope_io::ReadOptions> = OnceLock::new();

pub fn set_read_options(options: gpuscope_io::ReadOptions) {
    let _ = READ_OPTIONS.set(options);
}

/// The options every input is opened with.
pub fn read_options() -> gpuscope_io::ReadOptions {
    READ_OPTIONS.get().copied().unwrap_or_default()
}

pub fn is_raw(path: &Path) -> bool {
    gpuscope_io::format_from_name(&path.to_string_lossy()).is_ok_and(|f| f == Format::Raw)
}

/// The layout of the .raw file `path`: the flags, else its sidecar. Both
/// present and different is an error rather than a guess.
pub fn raw_layout(path: &Path) -> CliResult<RawLayout> {
    let flags = RAW_FLAGS.get().cloned().flatten();
    let sidecar = gpuscope_io::raw::read_sidecar(path)?;
    match (flags, sidecar) {
        (Some(f), Some(s)) if f != s => Err(Failure(format!(
            "{}: --raw-shape/--raw-dtype say {:?} {} but its sidecar {} says {:?} {} \
             (drop the flags, or fix or remove the sidecar)",
            path.display(),
            f.shape,
            f.dtype.name(),
            gpuscope_io::raw::sidecar_path(path).display(),
            s.shape,
            s.dtype.name()
        ))),
        (Some(layout), _) | (None, Some(layout)) => Ok(layout),
        (None, None) if !path.exists() => Err(Failure(format!(
            "{}: cannot open the file: it does not exist (check the path)",
            path.display()
        ))),
        (None, None) => Err(Failure(format!(
            "{}: a .raw file has no header, so its shape and dtype must be given \
             (add --raw-shape Z,Y,X --raw-dtype uint16, or a sidecar {})",
            path.display(),
            gpuscope_io::raw::sidecar_path(path).display()
        ))),
    }
}

/// Reads an input file whole; .raw files with [`raw_layout`].
pub fn read_image(path: &Path) -> CliResult<Image> {
    if is_raw(path) {
        return Ok(gpuscope_io::read_raw(path, &raw_layout(path)?)?);
    }
    Ok(gpuscope_io::read_with(path, &read_options())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remedies_name_only_the_command_lines_options() {
        let all = [
            Remedy::UseCpu,
            Remedy::LargerBudget,
            Remedy::SmallerBudget,
            Remedy::OtherAdapter,
            Remedy::SmallerInput,
            Remedy::Set {
                param: "channel_axis",
                value: Setting::Nothing,
            },
            Remedy::Set {
                param: "workshop",
                value: Setting::Off,
            },
        ];
        for r in all {
            let w = cli_remedy(r);
            for other in ["set_device", "=None", "=False", "gpuscope.", "_", "Run on"] {
                assert!(!w.contains(other), "{r:?} in the command line's words: {w}");
            }
        }
        let e = gpuscope_core::Error::NoAdapter("none found".into());
        assert_eq!(
            Failure::from(e).0,
            "no GPU adapter: none found; run with --cpu"
        );
    }
}

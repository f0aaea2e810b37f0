//! `gpuscope spots`: DIALS' spot finding on one frame or a series (many
//! files, a multi-page TIFF, an npy stack).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use gpuscope_core::spots::{self, Algorithm, Counts, Gain, Spot, SpotOptions, SpotResult};
use gpuscope_io::{Array, ArrayData};
use serde_json::{Value, json};

use crate::Cli;
use crate::common::{CliResult, Engine, Failure};

#[derive(Args)]
pub struct SpotsCmd {
    /// Frames: CBF (.cbf, .cbf.gz), TIFF (multi-page = a series), npy (2-D or a 3-D stack), ...
    #[arg(required = true, value_name = "IN")]
    pub inputs: Vec<PathBuf>,
    /// dispersion_extended (DIALS' default) or dispersion.
    #[arg(long, default_value = "dispersion_extended")]
    pub algorithm: String,
    /// Half-widths of the local window, rows,columns (3,3 = 7 x 7).
    #[arg(long, default_value = "3,3", value_name = "KY,KX")]
    pub kernel_size: String,
    #[arg(long, default_value_t = 6.0, allow_negative_numbers = true)]
    pub sigma_background: f64,
    #[arg(long, default_value_t = 3.0, allow_negative_numbers = true)]
    pub sigma_strong: f64,
    /// Fewest valid pixels in the window (0: the whole window).
    #[arg(long, default_value_t = 2)]
    pub min_local: usize,
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub global_threshold: f64,
    /// The detector gain: a number, or a per-pixel map (.npy of a frame's shape).
    #[arg(long, value_name = "G|GAIN.npy", allow_hyphen_values = true)]
    pub gain: Option<String>,
    /// Pixels to use (DIALS' convention): non-zero = valid, 0 = masked.
    /// Negative counts are masked anyway (detector gaps and bad pixels).
    #[arg(long, value_name = "M.npy")]
    pub mask: Option<PathBuf>,
    /// Spots with fewer pixels are dropped (DIALS: 3 for pixel-array detectors).
    #[arg(long, default_value_t = 3)]
    pub min_spot_size: usize,
    #[arg(long, default_value_t = 1000)]
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
}

/// All frames in the dtype they were read in (u16 and u32 stay packed).
enum Stack {
    U16(Vec<u16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
}

impl Stack {
    fn counts(&self) -> Counts<'_> {
        match self {
            Stack::U16(v) => Counts::U16(v),
            Stack::U32(v) => Counts::U32(v),
            Stack::I32(v) => Counts::I32(v),
        }
    }
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

/// Integer counts of an array; floats must hold integers.
fn to_i32(a: &Array, name: &str) -> CliResult<Vec<i32>> {
    let bad = || {
        Failure(format!(
            "{name}: spot finding needs integer detector counts between -2^31 and 2^31 (found {} data out of range or not whole numbers)",
            a.dtype().name()
        ))
    };
    let conv = |x: f64| -> Option<i32> {
        (x.fract() == 0.0 && x >= f64::from(i32::MIN) && x <= f64::from(i32::MAX))
            .then_some(x as i32)
    };
    let v: Option<Vec<i32>> = match &a.data {
        ArrayData::I32(v) => Some(v.clone()),
        ArrayData::U8(v) => Some(v.iter().map(|&x| i32::from(x)).collect()),
        ArrayData::I8(v) => Some(v.iter().map(|&x| i32::from(x)).collect()),
        ArrayData::I16(v) => Some(v.iter().map(|&x| i32::from(x)).collect()),
        ArrayData::U16(v) => Some(v.iter().map(|&x| i32::from(x)).collect()),
        ArrayData::U32(v) => v.iter().map(|&x| i32::try_from(x).ok()).collect(),
        ArrayData::U64(v) => v.iter().map(|&x| i32::try_from(x).ok()).collect(),
        ArrayData::I64(v) => v.iter().map(|&x| i32::try_from(x).ok()).collect(),
        ArrayData::F32(v) => v.iter().map(|&x| conv(f64::from(x))).collect(),
        ArrayData::F64(v) => v.iter().map(|&x| conv(x)).collect(),
        ArrayData::Bool(_) => None,
    };
    v.ok_or_else(bad)
}

/// Reads every input into one stack of frames of one shape.
fn read_frames(inputs: &[PathBuf]) -> CliResult<(Stack, usize, [usize; 2], bool)> {
    let mut arrays = Vec::with_capacity(inputs.len());
    let mut frame: Option<[usize; 2]> = None;
    let mut nz = 0;
    let mut any_stack = false;
    for path in inputs {
        let a = gpuscope_io::read(path)?.array;
        let name = path.display().to_string();
        let (z, hw) = match a.shape[..] {
            [h, w] => (1, [h, w]),
            [z, h, w] => (z, [h, w]),
            _ => {
                return Err(Failure(format!(
                    "{name}: shape {:?} is neither a frame (rows, cols) nor a series (frames, rows, cols)",
                    a.shape
                )));
            }
        };
        if let Some(f) = frame
            && f != hw
        {
            return Err(Failure(format!(
                "{name}: frames of {} x {} do not match the first input's {} x {}",
                hw[0], hw[1], f[0], f[1]
            )));
        }
        frame = Some(hw);
        nz += z;
        any_stack |= a.shape.len() == 3;
        arrays.push((a, name));
    }
    let hw = frame.ok_or_else(|| Failure("no input frames".into()))?;
    let same = |want: gpuscope_io::DType| arrays.iter().all(|(a, _)| a.dtype() == want);
    let stack = if same(gpuscope_io::DType::U16) {
        Stack::U16(
            arrays
                .into_iter()
                .flat_map(|(a, _)| match a.data {
                    ArrayData::U16(v) => v,
                    _ => Vec::new(),
                })
                .collect(),
        )
    } else if same(gpuscope_io::DType::U32) {
        Stack::U32(
            arrays
                .into_iter()
                .flat_map(|(a, _)| match a.data {
                    ArrayData::U32(v) => v,
                    _ => Vec::new(),
                })
                .collect(),
        )
    } else {
        let mut all = Vec::new();
        for (a, name) in &arrays {
            all.extend(to_i32(a, name)?);
        }
        Stack::I32(all)
    };
    Ok((stack, nz, hw, any_stack))
}

fn read_mask(path: &Path, n: usize) -> CliResult<Vec<bool>> {
    let a = gpuscope_io::read(path)?.array;
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
    let a = gpuscope_io::read(Path::new(s))?.array;
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
    let (stack, nz, [h, w], any_stack) = read_frames(&args.inputs)?;
    let n = h * w;
    let o = options(args, n)?;
    let mask = args.mask.as_deref().map(|p| read_mask(p, n)).transpose()?;
    let engine = Engine::open(cli)?;
    let start = Instant::now();
    let found: SpotResult = match &engine {
        Engine::Gpu(gpu) => pollster::block_on(spots::find_spots_with(
            gpu,
            stack.counts(),
            [nz, h, w],
            mask.as_deref(),
            &o,
            args.three_d,
            args.signal.is_some(),
        ))?,
        Engine::Cpu => spots::cpu::find_spots(
            stack.counts(),
            [nz, h, w],
            mask.as_deref(),
            &o,
            args.three_d,
        )?,
    };
    let seconds = start.elapsed().as_secs_f64();
    eprintln!(
        "spots: {nz} frame(s) of {h} x {w} in {seconds:.3} s ({:.1} frames/s) on {}",
        nz as f64 / seconds.max(1e-9),
        engine.name()
    );
    if let Some(path) = &args.signal {
        let shape = if nz == 1 && !any_stack {
            vec![h, w]
        } else {
            vec![nz, h, w]
        };
        let bytes: Vec<u8> = found.strong.iter().map(|&s| u8::from(s)).collect();
        gpuscope_io::write(path, &Array::new(shape, ArrayData::U8(bytes))?)?;
    }
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
        write_atomic(path, text.as_bytes())?;
    }
    if args.json {
        let mut summary = json!({
            "n_strong_pixels": found.n_strong,
            "n_spots": found.spots.len(),
            "n_frames": nz,
            "seconds": seconds,
            "frames_per_second": nz as f64 / seconds.max(1e-9),
            "device": engine.name(),
        });
        if let Some(ms) = engine.kernel_ms() {
            summary["kernel_ms"] = json!(ms);
        }
        println!("{summary}");
    }
    Ok(())
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

/// Writes through a temporary file and renames it: never a partial file.
fn write_atomic(path: &Path, bytes: &[u8]) -> CliResult {
    let tmp = path.with_extension("partial");
    let result = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Failure(format!("{}: {e}", path.display())));
    }
    Ok(())
}

/// bench.rs' timing closure: (workload, bytes, run, resident kernel ms).
pub type TimeFn<'a> =
    dyn FnMut(&str, usize, &mut dyn FnMut() -> CliResult, Option<f64>) -> CliResult + 'a;

/// The spot workloads of `gpuscope bench` (benchmarks.md): spots-eiger, one
/// Eiger 16M frame (int32 as the CBF holds it), dispersion_extended,
/// labelled and measured; spots-series, that frame repeated as uint16 (gaps
/// set to 0 and masked by a mask array, so the answer is the same), host
/// memory in to spot table out.
pub fn bench_spots(
    gpu: &gpuscope_core::Gpu,
    args: &crate::bench::BenchArgs,
    want: &dyn Fn(&str) -> bool,
    time: &mut TimeFn<'_>,
) -> CliResult {
    let path = args.data.join("diffraction/dlsnxs2cbf_therm_0001.cbf.gz");
    let a = gpuscope_io::read(&path)?.array;
    let (h, w) = (a.shape[0], a.shape[1]);
    let ArrayData::I32(frame) = a.data else {
        return Err(Failure(format!(
            "{}: expected int32 counts",
            path.display()
        )));
    };
    let o = SpotOptions::default();
    let n = h * w;
    if want("spots-eiger") {
        let mut found = 0;
        time(
            "spots-eiger",
            4 * n,
            &mut || {
                let r = pollster::block_on(spots::find_spots_with(
                    gpu,
                    Counts::I32(&frame),
                    [1, h, w],
                    None,
                    &o,
                    false,
                    false,
                ))?;
                found = r.spots.len();
                Ok(())
            },
            None,
        )?;
        eprintln!("spots-eiger: {found} spots");
    }
    if want("spots-series") {
        let nz = args.frames.max(1);
        let one: Vec<u16> = frame.iter().map(|&v| v.clamp(0, 65535) as u16).collect();
        let valid: Vec<bool> = frame.iter().map(|&v| v >= 0).collect();
        let mut series = Vec::with_capacity(nz * n);
        for _ in 0..nz {
            series.extend_from_slice(&one);
        }
        time(
            &format!("spots-series-{nz}"),
            2 * nz * n,
            &mut || {
                let t = Instant::now();
                let r = pollster::block_on(spots::find_spots_with(
                    gpu,
                    Counts::U16(&series),
                    [nz, h, w],
                    Some(&valid),
                    &o,
                    false,
                    false,
                ))?;
                eprintln!(
                    "spots-series: {nz} frames, {} spots, {:.1} frames/s",
                    r.spots.len(),
                    nz as f64 / t.elapsed().as_secs_f64()
                );
                Ok(())
            },
            None,
        )?;
    }
    Ok(())
}

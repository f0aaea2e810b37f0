//! `gpuscope bench`: the filter workloads of the benchmark suite timed on
//! this machine's GPU. Kernel time from timestamp queries (summed over every
//! submission of one call, min over repeats); end-to-end time from host array
//! in to host array out (median over repeats, after a warm-up).

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use gpuscope_core::filters::median::{self, Footprint, OutlierRemoval, Outliers};
use gpuscope_core::filters::{self, Boundary, Filter, Output};
use gpuscope_core::keys::SampleVec;
use gpuscope_core::slic::{self, SlicParams};
use gpuscope_core::stats::clip::{self, ClipOptions, ClipStats};
use gpuscope_core::{Gpu, Samples};
use serde_json::{Value, json};

use crate::common::{CliResult, Engine, Failure, open_contexts_from};
use crate::spread::SubFilter;

#[derive(Args)]
pub struct BenchArgs {
    /// Workloads to run (default: all; with the global --adapters the
    /// stack and spots-series workloads use every adapter): median-3, median-7, median-stack,
    /// outliers-stack, stack-roundtrip, gauss-2, conv-gauss15, kappa-sigma, slic-3d-L
    /// (or slic-3d-<L>), slic-2d-rgb, spots-eiger, spots-series,
    /// spots-series-disk, label-stream.
    #[arg(long, value_delimiter = ',')]
    pub only: Option<Vec<String>>,
    /// Repeats per workload.
    #[arg(long, default_value_t = 7)]
    pub repeat: usize,
    /// Slices of the stack workloads (benchmarks.md: 64).
    #[arg(long, default_value_t = 64)]
    pub slices: usize,
    /// Write the results as JSON to this file (also printed).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Volume edges L of the slic-3d-L workloads (`--only slic-3d-L` runs
    /// them all, `--only slic-3d-200` one).
    #[arg(long, value_delimiter = ',', default_value = "100,200,300,400,500")]
    pub slic_sizes: Vec<usize>,
    /// Directory holding blobs_<L>.npy, skimage's binary_blobs(L, n_dim=3,
    /// rng=2) written by bench/slic_peers.py; without it (or a file) a
    /// synthetic blob volume of the same size.
    #[arg(long, value_name = "DIR")]
    pub blobs_dir: Option<PathBuf>,
    /// The image of slic-2d-rgb.
    #[arg(long, default_value = "../shared/data/images/astronaut.png")]
    pub astronaut: PathBuf,
    /// The shared data folder (spots-eiger, spots-series read the Eiger frame).
    #[arg(long, default_value = "../shared/data")]
    pub data: PathBuf,
    /// Frames of the spots-series workloads (benchmarks.md: 200).
    #[arg(long, default_value_t = 200)]
    pub frames: usize,
    /// label-stream: planes of its blob stack (each 2048², uint8); its
    /// files (input, provisional and output labels: 9 bytes per pixel;
    /// `bytes` counts the 5 read and written)
    /// go to a temporary folder in --scratch.
    #[arg(long, default_value_t = 128)]
    pub label_planes: usize,
    /// label-stream: device memory per slab (the stack is labelled in
    /// slabs of at most SIZE / 5 pixels, disk to disk).
    #[arg(long, default_value = "256M", value_parser = crate::parse_size)]
    pub label_budget: u64,
    /// Folder for the label-stream files (default: the system's temp).
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// kappa-sigma: a 2-D float32 .npy image to clip (bench/segment_peers.py
    /// writes the benchmark's radio image with numpy); without it a
    /// synthetic image of the same recipe.
    #[arg(long, value_name = "NPY")]
    pub radio: Option<PathBuf>,
}

/// A blob volume like binary_blobs(L, n_dim=3): sums of waves with random
/// phases, thresholded at zero (about half the volume).
fn synthetic_blobs(l: usize) -> Vec<f32> {
    let r = uniform(9, 2);
    let f = 2.0 * std::f32::consts::PI * 10.0 / l as f32;
    let mut v = Vec::with_capacity(l * l * l);
    for z in 0..l {
        for y in 0..l {
            for x in 0..l {
                let (zf, yf, xf) = (z as f32 * f, y as f32 * f, x as f32 * f);
                let s = (zf + 6.0 * r[0]).sin() * (yf * 0.9 + 6.0 * r[1]).cos()
                    + (yf + 6.0 * r[2]).sin() * (xf * 1.1 + 6.0 * r[3]).cos()
                    + (xf + 6.0 * r[4]).sin() * (zf * 0.8 + 6.0 * r[5]).cos();
                v.push(if s > 0.0 { 1.0 } else { 0.0 });
            }
        }
    }
    v
}

/// Uniform values in [0, 1) (xorshift; the medians' work does not depend on
/// the values).
fn uniform(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

pub fn bench(cli: &crate::Cli, args: &BenchArgs) -> CliResult {
    let engine = Engine::open(cli)?;
    let Engine::Gpu(gpu) = &engine else {
        return Err(Failure("bench needs a GPU adapter".into()));
    };
    // --adapters: the stack and spot-series workloads are split over every
    // context (one z- or frame-range each, as the commands split them);
    // the others run on the first.
    let more = open_contexts_from(cli, 1)?;
    let gpus: Vec<&Gpu> = std::iter::once(gpu.as_ref()).chain(&more).collect();
    let spread = cli.adapters.is_some();
    let names: Vec<String> = gpus.iter().map(|g| g.summary().name).collect();
    let want = |name: &str| {
        args.only
            .as_ref()
            .is_none_or(|o| o.iter().any(|w| w == name))
    };
    let mut rows: Vec<Value> = Vec::new();
    let n2 = 2048 * 2048;
    let image = uniform(n2, 0);
    let reflect = Boundary::default();
    // Bring the GPU out of its idle clocks before anything is timed, and
    // again before each resident timing: the host-bound stack workloads
    // leave it idle long enough to clock down (measured on an H200: the
    // same Gaussian kernel 0.06 ms hot, 0.29 ms after the stacks).
    let fp3 = Footprint::size(2, &[3])?;
    let hot = |seconds: f64| -> CliResult {
        let warm = |gpu: &Gpu| -> CliResult {
            let t = std::time::Instant::now();
            while t.elapsed().as_secs_f64() < seconds {
                pollster::block_on(median::median_kernel_ms(
                    gpu,
                    &image,
                    &[2048, 2048],
                    &fp3,
                    reflect,
                    20,
                ))?;
            }
            Ok(())
        };
        // Every context at once (each its own device or queue).
        std::thread::scope(|s| {
            let w: Vec<_> = gpus.iter().map(|g| s.spawn(|| warm(g))).collect();
            w.into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Failure("warm-up failed".into())))
                })
                .collect::<CliResult<Vec<()>>>()
        })?;
        Ok(())
    };
    hot(1.0)?;
    // Our own read-and-write-once of the 2048² f32 image (a one-tap
    // correlation, timed like the others): the floor the memory-bound
    // 2048² kernels are reported against (`bandwidth_fraction`).
    let per_image = ["median-3", "median-7", "gauss-2", "conv-gauss15"];
    let copy_ms = if per_image.iter().any(|w| want(w)) {
        let one = Filter::convolve(2, &[1.0], &[1, 1])?;
        pollster::block_on(filters::kernel_ms(
            gpu,
            &one,
            &image,
            &[2048, 2048],
            reflect,
            args.repeat.max(30),
        ))?
    } else {
        None
    };
    // One workload: `run` performs the whole host-to-host call once;
    // `resident` times the kernels alone on data already on the device.
    let mut time = |name: &str,
                    bytes: usize,
                    run: &mut dyn FnMut() -> CliResult,
                    resident: Option<f64>|
     -> CliResult {
        run()?; // warm-up: pipelines compiled, buffers pooled
        let mut kernels = Vec::new();
        let mut walls = Vec::new();
        for _ in 0..args.repeat.max(1) {
            for g in &gpus {
                g.reset_kernel_time();
            }
            let t = Instant::now();
            run()?;
            walls.push(t.elapsed().as_secs_f64() * 1e3);
            // GPU time summed over the contexts.
            let ns: Option<u64> = gpus.iter().map(|g| g.kernel_ns_total()).sum();
            kernels.extend(ns.map(|ns| ns as f64 / 1e6));
        }
        walls.sort_by(f64::total_cmp);
        let kernel_ms = kernels.iter().cloned().reduce(f64::min);
        let mut row = json!({
            "workload": name, "device": engine.name(),
            "resident_kernel_ms": resident,
            "kernel_ms_in_stream": kernel_ms, "e2e_ms": walls[walls.len() / 2],
            "bytes": bytes,
        });
        if spread {
            row["adapters"] = json!(names);
            row["n_adapters"] = json!(gpus.len());
        }
        eprintln!("{row}");
        rows.push(row);
        Ok(())
    };
    for k in [3usize, 7] {
        let name = format!("median-{k}");
        if want(&name) {
            let fp = Footprint::size(2, &[k])?;
            hot(0.5)?;
            let resident = pollster::block_on(median::median_kernel_ms(
                gpu,
                &image,
                &[2048, 2048],
                &fp,
                reflect,
                args.repeat.max(30),
            ))?;
            time(
                &name,
                8 * n2,
                &mut || {
                    pollster::block_on(median::median_filter(
                        gpu,
                        Samples::F32(&image),
                        &[2048, 2048],
                        &fp,
                        reflect,
                    ))?;
                    Ok(())
                },
                resident,
            )?;
        }
    }
    if want("median-stack") || want("outliers-stack") || want("stack-roundtrip") {
        let nz = args.slices;
        let stack = uniform(nz * n2, 1);
        let shape = [nz, 2048, 2048];
        // With --adapters, one z-range (and the footprint's halo) per context.
        let split = |halo: usize, f: &SubFilter<'_, f32, SampleVec>| -> CliResult {
            if spread {
                crate::spread::spread_in_memory(&gpus, &stack, &shape, halo, &|g, d, sh| match f(
                    g, d, sh,
                )? {
                    SampleVec::F32(v) => Ok(v),
                    _ => Err(Failure("float32 in, another dtype out".into())),
                })?;
            } else {
                f(gpu, &stack, &shape)?;
            }
            Ok(())
        };
        if want("median-stack") {
            let fp = Footprint::size(3, &[1, 3, 3])?;
            time(
                "median-stack",
                8 * nz * n2,
                &mut || {
                    split(fp.reach()[0], &|g, d, sh| {
                        Ok(pollster::block_on(median::median_filter(
                            g,
                            Samples::F32(d),
                            sh,
                            &fp,
                            reflect,
                        ))?)
                    })
                },
                None,
            )?;
        }
        if want("stack-roundtrip") {
            // A one-element footprint: the stack up and down through the
            // same streaming path with a trivial kernel, i.e. the bus limit
            // of this path.
            let fp = Footprint::size(3, &[1])?;
            time(
                "stack-roundtrip",
                8 * nz * n2,
                &mut || {
                    split(0, &|g, d, sh| {
                        Ok(pollster::block_on(median::median_filter(
                            g,
                            Samples::F32(d),
                            sh,
                            &fp,
                            reflect,
                        ))?)
                    })
                },
                None,
            )?;
        }
        if want("outliers-stack") {
            let r = OutlierRemoval::new(0.5, 3, Outliers::Bright)?;
            time(
                "outliers-stack",
                8 * nz * n2,
                &mut || {
                    split(0, &|g, d, sh| {
                        Ok(pollster::block_on(median::remove_outliers(
                            g,
                            Samples::F32(d),
                            sh,
                            &r,
                        ))?)
                    })
                },
                None,
            )?;
        }
    }
    if want("gauss-2") {
        let f = Filter::gaussian(2, &[2.0], 4.0)?;
        hot(0.5)?;
        let resident = pollster::block_on(filters::kernel_ms(
            gpu,
            &f,
            &image,
            &[2048, 2048],
            reflect,
            args.repeat.max(30),
        ))?;
        time(
            "gauss-2",
            8 * n2,
            &mut || {
                pollster::block_on(filters::apply(
                    gpu,
                    &f,
                    &image,
                    &[2048, 2048],
                    reflect,
                    Output::Float,
                ))?;
                Ok(())
            },
            resident,
        )?;
    }
    if want("conv-gauss15") {
        let mut deltas = vec![0f32; n2];
        for y in (8..2048).step_by(16) {
            for x in (8..2048).step_by(16) {
                deltas[y * 2048 + x] = 1.0;
            }
        }
        let g: Vec<f64> = (0..225)
            .map(|i| {
                let (y, x) = ((i / 15) as f64 / 3.5 - 2.0, (i % 15) as f64 / 3.5 - 2.0);
                (-(x * x + y * y) / 2.0).exp()
            })
            .collect();
        let f = Filter::convolve(2, &g, &[15, 15])?;
        hot(0.5)?;
        let resident = pollster::block_on(filters::kernel_ms(
            gpu,
            &f,
            &deltas,
            &[2048, 2048],
            reflect,
            args.repeat.max(30),
        ))?;
        time(
            "conv-gauss15",
            8 * n2,
            &mut || {
                pollster::block_on(filters::apply(
                    gpu,
                    &f,
                    &deltas,
                    &[2048, 2048],
                    reflect,
                    Output::Float,
                ))?;
                Ok(())
            },
            resident,
        )?;
    }
    let clipped = if want("kappa-sigma") {
        hot(0.5)?;
        Some(kappa_sigma_workload(gpu, args, &mut time)?)
    } else {
        None
    };
    for &l in &args.slic_sizes {
        let name = format!("slic-3d-{l}");
        if !(want(&name) || want("slic-3d-L")) {
            continue;
        }
        let file = args
            .blobs_dir
            .as_ref()
            .map(|d| d.join(format!("blobs_{l}.npy")));
        let (volume, source) = match file.filter(|f| f.exists()) {
            Some(f) => (gpuscope_io::read(&f)?.array.to_f32_vec(), "binary_blobs"),
            None => (synthetic_blobs(l), "synthetic"),
        };
        let p = SlicParams {
            n_segments: l * l * l / 125,
            compactness: 1.0,
            max_num_iter: 5,
            channel_axis: None,
            ..SlicParams::default()
        };
        eprintln!("slic-3d-{l}: {source} volume");
        time(
            &name,
            8 * l * l * l,
            &mut || {
                pollster::block_on(slic::slic(gpu, Samples::F32(&volume), &[l, l, l], &p))?;
                Ok(())
            },
            None,
        )?;
    }
    if want("slic-2d-rgb") {
        let a = gpuscope_io::read(&args.astronaut)?.array;
        let p = SlicParams {
            n_segments: 1000,
            compactness: 10.0,
            ..SlicParams::default()
        };
        let data = a.to_f32_vec();
        let shape = a.shape.clone();
        let rgb: Vec<u8> = data.iter().map(|&v| v as u8).collect();
        time(
            "slic-2d-rgb",
            rgb.len() + 4 * shape[0] * shape[1],
            &mut || {
                pollster::block_on(slic::slic(gpu, Samples::U8(&rgb), &shape, &p))?;
                Ok(())
            },
            None,
        )?;
    }
    if want("label-stream") {
        label_stream_workload(gpu, args, &mut time)?;
    }
    if want("spots-eiger") || want("spots-series") || want("spots-series-disk") {
        crate::spots::bench_spots(&gpus, spread, args, &want, &mut time)?;
    }
    if let Some(c) = clipped {
        for row in rows.iter_mut().filter(|r| r["workload"] == "kappa-sigma") {
            row["n_kept"] = json!(c.n_kept);
            row["iterations"] = json!(c.iterations);
            row["median"] = json!(c.median);
            row["std"] = json!(c.std);
        }
    }
    if let Some(copy) = copy_ms {
        for row in rows.iter_mut() {
            let name = row["workload"].as_str().unwrap_or_default();
            if let (true, Some(k)) = (
                per_image.contains(&name),
                row["resident_kernel_ms"].as_f64(),
            ) {
                row["copy_kernel_ms"] = json!(copy);
                row["bandwidth_fraction"] = json!(copy / k);
            }
        }
        rows.push(json!({
            "workload": "copy-2048", "device": engine.name(),
            "resident_kernel_ms": copy, "bytes": 8 * n2,
            "gb_per_s": 8.0 * n2 as f64 / copy / 1e6,
        }));
    }
    let mut all = json!({ "device": gpu.summary().name, "results": rows });
    if spread {
        all["adapters"] = json!(names);
    }
    println!("{all}");
    if let Some(path) = &args.json {
        std::fs::write(path, all.to_string())
            .map_err(|e| Failure(format!("{}: {e}", path.display())))?;
    }
    Ok(())
}

/// `time(name, bytes, run, resident)` of [`bench`].
type Timer<'a> =
    dyn FnMut(&str, usize, &mut dyn FnMut() -> CliResult, Option<f64>) -> CliResult + 'a;

/// kappa-sigma (benchmarks.md, issue 4): sigma-clipped statistics of a
/// 2048² float32 radio image until convergence with the workshop's strict
/// comparisons (`ClipOptions::workshop(3.0)`, the CuPy loop of
/// bench/segment_peers.py), host array in, statistics out. Kernel time:
/// the timestamps of every clipping pass of the call (the upload is a copy,
/// not a pass). `bytes`: the image read once per round.
fn kappa_sigma_workload(gpu: &Gpu, args: &BenchArgs, time: &mut Timer<'_>) -> CliResult<ClipStats> {
    let image = match &args.radio {
        Some(path) => {
            let a = gpuscope_io::read(path)?.array;
            if a.shape.len() != 2 {
                return Err(Failure(format!(
                    "--radio {}: a 2-D image is needed, this one has shape {:?}",
                    path.display(),
                    a.shape
                )));
            }
            a.to_f32_vec()
        }
        None => radio_image(),
    };
    let o = ClipOptions::workshop(3.0);
    let mut stats = None;
    let mut rounds = 0;
    time(
        "kappa-sigma",
        4 * image.len(),
        &mut || {
            let s = pollster::block_on(clip::sigma_clipped_stats(gpu, &image, None, &o))?;
            rounds = s.iterations as usize + 1;
            stats = Some(s);
            Ok(())
        },
        None,
    )?;
    eprintln!("kappa-sigma: {rounds} rounds of the clipping kernels per call");
    stats.ok_or_else(|| Failure("kappa-sigma did not run".into()))
}

/// The radio image of benchmarks.md rebuilt without numpy: N(0, 0.0133)
/// noise (Box-Muller on xorshift) plus 185 Gaussian sources (sigma 1.5 px,
/// 13×13, amplitudes 0.1-2). Same statistics, not the same pixels.
fn radio_image() -> Vec<f32> {
    let n = 2048;
    let u = uniform(2 * n * n + 3 * 185, 41);
    let mut img: Vec<f32> = (0..n * n)
        .map(|i| {
            let (a, b) = (f64::from(u[2 * i]).max(1e-7), f64::from(u[2 * i + 1]));
            let g = (-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos();
            (0.0133 * g) as f32
        })
        .collect();
    let s = &u[2 * n * n..];
    for k in 0..185 {
        let y = 20 + (s[3 * k] * 2008.0) as usize;
        let x = 20 + (s[3 * k + 1] * 2008.0) as usize;
        let amp = 0.1 + 1.9 * s[3 * k + 2];
        for dy in -6i32..=6 {
            for dx in -6i32..=6 {
                let psf = (-((dx * dx + dy * dy) as f32) / (2.0 * 1.5 * 1.5)).exp();
                let p = (y as i32 + dy) as usize * n + (x as i32 + dx) as usize;
                img[p] += amp * psf;
            }
        }
    }
    img
}

/// label-stream: a blob stack of `--label-planes` × 2048² uint8 labelled
/// disk to disk (.npy in, int32 .npy out, 6-connected) in slabs of the
/// `--label-budget`, timed from the file in to the file out.
fn label_stream_workload(
    gpu: &gpuscope_core::Gpu,
    args: &BenchArgs,
    time: &mut Timer<'_>,
) -> CliResult {
    use gpuscope_core::segment::label;
    use gpuscope_io::npy::NpyWriter;
    use gpuscope_io::{Array, ArrayData, DType};
    let (nz, n) = (args.label_planes.max(1), 2048);
    let base = args.scratch.clone().unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("gpuscope-label-stream-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| Failure(format!("{}: {e}", dir.display())))?;
    let input = dir.join("blobs.npy");
    let output = dir.join("labels.npy");
    let result = (|| -> CliResult {
        // Blobs as in synthetic_blobs, from per-axis tables (separable).
        let wave = |k: usize, f: f32, ph: f32, sin: bool| -> Vec<f32> {
            (0..k)
                .map(|i| {
                    let t = i as f32 * f + ph;
                    if sin { t.sin() } else { t.cos() }
                })
                .collect()
        };
        let r = uniform(9, 3);
        let f = 2.0 * std::f32::consts::PI * 40.0 / n as f32;
        let (za, zb) = (
            wave(nz, f, 6.0 * r[0], true),
            wave(nz, f * 0.8, 6.0 * r[5], false),
        );
        let (ya, yb) = (
            wave(n, f * 0.9, 6.0 * r[1], false),
            wave(n, f, 6.0 * r[2], true),
        );
        let (xa, xb) = (
            wave(n, f * 1.1, 6.0 * r[3], false),
            wave(n, f, 6.0 * r[4], true),
        );
        let mut w = NpyWriter::create(&input, vec![nz, n, n], DType::U8)?;
        for z in 0..nz {
            let mut plane = Vec::with_capacity(n * n);
            for y in 0..n {
                for x in 0..n {
                    let v = za[z] * ya[y] + yb[y] * xa[x] + xb[x] * zb[z];
                    plane.push(u8::from(v > 0.3));
                }
            }
            w.write_slab(&Array::new(vec![1, n, n], ArrayData::U8(plane))?)?;
        }
        w.finish()?;
        let max = (args.label_budget / 5) as usize;
        eprintln!(
            "label-stream: {nz}×{n}² uint8 in slabs of {} planes",
            (max.min(label::max_box(gpu)) / (n * n)).max(1)
        );
        time(
            "label-stream",
            nz * n * n * 5,
            &mut || {
                let Some(reader) = crate::stream::StackReader::open_stack(&input)? else {
                    return Err(Failure("the label-stream input is not a stack".into()));
                };
                crate::segment::label_stack(gpu, reader, &output, 1, 0.0, max)?;
                Ok(())
            },
            None,
        )
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

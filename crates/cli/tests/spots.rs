//! `gpuscope spots` against the reference masks of the three real frames
//! (tests/golden/spots, from the numpy port in make_goldens.py), the GPU
//! against the CPU reference on crops of them, series inputs, and errors.

mod common;

use common::{data, gpuscope, repo, scratch, stderr};
use gpuscope_io::{Array, ArrayData};
use serde_json::Value;

const FRAMES: [&str; 3] = [
    "DLS_I03_smargon_0001",
    "DLS_I23_P12M_thau_00001",
    "dlsnxs2cbf_therm_0001",
];

fn frame_path(stem: &str) -> String {
    data(&format!("diffraction/{stem}.cbf.gz"))
        .display()
        .to_string()
}

/// The golden strong pixels as a mask of `shape`.
fn golden(stem: &str, algorithm: &str, shape: &[usize]) -> Vec<bool> {
    let p = repo().join(format!("tests/golden/spots/{stem}_{algorithm}.npy"));
    let a = gpuscope_io::read(&p).unwrap().array;
    let ArrayData::U16(rc) = a.data else {
        panic!("golden coordinates are uint16")
    };
    let mut m = vec![false; shape[0] * shape[1]];
    for p in rc.chunks_exact(2) {
        m[p[0] as usize * shape[1] + p[1] as usize] = true;
    }
    m
}

fn read_mask(path: &std::path::Path) -> (Vec<usize>, Vec<bool>) {
    let a = gpuscope_io::read(path).unwrap().array;
    let ArrayData::U8(v) = a.data else {
        panic!("--signal writes uint8")
    };
    (a.shape, v.iter().map(|&x| x != 0).collect())
}

fn run(args: &[&str]) -> Value {
    let o = gpuscope(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn check_against_golden(stem: &str, algorithm: &str, cpu: bool) {
    let dir = scratch(&format!("spots_{stem}_{algorithm}_{cpu}"));
    let sig = dir.join("signal.npy");
    let input = frame_path(stem);
    let mut args = vec![];
    if cpu {
        args.push("--cpu");
    }
    args.extend([
        "spots",
        &input,
        "--algorithm",
        algorithm,
        "--json",
        "--signal",
    ]);
    let sig_s = sig.display().to_string();
    args.push(&sig_s);
    let summary = run(&args);
    let (shape, got) = read_mask(&sig);
    let want = golden(stem, algorithm, &shape);
    let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
    assert_eq!(
        differ, 0,
        "{stem} {algorithm} (cpu {cpu}): {differ} pixels differ from the reference"
    );
    assert_eq!(
        summary["n_strong_pixels"].as_u64().unwrap() as usize,
        want.iter().filter(|&&b| b).count()
    );
    assert!(want.iter().any(|&b| b));
}

#[test]
fn real_frames_match_the_reference_masks_on_the_cpu() {
    if common::backend_rerun() {
        return;
    }
    for stem in FRAMES {
        for algorithm in ["dispersion_extended", "dispersion"] {
            check_against_golden(stem, algorithm, true);
        }
    }
}

/// Lavapipe needs ~70 s for the three full frames; the crops below cover
/// the GPU path in CI. Run with `cargo test -- --ignored` on a real GPU.
#[test]
#[ignore]
fn real_frames_match_the_reference_masks_on_the_gpu() {
    for stem in FRAMES {
        for algorithm in ["dispersion_extended", "dispersion"] {
            check_against_golden(stem, algorithm, false);
        }
    }
}

/// A crop (i32 counts, gaps and bad pixels included) of a real frame.
fn crop(stem: &str, r0: usize, c0: usize, h: usize, w: usize) -> Vec<i32> {
    let a = gpuscope_io::read(std::path::Path::new(&frame_path(stem)))
        .unwrap()
        .array;
    let ArrayData::I32(v) = a.data else {
        panic!("CBF frames read as int32")
    };
    let cols = a.shape[1];
    (r0..r0 + h)
        .flat_map(|r| v[r * cols + c0..r * cols + c0 + w].to_vec())
        .collect()
}

fn write_npy(path: &std::path::Path, shape: Vec<usize>, v: Vec<i32>) {
    gpuscope_io::write(path, &Array::new(shape, ArrayData::I32(v)).unwrap()).unwrap();
}

#[test]
fn gpu_equals_cpu_on_crops_of_real_frames() {
    // Crops across module gaps with spots in them.
    let crops = [
        ("DLS_I03_smargon_0001", 1400, 850, 200, 230),
        ("DLS_I23_P12M_thau_00001", 3550, 1100, 220, 200),
        ("dlsnxs2cbf_therm_0001", 2400, 3250, 200, 210),
    ];
    let dir = scratch("spots_crops");
    for (stem, r0, c0, h, w) in crops {
        let input = dir.join(format!("{stem}.npy"));
        write_npy(&input, vec![h, w], crop(stem, r0, c0, h, w));
        let input = input.display().to_string();
        for algorithm in ["dispersion_extended", "dispersion"] {
            let mut outs = Vec::new();
            for cpu in [true, false] {
                let sig = dir
                    .join(format!("{stem}_{algorithm}_{cpu}.npy"))
                    .display()
                    .to_string();
                let csv = dir
                    .join(format!("{stem}_{algorithm}_{cpu}.csv"))
                    .display()
                    .to_string();
                let mut args = vec![];
                if cpu {
                    args.push("--cpu");
                }
                args.extend([
                    "spots",
                    &input,
                    "--algorithm",
                    algorithm,
                    "--min-spot-size",
                    "1",
                ]);
                args.extend(["--signal", &sig, "--out", &csv, "--json"]);
                let summary = run(&args);
                outs.push((
                    read_mask(std::path::Path::new(&sig)),
                    std::fs::read_to_string(&csv).unwrap(),
                    summary["n_spots"].as_u64().unwrap(),
                ));
            }
            assert_eq!(outs[0].0, outs[1].0, "{stem} {algorithm}: masks differ");
            assert_eq!(
                outs[0].1, outs[1].1,
                "{stem} {algorithm}: spot tables differ"
            );
            assert!(outs[0].2 > 0, "{stem} {algorithm}: the crop holds no spot");
        }
    }
}

#[test]
fn series_from_files_stacks_and_tiff_agree() {
    let dir = scratch("spots_series");
    let (h, w) = (120, 140);
    let frames: Vec<Vec<i32>> = [(1400, 850), (1460, 900), (1420, 960)]
        .iter()
        .map(|&(r, c)| crop("DLS_I03_smargon_0001", r, c, h, w))
        .collect();
    let mut files = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let p = dir.join(format!("f{i}.npy"));
        write_npy(&p, vec![h, w], f.clone());
        files.push(p.display().to_string());
    }
    let stack = dir.join("stack.npy");
    write_npy(&stack, vec![3, h, w], frames.concat());
    // u16 multi-page TIFF (negative gap values clamp to 0 there).
    let v16: Vec<u16> = frames.concat().iter().map(|&x| x.max(0) as u16).collect();
    let tif = dir.join("stack.tif");
    gpuscope_io::write(
        &tif,
        &Array::new(vec![3, h, w], ArrayData::U16(v16.clone())).unwrap(),
    )
    .unwrap();
    let stack16 = dir.join("stack16.npy");
    let v16i: Vec<i32> = v16.iter().map(|&x| i32::from(x)).collect();
    write_npy(&stack16, vec![3, h, w], v16i);

    let table = |inputs: &[String], extra: &[&str], name: &str| -> (String, Value) {
        let out = dir.join(format!("{name}.csv")).display().to_string();
        let mut args: Vec<&str> = vec!["spots"];
        args.extend(inputs.iter().map(String::as_str));
        args.extend(["--out", &out, "--json"]);
        args.extend(extra);
        let v = run(&args);
        (std::fs::read_to_string(&out).unwrap(), v)
    };
    let (from_files, s1) = table(&files, &[], "files");
    let (from_stack, s2) = table(&[stack.display().to_string()], &[], "stack");
    assert_eq!(from_files, from_stack);
    assert_eq!(s1["n_frames"], 3);
    assert_eq!(s1["n_strong_pixels"], s2["n_strong_pixels"]);
    assert!(
        from_files
            .lines()
            .skip(1)
            .any(|l| l.split(',').nth(5) == Some("2")),
        "spots of frame 2"
    );
    let (from_tif, _) = table(&[tif.display().to_string()], &[], "tif");
    let (from_i32, _) = table(&[stack16.display().to_string()], &[], "i32");
    assert_eq!(
        from_tif, from_i32,
        "packed u16 upload and i32 give different spots"
    );
    // --3d: the same strong pixels, spots joined across frames, on both paths.
    let (gpu3d, g) = table(&[stack.display().to_string()], &["--3d"], "gpu3d");
    let (cpu3d, c) = table(&[stack.display().to_string()], &["--3d", "--cpu"], "cpu3d");
    assert_eq!(gpu3d, cpu3d);
    assert_eq!(g["n_strong_pixels"], s1["n_strong_pixels"]);
    assert_eq!(c["n_strong_pixels"], s1["n_strong_pixels"]);
}

#[test]
fn bad_input_gives_one_line_errors_and_no_output() {
    let dir = scratch("spots_errors");
    let good = dir.join("good.npy");
    write_npy(&good, vec![20, 30], vec![1; 600]);
    let other = dir.join("other.npy");
    write_npy(&other, vec![20, 31], vec![1; 620]);
    let float = dir.join("float.npy");
    gpuscope_io::write(
        &float,
        &Array::new(vec![4, 4], ArrayData::F32(vec![0.5; 16])).unwrap(),
    )
    .unwrap();
    let vol = dir.join("vol4.npy");
    gpuscope_io::write(
        &vol,
        &Array::new(vec![1, 2, 2, 2], ArrayData::I32(vec![0; 8])).unwrap(),
    )
    .unwrap();
    let truncated = dir.join("trunc.cbf");
    let bytes = std::fs::read(frame_path("DLS_I03_smargon_0001")).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 3]).unwrap();
    let sig = dir.join("sig.npy").display().to_string();
    let g = good.display().to_string();
    let cases: Vec<Vec<String>> = vec![
        vec![g.clone(), "--algorithm".into(), "niblack".into()],
        vec![g.clone(), "--kernel-size".into(), "3,x".into()],
        vec![g.clone(), "--kernel-size".into(), "0,3".into()],
        vec![g.clone(), "--min-local".into(), "1".into()],
        vec![g.clone(), "--sigma-strong".into(), "nan".into()],
        vec![g.clone(), "--gain".into(), "-1".into()],
        vec![g.clone(), "--gain".into(), other.display().to_string()],
        vec![g.clone(), "--mask".into(), other.display().to_string()],
        vec![
            g.clone(),
            "--out".into(),
            dir.join("t.txt").display().to_string(),
        ],
        vec![g.clone(), other.display().to_string()],
        vec![float.display().to_string()],
        vec![vol.display().to_string()],
        vec![truncated.display().to_string()],
    ];
    for case in cases {
        for cpu in [false, true] {
            let mut args: Vec<&str> = if cpu {
                vec!["--cpu", "spots"]
            } else {
                vec!["spots"]
            };
            args.extend(case.iter().map(String::as_str));
            args.extend(["--signal", &sig]);
            let o = gpuscope(&args);
            assert_eq!(
                o.status.code(),
                Some(1),
                "{args:?} should fail: {}",
                stderr(&o)
            );
            let err = stderr(&o);
            let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
            assert_eq!(lines.len(), 1, "{args:?}: {err}");
            assert!(!err.contains("panicked"), "{err}");
            assert!(
                !std::path::Path::new(&sig).exists(),
                "{args:?} left an output"
            );
        }
    }
}

/// The spot table as `gpuscope spots --out x.csv` writes it.
fn csv_of(spots: &[gpuscope_core::spots::Spot]) -> String {
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

/// Streamed from disk (a 3-D npy, a multi-page u16 TIFF, a list of 2-D
/// files) in batches of 1, 2 and 3 frames and as planned from a tiny
/// --memory-budget, the spot table and the --signal mask equal the
/// in-memory answer (the core's CPU reference over the whole stack), 2-D
/// and --3d, on the GPU and the CPU.
#[test]
fn streamed_series_equal_the_in_memory_answer() {
    use gpuscope_core::spots::{Counts, SpotOptions, cpu};
    let dir = scratch("spots_streamed");
    let (h, w) = (60, 64);
    // Repeated crops: spots that run through several frames (3-D).
    let at = [
        (1400, 850),
        (1400, 850),
        (1401, 850),
        (1460, 900),
        (1460, 900),
        (1420, 960),
        (1400, 850),
    ];
    let frames: Vec<Vec<i32>> = at
        .iter()
        .map(|&(r, c)| crop("DLS_I03_smargon_0001", r, c, h, w))
        .collect();
    let nz = frames.len();
    let stack = frames.concat();
    let npy = dir.join("stack.npy");
    write_npy(&npy, vec![nz, h, w], stack.clone());
    let v16: Vec<u16> = stack.iter().map(|&x| x.max(0) as u16).collect();
    let tif = dir.join("stack.tif");
    gpuscope_io::write(
        &tif,
        &Array::new(vec![nz, h, w], ArrayData::U16(v16.clone())).unwrap(),
    )
    .unwrap();
    let mut files = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let p = dir.join(format!("f{i}.npy"));
        write_npy(&p, vec![h, w], f.clone());
        files.push(p.display().to_string());
    }
    let o = SpotOptions {
        min_spot_size: 2,
        ..SpotOptions::default()
    };
    let frame_bytes = 4 * h * w;
    // Two i32 frames per batch from the budget (a batch is a tenth of it).
    let budget = (10 * 2 * frame_bytes).to_string();
    // Files alternating uint16 and int32 (the u16 values): batches are cut
    // where the dtype changes.
    let mut mixed = Vec::new();
    for z in 0..nz {
        let p = dir.join(format!("m{z}.npy"));
        let f = &v16[z * h * w..(z + 1) * h * w];
        let a = if z % 2 == 0 {
            Array::new(vec![h, w], ArrayData::U16(f.to_vec()))
        } else {
            Array::new(
                vec![h, w],
                ArrayData::I32(f.iter().map(|&x| x.into()).collect()),
            )
        };
        gpuscope_io::write(&p, &a.unwrap()).unwrap();
        mixed.push(p.display().to_string());
    }
    let forms: Vec<(&str, Vec<String>, bool)> = vec![
        ("npy", vec![npy.display().to_string()], false),
        ("tif", vec![tif.display().to_string()], true),
        ("files", files, false),
        ("mixed", mixed, true),
    ];
    let mut joined_across = false;
    for three_d in [false, true] {
        let want_i32 = cpu::find_spots(Counts::I32(&stack), [nz, h, w], None, &o, three_d).unwrap();
        let want_u16 = cpu::find_spots(Counts::U16(&v16), [nz, h, w], None, &o, three_d).unwrap();
        assert!(!want_i32.spots.is_empty());
        joined_across |= want_i32.spots.iter().any(|s| s.bbox[5] - s.bbox[4] >= 3);
        for (form, inputs, is_u16) in &forms {
            let want = if *is_u16 { &want_u16 } else { &want_i32 };
            let mut runs: Vec<(bool, Vec<&str>)> = vec![
                (false, vec!["--batch-frames", "3"]),
                (true, vec!["--batch-frames", "2"]),
            ];
            if *form != "mixed" {
                runs.extend([
                    (false, vec!["--batch-frames", "1"]),
                    (false, vec!["--batch-frames", "2"]),
                    (false, vec!["--memory-budget", budget.as_str()]),
                ]);
            }
            for (cpu_run, knob) in runs {
                let what = format!("{form} 3d {three_d} cpu {cpu_run} {knob:?}");
                let sig = dir.join("sig.npy").display().to_string();
                let csv = dir.join("t.csv").display().to_string();
                let mut args: Vec<&str> = Vec::new();
                if cpu_run {
                    args.push("--cpu");
                }
                args.push("spots");
                args.extend(inputs.iter().map(String::as_str));
                args.extend(["--min-spot-size", "2", "--signal", &sig, "--out", &csv]);
                args.push("--json");
                if three_d {
                    args.push("--3d");
                }
                args.extend(&knob);
                let summary = run(&args);
                if knob[0] == "--memory-budget" && !cpu_run {
                    // u16 frames travel packed: half the bytes, twice the frames.
                    let planned = if *is_u16 { 4 } else { 2 };
                    assert_eq!(summary["batch_frames"], planned, "{what}: planned batch");
                }
                assert_eq!(
                    std::fs::read_to_string(&csv).unwrap(),
                    csv_of(&want.spots),
                    "{what}: spot tables differ"
                );
                let (shape, mask) = read_mask(std::path::Path::new(&sig));
                assert_eq!(shape, vec![nz, h, w], "{what}");
                assert!(mask == want.strong, "{what}: masks differ");
                assert_eq!(summary["n_strong_pixels"], want.n_strong, "{what}");
                assert_eq!(summary["n_frames"], nz, "{what}");
            }
        }
    }
    assert!(joined_across, "3-D spots through three or more frames");
}

/// A truncated frame in the middle of a series, or one of another shape,
/// stops the run with one error naming the file; no output file (nor a
/// temporary) is left although earlier frames were already processed.
#[test]
fn a_bad_frame_in_the_middle_of_a_series_leaves_no_output() {
    let dir = scratch("spots_bad_middle");
    let (h, w) = (60, 64);
    let good = crop("DLS_I03_smargon_0001", 1400, 850, h, w);
    let mut files = Vec::new();
    for i in 0..3 {
        let p = dir.join(format!("good{i}.npy"));
        write_npy(&p, vec![h, w], good.clone());
        files.push(p.display().to_string());
    }
    let truncated = dir.join("trunc.cbf");
    let bytes = std::fs::read(frame_path("DLS_I03_smargon_0001")).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 3]).unwrap();
    let other = dir.join("other.npy");
    write_npy(&other, vec![h, w + 1], vec![1; h * (w + 1)]);
    let out = scratch("spots_bad_middle_out");
    let sig = out.join("sig.npy").display().to_string();
    let sig_tif = out.join("sig.tif").display().to_string();
    let csv = out.join("t.csv").display().to_string();
    for (bad, says) in [
        (truncated.display().to_string(), "trunc.cbf"),
        (
            other.display().to_string(),
            "do not match the first frame's 60 x 64",
        ),
    ] {
        // Batches of 4: the files of a batch are decoded in parallel.
        for (cpu, signal, batch) in [
            (false, &sig, "1"),
            (true, &sig, "4"),
            (false, &sig_tif, "4"),
        ] {
            let mut args: Vec<&str> = if cpu { vec!["--cpu"] } else { vec![] };
            args.push("spots");
            args.extend([files[0].as_str(), &files[1], &bad, &files[2]]);
            args.extend(["--batch-frames", batch, "--signal", signal, "--out", &csv]);
            let o = gpuscope(&args);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
            let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
            assert_eq!(lines.len(), 1, "{err}");
            assert!(lines[0].contains(says), "{err}");
            assert!(!err.contains("panicked"), "{err}");
            let left: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
            assert!(left.is_empty(), "{args:?} left {left:?}");
        }
    }
    // A truncated page of a 3-D .npy: caught when the file is opened.
    let stack = dir.join("stack.npy");
    write_npy(&stack, vec![3, h, w], [&good[..], &good, &good].concat());
    let b = std::fs::read(&stack).unwrap();
    std::fs::write(&stack, &b[..b.len() - 100]).unwrap();
    let s = stack.display().to_string();
    let o = gpuscope(&["spots", &s, "--signal", &sig]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("stack.npy"), "{}", stderr(&o));
    assert!(std::fs::read_dir(&out).unwrap().next().is_none());
}

/// Peak resident memory (VmHWM, from --json) of two runs over series of
/// 256 x 256 u16 frames, `short` and `long` frames long, streamed from a
/// 3-D .npy in batches of one frame (planned from a 1 MiB budget), with
/// the --signal mask written.
fn peaks(cpu: bool, short: usize, long: usize) -> [u64; 2] {
    let dir = scratch(&format!("spots_memory_{cpu}"));
    let (h, w) = (256, 256);
    let n = h * w;
    let mut peaks = [0; 2];
    for (k, nz) in [short, long].into_iter().enumerate() {
        // Flat background with one bright spot per frame (128 KiB a frame).
        let mut v = vec![10u16; nz * n];
        for z in 0..nz {
            for (dr, dc) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                v[z * n + (100 + dr) * w + 120 + dc] = 500;
            }
        }
        let p = dir.join(format!("s{nz}.npy"));
        gpuscope_io::write(&p, &Array::new(vec![nz, h, w], ArrayData::U16(v)).unwrap()).unwrap();
        let p = p.display().to_string();
        let sig = dir.join(format!("m{nz}.npy")).display().to_string();
        let mut args = if cpu { vec!["--cpu"] } else { vec![] };
        args.extend([
            "--memory-budget",
            "1M",
            "spots",
            &p,
            "--json",
            "--signal",
            &sig,
        ]);
        let s = run(&args);
        assert_eq!(s["batch_frames"], 1);
        assert_eq!(s["n_spots"], nz as u64, "one spot per frame");
        peaks[k] = s["peak_rss_bytes"]
            .as_u64()
            .expect("peak_rss_bytes on Linux");
    }
    peaks
}

/// Host memory stays bounded by a few batches: the peak resident memory of
/// a series 8x longer grows by far less than the longer series' data (its
/// 280 more frames are 35 MiB of counts and 17.5 MiB of mask).
#[test]
fn host_memory_stays_bounded_for_long_series() {
    if common::backend_rerun() {
        return;
    }
    let p = peaks(true, 40, 320);
    let grew = p[1] as i64 - p[0] as i64;
    assert!(
        grew < 12 << 20,
        "CPU: peak RSS grew by {grew} bytes ({p:?})"
    );
}

/// The same on the GPU (lavapipe is slow: a shorter series, 36 more frames
/// are 4.5 MiB of counts and 2.25 MiB of mask).
#[test]
fn host_memory_stays_bounded_for_long_series_on_the_gpu() {
    let p = peaks(false, 6, 42);
    let grew = p[1] as i64 - p[0] as i64;
    assert!(grew < 5 << 19, "GPU: peak RSS grew by {grew} bytes ({p:?})");
}

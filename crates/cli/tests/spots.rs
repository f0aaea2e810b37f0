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

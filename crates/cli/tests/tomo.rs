//! `gpuscope normalize`: flat/dark correction against tomopy's formula
//! written out here, from an NXtomo file (image_key) and from .npy stacks
//! with --flat/--dark, streamed and in memory, and its errors.

mod common;

use std::path::Path;

use common::{gpuscope, repo, scratch, stderr};
use gpuscope_io::{Array, ArrayData};

fn fixture(name: &str) -> String {
    repo()
        .join("crates/io/tests/fixtures/hdf5")
        .join(name)
        .display()
        .to_string()
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn ok(args: &[&str]) {
    let o = gpuscope(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
}

fn f32s(path: &Path) -> (Vec<usize>, Vec<f32>) {
    let a = gpuscope_io::read(path).unwrap().array;
    match a.data {
        ArrayData::F32(v) => (a.shape, v),
        other => panic!("{}: not float32 ({:?})", path.display(), other.dtype()),
    }
}

/// tomopy.normalize in float32: mean fields (planes added in order), the
/// denominator floored at 1e-6, optional cutoff.
fn tomopy(
    frames: &[Vec<f32>],
    flats: &[usize],
    darks: &[usize],
    projections: &[usize],
    cutoff: Option<f32>,
) -> Vec<f32> {
    let n = frames[0].len();
    let mean = |idx: &[usize]| -> Vec<f32> {
        (0..n)
            .map(|i| {
                let mut s = 0f32;
                for &k in idx {
                    s += frames[k][i];
                }
                s / idx.len() as f32
            })
            .collect()
    };
    let (flat, dark) = (mean(flats), mean(darks));
    let mut out = Vec::new();
    for &p in projections {
        for i in 0..n {
            let d = flat[i] - dark[i];
            let d = if d < 1e-6 { 1e-6 } else { d };
            let v = (frames[p][i] - dark[i]) / d;
            out.push(match cutoff {
                Some(c) if v > c => c,
                _ => v,
            });
        }
    }
    out
}

fn nxtomo_frames() -> (Vec<Vec<f32>>, Vec<i64>) {
    let data = gpuscope_io::read(Path::new(&fixture("nxtomo.npy")))
        .unwrap()
        .array;
    let key = gpuscope_io::read(Path::new(&fixture("nxtomo_image_key.npy")))
        .unwrap()
        .array;
    let plane = data.shape[1] * data.shape[2];
    let v = data.to_f32_vec();
    let frames = v.chunks(plane).map(<[f32]>::to_vec).collect();
    (frames, key.to_f64_vec().iter().map(|&k| k as i64).collect())
}

fn ulps_apart(a: f32, b: f32) -> u32 {
    if a.is_nan() && b.is_nan() {
        return 0;
    }
    (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
}

#[test]
fn nxtomo_image_key_gives_projections_flats_and_darks() {
    let dir = scratch("tomo_nxtomo");
    let (frames, key) = nxtomo_frames();
    let with = |k: i64| -> Vec<usize> { (0..key.len()).filter(|&i| key[i] == k).collect() };
    for cutoff in [None, Some(1.2f32)] {
        let want = tomopy(&frames, &with(1), &with(2), &with(0), cutoff);
        let c = cutoff.map(|c| c.to_string());
        let mut cut: Vec<&str> = Vec::new();
        if let Some(c) = &c {
            cut.extend(["--cutoff", c]);
        }
        // In memory on the CPU twin: exactly tomopy's float32 result.
        let cpu = dir.join("cpu.npy");
        let mut args = vec!["--cpu", "normalize"];
        let (input, out) = (fixture("nxtomo.nxs"), s(&cpu));
        args.extend([input.as_str(), out.as_str()]);
        args.extend(&cut);
        ok(&args);
        let (shape, got) = f32s(&cpu);
        assert_eq!(shape, vec![4, 15, 10]);
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        // Streamed on the GPU, in chunks smaller than a projection: within
        // WGSL's division accuracy (docs/tomo.md).
        let gpu = dir.join("gpu.npy");
        let out = s(&gpu);
        let mut args = vec![
            "--memory-budget",
            "64K",
            "normalize",
            input.as_str(),
            out.as_str(),
        ];
        args.extend(&cut);
        ok(&args);
        let (_, got) = f32s(&gpu);
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(ulps_apart(g, w) <= 3, "element {i}: {g} vs {w}");
        }
    }
}

#[test]
fn npy_stacks_with_flat_and_dark_files() {
    let dir = scratch("tomo_npy");
    let (frames, _) = nxtomo_frames();
    let plane = [15usize, 10];
    let stack = |idx: &[usize], name: &str| {
        let v: Vec<f32> = idx.iter().flat_map(|&i| frames[i].clone()).collect();
        let p = dir.join(name);
        let a = Array::from_f32(vec![idx.len(), plane[0], plane[1]], v).unwrap();
        gpuscope_io::write(&p, &a.cast(gpuscope_io::DType::U16)).unwrap();
        p
    };
    let proj = stack(&[4, 5, 6, 7], "proj.npy");
    let flats = stack(&[2, 3, 8], "flats.npy");
    let darks = stack(&[0, 1], "darks.npy");
    let want = tomopy(&frames, &[2, 3, 8], &[0, 1], &[4, 5, 6, 7], None);
    for engine in [&[][..], &["--cpu"][..]] {
        let out = dir.join("out.npy");
        let mut args: Vec<String> = engine.iter().map(|s| s.to_string()).collect();
        args.extend(
            [
                "normalize",
                &s(&proj),
                &s(&out),
                "--flat",
                &s(&flats),
                "--dark",
                &s(&darks),
            ]
            .map(String::from),
        );
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&refs);
        let (shape, got) = f32s(&out);
        assert_eq!(shape, vec![4, 15, 10]);
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(ulps_apart(g, w) <= 3, "{engine:?} element {i}: {g} vs {w}");
        }
    }
    // One 2-D projection, one 2-D flat and dark.
    let one = dir.join("one.npy");
    gpuscope_io::write(
        &one,
        &Array::from_f32(vec![15, 10], frames[4].clone()).unwrap(),
    )
    .unwrap();
    let flat1 = dir.join("flat1.npy");
    gpuscope_io::write(
        &flat1,
        &Array::from_f32(vec![15, 10], frames[2].clone()).unwrap(),
    )
    .unwrap();
    let dark1 = dir.join("dark1.npy");
    gpuscope_io::write(
        &dark1,
        &Array::from_f32(vec![15, 10], frames[0].clone()).unwrap(),
    )
    .unwrap();
    let out = dir.join("one_out.npy");
    ok(&[
        "--cpu",
        "normalize",
        &s(&one),
        &s(&out),
        "--flat",
        &s(&flat1),
        "--dark",
        &s(&dark1),
    ]);
    let (shape, got) = f32s(&out);
    assert_eq!(shape, vec![15, 10]);
    assert_eq!(got, tomopy(&frames, &[2], &[0], &[4], None));
}

#[test]
fn errors_say_what_to_give() {
    let dir = scratch("tomo_errors");
    let proj = dir.join("proj.npy");
    gpuscope_io::write(
        &proj,
        &Array::from_f32(vec![2, 4, 5], vec![1.0; 40]).unwrap(),
    )
    .unwrap();
    let small = dir.join("small.npy");
    gpuscope_io::write(&small, &Array::from_f32(vec![4, 4], vec![1.0; 16]).unwrap()).unwrap();
    let out = dir.join("out.npy");
    let fails = |args: &[&str], words: &str| {
        let o = gpuscope(args);
        assert!(!o.status.success(), "{args:?} succeeded");
        let e = stderr(&o);
        assert!(e.contains(words), "{args:?}: {e}");
        assert!(!e.contains("panicked"), "{e}");
        assert!(!out.exists(), "{args:?} left an output");
    };
    fails(&["normalize", &s(&proj), &s(&out)], "--flat");
    fails(
        &[
            "normalize",
            &s(&proj),
            &s(&out),
            "--flat",
            &s(&small),
            "--dark",
            &s(&small),
        ],
        "same size",
    );
    fails(
        &[
            "normalize",
            &s(&proj),
            &s(&out),
            "--flat",
            &s(&proj),
            "--dark",
            &s(&proj),
            "--cutoff",
            "nan",
        ],
        "cutoff",
    );
    fails(
        &[
            "normalize",
            &s(&proj),
            &s(&out),
            "--flat",
            &s(&proj),
            "--dark",
            &s(&proj),
            "--averaging",
            "mode",
        ],
        "mean, median",
    );
}

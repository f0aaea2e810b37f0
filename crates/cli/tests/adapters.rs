//! `--adapters`: work spread over several GPU contexts gives the same
//! output as one context. On a machine with one device (CI: lavapipe) two
//! contexts are opened on the same adapter by naming it twice.

mod common;

use common::{data, gpuscope, scratch, stderr};
use gpuscope_io::{Array, ArrayData};
use serde_json::Value;
use std::path::Path;

/// lavapipe's adapter name (`gpuscope devices`).
const TWO: &str = "llvmpipe,llvmpipe";

fn run(args: &[&str]) -> Value {
    let o = gpuscope(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let last = out.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or(Value::Null)
}

fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// The z-ranges of a spread run's JSON: contiguous, covering `nz`.
fn check_ranges(v: &Value, key: &str, nz: u64, n: usize) {
    assert_eq!(v["n_adapters"], n, "{v}");
    let parts = v[key].as_array().unwrap_or_else(|| panic!("{key} in {v}"));
    assert_eq!(parts.len(), n);
    let mut next = 0;
    for p in parts {
        assert_eq!(p["z"][0], next, "{v}");
        next = p["z"][1].as_u64().unwrap();
        assert!(p["adapter"].as_str().unwrap().contains("llvmpipe"));
    }
    assert_eq!(next, nz);
}

#[test]
fn stack_filters_on_two_contexts_equal_one() {
    let dir = scratch("adapters_stacks");
    let (nz, h, w) = (11usize, 24usize, 21usize);
    let n = nz * h * w;
    // A pseudo-random uint16 stack with structure along z.
    let v: Vec<u16> = (0..n)
        .map(|i| ((i as u64 * 2_654_435_761 % 9973) as u16) ^ ((i / (h * w)) as u16 * 37))
        .collect();
    let f: Vec<f32> = v.iter().map(|&x| x as f32 * 0.01 - 3.0).collect();
    let u16_npy = dir.join("u16.npy");
    let f32_npy = dir.join("f32.npy");
    let tif = dir.join("u16.tif");
    let stack = |d| Array::new(vec![nz, h, w], d).unwrap();
    gpuscope_io::write(&u16_npy, &stack(ArrayData::U16(v.clone()))).unwrap();
    gpuscope_io::write(&tif, &stack(ArrayData::U16(v))).unwrap();
    gpuscope_io::write(&f32_npy, &stack(ArrayData::F32(f))).unwrap();
    let cases: Vec<(&str, Vec<String>, &Path, &str, usize)> = vec![
        // (name, command and options, input, output extension, contexts used)
        (
            "median 3x3x3",
            vec!["median".into(), "--size".into(), "3".into()],
            &u16_npy,
            "npy",
            2,
        ),
        (
            "median 5 mirror from TIFF",
            vec![
                "median".into(),
                "--size".into(),
                "5,3,3".into(),
                "--mode".into(),
                "mirror".into(),
            ],
            &tif,
            "npy",
            2,
        ),
        (
            "outliers",
            vec!["outliers".into(), "--diff".into(), "500".into()],
            &u16_npy,
            "npy",
            2,
        ),
        (
            "gaussian",
            vec!["convolve".into(), "--gaussian".into(), "1.0".into()],
            &f32_npy,
            "npy",
            2,
        ),
        (
            "gaussian nearest",
            vec![
                "convolve".into(),
                "--gaussian".into(),
                "0.7,1,1".into(),
                "--mode".into(),
                "nearest".into(),
            ],
            &f32_npy,
            "npy",
            2,
        ),
        // Pages are written in order: TIFF output uses one context.
        (
            "median to TIFF",
            vec!["median".into(), "--size".into(), "3".into()],
            &u16_npy,
            "tif",
            1,
        ),
        // Wrap reads the other end of the stack: one context.
        (
            "median wrap",
            vec![
                "median".into(),
                "--size".into(),
                "3".into(),
                "--mode".into(),
                "wrap".into(),
            ],
            &u16_npy,
            "npy",
            1,
        ),
    ];
    for (k, (name, op, input, ext, used)) in cases.iter().enumerate() {
        let one = dir.join(format!("one{k}.{ext}"));
        let two = dir.join(format!("two{k}.{ext}"));
        let mut a: Vec<String> = op.clone();
        a.extend([s(input), s(&one), "--json".into()]);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let j1 = run(&a);
        assert!(j1.get("adapters").is_none(), "{name}: {j1}");
        let mut b: Vec<String> = vec!["--adapters".into(), TWO.into()];
        b.extend(op.clone());
        b.extend([s(input), s(&two), "--json".into()]);
        let b: Vec<&str> = b.iter().map(String::as_str).collect();
        let j2 = run(&b);
        if *used == 2 {
            check_ranges(&j2, "slices", nz as u64, 2);
        } else {
            assert_eq!(j2["n_adapters"], 1, "{name}: {j2}");
        }
        assert!(bytes(&one) == bytes(&two), "{name}: outputs differ");
    }
    // One context named through --adapters is the plain path: the same
    // bytes, one adapter in the JSON.
    let single = dir.join("single.npy");
    let j = run(&[
        "--adapters",
        "llvmpipe",
        "median",
        &s(&u16_npy),
        &s(&single),
        "--size",
        "3",
        "--json",
    ]);
    assert_eq!(j["n_adapters"], 1, "{j}");
    assert!(j.get("slices").is_none(), "{j}");
    assert!(bytes(&single) == bytes(&dir.join("one0.npy")));
    // Three contexts (ranges 4, 4, 3) against one, 3-D median of uint16.
    let three = dir.join("three.npy");
    let j = run(&[
        "--adapters",
        "llvmpipe,llvmpipe,llvmpipe",
        "median",
        &s(&u16_npy),
        &s(&three),
        "--size",
        "3",
        "--json",
    ]);
    check_ranges(&j, "slices", nz as u64, 3);
    assert!(bytes(&three) == bytes(&dir.join("one0.npy")));
    // No temporary file is left beside the outputs.
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!name.contains(gpuscope_io::TEMP_TAG), "left behind: {name}");
    }
}

/// Crops of a real frame, as a series (frames repeated and shifted).
fn series(h: usize, w: usize) -> Vec<Vec<i32>> {
    let a = gpuscope_io::read(&data("diffraction/DLS_I03_smargon_0001.cbf.gz"))
        .unwrap()
        .array;
    let ArrayData::I32(v) = a.data else {
        panic!("CBF frames read as int32")
    };
    let cols = a.shape[1];
    [
        (1400, 850),
        (1401, 850),
        (1460, 900),
        (1420, 960),
        (1400, 851),
    ]
    .iter()
    .map(|&(r0, c0)| {
        (r0..r0 + h)
            .flat_map(|r| v[r * cols + c0..r * cols + c0 + w].to_vec())
            .collect()
    })
    .collect()
}

#[test]
fn spot_series_on_two_contexts_equals_one() {
    let dir = scratch("adapters_spots");
    let (h, w) = (60, 64);
    let frames = series(h, w);
    let nz = frames.len();
    let npy = dir.join("stack.npy");
    gpuscope_io::write(
        &npy,
        &Array::new(vec![nz, h, w], ArrayData::I32(frames.concat())).unwrap(),
    )
    .unwrap();
    let mut files = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let p = dir.join(format!("f{i}.npy"));
        gpuscope_io::write(
            &p,
            &Array::new(vec![h, w], ArrayData::I32(f.clone())).unwrap(),
        )
        .unwrap();
        files.push(s(&p));
    }
    let forms = [("npy", vec![s(&npy)]), ("files", files)];
    for (form, inputs) in &forms {
        for batch in ["1", "2"] {
            let one = dir.join(format!("{form}{batch}_one.csv"));
            let two = dir.join(format!("{form}{batch}_two.csv"));
            let args = |out: &Path| -> Vec<String> {
                let mut a = vec!["spots".to_string()];
                a.extend(inputs.iter().cloned());
                a.extend([
                    "--min-spot-size".into(),
                    "2".into(),
                    "--batch-frames".into(),
                    batch.into(),
                    "--out".into(),
                    s(out),
                    "--json".into(),
                ]);
                a
            };
            let a = args(&one);
            let j1 = run(&a.iter().map(String::as_str).collect::<Vec<_>>());
            let mut b = vec!["--adapters".to_string(), TWO.into()];
            b.extend(args(&two));
            let j2 = run(&b.iter().map(String::as_str).collect::<Vec<_>>());
            let what = format!("{form} batch {batch}");
            check_ranges(&j2, "frames", nz as u64, 2);
            assert!(j1["n_spots"].as_u64().unwrap() > 3, "{what}: {j1}");
            for key in ["n_spots", "n_strong_pixels", "n_frames"] {
                assert_eq!(j1[key], j2[key], "{what}: {key}");
            }
            let (t1, t2) = (bytes(&one), bytes(&two));
            assert!(t1 == t2, "{what}: spot tables differ");
            // Spots of the second range keep their frame numbers.
            let text = String::from_utf8(t2).unwrap();
            assert!(
                text.lines()
                    .skip(1)
                    .any(|l| l.split(',').nth(5) == Some("4")),
                "{what}: no spot in the last frame\n{text}"
            );
        }
    }
    // One context named through --adapters: the plain path, the same table.
    let single = dir.join("single.csv");
    let j = run(&[
        "--adapters",
        "llvmpipe",
        "spots",
        &s(&npy),
        "--min-spot-size",
        "2",
        "--out",
        &s(&single),
        "--json",
    ]);
    assert_eq!(j["n_adapters"], 1, "{j}");
    assert!(j.get("frames").is_none(), "{j}");
    assert!(bytes(&single) == bytes(&dir.join("npy1_one.csv")));
    // --3d joins across frames: one context, the same table.
    let one = dir.join("3d_one.csv");
    let two = dir.join("3d_two.csv");
    run(&["spots", &s(&npy), "--3d", "--out", &s(&one)]);
    let j = run(&[
        "--adapters",
        TWO,
        "spots",
        &s(&npy),
        "--3d",
        "--out",
        &s(&two),
        "--json",
    ]);
    assert_eq!(j["n_adapters"], 1, "{j}");
    assert!(bytes(&one) == bytes(&two));
}

#[test]
fn adapter_lists_are_checked() {
    let dir = scratch("adapters_errors");
    let input = dir.join("in.npy");
    gpuscope_io::write(
        &input,
        &Array::new(vec![4, 8, 8], ArrayData::U8((0..=255).collect())).unwrap(),
    )
    .unwrap();
    let out = dir.join("out.npy");
    for (list, says) in [
        ("nosuchgpu", "no adapter matches 'nosuchgpu'"),
        ("llvmpipe,nosuchgpu", "nosuchgpu"),
        ("llvmpipe,,llvmpipe", "names separated by commas"),
        ("all,llvmpipe", "`all` cannot be combined"),
        ("#99", "no adapter #99"),
    ] {
        let o = gpuscope(&[
            "--adapters",
            list,
            "median",
            &s(&input),
            &s(&out),
            "--size",
            "3",
        ]);
        assert_eq!(o.status.code(), Some(1), "{list}");
        let e = stderr(&o);
        assert!(e.starts_with("error: ") && e.contains(says), "{list}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{list}: {e}");
        assert!(!out.exists(), "{list}: an output was written");
    }
    // With --adapter or --cpu: a usage error.
    for other in [vec!["--adapter", "llvmpipe"], vec!["--cpu"]] {
        let mut a = vec!["--adapters", "llvmpipe"];
        a.extend(&other);
        let (i, o) = (s(&input), s(&out));
        a.extend(["median", &i, &o, "--size", "3"]);
        let o = gpuscope(&a);
        assert_eq!(o.status.code(), Some(2), "{other:?}: {}", stderr(&o));
    }
    // `all` here is lavapipe (the only adapters are software ones), once.
    let j = run(&[
        "--adapters",
        "all",
        "median",
        &s(&input),
        &s(&out),
        "--size",
        "3",
        "--json",
    ]);
    assert!(j["n_adapters"].as_u64().unwrap() >= 1, "{j}");
    let o = gpuscope(&[
        "median",
        &s(&input),
        &s(&dir.join("plain.npy")),
        "--size",
        "3",
    ]);
    assert!(o.status.success());
    assert!(bytes(&out) == bytes(&dir.join("plain.npy")));
}

#[test]
fn an_interrupted_spread_run_leaves_no_output_and_no_temporary_file() {
    // Ctrl-C while two contexts write their ranges into the pre-sized
    // temporary file: exit 130, no output, the temporary file removed.
    let (d, h, w) = (24, 256, 256);
    let dir = scratch("adapters_interrupted");
    let input = dir.join("stack.npy");
    let v: Vec<u16> = (0..d * h * w).map(|i| (i * 7919 % 65521) as u16).collect();
    gpuscope_io::write(
        &input,
        &Array::new(vec![d, h, w], ArrayData::U16(v)).unwrap(),
    )
    .unwrap();
    let output = dir.join("median.npy");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gpuscope"))
        .args(["--adapters", TWO, "median", &s(&input), &s(&output)])
        .args(["--size", "1,9,9", "--memory-budget", "4M"])
        .env("NODEVICE_SELECT", "1")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let temporary = |dir: &Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .contains(gpuscope_io::TEMP_TAG)
            })
    };
    let start = std::time::Instant::now();
    while !temporary(&dir) {
        assert!(child.try_wait().unwrap().is_none(), "ended before writing");
        assert!(start.elapsed().as_secs() < 120, "no temporary output");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "finished before the signal"
    );
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(!output.exists(), "a partial output was left");
    assert!(!temporary(&dir), "a temporary file was left");
}

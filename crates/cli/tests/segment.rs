//! clip and sources against astropy / scikit-image (tests/golden/segment/
//! expected.json, made by make_goldens.py there), on the GPU and with
//! --cpu; one-line errors and no partial outputs for bad input. The label
//! and threshold goldens run in goldens.rs from that folder's MANIFEST.json.

mod common;

use common::{gpuscope, repo, scratch, stderr};
use gpuscope_io::Array;
use serde_json::Value;

fn golden_dir() -> std::path::PathBuf {
    repo().join("tests/golden/segment")
}

fn expected() -> Value {
    let text = std::fs::read_to_string(golden_dir().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn rel(a: f64, b: f64, tol: f64, what: &str) {
    assert!(
        (a - b).abs() <= tol * b.abs().max(1e-12),
        "{what}: got {a}, want {b}"
    );
}

fn run_json(args: &[&str]) -> Value {
    let o = gpuscope(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn clip_matches_astropy_and_the_workshop_loop() {
    for c in expected()["clip"].as_array().unwrap() {
        let input = golden_dir().join(c["input"].as_str().unwrap());
        for cpu in [false, true] {
            let mut args = vec![];
            if cpu {
                args.push("--cpu".to_string());
            }
            args.extend([
                "clip".to_string(),
                input.display().to_string(),
                "--json".into(),
            ]);
            args.extend(
                c["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_string()),
            );
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let got = run_json(&refs);
            let name = format!("{} cpu={cpu}", c["name"]);
            assert_eq!(got["n_kept"], c["n_kept"], "{name}: kept values");
            for k in ["mean", "median", "std"] {
                rel(
                    got[k].as_f64().unwrap(),
                    c[k].as_f64().unwrap(),
                    1e-6,
                    &format!("{name} {k}"),
                );
            }
            assert!(got["total_ms"].as_f64().unwrap() >= 0.0);
        }
    }
}

#[test]
fn sources_catalogue_matches_regionprops() {
    let e = &expected()["sources_workshop"];
    let input = golden_dir().join(e["input"].as_str().unwrap());
    let dir = scratch("sources");
    for cpu in [false, true] {
        let csv = dir.join(format!("cat_{cpu}.csv"));
        let js = dir.join(format!("cat_{cpu}.json"));
        let labels = dir.join(format!("labels_{cpu}.npy"));
        for (cat, with_labels) in [(&csv, true), (&js, false)] {
            let mut args = vec![];
            if cpu {
                args.push("--cpu".to_string());
            }
            args.extend([
                "sources".to_string(),
                input.display().to_string(),
                "--catalogue".into(),
                cat.display().to_string(),
                "--json".into(),
            ]);
            if with_labels {
                args.extend(["--labels".to_string(), labels.display().to_string()]);
            }
            args.extend(
                e["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_string()),
            );
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let summary = run_json(&refs);
            assert_eq!(summary["n_sources"], e["n_sources"], "cpu={cpu}");
        }
        // The label image equals scipy's.
        let got = gpuscope_io::read(&labels).unwrap().array;
        let want = gpuscope_io::read(&golden_dir().join("hubble_label_workshop.npy"))
            .unwrap()
            .array;
        assert_eq!(got, want, "labels cpu={cpu}");
        let rows: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(&js).unwrap()).unwrap();
        let want = e["regions"].as_array().unwrap();
        assert_eq!(rows.len(), want.len());
        for (g, w) in rows.iter().zip(want) {
            assert_eq!(
                (&g["label"], &g["area"], &g["bbox"]),
                (&w["label"], &w["area"], &w["bbox"])
            );
            for k in ["intensity_max", "intensity_min"] {
                assert_eq!(g[k].as_f64(), w[k].as_f64(), "{k}");
            }
            rel(
                g["intensity_mean"].as_f64().unwrap(),
                w["intensity_mean"].as_f64().unwrap(),
                1e-6,
                "mean",
            );
            for k in ["centroid", "centroid_weighted"] {
                for a in 0..2 {
                    rel(
                        g[k][a].as_f64().unwrap(),
                        w[k][a].as_f64().unwrap(),
                        1e-9,
                        k,
                    );
                }
            }
        }
        // The CSV has regionprops_table's columns and one row per source.
        let text = std::fs::read_to_string(&csv).unwrap();
        let mut lines = text.lines();
        let header = lines.next().unwrap();
        assert!(
            header.starts_with("label,area,bbox-0,bbox-1,bbox-2,bbox-3,centroid-0"),
            "{header}"
        );
        assert_eq!(lines.count(), want.len());
    }
}

fn write(path: &std::path::Path, a: Array) {
    gpuscope_io::write(path, &a).unwrap();
}

#[test]
fn bad_input_gets_one_line_and_no_output() {
    let dir = scratch("segment_bad");
    let nan = dir.join("nan.npy");
    write(
        &nan,
        Array::from_f32(vec![2, 2], vec![f32::NAN; 4]).unwrap(),
    );
    let one = dir.join("one.npy");
    write(&one, Array::from_f32(vec![1, 1], vec![3.0]).unwrap());
    let out = dir.join("out.npy");
    let cat = dir.join("cat.csv");
    let n = nan.display().to_string();
    let o1 = one.display().to_string();
    let out_s = out.display().to_string();
    let cat_s = cat.display().to_string();
    for (args, what) in [
        (vec!["clip", &n, "--json"], "no finite"),
        (vec!["clip", &o1, "--sigma", "0"], "sigma"),
        (
            vec!["label", &o1, &out_s, "--connectivity", "4"],
            "connectivity",
        ),
        (vec!["threshold", &n, &out_s, "--nsigma", "5"], "no finite"),
        (vec!["sources", &n, "--catalogue", &cat_s], "no finite"),
        (
            vec!["sources", &o1, "--catalogue", "x.txt"],
            ".csv or .json",
        ),
    ] {
        for cpu in [false, true] {
            let mut a = args.clone();
            if cpu {
                a.insert(0, "--cpu");
            }
            let o = gpuscope(&a);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(1), "{a:?}: {err}");
            let lines: Vec<&str> = err.lines().filter(|l| !l.starts_with("warning")).collect();
            assert_eq!(lines.len(), 1, "{a:?}: {err}");
            assert!(
                lines[0].starts_with("error: ") && lines[0].contains(what),
                "{a:?}: {err}"
            );
            assert!(!out.exists() && !cat.exists(), "{a:?} left an output");
        }
    }
    // Usage errors exit with 2.
    let o = gpuscope(&["threshold", &o1, &out_s]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = gpuscope(&["clip", &o1, "--maxiters", "many"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // A 1x1 image: one source of one pixel, or none.
    let got = run_json(&["label", &o1, &out_s, "--json"]);
    assert_eq!(got["n_labels"], 1);
    let s = run_json(&["clip", &o1, "--json"]);
    assert_eq!(
        (s["n_kept"].as_u64(), s["std"].as_f64()),
        (Some(1), Some(0.0))
    );
}

/// A stack on disk is clipped slab by slab (with its mask read alongside)
/// and thresholded slice by slice: the same statistics as the same values
/// as one 2-D image in memory, and the mask `image > threshold`.
#[test]
fn streamed_clip_and_threshold_equal_the_in_memory_path() {
    let dir = scratch("clip_streamed");
    let (nz, ny, nx) = (5, 7, 9);
    let v: Vec<u16> = (0..nz * ny * nx)
        .map(|i| ((i * 7919) % 251) as u16 + if i % 37 == 0 { 5000 } else { 0 })
        .collect();
    let m: Vec<bool> = (0..nz * ny * nx).map(|i| i % 11 == 0).collect();
    let write = |name: &str, a: Array| {
        let p = dir.join(name);
        gpuscope_io::write(&p, &a).unwrap();
        p.display().to_string()
    };
    let stack = write(
        "stack.npy",
        Array::from_u16(vec![nz, ny, nx], v.clone()).unwrap(),
    );
    let mask = write(
        "mask.npy",
        Array::from_bool(vec![nz, ny, nx], m.clone()).unwrap(),
    );
    let flat = write(
        "flat.npy",
        Array::from_u16(vec![nz * ny, nx], v.clone()).unwrap(),
    );
    let flat_mask = write(
        "flat_mask.npy",
        Array::from_bool(vec![nz * ny, nx], m).unwrap(),
    );
    for cpu in [false, true] {
        let pre: Vec<&str> = if cpu { vec!["--cpu"] } else { vec![] };
        let json = |args: &[&str]| run_json(&[&pre[..], args].concat());
        let a = json(&["clip", &stack, "--mask", &mask, "--json"]);
        let b = json(&["clip", &flat, "--mask", &flat_mask, "--json"]);
        for k in ["mean", "median", "std", "n_kept", "iterations"] {
            assert_eq!(a[k], b[k], "{k} cpu={cpu}");
        }
        let out = dir.join("t.npy");
        let t = json(&[
            "threshold",
            &stack,
            &out.display().to_string(),
            "--nsigma",
            "1",
            "--json",
        ]);
        assert_eq!(t["streamed"], true);
        let s = json(&["clip", &stack, "--json"]);
        assert_eq!(t["clip"]["median"], s["median"]);
        assert_eq!(t["clip"]["std"], s["std"]);
        let level = t["threshold"].as_f64().unwrap();
        let above = s["median"].as_f64().unwrap() + s["std"].as_f64().unwrap();
        assert!(
            (level - above).abs() <= 1e-12 * above.abs(),
            "{level} vs {above}"
        );
        let got = gpuscope_io::read(&out).unwrap().array;
        assert_eq!(got.shape, vec![nz, ny, nx]);
        let want: Vec<bool> = v.iter().map(|&x| f64::from(x) > level).collect();
        assert_eq!(got.data, gpuscope_io::ArrayData::Bool(want), "cpu={cpu}");
    }
}

//! gpuscope commands against reference-library goldens on real images, on
//! the GPU and with --cpu. Every `MANIFEST.json` under tests/golden (the top
//! one and one per operation family in a subfolder) lists cases; a case runs
//! `command` (default `convolve`) with `args` and compares the output array.
//! Each folder holds the script that generated its goldens.
//!
//! Tolerances: float outputs within 1e-5 of the largest golden magnitude on
//! the GPU (f32 sums; scipy sums in f64) and 1e-6 on the CPU reference
//! (f64 sums, same order as scipy up to rounding). Integer outputs are exact
//! on the CPU, and on the GPU where the case says `gpu_exact` (selections,
//! labels, masks); for sums on the GPU an f32 sum can fall on the other side of an integer
//! from scipy's f64 sum, so at most 0.1% of pixels may differ, by one count.

mod common;

use common::{data, gpuscope, repo, scratch, stderr};
use gpuscope_io::Array;
use serde_json::Value;

fn resolve(golden: &std::path::Path, spec: &str) -> String {
    match spec.strip_prefix("golden:") {
        Some(name) => golden.join(name).display().to_string(),
        None => data(spec.trim_start_matches("shared/data/"))
            .display()
            .to_string(),
    }
}

fn crop(a: &Array, crop: &Value) -> Vec<f64> {
    let v = a.to_f64_vec();
    if crop.is_null() {
        return v;
    }
    let r = |i: usize, j: usize| crop[i][j].as_u64().unwrap() as usize;
    let w = a.shape[1];
    let inner: usize = a.shape[2..].iter().product();
    let mut out = Vec::new();
    for y in r(0, 0)..r(0, 1) {
        let row = (y * w + r(1, 0)) * inner;
        out.extend_from_slice(&v[row..row + (r(1, 1) - r(1, 0)) * inner]);
    }
    out
}

/// Every (folder, case) of every manifest.
fn cases() -> Vec<(std::path::PathBuf, Value)> {
    let root = repo().join("tests/golden");
    let mut folders = vec![root.clone()];
    let mut subs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("MANIFEST.json").is_file())
        .collect();
    subs.sort();
    folders.extend(subs);
    let mut all = Vec::new();
    for folder in folders {
        let text = std::fs::read_to_string(folder.join("MANIFEST.json")).unwrap();
        let cases: Vec<Value> = serde_json::from_str(&text).unwrap();
        all.extend(cases.into_iter().map(|c| (folder.clone(), c)));
    }
    all
}

#[test]
fn commands_match_reference_goldens_on_gpu_and_cpu() {
    let cases = cases();
    assert!(cases.len() >= 10);
    let dir = scratch("goldens");
    // Cases that differ only in their crop (the Eiger frame's corners and
    // middle) share one run of the command per engine.
    let mut outputs: std::collections::HashMap<Vec<String>, Array> = Default::default();
    for (folder, case) in &cases {
        let name = case["name"].as_str().unwrap();
        let command = case["command"].as_str().unwrap_or("convolve");
        let golden = gpuscope_io::read(&folder.join(case["output"].as_str().unwrap()))
            .unwrap()
            .array;
        let want = golden.to_f64_vec();
        let scale = want.iter().fold(1e-30f64, |m, v| m.max(v.abs()));
        let exact = case["exact"].as_bool().unwrap();
        // Selections and labels (median, label, masks) are exact on the GPU too.
        let gpu_exact = case["gpu_exact"].as_bool().unwrap_or(false);
        // The second backend's pass (tests/all.sh) runs the GPU cases only.
        let engines: &[bool] = if common::backend_rerun() {
            &[false]
        } else {
            &[false, true]
        };
        for &cpu in engines {
            let out = dir.join(format!("{name}_{cpu}.npy"));
            let mut args: Vec<String> = Vec::new();
            if cpu {
                args.push("--cpu".into());
            }
            args.extend([
                command.into(),
                resolve(folder, case["input"].as_str().unwrap()),
                out.display().to_string(),
            ]);
            for a in case["args"].as_array().unwrap() {
                let a = a.as_str().unwrap();
                args.push(if a.starts_with("golden:") {
                    resolve(folder, a)
                } else {
                    a.to_string()
                });
            }
            let out_arg = out.display().to_string();
            let key: Vec<String> = args.iter().filter(|a| **a != out_arg).cloned().collect();
            let got_array = outputs.entry(key).or_insert_with(|| {
                let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                let o = gpuscope(&refs);
                assert!(o.status.success(), "{name} cpu={cpu}: {}", stderr(&o));
                // The GPU case must really run on a GPU adapter (tests/all.sh
                // runs this file on lavapipe and again on GL): a refused
                // adapter falls back to the CPU with a warning.
                assert!(
                    cpu || !stderr(&o).contains("running on the CPU"),
                    "{name}: the GPU case ran on the CPU: {}",
                    stderr(&o)
                );
                gpuscope_io::read(&out).unwrap().array
            });
            assert_eq!(got_array.dtype(), golden.dtype(), "{name}: dtype as scipy");
            let got = crop(got_array, &case["crop"]);
            assert_eq!(got.len(), want.len(), "{name}: shape");
            // NaN where scipy has NaN is equal; NaN on one side only is the worst difference.
            let diffs: Vec<f64> = got
                .iter()
                .zip(&want)
                .map(|(g, w)| match (g.is_nan(), w.is_nan()) {
                    (true, true) => 0.0,
                    (false, false) if g == w => 0.0,
                    (false, false) => (g - w).abs(),
                    _ => f64::INFINITY,
                })
                .collect();
            let worst = diffs.iter().cloned().fold(0.0, f64::max);
            if exact {
                let differing = diffs.iter().filter(|&&d| d > 0.0).count();
                if cpu || gpu_exact {
                    assert_eq!(
                        differing, 0,
                        "{name} cpu={cpu}: {differing} pixels differ (max {worst})"
                    );
                } else {
                    assert!(
                        worst <= 1.0 && differing * 1000 <= want.len(),
                        "{name} gpu: {differing} of {} pixels differ, max {worst}",
                        want.len()
                    );
                }
            } else {
                let tol = if cpu { 1e-6 } else { 1e-5 } * scale;
                assert!(
                    worst <= tol,
                    "{name} cpu={cpu}: max difference {worst} > {tol}"
                );
            }
        }
    }
}

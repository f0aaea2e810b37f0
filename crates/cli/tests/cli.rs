//! The command-line contract: exit codes, one-line errors, JSON summaries,
//! no partial output on failure, bad input files and absurd parameters.

mod common;

use common::{data, gpuscope, scratch, stderr};
use serde_json::Value;

fn json(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).expect("one JSON object on stdout")
}

/// Exit 1, exactly one `error: ` line naming `needle`, and no output file.
fn assert_clean_failure(o: &std::process::Output, needle: &str, out: &std::path::Path) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    let lines: Vec<&str> = e.lines().filter(|l| !l.starts_with("warning:")).collect();
    assert_eq!(lines.len(), 1, "one line expected: {e}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains(needle),
        "{e}"
    );
    assert!(
        !e.contains("panicked") && !e.contains("RUST_BACKTRACE"),
        "{e}"
    );
    assert!(!out.exists(), "partial output left at {}", out.display());
}

#[test]
fn info_reports_shape_dtype_stats_and_format() {
    let coins = data("images/coins.png");
    let v = json(&gpuscope(&["info", coins.to_str().unwrap(), "--json"]));
    assert_eq!(v["shape"], serde_json::json!([303, 384]));
    assert_eq!(v["dtype"], "uint8");
    assert_eq!(v["format"], "png");
    assert_eq!(v["min"], 1.0);
    assert_eq!(v["max"], 252.0);
    let cbf = data("diffraction/DLS_I03_smargon_0001.cbf.gz");
    let v = json(&gpuscope(&["info", cbf.to_str().unwrap(), "--json"]));
    assert_eq!(v["shape"], serde_json::json!([2527, 2463]));
    assert_eq!(v["dtype"], "int32");
    assert_eq!(v["min"], -2.0);
}

#[test]
fn devices_lists_the_adapter() {
    let v = json(&gpuscope(&["devices", "--json"]));
    assert!(!v["adapters"].as_array().unwrap().is_empty());
    assert!(v["default"]["max_binding_size"].as_u64().unwrap() >= 1 << 20);
}

#[test]
fn threshold_gives_a_bool_mask_equal_on_gpu_and_cpu() {
    let dir = scratch("threshold");
    let coins = data("images/coins.png");
    let mut counts = Vec::new();
    for cpu in [false, true] {
        let out = dir.join(format!("mask_{cpu}.npy"));
        let mut args = vec![];
        if cpu {
            args.push("--cpu");
        }
        args.extend([
            "threshold",
            coins.to_str().unwrap(),
            out.to_str().unwrap(),
            "--above",
            "100.5",
            "--json",
        ]);
        let v = json(&gpuscope(&args));
        let mask = gpuscope_io::read(&out).unwrap().array;
        assert_eq!(mask.dtype(), gpuscope_io::DType::Bool);
        let image = gpuscope_io::read(&coins).unwrap().array.to_f64_vec();
        let expect = image.iter().filter(|&&x| x > 100.5).count();
        assert_eq!(v["n_above"].as_u64().unwrap() as usize, expect);
        counts.push(mask.to_f64_vec());
    }
    assert_eq!(counts[0], counts[1]);
}

#[test]
fn damaged_input_files_fail_cleanly_without_output() {
    let dir = scratch("damaged");
    let out = dir.join("out.npy");
    for src in [
        "images/coins.png",
        "diffraction/dlsnxs2cbf_therm_0001.cbf.gz",
        "images/multipage.tif",
    ] {
        let bytes = std::fs::read(data(src)).unwrap();
        let name = src.rsplit('/').next().unwrap();
        let truncated = dir.join(format!("cut_{name}"));
        std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
        for cmd in [
            &["convolve", "--gaussian", "1"][..],
            &["threshold", "--above", "1"][..],
        ] {
            let mut args = vec![cmd[0], truncated.to_str().unwrap(), out.to_str().unwrap()];
            args.extend(&cmd[1..]);
            assert_clean_failure(&gpuscope(&args), "cut_", &out);
        }
        let garbage = dir.join(format!("garbage_{name}"));
        std::fs::write(&garbage, b"definitely not an image").unwrap();
        let o = gpuscope(&["info", garbage.to_str().unwrap()]);
        assert_clean_failure(&o, "garbage_", &out);
    }
    let missing = dir.join("missing.npy");
    assert_clean_failure(
        &gpuscope(&[
            "convolve",
            missing.to_str().unwrap(),
            out.to_str().unwrap(),
            "--gaussian",
            "1",
        ]),
        "missing.npy",
        &out,
    );
}

#[test]
fn absurd_parameters_and_unwritable_outputs_fail_cleanly() {
    let dir = scratch("params");
    let out = dir.join("out.npy");
    let coins = data("images/coins.png");
    let c = coins.to_str().unwrap();
    let o = out.to_str().unwrap();
    let k3 = common::repo().join("tests/golden/kernel_3x3x3.npy");
    for (args, needle) in [
        (vec!["convolve", c, o, "--gaussian", "-1"], "sigma"),
        (vec!["convolve", c, o, "--gaussian", "1,2,3"], "sigma"),
        (vec!["convolve", c, o, "--gaussian", "1e9"], "sigma"),
        (
            vec!["convolve", c, o, "--gaussian", "1", "--truncate", "0"],
            "truncate",
        ),
        (
            vec!["convolve", c, o, "--kernel", k3.to_str().unwrap()],
            "weights",
        ),
        (
            vec!["convolve", c, "/nonexistent-dir/x.npy", "--gaussian", "1"],
            "x.npy",
        ),
        (
            vec![
                "convolve",
                c,
                &format!("{}/x.jpg", dir.display()),
                "--gaussian",
                "1",
            ],
            "x.jpg",
        ),
    ] {
        assert_clean_failure(&gpuscope(&args), needle, &out);
    }
    // Usage errors exit with 2.
    assert_eq!(gpuscope(&["convolve", c, o]).status.code(), Some(2));
    assert_eq!(
        gpuscope(&["convolve", c, o, "--gaussian", "1", "--mode", "bogus"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(gpuscope(&["frobnicate"]).status.code(), Some(2));
    assert!(!out.exists());
}

#[test]
fn tiny_nan_and_stack_inputs() {
    let dir = scratch("tiny");
    let write = |name: &str, a: gpuscope_io::Array| {
        let p = dir.join(name);
        gpuscope_io::write(&p, &a).unwrap();
        p
    };
    let one = write(
        "one.npy",
        gpuscope_io::Array::from_f32(vec![1, 1], vec![3.5]).unwrap(),
    );
    let nan = write(
        "nan.npy",
        gpuscope_io::Array::from_f32(
            vec![2, 3],
            vec![1.0, f32::NAN, 2.0, f32::INFINITY, 0.0, -1.0],
        )
        .unwrap(),
    );
    for cpu in [false, true] {
        let flag = if cpu { "--cpu" } else { "--adapter=" };
        let out = dir.join("o.npy");
        let o = gpuscope(&[
            flag,
            "convolve",
            one.to_str().unwrap(),
            out.to_str().unwrap(),
            "--gaussian",
            "3",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(
            gpuscope_io::read(&out).unwrap().array.to_f64_vec(),
            vec![3.5]
        );
        // NaN spreads through the kernel's reach, as in scipy.
        let o = gpuscope(&[
            flag,
            "convolve",
            nan.to_str().unwrap(),
            out.to_str().unwrap(),
            "--gaussian",
            "0,1",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v = gpuscope_io::read(&out).unwrap().array.to_f64_vec();
        assert!(v[..3].iter().all(|x| x.is_nan()), "{v:?}");
        let o = gpuscope(&[
            flag,
            "threshold",
            nan.to_str().unwrap(),
            out.to_str().unwrap(),
            "--above",
            "0.5",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let m = gpuscope_io::read(&out).unwrap().array.to_f64_vec();
        assert_eq!(m, vec![1.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
    }
    // A multi-page TIFF is a stack: filtered as a 3-D array.
    let out = dir.join("stack.tif");
    let o = gpuscope(&[
        "convolve",
        data("images/multipage.tif").to_str().unwrap(),
        out.to_str().unwrap(),
        "--gaussian",
        "0,1,1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(gpuscope_io::read(&out).unwrap().array.ndim(), 3);
}

//! `gpuscope slic`: the JSON summary, the same labels on the GPU and with
//! --cpu, a mask file, and one-line errors (exit 1, no output file) or
//! usage errors (exit 2) for bad input. Labels against scikit-image are in
//! tests/golden/slic (goldens.rs).

mod common;

use common::{gpuscope, scratch, stderr};
use gpuscope_io::Array;
use serde_json::Value;

fn write(path: &std::path::Path, a: Array) {
    gpuscope_io::write(path, &a).unwrap();
}

#[test]
fn json_summary_and_both_paths_agree() {
    let dir = scratch("slic_cli");
    let input = dir.join("ramp.npy");
    let v: Vec<f32> = (0..40 * 50)
        .map(|i| (((i % 50) / 10 + (i / 50) / 8) % 2) as f32 + 0.01 * (i % 7) as f32)
        .collect();
    write(&input, Array::from_f32(vec![40, 50], v).unwrap());
    let mask = dir.join("mask.npy");
    let m: Vec<u8> = (0..40 * 50).map(|i| u8::from(i % 50 < 40)).collect();
    write(&mask, Array::from_u8(vec![40, 50], m).unwrap());
    let mut outs = Vec::new();
    for cpu in [false, true] {
        let out = dir.join(format!("labels_{cpu}.npy"));
        let mut args = vec![];
        if cpu {
            args.push("--cpu");
        }
        let o = out.display().to_string();
        let i = input.display().to_string();
        let mk = mask.display().to_string();
        args.extend([
            "slic",
            &i,
            &o,
            "--n-segments",
            "20",
            "--compactness",
            "0.5",
            "--channel-axis",
            "none",
            "--mask",
            &mk,
            "--json",
        ]);
        let r = gpuscope(&args);
        assert!(r.status.success(), "{}", stderr(&r));
        let j: Value = serde_json::from_slice(&r.stdout).unwrap();
        assert!(j["n_segments"].as_u64().unwrap() > 5, "{j}");
        assert_eq!(j["shape"], serde_json::json!([40, 50]));
        let a = gpuscope_io::read(&out).unwrap().array;
        assert_eq!(a.dtype().name(), "int32");
        let labels = a.to_f64_vec();
        for (k, l) in labels.iter().enumerate() {
            assert_eq!(*l == 0.0, k % 50 >= 40, "masked pixels are 0");
        }
        outs.push(labels);
    }
    assert_eq!(outs[0], outs[1], "GPU and CPU labels differ");
}

#[test]
fn bad_input_gets_one_line_and_no_output() {
    let dir = scratch("slic_cli_bad");
    let gray = dir.join("gray.npy");
    write(&gray, Array::from_f32(vec![4, 5], vec![1.0; 20]).unwrap());
    let nan = dir.join("nan.npy");
    let mut v = vec![0.5f32; 20];
    v[3] = f32::NAN;
    write(&nan, Array::from_f32(vec![4, 5], v).unwrap());
    let small = dir.join("small_mask.npy");
    write(&small, Array::from_f32(vec![3, 3], vec![1.0; 9]).unwrap());
    let g = gray.display().to_string();
    let n = nan.display().to_string();
    let sm = small.display().to_string();
    let out = dir.join("out.npy");
    let o = out.display().to_string();
    for (args, word) in [
        // skimage's default channel_axis=-1 on a 2-D image
        (vec!["slic", &g, &o], "channel-axis none"),
        (vec!["slic", &n, &o, "--channel-axis", "none"], "NaN"),
        (
            vec![
                "slic",
                &g,
                &o,
                "--channel-axis",
                "none",
                "--start-label",
                "2",
            ],
            "start_label",
        ),
        (
            vec![
                "slic",
                &g,
                &o,
                "--channel-axis",
                "none",
                "--n-segments",
                "0",
            ],
            "n_segments",
        ),
        (
            vec![
                "slic",
                &g,
                &o,
                "--channel-axis",
                "none",
                "--spacing",
                "1,2,3",
            ],
            "spacing",
        ),
        (
            vec!["slic", &g, &o, "--channel-axis", "none", "--mask", &sm],
            "mask",
        ),
    ] {
        for cpu in [false, true] {
            let mut a = args.clone();
            if cpu {
                a.insert(0, "--cpu");
            }
            let r = gpuscope(&a);
            assert_eq!(r.status.code(), Some(1), "{a:?}");
            let e = stderr(&r);
            assert!(
                e.starts_with("error: ") && e.trim_end().lines().count() == 1,
                "{e}"
            );
            assert!(e.contains(word), "{a:?}: {e}");
            assert!(!out.exists(), "{a:?} left an output file");
        }
    }
    // Usage errors: exit 2.
    for args in [
        vec!["slic", &g, &o, "--channel-axis", "x"],
        vec!["slic", &g, &o, "--sigma", "1,a"],
        vec!["slic", &g, &o, "--convert2lab", "--no-convert2lab"],
    ] {
        assert_eq!(gpuscope(&args).status.code(), Some(2), "{args:?}");
    }
}

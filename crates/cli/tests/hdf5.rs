//! HDF5/NeXus inputs on the command line: `info`, stack filters streamed
//! from HDF5 equal to the same arrays from .npy, spot finding on the
//! Eiger-style master equal to the same frames read from CBF (pixel mask
//! and count cutoff applied as the same mask on the CBF path), and one-line
//! errors for damaged files.

mod common;

use std::path::{Path, PathBuf};

use common::{data, gpuscope, repo, scratch, stderr};
use gpuscope_io::{Array, ArrayData};
use serde_json::Value;

const TINY: &str = "64K";
const TWO: &str = "llvmpipe,llvmpipe";
const FRAME: [usize; 2] = [160, 192];
/// The master's saturation_value (make_hdf5.py).
const CUTOFF: i32 = 300;

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

fn ok(args: &[&str]) -> std::process::Output {
    let o = gpuscope(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    o
}

fn json(args: &[&str]) -> Value {
    let o = ok(args);
    serde_json::from_slice(&o.stdout).expect("one JSON object on stdout")
}

/// A failing command: exit 1, one `error:` line, no panic, containing `want`.
fn fails(args: &[&str], want: &str) -> String {
    let o = gpuscope(args);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
    let lines: Vec<&str> = e.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 1, "{args:?}: {e}");
    assert!(!e.contains("panicked"), "{args:?}: {e}");
    assert!(lines[0].contains(want), "{args:?}: wanted '{want}' in {e}");
    lines[0].to_string()
}

fn npy(name: &str) -> Array {
    gpuscope_io::read(Path::new(&fixture(name))).unwrap().array
}

#[test]
fn info_reports_layout_nexus_fields_and_the_values_h5py_wrote() {
    let v = json(&["info", &fixture("eiger_master.h5"), "--json"]);
    assert_eq!(v["format"], "hdf5");
    assert_eq!(v["shape"], serde_json::json!([6, 160, 192]));
    assert_eq!(v["dtype"], "uint32");
    assert_eq!(v["chunks"], serde_json::json!([1, 160, 192]));
    assert_eq!(v["filters"], serde_json::json!(["bitshuffle-lz4 (32008)"]));
    assert_eq!(v["nexus"]["beam_center_x"], "1229.3 pixel");
    assert_eq!(v["nexus"]["detector_distance"], "0.29147 m");
    assert_eq!(v["nexus"]["incident_wavelength"], "0.97625 angstrom");
    assert_eq!(v["nexus"]["saturation_value"], "300");
    for (spec, want) in [
        (fixture("eiger_master.h5"), "eiger_data.npy"),
        (format!("{}::/frames", fixture("lz4.h5")), "lz4.npy"),
        (
            format!("{}::/scan/volume", fixture("deflate.h5")),
            "deflate.npy",
        ),
        (format!("{}::/stack", fixture("vds.h5")), "vds.npy"),
        (fixture("nxtomo.nxs"), "nxtomo.npy"),
        (
            format!("{}::/chunked/be_float64", fixture("dtypes.h5")),
            "dtypes_be_float64.npy",
        ),
    ] {
        let got = json(&["info", &spec, "--json"]);
        let want_v = json(&["info", &fixture(want), "--json"]);
        for k in ["shape", "dtype", "min", "max", "mean"] {
            assert_eq!(got[k], want_v[k], "{spec}: {k}");
        }
    }
    let t = json(&["info", &fixture("nxtomo.nxs"), "--json"]);
    assert_eq!(t["datasets"], serde_json::json!(["/entry/data/data"]));
    assert!(
        t["nexus"]["image_key"]
            .as_str()
            .unwrap()
            .contains("2 darks")
    );
    // The text form names the chunks and filters.
    let o = ok(&["info", &format!("{}::/scan/volume", fixture("deflate.h5"))]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("chunks:   [2, 50, 70]"), "{text}");
    assert!(text.contains("shuffle (2), deflate (1)"), "{text}");
}

/// The same filter on an HDF5 dataset and on h5py's array as .npy, streamed
/// under a tiny budget: the same bytes.
#[test]
fn stack_filters_stream_hdf5_like_npy() {
    let dir = scratch("hdf5_filters");
    let cases = [
        (format!("{}::/frames", fixture("lz4.h5")), "lz4.npy"),
        (fixture("eiger_master.h5"), "eiger_data.npy"),
        (
            format!("{}::/scan/volume", fixture("deflate.h5")),
            "deflate.npy",
        ),
        (format!("{}::/stack", fixture("vds.h5")), "vds.npy"),
    ];
    for (k, (spec, want)) in cases.iter().enumerate() {
        let commands: [&[&str]; 3] = [
            &["median", "--size", "1,3,3"],
            &["outliers", "--diff", "20", "--size", "3"],
            &["convolve", "--gaussian", "0,1,1"],
        ];
        for (c, cmd) in commands.iter().enumerate() {
            let a = dir.join(format!("h5_{k}_{c}.npy"));
            let b = dir.join(format!("npy_{k}_{c}.npy"));
            let run = |input: &str, out: &PathBuf| {
                let mut args: Vec<&str> = vec![cmd[0], input];
                let o = s(out);
                args.push(&o);
                args.extend(&cmd[1..]);
                args.extend(["--memory-budget", TINY, "--json"]);
                json(&args)
            };
            let v = run(spec, &a);
            // A 32/64-bit integer stack filtered to integers is filtered in
            // memory, in float64 as scipy (float32 words would round it).
            let wide = matches!(
                v["dtype"].as_str(),
                Some("int32" | "uint32" | "int64" | "uint64")
            );
            let streams = !(cmd[0] == "convolve" && wide);
            assert_eq!(v["streamed"], streams, "{} on {spec}: {v}", cmd[0]);
            run(&fixture(want), &b);
            assert_eq!(
                std::fs::read(&a).unwrap(),
                std::fs::read(&b).unwrap(),
                "{} on {spec}",
                cmd[0]
            );
        }
    }
    // Two contexts split the z-range of an HDF5 input.
    let a = dir.join("two.npy");
    let b = dir.join("one.npy");
    let spec = fixture("eiger_master.h5");
    ok(&[
        "median",
        &spec,
        &s(&a),
        "--size",
        "3,3,3",
        "--adapters",
        TWO,
    ]);
    ok(&["median", &spec, &s(&b), "--size", "3,3,3"]);
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

/// The Eiger windows cut again from the CBF frames (i32 counts, gaps
/// negative), as make_hdf5.py cut them.
fn cbf_windows() -> Vec<i32> {
    let list = std::fs::read_to_string(fixture("eiger_windows.txt")).unwrap();
    let mut out = Vec::new();
    for line in list.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        let (r0, c0): (usize, usize) = (w[1].parse().unwrap(), w[2].parse().unwrap());
        let a = gpuscope_io::read(&data(&format!("diffraction/{}", w[0])))
            .unwrap()
            .array;
        let ArrayData::I32(v) = a.data else {
            panic!("CBF frames read as int32")
        };
        let cols = a.shape[1];
        for r in r0..r0 + FRAME[0] {
            out.extend_from_slice(&v[r * cols + c0..r * cols + c0 + FRAME[1]]);
        }
    }
    out
}

#[test]
fn spots_on_the_eiger_master_equal_the_cbf_frames() {
    let dir = scratch("hdf5_spots");
    let frames = cbf_windows();
    let nz = frames.len() / (FRAME[0] * FRAME[1]);
    assert_eq!(nz, 6);
    // DIALS' convention for --mask: non-zero = valid.
    let pixel_mask = npy("eiger_pixel_mask.npy").to_f64_vec();
    let valid: Vec<u8> = pixel_mask.iter().map(|&b| u8::from(b == 0.0)).collect();
    let mask = dir.join("valid.npy");
    gpuscope_io::write(
        &mask,
        &Array::new(FRAME.to_vec(), ArrayData::U8(valid)).unwrap(),
    )
    .unwrap();
    let write = |name: &str, v: Vec<i32>| {
        let p = dir.join(name);
        gpuscope_io::write(
            &p,
            &Array::new(vec![nz, FRAME[0], FRAME[1]], ArrayData::I32(v)).unwrap(),
        )
        .unwrap();
        s(&p)
    };
    let plain = write("cbf.npy", frames.clone());
    let over: usize = frames.iter().filter(|&&x| x > CUTOFF).count();
    assert!(over > 0, "the cutoff must bite on these frames");
    let cut = write(
        "cbf_cut.npy",
        frames
            .iter()
            .map(|&x| if x > CUTOFF { -1 } else { x })
            .collect(),
    );
    let master = fixture("eiger_master.h5");
    let table = |input: &str, extra: &[&str], name: &str| -> (String, Vec<u8>, Value) {
        let out = s(&dir.join(format!("{name}.csv")));
        let sig = s(&dir.join(format!("{name}_signal.npy")));
        let mut args = vec!["spots", input, "--out", &out, "--signal", &sig, "--json"];
        args.extend(extra);
        let v = json(&args);
        (
            std::fs::read_to_string(&out).unwrap(),
            std::fs::read(&sig).unwrap(),
            v,
        )
    };
    let m = s(&mask);
    // Defaults: the file's pixel mask and cutoff.
    let (h5_csv, h5_sig, h5_v) = table(&master, &["--batch-frames", "2"], "h5");
    let (cbf_csv, cbf_sig, cbf_v) = table(&cut, &["--mask", &m], "cbf");
    assert_eq!(h5_v["n_frames"], 6);
    assert!(h5_v["n_spots"].as_u64().unwrap() > 0, "{h5_v}");
    assert_eq!(h5_v["n_strong_pixels"], cbf_v["n_strong_pixels"]);
    assert_eq!(h5_csv, cbf_csv);
    assert_eq!(h5_sig, cbf_sig);
    // Cutoff off: the CBF frames as they are (with the same mask).
    let (h5_nc, _, h5_nc_v) = table(&master, &["--no-count-cutoff"], "h5_nc");
    let (cbf_nc, _, _) = table(&plain, &["--mask", &m], "cbf_nc");
    assert_eq!(h5_nc, cbf_nc);
    assert_ne!(
        h5_nc_v["n_strong_pixels"], h5_v["n_strong_pixels"],
        "the cutoff changes the strong pixels"
    );
    // The CPU reference and two contexts give the same table.
    let (cpu, _, _) = table(&master, &["--cpu"], "h5_cpu");
    assert_eq!(cpu, h5_csv);
    let out = s(&dir.join("two.csv"));
    ok(&["spots", &master, "--out", &out, "--adapters", TWO]);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), h5_csv);
    // One data file named alone: its three frames.
    let one = format!("{master}::/entry/data/data_000002");
    let v = json(&["spots", &one, "--json"]);
    assert_eq!(v["n_frames"], 3);
}

/// `--decode gpu`: the Eiger chunks cross to the GPU compressed and are
/// decoded there. The table and the strong pixels equal those of the
/// frames decoded on the host, with the count cutoff and without, in 3-D,
/// in batches of two frames, on the CPU reference and over two contexts;
/// a damaged chunk is a one-line error naming its frame.
#[test]
fn spots_with_frames_decoded_on_the_gpu_equal_the_host_decoded() {
    let dir = scratch("hdf5_gpu_decode");
    let master = fixture("eiger_master.h5");
    let run = |extra: &[&str], decode: &str| -> (String, Vec<u8>, Value) {
        let out = s(&dir.join(format!("{decode}.csv")));
        let sig = s(&dir.join(format!("{decode}_signal.npy")));
        let mut args = vec!["spots", &master, "--out", &out, "--signal", &sig, "--json"];
        args.extend(extra);
        args.extend(["--decode", decode]);
        let v = json(&args);
        (
            std::fs::read_to_string(&out).unwrap(),
            std::fs::read(&sig).unwrap(),
            v,
        )
    };
    let cases: [&[&str]; 5] = [
        &[],
        &["--no-count-cutoff"],
        &["--3d"],
        &["--batch-frames", "2"],
        &["--cpu"],
    ];
    for extra in cases {
        let (host, host_sig, host_v) = run(extra, "host");
        let (gpu, gpu_sig, gpu_v) = run(extra, "gpu");
        assert!(
            host_v["n_spots"].as_u64().unwrap() > 0,
            "{extra:?}: {host_v}"
        );
        assert_eq!(host, gpu, "{extra:?}");
        assert_eq!(host_sig, gpu_sig, "{extra:?}");
        assert_eq!(host_v["frames_decoded_on_gpu"], false, "{extra:?}");
        let on_gpu = !extra.contains(&"--cpu");
        assert_eq!(gpu_v["frames_decoded_on_gpu"], on_gpu, "{extra:?}");
    }
    let (host, _, _) = run(&[], "host");
    let out = s(&dir.join("two.csv"));
    ok(&[
        "spots",
        &master,
        "--out",
        &out,
        "--adapters",
        TWO,
        "--decode",
        "gpu",
    ]);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), host);
    let broken = format!("{}::/data", fixture("broken_filter.h5"));
    fails(
        &["spots", &broken, "--decode", "gpu"],
        "frame 1: a damaged bitshuffle-LZ4 chunk",
    );
}

#[test]
fn damaged_hdf5_inputs_are_one_line_errors() {
    let dir = scratch("hdf5_damaged");
    for n in ["eiger_master.h5", "eiger_data_000001.h5"] {
        std::fs::copy(fixture(n), dir.join(n)).unwrap();
    }
    let master = s(&dir.join("eiger_master.h5"));
    let line = fails(&["spots", &master], "eiger_data_000002.h5");
    assert!(line.starts_with("error: eiger_master.h5: "), "{line}");
    fails(&["info", &master], "eiger_data_000002.h5");
    let out = s(&dir.join("m.npy"));
    fails(
        &["median", &master, &out, "--size", "1,3,3"],
        "eiger_data_000002.h5",
    );
    assert!(!Path::new(&out).exists());
    // Truncated data file.
    let bytes = std::fs::read(fixture("eiger_data_000002.h5")).unwrap();
    std::fs::write(dir.join("eiger_data_000002.h5"), &bytes[..bytes.len() / 2]).unwrap();
    fails(&["spots", &master], "eiger_");
    let broken = format!("{}::/data", fixture("broken_filter.h5"));
    fails(&["spots", &broken], "broken_filter.h5");
    fails(
        &["median", &broken, &out, "--size", "1,3,3"],
        "broken_filter.h5",
    );
    fails(
        &["info", &format!("{}::/data", fixture("blosc.h5"))],
        "blosc (32001)",
    );
    fails(
        &["info", &format!("{}::/data", fixture("huge_chunk.h5"))],
        "huge_chunk.h5",
    );
    fails(
        &["info", &format!("{}::/a", fixture("soft_cycle.h5"))],
        "soft_cycle.h5",
    );
    fails(
        &["spots", &fixture("external_cycle.h5")],
        "external_cycle.h5",
    );
    fails(
        &["info", &format!("{}::/nothing", fixture("lz4.h5"))],
        "/frames",
    );
    assert!(!Path::new(&out).exists());
}

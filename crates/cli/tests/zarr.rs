//! Zarr on the command line: stack filters read and write `.zarr` chunk by
//! chunk, equal to the same filter on zarr-python's arrays as .npy;
//! `info`; an interrupted write leaves nothing; an existing output is
//! never replaced.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{gpuscope, repo, scratch, stderr};
use gpuscope_io::{Array, ArrayData, TEMP_TAG};
use serde_json::{Value, json};

const TINY: &str = "64K";

fn fixture(name: &str) -> String {
    repo()
        .join("crates/io/tests/fixtures/zarr")
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

fn json_out(args: &[&str]) -> Value {
    serde_json::from_slice(&ok(args).stdout).expect("one JSON object on stdout")
}

/// A failing command: exit 1, one `error:` line containing `want`.
fn fails(args: &[&str], want: &str) {
    let o = gpuscope(args);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
    let lines: Vec<&str> = e.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 1, "{args:?}: {e}");
    assert!(!e.contains("panicked"), "{args:?}: {e}");
    assert!(lines[0].contains(want), "{args:?}: wanted '{want}' in {e}");
}

fn read(p: &str) -> Array {
    gpuscope_io::read(Path::new(p))
        .unwrap_or_else(|e| panic!("{p}: {e}"))
        .array
}

/// Same shape, dtype and sample bits.
fn assert_same(a: &Array, b: &Array, what: &str) {
    assert_eq!(a.shape, b.shape, "{what}");
    assert_eq!(a.dtype(), b.dtype(), "{what}");
    let bits = |x: &Array| -> Vec<u64> {
        match &x.data {
            ArrayData::F32(v) => v.iter().map(|f| u64::from(f.to_bits())).collect(),
            ArrayData::F64(v) => v.iter().map(|f| f.to_bits()).collect(),
            _ => x.to_f64_vec().iter().map(|f| f.to_bits()).collect(),
        }
    };
    assert!(bits(a) == bits(b), "{what}: samples differ");
}

#[test]
fn filters_stream_zarr_in_and_out_like_npy() {
    let dir = scratch("zarr_filters");
    let cases = [
        "v3_sharded_u32",
        "v3_gzip_u16",
        "v2_zstd_f64",
        "ome_v3",
        "v2_gzip_be_u16",
        "blosc_v2_lz4_u16",
    ];
    let commands: [&[&str]; 3] = [
        &["median", "--size", "1,3,3"],
        &["outliers", "--diff", "20", "--size", "3"],
        &["convolve", "--gaussian", "0,1,1"],
    ];
    for name in cases {
        let zin = fixture(&format!("{name}.zarr"));
        let nin = fixture(&format!("{name}.npy"));
        for (c, cmd) in commands.iter().enumerate() {
            let run = |input: &str, out: &PathBuf| {
                let o = s(out);
                let mut args: Vec<&str> = vec![cmd[0], input, &o];
                args.extend(&cmd[1..]);
                args.extend(["--memory-budget", TINY, "--json"]);
                json_out(&args)
            };
            let zz = dir.join(format!("{name}_{c}.zarr"));
            let zn = dir.join(format!("{name}_{c}_z.npy"));
            let nn = dir.join(format!("{name}_{c}_n.npy"));
            let v = run(&zin, &zz);
            // A 32/64-bit integer stack filtered to integers is filtered in
            // memory, in float64 as scipy (float32 words would round it).
            let wide = matches!(
                v["dtype"].as_str(),
                Some("int32" | "uint32" | "int64" | "uint64")
            );
            let streams = !(cmd[0] == "convolve" && wide);
            assert_eq!(v["streamed"], streams, "{} on {name}: {v}", cmd[0]);
            run(&zin, &zn);
            run(&nin, &nn);
            // Zarr in, npy out: the same file as npy in, npy out.
            assert_eq!(
                std::fs::read(&zn).unwrap(),
                std::fs::read(&nn).unwrap(),
                "{} on {name}",
                cmd[0]
            );
            // Zarr out: the same samples.
            assert_same(
                &read(&s(&zz)),
                &read(&s(&nn)),
                &format!("{} on {name}", cmd[0]),
            );
        }
    }
    // The output: OME-Zarr, chunks one slice deep (what the command streams).
    let group: Value =
        serde_json::from_slice(&std::fs::read(dir.join("v3_gzip_u16_0.zarr/zarr.json")).unwrap())
            .unwrap();
    assert_eq!(
        group["attributes"]["ome"]["multiscales"][0]["datasets"][0]["path"],
        "0"
    );
    let v = json_out(&["info", &s(&dir.join("v3_gzip_u16_0.zarr")), "--json"]);
    assert_eq!(v["chunks"], json!([1, 64, 96]));
    assert_eq!(v["array"], "0");
    // Nothing but the outputs in the directory.
    for e in std::fs::read_dir(&dir).unwrap() {
        let n = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!n.contains(TEMP_TAG), "left behind: {n}");
    }
}

#[test]
fn the_command_of_the_issue_and_2d_arrays() {
    let dir = scratch("zarr_median");
    let out = dir.join("out.zarr");
    let input = fixture("v3_sharded_u32.zarr");
    ok(&["median", &input, &s(&out), "--size", "1,3,3"]);
    let npy = dir.join("out.npy");
    ok(&[
        "median",
        &fixture("v3_sharded_u32.npy"),
        &s(&npy),
        "--size",
        "1,3,3",
    ]);
    assert_same(&read(&s(&out)), &read(&s(&npy)), "median");
    // A 2-D array goes through the in-memory path, in and out.
    let out2 = dir.join("t.zarr");
    let npy2 = dir.join("t.npy");
    ok(&[
        "median",
        &fixture("v3_transpose_i16.zarr"),
        &s(&out2),
        "--size",
        "3",
    ]);
    ok(&[
        "median",
        &fixture("v3_transpose_i16.npy"),
        &s(&npy2),
        "--size",
        "3",
    ]);
    assert_same(&read(&s(&out2)), &read(&s(&npy2)), "2-D median");
    // An array inside a group, named with ::.
    let out3 = dir.join("d.zarr");
    ok(&[
        "median",
        &format!("{}::uint16", fixture("v3_dtypes.zarr")),
        &s(&out3),
        "--size",
        "3",
    ]);
    let npy3 = dir.join("d.npy");
    ok(&[
        "median",
        &fixture("v3_dtypes_uint16.npy"),
        &s(&npy3),
        "--size",
        "3",
    ]);
    assert_same(&read(&s(&out3)), &read(&s(&npy3)), "group member");
}

#[test]
fn info_reports_the_layout() {
    let v = json_out(&["info", &fixture("v3_sharded_u32.zarr"), "--json"]);
    assert_eq!(v["format"], "zarr");
    assert_eq!(v["shape"], json!([4, 80, 96]));
    assert_eq!(v["dtype"], "uint32");
    assert_eq!(v["chunks"], json!([2, 80, 96]));
    assert_eq!(v["inner_chunks"], json!([1, 40, 48]));
    let want = json_out(&["info", &fixture("v3_sharded_u32.npy"), "--json"]);
    for k in ["min", "max", "mean"] {
        assert_eq!(v[k], want[k], "{k}");
    }
    let o = ok(&["info", &fixture("v2_zstd_f64.zarr")]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("format:   zarr (v2)"), "{text}");
    assert!(text.contains("chunks:   [2, 30, 50]"), "{text}");
    assert!(text.contains("zstd"), "{text}");
    let o = ok(&["info", &fixture("ome_v2.zarr")]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("array:    s0"));
    // A codec gpuscope does not decode is named.
    let dir = scratch("zarr_info");
    let p = dir.join("bz2.zarr");
    std::fs::create_dir_all(&p).unwrap();
    let doc =
        std::fs::read_to_string(Path::new(&fixture("v3_gzip_u16.zarr")).join("zarr.json")).unwrap();
    std::fs::write(p.join("zarr.json"), doc.replace("\"gzip\"", "\"bz2\"")).unwrap();
    fails(&["info", &s(&p)], "bz2");
}

#[test]
fn an_existing_output_is_never_replaced() {
    let dir = scratch("zarr_exists");
    let out = dir.join("out.zarr");
    std::fs::create_dir_all(out.join("keep")).unwrap();
    let input = fixture("v3_gzip_u16.zarr");
    fails(
        &["median", &input, &s(&out), "--size", "1,3,3"],
        "does not replace",
    );
    assert!(out.join("keep").is_dir());
    // A symlink at the output's name is not followed.
    #[cfg(unix)]
    {
        let target = dir.join("elsewhere");
        let link = dir.join("link.zarr");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        fails(
            &["median", &input, &s(&link), "--size", "1,3,3"],
            "does not replace",
        );
        assert!(!target.exists());
    }
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains(TEMP_TAG)), "{names:?}");
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Ctrl-C while a .zarr output is being written: exit 130, no output and
/// no temporary directory left.
#[test]
fn an_interrupted_write_leaves_nothing() {
    let dir = scratch("zarr_interrupt");
    let (d, h, w) = (300, 256, 256);
    let v: Vec<u16> = (0..d * h * w)
        .map(|i| ((i as u64 * 2_654_435_761) % 4099) as u16)
        .collect();
    let input = dir.join("in.npy");
    gpuscope_io::write(
        &input,
        &Array::new(vec![d, h, w], ArrayData::U16(v)).unwrap(),
    )
    .unwrap();
    let before = names(&dir);
    let out = dir.join("out.zarr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpuscope"))
        .args([
            "median",
            &s(&input),
            &s(&out),
            "--size",
            "3,3,3",
            "--memory-budget",
            "1M",
        ])
        .env("NODEVICE_SELECT", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    // Wait until chunks are being written into the temporary directory.
    loop {
        let tmp = names(&dir).into_iter().find(|n| n.contains(TEMP_TAG));
        if let Some(t) = tmp
            && dir.join(&t).join("0/c/1").exists()
        {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before writing: make the input larger"
        );
        assert!(
            start.elapsed().as_secs() < 120,
            "no temporary directory appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(names(&dir), before, "left behind");
    assert_eq!(o.status.code(), Some(130), "{:?}: {}", o.status, stderr(&o));
    assert!(!out.exists());
}

/// `label` (boolean stack in, int32 labels out) and `threshold` stream
/// Zarr like .npy.
#[test]
fn label_and_threshold_stream_zarr_like_npy() {
    let dir = scratch("zarr_label");
    let frames = read(&fixture("v3_sharded_u32.npy"));
    let mask: Vec<bool> = frames
        .to_f64_vec()
        .iter()
        .map(|&v| v > 2.0 && v < 1e9)
        .collect();
    let m = Array::new(frames.shape.clone(), ArrayData::Bool(mask)).unwrap();
    let (zin, nin) = (dir.join("m.zarr"), dir.join("m.npy"));
    gpuscope_io::write(&zin, &m).unwrap();
    gpuscope_io::write(&nin, &m).unwrap();
    let src = (
        fixture("v3_sharded_u32.zarr"),
        fixture("v3_sharded_u32.npy"),
    );
    let mine = (s(&zin), s(&nin));
    for (cmd, (zi, ni), extra) in [
        ("label", &mine, vec![]),
        ("threshold", &src, vec!["--above", "5"]),
    ] {
        let (zo, no) = (
            dir.join(format!("{cmd}.zarr")),
            dir.join(format!("{cmd}.npy")),
        );
        let (zo, no) = (s(&zo), s(&no));
        let mut a = vec![cmd, zi.as_str(), zo.as_str()];
        a.extend(&extra);
        a.extend(["--memory-budget", TINY, "--json"]);
        let v = json_out(&a);
        assert_eq!(v["streamed"], true, "{cmd}: {v}");
        let mut b = vec![cmd, ni.as_str(), no.as_str()];
        b.extend(&extra);
        b.extend(["--memory-budget", TINY]);
        ok(&b);
        assert_same(&read(&zo), &read(&no), cmd);
    }
}

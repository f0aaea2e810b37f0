//! Headerless .raw stacks in and out of every stack command: streamed with
//! a tiny memory budget, split over two contexts, chained through the
//! sidecar, and the same bytes as the .npy path; bad layouts refused
//! without output.

mod common;

use std::path::Path;

use common::{gpuscope, scratch, stderr};
use gpuscope_io::npy::NpyReader;
use gpuscope_io::raw::sidecar_path;
use gpuscope_io::{Array, ArrayData};
use serde_json::Value;

const TINY: &str = "64K";
const TWO: &str = "llvmpipe,llvmpipe";

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn json(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).expect("one JSON object on stdout")
}

/// The samples of an .npy file: what the same array written raw holds.
fn npy_samples(p: &Path) -> Vec<u8> {
    let offset = NpyReader::open(p).unwrap().header().data_offset;
    std::fs::read(p).unwrap()[offset..].to_vec()
}

fn sidecar(p: &Path) -> Value {
    let text = std::fs::read_to_string(sidecar_path(p))
        .unwrap_or_else(|e| panic!("no sidecar beside {}: {e}", p.display()));
    serde_json::from_str(&text).unwrap()
}

/// u16 slices with ties, zeros (background for label) and bright outliers.
fn stack_u16(d: usize, h: usize, w: usize) -> Vec<u16> {
    let mut st = 0x2545_F491_4F6C_DD1Du64;
    (0..d * h * w)
        .map(|_| {
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            match st % 50 {
                0..=14 => 0,
                15 => 60000,
                _ => (st >> 40) as u16 % 900,
            }
        })
        .collect()
}

/// Writes the stack as `stack.npy` and as headerless `stack.raw` (no sidecar:
/// a file from another program).
fn inputs(dir: &Path, shape: [usize; 3]) -> (std::path::PathBuf, std::path::PathBuf) {
    let v = stack_u16(shape[0], shape[1], shape[2]);
    let npy = dir.join("stack.npy");
    gpuscope_io::write(
        &npy,
        &Array::new(shape.to_vec(), ArrayData::U16(v.clone())).unwrap(),
    )
    .unwrap();
    let raw = dir.join("stack.raw");
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(&raw, bytes).unwrap();
    (npy, raw)
}

#[test]
fn raw_stacks_stream_through_every_stack_command_as_npy_does() {
    let (d, h, w) = (9, 40, 50);
    let dir = scratch("raw_commands");
    let (npy, raw) = inputs(&dir, [d, h, w]);
    let layout = ["--raw-shape", "9,40,50", "--raw-dtype", "uint16"];
    let commands: [(&str, Vec<&str>); 6] = [
        ("median2d", vec!["median", "--size", "1,3,3"]),
        (
            "median3d",
            vec!["median", "--size", "3,5,3", "--mode", "wrap"],
        ),
        (
            "outliers",
            vec!["outliers", "--diff", "200", "--mode", "both"],
        ),
        ("gauss", vec!["convolve", "--gaussian", "1.5"]),
        ("label", vec!["label", "--connectivity", "3"]),
        ("median_mem", vec!["median", "--size", "3"]),
    ];
    for (name, cmd) in commands {
        // The last one with the default budget (one chunk); the rest chunked.
        let budget: &[&str] = if name == "median_mem" {
            &[]
        } else {
            &["--memory-budget", TINY]
        };
        let run = |input: &Path, output: &Path, extra: &[&str]| -> Value {
            let (i, o) = (s(input), s(output));
            let mut args = vec![cmd[0], i.as_str(), o.as_str(), "--json"];
            args.extend(&cmd[1..]);
            args.extend(budget);
            args.extend(extra);
            json(&gpuscope(&args))
        };
        let out_npy = dir.join(format!("{name}.npy"));
        let out_raw = dir.join(format!("{name}.raw"));
        let a = run(&npy, &out_npy, &[]);
        let b = run(&raw, &out_raw, &layout);
        assert_eq!(a["streamed"], true, "{name}: {a}");
        assert_eq!(b["streamed"], true, "{name}: {b}");
        let want = npy_samples(&out_npy);
        assert!(
            std::fs::read(&out_raw).unwrap() == want,
            "{name}: raw output differs from the npy output"
        );
        let side = sidecar(&out_raw);
        let header = NpyReader::open(&out_npy).unwrap().header().clone();
        assert_eq!(side["shape"], serde_json::json!([d, h, w]), "{name}");
        assert_eq!(side["dtype"], header.dtype.name(), "{name}");
        // Raw in, npy out (and the reverse) are the same bytes again.
        let mixed = dir.join(format!("{name}_mixed.npy"));
        run(&raw, &mixed, &layout);
        assert!(npy_samples(&mixed) == want, "{name}: raw -> npy differs");
        let mixed = dir.join(format!("{name}_mixed.raw"));
        run(&npy, &mixed, &[]);
        assert!(
            std::fs::read(&mixed).unwrap() == want,
            "{name}: npy -> raw differs"
        );
    }
    // Something happened: the median is not the input.
    assert!(std::fs::read(dir.join("median3d.raw")).unwrap() != std::fs::read(&raw).unwrap());
}

#[test]
fn raw_outputs_chain_through_their_sidecar_and_foreign_layouts_read() {
    let dir = scratch("raw_chain");
    let (npy, raw) = inputs(&dir, [5, 30, 20]);
    let layout = ["--raw-shape", "5,30,20", "--raw-dtype", "uint16"];
    let step1 = dir.join("m.raw");
    let (i, o) = (s(&raw), s(&step1));
    let mut args = vec![
        "median",
        i.as_str(),
        o.as_str(),
        "--size",
        "1,3,3",
        "--json",
    ];
    args.extend(layout);
    json(&gpuscope(&args));
    // No flags: the sidecar says what m.raw is.
    let info = json(&gpuscope(&["info", &s(&step1), "--json"]));
    assert_eq!(info["shape"], serde_json::json!([5, 30, 20]));
    assert_eq!(info["format"], "raw");
    let step2 = dir.join("l.raw");
    json(&gpuscope(&["label", &s(&step1), &s(&step2), "--json"]));
    // The same chain through npy.
    let (n1, n2) = (dir.join("m.npy"), dir.join("l.npy"));
    json(&gpuscope(&[
        "median",
        &s(&npy),
        &s(&n1),
        "--size",
        "1,3,3",
        "--json",
    ]));
    json(&gpuscope(&["label", &s(&n1), &s(&n2), "--json"]));
    assert!(std::fs::read(&step2).unwrap() == npy_samples(&n2));
    assert_eq!(sidecar(&step2)["dtype"], "int32");

    // A 2-D image from another program: a 100-byte header, big-endian
    // float32; read whole (not a stack).
    let (h, w) = (30, 20);
    let img: Vec<f32> = (0..h * w)
        .map(|i| ((i * 7) % 23) as f32 * 1.5 - 4.0)
        .collect();
    let mut bytes = vec![0xAAu8; 100];
    bytes.extend(img.iter().flat_map(|x| x.to_be_bytes()));
    let foreign = dir.join("foreign.raw");
    std::fs::write(&foreign, bytes).unwrap();
    let plain = dir.join("plain.npy");
    gpuscope_io::write(
        &plain,
        &Array::new(vec![h, w], ArrayData::F32(img)).unwrap(),
    )
    .unwrap();
    let (g1, g2) = (dir.join("g1.npy"), dir.join("g2.npy"));
    json(&gpuscope(&[
        "convolve",
        &s(&plain),
        &s(&g1),
        "--gaussian",
        "2",
        "--json",
    ]));
    json(&gpuscope(&[
        "convolve",
        &s(&foreign),
        &s(&g2),
        "--gaussian",
        "2",
        "--json",
        "--raw-shape",
        "30,20",
        "--raw-dtype",
        "float32",
        "--raw-offset",
        "100",
        "--raw-byte-order",
        "big",
    ]));
    assert!(std::fs::read(&g1).unwrap() == std::fs::read(&g2).unwrap());
}

#[test]
fn two_contexts_write_one_raw_output_equal_to_the_plain_run() {
    let dir = scratch("raw_adapters");
    let (_, raw) = inputs(&dir, [12, 48, 40]);
    let layout = ["--raw-shape", "12,48,40", "--raw-dtype", "uint16"];
    let run = |out: &Path, spread: &[&str]| -> Value {
        let (i, o) = (s(&raw), s(out));
        let mut args: Vec<&str> = spread.to_vec();
        args.extend([
            "median",
            i.as_str(),
            o.as_str(),
            "--size",
            "3,3,3",
            "--json",
        ]);
        args.extend(layout);
        json(&gpuscope(&args))
    };
    let plain = dir.join("plain.raw");
    let split = dir.join("split.raw");
    run(&plain, &[]);
    let v = run(&split, &["--adapters", TWO]);
    assert_eq!(v["n_adapters"], 2, "{v}");
    assert!(std::fs::read(&plain).unwrap() == std::fs::read(&split).unwrap());
    assert_eq!(sidecar(&split), sidecar(&plain));
}

#[test]
fn spot_finding_reads_a_raw_series_as_it_reads_the_npy_one() {
    let dir = scratch("raw_spots");
    let (d, h, w) = (3, 64, 72);
    // Flat background with a few bright 2x2 spots per frame.
    let mut v = vec![10i32; d * h * w];
    for z in 0..d {
        for (y, x) in [(10, 12), (30 + z * 4, 40), (50, 60 - z * 5)] {
            for (dy, dx) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                v[(z * h + y + dy) * w + x + dx] = 400;
            }
        }
    }
    let npy = dir.join("series.npy");
    gpuscope_io::write(
        &npy,
        &Array::new(vec![d, h, w], ArrayData::I32(v.clone())).unwrap(),
    )
    .unwrap();
    let raw = dir.join("series.raw");
    std::fs::write(
        &raw,
        v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
    )
    .unwrap();
    let (t1, t2) = (dir.join("a.csv"), dir.join("b.csv"));
    let a = json(&gpuscope(&["spots", &s(&npy), "--out", &s(&t1), "--json"]));
    let b = json(&gpuscope(&[
        "spots",
        &s(&raw),
        "--out",
        &s(&t2),
        "--json",
        "--raw-shape",
        "3,64,72",
        "--raw-dtype",
        "int32",
    ]));
    assert_eq!(a["n_frames"], 3);
    assert_eq!(b["n_frames"], 3);
    assert!(a["n_spots"].as_u64().unwrap() >= 6, "{a}");
    assert_eq!(a["n_spots"], b["n_spots"]);
    assert_eq!(
        std::fs::read_to_string(&t1).unwrap(),
        std::fs::read_to_string(&t2).unwrap()
    );
}

#[test]
fn bad_raw_layouts_fail_in_one_line_and_write_nothing() {
    let dir = scratch("raw_errors");
    let (_, raw) = inputs(&dir, [4, 10, 8]);
    let out = dir.join("out.raw");
    let fail = |extra: &[&str], says: &str| {
        let (i, o) = (s(&raw), s(&out));
        let mut args = vec!["median", i.as_str(), o.as_str(), "--size", "3"];
        args.extend(extra);
        let r = gpuscope(&args);
        assert_eq!(r.status.code(), Some(1), "{extra:?}: {}", stderr(&r));
        let e = stderr(&r);
        assert!(
            e.starts_with("error: ") && e.contains(says),
            "{extra:?}: {e}"
        );
        assert_eq!(e.trim_end().lines().count(), 1, "{extra:?}: {e}");
        assert!(
            !out.exists() && !sidecar_path(&out).exists(),
            "{extra:?}: output written"
        );
    };
    // No layout at all; a missing file is said to be missing.
    fail(&[], "--raw-shape");
    let r = gpuscope(&["info", &s(&dir.join("missing.raw"))]);
    assert_eq!(r.status.code(), Some(1));
    assert!(stderr(&r).contains("does not exist"), "{}", stderr(&r));
    // Shapes and dtypes that do not fit the 640 bytes.
    fail(
        &["--raw-shape", "4,10,9", "--raw-dtype", "uint16"],
        "needs 720 bytes",
    );
    fail(
        &["--raw-shape", "4,10,8", "--raw-dtype", "float32"],
        "needs 1280 bytes",
    );
    fail(
        &["--raw-shape", "4,10,8", "--raw-dtype", "uint8"],
        "holds 640",
    );
    fail(
        &[
            "--raw-shape",
            "4,10,8",
            "--raw-dtype",
            "uint16",
            "--raw-offset",
            "2",
        ],
        "after 2 header bytes",
    );
    fail(
        &["--raw-shape", "0,10,8", "--raw-dtype", "uint16"],
        "holds 640",
    );
    // Flags that contradict the sidecar.
    std::fs::write(
        sidecar_path(&raw),
        "{\"shape\": [4, 80], \"dtype\": \"uint16\"}",
    )
    .unwrap();
    fail(
        &["--raw-shape", "4,10,8", "--raw-dtype", "uint16"],
        "sidecar",
    );
    // A damaged sidecar.
    std::fs::write(sidecar_path(&raw), "{\"shape\": [4, 10, 8]}").unwrap();
    fail(&[], "stack.raw.json");
    std::fs::remove_file(sidecar_path(&raw)).unwrap();
    // Usage errors (clap, exit 2): half a layout, unknown names.
    for extra in [
        vec!["--raw-shape", "4,10,8"],
        vec!["--raw-dtype", "uint16"],
        vec!["--raw-shape", "4,x,8", "--raw-dtype", "uint16"],
        vec!["--raw-shape", "4,10,8", "--raw-dtype", "uint12"],
        vec![
            "--raw-shape",
            "4,10,8",
            "--raw-dtype",
            "uint16",
            "--raw-byte-order",
            "pdp",
        ],
    ] {
        let (i, o) = (s(&raw), s(&out));
        let mut args = vec!["median", i.as_str(), o.as_str()];
        args.extend(&extra);
        let r = gpuscope(&args);
        assert_eq!(r.status.code(), Some(2), "{extra:?}: {}", stderr(&r));
        assert!(!out.exists());
    }
}

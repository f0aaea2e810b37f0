//! Stacks streamed disk to disk: larger than one lavapipe binding, chunked
//! by a tiny memory budget, damaged files, and the median/outliers contract.

mod common;

use common::{gpuscope, scratch, stderr};
use gpuscope_core::Samples;
use gpuscope_core::filters::Boundary;
use gpuscope_core::filters::median::{Footprint, cpu};
use gpuscope_core::keys::SampleVec;
use gpuscope_io::npy::{NpyReader, NpyWriter};
use gpuscope_io::{Array, ArrayData, DType};
use serde_json::Value;

fn json(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).expect("one JSON object on stdout")
}

/// Deterministic u16 slices with many ties and some extremes.
fn slice_u16(z: usize, h: usize, w: usize) -> Vec<u16> {
    let mut s = (z as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..h * w)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            match s % 100 {
                0 => 65535,
                1 => 0,
                _ => (s >> 40) as u16 % 4000,
            }
        })
        .collect()
}

#[test]
fn stack_larger_than_a_lavapipe_binding_streams_and_equals_the_reference() {
    // 40 slices of 1024² u16: 160 MiB of 32-bit keys, over lavapipe's
    // 128 MiB binding; written and read slice by slice.
    let (d, h, w) = (40, 1024, 1024);
    let dir = scratch("big_stack");
    let input = dir.join("stack.npy");
    let mut writer = NpyWriter::create(&input, vec![d, h, w], DType::U16).unwrap();
    for z in 0..d {
        let slab = Array::new(vec![1, h, w], ArrayData::U16(slice_u16(z, h, w))).unwrap();
        writer.write_slab(&slab).unwrap();
    }
    writer.finish().unwrap();
    let output = dir.join("median.npy");
    let v = json(&gpuscope(&[
        "median",
        input.to_str().unwrap(),
        output.to_str().unwrap(),
        "--size",
        "1,3,3",
        "--json",
    ]));
    assert_eq!(v["streamed"], true);
    assert_eq!(v["dtype"], "uint16");
    let mut result = NpyReader::open(&output).unwrap();
    assert_eq!(result.shape(), &[d, h, w]);
    let fp = Footprint::size(2, &[3]).unwrap();
    // First, last, and slices on both sides of the 16-slice chunk borders.
    for z in [0, 15, 16, 31, 32, d - 1] {
        let got = result.read_slab(z, 1).unwrap();
        let ArrayData::U16(got) = got.data else {
            panic!("uint16 output expected")
        };
        let input = slice_u16(z, h, w);
        let want =
            cpu::median_filter(Samples::U16(&input), &[h, w], &fp, Boundary::default()).unwrap();
        assert!(SampleVec::U16(got) == want, "slice {z} differs");
    }
}

#[test]
fn tiny_memory_budget_and_3d_halos_give_identical_output() {
    let dir = scratch("tiny_budget");
    let (d, h, w) = (9, 40, 50);
    let v: Vec<f32> = (0..d)
        .flat_map(|z| slice_u16(z, h, w))
        .map(|x| f32::from(x) * 0.25 - 100.0)
        .collect();
    let input = dir.join("stack.npy");
    gpuscope_io::write(
        &input,
        &Array::new(vec![d, h, w], ArrayData::F32(v.clone())).unwrap(),
    )
    .unwrap();
    let want = cpu::median_filter(
        Samples::F32(&v),
        &[d, h, w],
        &Footprint::size(3, &[3, 5, 3]).unwrap(),
        Boundary {
            mode: gpuscope_core::filters::Mode::Wrap,
            cval: 0.0,
        },
    )
    .unwrap();
    for budget in ["64K", "1G"] {
        let out = dir.join(format!("out_{budget}.tif"));
        let o = gpuscope(&[
            "--memory-budget",
            budget,
            "median",
            input.to_str().unwrap(),
            out.to_str().unwrap(),
            "--size",
            "3,5,3",
            "--mode",
            "wrap",
            "--json",
        ]);
        assert_eq!(json(&o)["streamed"], true);
        let got = gpuscope_io::read(&out).unwrap().array;
        assert_eq!(got.shape, vec![d, h, w]);
        let ArrayData::F32(got) = got.data else {
            panic!("float32 output expected")
        };
        assert!(SampleVec::F32(got) == want, "budget {budget}");
    }
    // Convolution streams through the same path.
    let out = dir.join("gauss.npy");
    let o = gpuscope(&[
        "--memory-budget",
        "64K",
        "convolve",
        input.to_str().unwrap(),
        out.to_str().unwrap(),
        "--gaussian",
        "1.5",
        "--json",
    ]);
    assert_eq!(json(&o)["streamed"], true);
    let small = dir.join("gauss_whole.npy");
    json(&gpuscope(&[
        "--cpu",
        "convolve",
        input.to_str().unwrap(),
        small.to_str().unwrap(),
        "--gaussian",
        "1.5",
        "--json",
    ]));
    let a = gpuscope_io::read(&out).unwrap().array.to_f64_vec();
    let b = gpuscope_io::read(&small).unwrap().array.to_f64_vec();
    let worst = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    assert!(
        worst < 1e-5 * 16384.0,
        "streamed gaussian differs by {worst}"
    );
}

#[test]
fn damaged_stacks_and_bad_parameters_fail_cleanly_without_output() {
    let dir = scratch("damaged_stack");
    let good = dir.join("good.npy");
    let v: Vec<u16> = (0..4).flat_map(|z| slice_u16(z, 30, 20)).collect();
    gpuscope_io::write(
        &good,
        &Array::new(vec![4, 30, 20], ArrayData::U16(v)).unwrap(),
    )
    .unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let truncated = dir.join("truncated.npy");
    std::fs::write(&truncated, &bytes[..bytes.len() - 700]).unwrap();
    let out = dir.join("out.npy");
    let fail = |args: &[&str], needle: &str| {
        let o = gpuscope(args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
        assert!(
            e.contains(needle) && !e.contains("panicked"),
            "{args:?}: {e}"
        );
        assert!(!out.exists(), "partial output left");
    };
    let (g, t, o) = (
        good.to_str().unwrap(),
        truncated.to_str().unwrap(),
        out.to_str().unwrap(),
    );
    fail(&["median", t, o, "--size", "3"], "truncated");
    fail(&["median", g, o, "--size", "0"], "size");
    fail(&["median", g, o, "--size", "3,3"], "size");
    fail(
        &[
            "median", g, o, "--size", "3", "--mode", "constant", "--cval", "-1",
        ],
        "cval",
    );
    fail(&["outliers", g, o, "--diff", "0"], "diff");
    fail(&["outliers", g, o, "--diff", "nan"], "diff");
    let usage = gpuscope(&["outliers", g, o, "--diff", "5", "--mode", "hot"]);
    assert_eq!(usage.status.code(), Some(2), "{}", stderr(&usage));
    // Outliers stream too and equal the CPU reference.
    let cpu_out = dir.join("cpu.npy");
    for (args, file) in [(vec![], &out), (vec!["--cpu"], &cpu_out)] {
        let mut a: Vec<&str> = args;
        a.extend([
            "outliers",
            g,
            file.to_str().unwrap(),
            "--diff",
            "300",
            "--mode",
            "both",
        ]);
        a.push("--json");
        json(&gpuscope(&a));
    }
    let a = gpuscope_io::read(&out).unwrap().array;
    let b = gpuscope_io::read(&cpu_out).unwrap().array;
    assert_eq!(a.dtype(), DType::U16);
    assert!(a.data == b.data);
    assert!(
        a.data != gpuscope_io::read(&good).unwrap().array.data,
        "some replaced"
    );
}

#[test]
fn an_interrupted_run_leaves_no_output_and_no_temporary_file() {
    // Ctrl-C while the output is being written: exit status 130, the
    // target never appears and the temporary file beside it is removed.
    let (d, h, w) = (48, 512, 512);
    let dir = scratch("interrupted");
    let input = dir.join("stack.npy");
    let mut writer = NpyWriter::create(&input, vec![d, h, w], DType::U16).unwrap();
    for z in 0..d {
        let slab = Array::new(vec![1, h, w], ArrayData::U16(slice_u16(z, h, w))).unwrap();
        writer.write_slab(&slab).unwrap();
    }
    writer.finish().unwrap();
    let output = dir.join("median.npy");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gpuscope"))
        .args(["median", input.to_str().unwrap(), output.to_str().unwrap()])
        .args(["--size", "1,9,9", "--memory-budget", "4M"])
        .env("NODEVICE_SELECT", "1")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let temporary = |dir: &std::path::Path| {
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
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before writing began: make the input larger"
        );
        assert!(
            start.elapsed().as_secs() < 120,
            "no temporary output appeared"
        );
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
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    assert!(!output.exists(), "a partial output was left");
    assert!(!temporary(&dir), "a temporary file was left");
}

/// Frames larger than a clipping slab (8 MiB) are read in rows by `clip`
/// and `threshold` (a mask stack too): the same statistics and mask as
/// from a TIFF of the same stack, whose pages are read whole.
#[test]
fn clip_and_threshold_of_frames_larger_than_a_slab_read_rows() {
    let dir = scratch("clip_rows");
    let (nz, ny, nx) = (2, 1500, 1600);
    let data: Vec<u16> = (0..nz).flat_map(|z| slice_u16(z, ny, nx)).collect();
    let mut v: Vec<f32> = data.iter().map(|&x| f32::from(x) * 0.75).collect();
    v[17] = f32::NAN;
    let a = Array::new(vec![nz, ny, nx], ArrayData::F32(v)).unwrap();
    let mask =
        Array::from_bool(vec![nz, ny, nx], data.iter().map(|&x| x % 7 == 0).collect()).unwrap();
    for ext in ["npy", "tif"] {
        gpuscope_io::write(&dir.join(format!("in.{ext}")), &a).unwrap();
        gpuscope_io::write(&dir.join(format!("mask.{ext}")), &mask).unwrap();
    }
    let s = |p: std::path::PathBuf| p.to_string_lossy().into_owned();
    let run = |ext: &str, masked: bool| {
        let input = s(dir.join(format!("in.{ext}")));
        let m = s(dir.join(format!("mask.{ext}")));
        let mut args = vec!["clip", input.as_str(), "--json", "--cpu"];
        if masked {
            args.extend(["--mask", m.as_str()]);
        }
        let mut v = json(&gpuscope(&args));
        for key in ["total_ms", "kernel_ms", "peak_rss_bytes"] {
            v.as_object_mut().unwrap().remove(key);
        }
        v
    };
    for masked in [false, true] {
        assert_eq!(run("npy", masked), run("tif", masked), "masked: {masked}");
    }
    let t = |ext: &str| {
        let out = dir.join(format!("t-{ext}.npy"));
        let input = s(dir.join(format!("in.{ext}")));
        json(&gpuscope(&[
            "threshold",
            &input,
            &s(out.clone()),
            "--nsigma",
            "1",
            "--json",
        ]));
        std::fs::read(out).unwrap()
    };
    assert_eq!(t("npy"), t("tif"));
}

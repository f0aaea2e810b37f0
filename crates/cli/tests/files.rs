//! What gpuscope does to the file system: temporary files that a planted
//! symlink cannot redirect and that an interrupt removes, the report of
//! those a killed run left, raw data and sidecar that cannot be mixed up,
//! Fortran-order input everywhere, no output left by a failed run, and a
//! quiet stderr on success.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{gpuscope, scratch, stderr};
use gpuscope_io::{Array, ArrayData, TEMP_TAG};

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn ok(o: &std::process::Output) {
    assert!(o.status.success(), "{}", stderr(o));
}

/// Exactly one line, `error: ...`.
fn one_error_line(o: &std::process::Output) -> String {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.starts_with("error: "), "{e}");
    e
}

fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut st = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            (st >> 11) as f64 / (1u64 << 53) as f64
        })
        .collect()
}

/// Low noise with sparse bright pixels and zeros: something for every
/// command (sources, spots and label included).
fn image_u16(n: usize, seed: u64) -> Vec<u16> {
    noise(n, seed)
        .iter()
        .map(|&v| match (v * 1000.0) as u32 {
            0..=9 => 3000 + (v * 1e6) as u16 % 500,
            10..=300 => 0,
            k => (k % 40) as u16,
        })
        .collect()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The pids the next processes will most likely get (Linux hands them out
/// in order).
fn next_pids(count: u32) -> std::ops::Range<u32> {
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(std::process::id());
    last + 1..last + 1 + count
}

#[test]
fn planted_symlinks_at_temporary_names_do_not_redirect_writes() {
    // Symlinks to a victim file at every name the old scheme would have
    // used for the next pids (`.OUT.tmp-PID-N`, `.OUT.provisional-PID`)
    // and at the new pattern with guessable suffixes: a streamed label run
    // (provisional file and temporary output) must leave the victim as it
    // was and write its output, equal to a run in a clean directory.
    let clean = scratch("symlink_clean");
    let dir = scratch("symlink_planted");
    let (d, h, w) = (6, 24, 24);
    let input = clean.join("in.npy");
    let a = Array::new(vec![d, h, w], ArrayData::U16(image_u16(d * h * w, 3))).unwrap();
    gpuscope_io::write(&input, &a).unwrap();
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    for out in ["out.npy", "cat.csv"] {
        for pid in next_pids(1500) {
            for name in [
                format!(".{out}.tmp-{pid}-0"),
                format!(".{out}.tmp-{pid}-1"),
                format!(".{out}.provisional-{pid}"),
                format!(".{out}{TEMP_TAG}{pid}-0000000000000000"),
            ] {
                std::os::unix::fs::symlink(&victim, dir.join(name)).unwrap();
            }
        }
    }
    let run = |d: &Path| {
        ok(&gpuscope(&[
            "--memory-budget",
            "5K",
            "label",
            &s(&input),
            &s(&d.join("out.npy")),
        ]));
        ok(&gpuscope(&[
            "--memory-budget",
            "5K",
            "sources",
            &s(&input),
            "--catalogue",
            &s(&d.join("cat.csv")),
        ]));
    };
    run(&clean);
    run(&dir);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    for out in ["out.npy", "cat.csv"] {
        let meta = std::fs::symlink_metadata(dir.join(out)).unwrap();
        assert!(meta.file_type().is_file(), "{out} is not a plain file");
        assert_eq!(
            std::fs::read(dir.join(out)).unwrap(),
            std::fs::read(clean.join(out)).unwrap(),
            "{out}"
        );
    }
    // A symlink at the output's own path is replaced, not followed.
    let linked = dir.join("linked.npy");
    std::os::unix::fs::symlink(&victim, &linked).unwrap();
    ok(&gpuscope(&[
        "median",
        &s(&input),
        &s(&linked),
        "--size",
        "3",
    ]));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(std::fs::symlink_metadata(&linked).unwrap().is_file());
}

/// Starts `args`, waits until a temporary file shows in `dir`, sends
/// SIGINT, and checks that the run stops with nothing new left in `dir`.
fn interrupt_leaves_nothing(dir: &Path, args: &[String]) {
    let before = names(dir);
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpuscope"))
        .args(args)
        .env("NODEVICE_SELECT", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !names(dir).iter().any(|n| n.contains(TEMP_TAG)) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "{args:?} ended before a temporary file appeared: make the input larger"
        );
        assert!(
            start.elapsed().as_secs() < 120,
            "no temporary file appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // Into the labelling proper (the provisional file is made first).
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "{args:?} finished before the signal: make the input larger"
    );
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert_eq!(names(dir), before, "{args:?} left files behind");
}

#[test]
fn ctrl_c_during_streamed_label_and_sources_leaves_nothing_behind() {
    let dir = scratch("interrupt_segment");
    let (d, h, w) = (400, 256, 256);
    let m: Vec<u8> = noise(d * h * w, 9)
        .iter()
        .map(|&v| if v < 0.01 { 200 } else { (v * 20.0) as u8 })
        .collect();
    let input = dir.join("in.npy");
    gpuscope_io::write(
        &input,
        &Array::new(vec![d, h, w], ArrayData::U8(m)).unwrap(),
    )
    .unwrap();
    let out = dir.join("labels.npy");
    let budget = ["--memory-budget".to_string(), "1M".to_string()];
    let mut label = budget.to_vec();
    label.extend(["label", &s(&input), &s(&out)].map(String::from));
    interrupt_leaves_nothing(&dir, &label);
    let mut sources = budget.to_vec();
    sources.extend(
        [
            "sources",
            &s(&input),
            "--catalogue",
            &s(&dir.join("cat.csv")),
            "--labels",
            &s(&dir.join("l.npy")),
        ]
        .map(String::from),
    );
    interrupt_leaves_nothing(&dir, &sources);
}

#[test]
fn temporary_files_of_killed_runs_are_reported_once_and_kept() {
    let dir = scratch("stale");
    let input = dir.join("in.npy");
    let a = Array::new(vec![20, 30], ArrayData::U16(image_u16(600, 4))).unwrap();
    gpuscope_io::write(&input, &a).unwrap();
    // pid 999999999 is above every kernel's pid_max: a killed run's file.
    let dead = dir.join(format!(".out.npy{TEMP_TAG}999999999-00112233445566ff"));
    std::fs::write(&dead, "half an output").unwrap();
    // This test's own pid is running: a file being written right now.
    let live = dir.join(format!(
        ".other.npy{TEMP_TAG}{}-00112233445566ff",
        std::process::id()
    ));
    std::fs::write(&live, "being written").unwrap();
    // Not our pattern: never reported.
    let other = dir.join(".out.npy.tmp-999999999-0");
    std::fs::write(&other, "someone else's").unwrap();
    let out = dir.join("out.npy");
    let o = gpuscope(&["convolve", &s(&input), &s(&out), "--gaussian", "1"]);
    ok(&o);
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.starts_with("warning: "), "{e}");
    assert!(e.contains(&s(&dead)), "{e}");
    assert!(!e.contains("other.npy"), "{e}");
    assert!(!e.contains(".tmp-999999999-0"), "{e}");
    assert!(dead.exists() && live.exists() && other.exists());
    assert!(out.exists());
    // Once the file is gone, nothing is reported.
    std::fs::remove_file(&dead).unwrap();
    let o = gpuscope(&["convolve", &s(&input), &s(&out), "--gaussian", "1"]);
    ok(&o);
    assert_eq!(stderr(&o), "");
}

#[test]
fn a_raw_file_with_another_runs_sidecar_is_refused() {
    let dir = scratch("raw_pairs");
    let input = dir.join("in.npy");
    let (d, h, w) = (4, 20, 30);
    let a = Array::new(vec![d, h, w], ArrayData::U16(image_u16(d * h * w, 5))).unwrap();
    gpuscope_io::write(&input, &a).unwrap();
    // Two outputs of the same size: int32 and float32, then two uint16.
    let int = dir.join("int.raw");
    let float = dir.join("float.raw");
    let (m1, m2) = (dir.join("m1.raw"), dir.join("m2.raw"));
    ok(&gpuscope(&[
        "convolve",
        &s(&input),
        &s(&int),
        "--gaussian",
        "1",
        "--dtype",
        "int32",
    ]));
    ok(&gpuscope(&[
        "convolve",
        &s(&input),
        &s(&float),
        "--gaussian",
        "1",
        "--dtype",
        "float32",
    ]));
    ok(&gpuscope(&["median", &s(&input), &s(&m1), "--size", "3"]));
    ok(&gpuscope(&[
        "median",
        &s(&input),
        &s(&m2),
        "--size",
        "1,3,5",
    ]));
    for p in [&int, &float, &m1, &m2] {
        ok(&gpuscope(&["info", &s(p)]));
    }
    let side = |p: &Path| PathBuf::from(format!("{}.json", s(p)));
    // Data of one run with the sidecar of the other, as two runs writing
    // the same output at once can leave them.
    std::fs::copy(side(&float), side(&int)).unwrap();
    std::fs::copy(&m2, &m1).unwrap();
    let out = dir.join("o.npy");
    for (p, args) in [
        (&int, vec!["info"]),
        (&m1, vec!["info"]),
        (&m1, vec!["median", "--size", "3"]),
        (&int, vec!["convolve", "--gaussian", "1"]),
    ] {
        let mut full = vec![args[0].to_string(), s(p)];
        if args[0] != "info" {
            full.push(s(&out));
        }
        full.extend(args[1..].iter().map(|a| a.to_string()));
        let full: Vec<&str> = full.iter().map(String::as_str).collect();
        let o = gpuscope(&full);
        let e = one_error_line(&o);
        assert!(e.contains("does not match its sidecar"), "{e}");
        assert!(!out.exists(), "{full:?} wrote an output");
    }
    // Through the library's whole-file reader too.
    let e = gpuscope_io::read(&m1).unwrap_err().to_string();
    assert!(e.contains("does not match its sidecar"), "{e}");
}

/// Writes `c` (C order, shape `shape`) as a Fortran-order .npy.
fn write_fortran_u16(path: &Path, shape: &[usize], c: &[u16]) {
    let dims: Vec<String> = shape.iter().map(|n| n.to_string()).collect();
    let mut dict = format!(
        "{{'descr': '<u2', 'fortran_order': True, 'shape': ({},), }}",
        dims.join(", ")
    );
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((dict.len() as u16).to_le_bytes());
    bytes.extend(dict.as_bytes());
    // Fortran order: the first axis fastest.
    let strides: Vec<usize> = (0..shape.len())
        .map(|a| shape[a + 1..].iter().product())
        .collect();
    let n: usize = shape.iter().product();
    for f in 0..n {
        let mut rest = f;
        let mut c_index = 0;
        for a in 0..shape.len() {
            c_index += (rest % shape[a]) * strides[a];
            rest /= shape[a];
        }
        bytes.extend(c[c_index].to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn fortran_order_npy_is_read_by_every_command() {
    let dir = scratch("fortran");
    let (d, h, w) = (4, 30, 40);
    let v = image_u16(d * h * w, 6);
    let stack_c = dir.join("stack_c.npy");
    let stack_f = dir.join("stack_f.npy");
    gpuscope_io::write(
        &stack_c,
        &Array::new(vec![d, h, w], ArrayData::U16(v.clone())).unwrap(),
    )
    .unwrap();
    write_fortran_u16(&stack_f, &[d, h, w], &v);
    let plane_c = dir.join("plane_c.npy");
    let plane_f = dir.join("plane_f.npy");
    let p = v[..h * w].to_vec();
    gpuscope_io::write(
        &plane_c,
        &Array::new(vec![h, w], ArrayData::U16(p.clone())).unwrap(),
    )
    .unwrap();
    write_fortran_u16(&plane_f, &[h, w], &p);
    assert_eq!(
        gpuscope_io::read(&stack_f).unwrap().array,
        gpuscope_io::read(&stack_c).unwrap().array
    );
    // (command, output name, arguments after the input and output)
    let runs: [(&str, &str, &[&str]); 7] = [
        ("convolve", "o.npy", &["--gaussian", "1"]),
        ("median", "o.npy", &["--size", "3"]),
        ("outliers", "o.npy", &["--diff", "100"]),
        ("label", "o.npy", &[]),
        ("sources", "o.csv", &["--nsigma", "3"]),
        ("spots", "o.csv", &[]),
        (
            "convolve",
            "o.npy",
            &["--gaussian", "1", "--memory-budget", "64K"],
        ),
    ];
    for (inputs, what) in [
        ((&stack_c, &stack_f), "stack"),
        ((&plane_c, &plane_f), "plane"),
    ] {
        for (cmd, out, extra) in runs {
            let mut results = Vec::new();
            for (order, input) in [("c", inputs.0), ("f", inputs.1)] {
                let output = dir.join(format!("{what}_{order}_{out}"));
                let mut args = vec![cmd.to_string(), s(input)];
                match cmd {
                    "sources" => args.extend(["--catalogue".into(), s(&output)]),
                    "spots" => args.extend(["--out".into(), s(&output)]),
                    _ => args.push(s(&output)),
                }
                args.extend(extra.iter().map(|a| a.to_string()));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                ok(&gpuscope(&args));
                results.push(std::fs::read(&output).unwrap());
            }
            assert!(results[0] == results[1], "{cmd} {extra:?} on the {what}");
        }
    }
}

#[test]
fn a_catalogue_that_cannot_be_written_leaves_no_labels() {
    let dir = scratch("sources_no_labels");
    let input = dir.join("in.npy");
    let a = Array::new(vec![40, 50], ArrayData::U16(image_u16(2000, 7))).unwrap();
    gpuscope_io::write(&input, &a).unwrap();
    let labels = dir.join("L.npy");
    let catalogue = dir.join("missing").join("cat.csv");
    let o = gpuscope(&[
        "sources",
        &s(&input),
        "--catalogue",
        &s(&catalogue),
        "--labels",
        &s(&labels),
    ]);
    let e = one_error_line(&o);
    assert!(e.contains("cat.csv"), "{e}");
    assert_eq!(names(&dir), vec!["in.npy".to_string()]);
    // The same with a 3-D stack.
    let stack = dir.join("stack.npy");
    let a = Array::new(vec![4, 40, 50], ArrayData::U16(image_u16(8000, 8))).unwrap();
    gpuscope_io::write(&stack, &a).unwrap();
    let o = gpuscope(&[
        "sources",
        &s(&stack),
        "--catalogue",
        &s(&catalogue),
        "--labels",
        &s(&labels),
    ]);
    one_error_line(&o);
    assert!(!labels.exists());
}

#[test]
fn absurd_median_sizes_are_refused_before_any_allocation() {
    let dir = scratch("median_size");
    let input = dir.join("in.npy");
    let a = Array::new(vec![20, 30], ArrayData::U16(image_u16(600, 2))).unwrap();
    gpuscope_io::write(&input, &a).unwrap();
    let out = dir.join("o.npy");
    for size in ["40000", "100000000", "1025,1025", "18446744073709551615"] {
        for cpu in [false, true] {
            let mut args = vec!["median", input.to_str().unwrap(), out.to_str().unwrap()];
            args.extend(["--size", size]);
            if cpu {
                args.push("--cpu");
            }
            // 300 MB of address space is far below the old mask (1.6 GB
            // for 40000) and enough for a small CPU run; GPU drivers
            // reserve more than that, so the GPU run is not limited.
            let limit = if cpu { "ulimit -v 300000; " } else { "" };
            let o = Command::new("sh")
                .arg("-c")
                .arg(format!("{limit}exec \"$@\""))
                .arg("sh")
                .arg(env!("CARGO_BIN_EXE_gpuscope"))
                .args(&args)
                .env("NODEVICE_SELECT", "1")
                .output()
                .unwrap();
            let e = one_error_line(&o);
            assert!(e.contains("size"), "{size}: {e}");
            assert!(!out.exists());
        }
    }
    // Large footprints within the limits still run, also beyond the image.
    ok(&gpuscope(&["median", &s(&input), &s(&out), "--size", "41"]));
}

#[test]
fn a_successful_run_without_xdg_runtime_dir_prints_nothing_on_stderr() {
    let dir = scratch("xdg");
    let input = dir.join("in.npy");
    let a = Array::new(vec![20, 30], ArrayData::U16(image_u16(600, 1))).unwrap();
    gpuscope_io::write(&input, &a).unwrap();
    let out = dir.join("o.npy");
    // Mesa's device-select Vulkan layer (on unless NODEVICE_SELECT is set)
    // connects to the Wayland display to find the default GPU: that is what
    // prints `error: XDG_RUNTIME_DIR is invalid ...` without the variable.
    for backend in [None, Some("gl")] {
        let mut c = Command::new(env!("CARGO_BIN_EXE_gpuscope"));
        c.args(["median", &s(&input), &s(&out), "--size", "3"])
            .env_remove("NODEVICE_SELECT")
            .env_remove("XDG_RUNTIME_DIR");
        if let Some(b) = backend {
            c.env("WGPU_BACKEND", b);
        }
        let o = c.output().unwrap();
        ok(&o);
        assert_eq!(stderr(&o), "", "backend {backend:?}");
        let o = Command::new(env!("CARGO_BIN_EXE_gpuscope"))
            .arg("devices")
            .env_remove("NODEVICE_SELECT")
            .env_remove("XDG_RUNTIME_DIR")
            .output()
            .unwrap();
        ok(&o);
        assert_eq!(stderr(&o), "");
    }
}

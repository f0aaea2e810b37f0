//! Hostile inputs on the command line: links out of the input's folder
//! (`--allow-links-outside`), special files, a decompression bomb under
//! `--memory-budget`, and `gpuscope clean`. The files are made here
//! (HDF5 by `rust-hdf5`, Zarr by hand).
#![cfg(unix)]

mod common;

use std::path::Path;

use common::{gpuscope, scratch, stderr};
use rust_hdf5::H5File;
use serde_json::Value;

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn data_file(path: &Path) {
    let f = H5File::create(path).unwrap();
    let ds = f
        .new_dataset::<u16>()
        .shape([2, 3, 4])
        .create("data")
        .unwrap();
    ds.write_raw(&(0..24u16).collect::<Vec<_>>()).unwrap();
    f.close().unwrap();
}

#[test]
fn links_out_of_the_folder_need_the_flag() {
    let root = scratch("hostile-links");
    let (i, o) = (root.join("in"), root.join("out"));
    std::fs::create_dir_all(&i).unwrap();
    std::fs::create_dir_all(&o).unwrap();
    data_file(&o.join("secret.h5"));
    let f = H5File::create(i.join("master.h5")).unwrap();
    let g = f
        .create_group("entry")
        .unwrap()
        .create_group("data")
        .unwrap();
    g.create_external_link("data_000001", "../out/secret.h5", "/data")
        .unwrap();
    f.close().unwrap();
    let master = s(&i.join("master.h5"));
    for cmd in [
        vec!["info", &master],
        vec!["median", &master, "x.npy", "--size", "1,3,3", "--cpu"],
    ] {
        let o = gpuscope(&cmd);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{cmd:?}: {e}");
        for want in [
            "/entry/data/data_000001",
            "outside the input's folder",
            "--allow-links-outside",
        ] {
            assert!(e.contains(want), "{want:?} not in {e}");
        }
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    let o = gpuscope(&["info", &master, "--json", "--allow-links-outside"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["shape"], serde_json::json!([2, 3, 4]));
}

#[test]
fn zarr_chunks_linked_out_or_special_are_errors() {
    let root = scratch("hostile-zarr");
    let store = root.join("a.zarr");
    std::fs::create_dir_all(store.join("c/0")).unwrap();
    std::fs::write(
        store.join("zarr.json"),
        r#"{"zarr_format": 3, "node_type": "array", "shape": [1, 4], "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1, 4]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "bytes"}, {"name": "zstd"}]}"#,
    )
    .unwrap();
    std::fs::write(root.join("shadow"), "root:x:0:0::/root").unwrap();
    std::os::unix::fs::symlink(root.join("shadow"), store.join("c/0/0")).unwrap();
    let o = gpuscope(&["info", &s(&store)]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("c/0/0") && e.contains("--allow-links-outside"),
        "{e}"
    );
    // Allowed, the bytes are read and refused as zstd without quoting them.
    let o = gpuscope(&["info", &s(&store), "--allow-links-outside"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(!e.contains("1953460082") && !e.contains("root:"), "{e}");
    std::fs::remove_file(store.join("c/0/0")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", store.join("c/0/0")).unwrap();
    let o = gpuscope(&["info", &s(&store), "--allow-links-outside"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("device"), "{e}");
}

/// One deflate chunk of `n` x `n` zero bytes (a small file).
fn bomb(path: &Path, n: usize, written: bool) {
    let f = H5File::create(path).unwrap();
    let ds = f
        .new_dataset::<u8>()
        .shape([n, n])
        .chunk(&[n, n])
        .deflate(6)
        .create("data")
        .unwrap();
    if written {
        ds.write_raw(&vec![0u8; n * n]).unwrap();
    }
    f.close().unwrap();
}

#[test]
fn chunks_larger_than_the_budget_allows_are_refused_before_inflating() {
    let root = scratch("hostile-bomb");
    // 16 MiB decoded from a file of a few KiB; 8 times a 1 MiB budget is
    // less. The 46000 x 46000 chunk is declared only: refused the same way
    // at 64M (8 x 64 MiB < 2 GiB) before any byte of it is read.
    let small = root.join("bomb.h5");
    bomb(&small, 4096, true);
    assert!(std::fs::metadata(&small).unwrap().len() < 1 << 20);
    let big = root.join("big.h5");
    bomb(&big, 46000, false);
    let out = s(&root.join("out.npy"));
    for (file, budget) in [(&small, "1M"), (&big, "64M")] {
        let o = gpuscope(&[
            "median",
            &format!("{}::/data", s(file)),
            &out,
            "--size",
            "3",
            "--memory-budget",
            budget,
            "--cpu",
        ]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(
            e.contains("memory budget") && e.contains("--memory-budget"),
            "{e}"
        );
    }
    assert!(!root.join("out.npy").exists());
}

/// A pid no process has (a child that has exited).
fn dead_pid() -> u32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

#[test]
fn clean_removes_only_our_leftovers() {
    let dir = scratch("hostile-clean");
    let dead = dead_pid();
    let ours = format!(".out.npy.gpuscope-tmp-{dead}-00112233445566ff");
    let ours_dir = format!(".o.zarr.gpuscope-tmp-{dead}-a0b1c2d3e4f5a6b7");
    let live = format!(
        ".live.npy.gpuscope-tmp-{}-00112233445566ff",
        std::process::id()
    );
    let short = format!(".x.npy.gpuscope-tmp-{dead}-0011");
    let link = format!(".l.npy.gpuscope-tmp-{dead}-0011223344556677");
    std::fs::write(dir.join(&ours), "x").unwrap();
    std::fs::create_dir_all(dir.join(&ours_dir).join("c")).unwrap();
    std::fs::write(dir.join(&ours_dir).join("zarr.json"), "{}").unwrap();
    std::fs::write(dir.join(&live), "x").unwrap();
    std::fs::write(dir.join(&short), "x").unwrap();
    std::fs::write(dir.join("victim"), "keep").unwrap();
    std::os::unix::fs::symlink(dir.join("victim"), dir.join(&link)).unwrap();
    let o = gpuscope(&["clean", &s(&dir), "--dry-run", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["found"].as_array().unwrap().len(), 2, "{v}");
    assert!(dir.join(&ours).exists());
    let o = gpuscope(&["clean", &s(&dir), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["removed"].as_array().unwrap().len(), 2, "{v}");
    assert!(!dir.join(&ours).exists() && !dir.join(&ours_dir).exists());
    for kept in [&live, &short, &link, &"victim".to_string()] {
        assert!(
            std::fs::symlink_metadata(dir.join(kept)).is_ok(),
            "{kept} removed"
        );
    }
    assert_eq!(std::fs::read_to_string(dir.join("victim")).unwrap(), "keep");
}

#[test]
fn a_run_names_leftovers_and_the_command_that_removes_them() {
    let dir = scratch("hostile-warn");
    let stale = dir.join(format!(
        ".a.npy.gpuscope-tmp-{}-00112233445566ff",
        dead_pid()
    ));
    std::fs::write(&stale, "x").unwrap();
    let input = s(&dir.join("in.npy"));
    gpuscope_io::write(
        Path::new(&input),
        &gpuscope_io::Array::new(vec![2, 2], gpuscope_io::ArrayData::U8(vec![1, 2, 3, 4])).unwrap(),
    )
    .unwrap();
    let o = gpuscope(&[
        "threshold",
        &input,
        &s(&dir.join("out.npy")),
        "--above",
        "1",
        "--cpu",
    ]);
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(
        e.contains(&s(&stale)) && e.contains("gpuscope clean"),
        "{e}"
    );
    assert!(stale.exists(), "a run removes nothing by itself");
}

/// A Zarr store of `frames` uint16 frames of 64 x 80 that declares them
/// all and holds none (every frame reads as the fill value).
fn declared(path: &Path, frames: u64) {
    std::fs::create_dir_all(path).unwrap();
    std::fs::write(
        path.join("zarr.json"),
        format!(
            r#"{{"zarr_format": 3, "node_type": "array", "shape": [{frames}, 64, 80],
            "data_type": "uint16",
            "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": [1, 64, 80]}}}},
            "chunk_key_encoding": {{"name": "default"}}, "fill_value": 7,
            "codecs": [{{"name": "bytes", "configuration": {{"endian": "little"}}}}]}}"#
        ),
    )
    .unwrap();
}

/// The peak resident size of `args` after `seconds` of running (then the
/// run is killed: the declared stacks take years).
fn peak_after(args: &[&str], seconds: f64) -> u64 {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gpuscope"))
        .args(args)
        .env("NODEVICE_SELECT", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("the run was still going when measured");
    kib * 1024
}

/// A header may declare any number of frames: the streamed median's memory
/// must not grow with it (the plan of chunks is made one chunk at a time).
#[cfg(target_os = "linux")]
#[test]
fn declared_frame_counts_do_not_grow_memory() {
    let root = scratch("hostile-declared");
    let mut peaks = Vec::new();
    for frames in [1_000_000u64, 10_000_000_000] {
        let store = root.join(format!("d{frames}.zarr"));
        declared(&store, frames);
        let out = s(&root.join(format!("out{frames}.zarr")));
        let args = [
            "--memory-budget",
            "16M",
            "median",
            &s(&store),
            &out,
            "--size",
            "1,3,3",
            "--no-sync",
        ];
        peaks.push(peak_after(&args, 4.0));
    }
    let grew = peaks[1] as f64 - peaks[0] as f64;
    assert!(
        grew < 32.0 * (1 << 20) as f64,
        "10^10 declared frames peaked {:.0} MiB above 10^6 ({peaks:?})",
        grew / (1 << 20) as f64
    );
}

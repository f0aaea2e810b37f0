//! Helpers for running the `gpuscope` binary in tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// ../shared/data beside the repository (CI has it there).
pub fn data(rel: &str) -> PathBuf {
    let p = repo().join("../shared/data").join(rel);
    assert!(
        p.exists(),
        "{} is missing: the tests read the shared data from ../shared/data beside the repository",
        p.display()
    );
    p
}

pub fn gpuscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuscope"))
        .args(args)
        .env("NODEVICE_SELECT", "1")
        .output()
        .expect("the gpuscope binary runs")
}

/// A fresh empty directory under the target dir for one test's files.
pub fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Whether this run is tests/all.sh's second pass on another backend
/// (`WGPU_BACKEND` set): tests of host code alone, which no backend
/// changes, return early there; the first pass runs them.
pub fn backend_rerun() -> bool {
    std::env::var_os("WGPU_BACKEND").is_some()
}

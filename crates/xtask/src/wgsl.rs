//! `cargo xtask wgsl [DIR]`: the shaders gpuscope generates on the host,
//! written out so they can be read (and fed to other tools, e.g. naga-cli).
//! The core's `wgsl` example does the writing: xtask itself depends on no
//! GPU crate, so that `cargo xtask serve` starts building the page at once.

use std::path::PathBuf;
use std::process::Command;

pub fn dump(args: &[String]) -> Result<(), String> {
    let root = crate::web::root();
    let dir = match args {
        [] => crate::web::target_dir(&root).join("wgsl"),
        [dir] if !dir.starts_with('-') => PathBuf::from(dir),
        _ => return Err("usage: cargo xtask wgsl [DIR]".into()),
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(&root)
        .args([
            "run",
            "-q",
            "-p",
            "gpuscope-core",
            "--example",
            "wgsl",
            "--",
        ])
        .arg(&dir)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("writing the generated shaders failed ({status})"))
    }
}

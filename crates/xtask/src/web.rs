//! `build-web` and `test-web`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use crate::serve::Server;

const TARGET: &str = "wasm32-unknown-unknown";
const CHROMIUM: &str = "/usr/bin/chromium";

/// The repository root (this crate lives in `crates/xtask`).
pub fn root() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    dir.canonicalize().unwrap_or(dir)
}

/// Where cargo puts its output: `CARGO_TARGET_DIR` (relative to where we
/// were started, as cargo reads it) or `<root>/target`.
pub fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                std::env::current_dir()
                    .map(|cwd| cwd.join(&dir))
                    .unwrap_or(dir)
            }
        }
        _ => root.join("target"),
    }
}

fn status_of(cmd: &mut Command, what: &str) -> Result<std::process::ExitStatus, String> {
    cmd.status().map_err(|e| format!("cannot run {what}: {e}"))
}

/// Installs the wasm32 target through rustup when it is missing. Without
/// rustup (a distribution's Rust) cargo itself reports a missing target.
fn ensure_wasm_target() -> Result<(), String> {
    let Ok(out) = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
    else {
        return Ok(());
    };
    if String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.trim() == TARGET)
    {
        return Ok(());
    }
    eprintln!("xtask: installing the {TARGET} target");
    let ok = status_of(
        Command::new("rustup").args(["target", "add", TARGET]),
        "rustup",
    )?
    .success();
    if ok {
        Ok(())
    } else {
        Err(format!(
            "the {TARGET} target is missing and could not be installed: run `rustup target add {TARGET}`"
        ))
    }
}

/// Builds crates/web for wasm32 with `profile` and writes the JS glue, the
/// processed .wasm and TypeScript declarations to `web/pkg/`.
pub fn build(profile: &str) -> Result<(), String> {
    let root = root();
    ensure_wasm_target()?;
    let started = Instant::now();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let ok = status_of(
        Command::new(cargo).current_dir(&root).args([
            "build",
            "-p",
            "gpuscope-web",
            "--target",
            TARGET,
            "--profile",
            profile,
        ]),
        "cargo",
    )?
    .success();
    if !ok {
        return Err("the wasm build of gpuscope-web failed (see cargo's messages above)".into());
    }
    let wasm = target_dir(&root)
        .join(TARGET)
        .join(profile)
        .join("gpuscope_web.wasm");
    if !wasm.is_file() {
        return Err(format!("cargo succeeded but {} is missing", wasm.display()));
    }
    let out = root.join("web/pkg");
    wasm_bindgen_cli_support::Bindgen::new()
        .input_path(&wasm)
        .out_name("gpuscope_web")
        .web(true)
        .map_err(|e| format!("wasm-bindgen: {e:#}"))?
        .typescript(true)
        // As the wasm-bindgen CLI does (the library defaults to omitting it):
        // `init()` then finds the .wasm next to the glue.
        .omit_default_module_path(false)
        // The name section is a fifth of the module; dev builds keep it for
        // readable panic backtraces.
        .remove_name_section(profile == "release-web")
        .generate(&out)
        .map_err(|e| format!("wasm-bindgen on {}: {e:#}", wasm.display()))?;
    let size = std::fs::metadata(out.join("gpuscope_web_bg.wasm"))
        .map(|m| m.len())
        .unwrap_or(0);
    eprintln!(
        "xtask: web/pkg/ ready ({profile}, gpuscope_web_bg.wasm {} KiB) in {:.1} s",
        size / 1024,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Builds, installs the pinned npm packages when absent, serves the
/// repository on a free port and runs `node --test web/tests/` against it.
pub fn test(profile: &str) -> Result<ExitCode, String> {
    let root = root();
    let chromium = std::env::var("GPUSCOPE_CHROMIUM").unwrap_or_else(|_| CHROMIUM.into());
    if !Path::new(&chromium).is_file() {
        return Err("chromium is missing: apt-get install -y chromium".into());
    }
    if Command::new("node").arg("--version").output().is_err() {
        return Err("node is missing: install Node.js 20 or newer".into());
    }
    build(profile)?;
    if !root.join("node_modules/playwright-core").is_dir() {
        eprintln!("xtask: npm ci (playwright-core, pinned in package-lock.json)");
        let ok = status_of(
            Command::new("npm")
                .current_dir(&root)
                .args(["ci", "--no-audit", "--no-fund"]),
            "npm",
        )?
        .success();
        if !ok {
            return Err("npm ci failed (see npm's messages above)".into());
        }
    }
    let server = Server::bind(&root, 0)?;
    let url = server.url();
    std::thread::spawn(move || server.run());
    eprintln!("xtask: testing {url} with {chromium}");
    let status = status_of(
        Command::new("node")
            .current_dir(&root)
            .args(["--test", "--test-reporter=spec", "web/tests/"])
            .env("GPUSCOPE_URL", &url)
            .env("GPUSCOPE_CHROMIUM", &chromium),
        "node",
    )?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}

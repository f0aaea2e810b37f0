//! `build-web` and `test-web`.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

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
    eprintln!(
        "xtask: building the wasm module (cargo build -p gpuscope-web --target {TARGET} --profile {profile}; \
         the first build compiles every dependency and takes minutes)..."
    );
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

/// Builds `web/pkg/` and `dist/`, installs the pinned npm packages when
/// absent, serves `dist/` with a plain static server (`python3 -m
/// http.server`, as any web host would) and runs `node --test web/tests/`
/// against it.
pub fn test(profile: &str) -> Result<ExitCode, String> {
    let root = root();
    let chromium = std::env::var("GPUSCOPE_CHROMIUM").unwrap_or_else(|_| CHROMIUM.into());
    if !Path::new(&chromium).is_file() {
        return Err("chromium is missing: apt-get install -y chromium".into());
    }
    if Command::new("node").arg("--version").output().is_err() {
        return Err("node is missing: install Node.js 20 or newer".into());
    }
    if Command::new("python3").arg("--version").output().is_err() {
        return Err(
            "python3 is missing: the browser tests serve dist/ with `python3 -m http.server`, \
                    a plain static server; install Python 3"
                .into(),
        );
    }
    build(profile)?;
    let dist = write_dist(&root)?;
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
    let server = StaticServer::start(&dist)?;
    let url = format!("http://127.0.0.1:{}/", server.port);
    eprintln!("xtask: testing {url} (dist/ served by python3 -m http.server) with {chromium}");
    let status = status_of(
        Command::new("node")
            .current_dir(&root)
            .args(["--test", "--test-reporter=spec", "web/tests/"])
            .env("GPUSCOPE_URL", &url)
            .env("GPUSCOPE_SERVED", "dist")
            .env("GPUSCOPE_CHROMIUM", &chromium),
        "node",
    )?;
    drop(server);
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}

/// `python3 -m http.server` on a free port of 127.0.0.1, stopped on drop.
struct StaticServer {
    child: Child,
    port: u16,
}

impl StaticServer {
    fn start(dir: &Path) -> Result<StaticServer, String> {
        // A free port: bound here, released, then taken by the server.
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("cannot find a free port on 127.0.0.1: {e}"))?
            .port();
        let child = Command::new("python3")
            .args([
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                &port.to_string(),
            ])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start python3 -m http.server: {e}"))?;
        let mut server = StaticServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!(
                    "python3 -m http.server on port {port} stopped at once ({status})"
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "python3 -m http.server did not listen on port {port} within 20 s"
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    }
}

impl Drop for StaticServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What `dist/` holds: the page and every file under `web/` except the
/// browser tests and the TypeScript declarations of the glue.
fn in_dist(rel: &Path) -> bool {
    let s = rel.to_string_lossy().replace('\\', "/");
    if s == "index.html" {
        return true;
    }
    s.starts_with("web/")
        && !s.starts_with("web/tests/")
        && !s.ends_with(".d.ts")
        && !rel
            .components()
            .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
}

/// Writes `dist/`: the whole app for any static server (index.html, the
/// page's modules, `web/pkg/` with the wasm module and its glue, the samples
/// and their provenance). Returns its path.
pub fn write_dist(root: &Path) -> Result<PathBuf, String> {
    let dist = root.join("dist");
    if !root.join("web/pkg/gpuscope_web_bg.wasm").is_file() {
        return Err("web/pkg/ is missing: the wasm build did not run".into());
    }
    if dist.exists() {
        std::fs::remove_dir_all(&dist)
            .map_err(|e| format!("cannot remove the old {}: {e}", dist.display()))?;
    }
    let mut files = vec![root.join("index.html")];
    collect(&root.join("web"), &mut files)
        .map_err(|e| format!("cannot list {}: {e}", root.join("web").display()))?;
    let mut bytes = 0;
    let mut count = 0;
    for file in files {
        let Ok(rel) = file.strip_prefix(root) else {
            continue;
        };
        if !in_dist(rel) {
            continue;
        }
        let to = dist.join(rel);
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        bytes += std::fs::copy(&file, &to)
            .map_err(|e| format!("cannot copy {} to {}: {e}", file.display(), to.display()))?;
        count += 1;
    }
    // GitHub Pages: serve the files as they are (no Jekyll).
    std::fs::write(dist.join(".nojekyll"), b"")
        .map_err(|e| format!("cannot write {}: {e}", dist.join(".nojekyll").display()))?;
    eprintln!(
        "xtask: dist/ ready: {count} files, {} KiB, for any static server (e.g. `python3 -m http.server -d dist`)",
        bytes / 1024
    );
    Ok(dist)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dist_takes_the_app_and_leaves_the_tests() {
        assert!(in_dist(Path::new("index.html")));
        assert!(in_dist(Path::new("web/app.js")));
        assert!(in_dist(Path::new("web/pkg/gpuscope_web_bg.wasm")));
        assert!(in_dist(Path::new("web/samples/PROVENANCE.md")));
        assert!(!in_dist(Path::new("web/pkg/gpuscope_web.d.ts")));
        assert!(!in_dist(Path::new("web/tests/app.test.mjs")));
        assert!(!in_dist(Path::new("web/tests/screenshots/a.png")));
        assert!(!in_dist(Path::new("web/.DS_Store")));
        assert!(!in_dist(Path::new("Cargo.toml")));
        assert!(!in_dist(Path::new("README.md")));
    }
}

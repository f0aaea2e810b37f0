//! Build helpers for gpuscope: `cargo xtask <command>` (alias in
//! `.cargo/config.toml`). Only std, wasm-bindgen's own CLI support crate and
//! gpuscope-core (for its generated shaders), so no tool has to be installed
//! beyond cargo, rustup and node.

mod serve;
mod web;
mod wgsl;

use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <command> [options]

commands:
  build-web [--release | --dev]   build crates/web for wasm32, generate web/pkg/ and
                                  write dist/: the whole app for any static server
  serve [--port N] [--dev] [--no-build]
                                  build, then serve the repository root on 127.0.0.1
                                  (default port 8000; a busy port falls back to a free one)
  test-web [--dev]                build, then run the browser tests (web/tests/) in
                                  headless Chromium with WebGPU against dist/ served
                                  by `python3 -m http.server`
  wgsl [DIR]                      write every shader generated on the host (median
                                  networks, unrolled correlations) to DIR
                                  (default target/wgsl), one file each

--release (the default) builds with the `release-web` profile; --dev with `web-dev`
(no LTO: fast relinks).
CARGO_TARGET_DIR is honoured.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    let Some((command, rest)) = args.split_first() else {
        println!("{USAGE}");
        return Ok(ExitCode::SUCCESS);
    };
    if command == "wgsl" {
        return wgsl::dump(rest).map(|()| ExitCode::SUCCESS);
    }
    let opts = Options::parse(rest)?;
    match command.as_str() {
        "build-web" => {
            opts.only(&["--dev", "--release"])?;
            web::build(opts.profile())?;
            web::write_dist(&web::root())?;
            Ok(ExitCode::SUCCESS)
        }
        "serve" => {
            opts.only(&["--dev", "--port", "--no-build"])?;
            if opts.no_build {
                eprintln!("xtask: --no-build: serving web/pkg/ as it is");
            } else {
                web::build(opts.profile())?;
            }
            let root = web::root();
            let server = serve::Server::bind(&root, opts.port.unwrap_or(8000))?;
            println!("gpuscope web app: {}", server.url());
            println!(
                "serving {} on 127.0.0.1 only; open the address above in a browser with WebGPU. Ctrl-C stops.",
                root.display()
            );
            server.run();
            Ok(ExitCode::SUCCESS)
        }
        "test-web" => {
            opts.only(&["--dev"])?;
            web::test(opts.profile())
        }
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        other => Err(format!("unknown command '{other}'\n\n{USAGE}")),
    }
}

#[derive(Default)]
struct Options {
    dev: bool,
    no_build: bool,
    port: Option<u16>,
    given: Vec<&'static str>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut opts = Options::default();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--dev" => {
                    if opts.given.contains(&"--release") {
                        return Err("--release and --dev exclude each other".into());
                    }
                    opts.dev = true;
                    opts.given.push("--dev");
                }
                "--release" => {
                    if opts.dev {
                        return Err("--release and --dev exclude each other".into());
                    }
                    opts.given.push("--release");
                }
                "--no-build" => {
                    opts.no_build = true;
                    opts.given.push("--no-build");
                }
                "--port" => {
                    let value = it.next().ok_or("--port needs a number")?;
                    opts.port = Some(
                        value
                            .parse()
                            .map_err(|_| format!("--port {value}: not a port number (0-65535)"))?,
                    );
                    opts.given.push("--port");
                }
                other => return Err(format!("unknown option '{other}'\n\n{USAGE}")),
            }
        }
        Ok(opts)
    }

    /// Rejects options that the command does not take.
    fn only(&self, allowed: &[&str]) -> Result<(), String> {
        match self.given.iter().find(|g| !allowed.contains(g)) {
            Some(g) => Err(format!("option {g} does not apply to this command")),
            None => Ok(()),
        }
    }

    fn profile(&self) -> &'static str {
        if self.dev { "web-dev" } else { "release-web" }
    }
}

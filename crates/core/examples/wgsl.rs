//! `cargo run -p gpuscope-core --example wgsl -- DIR` (what `cargo xtask
//! wgsl [DIR]` runs): the shaders gpuscope generates on the host, written
//! out so they can be read (and fed to other tools, e.g. naga-cli).

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir] = args.as_slice() else {
        eprintln!("usage: wgsl DIR");
        return ExitCode::FAILURE;
    };
    let dir = PathBuf::from(dir);
    let shaders = gpuscope_core::shaders::generated();
    for (name, source) in &shaders {
        let path = dir.join(name);
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, source));
        if let Err(e) = written {
            eprintln!("cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    println!(
        "{} generated shaders written to {}",
        shaders.len(),
        dir.display()
    );
    ExitCode::SUCCESS
}

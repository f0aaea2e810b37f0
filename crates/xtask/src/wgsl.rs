//! `cargo xtask wgsl [DIR]`: the shaders gpuscope generates on the host,
//! written out so they can be read (and fed to other tools, e.g. naga-cli).

use std::path::PathBuf;

pub fn dump(args: &[String]) -> Result<(), String> {
    let dir = match args {
        [] => crate::web::target_dir(&crate::web::root()).join("wgsl"),
        [dir] if !dir.starts_with('-') => PathBuf::from(dir),
        _ => return Err("usage: cargo xtask wgsl [DIR]".into()),
    };
    let shaders = gpuscope_core::shaders::generated();
    for (name, source) in &shaders {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&path, source)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    println!(
        "{} generated shaders written to {}",
        shaders.len(),
        dir.display()
    );
    Ok(())
}

//! A private XDG_RUNTIME_DIR for the GPU drivers when the environment has
//! none (cron, batch jobs, containers): Mesa's device-select Vulkan layer
//! connects to the Wayland display while adapters are enumerated, and the
//! Wayland client library otherwise prints `error: XDG_RUNTIME_DIR is
//! invalid or not set in the environment.` on runs that succeed. See
//! docs/files.md.

/// Sets XDG_RUNTIME_DIR to `$TMPDIR/gpuscope-runtime-UID` (mode 0700, ours)
/// when it is unset. Must run before any thread starts (it changes the
/// environment) and before a driver is loaded.
#[cfg(unix)]
pub fn ensure() {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    if std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|v| !v.is_empty()) {
        return;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let dir = std::env::temp_dir().join(format!("gpuscope-runtime-{uid}"));
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    // Used only if it is a real directory of ours that nobody else can
    // write to (someone may have made the name first, in a shared /tmp).
    let usable = std::fs::symlink_metadata(&dir).is_ok_and(|m| {
        m.file_type().is_dir() && m.uid() == uid && m.permissions().mode() & 0o777 == 0o700
    });
    if usable {
        // SAFETY: called at the start of main, before any other thread
        // exists, so nothing reads the environment concurrently.
        unsafe { std::env::set_var("XDG_RUNTIME_DIR", &dir) };
    }
}

#[cfg(not(unix))]
pub fn ensure() {}

//! Write-to-temp-then-rename, so readers never see a half-written file, and
//! scratch files beside outputs.
//!
//! Every temporary file is named `.NAME.gpuscope-tmp-PID-RANDOM` in the
//! output's directory and created with `O_EXCL` (and `O_NOFOLLOW`): a name
//! nobody can guess in advance, and a file or symlink planted at it makes
//! the creation fail instead of redirecting the write. The rename that
//! publishes an output replaces a symlink at the output's path, never what
//! it points to.
//!
//! Before the rename, the file at the temporary name must still be the one
//! this process created and wrote (same device and inode as the open
//! handle): a temporary file renamed away and replaced (by a symlink, say)
//! is not published, and the command fails saying so.
//!
//! A process killed outright (SIGKILL, power loss) leaves its temporary
//! files behind. The next run that creates one in the same directory notes
//! those whose owning process is gone ([`take_stale_temp_files`]); the CLI
//! reports them with a warning and removes them only when asked
//! (`gpuscope clean DIR`, [`remove_stale_temporary`]): a file on a shared
//! filesystem may belong to a live process on another host.

use crate::error::{IoError, Result};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What every temporary file's name holds after `.NAME`.
pub const TEMP_TAG: &str = ".gpuscope-tmp-";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Set by [`remove_unfinished_outputs`]: the process is about to exit.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Temporary files being written, removed by [`remove_unfinished_outputs`]
/// when the process is interrupted (Drop does not run then).
static UNFINISHED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Directories already searched for stale temporary files, and what was found.
static SCANNED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static STALE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn forget(path: &Path) {
    if let Ok(mut live) = UNFINISHED.lock() {
        live.retain(|p| p != path);
    }
}

/// Removes every temporary file still being written (outputs and scratch
/// files): call it from an interrupt handler (Ctrl-C) before exiting, so an
/// interrupted run leaves neither a partial output nor a stray temporary file.
///
/// Writers that find their output removed meanwhile (a Zarr store's next
/// chunk) then wait for the exit instead of failing, so the interrupted
/// command reports nothing more and tears nothing down while it exits.
pub fn remove_unfinished_outputs() {
    INTERRUPTED.store(true, Ordering::SeqCst);
    // try_lock: a handler must not wait on a lock the interrupted thread holds.
    if let Ok(live) = UNFINISHED.try_lock() {
        for p in live.iter() {
            if std::fs::remove_file(p).is_err() {
                remove_dir_while_written(p);
            }
        }
    }
}

/// After an interrupt, blocks the calling thread until the process exits
/// (the interrupt handler exits it); otherwise returns at once.
pub(crate) fn wait_if_interrupted() {
    while INTERRUPTED.load(Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// Removes a Zarr output's temporary directory (remove_dir_all follows no
/// symlinks) while its writer may still add chunks to it: the writer never
/// recreates the directory, so removal wins within a few tries.
fn remove_dir_while_written(p: &Path) {
    for _ in 0..200 {
        let _ = std::fs::remove_dir_all(p);
        if std::fs::symlink_metadata(p).is_err() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Temporary files left by killed runs, found in the directories this
/// process has written into since the last call (each directory searched
/// once). Their names end in `.gpuscope-tmp-PID-RANDOM` with PID no longer
/// running on this machine.
pub fn take_stale_temp_files() -> Vec<PathBuf> {
    STALE
        .lock()
        .map(|mut s| std::mem::take(&mut *s))
        .unwrap_or_default()
}

/// 64 bits nobody can predict: std's per-process random hash keys over the
/// time, the pid and a counter.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(now);
    h.finish()
}

/// The pid in a temporary file's name, when the name is one of ours.
fn owner_pid(name: &str) -> Option<u32> {
    let (_, rest) = name.rsplit_once(TEMP_TAG)?;
    let (pid, random) = rest.split_once('-')?;
    if random.len() != 16 || !random.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    pid.parse().ok()
}

#[cfg(unix)]
fn running(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if p <= 0 {
        return false;
    }
    // Signal 0 checks only that the process exists (EPERM: it does, not ours).
    // SAFETY: kill with signal 0 sends nothing.
    let r = unsafe { libc::kill(p, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(not(unix))]
fn running(_pid: u32) -> bool {
    // No portable check: never call another process's file stale.
    true
}

/// Notes the stale temporary files of `dir` (once per directory).
fn scan_for_stale(dir: &Path) {
    let Ok(mut scanned) = SCANNED.lock() else {
        return;
    };
    if scanned.iter().any(|d| d == dir) {
        return;
    }
    scanned.push(dir.to_path_buf());
    drop(scanned);
    let found = stale_temporaries(dir);
    if let Ok(mut stale) = STALE.lock() {
        stale.extend(found);
    }
}

/// Whether `path` is a temporary file or folder a killed gpuscope run left:
/// named exactly `.NAME.gpuscope-tmp-PID-RANDOM` (16 hex digits), PID not
/// this process and not running on this machine, a plain file or folder
/// (never a symlink), owned by this user.
fn is_stale(path: &Path) -> bool {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return false;
    };
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    let kind_ok = meta.file_type().is_file() || meta.file_type().is_dir();
    name.starts_with('.')
        && kind_ok
        && owned_by_me(&meta)
        && owner_pid(&name).is_some_and(|p| p != std::process::id() && !running(p))
}

#[cfg(unix)]
fn owned_by_me(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    meta.uid() == unsafe { libc::geteuid() }
}

#[cfg(not(unix))]
fn owned_by_me(_meta: &std::fs::Metadata) -> bool {
    false
}

/// The temporary files and folders that killed runs left in `dir` (see
/// [`remove_stale_temporary`]), sorted.
pub fn stale_temporaries(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| is_stale(p))
        .collect();
    found.sort();
    found
}

/// Removes one leftover of a killed run, checked again just before: only
/// what [`stale_temporaries`] would list is removed (a folder with its
/// contents; symlinks inside are removed, never followed).
pub fn remove_stale_temporary(path: &Path) -> Result<()> {
    if !is_stale(path) {
        return Err(IoError::invalid(
            format!(
                "{} is not a temporary file of an interrupted gpuscope run",
                path.display()
            ),
            "gpuscope removes only its own leftovers",
        ));
    }
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| IoError::io("cannot remove the temporary file", e))?;
    let r = if meta.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    r.map_err(|e| IoError::io("cannot remove the temporary file", e))
}

/// Creates a new file `.NAME.gpuscope-tmp-PID-RANDOM` beside `target`,
/// exclusively (never an existing file, never through a symlink), and
/// registers it for removal on interrupt. `private`: readable by the owner
/// only (scratch data, never published).
fn create_exclusive(target: &Path, private: bool) -> Result<(PathBuf, File)> {
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let base: String = target
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .ok_or_else(|| IoError::invalid("the path has no file name", "give a path to a file"))?
        .chars()
        // Keep the temporary name within the usual 255-byte limit.
        .take(120)
        .collect();
    scan_for_stale(&dir);
    let mut last = None;
    // A clash of 64 random bits means something is planting names: give up
    // after a few tries rather than loop.
    for _ in 0..8 {
        let path = dir.join(format!(
            ".{base}{TEMP_TAG}{}-{:016x}",
            std::process::id(),
            random_u64()
        ));
        let mut options = OpenOptions::new();
        options.read(true).write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
            if private {
                options.mode(0o600);
            }
        }
        #[cfg(not(unix))]
        let _ = private;
        match options.open(&path) {
            Ok(file) => {
                if let Ok(mut live) = UNFINISHED.lock() {
                    live.push(path.clone());
                }
                return Ok((path, file));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => {
                return Err(IoError::io(
                    "cannot create a temporary file beside the output (is the directory writable?)",
                    e,
                ));
            }
        }
    }
    Err(IoError::io(
        "cannot create a temporary file beside the output: every name tried exists",
        last.unwrap_or_else(|| std::io::ErrorKind::AlreadyExists.into()),
    ))
}

/// Creates a new directory `.NAME.gpuscope-tmp-PID-RANDOM` beside
/// `target` (a Zarr output), never at an existing name, readable by the
/// owner only until published (nobody else can plant links inside it), and
/// registers it for removal on interrupt. Removed by [`TempDir`]'s drop.
pub(crate) fn create_temp_dir(target: &Path) -> Result<TempDir> {
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let base: String = target
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .ok_or_else(|| IoError::invalid("the path has no name", "give a path to a .zarr output"))?
        .chars()
        .take(120)
        .collect();
    scan_for_stale(&dir);
    let mut last = None;
    for _ in 0..8 {
        let path = dir.join(format!(
            ".{base}{TEMP_TAG}{}-{:016x}",
            std::process::id(),
            random_u64()
        ));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        match builder.create(&path) {
            Ok(()) => {
                if let Ok(mut live) = UNFINISHED.lock() {
                    live.push(path.clone());
                }
                return Ok(TempDir {
                    path,
                    committed: false,
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => {
                return Err(IoError::io(
                    "cannot create a temporary directory beside the output (is the directory writable?)",
                    e,
                ));
            }
        }
    }
    Err(IoError::io(
        "cannot create a temporary directory beside the output: every name tried exists",
        last.unwrap_or_else(|| std::io::ErrorKind::AlreadyExists.into()),
    ))
}

/// A temporary output directory; removed with its contents on drop unless
/// published.
pub(crate) struct TempDir {
    pub(crate) path: PathBuf,
    committed: bool,
}

impl TempDir {
    /// Gives the directory the permissions a new directory gets, then
    /// renames it to `target`, which must not exist: a directory cannot be
    /// replaced in one step, so an existing output is never removed.
    pub(crate) fn publish(mut self, target: &Path) -> Result<()> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = 0o777 & !umask();
            std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(mode))
                .map_err(|e| IoError::io("cannot set the output's permissions", e))?;
        }
        rename_no_replace(&self.path, target).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                exists_error()
            } else {
                IoError::io("cannot rename the temporary directory to the output", e)
            }
        })?;
        self.committed = true;
        forget(&self.path);
        Ok(())
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.path);
            forget(&self.path);
        }
    }
}

/// The error for a directory output that already exists.
pub(crate) fn exists_error() -> IoError {
    IoError::invalid(
        "the output exists; gpuscope does not replace a directory",
        "remove it first or name another output",
    )
}

/// The process's umask, read without changing it (Linux reports it in
/// /proc/self/status; elsewhere the usual 022).
#[cfg(unix)]
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// Renames `from` to `to` unless something exists at `to` (atomically
/// where the system offers it).
fn rename_no_replace(from: &Path, to: &Path) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes());
        let (a, b) = (c(from)?, c(to)?);
        // SAFETY: two NUL-terminated paths; renameat2 only reads them.
        let r = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                a.as_ptr(),
                libc::AT_FDCWD,
                b.as_ptr(),
                libc::RENAME_NOREPLACE,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        // Filesystems without RENAME_NOREPLACE: check, then rename.
        if !matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
            return Err(e);
        }
    }
    if std::fs::symlink_metadata(to).is_ok() {
        return Err(std::io::ErrorKind::AlreadyExists.into());
    }
    std::fs::rename(from, to)
}

/// A temporary file beside `target`; removed on drop unless committed.
pub(crate) struct TempFile {
    pub(crate) path: PathBuf,
    target: PathBuf,
    committed: bool,
}

/// Device and inode of a file (None where the platform has no such ids).
fn file_id(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

/// `path` is still the file open as `file` (same device and inode, and no
/// symlink in its place).
pub(crate) fn still_ours(path: &Path, file: &File) -> Result<()> {
    let swapped = || {
        IoError::new(
            crate::ErrorKind::Io,
            format!(
                "the temporary file {} was replaced while it was being written; the output was not published",
                path.display()
            ),
            "something else writes in the output's directory: write the output where only you can",
        )
    };
    let open = file
        .metadata()
        .map_err(|e| IoError::io("cannot check the temporary file", e))?;
    let at_path = std::fs::symlink_metadata(path).map_err(|_| swapped())?;
    if !at_path.is_file() || file_id(&open) != file_id(&at_path) {
        return Err(swapped());
    }
    Ok(())
}

impl TempFile {
    pub(crate) fn create(target: &Path) -> Result<(TempFile, File)> {
        let (path, file) = create_exclusive(target, false)?;
        Ok((
            TempFile {
                path,
                target: target.to_path_buf(),
                committed: false,
            },
            file,
        ))
    }

    /// Flush, sync and rename over the target.
    pub(crate) fn commit(self, mut w: BufWriter<File>) -> Result<()> {
        w.flush()
            .map_err(|e| IoError::io("cannot write the file", e))?;
        let file = w
            .into_inner()
            .map_err(|e| IoError::io("cannot write the file", e.into_error()))?;
        self.commit_file(file)
    }

    /// Sync and rename over the target (a file written without a buffer).
    pub(crate) fn commit_file(self, file: File) -> Result<()> {
        self.commit_file_with(file, true)
    }

    /// [`TempFile::commit_file`], the sync skipped unless `sync` (scratch
    /// outputs: the rename still publishes only a complete file).
    pub(crate) fn commit_file_with(mut self, file: File, sync: bool) -> Result<()> {
        if sync {
            file.sync_all()
                .map_err(|e| IoError::io("cannot write the file", e))?;
        }
        if let Err(e) = still_ours(&self.path, &file) {
            // What is at the temporary name now is not ours to remove.
            self.committed = true;
            forget(&self.path);
            return Err(e);
        }
        drop(file);
        std::fs::rename(&self.path, &self.target)
            .map_err(|e| IoError::io("cannot rename the temporary file to the output", e))?;
        self.committed = true;
        forget(&self.path);
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.path);
            forget(&self.path);
        }
    }
}

pub(crate) fn write_atomic(
    path: &Path,
    f: impl FnOnce(&mut BufWriter<File>) -> Result<()>,
) -> Result<()> {
    let (tmp, file) = TempFile::create(path)?;
    let mut w = BufWriter::new(file);
    f(&mut w)?;
    tmp.commit(w)
}

/// Writes `bytes` to `path` through a temporary file (see [`write_atomic`]):
/// text outputs such as catalogues and spot tables.
pub fn write_bytes_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    PendingOutput::create(path)?.commit(bytes)
}

/// An output whose temporary file is created now and published later by
/// [`PendingOutput::commit`]: a command with two outputs creates the second
/// before publishing the first, so an unwritable place fails before
/// anything is published. Dropped uncommitted, it leaves nothing.
pub struct PendingOutput {
    tmp: TempFile,
    file: File,
}

impl PendingOutput {
    pub fn create(path: &Path) -> Result<PendingOutput> {
        let (tmp, file) = TempFile::create(path).map_err(|e| e.in_file(&path.to_string_lossy()))?;
        Ok(PendingOutput { tmp, file })
    }

    /// Writes `bytes` and renames the file over the output.
    pub fn commit(self, bytes: &[u8]) -> Result<()> {
        let name = self.tmp.target.to_string_lossy().into_owned();
        let mut w = BufWriter::new(self.file);
        w.write_all(bytes)
            .map_err(|e| IoError::io("cannot write the file", e).in_file(&name))?;
        self.tmp.commit(w).map_err(|e| e.in_file(&name))
    }
}

/// A private folder for a command's scratch files (the benchmarks'
/// generated inputs and outputs): `.LABEL.gpuscope-tmp-PID-RANDOM` in
/// `base`, created exclusively (never an existing folder or a symlink
/// planted at a guessed name) with mode 0700, removed with its contents
/// when dropped and on interrupt.
pub struct ScratchDir(TempDir);

impl ScratchDir {
    pub fn create(base: &Path, label: &str) -> Result<ScratchDir> {
        create_temp_dir(&base.join(label))
            .map(ScratchDir)
            .map_err(|e| e.in_file(&base.to_string_lossy()))
    }

    pub fn path(&self) -> &Path {
        &self.0.path
    }
}

/// A private read-write file beside an output for data between two passes
/// (named and created as temporary outputs are), removed when dropped and
/// on interrupt; never published.
pub struct ScratchFile {
    path: PathBuf,
    file: File,
}

impl ScratchFile {
    pub fn create(beside: &Path) -> Result<ScratchFile> {
        let (path, file) =
            create_exclusive(beside, true).map_err(|e| e.in_file(&beside.to_string_lossy()))?;
        Ok(ScratchFile { path, file })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        forget(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pid_reads_only_our_pattern() {
        assert_eq!(
            owner_pid(".a.npy.gpuscope-tmp-123-00112233445566ff"),
            Some(123)
        );
        assert_eq!(owner_pid(".a.npy.gpuscope-tmp-123-0011"), None);
        assert_eq!(owner_pid(".a.npy.tmp-123-4"), None);
        assert_eq!(owner_pid(".a.npy.gpuscope-tmp-x-00112233445566ff"), None);
    }

    #[test]
    fn names_differ_between_calls() {
        assert_ne!(random_u64(), random_u64());
    }
}

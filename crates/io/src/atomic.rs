//! Write-to-temp-then-rename, so readers never see a half-written file.

use crate::error::{IoError, Result};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Temporary files being written, removed by [`remove_unfinished_outputs`]
/// when the process is interrupted (Drop does not run then).
static UNFINISHED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn forget(path: &Path) {
    if let Ok(mut live) = UNFINISHED.lock() {
        live.retain(|p| p != path);
    }
}

/// Removes every temporary output file still being written: call it from
/// an interrupt handler (Ctrl-C) before exiting, so an interrupted run
/// leaves neither a partial output nor a stray temporary file.
pub fn remove_unfinished_outputs() {
    // try_lock: a handler must not wait on a lock the interrupted thread holds.
    if let Ok(live) = UNFINISHED.try_lock() {
        for p in live.iter() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A temporary file beside `target`; removed on drop unless committed.
pub(crate) struct TempFile {
    pub(crate) path: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl TempFile {
    pub(crate) fn create(target: &Path) -> Result<(TempFile, File)> {
        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let base = target
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .ok_or_else(|| {
                IoError::invalid("the path has no file name", "give a path to a file")
            })?;
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(".{base}.tmp-{}-{n}", std::process::id()));
        let file = File::create(&path)
            .map_err(|e| IoError::io("cannot create a temporary file beside the output", e))?;
        if let Ok(mut live) = UNFINISHED.lock() {
            live.push(path.clone());
        }
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
    pub(crate) fn commit_file(mut self, file: File) -> Result<()> {
        file.sync_all()
            .map_err(|e| IoError::io("cannot write the file", e))?;
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
    write_atomic(path, |w| {
        w.write_all(bytes)
            .map_err(|e| IoError::io("cannot write the file", e))
    })
    .map_err(|e| e.in_file(&path.to_string_lossy()))
}

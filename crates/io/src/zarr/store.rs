//! Where a Zarr array's keys are read from: a directory on disk (native)
//! or a set of named files read through a callback (the page's picked
//! folder, read by byte ranges in its decoding worker).
//!
//! Keys are `/`-separated paths relative to the store's root
//! (`zarr.json`, `0/c/1/2`).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::{IoError, Result};

/// The metadata documents that make a directory an array or a group.
pub(super) const NODE_FILES: [&str; 3] = ["zarr.json", ".zarray", ".zgroup"];

/// Read access to a store's keys, by byte ranges.
pub trait Store: Send + Sync {
    /// The byte length of `key`; `None` when the store has no such key.
    fn len(&self, key: &str) -> Result<Option<u64>>;
    /// `len` bytes of `key` from `offset` (the key exists and holds them).
    fn read(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>>;
    /// The arrays and groups directly under `prefix` (the root: ""), for
    /// error messages.
    fn members(&self, prefix: &str) -> Vec<String>;
    /// The bytes of every key, for the bound on what a read may decode.
    fn stored_bytes(&self) -> usize;
}

/// `a/b` joined, either part possibly empty.
pub(super) fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}/{b}"),
    }
}

/// Reads `len` bytes of a key; the error an I/O failure gives.
pub type ReadFn = dyn Fn(&str, u64, usize) -> std::result::Result<Vec<u8>, String> + Send + Sync;

/// A store of named keys with known lengths, read through a function: the
/// page's picked folder (`webkitRelativePath`s below the folder), or bytes
/// held in memory.
pub struct CallbackStore {
    lens: BTreeMap<String, u64>,
    read: Arc<ReadFn>,
}

impl CallbackStore {
    /// `keys`: (key, byte length) pairs; `read(key, offset, len)`.
    pub fn new(keys: impl IntoIterator<Item = (String, u64)>, read: Arc<ReadFn>) -> CallbackStore {
        CallbackStore {
            lens: keys.into_iter().collect(),
            read,
        }
    }
}

impl Store for CallbackStore {
    fn len(&self, key: &str) -> Result<Option<u64>> {
        Ok(self.lens.get(key).copied())
    }

    fn read(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
        let bytes = (self.read)(key, offset, len)
            .map_err(|e| IoError::io(&format!("cannot read {key}"), std::io::Error::other(e)))?;
        if bytes.len() != len {
            return Err(IoError::truncated(format!(
                "{key}: {} bytes read where {len} were asked for",
                bytes.len()
            )));
        }
        Ok(bytes)
    }

    fn members(&self, prefix: &str) -> Vec<String> {
        let start = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}/")
        };
        let mut names: Vec<String> = self
            .lens
            .keys()
            .filter_map(|k| k.strip_prefix(&start))
            .filter_map(|rest| {
                let (child, file) = rest.split_once('/')?;
                NODE_FILES.contains(&file).then(|| child.to_string())
            })
            .collect();
        names.dedup();
        names.truncate(20);
        names
    }

    fn stored_bytes(&self) -> usize {
        self.lens
            .values()
            .map(|&l| l as usize)
            .fold(0, usize::saturating_add)
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub use fs::FileStore;

#[cfg(not(target_arch = "wasm32"))]
mod fs {
    use std::io::{Read, Seek, SeekFrom};
    use std::path::{Path, PathBuf};

    use super::{NODE_FILES, Store};
    use crate::links::{Boundary, ReadOptions, open_regular, regular_file};
    use crate::{IoError, Result};

    /// A directory store. A key that is (or passes through) a symlink is
    /// read only when it resolves inside the store, unless the options
    /// allow more; a key that is a FIFO, device or socket is an error, never
    /// a missing chunk.
    pub struct FileStore {
        root: PathBuf,
        boundary: Boundary,
    }

    impl FileStore {
        pub fn new(root: &Path) -> FileStore {
            FileStore::with_options(root, &ReadOptions::default())
        }

        pub fn with_options(root: &Path, opts: &ReadOptions) -> FileStore {
            FileStore {
                root: root.to_path_buf(),
                boundary: Boundary::around_dir(root, opts),
            }
        }

        fn path(&self, key: &str) -> PathBuf {
            self.root.join(key)
        }

        /// The key's path once it is known to resolve inside the store.
        fn checked(&self, key: &str) -> Result<PathBuf> {
            let path = self.path(key);
            self.boundary
                .check_inside(&format!("the store's key {key}"), &path)?;
            Ok(path)
        }
    }

    impl Store for FileStore {
        fn len(&self, key: &str) -> Result<Option<u64>> {
            let path = self.path(key);
            match std::fs::metadata(&path) {
                Ok(m) if m.is_dir() => Ok(None),
                Ok(m) => {
                    self.checked(key)?;
                    if !m.is_file() {
                        regular_file(&path).map_err(|e| at_key(e, key))?;
                    }
                    Ok(Some(m.len()))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    // A dangling symlink is not a missing chunk.
                    if std::fs::symlink_metadata(&path).is_ok() {
                        return Err(IoError::io(&format!("cannot open {key}"), e));
                    }
                    Ok(None)
                }
                Err(e) => Err(IoError::io(&format!("cannot open {key}"), e)),
            }
        }

        fn read(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
            let path = self.checked(key)?;
            let mut f = open_regular(&path).map_err(|e| at_key(e, key))?;
            let mut bytes = vec![0; len];
            f.seek(SeekFrom::Start(offset))
                .and_then(|_| f.read_exact(&mut bytes))
                .map_err(|e| IoError::io(&format!("cannot read {key}"), e))?;
            Ok(bytes)
        }

        fn members(&self, prefix: &str) -> Vec<String> {
            let dir = self.path(prefix);
            let mut names: Vec<String> = std::fs::read_dir(&dir)
                .map(|it| {
                    it.filter_map(|e| e.ok())
                        .filter(|e| NODE_FILES.iter().any(|m| e.path().join(m).is_file()))
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            names.truncate(20);
            names
        }

        fn stored_bytes(&self) -> usize {
            stored_bytes(&self.root, 0)
        }
    }

    /// Names the key in an error about the file behind it (the path alone
    /// is the store's business).
    fn at_key(mut e: IoError, key: &str) -> IoError {
        e.message = format!("{key}: {}", e.message);
        e
    }

    /// Bytes of the files under `dir` (no symlinks followed).
    fn stored_bytes(dir: &Path, depth: usize) -> usize {
        if depth > 32 {
            return 0;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries
            .filter_map(|e| e.ok())
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => stored_bytes(&e.path(), depth + 1),
                Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len() as usize),
                _ => 0,
            })
            .fold(0usize, usize::saturating_add)
    }
}

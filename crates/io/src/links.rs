//! What a file may make us open besides itself.
//!
//! HDF5 external links, virtual-dataset sources, external raw-data files
//! and Eiger data files name other files; a Zarr store's chunks and folders
//! may be symlinks. A file from elsewhere must not make gpuscope read files
//! its user did not give it, so by default every such target must lie
//! inside the input's folder (an HDF5 file's directory, a Zarr store's own
//! directory), checked after every symlink is resolved; anything else is
//! refused with an error naming the link and the option that allows it
//! ([`ReadOptions::allow_links_outside`]).
//!
//! Special files (FIFOs, devices, sockets, directories where a file is
//! expected) are refused whatever the options: reading one blocks, never
//! ends, or reads something that is not the data.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::{ErrorKind, IoError, Result};

/// How the readers treat what a file points to outside itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Follow links (HDF5 external links, virtual-dataset sources, external
    /// raw-data files, Zarr symlinks) to files outside the input's folder.
    /// Off by default: a file from elsewhere cannot make gpuscope read
    /// other files of this machine.
    pub allow_links_outside: bool,
    /// The most bytes one stored chunk (HDF5, Zarr) may decode to; a file
    /// declaring larger chunks is refused before any is inflated. `None`:
    /// the bound on every compressed format (512 MiB, or 1100 times the
    /// bytes stored). The command line sets it from `--memory-budget`.
    pub max_chunk_bytes: Option<usize>,
}

impl ReadOptions {
    /// The options with links outside the input's folder allowed or not.
    pub fn allow_links_outside(allow: bool) -> ReadOptions {
        ReadOptions {
            allow_links_outside: allow,
            ..ReadOptions::default()
        }
    }
}

/// The error for a chunk larger than [`ReadOptions::max_chunk_bytes`].
pub(crate) fn chunk_too_large(chunk: &[usize], dtype: &str, bytes: usize, most: usize) -> IoError {
    IoError::new(
        ErrorKind::TooLarge,
        format!(
            "chunks of {chunk:?} {dtype} ({} MiB decoded each) are larger than the {} MiB a chunk may decode to under this memory budget",
            bytes >> 20,
            most >> 20
        ),
        "raise --memory-budget (a chunk may decode to 8 times it), or re-chunk the file (h5repack -l, or zarr with smaller chunks)",
    )
}

/// What to tell the user who trusts a file's outside links.
pub(crate) const ALLOW_HINT: &str = "copy the target beside the input, or, if you trust this file, \
     pass --allow-links-outside (Python: allow_links_outside=True)";

/// The folders a file's links may reach.
#[derive(Debug, Clone)]
pub(crate) struct Boundary {
    /// Canonical folders; empty: anything is allowed.
    roots: Vec<PathBuf>,
    /// What the first root is, for messages.
    what: &'static str,
}

impl Boundary {
    /// The folder of the file `input` as named and, where `input` is a
    /// symlink, the folder of the file it resolves to (where its sidecars
    /// really are).
    pub(crate) fn around_file(input: &Path, opts: &ReadOptions) -> Boundary {
        let what = "the input's folder";
        if opts.allow_links_outside {
            return Boundary {
                roots: Vec::new(),
                what,
            };
        }
        let named = match input.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut roots: Vec<PathBuf> = named.canonicalize().into_iter().collect();
        if let Some(real) = input
            .canonicalize()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            && !roots.contains(&real)
        {
            roots.push(real);
        }
        if roots.is_empty() {
            // The folder cannot be resolved: nothing outside the file itself.
            roots.push(PathBuf::from("/nonexistent/gpuscope-no-folder"));
        }
        Boundary { roots, what }
    }

    /// The directory `dir` itself (a Zarr store).
    pub(crate) fn around_dir(dir: &Path, opts: &ReadOptions) -> Boundary {
        let what = "the store";
        if opts.allow_links_outside {
            return Boundary {
                roots: Vec::new(),
                what,
            };
        }
        let root = dir
            .canonicalize()
            .unwrap_or_else(|_| PathBuf::from("/nonexistent/gpuscope-no-folder"));
        Boundary {
            roots: vec![root],
            what,
        }
    }

    /// Whether anything outside is allowed.
    pub(crate) fn open(&self) -> bool {
        self.roots.is_empty()
    }

    /// `target` (which exists) may be read for `link` (a description: "the
    /// external link /entry/data/data_000001"): a regular file, inside the
    /// boundary after symlinks are resolved.
    pub(crate) fn check_file(&self, link: &str, target: &Path) -> Result<()> {
        // A special file first: refused whatever the options.
        regular_file(target).map_err(|mut e| {
            e.message = format!("{link}: {}", e.message);
            e
        })?;
        self.check_inside(link, target)
    }

    /// `target` lies inside the boundary once symlinks are resolved (a
    /// target that cannot be resolved is not inside).
    pub(crate) fn check_inside(&self, link: &str, target: &Path) -> Result<()> {
        if self.open() {
            return Ok(());
        }
        let real = target.canonicalize().ok();
        if real
            .as_ref()
            .is_some_and(|r| self.roots.iter().any(|root| r.starts_with(root)))
        {
            return Ok(());
        }
        let shown = real.as_deref().unwrap_or(target);
        Err(IoError::new(
            ErrorKind::Unsupported,
            format!(
                "{link} points to {}, outside {} {}; gpuscope does not follow it",
                shown.display(),
                self.what,
                self.roots[0].display()
            ),
            ALLOW_HINT,
        ))
    }
}

/// What a non-regular file is, for messages.
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

fn special_file_error(path: &Path, meta: &std::fs::Metadata) -> IoError {
    IoError::new(
        ErrorKind::Unsupported,
        format!(
            "{} is {}, not a regular file; gpuscope reads only regular files",
            path.display(),
            kind_of(meta)
        ),
        "give a regular file (copy the data into one)",
    )
}

/// `path` (symlinks followed) is a regular file; a FIFO, device, socket or
/// directory is an error naming what it is.
pub(crate) fn regular_file(path: &Path) -> Result<()> {
    let meta = std::fs::metadata(path).map_err(|e| IoError::io("cannot open the file", e))?;
    if meta.is_file() {
        Ok(())
    } else {
        Err(special_file_error(path, &meta))
    }
}

/// Opens `path` for reading, refusing anything but a regular file without
/// blocking on it (a FIFO is opened non-blocking, then refused).
pub(crate) fn open_regular(path: &Path) -> Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Regular files ignore O_NONBLOCK; a FIFO opens at once instead of
        // waiting for a writer, and is refused below.
        options.custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    let file = options
        .open(path)
        .map_err(|e| IoError::io("cannot open the file", e))?;
    let meta = file
        .metadata()
        .map_err(|e| IoError::io("cannot open the file", e))?;
    if !meta.is_file() {
        return Err(special_file_error(path, &meta));
    }
    #[cfg(unix)]
    clear_nonblock(&file);
    Ok(file)
}

/// Regular files ignore O_NONBLOCK, but clear it so the handle behaves as
/// an ordinary one wherever it goes.
#[cfg(unix)]
fn clear_nonblock(file: &File) {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own; failure leaves the flag set,
    // which regular files ignore.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
}

/// Reads the regular file `path` whole (see [`open_regular`]).
pub(crate) fn read_regular(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| IoError::io("cannot read the file", e))?;
    Ok(bytes)
}

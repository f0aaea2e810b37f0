//! The files an HDF5 path makes the reader open besides the input: external
//! links crossed on the way, a virtual dataset's sources, a dataset's
//! external raw-data files. Each is found as `rust-hdf5` (after libhdf5's
//! `H5F_prefix_open_file`) would find it and checked against the input's
//! folder ([`Boundary`]) before the crate is asked to read through it;
//! the crate itself has no hook to refuse a file.
//!
//! A virtual dataset's source that cannot be read (missing, not HDF5, a
//! special file, no such dataset) is an error here: libhdf5 would read it
//! as the fill value, and zeros that look like data are a silent wrong
//! answer.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rust_hdf5::{H5Dataset, H5File, LinkClass};

use super::guard;
use crate::links::{Boundary, ReadOptions};
use crate::{ErrorKind, IoError, Result};

/// Soft and external links followed on one path before the path is called
/// a loop.
const MAX_HOPS: usize = 64;
/// Virtual datasets whose sources are virtual datasets, at most this deep.
const MAX_NESTING: usize = 16;

/// The input file and the folder its links may reach.
pub(super) struct Links {
    file_path: PathBuf,
    boundary: Boundary,
}

impl Links {
    pub(super) fn new(file_path: &Path, opts: &ReadOptions) -> Links {
        Links {
            file_path: file_path.to_path_buf(),
            boundary: Boundary::around_file(file_path, opts),
        }
    }

    /// Everything reading the object at `path` of `file` (the input) may
    /// open is inside the boundary, and a virtual dataset's sources can be
    /// read. A path that does not resolve is left for the reader to report.
    pub(super) fn check(&self, file: &H5File, path: &str) -> Result<()> {
        let mut walk = Walk {
            active: Vec::new(),
            done: HashSet::new(),
        };
        self.walk(file, &self.file_path, path, &mut walk, MAX_HOPS)
    }

    /// Follows `path` in `file` (opened from `at`) link by link.
    fn walk(
        &self,
        file: &H5File,
        at: &Path,
        path: &str,
        walk: &mut Walk,
        mut hops: usize,
    ) -> Result<()> {
        let mut comps = split(path);
        let mut done: Vec<String> = Vec::new();
        let mut i = 0;
        while i < comps.len() {
            let parent = format!("/{}", done.join("/"));
            let Some(g) = super::nexus::group_in(file, &parent) else {
                return Ok(());
            };
            let name = comps[i].clone();
            let Ok(class) = guard(&name, || g.link_class(&name)) else {
                return Ok(());
            };
            match class {
                LinkClass::Hard | LinkClass::UserDefined { .. } => {
                    done.push(name);
                    i += 1;
                }
                LinkClass::Soft { path: target } => {
                    hop(&mut hops, path)?;
                    let target = if target.starts_with('/') {
                        target
                    } else {
                        format!("{}/{target}", parent.trim_end_matches('/'))
                    };
                    let mut next = split(&target);
                    next.extend(comps.drain(i + 1..));
                    comps = next;
                    done.clear();
                    i = 0;
                }
                LinkClass::External {
                    file: target_file,
                    path: target_path,
                } => {
                    hop(&mut hops, path)?;
                    done.push(name);
                    let link = format!("the external link /{}", done.join("/"));
                    // No candidate is a file: the reader reports the link.
                    let Some(target) = first(&candidates(at, &target_file, Prefix::External))
                    else {
                        return Ok(());
                    };
                    self.boundary.check_file(&link, &target)?;
                    let other = guard(&link, || H5File::open(&target))?;
                    let mut rest = split(&target_path);
                    rest.extend(comps.drain(i + 1..));
                    return self.walk(&other, &target, &rest.join("/"), walk, hops);
                }
            }
        }
        let full = format!("/{}", done.join("/"));
        let key = (at.to_path_buf(), full.clone());
        if walk.active.contains(&key) {
            return Err(IoError::corrupt(format!(
                "{full}: a virtual dataset that is (through its sources) its own source"
            )));
        }
        if walk.done.contains(&key) {
            return Ok(());
        }
        if walk.active.len() >= MAX_NESTING {
            return Err(IoError::unsupported(
                format!("{full}: virtual datasets nested more than {MAX_NESTING} deep"),
                "read the source datasets themselves",
            ));
        }
        let Ok(ds) = guard(&full, || file.dataset(&full)) else {
            return Ok(());
        };
        walk.active.push(key.clone());
        self.check_dataset(file, at, &full, &ds, walk)?;
        walk.active.pop();
        walk.done.insert(key);
        Ok(())
    }

    /// A dataset's virtual sources and external raw-data files.
    fn check_dataset(
        &self,
        file: &H5File,
        at: &Path,
        path: &str,
        ds: &H5Dataset,
        walk: &mut Walk,
    ) -> Result<()> {
        for seg in guard(path, || ds.external_files()).unwrap_or_default() {
            let desc = format!("{path}'s external raw-data file {}", seg.name);
            let target = external_data_path(at, &seg.name);
            if std::fs::symlink_metadata(&target).is_err() {
                return Err(unreadable(&desc, "it does not exist"));
            }
            self.boundary.check_file(&desc, &target)?;
        }
        let mappings = guard(path, || ds.virtual_mappings()).unwrap_or_default();
        let mut files_checked: HashSet<String> = HashSet::new();
        for m in mappings {
            let desc = format!(
                "the virtual dataset {path}'s source {}::{}",
                m.source_file_name, m.source_dset_name
            );
            if m.source_file_name.contains('%') || m.source_dset_name.contains('%') {
                return Err(IoError::unsupported(
                    format!("{desc}: sources named by a %b pattern are not read"),
                    "read the source datasets themselves",
                ));
            }
            if m.source_file_name == "." {
                self.walk(file, at, &m.source_dset_name, walk, MAX_HOPS)?;
                source_dataset(file, &desc, &m.source_dset_name)?;
                continue;
            }
            if !files_checked.insert(format!("{}\n{}", m.source_file_name, m.source_dset_name)) {
                continue;
            }
            let all = candidates(at, &m.source_file_name, Prefix::Virtual);
            let Some(target) = all
                .iter()
                .find(|p| std::fs::symlink_metadata(p).is_ok())
                .cloned()
            else {
                return Err(unreadable(&desc, "no such file beside the virtual dataset"));
            };
            self.boundary.check_file(&desc, &target)?;
            let src = guard(&desc, || H5File::open(&target))
                .map_err(|_| unreadable(&desc, "it is not an HDF5 file gpuscope can open"))?;
            self.walk(&src, &target, &m.source_dset_name, walk, MAX_HOPS)?;
            source_dataset(&src, &desc, &m.source_dset_name)?;
        }
        Ok(())
    }
}

/// One check's state: the datasets whose sources are being checked (a
/// dataset met again among them is a loop), and those done.
struct Walk {
    active: Vec<(PathBuf, String)>,
    done: HashSet<(PathBuf, String)>,
}

/// One more link followed on one path.
fn hop(hops: &mut usize, path: &str) -> Result<()> {
    if *hops == 0 {
        return Err(IoError::corrupt(format!(
            "{path}: its links go round in a loop or are more than {MAX_HOPS} deep"
        )));
    }
    *hops -= 1;
    Ok(())
}

/// A virtual source's dataset must open.
fn source_dataset(file: &H5File, desc: &str, path: &str) -> Result<()> {
    guard(desc, || file.dataset(path))
        .map(|_| ())
        .map_err(|_| unreadable(desc, "its file holds no such dataset"))
}

fn unreadable(desc: &str, why: &str) -> IoError {
    IoError::new(
        ErrorKind::Io,
        format!("{desc} cannot be read: {why}"),
        "gpuscope does not read an unreadable source as zeros: put the source where the virtual dataset names it, or read the sources themselves",
    )
}

fn split(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(str::to_string)
        .collect()
}

/// Which search order a name from inside a file follows.
#[derive(Clone, Copy)]
enum Prefix {
    External,
    Virtual,
}

/// The paths `rust-hdf5` tries, in order, for a file named `name` from
/// inside the file opened as `at` (its `prefix_open_candidates`, after
/// `H5F_prefix_open_file`): an absolute name as given; the environment's
/// prefixes; a virtual dataset's `HDF5_VDS_PREFIX` expanded; the folder
/// `at` was opened from; the bare name (the working directory); the
/// folder `at` resolves to.
fn candidates(at: &Path, name: &str, kind: Prefix) -> Vec<PathBuf> {
    let raw = Path::new(name);
    let mut out = Vec::new();
    if raw.is_absolute() {
        out.push(raw.to_path_buf());
    }
    let base: &Path = if raw.is_absolute() {
        Path::new(raw.file_name().unwrap_or(raw.as_os_str()))
    } else {
        raw
    };
    let env_var = match kind {
        Prefix::External => "HDF5_EXT_PREFIX",
        Prefix::Virtual => "HDF5_VDS_PREFIX",
    };
    let source_dir = at
        .canonicalize()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    if let Ok(prefixes) = std::env::var(env_var) {
        out.extend(
            prefixes
                .split(':')
                .filter(|p| !p.is_empty())
                .map(|p| Path::new(p).join(base)),
        );
        if let Prefix::Virtual = kind
            && let Some(p) = expand_origin(&prefixes, source_dir.as_deref())
        {
            out.push(p.join(base));
        }
    }
    if let Some(dir) = at.parent().filter(|d| !d.as_os_str().is_empty()) {
        out.push(dir.join(base));
    }
    out.push(base.to_path_buf());
    if let Some(dir) = source_dir {
        out.push(dir.join(base));
    }
    out
}

/// A prefix with `${ORIGIN}` standing for the folder of the open file.
fn expand_origin(prefix: &str, origin: Option<&Path>) -> Option<PathBuf> {
    if prefix.is_empty() || prefix == "." {
        return None;
    }
    match prefix.strip_prefix("${ORIGIN}") {
        Some(rest) => {
            let origin = origin?;
            let rest = rest.trim_start_matches(['/', '\\']);
            Some(if rest.is_empty() {
                origin.to_path_buf()
            } else {
                origin.join(rest)
            })
        }
        None => Some(PathBuf::from(prefix)),
    }
}

/// The first candidate that is a regular file, as the crate picks.
fn first(all: &[PathBuf]) -> Option<PathBuf> {
    all.iter().find(|p| p.is_file()).cloned()
}

/// Where an external raw-data file named `name` is read from: against
/// `HDF5_EXTFILE_PREFIX` (with `${ORIGIN}`), else the working directory,
/// as libhdf5's default `H5Pset_efile_prefix` has it.
fn external_data_path(at: &Path, name: &str) -> PathBuf {
    let origin = at
        .canonicalize()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    match std::env::var("HDF5_EXTFILE_PREFIX")
        .ok()
        .and_then(|p| expand_origin(&p, origin.as_deref()))
    {
        Some(prefix) => prefix.join(name),
        None => PathBuf::from(name),
    }
}

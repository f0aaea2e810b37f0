//! Writing a Zarr v3 store slab by slab: chunks one slice deep along the
//! first axis (of a stack), so every slab a streamed command writes is a
//! whole number of chunks and nothing is held back. Arrays of 2 to 5
//! dimensions are written as an OME-Zarr image (one multiscale level, the
//! array at `0`); others as a bare array at the store's root.
//!
//! The store is built in a temporary directory beside the output and
//! renamed to it once complete; an existing output is never replaced.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::{Value, json};

use super::codec::{chunk_bytes, copy_box};
use super::meta::KeyEncoding;
use crate::atomic::{TempDir, create_temp_dir, exists_error};
use crate::elements::data_le_bytes;
use crate::{Array, DType, IoError, Result};

/// Chunk extent along the two fastest axes: 1024 x 1024 tiles keep a chunk
/// a few MiB for viewers while a 2048 x 2048 frame is four chunks.
const TILE: usize = 1024;

/// gzip level: fast; detector and label data still shrink several times.
const GZIP_LEVEL: u32 = 1;

const KEY: KeyEncoding = KeyEncoding {
    prefix_c: true,
    separator: '/',
};

/// A Zarr v3 output written slab by slab along the first axis; the store
/// appears only on [`ZarrWriter::finish`].
pub struct ZarrWriter {
    target: PathBuf,
    name: String,
    tmp: TempDir,
    /// The array's directory inside the temporary store.
    array_dir: PathBuf,
    ome: bool,
    shape: Vec<usize>,
    chunks: Vec<usize>,
    dtype: DType,
    written: usize,
    /// Chunk files written and not yet synced: synced once, together, on
    /// [`ZarrWriter::finish`].
    unsynced: Vec<PathBuf>,
}

/// The chunk shape of an output of `shape`.
fn chunk_shape(shape: &[usize]) -> Vec<usize> {
    let nd = shape.len();
    shape
        .iter()
        .enumerate()
        .map(|(d, &n)| match nd {
            1 => n.clamp(1, TILE * TILE),
            _ if d + 2 >= nd => n.clamp(1, TILE),
            _ => 1,
        })
        .collect()
}

impl ZarrWriter {
    pub fn create(path: &Path, shape: Vec<usize>, dtype: DType) -> Result<ZarrWriter> {
        let name = path.to_string_lossy().into_owned();
        Self::create_inner(path, shape, dtype).map_err(|e| e.in_file(&name))
    }

    fn create_inner(path: &Path, shape: Vec<usize>, dtype: DType) -> Result<ZarrWriter> {
        if shape.is_empty() {
            return Err(IoError::invalid(
                "a 0-dimensional array cannot be written as Zarr by gpuscope",
                "write .npy instead",
            ));
        }
        // Fail before any work: the rename at the end refuses too.
        if std::fs::symlink_metadata(path).is_ok() {
            return Err(exists_error());
        }
        let chunks = chunk_shape(&shape);
        chunk_bytes(&shape, dtype.size_bytes())?;
        let tmp = create_temp_dir(path)?;
        let ome = (2..=5).contains(&shape.len());
        let array_dir = if ome {
            tmp.path.join("0")
        } else {
            tmp.path.clone()
        };
        std::fs::create_dir_all(array_dir.join("c"))
            .map_err(|e| IoError::io("cannot create the store's directories", e))?;
        Ok(ZarrWriter {
            target: path.to_path_buf(),
            name: path.to_string_lossy().into_owned(),
            tmp,
            array_dir,
            ome,
            shape,
            chunks,
            dtype,
            written: 0,
            unsynced: Vec::new(),
        })
    }

    /// Appends `slab` (shape `[n, rest...]`) along the first axis.
    pub fn write_slab(&mut self, slab: &Array) -> Result<()> {
        self.write_inner(slab).map_err(|e| e.in_file(&self.name))
    }

    fn write_inner(&mut self, slab: &Array) -> Result<()> {
        let nd = self.shape.len();
        let n = slab.shape.first().copied().unwrap_or(0);
        if slab.shape.len() != nd
            || slab.shape[1..] != self.shape[1..]
            || slab.dtype() != self.dtype
            || self.written + n > self.shape[0]
        {
            return Err(IoError::invalid(
                format!(
                    "a slab of {:?} {} does not continue an array of {:?} {} at {}",
                    slab.shape,
                    slab.dtype().name(),
                    self.shape,
                    self.dtype.name(),
                    self.written
                ),
                "write slabs of the declared shape and dtype, in order",
            ));
        }
        let c0 = self.chunks[0];
        if !self.written.is_multiple_of(c0)
            || (!n.is_multiple_of(c0) && self.written + n != self.shape[0])
        {
            return Err(IoError::invalid(
                format!("a slab of {n} at {} cuts chunks of {c0}", self.written),
                "write whole chunks along the first axis",
            ));
        }
        let elem = self.dtype.size_bytes();
        let bytes = data_le_bytes(&slab.data);
        let grid: Vec<usize> = (0..nd)
            .map(|d| {
                if d == 0 {
                    n.div_ceil(c0)
                } else {
                    self.shape[d].div_ceil(self.chunks[d])
                }
            })
            .collect();
        let count = crate::checked_product(&grid).unwrap_or(0);
        let chunk_len = chunk_bytes(&self.chunks, elem)?;
        let one = |k: usize| -> Result<PathBuf> {
            let local = super::codec::unravel(k, &grid);
            let mut coords = local.clone();
            coords[0] += self.written / c0;
            let from: Vec<usize> = (0..nd).map(|d| local[d] * self.chunks[d]).collect();
            let ext: Vec<usize> = (0..nd)
                .map(|d| self.chunks[d].min(slab.shape[d] - from[d]))
                .collect();
            // Edge chunks are stored whole, padded with the fill value (0).
            let mut chunk = vec![0u8; chunk_len];
            let zero = vec![0; nd];
            copy_box(
                &bytes,
                &slab.shape,
                &from,
                &mut chunk,
                &self.chunks,
                &zero,
                &ext,
                elem,
            );
            self.write_chunk(&coords, &chunk)?;
            Ok(self.array_dir.join(KEY.key(&coords)))
        };
        // Chunks are compressed and written on a pool of threads: one
        // thread's deflate is far below the disk's rate.
        let written = on_threads(count, &one)?;
        self.unsynced.extend(written);
        self.written += n;
        Ok(())
    }

    fn write_chunk(&self, coords: &[usize], samples: &[u8]) -> Result<()> {
        let r = self.write_chunk_inner(coords, samples);
        if r.is_err() {
            // The store was removed by an interrupt: the process is exiting.
            crate::atomic::wait_if_interrupted();
        }
        r
    }

    fn write_chunk_inner(&self, coords: &[usize], samples: &[u8]) -> Result<()> {
        let path = self.array_dir.join(KEY.key(coords));
        let fail = |e| IoError::io(&format!("cannot write the chunk {}", KEY.key(coords)), e);
        // The directories below the array's, one by one: never the store's
        // own, so a store removed on interrupt is not recreated.
        let key = KEY.key(coords);
        let parts: Vec<&str> = key.split('/').collect();
        let mut dir = self.array_dir.clone();
        for part in &parts[..parts.len().saturating_sub(1)] {
            dir.push(part);
            match std::fs::create_dir(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(fail(e)),
                _ => {}
            }
        }
        let mut gz = GzEncoder::new(Vec::new(), Compression::new(GZIP_LEVEL));
        gz.write_all(samples).map_err(fail)?;
        let encoded = gz.finish().map_err(fail)?;
        write_new_file(&path, &encoded).map(drop).map_err(fail)
    }

    /// Syncs the chunks (once, on several threads), writes the metadata
    /// and publishes the store.
    pub fn finish(self) -> Result<()> {
        self.finish_with(true)
    }

    /// [`ZarrWriter::finish`]; without `sync` nothing is synced (a scratch
    /// output: it still appears only complete).
    pub fn finish_with(self, sync: bool) -> Result<()> {
        let name = self.name.clone();
        self.finish_inner(sync).map_err(|e| e.in_file(&name))
    }

    fn finish_inner(self, sync: bool) -> Result<()> {
        if self.written != self.shape[0] {
            return Err(IoError::invalid(
                format!("{} of {} slices written", self.written, self.shape[0]),
                "write every slice before finishing",
            ));
        }
        if sync {
            let sync_one = |k: usize| -> Result<()> {
                let path = &self.unsynced[k];
                sync_file(path).map_err(|e| {
                    IoError::io(&format!("cannot sync the chunk {}", path.display()), e)
                })
            };
            on_threads(self.unsynced.len(), &sync_one)?;
        }
        let fail = |e| IoError::io("cannot write the store's metadata", e);
        write_new(
            &self.array_dir.join("zarr.json"),
            array_json(&self.shape, &self.chunks, self.dtype).as_bytes(),
        )
        .map_err(fail)?;
        if self.ome {
            let stem = self
                .target
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            write_new(
                &self.tmp.path.join("zarr.json"),
                ome_group_json(&stem, self.shape.len()).as_bytes(),
            )
            .map_err(fail)?;
        }
        self.tmp.publish(&self.target)
    }
}

/// A new file (never an existing one, never through a symlink), synced.
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_new_file(path, bytes)?.sync_data()
}

/// A new file (never an existing one, never through a symlink), not
/// synced: chunks are synced together on `finish`.
fn write_new_file(path: &Path, bytes: &[u8]) -> std::io::Result<std::fs::File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    }
    let mut f = options.open(path)?;
    f.write_all(bytes)?;
    Ok(f)
}

/// Syncs a file this writer made (opened without following a symlink).
fn sync_file(path: &Path) -> std::io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    }
    options.open(path)?.sync_data()
}

/// `f(0..count)` on up to one thread per core (16 at most), every result
/// in order; the first error.
fn on_threads<T: Send>(count: usize, f: &(dyn Fn(usize) -> Result<T> + Sync)) -> Result<Vec<T>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |c| c.get().min(16))
        .min(count);
    if threads <= 1 {
        return (0..count).map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<Result<T>>>> =
        (0..count).map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if k >= count {
                        break;
                    }
                    let r = f(k);
                    let failed = r.is_err();
                    if let Ok(mut slot) = slots[k].lock() {
                        *slot = Some(r);
                    }
                    if failed {
                        // The others stop at their next chunk.
                        next.store(count, std::sync::atomic::Ordering::Relaxed);
                        break;
                    }
                }
            });
        }
    });
    let mut out = Vec::with_capacity(count);
    for slot in slots {
        match slot.into_inner().ok().flatten() {
            Some(r) => out.push(r?),
            None => {
                return Err(IoError::invalid(
                    "a chunk was not written (a writing thread stopped)",
                    "see the error above; run again",
                ));
            }
        }
    }
    Ok(out)
}

fn axis_names(nd: usize) -> Vec<&'static str> {
    let all = ["t", "c", "z", "y", "x"];
    all[all.len().saturating_sub(nd)..].to_vec()
}

fn array_json(shape: &[usize], chunks: &[usize], dtype: DType) -> String {
    let fill = match dtype {
        DType::Bool => json!(false),
        DType::F32 | DType::F64 => json!(0.0),
        _ => json!(0),
    };
    let mut doc = json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": dtype.name(),
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill,
        "codecs": [
            {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "gzip", "configuration": {"level": GZIP_LEVEL}},
        ],
        "attributes": {},
    });
    if shape.len() <= 5
        && let Some(o) = doc.as_object_mut()
    {
        o.insert("dimension_names".into(), json!(axis_names(shape.len())));
    }
    pretty(&doc)
}

/// OME-Zarr 0.5: one multiscale of one level, the array at `0`.
fn ome_group_json(name: &str, nd: usize) -> String {
    let axes: Vec<Value> = axis_names(nd)
        .into_iter()
        .map(|a| {
            let kind = match a {
                "t" => "time",
                "c" => "channel",
                _ => "space",
            };
            json!({"name": a, "type": kind})
        })
        .collect();
    let doc = json!({
        "zarr_format": 3,
        "node_type": "group",
        "attributes": {"ome": {
            "version": "0.5",
            "multiscales": [{
                "name": name,
                "axes": axes,
                "datasets": [{
                    "path": "0",
                    "coordinateTransformations": [{"type": "scale", "scale": vec![1.0; nd]}],
                }],
            }],
        }},
    });
    pretty(&doc)
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// Writes `array` whole as a Zarr store at `path`.
pub fn write(path: &Path, array: &Array) -> Result<()> {
    let mut w = ZarrWriter::create(path, array.shape.clone(), array.dtype())?;
    w.write_slab(array)?;
    w.finish()
}

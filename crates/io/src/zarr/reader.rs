//! Reading a Zarr array from a directory store: any box of it, decoding
//! only the chunks (or, in a shard, the inner chunks) the box touches.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::codec::{ShardIndex, chunk_bytes, copy_box, decode_chunk, inner_grid};
use super::meta::{Codec, MAX_METADATA_BYTES, Meta, Sharding, codec_names, parse_v2, parse_v3};
use crate::elements::decode_elements;
use crate::{Array, DType, IoError, Result};

/// Decoded chunks kept between reads (a stack read frame by frame decodes
/// each chunk once, not once per frame it holds), up to this many bytes.
const CACHE_BYTES: usize = 128 << 20;

/// Reads at most this much without looking at the store's size; beyond it,
/// as for the other compressed formats, 1100 times the bytes stored.
const FLOOR_BYTES: usize = 512 << 20;

/// A group followed through `multiscales` to an array, at most this deep.
const MAX_HOPS: usize = 8;

/// A Zarr array, read box by box.
pub struct ZarrArray {
    name: String,
    dir: PathBuf,
    path: String,
    meta: Meta,
    /// The decoding unit: the inner chunk of a shard, else the chunk.
    unit: Vec<usize>,
    /// The sharding of `[sharding]`-only pipelines, read inner chunk by
    /// inner chunk; other pipelines decode whole chunks.
    sharding: Option<Sharding>,
    cache: HashMap<Vec<usize>, Option<Arc<Vec<u8>>>>,
    cached_bytes: usize,
    index: Option<(Vec<usize>, Arc<Option<ShardIndex>>)>,
    limit: Option<usize>,
}

fn read_json(path: &Path) -> Result<Value> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let file = File::open(path).map_err(|e| IoError::io(&format!("cannot open {name}"), e))?;
    let mut bytes = Vec::new();
    file.take(MAX_METADATA_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| IoError::io(&format!("cannot read {name}"), e))?;
    if bytes.len() as u64 > MAX_METADATA_BYTES {
        return Err(IoError::too_large(format!(
            "{name} is larger than {} MiB",
            MAX_METADATA_BYTES >> 20
        )));
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| IoError::corrupt(format!("{name} is not valid JSON: {e}")))
}

/// The path of the first level of a group's OME-Zarr `multiscales`.
fn multiscale_path(attrs: &Value) -> Option<String> {
    let ms = attrs
        .get("ome")
        .and_then(|o| o.get("multiscales"))
        .or_else(|| attrs.get("multiscales"))?;
    let p = ms.get(0)?.get("datasets")?.get(0)?.get("path")?.as_str()?;
    Some(p.to_string())
}

/// Children of a group that are arrays or groups, for error messages.
fn children(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|it| {
            it.filter_map(|e| e.ok())
                .filter(|e| {
                    let p = e.path();
                    ["zarr.json", ".zarray", ".zgroup"]
                        .iter()
                        .any(|m| p.join(m).is_file())
                })
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names.truncate(20);
    names
}

/// `sub` as path components inside the store: no `..`, no root.
fn inside(store: &Path, sub: &str) -> Result<PathBuf> {
    let rel = Path::new(sub.trim_matches('/'));
    if rel
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(IoError::invalid(
            format!("{sub:?} is not a path inside the store"),
            "name an array as STORE.zarr::path/inside/it",
        ));
    }
    Ok(store.join(rel))
}

impl ZarrArray {
    /// Opens `STORE.zarr[::path]`: the array there, or the first
    /// multiscale level of the group there.
    pub fn open(name: &str) -> Result<ZarrArray> {
        let (store, sub) = super::split_name(name).ok_or_else(|| {
            IoError::unsupported("not a Zarr store name", "name Zarr stores NAME.zarr")
                .in_file(name)
        })?;
        let store_name = crate::error::display_name(store);
        Self::open_in(Path::new(store), sub.unwrap_or(""), store_name.clone())
            .map_err(|e| e.in_file(&store_name))
    }

    fn open_in(store: &Path, sub: &str, name: String) -> Result<ZarrArray> {
        if !store.is_dir() {
            return Err(IoError::io(
                "cannot open the store (a Zarr store is a directory)",
                std::io::Error::from(std::io::ErrorKind::NotFound),
            ));
        }
        let mut path = sub.trim_matches('/').to_string();
        for _ in 0..MAX_HOPS {
            let dir = inside(store, &path)?;
            let (meta, next) = if dir.join("zarr.json").is_file() {
                let doc = read_json(&dir.join("zarr.json"))?;
                if doc.get("zarr_format").and_then(Value::as_u64) != Some(3) {
                    return Err(IoError::corrupt("zarr.json does not say zarr_format 3"));
                }
                match doc.get("node_type").and_then(Value::as_str) {
                    Some("array") => (Some(parse_v3(&doc)?), None),
                    Some("group") => (
                        None,
                        multiscale_path(doc.get("attributes").unwrap_or(&Value::Null)),
                    ),
                    _ => return Err(IoError::corrupt("zarr.json has no node_type")),
                }
            } else if dir.join(".zarray").is_file() {
                (Some(parse_v2(&read_json(&dir.join(".zarray"))?)?), None)
            } else if dir.join(".zgroup").is_file() {
                let attrs = if dir.join(".zattrs").is_file() {
                    read_json(&dir.join(".zattrs"))?
                } else {
                    Value::Null
                };
                (None, multiscale_path(&attrs))
            } else {
                return Err(IoError::corrupt(format!(
                    "{} holds no zarr.json, .zarray or .zgroup: not a Zarr array or group",
                    if path.is_empty() { "the store" } else { &path }
                )));
            };
            if let Some(meta) = meta {
                return Ok(Self::new(name, dir, path, meta));
            }
            let Some(next) = next else {
                return Err(IoError::invalid(
                    format!(
                        "{} is a group without OME-Zarr multiscales; its members: {}",
                        if path.is_empty() { "the store" } else { &path },
                        children(&dir).join(" ")
                    ),
                    "name an array as STORE.zarr::path/to/array",
                ));
            };
            path = if path.is_empty() {
                next
            } else {
                format!("{path}/{next}")
            };
        }
        Err(IoError::corrupt(
            "the groups' multiscales paths do not end at an array",
        ))
    }

    fn new(name: String, dir: PathBuf, path: String, meta: Meta) -> ZarrArray {
        let sharding = match meta.codecs.as_slice() {
            [Codec::Sharding(s)] => Some((**s).clone()),
            _ => None,
        };
        let unit = sharding
            .as_ref()
            .map_or_else(|| meta.chunks.clone(), |s| s.inner.clone());
        ZarrArray {
            name,
            dir,
            path,
            meta,
            unit,
            sharding,
            cache: HashMap::new(),
            cached_bytes: 0,
            index: None,
            limit: None,
        }
    }

    /// The store name errors cite.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn shape(&self) -> &[usize] {
        &self.meta.shape
    }

    pub fn dtype(&self) -> DType {
        self.meta.dtype
    }

    /// The chunk (or shard) shape.
    pub fn chunks(&self) -> &[usize] {
        &self.meta.chunks
    }

    /// The inner chunk shape of a sharded array.
    pub fn inner_chunks(&self) -> Option<&[usize]> {
        self.sharding
            .as_ref()
            .map(|s| s.inner.as_slice())
            .or_else(|| {
                self.meta.codecs.iter().find_map(|c| match c {
                    Codec::Sharding(s) => Some(s.inner.as_slice()),
                    _ => None,
                })
            })
    }

    /// 2 or 3.
    pub fn zarr_format(&self) -> u8 {
        self.meta.zarr_format
    }

    /// The codecs, by name.
    pub fn codecs(&self) -> Vec<String> {
        codec_names(&self.meta.codecs)
    }

    /// The array's path in the store (empty: the root).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Slices `z0..z0 + nz` along the first axis.
    pub fn read_slab(&mut self, z0: usize, nz: usize) -> Result<Array> {
        let total = self.meta.shape.first().copied().unwrap_or(0);
        if self.meta.shape.is_empty() || z0.checked_add(nz).is_none_or(|e| e > total) {
            return Err(IoError::invalid(
                format!(
                    "slices {z0}..{} asked of an array of shape {:?}",
                    z0.saturating_add(nz),
                    self.meta.shape
                ),
                "ask for slices within the first axis",
            )
            .in_file(&self.name));
        }
        let mut start = vec![0; self.meta.shape.len()];
        start[0] = z0;
        let mut size = self.meta.shape.clone();
        size[0] = nz;
        self.read_box(&start, &size)
    }

    /// The whole array.
    pub fn read_all(&mut self) -> Result<Array> {
        let size = self.meta.shape.clone();
        self.read_box(&vec![0; size.len()], &size)
    }

    fn read_box(&mut self, start: &[usize], size: &[usize]) -> Result<Array> {
        let bytes = self
            .read_box_bytes(start, size)
            .map_err(|e| e.in_file(&self.name))?;
        let data = decode_elements(self.meta.dtype, &bytes, false);
        Array::new(size.to_vec(), data).map_err(|e| e.in_file(&self.name))
    }

    /// The box's samples, little-endian, C order.
    fn read_box_bytes(&mut self, start: &[usize], size: &[usize]) -> Result<Vec<u8>> {
        let elem = self.meta.dtype.size_bytes();
        let total = chunk_bytes(size, elem)?;
        self.check_alloc(total, size)?;
        let mut out: Vec<u8> = self.meta.fill.iter().copied().cycle().take(total).collect();
        let nd = size.len();
        if nd == 0 {
            if let Some(u) = self.unit(&[], false)? {
                out.copy_from_slice(&u[..elem]);
            }
            return Ok(out);
        }
        if size.contains(&0) {
            return Ok(out);
        }
        self.evict_outside(start, size);
        let lo: Vec<usize> = (0..nd).map(|d| start[d] / self.unit[d]).collect();
        let hi: Vec<usize> = (0..nd)
            .map(|d| (start[d] + size[d]).div_ceil(self.unit[d]))
            .collect();
        let mut c = lo.clone();
        loop {
            // Kept only when the next slab along the first axis needs it too.
            let end = start[0] + size[0];
            let keep = (c[0] + 1) * self.unit[0] > end && end < self.meta.shape[0];
            if let Some(data) = self.unit(&c, keep)? {
                let mut from = vec![0; nd];
                let mut to = vec![0; nd];
                let mut ext = vec![0; nd];
                for d in 0..nd {
                    let u0 = c[d] * self.unit[d];
                    let a = start[d].max(u0);
                    let b = (start[d] + size[d]).min(u0 + self.unit[d]);
                    from[d] = a - u0;
                    to[d] = a - start[d];
                    ext[d] = b - a;
                }
                copy_box(&data, &self.unit, &from, &mut out, size, &to, &ext, elem);
            }
            // Odometer over the units the box touches.
            let mut d = nd;
            loop {
                if d == 0 {
                    return Ok(out);
                }
                d -= 1;
                c[d] += 1;
                if c[d] < hi[d] {
                    break;
                }
                c[d] = lo[d];
            }
        }
    }

    /// A read of `bytes` must fit what the store could hold decoded.
    fn check_alloc(&mut self, bytes: usize, size: &[usize]) -> Result<()> {
        if bytes <= FLOOR_BYTES {
            return Ok(());
        }
        let limit = *self
            .limit
            .get_or_insert_with(|| crate::decoded_size_limit(stored_bytes(&self.dir, 0)));
        if bytes > limit {
            return Err(IoError::too_large(format!(
                "reading {size:?} {} ({bytes} bytes) is more than this store's chunks can hold",
                self.meta.dtype.name()
            )));
        }
        Ok(())
    }

    /// Drops cached units that lie outside the first-axis range of the box.
    fn evict_outside(&mut self, start: &[usize], size: &[usize]) {
        let u = self.unit[0];
        let (z0, z1) = (start[0], start[0] + size[0]);
        let before = self.cache.len();
        self.cache
            .retain(|c, _| c[0] * u < z1 && (c[0] + 1) * u > z0);
        if self.cache.len() != before {
            self.cached_bytes = self
                .cache
                .values()
                .map(|v| v.as_ref().map_or(0, |d| d.len()))
                .sum();
        }
    }

    /// The decoded unit at grid coordinates `c`; `None`: not stored (fill).
    /// `keep`: cache it for the next read.
    fn unit(&mut self, c: &[usize], keep: bool) -> Result<Option<Arc<Vec<u8>>>> {
        if let Some(hit) = self.cache.get(c) {
            return Ok(hit.clone());
        }
        let data = match self.sharding.clone() {
            None => self.load_chunk(c)?,
            Some(sh) => self.load_inner(&sh, c)?,
        }
        .map(Arc::new);
        let n = data.as_ref().map_or(0, |d| d.len());
        if keep && self.cached_bytes + n <= CACHE_BYTES {
            self.cached_bytes += n;
            self.cache.insert(c.to_vec(), data.clone());
        }
        Ok(data)
    }

    fn chunk_path(&self, c: &[usize]) -> PathBuf {
        self.dir.join(self.meta.key.key(c))
    }

    fn load_chunk(&self, c: &[usize]) -> Result<Option<Vec<u8>>> {
        let path = self.chunk_path(c);
        let key = self.meta.key.key(c);
        let m = &self.meta;
        let f = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(IoError::io(&format!("cannot open the chunk {key}"), e)),
        };
        let read = || -> Result<Vec<u8>> {
            let len = f
                .metadata()
                .map_err(|e| IoError::io("cannot stat the chunk", e))?
                .len();
            check_encoded_len(len, &m.chunks, m.dtype)?;
            let mut bytes = Vec::with_capacity(len as usize);
            (&f).take(len)
                .read_to_end(&mut bytes)
                .map_err(|e| IoError::io("cannot read the chunk", e))?;
            Ok(bytes)
        };
        let bytes = read().map_err(|e| at_chunk(e, &key))?;
        decode_chunk(&m.codecs, &m.chunks, m.dtype, &m.fill, bytes)
            .map(Some)
            .map_err(|e| at_chunk(e, &key))
    }

    /// Inner chunk `c` (inner-chunk grid coordinates) of its shard.
    fn load_inner(&mut self, sh: &Sharding, c: &[usize]) -> Result<Option<Vec<u8>>> {
        let per: Vec<usize> = inner_grid(sh, &self.meta.chunks);
        let shard: Vec<usize> = c.iter().zip(&per).map(|(c, p)| c / p).collect();
        let within: Vec<usize> = c.iter().zip(&per).map(|(c, p)| c % p).collect();
        let k = within.iter().zip(&per).fold(0, |k, (w, p)| k * p + w);
        let key = self.meta.key.key(&shard);
        let index = self
            .shard_index(sh, &shard, &per)
            .map_err(|e| at_chunk(e, &key))?;
        let Some(index) = index.as_ref() else {
            return Ok(None);
        };
        let Some((off, len)) = index.entries.get(k).copied().flatten() else {
            return Ok(None);
        };
        let read = || -> Result<Vec<u8>> {
            let mut f = File::open(self.chunk_path(&shard))
                .map_err(|e| IoError::io("cannot open the shard", e))?;
            check_encoded_len(len, &sh.inner, self.meta.dtype)?;
            let mut piece = vec![0; len as usize];
            f.seek(SeekFrom::Start(off))
                .and_then(|_| f.read_exact(&mut piece))
                .map_err(|e| IoError::io("cannot read the shard", e))?;
            let m = &self.meta;
            decode_chunk(&sh.codecs, &sh.inner, m.dtype, &m.fill, piece)
        };
        read().map(Some).map_err(|e| at_chunk(e, &key))
    }

    /// The index of shard `s` (kept for the next inner chunk of the same shard).
    fn shard_index(
        &mut self,
        sh: &Sharding,
        s: &[usize],
        per: &[usize],
    ) -> Result<Arc<Option<ShardIndex>>> {
        if let Some((at, idx)) = &self.index
            && at == s
        {
            return Ok(idx.clone());
        }
        let index = Arc::new(self.read_index(sh, s, per)?);
        self.index = Some((s.to_vec(), index.clone()));
        Ok(index)
    }

    fn read_index(&self, sh: &Sharding, s: &[usize], per: &[usize]) -> Result<Option<ShardIndex>> {
        let mut f = match File::open(self.chunk_path(s)) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(IoError::io("cannot open the shard", e)),
        };
        let len = f
            .metadata()
            .map_err(|e| IoError::io("cannot stat the shard", e))?
            .len();
        let n = crate::checked_product(per)
            .ok_or_else(|| IoError::too_large("the shard holds too many inner chunks"))?;
        let ilen = ShardIndex::encoded_len(sh, n)?;
        if ilen as u64 > len {
            return Err(IoError::truncated(format!(
                "the shard is {len} bytes, shorter than its index of {ilen}"
            )));
        }
        let at = if sh.index_at_end {
            len - ilen as u64
        } else {
            0
        };
        let mut bytes = vec![0; ilen];
        f.seek(SeekFrom::Start(at))
            .and_then(|_| f.read_exact(&mut bytes))
            .map_err(|e| IoError::io("cannot read the shard index", e))?;
        ShardIndex::decode(sh, n, &bytes, len).map(Some)
    }
}

/// A stored chunk can be at most a little larger than its samples
/// (headers, checksums, incompressible data): a larger one is refused
/// before it is read.
fn check_encoded_len(len: u64, shape: &[usize], dtype: DType) -> Result<()> {
    let samples = chunk_bytes(shape, dtype.size_bytes())? as u64;
    let most = samples.saturating_add(samples / 8).saturating_add(64 << 10);
    if len > most {
        return Err(IoError::corrupt(format!(
            "{len} bytes stored for a chunk of {shape:?} {} ({samples} bytes)",
            dtype.name()
        )));
    }
    Ok(())
}

/// Names the chunk in an error about it.
fn at_chunk(mut e: IoError, key: &str) -> IoError {
    e.message = format!("chunk {key}: {}", e.message);
    e
}

/// Bytes of the files under `dir` (no symlinks followed), for the size bound.
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

//! Reading a Zarr array from a store: any box of it, decoding only the
//! chunks (or, in a shard, the inner chunks) the box touches.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::codec::{ShardIndex, chunk_bytes, copy_box, decode_chunk, inner_grid};
use super::meta::{Codec, MAX_METADATA_BYTES, Meta, Sharding, codec_names, parse_v2, parse_v3};
use super::store::{Store, join};
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
    store: Box<dyn Store>,
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

fn read_json(store: &dyn Store, key: &str) -> Result<Value> {
    let name = key.rsplit('/').next().unwrap_or(key);
    let len = store.len(key)?.unwrap_or(0);
    if len > MAX_METADATA_BYTES {
        return Err(IoError::too_large(format!(
            "{name} is larger than {} MiB",
            MAX_METADATA_BYTES >> 20
        )));
    }
    let bytes = store.read(key, 0, len as usize)?;
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

/// `sub` as a key prefix inside the store: no `..`, no root.
fn inside(sub: &str) -> Result<String> {
    let parts: Vec<&str> = sub
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.iter().any(|p| *p == ".." || p.contains('\\')) {
        return Err(IoError::invalid(
            format!("{sub:?} is not a path inside the store"),
            "name an array as STORE.zarr::path/inside/it",
        ));
    }
    Ok(parts.join("/"))
}

impl ZarrArray {
    /// Opens `STORE.zarr[::path]`: the array there, or the first
    /// multiscale level of the group there.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(name: &str) -> Result<ZarrArray> {
        Self::open_with(name, &crate::ReadOptions::default())
    }

    /// [`ZarrArray::open`] with the options on symlinks out of the store.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_with(name: &str, opts: &crate::ReadOptions) -> Result<ZarrArray> {
        let (store, sub) = super::split_name(name).ok_or_else(|| {
            IoError::unsupported("not a Zarr store name", "name Zarr stores NAME.zarr")
                .in_file(name)
        })?;
        let store_name = crate::error::display_name(store);
        if !std::path::Path::new(store).is_dir() {
            return Err(IoError::io(
                "cannot open the store (a Zarr store is a directory)",
                std::io::Error::from(std::io::ErrorKind::NotFound),
            )
            .in_file(&store_name));
        }
        let files = super::store::FileStore::with_options(std::path::Path::new(store), opts);
        let z = Self::open_store(Box::new(files), sub.unwrap_or(""), &store_name)?;
        if let Some(most) = opts.max_chunk_bytes {
            let elem = z.meta.dtype.size_bytes();
            let bytes = chunk_bytes(&z.meta.chunks, elem).unwrap_or(usize::MAX);
            // A shard is read inner chunk by inner chunk: its inner chunks count.
            let unit = chunk_bytes(&z.unit, elem).unwrap_or(usize::MAX);
            let (shape, b) = if z.sharding.is_some() {
                (&z.unit, unit)
            } else {
                (&z.meta.chunks, bytes)
            };
            if b > most {
                return Err(
                    crate::links::chunk_too_large(shape, z.meta.dtype.name(), b, most)
                        .in_file(&store_name),
                );
            }
        }
        Ok(z)
    }

    /// Opens the array at `sub` in `store` (empty: the root), or the first
    /// multiscale level of the group there; errors cite `name`.
    pub fn open_store(store: Box<dyn Store>, sub: &str, name: &str) -> Result<ZarrArray> {
        Self::open_in(store, sub, name.to_string()).map_err(|e| e.in_file(name))
    }

    fn open_in(store: Box<dyn Store>, sub: &str, name: String) -> Result<ZarrArray> {
        let mut path = inside(sub)?;
        let has = |key: &str| -> Result<bool> { Ok(store.len(key)?.is_some()) };
        for _ in 0..MAX_HOPS {
            path = inside(&path)?;
            let key = |f: &str| join(&path, f);
            let (meta, next) = if has(&key("zarr.json"))? {
                let doc = read_json(&*store, &key("zarr.json"))?;
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
            } else if has(&key(".zarray"))? {
                (Some(parse_v2(&read_json(&*store, &key(".zarray"))?)?), None)
            } else if has(&key(".zgroup"))? {
                let attrs = if has(&key(".zattrs"))? {
                    read_json(&*store, &key(".zattrs"))?
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
                return Ok(Self::new(name, store, path, meta));
            }
            let Some(next) = next else {
                return Err(IoError::invalid(
                    format!(
                        "{} is a group without OME-Zarr multiscales; its members: {}",
                        if path.is_empty() { "the store" } else { &path },
                        store.members(&path).join(" ")
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

    fn new(name: String, store: Box<dyn Store>, path: String, meta: Meta) -> ZarrArray {
        let sharding = match meta.codecs.as_slice() {
            [Codec::Sharding(s)] => Some((**s).clone()),
            _ => None,
        };
        let unit = sharding
            .as_ref()
            .map_or_else(|| meta.chunks.clone(), |s| s.inner.clone());
        ZarrArray {
            name,
            store,
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

    /// Rows `y` (along the second axis) of slice `z`: part of a slice, for
    /// slices too large to hold whole; shape `[1, y.len(), ...]`.
    pub fn read_rows(&mut self, z: usize, y: std::ops::Range<usize>) -> Result<Array> {
        let shape = &self.meta.shape;
        if shape.len() < 2 || z >= shape[0] || y.start > y.end || y.end > shape[1] {
            return Err(IoError::invalid(
                format!("rows {y:?} of slice {z} asked of an array of shape {shape:?}"),
                "ask for rows within the slice",
            )
            .in_file(&self.name));
        }
        let mut start = vec![0; shape.len()];
        start[0] = z;
        start[1] = y.start;
        let mut size = shape.clone();
        size[0] = 1;
        size[1] = y.len();
        self.read_box(&start, &size)
    }

    /// The 2-D planes of the array: the product of its axes before the
    /// last two (1 for a 2-D array; 0 below 2-D).
    pub fn planes(&self) -> usize {
        let n = self.meta.shape.len();
        if n < 2 {
            return 0;
        }
        self.meta.shape[..n - 2].iter().product()
    }

    /// Plane `k` (C order over the axes before the last two), shaped as
    /// the last two axes.
    pub fn read_plane(&mut self, k: usize) -> Result<Array> {
        let n = self.meta.shape.len();
        if k >= self.planes() {
            return Err(IoError::invalid(
                format!(
                    "plane {k} asked of an array of shape {:?} ({} planes)",
                    self.meta.shape,
                    self.planes()
                ),
                "ask for a plane from 0 to the count less one",
            )
            .in_file(&self.name));
        }
        let mut start = vec![0; n];
        let mut rest = k;
        for d in (0..n - 2).rev() {
            start[d] = rest % self.meta.shape[d];
            rest /= self.meta.shape[d];
        }
        let mut size = vec![1; n];
        size[n - 2..].copy_from_slice(&self.meta.shape[n - 2..]);
        let plane = self.read_box(&start, &size)?;
        let (data, shape) = (plane.data, self.meta.shape[n - 2..].to_vec());
        Array::new(shape, data).map_err(|e| e.in_file(&self.name))
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
            .get_or_insert_with(|| crate::decoded_size_limit(self.store.stored_bytes()));
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

    /// The store key of chunk (or shard) `c`.
    fn chunk_key(&self, c: &[usize]) -> String {
        join(&self.path, &self.meta.key.key(c))
    }

    fn load_chunk(&self, c: &[usize]) -> Result<Option<Vec<u8>>> {
        let key = self.meta.key.key(c);
        let m = &self.meta;
        let read = || -> Result<Option<Vec<u8>>> {
            let full = self.chunk_key(c);
            let Some(len) = self.store.len(&full)? else {
                return Ok(None);
            };
            check_encoded_len(len, &m.chunks, m.dtype)?;
            self.store.read(&full, 0, len as usize).map(Some)
        };
        let Some(bytes) = read().map_err(|e| at_chunk(e, &key))? else {
            return Ok(None);
        };
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
            check_encoded_len(len, &sh.inner, self.meta.dtype)?;
            let piece = self
                .store
                .read(&self.chunk_key(&shard), off, len as usize)?;
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
        let key = self.chunk_key(s);
        let Some(len) = self.store.len(&key)? else {
            return Ok(None);
        };
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
        let bytes = self.store.read(&key, at, ilen)?;
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

//! Zarr reading and writing: every store of tests/fixtures/make_zarr.py
//! equals what zarr-python read back (the .npy beside it), whole and slab
//! by slab; what we write reads back equal; damaged stores are one-line
//! errors (a missing chunk is the fill value, as Zarr says).

mod common;

use common::{TempDir, fixture, same};
use gpuscope_io::zarr::{ZarrArray, ZarrWriter};
use gpuscope_io::{Array, ArrayData, DType, ErrorKind, Format, IoError, read, write};
use std::path::{Path, PathBuf};

fn store(name: &str) -> String {
    fixture(&format!("zarr/{name}")).display().to_string()
}

fn expected(name: &str) -> Array {
    read(&fixture(&format!("zarr/{name}.npy"))).unwrap().array
}

fn read_whole(spec: &str) -> Array {
    let img = read(Path::new(spec)).unwrap_or_else(|e| panic!("{spec}: {e}"));
    assert_eq!(img.format, Format::Zarr);
    img.array
}

/// Slab by slab (one and two slices) equals the whole.
fn slabs_equal_whole(spec: &str, whole: &Array) {
    let mut z = ZarrArray::open(spec).unwrap();
    let nz = whole.shape[0];
    let n = whole.len() / nz;
    for step in [1, 2] {
        for z0 in (0..nz).step_by(step) {
            let k = step.min(nz - z0);
            let slab = z.read_slab(z0, k).unwrap();
            assert_eq!(slab.shape[1..], whole.shape[1..]);
            let want = slice(whole, z0 * n, (z0 + k) * n);
            assert!(same(&slab, &want), "{spec}: slices {z0}..{}", z0 + k);
        }
    }
}

fn slice(a: &Array, lo: usize, hi: usize) -> Array {
    let mut shape = a.shape.clone();
    shape[0] = (hi - lo) / (a.len() / a.shape[0]);
    let data = match &a.data {
        ArrayData::Bool(v) => ArrayData::Bool(v[lo..hi].to_vec()),
        ArrayData::U8(v) => ArrayData::U8(v[lo..hi].to_vec()),
        ArrayData::U16(v) => ArrayData::U16(v[lo..hi].to_vec()),
        ArrayData::U32(v) => ArrayData::U32(v[lo..hi].to_vec()),
        ArrayData::U64(v) => ArrayData::U64(v[lo..hi].to_vec()),
        ArrayData::I8(v) => ArrayData::I8(v[lo..hi].to_vec()),
        ArrayData::I16(v) => ArrayData::I16(v[lo..hi].to_vec()),
        ArrayData::I32(v) => ArrayData::I32(v[lo..hi].to_vec()),
        ArrayData::I64(v) => ArrayData::I64(v[lo..hi].to_vec()),
        ArrayData::F32(v) => ArrayData::F32(v[lo..hi].to_vec()),
        ArrayData::F64(v) => ArrayData::F64(v[lo..hi].to_vec()),
    };
    Array::new(shape, data).unwrap()
}

#[test]
fn every_fixture_equals_zarr_python() {
    for (name, dtype) in [
        ("v3_gzip_u16", DType::U16),
        ("v3_zstd_f32", DType::F32),
        ("v3_sharded_u32", DType::U32),
        ("v3_transpose_i16", DType::I16),
        ("v3_sharded_start", DType::U8),
        ("v2_zlib_u8", DType::U8),
        ("v2_gzip_be_u16", DType::U16),
        ("v2_zstd_f64", DType::F64),
        ("v2_raw_i32", DType::I32),
        ("ome_v3", DType::U16),
        ("ome_v2", DType::U16),
        ("blosc_v3", DType::U8),
        ("blosc_v3_lz4hc_u32", DType::U32),
        ("blosc_v2_lz4_u16", DType::U16),
        ("blosc_v2_blosclz_f32", DType::F32),
        ("blosc_v2_zlib_bitshuffle_i32", DType::I32),
        ("blosc_v2_zstd_bitshuffle_u8", DType::U8),
        ("blosc_v2_blocks_u32", DType::U32),
    ] {
        let spec = store(&format!("{name}.zarr"));
        let want = expected(name);
        let got = read_whole(&spec);
        assert_eq!(got.dtype(), dtype, "{name}");
        assert!(same(&got, &want), "{name}: differs from zarr-python");
        if got.ndim() >= 2 {
            slabs_equal_whole(&spec, &want);
        }
    }
}

#[test]
fn every_dtype_with_its_fill_value() {
    for dt in [
        "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
        "float64", "bool",
    ] {
        let spec = format!("{}::{dt}", store("v3_dtypes.zarr"));
        let got = read_whole(&spec);
        assert_eq!(got.dtype().name(), dt);
        let want = expected(&format!("v3_dtypes_{dt}"));
        assert!(same(&got, &want), "{dt}: differs from zarr-python");
        // The chunk never written reads as the fill value (7, or true).
        let last = got.to_f64_vec()[got.len() - 1];
        assert_eq!(last, if dt == "bool" { 1.0 } else { 7.0 }, "{dt}");
    }
}

#[test]
fn layout_is_reported() {
    let z = ZarrArray::open(&store("v3_sharded_u32.zarr")).unwrap();
    assert_eq!(z.shape(), [4, 80, 96]);
    assert_eq!(z.chunks(), [2, 80, 96]);
    assert_eq!(z.inner_chunks(), Some(&[1, 40, 48][..]));
    assert_eq!(z.zarr_format(), 3);
    let z = ZarrArray::open(&store("ome_v3.zarr")).unwrap();
    assert_eq!(z.path(), "s0");
    let z = ZarrArray::open(&store("v2_zstd_f64.zarr")).unwrap();
    assert_eq!(z.zarr_format(), 2);
    assert_eq!(z.codecs(), ["transpose[2, 1, 0]", "bytes", "zstd"]);
    // A trailing slash, as shells complete directory names.
    let img = read(Path::new(&format!("{}/", store("v2_zlib_u8.zarr")))).unwrap();
    assert_eq!(img.array.shape, [2, 15, 10]);
}

fn values(dtype: DType, n: usize) -> Array {
    let v: Vec<f64> = (0..n)
        .map(|i| ((i * 7919) % 251) as f64 - if dtype.is_integer() { 0.0 } else { 0.5 })
        .collect();
    Array::from_f64(vec![n], v).unwrap().cast(dtype)
}

fn reshape(a: Array, shape: Vec<usize>) -> Array {
    Array::new(shape, a.data).unwrap()
}

#[test]
fn written_stores_read_back_equal() {
    let dir = TempDir::new("zarr-write");
    for dtype in DType::ALL {
        for shape in [vec![5, 33, 20], vec![33, 1030], vec![70], vec![2, 3, 4, 5]] {
            let n: usize = shape.iter().product();
            let a = reshape(values(dtype, n), shape.clone());
            let out = dir.path(&format!("{}_{}.zarr", dtype.name(), shape.len()));
            write(&out, &a).unwrap();
            let back = read(&out).unwrap().array;
            assert!(same(&back, &a), "{} {shape:?}", dtype.name());
        }
    }
    // Only the outputs: no temporary directory left behind.
    assert!(
        dir.entries().iter().all(|e| e.ends_with(".zarr")),
        "{:?}",
        dir.entries()
    );
    // An OME-Zarr image: the group names its one level.
    let doc = std::fs::read_to_string(dir.path("uint16_3.zarr/zarr.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
    let ms = &v["attributes"]["ome"]["multiscales"][0];
    assert_eq!(ms["datasets"][0]["path"], "0");
    assert_eq!(ms["axes"].as_array().unwrap().len(), 3);
    let arr = std::fs::read_to_string(dir.path("uint16_3.zarr/0/zarr.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&arr).unwrap();
    assert_eq!(
        v["chunk_grid"]["configuration"]["chunk_shape"],
        serde_json::json!([1, 33, 20])
    );
    // A 1-D array is a bare array at the root.
    assert!(dir.path("uint8_1.zarr/c/0").is_file());
}

#[test]
fn stream_written_slab_by_slab() {
    let dir = TempDir::new("zarr-stream");
    let out = dir.path("s.zarr");
    let a = reshape(values(DType::F32, 6 * 1100 * 9), vec![6, 1100, 9]);
    let mut w = ZarrWriter::create(&out, vec![6, 1100, 9], DType::F32).unwrap();
    let n = 1100 * 9;
    for (lo, hi) in [(0, 1), (1, 4), (4, 6)] {
        w.write_slab(&slice(&a, lo * n, hi * n)).unwrap();
        // Nothing appears before the end.
        assert!(!out.exists());
    }
    w.finish().unwrap();
    assert!(same(&read(&out).unwrap().array, &a));
    // Tiles of 1024 rows: the 1100 rows make two chunks a slice.
    assert!(out.join("0/c/5/1/0").is_file());
}

#[test]
fn refuses_to_replace_and_leaves_nothing_unfinished() {
    let dir = TempDir::new("zarr-refuse");
    let out = dir.path("o.zarr");
    let a = reshape(values(DType::U8, 24), vec![2, 3, 4]);
    write(&out, &a).unwrap();
    let e = write(&out, &a).unwrap_err();
    assert!(e.to_string().contains("does not replace"), "{e}");
    // Also a plain file or a symlink there.
    let f = dir.path("f.zarr");
    std::fs::write(&f, b"x").unwrap();
    assert!(write(&f, &a).is_err());
    assert_eq!(std::fs::read(&f).unwrap(), b"x");
    #[cfg(unix)]
    {
        let target = dir.path("elsewhere");
        std::os::unix::fs::symlink(&target, dir.path("l.zarr")).unwrap();
        assert!(write(&dir.path("l.zarr"), &a).is_err());
        assert!(!target.exists());
    }
    // An unfinished writer removes its temporary directory.
    let mut w = ZarrWriter::create(&dir.path("u.zarr"), vec![2, 3, 4], DType::U8).unwrap();
    w.write_slab(&slice(&a, 0, 12)).unwrap();
    drop(w);
    let mut kept = vec!["f.zarr", "o.zarr"];
    if cfg!(unix) {
        kept.insert(1, "l.zarr");
    }
    assert_eq!(dir.entries(), kept);
    // Finishing early is an error and publishes nothing.
    let mut w = ZarrWriter::create(&dir.path("e.zarr"), vec![2, 3, 4], DType::U8).unwrap();
    w.write_slab(&slice(&a, 0, 12)).unwrap();
    assert!(w.finish().is_err());
    assert!(!dir.path("e.zarr").exists());
}

// ---- damaged stores ----

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

fn damaged(dir: &TempDir, name: &str) -> PathBuf {
    let to = dir.path(name);
    copy_dir(&fixture(&format!("zarr/{name}")), &to);
    to
}

fn err(p: &Path) -> IoError {
    let spec = p.display().to_string();
    let e = match ZarrArray::open(&spec).and_then(|mut z| z.read_all()) {
        Ok(a) => panic!("{spec}: expected an error, read {:?}", a.shape),
        Err(e) => e,
    };
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "{spec}: not one line: {msg}");
    let base = p.file_name().unwrap().to_string_lossy();
    assert!(msg.starts_with(&format!("{base}: ")), "{msg}");
    e
}

fn edit_json(path: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(path, v.to_string()).unwrap();
}

#[test]
fn a_missing_chunk_is_the_fill_value() {
    let dir = TempDir::new("zarr-missing");
    let p = damaged(&dir, "v3_gzip_u16.zarr");
    std::fs::remove_file(p.join("c/0/1/1")).unwrap();
    let got = read_whole(&p.display().to_string());
    let mut want = expected("v3_gzip_u16").to_f64_vec();
    let (ny, nx) = (64, 96);
    for z in 0..2 {
        for y in 30..60 {
            for x in 40..80 {
                want[(z * ny + y) * nx + x] = 0.0;
            }
        }
    }
    assert_eq!(got.to_f64_vec(), want);
}

#[test]
fn damaged_chunks_are_one_line_errors() {
    let dir = TempDir::new("zarr-damaged");
    // Truncated gzip chunk.
    let p = damaged(&dir, "v3_gzip_u16.zarr");
    let c = p.join("c/0/0/0");
    let b = std::fs::read(&c).unwrap();
    std::fs::write(&c, &b[..b.len() / 2]).unwrap();
    let e = err(&p);
    assert!(e.to_string().contains("chunk c/0/0/0"), "{e}");
    // Corrupt bytes inside a zstd chunk.
    let p = damaged(&dir, "v3_zstd_f32.zarr");
    let c = p.join("c/1/0/0");
    let mut b = std::fs::read(&c).unwrap();
    let mid = b.len() / 2;
    for x in &mut b[mid..mid + 8] {
        *x ^= 0x5a;
    }
    std::fs::write(&c, &b).unwrap();
    assert_eq!(err(&p).kind, ErrorKind::Corrupt);
    // A crc32c mismatch.
    let p = damaged(&dir, "v3_transpose_i16.zarr");
    let c = p.join("c/0/0");
    let mut b = std::fs::read(&c).unwrap();
    b[3] ^= 1;
    std::fs::write(&c, &b).unwrap();
    assert!(err(&p).to_string().contains("crc32c"));
    // A raw chunk of the wrong length.
    let p = damaged(&dir, "v2_raw_i32.zarr");
    let c = p.join("0.0.0");
    let b = std::fs::read(&c).unwrap();
    std::fs::write(&c, &b[..b.len() - 3]).unwrap();
    assert!(err(&p).to_string().contains("decodes to"));
    // A chunk file far larger than its chunk: refused unread.
    std::fs::write(&c, vec![7u8; 200 << 10]).unwrap();
    assert!(err(&p).to_string().contains("bytes stored for a chunk"));
    // A truncated shard (its index is at the end).
    let p = damaged(&dir, "v3_sharded_u32.zarr");
    let c = p.join("c/0/0/0");
    let b = std::fs::read(&c).unwrap();
    std::fs::write(&c, &b[..b.len() - 40]).unwrap();
    err(&p);
    // A shard index pointing past the shard's end: its crc32c says so first.
    let p = damaged(&dir, "v3_sharded_start.zarr");
    let c = p.join("c/0/0");
    let mut b = std::fs::read(&c).unwrap();
    b[0..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    std::fs::write(&c, &b).unwrap();
    assert!(err(&p).to_string().contains("crc32c"));
}

#[test]
fn damaged_metadata_is_one_line_errors() {
    let dir = TempDir::new("zarr-meta");
    // Not JSON.
    let p = damaged(&dir, "v3_gzip_u16.zarr");
    std::fs::write(p.join("zarr.json"), b"{\"zarr_format\": 3, \"shape\": [2,").unwrap();
    assert!(err(&p).to_string().contains("not valid JSON"));
    // Absurd chunk shapes: refused before anything is allocated.
    let p = damaged(&dir, "v3_zstd_f32.zarr");
    edit_json(&p.join("zarr.json"), |v| {
        v["chunk_grid"]["configuration"]["chunk_shape"] =
            serde_json::json!([1u64 << 40, 1u64 << 40, 1u64 << 40]);
    });
    assert_eq!(err(&p).kind, ErrorKind::TooLarge);
    let p = damaged(&dir, "v2_zlib_u8.zarr");
    edit_json(&p.join(".zarray"), |v| {
        v["chunks"] = serde_json::json!([1, 0, 8])
    });
    assert!(err(&p).to_string().contains("empty axis"));
    // A frame far larger than the store could hold: refused, not allocated.
    let p = damaged(&dir, "v2_raw_i32.zarr");
    edit_json(&p.join(".zarray"), |v| {
        v["shape"] = serde_json::json!([2, 40000, 40000]);
        v["chunks"] = serde_json::json!([1, 40000, 40000]);
    });
    let e = ZarrArray::open(&p.display().to_string())
        .and_then(|mut z| z.read_slab(0, 1))
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::TooLarge, "{e}");
    // A chunk that inflates beyond its declared size.
    let p = damaged(&dir, "v2_zlib_u8.zarr");
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut enc, &vec![0u8; 10 << 20]).unwrap();
    std::fs::write(p.join("0.0.0"), enc.finish().unwrap()).unwrap();
    assert!(err(&p).to_string().contains("expands beyond"));
    // Codecs and dtypes we do not decode, by name.
    let p = damaged(&dir, "v3_gzip_u16.zarr");
    let doc = std::fs::read_to_string(p.join("zarr.json")).unwrap();
    std::fs::write(p.join("zarr.json"), doc.replace("\"gzip\"", "\"bz2\"")).unwrap();
    let e = err(&p);
    assert_eq!(e.kind, ErrorKind::Unsupported);
    assert!(e.to_string().contains("bz2"), "{e}");
    // Damaged blosc: a header declaring more than the chunk, a cut stream.
    let p = damaged(&dir, "blosc_v2_lz4_u16.zarr");
    let c = p.join("0.0.0");
    let mut b = std::fs::read(&c).unwrap();
    b[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    std::fs::write(&c, &b).unwrap();
    assert!(err(&p).to_string().contains("blosc"));
    let p = damaged(&dir, "blosc_v2_blosclz_f32.zarr");
    let c = p.join("0.0.0");
    let b = std::fs::read(&c).unwrap();
    std::fs::write(&c, &b[..b.len() * 2 / 3]).unwrap();
    err(&p);
    let p = damaged(&dir, "v3_transpose_i16.zarr");
    edit_json(&p.join("zarr.json"), |v| {
        v["data_type"] = serde_json::json!("complex64")
    });
    assert!(err(&p).to_string().contains("complex64"));
    // Not a store at all; a group without multiscales names its members.
    let empty = dir.path("empty.zarr");
    std::fs::create_dir_all(&empty).unwrap();
    assert!(
        err(&empty)
            .to_string()
            .contains("not a Zarr array or group")
    );
    let e = err(&fixture("zarr/v3_dtypes.zarr"));
    assert!(e.to_string().contains("int8"), "{e}");
    // Paths that leave the store.
    let e = ZarrArray::open(&format!("{}::../v2_zlib_u8.zarr", store("v3_dtypes.zarr")));
    assert!(e.is_err());
}

/// Seeded mutations of every metadata document and chunk: never a panic.
#[test]
fn mutated_stores_never_panic() {
    let dir = TempDir::new("zarr-mutate");
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for name in [
        "v3_sharded_u32.zarr",
        "v3_transpose_i16.zarr",
        "v2_zstd_f64.zarr",
        "blosc_v2_blosclz_f32.zarr",
        "blosc_v2_zlib_bitshuffle_i32.zarr",
    ] {
        for round in 0..40 {
            let p = dir.path(&format!("{round}_{name}"));
            copy_dir(&fixture(&format!("zarr/{name}")), &p);
            let files: Vec<PathBuf> = walk(&p);
            let f = &files[next() as usize % files.len()];
            let mut b = std::fs::read(f).unwrap();
            for _ in 0..1 + next() % 4 {
                if b.is_empty() {
                    break;
                }
                let i = next() as usize % b.len();
                b[i] = next() as u8;
            }
            if next() % 3 == 0 {
                b.truncate(next() as usize % (b.len() + 1));
            }
            std::fs::write(f, &b).unwrap();
            let r = std::panic::catch_unwind(|| {
                ZarrArray::open(&p.display().to_string()).and_then(|mut z| z.read_all())
            });
            assert!(
                r.is_ok(),
                "{name} round {round}: panicked on {}",
                f.display()
            );
            std::fs::remove_dir_all(&p).unwrap();
        }
    }
}

fn walk(p: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(p).unwrap() {
        let q = e.unwrap().path();
        if q.is_dir() {
            out.extend(walk(&q));
        } else {
            out.push(q);
        }
    }
    out.sort();
    out
}

/// A store held in memory and read through the callback store (as the
/// page reads a picked folder): plane by plane, every fixture equals
/// zarr-python; a missing or broken zarr.json is one clear error.
#[test]
fn callback_store_planes_equal_zarr_python() {
    use gpuscope_io::zarr::CallbackStore;
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    fn mem_store(dir: &Path, reads: Arc<Mutex<usize>>) -> Box<CallbackStore> {
        let files: HashMap<String, Vec<u8>> = walk(dir)
            .into_iter()
            .map(|p| {
                let key = p
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                (key, std::fs::read(&p).unwrap())
            })
            .collect();
        let lens: Vec<(String, u64)> = files
            .iter()
            .map(|(k, v)| (k.clone(), v.len() as u64))
            .collect();
        let read = move |key: &str, off: u64, len: usize| {
            *reads.lock().unwrap() += len;
            let v = files.get(key).ok_or(format!("no {key}"))?;
            Ok(v[off as usize..off as usize + len].to_vec())
        };
        Box::new(CallbackStore::new(lens, Arc::new(read)))
    }
    for name in [
        "v3_gzip_u16",
        "v3_zstd_f32",
        "v3_sharded_u32",
        "v2_zstd_f64",
        "ome_v3",
        "ome_v2",
        "blosc_v3",
        "blosc_v2_lz4_u16",
    ] {
        let dir = PathBuf::from(store(&format!("{name}.zarr")));
        let want = expected(name);
        let reads = Arc::new(Mutex::new(0));
        let mut z = ZarrArray::open_store(mem_store(&dir, reads.clone()), "", name).unwrap();
        assert_eq!(z.shape(), &want.shape[..], "{name}");
        let n = want.len() / z.planes();
        let before = *reads.lock().unwrap();
        // Only the chunks a plane touches are read: where chunks are
        // shallower than the array, plane 0 reads less than the store.
        z.read_plane(0).unwrap();
        let stored: usize = walk(&dir)
            .iter()
            .map(|p| p.metadata().unwrap().len() as usize)
            .sum();
        if z.chunks()[0] < z.shape()[0] {
            assert!(
                *reads.lock().unwrap() < stored,
                "{name}: plane 0 read the whole store"
            );
        }
        for k in 0..z.planes() {
            let plane = z.read_plane(k).unwrap();
            assert_eq!(plane.shape, want.shape[want.ndim() - 2..], "{name}");
            let mut whole = want.clone();
            if whole.ndim() > 2 {
                whole.shape = vec![
                    z.planes(),
                    want.shape[want.ndim() - 2],
                    want.shape[want.ndim() - 1],
                ];
            }
            let mut got = plane.clone();
            if whole.ndim() > 2 {
                got.shape.insert(0, 1);
                assert!(
                    same(&got, &slice(&whole, k * n, (k + 1) * n)),
                    "{name}: plane {k}"
                );
            } else {
                assert!(same(&got, &whole), "{name}");
            }
        }
        assert!(
            *reads.lock().unwrap() > before,
            "{name}: planes read through the callback"
        );
        assert!(z.read_plane(z.planes()).is_err());
    }

    let tmp = TempDir::new("zarr_cb");
    let p = damaged(&tmp, "v3_gzip_u16.zarr");
    std::fs::write(p.join("zarr.json"), b"{ not json").unwrap();
    let e = ZarrArray::open_store(mem_store(&p, Arc::default()), "", "broken.zarr")
        .err()
        .unwrap();
    assert!(e.to_string().contains("not valid JSON"), "{e}");
    std::fs::remove_file(p.join("zarr.json")).unwrap();
    let e = ZarrArray::open_store(mem_store(&p, Arc::default()), "", "broken.zarr")
        .err()
        .unwrap();
    assert!(e.to_string().contains("holds no zarr.json"), "{e}");
}

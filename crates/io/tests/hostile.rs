//! Hostile files: links that lead out of the input's folder, special files
//! where data should be, unreadable virtual-dataset sources, flipped bytes
//! under a checksum, swapped temporary files. Every file is made here, by
//! `rust-hdf5` (HDF5) or by hand (Zarr), in a temporary folder:
//!
//! ```text
//! ROOT/in/   the input (what the user names)
//! ROOT/out/  a file the input must not reach
//! ```
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};

use common::TempDir;
use gpuscope_io::hdf5::Hdf5Stack;
use gpuscope_io::zarr::ZarrArray;
use gpuscope_io::{ArrayData, ReadOptions, read_with};
use rust_hdf5::{H5File, Selection};

const ALLOW: ReadOptions = ReadOptions {
    allow_links_outside: true,
    max_chunk_bytes: None,
};

/// ROOT/in and ROOT/out.
fn layout(tag: &str) -> (TempDir, PathBuf, PathBuf) {
    let root = TempDir::new(tag);
    let (i, o) = (root.path("in"), root.path("out"));
    std::fs::create_dir_all(&i).unwrap();
    std::fs::create_dir_all(&o).unwrap();
    (root, i, o)
}

/// A file with one dataset `/data` of 2 x 3 x 4 uint16 values from `base`.
fn data_file(path: &Path, base: u16) -> Vec<u16> {
    let v: Vec<u16> = (0..24).map(|i| base + i).collect();
    let f = H5File::create(path).unwrap();
    let ds = f
        .new_dataset::<u16>()
        .shape([2, 3, 4])
        .create("data")
        .unwrap();
    ds.write_raw(&v).unwrap();
    f.close().unwrap();
    v
}

/// A file whose `/data` is an external link to `target`::/data.
fn linking_file(path: &Path, target: &str) {
    let f = H5File::create(path).unwrap();
    f.root_group()
        .create_external_link("data", target, "/data")
        .unwrap();
    f.close().unwrap();
}

fn err(spec: &str, opts: &ReadOptions) -> String {
    match read_with(Path::new(spec), opts) {
        Ok(_) => panic!("{spec} was read"),
        Err(e) => e.to_string(),
    }
}

fn u16s(spec: &str, opts: &ReadOptions) -> Vec<u16> {
    match read_with(Path::new(spec), opts)
        .unwrap_or_else(|e| panic!("{spec}: {e}"))
        .array
        .data
    {
        ArrayData::U16(v) => v,
        other => panic!("{spec}: {:?}", other.dtype()),
    }
}

fn refused(msg: &str, link: &str) {
    for want in [link, "outside", "--allow-links-outside"] {
        assert!(msg.contains(want), "{want:?} not in: {msg}");
    }
}

#[test]
fn external_links_out_of_the_folder_are_refused() {
    let (_root, i, o) = layout("ext-out");
    let secret = data_file(&o.join("secret.h5"), 7000);
    let beside = data_file(&i.join("beside.h5"), 100);
    // Relative, through `..`; absolute; and inside (read).
    linking_file(&i.join("up.h5"), "../out/secret.h5");
    linking_file(&i.join("abs.h5"), &o.join("secret.h5").to_string_lossy());
    linking_file(&i.join("ok.h5"), "beside.h5");
    // A data file beside the master that is a symlink to one elsewhere.
    std::os::unix::fs::symlink(o.join("secret.h5"), i.join("sym.h5")).unwrap();
    linking_file(&i.join("via_symlink.h5"), "sym.h5");
    let spec = |n: &str| format!("{}::/data", i.join(n).display());
    for name in ["up.h5", "abs.h5", "via_symlink.h5"] {
        refused(
            &err(&spec(name), &ReadOptions::default()),
            "external link /data",
        );
        // Allowed, it reads the file the link names.
        assert_eq!(u16s(&spec(name), &ALLOW), secret, "{name}");
    }
    assert_eq!(u16s(&spec("ok.h5"), &ReadOptions::default()), beside);
    // Streaming opens check the same.
    let e = Hdf5Stack::open(&spec("up.h5")).err().unwrap().to_string();
    refused(&e, "external link /data");
}

#[test]
fn eiger_series_and_nexus_defaults_check_every_link() {
    let (_root, i, o) = layout("eiger-out");
    data_file(&o.join("secret.h5"), 7000);
    data_file(&i.join("d1.h5"), 0);
    let f = H5File::create(i.join("master.h5")).unwrap();
    let g = f
        .create_group("entry")
        .unwrap()
        .create_group("data")
        .unwrap();
    g.create_external_link("data_000001", "d1.h5", "/data")
        .unwrap();
    g.create_external_link("data_000002", "../out/secret.h5", "/data")
        .unwrap();
    f.close().unwrap();
    let master = i.join("master.h5").display().to_string();
    refused(
        &err(&master, &ReadOptions::default()),
        "/entry/data/data_000002",
    );
    let all = u16s(&master, &ALLOW);
    assert_eq!(all.len(), 48);
    // A soft link to the external one is followed to it.
    let f = H5File::create(i.join("soft.h5")).unwrap();
    let root = f.root_group();
    root.create_external_link("ext", "../out/secret.h5", "/data")
        .unwrap();
    root.create_soft_link("data", "/ext").unwrap();
    f.close().unwrap();
    let spec = format!("{}::/data", i.join("soft.h5").display());
    refused(&err(&spec, &ReadOptions::default()), "external link /ext");
}

/// A virtual dataset `/vds` of 2 x 3 x 4 uint16 over `source`::/data.
fn vds_file(path: &Path, source: &str) {
    vds_named(path, source, "vds");
}

fn vds_named(path: &Path, source: &str, name: &str) {
    let f = H5File::create(path).unwrap();
    f.new_dataset::<u16>()
        .shape([2, 3, 4])
        .virtual_mapping(Selection::All, source, "/data", Selection::All)
        .create(name)
        .unwrap();
    f.close().unwrap();
}

#[test]
fn virtual_sources_out_of_the_folder_or_unreadable_are_errors() {
    let (_root, i, o) = layout("vds");
    let secret = data_file(&o.join("secret.h5"), 7000);
    let beside = data_file(&i.join("src.h5"), 300);
    vds_file(&i.join("ok.h5"), "src.h5");
    vds_file(&i.join("out.h5"), "../out/secret.h5");
    vds_file(&i.join("missing.h5"), "absent.h5");
    std::fs::write(i.join("text.h5"), "root:x:0:0:root:/root:/bin/bash\n").unwrap();
    vds_file(&i.join("not_hdf5.h5"), "text.h5");
    make_fifo(&i.join("pipe.h5"));
    vds_file(&i.join("fifo.h5"), "pipe.h5");
    std::os::unix::fs::symlink("/dev/zero", i.join("zero.h5")).unwrap();
    vds_file(&i.join("dev.h5"), "zero.h5");
    let spec = |n: &str| format!("{}::/vds", i.join(n).display());
    let none = ReadOptions::default();
    assert_eq!(u16s(&spec("ok.h5"), &none), beside);
    refused(
        &err(&spec("out.h5"), &none),
        "source ../out/secret.h5::/data",
    );
    assert_eq!(u16s(&spec("out.h5"), &ALLOW), secret);
    for (name, why) in [
        ("missing.h5", "no such file"),
        ("not_hdf5.h5", "not an HDF5 file"),
        ("fifo.h5", "FIFO"),
        ("dev.h5", "device"),
    ] {
        let m = err(&spec(name), &none);
        assert!(m.contains(why), "{name}: {m}");
        assert!(!m.contains("root:x"), "{name}: {m}");
        // Never zeros, whatever the options.
        let m = err(&spec(name), &ALLOW);
        assert!(m.contains(why), "{name}: {m}");
    }
}

#[test]
fn external_raw_data_out_of_the_folder_is_refused() {
    let (_root, i, o) = layout("efl");
    std::fs::write(o.join("raw.bin"), [1u8; 48]).unwrap();
    let f = H5File::create(i.join("efl.h5")).unwrap();
    let target = o.join("raw.bin").display().to_string();
    // Created without writing: the raw file exists already.
    f.new_dataset::<u16>()
        .shape([24])
        .external(&[(&target, 0, 48)])
        .create("data")
        .unwrap();
    f.close().unwrap();
    let spec = format!("{}::/data", i.join("efl.h5").display());
    refused(
        &err(&spec, &ReadOptions::default()),
        "external raw-data file",
    );
    assert_eq!(u16s(&spec, &ALLOW), vec![0x0101; 24]);
}

fn make_fifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn special_files_are_refused_not_waited_on() {
    let (_root, i, _o) = layout("special");
    for name in ["a.npy", "a.h5", "a.tif", "a.cbf", "a.fits"] {
        make_fifo(&i.join(name));
        let m = err(&i.join(name).display().to_string(), &ALLOW);
        assert!(m.contains("FIFO"), "{name}: {m}");
    }
    std::os::unix::fs::symlink("/dev/zero", i.join("z.npy")).unwrap();
    let m = err(&i.join("z.npy").display().to_string(), &ALLOW);
    assert!(m.contains("device"), "{m}");
}

/// A v3 Zarr store of 2 x 4 uint8, chunks of 1 x 4, `bytes` then `codec`
/// (`None`: uncompressed); chunk files are written by the caller.
fn zarr_store(dir: &Path, codec: Option<&str>) {
    std::fs::create_dir_all(dir.join("c/0")).unwrap();
    std::fs::create_dir_all(dir.join("c/1")).unwrap();
    let extra = codec.map_or(String::new(), |c| format!(r#", {{"name": "{c}"}}"#));
    let meta = format!(
        r#"{{"zarr_format": 3, "node_type": "array", "shape": [2, 4], "data_type": "uint8",
        "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": [1, 4]}}}},
        "chunk_key_encoding": {{"name": "default"}}, "fill_value": 9,
        "codecs": [{{"name": "bytes"}}{extra}]}}"#
    );
    std::fs::write(dir.join("zarr.json"), meta).unwrap();
}

fn zarr_err(store: &Path, opts: &ReadOptions) -> String {
    match ZarrArray::open_with(&store.display().to_string(), opts).and_then(|mut z| z.read_all()) {
        Ok(a) => panic!("{} was read: {:?}", store.display(), a.data),
        Err(e) => e.to_string(),
    }
}

#[test]
fn zarr_symlinks_out_of_the_store_and_special_chunks_are_refused() {
    let (_root, i, o) = layout("zarr");
    std::fs::write(o.join("shadow"), b"root:x:0:0::/root").unwrap();
    let store = i.join("a.zarr");
    zarr_store(&store, None);
    std::fs::write(store.join("c/0/0"), [1u8, 2, 3, 4]).unwrap();
    std::os::unix::fs::symlink(o.join("shadow"), store.join("c/1/0")).unwrap();
    let m = zarr_err(&store, &ReadOptions::default());
    refused(&m, "c/1/0");
    assert!(!m.contains("root"), "{m}");
    // A FIFO and devices are errors even when links are allowed.
    std::fs::remove_file(store.join("c/1/0")).unwrap();
    make_fifo(&store.join("c/1/0"));
    let m = zarr_err(&store, &ALLOW);
    assert!(m.contains("FIFO") && m.contains("c/1/0"), "{m}");
    for dev in ["/dev/zero", "/dev/urandom"] {
        std::fs::remove_file(store.join("c/1/0")).unwrap();
        std::os::unix::fs::symlink(dev, store.join("c/1/0")).unwrap();
        let m = zarr_err(&store, &ALLOW);
        assert!(m.contains("device"), "{m}");
    }
    // A chunk folder that is a symlink to another store's.
    let other = o.join("b.zarr");
    zarr_store(&other, None);
    std::fs::write(other.join("c/1/0"), [5u8, 6, 7, 8]).unwrap();
    std::fs::remove_file(store.join("c/1/0")).unwrap();
    std::fs::remove_dir(store.join("c/1")).unwrap();
    std::os::unix::fs::symlink(other.join("c/1"), store.join("c/1")).unwrap();
    refused(&zarr_err(&store, &ReadOptions::default()), "c/1/0");
    let mut z = ZarrArray::open_with(&store.display().to_string(), &ALLOW).unwrap();
    assert_eq!(
        z.read_all().unwrap().data,
        ArrayData::U8(vec![1, 2, 3, 4, 5, 6, 7, 8])
    );
    // A missing chunk is still the fill value.
    std::fs::remove_file(store.join("c/1")).unwrap();
    let mut z = ZarrArray::open(&store.display().to_string()).unwrap();
    assert_eq!(
        z.read_all().unwrap().data,
        ArrayData::U8(vec![1, 2, 3, 4, 9, 9, 9, 9])
    );
}

#[test]
fn decoder_errors_do_not_quote_the_chunk() {
    let (_root, i, _o) = layout("zarr-leak");
    let store = i.join("z.zarr");
    zarr_store(&store, Some("zstd"));
    // "root" is 0x746f6f72 little-endian: a zstd decoder reads it as a
    // magic number and names it.
    std::fs::write(store.join("c/0/0"), b"root:x:0:0::/root").unwrap();
    let m = zarr_err(&store, &ReadOptions::default());
    for leak in ["1953460082", "746F6F72", "746f6f72", "root:"] {
        assert!(!m.contains(leak), "{leak} in: {m}");
    }
    assert!(m.contains("c/0/0") && m.contains("zstd"), "{m}");
}

/// `/data`, 4 x 8 uint16 in chunks of 2 x 8 under `pipeline`.
fn fletcher_file(path: &Path, filters: Vec<rust_hdf5::Filter>) -> Vec<u16> {
    let v: Vec<u16> = (0..32).map(|i| 0x4100 + i).collect();
    let f = H5File::create(path).unwrap();
    let ds = f
        .new_dataset::<u16>()
        .shape([4, 8])
        .chunk(&[2, 8])
        .filter_pipeline(rust_hdf5::FilterPipeline { filters })
        .create("data")
        .unwrap();
    ds.write_raw(&v).unwrap();
    f.close().unwrap();
    v
}

fn filter(id: u16, cd_values: Vec<u32>) -> rust_hdf5::Filter {
    rust_hdf5::Filter {
        id,
        flags: if id == 3 { 0 } else { 1 },
        cd_values,
    }
}

#[test]
fn fletcher32_checksums_are_verified() {
    let (_root, i, _o) = layout("fletcher");
    let pipelines = [
        ("plain", vec![filter(3, vec![])]),
        ("shuffle", vec![filter(2, vec![2]), filter(3, vec![])]),
        ("deflate", vec![filter(3, vec![]), filter(1, vec![4])]),
    ];
    for (name, filters) in pipelines {
        let path = i.join(format!("{name}.h5"));
        let v = fletcher_file(&path, filters);
        let spec = format!("{}::/data", path.display());
        assert_eq!(u16s(&spec, &ReadOptions::default()), v, "{name}");
        let clean = std::fs::read(&path).unwrap();
        // Flip one byte of the stored second chunk, found by its values
        // (plain or shuffled); the deflated one is only read back clean.
        let Some(at) = find_chunk_byte(&clean, name) else {
            assert_eq!(name, "deflate", "the stored chunk was not found");
            continue;
        };
        let mut bad = clean.clone();
        bad[at] ^= 0x01;
        std::fs::write(&path, &bad).unwrap();
        let m = err(&spec, &ReadOptions::default());
        assert!(
            m.contains("Fletcher-32") && m.contains("chunk [1, 0]"),
            "{name}: {m}"
        );
    }
}

/// A byte of the second chunk's stored data (values 0x4110..0x4120).
fn find_chunk_byte(file: &[u8], pipeline: &str) -> Option<usize> {
    let pattern: Vec<u8> = match pipeline {
        "plain" => (0x4110u16..0x4118).flat_map(|v| v.to_le_bytes()).collect(),
        // Shuffled: the low bytes first.
        "shuffle" => (0x10u8..0x20).collect(),
        _ => return None,
    };
    file.windows(pattern.len())
        .position(|w| w == pattern.as_slice())
        .map(|p| p + 3)
}

#[test]
fn a_swapped_temporary_file_is_not_published() {
    let dir = TempDir::new("swap");
    let out = dir.path("out.npy");
    let victim = dir.path("victim.txt");
    std::fs::write(&victim, "keep").unwrap();
    let pending = gpuscope_io::PendingOutput::create(&out).unwrap();
    let tmp = dir
        .entries()
        .into_iter()
        .find(|n| n.contains(gpuscope_io::TEMP_TAG))
        .map(|n| dir.path(&n))
        .unwrap();
    std::fs::rename(&tmp, dir.path("moved")).unwrap();
    std::os::unix::fs::symlink(&victim, &tmp).unwrap();
    let e = pending.commit(b"data").err().unwrap().to_string();
    assert!(e.contains("replaced"), "{e}");
    assert!(std::fs::symlink_metadata(&out).is_err(), "published");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    // The symlink at the temporary name is not ours: left where it is.
    assert!(std::fs::symlink_metadata(&tmp).is_ok());
}

#[test]
fn scratch_folders_are_private_and_removed() {
    use std::os::unix::fs::PermissionsExt;
    let base = TempDir::new("scratch");
    let path;
    {
        let s = gpuscope_io::ScratchDir::create(&base.0, "bench").unwrap();
        path = s.path().to_path_buf();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with(".bench") && name.contains(gpuscope_io::TEMP_TAG));
        std::fs::write(path.join("f.npy"), b"x").unwrap();
        let again = gpuscope_io::ScratchDir::create(&base.0, "bench").unwrap();
        assert_ne!(again.path(), path);
    }
    assert!(!path.exists());
    assert!(base.entries().is_empty(), "{:?}", base.entries());
}

/// Writes the HDF5 seeds of the fuzz corpus that cover links and declared
/// sizes into crates/fuzz/corpus/hdf5 (committed; rerun after changing
/// them): `cargo test -p gpuscope-io --test hostile -- --ignored`.
#[test]
#[ignore]
fn write_fuzz_seeds() {
    let out = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus/hdf5"));
    std::fs::create_dir_all(&out).unwrap();
    let put = |name: &str, make: &dyn Fn(&Path)| {
        let path = out.join(name);
        make(&path);
        assert!(std::fs::metadata(&path).unwrap().len() < 16384, "{name}");
    };
    // External links: up and out, absolute, a special file, the fuzz
    // target's own input (a loop).
    put("link_up.h5", &|p| linking_file(p, "../secret.h5"));
    put("link_abs.h5", &|p| linking_file(p, "/etc/passwd"));
    put("link_dev.h5", &|p| linking_file(p, "/dev/zero"));
    put("link_self.h5", &|p| linking_file(p, "input.h5"));
    // Virtual sources: outside, missing, a device, this file (whose /data
    // is the virtual dataset itself: a loop).
    put("vds_up.h5", &|p| vds_named(p, "../secret.h5", "data"));
    put("vds_missing.h5", &|p| vds_named(p, "absent.h5", "data"));
    put("vds_dev.h5", &|p| vds_named(p, "/dev/urandom", "data"));
    put("vds_self.h5", &|p| vds_named(p, ".", "data"));
    // External raw data elsewhere.
    put("efl_abs.h5", &|p| {
        let f = H5File::create(p).unwrap();
        f.new_dataset::<u16>()
            .shape([24])
            .external(&[("/etc/passwd", 0, 48)])
            .create("data")
            .unwrap();
        f.close().unwrap();
    });
    // A checksummed dataset.
    put("fletcher32.h5", &|p| {
        fletcher_file(p, vec![filter(2, vec![2]), filter(3, vec![])]);
    });
    // Declared sizes: 10^11 frames of 64 x 80, nothing written.
    put("declared_frames.h5", &|p| {
        declared_frames(p, 100_000_000_000)
    });
}

/// `/data` of `n` frames of 64 x 80 uint16, one chunk a frame, none written.
fn declared_frames(path: &Path, n: usize) {
    let f = H5File::create(path).unwrap();
    // Unlimited first axis: a chunk index grown as chunks are written (a
    // fixed one would be allocated for every declared chunk here).
    f.new_dataset::<u16>()
        .shape([n, 64, 80])
        .max_shape(&[None, Some(64), Some(80)])
        .chunk(&[1, 64, 80])
        .create("data")
        .unwrap();
    f.close().unwrap();
}

#[test]
fn declared_frame_counts_are_bounded_by_the_file() {
    let (_root, i, _o) = layout("declared");
    // `rust-hdf5` lists an index entry (24 bytes) for every declared chunk
    // of an extensible-array index, written or not: 10^11 frames would be
    // 2.4 TB. Refused when opened; a count a file could index reads.
    let h5 = i.join("frames.h5");
    declared_frames(&h5, 100_000_000_000);
    assert!(std::fs::metadata(&h5).unwrap().len() < 10_000);
    let e = Hdf5Stack::open(&format!("{}::/data", h5.display()))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("declares 100000000000 chunks"), "{e}");
    declared_frames(&h5, 1000);
    let mut s = Hdf5Stack::open(&format!("{}::/data", h5.display())).unwrap();
    for z in [0, 999] {
        let a = s.read_slab(z, 1).unwrap();
        assert_eq!(a.data, ArrayData::U16(vec![0; 64 * 80]));
    }
    // Zarr keeps nothing per chunk it has not read: 10^12 declared frames
    // read as the fill value, first and last.
    let store = i.join("frames.zarr");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::write(
        store.join("zarr.json"),
        r#"{"zarr_format": 3, "node_type": "array", "shape": [1000000000000, 64, 80],
        "data_type": "uint16", "fill_value": 3,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1, 64, 80]}},
        "chunk_key_encoding": {"name": "default"}, "codecs": [{"name": "bytes"}]}"#,
    )
    .unwrap();
    let mut z = ZarrArray::open(&store.display().to_string()).unwrap();
    for k in [0, 999_999_999_999] {
        let a = z.read_slab(k, 1).unwrap();
        assert_eq!(a.data, ArrayData::U16(vec![3; 64 * 80]));
    }
}

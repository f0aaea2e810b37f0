//! The byte-range reader (the page's) against the native reader on the
//! committed fixtures: the same datasets, frames and errors.

use super::*;
use crate::hdf5::Hdf5Stack;

fn dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hdf5")
}

fn source(name: &str) -> Source {
    let bytes = std::fs::read(dir().join(name)).unwrap();
    Source::from_bytes(name, bytes)
}

fn sources(names: &[&str]) -> Vec<Source> {
    names.iter().map(|n| source(n)).collect()
}

/// Every frame of the byte reader's series, joined, equals the native
/// reader's whole dataset of the same name.
fn same_as_native(files: &[&str], path: Option<&str>) -> Vec<usize> {
    let h = H5Bytes::open(&sources(files)).unwrap();
    let series = h.series(path).unwrap();
    let spec = match path {
        Some(p) => format!("{}::{p}", dir().join(files[0]).display()),
        None => dir().join(files[0]).display().to_string(),
    };
    let mut native = Hdf5Stack::open(&spec).unwrap();
    assert_eq!(series.shape(), native.shape(), "{spec}");
    assert_eq!(series.dtype(), native.dtype(), "{spec}");
    assert_eq!(series.dataset_paths(), native.dataset_paths(), "{spec}");
    for z in 0..series.frames() {
        let got = series.frame(z).unwrap();
        let want = if series.shape().len() >= 3 {
            native.read_slab(z, 1).unwrap()
        } else {
            native.read_all().unwrap()
        };
        assert_eq!(got.data, want.data, "{spec} frame {z}");
    }
    series.shape().to_vec()
}

#[test]
fn eiger_master_with_its_data_files_equals_native() {
    let shape = same_as_native(
        &[
            "eiger_master.h5",
            "eiger_data_000001.h5",
            "eiger_data_000002.h5",
        ],
        None,
    );
    assert_eq!(shape.len(), 3);
    assert!(shape[0] > 1);
}

#[test]
fn lz4_deflate_nxtomo_equal_native() {
    same_as_native(&["lz4.h5"], Some("/frames"));
    same_as_native(&["deflate.h5"], Some("/scan/volume"));
    same_as_native(&["deflate.h5"], Some("/scan/plane"));
    same_as_native(&["nxtomo.nxs"], None);
}

#[test]
fn every_numeric_dataset_of_dtypes_equals_native() {
    let h = H5Bytes::open(&sources(&["dtypes.h5"])).unwrap();
    let mut n = 0;
    for node in h.tree().unwrap() {
        if node.dtype.is_some() {
            same_as_native(&["dtypes.h5"], Some(&node.path));
            n += 1;
        }
    }
    assert!(n >= 10, "only {n} datasets compared");
}

#[test]
fn the_tree_lists_the_eiger_groups() {
    let h = H5Bytes::open(&sources(&[
        "eiger_master.h5",
        "eiger_data_000001.h5",
        "eiger_data_000002.h5",
    ]))
    .unwrap();
    let tree = h.tree().unwrap();
    let paths: Vec<&str> = tree.iter().map(|n| n.path.as_str()).collect();
    assert!(paths.contains(&"/entry/data/data_000001"), "{paths:?}");
    assert!(
        paths.contains(&"/entry/instrument/detector/detectorSpecific/pixel_mask"),
        "{paths:?}"
    );
}

#[test]
fn a_missing_data_file_is_named() {
    let h = H5Bytes::open(&sources(&["eiger_master.h5", "eiger_data_000001.h5"])).unwrap();
    let e = h.series(None).err().unwrap();
    let text = e.to_string();
    assert!(text.contains("eiger_data_000002.h5"), "{text}");
    assert!(text.contains("pick the Eiger data files"), "{text}");
}

#[test]
fn truncated_files_are_errors() {
    for name in ["eiger_master.h5", "lz4.h5", "deflate.h5", "nxtomo.nxs"] {
        let bytes = std::fs::read(dir().join(name)).unwrap();
        // (The last bytes of some fixtures are not needed to read them.)
        for cut in [0, 7, 100, 600, bytes.len() / 3, bytes.len() / 2] {
            let src = Source::from_bytes(name, bytes[..cut].to_vec());
            let path = (name == "lz4.h5").then_some("/frames");
            let r = H5Bytes::open(std::slice::from_ref(&src))
                .and_then(|h| h.series(path))
                .and_then(|s| (0..s.frames()).try_for_each(|z| s.frame(z).map(|_| ())));
            assert!(r.is_err(), "{name} cut at {cut} read without error");
        }
    }
}

#[test]
fn damaged_files_give_errors_not_panics() {
    for name in [
        "broken_filter.h5",
        "huge_chunk.h5",
        "external_cycle.h5",
        "soft_cycle.h5",
        "blosc.h5",
    ] {
        let r = H5Bytes::open(&sources(&[name]))
            .and_then(|h| h.series(None))
            .and_then(|s| (0..s.frames()).try_for_each(|z| s.frame(z).map(|_| ())));
        assert!(r.is_err(), "{name} read without error");
    }
}

/// A frame of a large chunked file is read without reading the file: the
/// page's promise for files larger than the tab's memory.
#[test]
fn one_frame_reads_a_small_part_of_a_large_file() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let dir = std::env::temp_dir().join(format!("gpuscope-h5bytes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("big.h5");
    let (frames, h, w) = (64usize, 256usize, 256usize);
    let data: Vec<u32> = (0..frames * h * w)
        .map(|i| (i as u32).wrapping_mul(2654435761) >> 8)
        .collect();
    {
        let f = rust_hdf5::H5File::create(&path).unwrap();
        let ds = f
            .new_dataset::<u32>()
            .shape([frames, h, w])
            .chunk(&[1, h, w])
            .create("stack")
            .unwrap();
        ds.write_raw(&data).unwrap();
        f.close().unwrap();
    }
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let len = bytes.len() as u64;
    let read = Arc::new(AtomicU64::new(0));
    let counted = read.clone();
    let whole = Source::from_bytes("big.h5", bytes);
    let src = Source {
        name: "big.h5".into(),
        len,
        read: Arc::new(move |offset, n| {
            counted.fetch_add(n as u64, Ordering::Relaxed);
            (whole.read)(offset, n)
        }),
    };
    let h5 = H5Bytes::open(&[src]).unwrap();
    let s = h5.series(Some("/stack")).unwrap();
    assert_eq!(s.shape(), [frames, h, w]);
    let z = 37;
    let got = s.frame(z).unwrap();
    assert_eq!(
        got.data,
        ArrayData::U32(data[z * h * w..(z + 1) * h * w].to_vec())
    );
    let used = read.load(Ordering::Relaxed);
    eprintln!("one frame: {used} of {len} bytes read");
    // One frame is 1/64 of the file; allow the metadata and a few cache blocks.
    assert!(used < len / 8, "read {used} bytes of {len} for one frame");
}

#[test]
fn a_virtual_dataset_is_refused_by_name() {
    let h = H5Bytes::open(&sources(&["vds.h5", "vds_source.h5"])).unwrap();
    let e = h
        .series(Some("/stack"))
        .and_then(|s| s.frame(0))
        .err()
        .unwrap();
    assert!(e.to_string().contains("virtual"), "{e}");
    // Listing its group fails the same way (the crate cannot classify the
    // member), which is the message the page shows.
    let e = h.tree().err().unwrap();
    assert!(
        e.to_string()
            .contains("virtual dataset, which the page does not read"),
        "{e}"
    );
}

#[test]
fn fletcher32_mismatch_is_an_error_in_the_page_too() {
    use rust_hdf5::format::messages::filter::{Filter, FilterPipeline};
    let dir = std::env::temp_dir().join(format!("gpuscope-h5bytes-f32-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("f.h5");
    let v: Vec<u16> = (0..32).map(|i| 0x4100 + i).collect();
    {
        let f = rust_hdf5::H5File::create(&path).unwrap();
        let fletcher = Filter {
            id: 3,
            flags: 0,
            cd_values: vec![],
        };
        let ds = f
            .new_dataset::<u16>()
            .shape([4, 8])
            .chunk(&[2, 8])
            .filter_pipeline(FilterPipeline {
                filters: vec![fletcher],
            })
            .create("data")
            .unwrap();
        ds.write_raw(&v).unwrap();
        f.close().unwrap();
    }
    let mut bytes = std::fs::read(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let clean = H5Bytes::open(&[Source::from_bytes("f.h5", bytes.clone())]).unwrap();
    let a = clean.series(Some("/data")).unwrap().frame(0).unwrap();
    assert_eq!(a.data, ArrayData::U16(v));
    // One byte of the stored values of the second chunk (0x4110...).
    let pattern: Vec<u8> = (0x4110u16..0x4118).flat_map(|x| x.to_le_bytes()).collect();
    let at = bytes
        .windows(pattern.len())
        .position(|w| w == pattern.as_slice())
        .unwrap();
    bytes[at + 3] ^= 1;
    let bad = H5Bytes::open(&[Source::from_bytes("f.h5", bytes)]).unwrap();
    let e = bad
        .series(Some("/data"))
        .and_then(|s| s.frame(0))
        .err()
        .unwrap();
    assert!(e.to_string().to_lowercase().contains("checksum"), "{e}");
}

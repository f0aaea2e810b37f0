//! HDF5/NeXus reading: every fixture of tests/fixtures/make_hdf5.py equals
//! what h5py wrote (the .npy beside it), the Eiger frames equal the CBF
//! frames they were cut from, and damaged files are one-line errors.

mod common;

use common::{TempDir, fixture, same, shared_data};
use gpuscope_io::hdf5::Hdf5Stack;
use gpuscope_io::{Array, ArrayData, DType, ErrorKind, Format, IoError, read};
use std::path::{Path, PathBuf};

fn h5(name: &str) -> String {
    fixture(&format!("hdf5/{name}")).display().to_string()
}

fn expected(name: &str) -> Array {
    read(&fixture(&format!("hdf5/{name}.npy"))).unwrap().array
}

fn read_whole(spec: &str) -> Array {
    let img = read(Path::new(spec)).unwrap_or_else(|e| panic!("{spec}: {e}"));
    assert_eq!(img.format, Format::Hdf5);
    img.array
}

fn err(spec: &str) -> IoError {
    let e = match Hdf5Stack::open(spec).and_then(|mut s| s.read_all()) {
        Ok(s) => panic!("{spec}: expected an error, read {:?}", s.shape),
        Err(e) => e,
    };
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "{spec}: not one line: {msg}");
    assert!(!msg.contains("panicked"), "{spec}: {msg}");
    e
}

/// Frame by frame equals whole.
fn frames_equal_whole(spec: &str, whole: &Array) {
    let mut s = Hdf5Stack::open(spec).unwrap();
    let nz = whole.shape[0];
    let all = whole.to_f64_vec();
    let n = all.len() / nz;
    for z in 0..nz {
        let f = s.read_slab(z, 1).unwrap();
        assert_eq!(f.shape[1..], whole.shape[1..]);
        assert_eq!(f.dtype(), whole.dtype());
        assert_eq!(f.to_f64_vec(), all[z * n..(z + 1) * n], "{spec}: frame {z}");
    }
    // Slabs across part boundaries (Eiger: 3 frames a data file).
    if nz >= 4 {
        let f = s.read_slab(1, nz - 2).unwrap();
        assert_eq!(f.to_f64_vec(), all[n..(nz - 1) * n]);
    }
}

#[test]
fn eiger_master_reads_the_linked_series() {
    let spec = h5("eiger_master.h5");
    let a = read_whole(&spec);
    let want = expected("eiger_data");
    assert!(same(&a, &want), "eiger series differs from h5py's");
    assert_eq!(a.shape, vec![6, 160, 192]);
    assert_eq!(a.dtype(), DType::U32);
    frames_equal_whole(&spec, &want);
    let s = Hdf5Stack::open(&spec).unwrap();
    assert_eq!(
        s.dataset_paths(),
        ["/entry/data/data_000001", "/entry/data/data_000002"]
    );
    assert_eq!(s.filters(), ["bitshuffle-lz4 (32008)"]);
    assert_eq!(s.chunks(), Some(&[1, 160, 192][..]));
    // One link named alone is its data file's three frames.
    let one = read_whole(&format!("{spec}::/entry/data/data_000002"));
    assert_eq!(one.shape, vec![3, 160, 192]);
    assert_eq!(one.to_f64_vec(), want.to_f64_vec()[3 * 160 * 192..]);
}

/// The direct chunk read: an Eiger series hands out every frame as its
/// stored chunk (bitshuffle-LZ4: the header declares the frame's bytes);
/// a deflate dataset does not.
#[test]
fn eiger_frames_as_their_stored_chunks() {
    let mut s = Hdf5Stack::open(&h5("eiger_master.h5")).unwrap();
    assert!(s.frames_are_bslz4_chunks());
    let frame_bytes = (160 * 192 * 4) as u64;
    for z in 0..6 {
        let c = s.read_frame_chunk(z).unwrap().expect("a filtered chunk");
        assert!(
            c.len() < frame_bytes as usize / 2,
            "frame {z}: {} bytes",
            c.len()
        );
        assert_eq!(u64::from_be_bytes(c[..8].try_into().unwrap()), frame_bytes);
        assert_eq!(u32::from_be_bytes(c[8..12].try_into().unwrap()), 8192);
    }
    let e = s.read_frame_chunk(6).unwrap_err().to_string();
    assert!(e.contains("frame 6"), "{e}");
    let mut d = Hdf5Stack::open(&format!("{}::/scan/volume", h5("deflate.h5"))).unwrap();
    assert!(!d.frames_are_bslz4_chunks());
    assert!(d.read_frame_chunk(0).is_err());
}

#[test]
fn eiger_frames_are_the_cbf_windows() {
    let want = expected("eiger_data");
    let all = want.to_f64_vec();
    let list = std::fs::read_to_string(fixture("hdf5/eiger_windows.txt")).unwrap();
    let mut last: Option<(String, Vec<f64>, usize)> = None;
    for (z, line) in list.lines().enumerate() {
        let w: Vec<&str> = line.split(' ').collect();
        let (r0, c0): (usize, usize) = (w[1].parse().unwrap(), w[2].parse().unwrap());
        if last.as_ref().is_none_or(|(n, _, _)| n != w[0]) {
            let img = read(&shared_data(&format!("diffraction/{}", w[0]))).unwrap();
            last = Some((w[0].to_string(), img.array.to_f64_vec(), img.array.shape[1]));
        }
        let (_, cbf, width) = last.as_ref().unwrap();
        for r in 0..160 {
            for c in 0..192 {
                let v = cbf[(r0 + r) * width + c0 + c];
                // Negative CBF counts (gaps) are 2^32 - 1 in Eiger files.
                let v = if v < 0.0 { 4294967295.0 } else { v };
                assert_eq!(all[z * 160 * 192 + r * 192 + c], v, "frame {z} ({r}, {c})");
            }
        }
    }
}

#[test]
fn nexus_detector_metadata() {
    let s = Hdf5Stack::open(&h5("eiger_master.h5")).unwrap();
    let d = s.detector().unwrap();
    let field = |k: &str| {
        d.fields
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {k} in {:?}", d.fields))
    };
    // The I03 CBF header: Beam_xy (1229.30, 1200.48), 0.29147 m, 0.97625 A.
    assert_eq!(field("beam_center_x"), "1229.3 pixel");
    assert_eq!(field("beam_center_y"), "1200.48 pixel");
    assert_eq!(field("detector_distance"), "0.29147 m");
    assert_eq!(field("incident_wavelength"), "0.97625 angstrom");
    assert_eq!(d.count_cutoff, Some(300.0));
    let mask = d.pixel_mask.as_ref().unwrap();
    assert!(same(mask, &expected("eiger_pixel_mask")));
    assert!(mask.to_f64_vec().contains(&8.0));
    assert_eq!(d.image_key, None);
}

#[test]
fn lz4_deflate_shuffle_and_virtual_datasets() {
    let a = read_whole(&format!("{}::/frames", h5("lz4.h5")));
    assert!(same(&a, &expected("lz4")));
    assert_eq!(a.dtype(), DType::I32);
    frames_equal_whole(&format!("{}::frames", h5("lz4.h5")), &a);
    let d = read_whole(&format!("{}::/scan/volume", h5("deflate.h5")));
    assert!(same(&d, &expected("deflate")));
    frames_equal_whole(&format!("{}::/scan/volume", h5("deflate.h5")), &d);
    let s = Hdf5Stack::open(&format!("{}::/scan/volume", h5("deflate.h5"))).unwrap();
    assert_eq!(s.filters(), ["shuffle (2)", "deflate (1)"]);
    let p = read_whole(&format!("{}::/scan/plane", h5("deflate.h5")));
    assert!(same(&p, &expected("deflate_plane")));
    let v = read_whole(&format!("{}::/stack", h5("vds.h5")));
    assert!(same(&v, &expected("vds")));
    frames_equal_whole(&format!("{}::/stack", h5("vds.h5")), &v);
}

#[test]
fn every_numeric_dtype_in_both_byte_orders() {
    let mut n = 0;
    for be in ["", "be_"] {
        for t in [
            "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float32",
            "float64",
        ] {
            if be == "be_" && t.ends_with('8') && !t.contains("64") {
                continue;
            }
            let want = expected(&format!("dtypes_{be}{t}"));
            assert_eq!(want.dtype(), DType::from_name(t).unwrap());
            for layout in ["contiguous", "chunked"] {
                let spec = format!("{}::/{layout}/{be}{t}", h5("dtypes.h5"));
                let a = read_whole(&spec);
                assert!(same(&a, &want), "{spec}");
                frames_equal_whole(&spec, &want);
                n += 1;
            }
        }
    }
    assert_eq!(n, 36);
    // h5py's bool: an int8 enum of FALSE and TRUE.
    let want = expected("dtypes_bool");
    assert_eq!(want.dtype(), DType::Bool);
    for layout in ["contiguous", "chunked"] {
        let a = read_whole(&format!("{}::/{layout}/bool", h5("dtypes.h5")));
        assert!(same(&a, &want), "{layout} bool");
    }
    let e = err(&format!("{}::/text", h5("dtypes.h5")));
    assert_eq!(e.kind, ErrorKind::Unsupported, "{e}");
    let e = err(&format!("{}::/compound", h5("dtypes.h5")));
    assert_eq!(e.kind, ErrorKind::Unsupported, "{e}");
}

#[test]
fn nxtomo_default_and_image_key() {
    let spec = h5("nxtomo.nxs");
    let a = read_whole(&spec);
    assert!(same(&a, &expected("nxtomo")));
    let s = Hdf5Stack::open(&spec).unwrap();
    assert_eq!(s.dataset_paths(), ["/entry/data/data"]);
    let d = s.detector().unwrap();
    let keys = expected("nxtomo_image_key").to_f64_vec();
    let got: Vec<f64> = d.image_key.unwrap().iter().map(|&k| k as f64).collect();
    assert_eq!(got, keys);
    assert!(
        d.fields
            .iter()
            .any(|(k, v)| k == "image_key" && v == "4 projections, 3 flats, 2 darks, 0 invalid"),
        "{:?}",
        d.fields
    );
    // A group named: its NeXus default.
    let g = read_whole(&format!("{spec}::/entry"));
    assert!(same(&g, &a));
    let g = read_whole(&format!("{spec}::/entry/instrument/detector/data"));
    assert!(same(&g, &a));
}

#[test]
fn names_and_missing_paths() {
    assert_eq!(
        gpuscope_io::format_from_name("a/b.nx5::/entry/data").unwrap(),
        Format::Hdf5
    );
    for ext in ["h5", "HDF5", "nxs", "nx5", "hdf"] {
        assert_eq!(
            gpuscope_io::format_from_name(&format!("x.{ext}")).unwrap(),
            Format::Hdf5
        );
    }
    let e = err(&format!("{}::/no/such", h5("lz4.h5")));
    assert!(e.to_string().starts_with("lz4.h5: "), "{e}");
    assert!(e.to_string().contains("/frames"), "lists the datasets: {e}");
    let e = err(&h5("lz4.h5"));
    assert!(e.to_string().contains("no default"), "{e}");
    let e = err("/nonexistent/x.h5");
    assert_eq!(e.kind, ErrorKind::Io);
}

/// Copies fixtures into a fresh directory.
fn copy(dir: &TempDir, names: &[&str]) -> Vec<PathBuf> {
    names
        .iter()
        .map(|n| {
            let to = dir.path(n);
            std::fs::copy(fixture(&format!("hdf5/{n}")), &to).unwrap();
            to
        })
        .collect()
}

#[test]
fn a_missing_data_file_is_named() {
    let dir = TempDir::new("h5-missing");
    let p = copy(&dir, &["eiger_master.h5", "eiger_data_000001.h5"]);
    let e = err(&p[0].display().to_string());
    let msg = e.to_string();
    assert!(msg.contains("eiger_data_000002.h5"), "{msg}");
    assert!(msg.starts_with("eiger_master.h5: "), "{msg}");
}

#[test]
fn truncated_files_are_errors() {
    let dir = TempDir::new("h5-trunc");
    for name in [
        "eiger_data_000001.h5",
        "deflate.h5",
        "nxtomo.nxs",
        "dtypes.h5",
    ] {
        let bytes = std::fs::read(fixture(&format!("hdf5/{name}"))).unwrap();
        for cut in [
            0,
            7,
            100,
            600,
            bytes.len() / 3,
            bytes.len() / 2,
            bytes.len() - 100,
        ] {
            let p = dir.path(name);
            std::fs::write(&p, &bytes[..cut]).unwrap();
            let spec = p.display().to_string();
            // Whatever part survives may open; reading everything must fail
            // or give the complete data (never panic).
            let r = std::panic::catch_unwind(|| {
                let mut s = Hdf5Stack::open(&spec)?;
                s.read_all()
            });
            match r {
                Err(_) => panic!("{name} cut at {cut}: panicked"),
                Ok(Err(e)) => assert!(!e.to_string().contains('\n')),
                Ok(Ok(_)) => {}
            }
        }
    }
    // The data file of frames cut in half cannot give its frames.
    let bytes = std::fs::read(fixture("hdf5/lz4.h5")).unwrap();
    let p = dir.path("lz4.h5");
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    err(&format!("{}::/frames", p.display()));
}

#[test]
fn damaged_filters_chunks_and_links() {
    // A chunk that is not bitshuffle-LZ4: frame 0 reads, frame 1 fails.
    let spec = format!("{}::/data", h5("broken_filter.h5"));
    let mut s = Hdf5Stack::open(&spec).unwrap();
    assert_eq!(s.read_slab(0, 1).unwrap().to_f64_vec().len(), 160 * 192);
    let e = s.read_slab(1, 1).unwrap_err();
    assert!(e.to_string().starts_with("broken_filter.h5: "), "{e}");
    assert!(!e.to_string().contains('\n'));
    let e = err(&format!("{}::/data", h5("blosc.h5")));
    assert_eq!(e.kind, ErrorKind::Unsupported);
    assert!(e.to_string().contains("blosc (32001)"), "{e}");
    let e = err(&format!("{}::/data", h5("huge_chunk.h5")));
    assert_eq!(e.kind, ErrorKind::TooLarge, "{e}");
    let e = err(&format!("{}::/a", h5("soft_cycle.h5")));
    assert!(e.to_string().starts_with("soft_cycle.h5: "), "{e}");
    let e = err(&h5("external_cycle.h5"));
    assert!(e.to_string().starts_with("external_cycle.h5: "), "{e}");
}

#[test]
fn frames_outside_the_dataset_are_refused() {
    let mut s = Hdf5Stack::open(&format!("{}::/frames", h5("lz4.h5"))).unwrap();
    assert_eq!(s.shape(), [3, 160, 192]);
    assert_eq!(
        s.read_slab(2, 2).unwrap_err().kind,
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        s.read_slab(usize::MAX, 2).unwrap_err().kind,
        ErrorKind::InvalidArgument
    );
    let a = s.read_slab(1, 2).unwrap();
    assert!(matches!(a.data, ArrayData::I32(_)));
}

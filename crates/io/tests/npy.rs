mod common;
use common::*;
use gpuscope_io::npy::{NpyReader, NpySlabWriter, NpyWriter};
use gpuscope_io::{Array, DType, ErrorKind, Format, decode, encode, read, write};

const CODES: [(&str, DType); 11] = [
    ("b1", DType::Bool),
    ("u1", DType::U8),
    ("i1", DType::I8),
    ("u2", DType::U16),
    ("i2", DType::I16),
    ("u4", DType::U32),
    ("i4", DType::I32),
    ("u8", DType::U64),
    ("i8", DType::I64),
    ("f4", DType::F32),
    ("f8", DType::F64),
];

#[test]
fn reads_every_dtype_in_both_byte_orders() {
    for (code, dtype) in CODES {
        let tags: &[&str] = if dtype.size_bytes() == 1 {
            &["na"]
        } else {
            &["le", "be"]
        };
        for tag in tags {
            let name = format!("npy/{code}_{tag}.npy");
            let img = read(&fixture(&name)).unwrap();
            assert_eq!(img.format, Format::Npy);
            assert_eq!(img.array.dtype(), dtype, "{name}");
            assert_eq!(img.array, convention_array(vec![3, 4], dtype), "{name}");
        }
    }
}

#[test]
fn reads_fortran_order_as_c_order() {
    for (code, dtype) in [("f8", DType::F64), ("i2", DType::I16), ("u4", DType::U32)] {
        let img = read(&fixture(&format!("npy/{code}_fortran.npy"))).unwrap();
        assert_eq!(img.array, convention_array(vec![2, 3, 4], dtype), "{code}");
    }
}

#[test]
fn reads_header_versions_scalars_and_empty() {
    let a = read(&fixture("npy/f4_v2.npy")).unwrap().array;
    assert_eq!(a, convention_array(vec![5], DType::F32));
    let a = read(&fixture("npy/i4_v3.npy")).unwrap().array;
    assert_eq!(a, convention_array(vec![2, 2], DType::I32));
    let a = read(&fixture("npy/scalar_f8.npy")).unwrap().array;
    assert_eq!(a.shape, Vec::<usize>::new());
    assert_eq!(a.to_f64_vec(), vec![-50.0]);
    let a = read(&fixture("npy/empty_0x3_f4.npy")).unwrap().array;
    assert_eq!(a.shape, vec![0, 3]);
    assert!(a.is_empty());
}

#[test]
fn refuses_unsupported_dtypes_clearly() {
    for (file, word) in [
        ("complex.npy", "complex"),
        ("object.npy", "object"),
        ("structured.npy", "structured"),
        ("string.npy", "string"),
    ] {
        let e = read(&fixture(&format!("npy/{file}"))).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unsupported, "{e}");
        assert!(e.to_string().starts_with(&format!("{file}: ")), "{e}");
        assert!(e.to_string().contains(word), "{e}");
    }
}

#[test]
fn round_trips_every_dtype_and_shape() {
    for dtype in DType::ALL {
        for shape in [
            vec![],
            vec![7],
            vec![3, 5],
            vec![2, 3, 4],
            vec![0, 4],
            vec![2, 0, 3],
        ] {
            let a = convention_array(shape.clone(), dtype);
            let bytes = encode(Format::Npy, &a).unwrap();
            // numpy aligns the data start to 64 bytes.
            let h = gpuscope_io::npy::parse_header(&bytes).unwrap();
            assert_eq!(h.data_offset % 64, 0);
            let back = decode("x.npy", &bytes).unwrap().array;
            assert_eq!(back, a, "{dtype:?} {shape:?}");
        }
    }
}

#[test]
fn written_files_match_numpys_bytes() {
    // np.save of the same arrays produced these fixtures (v1, little-endian).
    for (code, dtype) in CODES {
        let tag = if dtype.size_bytes() == 1 { "na" } else { "le" };
        let want = read_bytes(&fixture(&format!("npy/{code}_{tag}.npy")));
        let got = encode(Format::Npy, &convention_array(vec![3, 4], dtype)).unwrap();
        assert_eq!(got, want, "{code}");
    }
}

#[test]
fn uses_v2_header_when_needed() {
    // 20 000 dimensions of 1 give a header over 64 KiB... but more than 64
    // dims are refused on reading, so check the writer with a long shape text.
    let shape = vec![1usize; 40];
    let h = gpuscope_io::npy::header_bytes(&shape, DType::U8);
    assert_eq!(h[6], 1);
    let a = Array::zeros(vec![1; 40], DType::U8).unwrap();
    assert_eq!(
        decode("a.npy", &encode(Format::Npy, &a).unwrap())
            .unwrap()
            .array,
        a
    );
}

#[test]
fn write_is_atomic_and_leaves_nothing_on_failure() {
    let dir = TempDir::new("npy-write");
    let a = convention_array(vec![4, 4], DType::F32);
    write(&dir.path("a.npy"), &a).unwrap();
    assert_eq!(read(&dir.path("a.npy")).unwrap().array, a);
    assert_eq!(dir.entries(), vec!["a.npy"]);
    // A PNG of a stack fails before anything is written.
    let stack = convention_array(vec![2, 3, 3], DType::F32);
    let e = write(&dir.path("s.png"), &stack).unwrap_err();
    assert!(e.to_string().starts_with("s.png: "), "{e}");
    assert!(e.to_string().contains("write .tif or .npy"), "{e}");
    assert_eq!(dir.entries(), vec!["a.npy"]);
    // A missing directory is an I/O error naming the file.
    let e = write(&dir.path("missing/b.npy"), &a).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Io);
    assert!(e.to_string().starts_with("b.npy: "), "{e}");
}

#[test]
fn streaming_reader_reads_only_requested_slabs() {
    let dir = TempDir::new("npy-stream");
    let a = convention_array(vec![6, 3, 4], DType::I16);
    write(&dir.path("s.npy"), &a).unwrap();
    let mut r = NpyReader::open(&dir.path("s.npy")).unwrap();
    assert_eq!(r.shape(), &[6, 3, 4]);
    assert_eq!(r.dtype(), DType::I16);
    let slab = r.read_slab(2, 3).unwrap();
    assert_eq!(slab.shape, vec![3, 3, 4]);
    let all = a.to_f64_vec();
    assert_eq!(slab.to_f64_vec(), all[24..60].to_vec());
    let e = r.read_slab(5, 2).unwrap_err();
    assert!(e.to_string().starts_with("s.npy: "), "{e}");
    // Big-endian files stream too.
    let mut r = NpyReader::open(&fixture("npy/f8_be.npy")).unwrap();
    assert_eq!(
        r.read_slab(1, 1).unwrap().to_f64_vec(),
        convention_array(vec![3, 4], DType::F64).to_f64_vec()[4..8]
    );
    // Fortran order is read in C order: slabs and raw slabs are the C-order
    // array's, in any order.
    for (code, dtype) in [("f8", DType::F64), ("i2", DType::I16), ("u4", DType::U32)] {
        let want = convention_array(vec![2, 3, 4], dtype);
        let mut r = NpyReader::open(&fixture(&format!("npy/{code}_fortran.npy"))).unwrap();
        assert_eq!(r.shape(), &[2, 3, 4]);
        let second = r.read_slab(1, 1).unwrap();
        assert_eq!(second.to_f64_vec(), want.to_f64_vec()[12..24], "{code}");
        assert_eq!(r.read_slab(0, 2).unwrap(), want, "{code}");
        let item = dtype.size_bytes();
        let mut raw = vec![0u8; 12 * item];
        r.read_slab_raw(1, 1, &mut raw).unwrap();
        // In the file's byte order (big-endian for i2).
        if !r.native_order() {
            raw.chunks_mut(item).for_each(|e| e.reverse());
        }
        assert_eq!(raw, encode(Format::Raw, &second).unwrap(), "{code}");
    }
}

#[test]
fn streaming_writer_writes_whole_file_or_nothing() {
    let dir = TempDir::new("npy-writer");
    let a = convention_array(vec![5, 2, 3], DType::F64);
    let mut w = NpyWriter::create(&dir.path("w.npy"), vec![5, 2, 3], DType::F64).unwrap();
    let v = a.to_f64_vec();
    w.write_slab(&Array::from_f64(vec![2, 2, 3], v[..12].to_vec()).unwrap())
        .unwrap();
    w.write_slab(&Array::from_f64(vec![3, 2, 3], v[12..].to_vec()).unwrap())
        .unwrap();
    assert!(
        w.write_slab(&Array::from_f64(vec![1, 2, 3], vec![0.0; 6]).unwrap())
            .is_err()
    );
    w.finish().unwrap();
    assert_eq!(read(&dir.path("w.npy")).unwrap().array, a);
    assert_eq!(dir.entries(), vec!["w.npy"]);

    // Incomplete: finish errors and leaves no file.
    let mut w = NpyWriter::create(&dir.path("part.npy"), vec![5, 2, 3], DType::F64).unwrap();
    w.write_slab(&Array::from_f64(vec![1, 2, 3], vec![1.0; 6]).unwrap())
        .unwrap();
    let e = w.finish().unwrap_err();
    assert!(e.to_string().starts_with("part.npy: only 1 of 5"), "{e}");
    // Wrong dtype or trailing shape is refused.
    let mut w = NpyWriter::create(&dir.path("bad.npy"), vec![2, 2], DType::U8).unwrap();
    assert!(
        w.write_slab(&Array::from_f64(vec![1, 2], vec![1.0; 2]).unwrap())
            .is_err()
    );
    assert!(
        w.write_slab(&Array::from_u8(vec![1, 3], vec![1; 3]).unwrap())
            .is_err()
    );
    drop(w);
    assert_eq!(dir.entries(), vec!["w.npy"]);
}

#[test]
fn slab_writer_writes_slabs_at_their_offsets_from_threads() {
    let dir = TempDir::new("npy-slab-writer");
    let a = convention_array(vec![7, 2, 3], DType::I16);
    let v = a.to_f64_vec();
    let slab = |z0: usize, z1: usize| {
        Array::from_f64(vec![z1 - z0, 2, 3], v[z0 * 6..z1 * 6].to_vec())
            .unwrap()
            .cast(DType::I16)
    };
    let w = NpySlabWriter::create(&dir.path("s.npy"), vec![7, 2, 3], DType::I16).unwrap();
    // Out of order, from two threads at once.
    std::thread::scope(|s| {
        s.spawn(|| w.write_at(4, &slab(4, 7)).unwrap());
        s.spawn(|| w.write_at(0, &slab(0, 4)).unwrap());
    });
    // Past the end, another dtype or trailing shape: refused.
    assert!(w.write_at(6, &slab(0, 2)).is_err());
    assert!(w.write_at(0, &slab(0, 1).cast(DType::U16)).is_err());
    assert!(
        w.write_at(
            0,
            &Array::from_f64(vec![1, 3, 2], vec![0.0; 6])
                .unwrap()
                .cast(DType::I16)
        )
        .is_err()
    );
    w.finish().unwrap();
    assert_eq!(read(&dir.path("s.npy")).unwrap().array, a);
    // Incomplete: finish errors and leaves no file.
    let w = NpySlabWriter::create(&dir.path("part.npy"), vec![7, 2, 3], DType::I16).unwrap();
    w.write_at(2, &slab(2, 5)).unwrap();
    let e = w.finish().unwrap_err();
    assert!(e.to_string().starts_with("part.npy: only 3 of 7"), "{e}");
    assert_eq!(dir.entries(), vec!["s.npy"]);
}

fn npy_with_header(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut h = dict.to_string();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    out
}

#[test]
fn damaged_headers_are_clear_errors() {
    // Shapes far beyond the data: refused before any allocation.
    let b = npy_with_header(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000, 1000000000), }",
        &[0; 64],
    );
    expect_err(
        "huge.npy",
        &b,
        "truncated: header declares 8000000000000000000 bytes",
    );
    let b = npy_with_header(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (100000000000, 100000000000), }",
        &[0; 64],
    );
    expect_err("overflow.npy", &b, "too many");
    let b = npy_with_header(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999999,), }",
        &[],
    );
    expect_err("big.npy", &b, "too large");
    let b = npy_with_header(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (-3,), }",
        &[],
    );
    expect_err("neg.npy", &b, "shape");
    let b = npy_with_header(
        "{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }",
        &[0; 2],
    );
    expect_err("half.npy", &b, "not supported");
    let b = npy_with_header("{'descr': '<f8', 'shape': (1,), }", &[0; 8]);
    expect_err("nofortran.npy", &b, "fortran_order");
    let b = npy_with_header(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (2,)",
        &[0; 16],
    );
    expect_err("unclosed.npy", &b, "dict");
    // Wrong magic and unknown versions.
    let mut b = read_bytes(&fixture("npy/f4_le.npy"));
    b[0] = b'X';
    expect_err("magic.npy", &b, "magic");
    let mut b = read_bytes(&fixture("npy/f4_le.npy"));
    b[6] = 9;
    expect_err("v9.npy", &b, "version 9");
    // Header length larger than the file.
    let mut b = read_bytes(&fixture("npy/f4_le.npy"));
    b[8] = 0xFF;
    b[9] = 0xFF;
    b.truncate(200);
    expect_err("hlen.npy", &b, "truncated");
}

#[test]
fn truncated_and_mutated_files_never_panic() {
    for f in [
        "f8_le.npy",
        "i2_be.npy",
        "u4_fortran.npy",
        "f4_v2.npy",
        "i4_v3.npy",
        "b1_na.npy",
    ] {
        let b = read_bytes(&fixture(&format!("npy/{f}")));
        truncations(f, &b, b.len(), &[9, 11, 50, 127, 128, 129]);
        fuzz(f, &b, 200, 0x5eed + b.len() as u64, 0..b.len());
        // Header region gets its own 200 mutations: that is where parsing happens.
        fuzz(f, &b, 200, 0xbeef, 0..128);
    }
}

mod common;
use common::*;
use gpuscope_io::tiff::{TiffStackReader, TiffStackWriter};
use gpuscope_io::{Array, DType, Format, decode, encode, read, write};

fn expected(stem: &str) -> Array {
    read(&fixture(&format!("tiff/{stem}.npy"))).unwrap().array
}

#[test]
fn reads_tifffile_and_pillow_fixtures() {
    for stem in [
        "u16_stack",
        "f32",
        "i16",
        "u8_zlib",
        "f64_stack_zlib",
        "u16_zlib_predictor",
        "rgb_u8",
        "u8_bigtiff",
        "i32_tiled",
        "u8_tiff_lzw",
        "u8_packbits",
    ] {
        let img = read(&fixture(&format!("tiff/{stem}.tif"))).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(img.format, Format::Tiff);
        let want = expected(stem);
        assert_eq!(img.array, want, "{stem}");
        let pages = if want.ndim() == 3 && stem.contains("stack") {
            want.shape[0]
        } else {
            1
        };
        assert_eq!(
            img.header_value("pages"),
            Some(pages.to_string().as_str()),
            "{stem}"
        );
    }
}

#[test]
fn reads_the_shared_multipage_tiff() {
    let img = read(&shared_data("images/multipage.tif")).unwrap();
    assert_eq!(img.header_value("pages"), Some("2"));
    assert_eq!(img.array.shape[0], 2);
    assert_eq!(img.array.ndim(), 3);
}

#[test]
fn separate_planes_are_refused_clearly() {
    let e = read(&fixture("tiff/planar_rgb.tif")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("planar_rgb.tif: TIFF with separate colour planes"),
        "{e}"
    );
}

#[test]
fn pages_of_different_shapes_are_refused() {
    let e = read(&fixture("tiff/mixed_shapes.tif")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("mixed_shapes.tif: TIFF page 1 has shape [5, 4]"),
        "{e}"
    );
}

#[test]
fn round_trips_every_dtype() {
    for dtype in DType::ALL {
        for shape in [vec![3, 5], vec![4, 2, 3]] {
            let a = convention_array(shape.clone(), dtype);
            let bytes = encode(Format::Tiff, &a).unwrap();
            let back = decode("t.tif", &bytes).unwrap().array;
            // bool is stored as uint8 0/1.
            let want = if dtype == DType::Bool {
                a.cast(DType::U8)
            } else {
                a
            };
            assert_eq!(back, want, "{dtype:?} {shape:?}");
        }
    }
    for (dtype, c) in [
        (DType::U8, 3),
        (DType::U8, 4),
        (DType::U16, 3),
        (DType::U16, 4),
    ] {
        let a = convention_array(vec![3, 5, c], dtype);
        assert_eq!(
            decode("c.tif", &encode(Format::Tiff, &a).unwrap())
                .unwrap()
                .array,
            a
        );
        let a = convention_array(vec![2, 3, 5, c], dtype);
        assert_eq!(
            decode("c.tif", &encode(Format::Tiff, &a).unwrap())
                .unwrap()
                .array,
            a
        );
    }
}

#[test]
fn refuses_unwritable_shapes() {
    for shape in [
        vec![5],
        vec![0, 3],
        vec![3, 0],
        vec![0, 2, 2],
        vec![2, 2, 2, 2],
    ] {
        let a = Array::zeros(shape.clone(), DType::F32).unwrap();
        let e = encode(Format::Tiff, &a).unwrap_err();
        assert!(e.to_string().contains("TIFF"), "{shape:?}: {e}");
    }
}

#[test]
fn stack_writer_and_reader() {
    let dir = TempDir::new("tiff-stack");
    let a = convention_array(vec![4, 6, 5], DType::F32);
    let v = a.to_f32_vec();
    let mut w = TiffStackWriter::create(&dir.path("s.tif"), 6, 5, DType::F32).unwrap();
    for p in 0..4 {
        w.write_page(&Array::from_f32(vec![6, 5], v[p * 30..(p + 1) * 30].to_vec()).unwrap())
            .unwrap();
    }
    // Wrong shape or dtype is refused and the writer carries on.
    assert!(
        w.write_page(&Array::zeros(vec![5, 5], DType::F32).unwrap())
            .is_err()
    );
    assert!(
        w.write_page(&Array::zeros(vec![6, 5], DType::U8).unwrap())
            .is_err()
    );
    assert!(
        !dir.entries().contains(&"s.tif".to_string()),
        "output must not appear before finish"
    );
    w.finish().unwrap();
    assert_eq!(dir.entries(), vec!["s.tif"]);
    assert_eq!(read(&dir.path("s.tif")).unwrap().array, a);

    let mut r = TiffStackReader::open(&dir.path("s.tif")).unwrap();
    assert_eq!(r.shape(), vec![4, 6, 5]);
    assert_eq!(r.dtype(), DType::F32);
    assert_eq!(r.read_page(2).unwrap().to_f32_vec(), v[60..90].to_vec());
    assert_eq!(r.read_page(0).unwrap().to_f32_vec(), v[..30].to_vec());
    let e = r.read_page(4).unwrap_err();
    assert!(e.to_string().starts_with("s.tif: page 4 requested"), "{e}");

    // BigTIFF variant.
    let mut w = TiffStackWriter::create_bigtiff(&dir.path("b.tif"), 2, 2, DType::U16).unwrap();
    w.write_page(&Array::from_u16(vec![2, 2], vec![1, 2, 3, 4]).unwrap())
        .unwrap();
    w.finish().unwrap();
    assert_eq!(
        read(&dir.path("b.tif")).unwrap().array.to_f64_vec(),
        vec![1.0, 2.0, 3.0, 4.0]
    );

    // No pages: error, no file.
    let w = TiffStackWriter::create(&dir.path("empty.tif"), 2, 2, DType::U8).unwrap();
    assert!(w.finish().is_err());
    let mut names = dir.entries();
    names.sort();
    assert_eq!(names, vec!["b.tif", "s.tif"]);
}

#[test]
fn write_and_read_by_path() {
    let dir = TempDir::new("tiff-path");
    let a = convention_array(vec![3, 4, 4], DType::U16);
    write(&dir.path("x.tiff"), &a).unwrap();
    assert_eq!(read(&dir.path("x.tiff")).unwrap().array, a);
}

/// A minimal little-endian TIFF with one uncompressed strip and the given size.
fn tiny_tiff(w: u32, h: u32, data_len: u32) -> Vec<u8> {
    let mut b = b"II*\x00".to_vec();
    b.extend_from_slice(&8u32.to_le_bytes());
    let entries: [(u16, u16, u32, u32); 8] = [
        (256, 4, 1, w),
        (257, 4, 1, h),
        (258, 3, 1, 8),
        (259, 3, 1, 1),
        (262, 3, 1, 1),
        (273, 4, 1, 8 + 2 + 8 * 12 + 4),
        (278, 4, 1, h),
        (279, 4, 1, data_len),
    ];
    b.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    for (tag, ty, count, value) in entries {
        b.extend_from_slice(&tag.to_le_bytes());
        b.extend_from_slice(&ty.to_le_bytes());
        b.extend_from_slice(&count.to_le_bytes());
        b.extend_from_slice(&value.to_le_bytes());
    }
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend(std::iter::repeat_n(7u8, data_len as usize));
    b
}

#[test]
fn absurd_dimensions_are_errors_not_oom() {
    assert!(decode("ok.tif", &tiny_tiff(4, 3, 12)).is_ok());
    let e = decode("huge.tif", &tiny_tiff(4_000_000_000, 4_000_000_000, 16)).unwrap_err();
    assert_good_error(&e, "huge.tif", "huge");
    let e = decode("wide.tif", &tiny_tiff(1 << 20, 1 << 16, 16)).unwrap_err();
    assert_good_error(&e, "wide.tif", "wide");
    let e = decode("zero.tif", &tiny_tiff(0, 5, 16)).unwrap_err();
    assert_good_error(&e, "zero.tif", "zero");
    expect_err("short.tif", &tiny_tiff(40, 30, 12), "");
}

#[test]
fn damaged_files_never_panic() {
    for stem in [
        "u16_stack",
        "u8_zlib",
        "rgb_u8",
        "u8_tiff_lzw",
        "u8_packbits",
        "i32_tiled",
        "u8_bigtiff",
    ] {
        let name = format!("{stem}.tif");
        let b = read_bytes(&fixture(&format!("tiff/{name}")));
        fuzz(&name, &b, 200, 0x71ff + b.len() as u64, 0..b.len());
        fuzz(&name, &b, 100, 0x1234, 0..64);
        truncations(&name, &b, b.len().min(64), &[]);
        let mut m = b.clone();
        m[0] = b'X';
        expect_err(&name, &m, "TIFF");
    }
    let b = read_bytes(&shared_data("images/multipage.tif"));
    fuzz("multipage.tif", &b, 200, 99, 0..b.len());
}

//! Headerless (.raw) arrays: round trips through the sidecar, foreign
//! files read with an offset and byte order, streamed slabs, and every way
//! a layout can disagree with the file.

mod common;
use common::*;
use gpuscope_io::npy::{NpyReader, NpySlabWriter, NpyWriter};
use gpuscope_io::raw::{self, RawLayout, read_sidecar, sidecar_path};
use gpuscope_io::{Array, ArrayData, DType, ErrorKind, Format, decode, read, read_raw, write};

fn sample(dtype: DType, shape: Vec<usize>) -> Array {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| ((i * 37) % 251) as f64 - 100.0).collect();
    Array::from_f64(shape, v).unwrap().cast(dtype)
}

#[test]
fn every_dtype_round_trips_through_the_sidecar() {
    let dir = TempDir::new("raw_round_trip");
    for dtype in [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::U16,
        DType::I16,
        DType::U32,
        DType::I32,
        DType::U64,
        DType::I64,
        DType::F32,
        DType::F64,
    ] {
        let a = sample(dtype, vec![3, 5, 7]);
        let path = dir.0.join(format!("{}.raw", dtype.name()));
        write(&path, &a).unwrap();
        // Headerless: exactly the samples.
        let len = std::fs::metadata(&path).unwrap().len();
        assert_eq!(
            len as usize,
            3 * 5 * 7 * dtype.size_bytes(),
            "{}",
            dtype.name()
        );
        assert_eq!(
            read_sidecar(&path).unwrap(),
            Some(RawLayout::new(vec![3, 5, 7], dtype))
        );
        let back = read(&path).unwrap();
        assert_eq!(back.format, Format::Raw);
        assert_eq!(back.array, a, "{}", dtype.name());
    }
}

#[test]
fn samples_match_what_numpy_tofile_writes() {
    // np.array([[1, 258], [-3, 65535]], '<i4').tofile(...): little-endian C order.
    let a = Array::from_i32(vec![2, 2], vec![1, 258, -3, 65535]).unwrap();
    let dir = TempDir::new("raw_tofile");
    let path = dir.0.join("a.raw");
    write(&path, &a).unwrap();
    let want: Vec<u8> = [1i32, 258, -3, 65535]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(std::fs::read(&path).unwrap(), want);
    let side = std::fs::read_to_string(sidecar_path(&path)).unwrap();
    assert!(side.contains("\"shape\": [2, 2]") && side.contains("\"dtype\": \"int32\""));
}

#[test]
fn a_foreign_header_and_big_endian_samples_read_with_offset_and_byte_order() {
    // A big-endian .npy is a raw file behind a header of known length.
    for (code, dtype) in [("u2", DType::U16), ("f8", DType::F64), ("i4", DType::I32)] {
        let file = fixture(&format!("npy/{code}_be.npy"));
        let want = read(&file).unwrap().array;
        let header = NpyReader::open(&file).unwrap().header().clone();
        assert!(header.big_endian);
        let layout = RawLayout {
            shape: want.shape.clone(),
            dtype,
            offset: header.data_offset as u64,
            big_endian: true,
        };
        // read_raw is by layout, whatever the extension.
        assert_eq!(read_raw(&file, &layout).unwrap().array, want, "{code}");
        let mut slabs = NpyReader::open_raw(&file, &layout).unwrap();
        assert_eq!(slabs.read_slab(0, want.shape[0]).unwrap(), want, "{code}");
        // The same bytes taken as little-endian are not the same values.
        let little = RawLayout {
            big_endian: false,
            ..layout
        };
        assert_ne!(read_raw(&file, &little).unwrap().array, want, "{code}");
    }
}

#[test]
fn a_layout_that_does_not_fit_the_file_is_refused() {
    let dir = TempDir::new("raw_mismatch");
    let path = dir.0.join("s.raw");
    std::fs::write(&path, vec![0u8; 2 * 4 * 4 * 2]).unwrap();
    let fits = RawLayout::new(vec![2, 4, 4], DType::U16);
    assert!(read_raw(&path, &fits).is_ok());
    for (layout, kind) in [
        (
            RawLayout::new(vec![3, 4, 4], DType::U16),
            ErrorKind::Truncated,
        ),
        (
            RawLayout::new(vec![2, 4, 4], DType::F32),
            ErrorKind::Truncated,
        ),
        (
            RawLayout::new(vec![2, 4, 3], DType::U16),
            ErrorKind::Corrupt,
        ),
        (RawLayout::new(vec![2, 4, 4], DType::U8), ErrorKind::Corrupt),
        (
            RawLayout {
                offset: 2,
                ..fits.clone()
            },
            ErrorKind::Truncated,
        ),
    ] {
        for e in [
            read_raw(&path, &layout).unwrap_err(),
            NpyReader::open_raw(&path, &layout).err().unwrap(),
        ] {
            assert_eq!(e.kind, kind, "{layout:?}: {e}");
            let text = e.to_string();
            assert!(
                text.starts_with("s.raw: ") && text.contains("needs") && text.contains("64"),
                "{text}"
            );
        }
    }
    // Absurd shapes are errors, not allocations.
    let huge = RawLayout::new(vec![usize::MAX / 2, 4], DType::F64);
    assert_eq!(
        read_raw(&path, &huge).unwrap_err().kind,
        ErrorKind::TooLarge
    );
    let none = RawLayout::new(vec![], DType::U8);
    assert!(read_raw(&path, &none).is_err());
}

#[test]
fn without_a_layout_a_raw_file_is_refused_with_what_to_add() {
    let dir = TempDir::new("raw_no_layout");
    let path = dir.0.join("bare.raw");
    std::fs::write(&path, [0u8; 16]).unwrap();
    let e = read(&path).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unsupported);
    let text = e.to_string();
    assert!(
        text.contains("bare.raw") && text.contains("--raw-shape"),
        "{text}"
    );
    assert_eq!(
        decode("x.raw", &[0u8; 4]).unwrap_err().kind,
        ErrorKind::Unsupported
    );
}

#[test]
fn damaged_sidecars_are_reported_not_guessed() {
    let dir = TempDir::new("raw_bad_sidecar");
    let path = dir.0.join("d.raw");
    std::fs::write(&path, [0u8; 8]).unwrap();
    for text in [
        "",
        "{",
        "[1, 2]",
        "{\"dtype\": \"uint8\"}",
        "{\"shape\": [8]}",
        "{\"shape\": [8], \"dtype\": \"uint12\"}",
        "{\"shape\": [-8], \"dtype\": \"uint8\"}",
        "{\"shape\": [8.5], \"dtype\": \"uint8\"}",
        "{\"shape\": [8], \"dtype\": \"uint8\", \"order\": \"F\"}",
        "{\"shape\": [8], \"dtype\": \"uint8\", \"byte_order\": \"middle\"}",
        "{\"shape\": [8], \"dtype\": \"uint8\", \"offset\": -1}",
        "{\"shape\": [], \"dtype\": \"uint8\"}",
    ] {
        std::fs::write(sidecar_path(&path), text).unwrap();
        let e = read(&path).unwrap_err();
        assert!(
            e.to_string().starts_with("d.raw.json: "),
            "{text:?} gave {e}"
        );
    }
    // Optional fields default to little-endian from byte 0.
    std::fs::write(
        sidecar_path(&path),
        "{\"shape\": [2, 4], \"dtype\": \"uint8\"}",
    )
    .unwrap();
    assert_eq!(read(&path).unwrap().array.shape, vec![2, 4]);
    let layout = RawLayout {
        shape: vec![4, 5],
        dtype: DType::F32,
        offset: 512,
        big_endian: true,
    };
    assert_eq!(RawLayout::from_json(&layout.to_json()).unwrap(), layout);
}

#[test]
fn streamed_writers_write_headerless_files_and_their_sidecars_only_when_complete() {
    let dir = TempDir::new("raw_stream");
    let a = sample(DType::U16, vec![6, 4, 3]);
    let slab = |z0: usize, nz: usize| {
        let ArrayData::U16(v) = &a.data else {
            unreachable!()
        };
        Array::new(
            vec![nz, 4, 3],
            ArrayData::U16(v[z0 * 12..(z0 + nz) * 12].to_vec()),
        )
        .unwrap()
    };

    let seq = dir.0.join("seq.raw");
    let mut w = NpyWriter::create_raw(&seq, vec![6, 4, 3], DType::U16).unwrap();
    w.write_slab(&slab(0, 4)).unwrap();
    w.write_slab(&slab(4, 2)).unwrap();
    w.finish().unwrap();
    assert_eq!(read(&seq).unwrap().array, a);

    let at = dir.0.join("at.raw");
    let w = NpySlabWriter::create_raw(&at, vec![6, 4, 3], DType::U16).unwrap();
    w.write_at(3, &slab(3, 3)).unwrap();
    w.write_at(0, &slab(0, 3)).unwrap();
    w.finish().unwrap();
    assert_eq!(read(&at).unwrap().array, a);
    let layout = read_sidecar(&at).unwrap().unwrap();
    let mut r = NpyReader::open_raw(&at, &layout).unwrap();
    assert_eq!(r.read_slab(2, 3).unwrap(), slab(2, 3));

    // Unfinished: neither the file nor a sidecar appears.
    let part = dir.0.join("part.raw");
    let mut w = NpyWriter::create_raw(&part, vec![6, 4, 3], DType::U16).unwrap();
    w.write_slab(&slab(0, 4)).unwrap();
    assert!(w.finish().is_err());
    let w = NpySlabWriter::create_raw(&part, vec![6, 4, 3], DType::U16).unwrap();
    w.write_at(0, &slab(0, 3)).unwrap();
    assert!(w.finish().is_err());
    assert!(!part.exists() && !sidecar_path(&part).exists());
    let left: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
    // decode by layout of bytes in memory.
    let bytes = std::fs::read(&seq).unwrap();
    assert_eq!(raw::decode(&bytes, &layout).unwrap(), a);
}

mod common;
use gpuscope_io::{Array, ArrayData, DType, Format, format_from_name};

#[test]
fn dtype_names_and_sizes() {
    let names: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
    assert_eq!(
        names,
        [
            "bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
            "float32", "float64"
        ]
    );
    assert_eq!(DType::F64.size_bytes(), 8);
    assert_eq!(DType::Bool.size_bytes(), 1);
    assert!(DType::F32.is_float() && !DType::F32.is_integer());
    assert!(DType::I8.is_integer() && !DType::Bool.is_integer());
}

#[test]
fn new_checks_length_and_overflow() {
    assert!(Array::new(vec![2, 3], ArrayData::U8(vec![0; 6])).is_ok());
    assert!(Array::new(vec![2, 3], ArrayData::U8(vec![0; 5])).is_err());
    assert!(Array::new(vec![usize::MAX, 3], ArrayData::U8(vec![])).is_err());
    let a = Array::new(vec![], ArrayData::F32(vec![1.5])).unwrap();
    assert_eq!((a.ndim(), a.len()), (0, 1));
    let e = Array::new(vec![0, 5], ArrayData::F32(vec![])).unwrap();
    assert!(e.is_empty());
}

#[test]
fn cast_follows_numpy_astype() {
    let a = Array::from_f64(
        vec![7],
        vec![-1.7, 2.9, 300.0, f64::NAN, f64::INFINITY, -0.0, 1e20],
    )
    .unwrap();
    assert_eq!(
        a.cast(DType::U8).data,
        ArrayData::U8(vec![0, 2, 255, 0, 255, 0, 255])
    );
    assert_eq!(
        a.cast(DType::I8).data,
        ArrayData::I8(vec![-1, 2, 127, 0, 127, 0, 127])
    );
    assert_eq!(
        a.cast(DType::Bool).data,
        ArrayData::Bool(vec![true, true, true, true, true, false, true])
    );
    let i = Array::from_i64(vec![3], vec![-5, 70000, i64::MAX]).unwrap();
    assert_eq!(
        i.cast(DType::U16).data,
        ArrayData::U16(vec![0, 65535, 65535])
    );
    assert_eq!(
        i.cast(DType::I32).data,
        ArrayData::I32(vec![-5, 70000, i32::MAX])
    );
    assert_eq!(
        i.cast(DType::F32).to_f64_vec(),
        vec![-5.0, 70000.0, 9223372036854775807f32 as f64]
    );
    let u = Array::from_u64(vec![2], vec![u64::MAX, 1]).unwrap();
    assert_eq!(u.cast(DType::I64).data, ArrayData::I64(vec![i64::MAX, 1]));
    let b = Array::from_bool(vec![2], vec![true, false]).unwrap();
    assert_eq!(b.cast(DType::F32).data, ArrayData::F32(vec![1.0, 0.0]));
    // Exact round trip for in-range values between all dtypes.
    for from in DType::ALL {
        for to in DType::ALL {
            let a = common::convention_array(vec![10], from);
            if to == DType::Bool
                || from == DType::Bool
                || (to.is_integer()
                    && !matches!(to, DType::I8 | DType::I16 | DType::I32 | DType::I64)
                    && !matches!(
                        from,
                        DType::Bool | DType::U8 | DType::U16 | DType::U32 | DType::U64
                    ))
            {
                continue;
            }
            assert_eq!(a.cast(to).cast(from), a, "{from:?} -> {to:?}");
        }
    }
}

#[test]
fn stats_skip_non_finite() {
    let a = Array::from_f32(vec![5], vec![1.0, f32::NAN, 3.0, f32::INFINITY, -2.0]).unwrap();
    let s = a.stats();
    assert_eq!((s.min, s.max, s.n_finite), (-2.0, 3.0, 3));
    assert!((s.mean - 2.0 / 3.0).abs() < 1e-12);
    let s = Array::from_f64(vec![1], vec![f64::NAN]).unwrap().stats();
    assert_eq!(s.n_finite, 0);
    assert!(s.min.is_nan());
    let s = Array::from_i32(vec![3], vec![-1, 5, i32::MAX])
        .unwrap()
        .stats();
    assert_eq!(s.max, i32::MAX as f64);
}

#[test]
fn conversions_to_float_vectors() {
    let a = Array::from_u16(vec![2], vec![1, 65535]).unwrap();
    assert_eq!(a.to_f32_vec(), vec![1.0, 65535.0]);
    assert_eq!(a.to_f64_vec(), vec![1.0, 65535.0]);
}

#[test]
fn formats_from_names() {
    for (n, f) in [
        ("a.npy", Format::Npy),
        ("A.TIF", Format::Tiff),
        ("x.tiff", Format::Tiff),
        ("p.PNG", Format::Png),
        ("j.jpg", Format::Jpeg),
        ("j.JPEG", Format::Jpeg),
        ("d/x.cbf", Format::Cbf),
        ("x.CBF.GZ", Format::Cbf),
        ("s.fits", Format::Fits),
        ("s.fit", Format::Fits),
        ("s.FTS", Format::Fits),
        ("d/master.h5", Format::Hdf5),
        ("scan.nxs::/entry/data/data", Format::Hdf5),
        ("x.HDF5", Format::Hdf5),
        ("d/scan.zarr", Format::Zarr),
        ("d/scan.ZARR/", Format::Zarr),
        ("labels.zarr::volumes/raw", Format::Zarr),
    ] {
        assert_eq!(format_from_name(n).unwrap(), f, "{n}");
    }
    let e = format_from_name("dir/data.n5").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("data.n5: unknown file extension ("),
        "{e}"
    );
    assert_eq!(Format::Jpeg.name(), "jpeg");
    for f in [Format::Jpeg, Format::Cbf, Format::Fits] {
        let e = gpuscope_io::encode(f, &Array::from_u8(vec![1, 1], vec![0]).unwrap()).unwrap_err();
        assert!(e.to_string().contains("not supported"), "{e}");
    }
}

#[test]
fn writers_refuse_inconsistent_arrays() {
    // The fields are public; a hand-built array with a wrong shape must not panic a writer.
    let bad = Array {
        shape: vec![10, 10],
        data: ArrayData::U8(vec![0; 5]),
    };
    for f in [Format::Npy, Format::Tiff, Format::Png] {
        let e = gpuscope_io::encode(f, &bad).unwrap_err();
        assert!(e.to_string().contains("does not match"), "{e}");
    }
}

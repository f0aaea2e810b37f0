mod common;
use common::*;
use gpuscope_io::{DType, ErrorKind, Format, decode, read};

#[test]
fn matches_astropy_for_every_case() {
    for (stem, dtype) in [
        ("bitpix8", DType::U8),
        ("bitpix16", DType::I16),
        ("bitpix32_3d", DType::I32),
        ("bitpix64", DType::I64),
        ("bitpix-32", DType::F32),
        ("bitpix-64", DType::F64),
        ("uint16", DType::U16),
        ("int8", DType::I8),
        ("uint32", DType::U32),
        ("scaled16", DType::F32),
        ("scaled8", DType::F32),
        ("scaled32", DType::F64),
        ("scaled-32", DType::F32),
        ("blank16", DType::F32),
        ("blank16_scaled", DType::F32),
    ] {
        let img = read(&fixture(&format!("fits/{stem}.fits"))).unwrap();
        assert_eq!(img.format, Format::Fits);
        let want = read(&fixture(&format!("fits/{stem}.npy"))).unwrap().array;
        assert_eq!(want.dtype(), dtype, "{stem}: fixture dtype");
        assert!(
            same(&img.array, &want),
            "{stem}: {:?} vs astropy {:?}",
            &img.array,
            &want
        );
        assert_eq!(img.header_value("SIMPLE"), Some("T"));
    }
    let img = read(&fixture("fits/bitpix32_3d.fits")).unwrap();
    assert_eq!(img.array.shape, vec![2, 3, 4]);
    assert_eq!(img.header_value("NAXIS1"), Some("4"));
}

#[test]
fn primary_without_image_is_a_clear_error() {
    let e = read(&fixture("fits/naxis0_with_extension.fits")).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unsupported);
    assert!(
        e.to_string()
            .starts_with("naxis0_with_extension.fits: the primary HDU has no image"),
        "{e}"
    );
}

fn fits_bytes(cards: &[String], data: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    for c in cards.iter().map(|s| s.as_str()).chain(["END"]) {
        h.extend_from_slice(format!("{c:<80}").as_bytes());
    }
    while h.len() % 2880 != 0 {
        h.push(b' ');
    }
    h.extend_from_slice(data);
    h
}

fn card(k: &str, v: &str) -> String {
    format!("{k:<8}= {v:>20}")
}

#[test]
fn damaged_headers_are_clear_errors() {
    let base = |naxis1: &str, bitpix: &str| {
        fits_bytes(
            &[
                card("SIMPLE", "T"),
                card("BITPIX", bitpix),
                card("NAXIS", "2"),
                card("NAXIS1", naxis1),
                card("NAXIS2", "3"),
            ],
            &[0u8; 2880],
        )
    };
    assert_eq!(
        decode("ok.fits", &base("4", "16")).unwrap().array.shape,
        vec![3, 4]
    );
    expect_err(
        "huge.fits",
        &base("1000000000000", "16"),
        "truncated: header declares",
    );
    expect_err(
        "overflow.fits",
        &base("9000000000000000000", "64"),
        "too large",
    );
    expect_err("neg.fits", &base("-4", "16"), "negative");
    expect_err("zero.fits", &base("0", "16"), "no pixels");
    expect_err("bitpix.fits", &base("4", "12"), "BITPIX");
    expect_err("text.fits", &base("four", "16"), "not an integer");
    expect_err("magic.fits", b"SIMPLX  = T", "not a FITS file");
    // No END card in the header.
    let mut b = base("4", "16");
    b.truncate(2880);
    let mut noend = b.clone();
    let pos = noend.windows(3).position(|w| w == b"END").unwrap();
    noend[pos..pos + 3].copy_from_slice(b"XYZ");
    expect_err("noend.fits", &noend, "END");
}

#[test]
fn damaged_files_never_panic() {
    for stem in ["bitpix16", "scaled32", "bitpix-64", "uint16", "bitpix32_3d"] {
        let name = format!("{stem}.fits");
        let b = read_bytes(&fixture(&format!("fits/{name}")));
        let img = decode(&name, &b).unwrap();
        // Missing padding after the data is tolerated (as astropy does);
        // anything cutting into the header or the data is an error.
        let bitpix: i64 = img.header_value("BITPIX").unwrap().parse().unwrap();
        let need = 2880 + img.array.len() * (bitpix.unsigned_abs() as usize / 8);
        truncations(&name, &b, need, &[80, 2879, 2880]);
        fuzz(&name, &b, 200, 0xf175 + b.len() as u64, 0..b.len());
        fuzz(&name, &b, 200, 0xf176, 0..800);
    }
}

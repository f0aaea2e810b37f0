mod common;
use common::*;
use gpuscope_io::{Array, ArrayData, DType, Format, decode, encode, read};

#[test]
fn reads_the_shared_images() {
    for (f, shape) in [
        ("astronaut.png", vec![512, 512, 3]),
        ("camera.png", vec![512, 512]),
        ("coins.png", vec![303, 384]),
        ("moon.png", vec![512, 512]),
        ("cell.png", vec![660, 550]),
    ] {
        let img = read(&shared_data(&format!("images/{f}"))).unwrap();
        assert_eq!(img.format, Format::Png);
        assert_eq!(img.array.shape, shape, "{f}");
        assert_eq!(img.array.dtype(), DType::U8, "{f}");
        let s = img.array.stats();
        assert!(s.max > s.min, "{f} is flat");
    }
    let img = read(&shared_data("images/hubble_deep_field.jpg")).unwrap();
    assert_eq!(img.format, Format::Jpeg);
    assert_eq!(img.array.shape, vec![872, 1000, 3]);
    assert_eq!(img.array.dtype(), DType::U8);
}

#[test]
fn reads_other_png_colour_types() {
    for stem in ["gray16", "gray_alpha8", "rgba8", "gray1", "palette"] {
        let img = read(&fixture(&format!("png/{stem}.png"))).unwrap();
        let want = read(&fixture(&format!("png/{stem}.npy"))).unwrap().array;
        assert_eq!(img.array, want, "{stem}");
    }
}

#[test]
fn reads_gray_jpeg_close_to_pillows_input() {
    let img = read(&fixture("png/gray.jpg")).unwrap();
    assert_eq!(img.array.shape, vec![16, 24]);
    // Quality 95 JPEG of the convention values (0..99): small errors only.
    let want = convention_array(vec![16, 24], DType::U8).to_f64_vec();
    let got = img.array.to_f64_vec();
    let mean_err: f64 = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .sum::<f64>()
        / got.len() as f64;
    assert!(mean_err < 6.0, "mean abs error {mean_err}");
}

#[test]
fn png_write_mappings() {
    let rt = |a: &Array| {
        decode("p.png", &encode(Format::Png, a).unwrap())
            .unwrap()
            .array
    };
    let u8a = convention_array(vec![4, 5], DType::U8);
    assert_eq!(rt(&u8a), u8a);
    let u16a = convention_array(vec![4, 5], DType::U16);
    assert_eq!(rt(&u16a), u16a);
    for c in [2, 3, 4] {
        let a = convention_array(vec![3, 2, c], DType::U8);
        assert_eq!(rt(&a), a, "channels {c}");
    }
    let b = Array::from_bool(vec![1, 3], vec![true, false, true]).unwrap();
    assert_eq!(rt(&b).data, ArrayData::U8(vec![255, 0, 255]));
    // Other dtypes: finite min..max rescaled to 16-bit gray.
    let f = Array::from_f32(vec![1, 5], vec![-1.0, 0.0, 1.0, f32::NAN, f32::INFINITY]).unwrap();
    assert_eq!(rt(&f).data, ArrayData::U16(vec![0, 32768, 65535, 0, 65535]));
    let flat = Array::from_i32(vec![2, 2], vec![7; 4]).unwrap();
    assert_eq!(rt(&flat).data, ArrayData::U16(vec![0; 4]));
    for (shape, dtype, word) in [
        (vec![2, 3, 3], DType::F32, "write .tif or .npy for stacks"),
        (vec![3, 2, 5], DType::U8, "write .tif or .npy for stacks"),
        (vec![0, 3], DType::U8, "non-zero"),
        (vec![4], DType::U8, "1-d"),
    ] {
        let e = encode(Format::Png, &Array::zeros(shape.clone(), dtype).unwrap()).unwrap_err();
        assert!(e.to_string().contains(word), "{shape:?}: {e}");
    }
}

#[test]
fn damaged_pngs_and_jpegs_never_panic() {
    for f in ["camera.png", "astronaut.png", "hubble_deep_field.jpg"] {
        let b = read_bytes(&shared_data(&format!("images/{f}")));
        truncations(f, &b, b.len(), &[33, 60]);
        fuzz(f, &b, 200, 0xabc + b.len() as u64, 0..b.len());
        fuzz(f, &b, 100, 0xdef, 0..200);
        let mut m = b.clone();
        m[1] ^= 0x20;
        expect_err(f, &m, "not a");
    }
    for f in ["gray16.png", "palette.png", "gray1.png", "gray.jpg"] {
        let b = read_bytes(&fixture(&format!("png/{f}")));
        truncations(f, &b, b.len(), &[]);
        fuzz(f, &b, 200, 0x77 + b.len() as u64, 0..b.len());
    }
}

#[test]
fn a_palette_of_partial_entries_is_an_error_not_a_panic() {
    // Found by the png fuzz target: a PLTE of 2 bytes made the png crate's
    // palette expansion index out of range.
    let b = read_bytes(&fixture("png/bad_palette.png"));
    let e = decode("bad_palette.png", &b).unwrap_err();
    assert!(e.to_string().contains("palette"), "{e}");
}

#[test]
fn absurd_png_size_is_an_error() {
    // IHDR claiming 100000 x 100000 RGBA16 with a valid CRC, then a tiny IDAT.
    let mut ihdr = b"IHDR".to_vec();
    ihdr.extend_from_slice(&100_000u32.to_be_bytes());
    ihdr.extend_from_slice(&100_000u32.to_be_bytes());
    ihdr.extend_from_slice(&[16, 6, 0, 0, 0]);
    let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
    b.extend_from_slice(&13u32.to_be_bytes());
    b.extend_from_slice(&ihdr);
    b.extend_from_slice(&crc32(&ihdr).to_be_bytes());
    let idat = b"IDAT\x78\x9c\x03\x00\x00\x00\x00\x01";
    b.extend_from_slice(&((idat.len() - 4) as u32).to_be_bytes());
    b.extend_from_slice(idat);
    b.extend_from_slice(&crc32(idat).to_be_bytes());
    let e = decode("huge.png", &b).unwrap_err();
    assert_good_error(&e, "huge.png", "huge");
}

fn crc32(data: &[u8]) -> u32 {
    let mut c = 0xFFFF_FFFFu32;
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

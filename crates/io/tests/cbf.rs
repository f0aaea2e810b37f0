mod common;
use common::*;
use gpuscope_io::{ArrayData, DType, ErrorKind, Format, decode, read};
use std::io::{Read, Write};

/// (file, slow, fast, sum, min, max, negative pixels), from
/// tests/fixtures/cbf_reference.py, which runs /work/shared/tools/cbf.py
/// (numpy int64 sum of the int32 image); its output is in fixtures/cbf_reference.txt.
const REAL: [(&str, usize, usize, i64, i32, i32, usize); 3] = [
    (
        "DLS_I03_smargon_0001.cbf.gz",
        2527,
        2463,
        36200,
        -2,
        336,
        527314,
    ),
    (
        "DLS_I23_P12M_thau_00001.cbf.gz",
        5071,
        2463,
        814049,
        -2,
        12446,
        1193058,
    ),
    (
        "dlsnxs2cbf_therm_0001.cbf.gz",
        4362,
        4148,
        -1210773,
        -2,
        404,
        1253320,
    ),
];

#[test]
fn real_frames_match_the_python_reader() {
    for (f, slow, fast, sum, min, max, neg) in REAL {
        let img = read(&shared_data(&format!("diffraction/{f}"))).unwrap();
        assert_eq!(img.format, Format::Cbf);
        assert_eq!(img.array.shape, vec![slow, fast], "{f}");
        let ArrayData::I32(v) = &img.array.data else {
            panic!("{f}: not int32")
        };
        assert_eq!(v.iter().map(|&x| x as i64).sum::<i64>(), sum, "{f} sum");
        assert_eq!(*v.iter().min().unwrap(), min, "{f} min");
        assert_eq!(*v.iter().max().unwrap(), max, "{f} max");
        assert_eq!(v.iter().filter(|&&x| x < 0).count(), neg, "{f} masked");
        assert_eq!(
            img.header_value("X-Binary-Size-Fastest-Dimension"),
            Some(fast.to_string().as_str())
        );
        assert_eq!(
            img.header_value("X-Binary-Size-Second-Dimension"),
            Some(slow.to_string().as_str())
        );
        assert!(
            img.header_value("Detector").is_some(),
            "{f}: {:?}",
            img.header
        );
        assert!(
            img.header_value("Wavelength")
                .is_some_and(|w| w.ends_with(" A")),
            "{f}"
        );
    }
}

#[test]
fn header_fields_of_the_full_cbf() {
    let img = read(&shared_data("diffraction/DLS_I03_smargon_0001.cbf.gz")).unwrap();
    assert_eq!(
        img.header_value("Detector"),
        Some("PILATUS3 6M, S/N 60-0126")
    );
    assert_eq!(img.header_value("Pixel_size"), Some("172e-6 m x 172e-6 m"));
    assert_eq!(img.header_value("Exposure_time"), Some("0.0090000 s"));
    assert_eq!(img.header_value("Wavelength"), Some("0.97625 A"));
    assert_eq!(
        img.header_value("Beam_xy"),
        Some("(1229.30, 1200.48) pixels")
    );
    assert_eq!(img.header_value("N_excluded_pixels"), Some("1161"));
    assert_eq!(img.header_value("Date"), Some("2017-11-23T15:23:41.880"));
    assert_eq!(
        img.header_value("X-Binary-Element-Type"),
        Some("signed 32-bit integer")
    );
    // Template comments after the detector block are not detector fields.
    assert_eq!(img.header_value("This"), None);
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(b)
        .read_to_end(&mut out)
        .unwrap();
    out
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

#[test]
fn plain_cbf_and_detection_by_magic() {
    let gz = read_bytes(&shared_data("diffraction/dlsnxs2cbf_therm_0001.cbf.gz"));
    let plain = gunzip(&gz);
    let a = decode("frame.cbf", &plain).unwrap();
    // Gzip is detected by magic, whatever the name says.
    let b = decode("frame.cbf", &gz).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.array.shape, vec![4362, 4148]);
}

/// byte_offset-encode values (the writer side of the format).
fn byte_offset_encode(v: &[i64]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut prev = 0i64;
    for &x in v {
        let d = x - prev;
        prev = x;
        if (-127..=127).contains(&d) {
            out.push(d as i8 as u8);
            continue;
        }
        out.push(0x80);
        if (-32767..=32767).contains(&d) {
            out.extend_from_slice(&(d as i16).to_le_bytes());
            continue;
        }
        out.extend_from_slice(&i16::MIN.to_le_bytes());
        if (-2147483647..=2147483647).contains(&d) {
            out.extend_from_slice(&(d as i32).to_le_bytes());
            continue;
        }
        out.extend_from_slice(&i32::MIN.to_le_bytes());
        out.extend_from_slice(&d.to_le_bytes());
    }
    out
}

fn mini_cbf(
    fast: usize,
    slow: usize,
    data: &[u8],
    elem: &str,
    conv: &str,
    size: Option<usize>,
) -> Vec<u8> {
    let head = format!(
        "###CBF: VERSION 1.5\r\ndata_test\r\n_array_data.header_convention \"PILATUS_1.2\"\r\n\
         _array_data.header_contents\r\n;\r\n# Detector: TEST 1M\r\n# Exposure_time 0.1 s\r\n\
         # Wavelength 1.0 A\r\n;\r\n_array_data.data\r\n;\r\n--CIF-BINARY-FORMAT-SECTION--\r\n\
         Content-Type: application/octet-stream;\r\n     conversions=\"{conv}\"\r\n\
         Content-Transfer-Encoding: BINARY\r\nX-Binary-Size: {}\r\nX-Binary-ID: 1\r\n\
         X-Binary-Element-Type: \"{elem}\"\r\nX-Binary-Element-Byte-Order: LITTLE_ENDIAN\r\n\
         X-Binary-Number-of-Elements: {}\r\nX-Binary-Size-Fastest-Dimension: {fast}\r\n\
         X-Binary-Size-Second-Dimension: {slow}\r\nX-Binary-Size-Padding: 4095\r\n\r\n",
        size.unwrap_or(data.len()),
        fast * slow
    );
    let mut b = head.into_bytes();
    b.extend_from_slice(&[0x0C, 0x1A, 0x04, 0xD5]);
    b.extend_from_slice(data);
    b.extend_from_slice(b"\r\n--CIF-BINARY-FORMAT-SECTION----\r\n;\r\n");
    b
}

fn synthetic_values() -> Vec<i64> {
    // Every escape level: 8, 16, 32-bit deltas and a 64-bit one (a jump
    // from i32::MIN to i32::MAX needs 2^32 - 1).
    vec![
        0,
        5,
        -1,
        -2,
        100,
        127,
        -128,
        30000,
        -30000,
        40000,
        -2147483648,
        2147483647,
        7,
        1000000,
        -1,
        3,
        3,
        3,
        0,
        12,
        1,
        2,
        3,
        4,
    ]
}

#[test]
fn synthetic_cbf_covers_every_escape_level() {
    let v = synthetic_values();
    let b = mini_cbf(
        6,
        4,
        &byte_offset_encode(&v),
        "signed 32-bit integer",
        "x-CBF_BYTE_OFFSET",
        None,
    );
    let img = decode("syn.cbf", &b).unwrap();
    assert_eq!(img.array.shape, vec![4, 6]);
    assert_eq!(
        img.array.data,
        ArrayData::I32(v.iter().map(|&x| x as i32).collect())
    );
    assert_eq!(img.header_value("Detector"), Some("TEST 1M"));
    assert_eq!(img.header_value("Exposure_time"), Some("0.1 s"));
    // Gzipped copy decodes the same.
    assert_eq!(decode("syn.cbf.gz", &gzip(&b)).unwrap(), img);
    // Unsigned 32-bit gives uint32.
    let u: Vec<i64> = vec![0, 4000000000, 1, 2];
    let b = mini_cbf(
        2,
        2,
        &byte_offset_encode(&u),
        "unsigned 32-bit integer",
        "x-CBF_BYTE_OFFSET",
        None,
    );
    let img = decode("u.cbf", &b).unwrap();
    assert_eq!(img.array.dtype(), DType::U32);
    assert_eq!(img.array.to_f64_vec(), vec![0.0, 4e9, 1.0, 2.0]);
    // Values outside the declared type are an error, not a silent wrap.
    let b = mini_cbf(
        2,
        2,
        &byte_offset_encode(&[0, 40000, 1, 2]),
        "signed 16-bit integer",
        "x-CBF_BYTE_OFFSET",
        None,
    );
    expect_err("range.cbf", &b, "outside the declared element type");
}

#[test]
fn bad_cbf_headers_are_clear_errors() {
    let v = synthetic_values();
    let data = byte_offset_encode(&v);
    let e = expect_err(
        "packed.cbf",
        &mini_cbf(6, 4, &data, "signed 32-bit integer", "x-CBF_PACKED", None),
        "x-CBF_PACKED",
    );
    assert_eq!(e.kind, ErrorKind::Unsupported);
    expect_err(
        "float.cbf",
        &mini_cbf(
            6,
            4,
            &data,
            "signed 32-bit real IEEE",
            "x-CBF_BYTE_OFFSET",
            None,
        ),
        "element type",
    );
    // Declared compressed size larger than the file.
    expect_err(
        "beam.cbf",
        &mini_cbf(
            6,
            4,
            &data,
            "signed 32-bit integer",
            "x-CBF_BYTE_OFFSET",
            Some(10500),
        ),
        "header declares 10500 bytes of data but the file holds",
    );
    // 10^12 elements: refused before allocating anything.
    let huge = mini_cbf(
        1_000_000,
        1_000_000,
        &data,
        "signed 32-bit integer",
        "x-CBF_BYTE_OFFSET",
        Some(1_000_000_000_000),
    );
    let e = decode("huge.cbf", &huge).unwrap_err();
    assert_good_error(&e, "huge.cbf", "huge");
    // Dimensions that need more bytes than the section holds.
    let b = mini_cbf(
        600,
        400,
        &data,
        "signed 32-bit integer",
        "x-CBF_BYTE_OFFSET",
        None,
    );
    expect_err("dims.cbf", &b, "pixels but only");
    // Zero-sized image.
    expect_err(
        "zero.cbf",
        &mini_cbf(
            0,
            4,
            &data,
            "signed 32-bit integer",
            "x-CBF_BYTE_OFFSET",
            None,
        ),
        "size",
    );
    // No binary marker, or not a CBF at all.
    expect_err(
        "nomarker.cbf",
        b"###CBF: VERSION 1.5\r\nnothing here\r\n",
        "marker",
    );
    expect_err("empty.cbf.gz", &gzip(b""), "empty");
    // Compressed data that end early.
    let short = &data[..data.len() - 3];
    expect_err(
        "short.cbf",
        &mini_cbf(
            6,
            4,
            short,
            "signed 32-bit integer",
            "x-CBF_BYTE_OFFSET",
            None,
        ),
        "ends after",
    );
}

#[test]
fn damaged_gzip_streams_are_errors() {
    let gz = read_bytes(&shared_data("diffraction/DLS_I03_smargon_0001.cbf.gz"));
    // Truncated gzip: inside the header, inside the data, one byte short.
    truncations(
        "DLS_I03_smargon_0001.cbf.gz",
        &gz,
        gz.len(),
        &[2000, 4000, gz.len() - 8],
    );
    // Corrupt deflate data and a corrupt CRC.
    let mut m = gz.clone();
    let mid = gz.len() / 2;
    for x in &mut m[mid..mid + 64] {
        *x ^= 0x5A;
    }
    expect_err("DLS_I03_smargon_0001.cbf.gz", &m, "gzip");
    let mut m = gz.clone();
    let n = m.len();
    m[n - 6] ^= 0xFF; // CRC32 field
    expect_err("DLS_I03_smargon_0001.cbf.gz", &m, "gzip");
}

#[test]
fn mutated_cbfs_never_panic() {
    let v = synthetic_values();
    let b = mini_cbf(
        6,
        4,
        &byte_offset_encode(&v),
        "signed 32-bit integer",
        "x-CBF_BYTE_OFFSET",
        None,
    );
    fuzz("syn.cbf", &b, 200, 42, 0..b.len());
    let header_end = b.len() - 60;
    fuzz("syn.cbf", &b, 200, 43, 500..header_end);
    truncations("syn.cbf", &b, b.len() - 40, &[]);
    fuzz("syn.cbf.gz", &gzip(&b), 200, 44, 0..usize::MAX);
    // Real frames: the header region of the plain file, and the gzip bytes.
    let gz = read_bytes(&shared_data("diffraction/dlsnxs2cbf_therm_0001.cbf.gz"));
    let plain = gunzip(&gz);
    let marker = plain
        .windows(4)
        .position(|w| w == [0x0C, 0x1A, 0x04, 0xD5])
        .unwrap();
    fuzz("dlsnxs2cbf_therm_0001.cbf", &plain, 40, 45, 0..marker + 4);
    fuzz("dlsnxs2cbf_therm_0001.cbf.gz", &gz, 20, 46, 0..gz.len());
    truncations(
        "dlsnxs2cbf_therm_0001.cbf",
        &plain,
        marker + 4 + 18093590,
        &[marker, marker + 4],
    );
}

#[test]
fn a_gzip_bomb_is_refused_before_it_is_inflated() {
    // 256 M zero deltas (one byte per pixel) gzip to about 250 kB but
    // would decode to 256 MB of data and 1 GB of int32 pixels: more than
    // a file of this size may decode to (decoded_size_limit, as for PNG
    // and TIFF), refused from the header.
    let n = 16_000usize;
    let conv = "x-CBF_BYTE_OFFSET";
    let whole = mini_cbf(n, n, &[], "signed 32-bit integer", conv, Some(n * n));
    let marker = whole
        .windows(4)
        .position(|w| w == [0x0C, 0x1A, 0x04, 0xD5])
        .unwrap();
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(&whole[..marker + 4]).unwrap();
    let zeros = vec![0u8; 1 << 20];
    let mut left = n * n;
    while left > 0 {
        let k = left.min(zeros.len());
        e.write_all(&zeros[..k]).unwrap();
        left -= k;
    }
    e.write_all(&whole[marker + 4..]).unwrap();
    let gz = e.finish().unwrap();
    assert!(gz.len() < 400 << 10, "{} bytes", gz.len());
    let err = match decode("bomb.cbf.gz", &gz) {
        Ok(img) => panic!("the bomb decoded to {:?} pixels", img.array.shape),
        Err(e) => e,
    };
    assert_eq!(err.kind, ErrorKind::TooLarge, "{err}");
    assert!(err.to_string().contains("gzip"), "{err}");
    // The same image, honestly small, still decodes.
    let small = mini_cbf(
        300,
        200,
        &vec![0u8; 60_000],
        "signed 32-bit integer",
        conv,
        None,
    );
    let img = decode("small.cbf.gz", &gzip(&small)).unwrap();
    assert_eq!(img.array.shape, vec![200, 300]);
}

//! PNG (read and write) and JPEG (read) images.
//!
//! Reading: 8/16-bit gray → (h, w) u8/u16; gray+alpha → (h, w, 2), alpha kept
//! so nothing is lost; RGB → (h, w, 3); RGBA → (h, w, 4); palette and 1/2/4-bit
//! gray are expanded to 8 bits (a tRNS chunk adds an alpha channel).
//! JPEG: gray → (h, w) u8, everything else → (h, w, 3) u8 RGB.
//!
//! Writing PNG is for viewing: bool → 8-bit 0/255, u8 → 8-bit, u16 → 16-bit,
//! (h, w, 2|3|4) u8/u16 → gray+alpha/RGB/RGBA; every other dtype is rescaled
//! linearly from its finite min..max to 0..65535 in 16-bit gray (NaN and -inf
//! → 0, +inf → 65535, a constant image → 0).

use crate::array::{Array, ArrayData, DType};
use crate::error::{IoError, Result};
use crate::{Format, Image, decoded_size_limit};
use std::io::Cursor;

fn png_err(e: png::DecodingError) -> IoError {
    match e {
        png::DecodingError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            IoError::truncated("the PNG data ends early")
        }
        png::DecodingError::LimitsExceeded => {
            IoError::too_large("the PNG declares a larger image than this file could hold")
        }
        png::DecodingError::Format(f) => IoError::corrupt(format!("invalid PNG: {f}")),
        other => IoError::corrupt(format!("PNG decoding failed: {other}")),
    }
}

/// Decode a PNG held in memory.
pub fn decode_png(bytes: &[u8]) -> Result<Image> {
    if !bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Err(IoError::corrupt(
            "not a PNG file: the PNG signature is missing",
        ));
    }
    let limit = decoded_size_limit(bytes.len());
    let mut dec = png::Decoder::new_with_limits(Cursor::new(bytes), png::Limits { bytes: limit });
    dec.set_transformations(png::Transformations::EXPAND);
    let mut reader = dec.read_info().map_err(png_err)?;
    // The png crate's palette expansion panics on a PLTE that is not whole
    // RGB entries (at most 256): refuse it first (found by fuzzing).
    let info = reader.info();
    if info.color_type == png::ColorType::Indexed
        && let Some(p) = info.palette.as_deref()
        && (p.len() % 3 != 0 || p.len() > 768)
    {
        return Err(IoError::corrupt(format!(
            "the PNG's palette has {} bytes (expected whole RGB entries, at most 256)",
            p.len()
        )));
    }
    let size = reader
        .output_buffer_size()
        .filter(|&n| n <= limit)
        .ok_or_else(|| IoError::too_large("the PNG's declared size is too large"))?;
    // 16-bit samples are decoded straight into u16 words and swapped in
    // place: no second buffer of the image's size.
    let sixteen = reader.output_color_type().1 == png::BitDepth::Sixteen;
    let (mut bytes8, mut words) = if sixteen {
        (Vec::new(), vec![0u16; size.div_ceil(2)])
    } else {
        (vec![0u8; size], Vec::new())
    };
    let out: &mut [u8] = if sixteen {
        &mut bytemuck::cast_slice_mut::<u16, u8>(&mut words)[..size]
    } else {
        &mut bytes8
    };
    let info = reader.next_frame(out).map_err(png_err)?;
    // Read on to IEND so a file cut short after the pixel data is still reported.
    reader.finish().map_err(png_err)?;
    let (h, w) = (info.height as usize, info.width as usize);
    if h == 0 || w == 0 {
        return Err(IoError::corrupt(format!("PNG has size {w}x{h}")));
    }
    let c = match info.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => {
            return Err(IoError::unsupported("PNG palette was not expanded", ""));
        }
    };
    let n = h.saturating_mul(w).saturating_mul(c);
    let data = match info.bit_depth {
        png::BitDepth::Eight if !sixteen => {
            bytes8.truncate(n);
            ArrayData::U8(bytes8)
        }
        png::BitDepth::Sixteen if sixteen => {
            words.truncate(n);
            for v in &mut words {
                *v = u16::from_be(*v);
            }
            ArrayData::U16(words)
        }
        d => {
            return Err(IoError::unsupported(
                format!("PNG bit depth {d:?} after expansion"),
                "",
            ));
        }
    };
    if data.len() != n {
        return Err(IoError::truncated(
            "the PNG holds fewer pixels than it declares",
        ));
    }
    let shape = if c == 1 { vec![h, w] } else { vec![h, w, c] };
    Ok(Image {
        array: Array::new(shape, data)?,
        format: Format::Png,
        header: Vec::new(),
    })
}

/// Decode a JPEG held in memory.
pub fn decode_jpeg(bytes: &[u8]) -> Result<Image> {
    use zune_jpeg::JpegDecoder;
    use zune_jpeg::zune_core::bytestream::ZCursor;
    use zune_jpeg::zune_core::colorspace::ColorSpace;
    if !bytes.starts_with(&[0xFF, 0xD8]) {
        return Err(IoError::corrupt(
            "not a JPEG file: the SOI marker is missing",
        ));
    }
    // Entropy-coded data byte-stuff 0xFF, so an EOI after the last SOS means the
    // scan is complete; decoders pad a cut-off scan silently otherwise.
    let last_sos = bytes.windows(2).rposition(|w| w == [0xFF, 0xDA]);
    let has_eoi = last_sos.is_some_and(|p| bytes[p..].windows(2).any(|w| w == [0xFF, 0xD9]));
    if !has_eoi {
        return Err(IoError::truncated(
            "the JPEG has no end-of-image marker after its last scan",
        ));
    }
    let jerr =
        |e: zune_jpeg::errors::DecodeErrors| IoError::corrupt(format!("JPEG decoding failed: {e}"));
    let mut dec = JpegDecoder::new(ZCursor::new(bytes));
    dec.decode_headers().map_err(jerr)?;
    let gray = matches!(
        dec.input_colorspace(),
        Some(ColorSpace::Luma | ColorSpace::LumaA)
    );
    let out = if gray {
        ColorSpace::Luma
    } else {
        ColorSpace::RGB
    };
    let opts = dec.options().jpeg_set_out_colorspace(out);
    dec.set_options(opts);
    let (w, h) = dec
        .dimensions()
        .ok_or_else(|| IoError::corrupt("JPEG has no frame header"))?;
    if w == 0 || h == 0 {
        return Err(IoError::corrupt(format!("JPEG has size {w}x{h}")));
    }
    let c = if gray { 1 } else { 3 };
    let limit = decoded_size_limit(bytes.len());
    let size = dec
        .output_buffer_size()
        .filter(|&n| n <= limit && n == w * h * c)
        .ok_or_else(|| IoError::too_large(format!("JPEG {w}x{h} is too large for this file")))?;
    let mut buf = vec![0u8; size];
    dec.decode_into(&mut buf).map_err(jerr)?;
    let shape = if gray { vec![h, w] } else { vec![h, w, 3] };
    Ok(Image {
        array: Array::new(shape, ArrayData::U8(buf))?,
        format: Format::Jpeg,
        header: Vec::new(),
    })
}

/// Encode an array as a PNG for viewing (see the module docs for the mapping).
pub fn encode_png(array: &Array) -> Result<Vec<u8>> {
    let s = &array.shape;
    let small_int = matches!(array.dtype(), DType::U8 | DType::U16);
    let (h, w, c) = match s.len() {
        2 => (s[0], s[1], 1),
        3 if small_int && matches!(s[2], 2..=4) => (s[0], s[1], s[2]),
        3 => {
            return Err(IoError::invalid(
                format!("cannot write shape {s:?} as PNG"),
                "PNG holds one 2-D image; write .tif or .npy for stacks",
            ));
        }
        _ => {
            return Err(IoError::invalid(
                format!("cannot write a {}-d array as PNG", s.len()),
                "PNG holds one 2-D image (h, w) or colour (h, w, 3|4); write .tif or .npy otherwise",
            ));
        }
    };
    if h == 0 || w == 0 {
        return Err(IoError::invalid(
            format!("cannot write shape {s:?} as PNG: an image needs non-zero sizes"),
            "PNG images must be at least 1x1",
        ));
    }
    let (Ok(w32), Ok(h32)) = (u32::try_from(w), u32::try_from(h)) else {
        return Err(IoError::invalid(
            format!("image {h}x{w} is too large for PNG"),
            "write .tif or .npy",
        ));
    };
    let (depth, bytes): (png::BitDepth, Vec<u8>) = match &array.data {
        ArrayData::Bool(v) => (
            png::BitDepth::Eight,
            v.iter().map(|&b| if b { 255 } else { 0 }).collect(),
        ),
        ArrayData::U8(v) => (png::BitDepth::Eight, v.clone()),
        ArrayData::U16(v) => (
            png::BitDepth::Sixteen,
            v.iter().flat_map(|x| x.to_be_bytes()).collect(),
        ),
        _ => {
            let st = array.stats();
            let (lo, hi) = (st.min, st.max);
            let scale = if st.n_finite > 0 && hi > lo {
                65535.0 / (hi - lo)
            } else {
                0.0
            };
            let px = array.to_f64_vec().into_iter().map(|x| {
                let y = if x.is_nan() || x == f64::NEG_INFINITY {
                    0.0
                } else if x == f64::INFINITY {
                    65535.0
                } else {
                    ((x - lo) * scale).round()
                };
                y.clamp(0.0, 65535.0) as u16
            });
            (
                png::BitDepth::Sixteen,
                px.flat_map(|x| x.to_be_bytes()).collect(),
            )
        }
    };
    let color = match c {
        1 => png::ColorType::Grayscale,
        2 => png::ColorType::GrayscaleAlpha,
        3 => png::ColorType::Rgb,
        _ => png::ColorType::Rgba,
    };
    let eerr = |e: png::EncodingError| {
        IoError::io("PNG encoding failed", std::io::Error::other(e.to_string()))
    };
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w32, h32);
        enc.set_color(color);
        enc.set_depth(depth);
        let mut writer = enc.write_header().map_err(eerr)?;
        writer.write_image_data(&bytes).map_err(eerr)?;
        writer.finish().map_err(eerr)?;
    }
    Ok(out)
}

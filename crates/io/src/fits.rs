//! FITS primary-HDU images (read only).
//!
//! Shape is NAXISn reversed (NAXIS1 fastest, as numpy/astropy). BSCALE/BZERO
//! follow astropy's rules exactly:
//! * no scaling: BITPIX 8 → uint8, 16 → int16, 32 → int32, 64 → int64,
//!   -32 → float32, -64 → float64;
//! * BSCALE 1 with BZERO -128 (BITPIX 8) → int8, 2^15 (16) → uint16,
//!   2^31 (32) → uint32, 2^63 (64) → uint64;
//! * any other scaling, or a BLANK keyword on integer data: float32 for
//!   BITPIX 8/16 and -32, float64 for 32/64/-64, computed as
//!   `raw * BSCALE + BZERO` in that float type, with pixels equal to BLANK set
//!   to NaN (astropy skips this when BLANK = 0, and so do we).

use crate::array::{Array, ArrayData, DType, checked_product};
use crate::elements::decode_elements;
use crate::error::{IoError, Result};
use crate::{Format, Image};

const BLOCK: usize = 2880;
const CARD: usize = 80;

/// One header card: keyword and value text (strings unquoted, comments dropped).
fn parse_card(card: &[u8]) -> (String, String) {
    // Split on bytes first: latin-1 bytes above 0x7F become 2-byte chars.
    let text = |b: &[u8]| -> String { b.iter().map(|&c| c as char).collect() };
    let key = text(&card[..8]).trim_end().to_string();
    if &card[8..10] != b"= " {
        // COMMENT, HISTORY, blank and other commentary cards.
        return (key, text(&card[8..]).trim().to_string());
    }
    let rest = text(&card[10..]);
    let rest = rest.trim_start();
    if let Some(body) = rest.strip_prefix('\'') {
        // '' inside a string is an escaped quote.
        let mut v = String::new();
        let mut chars = body.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\'' {
                if chars.peek() == Some(&'\'') {
                    chars.next();
                    v.push('\'');
                    continue;
                }
                break;
            }
            v.push(c);
        }
        return (key, v.trim_end().to_string());
    }
    let value = rest.split('/').next().unwrap_or("").trim();
    (key, value.to_string())
}

fn get<'a>(cards: &'a [(String, String)], key: &str) -> Option<&'a str> {
    cards
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn int_card(cards: &[(String, String)], key: &str) -> Result<Option<i64>> {
    match get(cards, key) {
        None => Ok(None),
        Some(v) => v
            .parse::<i64>()
            .map(Some)
            .map_err(|_| IoError::corrupt(format!("FITS keyword {key} = '{v}' is not an integer"))),
    }
}

fn float_card(cards: &[(String, String)], key: &str) -> Result<Option<f64>> {
    match get(cards, key) {
        None => Ok(None),
        // Fortran-style 'D' exponents are legal FITS.
        Some(v) => v
            .replace(['D', 'd'], "E")
            .parse::<f64>()
            .map(Some)
            .map_err(|_| IoError::corrupt(format!("FITS keyword {key} = '{v}' is not a number"))),
    }
}

/// Decode the primary HDU of a FITS file held in memory.
pub fn decode(bytes: &[u8]) -> Result<Image> {
    if !bytes.starts_with(b"SIMPLE  =") {
        if bytes.starts_with(b"XTENSION") {
            return Err(IoError::corrupt(
                "this is a FITS extension, not a file starting with a primary HDU",
            ));
        }
        return Err(IoError::corrupt(
            "not a FITS file: it does not start with 'SIMPLE  ='",
        ));
    }
    let mut cards = Vec::new();
    let mut end = None;
    'blocks: for (b, block) in bytes.chunks(BLOCK).enumerate() {
        if block.len() < BLOCK {
            break;
        }
        for card in block.chunks_exact(CARD) {
            let (k, v) = parse_card(card);
            if k == "END" {
                end = Some((b + 1) * BLOCK);
                break 'blocks;
            }
            cards.push((k, v));
        }
    }
    let data_offset = end.ok_or_else(|| {
        IoError::truncated("the FITS header ends without an END card in a complete 2880-byte block")
    })?;
    if get(&cards, "SIMPLE") != Some("T") {
        return Err(IoError::unsupported(
            "SIMPLE = F: the file says it does not conform to the FITS standard",
            "convert it with astropy or fitsio first",
        ));
    }
    let bitpix = int_card(&cards, "BITPIX")?
        .ok_or_else(|| IoError::corrupt("the FITS header has no BITPIX"))?;
    let raw_dtype = match bitpix {
        8 => DType::U8,
        16 => DType::I16,
        32 => DType::I32,
        64 => DType::I64,
        -32 => DType::F32,
        -64 => DType::F64,
        b => return Err(IoError::corrupt(format!("FITS BITPIX = {b} is not valid"))),
    };
    let naxis = int_card(&cards, "NAXIS")?
        .ok_or_else(|| IoError::corrupt("the FITS header has no NAXIS"))?;
    if !(0..=999).contains(&naxis) {
        return Err(IoError::corrupt(format!(
            "FITS NAXIS = {naxis} is not valid"
        )));
    }
    if naxis == 0 {
        return Err(IoError::unsupported(
            "the primary HDU has no image (NAXIS = 0); the data are in extension HDUs",
            "this reader reads primary-HDU images only; save the image in the primary HDU",
        ));
    }
    if get(&cards, "GROUPS") == Some("T") {
        return Err(IoError::unsupported(
            "random-groups FITS is not supported",
            "convert to an image HDU",
        ));
    }
    let mut axes = Vec::with_capacity(naxis as usize);
    for i in 1..=naxis {
        let key = format!("NAXIS{i}");
        let n = int_card(&cards, &key)?
            .ok_or_else(|| IoError::corrupt(format!("the FITS header has no {key}")))?;
        let n = usize::try_from(n)
            .map_err(|_| IoError::corrupt(format!("FITS {key} = {n} is negative")))?;
        if n == 0 {
            return Err(IoError::corrupt(format!(
                "FITS {key} = 0: the primary HDU holds no pixels"
            )));
        }
        axes.push(n);
    }
    let shape: Vec<usize> = axes.iter().rev().copied().collect();
    let nbytes = checked_product(&shape)
        .and_then(|n| n.checked_mul(raw_dtype.size_bytes()))
        .ok_or_else(|| IoError::too_large(format!("FITS image {shape:?} is too large")))?;
    let avail = bytes.len() - data_offset;
    if avail < nbytes {
        return Err(IoError::truncated(format!(
            "header declares {nbytes} bytes of data but the file holds {avail}"
        )));
    }
    let raw = decode_elements(raw_dtype, &bytes[data_offset..data_offset + nbytes], true);
    let bscale = float_card(&cards, "BSCALE")?.unwrap_or(1.0);
    let bzero = float_card(&cards, "BZERO")?.unwrap_or(0.0);
    // astropy ignores BLANK on float data.
    let blank = if bitpix > 0 {
        int_card(&cards, "BLANK")?
    } else {
        None
    };
    let data = scale(raw, bscale, bzero, blank);
    Ok(Image {
        array: Array::new(shape, data)?,
        format: Format::Fits,
        header: cards,
    })
}

fn scale(raw: ArrayData, bscale: f64, bzero: f64, blank: Option<i64>) -> ArrayData {
    let unscaled = bscale == 1.0 && bzero == 0.0;
    if unscaled && blank.is_none() {
        return raw;
    }
    if !unscaled && bscale == 1.0 {
        // The FITS convention for unsigned (and signed-byte) integers.
        let z = bzero;
        match &raw {
            ArrayData::U8(v) if z == -128.0 => {
                return ArrayData::I8(v.iter().map(|&x| (x ^ 0x80) as i8).collect());
            }
            ArrayData::I16(v) if z == 32768.0 => {
                return ArrayData::U16(v.iter().map(|&x| (x as u16) ^ 0x8000).collect());
            }
            ArrayData::I32(v) if z == 2147483648.0 => {
                return ArrayData::U32(v.iter().map(|&x| (x as u32) ^ 0x8000_0000).collect());
            }
            ArrayData::I64(v) if z == 9223372036854775808.0 => {
                return ArrayData::U64(v.iter().map(|&x| (x as u64) ^ (1 << 63)).collect());
            }
            _ => {}
        }
    }
    let blank = blank.filter(|&b| b != 0);
    // Same operations and rounding as astropy: cast, multiply, then add, in
    // the target float type (python-float scalars do not promote float32).
    macro_rules! to_float {
        ($v:expr, $t:ty, $var:ident) => {{
            let (s, z) = (bscale as $t, bzero as $t);
            ArrayData::$var(
                $v.iter()
                    .map(|&x| {
                        if blank == Some(x as i64) {
                            return <$t>::NAN;
                        }
                        let mut y = x as $t;
                        if bscale != 1.0 {
                            y *= s;
                        }
                        if bzero != 0.0 {
                            y += z;
                        }
                        y
                    })
                    .collect(),
            )
        }};
    }
    match raw {
        ArrayData::U8(v) => to_float!(v, f32, F32),
        ArrayData::I16(v) => to_float!(v, f32, F32),
        ArrayData::I32(v) => to_float!(v, f64, F64),
        ArrayData::I64(v) => to_float!(v, f64, F64),
        ArrayData::F32(v) => {
            let (s, z) = (bscale as f32, bzero as f32);
            ArrayData::F32(
                v.iter()
                    .map(|&x| {
                        let mut y = x;
                        if bscale != 1.0 {
                            y *= s;
                        }
                        if bzero != 0.0 {
                            y += z;
                        }
                        y
                    })
                    .collect(),
            )
        }
        ArrayData::F64(v) => ArrayData::F64(v.iter().map(|&x| x * bscale + bzero).collect()),
        other => other,
    }
}

//! CBF / miniCBF diffraction images with byte_offset compression, optionally
//! gzipped (detected by the gzip magic, not the name).
//!
//! The binary section starts after the bytes 0C 1A 04 D5; the MIME header
//! before it gives the dimensions, element type and compressed size. Pixels
//! come back as (slow, fast) int32 (uint32 for unsigned 32-bit data); masked
//! pixels keep their negative values (-1 gaps, -2 bad pixels on Pilatus).

use crate::array::{Array, ArrayData};
use crate::error::{IoError, Result};
use crate::{Format, Image, decoded_size_limit};
use std::io::Read;

const MARKER: [u8; 4] = [0x0C, 0x1A, 0x04, 0xD5];
/// Headers are a few kB; stop looking for the marker well before reading a
/// whole (possibly enormous or endless) decompressed stream.
const MAX_HEADER: usize = 4 << 20;

fn find_marker(hay: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?
        .windows(4)
        .position(|w| w == MARKER)
        .map(|p| p + from)
}

fn gz_err(e: std::io::Error) -> IoError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        IoError::truncated("the gzip stream ends early")
    } else {
        IoError::corrupt(format!("the gzip stream is corrupt ({e})"))
    }
}

/// Decode a CBF file (plain or gzipped) held in memory.
pub fn decode(bytes: &[u8]) -> Result<Image> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        decode_gz(bytes)
    } else {
        let start = find_marker(bytes, 0).ok_or_else(no_marker)?;
        let header = parse_header(&bytes[..start])?;
        let data_start = start + 4;
        let avail = bytes.len() - data_start;
        if avail < header.size {
            return Err(IoError::truncated(format!(
                "header declares {} bytes of data but the file holds {avail}",
                header.size
            )));
        }
        let size = header.size;
        finish(header, &bytes[data_start..data_start + size])
    }
}

fn no_marker() -> IoError {
    IoError::corrupt("no CBF binary section (the 0C 1A 04 D5 marker is missing)")
}

fn decode_gz(bytes: &[u8]) -> Result<Image> {
    let mut gz = flate2::read::MultiGzDecoder::new(bytes);
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    // Read until the marker shows up; the header is small.
    let start = loop {
        let n = gz.read(&mut chunk).map_err(gz_err)?;
        if n == 0 {
            return Err(if buf.is_empty() {
                IoError::corrupt("the gzip stream is empty")
            } else {
                no_marker()
            });
        }
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(p) = find_marker(&buf, from) {
            break p;
        }
        if buf.len() > MAX_HEADER {
            return Err(IoError::corrupt(format!(
                "no CBF binary section marker in the first {MAX_HEADER} bytes"
            )));
        }
    };
    let header = parse_header(&buf[..start])?;
    // As for PNG and TIFF: what the header declares (compressed data, then
    // 4-byte pixels) must fit the bound a file of this size can honestly
    // decode to, before any of it is inflated.
    let limit = decoded_size_limit(bytes.len());
    let pixels = header.fast.saturating_mul(header.slow).saturating_mul(4);
    if header.size > limit || pixels > limit {
        return Err(IoError::too_large(format!(
            "the CBF header declares {} bytes of data and {}x{} pixels, more than a {}-byte \
             gzip file may decode to ({limit} bytes)",
            header.size,
            header.slow,
            header.fast,
            bytes.len()
        )));
    }
    let data_start = start + 4;
    let mut data = buf.split_off(data_start.min(buf.len()));
    if data.len() < header.size {
        // Grow only as data actually arrives: the declared size is not trusted.
        let want = (header.size - data.len()) as u64;
        (&mut gz)
            .take(want)
            .read_to_end(&mut data)
            .map_err(gz_err)?;
        if data.len() < header.size {
            return Err(IoError::truncated(format!(
                "header declares {} bytes of data but the file holds {}",
                header.size,
                data.len()
            )));
        }
    }
    // Read what follows (a short MIME trailer) so the gzip CRC gets checked.
    std::io::copy(&mut (&mut gz).take(1 << 20), &mut std::io::sink()).map_err(gz_err)?;
    data.truncate(header.size);
    finish(header, &data)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Elem {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
}

struct Header {
    fast: usize,
    slow: usize,
    size: usize,
    elem: Elem,
    fields: Vec<(String, String)>,
}

fn mime_value<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v.as_str())
}

fn parse_num(fields: &[(String, String)], key: &str) -> Result<Option<usize>> {
    match mime_value(fields, key) {
        None => Ok(None),
        Some(v) => v.trim().parse::<usize>().map(Some).map_err(|_| {
            IoError::corrupt(format!("CBF header field {key} is not a number: '{v}'"))
        }),
    }
}

fn parse_header(raw: &[u8]) -> Result<Header> {
    // CBF headers are ASCII; latin-1 keeps any stray byte without failing.
    let text: String = raw.iter().map(|&b| b as char).collect();
    let mut fields = pilatus_fields(&text);
    let mut conversions = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(i) = t.find("conversions=") {
            conversions = Some(t[i + 12..].trim().trim_matches('"').to_string());
        }
        if let Some((k, v)) = t.split_once(':') {
            let k = k.trim();
            if k.starts_with("X-Binary-") || k.starts_with("Content-") {
                let v = v.trim().trim_end_matches(';').trim().trim_matches('"');
                fields.push((k.to_string(), v.to_string()));
            }
        }
    }
    let need = |key: &str| -> Result<usize> {
        parse_num(&fields, key)?
            .ok_or_else(|| IoError::corrupt(format!("the CBF header has no {key} field")))
    };
    let fast = need("X-Binary-Size-Fastest-Dimension")?;
    let slow = need("X-Binary-Size-Second-Dimension")?;
    let size = need("X-Binary-Size")?;
    let third = parse_num(&fields, "X-Binary-Size-Third-Dimension")?.unwrap_or(1);
    if third != 1 {
        return Err(IoError::unsupported(
            format!("3-D CBF data (third dimension {third}) is not supported"),
            "split the volume into 2-D frames",
        ));
    }
    if fast == 0 || slow == 0 {
        return Err(IoError::corrupt(format!(
            "CBF image has size {fast}x{slow}"
        )));
    }
    let n = fast
        .checked_mul(slow)
        .ok_or_else(|| IoError::too_large(format!("CBF image {slow}x{fast} is too large")))?;
    if let Some(declared) = parse_num(&fields, "X-Binary-Number-of-Elements")?
        && declared != n
    {
        return Err(IoError::corrupt(format!(
            "CBF header declares {declared} elements but the dimensions give {slow}x{fast} = {n}"
        )));
    }
    // byte_offset needs at least one byte per pixel.
    if n > size {
        return Err(IoError::corrupt(format!(
            "CBF header declares {n} pixels but only {size} bytes of compressed data"
        )));
    }
    match conversions.as_deref() {
        Some(c) if c.eq_ignore_ascii_case("x-CBF_BYTE_OFFSET") => {}
        Some(c) => {
            return Err(IoError::unsupported(
                format!("CBF compression '{c}' is not supported (only x-CBF_BYTE_OFFSET)"),
                "convert the image with CBFlib or DIALS to byte_offset compression",
            ));
        }
        None => {
            return Err(IoError::corrupt(
                "the CBF header has no Content-Type conversions= field",
            ));
        }
    }
    if let Some(order) = mime_value(&fields, "X-Binary-Element-Byte-Order")
        && !order.eq_ignore_ascii_case("LITTLE_ENDIAN")
    {
        return Err(IoError::unsupported(
            format!("CBF byte order {order} is not supported"),
            "byte_offset data is little-endian in every CBF writer we know",
        ));
    }
    // CBFlib's default element type is signed 32-bit.
    let et = mime_value(&fields, "X-Binary-Element-Type").unwrap_or("signed 32-bit integer");
    let elem = match et.to_ascii_lowercase().as_str() {
        "signed 8-bit integer" => Elem::I8,
        "unsigned 8-bit integer" => Elem::U8,
        "signed 16-bit integer" => Elem::I16,
        "unsigned 16-bit integer" => Elem::U16,
        "signed 32-bit integer" => Elem::I32,
        "unsigned 32-bit integer" => Elem::U32,
        _ => {
            return Err(IoError::unsupported(
                format!("CBF element type '{et}' is not supported"),
                "only 8/16/32-bit integer CBF images are read",
            ));
        }
    };
    Ok(Header {
        fast,
        slow,
        size,
        elem,
        fields,
    })
}

/// The '# Key value' lines of the Pilatus header block.
fn pilatus_fields(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    // Full CBF files carry the detector header after _array_data.header_contents,
    // followed by template comments that are not detector fields.
    let (start, bounded) = match lines
        .iter()
        .position(|l| l.trim_start().starts_with("_array_data.header_contents"))
    {
        Some(i) => (i + 1, true),
        None => (0, false),
    };
    for line in &lines[start..] {
        let t = line.trim();
        if t.starts_with(';') || t.is_empty() {
            continue;
        }
        let Some(body) = t.strip_prefix('#') else {
            if bounded {
                break;
            }
            continue;
        };
        let body = body.trim();
        let Some(first) = body.split_whitespace().next() else {
            continue;
        };
        if first.starts_with(|c: char| c.is_ascii_digit()) {
            out.push(("Date".to_string(), body.to_string()));
            continue;
        }
        if body.contains("sensor, thickness") {
            out.push(("Sensor".to_string(), body.to_string()));
            continue;
        }
        let key = first.trim_end_matches([':', ',']);
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let value = body[first.len()..]
            .trim()
            .trim_start_matches(['=', ':'])
            .trim();
        out.push((key.to_string(), value.to_string()));
        // Everything after this line comes from the beamline's template.
        if key == "CBF_template_file" {
            break;
        }
    }
    out
}

/// Decode byte_offset data: a running sum of deltas, each one signed byte
/// unless -128, then an i16 unless i16::MIN, then an i32 unless i32::MIN,
/// then an i64 (all little-endian).
fn byte_offset<T: TryFrom<i64>>(data: &[u8], n: usize) -> Result<Vec<T>> {
    let short = |got: usize| {
        IoError::truncated(format!(
            "the compressed data ends after {got} of {n} pixels"
        ))
    };
    let mut out = Vec::with_capacity(n);
    let mut pos = 0usize;
    let mut cur: i64 = 0;
    while out.len() < n {
        let d0 = *data.get(pos).ok_or_else(|| short(out.len()))? as i8;
        pos += 1;
        let delta = if d0 != i8::MIN {
            d0 as i64
        } else {
            let b = data.get(pos..pos + 2).ok_or_else(|| short(out.len()))?;
            pos += 2;
            let d1 = i16::from_le_bytes([b[0], b[1]]);
            if d1 != i16::MIN {
                d1 as i64
            } else {
                let b = data.get(pos..pos + 4).ok_or_else(|| short(out.len()))?;
                pos += 4;
                let d2 = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                if d2 != i32::MIN {
                    d2 as i64
                } else {
                    let b = data.get(pos..pos + 8).ok_or_else(|| short(out.len()))?;
                    pos += 8;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    i64::from_le_bytes(a)
                }
            }
        };
        cur = cur.wrapping_add(delta);
        let v = T::try_from(cur).map_err(|_| {
            IoError::corrupt(format!(
                "pixel {} decodes to {cur}, outside the declared element type",
                out.len()
            ))
        })?;
        out.push(v);
    }
    Ok(out)
}

fn finish(h: Header, data: &[u8]) -> Result<Image> {
    let n = h.fast * h.slow;
    let arr = match h.elem {
        // Narrow types are range-checked against their own type, then widened.
        Elem::I8 => ArrayData::I32(
            byte_offset::<i8>(data, n)?
                .into_iter()
                .map(i32::from)
                .collect(),
        ),
        Elem::U8 => ArrayData::I32(
            byte_offset::<u8>(data, n)?
                .into_iter()
                .map(i32::from)
                .collect(),
        ),
        Elem::I16 => ArrayData::I32(
            byte_offset::<i16>(data, n)?
                .into_iter()
                .map(i32::from)
                .collect(),
        ),
        Elem::U16 => ArrayData::I32(
            byte_offset::<u16>(data, n)?
                .into_iter()
                .map(i32::from)
                .collect(),
        ),
        Elem::I32 => ArrayData::I32(byte_offset::<i32>(data, n)?),
        Elem::U32 => ArrayData::U32(byte_offset::<u32>(data, n)?),
    };
    Ok(Image {
        array: Array::new(vec![h.slow, h.fast], arr)?,
        format: Format::Cbf,
        header: h.fields,
    })
}

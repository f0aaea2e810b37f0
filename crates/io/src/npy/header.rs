//! The `.npy` header: parsed from a file's first bytes (versions 1–3),
//! written for little-endian C-order data.

use crate::array::{DType, checked_product};
use crate::error::{IoError, Result};
#[cfg(not(target_arch = "wasm32"))]
use crate::raw::RawLayout;

const MAGIC: &[u8] = b"\x93NUMPY";
/// numpy itself refuses headers above 10 000 bytes by default; allow more but
/// not so much that a damaged length field makes us read megabytes of text.
const MAX_HEADER: usize = 1 << 20;

/// A parsed `.npy` header.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub dtype: DType,
    pub big_endian: bool,
    pub fortran_order: bool,
    pub shape: Vec<usize>,
    /// Offset of the first data byte in the file.
    pub data_offset: usize,
}

impl Header {
    /// Number of elements, checked for overflow.
    pub fn len(&self) -> Result<usize> {
        checked_product(&self.shape).ok_or_else(|| {
            IoError::too_large(format!("shape {:?} has too many elements", self.shape))
        })
    }
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
    pub fn data_bytes(&self) -> Result<usize> {
        self.len()?
            .checked_mul(self.dtype.size_bytes())
            .ok_or_else(|| IoError::too_large(format!("shape {:?} has too many bytes", self.shape)))
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl Header {
    /// The header a headerless file of `layout` would have (C order), for
    /// the slab reader.
    pub(super) fn from_raw(layout: &RawLayout) -> Result<Header> {
        layout.data_bytes()?;
        let data_offset = usize::try_from(layout.offset)
            .map_err(|_| IoError::too_large(format!("offset {} is too large", layout.offset)))?;
        Ok(Header {
            dtype: layout.dtype,
            big_endian: layout.big_endian,
            fortran_order: false,
            shape: layout.shape.clone(),
            data_offset,
        })
    }
}

/// Length of the fixed preamble before the header text, from its first 10 bytes
/// (or 12 for v2/v3). Returns (preamble length, header text length).
pub(super) fn preamble(bytes: &[u8]) -> Result<(usize, usize, u8)> {
    if bytes.len() < 8 {
        return Err(IoError::truncated(format!(
            "{} bytes is too short for an npy header",
            bytes.len()
        )));
    }
    if &bytes[..6] != MAGIC {
        return Err(IoError::corrupt(
            "not an npy file: it does not start with the \\x93NUMPY magic",
        ));
    }
    let major = bytes[6];
    let (pre, len) = match major {
        1 => {
            let b = bytes
                .get(8..10)
                .ok_or_else(|| IoError::truncated("the file ends inside the npy header length"))?;
            (10, u16::from_le_bytes([b[0], b[1]]) as usize)
        }
        2 | 3 => {
            let b = bytes
                .get(8..12)
                .ok_or_else(|| IoError::truncated("the file ends inside the npy header length"))?;
            (12, u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        }
        v => {
            return Err(IoError::unsupported(
                format!("npy format version {v} is not supported"),
                "save with numpy's default format (versions 1-3 are read)",
            ));
        }
    };
    if len > MAX_HEADER {
        return Err(IoError::too_large(format!(
            "npy header length {len} exceeds the {MAX_HEADER}-byte limit"
        )));
    }
    Ok((pre, len, major))
}

/// Parse the header from the start of a file (only the header bytes need be present).
pub fn parse_header(bytes: &[u8]) -> Result<Header> {
    let (pre, len, major) = preamble(bytes)?;
    let end = pre + len;
    let text = bytes.get(pre..end).ok_or_else(|| {
        IoError::truncated(format!(
            "the npy header declares {len} bytes but the file ends after {}",
            bytes.len().saturating_sub(pre)
        ))
    })?;
    // v1/v2 headers are latin-1, v3 is utf-8; keys and values we accept are ASCII.
    let text: String = if major == 3 {
        std::str::from_utf8(text)
            .map_err(|_| IoError::corrupt("the npy header is not valid UTF-8"))?
            .to_string()
    } else {
        text.iter().map(|&b| b as char).collect()
    };
    let dict = parse_dict(&text)?;
    let mut descr = None;
    let mut fortran = None;
    let mut shape = None;
    for (k, v) in dict {
        match (k.as_str(), v) {
            ("descr", Value::Str(s)) => descr = Some(s),
            ("descr", Value::List) => {
                return Err(IoError::unsupported(
                    "structured (record) dtypes are not supported",
                    "save each field as its own array",
                ));
            }
            ("fortran_order", Value::Bool(b)) => fortran = Some(b),
            ("shape", Value::Tuple(t)) => shape = Some(t),
            (key, _) => {
                return Err(IoError::corrupt(format!(
                    "npy header has an unexpected entry or value for '{key}'"
                )));
            }
        }
    }
    let descr = descr.ok_or_else(|| IoError::corrupt("npy header has no 'descr'"))?;
    let fortran_order =
        fortran.ok_or_else(|| IoError::corrupt("npy header has no 'fortran_order'"))?;
    let shape = shape.ok_or_else(|| IoError::corrupt("npy header has no 'shape'"))?;
    let (dtype, big_endian) = parse_descr(&descr)?;
    let h = Header {
        dtype,
        big_endian,
        fortran_order,
        shape,
        data_offset: end,
    };
    h.data_bytes()?;
    Ok(h)
}

fn parse_descr(d: &str) -> Result<(DType, bool)> {
    let (order, code) = match d.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, &d[1..]),
        _ => ('=', d),
    };
    let dtype = match code {
        "b1" | "?" => DType::Bool,
        "u1" | "B" => DType::U8,
        "i1" | "b" => DType::I8,
        "u2" => DType::U16,
        "i2" => DType::I16,
        "u4" => DType::U32,
        "i4" => DType::I32,
        "u8" => DType::U64,
        "i8" => DType::I64,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => {
            let what = match code.chars().next() {
                Some('c') => "complex",
                Some('O') => "object (pickled Python objects)",
                Some('S' | 'U' | 'a') => "string",
                Some('V') => "void/structured",
                Some('M' | 'm') => "datetime",
                Some('f') => "this float width",
                _ => "this",
            };
            return Err(IoError::unsupported(
                format!("npy dtype '{d}': {what} dtype is not supported"),
                "convert to a bool, integer, float32 or float64 array before saving",
            ));
        }
    };
    // '=' (native) is little-endian on every platform this crate targets.
    Ok((dtype, order == '>' && dtype.size_bytes() > 1))
}

#[derive(Debug)]
enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
    List,
}

/// Parse the Python dict literal numpy writes. Only the value forms numpy
/// produces are accepted; a list for 'descr' means a structured dtype.
fn parse_dict(s: &str) -> Result<Vec<(String, Value)>> {
    let bad = |what: &str| IoError::corrupt(format!("npy header is not a valid dict: {what}"));
    let mut p = Parser {
        s: s.as_bytes(),
        i: 0,
    };
    p.ws();
    if !p.eat(b'{') {
        return Err(bad("no opening '{'"));
    }
    let mut out = Vec::new();
    loop {
        p.ws();
        if p.eat(b'}') {
            break;
        }
        let key = p.string().ok_or_else(|| bad("expected a quoted key"))?;
        p.ws();
        if !p.eat(b':') {
            return Err(bad("expected ':'"));
        }
        p.ws();
        let value = match p.peek() {
            Some(b'\'' | b'"') => Value::Str(p.string().ok_or_else(|| bad("bad string"))?),
            Some(b'T') if p.word("True") => Value::Bool(true),
            Some(b'F') if p.word("False") => Value::Bool(false),
            Some(b'(') => Value::Tuple(p.tuple()?),
            Some(b'[') => Value::List,
            _ => return Err(bad(&format!("unexpected value for '{key}'"))),
        };
        let is_list = matches!(value, Value::List);
        out.push((key, value));
        if is_list {
            // Nothing after a structured descr matters: it is refused anyway.
            return Ok(out);
        }
        p.ws();
        if p.eat(b',') {
            continue;
        }
        p.ws();
        if p.eat(b'}') {
            break;
        }
        return Err(bad("expected ',' or '}'"));
    }
    Ok(out)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn word(&mut self, w: &str) -> bool {
        if self.s[self.i..].starts_with(w.as_bytes()) {
            self.i += w.len();
            true
        } else {
            false
        }
    }
    fn string(&mut self) -> Option<String> {
        let q = self.peek()?;
        if q != b'\'' && q != b'"' {
            return None;
        }
        self.i += 1;
        let start = self.i;
        while self.peek()? != q {
            self.i += 1;
        }
        let v = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
        self.i += 1;
        Some(v)
    }
    fn tuple(&mut self) -> Result<Vec<usize>> {
        let bad = |w: &str| IoError::corrupt(format!("npy header has a bad shape: {w}"));
        self.i += 1; // '('
        let mut dims = Vec::new();
        loop {
            self.ws();
            if self.eat(b')') {
                return Ok(dims);
            }
            let start = self.i;
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.i += 1;
            }
            if start == self.i {
                return Err(bad("expected a non-negative integer"));
            }
            let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
            let d: usize = digits.parse().map_err(|_| {
                IoError::too_large(format!("npy shape entry {digits} is too large"))
            })?;
            self.eat(b'L'); // Python 2 longs
            dims.push(d);
            if dims.len() > 64 {
                return Err(bad("more than 64 dimensions"));
            }
            self.ws();
            if self.eat(b',') {
                continue;
            }
            self.ws();
            if self.eat(b')') {
                return Ok(dims);
            }
            return Err(bad("expected ',' or ')'"));
        }
    }
}

fn descr(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "|b1",
        DType::U8 => "|u1",
        DType::I8 => "|i1",
        DType::U16 => "<u2",
        DType::I16 => "<i2",
        DType::U32 => "<u4",
        DType::I32 => "<i4",
        DType::U64 => "<u8",
        DType::I64 => "<i8",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
    }
}

/// The complete header (magic to padding) for a little-endian C-order array.
pub fn header_bytes(shape: &[usize], dtype: DType) -> Vec<u8> {
    let shape_txt = match shape.len() {
        0 => "()".to_string(),
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_txt}, }}",
        descr(dtype)
    );
    // Pad with spaces so the data start is 64-byte aligned, ending with '\n'.
    let build = |pre: usize| {
        let unpadded = pre + dict.len() + 1;
        let pad = (64 - unpadded % 64) % 64;
        dict.len() + pad + 1
    };
    let (major, pre) = if build(10) <= u16::MAX as usize {
        (1u8, 10)
    } else {
        (2u8, 12)
    };
    let hlen = build(pre);
    let mut out = Vec::with_capacity(pre + hlen);
    out.extend_from_slice(MAGIC);
    out.push(major);
    out.push(0);
    if major == 1 {
        out.extend_from_slice(&(hlen as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(hlen as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(pre + hlen - 1, b' ');
    out.push(b'\n');
    out
}

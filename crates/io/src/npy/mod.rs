//! numpy `.npy` files: header versions 1–3, every numeric dtype in either
//! byte order, Fortran or C order. Written as little-endian C order, v1 (v2
//! when the header needs it).

use crate::array::{Array, ArrayData, DType, checked_product, with_data};
use crate::error::{IoError, Result};
use std::io::Write;

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

/// Length of the fixed preamble before the header text, from its first 10 bytes
/// (or 12 for v2/v3). Returns (preamble length, header text length).
fn preamble(bytes: &[u8]) -> Result<(usize, usize, u8)> {
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

/// Decode `n` elements of `dtype` from raw bytes (`bytes.len()` must be `n * size`).
pub(crate) fn decode_elements(dtype: DType, bytes: &[u8], big_endian: bool) -> ArrayData {
    macro_rules! conv {
        ($t:ty, $var:ident) => {{
            const S: usize = std::mem::size_of::<$t>();
            ArrayData::$var(
                bytes
                    .chunks_exact(S)
                    .map(|c| {
                        let mut a = [0u8; S];
                        a.copy_from_slice(c);
                        if big_endian {
                            <$t>::from_be_bytes(a)
                        } else {
                            <$t>::from_le_bytes(a)
                        }
                    })
                    .collect(),
            )
        }};
    }
    match dtype {
        DType::Bool => ArrayData::Bool(bytes.iter().map(|&b| b != 0).collect()),
        DType::U8 => ArrayData::U8(bytes.to_vec()),
        DType::I8 => ArrayData::I8(bytes.iter().map(|&b| b as i8).collect()),
        DType::U16 => conv!(u16, U16),
        DType::I16 => conv!(i16, I16),
        DType::U32 => conv!(u32, U32),
        DType::I32 => conv!(i32, I32),
        DType::U64 => conv!(u64, U64),
        DType::I64 => conv!(i64, I64),
        DType::F32 => conv!(f32, F32),
        DType::F64 => conv!(f64, F64),
    }
}

/// Reorder Fortran-order data (first axis fastest) into C order.
fn fortran_to_c<T: Copy>(v: &[T], shape: &[usize]) -> Vec<T> {
    let nd = shape.len();
    if nd < 2 || v.is_empty() {
        return v.to_vec();
    }
    // Fortran strides, in elements.
    let mut fstride = vec![1usize; nd];
    for k in 1..nd {
        fstride[k] = fstride[k - 1] * shape[k - 1];
    }
    let mut out = Vec::with_capacity(v.len());
    let mut idx = vec![0usize; nd];
    let mut off = 0usize;
    for _ in 0..v.len() {
        out.push(v[off]);
        // Increment the C-order multi-index (last axis fastest).
        let mut k = nd;
        while k > 0 {
            k -= 1;
            idx[k] += 1;
            off += fstride[k];
            if idx[k] < shape[k] {
                break;
            }
            off -= fstride[k] * shape[k];
            idx[k] = 0;
        }
    }
    out
}

/// Decode a whole `.npy` file.
pub fn decode(bytes: &[u8]) -> Result<Array> {
    let h = parse_header(bytes)?;
    let nbytes = h.data_bytes()?;
    let avail = bytes.len() - h.data_offset;
    if avail < nbytes {
        return Err(IoError::truncated(format!(
            "header declares {nbytes} bytes of data (shape {:?}, {}) but the file holds {avail}",
            h.shape,
            h.dtype.name()
        )));
    }
    let raw = &bytes[h.data_offset..h.data_offset + nbytes];
    let mut data = decode_elements(h.dtype, raw, h.big_endian);
    if h.fortran_order {
        data = with_data!(data, v => {
            let c = fortran_to_c(&v, &h.shape);
            rewrap(c)
        });
    }
    Array::new(h.shape, data)
}

/// Rebuild an `ArrayData` from a Vec of one of its element types.
trait Rewrap: Sized {
    fn wrap(v: Vec<Self>) -> ArrayData;
}
macro_rules! rewrap_impl {
    ($($t:ty => $var:ident),*) => {$(
        impl Rewrap for $t { fn wrap(v: Vec<Self>) -> ArrayData { ArrayData::$var(v) } }
    )*};
}
rewrap_impl!(bool => Bool, u8 => U8, u16 => U16, u32 => U32, u64 => U64, i8 => I8,
    i16 => I16, i32 => I32, i64 => I64, f32 => F32, f64 => F64);
fn rewrap<T: Rewrap>(v: Vec<T>) -> ArrayData {
    T::wrap(v)
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

/// Little-endian bytes of the data, in the array's (C) order.
pub(crate) fn data_le_bytes(data: &ArrayData) -> Vec<u8> {
    match data {
        ArrayData::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
        ArrayData::U8(v) => v.clone(),
        ArrayData::I8(v) => v.iter().map(|&b| b as u8).collect(),
        ArrayData::U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ArrayData::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ArrayData::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ArrayData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ArrayData::U64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ArrayData::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ArrayData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ArrayData::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

/// Write the data in chunks so a large array is never copied whole.
pub(crate) fn write_data<W: Write + ?Sized>(w: &mut W, data: &ArrayData) -> std::io::Result<()> {
    const CHUNK: usize = 1 << 16;
    macro_rules! chunked {
        ($v:expr) => {{
            for c in $v.chunks(CHUNK) {
                let buf: Vec<u8> = c.iter().flat_map(|x| x.to_le_bytes()).collect();
                w.write_all(&buf)?;
            }
            Ok(())
        }};
    }
    match data {
        ArrayData::Bool(v) => {
            for c in v.chunks(CHUNK) {
                let buf: Vec<u8> = c.iter().map(|&b| u8::from(b)).collect();
                w.write_all(&buf)?;
            }
            Ok(())
        }
        ArrayData::U8(v) => w.write_all(v),
        ArrayData::I8(v) => chunked!(v),
        ArrayData::U16(v) => chunked!(v),
        ArrayData::I16(v) => chunked!(v),
        ArrayData::U32(v) => chunked!(v),
        ArrayData::I32(v) => chunked!(v),
        ArrayData::U64(v) => chunked!(v),
        ArrayData::I64(v) => chunked!(v),
        ArrayData::F32(v) => chunked!(v),
        ArrayData::F64(v) => chunked!(v),
    }
}

/// Encode an array as a complete `.npy` file (v1, little-endian, C order).
pub fn encode(array: &Array) -> Vec<u8> {
    let mut out = header_bytes(&array.shape, array.dtype());
    out.extend_from_slice(&data_le_bytes(&array.data));
    out
}

/// Stream an array to a writer as `.npy`.
pub fn write_to<W: Write + ?Sized>(w: &mut W, array: &Array) -> Result<()> {
    array.validate()?;
    w.write_all(&header_bytes(&array.shape, array.dtype()))
        .and_then(|_| write_data(w, &array.data))
        .map_err(|e| IoError::io("cannot write the file", e))
}

#[cfg(not(target_arch = "wasm32"))]
pub use stream::{NpyReader, NpySlabWriter, NpyWriter};

#[cfg(not(target_arch = "wasm32"))]
mod stream {
    use super::*;
    use crate::atomic::TempFile;
    use crate::error::display_name;
    use crate::pair::{PairCheck, SequentialHash, SlabHash, Tee};
    use crate::raw::{RawLayout, sidecar_hash, write_sidecar_hashed};
    use std::fs::File;
    use std::io::{BufWriter, Read, Seek, SeekFrom};
    use std::path::Path;

    /// Reads leading-axis slabs of a `.npy` file: a C-order file without
    /// loading it whole, a Fortran-order one held in memory in C order (see
    /// [`crate::fortran`]).
    pub struct NpyReader {
        file: File,
        name: String,
        header: Header,
        /// A raw file with a hashed sidecar: checked once every slice was read.
        pair: Option<PairCheck>,
        /// A Fortran-order file's data in C order, read on the first slab.
        c_order: Option<Vec<u8>>,
    }

    impl NpyReader {
        pub fn open(path: &Path) -> Result<NpyReader> {
            let name = display_name(&path.to_string_lossy());
            Self::open_inner(path).map_err(|e| e.in_file(&name))
        }

        /// Opens a headerless file described by `layout` (see [`crate::raw`]);
        /// its size must match the layout exactly.
        pub fn open_raw(path: &Path, layout: &RawLayout) -> Result<NpyReader> {
            let name = display_name(&path.to_string_lossy());
            (|| -> Result<NpyReader> {
                let header = layout.header()?;
                let file = File::open(path).map_err(|e| IoError::io("cannot open the file", e))?;
                let file_len = file
                    .metadata()
                    .map_err(|e| IoError::io("cannot stat the file", e))?
                    .len();
                layout.check_file_len(file_len)?;
                let pair = sidecar_hash(path).map(|(h, side)| PairCheck::new(layout, h, side));
                Ok(NpyReader {
                    file,
                    name: name.clone(),
                    header,
                    pair,
                    c_order: None,
                })
            })()
            .map_err(|e| e.in_file(&name))
        }

        fn open_inner(path: &Path) -> Result<NpyReader> {
            let mut file = File::open(path).map_err(|e| IoError::io("cannot open the file", e))?;
            let file_len = file
                .metadata()
                .map_err(|e| IoError::io("cannot stat the file", e))?
                .len();
            let mut start = vec![0u8; 12];
            let n = read_up_to(&mut file, &mut start)?;
            start.truncate(n);
            let (pre, hlen, _) = preamble(&start)?;
            // hlen is bounded by MAX_HEADER, so this allocation is small.
            let mut head = vec![0u8; pre + hlen];
            file.seek(SeekFrom::Start(0))
                .map_err(|e| IoError::io("cannot seek", e))?;
            let got = read_up_to(&mut file, &mut head)?;
            head.truncate(got);
            let header = parse_header(&head)?;
            if header.shape.is_empty() {
                return Err(IoError::unsupported(
                    "a 0-d array has no slabs to stream",
                    "load it with gpuscope_io::read",
                ));
            }
            let need = (header.data_offset as u64).saturating_add(header.data_bytes()? as u64);
            if file_len < need {
                return Err(IoError::truncated(format!(
                    "header declares {} bytes of data but the file holds {}",
                    header.data_bytes()?,
                    file_len.saturating_sub(header.data_offset as u64)
                )));
            }
            let name = display_name(&path.to_string_lossy());
            Ok(NpyReader {
                file,
                name,
                header,
                pair: None,
                c_order: None,
            })
        }

        pub fn shape(&self) -> &[usize] {
            &self.header.shape
        }
        pub fn dtype(&self) -> DType {
            self.header.dtype
        }
        pub fn header(&self) -> &Header {
            &self.header
        }

        /// Elements in one leading-axis slice.
        fn slice_len(&self) -> usize {
            // Cannot overflow: the whole product was checked at open.
            self.header.shape[1..].iter().product()
        }

        /// Read slices `z0 .. z0 + nz` of the leading axis.
        pub fn read_slab(&mut self, z0: usize, nz: usize) -> Result<Array> {
            let name = self.name.clone();
            self.read_slab_inner(z0, nz).map_err(|e| e.in_file(&name))
        }

        fn read_slab_inner(&mut self, z0: usize, nz: usize) -> Result<Array> {
            let n0 = self.header.shape[0];
            if z0.checked_add(nz).is_none_or(|end| end > n0) {
                return Err(IoError::invalid(
                    format!(
                        "slab {z0}..{} is outside the leading axis of length {n0}",
                        z0.saturating_add(nz)
                    ),
                    "request slices within the array's shape",
                ));
            }
            let item = self.header.dtype.size_bytes();
            let slice_bytes = self.slice_len() * item;
            let offset = self.header.data_offset as u64 + (z0 * slice_bytes) as u64;
            let mut buf = vec![0u8; nz * slice_bytes];
            if !self.fill_from_c_order(z0 * slice_bytes, &mut buf)? {
                self.file
                    .seek(SeekFrom::Start(offset))
                    .map_err(|e| IoError::io("cannot seek", e))?;
                self.file.read_exact(&mut buf).map_err(|e| {
                    if e.kind() == std::io::ErrorKind::UnexpectedEof {
                        IoError::truncated(
                            "the file ended while reading a slab (was it truncated after opening?)",
                        )
                    } else {
                        IoError::io("cannot read the file", e)
                    }
                })?;
            }
            if let Some(pair) = &mut self.pair {
                pair.read(z0, &buf)?;
            }
            let data = decode_elements(self.header.dtype, &buf, self.header.big_endian);
            let mut shape = self.header.shape.clone();
            shape[0] = nz;
            Array::new(shape, data)
        }
    }

    impl NpyReader {
        /// Fills `buf` from byte `at` of the C-order copy of a Fortran-order
        /// file (made on the first call); false for a C-order file.
        fn fill_from_c_order(&mut self, at: usize, buf: &mut [u8]) -> Result<bool> {
            let h = &self.header;
            if !(h.fortran_order && h.shape.len() > 1) {
                return Ok(false);
            }
            if self.c_order.is_none() {
                self.c_order = Some(crate::fortran::read_as_c_order(
                    &mut self.file,
                    h.data_offset as u64,
                    h.data_bytes()?,
                    &h.shape,
                    h.dtype.size_bytes(),
                )?);
            }
            let data = self.c_order.as_deref().unwrap_or_default();
            let src = data.get(at..at + buf.len()).ok_or_else(|| {
                IoError::invalid(
                    "a slab outside the array",
                    "request slices within its shape",
                )
            })?;
            buf.copy_from_slice(src);
            Ok(true)
        }

        /// Whether the file's elements are in this machine's byte order
        /// (little-endian, or one byte), so [`NpyReader::read_slab_raw`]
        /// gives them as they are in memory.
        pub fn native_order(&self) -> bool {
            !self.header.big_endian || self.header.dtype.size_bytes() == 1
        }

        /// Reads slices z0..z0+nz straight into `out` (exactly their bytes,
        /// in the file's byte order): no decoding copy, and large reads
        /// split over several threads (detector series streamed from the
        /// page cache).
        pub fn read_slab_raw(&mut self, z0: usize, nz: usize, out: &mut [u8]) -> Result<()> {
            let name = self.name.clone();
            self.read_slab_raw_inner(z0, nz, out)
                .map_err(|e| e.in_file(&name))
        }

        fn read_slab_raw_inner(&mut self, z0: usize, nz: usize, out: &mut [u8]) -> Result<()> {
            let slice_bytes = self.slice_len() * self.header.dtype.size_bytes();
            let n0 = self.header.shape[0];
            if z0.checked_add(nz).is_none_or(|end| end > n0) || out.len() != nz * slice_bytes {
                return Err(IoError::invalid(
                    format!(
                        "slab {z0}..{} of {} bytes",
                        z0.saturating_add(nz),
                        out.len()
                    ),
                    "request whole slices within the array's shape",
                ));
            }
            if self.fill_from_c_order(z0 * slice_bytes, out)? {
                return match &mut self.pair {
                    Some(pair) => pair.read(z0, out),
                    None => Ok(()),
                };
            }
            let offset = self.header.data_offset as u64 + (z0 * slice_bytes) as u64;
            // Parts of at least 8 MiB, at most one per core (8 at most).
            let cores = std::thread::available_parallelism().map_or(1, |c| c.get().min(8));
            let part_len = out.len().div_ceil(cores).max(8 << 20);
            let truncated = |e: std::io::Error| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    IoError::truncated(
                        "the file ended while reading a slab (was it truncated after opening?)",
                    )
                } else {
                    IoError::io("cannot read the file", e)
                }
            };
            #[cfg(unix)]
            if out.len() > part_len {
                use std::os::unix::fs::FileExt;
                let file = &self.file;
                let results: Vec<std::io::Result<()>> = std::thread::scope(|scope| {
                    let parts: Vec<_> = out
                        .chunks_mut(part_len)
                        .enumerate()
                        .map(|(i, part)| {
                            let at = offset + (i * part_len) as u64;
                            scope.spawn(move || file.read_exact_at(part, at))
                        })
                        .collect();
                    parts
                        .into_iter()
                        .map(|h| {
                            h.join().unwrap_or_else(|_| {
                                Err(std::io::Error::other("a reading thread failed"))
                            })
                        })
                        .collect()
                });
                results.into_iter().try_for_each(|r| r.map_err(truncated))?;
            } else {
                self.file
                    .seek(SeekFrom::Start(offset))
                    .map_err(|e| IoError::io("cannot seek", e))?;
                self.file.read_exact(out).map_err(truncated)?;
            }
            #[cfg(not(unix))]
            {
                self.file
                    .seek(SeekFrom::Start(offset))
                    .map_err(|e| IoError::io("cannot seek", e))?;
                self.file.read_exact(out).map_err(truncated)?;
            }
            match &mut self.pair {
                Some(pair) => pair.read(z0, out),
                None => Ok(()),
            }
        }
    }

    fn read_up_to(f: &mut File, buf: &mut [u8]) -> Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match f.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(IoError::io("cannot read the file", e)),
            }
        }
        Ok(n)
    }

    /// Writes a `.npy` file slab by slab; the output appears only on `finish`.
    pub struct NpyWriter {
        w: Option<BufWriter<File>>,
        tmp: Option<TempFile>,
        /// Headerless output: the path whose sidecar `finish` writes, and
        /// the pair hash of the data written so far.
        raw: Option<(std::path::PathBuf, Box<SequentialHash>)>,
        name: String,
        shape: Vec<usize>,
        dtype: DType,
        written: usize,
    }

    impl NpyWriter {
        pub fn create(path: &Path, shape: Vec<usize>, dtype: DType) -> Result<NpyWriter> {
            Self::create_with(path, shape, dtype, false)
        }

        /// A headerless (raw) file, its layout written to a sidecar on
        /// `finish` (see [`crate::raw`]).
        pub fn create_raw(path: &Path, shape: Vec<usize>, dtype: DType) -> Result<NpyWriter> {
            Self::create_with(path, shape, dtype, true)
        }

        fn create_with(
            path: &Path,
            shape: Vec<usize>,
            dtype: DType,
            raw: bool,
        ) -> Result<NpyWriter> {
            let name = display_name(&path.to_string_lossy());
            (|| -> Result<NpyWriter> {
                if shape.is_empty() {
                    return Err(IoError::invalid(
                        "NpyWriter needs at least one axis to stream along",
                        "write 0-d arrays with gpuscope_io::write",
                    ));
                }
                checked_product(&shape)
                    .and_then(|n| n.checked_mul(dtype.size_bytes()))
                    .ok_or_else(|| IoError::too_large(format!("shape {shape:?} is too large")))?;
                let (tmp, file) = TempFile::create(path)?;
                let mut w = BufWriter::new(file);
                if !raw {
                    w.write_all(&header_bytes(&shape, dtype))
                        .map_err(|e| IoError::io("cannot write the file", e))?;
                }
                let layout = RawLayout::new(shape.clone(), dtype);
                Ok(NpyWriter {
                    w: Some(w),
                    tmp: Some(tmp),
                    raw: raw.then(|| (path.to_path_buf(), Box::new(SequentialHash::new(&layout)))),
                    name: name.clone(),
                    shape,
                    dtype,
                    written: 0,
                })
            })()
            .map_err(|e| e.in_file(&name))
        }

        /// Append slices along the leading axis; the array's trailing shape must match.
        pub fn write_slab(&mut self, slab: &Array) -> Result<()> {
            let name = self.name.clone();
            self.write_slab_inner(slab).map_err(|e| e.in_file(&name))
        }

        fn write_slab_inner(&mut self, slab: &Array) -> Result<()> {
            slab.validate()?;
            if slab.dtype() != self.dtype {
                return Err(IoError::invalid(
                    format!(
                        "slab dtype {} differs from the file's {}",
                        slab.dtype().name(),
                        self.dtype.name()
                    ),
                    "cast the slab with Array::cast first",
                ));
            }
            if slab.shape.len() != self.shape.len() || slab.shape[1..] != self.shape[1..] {
                return Err(IoError::invalid(
                    format!(
                        "slab shape {:?} does not fit file shape {:?}",
                        slab.shape, self.shape
                    ),
                    "slabs must have the file's shape except along the first axis",
                ));
            }
            let after = self.written + slab.shape[0];
            if after > self.shape[0] {
                return Err(IoError::invalid(
                    format!(
                        "writing this slab would give {after} slices but the file declares {}",
                        self.shape[0]
                    ),
                    "write exactly the declared number of slices",
                ));
            }
            let w = self.w.as_mut().ok_or_else(|| {
                IoError::invalid("the writer is already finished", "create a new writer")
            })?;
            match &mut self.raw {
                Some((_, hash)) => write_data(&mut Tee { w, hash }, &slab.data),
                None => write_data(w, &slab.data),
            }
            .map_err(|e| IoError::io("cannot write the file", e))?;
            self.written = after;
            Ok(())
        }

        /// Complete the file; errors (and leaves no output) unless every slice was written.
        pub fn finish(mut self) -> Result<()> {
            let name = self.name.clone();
            if self.written != self.shape[0] {
                return Err(IoError::invalid(
                    format!(
                        "only {} of {} slices were written",
                        self.written, self.shape[0]
                    ),
                    "write every slice before finish; no file was created",
                )
                .in_file(&name));
            }
            match (self.tmp.take(), self.w.take()) {
                (Some(tmp), Some(w)) => tmp.commit(w).map_err(|e| e.in_file(&name))?,
                _ => {
                    return Err(
                        IoError::invalid("the writer is already finished", "").in_file(&name)
                    );
                }
            }
            match &self.raw {
                Some((path, hash)) => write_sidecar_hashed(
                    path,
                    &RawLayout::new(self.shape.clone(), self.dtype),
                    hash.finish(),
                ),
                None => Ok(()),
            }
        }
    }

    /// A `.npy` file of a known shape whose slabs are written at their own
    /// offsets, by several threads at once (one per GPU); like [`NpyWriter`]
    /// the output appears only on `finish`, complete.
    pub struct NpySlabWriter {
        file: File,
        tmp: TempFile,
        name: String,
        shape: Vec<usize>,
        dtype: DType,
        header: u64,
        /// Headerless output: the path whose sidecar `finish` writes, and
        /// the pair hash of the slabs written so far.
        raw: Option<(std::path::PathBuf, SlabHash)>,
        written: std::sync::atomic::AtomicUsize,
    }

    impl NpySlabWriter {
        pub fn create(path: &Path, shape: Vec<usize>, dtype: DType) -> Result<NpySlabWriter> {
            Self::create_with(path, shape, dtype, false)
        }

        /// A headerless (raw) file, its layout written to a sidecar on
        /// `finish` (see [`crate::raw`]).
        pub fn create_raw(path: &Path, shape: Vec<usize>, dtype: DType) -> Result<NpySlabWriter> {
            Self::create_with(path, shape, dtype, true)
        }

        fn create_with(
            path: &Path,
            shape: Vec<usize>,
            dtype: DType,
            raw: bool,
        ) -> Result<NpySlabWriter> {
            let name = display_name(&path.to_string_lossy());
            (|| -> Result<NpySlabWriter> {
                if shape.is_empty() {
                    return Err(IoError::invalid(
                        "NpySlabWriter needs at least one axis to write along",
                        "write 0-d arrays with gpuscope_io::write",
                    ));
                }
                let data = checked_product(&shape)
                    .and_then(|n| n.checked_mul(dtype.size_bytes()))
                    .ok_or_else(|| IoError::too_large(format!("shape {shape:?} is too large")))?;
                let (tmp, mut file) = TempFile::create(path)?;
                let header = if raw {
                    Vec::new()
                } else {
                    header_bytes(&shape, dtype)
                };
                file.write_all(&header)
                    .and_then(|()| file.set_len((header.len() + data) as u64))
                    .map_err(|e| IoError::io("cannot write the file", e))?;
                let raw = raw.then(|| {
                    let layout = RawLayout::new(shape.clone(), dtype);
                    (path.to_path_buf(), SlabHash::new(&layout))
                });
                Ok(NpySlabWriter {
                    file,
                    tmp,
                    name: name.clone(),
                    shape,
                    dtype,
                    header: header.len() as u64,
                    raw,
                    written: std::sync::atomic::AtomicUsize::new(0),
                })
            })()
            .map_err(|e| e.in_file(&name))
        }

        /// Writes `slab` as slices `z0..z0 + slab.shape[0]`; each slice must
        /// be written exactly once.
        pub fn write_at(&self, z0: usize, slab: &Array) -> Result<()> {
            self.write_at_inner(z0, slab)
                .map_err(|e| e.in_file(&self.name))
        }

        fn write_at_inner(&self, z0: usize, slab: &Array) -> Result<()> {
            slab.validate()?;
            if slab.dtype() != self.dtype
                || slab.shape.len() != self.shape.len()
                || slab.shape[1..] != self.shape[1..]
                || z0 + slab.shape[0] > self.shape[0]
            {
                return Err(IoError::invalid(
                    format!(
                        "slab {:?} {} at slice {z0} does not fit file {:?} {}",
                        slab.shape,
                        slab.dtype().name(),
                        self.shape,
                        self.dtype.name()
                    ),
                    "write slabs of the file's dtype and trailing shape within its slices",
                ));
            }
            let plane: usize = self.shape[1..].iter().product::<usize>() * self.dtype.size_bytes();
            let mut bytes = Vec::with_capacity(slab.shape[0] * plane);
            write_data(&mut bytes, &slab.data)
                .map_err(|e| IoError::io("cannot write the file", e))?;
            let offset = self.header + (z0 * plane) as u64;
            write_all_at(&self.file, &bytes, offset)
                .map_err(|e| IoError::io("cannot write the file", e))?;
            if let Some((_, hash)) = &self.raw {
                hash.add(z0, &bytes);
            }
            self.written
                .fetch_add(slab.shape[0], std::sync::atomic::Ordering::Relaxed);
            Ok(())
        }

        /// Completes the file; errors (and leaves no output) unless every
        /// slice was written.
        pub fn finish(self) -> Result<()> {
            let written = self.written.load(std::sync::atomic::Ordering::Relaxed);
            if written != self.shape[0] {
                return Err(IoError::invalid(
                    format!("only {written} of {} slices were written", self.shape[0]),
                    "write every slice before finish; no file was created",
                )
                .in_file(&self.name));
            }
            let name = self.name;
            self.tmp
                .commit_file(self.file)
                .map_err(|e| e.in_file(&name))?;
            match &self.raw {
                Some((path, hash)) => write_sidecar_hashed(
                    path,
                    &RawLayout::new(self.shape, self.dtype),
                    hash.finish(),
                ),
                None => Ok(()),
            }
        }
    }

    #[cfg(unix)]
    fn write_all_at(file: &File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
    }

    #[cfg(windows)]
    fn write_all_at(file: &File, mut bytes: &[u8], mut offset: u64) -> std::io::Result<()> {
        while !bytes.is_empty() {
            let n = std::os::windows::fs::FileExt::seek_write(file, bytes, offset)?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            bytes = &bytes[n..];
            offset += n as u64;
        }
        Ok(())
    }
}

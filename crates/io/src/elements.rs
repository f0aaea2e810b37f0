//! Samples as bytes: the element codecs every format shares (npy, raw,
//! FITS), in either byte order.

use crate::array::{ArrayData, DType};
use std::io::Write;

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

/// The dtype of a `size`-byte integer or IEEE float, as HDF5 datatypes
/// describe them (both HDF5 readers map their own type messages through
/// these); `None` for other sizes.
pub(crate) fn integer_dtype(size: usize, signed: bool) -> Option<DType> {
    Some(match (size, signed) {
        (1, false) => DType::U8,
        (1, true) => DType::I8,
        (2, false) => DType::U16,
        (2, true) => DType::I16,
        (4, false) => DType::U32,
        (4, true) => DType::I32,
        (8, false) => DType::U64,
        (8, true) => DType::I64,
        _ => return None,
    })
}

pub(crate) fn float_dtype(size: usize) -> Option<DType> {
    match size {
        4 => Some(DType::F32),
        8 => Some(DType::F64),
        _ => None,
    }
}

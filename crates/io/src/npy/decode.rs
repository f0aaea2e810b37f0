//! A whole `.npy` file decoded in memory, Fortran order reordered to C.

use super::parse_header;
use crate::array::{Array, ArrayData, with_data};
use crate::elements::decode_elements;
use crate::error::{IoError, Result};

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

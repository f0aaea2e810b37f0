//! Fortran-order (first axis fastest) `.npy` data reordered to C order for
//! the slab reader: the whole array is read once and held in C order, one
//! copy of the data (briefly two while it is reordered). Slabs along the
//! leading axis of a Fortran-order file are scattered over the whole file,
//! so it cannot be streamed as C-order files are.

use crate::error::{ErrorKind, IoError, Result};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

/// Reads `data_bytes` bytes at `offset` of `file`, Fortran order of `shape`
/// with `item`-byte elements, and returns them in C order.
pub(crate) fn read_as_c_order(
    file: &mut File,
    offset: u64,
    data_bytes: usize,
    shape: &[usize],
    item: usize,
) -> Result<Vec<u8>> {
    let too_big = |what: &str| {
        IoError::new(
            ErrorKind::TooLarge,
            format!(
                "this Fortran-order file ({data_bytes} bytes of data) cannot be held in memory {what}"
            ),
            "re-save it in C order (numpy.ascontiguousarray) to stream it slab by slab",
        )
    };
    let mut src = Vec::new();
    src.try_reserve_exact(data_bytes)
        .map_err(|_| too_big("to reorder it"))?;
    src.resize(data_bytes, 0);
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| IoError::io("cannot seek", e))?;
    file.read_exact(&mut src).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            IoError::truncated("the file ended while reading it (was it truncated after opening?)")
        } else {
            IoError::io("cannot read the file", e)
        }
    })?;
    let mut out = Vec::new();
    out.try_reserve_exact(data_bytes)
        .map_err(|_| too_big("twice over while it is reordered"))?;
    match item {
        1 => reorder::<1>(&src, shape, &mut out),
        2 => reorder::<2>(&src, shape, &mut out),
        4 => reorder::<4>(&src, shape, &mut out),
        8 => reorder::<8>(&src, shape, &mut out),
        n => {
            return Err(IoError::unsupported(
                format!("{n}-byte elements in Fortran order"),
                "re-save the file in C order",
            ));
        }
    }
    Ok(out)
}

/// Appends the `N`-byte elements of Fortran-order `src` to `out` in C order
/// (last axis fastest).
fn reorder<const N: usize>(src: &[u8], shape: &[usize], out: &mut Vec<u8>) {
    let nd = shape.len();
    let count = src.len() / N;
    let mut fstride = vec![1usize; nd];
    for k in 1..nd {
        fstride[k] = fstride[k - 1] * shape[k - 1];
    }
    let mut idx = vec![0usize; nd];
    let mut off = 0usize;
    for _ in 0..count {
        out.extend_from_slice(&src[off * N..off * N + N]);
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
}

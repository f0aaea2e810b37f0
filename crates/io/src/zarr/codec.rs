//! Decoding a chunk's bytes through its codec pipeline into samples
//! (little-endian, C order). Pure functions of byte slices: no files, so
//! the same code serves the page later.
//!
//! Decompressors stop at the size the chunk's shape declares (plus the
//! slack a checksum needs), so a small hostile chunk cannot expand into
//! gigabytes.

use std::io::Read;

use super::meta::{Codec, Sharding};
use crate::{DType, IoError, Result};

/// Bytes of a chunk of `shape` with `elem`-byte samples.
pub(crate) fn chunk_bytes(shape: &[usize], elem: usize) -> Result<usize> {
    crate::checked_product(shape)
        .and_then(|n| n.checked_mul(elem))
        .ok_or_else(|| {
            IoError::too_large(format!(
                "chunks of {shape:?} hold more bytes than can be addressed"
            ))
        })
}

/// Decodes `bytes` (one stored chunk) into the samples of a chunk of
/// `shape`, little-endian in C order. `fill`: one element, for the missing
/// inner chunks of a shard.
pub(crate) fn decode_chunk(
    codecs: &[Codec],
    shape: &[usize],
    dtype: DType,
    fill: &[u8],
    bytes: Vec<u8>,
) -> Result<Vec<u8>> {
    let elem = dtype.size_bytes();
    let expected = chunk_bytes(shape, elem)?;
    let at = codecs
        .iter()
        .position(|c| matches!(c, Codec::Bytes { .. } | Codec::Sharding(_)))
        .ok_or_else(|| IoError::corrupt("the codecs hold no bytes codec"))?;
    // Shapes as each array-to-array codec sees them.
    let mut shapes = vec![shape.to_vec()];
    for c in &codecs[..at] {
        if let Codec::Transpose(order) = c {
            let s = shapes.last().cloned().unwrap_or_default();
            shapes.push(
                order
                    .iter()
                    .map(|&i| s.get(i).copied().unwrap_or(1))
                    .collect(),
            );
        }
    }
    let mut data = bytes;
    for c in codecs[at + 1..].iter().rev() {
        data = bytes_to_bytes(c, &data, expected)?;
    }
    let encoded_shape = shapes.last().cloned().unwrap_or_default();
    let mut data = match &codecs[at] {
        Codec::Bytes { big } => {
            if data.len() != expected {
                return Err(IoError::corrupt(format!(
                    "a chunk decodes to {} bytes where its shape {encoded_shape:?} of {} needs {expected}",
                    data.len(),
                    dtype.name()
                )));
            }
            if *big && elem > 1 {
                data.chunks_exact_mut(elem).for_each(|e| e.reverse());
            }
            data
        }
        Codec::Sharding(sh) => decode_shard(sh, &encoded_shape, dtype, fill, &data)?,
        _ => return Err(IoError::corrupt("the codecs hold no bytes codec")),
    };
    for (k, c) in codecs[..at].iter().enumerate().rev() {
        if let Codec::Transpose(order) = c {
            data = untranspose(&data, &shapes[k + 1], order, elem);
        }
    }
    Ok(data)
}

/// Undoes one bytes-to-bytes codec; `expected` bounds what it may expand to.
fn bytes_to_bytes(c: &Codec, data: &[u8], expected: usize) -> Result<Vec<u8>> {
    // Compressed data of incompressible samples is a little larger than them.
    let cap = expected
        .saturating_add(expected / 16)
        .saturating_add(4096)
        .min(crate::decoded_size_limit(data.len()));
    match c {
        Codec::Gzip => inflate(flate2::read::GzDecoder::new(data), cap, "gzip"),
        Codec::Zlib => inflate(flate2::read::ZlibDecoder::new(data), cap, "zlib"),
        Codec::Zstd => {
            // Last resort: the decoder is not ours to audit on every damaged stream.
            let run = std::panic::catch_unwind(|| -> Result<Vec<u8>> {
                // The decoder's messages quote the bytes it read (a bad magic
                // number is the chunk's first four bytes): never repeat them.
                let dec = ruzstd::decoding::StreamingDecoder::new(data).map_err(|_| {
                    IoError::corrupt(
                        "a chunk's zstd stream is damaged (no zstd frame at its start)",
                    )
                })?;
                inflate(dec, cap, "zstd")
            });
            run.unwrap_or_else(|_| Err(IoError::corrupt("a chunk's zstd stream is damaged")))
        }
        Codec::Blosc => super::blosc::decode(data, cap),
        Codec::Crc32c => {
            let Some(split) = data.len().checked_sub(4) else {
                return Err(IoError::truncated(
                    "a chunk is shorter than its crc32c checksum",
                ));
            };
            let (body, sum) = data.split_at(split);
            let stored = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
            if crc32c(body) != stored {
                return Err(IoError::corrupt(
                    "a chunk's crc32c checksum does not match its data",
                ));
            }
            Ok(body.to_vec())
        }
        _ => Err(IoError::corrupt(
            "the codecs list has an array codec after its bytes codec",
        )),
    }
}

fn inflate(r: impl Read, cap: usize, what: &str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    r.take(cap as u64 + 1).read_to_end(&mut out).map_err(|e| {
        // flate2's messages are fixed texts; ruzstd's may quote data.
        let why = if what == "zstd" {
            String::new()
        } else {
            format!(": {e}")
        };
        IoError::corrupt(format!("a chunk's {what} stream is damaged{why}"))
    })?;
    if out.len() > cap {
        return Err(IoError::corrupt(format!(
            "a chunk's {what} stream expands beyond the {cap} bytes its shape allows"
        )));
    }
    Ok(out)
}

/// The array of `decoded` axes from its transposed encoding of shape
/// `enc_shape` (the encoded axis `i` is the decoded axis `order[i]`).
fn untranspose(data: &[u8], enc_shape: &[usize], order: &[usize], elem: usize) -> Vec<u8> {
    let nd = enc_shape.len();
    let mut shape = vec![0; nd];
    let mut src_stride = vec![0; nd];
    let mut stride = elem;
    for i in (0..nd).rev() {
        shape[order[i]] = enc_shape[i];
        src_stride[order[i]] = stride;
        stride *= enc_shape[i];
    }
    let mut out = Vec::with_capacity(data.len());
    let n: usize = shape.iter().product();
    let mut idx = vec![0usize; nd];
    let mut offset = 0usize;
    for _ in 0..n {
        out.extend_from_slice(&data[offset..offset + elem]);
        // Odometer over the decoded index, C order.
        for d in (0..nd).rev() {
            idx[d] += 1;
            offset += src_stride[d];
            if idx[d] < shape[d] {
                break;
            }
            offset -= src_stride[d] * shape[d];
            idx[d] = 0;
        }
    }
    out
}

/// A shard's index: (offset, length) of each inner chunk, C order over the
/// inner-chunk grid; `None` for a chunk not stored.
pub(crate) struct ShardIndex {
    pub entries: Vec<Option<(u64, u64)>>,
}

impl ShardIndex {
    /// Bytes of the encoded index of `n` inner chunks.
    pub fn encoded_len(sh: &Sharding, n: usize) -> Result<usize> {
        let crc = sh.index_codecs.contains(&Codec::Crc32c);
        n.checked_mul(16)
            .and_then(|b| b.checked_add(if crc { 4 } else { 0 }))
            .ok_or_else(|| IoError::too_large("the shard index is larger than can be addressed"))
    }

    pub fn decode(sh: &Sharding, n: usize, bytes: &[u8], shard_len: u64) -> Result<ShardIndex> {
        let mut data = bytes.to_vec();
        let at = sh
            .index_codecs
            .iter()
            .position(|c| matches!(c, Codec::Bytes { .. }))
            .unwrap_or(0);
        for c in sh.index_codecs[at + 1..].iter().rev() {
            data = bytes_to_bytes(c, &data, n.saturating_mul(16))?;
        }
        let big = matches!(sh.index_codecs.get(at), Some(Codec::Bytes { big: true }));
        if data.len() != n * 16 {
            return Err(IoError::corrupt("a shard index has the wrong length"));
        }
        let word = |b: &[u8]| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            if big {
                u64::from_be_bytes(a)
            } else {
                u64::from_le_bytes(a)
            }
        };
        let mut entries = Vec::with_capacity(n);
        for e in data.chunks_exact(16) {
            let (off, len) = (word(&e[..8]), word(&e[8..]));
            if off == u64::MAX && len == u64::MAX {
                entries.push(None);
            } else if off.checked_add(len).is_none_or(|end| end > shard_len) {
                return Err(IoError::corrupt(format!(
                    "a shard index points to bytes {off}..{} of a shard of {shard_len} bytes",
                    off.saturating_add(len)
                )));
            } else {
                entries.push(Some((off, len)));
            }
        }
        Ok(ShardIndex { entries })
    }
}

/// Inner chunks per axis of a shard.
pub(crate) fn inner_grid(sh: &Sharding, shard: &[usize]) -> Vec<usize> {
    shard.iter().zip(&sh.inner).map(|(s, i)| s / i).collect()
}

/// A whole shard held in memory (sharding nested in a pipeline).
fn decode_shard(
    sh: &Sharding,
    shape: &[usize],
    dtype: DType,
    fill: &[u8],
    bytes: &[u8],
) -> Result<Vec<u8>> {
    let elem = dtype.size_bytes();
    let grid = inner_grid(sh, shape);
    let n = crate::checked_product(&grid).unwrap_or(usize::MAX);
    let ilen = ShardIndex::encoded_len(sh, n)?;
    if ilen > bytes.len() {
        return Err(IoError::truncated("a shard is shorter than its index"));
    }
    let ibytes = if sh.index_at_end {
        &bytes[bytes.len() - ilen..]
    } else {
        &bytes[..ilen]
    };
    let index = ShardIndex::decode(sh, n, ibytes, bytes.len() as u64)?;
    let total = chunk_bytes(shape, elem)?;
    if total > crate::decoded_size_limit(bytes.len()) {
        return Err(IoError::too_large(format!(
            "a shard of {shape:?} is more than its {} bytes can hold",
            bytes.len()
        )));
    }
    let mut out: Vec<u8> = fill.iter().copied().cycle().take(total).collect();
    for (k, entry) in index.entries.iter().enumerate() {
        let Some((off, len)) = *entry else { continue };
        let piece = bytes[off as usize..(off + len) as usize].to_vec();
        let inner = decode_chunk(&sh.codecs, &sh.inner, dtype, fill, piece)?;
        let origin = unravel(k, &grid)
            .iter()
            .zip(&sh.inner)
            .map(|(g, i)| g * i)
            .collect::<Vec<_>>();
        let zero = vec![0; shape.len()];
        copy_box(
            &inner, &sh.inner, &zero, &mut out, shape, &origin, &sh.inner, elem,
        );
    }
    Ok(out)
}

/// The C-order coordinates of flat index `k` in `grid`.
pub(crate) fn unravel(mut k: usize, grid: &[usize]) -> Vec<usize> {
    let mut c = vec![0; grid.len()];
    for d in (0..grid.len()).rev() {
        let g = grid[d].max(1);
        c[d] = k % g;
        k /= g;
    }
    c
}

/// Copies the box of extent `size`, at `from_at` in `src` (shape `src_shape`)
/// to `to_at` in `dst` (shape `dst_shape`); C order, `elem`-byte samples.
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_box(
    src: &[u8],
    src_shape: &[usize],
    from_at: &[usize],
    dst: &mut [u8],
    dst_shape: &[usize],
    to_at: &[usize],
    size: &[usize],
    elem: usize,
) {
    let nd = size.len();
    if nd == 0 {
        dst[..elem].copy_from_slice(&src[..elem]);
        return;
    }
    if size.contains(&0) {
        return;
    }
    let strides = |shape: &[usize]| {
        let mut s = vec![elem; nd];
        for d in (0..nd - 1).rev() {
            s[d] = s[d + 1] * shape[d + 1];
        }
        s
    };
    let (ss, ds) = (strides(src_shape), strides(dst_shape));
    let row = size[nd - 1] * elem;
    let rows: usize = size[..nd - 1].iter().product();
    let mut idx = vec![0usize; nd - 1];
    for _ in 0..rows {
        let mut so = from_at[nd - 1] * elem;
        let mut d_o = to_at[nd - 1] * elem;
        for d in 0..nd - 1 {
            so += (from_at[d] + idx[d]) * ss[d];
            d_o += (to_at[d] + idx[d]) * ds[d];
        }
        dst[d_o..d_o + row].copy_from_slice(&src[so..so + row]);
        for d in (0..nd - 1).rev() {
            idx[d] += 1;
            if idx[d] < size[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// CRC-32C (Castagnoli), as the crc32c codec stores it.
pub(crate) fn crc32c(data: &[u8]) -> u32 {
    const fn table() -> [u32; 256] {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0x82F6_3B78
                } else {
                    c >> 1
                };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    }
    static TABLE: [u32; 256] = table();
    let mut c = !0u32;
    for &b in data {
        c = TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_check_value() {
        // The standard check value of CRC-32C.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn untranspose_inverts_a_2d_transpose() {
        // Encoded: the transpose (3 x 2) of [[0,1,2],[3,4,5]].
        let enc = [0u8, 3, 1, 4, 2, 5];
        assert_eq!(
            untranspose(&enc, &[3, 2], &[1, 0], 1),
            vec![0, 1, 2, 3, 4, 5]
        );
    }
}

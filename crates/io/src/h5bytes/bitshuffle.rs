//! The bitshuffle filter (HDF5 filter 32008) with its LZ4 blocks, as the
//! Eiger detectors write it: `hdf5-reader` decodes filters by id and has no
//! bitshuffle of its own.
//!
//! A chunk is a 12-byte header (uncompressed size as u64 big-endian, block
//! size in bytes as u32 big-endian) then, per block, a u32 big-endian
//! compressed size and an LZ4 block. A decompressed block of `n` elements
//! (`n` a multiple of 8) holds `8 * elem` rows of `n` bits: row `8 * b + j`,
//! bit `i` is bit `j` of byte `b` of element `i`. The last
//! `len % 8` elements are stored raw.

/// `cd_values[4]` of the filter: 0 bitshuffle only, 2 with LZ4.
const COMPRESS_LZ4: u32 = 2;

/// Decodes one chunk; `limit` bounds the declared size.
pub fn decode(cd: &[u32], data: &[u8], elem: usize, limit: usize) -> Result<Vec<u8>, String> {
    if elem == 0 {
        return Err("bitshuffle: element size 0".into());
    }
    match cd.get(4).copied().unwrap_or(0) {
        COMPRESS_LZ4 => decode_lz4(data, elem, limit),
        0 => {
            if !data.len().is_multiple_of(elem) {
                return Err("bitshuffle: the chunk is not a whole number of elements".into());
            }
            let mut out = vec![0u8; data.len()];
            let block = cd.get(3).map_or(0, |&b| b as usize);
            unshuffle_blocks(data, &mut out, elem, block);
            Ok(out)
        }
        c => Err(format!(
            "bitshuffle with compression {c} (only LZ4 is decoded)"
        )),
    }
}

fn be32(data: &[u8], at: usize) -> Option<u32> {
    let b = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn decode_lz4(data: &[u8], elem: usize, limit: usize) -> Result<Vec<u8>, String> {
    let short = || "bitshuffle-LZ4: the chunk ends early".to_string();
    let total = match data.get(0..8) {
        Some(b) => u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        None => return Err(short()),
    };
    let total = usize::try_from(total)
        .ok()
        .filter(|&t| t <= limit)
        .ok_or_else(|| {
            format!("bitshuffle-LZ4: a chunk declares {total} bytes, more than the file can hold")
        })?;
    if !total.is_multiple_of(elem) {
        return Err("bitshuffle-LZ4: the declared size is not a whole number of elements".into());
    }
    let block_bytes = be32(data, 8).ok_or_else(short)? as usize;
    let n = total / elem;
    let mut block = if block_bytes == 0 {
        0
    } else {
        block_bytes / elem
    };
    if block == 0 || !block.is_multiple_of(8) {
        // The library's default: 8192 bytes' worth, a multiple of 8 elements.
        block = (8192 / elem).max(8) / 8 * 8;
    }
    let mut out = vec![0u8; total];
    let mut pos = 12usize;
    let mut done = 0usize; // elements
    let mut scratch = Vec::new();
    while n - done >= 8 {
        let count = block.min((n - done) / 8 * 8);
        let size = be32(data, pos).ok_or_else(short)? as usize;
        pos += 4;
        let end = pos
            .checked_add(size)
            .filter(|&e| e <= data.len())
            .ok_or_else(short)?;
        scratch.clear();
        scratch.resize(count * elem, 0);
        let got = lz4_flex::block::decompress_into(&data[pos..end], &mut scratch)
            .map_err(|e| format!("bitshuffle-LZ4: a damaged LZ4 block ({e})"))?;
        if got != count * elem {
            return Err("bitshuffle-LZ4: a block decodes to the wrong size".into());
        }
        unshuffle(&scratch, &mut out[done * elem..(done + count) * elem], elem);
        pos = end;
        done += count;
    }
    let rest = (n - done) * elem;
    let tail = data.get(pos..pos + rest).ok_or_else(short)?;
    out[done * elem..].copy_from_slice(tail);
    Ok(out)
}

/// Bitshuffle without compression: blocks of `block` elements (0: the
/// default), the last `len % 8` elements raw.
fn unshuffle_blocks(data: &[u8], out: &mut [u8], elem: usize, block: usize) {
    let n = data.len() / elem;
    let block = if block == 0 || !block.is_multiple_of(8) {
        (8192 / elem).max(8) / 8 * 8
    } else {
        block
    };
    let mut done = 0;
    while n - done >= 8 {
        let count = block.min((n - done) / 8 * 8);
        let r = done * elem..(done + count) * elem;
        unshuffle(&data[r.clone()], &mut out[r], elem);
        done += count;
    }
    out[done * elem..].copy_from_slice(&data[done * elem..]);
}

/// Inverse bit transpose of one block: `input` and `out` hold `n * elem`
/// bytes, `n` a multiple of 8.
fn unshuffle(input: &[u8], out: &mut [u8], elem: usize) {
    let n = out.len() / elem;
    let row = n / 8;
    out.fill(0);
    for b in 0..elem {
        for j in 0..8 {
            let bits = &input[(b * 8 + j) * row..(b * 8 + j + 1) * row];
            for (k, &byte) in bits.iter().enumerate() {
                if byte == 0 {
                    continue;
                }
                for m in 0..8 {
                    out[(8 * k + m) * elem + b] |= ((byte >> m) & 1) << j;
                }
            }
        }
    }
}

/// Encodes `data` (`elem`-byte elements) as one bitshuffle-LZ4 chunk in
/// blocks of the library's default size, as the filter writes it: for
/// benchmarks and tests that need compressed frames.
pub fn encode_lz4(data: &[u8], elem: usize) -> Vec<u8> {
    let elem = elem.max(1);
    let n = data.len() / elem;
    let block = (8192 / elem).max(8) / 8 * 8;
    let mut chunk = Vec::with_capacity(data.len() / 4 + 64);
    chunk.extend_from_slice(&((n * elem) as u64).to_be_bytes());
    chunk.extend_from_slice(&((block * elem) as u32).to_be_bytes());
    let mut done = 0;
    let mut rows = Vec::new();
    while n - done >= 8 {
        let count = block.min((n - done) / 8 * 8);
        shuffle_into(&data[done * elem..(done + count) * elem], elem, &mut rows);
        let c = lz4_flex::block::compress(&rows);
        chunk.extend_from_slice(&(c.len() as u32).to_be_bytes());
        chunk.extend_from_slice(&c);
        done += count;
    }
    chunk.extend_from_slice(&data[done * elem..n * elem]);
    chunk
}

/// The forward transpose of one block (`n` a multiple of 8 elements) into
/// `out`: bit `j` of byte `b` of element `i` to bit `i` of row `8 * b + j`.
fn shuffle_into(input: &[u8], elem: usize, out: &mut Vec<u8>) {
    let n = input.len() / elem;
    let row = n / 8;
    out.clear();
    out.resize(input.len(), 0);
    for i in 0..n {
        for b in 0..elem {
            let byte = input[i * elem + b];
            if byte == 0 {
                continue;
            }
            for j in 0..8 {
                out[(b * 8 + j) * row + i / 8] |= ((byte >> j) & 1) << (i % 8);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The forward transpose, written from the format's definition.
    fn shuffle(input: &[u8], elem: usize) -> Vec<u8> {
        let n = input.len() / elem;
        let row = n / 8;
        let mut out = vec![0u8; input.len()];
        for i in 0..n {
            for b in 0..elem {
                for j in 0..8 {
                    let bit = (input[i * elem + b] >> j) & 1;
                    out[(b * 8 + j) * row + i / 8] |= bit << (i % 8);
                }
            }
        }
        out
    }

    #[test]
    fn encoded_chunks_decode_back() {
        for (elem, n) in [(1usize, 9000), (2, 4099), (4, 2053), (4, 5)] {
            let data: Vec<u8> = (0..n * elem).map(|i| ((i * i) % 7) as u8).collect();
            let chunk = encode_lz4(&data, elem);
            assert_eq!(
                decode(&[0, 0, 0, 0, 2], &chunk, elem, 1 << 20).unwrap(),
                data
            );
            let mut rows = Vec::new();
            shuffle_into(&data[..n / 8 * 8 * elem], elem, &mut rows);
            assert_eq!(rows, shuffle(&data[..n / 8 * 8 * elem], elem));
        }
    }

    #[test]
    fn unshuffle_inverts_the_transpose() {
        for elem in [1usize, 2, 4, 8] {
            let data: Vec<u8> = (0..64 * elem).map(|i| (i * 37 + 11) as u8).collect();
            let mut back = vec![0u8; data.len()];
            unshuffle(&shuffle(&data, elem), &mut back, elem);
            assert_eq!(back, data, "elem {elem}");
        }
    }

    #[test]
    fn lz4_chunk_with_raw_tail_decodes() {
        let elem = 4;
        let data: Vec<u8> = (0..(21 * elem)).map(|i| (i * 7) as u8).collect();
        // 16 elements in two blocks of 8, then 5 raw elements.
        let mut chunk = Vec::new();
        chunk.extend_from_slice(&(data.len() as u64).to_be_bytes());
        chunk.extend_from_slice(&((8 * elem) as u32).to_be_bytes());
        for k in 0..2 {
            let c =
                lz4_flex::block::compress(&shuffle(&data[k * 8 * elem..(k + 1) * 8 * elem], elem));
            chunk.extend_from_slice(&(c.len() as u32).to_be_bytes());
            chunk.extend_from_slice(&c);
        }
        chunk.extend_from_slice(&data[16 * elem..]);
        assert_eq!(
            decode(&[0, 0, 4, 0, 2], &chunk, elem, 1 << 20).unwrap(),
            data
        );
        // Truncated: an error, not a panic.
        assert!(decode(&[0, 0, 4, 0, 2], &chunk[..chunk.len() - 3], elem, 1 << 20).is_err());
        // A declared size over the limit is refused before allocating.
        assert!(decode(&[0, 0, 4, 0, 2], &chunk, elem, 16).is_err());
    }
}

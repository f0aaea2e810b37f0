//! The reference twin of the GPU decoder: plain code for tests and `--cpu`.
//! Its LZ4 block decoder makes the checks lz4_flex's safe decoder makes,
//! in the same order, so both accept and refuse the same streams.

use super::{ChunkLayout, damaged};
use crate::error::Result;

/// Decodes one bitshuffle-LZ4 chunk of `elem`-byte elements into its raw
/// little-endian bytes; `limit` bounds the decoded size its header may
/// declare.
pub fn decode(chunk: &[u8], elem: usize, limit: usize) -> Result<Vec<u8>> {
    let layout = ChunkLayout::parse(chunk, elem, limit)?;
    let mut out = vec![0u8; layout.total];
    let mut scratch = Vec::new();
    for (k, b) in layout.blocks.iter().enumerate() {
        scratch.clear();
        lz4_block(&chunk[b.src..b.src + b.src_len], b.dst_len, &mut scratch)
            .map_err(|problem| damaged(format!("block {k}: {problem}")))?;
        unshuffle(&scratch, &mut out[b.dst..b.dst + b.dst_len], elem);
    }
    let (at, len) = layout.tail;
    out[layout.total - len..].copy_from_slice(&chunk[at..at + len]);
    Ok(out)
}

/// Reads an LZ4 length continuation: bytes added while they are 255.
fn more_length(input: &[u8], pos: &mut usize) -> Result<usize, &'static str> {
    let mut n = 0usize;
    loop {
        let b = *input.get(*pos).ok_or("a length runs past its end")?;
        *pos += 1;
        n = n.saturating_add(usize::from(b));
        if b != 255 {
            return Ok(n);
        }
    }
}

/// Decodes one LZ4 block that must fill exactly `size` bytes into `out`.
pub fn lz4_block(input: &[u8], size: usize, out: &mut Vec<u8>) -> Result<(), &'static str> {
    let mut pos = 0;
    loop {
        let token = *input
            .get(pos)
            .ok_or("the stream ends where a token should be")?;
        pos += 1;
        let mut literals = usize::from(token >> 4);
        if literals == 15 {
            literals = literals.saturating_add(more_length(input, &mut pos)?);
        }
        if literals > input.len() - pos {
            return Err("a literal run goes past the end of the stream");
        }
        if literals > size - out.len() {
            return Err("a literal run goes past the end of the block");
        }
        out.extend_from_slice(&input[pos..pos + literals]);
        pos += literals;
        if pos >= input.len() {
            break;
        }
        let offset = match input.get(pos..pos + 2) {
            Some(o) => usize::from(u16::from_le_bytes([o[0], o[1]])),
            None => return Err("the stream ends inside a match offset"),
        };
        pos += 2;
        if offset == 0 {
            return Err("a match with offset 0");
        }
        let mut length = 4 + usize::from(token & 15);
        if length == 19 {
            length = length.saturating_add(more_length(input, &mut pos)?);
        }
        if length > size - out.len() {
            return Err("a match goes past the end of the block");
        }
        if offset > out.len() {
            return Err("a match reaches before the start of the block");
        }
        // Byte by byte: a match may overlap what it writes.
        let from = out.len() - offset;
        for i in 0..length {
            out.push(out[from + i]);
        }
    }
    if out.len() != size {
        return Err("the stream ends before the block is filled");
    }
    Ok(())
}

/// The inverse bit transpose of one block: `input` and `out` hold `n *
/// elem` bytes, `n` a multiple of 8; bit `i` of row `8 * b + j` is bit `j`
/// of byte `b` of element `i`.
pub fn unshuffle(input: &[u8], out: &mut [u8], elem: usize) {
    let n = out.len() / elem;
    let row = n / 8;
    out.fill(0);
    for i in 0..n {
        for b in 0..elem {
            for j in 0..8 {
                let bit = (input[(8 * b + j) * row + i / 8] >> (i % 8)) & 1;
                out[i * elem + b] |= bit << j;
            }
        }
    }
}

/// The forward transpose (what the bitshuffle filter writes), for tests
/// and benchmarks that compress data themselves.
pub fn shuffle(input: &[u8], elem: usize) -> Vec<u8> {
    let n = input.len() / elem;
    let row = n / 8;
    let mut out = vec![0u8; input.len()];
    for i in 0..n {
        for b in 0..elem {
            for j in 0..8 {
                let bit = (input[i * elem + b] >> j) & 1;
                out[(8 * b + j) * row + i / 8] |= bit << (i % 8);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unshuffle_inverts_shuffle() {
        for elem in [1usize, 2, 4, 8] {
            let data: Vec<u8> = (0..64 * elem).map(|i| (i * 37 + 11) as u8).collect();
            let mut back = vec![0u8; data.len()];
            unshuffle(&shuffle(&data, elem), &mut back, elem);
            assert_eq!(back, data, "elem {elem}");
        }
    }

    #[test]
    fn lz4_literals_and_overlapping_matches() {
        // "abc" then a match of 7 at offset 3, then literal "z".
        let stream = [0x33, b'a', b'b', b'c', 3, 0, 0x10, b'z'];
        let mut out = Vec::new();
        lz4_block(&stream, 11, &mut out).unwrap();
        assert_eq!(out, b"abcabcabcaz");
        // The same stream refused when it would not fill the block, or
        // overfill it, or when cut inside the offset.
        assert!(lz4_block(&stream, 12, &mut Vec::new()).is_err());
        assert!(lz4_block(&stream, 10, &mut Vec::new()).is_err());
        assert!(lz4_block(&stream[..5], 11, &mut Vec::new()).is_err());
    }
}

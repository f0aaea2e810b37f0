//! Decoding of bitshuffle-LZ4 chunks (HDF5 filter 32008), as the Eiger
//! detectors write them, on the GPU: the compressed chunks cross the bus
//! and the raw little-endian frame is made on the device, ready for the
//! spot-finding kernels.
//!
//! A chunk is a 12-byte header (the decoded size in bytes as u64
//! big-endian, the block size in bytes as u32 big-endian), then per block
//! a u32 big-endian compressed size and an LZ4 block. A decoded block of
//! `n` elements (`n` a multiple of 8) holds `8 * elem` rows of `n` bits:
//! row `8 * b + j`, bit `i` is bit `j` of byte `b` of element `i`. The last
//! `len % 8` elements follow the blocks raw.
//!
//! The host reads the header and walks the block sizes ([`ChunkLayout`]):
//! every size is checked before anything is dispatched, so the kernel only
//! checks the LZ4 streams themselves. [`gpu`] decodes one block per
//! workgroup; [`cpu`] is the reference twin.

use crate::error::{Error, Result};

pub mod cpu;
pub mod gpu;

/// Element sizes the decoders take, in bytes.
pub const ELEMENT_SIZES: [usize; 4] = [1, 2, 4, 8];

/// Bytes of the chunk header: decoded size (u64 BE) and block size (u32 BE).
pub const HEADER_BYTES: usize = 12;

/// The block of a chunk, as the chunk's bytes lay it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// Offset in the chunk of its LZ4 stream (after the size prefix).
    pub src: usize,
    /// Length of its LZ4 stream.
    pub src_len: usize,
    /// Offset of its decoded bytes in the decoded chunk.
    pub dst: usize,
    /// Decoded bytes: a multiple of `8 * elem`.
    pub dst_len: usize,
}

/// Where everything of one chunk is, read from its header and block sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkLayout {
    /// Decoded bytes.
    pub total: usize,
    /// Bytes per element.
    pub elem: usize,
    pub blocks: Vec<Block>,
    /// The raw tail (`total / elem % 8` elements): offset in the chunk and
    /// length; it lands at `total - len` of the decoded chunk.
    pub tail: (usize, usize),
}

fn be32(data: &[u8], at: usize) -> Option<u32> {
    let b = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn damaged(problem: impl std::fmt::Display) -> Error {
    Error::InvalidInput(format!(
        "a damaged bitshuffle-LZ4 chunk: {problem} (the file may be truncated or not bitshuffle-LZ4)"
    ))
}

/// Checks an element size against [`ELEMENT_SIZES`].
pub fn check_element_size(elem: usize) -> Result<()> {
    if ELEMENT_SIZES.contains(&elem) {
        Ok(())
    } else {
        Err(Error::param(
            "element size",
            format!(
                "{elem} bytes (bitshuffle-LZ4 chunks of 1, 2, 4 or 8-byte elements are decoded)"
            ),
        ))
    }
}

impl ChunkLayout {
    /// Reads the header of `chunk` (elements of `elem` bytes) and walks its
    /// block sizes. `limit` bounds the decoded size the header may declare,
    /// so that a damaged header cannot make anyone allocate terabytes.
    pub fn parse(chunk: &[u8], elem: usize, limit: usize) -> Result<ChunkLayout> {
        check_element_size(elem)?;
        let header = chunk
            .get(..HEADER_BYTES)
            .ok_or_else(|| damaged(format!("{} bytes, shorter than its header", chunk.len())))?;
        let mut size = [0u8; 8];
        size.copy_from_slice(&header[..8]);
        let declared = u64::from_be_bytes(size);
        let total = usize::try_from(declared)
            .ok()
            .filter(|&t| t <= limit)
            .ok_or_else(|| {
                damaged(format!(
                    "it declares {declared} decoded bytes, more than the {limit} expected"
                ))
            })?;
        if !total.is_multiple_of(elem) {
            return Err(damaged(format!(
                "it declares {total} bytes, not a whole number of {elem}-byte elements"
            )));
        }
        let block_bytes = be32(chunk, 8).unwrap_or(0) as usize;
        let mut block = block_bytes / elem;
        if block == 0 || !block.is_multiple_of(8) {
            // The bitshuffle library's default: 8192 bytes' worth, a
            // multiple of 8 elements.
            block = (8192 / elem).max(8) / 8 * 8;
        }
        let n = total / elem;
        let mut blocks = Vec::with_capacity(n / block + 1);
        let mut pos = HEADER_BYTES;
        let mut done = 0usize; // elements
        while n - done >= 8 {
            let count = block.min((n - done) / 8 * 8);
            let size = be32(chunk, pos).ok_or_else(|| {
                damaged(format!(
                    "it ends at byte {} where block {} should start",
                    chunk.len(),
                    blocks.len()
                ))
            })? as usize;
            pos += 4;
            let end = pos
                .checked_add(size)
                .filter(|&e| e <= chunk.len())
                .ok_or_else(|| {
                    damaged(format!(
                        "block {} of {size} bytes runs past the chunk's {} bytes",
                        blocks.len(),
                        chunk.len()
                    ))
                })?;
            blocks.push(Block {
                src: pos,
                src_len: size,
                dst: done * elem,
                dst_len: count * elem,
            });
            pos = end;
            done += count;
        }
        let rest = (n - done) * elem;
        if pos + rest > chunk.len() {
            return Err(damaged(format!(
                "its last {rest} raw bytes run past the chunk's {} bytes",
                chunk.len()
            )));
        }
        Ok(ChunkLayout {
            total,
            elem,
            blocks,
            tail: (pos, rest),
        })
    }

    /// The largest decoded block, in bytes (0 without blocks).
    pub fn largest_block(&self) -> usize {
        self.blocks.iter().map(|b| b.dst_len).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(total: u64, block: u32) -> Vec<u8> {
        let mut c = total.to_be_bytes().to_vec();
        c.extend_from_slice(&block.to_be_bytes());
        c
    }

    #[test]
    fn layout_walks_blocks_and_the_raw_tail() {
        // 21 u32 elements in blocks of 8: two blocks, 5 raw elements.
        let mut c = header(84, 32);
        for _ in 0..2 {
            c.extend_from_slice(&3u32.to_be_bytes());
            c.extend_from_slice(&[1, 2, 3]);
        }
        c.extend_from_slice(&[0; 20]);
        let l = ChunkLayout::parse(&c, 4, 1 << 20).unwrap();
        assert_eq!(
            l.blocks,
            vec![
                Block {
                    src: 16,
                    src_len: 3,
                    dst: 0,
                    dst_len: 32
                },
                Block {
                    src: 23,
                    src_len: 3,
                    dst: 32,
                    dst_len: 32
                },
            ]
        );
        assert_eq!(l.tail, (26, 20));
        // One byte short of the tail.
        assert!(ChunkLayout::parse(&c[..c.len() - 1], 4, 1 << 20).is_err());
        // Over the limit, not whole elements, a bad element size.
        assert!(ChunkLayout::parse(&c, 4, 83).is_err());
        assert!(ChunkLayout::parse(&header(6, 0), 4, 1 << 20).is_err());
        assert!(ChunkLayout::parse(&c, 3, 1 << 20).is_err());
    }

    #[test]
    fn a_block_size_of_zero_means_the_default() {
        // 4096 u16 elements: one default block of 8192 bytes.
        let mut c = header(8192, 0);
        c.extend_from_slice(&1u32.to_be_bytes());
        c.push(0);
        let l = ChunkLayout::parse(&c, 2, 1 << 20).unwrap();
        assert_eq!(l.blocks.len(), 1);
        assert_eq!(l.blocks[0].dst_len, 8192);
        assert_eq!(l.tail.1, 0);
    }
}

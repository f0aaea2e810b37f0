//! The Blosc (version 1) container, as numcodecs and zarr-python write it:
//! a 16-byte header, block offsets, each block split into one stream per
//! byte of the sample (or not), compressed with BloscLZ, LZ4, zlib or
//! zstd, then byte- or bit-shuffled. Snappy is refused.
//!
//! Every size comes from the header and is checked against the chunk's
//! declared size before anything is allocated.

use std::io::Read;

use crate::{IoError, Result};

const MEMCPYED: u8 = 0x2;
const BYTE_SHUFFLE: u8 = 0x1;
const BIT_SHUFFLE: u8 = 0x4;
const NO_SPLIT: u8 = 0x10;
const MAX_DISTANCE: usize = 8191;

fn bad(msg: impl Into<String>) -> IoError {
    IoError::corrupt(format!("a chunk's blosc data is damaged: {}", msg.into()))
}

fn u32_at(b: &[u8], at: usize) -> Result<usize> {
    let s = b.get(at..at + 4).ok_or_else(|| bad("it ends early"))?;
    Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize)
}

/// Decodes one Blosc buffer into at most `cap` bytes.
pub(crate) fn decode(src: &[u8], cap: usize) -> Result<Vec<u8>> {
    if src.len() < 16 {
        return Err(IoError::truncated(
            "a blosc chunk is shorter than its header",
        ));
    }
    let flags = src[2];
    let typesize = usize::from(src[3]).max(1);
    let nbytes = u32_at(src, 4)?;
    let blocksize = u32_at(src, 8)?;
    let cbytes = u32_at(src, 12)?;
    if nbytes > cap {
        return Err(bad(format!(
            "it declares {nbytes} bytes where the chunk holds {cap}"
        )));
    }
    if cbytes > src.len() {
        return Err(IoError::truncated(format!(
            "a blosc chunk of {cbytes} bytes holds {}",
            src.len()
        )));
    }
    if flags & MEMCPYED != 0 {
        return src
            .get(16..16 + nbytes)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| bad("its stored bytes end early"));
    }
    if nbytes == 0 {
        return Ok(Vec::new());
    }
    if blocksize == 0 {
        return Err(bad("a block size of 0"));
    }
    let codec = flags >> 5;
    let nblocks = nbytes.div_ceil(blocksize);
    let mut out = vec![0u8; nbytes];
    // No block is larger than the buffer (the header's blocksize may be).
    let blocksize = blocksize.min(nbytes);
    let mut tmp = vec![0u8; blocksize];
    for j in 0..nblocks {
        let start = u32_at(src, 16 + 4 * j)?;
        let bsize = blocksize.min(nbytes - j * blocksize);
        let leftover = bsize < blocksize;
        let nsplits = if flags & NO_SPLIT == 0 && !leftover && bsize % typesize == 0 {
            typesize
        } else {
            1
        };
        let neblock = bsize / nsplits;
        let mut ip = start;
        for k in 0..nsplits {
            let cs = u32_at(src, ip)?;
            ip += 4;
            let stream = src
                .get(ip..ip.saturating_add(cs))
                .ok_or_else(|| bad("a stream runs past the buffer"))?;
            let dst = &mut tmp[k * neblock..(k + 1) * neblock];
            if cs == neblock {
                dst.copy_from_slice(stream);
            } else {
                decompress(codec, stream, dst)?;
            }
            ip += cs;
        }
        let block = &mut out[j * blocksize..j * blocksize + bsize];
        // Format 2 bit-shuffles a block only when it holds a multiple of
        // eight samples; later formats shuffle those and keep the rest.
        let whole = (bsize / typesize).is_multiple_of(8);
        if flags & BIT_SHUFFLE != 0 && (src[0] > 2 || whole) {
            bit_unshuffle(&tmp[..bsize], block, typesize);
        } else if flags & BYTE_SHUFFLE != 0 && typesize > 1 {
            byte_unshuffle(&tmp[..bsize], block, typesize);
        } else {
            block.copy_from_slice(&tmp[..bsize]);
        }
    }
    Ok(out)
}

/// One compressed stream into exactly `dst.len()` bytes.
fn decompress(codec: u8, src: &[u8], dst: &mut [u8]) -> Result<()> {
    let n = dst.len();
    let got = match codec {
        0 => blosclz(src, dst)?,
        1 => lz4_flex::block::decompress_into(src, dst).map_err(|e| bad(format!("lz4: {e}")))?,
        3 | 4 => {
            let mut v = Vec::new();
            let limit = n as u64 + 1;
            let r = if codec == 3 {
                flate2::read::ZlibDecoder::new(src)
                    .take(limit)
                    .read_to_end(&mut v)
            } else {
                let run = std::panic::catch_unwind(|| -> std::io::Result<Vec<u8>> {
                    let mut w = Vec::new();
                    ruzstd::decoding::StreamingDecoder::new(src)
                        .map_err(std::io::Error::other)?
                        .take(limit)
                        .read_to_end(&mut w)?;
                    Ok(w)
                });
                match run {
                    Ok(Ok(w)) => {
                        v = w;
                        Ok(v.len())
                    }
                    Ok(Err(e)) => Err(e),
                    Err(_) => Err(std::io::Error::other("the zstd decoder failed")),
                }
            };
            // ruzstd's messages may quote the bytes read: not repeated.
            r.map_err(|e| {
                if codec == 4 {
                    bad("zstd: the stream is damaged")
                } else {
                    bad(e.to_string())
                }
            })?;
            if v.len() != n {
                return Err(bad("a stream decodes to the wrong size"));
            }
            dst.copy_from_slice(&v);
            n
        }
        2 => {
            return Err(IoError::unsupported(
                "the chunks are blosc with snappy, which gpuscope does not decode",
                "re-save with blosc lz4 or zstd, or the zstd codec",
            ));
        }
        c => return Err(bad(format!("unknown compressor code {c}"))),
    };
    if got != n {
        return Err(bad("a stream decodes to the wrong size"));
    }
    Ok(())
}

/// BloscLZ, Blosc's own LZ77: a control byte below 32 starts a literal run
/// of `ctrl + 1` bytes; above, a match (length in the top 3 bits, extended
/// by 255-bytes; 13-bit distance, or 16 more bits past 8191).
fn blosclz(src: &[u8], dst: &mut [u8]) -> Result<usize> {
    let mut ip = 0usize;
    let mut op = 0usize;
    let next = |ip: &mut usize| -> Result<u8> {
        let b = *src
            .get(*ip)
            .ok_or_else(|| bad("a blosclz stream ends early"))?;
        *ip += 1;
        Ok(b)
    };
    let mut ctrl = usize::from(next(&mut ip)? & 31);
    loop {
        if ctrl >= 32 {
            let mut len = (ctrl >> 5) - 1;
            let mut ofs = (ctrl & 31) << 8;
            if len == 6 {
                loop {
                    let code = next(&mut ip)?;
                    len += usize::from(code);
                    if code != 255 {
                        break;
                    }
                }
            }
            let code = usize::from(next(&mut ip)?);
            len += 3;
            let mut dist = ofs + code + 1;
            if code == 255 && ofs == 31 << 8 {
                ofs = usize::from(next(&mut ip)?) << 8;
                ofs += usize::from(next(&mut ip)?);
                dist = ofs + MAX_DISTANCE + 1;
            }
            if op + len > dst.len() || dist > op {
                return Err(bad("a blosclz match reaches outside the block"));
            }
            for i in 0..len {
                dst[op + i] = dst[op + i - dist];
            }
            op += len;
        } else {
            let run = ctrl + 1;
            let lit = src
                .get(ip..ip + run)
                .ok_or_else(|| bad("a blosclz stream ends early"))?;
            let d = dst
                .get_mut(op..op + run)
                .ok_or_else(|| bad("a blosclz literal runs past the block"))?;
            d.copy_from_slice(lit);
            ip += run;
            op += run;
        }
        match src.get(ip) {
            Some(&b) => {
                ip += 1;
                ctrl = usize::from(b);
            }
            None => return Ok(op),
        }
    }
}

/// Byte shuffle undone: byte `b` of every sample, then byte `b + 1`, ...;
/// bytes past the last whole sample are stored as they are.
fn byte_unshuffle(src: &[u8], dst: &mut [u8], ts: usize) {
    let n = src.len() / ts;
    for i in 0..n {
        for b in 0..ts {
            dst[i * ts + b] = src[b * n + i];
        }
    }
    dst[n * ts..].copy_from_slice(&src[n * ts..]);
}

/// Bitshuffle undone (bitshuffle's bit transpose of samples in groups of
/// eight): bit plane `8 * b + i` holds bit `i` of byte `b` of every sample.
/// Samples past the last group of eight are stored as they are.
fn bit_unshuffle(src: &[u8], dst: &mut [u8], ts: usize) {
    let n = src.len() / ts;
    let m = n - n % 8;
    let plane = m / 8;
    dst[..m * ts].fill(0);
    for b in 0..ts {
        for i in 0..8 {
            let row = &src[(8 * b + i) * plane..(8 * b + i + 1) * plane];
            for (k, &byte) in row.iter().enumerate() {
                for j in 0..8 {
                    if byte >> j & 1 != 0 {
                        dst[(8 * k + j) * ts + b] |= 1 << i;
                    }
                }
            }
        }
    }
    dst[m * ts..].copy_from_slice(&src[m * ts..]);
}

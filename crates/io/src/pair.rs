//! The check that a headerless raw file and its sidecar belong together.
//!
//! A raw output is two files, data and sidecar, published by two renames;
//! two runs writing the same output at once can leave the data of one and
//! the sidecar of the other. gpuscope's sidecars therefore carry
//! `"data_hash"`: a 64-bit hash of the layout and of the data, computed
//! while the data is written. A reader recomputes it from the layout it
//! uses and the bytes it reads, and refuses a pair that disagrees.
//!
//! The hash is a sum over leading-axis slices of a hash of each slice and
//! its index, so slabs written at their own offsets by several threads,
//! or read in any order and more than once, give the same value. It
//! detects accidents (another run's data, a replaced file), not forgery.

use crate::error::{IoError, Result};
use crate::raw::RawLayout;

const P1: u64 = 0x9E37_79B9_7F4A_7C15;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;

/// splitmix64's finaliser.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A 64-bit hash of a byte stream fed in pieces of any size: four lanes
/// over 32-byte blocks.
#[derive(Clone)]
struct Lanes {
    v: [u64; 4],
    buf: [u8; 32],
    nbuf: usize,
    len: u64,
}

impl Lanes {
    fn new() -> Lanes {
        Lanes {
            v: [P1, P2, P1 ^ P2, P1.rotate_left(17)],
            buf: [0; 32],
            nbuf: 0,
            len: 0,
        }
    }

    fn block(v: &mut [u64; 4], b: &[u8]) {
        for (i, lane) in v.iter_mut().enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[8 * i..8 * i + 8]);
            *lane = (*lane ^ u64::from_le_bytes(w))
                .wrapping_mul(P1)
                .rotate_left(31);
        }
    }

    fn update(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len() as u64;
        if self.nbuf > 0 {
            let take = (32 - self.nbuf).min(bytes.len());
            self.buf[self.nbuf..self.nbuf + take].copy_from_slice(&bytes[..take]);
            self.nbuf += take;
            bytes = &bytes[take..];
            if self.nbuf < 32 {
                return;
            }
            let buf = self.buf;
            Self::block(&mut self.v, &buf);
            self.nbuf = 0;
        }
        let mut blocks = bytes.chunks_exact(32);
        for b in &mut blocks {
            Self::block(&mut self.v, b);
        }
        let rest = blocks.remainder();
        self.buf[..rest.len()].copy_from_slice(rest);
        self.nbuf = rest.len();
    }

    fn finish(&self) -> u64 {
        let mut v = self.v;
        if self.nbuf > 0 {
            let mut last = [0u8; 32];
            last[..self.nbuf].copy_from_slice(&self.buf[..self.nbuf]);
            Self::block(&mut v, &last);
        }
        v.iter()
            .fold(mix(self.len ^ P2), |h, &x| mix(h.wrapping_add(x) ^ P1))
    }
}

fn bytes_hash(bytes: &[u8]) -> u64 {
    let mut l = Lanes::new();
    l.update(bytes);
    l.finish()
}

/// What slice `z` holding `bytes` adds to the pair hash.
fn slice_term(z: usize, bytes: &[u8]) -> u64 {
    mix(bytes_hash(bytes) ^ (z as u64).wrapping_mul(P2))
}

/// The layout's part of the pair hash: shape, dtype, byte order, offset.
fn seed(layout: &RawLayout) -> u64 {
    let text = format!(
        "{:?} {} {} {}",
        layout.shape,
        layout.dtype.name(),
        layout.big_endian,
        layout.offset
    );
    bytes_hash(text.as_bytes())
}

/// Bytes in one leading-axis slice of `layout` (1 for a 0-length trailing shape).
fn slice_bytes(layout: &RawLayout) -> usize {
    layout.shape[1..].iter().product::<usize>() * layout.dtype.size_bytes()
}

/// The pair hash of a whole file's sample bytes (without the offset).
pub(crate) fn hash_of(layout: &RawLayout, data: &[u8]) -> u64 {
    let sb = slice_bytes(layout);
    let mut h = seed(layout);
    if sb > 0 {
        for (z, s) in data.chunks(sb).enumerate() {
            h = h.wrapping_add(slice_term(z, s));
        }
    }
    h
}

/// The hash a sidecar's `"data_hash"` holds, if any.
pub(crate) fn from_json(v: &serde_json::Value) -> Option<u64> {
    let s = v.get("data_hash")?.as_str()?;
    u64::from_str_radix(s, 16).ok()
}

pub(crate) fn mismatch(sidecar: &str) -> IoError {
    IoError::new(
        crate::ErrorKind::Corrupt,
        format!(
            "the data does not match its sidecar {sidecar} (its data_hash differs): the two \
             were written by different runs, e.g. two commands writing the same output at once"
        ),
        "run the command that makes this output again, one run per output path",
    )
}

/// The pair hash of data written in order, fed in pieces of any size.
pub(crate) struct SequentialHash {
    slice_bytes: usize,
    z: usize,
    in_slice: usize,
    lanes: Lanes,
    sum: u64,
}

impl SequentialHash {
    pub(crate) fn new(layout: &RawLayout) -> SequentialHash {
        SequentialHash {
            slice_bytes: slice_bytes(layout),
            z: 0,
            in_slice: 0,
            lanes: Lanes::new(),
            sum: seed(layout),
        }
    }

    pub(crate) fn update(&mut self, mut bytes: &[u8]) {
        if self.slice_bytes == 0 {
            return;
        }
        while !bytes.is_empty() {
            let take = (self.slice_bytes - self.in_slice).min(bytes.len());
            self.lanes.update(&bytes[..take]);
            self.in_slice += take;
            bytes = &bytes[take..];
            if self.in_slice == self.slice_bytes {
                let term = mix(self.lanes.finish() ^ (self.z as u64).wrapping_mul(P2));
                self.sum = self.sum.wrapping_add(term);
                self.z += 1;
                self.in_slice = 0;
                self.lanes = Lanes::new();
            }
        }
    }

    pub(crate) fn finish(&self) -> u64 {
        self.sum
    }
}

/// A writer that hashes what passes through it.
pub(crate) struct Tee<'a, W: std::io::Write + ?Sized> {
    pub(crate) w: &'a mut W,
    pub(crate) hash: &'a mut SequentialHash,
}

impl<W: std::io::Write + ?Sized> std::io::Write for Tee<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.w.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }
}

/// The pair hash of slabs written at their own offsets, in any order (and
/// of slices written in rows, in order within each slice).
pub(crate) struct SlabHash {
    slice_bytes: usize,
    sum: std::sync::atomic::AtomicU64,
    partial: std::sync::Mutex<Partial>,
}

impl SlabHash {
    pub(crate) fn new(layout: &RawLayout) -> SlabHash {
        SlabHash {
            slice_bytes: slice_bytes(layout),
            sum: std::sync::atomic::AtomicU64::new(seed(layout)),
            partial: std::sync::Mutex::new(Partial::default()),
        }
    }

    /// Adds bytes from byte `at` of slice `z`: rows written in order.
    pub(crate) fn add_part(&self, z: usize, at: usize, bytes: &[u8]) {
        if self.slice_bytes == 0 {
            return;
        }
        let mut partial = self.partial.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(term) = partial.add(z, at, bytes, self.slice_bytes) {
            self.sum
                .fetch_add(term, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Adds slices `z0..` held in `bytes`.
    pub(crate) fn add(&self, z0: usize, bytes: &[u8]) {
        if self.slice_bytes == 0 {
            return;
        }
        let part = bytes
            .chunks(self.slice_bytes)
            .enumerate()
            .fold(0u64, |h, (i, s)| h.wrapping_add(slice_term(z0 + i, s)));
        // fetch_add wraps, as the sum does.
        self.sum
            .fetch_add(part, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn finish(&self) -> u64 {
        self.sum.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Slices hashed in pieces of rows, in order within each slice: the bytes
/// hashed so far of each slice begun, until it is whole.
#[derive(Default)]
struct Partial {
    slices: std::collections::BTreeMap<usize, (usize, Lanes)>,
}

impl Partial {
    /// Bytes `at..` of slice `z` (`slice_bytes` in all); its term once the
    /// pieces reach its end. Pieces that start past the bytes hashed so far
    /// are skipped (a read ahead of order); the slice is hashed when a later
    /// read covers them.
    fn add(&mut self, z: usize, at: usize, bytes: &[u8], slice_bytes: usize) -> Option<u64> {
        let (done, lanes) = self.slices.entry(z).or_insert_with(|| (0, Lanes::new()));
        let end = at + bytes.len();
        if at > *done || end <= *done {
            return None;
        }
        lanes.update(&bytes[*done - at..]);
        *done = end;
        if end < slice_bytes {
            return None;
        }
        let term = mix(lanes.finish() ^ (z as u64).wrapping_mul(P2));
        self.slices.remove(&z);
        Some(term)
    }
}

/// Checks a streamed read against the sidecar's hash once every slice has
/// been read at least once (in any order, any number of times; in rows,
/// each slice's rows from its first, where a slice is read in parts).
pub(crate) struct PairCheck {
    expected: u64,
    sidecar: String,
    slice_bytes: usize,
    sum: u64,
    seen: Vec<bool>,
    left: usize,
    partial: Partial,
}

impl PairCheck {
    pub(crate) fn new(layout: &RawLayout, expected: u64, sidecar: String) -> PairCheck {
        let n = layout.shape[0];
        PairCheck {
            expected,
            sidecar,
            slice_bytes: slice_bytes(layout),
            sum: seed(layout),
            seen: vec![false; n],
            left: n,
            partial: Partial::default(),
        }
    }

    /// Bytes from byte `at` of slice `z`, just read.
    pub(crate) fn read_part(&mut self, z: usize, at: usize, bytes: &[u8]) -> Result<()> {
        if self.left == 0 || self.slice_bytes == 0 || self.seen.get(z) != Some(&false) {
            return self.verdict();
        }
        if let Some(term) = self.partial.add(z, at, bytes, self.slice_bytes) {
            self.seen[z] = true;
            self.left -= 1;
            self.sum = self.sum.wrapping_add(term);
        }
        self.verdict()
    }

    /// Slices `z0..` just read into `bytes`.
    pub(crate) fn read(&mut self, z0: usize, bytes: &[u8]) -> Result<()> {
        if self.left == 0 || self.slice_bytes == 0 {
            return self.verdict();
        }
        for (i, s) in bytes.chunks(self.slice_bytes).enumerate() {
            let z = z0 + i;
            if self.seen.get(z) == Some(&false) {
                self.seen[z] = true;
                self.left -= 1;
                self.sum = self.sum.wrapping_add(slice_term(z, s));
            }
        }
        self.verdict()
    }

    fn verdict(&self) -> Result<()> {
        if (self.left == 0 || self.slice_bytes == 0) && self.sum != self.expected {
            return Err(mismatch(&self.sidecar));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn pieces_slabs_and_whole_agree() {
        let layout = RawLayout::new(vec![5, 3, 7], DType::U16);
        let data: Vec<u8> = (0..5 * 3 * 7 * 2).map(|i| (i * 37 % 251) as u8).collect();
        let whole = hash_of(&layout, &data);
        let mut seq = SequentialHash::new(&layout);
        for piece in data.chunks(13) {
            seq.update(piece);
        }
        assert_eq!(seq.finish(), whole);
        let slabs = SlabHash::new(&layout);
        slabs.add(3, &data[3 * 42..]);
        slabs.add(0, &data[..3 * 42]);
        assert_eq!(slabs.finish(), whole);
        let mut check = PairCheck::new(&layout, whole, "s".into());
        check.read(1, &data[42..3 * 42]).unwrap();
        check.read(0, &data[..3 * 42]).unwrap();
        check.read(2, &data[2 * 42..]).unwrap();
        let mut bad = data.clone();
        bad[100] ^= 1;
        assert_ne!(hash_of(&layout, &bad), whole);
        let other = RawLayout::new(vec![5, 3, 7], DType::I16);
        assert_ne!(hash_of(&other, &data), whole);
        let mut check = PairCheck::new(&layout, whole, "s".into());
        assert!(check.read(0, &bad).is_err());
    }

    /// Slices in rows: written in order, read with overlaps and a row read
    /// ahead of order (a mirrored halo), the same hash as whole slices.
    #[test]
    fn rows_agree_with_whole_slices() {
        let layout = RawLayout::new(vec![3, 4, 5], DType::U16);
        let data: Vec<u8> = (0..3 * 4 * 5 * 2).map(|i| (i * 31 % 253) as u8).collect();
        let whole = hash_of(&layout, &data);
        let (row, slice) = (10, 40);
        let slabs = SlabHash::new(&layout);
        for z in 0..3 {
            for y in 0..4 {
                let at = z * slice + y * row;
                slabs.add_part(z, y * row, &data[at..at + row]);
            }
        }
        assert_eq!(slabs.finish(), whole);
        for bad_byte in [None, Some(2 * slice + 3 * row + 1)] {
            let mut bytes = data.clone();
            if let Some(b) = bad_byte {
                bytes[b] ^= 1;
            }
            let mut check = PairCheck::new(&layout, whole, "s".into());
            let mut outcome = Ok(());
            for z in 0..3 {
                let s = &bytes[z * slice..(z + 1) * slice];
                for (at, len) in [(row, row), (0, 3 * row), (row, 3 * row)] {
                    outcome = outcome.and(check.read_part(z, at, &s[at..at + len]));
                }
            }
            assert_eq!(outcome.is_ok(), bad_byte.is_none(), "{bad_byte:?}");
            assert_eq!(check.left, 0);
        }
    }
}

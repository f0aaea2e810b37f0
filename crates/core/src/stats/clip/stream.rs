//! Sigma-clipped statistics of a stack too large for memory, read slab by
//! slab: the same answer as [`super::cpu::sigma_clipped_stats`] on the whole
//! array, bit for bit, for every dtype.
//!
//! Each round's kept values are the finite, unmasked values inside one
//! interval (the rounds' bounds intersect), so a round needs only that
//! interval. Two passes over the stack give its statistics: the count, the
//! sum (in f64, sequentially in raster order as the reference sums) and a
//! histogram of the upper 16 bits of the order-preserving keys; then the
//! sum of squared deviations from the mean and, inside the one or two
//! buckets holding the median's ranks, histograms of the next 16 bits.
//! A bucket whose smallest and largest key agree holds one value, so 8- and
//! 16-bit data need no second histogram, 32-bit data one, and 64-bit data
//! at most three (extra passes only while a bucket still holds several
//! values). Memory: one slab and at most three 64 Ki-entry histograms.

use std::ops::Range;

use super::{ClipOptions, ClipStats, no_values};
use crate::error::{Error, Result};
use crate::stats::CenFunc;
use crate::stream::SliceSource;

/// A sample the streamed clipping reads: its value as the reference widens
/// it, and an order-preserving key left-aligned in 64 bits.
pub trait ClipSample: Copy {
    /// float32 data gets float32 bounds, as in the reference.
    const F32_BOUNDS: bool = false;
    fn value(self) -> f64;
    fn key(self) -> u64;
    /// The value of a key made by [`ClipSample::key`].
    fn from_key(k: u64) -> f64;
}

macro_rules! unsigned {
    ($($t:ty),*) => {$(
        impl ClipSample for $t {
            fn value(self) -> f64 {
                f64::from(self)
            }
            fn key(self) -> u64 {
                u64::from(self) << (64 - <$t>::BITS)
            }
            fn from_key(k: u64) -> f64 {
                (k >> (64 - <$t>::BITS)) as f64
            }
        }
    )*};
}

macro_rules! signed {
    ($($t:ty),*) => {$(
        impl ClipSample for $t {
            fn value(self) -> f64 {
                f64::from(self)
            }
            fn key(self) -> u64 {
                // Offset binary: flipping the sign bit orders the integers.
                let bits = (i64::from(self) as u64) & (u64::MAX >> (64 - <$t>::BITS));
                (bits ^ (1 << (<$t>::BITS - 1))) << (64 - <$t>::BITS)
            }
            fn from_key(k: u64) -> f64 {
                let offset = (k >> (64 - <$t>::BITS)) as i64;
                (offset - (1i64 << (<$t>::BITS - 1))) as f64
            }
        }
    )*};
}

unsigned!(u8, u16, u32);
signed!(i8, i16, i32);

/// Order-preserving key of a float64 (as `total_cmp`).
fn key64(x: f64) -> u64 {
    let b = x.to_bits();
    if b >> 63 == 1 { !b } else { b | (1 << 63) }
}

fn value64(k: u64) -> f64 {
    f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k })
}

impl ClipSample for f32 {
    const F32_BOUNDS: bool = true;
    fn value(self) -> f64 {
        f64::from(self)
    }
    fn key(self) -> u64 {
        let b = self.to_bits();
        u64::from(if b >> 31 == 1 { !b } else { b | 0x8000_0000 }) << 32
    }
    fn from_key(k: u64) -> f64 {
        let k = (k >> 32) as u32;
        f64::from(f32::from_bits(if k >> 31 == 1 {
            k & 0x7FFF_FFFF
        } else {
            !k
        }))
    }
}

impl ClipSample for f64 {
    fn value(self) -> f64 {
        self
    }
    fn key(self) -> u64 {
        key64(self)
    }
    fn from_key(k: u64) -> f64 {
        value64(k)
    }
}

// 64-bit integers are widened to f64 first, as the reference does.
macro_rules! widened {
    ($($t:ty),*) => {$(
        impl ClipSample for $t {
            fn value(self) -> f64 {
                self as f64
            }
            fn key(self) -> u64 {
                key64(self as f64)
            }
            fn from_key(k: u64) -> f64 {
                value64(k)
            }
        }
    )*};
}

widened!(u64, i64);

/// The kept values: finite and inside [lo, hi] (strict: (lo, hi)).
#[derive(Clone, Copy)]
struct Interval {
    lo: f64,
    hi: f64,
    strict: bool,
}

impl Interval {
    fn keeps(&self, x: f64) -> bool {
        x.is_finite()
            && if self.strict {
                x > self.lo && x < self.hi
            } else {
                x >= self.lo && x <= self.hi
            }
    }
}

/// One round's statistics of the values an interval keeps.
struct Round {
    n: usize,
    mean: f64,
    median: f64,
    std: f64,
}

/// Reads the stack (and its mask, true = excluded) in slabs of `per` slices.
struct Slabs<'a, T> {
    source: &'a mut dyn SliceSource<T>,
    mask: Option<&'a mut dyn SliceSource<bool>>,
    nz: usize,
    per: usize,
    buf: Vec<T>,
    masked: Vec<bool>,
}

impl<T: ClipSample> Slabs<'_, T> {
    /// Calls `f` on every kept value in raster order.
    fn each(&mut self, keep: Interval, mut f: impl FnMut(T, f64)) -> Result<()> {
        let mut z = 0;
        while z < self.nz {
            let hi = (z + self.per).min(self.nz);
            self.buf.clear();
            self.source.read(z..hi, &mut self.buf)?;
            self.masked.clear();
            if let Some(m) = self.mask.as_mut() {
                m.read(z..hi, &mut self.masked)?;
                if self.masked.len() != self.buf.len() {
                    return Err(Error::InvalidInput(
                        "the mask has fewer values than the data; give a mask of the data's shape"
                            .into(),
                    ));
                }
            }
            for (i, &x) in self.buf.iter().enumerate() {
                let d = x.value();
                if keep.keeps(d) && !self.masked.get(i).copied().unwrap_or(false) {
                    f(x, d);
                }
            }
            z = hi;
        }
        Ok(())
    }
}

const BINS: usize = 1 << 16;

/// Counts and the smallest and largest key per bucket of 16 key bits.
struct Histogram {
    count: Vec<u64>,
    min: Vec<u64>,
    max: Vec<u64>,
}

impl Histogram {
    fn new() -> Self {
        Histogram {
            count: vec![0; BINS],
            min: vec![u64::MAX; BINS],
            max: vec![0; BINS],
        }
    }

    fn add(&mut self, b: usize, k: u64) {
        self.count[b] += 1;
        self.min[b] = self.min[b].min(k);
        self.max[b] = self.max[b].max(k);
    }

    /// The bucket holding `rank` (0-based) and the rank within it.
    fn find(&self, rank: usize) -> (usize, usize) {
        let mut below = 0usize;
        for (b, &c) in self.count.iter().enumerate() {
            if below + c as usize > rank {
                return (b, rank - below);
            }
            below += c as usize;
        }
        (BINS - 1, 0)
    }
}

/// Where a median rank is: found (its key), or inside the bucket of keys
/// whose upper `known` bits are `prefix`, at `rank` within it.
#[derive(Clone, Copy)]
enum Target {
    Found(u64),
    Within {
        prefix: u64,
        known: u32,
        rank: usize,
    },
}

impl Target {
    /// After a histogram of the 16 bits below `known`.
    fn refine(prefix: u64, known: u32, rank: usize, h: &Histogram) -> Target {
        let (b, r) = h.find(rank);
        if h.min[b] == h.max[b] {
            return Target::Found(h.min[b]);
        }
        Target::Within {
            prefix: (prefix << 16) | b as u64,
            known: known + 16,
            rank: r,
        }
    }
}

/// The bucket of key `k` below the `known` upper bits, if its upper bits
/// are `prefix`.
fn bucket(k: u64, prefix: u64, known: u32) -> Option<usize> {
    let upper = if known == 0 { 0 } else { k >> (64 - known) };
    (upper == prefix).then_some(((k >> (48 - known)) & 0xFFFF) as usize)
}

/// One pass over the kept values: `f` on each value in raster order, and
/// for each open bucket (prefix, known) a histogram of the 16 key bits
/// below `known` of the keys inside it.
fn pass<T: ClipSample>(
    slabs: &mut Slabs<'_, T>,
    keep: Interval,
    open: &[(u64, u32)],
    mut f: impl FnMut(f64),
) -> Result<Vec<Histogram>> {
    let mut hists: Vec<Histogram> = open.iter().map(|_| Histogram::new()).collect();
    slabs.each(keep, |x, d| {
        f(d);
        if !open.is_empty() {
            let k = x.key();
            for (h, &(prefix, known)) in hists.iter_mut().zip(open) {
                if let Some(b) = bucket(k, prefix, known) {
                    h.add(b, k);
                }
            }
        }
    })?;
    Ok(hists)
}

fn round<T: ClipSample>(slabs: &mut Slabs<'_, T>, keep: Interval) -> Result<Round> {
    // Pass 1: count, sum (the reference's fold from -0.0), upper bits.
    let (mut n, mut sum) = (0usize, -0.0f64);
    let upper = pass(slabs, keep, &[(0, 0)], |d| {
        n += 1;
        sum += d;
    })?;
    if n == 0 {
        return Ok(Round {
            n,
            mean: f64::NAN,
            median: f64::NAN,
            std: f64::NAN,
        });
    }
    let mean = sum / n as f64;
    // The median's ranks (0-based).
    let ranks: Vec<usize> = if n % 2 == 1 {
        vec![n / 2]
    } else {
        vec![n / 2 - 1, n / 2]
    };
    let mut targets: Vec<Target> = ranks
        .iter()
        .map(|&r| Target::refine(0, 0, r, &upper[0]))
        .collect();
    drop(upper);
    // Pass 2: squared deviations; then further passes while a median's
    // bucket still holds several values (lower bits inside that bucket).
    let mut squares = -0.0f64;
    let mut first = true;
    loop {
        let open: Vec<(usize, u64, u32)> = targets
            .iter()
            .enumerate()
            .filter_map(|(j, t)| match *t {
                Target::Within { prefix, known, .. } => Some((j, prefix, known)),
                Target::Found(_) => None,
            })
            .collect();
        if open.is_empty() && !first {
            break;
        }
        let buckets: Vec<(u64, u32)> = open.iter().map(|&(_, p, k)| (p, k)).collect();
        let hists = pass(slabs, keep, &buckets, |d| {
            if first {
                squares += (d - mean) * (d - mean);
            }
        })?;
        first = false;
        for (h, &(j, _, _)) in hists.iter().zip(&open) {
            if let Target::Within {
                prefix,
                known,
                rank,
            } = targets[j]
            {
                targets[j] = Target::refine(prefix, known, rank, h);
            }
        }
    }
    let picked: Vec<f64> = targets
        .iter()
        .map(|t| match *t {
            Target::Found(k) => T::from_key(k),
            // Not reached: a bucket of the lowest 16 bits holds one key.
            Target::Within { .. } => f64::NAN,
        })
        .collect();
    let median = if picked.len() == 1 {
        picked[0]
    } else {
        (picked[0] + picked[1]) / 2.0
    };
    Ok(Round {
        n,
        mean,
        median,
        std: (squares / n as f64).sqrt(),
    })
}

/// Sigma-clipped statistics of the float32 stack `source` of `nz` slices,
/// read `per` slices at a time; `progress(round)` after each round.
pub fn sigma_clipped_stats(
    source: &mut impl SliceSource<f32>,
    nz: usize,
    per: usize,
    options: &ClipOptions,
    progress: &mut dyn FnMut(u32),
) -> Result<ClipStats> {
    clipped_stats(source, None, nz, per, options, progress)
}

/// Sigma-clipped statistics of the stack `source` of `nz` slices of any
/// dtype, read `per` slices at a time; `mask` (true = excluded) gives the
/// same slices. `progress(round)` after each round.
pub fn clipped_stats<'a, T: ClipSample>(
    source: &'a mut dyn SliceSource<T>,
    mask: Option<&'a mut dyn SliceSource<bool>>,
    nz: usize,
    per: usize,
    options: &ClipOptions,
    progress: &mut dyn FnMut(u32),
) -> Result<ClipStats> {
    let (sl, su) = options.sigmas()?;
    if per == 0 {
        return Err(Error::InvalidInput("slabs of 0 slices".into()));
    }
    let mut slabs = Slabs {
        source,
        mask,
        nz,
        per,
        buf: Vec::new(),
        masked: Vec::new(),
    };
    let mut keep = Interval {
        lo: f64::NEG_INFINITY,
        hi: f64::INFINITY,
        strict: options.strict,
    };
    let mut s = round(&mut slabs, keep)?;
    if s.n == 0 {
        return Err(no_values());
    }
    let maxiters = options.maxiters.unwrap_or(u32::MAX);
    let mut iterations = 0;
    while iterations < maxiters && s.n > 0 {
        iterations += 1;
        let cen = match options.cenfunc {
            CenFunc::Median => s.median,
            CenFunc::Mean => s.mean,
        };
        let (lo, hi) = if T::F32_BOUNDS {
            // float32 bounds, as the reference for float32 data.
            let (c, d) = (cen as f32, s.std as f32);
            (f64::from(c - d * sl as f32), f64::from(c + d * su as f32))
        } else {
            (cen - s.std * sl, cen + s.std * su)
        };
        if lo.is_nan() || hi.is_nan() {
            // Comparisons with NaN keep nothing.
            keep.lo = f64::INFINITY;
            keep.hi = f64::NEG_INFINITY;
        } else {
            keep.lo = keep.lo.max(lo);
            keep.hi = keep.hi.min(hi);
        }
        let next = round(&mut slabs, keep)?;
        progress(iterations);
        let changed = next.n != s.n;
        s = next;
        if !changed {
            break;
        }
    }
    Ok(ClipStats {
        mean: s.mean,
        median: s.median,
        std: s.std,
        n_kept: s.n,
        iterations,
    })
}

/// [`clipped_stats`] of samples held in memory, read where they lie in
/// slabs of 1 Mi values (8 MiB at most), `mask` (true = excluded)
/// alongside: for data larger than the GPU's budget.
pub fn clipped_stats_in_place(
    samples: crate::keys::Samples<'_>,
    mask: Option<&[bool]>,
    options: &ClipOptions,
) -> Result<ClipStats> {
    use crate::keys::Samples as S;
    const PLANE: usize = 1 << 18;
    fn run<T: ClipSample>(data: &[T], mask: Option<&[bool]>, o: &ClipOptions) -> Result<ClipStats> {
        let nz = data.len().div_ceil(PLANE);
        let mut source = InMemory { data, plane: PLANE };
        let mut m = mask.map(|data| InMemory { data, plane: PLANE });
        let m = m.as_mut().map(|m| m as &mut dyn SliceSource<bool>);
        clipped_stats(&mut source, m, nz, 4, o, &mut |_| {})
    }
    match samples {
        S::U8(v) => run(v, mask, options),
        S::I8(v) => run(v, mask, options),
        S::U16(v) => run(v, mask, options),
        S::I16(v) => run(v, mask, options),
        S::U32(v) => run(v, mask, options),
        S::I32(v) => run(v, mask, options),
        S::F32(v) => run(v, mask, options),
        S::U64(v) => run(v, mask, options),
        S::I64(v) => run(v, mask, options),
        S::F64(v) => run(v, mask, options),
    }
}

/// Slices `z` of an array in memory (tests and callers holding it).
pub struct InMemory<'a, T = f32> {
    pub data: &'a [T],
    pub plane: usize,
}

impl<T: Copy> SliceSource<T> for InMemory<'_, T> {
    fn read(&mut self, z: Range<usize>, out: &mut Vec<T>) -> Result<()> {
        let end = (z.end * self.plane).min(self.data.len());
        let start = (z.start * self.plane).min(end);
        out.extend_from_slice(&self.data[start..end]);
        Ok(())
    }
}

//! Sigma-clipped statistics of a float32 stack too large for memory, read
//! slice by slice: the same answer as [`super::cpu::sigma_clipped_stats`]
//! on the whole array, bit for bit.
//!
//! Each round's kept values are the finite values inside one interval (the
//! rounds' bounds intersect), so a round needs only that interval. Two
//! passes over the stack give its statistics: the count, the sum (in f64,
//! sequentially in raster order as the reference sums) and a histogram of
//! the upper 16 bits of the order-preserving keys; then the sum of squared
//! deviations from the mean and, inside the one or two buckets holding the
//! median's ranks, histograms of the lower 16 bits, which give the median
//! exactly. Memory: two slabs and three 64 Ki-entry histograms.

use std::ops::Range;

use super::{ClipOptions, ClipStats, no_values};
use crate::error::{Error, Result};
use crate::stats::CenFunc;
use crate::stream::SliceSource;

/// Order-preserving key of a finite float32 (as `total_cmp`).
fn key(x: f32) -> u32 {
    let b = x.to_bits();
    if b >> 31 == 1 { !b } else { b | 0x8000_0000 }
}

fn value(k: u32) -> f32 {
    f32::from_bits(if k >> 31 == 1 { k & 0x7FFF_FFFF } else { !k })
}

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

/// Reads the stack in slabs of `per` slices.
struct Slabs<'a, S> {
    source: &'a mut S,
    nz: usize,
    per: usize,
    buf: Vec<f32>,
}

impl<S: SliceSource<f32>> Slabs<'_, S> {
    /// Calls `f` on every slab in order.
    fn each(&mut self, mut f: impl FnMut(&[f32])) -> Result<()> {
        let mut z = 0;
        while z < self.nz {
            let hi = (z + self.per).min(self.nz);
            self.buf.clear();
            self.source.read(z..hi, &mut self.buf)?;
            f(&self.buf);
            z = hi;
        }
        Ok(())
    }
}

fn round<S: SliceSource<f32>>(slabs: &mut Slabs<'_, S>, keep: Interval) -> Result<Round> {
    // Pass 1: count, sum (the reference's fold from -0.0), upper bits.
    let (mut n, mut sum) = (0usize, -0.0f64);
    let mut upper = vec![0u64; 1 << 16];
    slabs.each(|v| {
        for &x in v {
            let d = f64::from(x);
            if keep.keeps(d) {
                n += 1;
                sum += d;
                upper[(key(x) >> 16) as usize] += 1;
            }
        }
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
    // The median's ranks (0-based) and the buckets holding them.
    let ranks: Vec<usize> = if n % 2 == 1 {
        vec![n / 2]
    } else {
        vec![n / 2 - 1, n / 2]
    };
    let find = |hist: &[u64], rank: usize| -> (usize, usize) {
        let mut below = 0usize;
        for (b, &c) in hist.iter().enumerate() {
            if below + c as usize > rank {
                return (b, rank - below);
            }
            below += c as usize;
        }
        (hist.len() - 1, 0)
    };
    let buckets: Vec<(usize, usize)> = ranks.iter().map(|&r| find(&upper, r)).collect();
    // Pass 2: squared deviations, lower bits inside those buckets.
    let mut squares = -0.0f64;
    let mut lower = vec![vec![0u64; 1 << 16]; buckets.len()];
    slabs.each(|v| {
        for &x in v {
            let d = f64::from(x);
            if keep.keeps(d) {
                squares += (d - mean) * (d - mean);
                let k = key(x);
                for (j, &(b, _)) in buckets.iter().enumerate() {
                    if (k >> 16) as usize == b {
                        lower[j][(k & 0xFFFF) as usize] += 1;
                    }
                }
            }
        }
    })?;
    let picked: Vec<f64> = buckets
        .iter()
        .zip(&lower)
        .map(|(&(b, r), hist)| {
            let (low, _) = find(hist, r);
            f64::from(value(((b as u32) << 16) | low as u32))
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
    let (sl, su) = options.sigmas()?;
    if per == 0 {
        return Err(Error::InvalidInput("slabs of 0 slices".into()));
    }
    let mut slabs = Slabs {
        source,
        nz,
        per,
        buf: Vec::new(),
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
        // float32 bounds, as the reference for float32 data.
        let (c, d) = (cen as f32, s.std as f32);
        let (lo, hi) = (f64::from(c - d * sl as f32), f64::from(c + d * su as f32));
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

/// Slices `z` of a float32 array in memory (tests and callers holding it).
pub struct InMemory<'a> {
    pub data: &'a [f32],
    pub plane: usize,
}

impl SliceSource<f32> for InMemory<'_> {
    fn read(&mut self, z: Range<usize>, out: &mut Vec<f32>) -> Result<()> {
        out.extend_from_slice(&self.data[z.start * self.plane..z.end * self.plane]);
        Ok(())
    }
}

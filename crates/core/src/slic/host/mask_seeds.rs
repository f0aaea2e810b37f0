//! The seeds of a masked SLIC exactly as scikit-image's
//! `_get_mask_centroids` places them: numpy's legacy `RandomState(123)`
//! picks `n_segments` mask pixels (and a denser subset when the mask is
//! large), scipy's `kmeans2` moves them for five iterations over that
//! subset, and each centre's nearest other centre gives the steps.
//!
//! Everything is float64 arithmetic on integer pixel coordinates in
//! scipy's order of operations (vq: `((0 + d0²) + d1²) + d2²`, first
//! minimum; means: sums in observation order divided by the count; pdist:
//! the square root of the same kind of sum), so the centres are numpy's
//! and scipy's bit for bit.

use crate::slic::DEAD_Z;

/// numpy's legacy MT19937 (`RandomState(seed)` with an integer seed).
pub(crate) struct Mt19937 {
    key: [u32; 624],
    pos: usize,
}

impl Mt19937 {
    /// `mt19937_seed` (Knuth's initialisation of the reference code).
    pub fn new(seed: u32) -> Mt19937 {
        let mut key = [0u32; 624];
        key[0] = seed;
        for i in 1..624 {
            let prev = key[i - 1];
            key[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { key, pos: 624 }
    }

    fn generate(&mut self) {
        const UPPER: u32 = 0x8000_0000;
        const LOWER: u32 = 0x7fff_ffff;
        const MATRIX_A: u32 = 0x9908_b0df;
        for i in 0..624 {
            let y = (self.key[i] & UPPER) | (self.key[(i + 1) % 624] & LOWER);
            let mag = if y & 1 == 1 { MATRIX_A } else { 0 };
            self.key[i] = self.key[(i + 397) % 624] ^ (y >> 1) ^ mag;
        }
        self.pos = 0;
    }

    pub fn next_u32(&mut self) -> u32 {
        if self.pos == 624 {
            self.generate();
        }
        let mut y = self.key[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    /// numpy's `random_interval(max)`: uniform in [0, max] by masking
    /// draws to the smallest covering power of two and rejecting.
    pub fn interval(&mut self, max: u64) -> u64 {
        if max == 0 {
            return 0;
        }
        let mut mask = max;
        for s in [1, 2, 4, 8, 16, 32] {
            mask |= mask >> s;
        }
        loop {
            let v = if max <= 0xffff_ffff {
                u64::from(self.next_u32()) & mask
            } else {
                // next_uint64: two draws, the first the high word.
                let hi = u64::from(self.next_u32());
                ((hi << 32) | u64::from(self.next_u32())) & mask
            };
            if v <= max {
                return v;
            }
        }
    }

    /// Legacy `choice(n, size, replace=False)` with no weights, sorted:
    /// `permutation(n)[:size]` (a Fisher-Yates shuffle of 0..n from the
    /// end) in ascending order.
    /// `n` is below 2^32 (a pixel count): the indices are kept as u32.
    pub fn choice_sorted(&mut self, n: usize, size: usize) -> Vec<u32> {
        let mut a: Vec<u32> = (0..n as u32).collect();
        for i in (1..n).rev() {
            let j = self.interval(i as u64) as usize;
            a.swap(i, j);
        }
        a.truncate(size);
        a.sort_unstable();
        a
    }
}

/// Squared Euclidean distance in scipy's order: `((0 + d0²) + d1²) + d2²`.
fn dist2(a: &[f64; 3], b: &[f64; 3]) -> f64 {
    let mut d = 0.0;
    for k in 0..3 {
        let t = a[k] - b[k];
        d += t * t;
    }
    d
}

/// Uniform cells over the code book, to find each point's nearest code
/// without comparing it to every code; the answer is the linear scan's
/// (smallest distance, first index on ties).
struct Cells {
    lo: [f64; 3],
    size: f64,
    n: [usize; 3],
    start: Vec<usize>,
    items: Vec<usize>,
}

impl Cells {
    fn new(codes: &[[f64; 3]]) -> Cells {
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for c in codes {
            for a in 0..3 {
                lo[a] = lo[a].min(c[a]);
                hi[a] = hi[a].max(c[a]);
            }
        }
        let extent: Vec<f64> = (0..3).map(|a| (hi[a] - lo[a]).max(0.0)).collect();
        // About one code per cell over the axes that vary.
        let used: Vec<f64> = extent.iter().copied().filter(|&e| e > 0.0).collect();
        let volume: f64 = used.iter().product();
        let size = if used.is_empty() {
            1.0
        } else {
            (volume / codes.len() as f64)
                .powf(1.0 / used.len() as f64)
                .max(1e-9)
        };
        // At most about four cells a code, however flat the extent.
        let mut size = size;
        let cells_for = |s: f64| [0, 1, 2].map(|a| (extent[a] / s) as usize + 1);
        while cells_for(size).iter().map(|&v| v as f64).product::<f64>()
            > 4.0 * codes.len() as f64 + 64.0
        {
            size *= 2.0;
        }
        let n = cells_for(size);
        let mut cells = Cells {
            lo,
            size,
            n,
            start: Vec::new(),
            items: Vec::new(),
        };
        let total = n[0] * n[1] * n[2];
        let mut count = vec![0usize; total + 1];
        let at: Vec<usize> = codes.iter().map(|c| cells.index(c)).collect();
        for &i in &at {
            count[i + 1] += 1;
        }
        for i in 0..total {
            count[i + 1] += count[i];
        }
        let mut next = count.clone();
        let mut items = vec![0; codes.len()];
        for (k, &i) in at.iter().enumerate() {
            items[next[i]] = k;
            next[i] += 1;
        }
        cells.start = count;
        cells.items = items;
        cells
    }

    fn coord(&self, v: f64, a: usize) -> usize {
        let c = ((v - self.lo[a]) / self.size).floor();
        if c <= 0.0 {
            0
        } else {
            (c as usize).min(self.n[a] - 1)
        }
    }

    fn index(&self, p: &[f64; 3]) -> usize {
        let c = [0, 1, 2].map(|a| self.coord(p[a], a));
        (c[0] * self.n[1] + c[1]) * self.n[2] + c[2]
    }

    /// The code nearest `p` (smallest computed squared distance, or its
    /// square root with `root` as pdist compares them, lowest index on
    /// ties), other than `skip`: cells in growing shells around `p`'s
    /// until a shell's least possible distance exceeds the best found.
    fn nearest(
        &self,
        codes: &[[f64; 3]],
        p: &[f64; 3],
        skip: Option<usize>,
        root: bool,
    ) -> Option<usize> {
        let own = [0, 1, 2].map(|a| self.coord(p[a], a));
        // (key, squared distance, index) of the best so far.
        let mut best: Option<(f64, f64, usize)> = None;
        let max_r = self.n.iter().copied().max().unwrap_or(1);
        for r in 0..=max_r {
            if let Some((_, d2, _)) = best {
                // Every code in shell r is at least (r - 1) cells away
                // along some axis; the margins cover rounding (and, for
                // roots, distinct squares with equal roots).
                let gap = (r as f64 - 1.0).max(0.0) * self.size;
                if gap * gap * (1.0 - 1e-9) > d2 * (1.0 + 1e-9) {
                    break;
                }
            }
            let lo = own.map(|o| o.saturating_sub(r));
            let hi = [0, 1, 2].map(|a| (own[a] + r).min(self.n[a] - 1));
            for z in lo[0]..=hi[0] {
                for y in lo[1]..=hi[1] {
                    for x in lo[2]..=hi[2] {
                        let ring = [z, y, x]
                            .iter()
                            .zip(&own)
                            .map(|(&c, &o)| c.abs_diff(o))
                            .max()
                            .unwrap_or(0);
                        if ring != r {
                            continue;
                        }
                        let cell = (z * self.n[1] + y) * self.n[2] + x;
                        for &k in &self.items[self.start[cell]..self.start[cell + 1]] {
                            if Some(k) == skip {
                                continue;
                            }
                            let d2 = dist2(&codes[k], p);
                            let key = if root { d2.sqrt() } else { d2 };
                            let better = match best {
                                None => key < f64::INFINITY,
                                Some((bk, _, bi)) => key < bk || (key == bk && k < bi),
                            };
                            if better {
                                best = Some((key, d2, k));
                            }
                        }
                    }
                }
            }
        }
        best.map(|(_, _, k)| k)
    }
}

/// scipy.cluster.vq.kmeans2(data, codes, iter) with a code book given:
/// `iter` rounds of vq (nearest code by squared distance, first minimum)
/// and cluster means; a code without members keeps its place.
/// The points are `point(i)` for i in 0..n, in order.
pub(crate) fn kmeans2(
    n: usize,
    point: impl Fn(usize) -> [f64; 3],
    mut codes: Vec<[f64; 3]>,
    iter: usize,
) -> Vec<[f64; 3]> {
    for _ in 0..iter {
        let cells = Cells::new(&codes);
        let mut sums = vec![[0f64; 3]; codes.len()];
        let mut count = vec![0usize; codes.len()];
        for i in 0..n {
            let p = &point(i);
            // vq's labels start at 0: a point farther than every code
            // (impossible for finite data) would join code 0.
            let k = cells.nearest(&codes, p, None, false).unwrap_or(0);
            for a in 0..3 {
                sums[k][a] += p[a];
            }
            count[k] += 1;
        }
        for (k, c) in codes.iter_mut().enumerate() {
            if count[k] > 0 {
                *c = sums[k].map(|s| s / count[k] as f64);
            }
        }
    }
    codes
}

/// skimage's steps: for each centre the nearest other one (pdist's
/// Euclidean distance, the first on ties; a lone centre is its own), the
/// absolute differences averaged over the centres per axis (numpy's mean
/// over axis 0 adds the rows in order).
pub(crate) fn steps(centroids: &[[f64; 3]]) -> [f64; 3] {
    let cells = Cells::new(centroids);
    let mut sum = [0f64; 3];
    for (k, c) in centroids.iter().enumerate() {
        let other = cells.nearest(centroids, c, Some(k), true).unwrap_or(k);
        for a in 0..3 {
            sum[a] += (c[a] - centroids[other][a]).abs();
        }
    }
    sum.map(|s| s / centroids.len() as f64)
}

/// `_get_mask_centroids(mask, n_centroids, multichannel)`: the centres
/// (z, y, x) and steps per axis. `mask` holds dims[0]·dims[1]·dims[2]
/// values with at least one true; `multichannel` is skimage's (the image
/// has a channel axis), which sizes the dense subset.
pub(crate) fn mask_centroids(
    mask: &[bool],
    dims: [usize; 3],
    n_centroids: usize,
    multichannel: bool,
) -> (Vec<[f64; 3]>, [f64; 3]) {
    let plane = dims[1] * dims[2];
    // np.nonzero(mask) as flat indices (4 bytes a pixel, not numpy's 24):
    // coord(i) is the i-th mask pixel's (z, y, x). Pixel counts are below
    // 2^32 (slic checks).
    let on: Vec<u32> = mask
        .iter()
        .enumerate()
        .filter(|&(_, &m)| m)
        .map(|(i, _)| i as u32)
        .collect();
    let coord = |i: usize| {
        let p = on[i] as usize;
        [p / plane, (p / dims[2]) % dims[1], p % dims[2]].map(|v| v as f64)
    };
    let mut rng = Mt19937::new(123);
    let idx = rng.choice_sorted(on.len(), n_centroids.min(on.len()));
    // skimage's mask is always 3-D here (a 2-D one gains a z axis), so a
    // grayscale image counts 3 spatial axes and a multichannel one 2.
    let ndim_spatial = if multichannel { 2 } else { 3 };
    let n_dense = 10usize.pow(ndim_spatial).saturating_mul(n_centroids);
    let init: Vec<[f64; 3]> = idx.iter().map(|&i| coord(i as usize)).collect();
    let centroids = if on.len() > n_dense {
        let dense = rng.choice_sorted(on.len(), n_dense);
        kmeans2(dense.len(), |i| coord(dense[i] as usize), init, 5)
    } else {
        kmeans2(on.len(), coord, init, 5)
    };
    let steps = steps(&centroids);
    (centroids, steps)
}

/// A masked image's seeds as the Cython loop receives them.
pub(crate) struct MaskSeeds {
    /// The centres in float32 (skimage's `segments` for float32 images);
    /// z = DEAD_Z for a centre that can win no pixel.
    pub zyx: Vec<[f32; 3]>,
    /// The windows' half-widths / 2: regular_grid of the centre count.
    pub win: [usize; 3],
    /// 1 / step², step = max(steps) in float32 (`cnp.float32_t step`).
    pub spatial_weight: f32,
}

/// skimage.segmentation.slic's seeds of a masked image (`dims` = (z, y,
/// x), depth 1 in 2-D; `multichannel`: a channel axis was given).
pub(crate) fn seeds(
    mask: &[bool],
    dims: [usize; 3],
    n_segments: usize,
    multichannel: bool,
) -> MaskSeeds {
    let (centroids, steps) = mask_centroids(mask, dims, n_segments, multichannel);
    let g = super::regular_grid(dims, centroids.len());
    let step = steps.iter().copied().fold(f64::NEG_INFINITY, f64::max) as f32;
    // As the Cython loop: float32 square, double quotient, float32.
    let spatial_weight = (1.0 / f64::from(step * step)) as f32;
    // A zero step (one centre) makes every distance inf or NaN (0 · inf),
    // which never beats skimage's initial DBL_MAX: no pixel is assigned.
    // Dead centres say so without infinities on the GPU (whose compilers
    // may assume there are none).
    let live = spatial_weight.is_finite();
    MaskSeeds {
        zyx: centroids
            .iter()
            .map(|c| {
                let zyx = c.map(|v| v as f32);
                if live { zyx } else { [DEAD_Z, zyx[1], zyx[2]] }
            })
            .collect(),
        win: [g[0].1, g[1].1, g[2].1],
        spatial_weight: if live { spatial_weight } else { 1.0 },
    }
}

#[cfg(test)]
mod tests {
    //! Against numpy 2.4 / scipy 1.17 / scikit-image 0.26:
    //! crates/core/tests/fixtures/make_slic_mask_seeds.py made the file.
    use super::*;
    use serde_json::Value;

    fn golden() -> Value {
        let text = include_str!("../../../tests/fixtures/slic_mask_seeds.json");
        serde_json::from_str(text).expect("the golden seeds parse")
    }

    fn ints(v: &Value) -> Vec<u64> {
        v.as_array()
            .expect("an array")
            .iter()
            .map(|x| x.as_u64().expect("an integer"))
            .collect()
    }

    fn float(v: &Value) -> f64 {
        f64::from_bits(u64::from_str_radix(v.as_str().expect("hex bits"), 16).expect("hex"))
    }

    fn usizes(v: &Value) -> Vec<usize> {
        ints(v).into_iter().map(|x| x as usize).collect()
    }

    /// The make script's masks, from the same formulas.
    fn mask_of(desc: &Value) -> (Vec<bool>, [usize; 3]) {
        let shape = usizes(&desc["shape"]);
        let dims = if shape.len() == 2 {
            [1, shape[0], shape[1]]
        } else {
            [shape[0], shape[1], shape[2]]
        };
        let off = 3 - shape.len();
        let n: usize = shape.iter().product();
        let mask = (0..n)
            .map(|i| {
                let zyx = [
                    i / (dims[1] * dims[2]),
                    (i / dims[2]) % dims[1],
                    i % dims[2],
                ];
                let c = &zyx[off..];
                match desc["kind"].as_str() {
                    Some("disk") => {
                        let centre = usizes(&desc["centre"]);
                        let d2: i64 = c
                            .iter()
                            .zip(&centre)
                            .map(|(&a, &b)| (a as i64 - b as i64).pow(2))
                            .sum();
                        d2 < desc["r2"].as_i64().expect("r2")
                    }
                    Some("box") => {
                        desc["box"]
                            .as_array()
                            .expect("box")
                            .iter()
                            .zip(c)
                            .all(|(r, &v)| {
                                let r = usizes(r);
                                r[0] <= v && v < r[1]
                            })
                    }
                    Some("hash") => {
                        let seed = desc["seed"].as_u64().expect("seed");
                        let h = (i as u64 * 2_654_435_761 + 40_503 * seed) % (1 << 32);
                        h < desc["below"].as_u64().expect("below")
                    }
                    other => panic!("unknown mask kind {other:?}"),
                }
            })
            .collect();
        (mask, dims)
    }

    #[test]
    fn mt19937_draws_equal_numpy_legacy_random_state() {
        let g = golden();
        let mut rng = Mt19937::new(123);
        let got: Vec<u64> = (0..1300).map(|_| u64::from(rng.next_u32())).collect();
        assert_eq!(got, ints(&g["raw_u32"]));
    }

    #[test]
    fn permutation_and_choice_equal_numpy() {
        let g = golden();
        let mut rng = Mt19937::new(123);
        let mut a: Vec<usize> = (0..1000).collect();
        for i in (1..1000).rev() {
            let j = rng.interval(i as u64) as usize;
            a.swap(i, j);
        }
        assert_eq!(a, usizes(&g["permutation_1000"]));
        // Two choices in a row from one generator, as the seeds take them.
        let mut rng = Mt19937::new(123);
        let wide = |v: Vec<u32>| v.into_iter().map(|x| x as usize).collect::<Vec<_>>();
        assert_eq!(
            wide(rng.choice_sorted(70_000, 50)),
            usizes(&g["choice_50_of_70000"])
        );
        let second = wide(rng.choice_sorted(70_000, 5000));
        assert_eq!(
            second[..100].to_vec(),
            usizes(&g["choice_5000_of_70000_first_100"])
        );
    }

    #[test]
    fn mask_centroids_and_steps_equal_scikit_image_bit_for_bit() {
        let g = golden();
        let cases = g["cases"].as_array().expect("cases");
        assert_eq!(cases.len(), 8);
        for case in cases {
            let (mask, dims) = mask_of(case);
            assert_eq!(
                mask.iter().filter(|&&m| m).count() as u64,
                case["pixels"].as_u64().expect("pixels"),
                "{case}"
            );
            let n = case["n"].as_u64().expect("n") as usize;
            let multichannel = case["multichannel"].as_bool().expect("multichannel");
            let (centroids, steps) = mask_centroids(&mask, dims, n, multichannel);
            assert_eq!(
                centroids.len() as u64,
                case["n_centroids"].as_u64().expect("count")
            );
            let want = case["centroids"].as_array().expect("centroids");
            for (k, (got, row)) in centroids.iter().zip(want).enumerate() {
                let row: Vec<f64> = row.as_array().expect("row").iter().map(float).collect();
                assert_eq!(got.to_vec(), row, "centre {k} of {}", case["kind"]);
            }
            let want_steps: Vec<f64> = case["steps"]
                .as_array()
                .expect("steps")
                .iter()
                .map(float)
                .collect();
            assert_eq!(steps.to_vec(), want_steps, "steps of {case}");
        }
    }

    /// The cell search finds the linear scan's answer (smallest, first on
    /// ties), including exact ties between codes.
    #[test]
    fn nearest_code_equals_the_linear_scan() {
        let codes: Vec<[f64; 3]> = (0..300)
            .map(|i| {
                let t = i as f64;
                [0.0, ((t * 7.3) % 50.0).floor(), ((t * 3.1) % 40.0).floor()]
            })
            .collect();
        let cells = Cells::new(&codes);
        for y in 0..55 {
            for x in 0..45 {
                let p = [0.0, y as f64 - 2.0, x as f64 - 2.0];
                let mut want = 0;
                for (k, c) in codes.iter().enumerate() {
                    if dist2(c, &p) < dist2(&codes[want], &p) {
                        want = k;
                    }
                }
                assert_eq!(cells.nearest(&codes, &p, None, false), Some(want));
            }
        }
    }
}

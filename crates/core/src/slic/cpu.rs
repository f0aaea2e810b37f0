//! CPU twin of the GPU SLIC: the same candidates, the same f32 arithmetic
//! in the same order, the same integer sums, and the connectivity step
//! written as a sequential flood fill in raster order.

use super::host::{Axis, Prepared, count_segments, plain_labels, prepare, search_radius};
use super::{NONE, Segments, SlicParams};
use crate::error::{Error, Result};
use crate::keys::Samples;

/// SLIC on the CPU.
pub fn slic(samples: Samples<'_>, shape: &[usize], p: &SlicParams) -> Result<Segments> {
    let prep = prepare(samples, shape, p, false)?;
    Ok(run(&prep))
}

/// The features the CPU twin clusters (pixel-major, channel last, times
/// 1 / compactness; Lab in float64 rounded once).
pub fn features(samples: Samples<'_>, shape: &[usize], p: &SlicParams) -> Result<Vec<f32>> {
    Ok(prepare(samples, shape, p, false)?.features)
}

/// The CPU twin on the features the GPU computed from an 8-bit RGB image
/// ([`super::lab_features`]): the k-means and connectivity steps compared
/// exactly with the GPU's, apart from the Lab conversion.
pub fn slic_on_features(
    samples: Samples<'_>,
    shape: &[usize],
    p: &SlicParams,
    features: Vec<f32>,
) -> Result<Segments> {
    let mut prep = prepare(samples, shape, p, true)?;
    if prep.lab_table.is_none() || features.len() != prep.n() * prep.nc {
        return Err(Error::InvalidInput(format!(
            "{} features for an image SLIC does not convert to Lab on the GPU, or not {} of them",
            features.len(),
            prep.n() * prep.nc
        )));
    }
    prep.features = features;
    prep.lab_table = None;
    Ok(run(&prep))
}

pub(crate) fn run(prep: &Prepared) -> Segments {
    let (raw, iterations) = kmeans(prep);
    let labels = if prep.enforce {
        connect(
            &raw,
            prep.dims,
            prep.min_size,
            prep.max_size,
            prep.start_label,
        )
    } else {
        plain_labels(&raw, prep.start_label)
    };
    let n_segments = count_segments(&labels, prep.start_label);
    Segments {
        labels,
        shape: prep.out_shape.clone(),
        n_segments,
        iterations,
    }
}

/// A 64-bit two's complement sum as the GPU converts its two words to f32.
pub(crate) fn sum_to_f32(sum: i64) -> f32 {
    let hi = (sum >> 32) as i32;
    let lo = sum as u32;
    hi as f32 * 4294967296.0 + lo as f32
}

/// skimage's window test along one axis: `trunc(max(c - 2·step, 0)) <= p <
/// trunc(min(c + 2·step + 1, n))`, in f32.
fn in_window(c: f32, p: usize, win: usize, n: usize) -> bool {
    let two = (2 * win) as f32;
    let lo = (c - two).max(0.0).trunc();
    let hi = (c + two + 1.0).min(n as f32).trunc();
    let p = p as f32;
    lo <= p && p < hi
}

/// Range of seed indices within `radius` cells of coordinate `p`'s own.
fn candidates(p: usize, a: &Axis, radius: usize) -> (usize, usize) {
    let own = a.own_cell(p);
    (own.saturating_sub(radius), (own + radius).min(a.count - 1))
}

/// The largest distance along each axis of a live centre from its seed
/// (the shader's `drift`, which only grows): the search radius follows it.
fn widen_drift(prep: &Prepared, centres: &[f32], drift: &mut [f32; 3]) {
    let stride = 4 + prep.nc;
    prep.each_seed(|k, seed, _| {
        let c = &centres[k * stride..(k + 1) * stride];
        if c[3] != 0.0 {
            for a in 0..3 {
                drift[a] = drift[a].max((c[a] - seed[a]).abs());
            }
        }
    });
}

/// The k-means iterations; returns the raw labels (centre index or NONE)
/// and the number of iterations run.
pub(crate) fn kmeans(prep: &Prepared) -> (Vec<u32>, usize) {
    if prep.free_seeds.is_some() {
        return kmeans_masked(prep);
    }
    let [nz, ny, nx] = prep.dims;
    let nc = prep.nc;
    let g = &prep.grid;
    let stride = 4 + nc;
    let mut centres = prep.seeds();
    let k_total = prep.n_centres();
    let mut maxdist = vec![1f32; k_total];
    let mut labels = vec![NONE; prep.n()];
    let [sz, sy, sx] = prep.spacing;
    let sw = prep.spatial_weight;
    let reach = [0, 1, 2].map(|a| prep.reach(a));
    let mut drift = [0f32; 3];
    let mut iterations = 0;
    for _ in 0..prep.max_num_iter {
        iterations += 1;
        let mut changed = false;
        let r = [0, 1, 2].map(|a| search_radius(drift[a], reach[a], g[a].step));
        for z in 0..nz {
            let cz_r = candidates(z, &g[0], r[0]);
            for y in 0..ny {
                let cy_r = candidates(y, &g[1], r[1]);
                for x in 0..nx {
                    let i = (z * ny + y) * nx + x;
                    let mut best = NONE;
                    if prep.mask.as_ref().is_none_or(|m| m[i]) {
                        let cx_r = candidates(x, &g[2], r[2]);
                        let f = &prep.features[i * nc..(i + 1) * nc];
                        let mut best_d = Dist::INFINITE;
                        for iz in cz_r.0..=cz_r.1 {
                            for iy in cy_r.0..=cy_r.1 {
                                for ix in cx_r.0..=cx_r.1 {
                                    let k = (iz * g[1].count + iy) * g[2].count + ix;
                                    let c = &centres[k * stride..(k + 1) * stride];
                                    if c[3] == 0.0
                                        || !in_window(c[0], z, prep.win[0], nz)
                                        || !in_window(c[1], y, prep.win[1], ny)
                                        || !in_window(c[2], x, prep.win[2], nx)
                                    {
                                        continue;
                                    }
                                    let d = distance(
                                        [z, y, x],
                                        c,
                                        f,
                                        [sz, sy, sx],
                                        sw,
                                        prep.slic_zero.then(|| maxdist[k]),
                                        prep.exact_ties,
                                    );
                                    if best == NONE || d.less(best_d) {
                                        best_d = d;
                                        best = k as u32;
                                    }
                                }
                            }
                        }
                    }
                    if labels[i] != best {
                        changed = true;
                        labels[i] = best;
                    }
                }
            }
        }
        if !changed {
            break;
        }
        update_centres(
            prep,
            &labels,
            &mut centres,
            prep.slic_zero.then_some(&mut maxdist),
        );
        widen_drift(prep, &centres, &mut drift);
    }
    (labels, iterations)
}

/// The centres from the labels: exact sums of coordinates and fixed-point
/// features (a centre without pixels dies); then SLICO's colour maxima.
fn update_centres(
    prep: &Prepared,
    labels: &[u32],
    centres: &mut [f32],
    maxdist: Option<&mut Vec<f32>>,
) {
    let [_, ny, nx] = prep.dims;
    let nc = prep.nc;
    let stride = 4 + nc;
    let k_total = prep.n_centres();
    let scale = prep.scale();
    let inv_scale = 2f32.powi(-prep.shift);
    let mut count = vec![0u64; k_total];
    let mut sums = vec![0i64; k_total * (3 + nc)];
    for (i, &k) in labels.iter().enumerate() {
        if k == NONE {
            continue;
        }
        let k = k as usize;
        let pos = [i / (ny * nx), (i / nx) % ny, i % nx];
        count[k] += 1;
        let s = &mut sums[k * (3 + nc)..(k + 1) * (3 + nc)];
        for a in 0..3 {
            s[a] += pos[a] as i64;
        }
        for c in 0..nc {
            s[3 + c] += (prep.features[i * nc + c] * scale).round_ties_even() as i32 as i64;
        }
    }
    for k in 0..k_total {
        let c = &mut centres[k * stride..(k + 1) * stride];
        if count[k] == 0 {
            c[3] = 0.0;
            continue;
        }
        let n = count[k] as f32;
        let s = &sums[k * (3 + nc)..(k + 1) * (3 + nc)];
        for a in 0..3 {
            c[a] = sum_to_f32(s[a]) / n;
        }
        for ch in 0..nc {
            c[4 + ch] = sum_to_f32(s[3 + ch]) / n * inv_scale;
        }
    }
    if let Some(maxdist) = maxdist {
        for (i, &k) in labels.iter().enumerate() {
            if k == NONE {
                continue;
            }
            let k = k as usize;
            let c = &centres[k * stride..(k + 1) * stride];
            let d = colour_distance(&prep.features[i * nc..(i + 1) * nc], &c[4..]);
            if maxdist[k] < d {
                maxdist[k] = d;
            }
        }
    }
}

/// The k-means of a masked image, whose seeds lie anywhere
/// (`Prepared::free_seeds`): skimage's position-only pass, then the full
/// one from its centres. Each pass loops over the centres in index order
/// and over the pixels of each one's window, as skimage's Cython loop
/// does; a pixel takes a strictly smaller distance than it holds
/// (infinity at first), so ties keep the lower index and NaN never wins,
/// which the GPU's pixel-centric search (shaders/slic/cells.wgsl) gives
/// in any order. Returns the raw labels and the second pass's iterations.
fn kmeans_masked(prep: &Prepared) -> (Vec<u32>, usize) {
    let mut centres = prep.seeds();
    let mut maxdist = vec![1f32; prep.n_centres()];
    let mut labels = vec![NONE; prep.n()];
    masked_pass(prep, &mut centres, &mut maxdist, &mut labels, false);
    labels.fill(NONE);
    let iterations = masked_pass(prep, &mut centres, &mut maxdist, &mut labels, true);
    (labels, iterations)
}

/// One k-means pass of [`kmeans_masked`] (`colour` false: positions
/// only, as skimage's `ignore_color`); returns its iterations.
fn masked_pass(
    prep: &Prepared,
    centres: &mut [f32],
    maxdist: &mut Vec<f32>,
    labels: &mut [u32],
    colour: bool,
) -> usize {
    let [nz, ny, nx] = prep.dims;
    let nc = prep.nc;
    let stride = 4 + nc;
    let sp = prep.spacing;
    let mask = prep.mask.as_deref();
    let mut iterations = 0;
    let mut dist = vec![Dist::INFINITE; prep.n()];
    let mut next = vec![NONE; prep.n()];
    for _ in 0..prep.max_num_iter {
        iterations += 1;
        dist.fill(Dist::INFINITE);
        next.fill(NONE);
        for k in 0..prep.n_centres() {
            let c = &centres[k * stride..(k + 1) * stride];
            if c[3] == 0.0 {
                continue;
            }
            let [rz, ry, rx] =
                [(0, nz), (1, ny), (2, nx)].map(|(a, n)| window(c[a], prep.win[a], n));
            for z in rz.0..rz.1 {
                for y in ry.0..ry.1 {
                    for x in rx.0..rx.1 {
                        let i = (z * ny + y) * nx + x;
                        if mask.is_some_and(|m| !m[i]) {
                            continue;
                        }
                        let d = if colour {
                            let f = &prep.features[i * nc..(i + 1) * nc];
                            let m = prep.slic_zero.then(|| maxdist[k]);
                            let exact = prep.exact_ties;
                            distance([z, y, x], c, f, sp, prep.spatial_weight, m, exact)
                        } else {
                            Dist {
                                sum: spatial_distance([z, y, x], c, sp, prep.spatial_weight),
                                err: 0.0,
                            }
                        };
                        if d.less(dist[i]) {
                            dist[i] = d;
                            next[i] = k as u32;
                        }
                    }
                }
            }
        }
        let changed = next != labels;
        labels.copy_from_slice(&next);
        if !changed {
            break;
        }
        update_centres(
            prep,
            labels,
            centres,
            (colour && prep.slic_zero).then_some(&mut *maxdist),
        );
    }
    iterations
}

/// skimage's window along one axis: `trunc(max(c - 2·step, 0)) <= p <
/// trunc(min(c + 2·step + 1, n))`, in f32 ([`in_window`]'s bounds).
fn window(c: f32, win: usize, n: usize) -> (usize, usize) {
    let two = (2 * win) as f32;
    let lo = (c - two).max(0.0).trunc() as usize;
    let hi = (c + two + 1.0).min(n as f32).trunc() as usize;
    (lo, hi)
}

fn colour_distance(f: &[f32], c: &[f32]) -> f32 {
    let mut d = 0f32;
    for (a, b) in f.iter().zip(c) {
        let t = a - b;
        d += t * t;
    }
    d
}

/// skimage's spatial distance, `(dz² + dy² + dx²) · weight`.
fn spatial_distance(p: [usize; 3], c: &[f32], s: [f32; 3], sw: f32) -> f32 {
    let mut sq = [0f32; 3];
    for a in 0..3 {
        let d = s[a] * (c[a] - p[a] as f32);
        sq[a] = d * d;
    }
    (sq[0] + sq[1] + sq[2]) * sw
}

/// A distance: skimage's float32 sum of its spatial and colour parts
/// (`sum`) and, with `Prepared::exact_ties`, that sum's rounding error
/// (`err`; the parts' exact sum is `sum + err`). Ordered by `sum`, then by
/// `err`: equal float32 sums are told apart by the exact ones (a total
/// order, so any candidate order gives the same winner, ties to the lower
/// index). skimage sums in float64 for input other than float32, where a
/// colour term of 1e8 does not swallow a spatial one of 1 as a float32
/// sum does (kmeans.wgsl: assign).
#[derive(Clone, Copy, Debug)]
struct Dist {
    sum: f32,
    err: f32,
}

impl Dist {
    const INFINITE: Dist = Dist {
        sum: f32::INFINITY,
        err: 0.0,
    };

    /// Strictly less (NaN never is).
    fn less(self, o: Dist) -> bool {
        self.sum < o.sum || (self.sum == o.sum && self.err < o.err)
    }
}

/// skimage's distance in its order of operations.
fn distance(
    p: [usize; 3],
    c: &[f32],
    f: &[f32],
    s: [f32; 3],
    sw: f32,
    maxdist: Option<f32>,
    exact_ties: bool,
) -> Dist {
    let spatial = spatial_distance(p, c, s, sw);
    let mut colour = colour_distance(f, &c[4..]);
    if let Some(m) = maxdist {
        colour /= m;
    }
    let sum = spatial + colour;
    // Knuth's two-sum: the rounding error of `sum`, exactly.
    let err = if exact_ties {
        let b = sum - spatial;
        (spatial - (sum - b)) + (colour - b)
    } else {
        0.0
    };
    Dist { sum, err }
}

/// The connectivity step, skimage's `_enforce_label_connectivity_cython`:
/// pieces grown by breadth-first search from each unlabelled pixel in
/// raster order (neighbours +x, -x, +y, -y, +z, -z); a piece smaller than
/// `min_size` takes the label of the last already-labelled neighbouring
/// pixel its search met whose label is not the current counter, or keeps
/// the counter, which then is not advanced. A search stops when its piece
/// has `max_size` pixels (at least one, skimage's buffer): the pixels it
/// did not reach start new pieces later, and the neighbours it did not
/// look at are not met.
pub fn connect(
    raw: &[u32],
    dims: [usize; 3],
    min_size: usize,
    max_size: usize,
    start: i32,
) -> Vec<i32> {
    let [nz, ny, nx] = dims;
    let n = raw.len();
    let unset = start - 1;
    let mut out = vec![unset; n];
    let mut queue: Vec<usize> = Vec::new();
    let mut current = start;
    let cap = max_size.max(1);
    for s in 0..n {
        if raw[s] == NONE || out[s] != unset {
            continue;
        }
        let label = raw[s];
        let mut adjacent = current;
        out[s] = current;
        queue.clear();
        queue.push(s);
        let mut visited = 0;
        'search: while visited < queue.len() && queue.len() < cap {
            let i = queue[visited];
            let (z, y, x) = (i / (ny * nx), (i / nx) % ny, i % nx);
            let nb = [
                (x + 1 < nx).then(|| i + 1),
                (x > 0).then(|| i - 1),
                (y + 1 < ny).then(|| i + nx),
                (y > 0).then(|| i - nx),
                (z + 1 < nz).then(|| i + nx * ny),
                (z > 0).then(|| i - nx * ny),
            ];
            for j in nb.into_iter().flatten() {
                if raw[j] == label && out[j] == unset {
                    out[j] = current;
                    queue.push(j);
                    if queue.len() >= cap {
                        break 'search;
                    }
                } else if out[j] != unset && out[j] != current {
                    adjacent = out[j];
                }
            }
            visited += 1;
        }
        if queue.len() < min_size {
            for &i in &queue {
                out[i] = adjacent;
            }
        } else {
            current += 1;
        }
    }
    out
}

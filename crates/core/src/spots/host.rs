//! Production host code of the GPU path: DIALS' decisions in f64 for the
//! pixels the GPU leaves undecided, and whole frames decided on the host
//! when more pixels are undecided than the GPU's list holds. Tested
//! against the CPU reference (`super::cpu`) like the GPU path itself.
//!
//! The decisions are DIALS' (dials/algorithms/image/threshold/local.h),
//! operation by operation in f64: window sums arrive as exact integers and
//! are converted to f64 once, as DIALS' (exact, for integer data)
//! summed-area tables give them. A whole frame keeps its window sums for
//! one row at a time (sums over the window's rows per column, updated row
//! by row, and their prefix along the row), so its memory is a few bytes
//! per pixel (the masks between the tests) instead of per-pixel tables.

use super::{Algorithm, BIG, Counts, SpotOptions, check_frame};
use crate::error::Result;

/// dispersion_extended's first test: a valid pixel is not background.
pub(crate) fn dispersion_nonbackground(
    m: i64,
    x: i64,
    y: i128,
    gain: Option<f64>,
    o: &SpotOptions,
) -> bool {
    if m < o.min_count() || x < 0 {
        return false;
    }
    let (m, x, y) = (m as f64, x as f64, y as f64);
    let nsig_b = o.sigma_background;
    match gain {
        None => {
            let a = m * y - x * x - x * (m - 1.0);
            let c = x * nsig_b * (2.0 * (m - 1.0)).sqrt();
            a > c
        }
        Some(g) => {
            let a = m * y - x * x;
            let c = g * x * (m - 1.0 + nsig_b * (2.0 * (m - 1.0)).sqrt());
            a > c
        }
    }
}

/// The `dispersion` algorithm's test of a valid pixel of value `v`.
pub(crate) fn dispersion_strong(
    m: i64,
    x: i64,
    y: i128,
    v: i64,
    gain: Option<f64>,
    o: &SpotOptions,
) -> bool {
    if !(m >= o.min_count() && x >= 0 && (v as f64) > o.global_threshold) {
        return false;
    }
    let (m, x, y, src) = (m as f64, x as f64, y as f64, v as f64);
    let (nsig_b, nsig_s) = (o.sigma_background, o.sigma_strong);
    let b = m * src - x;
    match gain {
        None => {
            let a = m * y - x * x - x * (m - 1.0);
            let c = x * nsig_b * (2.0 * (m - 1.0)).sqrt();
            let d = nsig_s * (x * m).sqrt();
            a > c && b > d
        }
        Some(g) => {
            let a = m * y - x * x;
            let c = g * x * (m - 1.0 + nsig_b * (2.0 * (m - 1.0)).sqrt());
            let d = nsig_s * (g * x * m).sqrt();
            a > c && b > d
        }
    }
}

/// dispersion_extended's final test of a candidate pixel, with the sums
/// (m, x) over the background pixels of the widened window.
pub(crate) fn final_strong(m: i64, x: i64, v: i64, gain: Option<f64>, o: &SpotOptions) -> bool {
    if !(m >= 0 && x >= 0) {
        return false;
    }
    let (m, x, src) = (m as f64, x as f64, v as f64);
    let global = src > o.global_threshold;
    let mean = if m >= 2.0 { x / m } else { 0.0 };
    let local = match gain {
        None => src >= mean + o.sigma_strong * mean.sqrt(),
        Some(g) => src >= mean + o.sigma_strong * (g * mean).sqrt(),
    };
    global && local
}

/// Which of the GPU's two tests an undecided list comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Test {
    /// The window test: dispersion's strong test, or dispersion_extended's
    /// background test.
    First,
    /// dispersion_extended's final test over the widened window.
    Final,
}

/// DIALS' decisions of the GPU's undecided pixels: `list` holds (pixel,
/// count, Σv, Σv²) entries (Σv² unused by the final test); the answer is
/// (pixel, 0 or 1) word pairs for the fix kernel.
pub(crate) fn decide(
    test: Test,
    list: &[[u64; 4]],
    frame: Counts<'_>,
    o: &SpotOptions,
) -> Vec<u32> {
    let extended = o.algorithm == Algorithm::DispersionExtended;
    let mut fixes = Vec::with_capacity(2 * list.len());
    for &[k, m, x, y] in list {
        let k = k as usize;
        let g = o.gain.at(k);
        let (m, x) = (m as i64, x as i64);
        let yes = match test {
            Test::First if extended => dispersion_nonbackground(m, x, i128::from(y), g, o),
            Test::First => dispersion_strong(m, x, i128::from(y), frame.get(k), g, o),
            Test::Final => final_strong(m, x, frame.get(k), g, o),
        };
        fixes.extend([k as u32, u32::from(yes)]);
    }
    fixes
}

/// Exact sums (count, Σv, Σv²) over the window of half-widths (ky, kx),
/// clipped at the image edges, of the pixels where `include` holds: one
/// row of them at a time, handed to `row(r, m, x, y)` in row order.
fn window_rows(
    [h, w]: [usize; 2],
    [ky, kx]: [usize; 2],
    value: impl Fn(usize) -> i64,
    include: impl Fn(usize) -> bool,
    mut row: impl FnMut(usize, &[i64], &[i64], &[i128]),
) {
    // Sums over the window's rows, per column.
    let mut cm = vec![0i64; w];
    let mut cx = vec![0i64; w];
    let mut cy = vec![0i128; w];
    // Their prefix along the row, a zero in front.
    let mut pm = vec![0i64; w + 1];
    let mut px = vec![0i64; w + 1];
    let mut py = vec![0i128; w + 1];
    let (mut m, mut x, mut y) = (vec![0i64; w], vec![0i64; w], vec![0i128; w]);
    let column_add = |r: usize, sign: i64, cm: &mut [i64], cx: &mut [i64], cy: &mut [i128]| {
        for c in 0..w {
            let k = r * w + c;
            if include(k) {
                let v = value(k);
                cm[c] += sign;
                cx[c] += sign * v;
                cy[c] += i128::from(sign) * i128::from(v) * i128::from(v);
            }
        }
    };
    let (mut added, mut removed) = (0, 0);
    for r in 0..h {
        let (r0, r1) = (r.saturating_sub(ky), (r + ky + 1).min(h));
        while added < r1 {
            column_add(added, 1, &mut cm, &mut cx, &mut cy);
            added += 1;
        }
        while removed < r0 {
            column_add(removed, -1, &mut cm, &mut cx, &mut cy);
            removed += 1;
        }
        for c in 0..w {
            pm[c + 1] = pm[c] + cm[c];
            px[c + 1] = px[c] + cx[c];
            py[c + 1] = py[c] + cy[c];
        }
        for c in 0..w {
            let (c0, c1) = (c.saturating_sub(kx), (c + kx + 1).min(w));
            m[c] = pm[c1] - pm[c0];
            x[c] = px[c1] - px[c0];
            y[c] = py[c1] - py[c0];
        }
        row(r, &m, &x, &y);
    }
}

/// Strong pixels of one frame (row-major), DIALS' definition, decided on
/// the host: the GPU path's answer for a frame with more undecided pixels
/// than its list holds.
pub fn strong_pixels(
    counts: Counts<'_>,
    shape: [usize; 2],
    mask: Option<&[bool]>,
    options: &SpotOptions,
) -> Result<Vec<bool>> {
    check_frame(counts.len(), shape, mask, options)?;
    let [h, w] = shape;
    let n = h * w;
    let o = options;
    let v = |i: usize| counts.get(i);
    let valid = |i: usize| counts.get(i) >= 0 && mask.is_none_or(|m| m[i]);
    let summed = |i: usize| valid(i) && counts.get(i) < BIG;
    let [ky, kx] = o.kernel_size;
    if o.algorithm == Algorithm::Dispersion {
        let mut out = vec![false; n];
        window_rows(shape, [ky, kx], v, summed, |r, m, x, y| {
            for c in 0..w {
                let i = r * w + c;
                out[i] = valid(i) && dispersion_strong(m[c], x[c], y[c], v(i), o.gain.at(i), o);
            }
        });
        return Ok(out);
    }
    // Not background: invalid pixels, and valid ones that pass the test.
    let mut nonbg = vec![true; n];
    window_rows(shape, [ky, kx], v, summed, |r, m, x, y| {
        for c in 0..w {
            let i = r * w + c;
            nonbg[i] = !valid(i) || dispersion_nonbackground(m[c], x[c], y[c], o.gain.at(i), o);
        }
    });
    // Candidates: valid, not background, and at Chebyshev distance >= d
    // from every background pixel (DIALS' chebyshev_distance: nothing
    // outside the image is background; with none, every distance is
    // h + w + 1). Distance >= d: no background pixel in the (2d-1)² box.
    let d = ky.min(kx);
    let mut candidate = vec![false; n];
    if d == 0 || nonbg.iter().all(|&b| b) {
        let far = d == 0 || h + w + 1 >= d;
        for (i, cand) in candidate.iter_mut().enumerate() {
            *cand = far && nonbg[i] && valid(i);
        }
    } else {
        let half = d - 1;
        window_rows(
            shape,
            [half, half],
            |_| 0,
            |i| !nonbg[i],
            |r, m, _, _| {
                for (c, &count) in m.iter().enumerate() {
                    let i = r * w + c;
                    candidate[i] = count == 0 && nonbg[i] && valid(i);
                }
            },
        );
    }
    drop(nonbg);
    // The final test against the background pixels of the window widened by 2.
    let background = |i: usize| summed(i) && !candidate[i];
    let mut out = vec![false; n];
    window_rows(shape, [ky + 2, kx + 2], v, background, |r, m, x, _| {
        for c in 0..w {
            let i = r * w + c;
            out[i] = candidate[i] && final_strong(m[c], x[c], v(i), o.gain.at(i), o);
        }
    });
    Ok(out)
}

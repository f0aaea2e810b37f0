//! CPU reference: DIALS' dispersion and dispersion_extended thresholds
//! (dials/algorithms/image/threshold/local.h) written out plainly, for the
//! tests and `--cpu` only. Window sums are exact integers (i64 / i128) from
//! whole-image summed-area tables, as DIALS computes them; every decision
//! is DIALS' formula in f64, operation by operation, written here again
//! (not shared with the GPU path's host code, `super::host`, which the
//! tests compare with this). The Chebyshev distance follows DIALS'
//! chebyshev_distance: nothing outside the image is background, and with no
//! background pixel at all every distance is height + width + 1.

use super::*;

/// local.h's dispersion tests of one pixel from its window's count `m`,
/// Σv `x`, Σv² `y` and value `src`: (a > c: not background, b > d: above
/// the local mean), with or without gain.
fn dials_tests(
    m: f64,
    x: f64,
    y: f64,
    src: f64,
    gain: Option<f64>,
    o: &SpotOptions,
) -> (bool, bool) {
    let (nsig_b, nsig_s) = (o.sigma_background, o.sigma_strong);
    let b = m * src - x;
    let (a, c, d) = match gain {
        None => (
            m * y - x * x - x * (m - 1.0),
            x * nsig_b * (2.0 * (m - 1.0)).sqrt(),
            nsig_s * (x * m).sqrt(),
        ),
        Some(g) => (
            m * y - x * x,
            g * x * (m - 1.0 + nsig_b * (2.0 * (m - 1.0)).sqrt()),
            nsig_s * (g * x * m).sqrt(),
        ),
    };
    (a > c, b > d)
}

/// DIALS' min_count: 0 stands for the whole window.
fn min_count(o: &SpotOptions) -> i64 {
    let [ky, kx] = o.kernel_size;
    match o.min_local {
        0 => ((2 * ky + 1) * (2 * kx + 1)) as i64,
        n => n as i64,
    }
}

/// Exact window sums (count, Σv, Σv²) of the pixels where `include` holds,
/// over the window of half-widths (ky, kx) clipped at the image edges.
pub(crate) fn window_sums(
    v: &[i64],
    include: &[bool],
    h: usize,
    w: usize,
    ky: usize,
    kx: usize,
) -> (Vec<i64>, Vec<i64>, Vec<i128>) {
    // Summed-area tables with a zero row and column in front.
    let (w1, n1) = (w + 1, (h + 1) * (w + 1));
    let mut sm = vec![0i64; n1];
    let mut sx = vec![0i64; n1];
    let mut sy = vec![0i128; n1];
    for r in 0..h {
        let (mut am, mut ax, mut ay) = (0i64, 0i64, 0i128);
        for c in 0..w {
            let k = r * w + c;
            if include[k] {
                am += 1;
                ax += v[k];
                ay += i128::from(v[k]) * i128::from(v[k]);
            }
            let t = (r + 1) * w1 + c + 1;
            sm[t] = sm[t - w1] + am;
            sx[t] = sx[t - w1] + ax;
            sy[t] = sy[t - w1] + ay;
        }
    }
    let n = h * w;
    let (mut m, mut x, mut y) = (vec![0; n], vec![0; n], vec![0; n]);
    for r in 0..h {
        let (r0, r1) = (r.saturating_sub(ky), (r + ky + 1).min(h));
        for c in 0..w {
            let (c0, c1) = (c.saturating_sub(kx), (c + kx + 1).min(w));
            let (a, b, cc, d) = (r1 * w1 + c1, r0 * w1 + c1, r1 * w1 + c0, r0 * w1 + c0);
            let k = r * w + c;
            m[k] = sm[a] - sm[b] - sm[cc] + sm[d];
            x[k] = sx[a] - sx[b] - sx[cc] + sx[d];
            y[k] = sy[a] - sy[b] - sy[cc] + sy[d];
        }
    }
    (m, x, y)
}

/// DIALS' `chebyshev_distance(nonbg, false) >= d` for every pixel.
pub(crate) fn far_from_background(nonbg: &[bool], h: usize, w: usize, d: usize) -> Vec<bool> {
    if nonbg.iter().all(|&b| b) {
        return vec![h + w + 1 >= d; h * w];
    }
    if d == 0 {
        return vec![true; h * w];
    }
    // A pixel is at distance >= d iff no background pixel lies in the
    // (2d-1)² box around it: count background pixels with a summed-area table.
    let bg: Vec<bool> = nonbg.iter().map(|&b| !b).collect();
    let zeros = vec![0i64; h * w];
    let (count, _, _) = window_sums(&zeros, &bg, h, w, d - 1, d - 1);
    count.iter().map(|&c| c == 0).collect()
}

/// Strong pixels of one frame (row-major, `h` x `w`), DIALS' definition.
pub fn strong_pixels(
    counts: Counts<'_>,
    shape: [usize; 2],
    mask: Option<&[bool]>,
    options: &SpotOptions,
) -> Result<Vec<bool>> {
    let [h, w] = shape;
    check_frame(counts.len(), shape, mask, options)?;
    let v: Vec<i64> = (0..h * w).map(|i| counts.get(i)).collect();
    let valid: Vec<bool> = (0..h * w)
        .map(|i| v[i] >= 0 && mask.is_none_or(|m| m[i]))
        .collect();
    let summed: Vec<bool> = (0..h * w).map(|i| valid[i] && v[i] < BIG).collect();
    let [ky, kx] = options.kernel_size;
    let (m, x, y) = window_sums(&v, &summed, h, w, ky, kx);
    let gain = |i: usize| options.gain.at(i);
    let out = match options.algorithm {
        Algorithm::Dispersion => (0..h * w)
            .map(|i| {
                let tested = m[i] >= min_count(options)
                    && x[i] >= 0
                    && (v[i] as f64) > options.global_threshold;
                let (m, x, y, src) = (m[i] as f64, x[i] as f64, y[i] as f64, v[i] as f64);
                valid[i] && tested && {
                    let (not_bg, above) = dials_tests(m, x, y, src, gain(i), options);
                    not_bg && above
                }
            })
            .collect(),
        Algorithm::DispersionExtended => {
            let nonbg: Vec<bool> = (0..h * w)
                .map(|i| {
                    let tested = m[i] >= min_count(options) && x[i] >= 0;
                    let (m, x, y, src) = (m[i] as f64, x[i] as f64, y[i] as f64, v[i] as f64);
                    !valid[i] || (tested && dials_tests(m, x, y, src, gain(i), options).0)
                })
                .collect();
            let far = far_from_background(&nonbg, h, w, ky.min(kx));
            let candidate: Vec<bool> = (0..h * w).map(|i| valid[i] && nonbg[i] && far[i]).collect();
            let background: Vec<bool> = (0..h * w)
                .map(|i| valid[i] && !candidate[i] && v[i] < BIG)
                .collect();
            let (m2, x2, _) = window_sums(&v, &background, h, w, ky + 2, kx + 2);
            (0..h * w)
                .map(|i| {
                    // local.h's final test: the mean of the background
                    // pixels of the widened window (0 below 2 of them).
                    let (m, x, src) = (m2[i] as f64, x2[i] as f64, v[i] as f64);
                    let mean = if m >= 2.0 { x / m } else { 0.0 };
                    let spread = match gain(i) {
                        None => mean.sqrt(),
                        Some(g) => (g * mean).sqrt(),
                    };
                    candidate[i]
                        && m2[i] >= 0
                        && x2[i] >= 0
                        && src > options.global_threshold
                        && src >= mean + options.sigma_strong * spread
                })
                .collect()
        }
    };
    Ok(out)
}

/// Spots of a stack of frames (`shape` = [frames, h, w]): strong pixels per
/// frame, connected 4-wise per frame or 6-wise through the stack (`three_d`),
/// measured and filtered by size.
pub fn find_spots(
    counts: Counts<'_>,
    shape: [usize; 3],
    mask: Option<&[bool]>,
    options: &SpotOptions,
    three_d: bool,
) -> Result<SpotResult> {
    let [nz, h, w] = shape;
    let plane = h * w;
    if counts.len() != nz * plane {
        return Err(Error::InvalidInput(format!(
            "{} values do not fill {nz} frames of {h} x {w}",
            counts.len()
        )));
    }
    let mut strong = Vec::with_capacity(nz * plane);
    for z in 0..nz {
        let frame = counts.slice(z * plane..(z + 1) * plane);
        strong.extend(strong_pixels(frame, [h, w], mask, options)?);
    }
    let (labels, n) = if three_d {
        let l = crate::segment::label::cpu::label(&strong, &[nz, h, w], 1)?;
        (l.labels, l.count)
    } else {
        let mut all = Vec::with_capacity(strong.len());
        let mut offset = 0i32;
        for z in 0..nz {
            let l =
                crate::segment::label::cpu::label(&strong[z * plane..(z + 1) * plane], &[h, w], 1)?;
            all.extend(
                l.labels
                    .iter()
                    .map(|&x| if x == 0 { 0 } else { x + offset }),
            );
            offset += l.count as i32;
        }
        (all, offset as usize)
    };
    let mut sums = vec![SpotSums::default(); n];
    for (i, &l) in labels.iter().enumerate() {
        if l > 0 {
            let (z, r, c) = (i / plane, (i / w) % h, i % w);
            sums[l as usize - 1].add([z as u64, r as u64, c as u64], counts.get(i) as u64);
        }
    }
    Ok(SpotResult::from_sums(strong, &sums, options))
}

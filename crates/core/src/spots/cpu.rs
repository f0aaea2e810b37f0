//! CPU reference: DIALS' dispersion and dispersion_extended thresholds
//! (dials/algorithms/image/threshold/local.h) written out plainly. Window
//! sums are exact integers (i64 / i128); every decision is DIALS' formula in
//! f64, operation by operation (see `decide` in the parent module). The
//! Chebyshev distance follows DIALS' chebyshev_distance: nothing outside the
//! image is background, and with no background pixel at all every distance
//! is height + width + 1.

use super::*;

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
            .map(|i| valid[i] && dispersion_strong(m[i], x[i], y[i], v[i], gain(i), options))
            .collect(),
        Algorithm::DispersionExtended => {
            let nonbg: Vec<bool> = (0..h * w)
                .map(|i| !valid[i] || dispersion_nonbackground(m[i], x[i], y[i], gain(i), options))
                .collect();
            let far = far_from_background(&nonbg, h, w, ky.min(kx));
            let candidate: Vec<bool> = (0..h * w).map(|i| valid[i] && nonbg[i] && far[i]).collect();
            let background: Vec<bool> = (0..h * w)
                .map(|i| valid[i] && !candidate[i] && v[i] < BIG)
                .collect();
            let (m2, x2, _) = window_sums(&v, &background, h, w, ky + 2, kx + 2);
            (0..h * w)
                .map(|i| candidate[i] && final_strong(m2[i], x2[i], v[i], gain(i), options))
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

//! CPU reference, for the tests and `--cpu` only: astropy's loop written
//! out in f64 with a full sort for the median.

use super::*;

/// Sigma-clipped statistics of any dtype; `mask`: true = excluded.
pub fn sigma_clipped_stats(
    samples: Samples<'_>,
    mask: Option<&[bool]>,
    options: &ClipOptions,
) -> Result<ClipStats> {
    let (sl, su) = options.sigmas()?;
    check_mask(samples.len(), mask)?;
    let all = to_f64(samples);
    let mut v: Vec<f64> = all
        .iter()
        .enumerate()
        .filter(|&(i, x)| x.is_finite() && !mask.is_some_and(|m| m[i]))
        .map(|(_, &x)| x)
        .collect();
    if v.is_empty() {
        return Err(no_values());
    }
    let f32_bounds = matches!(samples, Samples::F32(_));
    let maxiters = options.maxiters.unwrap_or(u32::MAX);
    let mut iterations = 0;
    let mut changed = true;
    // Strict comparisons with std 0 can remove every value: astropy and
    // the workshop loop then report NaN statistics, and so do we.
    while changed && iterations < maxiters && !v.is_empty() {
        iterations += 1;
        let cen = match options.cenfunc {
            CenFunc::Median => median(&v),
            CenFunc::Mean => mean(&v),
        };
        let std = std(&v);
        let (lo, hi) = if f32_bounds {
            let (c, s) = (cen as f32, std as f32);
            (f64::from(c - s * sl as f32), f64::from(c + s * su as f32))
        } else {
            (cen - std * sl, cen + std * su)
        };
        let before = v.len();
        v.retain(|&x| {
            if options.strict {
                x > lo && x < hi
            } else {
                x >= lo && x <= hi
            }
        });
        changed = v.len() != before;
    }
    Ok(ClipStats {
        mean: mean(&v),
        median: median(&v),
        std: std(&v),
        n_kept: v.len(),
        iterations,
    })
}

fn to_f64(s: Samples<'_>) -> Vec<f64> {
    match s {
        Samples::U8(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Samples::I8(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Samples::U16(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Samples::I16(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Samples::U32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Samples::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Samples::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Samples::U64(v) => v.iter().map(|&x| x as f64).collect(),
        Samples::I64(v) => v.iter().map(|&x| x as f64).collect(),
        Samples::F64(v) => v.to_vec(),
    }
}

pub(crate) fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

pub(crate) fn std(v: &[f64]) -> f64 {
    let m = mean(v);
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64).sqrt()
}

pub(crate) fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

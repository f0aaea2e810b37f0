//! Averaging flats and darks per pixel (production host code: a handful of
//! frames, read once; tested against numpy through the Python tests and
//! against an independent sum in `tests/normalize.rs`).

use super::Averaging;
use crate::error::{Error, Result};

/// One field from `frames` (whole planes of `n` pixels, one after the
/// other), as numpy averages along axis 0.
pub(super) fn average(
    frames: &[f32],
    n: usize,
    averaging: Averaging,
    what: &str,
) -> Result<Vec<f32>> {
    if n == 0 || frames.is_empty() || !frames.len().is_multiple_of(n) {
        return Err(Error::InvalidInput(format!(
            "{} {what} values are not whole frames of {n} pixels: give at least one {what} frame of the projections' size",
            frames.len()
        )));
    }
    let count = frames.len() / n;
    Ok(match averaging {
        Averaging::Mean => {
            // numpy reduces axis 0 plane by plane into a float32
            // accumulator, then divides by the count as float32.
            let mut sum = frames[..n].to_vec();
            for plane in frames[n..].chunks_exact(n) {
                for (s, &v) in sum.iter_mut().zip(plane) {
                    *s += v;
                }
            }
            let c = count as f32;
            sum.iter_mut().for_each(|s| *s /= c);
            sum
        }
        Averaging::Median => {
            let mut column = Vec::with_capacity(count);
            (0..n)
                .map(|i| {
                    column.clear();
                    column.extend((0..count).map(|k| frames[k * n + i]));
                    median(&mut column)
                })
                .collect()
        }
    })
}

/// numpy's median of float32 values: NaN if any is NaN; the mean of the
/// two middle values for an even count.
fn median(values: &mut [f32]) -> f32 {
    if values.iter().any(|v| v.is_nan()) {
        return f32::NAN;
    }
    values.sort_unstable_by(f32::total_cmp);
    let m = values.len() / 2;
    if values.len() % 2 == 1 {
        values[m]
    } else {
        // Rounded once from the exact sum, as float32 (a + b) / 2.
        ((f64::from(values[m - 1]) + f64::from(values[m])) / 2.0) as f32
    }
}

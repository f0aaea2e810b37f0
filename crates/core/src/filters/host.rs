//! Production host code of the linear filters: a filter of 1-D passes (a
//! Gaussian's) applied in place on the host, one line at a time, for
//! operations that smooth their input before the GPU takes it (SLIC's
//! pre-smoothing). It computes the CPU reference's answer bit for bit (the
//! same float64 sums in scipy's order); a test compares the two.

use crate::boundary::map_coordinate;
use crate::error::{Error, Result};

use super::{Boundary, Filter, Output, Pass};

/// Applies the 1-D passes of `filter` (float output) to one channel of an
/// interleaved array: pixel `i` of the (z, y, x) volume `dims` is
/// `data[i * channels + channel]`. A pass that is not 1-D is an error.
pub fn apply_1d_in_place(
    filter: &Filter,
    data: &mut [f64],
    dims: [usize; 3],
    channels: usize,
    channel: usize,
    boundary: Boundary,
) -> Result<()> {
    let n: usize = dims.iter().product();
    if filter.ndim != 3 || channel >= channels || n.checked_mul(channels) != Some(data.len()) {
        return Err(Error::InvalidInput(format!(
            "{} values for {channels} channel(s) of shape {dims:?} and a {}-D filter",
            data.len(),
            filter.ndim
        )));
    }
    let strides = [dims[1] * dims[2], dims[2], 1];
    let mut line = Vec::new();
    for pass in &filter.passes {
        // A single tap (a tiny sigma) along x: any axis gives its values.
        let axis = (0..3).find(|&a| pass.shape[a] > 1).unwrap_or(2);
        if !pass.one_d || (0..3).any(|a| a != axis && pass.shape[a] != 1) {
            return Err(Error::InvalidInput(
                "the host applies 1-D passes only".into(),
            ));
        }
        let len = dims[axis];
        let step = strides[axis] * channels;
        // The first pixel of every line along `axis`.
        let [oz, oy, ox] = [0, 1, 2].map(|a| if a == axis { 1 } else { dims[a] });
        for z in 0..oz {
            for y in 0..oy {
                for x in 0..ox {
                    let first = (z * strides[0] + y * strides[1] + x) * channels + channel;
                    fill_line(&mut line, data, first, step, len, pass, axis, boundary);
                    for (p, out) in (0..len).map(|p| (p, first + p * step)) {
                        data[out] = correlate1d(pass, axis, &line[p..]);
                    }
                }
            }
        }
    }
    Ok(())
}

/// The line's values with the boundary applied, extended by the pass's
/// reach: `line[p + left]` is the value at coordinate `p`.
#[allow(clippy::too_many_arguments)]
fn fill_line(
    line: &mut Vec<f64>,
    data: &[f64],
    first: usize,
    step: usize,
    len: usize,
    pass: &Pass,
    axis: usize,
    boundary: Boundary,
) {
    let left = pass.left[axis] as i64;
    let taps = pass.shape[axis] as i64;
    line.clear();
    for c in -left..len as i64 + taps - 1 - left {
        line.push(match map_coordinate(c, len, boundary.mode) {
            Some(at) => data[first + at * step],
            None => boundary.cval,
        });
    }
}

/// The whole filter on the host in float64, scipy's sums in scipy's order
/// and its cast after every pass: the answer for samples the GPU's float32
/// path cannot hold exactly (see [`super::gpu_exact`]). Equals the CPU
/// reference bit for bit (a test compares the two).
pub fn apply(
    filter: &Filter,
    input: &[f64],
    shape: &[usize],
    boundary: Boundary,
    output: Output,
) -> Result<Vec<f64>> {
    let s = crate::chunk::shape3(shape)?;
    if shape.len() != filter.ndim || s.iter().product::<usize>() != input.len() {
        return Err(Error::InvalidInput(format!(
            "{} values for shape {shape:?} and a {}-D filter",
            input.len(),
            filter.ndim
        )));
    }
    let mut data = input.to_vec();
    for pass in &filter.passes {
        if pass.one_d {
            let one = Filter {
                ndim: 3,
                passes: vec![pass.clone()],
            };
            apply_1d_in_place(&one, &mut data, s, 1, 0, boundary)?;
        } else {
            data = correlate_nd(pass, &data, s, boundary);
        }
        data.iter_mut().for_each(|v| *v = output.cast(*v));
    }
    if filter.passes.is_empty() {
        data.iter_mut().for_each(|v| *v = output.cast(*v));
    }
    Ok(data)
}

/// An n-D pass in scipy's NI_Correlate order: taps in C order, weights
/// within machine epsilon of zero left out.
fn correlate_nd(pass: &Pass, data: &[f64], s: [usize; 3], boundary: Boundary) -> Vec<f64> {
    let taps: Vec<([i64; 3], f64)> = (0..pass.weights.len())
        .filter(|&t| pass.weights[t].abs() > f64::EPSILON)
        .map(|t| {
            let k = [
                t / (pass.shape[1] * pass.shape[2]),
                t / pass.shape[2] % pass.shape[1],
                t % pass.shape[2],
            ];
            (
                [0, 1, 2].map(|a| k[a] as i64 - pass.left[a] as i64),
                pass.weights[t],
            )
        })
        .collect();
    let mut out = vec![0.0; data.len()];
    for z in 0..s[0] {
        for y in 0..s[1] {
            for x in 0..s[2] {
                let p = [z, y, x];
                let mut acc = 0.0;
                for (d, w) in &taps {
                    let c = |a: usize| map_coordinate(p[a] as i64 + d[a], s[a], boundary.mode);
                    let v = match (c(0), c(1), c(2)) {
                        (Some(cz), Some(cy), Some(cx)) => data[(cz * s[1] + cy) * s[2] + cx],
                        _ => boundary.cval,
                    };
                    acc += v * w;
                }
                out[(z * s[1] + y) * s[2] + x] = acc;
            }
        }
    }
    out
}

/// scipy's NI_Correlate1D order (as the reference's `correlate1d`): a
/// symmetric kernel adds mirrored pairs from the outside in after the
/// centre; others start with the last tap. `window[t]` is tap t's value.
fn correlate1d(pass: &Pass, axis: usize, window: &[f64]) -> f64 {
    let w = &pass.weights;
    let n = w.len();
    let size1 = n / 2;
    let symmetric = n % 2 == 1 && (1..=size1).all(|j| w[size1 + j] == w[size1 - j]);
    debug_assert_eq!(pass.shape[axis], n);
    if symmetric {
        let mut acc = window[size1] * w[size1];
        for j in (1..=size1).rev() {
            acc += (window[size1 - j] + window[size1 + j]) * w[size1 - j];
        }
        acc
    } else {
        let mut acc = window[n - 1] * w[n - 1];
        for (t, &wt) in w.iter().enumerate().take(n - 1) {
            acc += window[t] * wt;
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boundary::Mode;
    use crate::filters::{Output, cpu};

    /// The host's passes give the CPU reference's values bit for bit, on
    /// every channel of interleaved data, in every boundary mode.
    #[test]
    fn equals_the_reference_bit_for_bit() {
        let dims = [4, 7, 9];
        let n: usize = dims.iter().product();
        let channels = 3;
        let data: Vec<f64> = (0..n * channels)
            .map(|i| ((i * 7919 + 13) % 101) as f64 / 7.0 - 3.0)
            .collect();
        for sigma in [[0.0, 1.3, 0.7], [2.1, 0.0, 0.0], [0.4, 3.0, 5.5]] {
            let filter = Filter::gaussian(3, &sigma, 4.0).unwrap();
            for mode in [
                Mode::Reflect,
                Mode::Constant,
                Mode::Nearest,
                Mode::Mirror,
                Mode::Wrap,
            ] {
                let boundary = Boundary { mode, cval: 0.25 };
                let mut host = data.clone();
                for c in 0..channels {
                    apply_1d_in_place(&filter, &mut host, dims, channels, c, boundary).unwrap();
                    let plane: Vec<f64> = (0..n).map(|i| data[i * channels + c]).collect();
                    let want = cpu::apply(&filter, &plane, &dims, boundary, Output::Float).unwrap();
                    let got: Vec<u64> = (0..n).map(|i| host[i * channels + c].to_bits()).collect();
                    let want: Vec<u64> = want.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(got, want, "sigma {sigma:?}, {mode:?}, channel {c}");
                }
            }
        }
    }

    #[test]
    fn other_passes_and_shapes_are_errors() {
        let b = Boundary::default();
        let f = Filter::correlate(3, &[1.0; 8], &[2, 2, 2]).unwrap();
        assert!(apply_1d_in_place(&f, &mut [0.0; 8], [2, 2, 2], 1, 0, b).is_err());
        let g = Filter::gaussian(3, &[1.0], 4.0).unwrap();
        assert!(apply_1d_in_place(&g, &mut [0.0; 8], [2, 2, 3], 1, 0, b).is_err());
        assert!(apply_1d_in_place(&g, &mut [0.0; 8], [2, 2, 2], 1, 1, b).is_err());
    }
}

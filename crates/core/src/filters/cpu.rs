//! CPU reference of the linear filters: the definition, pass by pass, in f64.

use crate::chunk::{map_coordinate, shape3};
use crate::error::{Error, Result};

use super::{Boundary, Filter, Output};

/// Applies `filter` to `input` of `shape` as scipy.ndimage does.
pub fn apply(
    filter: &Filter,
    input: &[f64],
    shape: &[usize],
    boundary: Boundary,
    output: Output,
) -> Result<Vec<f64>> {
    let s = shape3(shape)?;
    if shape.len() != filter.ndim {
        return Err(Error::InvalidInput(format!(
            "a filter for {}-D arrays applied to a {}-D array",
            filter.ndim,
            shape.len()
        )));
    }
    if s.iter().product::<usize>() != input.len() {
        return Err(Error::InvalidInput(format!(
            "{} values for shape {shape:?}",
            input.len()
        )));
    }
    let mut current = input.to_vec();
    for pass in &filter.passes {
        let mut next = vec![0.0; current.len()];
        // Input value at offset (dz, dy, dx) from (z, y, x), boundary applied.
        let at = |z: usize, y: usize, x: usize, d: [i64; 3], current: &[f64]| -> f64 {
            let c = |a: usize, p: usize| map_coordinate(p as i64 + d[a], s[a], boundary.mode);
            match (c(0, z), c(1, y), c(2, x)) {
                (Some(cz), Some(cy), Some(cx)) => current[(cz * s[1] + cy) * s[2] + cx],
                _ => boundary.cval,
            }
        };
        for z in 0..s[0] {
            for y in 0..s[1] {
                for x in 0..s[2] {
                    let acc = if pass.one_d {
                        correlate1d(pass, |d| at(z, y, x, d, &current))
                    } else {
                        correlate_nd(pass, |d| at(z, y, x, d, &current))
                    };
                    next[(z * s[1] + y) * s[2] + x] = quantize(acc, output);
                }
            }
        }
        current = next;
    }
    if filter.passes.is_empty() {
        current.iter_mut().for_each(|v| *v = quantize(*v, output));
    }
    Ok(current)
}

/// scipy's C cast of a double into an integer output: truncation toward
/// zero, then wrap-around modulo 2^bits.
pub fn quantize(v: f64, output: Output) -> f64 {
    output.cast(v)
}

/// The offset of tap `t` along the pass's single axis.
fn tap_offset(pass: &super::Pass, t: usize) -> [i64; 3] {
    [0, 1, 2].map(|a| {
        if pass.shape[a] > 1 {
            t as i64 - pass.left[a] as i64
        } else {
            0
        }
    })
}

/// scipy's NI_Correlate1D order: symmetric kernels add mirrored pairs from
/// the outside in after the centre; others start with the last tap.
fn correlate1d(pass: &super::Pass, value: impl Fn([i64; 3]) -> f64) -> f64 {
    let w = &pass.weights;
    let n = w.len();
    let size1 = n / 2;
    let symmetric = n % 2 == 1 && (1..=size1).all(|j| w[size1 + j] == w[size1 - j]);
    if symmetric {
        let mut acc = value(tap_offset(pass, size1)) * w[size1];
        for j in (1..=size1).rev() {
            acc += (value(tap_offset(pass, size1 - j)) + value(tap_offset(pass, size1 + j)))
                * w[size1 - j];
        }
        acc
    } else {
        let mut acc = value(tap_offset(pass, n - 1)) * w[n - 1];
        for (t, &wt) in w.iter().enumerate().take(n - 1) {
            acc += value(tap_offset(pass, t)) * wt;
        }
        acc
    }
}

/// scipy's NI_Correlate order: taps in C order, weights within machine
/// epsilon of zero left out of the footprint.
fn correlate_nd(pass: &super::Pass, value: impl Fn([i64; 3]) -> f64) -> f64 {
    let mut acc = 0.0;
    let mut t = 0;
    for kz in 0..pass.shape[0] {
        for ky in 0..pass.shape[1] {
            for kx in 0..pass.shape[2] {
                let wt = pass.weights[t];
                t += 1;
                if wt.abs() > f64::EPSILON {
                    let d = [
                        kz as i64 - pass.left[0] as i64,
                        ky as i64 - pass.left[1] as i64,
                        kx as i64 - pass.left[2] as i64,
                    ];
                    acc += value(d) * wt;
                }
            }
        }
    }
    acc
}

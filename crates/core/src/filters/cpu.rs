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
        for z in 0..s[0] {
            for y in 0..s[1] {
                for x in 0..s[2] {
                    let mut acc = 0.0;
                    let mut w = 0;
                    for kz in 0..pass.shape[0] {
                        let cz = map_coordinate(
                            z as i64 + kz as i64 - pass.left[0] as i64,
                            s[0],
                            boundary.mode,
                        );
                        for ky in 0..pass.shape[1] {
                            let cy = map_coordinate(
                                y as i64 + ky as i64 - pass.left[1] as i64,
                                s[1],
                                boundary.mode,
                            );
                            for kx in 0..pass.shape[2] {
                                let cx = map_coordinate(
                                    x as i64 + kx as i64 - pass.left[2] as i64,
                                    s[2],
                                    boundary.mode,
                                );
                                let v = match (cz, cy, cx) {
                                    (Some(cz), Some(cy), Some(cx)) => {
                                        current[(cz * s[1] + cy) * s[2] + cx]
                                    }
                                    _ => boundary.cval,
                                };
                                acc += pass.weights[w] * v;
                                w += 1;
                            }
                        }
                    }
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
    match output {
        Output::Float => v,
        Output::Integer { bits, signed } => {
            let span = 2f64.powi(bits as i32);
            let t = v.trunc();
            let mut w = t - (t / span).floor() * span;
            if signed && w >= span / 2.0 {
                w -= span;
            }
            w
        }
    }
}

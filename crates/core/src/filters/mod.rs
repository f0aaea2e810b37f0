//! Linear filters with scipy.ndimage semantics: `gaussian_filter`,
//! `correlate` and `convolve` on 1-D to 3-D arrays.
//!
//! A [`Filter`] is a sequence of correlation passes (one per axis for a
//! Gaussian, one n-D pass for an arbitrary kernel). The GPU path lives in
//! `gpu`, the CPU reference in `cpu`; both take the same [`Filter`]. `host`
//! applies 1-D passes on the host for production code (SLIC's smoothing).

pub mod cpu;
mod gpu;
pub mod host;
pub mod median;
mod params;
mod wgsl;

pub use gpu::{apply, apply_into, apply_on_device, apply_stream, kernel_ms};
pub use params::{ConvolveParams, GaussianParams, MedianParams, NdArray};
pub(crate) use wgsl::generated_shaders;

pub use crate::boundary::{MODES, Mode};
use crate::chunk::Shape3;
use crate::error::{Error, Result};

/// How each pass's result is stored, as scipy stores it in the output dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Output {
    /// Floating point: no rounding between passes.
    #[default]
    Float,
    /// An integer dtype: truncation toward zero, then wrap-around modulo 2^bits
    /// (what scipy's C cast does), after every pass.
    Integer { bits: u32, signed: bool },
}

impl Output {
    /// scipy's C cast of a double into this output: truncation toward zero,
    /// then wrap-around modulo 2^bits (x86-64's conversions for the
    /// in-range values scipy's own sums give; out of range its C cast is
    /// undefined, see docs/filters.md).
    pub fn cast(self, v: f64) -> f64 {
        match self {
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
}

/// Whether the GPU's float32 path gives scipy's answer for these samples:
/// every sample is a float32 value (integers up to 2^24 in magnitude, any
/// float32), and so is the constant of mode constant. Integer outputs are
/// then exact (two-word sums of exact products, correlate.wgsl); other
/// samples, such as uint32 detector gaps of 2^32 - 1, round on the way in,
/// and callers filter them with [`host::apply`] instead.
pub fn gpu_exact(input: crate::keys::Samples<'_>, boundary: Boundary) -> bool {
    use crate::keys::Samples as S;
    fn int(v: impl Iterator<Item = i128>) -> bool {
        // Every integer of magnitude up to 2^24 is a float32; larger ones
        // only when a power of two's multiple, which needs no special case.
        v.map(|x| x.unsigned_abs()).max().unwrap_or(0) <= 1 << 24
    }
    let cval = boundary.mode != Mode::Constant || f64::from(boundary.cval as f32) == boundary.cval;
    cval && match input {
        S::U8(_) | S::I8(_) | S::U16(_) | S::I16(_) | S::F32(_) => true,
        S::U32(v) => int(v.iter().map(|&x| i128::from(x))),
        S::I32(v) => int(v.iter().map(|&x| i128::from(x))),
        S::U64(v) => int(v.iter().map(|&x| i128::from(x))),
        S::I64(v) => int(v.iter().map(|&x| i128::from(x))),
        S::F64(v) => v.iter().all(|&x| f64::from(x as f32) == x),
    }
}

/// Boundary handling shared by every pass.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Boundary {
    pub mode: Mode,
    pub cval: f64,
}

/// One correlation pass: weights of shape `shape` (z, y, x, C order) whose
/// centre sits `left` taps from the start on each axis.
#[derive(Clone, Debug, PartialEq)]
pub struct Pass {
    pub shape: Shape3,
    pub left: Shape3,
    pub weights: Vec<f64>,
    /// A 1-D pass of `gaussian_filter` (scipy's correlate1d); otherwise an
    /// n-D correlation. The CPU reference follows each one's summation order.
    pub one_d: bool,
}

impl Pass {
    /// The weights as the GPU's float path multiplies them: f32 values
    /// whose sum stays within a tiny fraction of the f64 weights' sum.
    /// Rounding each to the nearest f32 can leave their sum off by about
    /// 2e-8 (a Gaussian of sigma 1), a bias of that share in every output:
    /// scipy's test of a Gaussian's sum (`test_gauss03`) then fails its
    /// tolerance. The largest weights are rounded first, each smaller one
    /// absorbing the error left so far, by at most 2^-19 of itself; mirrored
    /// pairs of a symmetric kernel stay equal; weights exact in f32 (float32
    /// kernels) and zeros keep their value.
    pub fn f32_weights(&self) -> Vec<f32> {
        let w = &self.weights;
        let n = w.len();
        let mut out: Vec<f32> = w.iter().map(|&v| v as f32).collect();
        let symmetric = (0..n / 2).all(|i| w[i] == w[n - 1 - i]);
        let mut order: Vec<usize> = if symmetric {
            (0..n.div_ceil(2)).collect()
        } else {
            (0..n).collect()
        };
        order.sort_by(|&a, &b| w[b].abs().total_cmp(&w[a].abs()).then(a.cmp(&b)));
        // The f64 sum of the chosen weights minus that of the true ones.
        let mut error = 0.0f64;
        for i in order {
            let copies = if symmetric && i != n - 1 - i {
                2.0
            } else {
                1.0
            };
            if w[i] == 0.0 || !(w[i] as f32).is_finite() {
                continue;
            }
            let reach = w[i].abs() * 2f64.powi(-19);
            let best = (w[i] - error / copies).clamp(w[i] - reach, w[i] + reach) as f32;
            error += copies * (f64::from(best) - w[i]);
            out[i] = best;
            out[n - 1 - i] = if copies == 2.0 { best } else { out[n - 1 - i] };
        }
        out
    }

    /// Reach of the pass on each side of an output element, per axis.
    pub fn reach(&self) -> Shape3 {
        [0, 1, 2].map(|a| self.left[a].max(self.shape[a] - 1 - self.left[a]))
    }
}

/// A filter for arrays of a given dimensionality: passes applied in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Filter {
    pub ndim: usize,
    pub passes: Vec<Pass>,
}

/// Largest kernel extent per axis, to keep a kernel within one dispatch's
/// reasonable work and the halo within any binding.
const MAX_KERNEL_EXTENT: usize = 1025;

impl Filter {
    /// `scipy.ndimage.gaussian_filter(input, sigma, order=0, truncate=...)`:
    /// one 1-D pass per axis with sigma > 0, axis 0 first.
    pub fn gaussian(ndim: usize, sigma: &[f64], truncate: f64) -> Result<Filter> {
        check_ndim(ndim)?;
        let sigma = per_axis(sigma, ndim, "sigma")?;
        if !truncate.is_finite() || truncate <= 0.0 {
            return Err(Error::param(
                "truncate",
                format!("{truncate} (must be a positive number)"),
            ));
        }
        let mut passes = Vec::new();
        for (axis, &s) in sigma.iter().enumerate() {
            if !s.is_finite() || s < 0.0 {
                return Err(Error::param(
                    "sigma",
                    format!("{s} (must be zero or a positive number)"),
                ));
            }
            if s <= 1e-15 {
                continue; // scipy skips such axes entirely
            }
            let weights = gaussian_kernel1d(s, truncate)?;
            let radius = weights.len() / 2;
            let a3 = axis + 3 - ndim;
            let mut shape = [1; 3];
            let mut left = [0; 3];
            shape[a3] = weights.len();
            left[a3] = radius;
            passes.push(Pass {
                shape,
                left,
                weights,
                one_d: true,
            });
        }
        Ok(Filter { ndim, passes })
    }

    /// `scipy.ndimage.correlate(input, weights, origin=0)`: the kernel is not
    /// flipped; its centre is at `len // 2` on each axis.
    pub fn correlate(ndim: usize, weights: &[f64], weights_shape: &[usize]) -> Result<Filter> {
        let (shape, weights) = kernel_box(ndim, weights, weights_shape)?;
        let left = shape.map(|n| n / 2);
        Ok(Filter {
            ndim,
            passes: vec![Pass {
                shape,
                left,
                weights,
                one_d: false,
            }],
        })
    }

    /// `scipy.ndimage.convolve(input, weights, origin=0)`: the kernel is
    /// flipped on every axis, and for even extents its centre moves one tap
    /// left, exactly as scipy shifts the origin.
    pub fn convolve(ndim: usize, weights: &[f64], weights_shape: &[usize]) -> Result<Filter> {
        let (shape, weights) = kernel_box(ndim, weights, weights_shape)?;
        let flipped: Vec<f64> = weights.iter().rev().copied().collect();
        let left = shape.map(|n| if n % 2 == 0 { n / 2 - 1 } else { n / 2 });
        Ok(Filter {
            ndim,
            passes: vec![Pass {
                shape,
                left,
                weights: flipped,
                one_d: false,
            }],
        })
    }

    /// The total reach of all passes per axis: the halo a chunk needs.
    pub fn halo(&self) -> Shape3 {
        self.passes.iter().fold([0; 3], |acc, p| {
            let r = p.reach();
            [0, 1, 2].map(|a| acc[a] + r[a])
        })
    }
}

/// Weights of the 1-D Gaussian exactly as scipy's `_gaussian_kernel1d`
/// computes them (radius `int(truncate * sigma + 0.5)`, normalised in f64).
pub fn gaussian_kernel1d(sigma: f64, truncate: f64) -> Result<Vec<f64>> {
    let radius = (truncate * sigma + 0.5).floor();
    if radius > (MAX_KERNEL_EXTENT / 2) as f64 {
        return Err(Error::param(
            "sigma",
            format!(
                "{sigma} with truncate {truncate} gives a kernel radius of {radius}; the largest supported is {}",
                MAX_KERNEL_EXTENT / 2
            ),
        ));
    }
    let radius = radius as i64;
    let s2 = sigma * sigma;
    let phi: Vec<f64> = (-radius..=radius)
        .map(|x| (-0.5 / s2 * (x * x) as f64).exp())
        .collect();
    let sum: f64 = phi.iter().sum();
    Ok(phi.into_iter().map(|v| v / sum).collect())
}

fn check_ndim(ndim: usize) -> Result<()> {
    if (1..=3).contains(&ndim) {
        Ok(())
    } else {
        Err(Error::InvalidInput(format!(
            "arrays of {ndim} dimensions are not supported; gpuscope filters 1-D, 2-D and 3-D arrays"
        )))
    }
}

/// One value for every axis, or a single value broadcast, as scipy accepts.
fn per_axis(v: &[f64], ndim: usize, name: &'static str) -> Result<Vec<f64>> {
    match v.len() {
        1 => Ok(vec![v[0]; ndim]),
        n if n == ndim => Ok(v.to_vec()),
        n => Err(Error::param(
            name,
            format!("{n} values for a {ndim}-D array (give one value or one per axis)"),
        )),
    }
}

fn kernel_box(ndim: usize, weights: &[f64], shape: &[usize]) -> Result<(Shape3, Vec<f64>)> {
    check_ndim(ndim)?;
    if shape.len() != ndim {
        return Err(Error::param(
            "weights",
            format!(
                "a {}-D kernel for a {ndim}-D array (scipy requires one kernel axis per array axis)",
                shape.len()
            ),
        ));
    }
    if shape.contains(&0) || shape.iter().any(|&n| n > MAX_KERNEL_EXTENT) {
        return Err(Error::param(
            "weights",
            format!("shape {shape:?} (each extent must be 1..={MAX_KERNEL_EXTENT})"),
        ));
    }
    if shape.iter().product::<usize>() != weights.len() {
        return Err(Error::param(
            "weights",
            format!("{} values for shape {shape:?}", weights.len()),
        ));
    }
    if weights.iter().any(|w| !w.is_finite()) {
        return Err(Error::param("weights", "NaN or infinite values"));
    }
    let mut s3 = [1; 3];
    s3[3 - ndim..].copy_from_slice(shape);
    Ok((s3, weights.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaussian_kernel_matches_scipy_radius_and_sum() {
        let k = gaussian_kernel1d(2.0, 4.0).unwrap();
        assert_eq!(k.len(), 17);
        assert!((k.iter().sum::<f64>() - 1.0).abs() < 1e-15);
        assert_eq!(gaussian_kernel1d(0.5, 4.0).unwrap().len(), 5);
        assert!(gaussian_kernel1d(1e6, 4.0).is_err());
    }

    #[test]
    fn bad_parameters_are_rejected_with_their_names() {
        let e = Filter::gaussian(2, &[1.0, 2.0, 3.0], 4.0).unwrap_err();
        assert!(e.to_string().contains("sigma"), "{e}");
        assert!(Filter::gaussian(2, &[-1.0], 4.0).is_err());
        assert!(Filter::gaussian(2, &[f64::NAN], 4.0).is_err());
        assert!(Filter::gaussian(2, &[1.0], 0.0).is_err());
        assert!(Filter::gaussian(4, &[1.0], 4.0).is_err());
        assert!(Filter::correlate(2, &[1.0; 3], &[3]).is_err());
        assert!(Filter::correlate(2, &[1.0; 3], &[1, 2]).is_err());
        assert!(Filter::correlate(1, &[f64::INFINITY], &[1]).is_err());
        assert!("bogus".parse::<Mode>().is_err());
    }

    #[test]
    fn convolve_flips_and_shifts_even_kernels() {
        let f = Filter::convolve(1, &[1.0, 2.0, 0.0, 0.0], &[4]).unwrap();
        assert_eq!(f.passes[0].weights, vec![0.0, 0.0, 2.0, 1.0]);
        assert_eq!(f.passes[0].left, [0, 0, 1]);
    }
}

//! The parameter types of the filter operations, with scipy.ndimage's names
//! and defaults (outlier removal's is [`super::median::OutlierRemoval`]).
//! The catalogue lists them; the front ends deserialise into them.

use serde::{Deserialize, Serialize};

use super::median::Footprint;
use super::{Boundary, Filter, Mode};
use crate::error::{Error, Result};

/// An n-D array given as a parameter (a kernel's weights, a footprint):
/// extents in C order and the values.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NdArray {
    pub shape: Vec<usize>,
    pub values: Vec<f64>,
}

fn check_cval(cval: f64) -> Result<()> {
    if cval.is_finite() {
        Ok(())
    } else {
        Err(Error::param(
            "cval",
            format!("{cval} (must be a finite number)"),
        ))
    }
}

/// `scipy.ndimage.gaussian_filter(input, sigma, mode='reflect', cval=0.0,
/// truncate=4.0)`; `sigma` is required (one value, or one per axis).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GaussianParams {
    pub sigma: Vec<f64>,
    pub mode: Mode,
    pub cval: f64,
    pub truncate: f64,
}

impl Default for GaussianParams {
    fn default() -> Self {
        GaussianParams {
            sigma: Vec::new(),
            mode: Mode::Reflect,
            cval: 0.0,
            truncate: 4.0,
        }
    }
}

impl GaussianParams {
    /// The checks that need no input (the number of sigmas is checked
    /// against the input's axes by [`GaussianParams::filter`]).
    pub fn validate(&self) -> Result<()> {
        if self.sigma.is_empty() {
            return Err(Error::param(
                "sigma",
                "none given (give one value, or one per axis)",
            ));
        }
        if !self.truncate.is_finite() || self.truncate <= 0.0 {
            return Err(Error::param(
                "truncate",
                format!("{} (must be a positive number)", self.truncate),
            ));
        }
        if let Some(s) = self.sigma.iter().find(|s| !s.is_finite() || **s < 0.0) {
            return Err(Error::param(
                "sigma",
                format!("{s} (must be zero or a positive number)"),
            ));
        }
        check_cval(self.cval)
    }

    pub fn filter(&self, ndim: usize) -> Result<Filter> {
        Filter::gaussian(ndim, &self.sigma, self.truncate)
    }

    pub fn boundary(&self) -> Boundary {
        Boundary {
            mode: self.mode,
            cval: self.cval,
        }
    }
}

/// `scipy.ndimage.convolve(input, weights, mode='reflect', cval=0.0)` and
/// `correlate` (the same parameters); `weights` is required.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConvolveParams {
    pub weights: NdArray,
    pub mode: Mode,
    pub cval: f64,
}

impl ConvolveParams {
    pub fn validate(&self) -> Result<()> {
        if self.weights.values.is_empty() {
            return Err(Error::param(
                "weights",
                "none given (give a kernel: {shape, values})",
            ));
        }
        check_cval(self.cval)
    }

    /// The convolution (`flip`) or correlation of an `ndim`-D input.
    pub fn filter(&self, ndim: usize, flip: bool) -> Result<Filter> {
        let w = &self.weights;
        if flip {
            Filter::convolve(ndim, &w.values, &w.shape)
        } else {
            Filter::correlate(ndim, &w.values, &w.shape)
        }
    }

    pub fn boundary(&self) -> Boundary {
        Boundary {
            mode: self.mode,
            cval: self.cval,
        }
    }
}

/// `scipy.ndimage.median_filter(input, size=None, footprint=None,
/// mode='reflect', cval=0.0)`: `size` or `footprint` is required (as scipy).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MedianParams {
    /// One extent for every axis, or one per axis; empty = not given.
    pub size: Vec<usize>,
    /// Non-zero values select the window's elements.
    pub footprint: Option<NdArray>,
    pub mode: Mode,
    pub cval: f64,
}

impl MedianParams {
    pub fn validate(&self) -> Result<()> {
        if self.size.is_empty() == self.footprint.is_none() {
            return Err(Error::param(
                "size",
                "give either size or footprint (one of the two, as scipy)",
            ));
        }
        check_cval(self.cval)
    }

    /// The footprint for an `ndim`-D input.
    pub fn footprint(&self, ndim: usize) -> Result<Footprint> {
        match &self.footprint {
            None => Footprint::size(ndim, &self.size),
            Some(f) => {
                let mask: Vec<bool> = f.values.iter().map(|&v| v != 0.0).collect();
                Footprint::from_mask(ndim, &mask, &f.shape)
            }
        }
    }

    pub fn boundary(&self) -> Boundary {
        Boundary {
            mode: self.mode,
            cval: self.cval,
        }
    }
}

//! Flat/dark normalisation of tomography projections: tomopy's
//! `normalize(arr, flat, dark, cutoff=None, averaging='mean')`, Mantid
//! Imaging's flat-fielding.
//!
//! The flats and darks are averaged per pixel on the host ([`Fields`]); the
//! projections then stream through one GPU pass ([`gpu`]). The reference
//! twin is [`cpu`].

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub mod cpu;
pub mod gpu;
mod host;

/// The floor of `flat - dark`, as tomopy's `where(denom < 1e-6, 1e-6, denom)`.
pub const DENOMINATOR_FLOOR: f32 = 1e-6;

/// How a stack of flats (or darks) becomes one field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Averaging {
    /// `np.mean(frames, axis=0, dtype=np.float32)`: planes added in order in
    /// float32, then divided by their count.
    #[default]
    Mean,
    /// `np.median(frames, axis=0)` (NaN where any frame is NaN).
    Median,
}

/// The averagings' names, as the catalogue lists them.
pub const AVERAGINGS: [&str; 2] = ["mean", "median"];

impl std::fmt::Display for Averaging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Averaging::Mean => "mean",
            Averaging::Median => "median",
        })
    }
}

/// `tomopy.normalize(arr, flat, dark, cutoff=None, averaging='mean')`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NormalizeParams {
    /// Largest value of the result (None: no limit).
    pub cutoff: Option<f64>,
    pub averaging: Averaging,
}

impl NormalizeParams {
    pub fn validate(&self) -> Result<()> {
        if self.cutoff.is_some_and(f64::is_nan) {
            return Err(Error::param("cutoff", "NaN (give a number, or none)"));
        }
        Ok(())
    }

    /// The cutoff as the float32 the result is compared with.
    pub(crate) fn cutoff_f32(&self) -> Option<f32> {
        self.cutoff.map(|c| c as f32)
    }
}

/// The per-pixel fields projections are normalised with: the averaged dark
/// and the floored denominator `max(mean(flat) - mean(dark), 1e-6)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Fields {
    /// (rows, columns) of one projection.
    pub plane: [usize; 2],
    pub dark: Vec<f32>,
    pub denominator: Vec<f32>,
}

impl Fields {
    /// Averages `flats` and `darks` (float32 frames of `plane` each, one
    /// after the other) as `averaging` says.
    pub fn new(
        flats: &[f32],
        darks: &[f32],
        plane: [usize; 2],
        averaging: Averaging,
    ) -> Result<Fields> {
        let n = plane[0] * plane[1];
        let flat = host::average(flats, n, averaging, "flat")?;
        let dark = host::average(darks, n, averaging, "dark")?;
        let denominator = flat
            .iter()
            .zip(&dark)
            .map(|(&f, &d)| {
                let v = f - d;
                // NaN stays NaN, as numpy's where(denom < l, l, denom).
                if v < DENOMINATOR_FLOOR {
                    DENOMINATOR_FLOOR
                } else {
                    v
                }
            })
            .collect();
        Ok(Fields {
            plane,
            dark,
            denominator,
        })
    }

    /// Checks that projections of `shape` (2-D, or 3-D with projections
    /// along axis 0) match the fields' plane.
    pub fn check(&self, shape: &[usize]) -> Result<()> {
        let plane = match shape {
            [y, x] | [_, y, x] => [*y, *x],
            _ => {
                return Err(Error::InvalidInput(format!(
                    "projections of shape {shape:?}: give a 2-D projection or a 3-D stack (projection, row, column)"
                )));
            }
        };
        if plane != self.plane {
            return Err(Error::InvalidInput(format!(
                "projections of {}x{} pixels, flats and darks of {}x{}: they must be the same size",
                plane[0], plane[1], self.plane[0], self.plane[1]
            )));
        }
        Ok(())
    }
}

//! The parameter types of thresholding, labelling, measuring and the source
//! pipeline, with the reference libraries' names and defaults.

use serde::{Deserialize, Serialize};

use super::sources::Level;
use crate::error::{Error, Result};
use crate::stats::{CenFunc, SigmaClipParams};

/// `image > value` (numpy); `value` is required.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ThresholdParams {
    /// No default: NaN stands for "not given".
    pub value: f64,
}

impl Default for ThresholdParams {
    fn default() -> Self {
        ThresholdParams { value: f64::NAN }
    }
}

impl ThresholdParams {
    pub fn validate(&self) -> Result<()> {
        if self.value.is_nan() {
            return Err(Error::param("value", "missing or NaN (give a number)"));
        }
        Ok(())
    }
}

/// `skimage.measure.label(image, background=0, connectivity=1)`: elements
/// different from `background`, numbered as `scipy.ndimage.label`;
/// connectivity 1 is scipy's default (faces only), up to ndim (full).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LabelParams {
    pub connectivity: usize,
    pub background: f64,
}

impl Default for LabelParams {
    fn default() -> Self {
        LabelParams {
            connectivity: 1,
            background: 0.0,
        }
    }
}

fn check_connectivity(connectivity: usize) -> Result<()> {
    if (1..=3).contains(&connectivity) {
        Ok(())
    } else {
        Err(Error::param(
            "connectivity",
            format!("{connectivity} (use 1 for faces only, as scipy's default, up to 3)"),
        ))
    }
}

impl LabelParams {
    /// Connectivity above the input's number of axes is refused by the
    /// labelling itself.
    pub fn validate(&self) -> Result<()> {
        check_connectivity(self.connectivity)?;
        if self.background.is_nan() {
            return Err(Error::param(
                "background",
                "NaN matches nothing (give a number)",
            ));
        }
        Ok(())
    }
}

/// `skimage.measure.regionprops(label_image, intensity_image)`: no
/// parameters beyond the two arrays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegionpropsParams {}

impl RegionpropsParams {
    pub fn validate(&self) -> Result<()> {
        Ok(())
    }
}

/// The workshop's source finding: sigma-clipped statistics (astropy's
/// parameters), foreground above `median + nsigma·std` (workshop:
/// `nsigma·std`), labelled with `connectivity` and measured.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourcesParams {
    pub sigma: f64,
    pub sigma_lower: Option<f64>,
    pub sigma_upper: Option<f64>,
    pub maxiters: Option<u32>,
    pub cenfunc: CenFunc,
    pub workshop: bool,
    pub nsigma: f64,
    pub connectivity: usize,
}

impl Default for SourcesParams {
    fn default() -> Self {
        let c = SigmaClipParams::default();
        SourcesParams {
            sigma: c.sigma,
            sigma_lower: c.sigma_lower,
            sigma_upper: c.sigma_upper,
            maxiters: c.maxiters,
            cenfunc: c.cenfunc,
            workshop: c.workshop,
            nsigma: 5.0,
            connectivity: LabelParams::default().connectivity,
        }
    }
}

impl SourcesParams {
    pub fn validate(&self) -> Result<()> {
        self.clip().validate()?;
        if !self.nsigma.is_finite() {
            return Err(Error::param(
                "nsigma",
                format!("{} (give a finite number such as 5)", self.nsigma),
            ));
        }
        check_connectivity(self.connectivity)
    }

    /// The clipping part.
    pub fn clip(&self) -> SigmaClipParams {
        SigmaClipParams {
            sigma: self.sigma,
            sigma_lower: self.sigma_lower,
            sigma_upper: self.sigma_upper,
            maxiters: self.maxiters,
            cenfunc: self.cenfunc,
            workshop: self.workshop,
        }
    }

    /// The threshold's rule.
    pub fn level(&self) -> Level {
        if self.workshop {
            Level::Workshop(self.nsigma)
        } else {
            Level::AboveMedian(self.nsigma)
        }
    }
}

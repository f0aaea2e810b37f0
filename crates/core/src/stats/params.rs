//! The parameters of `sigma_clipped_stats`, astropy's names and defaults.

use serde::{Deserialize, Serialize};

use super::clip::{CenFunc, ClipOptions};
use crate::error::{Error, Result};

/// `astropy.stats.sigma_clipped_stats(data, sigma=3.0, sigma_lower=None,
/// sigma_upper=None, maxiters=5, cenfunc='median', stdfunc='std')`, plus
/// `workshop`: the GPU workshop's loop (strict comparisons until nothing
/// changes; `maxiters` is then ignored).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SigmaClipParams {
    pub sigma: f64,
    /// None: `sigma`.
    pub sigma_lower: Option<f64>,
    /// None: `sigma`.
    pub sigma_upper: Option<f64>,
    /// None: until convergence.
    pub maxiters: Option<u32>,
    pub cenfunc: CenFunc,
    pub workshop: bool,
}

impl Default for SigmaClipParams {
    fn default() -> Self {
        SigmaClipParams {
            sigma: 3.0,
            sigma_lower: None,
            sigma_upper: None,
            maxiters: Some(5),
            cenfunc: CenFunc::Median,
            workshop: false,
        }
    }
}

impl SigmaClipParams {
    pub fn validate(&self) -> Result<()> {
        self.options().sigmas()?;
        if self.maxiters == Some(0) {
            return Err(Error::param(
                "maxiters",
                "0 (give at least 1, or none for until convergence)",
            ));
        }
        Ok(())
    }

    /// What the clipping runs with.
    pub fn options(&self) -> ClipOptions {
        ClipOptions {
            sigma: self.sigma,
            sigma_lower: self.sigma_lower,
            sigma_upper: self.sigma_upper,
            maxiters: if self.workshop { None } else { self.maxiters },
            cenfunc: self.cenfunc,
            strict: self.workshop,
        }
    }
}

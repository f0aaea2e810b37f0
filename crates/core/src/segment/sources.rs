//! The workshop's source finding: estimate the noise by kappa-sigma
//! clipping, keep pixels above a threshold derived from it, label the
//! connected regions and measure them.

use crate::engine::Gpu;
use crate::error::{Error, Result};
use crate::keys::Samples;
use crate::segment::label::{self, Labels};
use crate::segment::measure::{self, Region};
use crate::segment::threshold;
use crate::stats::clip::{self, ClipOptions, ClipStats};

/// How the threshold follows from the clipped statistics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Level {
    /// `image > median + nsigma * std` (the `--nsigma` of `threshold`).
    AboveMedian(f64),
    /// The workshop's `image > nsigma * std`.
    Workshop(f64),
}

impl Level {
    pub fn value(&self, stats: &ClipStats) -> Result<f64> {
        if stats.n_kept == 0 {
            return Err(Error::InvalidInput(
                "the clipping kept no values (strict comparisons remove everything once the std is 0); \
                 use astropy's inclusive bounds (no --workshop) or a larger sigma"
                    .into(),
            ));
        }
        let (n, v) = match *self {
            Level::AboveMedian(n) => (n, stats.median + n * stats.std),
            Level::Workshop(n) => (n, n * stats.std),
        };
        if !n.is_finite() {
            return Err(Error::param(
                "nsigma",
                format!("{n} (give a finite number such as 5)"),
            ));
        }
        Ok(v)
    }
}

/// Everything the pipeline found.
#[derive(Clone, Debug)]
pub struct Sources {
    pub stats: ClipStats,
    pub threshold: f64,
    pub labels: Labels,
    pub regions: Vec<Region>,
}

/// Clip, threshold, label and measure on the GPU.
pub async fn sources(
    gpu: &Gpu,
    data: &[f32],
    shape: &[usize],
    clip: &ClipOptions,
    level: Level,
    connectivity: usize,
) -> Result<Sources> {
    label::check(data.len(), shape, connectivity)?;
    let stats = clip::sigma_clipped_stats(gpu, data, None, clip).await?;
    let threshold = level.value(&stats)?;
    let mask = threshold::threshold_above(gpu, Samples::F32(data), threshold).await?;
    let labels = label::label(gpu, &mask, shape, connectivity).await?;
    let regions = measure::regionprops(gpu, &labels.labels, data, shape, labels.count).await?;
    Ok(Sources {
        stats,
        threshold,
        labels,
        regions,
    })
}

pub mod cpu {
    //! The same chain with every step's CPU reference.
    use super::*;

    pub fn sources(
        data: &[f32],
        shape: &[usize],
        clip: &ClipOptions,
        level: Level,
        connectivity: usize,
    ) -> Result<Sources> {
        label::check(data.len(), shape, connectivity)?;
        let stats = clip::cpu::sigma_clipped_stats(Samples::F32(data), None, clip)?;
        let threshold = level.value(&stats)?;
        let mask = threshold::cpu::threshold_above(Samples::F32(data), threshold)?;
        let labels = label::cpu::label(&mask, shape, connectivity)?;
        let regions = measure::cpu::regionprops(&labels.labels, data, shape, labels.count)?;
        Ok(Sources {
            stats,
            threshold,
            labels,
            regions,
        })
    }
}

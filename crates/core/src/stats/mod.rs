//! Statistics: kappa-sigma clipping with an exact GPU median.

pub mod clip;
mod params;

pub use clip::{CenFunc, ClipOptions, ClipStats, sigma_clipped_stats};
pub use params::SigmaClipParams;

//! Segmentation: thresholding (labelling and region measurements follow).

pub mod threshold;

pub use threshold::threshold_above;

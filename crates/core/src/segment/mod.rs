//! Segmentation: thresholding, connected-component labelling, region
//! measurements and the source-finding chain that joins them.

pub mod label;
pub mod measure;
pub mod sources;
pub mod threshold;

pub use label::{Labels, label};
pub use measure::{Region, regionprops};
pub use threshold::threshold_above;

//! Segmentation: thresholding, connected-component labelling, region
//! measurements and the source-finding chain that joins them.

pub mod host;
pub mod label;
pub mod measure;
pub mod on_device;
mod params;
pub mod sources;
pub mod threshold;

pub use label::{Labels, label};
pub use measure::{Region, regionprops};
pub use params::{LabelParams, RegionpropsParams, SourcesParams, ThresholdParams};
pub use threshold::threshold_above;

//! WGSL sources, compiled into the binary so the wasm build needs no file
//! access. One file per kernel family under `shaders/` at the repository root.

pub const CORRELATE: &str = include_str!("../../../shaders/filters/correlate.wgsl");
pub const THRESHOLD: &str = include_str!("../../../shaders/segment/threshold.wgsl");
pub const LABEL: &str = include_str!("../../../shaders/segment/label.wgsl");
pub const MEASURE: &str = include_str!("../../../shaders/segment/measure.wgsl");
pub const CLIP: &str = include_str!("../../../shaders/stats/clip.wgsl");

/// Every shader with its name, for validation tests and tools.
pub const ALL: &[(&str, &str)] = &[
    ("filters/correlate.wgsl", CORRELATE),
    ("segment/threshold.wgsl", THRESHOLD),
    ("segment/label.wgsl", LABEL),
    ("segment/measure.wgsl", MEASURE),
    ("stats/clip.wgsl", CLIP),
];

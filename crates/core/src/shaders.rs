//! WGSL sources, compiled into the binary so the wasm build needs no file
//! access. One file per kernel family under `shaders/` at the repository
//! root; snippets shared by several kernels live in `shaders/common/` and are
//! prepended here.

macro_rules! shader {
    ($($path:literal),+) => {
        concat!($(include_str!(concat!("../../../shaders/", $path)), "\n"),+)
    };
}

pub const CORRELATE: &str = shader!("common/boundary.wgsl", "filters/correlate.wgsl");
pub const THRESHOLD: &str = shader!("segment/threshold.wgsl");
/// The median template with 32-bit and 64-bit keys; `filters::median`
/// splices generated selection networks into it.
pub const MEDIAN32: &str = shader!(
    "common/boundary.wgsl",
    "filters/median_key32.wgsl",
    "filters/median_words.wgsl",
    "filters/median.wgsl",
    "filters/median_search.wgsl"
);
pub const MEDIAN64: &str = shader!(
    "common/boundary.wgsl",
    "filters/median_key64.wgsl",
    "filters/median_words.wgsl",
    "filters/median.wgsl",
    "filters/median_search.wgsl"
);
/// f32 compared as floats: sorting networks only (the search needs keys).
pub const MEDIAN_F32: &str = shader!(
    "common/boundary.wgsl",
    "filters/median_keyf32.wgsl",
    "filters/median_words.wgsl",
    "filters/median.wgsl"
);
/// The in-plane 3 x 3 median on buffers of vec4 words: 32-bit keys, f32
/// compared as floats.
pub const MEDIAN32_QUADS: &str = shader!(
    "common/boundary.wgsl",
    "filters/median_key32.wgsl",
    "filters/median.wgsl",
    "filters/median_quads.wgsl"
);
pub const MEDIAN_F32_QUADS: &str = shader!(
    "common/boundary.wgsl",
    "filters/median_keyf32.wgsl",
    "filters/median.wgsl",
    "filters/median_quads.wgsl"
);
pub const LABEL: &str = shader!("common/union_find.wgsl", "segment/label.wgsl");
pub const MEASURE: &str = shader!("segment/measure.wgsl");
pub const CLIP: &str = shader!("stats/clip.wgsl");
/// The conformance probe run when a device opens.
pub const PROBE: &str = shader!("common/boundary.wgsl", "common/probe.wgsl");
pub const SLIC_KMEANS: &str = shader!("slic/kmeans.wgsl");
pub const SLIC_CONNECT: &str = shader!("common/union_find.wgsl", "slic/connect.wgsl");
pub const SLIC_LAB: &str = shader!("slic/lab.wgsl");
pub const SPOTS_THRESHOLD: &str = shader!("spots/common.wgsl", "spots/threshold.wgsl");
pub const SPOTS_FIX: &str = shader!("spots/fix.wgsl");
pub const SPOTS_MEASURE: &str = shader!("spots/common.wgsl", "spots/measure.wgsl");
pub const SPOTS_COMPACT: &str = shader!("spots/common.wgsl", "spots/compact.wgsl");

/// Every shader with its name, for validation tests and tools.
pub const ALL: &[(&str, &str)] = &[
    ("filters/correlate.wgsl", CORRELATE),
    ("segment/threshold.wgsl", THRESHOLD),
    ("filters/median.wgsl (32-bit keys)", MEDIAN32),
    ("filters/median.wgsl (64-bit keys)", MEDIAN64),
    ("filters/median.wgsl (f32 values)", MEDIAN_F32),
    ("filters/median_quads.wgsl (32-bit keys)", MEDIAN32_QUADS),
    ("filters/median_quads.wgsl (f32 values)", MEDIAN_F32_QUADS),
    ("segment/label.wgsl", LABEL),
    ("segment/measure.wgsl", MEASURE),
    ("stats/clip.wgsl", CLIP),
    ("common/probe.wgsl", PROBE),
    ("slic/kmeans.wgsl", SLIC_KMEANS),
    ("slic/connect.wgsl", SLIC_CONNECT),
    ("slic/lab.wgsl", SLIC_LAB),
    ("spots/threshold.wgsl", SPOTS_THRESHOLD),
    ("spots/fix.wgsl", SPOTS_FIX),
    ("spots/measure.wgsl", SPOTS_MEASURE),
    ("spots/compact.wgsl", SPOTS_COMPACT),
];

/// Every kind of shader generated on the host (median networks, unrolled
/// correlations), named as `cargo xtask wgsl` writes them: for reading and
/// for validation tests.
pub fn generated() -> Vec<(String, String)> {
    let mut all = crate::filters::median::wgsl::variants();
    all.extend(crate::filters::generated_shaders());
    all
}

/// Replaces the text between the GENERATED markers of a template with `body`
/// (kernels specialised on the host: median networks, unrolled correlations).
pub(crate) fn splice_generated(template: &str, body: &str) -> String {
    const BEGIN: &str = "// ---- GENERATED: begin ----\n";
    const END: &str = "// ---- GENERATED: end ----";
    match (template.find(BEGIN), template.find(END)) {
        (Some(b), Some(e)) if b < e => {
            format!("{}{body}{}", &template[..b + BEGIN.len()], &template[e..])
        }
        // The markers are part of the committed shaders; a test checks them.
        _ => template.to_string(),
    }
}

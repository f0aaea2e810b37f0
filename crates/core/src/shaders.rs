//! WGSL sources, compiled into the binary so the wasm build needs no file
//! access. One file per kernel family under `shaders/` at the repository
//! root; snippets shared by several kernels live in `shaders/common/` and are
//! prepended here.

macro_rules! shader {
    ($($path:literal),+) => {
        concat!($(include_str!(concat!("../../../shaders/", $path)), "\n"),+)
    };
}

pub const CORRELATE: &str = shader!(
    "common/boundary.wgsl",
    "filters/correlate.wgsl",
    "filters/correlate_words.wgsl"
);
/// The correlation on buffers of vec4 words, four outputs per invocation;
/// `filters` splices each kernel's unrolled quad interior into it.
pub const CORRELATE_QUADS: &str = shader!(
    "common/boundary.wgsl",
    "filters/correlate.wgsl",
    "filters/correlate_quads.wgsl"
);
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
/// kmeans.wgsl with the masked image's binning and assignment.
pub const SLIC_CELLS: &str = shader!("slic/kmeans.wgsl", "slic/cells.wgsl");
pub const SLIC_CONNECT: &str = shader!("common/union_find.wgsl", "slic/connect.wgsl");
pub const SLIC_LAB: &str = shader!("slic/lab.wgsl");
pub const SPOTS_THRESHOLD: &str = shader!("spots/common.wgsl", "spots/threshold.wgsl");
pub const SPOTS_FIX: &str = shader!("spots/fix.wgsl");
pub const SPOTS_MEASURE: &str = shader!("spots/common.wgsl", "spots/measure.wgsl");
pub const SPOTS_COMPACT: &str = shader!("spots/common.wgsl", "spots/compact.wgsl");
pub const NORMALIZE: &str = shader!("tomo/normalize.wgsl");
/// A plain device copy (f32 words; `bandwidth` makes the vec4 variant).
pub const COPY: &str = shader!("common/copy.wgsl");
/// The bitshuffle-LZ4 decoder with its scratch in workgroup memory (blocks
/// of up to 8 KiB) and in a storage buffer (larger blocks).
pub const DECODE_BSLZ4: &str = shader!("decode/bslz4_workgroup.wgsl", "decode/bslz4.wgsl");
pub const DECODE_BSLZ4_LARGE: &str = shader!("decode/bslz4_storage.wgsl", "decode/bslz4.wgsl");

/// The shaders compiled into the binary, as the device's pipeline cache
/// names them (see `engine::pipelines`): a dispatch looks its pipeline up by
/// this id and an entry point, never by the WGSL text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shader {
    Correlate,
    CorrelateQuads,
    Threshold,
    Median32,
    Median64,
    MedianF32,
    Median32Quads,
    MedianF32Quads,
    Label,
    Measure,
    Clip,
    Probe,
    SlicKmeans,
    SlicCells,
    SlicConnect,
    SlicLab,
    SpotsThreshold,
    SpotsFix,
    SpotsMeasure,
    SpotsCompact,
    Normalize,
    DecodeBslz4,
    DecodeBslz4Large,
    Copy,
}

impl Shader {
    /// Every shader, in the order of [`ALL`].
    pub const EVERY: [Shader; 24] = [
        Shader::Correlate,
        Shader::CorrelateQuads,
        Shader::Threshold,
        Shader::Median32,
        Shader::Median64,
        Shader::MedianF32,
        Shader::Median32Quads,
        Shader::MedianF32Quads,
        Shader::Label,
        Shader::Measure,
        Shader::Clip,
        Shader::Probe,
        Shader::SlicKmeans,
        Shader::SlicCells,
        Shader::SlicConnect,
        Shader::SlicLab,
        Shader::SpotsThreshold,
        Shader::SpotsFix,
        Shader::SpotsMeasure,
        Shader::SpotsCompact,
        Shader::Normalize,
        Shader::DecodeBslz4,
        Shader::DecodeBslz4Large,
        Shader::Copy,
    ];

    /// The WGSL text (with its shared snippets prepended).
    pub const fn source(self) -> &'static str {
        match self {
            Shader::Correlate => CORRELATE,
            Shader::CorrelateQuads => CORRELATE_QUADS,
            Shader::Threshold => THRESHOLD,
            Shader::Median32 => MEDIAN32,
            Shader::Median64 => MEDIAN64,
            Shader::MedianF32 => MEDIAN_F32,
            Shader::Median32Quads => MEDIAN32_QUADS,
            Shader::MedianF32Quads => MEDIAN_F32_QUADS,
            Shader::Label => LABEL,
            Shader::Measure => MEASURE,
            Shader::Clip => CLIP,
            Shader::Probe => PROBE,
            Shader::SlicKmeans => SLIC_KMEANS,
            Shader::SlicCells => SLIC_CELLS,
            Shader::SlicConnect => SLIC_CONNECT,
            Shader::SlicLab => SLIC_LAB,
            Shader::SpotsThreshold => SPOTS_THRESHOLD,
            Shader::SpotsFix => SPOTS_FIX,
            Shader::SpotsMeasure => SPOTS_MEASURE,
            Shader::SpotsCompact => SPOTS_COMPACT,
            Shader::Normalize => NORMALIZE,
            Shader::DecodeBslz4 => DECODE_BSLZ4,
            Shader::DecodeBslz4Large => DECODE_BSLZ4_LARGE,
            Shader::Copy => COPY,
        }
    }

    /// The file under `shaders/` it is made from, for messages and tools.
    pub const fn name(self) -> &'static str {
        match self {
            Shader::Correlate => "filters/correlate.wgsl",
            Shader::CorrelateQuads => "filters/correlate_quads.wgsl",
            Shader::Threshold => "segment/threshold.wgsl",
            Shader::Median32 => "filters/median.wgsl (32-bit keys)",
            Shader::Median64 => "filters/median.wgsl (64-bit keys)",
            Shader::MedianF32 => "filters/median.wgsl (f32 values)",
            Shader::Median32Quads => "filters/median_quads.wgsl (32-bit keys)",
            Shader::MedianF32Quads => "filters/median_quads.wgsl (f32 values)",
            Shader::Label => "segment/label.wgsl",
            Shader::Measure => "segment/measure.wgsl",
            Shader::Clip => "stats/clip.wgsl",
            Shader::Probe => "common/probe.wgsl",
            Shader::SlicKmeans => "slic/kmeans.wgsl",
            Shader::SlicCells => "slic/cells.wgsl",
            Shader::SlicConnect => "slic/connect.wgsl",
            Shader::SlicLab => "slic/lab.wgsl",
            Shader::SpotsThreshold => "spots/threshold.wgsl",
            Shader::SpotsFix => "spots/fix.wgsl",
            Shader::SpotsMeasure => "spots/measure.wgsl",
            Shader::SpotsCompact => "spots/compact.wgsl",
            Shader::Normalize => "tomo/normalize.wgsl",
            Shader::DecodeBslz4 => "decode/bslz4.wgsl (workgroup scratch)",
            Shader::DecodeBslz4Large => "decode/bslz4.wgsl (storage scratch)",
            Shader::Copy => "common/copy.wgsl",
        }
    }
}

/// Every shader with its name, for validation tests and tools.
pub const ALL: &[(&str, &str)] = &{
    let mut all = [("", ""); Shader::EVERY.len()];
    let mut i = 0;
    while i < all.len() {
        all[i] = (Shader::EVERY[i].name(), Shader::EVERY[i].source());
        i += 1;
    }
    all
};

/// Every kind of shader generated on the host (median networks, unrolled
/// correlations), named as `cargo xtask wgsl` writes them: for reading and
/// for validation tests.
pub fn generated() -> Vec<(String, String)> {
    let mut all = crate::filters::median::wgsl::variants();
    all.push((
        "common/copy.wgsl (vec4 words)".into(),
        crate::bandwidth::vec4_source(),
    ));
    all.extend(crate::filters::generated_shaders());
    all
}

/// Replaces the text between the GENERATED markers of a template with `body`
/// (kernels specialised on the host: median networks, unrolled correlations).
pub(crate) fn splice_generated(template: &str, body: &str) -> String {
    splice_section(template, "GENERATED", body)
}

/// [`splice_generated`] for the section named `name` (`// ---- {name}:
/// begin ----`), where a template has more than one.
pub(crate) fn splice_section(template: &str, name: &str, body: &str) -> String {
    let begin = format!("// ---- {name}: begin ----\n");
    let end = format!("// ---- {name}: end ----");
    match (template.find(&begin), template.find(&end)) {
        (Some(b), Some(e)) if b < e => {
            format!("{}{body}{}", &template[..b + begin.len()], &template[e..])
        }
        // The markers are part of the committed shaders; a test checks them.
        _ => template.to_string(),
    }
}

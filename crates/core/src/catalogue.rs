//! The operation catalogue: every operation gpuscope offers, with the
//! reference function it reproduces, its parameters (type, default,
//! constraints, one line of help) and the kinds of its input and output.
//!
//! Each operation has one parameter type (serde, the reference library's
//! snake_case names, `#[serde(default)]`, a `validate()`); its `Default` is
//! the only place a default is written. The catalogue's defaults are read
//! from it by serialising `Default::default()`, so the command line, the
//! page (through the wasm export) and any other front end see the same
//! values. See docs/catalogue.md.

use serde::Serialize;
use serde_json::Value;

use crate::filters::median::{EXTENT_MAX, OUTLIERS, OutlierRemoval};
use crate::filters::{ConvolveParams, GaussianParams, MODES, MedianParams};
use crate::segment::{LabelParams, RegionpropsParams, SourcesParams, ThresholdParams};
use crate::slic::SlicParams;
use crate::spots::SpotOptions;
use crate::stats::SigmaClipParams;
use crate::tomo::{AVERAGINGS, NormalizeParams};

/// How a parameter's value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamType {
    Float,
    Int,
    Bool,
    /// One of `choices`.
    Choice,
    /// A list of floats (`per_axis`: one value, or one per axis).
    Floats,
    /// A list of integers.
    Ints,
    /// An n-D array `{shape, values}` (a kernel, a footprint).
    Array,
    /// A boolean array of the input's (spatial) shape.
    Mask,
}

/// One parameter of an operation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Param {
    pub name: &'static str,
    #[serde(rename = "type")]
    pub ty: ParamType,
    /// From the parameter type's `Default`; null where the reference's
    /// default is `None`, and for required parameters.
    pub default: Value,
    /// No default: the caller must give it.
    pub required: bool,
    /// null (the reference's `None`) is a valid value.
    pub nullable: bool,
    pub min: Option<f64>,
    /// `min` itself is not allowed.
    pub min_exclusive: bool,
    pub max: Option<f64>,
    /// The values of a `choice` (empty otherwise).
    pub choices: Vec<&'static str>,
    /// A list holds one value for every axis, or one per axis.
    pub per_axis: bool,
    pub help: &'static str,
}

/// What an operation's (first) input may be.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InputKind {
    pub name: &'static str,
    /// Fewest and most axes.
    pub ndim: [usize; 2],
    pub dtypes: &'static str,
    pub channels: &'static str,
}

/// What an operation returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputKind {
    /// An array of the input's shape and dtype (or the chosen output dtype).
    Image,
    /// A boolean array of the input's shape.
    Mask,
    /// int32 labels, 0 = background.
    Labels,
    /// Rows of measurements (or one row of statistics).
    Table,
}

/// One operation of the catalogue.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Operation {
    /// snake_case, as the wasm API and Python name it.
    pub name: &'static str,
    /// The function whose answers this operation gives.
    pub reference: &'static str,
    pub summary: &'static str,
    /// The command line that runs it.
    pub cli: &'static str,
    pub inputs: Vec<InputKind>,
    pub output: OutputKind,
    pub params: Vec<Param>,
}

impl Operation {
    pub fn param(&self, name: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.name == name)
    }
}

fn p(name: &'static str, ty: ParamType, help: &'static str) -> Param {
    Param {
        name,
        ty,
        default: Value::Null,
        required: false,
        nullable: false,
        min: None,
        min_exclusive: false,
        max: None,
        choices: Vec::new(),
        per_axis: false,
        help,
    }
}

impl Param {
    fn required(mut self) -> Self {
        self.required = true;
        self
    }
    fn nullable(mut self) -> Self {
        self.nullable = true;
        self
    }
    fn min(mut self, v: f64) -> Self {
        self.min = Some(v);
        self
    }
    fn above(mut self, v: f64) -> Self {
        self.min = Some(v);
        self.min_exclusive = true;
        self
    }
    fn max(mut self, v: f64) -> Self {
        self.max = Some(v);
        self
    }
    fn choices(mut self, c: &[&'static str]) -> Self {
        self.choices = c.to_vec();
        self
    }
    fn per_axis(mut self) -> Self {
        self.per_axis = true;
        self
    }
}

/// The defaults of a parameter type: its `Default`, serialised.
pub fn defaults<T: Serialize + Default>() -> serde_json::Map<String, Value> {
    match serde_json::to_value(T::default()) {
        Ok(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    }
}

/// `params` with their defaults read from `T::default()` (required ones
/// keep null).
fn with_defaults<T: Serialize + Default>(mut params: Vec<Param>) -> Vec<Param> {
    let d = defaults::<T>();
    for p in &mut params {
        if !p.required {
            p.default = d.get(p.name).cloned().unwrap_or(Value::Null);
        }
    }
    params
}

fn input(
    name: &'static str,
    ndim: [usize; 2],
    dtypes: &'static str,
    channels: &'static str,
) -> InputKind {
    InputKind {
        name,
        ndim,
        dtypes,
        channels,
    }
}

const ANY_DTYPE: &str = "bool, uint8..uint64, int8..int64, float32, float64";
const EXTENT: f64 = EXTENT_MAX as f64;

fn mode() -> Param {
    p(
        "mode",
        ParamType::Choice,
        "how the array is extended beyond its edges (scipy.ndimage modes)",
    )
    .choices(&MODES)
}

fn cval() -> Param {
    p(
        "cval",
        ParamType::Float,
        "value outside the edges when mode is 'constant'",
    )
}

fn clip_params() -> Vec<Param> {
    vec![
        p(
            "sigma",
            ParamType::Float,
            "clipping limit in standard deviations",
        )
        .above(0.0),
        p("sigma_lower", ParamType::Float, "lower limit (None: sigma)")
            .above(0.0)
            .nullable(),
        p("sigma_upper", ParamType::Float, "upper limit (None: sigma)")
            .above(0.0)
            .nullable(),
        p(
            "maxiters",
            ParamType::Int,
            "clipping rounds at most (None: until convergence)",
        )
        .min(1.0)
        .nullable(),
        p("cenfunc", ParamType::Choice, "centre of the interval").choices(&["median", "mean"]),
        p(
            "workshop",
            ParamType::Bool,
            "the GPU workshop's loop: strict comparisons until nothing changes (maxiters ignored)",
        ),
    ]
}

fn linear(name: &'static str, flip: bool) -> Operation {
    Operation {
        name,
        reference: if flip {
            "scipy.ndimage.convolve"
        } else {
            "scipy.ndimage.correlate"
        },
        summary: if flip {
            "True convolution with any kernel (weights flipped; even extents centred as scipy)."
        } else {
            "Correlation with any kernel (weights not flipped)."
        },
        cli: if flip {
            "gpuscope convolve IN OUT --kernel K.npy"
        } else {
            "gpuscope convolve IN OUT --kernel K.npy --correlate"
        },
        inputs: vec![input(
            "input",
            [1, 3],
            ANY_DTYPE,
            "none (a channel is an axis)",
        )],
        output: OutputKind::Image,
        params: with_defaults::<ConvolveParams>(vec![
            p(
                "weights",
                ParamType::Array,
                "the kernel: one axis per input axis, each extent 1..=1025",
            )
            .required(),
            mode(),
            cval(),
        ]),
    }
}

/// Every operation, in the order the front ends list them.
pub fn catalogue() -> Vec<Operation> {
    use ParamType::*;
    vec![
        Operation {
            name: "gaussian_filter",
            reference: "scipy.ndimage.gaussian_filter",
            summary: "Gaussian smoothing, one pass per axis, radius int(truncate*sigma + 0.5).",
            cli: "gpuscope convolve IN OUT --gaussian SIGMA",
            inputs: vec![input(
                "input",
                [1, 3],
                ANY_DTYPE,
                "none (a channel is an axis: give it sigma 0)",
            )],
            output: OutputKind::Image,
            params: with_defaults::<GaussianParams>(vec![
                p(
                    "sigma",
                    Floats,
                    "standard deviation: one value, or one per axis (slowest first)",
                )
                .required()
                .min(0.0)
                .per_axis(),
                mode(),
                cval(),
                p("truncate", Float, "kernel radius in sigmas").above(0.0),
            ]),
        },
        linear("convolve", true),
        linear("correlate", false),
        Operation {
            name: "median_filter",
            reference: "scipy.ndimage.median_filter",
            summary: "Element n//2 of the sorted window, exact for every dtype; NaN neighbours count as -inf (Mantid Imaging).",
            cli: "gpuscope median IN OUT --size K",
            inputs: vec![input("input", [1, 3], ANY_DTYPE, "none (a channel is an axis)")],
            output: OutputKind::Image,
            params: with_defaults::<MedianParams>(vec![
                p(
                    "size",
                    Ints,
                    "window extent: one value, or one per axis (1,k,k filters each slice of a stack); or give footprint",
                )
                .required()
                .min(1.0)
                .max(EXTENT)
                .per_axis(),
                p(
                    "footprint",
                    Array,
                    "the window as an array (non-zero = selected), one axis per input axis; instead of size",
                )
                .nullable(),
                mode(),
                cval(),
            ]),
        },
        Operation {
            name: "remove_outliers",
            reference: "Mantid Imaging's remove outliers (tomopy.misc.corr.remove_outlier for mode tomopy)",
            summary: "Replaces an element by the median of its size x size slice window (mode reflect) where it differs from it by more than diff.",
            cli: "gpuscope outliers IN OUT --diff D",
            inputs: vec![input("input", [1, 3], ANY_DTYPE, "none (stacks are filtered slice by slice)")],
            output: OutputKind::Image,
            params: with_defaults::<OutlierRemoval>(vec![
                p("diff", Float, "difference from the local median that makes an outlier")
                    .required()
                    .above(0.0),
                p("size", Int, "median window extent in each 2-D slice")
                    .min(1.0)
                    .max(EXTENT),
                p(
                    "mode",
                    Choice,
                    "bright (x - median > diff), dark (median - x > diff), both, or tomopy (bright, >=)",
                )
                .choices(&OUTLIERS),
            ]),
        },
        Operation {
            name: "normalize",
            reference: "tomopy.normalize (Mantid Imaging's flat-fielding)",
            summary: "Flat/dark correction of projections: (x - dark) / max(flat - dark, 1e-6) in float32, flats and darks averaged per pixel; values above cutoff set to it.",
            cli: "gpuscope normalize IN OUT --flat FLATS --dark DARKS",
            inputs: vec![
                input("arr", [2, 3], ANY_DTYPE, "none (projections along axis 0)"),
                input("flat", [2, 3], ANY_DTYPE, "none (flat frames along axis 0)"),
                input("dark", [2, 3], ANY_DTYPE, "none (dark frames along axis 0)"),
            ],
            output: OutputKind::Image,
            params: with_defaults::<NormalizeParams>(vec![
                p("cutoff", Float, "largest value of the result (None: no limit)").nullable(),
                p("averaging", Choice, "how the flats and darks are combined per pixel")
                    .choices(&AVERAGINGS),
            ]),
        },
        Operation {
            name: "sigma_clipped_stats",
            reference: "astropy.stats.sigma_clipped_stats",
            summary: "Mean, median and std (ddof 0) of the values kept by iterative kappa-sigma clipping; NaN and inf left out.",
            cli: "gpuscope clip IN --json",
            inputs: vec![input("data", [1, 3], ANY_DTYPE, "one (colour images are clipped as their luminance)")],
            output: OutputKind::Table,
            params: with_defaults::<SigmaClipParams>(clip_params()),
        },
        Operation {
            name: "threshold",
            reference: "numpy: image > value",
            summary: "Boolean mask of the elements strictly above value, compared exactly in the input dtype; NaN is never above.",
            cli: "gpuscope threshold IN OUT --above V",
            inputs: vec![input("image", [1, 3], ANY_DTYPE, "one (colour images: their luminance)")],
            output: OutputKind::Mask,
            params: with_defaults::<ThresholdParams>(vec![
                p("value", Float, "elements strictly greater than this are foreground").required(),
            ]),
        },
        Operation {
            name: "label",
            reference: "scipy.ndimage.label (skimage.measure.label's connectivity and background)",
            summary: "Connected components of the elements different from background, numbered 1..n in raster order of their first element.",
            cli: "gpuscope label IN OUT",
            inputs: vec![input("image", [1, 3], ANY_DTYPE, "one")],
            output: OutputKind::Labels,
            params: with_defaults::<LabelParams>(vec![
                p(
                    "connectivity",
                    Int,
                    "neighbours: 1 faces (scipy's default), 2 + edges, 3 + corners (at most the number of axes)",
                )
                .min(1.0)
                .max(3.0),
                p("background", Float, "the background value"),
            ]),
        },
        Operation {
            name: "regionprops",
            reference: "skimage.measure.regionprops_table",
            summary: "Per label: area, bbox, centroid, weighted centroid, intensity sum/mean/min/max.",
            cli: "gpuscope sources IN --catalogue OUT.csv (measures what it labels)",
            inputs: vec![
                input("label_image", [1, 3], "int32", "one"),
                input("intensity_image", [1, 3], "float32", "one"),
            ],
            output: OutputKind::Table,
            params: with_defaults::<RegionpropsParams>(Vec::new()),
        },
        Operation {
            name: "sources",
            reference: "the GPU workshop's source finding: astropy sigma_clipped_stats, scipy.ndimage.label, skimage.measure.regionprops",
            summary: "Background by kappa-sigma clipping, foreground above median + nsigma*std (workshop: nsigma*std), labelled and measured.",
            cli: "gpuscope sources IN --catalogue OUT.csv",
            inputs: vec![input("image", [1, 3], ANY_DTYPE, "one (colour images: their luminance)")],
            output: OutputKind::Table,
            params: with_defaults::<SourcesParams>({
                let mut v = clip_params();
                v.push(p("nsigma", Float, "detection level in clipped standard deviations"));
                v.push(
                    p("connectivity", Int, "1: faces only (scipy's default), up to the number of axes")
                        .min(1.0)
                        .max(3.0),
                );
                v
            }),
        },
        Operation {
            name: "slic",
            reference: "skimage.segmentation.slic",
            summary: "SLIC superpixels: k-means in colour (Lab for RGB) and space from a grid of seeds, small pieces merged; labels numbered as scikit-image.",
            cli: "gpuscope slic IN OUT",
            inputs: vec![input(
                "image",
                [2, 4],
                ANY_DTYPE,
                "any number on channel_axis (None: grayscale)",
            )],
            output: OutputKind::Labels,
            params: with_defaults::<SlicParams>(vec![
                p("n_segments", Int, "approximate number of superpixels").min(1.0),
                p("compactness", Float, "colour against space: higher gives squarer superpixels").above(0.0),
                p("max_num_iter", Int, "k-means iterations at most (stops early when no label changes)").min(1.0),
                p("sigma", Floats, "Gaussian smoothing first: one value, or one per spatial axis")
                    .min(0.0)
                    .per_axis(),
                p("spacing", Floats, "voxel spacing, one per spatial axis (None: isotropic)")
                    .above(0.0)
                    .nullable(),
                p("channel_axis", Int, "the channel axis, negative from the end (None: grayscale)")
                    .nullable(),
                p("convert2lab", Bool, "convert RGB to Lab (None: for 3 channels)").nullable(),
                p(
                    "enforce_connectivity",
                    Bool,
                    "merge pieces smaller than min_size_factor of a superpixel into a neighbour",
                ),
                p("min_size_factor", Float, "smallest piece kept, as a fraction of a superpixel").min(0.0),
                p("max_size_factor", Float, "largest segment, as a multiple of a superpixel").min(0.0),
                p("slic_zero", Bool, "SLICO: adaptive colour scale per superpixel"),
                p("start_label", Int, "the first label: 0 or 1").min(0.0).max(1.0),
                p("mask", Mask, "segment only where true (the spatial shape)").nullable(),
            ]),
        },
        Operation {
            name: "find_spots",
            reference: "DIALS spot finding (dials/algorithms/image/threshold/local.h, dispersion_extended)",
            summary: "Strong pixels by DIALS' dispersion tests (DIALS' double-precision decisions), 4-connected spots with count-weighted centroids.",
            cli: "gpuscope spots IN [IN...]",
            inputs: vec![input(
                "image",
                [2, 3],
                "uint16, uint32, int32 (negative counts are masked)",
                "one (a 3-D input is a series of frames)",
            )],
            output: OutputKind::Table,
            params: with_defaults::<SpotOptions>(vec![
                p("algorithm", Choice, "dispersion_extended (DIALS' default) or dispersion")
                    .choices(&["dispersion_extended", "dispersion"]),
                p("kernel_size", Ints, "half-widths of the local window, rows, columns (3, 3 = 7 x 7)")
                    .min(1.0)
                    .max(1000.0),
                p("sigma_background", Float, "dispersion test of the background").min(0.0),
                p("sigma_strong", Float, "strong-pixel test").min(0.0),
                p("min_local", Int, "fewest valid pixels in the window (0: all of it)").min(0.0),
                p("global_threshold", Float, "strong pixels are above this").min(0.0),
                p(
                    "gain",
                    Float,
                    "detector gain, or a per-pixel map (None: DIALS' formulas without gain, i.e. gain 1)",
                )
                .above(0.0)
                .nullable(),
                p("min_spot_size", Int, "spots with fewer pixels are dropped (DIALS: 3 for pixel-array detectors)")
                    .min(1.0),
                p("max_spot_size", Int, "spots with more pixels are dropped").min(1.0),
            ]),
        },
    ]
}

/// The entry of one operation.
pub fn operation(name: &str) -> Option<Operation> {
    catalogue().into_iter().find(|o| o.name == name)
}

/// The parameter names of every operation's type, as serialised: the
/// catalogue's lists must hold exactly these (a test checks).
pub fn type_fields() -> Vec<(&'static str, Vec<String>)> {
    fn keys<T: Serialize + Default>() -> Vec<String> {
        defaults::<T>().keys().cloned().collect()
    }
    vec![
        ("gaussian_filter", keys::<GaussianParams>()),
        ("convolve", keys::<ConvolveParams>()),
        ("correlate", keys::<ConvolveParams>()),
        ("median_filter", keys::<MedianParams>()),
        ("remove_outliers", keys::<OutlierRemoval>()),
        ("normalize", keys::<NormalizeParams>()),
        ("sigma_clipped_stats", keys::<SigmaClipParams>()),
        ("threshold", keys::<ThresholdParams>()),
        ("label", keys::<LabelParams>()),
        ("regionprops", keys::<RegionpropsParams>()),
        ("sources", keys::<SourcesParams>()),
        ("slic", keys::<SlicParams>()),
        ("find_spots", keys::<SpotOptions>()),
    ]
}

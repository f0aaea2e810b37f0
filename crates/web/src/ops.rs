//! Target-independent half of the web API: parameter parsing, the CPU path of
//! every operation and the GPU path through the core, all on plain Rust
//! types. The wasm bindings only convert to and from JS values, so this part
//! builds and is unit-tested natively.

use gpuscope_core::filters::median::{self, Footprint, OutlierRemoval};
use gpuscope_core::filters::{
    self, Boundary, ConvolveParams, Filter, GaussianParams, MedianParams, Output,
};
use gpuscope_core::keys::SampleVec;
use gpuscope_core::segment::ThresholdParams;
use gpuscope_core::segment::threshold;
use gpuscope_core::{Error, Gpu, Result, Samples};
use gpuscope_io::{Array, Format, IoError};

/// A shape from JS (u32 extents) as the core wants it, checked against the
/// number of values so that no product can overflow later (usize is 32 bits
/// in wasm).
pub fn shape_of(shape: &[u32], len: usize) -> Result<Vec<usize>> {
    let shape: Vec<usize> = shape.iter().map(|&n| n as usize).collect();
    match gpuscope_io::checked_product(&shape) {
        Some(n) if n == len => Ok(shape),
        Some(n) => Err(Error::InvalidInput(format!(
            "shape {shape:?} needs {n} values but the data holds {len}"
        ))),
        None => Err(Error::InvalidInput(format!("shape {shape:?} is too large"))),
    }
}

/// The parameters of one linear filter, shared by the CPU and GPU paths.
pub struct Linear {
    pub filter: Filter,
    pub shape: Vec<usize>,
    pub boundary: Boundary,
}

impl Linear {
    /// `gaussian_filter(input, **params)`.
    pub fn gaussian(len: usize, shape: &[u32], p: &GaussianParams) -> Result<Linear> {
        let shape = shape_of(shape, len)?;
        p.validate()?;
        Ok(Linear {
            filter: p.filter(shape.len())?,
            boundary: p.boundary(),
            shape,
        })
    }

    /// `convolve` (`flip = true`) or `correlate` with an n-D kernel.
    pub fn kernel(len: usize, shape: &[u32], p: &ConvolveParams, flip: bool) -> Result<Linear> {
        let shape = shape_of(shape, len)?;
        p.validate()?;
        Ok(Linear {
            filter: p.filter(shape.len(), flip)?,
            boundary: p.boundary(),
            shape,
        })
    }

    /// The CPU reference, in f64 as scipy computes for float input.
    pub fn run_cpu(&self, data: &[f32]) -> Result<Vec<f64>> {
        let input: Vec<f64> = data.iter().map(|&v| f64::from(v)).collect();
        filters::cpu::apply(
            &self.filter,
            &input,
            &self.shape,
            self.boundary,
            Output::Float,
        )
    }

    /// The GPU path, in f32.
    pub async fn run_gpu(&self, gpu: &Gpu, data: &[f32]) -> Result<Vec<f32>> {
        filters::apply(
            gpu,
            &self.filter,
            data,
            &self.shape,
            self.boundary,
            Output::Float,
        )
        .await
    }
}

/// A median filter or an outlier removal, parameters checked, shared by the
/// CPU and GPU paths. Values are the page's f32 samples (exact for every
/// dtype up to 16 bits and for f32 itself: the median selects, it never
/// rounds).
pub enum Rank {
    Median {
        footprint: Footprint,
        boundary: Boundary,
    },
    Outliers(OutlierRemoval),
}

pub struct RankOp {
    pub rank: Rank,
    pub shape: Vec<usize>,
}

impl RankOp {
    /// `median_filter(input, **params)`.
    pub fn median(len: usize, shape: &[u32], p: &MedianParams) -> Result<Self> {
        let shape = shape_of(shape, len)?;
        p.validate()?;
        Ok(RankOp {
            rank: Rank::Median {
                footprint: p.footprint(shape.len())?,
                boundary: p.boundary(),
            },
            shape,
        })
    }

    /// Mantid Imaging's `remove_outlier(diff, size, mode)`; mode bright, dark,
    /// both or tomopy.
    pub fn outliers(len: usize, shape: &[u32], p: &OutlierRemoval) -> Result<Self> {
        let shape = shape_of(shape, len)?;
        p.validate()?;
        Ok(RankOp {
            rank: Rank::Outliers(*p),
            shape,
        })
    }

    pub fn run_cpu(&self, data: &[f32]) -> Result<Vec<f32>> {
        let s = Samples::F32(data);
        f32_values(match &self.rank {
            Rank::Median {
                footprint,
                boundary,
            } => median::cpu::median_filter(s, &self.shape, footprint, *boundary)?,
            Rank::Outliers(r) => median::cpu::remove_outliers(s, &self.shape, r)?,
        })
    }

    pub async fn run_gpu(&self, gpu: &Gpu, data: &[f32]) -> Result<Vec<f32>> {
        let s = Samples::F32(data);
        f32_values(match &self.rank {
            Rank::Median {
                footprint,
                boundary,
            } => median::median_filter(gpu, s, &self.shape, footprint, *boundary).await?,
            Rank::Outliers(r) => median::remove_outliers(gpu, s, &self.shape, r).await?,
        })
    }
}

fn f32_values(v: SampleVec) -> Result<Vec<f32>> {
    match v {
        SampleVec::F32(v) => Ok(v),
        _ => Err(Error::Device("f32 output expected from f32 input".into())),
    }
}

/// `data > value` as a 0/1 mask on the CPU.
pub fn threshold_cpu(data: &[f32], shape: &[u32], p: &ThresholdParams) -> Result<Vec<u8>> {
    shape_of(shape, data.len())?;
    p.validate()?;
    let mask = threshold::cpu::threshold_above(Samples::F32(data), p.value)?;
    Ok(mask.into_iter().map(u8::from).collect())
}

/// `data > value` as a 0/1 mask on the GPU.
pub async fn threshold_gpu(
    gpu: &Gpu,
    data: &[f32],
    shape: &[u32],
    p: &ThresholdParams,
) -> Result<Vec<u8>> {
    shape_of(shape, data.len())?;
    p.validate()?;
    let mask = threshold::threshold_above(gpu, Samples::F32(data), p.value).await?;
    Ok(mask.into_iter().map(u8::from).collect())
}

/// A decoded file reduced to what the page works on: f32 samples (what the
/// GPU computes in) plus the original dtype's name, summary and header.
#[derive(Clone, Debug)]
pub struct Decoded {
    pub shape: Vec<usize>,
    pub dtype: &'static str,
    pub format: &'static str,
    pub data: Vec<f32>,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub header: Vec<(String, String)>,
}

/// Decodes any file gpuscope-io reads; the format comes from `name`.
pub fn decode(name: &str, bytes: &[u8]) -> Result<Decoded, IoError> {
    let image = gpuscope_io::decode(name, bytes)?;
    let stats = image.array.stats();
    Ok(Decoded {
        dtype: image.array.dtype().name(),
        format: image.format.name(),
        data: image.array.to_f32_vec(),
        shape: image.array.shape,
        min: stats.min,
        max: stats.max,
        mean: stats.mean,
        header: image.header,
    })
}

/// An array read some other way (an HDF5 frame) as a decoded image.
pub fn decoded(
    array: gpuscope_io::Array,
    format: &'static str,
    header: Vec<(String, String)>,
) -> Decoded {
    let stats = array.stats();
    Decoded {
        dtype: array.dtype().name(),
        format,
        data: array.to_f32_vec(),
        shape: array.shape,
        min: stats.min,
        max: stats.max,
        mean: stats.mean,
        header,
    }
}

/// An Eiger frame with the detector's mask applied as CBF marks pixels:
/// masked pixels (mask bit 0, a module gap) become -1, other masked pixels
/// and counts above `cutoff` -2, so that spot finding and the display leave
/// them out. Statistics are over the other pixels; the dtype stays the
/// file's.
pub fn decoded_masked(
    array: gpuscope_io::Array,
    mask: Option<&[u32]>,
    cutoff: Option<f64>,
    header: Vec<(String, String)>,
) -> Decoded {
    let dtype = array.dtype().name();
    let mut data = array.to_f64_vec();
    for (i, v) in data.iter_mut().enumerate() {
        let m = mask.and_then(|m| m.get(i).copied()).unwrap_or(0);
        if m & 1 != 0 {
            *v = -1.0;
        } else if m != 0 || cutoff.is_some_and(|c| *v > c) {
            *v = -2.0;
        }
    }
    let valid: Vec<f64> = data.iter().copied().filter(|&v| v >= 0.0).collect();
    let (min, max, mean) = if valid.is_empty() {
        (f64::NAN, f64::NAN, f64::NAN)
    } else {
        let min = valid.iter().copied().fold(f64::INFINITY, f64::min);
        let max = valid.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (min, max, valid.iter().sum::<f64>() / valid.len() as f64)
    };
    Decoded {
        dtype,
        format: "hdf5",
        data: data.iter().map(|&v| v as f32).collect(),
        shape: array.shape,
        min,
        max,
        mean,
        header,
    }
}

/// The file format of a download: `npy`, `tiff` (or `tif`) or `png`.
fn format_of(format: &str) -> Result<Format, String> {
    match format {
        "npy" => Ok(Format::Npy),
        "tiff" | "tif" => Ok(Format::Tiff),
        "png" => Ok(Format::Png),
        other => Err(format!("cannot encode '{other}': choose npy, tiff or png")),
    }
}

/// Writes `array` as `format`; `png` gets 8-bit grey scaled from min..max
/// (for viewing) unless `array` already is 8-bit.
fn encode_array(
    format: &str,
    array: Array,
    scaled: impl FnOnce() -> Vec<u8>,
) -> Result<Vec<u8>, String> {
    let format = format_of(format)?;
    let array = if format == Format::Png && array.dtype().name() != "uint8" {
        Array::from_u8(array.shape.clone(), scaled()).map_err(|e| e.to_string())?
    } else {
        array
    };
    gpuscope_io::encode(format, &array).map_err(|e| e.to_string())
}

/// Encodes f32 samples as a downloadable file: `npy` or `tiff` keep f32;
/// `png` is written as 8-bit grey scaled from min..max, for viewing only.
pub fn encode(format: &str, data: &[f32], shape: &[u32]) -> Result<Vec<u8>, String> {
    let shape = shape_of(shape, data.len()).map_err(|e| e.to_string())?;
    let array = Array::from_f32(shape, data.to_vec()).map_err(|e| e.to_string())?;
    encode_array(format, array, || to_u8_scaled(data))
}

/// Encodes f64 samples (the CPU reference's float results) keeping float64
/// in `npy` and `tiff`.
pub fn encode_f64(format: &str, data: &[f64], shape: &[u32]) -> Result<Vec<u8>, String> {
    let shape = shape_of(shape, data.len()).map_err(|e| e.to_string())?;
    let array = Array::from_f64(shape, data.to_vec()).map_err(|e| e.to_string())?;
    encode_array(format, array, || {
        to_u8_scaled(&data.iter().map(|&v| v as f32).collect::<Vec<_>>())
    })
}

/// Encodes integer labels (0 = background) as int32 `npy`/`tiff`, as
/// `scipy.ndimage.label` returns them.
pub fn encode_labels(format: &str, labels: &[i32], shape: &[u32]) -> Result<Vec<u8>, String> {
    let shape = shape_of(shape, labels.len()).map_err(|e| e.to_string())?;
    let array = Array::from_i32(shape, labels.to_vec()).map_err(|e| e.to_string())?;
    encode_array(format, array, || {
        to_u8_scaled(&labels.iter().map(|&v| v as f32).collect::<Vec<_>>())
    })
}

/// Encodes a 0/1 mask as an 8-bit array (npy, tiff or png with 0/255).
pub fn encode_mask(format: &str, mask: &[u8], shape: &[u32]) -> Result<Vec<u8>, String> {
    let shape = shape_of(shape, mask.len()).map_err(|e| e.to_string())?;
    let format = format_of(format)?;
    let scale = if format == Format::Png { 255 } else { 1 };
    let values = mask.iter().map(|&m| u8::from(m != 0) * scale).collect();
    let array = Array::from_u8(shape, values).map_err(|e| e.to_string())?;
    gpuscope_io::encode(format, &array).map_err(|e| e.to_string())
}

/// Linear min..max → 0..255 over the finite values (NaN → 0).
pub fn to_u8_scaled(data: &[f32]) -> Vec<u8> {
    let (lo, hi) = data
        .iter()
        .filter(|v| v.is_finite())
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    let span = if hi > lo { hi - lo } else { 1.0 };
    data.iter()
        .map(|&v| {
            if v.is_finite() {
                ((v - lo) / span * 255.0).round().clamp(0.0, 255.0) as u8
            } else {
                0
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_checked_against_the_data() {
        assert_eq!(shape_of(&[2, 3], 6).unwrap(), vec![2, 3]);
        let e = shape_of(&[2, 3], 5).unwrap_err().to_string();
        assert!(e.contains("needs 6 values"), "{e}");
        assert!(shape_of(&[u32::MAX, u32::MAX, u32::MAX], 1).is_err());
    }

    /// Parameters as the page's options object gives them.
    fn options<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    fn gaussian(sigma: f64, mode: &str, cval: f64) -> GaussianParams {
        GaussianParams {
            sigma: vec![sigma],
            mode: mode.parse().unwrap(),
            cval,
            ..GaussianParams::default()
        }
    }

    #[test]
    fn bad_parameters_give_the_core_messages() {
        let e = Linear::gaussian(4, &[2, 2], &gaussian(-1.0, "reflect", 0.0))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("sigma"), "{e}");
        let e = serde_json::from_value::<GaussianParams>(
            serde_json::json!({"sigma": [1.0], "mode": "bogus"}),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("mode"), "{e}");
        assert!(Linear::gaussian(4, &[2, 2], &gaussian(1.0, "constant", f64::NAN)).is_err());
        assert!(Linear::gaussian(4, &[2, 2], &GaussianParams::default()).is_err());
        let nan = ThresholdParams { value: f64::NAN };
        assert!(threshold_cpu(&[1.0, 2.0], &[2], &nan).is_err());
    }

    #[test]
    fn cpu_gaussian_keeps_a_constant_image() {
        let data = vec![3.0f32; 30];
        let op = Linear::gaussian(30, &[5, 6], &gaussian(1.5, "reflect", 0.0)).unwrap();
        let out = op.run_cpu(&data).unwrap();
        assert!(out.iter().all(|&v| (v - 3.0).abs() < 1e-12));
    }

    #[test]
    fn convolve_and_threshold_on_the_cpu() {
        let p = options(serde_json::json!({
            "weights": {"shape": [2], "values": [1.0, 2.0]}, "mode": "constant"
        }));
        let op = Linear::kernel(3, &[3], &p, true).unwrap();
        // scipy.ndimage.convolve([1., 2, 3], [1., 2], mode='constant') (scipy 1.x).
        assert_eq!(op.run_cpu(&[1.0, 2.0, 3.0]).unwrap(), vec![4.0, 7.0, 6.0]);
        assert_eq!(
            threshold_cpu(&[0.5, 1.0, 1.5], &[3], &ThresholdParams { value: 1.0 }).unwrap(),
            vec![0, 0, 1]
        );
    }

    #[test]
    fn decode_and_encode_round_trip_through_npy() {
        let bytes = encode("npy", &[1.0, -2.0, 3.5, 4.0], &[2, 2]).unwrap();
        let d = decode("x.npy", &bytes).unwrap();
        assert_eq!((d.shape.clone(), d.dtype), (vec![2, 2], "float32"));
        assert_eq!(d.data, vec![1.0, -2.0, 3.5, 4.0]);
        assert_eq!((d.min, d.max), (-2.0, 4.0));
        assert!(decode("x.npy", b"garbage").is_err());
        assert!(encode("gif", &[1.0], &[1]).is_err());
        assert!(
            !encode_mask("png", &[0, 1, 1, 0], &[2, 2])
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn median_and_outliers_on_the_cpu() {
        let data = [1.0, 9.0, 3.0, 4.0, 100.0, 6.0, 7.0, 8.0, 2.0];
        let median = |size: usize, mode: &str| -> MedianParams {
            options(serde_json::json!({"size": [size], "mode": mode}))
        };
        let outliers = |diff: f64, mode: &str| -> OutlierRemoval {
            options(serde_json::json!({"diff": diff, "size": 3, "mode": mode}))
        };
        let m = RankOp::median(9, &[3, 3], &median(3, "nearest")).unwrap();
        assert_eq!(m.run_cpu(&data).unwrap()[4], 6.0);
        let o = RankOp::outliers(9, &[3, 3], &outliers(10.0, "bright")).unwrap();
        let out = o.run_cpu(&data).unwrap();
        assert_eq!(out[4], 6.0, "the hot pixel is replaced by its median");
        assert_eq!(out[0], 1.0);
        assert!(RankOp::outliers(9, &[3, 3], &outliers(-1.0, "bright")).is_err());
        assert!(
            serde_json::from_value::<OutlierRemoval>(
                serde_json::json!({"diff": 1.0, "mode": "hot"})
            )
            .is_err()
        );
        assert!(RankOp::outliers(9, &[3, 3], &OutlierRemoval::default()).is_err());
        assert!(RankOp::median(9, &[3, 3], &median(0, "reflect")).is_err());
        assert!(RankOp::median(8, &[3, 3], &median(3, "reflect")).is_err());
        assert!(RankOp::median(9, &[3, 3], &MedianParams::default()).is_err());
    }

    #[test]
    fn downloads_keep_their_dtype() {
        let d = decode("x.npy", &encode_f64("npy", &[0.1, 2.5], &[2]).unwrap()).unwrap();
        assert_eq!((d.dtype, d.shape.clone()), ("float64", vec![2]));
        let d = decode("x.tif", &encode_f64("tiff", &[0.1, 2.5], &[1, 2]).unwrap()).unwrap();
        assert_eq!(d.dtype, "float64");
        let d = decode(
            "x.npy",
            &encode_labels("npy", &[0, 1, 2, 70000], &[2, 2]).unwrap(),
        )
        .unwrap();
        assert_eq!(
            (d.dtype, d.data.clone()),
            ("int32", vec![0.0, 1.0, 2.0, 70000.0])
        );
        let d = decode("x.tif", &encode_labels("tif", &[0, 3], &[1, 2]).unwrap()).unwrap();
        assert_eq!(d.dtype, "int32");
        let d = decode("x.png", &encode_labels("png", &[0, 3], &[1, 2]).unwrap()).unwrap();
        assert_eq!((d.dtype, d.data.clone()), ("uint8", vec![0.0, 255.0]));
        let d = decode("x.npy", &encode_mask("npy", &[0, 1, 1], &[3]).unwrap()).unwrap();
        assert_eq!((d.dtype, d.data.clone()), ("uint8", vec![0.0, 1.0, 1.0]));
        assert!(encode_labels("npy", &[1, 2, 3], &[2, 2]).is_err());
        assert!(encode_f64("gif", &[1.0], &[1]).is_err());
    }

    #[test]
    fn scaling_to_u8_spans_the_range() {
        assert_eq!(
            to_u8_scaled(&[0.0, 0.5, 1.0, f32::NAN]),
            vec![0, 128, 255, 0]
        );
        assert_eq!(to_u8_scaled(&[2.0, 2.0]), vec![0, 0]);
    }
}

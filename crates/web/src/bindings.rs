//! The wasm-bindgen surface: JS types in, JS types out, nothing else. Every
//! operation exists twice with the same arguments, as an async `Engine`
//! method (WebGPU) and as a free function (CPU reference): `(data, shape,
//! options)`, `options` one object with the operation's parameters as the
//! catalogue lists them (`catalogue()`; missing ones take their defaults),
//! deserialised into the core's parameter type. Each returns `{data, shape,
//! ms, kernelMs?}` so a timing panel can compare the two.

use gpuscope_core::filters::median::OutlierRemoval;
use gpuscope_core::filters::{ConvolveParams, GaussianParams, MedianParams};
use gpuscope_core::segment::{LabelParams, SourcesParams, ThresholdParams};
use gpuscope_core::slic::SlicParams;
use gpuscope_core::stats::SigmaClipParams;
use gpuscope_core::{Error, Gpu, GpuOptions};
use js_sys::{Array, Float32Array, Float64Array, Object, Reflect, Uint8Array};
use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::ops::{self, Linear, RankOp};
use crate::segment;

#[wasm_bindgen]
extern "C" {
    // `performance` exists in windows and workers alike.
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

pub(crate) fn js_err(e: impl std::fmt::Display + 'static) -> JsError {
    // The core's errors carry typed remedies, worded for the page.
    match (&e as &dyn std::any::Any).downcast_ref::<Error>() {
        Some(core) => JsError::new(&crate::words::page_words(core)),
        None => JsError::new(&e.to_string()),
    }
}

/// An operation's options object as its parameter type: `undefined` or
/// `null` for all the defaults; unknown keys and bad values are refused.
pub(crate) fn options<T: serde::de::DeserializeOwned + Serialize + Default>(
    options: JsValue,
) -> Result<T, JsError> {
    if options.is_undefined() || options.is_null() {
        return Ok(T::default());
    }
    // serde-wasm-bindgen reads only the fields it knows: a misspelt option
    // would be dropped silently, so the keys are checked here.
    if let Some(obj) = options.dyn_ref::<Object>() {
        let known = gpuscope_core::catalogue::defaults::<T>();
        for key in Object::keys(obj).iter() {
            let key = key.as_string().unwrap_or_default();
            if !known.contains_key(&key) {
                let names: Vec<&str> = known.keys().map(String::as_str).collect();
                return Err(JsError::new(&format!(
                    "unknown option `{key}` (the options are {})",
                    names.join(", ")
                )));
            }
        }
    }
    serde_wasm_bindgen::from_value(options).map_err(js_err)
}

/// The operation catalogue (gpuscope_core::catalogue) as plain JS objects:
/// `[{name, reference, summary, cli, inputs, output, params: [{name, type,
/// default, required, nullable, min, min_exclusive, max, choices, per_axis,
/// help}]}]`.
#[wasm_bindgen]
pub fn catalogue() -> Result<JsValue, JsError> {
    let s = serde_wasm_bindgen::Serializer::json_compatible();
    gpuscope_core::catalogue::catalogue()
        .serialize(&s)
        .map_err(js_err)
}

pub(crate) fn set(obj: &Object, key: &str, value: impl Into<JsValue>) {
    // Setting a property on a fresh plain object cannot fail.
    let _ = Reflect::set(obj, &JsValue::from_str(key), &value.into());
}

fn shape_array(shape: &[u32]) -> Array {
    shape.iter().map(|&n| JsValue::from(n)).collect()
}

/// `{data, shape, ms}` plus `kernelMs` when the GPU measured its kernels.
fn result(data: JsValue, shape: &[u32], ms: f64, kernel_ms: Option<f64>) -> JsValue {
    let obj = Object::new();
    set(&obj, "data", data);
    set(&obj, "shape", shape_array(shape));
    set(&obj, "ms", ms);
    if let Some(k) = kernel_ms {
        set(&obj, "kernelMs", k);
    }
    obj.into()
}

/// The WebGPU device, opened once per page.
#[wasm_bindgen]
pub struct Engine {
    pub(crate) gpu: Gpu,
}

/// Opens the browser's WebGPU adapter. Fails with a message the page can
/// show as is when WebGPU is missing or offers no adapter; the CPU
/// functions keep working in that case.
#[wasm_bindgen]
pub async fn open_gpu() -> Result<Engine, JsError> {
    let navigator = Reflect::get(&js_sys::global(), &"navigator".into()).unwrap_or_default();
    let has_gpu = !navigator.is_undefined()
        && Reflect::get(&navigator, &"gpu".into()).is_ok_and(|g| !g.is_undefined() && !g.is_null());
    if !has_gpu {
        return Err(JsError::new(
            "WebGPU is not available in this browser (navigator.gpu is missing): use a \
             WebGPU-capable browser (Chrome or Edge 113+, Safari 26+, Firefox 141+ on Windows) \
             over https or localhost; the CPU path is used meanwhile",
        ));
    }
    match Gpu::new(GpuOptions::default()).await {
        Ok(gpu) => Ok(Engine { gpu }),
        // wgpu's own text lists backends that a wasm build never has: noise here.
        Err(Error::NoAdapter(_)) => Err(JsError::new(
            "WebGPU is present but the browser gave no adapter (hardware acceleration may be \
             off, or the GPU blocklisted): the CPU path is used meanwhile",
        )),
        Err(e) => Err(js_err(e)),
    }
}

#[wasm_bindgen]
impl Engine {
    /// `{name, backend, deviceType, driver, maxBindingSize, maxBufferSize,
    /// memoryBudget, timestamps}` of the opened adapter.
    pub fn device_info(&self) -> JsValue {
        let s = self.gpu.summary();
        let obj = Object::new();
        set(&obj, "name", s.name);
        set(&obj, "backend", s.backend);
        set(&obj, "deviceType", s.device_type);
        set(&obj, "driver", s.driver);
        // f64 is exact for any real limit (< 2^53 bytes).
        set(&obj, "maxBindingSize", s.max_binding_size as f64);
        set(&obj, "maxBufferSize", s.max_buffer_size as f64);
        set(&obj, "memoryBudget", s.memory_budget as f64);
        set(&obj, "timestamps", s.timestamps);
        obj.into()
    }

    /// Frees the pooled device buffers (after a large image, for instance).
    pub fn trim(&self) {
        self.gpu.trim();
    }

    /// GPU time of the kernels since the operation started (every chunk).
    fn kernel_ms(&self) -> Option<f64> {
        self.gpu
            .kernel_ns_total()
            .filter(|&ns| ns > 0)
            .map(|ns| ns as f64 / 1e6)
    }

    /// `scipy.ndimage.median_filter(input, {size, mode, cval})` on the GPU.
    pub async fn median_filter(
        &self,
        data: Vec<f32>,
        shape: Vec<u32>,
        opts: JsValue,
    ) -> Result<JsValue, JsError> {
        let p: MedianParams = options(opts)?;
        let op = RankOp::median(data.len(), &shape, &p).map_err(js_err)?;
        self.rank(op, &data, &shape).await
    }

    /// Mantid Imaging's outlier removal on the GPU: `{diff, size, mode}`
    /// (mode bright, dark, both or tomopy).
    pub async fn remove_outliers(
        &self,
        data: Vec<f32>,
        shape: Vec<u32>,
        opts: JsValue,
    ) -> Result<JsValue, JsError> {
        let p: OutlierRemoval = options(opts)?;
        let op = RankOp::outliers(data.len(), &shape, &p).map_err(js_err)?;
        self.rank(op, &data, &shape).await
    }

    async fn rank(&self, op: RankOp, data: &[f32], shape: &[u32]) -> Result<JsValue, JsError> {
        self.gpu.reset_kernel_time();
        let t0 = performance_now();
        let out = op.run_gpu(&self.gpu, data).await.map_err(js_err)?;
        let ms = performance_now() - t0;
        Ok(result(
            Float32Array::from(&out[..]).into(),
            shape,
            ms,
            self.kernel_ms(),
        ))
    }

    /// `scipy.ndimage.gaussian_filter(input, {sigma, mode, cval, truncate})`
    /// on the GPU; `data` is f32.
    pub async fn gaussian_filter(
        &self,
        data: Vec<f32>,
        shape: Vec<u32>,
        opts: JsValue,
    ) -> Result<JsValue, JsError> {
        let p: GaussianParams = options(opts)?;
        let op = Linear::gaussian(data.len(), &shape, &p).map_err(js_err)?;
        self.linear(op, &data, &shape).await
    }

    /// `scipy.ndimage.convolve(input, {weights: {shape, values}, mode, cval})`
    /// on the GPU.
    pub async fn convolve(
        &self,
        data: Vec<f32>,
        shape: Vec<u32>,
        opts: JsValue,
    ) -> Result<JsValue, JsError> {
        let p: ConvolveParams = options(opts)?;
        let op = Linear::kernel(data.len(), &shape, &p, true).map_err(js_err)?;
        self.linear(op, &data, &shape).await
    }

    /// `scipy.ndimage.correlate` on the GPU (the options of `convolve`).
    pub async fn correlate(
        &self,
        data: Vec<f32>,
        shape: Vec<u32>,
        opts: JsValue,
    ) -> Result<JsValue, JsError> {
        let p: ConvolveParams = options(opts)?;
        let op = Linear::kernel(data.len(), &shape, &p, false).map_err(js_err)?;
        self.linear(op, &data, &shape).await
    }

    /// `data > value` (`{value}`) on the GPU as a 0/1 `Uint8Array` mask.
    pub async fn threshold(
        &self,
        data: Vec<f32>,
        shape: Vec<u32>,
        opts: JsValue,
    ) -> Result<JsValue, JsError> {
        let p: ThresholdParams = options(opts)?;
        self.gpu.reset_kernel_time();
        let t0 = performance_now();
        let mask = ops::threshold_gpu(&self.gpu, &data, &shape, &p)
            .await
            .map_err(js_err)?;
        let ms = performance_now() - t0;
        Ok(result(
            Uint8Array::from(&mask[..]).into(),
            &shape,
            ms,
            self.kernel_ms(),
        ))
    }

    async fn linear(&self, op: Linear, data: &[f32], shape: &[u32]) -> Result<JsValue, JsError> {
        self.gpu.reset_kernel_time();
        let t0 = performance_now();
        let out = op.run_gpu(&self.gpu, data).await.map_err(js_err)?;
        let ms = performance_now() - t0;
        Ok(result(
            Float32Array::from(&out[..]).into(),
            shape,
            ms,
            self.kernel_ms(),
        ))
    }
}

fn linear_cpu(op: Linear, data: &[f32], shape: &[u32]) -> Result<JsValue, JsError> {
    let t0 = performance_now();
    let out = op.run_cpu(data).map_err(js_err)?;
    let ms = performance_now() - t0;
    Ok(result(Float64Array::from(&out[..]).into(), shape, ms, None))
}

/// `scipy.ndimage.median_filter` on the CPU (the reference).
#[wasm_bindgen]
pub fn median_filter(data: &[f32], shape: Vec<u32>, opts: JsValue) -> Result<JsValue, JsError> {
    let p: MedianParams = options(opts)?;
    let op = RankOp::median(data.len(), &shape, &p).map_err(js_err)?;
    rank_cpu(op, data, &shape)
}

/// Mantid Imaging's outlier removal on the CPU (the reference).
#[wasm_bindgen]
pub fn remove_outliers(data: &[f32], shape: Vec<u32>, opts: JsValue) -> Result<JsValue, JsError> {
    let p: OutlierRemoval = options(opts)?;
    let op = RankOp::outliers(data.len(), &shape, &p).map_err(js_err)?;
    rank_cpu(op, data, &shape)
}

fn rank_cpu(op: RankOp, data: &[f32], shape: &[u32]) -> Result<JsValue, JsError> {
    let t0 = performance_now();
    let out = op.run_cpu(data).map_err(js_err)?;
    let ms = performance_now() - t0;
    Ok(result(Float32Array::from(&out[..]).into(), shape, ms, None))
}

/// `scipy.ndimage.gaussian_filter` on the CPU (f64 reference).
#[wasm_bindgen]
pub fn gaussian_filter(data: &[f32], shape: Vec<u32>, opts: JsValue) -> Result<JsValue, JsError> {
    let p: GaussianParams = options(opts)?;
    let op = Linear::gaussian(data.len(), &shape, &p).map_err(js_err)?;
    linear_cpu(op, data, &shape)
}

/// `scipy.ndimage.convolve` on the CPU (f64 reference).
#[wasm_bindgen]
pub fn convolve(data: &[f32], shape: Vec<u32>, opts: JsValue) -> Result<JsValue, JsError> {
    let p: ConvolveParams = options(opts)?;
    let op = Linear::kernel(data.len(), &shape, &p, true).map_err(js_err)?;
    linear_cpu(op, data, &shape)
}

/// `scipy.ndimage.correlate` on the CPU (f64 reference).
#[wasm_bindgen]
pub fn correlate(data: &[f32], shape: Vec<u32>, opts: JsValue) -> Result<JsValue, JsError> {
    let p: ConvolveParams = options(opts)?;
    let op = Linear::kernel(data.len(), &shape, &p, false).map_err(js_err)?;
    linear_cpu(op, data, &shape)
}

/// `data > value` on the CPU as a 0/1 `Uint8Array` mask.
#[wasm_bindgen]
pub fn threshold(data: &[f32], shape: Vec<u32>, opts: JsValue) -> Result<JsValue, JsError> {
    let p: ThresholdParams = options(opts)?;
    let t0 = performance_now();
    let mask = ops::threshold_cpu(data, &shape, &p).map_err(js_err)?;
    let ms = performance_now() - t0;
    Ok(result(Uint8Array::from(&mask[..]).into(), &shape, ms, None))
}

/// A decoded file: f32 samples plus what the file said about them.
#[wasm_bindgen]
pub struct Volume {
    inner: ops::Decoded,
}

/// Decodes any format gpuscope-io reads (npy, tiff, png, jpeg, cbf, fits);
/// `name`'s extension picks the format.
#[wasm_bindgen]
pub fn decode(name: &str, bytes: &[u8]) -> Result<Volume, JsError> {
    ops::decode(name, bytes)
        .map(|inner| Volume { inner })
        .map_err(js_err)
}

impl Volume {
    pub(crate) fn of(inner: ops::Decoded) -> Volume {
        Volume { inner }
    }
}

#[wasm_bindgen]
impl Volume {
    /// Extents, slowest axis first (C order).
    pub fn shape(&self) -> Vec<u32> {
        // Decoded extents come from byte-checked headers, so they fit u32 in wasm.
        self.inner.shape.iter().map(|&n| n as u32).collect()
    }

    /// The file's own dtype (`uint8`, `int32`, `float32`...).
    pub fn dtype(&self) -> String {
        self.inner.dtype.to_string()
    }

    /// The file format that was decoded (`png`, `cbf`...).
    pub fn format(&self) -> String {
        self.inner.format.to_string()
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.inner.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.data.is_empty()
    }

    /// The samples as f32 (a copy out of wasm memory).
    pub fn data(&self) -> Float32Array {
        Float32Array::from(&self.inner.data[..])
    }

    /// `{min, max, mean}` over the finite samples of the original dtype.
    pub fn stats(&self) -> JsValue {
        let obj = Object::new();
        set(&obj, "min", self.inner.min);
        set(&obj, "max", self.inner.max);
        set(&obj, "mean", self.inner.mean);
        obj.into()
    }

    /// Header fields as `[[key, value], ...]` (CBF, FITS, TIFF pages).
    pub fn header(&self) -> Array {
        self.inner
            .header
            .iter()
            .map(|(k, v)| -> JsValue {
                [JsValue::from_str(k), JsValue::from_str(v)]
                    .iter()
                    .collect::<Array>()
                    .into()
            })
            .collect()
    }
}

/// f32 samples as a file to download: `npy` and `tiff` keep float32, `png`
/// is 8-bit grey scaled min..max (for viewing).
#[wasm_bindgen]
pub fn encode(format: &str, data: &[f32], shape: Vec<u32>) -> Result<Vec<u8>, JsError> {
    ops::encode(format, data, &shape).map_err(|e| JsError::new(&e))
}

/// `encode("npy", data, shape)`.
#[wasm_bindgen]
pub fn encode_npy(data: &[f32], shape: Vec<u32>) -> Result<Vec<u8>, JsError> {
    encode("npy", data, shape)
}

/// f64 samples (CPU reference results) as float64 `npy`/`tiff`, or `png`
/// 8-bit grey scaled min..max.
#[wasm_bindgen]
pub fn encode_f64(format: &str, data: &[f64], shape: Vec<u32>) -> Result<Vec<u8>, JsError> {
    ops::encode_f64(format, data, &shape).map_err(|e| JsError::new(&e))
}

/// Integer labels as int32 `npy`/`tiff` (as `scipy.ndimage.label`), or
/// `png` 8-bit scaled.
#[wasm_bindgen]
pub fn encode_labels(format: &str, labels: &[i32], shape: Vec<u32>) -> Result<Vec<u8>, JsError> {
    ops::encode_labels(format, labels, &shape).map_err(|e| JsError::new(&e))
}

/// A 0/1 mask as uint8 `npy`/`tiff`, or a 0/255 `png`.
#[wasm_bindgen]
pub fn encode_mask(format: &str, mask: &[u8], shape: Vec<u32>) -> Result<Vec<u8>, JsError> {
    ops::encode_mask(format, mask, &shape).map_err(|e| JsError::new(&e))
}

// ---- clipping, labelling, sources (crate::segment) ----

fn clip_js(s: &gpuscope_core::stats::ClipStats) -> Object {
    let obj = Object::new();
    set(&obj, "mean", s.mean);
    set(&obj, "median", s.median);
    set(&obj, "std", s.std);
    set(&obj, "nKept", s.n_kept as f64);
    set(&obj, "iterations", s.iterations);
    obj
}

fn timed(obj: Object, ms: f64, kernel_ms: Option<f64>) -> JsValue {
    set(&obj, "ms", ms);
    if let Some(k) = kernel_ms {
        set(&obj, "kernelMs", k);
    }
    obj.into()
}

fn labels_js(l: &gpuscope_core::segment::Labels, shape: &[u32]) -> Object {
    let obj = Object::new();
    set(&obj, "data", js_sys::Int32Array::from(&l.labels[..]));
    set(&obj, "shape", shape_array(shape));
    set(&obj, "count", l.count as f64);
    obj
}

fn f64s(v: &[f64]) -> Array {
    v.iter().map(|&x| JsValue::from(x)).collect()
}

/// `{threshold, clip, count, labels, shape, regions: [{label, area, bbox,
/// centroid, centroidWeighted, intensitySum, intensityMean, intensityMin,
/// intensityMax}]}`.
fn sources_js(s: &gpuscope_core::segment::sources::Sources, shape: &[u32]) -> Object {
    let obj = labels_js(&s.labels, shape);
    set(&obj, "threshold", s.threshold);
    set(&obj, "clip", clip_js(&s.stats));
    let regions: Array = s
        .regions
        .iter()
        .map(|r| -> JsValue {
            let o = Object::new();
            set(&o, "label", r.label);
            set(&o, "area", r.area as f64);
            let bbox: Vec<f64> = r
                .bbox_min
                .iter()
                .chain(&r.bbox_max)
                .map(|&v| v as f64)
                .collect();
            set(&o, "bbox", f64s(&bbox));
            set(&o, "centroid", f64s(&r.centroid));
            set(&o, "centroidWeighted", f64s(&r.centroid_weighted));
            set(&o, "intensitySum", r.intensity_sum);
            set(&o, "intensityMean", r.intensity_mean);
            set(&o, "intensityMin", r.intensity_min);
            set(&o, "intensityMax", r.intensity_max);
            o.into()
        })
        .collect();
    set(&obj, "regions", regions);
    obj
}

#[wasm_bindgen]
impl Engine {
    fn kernel_ms_total(&self) -> Option<f64> {
        self.gpu.kernel_ns_total().map(|ns| ns as f64 / 1e6)
    }

    /// astropy's `sigma_clipped_stats` on the GPU, `{sigma, sigma_lower,
    /// sigma_upper, maxiters, cenfunc, workshop}`: `{mean, median, std,
    /// nKept, iterations, ms, kernelMs?}`. `maxiters` null = until
    /// convergence; `workshop`: strict comparisons until nothing changes.
    pub async fn sigma_clipped_stats(
        &self,
        data: Vec<f32>,
        shape: Vec<u32>,
        opts: JsValue,
    ) -> Result<JsValue, JsError> {
        let p: SigmaClipParams = options(opts)?;
        self.gpu.reset_kernel_time();
        let t0 = performance_now();
        let s = segment::clip_gpu(&self.gpu, &data, &shape, &p)
            .await
            .map_err(js_err)?;
        Ok(timed(
            clip_js(&s),
            performance_now() - t0,
            self.kernel_ms_total(),
        ))
    }

    /// `scipy.ndimage.label(data != background)` on the GPU, `{connectivity,
    /// background}`: `{data: Int32Array, shape, count, ms, kernelMs?}`.
    pub async fn label(
        &self,
        data: Vec<f32>,
        shape: Vec<u32>,
        opts: JsValue,
    ) -> Result<JsValue, JsError> {
        let p: LabelParams = options(opts)?;
        self.gpu.reset_kernel_time();
        let t0 = performance_now();
        let l = segment::label_gpu(&self.gpu, &data, &shape, &p)
            .await
            .map_err(js_err)?;
        Ok(timed(
            labels_js(&l, &shape),
            performance_now() - t0,
            self.kernel_ms_total(),
        ))
    }

    /// The workshop pipeline on the GPU: clip, threshold at the clipped
    /// median + nsigma std (workshop: nsigma std), label, measure.
    pub async fn sources(
        &self,
        data: Vec<f32>,
        shape: Vec<u32>,
        opts: JsValue,
    ) -> Result<JsValue, JsError> {
        let p: SourcesParams = options(opts)?;
        self.gpu.reset_kernel_time();
        let t0 = performance_now();
        let s = segment::sources_gpu(&self.gpu, &data, &shape, &p)
            .await
            .map_err(js_err)?;
        Ok(timed(
            sources_js(&s, &shape),
            performance_now() - t0,
            self.kernel_ms_total(),
        ))
    }
}

#[wasm_bindgen]
impl Engine {
    /// skimage.segmentation.slic on the GPU, its parameters as options
    /// (no mask): `{data: Int32Array, shape (the spatial shape), count,
    /// iterations, ms, kernelMs?}`.
    pub async fn slic(
        &self,
        data: Vec<f32>,
        shape: Vec<u32>,
        opts: JsValue,
    ) -> Result<JsValue, JsError> {
        let p: SlicParams = options(opts)?;
        self.gpu.reset_kernel_time();
        let t0 = performance_now();
        let s = segment::slic_gpu(&self.gpu, &data, &shape, &p)
            .await
            .map_err(js_err)?;
        Ok(timed(
            segments_js(&s),
            performance_now() - t0,
            self.kernel_ms_total(),
        ))
    }
}

fn segments_js(s: &gpuscope_core::slic::Segments) -> Object {
    let obj = Object::new();
    set(&obj, "data", js_sys::Int32Array::from(&s.labels[..]));
    let shape: Vec<u32> = s.shape.iter().map(|&n| n as u32).collect();
    set(&obj, "shape", shape_array(&shape));
    set(&obj, "count", s.n_segments as f64);
    set(&obj, "iterations", s.iterations as f64);
    obj
}

/// skimage.segmentation.slic on the CPU (the GPU path's twin).
#[wasm_bindgen]
pub fn slic(data: &[f32], shape: Vec<u32>, opts: JsValue) -> Result<JsValue, JsError> {
    let p: SlicParams = options(opts)?;
    let t0 = performance_now();
    let s = segment::slic_cpu(data, &shape, &p).map_err(js_err)?;
    Ok(timed(segments_js(&s), performance_now() - t0, None))
}

/// `sigma_clipped_stats` on the CPU (f64 reference).
#[wasm_bindgen]
pub fn sigma_clipped_stats(
    data: &[f32],
    shape: Vec<u32>,
    opts: JsValue,
) -> Result<JsValue, JsError> {
    let p: SigmaClipParams = options(opts)?;
    let t0 = performance_now();
    let s = segment::clip_cpu(data, &shape, &p).map_err(js_err)?;
    Ok(timed(clip_js(&s), performance_now() - t0, None))
}

/// `scipy.ndimage.label(data != background)` on the CPU.
#[wasm_bindgen]
pub fn label(data: &[f32], shape: Vec<u32>, opts: JsValue) -> Result<JsValue, JsError> {
    let p: LabelParams = options(opts)?;
    let t0 = performance_now();
    let l = segment::label_cpu(data, &shape, &p).map_err(js_err)?;
    Ok(timed(labels_js(&l, &shape), performance_now() - t0, None))
}

/// The workshop pipeline on the CPU.
#[wasm_bindgen]
pub fn sources(data: &[f32], shape: Vec<u32>, opts: JsValue) -> Result<JsValue, JsError> {
    let p: SourcesParams = options(opts)?;
    let t0 = performance_now();
    let s = segment::sources_cpu(data, &shape, &p).map_err(js_err)?;
    Ok(timed(sources_js(&s, &shape), performance_now() - t0, None))
}

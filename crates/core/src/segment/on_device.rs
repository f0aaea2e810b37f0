//! Threshold, labels and measurements of arrays already on the GPU
//! ([`DeviceArray`]): the same kernels and answers as the host-memory
//! paths, without the round trips between the steps.

use crate::device_array::{DeviceArray, Elements};
use crate::engine::Gpu;
use crate::error::{Error, Result};
use crate::keys::Samples;
use crate::segment::label::{self, Scratch};
use crate::segment::measure::{self, Region};
use crate::segment::threshold::check_value;
use crate::shaders::Shader;

use super::sources::ThresholdParams;

/// `x > value` of a float32 device array, as a mask (NaN is not above
/// anything, as in numpy).
pub async fn threshold_above(gpu: &Gpu, x: &DeviceArray, value: f64) -> Result<DeviceArray> {
    x.require(Elements::F32, "a threshold")?;
    check_value(value)?;
    let n = x.len();
    let mask = DeviceArray::alloc(gpu, x.shape(), Elements::Bool).await?;
    if n == 0 {
        return Ok(mask);
    }
    // Smallest key of a value above the threshold; none: nothing is.
    let key_lo = Samples::F32(&[])
        .key_above(value)
        .map_or(u32::MAX, |k| k as u32);
    let params = gpu.uniform(&ThresholdParams {
        count: n as u32,
        key_lo,
        key_hi: 0,
        _pad: 0,
    });
    let mut rec = gpu.recorder_untimed();
    rec.dispatch(
        &gpu.pipeline(Shader::Threshold, "threshold_f32")?,
        &[&params, &x.buffer, &mask.buffer],
        (n as u64).div_ceil(4),
    )?;
    rec.submit().await?;
    Ok(mask)
}

/// Connected components of a mask on the device, in scipy's numbering
/// (`scipy.ndimage.label`): the labels (int32) and their number.
pub async fn label(
    gpu: &Gpu,
    mask: &DeviceArray,
    connectivity: usize,
) -> Result<(DeviceArray, usize)> {
    mask.require(Elements::Bool, "label")?;
    let s = label::check(mask.len(), mask.shape(), connectivity)?;
    let n = mask.len();
    let labels = DeviceArray::alloc(gpu, mask.shape(), Elements::I32).await?;
    if n == 0 {
        return Ok((labels, 0));
    }
    if n > label::max_box(gpu) || 4 * label::root_words(s) as u64 > gpu.max_binding_size() {
        labels.free(gpu);
        return Err(Error::InvalidInput(format!(
            "the labelling of shape {:?} does not fit the device at once; label the mask in host memory, \
             where it runs in slabs",
            mask.shape()
        )));
    }
    let plan = label::plan(gpu, s, connectivity);
    let scratch = match Scratch::new(gpu, &plan).await {
        Ok(s) => s,
        Err(e) => {
            labels.free(gpu);
            return Err(e);
        }
    };
    let outcome = async {
        label::record_label(gpu, &plan, &mask.buffer, &labels.buffer, &scratch).await?;
        let total = gpu
            .read_at(&scratch.aux, 4 * plan.n_blocks as u64, 4)
            .await?;
        Ok::<_, Error>(u32::from_le_bytes([total[0], total[1], total[2], total[3]]) as usize)
    }
    .await;
    gpu.recycle(scratch.aux);
    gpu.recycle(scratch.roots);
    match outcome {
        Ok(count) => Ok((labels, count)),
        Err(e) => {
            labels.free(gpu);
            Err(e)
        }
    }
}

/// Measurements of regions 1..=max(labels) of int32 labels with float32
/// intensities, both on the device (skimage's `regionprops` as
/// [`measure::regionprops`] computes it); labels must not be negative.
pub async fn regionprops(
    gpu: &Gpu,
    labels: &DeviceArray,
    values: &DeviceArray,
) -> Result<Vec<Region>> {
    labels.require(Elements::I32, "regionprops' label image")?;
    values.require(Elements::F32, "regionprops' intensity image")?;
    if labels.shape() != values.shape() {
        return Err(Error::InvalidInput(format!(
            "label image of shape {:?} and intensity image of shape {:?}: the shapes must match",
            labels.shape(),
            values.shape()
        )));
    }
    let s = labels.shape3()?;
    let n = labels.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let (max_label, abs_bits) = ranges(gpu, labels, values, s).await?;
    if max_label > i32::MAX as u32 {
        return Err(Error::InvalidInput(
            "the label image holds negative labels; labels are 0 (background) or positive".into(),
        ));
    }
    let vmax = f32::from_bits(abs_bits);
    if !vmax.is_finite() {
        return Err(Error::InvalidInput(
            "a labelled pixel holds NaN or inf; region sums need finite values".into(),
        ));
    }
    measure::measure_resident(
        gpu,
        &labels.buffer,
        &values.buffer,
        s,
        labels.shape().len(),
        max_label as usize,
        vmax,
    )
    .await
}

/// The largest label (as u32: negative labels come out above i32::MAX)
/// and the largest |value| of a labelled pixel, as float bits.
async fn ranges(
    gpu: &Gpu,
    labels: &DeviceArray,
    values: &DeviceArray,
    s: crate::chunk::Shape3,
) -> Result<(u32, u32)> {
    let n = labels.len();
    let acc = gpu.storage(8, "measure ranges").await?;
    let outcome = async {
        gpu.upload(&acc, &[0u8; 8]);
        let params = gpu.uniform(&measure::Params {
            count: n as u32,
            nx: s[2] as u32,
            ny: s[1] as u32,
            z0: 0,
            y0: 0,
            label_lo: 0,
            label_hi: 0,
            scale: 1.0,
        });
        let mut rec = gpu.recorder();
        rec.dispatch(
            &gpu.pipeline(Shader::Measure, "ranges")?,
            &[&params, &labels.buffer, &values.buffer, &acc],
            n as u64,
        )?;
        rec.submit().await?;
        let raw = gpu.read(&acc, 8).await?;
        Ok::<_, Error>((
            u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]),
            u32::from_le_bytes([raw[4], raw[5], raw[6], raw[7]]),
        ))
    }
    .await;
    gpu.recycle(acc);
    outcome
}

//! Region measurements with skimage.measure.regionprops' definitions:
//! label, area, bbox (min inclusive, max exclusive), centroid,
//! intensity-weighted centroid, sum / mean / min / max intensity, in label
//! order 1..n. Coordinates are (row, col) in 2-D, (plane, row, col) in 3-D.
//!
//! GPU (shaders/segment/measure.wgsl): integer atomics only, so every sum is
//! exact and the result does not depend on the order of the threads; the
//! host turns the fixed-point sums into f64.

use bytemuck::{Pod, Zeroable};

use crate::chunk::shape3;
use crate::engine::Gpu;
use crate::error::{Error, Remedy, Result};
use crate::shaders::Shader;

/// One region's measurements; vectors have one entry per axis of the image.
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    pub label: u32,
    pub area: u64,
    /// Smallest coordinate per axis, then one past the largest (skimage's bbox).
    pub bbox_min: Vec<usize>,
    pub bbox_max: Vec<usize>,
    pub centroid: Vec<f64>,
    pub centroid_weighted: Vec<f64>,
    pub intensity_sum: f64,
    pub intensity_mean: f64,
    pub intensity_min: f64,
    pub intensity_max: f64,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(crate) struct Params {
    pub(crate) count: u32,
    pub(crate) nx: u32,
    pub(crate) ny: u32,
    pub(crate) z0: u32,
    pub(crate) y0: u32,
    pub(crate) label_lo: u32,
    pub(crate) label_hi: u32,
    pub(crate) scale: f32,
}

const W: usize = 45;

fn check(labels: &[i32], values: &[f32], shape: &[usize], n_labels: usize) -> Result<()> {
    let s = shape3(shape)?;
    if s.iter().product::<usize>() != labels.len() || values.len() != labels.len() {
        return Err(Error::InvalidInput(format!(
            "labels ({}) and intensities ({}) must both have the shape {shape:?}",
            labels.len(),
            values.len()
        )));
    }
    if let Some(&bad) = labels.iter().find(|&&l| l < 0 || l as usize > n_labels) {
        return Err(Error::InvalidInput(format!(
            "label {bad} is outside 0..={n_labels}; give the labels and their count from `label`"
        )));
    }
    // Background pixels may be anything (NaN blanks in FITS images).
    if let Some(i) = (0..labels.len()).find(|&i| labels[i] != 0 && !values[i].is_finite()) {
        return Err(Error::InvalidInput(format!(
            "the intensity at pixel {i} of region {} is {}; region sums need finite values",
            labels[i], values[i]
        )));
    }
    Ok(())
}

/// Measures regions 1..=n_labels of `labels` (0 = background) with the
/// intensities `values` on the GPU.
pub async fn regionprops(
    gpu: &Gpu,
    labels: &[i32],
    values: &[f32],
    shape: &[usize],
    n_labels: usize,
) -> Result<Vec<Region>> {
    check(labels, values, shape, n_labels)?;
    let vmax = values
        .iter()
        .zip(labels)
        .filter(|&(_, &l)| l != 0)
        .fold(0f32, |m, (v, _)| m.max(v.abs()));
    regionprops_scanned(gpu, labels, values, shape, n_labels, vmax).await
}

/// [`regionprops`] of labels and intensities the caller has scanned
/// already (in one pass, e.g. on threads): every label in 0..=n_labels,
/// every labelled intensity finite, `vmax` the largest |intensity| of a
/// labelled pixel. Only the shapes are checked here.
pub async fn regionprops_scanned(
    gpu: &Gpu,
    labels: &[i32],
    values: &[f32],
    shape: &[usize],
    n_labels: usize,
    vmax: f32,
) -> Result<Vec<Region>> {
    let s = shape3(shape)?;
    if s.iter().product::<usize>() != labels.len() || values.len() != labels.len() {
        return Err(Error::InvalidInput(format!(
            "labels ({}) and intensities ({}) must both have the shape {shape:?}",
            labels.len(),
            values.len()
        )));
    }
    if n_labels == 0 {
        return Ok(Vec::new());
    }
    let scale = scale_for(vmax);
    // Pixel chunks: whole planes (3-D) or rows (2-D); labels + values.
    let max_px = (gpu.max_binding_size() / 4).min(gpu.memory_budget() / 16) as usize;
    let axis = if s[0] > 1 { 0 } else { 1 };
    let slice: usize = s[axis + 1..].iter().product();
    let per = (max_px / slice.max(1)).min(s[axis]);
    if per == 0 {
        return Err(Error::beyond(
            format!("one slice of {slice} pixels exceeds the device's binding limit"),
            &[Remedy::UseCpu],
        ));
    }
    // Label ranges whose accumulators fit one binding.
    let max_labels = ((gpu.max_binding_size() / (4 * W as u64)) as usize).max(1);
    let mut acc_all: Vec<u32> = Vec::with_capacity(n_labels * W);
    let lab_buf = gpu
        .storage(4 * (per * slice) as u64, "measure labels")
        .await?;
    let val_buf = match gpu
        .storage(4 * (per * slice) as u64, "measure values")
        .await
    {
        Ok(b) => b,
        Err(e) => {
            gpu.recycle(lab_buf);
            return Err(e);
        }
    };
    let acc_words = n_labels.min(max_labels) * W;
    let acc = match gpu.storage(4 * acc_words as u64, "measure sums").await {
        Ok(b) => b,
        Err(e) => {
            gpu.recycle(lab_buf);
            gpu.recycle(val_buf);
            return Err(e);
        }
    };
    let outcome = async {
        let clear = gpu.pipeline(Shader::Measure, "clear")?;
        let accumulate = gpu.pipeline(Shader::Measure, "accumulate")?;
        let mut lo = 1;
        while lo <= n_labels {
            let hi = (lo + max_labels).min(n_labels + 1);
            let mut first = 0;
            let mut cleared = false;
            while first < s[axis] {
                let last = (first + per).min(s[axis]);
                let range = first * slice..last * slice;
                gpu.upload(&lab_buf, bytemuck::cast_slice(&labels[range.clone()]));
                gpu.upload(&val_buf, bytemuck::cast_slice(&values[range.clone()]));
                let (z0, y0, ny) = if axis == 0 {
                    (first, 0, s[1])
                } else {
                    (0, first, last - first)
                };
                let params = gpu.uniform(&Params {
                    count: range.len() as u32,
                    nx: s[2] as u32,
                    ny: ny as u32,
                    z0: z0 as u32,
                    y0: y0 as u32,
                    label_lo: lo as u32,
                    label_hi: hi as u32,
                    scale,
                });
                let mut rec = gpu.recorder();
                let buffers = [&params, &lab_buf, &val_buf, &acc];
                if !cleared {
                    rec.dispatch(&clear, &buffers, ((hi - lo) * W) as u64)?;
                    cleared = true;
                }
                rec.dispatch(&accumulate, &buffers, range.len() as u64)?;
                rec.submit().await?;
                first = last;
            }
            let raw = gpu.read(&acc, 4 * ((hi - lo) * W) as u64).await?;
            acc_all.extend(
                raw.chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            );
            lo = hi;
        }
        Ok::<_, Error>(())
    }
    .await;
    gpu.recycle(lab_buf);
    gpu.recycle(val_buf);
    gpu.recycle(acc);
    outcome?;
    Ok(acc_all
        .chunks_exact(W)
        .enumerate()
        .map(|(k, a)| region(k as u32 + 1, a, shape.len(), scale))
        .collect())
}

/// Measures regions 1..=n_labels from labels and f32 intensities already
/// on the GPU (one buffer each, the whole image of shape `s`): the source
/// chain's last step. `vmax`: the largest |intensity| of a labelled pixel.
pub(crate) async fn measure_resident(
    gpu: &Gpu,
    labels: &wgpu::Buffer,
    values: &wgpu::Buffer,
    s: crate::chunk::Shape3,
    ndim: usize,
    n_labels: usize,
    vmax: f32,
) -> Result<Vec<Region>> {
    if n_labels == 0 {
        return Ok(Vec::new());
    }
    let n: usize = s.iter().product();
    let scale = scale_for(vmax);
    let max_labels = ((gpu.max_binding_size() / (4 * W as u64)) as usize).max(1);
    let acc = gpu
        .storage(4 * (n_labels.min(max_labels) * W) as u64, "measure sums")
        .await?;
    let outcome = async {
        let clear = gpu.pipeline(Shader::Measure, "clear")?;
        let accumulate = gpu.pipeline(Shader::Measure, "accumulate")?;
        let mut words_all: Vec<u32> = Vec::with_capacity(n_labels * W);
        let mut lo = 1;
        while lo <= n_labels {
            let hi = (lo + max_labels).min(n_labels + 1);
            let params = gpu.uniform(&Params {
                count: n as u32,
                nx: s[2] as u32,
                ny: s[1] as u32,
                z0: 0,
                y0: 0,
                label_lo: lo as u32,
                label_hi: hi as u32,
                scale,
            });
            let mut rec = gpu.recorder();
            let buffers = [&params, labels, values, &acc];
            rec.dispatch(&clear, &buffers, ((hi - lo) * W) as u64)?;
            rec.dispatch(&accumulate, &buffers, n as u64)?;
            rec.submit().await?;
            let raw = gpu.read(&acc, 4 * ((hi - lo) * W) as u64).await?;
            words_all.extend(
                raw.chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            );
            lo = hi;
        }
        Ok::<_, Error>(words_all)
    }
    .await;
    gpu.recycle(acc);
    Ok(outcome?
        .chunks_exact(W)
        .enumerate()
        .map(|(k, a)| region(k as u32 + 1, a, ndim, scale))
        .collect())
}

/// 2^k with |v| * 2^k < 2^48 for the largest |v|.
fn scale_for(vmax: f32) -> f32 {
    if vmax == 0.0 {
        return 1.0;
    }
    let e = vmax.log2().floor() as i32 + 1; // vmax < 2^e
    2f32.powi((47 - e).clamp(-126, 127))
}

fn words(a: &[u32]) -> f64 {
    a.iter()
        .rev()
        .fold(0.0, |acc, &w| acc * 4294967296.0 + f64::from(w))
}

fn region(label: u32, a: &[u32], ndim: usize, scale: f32) -> Region {
    let area = u64::from(a[0]);
    let axes = 3 - ndim..3;
    let scale = f64::from(scale);
    let isum = (words(&a[15..18]) - words(&a[18..21])) / scale;
    let wsum = |axis: usize| {
        words(&a[21 + 4 * axis..25 + 4 * axis]) - words(&a[33 + 4 * axis..37 + 4 * axis])
    };
    let ipos_neg = words(&a[15..18]) - words(&a[18..21]);
    Region {
        label,
        area,
        bbox_min: axes.clone().map(|x| a[1 + x] as usize).collect(),
        bbox_max: axes.clone().map(|x| a[4 + x] as usize + 1).collect(),
        centroid: axes
            .clone()
            .map(|x| words(&a[7 + 2 * x..9 + 2 * x]) / area as f64)
            .collect(),
        centroid_weighted: axes.map(|x| wsum(x) / ipos_neg).collect(),
        intensity_sum: isum,
        intensity_mean: isum / area as f64,
        intensity_min: f64::from(value_of(a[14])),
        intensity_max: f64::from(value_of(a[13])),
    }
}

fn value_of(k: u32) -> f32 {
    if k & 0x8000_0000 != 0 {
        f32::from_bits(k & 0x7fff_ffff)
    } else {
        f32::from_bits(!k)
    }
}

pub mod cpu;

#[cfg(test)]
mod wgsl_layouts {
    use super::*;
    use crate::layout::mirror_layout;

    mirror_layout!(
        params_matches_wgsl,
        Params,
        crate::shaders::MEASURE,
        "Params",
        [count, nx, ny, z0, y0, label_lo, label_hi, scale]
    );
}

//! The workshop's source finding: estimate the noise by kappa-sigma
//! clipping, keep pixels above a threshold derived from it, label the
//! connected regions and measure them.

use std::cell::RefCell;
use std::ops::Range;

use bytemuck::{Pod, Zeroable};

use crate::engine::Gpu;
use crate::error::{Error, Remedy, Result, Setting};
use crate::keys::Samples;
use crate::segment::host;
use crate::segment::label::{self, Labels};
use crate::segment::measure::{self, Region};
use crate::segment::threshold;
use crate::shaders::Shader;
use crate::stats::clip::{self, ClipOptions, ClipStats};
use crate::stream::{SliceSink, SliceSource};

/// How the threshold follows from the clipped statistics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Level {
    /// `image > median + nsigma * std` (the `--nsigma` of `threshold`).
    AboveMedian(f64),
    /// The workshop's `image > nsigma * std`.
    Workshop(f64),
}

impl Level {
    pub fn value(&self, stats: &ClipStats) -> Result<f64> {
        if stats.n_kept == 0 {
            return Err(Error::beyond(
                "the clipping kept no values (strict comparisons remove everything once the std is 0); \
                 astropy's inclusive bounds or a larger sigma keep some",
                &[Remedy::Set {
                    param: "workshop",
                    value: Setting::Off,
                }],
            ));
        }
        let (n, v) = match *self {
            Level::AboveMedian(n) => (n, stats.median + n * stats.std),
            Level::Workshop(n) => (n, n * stats.std),
        };
        if !n.is_finite() {
            return Err(Error::param(
                "nsigma",
                format!("{n} (give a finite number such as 5)"),
            ));
        }
        Ok(v)
    }
}

/// Everything the pipeline found.
#[derive(Clone, Debug)]
pub struct Sources {
    pub stats: ClipStats,
    pub threshold: f64,
    pub labels: Labels,
    pub regions: Vec<Region>,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(crate) struct ThresholdParams {
    pub(crate) count: u32,
    pub(crate) key_lo: u32,
    pub(crate) key_hi: u32,
    pub(crate) _pad: u32,
}

/// Clip, threshold, label and measure on the GPU. When the image fits one
/// binding (and the budget holds its 9 bytes per pixel) the chain stays on
/// the GPU: the image is uploaded once, the clipping rounds, the threshold,
/// the labelling and the measurements run on resident buffers, and only
/// the statistics, the labels and the per-region sums come back. Larger
/// images run step by step, each step in chunks.
pub async fn sources(
    gpu: &Gpu,
    data: &[f32],
    shape: &[usize],
    clip: &ClipOptions,
    level: Level,
    connectivity: usize,
) -> Result<Sources> {
    let s = label::check(data.len(), shape, connectivity)?;
    let n = data.len();
    let fits = (4 * n as u64) <= gpu.max_binding_size()
        && (9 * n as u64 + (1 << 20)) <= gpu.memory_budget();
    if !fits || n == 0 {
        return stepwise(gpu, data, shape, clip, level, connectivity).await;
    }
    if !data.iter().any(|v| v.is_finite()) {
        return Err(Error::InvalidInput(
            "no finite values to clip (the image is all NaN/inf)".into(),
        ));
    }
    let mut held: Vec<wgpu::Buffer> = Vec::new();
    let outcome = async {
        let data_buf = gpu.storage(4 * n as u64, "sources image").await?;
        held.push(data_buf.clone());
        gpu.upload(&data_buf, bytemuck::cast_slice(data));
        let stats = clip::clip_buffers(
            gpu,
            std::slice::from_ref(&data_buf),
            &[n],
            clip::initial_shift(data),
            clip,
        )
        .await?;
        let threshold = level.value(&stats)?;
        // Smallest key of a value above the threshold; none: nothing is.
        let key_lo = Samples::F32(&[])
            .key_above(threshold)
            .map_or(u32::MAX, |k| k as u32);
        let mask = gpu
            .storage(n.div_ceil(4) as u64 * 4, "sources mask")
            .await?;
        held.push(mask.clone());
        let parent = gpu.storage(4 * n as u64, "sources labels").await?;
        held.push(parent.clone());
        let plan = label::plan(gpu, s, connectivity);
        let scratch = label::Scratch::new(gpu, &plan).await?;
        held.push(scratch.aux.clone());
        held.push(scratch.roots.clone());
        let tparams = gpu.uniform(&ThresholdParams {
            count: n as u32,
            key_lo,
            key_hi: 0,
            _pad: 0,
        });
        let mut rec = gpu.recorder();
        rec.dispatch(
            &gpu.pipeline(Shader::Threshold, "threshold_f32")?,
            &[&tparams, &data_buf, &mask],
            (n as u64).div_ceil(4),
        )?;
        rec.submit().await?;
        label::record_label(gpu, &plan, &mask, &parent, &scratch).await?;
        let total = gpu
            .read_at(&scratch.aux, 4 * plan.n_blocks as u64, 4)
            .await?;
        let count = u32::from_le_bytes([total[0], total[1], total[2], total[3]]) as usize;
        let raw = gpu.read(&parent, 4 * n as u64).await?;
        let labels: Vec<i32> = raw
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        // Scale of the fixed-point sums: the largest |value| in a region.
        let mut vmax = 0f32;
        for (v, &l) in data.iter().zip(&labels) {
            if l != 0 {
                if !v.is_finite() {
                    return Err(Error::InvalidInput(format!(
                        "region {l} holds the value {v}; region sums need finite values"
                    )));
                }
                vmax = vmax.max(v.abs());
            }
        }
        let regions =
            measure::measure_resident(gpu, &parent, &data_buf, s, shape.len(), count, vmax).await?;
        Ok(Sources {
            stats,
            threshold,
            labels: Labels { labels, count },
            regions,
        })
    }
    .await;
    for b in held {
        gpu.recycle(b);
    }
    outcome
}

/// The chain step by step, each step chunked as it needs.
async fn stepwise(
    gpu: &Gpu,
    data: &[f32],
    shape: &[usize],
    clip: &ClipOptions,
    level: Level,
    connectivity: usize,
) -> Result<Sources> {
    let stats = if 4 * data.len() as u64 > gpu.memory_budget() {
        // The GPU's clipping holds the whole image: beyond the budget, the
        // streamed passes over its rows on the CPU (the CPU reference's
        // answer) instead.
        let plane = shape.last().copied().unwrap_or(1).max(1);
        let mut rows = clip::stream::InMemory { data, plane };
        let nz = data.len().div_ceil(plane);
        clip::stream::sigma_clipped_stats(&mut rows, nz, 1024, clip, &mut |_| {})?
    } else {
        clip::sigma_clipped_stats(gpu, data, None, clip).await?
    };
    let threshold = level.value(&stats)?;
    let mask = threshold::threshold_above(gpu, Samples::F32(data), threshold).await?;
    let labels = label::label(gpu, &mask, shape, connectivity).await?;
    let regions = measure::regionprops(gpu, &labels.labels, data, shape, labels.count).await?;
    Ok(Sources {
        stats,
        threshold,
        labels,
        regions,
    })
}

pub mod cpu;

/// What the streamed chain found (the labels went to the caller's sink).
#[derive(Clone, Debug)]
pub struct StreamedSources {
    pub stats: ClipStats,
    pub threshold: f64,
    pub count: usize,
    pub regions: Vec<Region>,
}

/// The chain on a float32 stack too large for memory, read slice by slice
/// from `data` (read several times): clipped statistics by streamed passes
/// ([`clip::stream`]), the threshold slab by slab, labels by
/// [`label::label_stream`] (slabs of at most `max_pixels` on the GPU,
/// provisional ids in `provisional`), and the measurements accumulated in
/// raster order as the final labels come back (and go to `labels`, if
/// given). Every step is its CPU reference's arithmetic, so the result
/// equals [`cpu::sources`] on the whole array.
#[allow(clippy::too_many_arguments)]
pub async fn sources_stream<D, P>(
    gpu: &Gpu,
    shape: &[usize],
    clip: &ClipOptions,
    level: Level,
    connectivity: usize,
    max_pixels: usize,
    data: &mut D,
    provisional: &mut P,
    labels: Option<&mut dyn SliceSink<i32>>,
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Result<StreamedSources>
where
    D: SliceSource<f32>,
    P: SliceSink<u32> + SliceSource<u32>,
{
    let n = shape.iter().try_fold(1usize, |a, &b| a.checked_mul(b));
    let s = label::check(n.unwrap_or(usize::MAX), shape, connectivity)?;
    let plane = s[1] * s[2];
    let max = max_pixels.min(label::max_box(gpu));
    let per = max / plane.max(1);
    if per == 0 {
        // Before the clipping's passes: the labelling could not run.
        return Err(label::slice_too_big(plane, max));
    }
    let stats = clip::stream::sigma_clipped_stats(data, s[0], per, clip, &mut |round| {
        progress("clip round", round as usize, 0)
    })?;
    let threshold = level.value(&stats)?;
    let data = RefCell::new(data);
    let mut mask = Above {
        data: &data,
        threshold,
        buf: Vec::new(),
    };
    let mut measure = Measure {
        data: &data,
        z: 0,
        plane,
        acc: host::Accumulator::new(shape),
        labels,
        buf: Vec::new(),
    };
    let count = label::label_stream(
        gpu,
        shape,
        connectivity,
        max_pixels,
        &mut mask,
        provisional,
        &mut measure,
        &mut |done, total| progress("label", done, total),
    )
    .await?;
    Ok(StreamedSources {
        stats,
        threshold,
        count,
        regions: measure.acc.finish(count),
    })
}

/// The mask `data > threshold`, slices on demand.
struct Above<'a, 'b, D> {
    data: &'a RefCell<&'b mut D>,
    threshold: f64,
    buf: Vec<f32>,
}

impl<D: SliceSource<f32>> SliceSource<bool> for Above<'_, '_, D> {
    fn read(&mut self, z: Range<usize>, out: &mut Vec<bool>) -> Result<()> {
        self.buf.clear();
        self.data.borrow_mut().read(z, &mut self.buf)?;
        host::above(&self.buf, self.threshold, out)
    }
}

/// Receives the final labels in order: measures them against the same
/// slices of `data` and passes them on.
struct Measure<'a, 'b, 'c, D> {
    data: &'a RefCell<&'b mut D>,
    z: usize,
    plane: usize,
    acc: host::Accumulator,
    labels: Option<&'c mut dyn SliceSink<i32>>,
    buf: Vec<f32>,
}

impl<D: SliceSource<f32>> SliceSink<i32> for Measure<'_, '_, '_, D> {
    fn write(&mut self, slices: &[i32]) -> Result<()> {
        let nz = slices.len() / self.plane.max(1);
        self.buf.clear();
        self.data
            .borrow_mut()
            .read(self.z..self.z + nz, &mut self.buf)?;
        self.acc.add(slices, &self.buf)?;
        self.z += nz;
        match self.labels.as_mut() {
            Some(sink) => sink.write(slices),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod wgsl_layouts {
    use super::*;
    use crate::layout::mirror_layout;

    mirror_layout!(
        threshold_params_matches_wgsl,
        ThresholdParams,
        crate::shaders::THRESHOLD,
        "Params",
        [count, key_lo, key_hi, _pad]
    );
}

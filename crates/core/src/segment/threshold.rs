//! `image > value` as a boolean mask, exact for every dtype (comparisons are
//! made on ordered integer keys, never on values rounded to f32).

use bytemuck::{Pod, Zeroable};

use crate::engine::Gpu;
use crate::error::{Error, Result};
use crate::keys::{Keys, Samples};
use crate::shaders::Shader;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    count: u32,
    key_lo: u32,
    key_hi: u32,
    _pad: u32,
}

pub(super) fn check_value(value: f64) -> Result<()> {
    if value.is_nan() {
        return Err(Error::param("threshold", "NaN (give a number)"));
    }
    Ok(())
}

/// The mask `samples > value` computed on the GPU, in chunks that fit the
/// device's binding limit. NaN samples are never above.
pub async fn threshold_above(gpu: &Gpu, samples: Samples<'_>, value: f64) -> Result<Vec<bool>> {
    check_value(value)?;
    let n = samples.len();
    let Some(key) = samples.key_above(value) else {
        return Ok(vec![false; n]);
    };
    let wide = matches!(samples, Samples::U64(_) | Samples::I64(_) | Samples::F64(_));
    let key_bytes = if wide { 8 } else { 4 };
    // Input keys and the packed mask (a quarter of a 32-bit key) per chunk;
    // chunks are multiples of 4 elements so mask words never straddle two.
    let per_element = key_bytes + 1;
    let max = (gpu.max_binding_size() / key_bytes)
        .min(gpu.memory_budget() / per_element)
        .max(4) as usize
        & !3;
    let entry = if wide { "threshold64" } else { "threshold32" };
    let pipeline = gpu.pipeline(Shader::Threshold, entry)?;
    let chunk = max.min(n.max(4));
    let keys_buf = gpu
        .storage((chunk as u64) * key_bytes, "threshold input")
        .await?;
    let mask_buf = match gpu.storage(chunk as u64, "threshold mask").await {
        Ok(b) => b,
        Err(e) => {
            gpu.recycle(keys_buf);
            return Err(e);
        }
    };
    let mut mask = Vec::with_capacity(n);
    let outcome = async {
        let mut start = 0;
        while start < n {
            let end = (start + chunk).min(n);
            match samples.keys(start..end) {
                Keys::K32(k) => gpu.upload(&keys_buf, bytemuck::cast_slice(&k)),
                Keys::K64(k) => gpu.upload(&keys_buf, bytemuck::cast_slice(&k)),
            }
            let count = (end - start) as u32;
            let params = gpu.uniform(&Params {
                count,
                key_lo: key as u32,
                key_hi: (key >> 32) as u32,
                _pad: 0,
            });
            let mut rec = gpu.recorder();
            rec.dispatch(
                &pipeline,
                &[&params, &keys_buf, &mask_buf],
                u64::from(count).div_ceil(4),
            )?;
            rec.submit().await?;
            let bytes = gpu.read(&mask_buf, u64::from(count)).await?;
            mask.extend(bytes.iter().map(|&b| b != 0));
            start = end;
        }
        Ok::<_, Error>(())
    }
    .await;
    gpu.recycle(keys_buf);
    gpu.recycle(mask_buf);
    outcome.map(|()| mask)
}

pub mod cpu;

#[cfg(test)]
mod wgsl_layouts {
    use super::*;
    use crate::layout::mirror_layout;

    mirror_layout!(
        params_matches_wgsl,
        Params,
        crate::shaders::THRESHOLD,
        "Params",
        [count, key_lo, key_hi, _pad]
    );
}

//! The Lab conversion of 8-bit RGB on the GPU (shaders/slic/lab.wgsl).

use bytemuck::{Pod, Zeroable};

use super::Buffers;
use crate::engine::{Gpu, Recorder};
use crate::error::{Error, Result};
use crate::keys::Samples;
use crate::shaders::Shader;
use crate::slic::host::Prepared;

/// shaders/slic/lab.wgsl's parameters.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct LabParams {
    n: u32,
    ratio: f32,
    pad: [u32; 2],
    linear: [f32; 256],
}

/// Records shaders/slic/lab.wgsl over `n` pixels: `rgb` (3 bytes a pixel)
/// to `features` (3 floats a pixel), each byte's gamma expansion from
/// `table`.
pub(super) fn record_lab(
    gpu: &Gpu,
    rec: &mut Recorder<'_>,
    table: &[f32],
    ratio: f32,
    n: usize,
    rgb: &wgpu::Buffer,
    features: &wgpu::Buffer,
) -> Result<()> {
    let linear: [f32; 256] = table
        .try_into()
        .map_err(|_| Error::Device("the gamma table needs 256 values".into()))?;
    let params = gpu.uniform(&LabParams {
        n: n as u32,
        ratio,
        pad: [0; 2],
        linear,
    });
    let lab = gpu.pipeline(Shader::SlicLab, "lab")?;
    rec.dispatch(&lab, &[&params, rgb, features], n as u64)
}

/// The bytes of 8-bit samples.
pub(in crate::slic) fn byte_samples<'a>(samples: Samples<'a>) -> Option<&'a [u8]> {
    match samples {
        Samples::U8(v) => Some(v),
        Samples::I8(v) => Some(bytemuck::cast_slice(v)),
        _ => None,
    }
}

/// Records shaders/slic/lab.wgsl over 8-bit RGB `bytes` and reads the
/// features back ([`super::lab_features`]).
pub(in crate::slic) async fn lab_features(
    gpu: &Gpu,
    prep: &Prepared,
    table: &[f32],
    bytes: &[u8],
) -> Result<Vec<f32>> {
    let n = prep.n();
    let mut bufs = Buffers {
        gpu,
        list: Vec::new(),
    };
    let rgb = bufs
        .get(4 * (bytes.len() as u64).div_ceil(4), "slic 8-bit RGB")
        .await?;
    let features = bufs.get(12 * n as u64, "slic features").await?;
    let mut padded = bytes.to_vec();
    padded.resize(bytes.len().div_ceil(4) * 4, 0);
    gpu.upload(&rgb, &padded);
    let mut rec = gpu.recorder();
    record_lab(gpu, &mut rec, table, prep.ratio, n, &rgb, &features)?;
    rec.submit().await?;
    gpu.read_vec::<f32>(&features, 3 * n).await
}

#[cfg(test)]
mod wgsl_layouts {
    use super::*;
    use crate::layout::mirror_layout;

    mirror_layout!(
        lab_params_matches_wgsl,
        LabParams,
        crate::shaders::SLIC_LAB,
        "Params",
        [n, ratio, pad, linear]
    );
}

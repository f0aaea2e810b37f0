//! What a plain WGSL copy reaches on the device: the floor that the
//! memory-bound kernels (median 3x3, the Gaussian's passes) are measured
//! against, in f32 words or vec4 words, one or several per invocation
//! (`gpuscope bench`, workloads copy-2048-*).

use bytemuck::{Pod, Zeroable};

use crate::chunk::Shape3;
use crate::engine::{Gpu, Module, Recorder};
use crate::error::{Error, Result};
use crate::shaders::{self, Shader};
use crate::stream::{self, StreamSpec};

/// The width of one access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    F32,
    Vec4,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    count: u32,
    _pad: [u32; 3],
}

/// The copy shader with vec4 words.
pub(crate) fn vec4_source() -> String {
    shaders::COPY.replace("alias Word = f32;", "alias Word = vec4<f32>;")
}

fn module(gpu: &Gpu, width: Width) -> Result<Module> {
    match width {
        Width::F32 => Ok(Shader::Copy.into()),
        Width::Vec4 => gpu.generated("copy vec4".into(), vec4_source),
    }
}

fn check(len: usize, width: Width, per_thread: u32) -> Result<usize> {
    let words = match width {
        Width::F32 => len,
        Width::Vec4 if len.is_multiple_of(4) => len / 4,
        Width::Vec4 => {
            return Err(Error::InvalidInput(format!(
                "{len} values do not make whole vec4 words"
            )));
        }
    };
    if !(1..=64).contains(&per_thread) {
        return Err(Error::InvalidInput(format!(
            "{per_thread} words per invocation (use 1 to 64)"
        )));
    }
    Ok(words)
}

/// Records the copy of `words` words from `src` to `dst`.
fn record(
    gpu: &Gpu,
    rec: &mut Recorder<'_>,
    module: Module,
    words: usize,
    per_thread: u32,
    src: &wgpu::Buffer,
    dst: &wgpu::Buffer,
) -> Result<()> {
    let pipeline = gpu.pipeline_with(module, "copy", &[("PER_THREAD", f64::from(per_thread))])?;
    let params = gpu.uniform(&Params {
        count: words as u32,
        _pad: [0; 3],
    });
    rec.dispatch(
        &pipeline,
        &[&params, src, dst],
        (words as u64).div_ceil(u64::from(per_thread)),
    )
}

/// GPU time of copying `data` once on the device (min over batches of
/// `repeats`, in ms); `None` without timestamp queries.
pub async fn copy_ms(
    gpu: &Gpu,
    data: &[f32],
    width: Width,
    per_thread: u32,
    repeats: usize,
) -> Result<Option<f64>> {
    let words = check(data.len(), width, per_thread)?;
    let module = module(gpu, width)?;
    let spec = StreamSpec {
        shape: [1, 1, data.len()] as Shape3,
        halo: [0; 3],
        mode: crate::boundary::Mode::Constant,
        cval: 0f32,
    };
    let kernel = |rec: &mut Recorder<'_>,
                  src: &wgpu::Buffer,
                  dst: &wgpu::Buffer,
                  _: &crate::chunk::Chunk|
     -> Result<bool> {
        record(gpu, rec, module, words, per_thread, src, dst)?;
        Ok(true)
    };
    let ns = stream::time_resident(gpu, spec, data, &kernel, repeats).await?;
    Ok(ns.map(|ns| ns as f64 / 1e6))
}

/// `data` copied on the device and read back: what tests check the copy
/// kernels with.
pub async fn copy(gpu: &Gpu, data: &[f32], width: Width, per_thread: u32) -> Result<Vec<f32>> {
    let words = check(data.len(), width, per_thread)?;
    let module = module(gpu, width)?;
    let bytes = 4 * data.len() as u64;
    let src = gpu.storage(bytes, "copy source").await?;
    let dst = match gpu.storage(bytes, "copy destination").await {
        Ok(b) => b,
        Err(e) => {
            gpu.recycle(src);
            return Err(e);
        }
    };
    let outcome = async {
        gpu.upload(&src, bytemuck::cast_slice(data));
        let mut rec = gpu.recorder();
        record(gpu, &mut rec, module, words, per_thread, &src, &dst)?;
        rec.submit().await?;
        gpu.read_vec(&dst, data.len()).await
    }
    .await;
    gpu.recycle(src);
    gpu.recycle(dst);
    outcome
}

//! The k-means on volumes beyond the memory budget: the volume stays on
//! the host and every iteration streams it through one set of slab
//! buffers.

use super::cells::{BIN_THREADS, Cells};
use super::{Buffers, gpu_centres, gpu_stride, kparams, mask_bits, maxdist_buffer, slab_params};
use crate::engine::Gpu;
use crate::error::{Error, Remedy, Result};
use crate::shaders::Shader;
use crate::slic::host::{self, Prepared};
use crate::slic::{NONE, Segments};

/// The k-means with the volume kept on the host: each iteration streams
/// z-slabs sized from the memory budget through one set of slab buffers
/// (features and current labels up, labels down); the centres and their
/// sums stay on the device. The connectivity step then runs on the host.
/// A masked image runs its position-only pass first and assigns through
/// the cells of its free seeds (gpu/cells.rs), as the resident path does.
pub(in crate::slic) async fn run_streamed(gpu: &Gpu, prep: &Prepared) -> Result<Segments> {
    let n = prep.n();
    let k = prep.n_centres();
    let nc = prep.nc;
    let plane = prep.dims[1] * prep.dims[2];
    let per_pixel = 4 * nc as u64 + 4 + 1;
    let budget = (gpu.memory_budget() / 2).min(gpu.max_binding_size() / (4 * nc as u64) * 4);
    let depth = ((budget / per_pixel) as usize / plane).min(prep.dims[0]);
    if depth == 0 {
        return Err(Error::beyond(
            format!(
                "one {}x{} plane does not fit the memory budget of {} bytes",
                prep.dims[1],
                prep.dims[2],
                gpu.memory_budget()
            ),
            &[Remedy::LargerBudget, Remedy::UseCpu],
        ));
    }
    let mut bufs = Buffers {
        gpu,
        list: Vec::new(),
    };
    let m_max = depth * plane;
    let stride = 1 + 2 * (3 + nc);
    let centres = bufs
        .get(4 * (k * gpu_stride(nc)) as u64, "slic centres")
        .await?;
    let accum = bufs.get(4 * (k * stride) as u64, "slic sums").await?;
    let maxdist = maxdist_buffer(gpu, &mut bufs, prep).await?;
    // [iteration (finalize counts it up), min key, max key, NaN/inf flags,
    // change flag of iteration 0]: reset before every iteration.
    let changed = bufs.get(20, "slic change flag").await?;
    let features = bufs.get(4 * (m_max * nc) as u64, "slic features").await?;
    let labels = bufs.get(4 * m_max as u64, "slic labels").await?;
    let mask = bufs.get(4 * m_max.div_ceil(32) as u64, "slic mask").await?;
    gpu.upload(&centres, bytemuck::cast_slice(&gpu_centres(prep)));
    let kp = kparams(prep);
    let slabs: Vec<(usize, usize)> = (0..prep.dims[0])
        .step_by(depth)
        .map(|z0| (z0, depth.min(prep.dims[0] - z0) * plane))
        .collect();
    let uniforms: Vec<wgpu::Buffer> = slabs
        .iter()
        .map(|&(z0, m)| gpu.uniform(&slab_params(&kp, z0, m)))
        .collect();
    let bound = |i: usize| -> [wgpu::Buffer; 8] {
        [
            &uniforms[i],
            &features,
            &centres,
            &labels,
            &accum,
            &maxdist,
            &mask,
            &changed,
        ]
        .map(|b| b.clone())
    };
    // Uploads slab i's features, labels and mask bits.
    let load = |i: usize, host: &[u32]| {
        let (z0, m) = slabs[i];
        let lo = z0 * plane;
        gpu.upload(
            &features,
            bytemuck::cast_slice(&prep.features[lo * nc..(lo + m) * nc]),
        );
        gpu.upload(&labels, bytemuck::cast_slice(&host[lo..lo + m]));
        if let Some(mk) = &prep.mask {
            gpu.upload(&mask, bytemuck::cast_slice(&mask_bits(&mk[lo..lo + m])));
        }
    };
    let assign = gpu.pipeline(Shader::SlicKmeans, "assign")?;
    let accumulate = gpu.pipeline(Shader::SlicKmeans, "accumulate")?;
    let finalize = gpu.pipeline(Shader::SlicKmeans, "finalize")?;
    let colour_max = gpu.pipeline(Shader::SlicKmeans, "colour_max")?;
    let init = gpu.pipeline(Shader::SlicKmeans, "init")?;
    let cells = match prep.free_seeds {
        Some(_) => Some(Cells::new(gpu, prep, &mut bufs).await?),
        None => None,
    };
    {
        // Sums to 0 (the slab's labels are uploaded before every use).
        let b = bound(0);
        let refs: Vec<&wgpu::Buffer> = b.iter().collect();
        let mut rec = gpu.recorder();
        rec.dispatch(&init, &refs, (k * stride).max(slabs[0].1) as u64)?;
        rec.submit().await?;
    }
    let mut host = vec![NONE; n];
    let mut iterations = 0;
    // A masked image: skimage's position-only pass, then the full one.
    let passes: &[bool] = if cells.is_some() {
        &[false, true]
    } else {
        &[true]
    };
    for &colour in passes {
        host.fill(NONE);
        iterations = 0;
        for _ in 0..prep.max_num_iter {
            gpu.upload(&changed, &[0u8; 20]);
            if let Some(c) = &cells {
                let b = c.bind(&bound(0));
                let refs: Vec<&wgpu::Buffer> = b.iter().collect();
                let mut rec = gpu.recorder();
                rec.dispatch(&c.bin, &refs, BIN_THREADS)?;
                rec.submit().await?;
            }
            for (i, &(z0, m)) in slabs.iter().enumerate() {
                load(i, &host);
                let b = bound(i);
                let refs: Vec<&wgpu::Buffer> = b.iter().collect();
                let mut rec = gpu.recorder();
                match &cells {
                    Some(c) => {
                        let with_cells = c.bind(&b);
                        let cell_refs: Vec<&wgpu::Buffer> = with_cells.iter().collect();
                        rec.dispatch(c.assign(colour), &cell_refs, m as u64)?;
                    }
                    None => rec.dispatch(&assign, &refs, m as u64)?,
                }
                rec.dispatch(&accumulate, &refs, m as u64)?;
                rec.submit().await?;
                let got: Vec<u32> = gpu.read_vec(&labels, m).await?;
                host[z0 * plane..z0 * plane + m].copy_from_slice(&got);
            }
            let b = bound(0);
            let refs: Vec<&wgpu::Buffer> = b.iter().collect();
            let mut rec = gpu.recorder();
            rec.dispatch(&finalize, &refs, k as u64)?;
            rec.submit().await?;
            if prep.slic_zero && colour {
                for (i, &(_, m)) in slabs.iter().enumerate() {
                    load(i, &host);
                    let b = bound(i);
                    let refs: Vec<&wgpu::Buffer> = b.iter().collect();
                    let mut rec = gpu.recorder();
                    rec.dispatch(&colour_max, &refs, m as u64)?;
                    rec.submit().await?;
                }
            }
            iterations += 1;
            if gpu.read(&changed, 20).await?[16..] == [0u8; 4] {
                break;
            }
        }
    }
    Ok(host::segments(host, prep, iterations))
}

//! The k-means assignment of a masked image (shaders/slic/cells.wgsl):
//! its seeds (scikit-image's, from k-means of the mask's coordinates) lie
//! anywhere, so each iteration bins the live centres into cells of the
//! window step and a pixel searches the cells its windows can reach. The
//! accumulation and the means are kmeans.wgsl's, as without a mask.

use super::{Batches, Buffers, Kernels, Resident};
use crate::engine::{Gpu, Recorder};
use crate::error::Result;
use crate::shaders::Shader;
use crate::slic::host::Prepared;

/// cells.wgsl's kernels and the two buffers they add to kmeans.wgsl's
/// bindings (8: the cell table, 9: the centres cell by cell).
pub(in crate::slic) struct Cells {
    pub bin: wgpu::ComputePipeline,
    /// skimage's full assignment (distance with colour).
    pub assign: wgpu::ComputePipeline,
    /// skimage's position-only first pass (`ignore_color`).
    pub assign_spatial: wgpu::ComputePipeline,
    pub table: wgpu::Buffer,
    pub members: wgpu::Buffer,
}

impl Cells {
    pub async fn new(gpu: &Gpu, prep: &Prepared, bufs: &mut Buffers<'_>) -> Result<Cells> {
        let total: usize = prep.cells.iter().product();
        let k = |entry| gpu.pipeline(Shader::SlicCells, entry);
        Ok(Cells {
            bin: k("bin_centres")?,
            assign: k("assign_cells")?,
            assign_spatial: k("assign_cells_spatial")?,
            table: bufs.get(4 * (2 * total + 1) as u64, "slic cells").await?,
            members: bufs
                .get(4 * prep.n_centres() as u64, "slic centres by cell")
                .await?,
        })
    }

    /// A slab's k-means bindings with the cell table and members after.
    pub fn bind(&self, kmeans: &[wgpu::Buffer; 8]) -> [wgpu::Buffer; 10] {
        let [a, b, c, d, e, f, g, h] = kmeans.clone();
        [
            a,
            b,
            c,
            d,
            e,
            f,
            g,
            h,
            self.table.clone(),
            self.members.clone(),
        ]
    }

    /// The assignment kernel of a pass.
    pub fn assign(&self, colour: bool) -> &wgpu::ComputePipeline {
        if colour {
            &self.assign
        } else {
            &self.assign_spatial
        }
    }
}

/// Threads of `bin_centres`: one workgroup.
pub(in crate::slic) const BIN_THREADS: u64 = 256;

/// A masked image's cell kernels, their bindings per slab, and whether
/// the pass's distance has colour.
pub(super) type Masked<'a> = Option<(&'a Cells, &'a [Vec<&'a wgpu::Buffer>], bool)>;

/// The first batch of a masked image's second pass: the change flags
/// to 0, every label to NONE (so its first iteration counts as a
/// change, as the first pass's did), then `count` iterations.
pub(super) fn restart<'a>(
    batches: &Batches<'a>,
    r: &Resident,
    refs: &[Vec<&wgpu::Buffer>],
    kernels: &Kernels,
    prep: &Prepared,
    count: usize,
) -> Result<Recorder<'a>> {
    batches.gpu.upload_at(batches.changed, 0, &[0u8; 4]);
    batches
        .gpu
        .upload_at(batches.changed, 16, &vec![0u8; 4 * count]);
    let mut rec = batches.gpu.recorder();
    let stride = 1 + 2 * (3 + prep.nc);
    for (s, refs) in r.slabs.iter().zip(refs) {
        let threads = s.n.max(prep.n_centres() * stride) as u64;
        rec.dispatch(&kernels.init, refs, threads)?;
    }
    rec.dispatch_repeated(batches.steps, count as u32)?;
    Ok(rec)
}

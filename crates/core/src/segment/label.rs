//! Connected-component labelling with scipy.ndimage.label's answer: int32
//! labels 1..n numbered in raster order of each component's first pixel,
//! background 0, for 1-D to 3-D masks and every connectivity.
//!
//! The GPU labels one box (the whole array, or a slab along the slowest
//! axis when it exceeds one binding or the memory budget) with union-find
//! (shaders/segment/label.wgsl). Slabs are then merged on the host: pixels
//! that touch across a slab border unite their components, and as each
//! slab's labels are already in raster order, the smallest slab-global id of
//! a merged component is its first pixel, so ranking the surviving ids gives
//! scipy's numbering again.

use bytemuck::{Pod, Zeroable};

use crate::chunk::{Shape3, shape3};
use crate::engine::Gpu;
use crate::error::{Error, Result};
use crate::keys::Samples;
use crate::shaders;

/// Labels and their number, as `scipy.ndimage.label` returns them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Labels {
    pub labels: Vec<i32>,
    pub count: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    nx: u32,
    ny: u32,
    nz: u32,
    count: u32,
    connectivity: u32,
    n_blocks: u32,
    tile: [u32; 3],
    tiles: [u32; 3],
    _pad: [u32; 4],
}

/// The kernels' parameters for a box of shape `s`: 256-pixel tiles
/// (x, y, z extents) shaped for the dimensionality, and the block count of
/// the ranking kernels.
pub(crate) struct Plan {
    pub params: wgpu::Buffer,
    pub n: usize,
    pub n_blocks: usize,
    pub n_tiles: usize,
}

pub(crate) fn plan(gpu: &Gpu, s: Shape3, connectivity: usize) -> Plan {
    let n = s.iter().product::<usize>();
    let tile = if s[0] > 1 {
        [8, 8, 4]
    } else if s[1] > 1 {
        [32, 8, 1]
    } else {
        [256, 1, 1]
    };
    let tiles = [
        s[2].div_ceil(tile[0]),
        s[1].div_ceil(tile[1]),
        s[0].div_ceil(tile[2]),
    ];
    let n_blocks = n.div_ceil(BLOCK);
    let params = gpu.uniform(&Params {
        nx: s[2] as u32,
        ny: s[1] as u32,
        nz: s[0] as u32,
        count: n as u32,
        connectivity: connectivity as u32,
        n_blocks: n_blocks as u32,
        tile: tile.map(|v| v as u32),
        tiles: tiles.map(|v| v as u32),
        _pad: [0; 4],
    });
    Plan {
        params,
        n,
        n_blocks,
        n_tiles: tiles.iter().product(),
    }
}

const BLOCK: usize = 1024;

/// Checks the shape against the data and the connectivity against the
/// dimensions (scikit-image's meaning: 1 = faces, ndim = full).
pub(crate) fn check(len: usize, shape: &[usize], connectivity: usize) -> Result<Shape3> {
    let s = shape3(shape)?;
    let n: Option<usize> = s.iter().try_fold(1usize, |a, &b| a.checked_mul(b));
    if n != Some(len) {
        return Err(Error::InvalidInput(format!(
            "shape {shape:?} does not match the {len} values given"
        )));
    }
    if connectivity < 1 || connectivity > shape.len() {
        return Err(Error::param(
            "connectivity",
            format!(
                "{connectivity} for a {}-D array (use 1 for faces only, as scipy's default, up to {} for full connectivity)",
                shape.len(),
                shape.len()
            ),
        ));
    }
    Ok(s)
}

/// Foreground as scipy (non-zero) or scikit-image (`!= background`): NaN is
/// foreground, as it is non-zero in numpy.
pub fn foreground(samples: Samples<'_>, background: f64) -> Vec<bool> {
    fn ne<T: Copy + Into<f64>>(v: &[T], b: f64) -> Vec<bool> {
        v.iter().map(|&x| x.into() != b).collect()
    }
    match samples {
        Samples::U8(v) => ne(v, background),
        Samples::I8(v) => ne(v, background),
        Samples::U16(v) => ne(v, background),
        Samples::I16(v) => ne(v, background),
        Samples::U32(v) => ne(v, background),
        Samples::I32(v) => ne(v, background),
        Samples::F32(v) => ne(v, background),
        Samples::F64(v) => ne(v, background),
        // Exact for 64-bit integers: compare as integers when the background is one.
        Samples::U64(v) => v
            .iter()
            .map(|&x| background.fract() != 0.0 || (x as i128) != background as i128)
            .collect(),
        Samples::I64(v) => v
            .iter()
            .map(|&x| background.fract() != 0.0 || (x as i128) != background as i128)
            .collect(),
    }
}

/// Backward neighbour offsets (dz, dy, dx) of a connectivity: the
/// lexicographically negative half of the structure.
fn backward_offsets(connectivity: usize) -> Vec<[i64; 3]> {
    let mut v = Vec::new();
    for dz in -1i64..=1 {
        for dy in -1i64..=1 {
            for dx in -1i64..=1 {
                let nonzero = [dz, dy, dx].iter().filter(|&&d| d != 0).count();
                if [dz, dy, dx] < [0, 0, 0] && nonzero <= connectivity {
                    v.push([dz, dy, dx]);
                }
            }
        }
    }
    v
}

/// Labels `mask` (true = foreground) of `shape` on the GPU.
pub async fn label(
    gpu: &Gpu,
    mask: &[bool],
    shape: &[usize],
    connectivity: usize,
) -> Result<Labels> {
    let s = check(mask.len(), shape, connectivity)?;
    let n = mask.len();
    if n == 0 {
        return Ok(Labels {
            labels: Vec::new(),
            count: 0,
        });
    }
    // Parent (4 bytes) + mask (1 byte) per pixel; indices keep bit 31 free.
    let max = (gpu.max_binding_size() / 4)
        .min(gpu.memory_budget() / 5)
        .min(1 << 31) as usize;
    // Split the slowest axis longer than one (2-D: rows, 3-D: planes).
    let axis = (0..3).find(|&a| s[a] > 1).unwrap_or(2);
    let plane: usize = s[axis + 1..].iter().product();
    if n <= max {
        return label_box(gpu, mask, s, connectivity).await;
    }
    let per = max / plane;
    if per == 0 {
        return Err(Error::InvalidInput(format!(
            "one slice of {plane} pixels does not fit the device's binding limit of {max} labels; \
             use --cpu or a device with larger bindings"
        )));
    }
    let mut labels = Vec::with_capacity(n);
    let mut slabs = Vec::new(); // (first index along axis, global id offset)
    let mut offset = 0usize;
    let mut lo = 0;
    while lo < s[axis] {
        let hi = (lo + per).min(s[axis]);
        let mut sub = s;
        sub[axis] = hi - lo;
        let part = label_box(gpu, &mask[lo * plane..hi * plane], sub, connectivity).await?;
        labels.extend(
            part.labels
                .iter()
                .map(|&l| if l == 0 { 0 } else { l + offset as i32 }),
        );
        slabs.push(lo);
        offset += part.count;
        if offset > i32::MAX as usize {
            return Err(too_many());
        }
        lo = hi;
    }
    merge_slabs(&mut labels, mask, s, axis, &slabs, offset, connectivity)?;
    let count = labels.iter().fold(0, |m, &l| m.max(l)) as usize;
    Ok(Labels { labels, count })
}

fn too_many() -> Error {
    Error::InvalidInput("more than 2^31-1 components do not fit int32 labels".into())
}

/// Unites components that touch across slab borders (ids are slab-global,
/// 1..=ids) and renumbers them by the rank of their smallest id.
fn merge_slabs(
    labels: &mut [i32],
    mask: &[bool],
    s: Shape3,
    axis: usize,
    slabs: &[usize],
    ids: usize,
    connectivity: usize,
) -> Result<()> {
    let mut parent: Vec<u32> = (0..=ids as u32).collect();
    fn find(p: &mut [u32], mut x: u32) -> u32 {
        while p[x as usize] != x {
            let up = p[p[x as usize] as usize];
            p[x as usize] = up;
            x = up;
        }
        x
    }
    let offsets: Vec<[i64; 3]> = backward_offsets(connectivity)
        .into_iter()
        .filter(|d| d[axis] == -1)
        .collect();
    let index = |c: [i64; 3]| ((c[0] as usize * s[1]) + c[1] as usize) * s[2] + c[2] as usize;
    for &border in &slabs[1..] {
        // Every pixel of the slab's first slice and its neighbours in the
        // previous slab's last slice.
        let mut lo = [0usize; 3];
        let mut hi = s;
        lo[axis] = border;
        hi[axis] = border + 1;
        for z in lo[0]..hi[0] {
            for y in lo[1]..hi[1] {
                for x in lo[2]..hi[2] {
                    let c = [z as i64, y as i64, x as i64];
                    let i = index(c);
                    if !mask[i] {
                        continue;
                    }
                    for d in &offsets {
                        let q = [c[0] + d[0], c[1] + d[1], c[2] + d[2]];
                        if (0..3).any(|a| q[a] < 0 || q[a] >= s[a] as i64) {
                            continue;
                        }
                        let j = index(q);
                        if mask[j] {
                            let a = find(&mut parent, labels[i] as u32);
                            let b = find(&mut parent, labels[j] as u32);
                            // The smaller id (earlier first pixel) stays the root.
                            let (lo, hi) = (a.min(b), a.max(b));
                            parent[hi as usize] = lo;
                        }
                    }
                }
            }
        }
    }
    let mut rank = vec![0i32; ids + 1];
    let mut next = 0i32;
    for id in 1..=ids as u32 {
        let r = find(&mut parent, id);
        if r == id {
            next += 1;
            rank[id as usize] = next;
        } else {
            rank[id as usize] = rank[r as usize];
        }
    }
    for l in labels.iter_mut() {
        *l = rank[*l as usize];
    }
    Ok(())
}

/// Labels one box that fits a binding, on the GPU.
async fn label_box(gpu: &Gpu, mask: &[bool], s: Shape3, connectivity: usize) -> Result<Labels> {
    let n = mask.len();
    let mut bytes: Vec<u8> = mask.iter().map(|&m| u8::from(m)).collect();
    bytes.resize(n.div_ceil(4) * 4, 0);
    let n_blocks = n.div_ceil(BLOCK);
    let mask_buf = gpu.storage(bytes.len() as u64, "label mask").await?;
    let parent = match gpu.storage(4 * n as u64, "labels").await {
        Ok(b) => b,
        Err(e) => {
            gpu.recycle(mask_buf);
            return Err(e);
        }
    };
    let blocks = match gpu.storage(4 * (n_blocks as u64 + 1), "label blocks").await {
        Ok(b) => b,
        Err(e) => {
            gpu.recycle(mask_buf);
            gpu.recycle(parent);
            return Err(e);
        }
    };
    gpu.upload(&mask_buf, &bytes);
    let outcome = async {
        let plan = plan(gpu, s, connectivity);
        record_label(gpu, &plan, &mask_buf, &parent, &blocks).await?;
        let raw = gpu.read(&parent, 4 * n as u64).await?;
        let total = gpu.read_at(&blocks, 4 * n_blocks as u64, 4).await?;
        let labels: Vec<i32> = raw
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let count = u32::from_le_bytes([total[0], total[1], total[2], total[3]]) as usize;
        Ok::<_, Error>(Labels { labels, count })
    }
    .await;
    gpu.recycle(mask_buf);
    gpu.recycle(parent);
    gpu.recycle(blocks);
    outcome
}

/// Records and submits the labelling kernels on buffers already on the GPU:
/// `parent` receives the labels, `blocks[n_blocks]` their number.
pub(crate) async fn record_label(
    gpu: &Gpu,
    plan: &Plan,
    mask: &wgpu::Buffer,
    parent: &wgpu::Buffer,
    blocks: &wgpu::Buffer,
) -> Result<()> {
    let mut rec = gpu.recorder();
    dispatch_label(&mut rec, gpu, plan, mask, parent, blocks)?;
    rec.submit().await
}

/// Records the labelling kernels into `rec` (callers chaining more work
/// into one submission, such as spot finding).
pub(crate) fn dispatch_label(
    rec: &mut crate::engine::Recorder<'_>,
    gpu: &Gpu,
    plan: &Plan,
    mask: &wgpu::Buffer,
    parent: &wgpu::Buffer,
    blocks: &wgpu::Buffer,
) -> Result<()> {
    let three = [&plan.params, mask, parent];
    let four = [&plan.params, mask, parent, blocks];
    let per_pixel = plan.n as u64;
    let per_block = plan.n_blocks as u64 * 256;
    for (entry, buffers, threads) in [
        ("local_merge", &three[..], plan.n_tiles as u64 * 256),
        ("border_merge", &three[..], per_pixel),
        ("flatten", &three[..], per_pixel),
        ("count_roots", &four[..], per_block),
        ("scan_blocks", &four[..], 256),
        ("rank_roots", &four[..], per_block),
        ("gather", &three[..], per_pixel),
    ] {
        let pipeline = gpu.pipeline(shaders::LABEL, entry)?;
        rec.dispatch(&pipeline, buffers, threads)?;
    }
    Ok(())
}

pub mod cpu {
    //! CPU reference: flood fill from each unlabelled foreground pixel in
    //! raster order, which numbers components exactly as scipy does.
    use super::*;

    pub fn label(mask: &[bool], shape: &[usize], connectivity: usize) -> Result<Labels> {
        let s = check(mask.len(), shape, connectivity)?;
        let mut offsets = backward_offsets(connectivity);
        // Both halves of the structure.
        let forward: Vec<[i64; 3]> = offsets.iter().map(|d| d.map(|v| -v)).collect();
        offsets.extend(forward);
        let mut labels = vec![0i32; mask.len()];
        let mut count = 0usize;
        let mut stack = Vec::new();
        for start in 0..mask.len() {
            if !mask[start] || labels[start] != 0 {
                continue;
            }
            count += 1;
            if count > i32::MAX as usize {
                return Err(too_many());
            }
            labels[start] = count as i32;
            stack.push(start);
            while let Some(i) = stack.pop() {
                let c = [
                    (i / (s[1] * s[2])) as i64,
                    ((i / s[2]) % s[1]) as i64,
                    (i % s[2]) as i64,
                ];
                for d in &offsets {
                    let q = [c[0] + d[0], c[1] + d[1], c[2] + d[2]];
                    if (0..3).any(|a| q[a] < 0 || q[a] >= s[a] as i64) {
                        continue;
                    }
                    let j = ((q[0] as usize * s[1]) + q[1] as usize) * s[2] + q[2] as usize;
                    if mask[j] && labels[j] == 0 {
                        labels[j] = count as i32;
                        stack.push(j);
                    }
                }
            }
        }
        Ok(Labels { labels, count })
    }
}

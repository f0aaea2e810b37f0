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
use crate::error::{Error, Remedy, Result};
use crate::keys::Samples;
use crate::shaders::Shader;
use crate::stream::{SliceSink, SliceSource};

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
    words: u32,
    tile_shift: [u32; 3],
    tiles: [u32; 3],
    _pad: [u32; 3],
}

/// Pixels per tile of the merge kernels (16 per thread; the tile's forest,
/// one parent per pixel pair, and its bit mask take 9 KiB of the 16 KiB of
/// workgroup memory WebGPU guarantees).
const TILE: usize = 4096;

/// Pixels per ranking block (256 words of root bits).
const BLOCK: usize = 8192;

/// The kernels' parameters for a box of shape `s` and the sizes they need.
pub(crate) struct Plan {
    pub params: wgpu::Buffer,
    pub n: usize,
    /// The label count is word `n_blocks` of the aux buffer.
    pub n_blocks: usize,
    pub n_tiles: usize,
}

impl Plan {
    /// Words of the local-roots buffer ([`root_words`] of the box).
    pub fn root_words(&self) -> usize {
        self.n_tiles * TILE / 2
    }
}

/// Words of the local-roots buffer for a box of shape `s`: 16 bits per
/// pixel of every tile.
pub(crate) fn root_words(s: Shape3) -> usize {
    tile_grid(s).1.iter().product::<usize>() * TILE / 2
}

/// The box as the kernels see it: an axis of length 1 at the fast end is
/// dropped (a [nz, ny, 1] box is labelled as [1, nz, ny], with the same
/// linear indices and neighbours), so tiles are at least two pixels wide
/// unless the box is one pixel. Then two run starts never share a pair of
/// pixels, and the tile's forest fits one parent per pair.
fn kernel_shape(s: Shape3) -> Shape3 {
    let mut s = s;
    for _ in 0..2 {
        if s[2] == 1 {
            s = [1, s[0], s[1]];
        }
    }
    s
}

/// The tile extents (x, y, z) and the number of tiles along each.
fn tile_grid(s: Shape3) -> ([usize; 3], [usize; 3]) {
    let s = kernel_shape(s);
    let tile = tile_shape(s);
    let tiles = [
        s[2].div_ceil(tile[0]),
        s[1].div_ceil(tile[1]),
        s[0].div_ceil(tile[2]),
    ];
    (tile, tiles)
}

/// Words of the labelling's aux buffer for `n` pixels: block offsets and
/// the count, then three bit arrays.
pub(crate) fn aux_words(n: usize) -> usize {
    n.div_ceil(BLOCK) + 1 + 3 * n.div_ceil(32)
}

/// Tile extents (x, y, z; powers of two, 4096 pixels unless the box is
/// smaller): rows of 32 or 64 pixels and up to 8 planes, then whatever axis
/// can still grow, so narrow boxes do not leave tiles mostly empty.
fn tile_shape(s: Shape3) -> [usize; 3] {
    let cap = [s[2], s[1], s[0]].map(|v| v.max(1).next_power_of_two());
    let first = if s[0] > 1 { [32, 16, 8] } else { [64, 64, 1] };
    let mut t = [1usize; 3];
    for a in 0..3 {
        while t[a] < cap[a].min(first[a]) && t.iter().product::<usize>() < TILE {
            t[a] *= 2;
        }
    }
    for a in 0..3 {
        while t[a] < cap[a] && t.iter().product::<usize>() < TILE {
            t[a] *= 2;
        }
    }
    t
}

pub(crate) fn plan(gpu: &Gpu, s: Shape3, connectivity: usize) -> Plan {
    let s = kernel_shape(s);
    let n = s.iter().product::<usize>();
    let (tile, tiles) = tile_grid(s);
    let n_blocks = n.div_ceil(BLOCK);
    let params = gpu.uniform(&Params {
        nx: s[2] as u32,
        ny: s[1] as u32,
        nz: s[0] as u32,
        count: n as u32,
        connectivity: connectivity as u32,
        n_blocks: n_blocks as u32,
        words: n.div_ceil(32) as u32,
        tile_shift: tile.map(|v| v.trailing_zeros()),
        tiles: tiles.map(|v| v as u32),
        _pad: [0; 3],
    });
    Plan {
        params,
        n,
        n_blocks,
        n_tiles: tiles.iter().product(),
    }
}

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

/// The most pixels one box may hold on this device: labels (4 bytes), mask
/// (1), local roots (2) and root bits (under 1) per pixel within the memory
/// budget, and the labels within one binding; indices keep bit 31 free.
/// Larger arrays are labelled in slabs.
pub fn max_box(gpu: &Gpu) -> usize {
    (gpu.max_binding_size() / 4)
        .min(gpu.memory_budget() / 8)
        .min(1 << 31) as usize
}

pub(crate) fn slice_too_big(plane: usize, max: usize) -> Error {
    Error::beyond(
        format!(
            "one slice of {plane} pixels does not fit the device's binding limit or memory budget \
             of {max} labels"
        ),
        &[Remedy::LargerBudget, Remedy::UseCpu, Remedy::OtherAdapter],
    )
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
    let max = max_box(gpu);
    // Split the slowest axis longer than one (2-D: rows, 3-D: planes).
    let axis = (0..3).find(|&a| s[a] > 1).unwrap_or(2);
    let plane: usize = s[axis + 1..].iter().product();
    // The local roots take 2 bytes a pixel of every tile, more than the
    // labels' binding when the tiles are padded on every axis.
    let fits = |b: Shape3| {
        b.iter().product::<usize>() <= max && 4 * root_words(b) as u64 <= gpu.max_binding_size()
    };
    if fits(s) {
        return label_box(gpu, mask, s, connectivity).await;
    }
    let slab = |k: usize| {
        let mut b = s;
        b[axis] = k;
        b
    };
    let mut per = (max / plane).min(s[axis]);
    while per > 1 && !fits(slab(per)) {
        per /= 2;
    }
    if per == 0 || !fits(slab(per)) {
        return Err(slice_too_big(plane, max));
    }
    let mut labels: Vec<i32> = Vec::with_capacity(n);
    let mut merge = SlabMerge::new(s, axis, connectivity);
    let mut lo = 0;
    while lo < s[axis] {
        let hi = (lo + per).min(s[axis]);
        let mut sub = s;
        sub[axis] = hi - lo;
        let part = label_box(gpu, &mask[lo * plane..hi * plane], sub, connectivity).await?;
        let offset = merge.add(part.count)?;
        if merge.ids() > i32::MAX as usize {
            return Err(too_many());
        }
        labels.extend(
            part.labels
                .iter()
                .map(|&l| if l == 0 { 0 } else { l + offset as i32 }),
        );
        if lo > 0 {
            // Both planes hold non-negative ids: i32 and u32 agree.
            let ids: &[u32] = bytemuck::cast_slice(&labels[(lo - 1) * plane..(lo + 1) * plane]);
            merge.unite(&ids[..plane], &ids[plane..]);
        }
        lo = hi;
    }
    let (table, count) = merge.table()?;
    for l in labels.iter_mut() {
        *l = table[*l as usize];
    }
    Ok(Labels { labels, count })
}

/// Labels a stack too large for memory, slab by slab along its first
/// axis: pass 1 labels each slab of `mask` on the GPU and writes its
/// provisional (slab-global) ids to `provisional`, keeping only the last
/// plane for the merge across the next border; pass 2 reads them back and
/// writes the final labels to `out` through the merge's table. Host memory
/// is a few slabs plus 4 bytes per provisional component; a slab holds at
/// most `max_pixels` (pass [`max_box`] for the most the device allows, or
/// less). `progress(done, total)` counts slices of both passes. Returns the
/// number of components.
#[allow(clippy::too_many_arguments)]
pub async fn label_stream<M, P, O>(
    gpu: &Gpu,
    shape: &[usize],
    connectivity: usize,
    max_pixels: usize,
    mask: &mut M,
    provisional: &mut P,
    out: &mut O,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<usize>
where
    M: SliceSource<bool>,
    P: SliceSink<u32> + SliceSource<u32>,
    O: SliceSink<i32>,
{
    let n = shape.iter().try_fold(1usize, |a, &b| a.checked_mul(b));
    let s = check(n.unwrap_or(usize::MAX), shape, connectivity)?;
    let (nz, plane) = (s[0], s[1] * s[2]);
    if nz * plane == 0 {
        return Ok(0);
    }
    let max = max_pixels.min(max_box(gpu));
    let per = max / plane;
    if per == 0 {
        return Err(slice_too_big(plane, max));
    }
    let mut merge = SlabMerge::new(s, 0, connectivity);
    let mut last: Vec<u32> = Vec::new();
    let mut buf: Vec<bool> = Vec::new();
    let mut lo = 0;
    while lo < nz {
        let hi = (lo + per).min(nz);
        buf.clear();
        mask.read(lo..hi, &mut buf)?;
        if buf.len() != (hi - lo) * plane {
            return Err(Error::InvalidInput(format!(
                "slices {lo}..{hi} gave {} values where {} were expected",
                buf.len(),
                (hi - lo) * plane
            )));
        }
        let part = label_box(gpu, &buf, [hi - lo, s[1], s[2]], connectivity).await?;
        let offset = merge.add(part.count)?;
        // In place (same size): slab-local labels to slab-global ids.
        let ids: Vec<u32> = part
            .labels
            .into_iter()
            .map(|l| if l == 0 { 0 } else { l as u32 + offset })
            .collect();
        if lo > 0 {
            merge.unite(&last, &ids[..plane]);
        }
        last.clear();
        last.extend_from_slice(&ids[(hi - lo - 1) * plane..]);
        provisional.write(&ids)?;
        progress(hi, 2 * nz);
        lo = hi;
    }
    drop(buf);
    let (table, count) = merge.table()?;
    let mut ids: Vec<u32> = Vec::new();
    let mut lo = 0;
    while lo < nz {
        let hi = (lo + per).min(nz);
        ids.clear();
        provisional.read(lo..hi, &mut ids)?;
        let labels: Vec<i32> = ids
            .iter()
            .map(|&id| table.get(id as usize).copied())
            .collect::<Option<_>>()
            .ok_or_else(|| {
                Error::InvalidInput("the provisional label file was changed while in use".into())
            })?;
        out.write(&labels)?;
        progress(nz + hi, 2 * nz);
        lo = hi;
    }
    Ok(count)
}

fn too_many() -> Error {
    Error::InvalidInput("more than 2^31-1 components do not fit int32 labels".into())
}

/// Joins slabs labelled one by one: a union-find over slab-global ids
/// (each slab's labels plus the ids of the slabs before it), fed only the
/// two planes that meet at each border, so its memory grows with the
/// number of components, not of pixels. Shared by [`label`] (slabs in
/// memory) and [`label_stream`] (slabs on disk).
pub struct SlabMerge {
    /// parent[id] <= id: the smaller id (earlier first pixel) is the root.
    parent: Vec<u32>,
    /// The border plane's shape (y, x) and the backward neighbours in the
    /// previous slab's last plane, as (dy, dx) within it.
    plane: [usize; 2],
    offsets: Vec<[i64; 2]>,
}

impl SlabMerge {
    /// Slabs of `s` split along `axis` (every axis before it of extent 1).
    pub fn new(s: Shape3, axis: usize, connectivity: usize) -> SlabMerge {
        let plane = match axis {
            0 => [s[1], s[2]],
            1 => [1, s[2]],
            _ => [1, 1],
        };
        let offsets = backward_offsets(connectivity)
            .into_iter()
            .filter(|d| d[axis] == -1 && d[..axis].iter().all(|&v| v == 0))
            .map(|d| match axis {
                0 => [d[1], d[2]],
                1 => [0, d[2]],
                _ => [0, 0],
            })
            .collect();
        SlabMerge {
            parent: vec![0],
            plane,
            offsets,
        }
    }

    /// Ids given so far.
    pub fn ids(&self) -> usize {
        self.parent.len() - 1
    }

    /// Registers the next slab's `count` components; returns the offset to
    /// add to its labels 1..=count.
    pub fn add(&mut self, count: usize) -> Result<u32> {
        let offset = self.ids();
        if offset + count >= u32::MAX as usize {
            return Err(Error::beyond(
                "more than 2^32-2 components across the slabs (fewer, larger slabs hold fewer)",
                &[Remedy::LargerBudget],
            ));
        }
        self.parent
            .extend(offset as u32 + 1..=(offset + count) as u32);
        Ok(offset as u32)
    }

    fn find(&mut self, mut x: u32) -> u32 {
        let p = &mut self.parent;
        while p[x as usize] != x {
            let up = p[p[x as usize] as usize];
            p[x as usize] = up;
            x = up;
        }
        x
    }

    /// Unites components that touch across one border: `prev` is the last
    /// plane of the slab before it, `next` the first plane of the slab
    /// after it (slab-global ids, 0 = background).
    pub fn unite(&mut self, prev: &[u32], next: &[u32]) {
        let [ny, nx] = self.plane;
        for y in 0..ny {
            for x in 0..nx {
                let i = y * nx + x;
                if next[i] == 0 {
                    continue;
                }
                for k in 0..self.offsets.len() {
                    let [dy, dx] = self.offsets[k];
                    let (qy, qx) = (y as i64 + dy, x as i64 + dx);
                    if qy < 0 || qx < 0 || qy >= ny as i64 || qx >= nx as i64 {
                        continue;
                    }
                    let j = prev[qy as usize * nx + qx as usize];
                    if j != 0 {
                        let a = self.find(next[i]);
                        let b = self.find(j);
                        let (lo, hi) = (a.min(b), a.max(b));
                        self.parent[hi as usize] = lo;
                    }
                }
            }
        }
    }

    /// The final label of every id (index 0: background) and their number:
    /// surviving roots ranked in id order, which is raster order of each
    /// component's first pixel as slabs come in order and each is numbered
    /// in raster order. Reuses the union-find's memory.
    pub fn table(self) -> Result<(Vec<i32>, usize)> {
        let mut p = self.parent;
        // Parents point down, so in ascending order each parent's entry
        // already names its root.
        for id in 1..p.len() {
            p[id] = p[p[id] as usize];
        }
        let mut next = 0u32;
        for id in 1..p.len() {
            if p[id] as usize == id {
                next += 1;
                p[id] = next;
            } else {
                // The root is smaller, so already ranked.
                p[id] = p[p[id] as usize];
            }
        }
        if next > i32::MAX as u32 {
            return Err(too_many());
        }
        let table = p.into_iter().map(|v| v as i32).collect();
        Ok((table, next as usize))
    }
}

/// Labels one box that fits a binding, on the GPU.
async fn label_box(gpu: &Gpu, mask: &[bool], s: Shape3, connectivity: usize) -> Result<Labels> {
    let n = mask.len();
    let mut bytes: Vec<u8> = mask.iter().map(|&m| u8::from(m)).collect();
    bytes.resize(n.div_ceil(4) * 4, 0);
    let plan = plan(gpu, s, connectivity);
    let mut held = Vec::new();
    let outcome = async {
        let mask_buf = gpu.storage(bytes.len() as u64, "label mask").await?;
        held.push(mask_buf.clone());
        let parent = gpu.storage(4 * n as u64, "labels").await?;
        held.push(parent.clone());
        let scratch = Scratch::new(gpu, &plan).await?;
        held.push(scratch.aux.clone());
        held.push(scratch.roots.clone());
        gpu.upload(&mask_buf, &bytes);
        record_label(gpu, &plan, &mask_buf, &parent, &scratch).await?;
        let labels: Vec<i32> = gpu.read_vec(&parent, n).await?;
        let total = gpu
            .read_at(&scratch.aux, 4 * plan.n_blocks as u64, 4)
            .await?;
        let count = u32::from_le_bytes([total[0], total[1], total[2], total[3]]) as usize;
        Ok::<_, Error>(Labels { labels, count })
    }
    .await;
    for b in held {
        gpu.recycle(b);
    }
    outcome
}

/// The labelling's working buffers besides the mask and the labels.
pub(crate) struct Scratch {
    /// Block offsets, the label count (word `plan.n_blocks`), root bits.
    pub aux: wgpu::Buffer,
    /// Each pixel's tile-local root.
    pub roots: wgpu::Buffer,
}

impl Scratch {
    pub async fn new(gpu: &Gpu, plan: &Plan) -> Result<Scratch> {
        let bytes = 4 * plan.root_words() as u64;
        if bytes > gpu.max_binding_size() {
            return Err(Error::OutOfMemory {
                what: format!(
                    "the labelling's local roots ({bytes} bytes) exceed one binding ({} bytes)",
                    gpu.max_binding_size()
                ),
            });
        }
        let aux = gpu
            .storage(4 * aux_words(plan.n) as u64, "label aux")
            .await?;
        match gpu
            .storage(4 * plan.root_words() as u64, "label local roots")
            .await
        {
            Ok(roots) => Ok(Scratch { aux, roots }),
            Err(e) => {
                gpu.recycle(aux);
                Err(e)
            }
        }
    }
}

/// Records and submits the labelling kernels on buffers already on the GPU:
/// `parent` receives the labels, word `n_blocks` of `scratch.aux` their
/// number.
pub(crate) async fn record_label(
    gpu: &Gpu,
    plan: &Plan,
    mask: &wgpu::Buffer,
    parent: &wgpu::Buffer,
    scratch: &Scratch,
) -> Result<()> {
    let mut rec = gpu.recorder();
    dispatch_label(&mut rec, gpu, plan, mask, parent, scratch)?;
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
    scratch: &Scratch,
) -> Result<()> {
    let buffers = [&plan.params, mask, parent, &scratch.aux, &scratch.roots];
    let per_tile = plan.n_tiles as u64 * 256;
    let per_word = plan.n.div_ceil(32) as u64;
    for (entry, threads) in [
        ("clear_bits", per_word),
        ("local_merge", per_tile),
        ("border_merge", per_tile),
        ("flatten_rank", plan.n_blocks as u64 * 256),
        ("scan_blocks", 256),
        ("rank_local", per_word),
        ("write_labels", 4 * per_tile),
    ] {
        let pipeline = gpu.pipeline(Shader::Label, entry)?;
        rec.dispatch(&pipeline, &buffers, threads)?;
    }
    Ok(())
}

pub mod cpu;

#[cfg(test)]
mod wgsl_layouts {
    use super::*;
    use crate::layout::mirror_layout;

    mirror_layout!(
        params_matches_wgsl,
        Params,
        crate::shaders::LABEL,
        "Params",
        [
            nx,
            ny,
            nz,
            count,
            connectivity,
            n_blocks,
            words,
            tile_shift,
            tiles,
            _pad
        ]
    );
}

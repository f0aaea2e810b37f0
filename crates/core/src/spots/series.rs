//! Spot finding over a series of any length, fed batch by batch (the CLI
//! reads the next batch from disk while the GPU works on this one).
//!
//! On the GPU the frames go through the same two slots as the in-memory
//! path ([`super::find_spots_with`]): the upload of a frame overlaps the
//! kernels of the one before it, across batch borders too, since frames
//! still in flight keep their batch alive here until they are collected.
//!
//! Spots are joined on the host from each frame's strong pixels (`Join`):
//! 4-connected within a frame and, for `three_d`, 6-connected to the
//! strong pixels of the previous frame. Only the open spots (those with a
//! pixel in the last frame) and the last frame's strong pixels are kept;
//! a spot that did not reach the new frame cannot grow and is finished.
//! Spots are numbered in the order of their first pixel (frame, row,
//! column), as scipy.ndimage.label numbers the whole stack.

use std::collections::VecDeque;
use std::sync::OnceLock;

use super::frames::Slots;
use super::gpu::{check_window, setup};
use super::*;
use crate::engine::{Gpu, Pending};

/// Frames of one batch, owned, in the dtype they were read in: u16 and u32
/// counts stay packed up to the GPU; bitshuffle-LZ4 frames stay compressed.
#[derive(Clone, Debug)]
pub enum FrameBatch {
    U16(Vec<u16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    Compressed(CompressedFrames),
}

impl FrameBatch {
    /// The counts as held; None for compressed frames.
    pub fn counts(&self) -> Option<Counts<'_>> {
        Some(match self {
            FrameBatch::U16(v) => Counts::U16(v),
            FrameBatch::U32(v) => Counts::U32(v),
            FrameBatch::I32(v) => Counts::I32(v),
            FrameBatch::Compressed(_) => return None,
        })
    }

    /// Pixels of all frames.
    pub fn len(&self) -> usize {
        match self {
            FrameBatch::Compressed(c) => c.chunks.len() * c.pixels,
            raw => raw.counts().map_or(0, |c| c.len()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the counts as held.
    pub fn bytes(&self) -> usize {
        match self {
            FrameBatch::U16(v) => 2 * v.len(),
            FrameBatch::U32(v) => 4 * v.len(),
            FrameBatch::I32(v) => 4 * v.len(),
            FrameBatch::Compressed(c) => c.chunks.iter().map(Vec::len).sum(),
        }
    }
}

/// Frames as their bitshuffle-LZ4 chunks (HDF5 filter 32008), one chunk a
/// frame of uint32 counts: an Eiger series read without decoding. The GPU
/// decodes them (the compressed bytes cross the bus); the host decodes a
/// frame only where it needs its counts (the CPU reference, the exact
/// slow path, 3-D joins), with [`crate::decode::cpu`].
#[derive(Clone, Debug)]
pub struct CompressedFrames {
    chunks: Vec<Vec<u8>>,
    pixels: usize,
    cutoff: Option<u32>,
    /// Frames decoded on the host, as they were asked for.
    decoded: Vec<OnceLock<std::result::Result<FrameBatch, String>>>,
}

impl CompressedFrames {
    /// Frames of `pixels` uint32 counts, one chunk each. With a `cutoff`
    /// (a detector's count cutoff, below 2^31) counts above it read as -1
    /// and the frames as int32, as a host reader masks them.
    pub fn new(chunks: Vec<Vec<u8>>, pixels: usize, cutoff: Option<u32>) -> Result<Self> {
        if cutoff.is_some_and(|c| c > i32::MAX as u32 - 1) {
            return Err(Error::param(
                "count cutoff",
                "at or above 2^31 - 1 for compressed frames (frames are read as int32 under a cutoff)",
            ));
        }
        let decoded = chunks.iter().map(|_| OnceLock::new()).collect();
        Ok(CompressedFrames {
            chunks,
            pixels,
            cutoff,
            decoded,
        })
    }

    pub fn frames(&self) -> usize {
        self.chunks.len()
    }

    /// Adds `more`'s frames after these: frames of one source, of the same
    /// size and cutoff (the cutoff of these applies to all).
    pub fn append(&mut self, more: CompressedFrames) {
        self.chunks.extend(more.chunks);
        self.decoded.extend(more.decoded);
    }

    /// Frame `k`'s counts, decoded on the host the first time.
    fn counts(&self, k: usize) -> Result<Counts<'_>> {
        let (chunk, cell) = self
            .chunks
            .get(k)
            .zip(self.decoded.get(k))
            .ok_or_else(|| Error::Device(format!("no compressed frame {k}")))?;
        let decoded = cell.get_or_init(|| {
            let bytes =
                crate::decode::cpu::decode(chunk, 4, 4 * self.pixels).map_err(|e| e.to_string())?;
            if bytes.len() != 4 * self.pixels {
                return Err(format!(
                    "a chunk decodes to {} bytes, a frame is {}",
                    bytes.len(),
                    4 * self.pixels
                ));
            }
            let counts = bytes
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            Ok(match self.cutoff {
                None => FrameBatch::U32(counts.collect()),
                Some(c) => {
                    FrameBatch::I32(counts.map(|v| if v > c { -1 } else { v as i32 }).collect())
                }
            })
        });
        match decoded {
            Ok(b) => b
                .counts()
                .ok_or_else(|| Error::Device("a decoded frame is compressed".into())),
            Err(m) => Err(Error::InvalidInput(m.clone())),
        }
    }
}

/// A frame whose spots are done: its index and, when asked for, its
/// strong-pixel mask (rows x columns).
#[derive(Clone, Debug, PartialEq)]
pub struct FrameDone {
    pub z: usize,
    pub strong: Option<Vec<bool>>,
}

/// The spots of a whole series.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesResult {
    /// Spots within [min_spot_size, max_spot_size], numbered from 1 in the
    /// order of their first pixel.
    pub spots: Vec<Spot>,
    pub n_strong: u64,
    /// Connected regions before the size filters.
    pub n_regions: usize,
    pub n_frames: usize,
}

/// A spot finder fed frames batch by batch: `push` each batch, then
/// `finish`. Host memory: the batches with frames in flight (at most two
/// frames are), the open spots and one frame's strong pixels; the spot
/// table grows with the spots found.
pub struct SpotSeries<'g> {
    /// None: the CPU reference, frame by frame.
    gpu: Option<&'g Gpu>,
    h: usize,
    w: usize,
    options: SpotOptions,
    mask: Option<Vec<bool>>,
    three_d: bool,
    want_mask: bool,
    slots: Option<Slots>,
    /// Frames submitted: index, result on its way, decoded on the GPU.
    in_flight: VecDeque<(usize, Pending, bool)>,
    /// Batches (first frame, frames) still holding frames in flight.
    batches: VecDeque<(usize, FrameBatch)>,
    next_z: usize,
    /// The first frame's index in the whole series (see `starting_at`).
    first_z: usize,
    join: Join,
    /// (order key, spot): the first pixel's index in the series, or for
    /// spots measured on the GPU their running number.
    spots: Vec<(u64, Spot)>,
    n_strong: u64,
    n_regions: usize,
}

impl<'g> SpotSeries<'g> {
    /// A series of frames of `shape` (rows, columns) on `gpu`, or on the CPU
    /// reference when `gpu` is None. `want_mask`: return each frame's
    /// strong pixels from `push` and `finish`.
    pub async fn new(
        gpu: Option<&'g Gpu>,
        shape: [usize; 2],
        mask: Option<Vec<bool>>,
        options: SpotOptions,
        three_d: bool,
        want_mask: bool,
    ) -> Result<SpotSeries<'g>> {
        let [h, w] = shape;
        check_frame(h.saturating_mul(w), shape, mask.as_deref(), &options)?;
        let slots = match gpu {
            Some(gpu) => {
                check_window(&options)?;
                let s = setup(h, w, &options, mask.as_deref());
                // Two frames in flight: the second set and the upload
                // buffers open as the frames come (sized for their dtype).
                Some(Slots::open_first(gpu, &s, 2, 2).await?)
            }
            None => None,
        };
        Ok(SpotSeries {
            gpu,
            h,
            w,
            options,
            mask,
            three_d,
            want_mask,
            slots,
            in_flight: VecDeque::new(),
            batches: VecDeque::new(),
            next_z: 0,
            first_z: 0,
            join: Join {
                w,
                n: h * w,
                link: three_d,
                prev: Vec::new(),
                open: Vec::new(),
            },
            spots: Vec::new(),
            n_strong: 0,
            n_regions: 0,
        })
    }

    /// Frames pushed so far.
    pub fn frames(&self) -> usize {
        self.next_z - self.first_z
    }

    /// Makes the first frame pushed frame `z0` of a longer series: frame
    /// indices, spot z coordinates and order are those of the whole series,
    /// so a series split into frame ranges (one per GPU) gives, range after
    /// range, the spots of one run. Only before the first `push`.
    pub fn starting_at(mut self, z0: usize) -> Result<Self> {
        if self.next_z != self.first_z {
            return Err(Error::InvalidInput(
                "starting_at must come before the first batch".into(),
            ));
        }
        self.next_z = z0;
        self.first_z = z0;
        Ok(self)
    }

    /// Adds the frames of `batch` (whole frames, row-major) and returns the
    /// frames finished meanwhile, in order. On the GPU the last frames stay
    /// in flight until the next `push` or `finish`.
    pub async fn push(&mut self, batch: FrameBatch) -> Result<Vec<FrameDone>> {
        let n = self.h * self.w;
        if batch.is_empty() || !batch.len().is_multiple_of(n) {
            return Err(Error::InvalidInput(format!(
                "a batch of {} values does not hold whole frames of {} x {}",
                batch.len(),
                self.h,
                self.w
            )));
        }
        let z0 = self.next_z;
        let nb = batch.len() / n;
        self.batches.push_back((z0, batch));
        self.next_z += nb;
        let mut done = Vec::new();
        for z in z0..z0 + nb {
            match self.gpu {
                None => {
                    let frame = frame_of(&self.batches, z, n)?;
                    let strong = cpu::strong_pixels(
                        frame,
                        [self.h, self.w],
                        self.mask.as_deref(),
                        &self.options,
                    )?;
                    done.push(self.joined_frame(z, strong)?);
                }
                Some(gpu) => {
                    if self.in_flight.len() >= 2 {
                        done.push(self.collect_one(gpu).await?);
                    }
                    let s = setup(self.h, self.w, &self.options, self.mask.as_deref());
                    let slots = self.slots.as_mut().ok_or_else(|| {
                        Error::Device("the spot series has no GPU buffers".into())
                    })?;
                    let pending = match compressed_of(&self.batches, z, n) {
                        Some((c, k)) => {
                            let p = slots.submit_compressed(gpu, z, &s, &c.chunks[k], c.cutoff);
                            (p.await?, true)
                        }
                        None => {
                            let frame = frame_of(&self.batches, z, n)?;
                            (slots.submit(gpu, z, &s, frame).await?, false)
                        }
                    };
                    self.in_flight.push_back((z, pending.0, pending.1));
                }
            }
        }
        self.drop_done_batches();
        Ok(done)
    }

    /// Collects the frames still in flight, finishes the open spots and
    /// returns the last frames done with the whole series' spots.
    pub async fn finish(mut self) -> Result<(Vec<FrameDone>, SeriesResult)> {
        let mut done = Vec::new();
        if let Some(gpu) = self.gpu {
            while !self.in_flight.is_empty() {
                done.push(self.collect_one(gpu).await?);
            }
        }
        self.batches.clear();
        for o in self.join.finish() {
            self.record(o.first, &o.sums);
        }
        let mut spots = std::mem::take(&mut self.spots);
        spots.sort_by_key(|(key, _)| *key);
        let spots = spots
            .into_iter()
            .enumerate()
            .map(|(i, (_, mut s))| {
                s.id = i + 1;
                s
            })
            .collect();
        Ok((
            done,
            SeriesResult {
                spots,
                n_strong: self.n_strong,
                n_regions: self.n_regions,
                n_frames: self.next_z - self.first_z,
            },
        ))
    }

    /// Waits for the oldest frame in flight and takes in its spots.
    async fn collect_one(&mut self, gpu: &Gpu) -> Result<FrameDone> {
        let n = self.h * self.w;
        let (z, pending, decoded) = self
            .in_flight
            .pop_front()
            .ok_or_else(|| Error::Device("no frame in flight".into()))?;
        let batches = &self.batches;
        let frame = || frame_of(batches, z, n);
        let s = setup(self.h, self.w, &self.options, self.mask.as_deref());
        let slots = self
            .slots
            .as_ref()
            .ok_or_else(|| Error::Device("the spot series has no GPU buffers".into()))?;
        let need_mask = self.want_mask || self.three_d;
        let (mask, sums) = slots
            .collect(gpu, &s, &frame, z, pending, decoded, need_mask)
            .await?;
        if self.three_d {
            return self.joined_frame(z, mask);
        }
        // 2-D on the GPU: the frame's spots, already measured and ordered.
        for s in &sums {
            self.n_strong += s.n;
            self.record(self.n_regions as u64, s);
        }
        Ok(FrameDone {
            z,
            strong: self.want_mask.then_some(mask),
        })
    }

    /// Joins a frame's strong pixels into the spots (CPU path, and 3-D).
    fn joined_frame(&mut self, z: usize, strong: Vec<bool>) -> Result<FrameDone> {
        let n = self.h * self.w;
        let frame = frame_of(&self.batches, z, n)?;
        self.n_strong += strong.iter().filter(|&&s| s).count() as u64;
        for o in self.join.frame(z, &strong, frame) {
            self.record(o.first, &o.sums);
        }
        Ok(FrameDone {
            z,
            strong: self.want_mask.then_some(strong),
        })
    }

    /// A finished region: counted, and kept as a spot when its size passes.
    fn record(&mut self, key: u64, sums: &SpotSums) {
        self.n_regions += 1;
        let o = &self.options;
        if sums.n >= o.min_spot_size as u64 && sums.n <= o.max_spot_size as u64 {
            self.spots.push((key, Spot::from_sums(0, sums)));
        }
    }

    /// Frees the batches whose frames are all collected.
    fn drop_done_batches(&mut self) {
        let n = self.h * self.w;
        let oldest = self.in_flight.front().map_or(self.next_z, |(z, ..)| *z);
        while let Some((z0, b)) = self.batches.front() {
            if z0 + b.len() / n > oldest {
                break;
            }
            self.batches.pop_front();
        }
    }
}

impl Drop for SpotSeries<'_> {
    fn drop(&mut self) {
        if let (Some(gpu), Some(mut slots)) = (self.gpu, self.slots.take()) {
            slots.close(gpu);
        }
    }
}

/// Frame `z` among the batches held (compressed frames decoded on the
/// host).
fn frame_of(batches: &VecDeque<(usize, FrameBatch)>, z: usize, n: usize) -> Result<Counts<'_>> {
    let (z0, b) = batches
        .iter()
        .find(|(z0, b)| z >= *z0 && z < z0 + b.len() / n)
        .ok_or_else(|| Error::Device(format!("frame {z} is no longer held")))?;
    match b {
        FrameBatch::Compressed(c) => c.counts(z - z0),
        raw => raw
            .counts()
            .map(|c| c.slice((z - z0) * n..(z - z0 + 1) * n))
            .ok_or_else(|| Error::Device("a batch without counts".into())),
    }
}

/// Frame `z` as a compressed batch's frame (the batch and the frame's
/// index in it), None when its batch holds counts.
fn compressed_of(
    batches: &VecDeque<(usize, FrameBatch)>,
    z: usize,
    n: usize,
) -> Option<(&CompressedFrames, usize)> {
    batches
        .iter()
        .find(|(z0, b)| z >= *z0 && z < z0 + b.len() / n)
        .and_then(|(z0, b)| match b {
            FrameBatch::Compressed(c) => Some((c, z - z0)),
            _ => None,
        })
}

/// A spot not finished yet: its first pixel (index in the series) and sums.
struct Open {
    first: u64,
    sums: SpotSums,
}

/// Joins strong pixels frame after frame: 4-connected within a frame and,
/// with `link`, to the same pixel of the previous frame (6-connected).
struct Join {
    w: usize,
    n: usize,
    link: bool,
    /// The last frame's strong pixels (ascending) and their open spot.
    prev: Vec<(u32, u32)>,
    open: Vec<Open>,
}

fn find(parent: &mut [u32], mut x: u32) -> u32 {
    while parent[x as usize] != x {
        parent[x as usize] = parent[parent[x as usize] as usize];
        x = parent[x as usize];
    }
    x
}

fn union(parent: &mut [u32], a: u32, b: u32) {
    let (ra, rb) = (find(parent, a), find(parent, b));
    if ra != rb {
        parent[ra.max(rb) as usize] = ra.min(rb);
    }
}

impl Join {
    /// Adds frame `z`; returns the spots that cannot grow any more.
    fn frame(&mut self, z: usize, strong: &[bool], counts: Counts<'_>) -> Vec<Open> {
        let (w, n) = (self.w, self.n);
        let mut finished = Vec::new();
        if !self.link {
            finished.append(&mut self.open);
            self.prev.clear();
        }
        let pix: Vec<u32> = (0..n).filter(|&i| strong[i]).map(|i| i as u32).collect();
        // Union-find nodes: the open spots, then this frame's strong pixels.
        let k_old = self.open.len();
        let mut parent: Vec<u32> = (0..(k_old + pix.len()) as u32).collect();
        for (k, &p) in pix.iter().enumerate() {
            let node = (k_old + k) as u32;
            let pu = p as usize;
            if !pu.is_multiple_of(w) && k > 0 && pix[k - 1] + 1 == p {
                union(&mut parent, node, node - 1);
            }
            if pu >= w
                && let Ok(j) = pix[..k].binary_search(&(p - w as u32))
            {
                union(&mut parent, node, (k_old + j) as u32);
            }
            if let Ok(j) = self.prev.binary_search_by_key(&p, |e| e.0) {
                union(&mut parent, node, self.prev[j].1);
            }
        }
        // One new open spot per root that holds a pixel of this frame.
        let mut slot = vec![u32::MAX; parent.len()];
        let mut open: Vec<Open> = Vec::new();
        let mut prev = Vec::with_capacity(pix.len());
        for (k, &p) in pix.iter().enumerate() {
            let r = find(&mut parent, (k_old + k) as u32) as usize;
            if slot[r] == u32::MAX {
                slot[r] = open.len() as u32;
                open.push(Open {
                    first: u64::MAX,
                    sums: SpotSums::default(),
                });
            }
            let o = &mut open[slot[r] as usize];
            let pu = p as usize;
            o.first = o.first.min((z * n + pu) as u64);
            let v = counts.get(pu).max(0) as u64;
            o.sums.add([z as u64, (pu / w) as u64, (pu % w) as u64], v);
            prev.push((p, slot[r]));
        }
        // Open spots that no pixel of this frame reached are done; the
        // others merge into the spot they grew into.
        for (i, old) in std::mem::take(&mut self.open).into_iter().enumerate() {
            let r = find(&mut parent, i as u32) as usize;
            match slot[r] {
                u32::MAX => finished.push(old),
                s => {
                    let o = &mut open[s as usize];
                    o.first = o.first.min(old.first);
                    o.sums.merge(&old.sums);
                }
            }
        }
        self.open = open;
        self.prev = prev;
        finished
    }

    fn finish(&mut self) -> Vec<Open> {
        self.prev.clear();
        std::mem::take(&mut self.open)
    }
}

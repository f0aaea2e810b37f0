//! Frames through the GPU: two frames in flight on their own buffers
//! (`Slots`), the upload of one overlapping the kernels of the other; each
//! frame's spot sums read back and decoded, and the exact slow path for a
//! frame the fast path cannot decide.

use super::gpu::*;
use super::*;
use crate::engine::{Gpu, split_parts};

/// A frame's counts on the host, made when first asked for: a frame
/// decoded on the GPU is decoded on the host only where the exact slow
/// path needs its counts.
pub(super) type HostFrame<'a, 'f> = &'a dyn Fn() -> Result<Counts<'f>>;

/// Bytes of the spot sums read back with every frame.
const READ_BYTES: u64 = 4 * (HEAD + READ_SPOTS * W_FAST) as u64;

/// The fast path's spots from the acc words (header included), ordered by
/// their first pixel; None when the frame must take the full-frame path.
async fn fast_sums(
    gpu: &Gpu,
    b: &Buffers,
    head: &[u32],
    z: usize,
) -> Result<Option<Vec<SpotSums>>> {
    let (n_strong, n_spots) = (head[2] as usize, head[3] as usize);
    if head[0] != 0 || head[1] != 0 || n_strong > STRONG_CAP || n_spots > FAST_SPOTS {
        return Ok(None);
    }
    let words_needed = HEAD + n_spots * W_FAST;
    let more;
    let a: &[u32] = if head.len() >= words_needed {
        head
    } else {
        more = words(&gpu.read(&b.acc, 4 * words_needed as u64).await?);
        &more
    };
    let mut slots: Vec<&[u32]> = a[HEAD..words_needed].chunks_exact(W_FAST).collect();
    slots.sort_by_key(|e| e[22]);
    Ok(Some(slots.iter().map(|e| entry_sums(e, z)).collect()))
}

/// A number of several u32 words, least significant first.
fn wide(w: &[u32]) -> u128 {
    w.iter()
        .rev()
        .fold(0u128, |acc, &x| (acc << 32) | u128::from(x))
}

/// One spot's sums from its entry of acc words (both paths' entries start
/// with the same 22 words), on frame `z`.
fn entry_sums(e: &[u32], z: usize) -> SpotSums {
    let sv = wide(&e[1..3]);
    SpotSums {
        n: u64::from(e[0]),
        sum_v: sv,
        sum_v2: wide(&e[3..6]),
        lo: [z as u64, u64::from(e[6]), u64::from(e[8])],
        hi: [z as u64, u64::from(e[7]), u64::from(e[9])],
        sum_vc: [z as u128 * sv, wide(&e[10..13]), wide(&e[13..16])],
        sum_vc2: [(z * z) as u128 * sv, wide(&e[16..19]), wide(&e[19..22])],
    }
}

/// The strong-pixel mask of a fast-path frame from its compact list.
async fn fast_mask(gpu: &Gpu, b: &Buffers, n: usize, n_strong: usize) -> Result<Vec<bool>> {
    let mut mask = vec![false; n];
    if n_strong > 0 {
        let at = 4 * (LIST_HEAD + 2 * LIST_CAP * ENTRY) as u64;
        for k in words(&gpu.read_at(&b.list, at, 4 * n_strong as u64).await?) {
            mask[k as usize] = true;
        }
    }
    Ok(mask)
}

/// Header (undecided counts, label count) and spot sums from acc words.
fn parse_sums(a: &[u32], z: usize, count: usize) -> Vec<SpotSums> {
    a[HEAD..HEAD + count * W]
        .chunks_exact(W)
        .map(|e| entry_sums(e, z))
        .collect()
}

/// The spot sums of a frame whose kernels have run: from the acc words
/// already read (`head`), reading more when needed.
async fn collect_sums(
    gpu: &Gpu,
    b: &Buffers,
    s: &Setup<'_>,
    frame: HostFrame<'_, '_>,
    z: usize,
    head: &[u32],
) -> Result<Vec<SpotSums>> {
    let count = head[2] as usize;
    if count > SPOT_CAP {
        let frame = frame()?;
        // More spots than the GPU sums hold: sum on the host from the labels.
        let labels = words(&gpu.read(&b.parent, 4 * (s.h * s.w) as u64).await?);
        let mut sums = vec![SpotSums::default(); count];
        for (i, &l) in labels.iter().enumerate() {
            if l > 0 {
                let v = frame.get(i).max(0) as u64;
                sums[l as usize - 1].add([z as u64, (i / s.w) as u64, (i % s.w) as u64], v);
            }
        }
        return Ok(sums);
    }
    if head.len() >= HEAD + count * W {
        return Ok(parse_sums(head, z, count));
    }
    let a = words(&gpu.read(&b.acc, 4 * (HEAD + count * W) as u64).await?);
    Ok(parse_sums(&a, z, count))
}

/// The frame again on the exact slow path (image already on the GPU).
async fn slow_frame(
    gpu: &Gpu,
    b: &Buffers,
    s: &Setup<'_>,
    host_frame: HostFrame<'_, '_>,
    z: usize,
) -> Result<Vec<SpotSums>> {
    let frame = host_frame()?;
    if !threshold_frame(gpu, b, s, frame).await? {
        // Too many undecided pixels: the host decides the whole frame.
        let strong = host::strong_pixels(frame, [s.h, s.w], s.mask, s.options)?;
        let states: Vec<u32> = strong.iter().map(|&v| u32::from(v)).collect();
        gpu.upload(&b.strong, bytemuck::cast_slice(&states));
    }
    clear_list(gpu, b);
    let mut rec = gpu.recorder();
    dispatch_spots(&mut rec, gpu, b, s, fmt_of(frame))?;
    rec.submit().await?;
    let head = words(&gpu.read(&b.acc, 4 * HEAD as u64).await?);
    collect_sums(gpu, b, s, host_frame, z, &head).await
}

/// The device buffers of the frames in flight (one set per frame) and
/// the upload buffers feeding them, allocated once per series and reused
/// frame after frame.
pub(super) struct Slots {
    bufs: Vec<Buffers>,
    ups: Vec<crate::engine::UploadBuffer>,
    /// The packed frame bytes each upload buffer holds.
    up_bytes: Vec<u64>,
    /// Frame sets and upload buffers of the whole pipeline: frame z takes
    /// set z % sets and upload buffer z % uploads.
    sets: usize,
    uploads: usize,
}

impl Slots {
    /// `sets` sets of frame buffers and `uploads` upload buffers for frames
    /// of up to `frame_bytes` packed bytes.
    pub(super) async fn open(
        gpu: &Gpu,
        s: &Setup<'_>,
        sets: usize,
        uploads: usize,
        frame_bytes: u64,
    ) -> Result<Slots> {
        let mut slots = Slots::open_first(gpu, s, sets, uploads).await?;
        for z in 0..sets.max(uploads) {
            if let Err(e) = slots.grow(gpu, s, z, frame_bytes).await {
                slots.close(gpu);
                return Err(e);
            }
        }
        Ok(slots)
    }

    /// The first set of frame buffers only: the other sets and the upload
    /// buffers are opened by `submit` when a frame first needs them, sized
    /// for the frames as they come (a single frame, or a series of 16-bit
    /// frames, never holds buffers for more or for wider ones).
    pub(super) async fn open_first(
        gpu: &Gpu,
        s: &Setup<'_>,
        sets: usize,
        uploads: usize,
    ) -> Result<Slots> {
        let mut slots = Slots {
            bufs: Vec::new(),
            ups: Vec::new(),
            up_bytes: Vec::new(),
            sets: sets.max(1),
            uploads: uploads.max(1),
        };
        let b = allocate(gpu, s.h * s.w, s).await?;
        upload_constants(gpu, &b, s);
        slots.bufs.push(b);
        Ok(slots)
    }

    /// Opens what frame `z` of `frame_bytes` packed bytes needs and is not
    /// open yet: its set of frame buffers and an upload buffer large enough.
    async fn grow(&mut self, gpu: &Gpu, s: &Setup<'_>, z: usize, frame_bytes: u64) -> Result<()> {
        while self.bufs.len() <= z % self.sets {
            let b = allocate(gpu, s.h * s.w, s).await?;
            upload_constants(gpu, &b, s);
            self.bufs.push(b);
        }
        let k = z % self.uploads;
        while self.ups.len() <= k {
            self.ups.push(gpu.upload_buffer(frame_bytes));
            self.up_bytes.push(frame_bytes);
        }
        if self.up_bytes[k] < frame_bytes {
            // A wider dtype than the frames before: a larger buffer (the
            // engine's pool waits for the old one's last copy).
            let old = std::mem::replace(&mut self.ups[k], gpu.upload_buffer(frame_bytes));
            gpu.release_upload(old);
            self.up_bytes[k] = frame_bytes;
        }
        Ok(())
    }

    /// Gives the buffers back to the engine's pools.
    pub(super) fn close(&mut self, gpu: &Gpu) {
        for b in self.bufs.drain(..) {
            release(gpu, b);
        }
        for u in self.ups.drain(..) {
            gpu.release_upload(u);
        }
    }

    /// Uploads frame `z` (packed as read) and submits its kernels; the
    /// header of its spot sums comes back with the returned `Pending`. The
    /// upload waits only for its buffer's previous copy, not its kernels.
    pub(super) async fn submit(
        &mut self,
        gpu: &Gpu,
        z: usize,
        s: &Setup<'_>,
        frame: Counts<'_>,
    ) -> Result<crate::engine::Pending> {
        self.grow(gpu, s, z, frame_bytes(frame).len() as u64)
            .await?;
        let k = z % self.uploads;
        let clock = gpu.host_clock();
        gpu.fill(&mut self.ups[k], frame_bytes(frame)).await?;
        gpu.host_done("spots series: copy into upload memory", clock);
        let b = &self.bufs[z % self.sets];
        submit_filled(gpu, b, &mut self.ups[k], s, frame)
    }

    /// Waits for frame `z` (submitted on `submit`) and returns its spot
    /// sums (ordered by first pixel) and, when `want_mask`, its strong
    /// pixels (empty otherwise).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn collect(
        &self,
        gpu: &Gpu,
        s: &Setup<'_>,
        frame: HostFrame<'_, '_>,
        z: usize,
        pending: crate::engine::Pending,
        decoded: bool,
        want_mask: bool,
    ) -> Result<(Vec<bool>, Vec<SpotSums>)> {
        let b = &self.bufs[z % self.sets];
        collect_frame(gpu, b, s, frame, z, (pending, decoded), want_mask).await
    }

    /// Frame `z` as its bitshuffle-LZ4 chunk: uploaded compressed, decoded
    /// into the frame's image buffer and found spots in, in one
    /// submission; the decoder's status comes back with the spot sums.
    pub(super) async fn submit_compressed(
        &mut self,
        gpu: &Gpu,
        z: usize,
        s: &Setup<'_>,
        chunk: &[u8],
        cutoff: Option<u32>,
    ) -> Result<crate::engine::Pending> {
        // The frame sets; the upload buffers are not used by this path.
        self.grow(gpu, s, z, 4).await?;
        let bytes = 4 * s.h * s.w;
        let r = crate::decode::gpu::Resident::frame(gpu, chunk, bytes, cutoff)
            .await
            .map_err(|e| match e {
                Error::InvalidInput(m) => Error::InvalidInput(format!("frame {z}: {m}")),
                e => e,
            })?;
        if r.decoded().first().map(|d| d.1) != Some(bytes) {
            let got = r.decoded().first().map_or(0, |d| d.1);
            r.free(gpu);
            return Err(Error::InvalidInput(format!(
                "frame {z}: its chunk decodes to {got} bytes, a frame of {} x {} uint32 counts is {bytes}",
                s.h, s.w
            )));
        }
        let b = &self.bufs[z % self.sets];
        let fmt = if cutoff.is_some() { 0 } else { 2 };
        let clock = gpu.host_clock();
        clear_list(gpu, b);
        r.clear_status(gpu);
        let mut rec = gpu.recorder();
        let recorded = r
            .record_to(gpu, &mut rec, &b.image)
            .and_then(|()| dispatch_frame(&mut rec, gpu, b, s, fmt));
        let pending = recorded.map(|()| {
            rec.submit_with_readback_parts(&[(&b.acc, 0, READ_BYTES), (r.status(), 0, 16)], None)
        });
        // Pooled again at once: later writes into them are queued after
        // this submission.
        r.free(gpu);
        gpu.host_done("spots series: decode, record and submit", clock);
        pending
    }
}

/// Submits the frame in `up` (packed as read) on the buffers `b`.
fn submit_filled(
    gpu: &Gpu,
    b: &Buffers,
    up: &mut crate::engine::UploadBuffer,
    s: &Setup<'_>,
    frame: Counts<'_>,
) -> Result<crate::engine::Pending> {
    let clock = gpu.host_clock();
    clear_list(gpu, b);
    let mut rec = gpu.recorder();
    rec.copy_in(up, &b.image, frame_bytes(frame).len() as u64);
    dispatch_frame(&mut rec, gpu, b, s, fmt_of(frame))?;
    let pending = rec.submit_with_readback(&b.acc, READ_BYTES, Some(up));
    gpu.host_done("spots series: record and submit", clock);
    Ok(pending)
}

/// Waits for the frame `z` submitted on `b` and returns its spot sums
/// (ordered by first pixel) and, when `want_mask`, its strong pixels
/// (empty otherwise). Frames the fast path cannot decide are redone on the
/// exact slow path.
async fn collect_frame(
    gpu: &Gpu,
    b: &Buffers,
    s: &Setup<'_>,
    frame: HostFrame<'_, '_>,
    z: usize,
    (pending, decoded): (crate::engine::Pending, bool),
    want_mask: bool,
) -> Result<(Vec<bool>, Vec<SpotSums>)> {
    let n = s.h * s.w;
    let clock = gpu.host_clock();
    let (head, status) = gpu
        .finish_with(pending, |bytes| {
            if !decoded {
                return Ok((words(bytes), None));
            }
            let parts = split_parts(bytes, &[READ_BYTES, 16])?;
            Ok((words(parts[0]), Some(parts[1].to_vec())))
        })
        .await?;
    gpu.host_done("spots series: wait for a frame", clock);
    if let Some(status) = status {
        crate::decode::gpu::check_frame_status(&status, z)?;
    }
    match fast_sums(gpu, b, &head, z).await? {
        Some(sums) => {
            let mask = if want_mask {
                fast_mask(gpu, b, n, head[2] as usize).await?
            } else {
                Vec::new()
            };
            Ok((mask, sums))
        }
        None => {
            // Undecided pixels or more strong pixels than the compact
            // path holds: the exact step-by-step full-frame path.
            let sums = slow_frame(gpu, b, s, frame, z).await?;
            let mask = if want_mask {
                let raw = gpu.read(&b.bytes, n as u64).await?;
                raw.iter().map(|&v| v != 0).collect()
            } else {
                Vec::new()
            };
            Ok((mask, sums))
        }
    }
}

/// The frames of `counts` through `slots`: while frame z + 1 is copied
/// into its upload buffer on other threads, this thread submits frame z
/// and collects frame z - 1, so the host's copy (the bound: over the bus
/// into device memory on NVIDIA) never waits for recording or collecting.
/// Needs one more upload buffer than frame sets: frame z + 1's was last
/// used by frame z + 1 - uploads, collected one step before.
pub(super) async fn run_series(
    gpu: &Gpu,
    slots: &mut Slots,
    s: &Setup<'_>,
    counts: Counts<'_>,
    nz: usize,
    z0: usize,
    want_mask: bool,
) -> Result<(Vec<bool>, Vec<SpotSums>)> {
    let n = s.h * s.w;
    let frame = |z: usize| counts.slice(z * n..(z + 1) * n);
    let (sets, uploads) = (slots.bufs.len(), slots.ups.len());
    if sets == 0 || uploads <= sets {
        return Err(Error::Device(
            "a spot series needs more upload buffers than frame sets".into(),
        ));
    }
    let mut strong = Vec::with_capacity(if want_mask { nz * n } else { 0 });
    let mut sums = Vec::new();
    let mut in_flight: std::collections::VecDeque<(usize, crate::engine::Pending)> =
        Default::default();
    if nz > 0 {
        gpu.fill(&mut slots.ups[0], frame_bytes(frame(0))).await?;
    }
    for z in 0..nz {
        // Frame z + 1 takes frame z + 1 - sets' buffers: collect that one.
        let keep = if z + 1 < nz { sets - 1 } else { 0 };
        let (this_up, next_up) = pair_mut(&mut slots.ups, z % uploads, (z + 1) % uploads);
        let bufs = &slots.bufs;
        let in_flight = &mut in_flight;
        let step = async {
            in_flight.push_back((
                z,
                submit_filled(gpu, &bufs[z % sets], this_up, s, frame(z))?,
            ));
            let mut done = Vec::new();
            while in_flight.len() > keep {
                let Some((zf, pending)) = in_flight.pop_front() else {
                    break;
                };
                let b = &bufs[zf % sets];
                let host = || Ok(frame(zf));
                done.push(
                    collect_frame(gpu, b, s, &host, z0 + zf, (pending, false), want_mask).await?,
                );
            }
            Ok::<_, Error>(done)
        };
        let done = match next_up {
            Some(next_up) if z + 1 < nz => {
                let clock = gpu.host_clock();
                let done = gpu
                    .fill_during(
                        next_up,
                        frame_bytes(frame(z + 1)),
                        crate::copies::upload_threads(),
                        step,
                    )
                    .await?;
                gpu.host_done("spots series: copy next frame, submit, collect", clock);
                done?
            }
            _ => step.await?,
        };
        for (mask, frame_sums) in done {
            sums.extend(frame_sums);
            strong.extend(mask);
        }
    }
    Ok((strong, sums))
}

/// Mutable references to items `i` and `j` of `v` (None for the second
/// when they are the same item).
fn pair_mut<T>(v: &mut [T], i: usize, j: usize) -> (&mut T, Option<&mut T>) {
    if i < j {
        let (a, b) = v.split_at_mut(j);
        (&mut a[i], Some(&mut b[0]))
    } else if j < i {
        let (a, b) = v.split_at_mut(i);
        (&mut b[0], Some(&mut a[j]))
    } else {
        (&mut v[i], None)
    }
}

//! Device to host: reading buffers back, and work submitted with its
//! result on the way back ([`Pending`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::*;
use crate::error::{Error, Result};

/// Work submitted with its result on the way back to the host; collect it
/// with [`Gpu::finish`]. Streaming operations keep a few of these in flight
/// so that transfers and kernels of consecutive chunks overlap.
pub(crate) struct Pending {
    /// Taken when collected; a Pending dropped uncollected (an error before
    /// it was its turn) frees its readback buffer itself.
    pub(super) inner: Option<PendingReadback>,
    pub(super) live_bytes: Arc<AtomicU64>,
}

pub(super) struct PendingReadback {
    pub(super) staging: wgpu::Buffer,
    pub(super) bytes: u64,
    /// Offset and count of the pass timestamps copied behind the data.
    pub(super) timestamps: Option<(u64, u32)>,
    /// Entry point of each timed pass.
    pub(super) names: Vec<String>,
    pub(super) index: wgpu::SubmissionIndex,
    pub(super) mapped:
        futures_channel::oneshot::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(p) = self.inner.take() {
            self.live_bytes
                .fetch_sub(p.staging.size(), Ordering::Relaxed);
            p.staging.destroy();
        }
    }
}

/// Bytes per part of a large read or write (see `Gpu::read_into`, `Gpu::upload`).
pub(super) const READ_CHUNK: u64 = 64 << 20;

/// Where parts of these sizes start when laid one after another, each
/// from a multiple of 256 bytes ([`Recorder::submit_with_readback_parts`]):
/// SLIC's 32 MB of labels behind 20 bytes of counts (4-byte aligned) took
/// measurably longer to come back than from an aligned start (slic-3d-200
/// host to host).
pub(super) fn part_starts(sizes: impl Iterator<Item = u64>) -> Vec<u64> {
    let mut at = 0;
    sizes
        .map(|len| {
            let start = at;
            at += len.div_ceil(256) * 256;
            start
        })
        .collect()
}

/// The parts of these sizes in the bytes read back by
/// [`Recorder::submit_with_readback_parts`].
pub(crate) fn split_parts<'a>(bytes: &'a [u8], sizes: &[u64]) -> Result<Vec<&'a [u8]>> {
    part_starts(sizes.iter().copied())
        .into_iter()
        .zip(sizes)
        .map(|(start, &len)| {
            bytes
                .get(start as usize..(start + len) as usize)
                .ok_or_else(|| Error::Device("a readback was shorter than its parts".into()))
        })
        .collect()
}

/// The values in `bytes` (its length a multiple of T's size) in `out`'s
/// capacity (its values dropped first; capacity added where it lacks
/// room), copied on several threads into memory not zeroed first.
pub(crate) fn vec_from_bytes<T: bytemuck::Pod>(mut out: Vec<T>, bytes: &[u8]) -> Vec<T> {
    let count = bytes.len() / std::mem::size_of::<T>();
    let len = count * std::mem::size_of::<T>();
    crate::copies::parallel_copy_to_uninit(spare_bytes(&mut out, count), &bytes[..len]);
    // SAFETY: every byte of the `count` values was written just now, and
    // any bytes are a valid `T` (Pod).
    unsafe { out.set_len(count) };
    out
}

/// The bytes of the first `count` values of `out`'s spare capacity, to be
/// written before `set_len(count)` (`out` emptied first, capacity added
/// where it lacks room).
pub(super) fn spare_bytes<T: bytemuck::Pod>(
    out: &mut Vec<T>,
    count: usize,
) -> &mut [std::mem::MaybeUninit<u8>] {
    out.clear();
    out.reserve_exact(count);
    let spare = &mut out.spare_capacity_mut()[..count];
    let len = std::mem::size_of_val(spare);
    // SAFETY: the same memory as bytes; a `MaybeUninit<u8>` slice may hold
    // anything.
    unsafe { std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast(), len) }
}

impl Gpu {
    /// Waits for `pending` and hands its bytes, still mapped, to `take`.
    pub(crate) async fn finish_with<R>(
        &self,
        mut pending: Pending,
        take: impl FnOnce(&[u8]) -> Result<R>,
    ) -> Result<R> {
        let Some(PendingReadback {
            staging,
            bytes,
            timestamps,
            names,
            index,
            mapped,
        }) = pending.inner.take()
        else {
            return Err(Error::Device("a readback collected twice".into()));
        };
        let outcome = async {
            let clock = self.host_clock();
            self.wait_for(index)?;
            mapped
                .await
                .map_err(|_| Error::Device("the readback was cancelled".into()))?
                .map_err(|e| Error::Device(format!("reading a result back failed: {e}")))?;
            self.host_done("readback: wait", clock);
            let view = staging
                .get_mapped_range(..)
                .map_err(|e| Error::Device(format!("mapping a result failed: {e}")))?;
            if let Some((offset, count)) = timestamps {
                let raw = &view[offset as usize..(offset + 8 * u64::from(count)) as usize];
                let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(raw);
                self.add_kernel_ticks(&ticks, &names);
            }
            let clock = self.host_clock();
            self.count_bus(false, bytes);
            let taken = take(&view[..bytes as usize]);
            self.host_done("readback: take", clock);
            drop(view);
            staging.unmap();
            taken
        }
        .await;
        self.recycle_staging(staging);
        outcome
    }

    /// Copies `bytes` bytes of `buffer` back to the host.
    pub(crate) async fn read(&self, buffer: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>> {
        self.read_at(buffer, 0, bytes).await
    }

    /// Copies `bytes` bytes of `buffer` from byte `offset` (a multiple of 4)
    /// back to the host.
    pub(crate) async fn read_at(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        bytes: u64,
    ) -> Result<Vec<u8>> {
        self.read_vec_at(buffer, offset, bytes as usize).await
    }

    /// Copies the first `count` values of `buffer` back to the host as a
    /// `Vec<T>`, straight into the vector (one host copy: large label
    /// arrays).
    pub(crate) async fn read_vec<T: bytemuck::Pod>(
        &self,
        buffer: &wgpu::Buffer,
        count: usize,
    ) -> Result<Vec<T>> {
        self.read_vec_at(buffer, 0, count).await
    }

    /// `count` values of `buffer` from byte `offset`, copied into a new
    /// vector's capacity without zeroing it first: the allocator reuses
    /// freed memory for mid-sized vectors, and zeroing 32 MB of labels took
    /// about twice as long as copying them.
    pub(super) async fn read_vec_at<T: bytemuck::Pod>(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        count: usize,
    ) -> Result<Vec<T>> {
        let out: Vec<T> = Vec::with_capacity(count);
        crate::copies::advise_huge_pages(out.as_ptr() as usize, std::mem::size_of::<T>() * count);
        self.read_vec_into(buffer, offset, out, count).await
    }

    /// [`Gpu::read_vec_at`] into `out`'s capacity (its values dropped
    /// first; capacity added where it lacks room for `count`).
    pub(crate) async fn read_vec_into<T: bytemuck::Pod>(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        mut out: Vec<T>,
        count: usize,
    ) -> Result<Vec<T>> {
        self.read_into(buffer, offset, spare_bytes(&mut out, count))
            .await?;
        // SAFETY: `read_into` returned Ok, so it wrote all `count` values,
        // and any bytes are a valid `T` (Pod).
        unsafe { out.set_len(count) };
        Ok(out)
    }

    /// Copies `out.len()` bytes of `buffer` from byte `offset` into `out`.
    /// Large reads go through two pooled readback buffers of READ_CHUNK
    /// bytes in turn (the GPU copies the next part while the host copies
    /// this one): a fresh host-visible buffer as large as the result costs
    /// far more than the copy itself (SLIC's labels of a 500³ volume).
    pub(crate) async fn read_into(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        out: &mut [std::mem::MaybeUninit<u8>],
    ) -> Result<()> {
        let total = out.len() as u64;
        if total == 0 {
            return Ok(());
        }
        self.count_bus(false, total);
        let chunk = READ_CHUNK.min(total.div_ceil(4) * 4);
        let mut parts = out.chunks_mut(chunk as usize).enumerate();
        let mut in_flight = std::collections::VecDeque::new();
        loop {
            while in_flight.len() < 2
                && let Some((i, part)) = parts.next()
            {
                let start = offset + i as u64 * chunk;
                let len = (part.len() as u64).div_ceil(4) * 4;
                let staging = self.staging_buffer(size_class(chunk));
                let mut encoder = self
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
                encoder.copy_buffer_to_buffer(buffer, start, &staging, 0, len);
                let index = self.queue.submit([encoder.finish()]);
                let (tx, rx) = futures_channel::oneshot::channel();
                staging.map_async(wgpu::MapMode::Read, ..len, move |r| {
                    let _ = tx.send(r);
                });
                in_flight.push_back((part, staging, rx, index));
            }
            let Some((part, staging, rx, index)) = in_flight.pop_front() else {
                return Ok(());
            };
            // This part only: the next part's transfer runs during its copy.
            self.wait_for(index)?;
            let copied = async {
                rx.await
                    .map_err(|_| Error::Device("the readback was cancelled".into()))?
                    .map_err(|e| Error::Device(format!("reading a result back failed: {e}")))?;
                let view = staging
                    .get_mapped_range(..(part.len() as u64).div_ceil(4) * 4)
                    .map_err(|e| Error::Device(format!("mapping a result failed: {e}")))?;
                crate::copies::parallel_copy_to_uninit(part, &view[..part.len()]);
                Ok(())
            }
            .await;
            staging.unmap();
            self.recycle_staging(staging);
            copied?;
        }
    }
}

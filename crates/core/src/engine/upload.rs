//! Host to device: upload buffers kept between chunks, and small writes.

use std::sync::atomic::Ordering;

use wgpu::util::DeviceExt;

use super::*;
use crate::error::{Error, Result};

/// A host-visible buffer the host fills and the GPU copies from, reused
/// chunk after chunk (a fresh staging allocation per chunk costs as much as
/// the copy itself).
pub(crate) struct UploadBuffer {
    pub(super) buffer: wgpu::Buffer,
    /// The mapping requested after the last use, and that use's submission.
    pub(super) ready: Option<(
        futures_channel::oneshot::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
        wgpu::SubmissionIndex,
    )>,
}

impl UploadBuffer {
    /// Maps the buffer again for the next fill once submission `index`
    /// (the last one copying out of it) is done.
    pub(super) fn remap_after(&mut self, index: wgpu::SubmissionIndex) {
        let (tx, ready) = futures_channel::oneshot::channel();
        self.buffer.map_async(wgpu::MapMode::Write, .., move |r| {
            let _ = tx.send(r);
        });
        self.ready = Some((ready, index));
    }
}

/// Upload and readback buffers kept between calls, the newest first.
pub(super) const UPLOADS_KEPT: usize = 2;

impl Gpu {
    /// A mapped upload buffer of at least `bytes` bytes.
    pub(crate) fn upload_buffer(&self, bytes: u64) -> UploadBuffer {
        let size = size_class(bytes.max(8)).div_ceil(8) * 8;
        if let Ok(mut pool) = self.uploads.lock()
            && let Some(i) = pool.iter().position(|u| u.buffer.size() == size)
        {
            return pool.swap_remove(i);
        }
        self.live_bytes.fetch_add(size, Ordering::Relaxed);
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("upload"),
            size,
            usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        UploadBuffer {
            buffer,
            ready: None,
        }
    }

    /// Natively, blocks until `index` has run and its callbacks fired; in the
    /// browser the awaited callbacks themselves wait.
    pub(super) fn wait_for(&self, index: wgpu::SubmissionIndex) -> Result<()> {
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(index),
                timeout: None,
            })
            .map_err(|e| Error::Device(format!("waiting for the GPU failed: {e}")))?;
        #[cfg(target_arch = "wasm32")]
        let _ = index;
        Ok(())
    }

    /// Writes `bytes` at the start of `up`, once the GPU has finished its
    /// previous copy out of it; large writes are split over threads.
    pub(crate) async fn fill(&self, up: &mut UploadBuffer, bytes: &[u8]) -> Result<()> {
        self.fill_during(up, bytes, crate::copies::upload_threads(), async {})
            .await
    }

    /// [`Gpu::fill`] with the copy on other threads while `meanwhile` runs
    /// on this one: a stream's host copy into upload memory (over the bus
    /// where that memory is the device's, as NVIDIA's is) overlaps its
    /// recording, submitting and collecting of other chunks.
    pub(crate) async fn fill_during<R>(
        &self,
        up: &mut UploadBuffer,
        bytes: &[u8],
        threads: usize,
        meanwhile: impl std::future::Future<Output = R>,
    ) -> Result<R> {
        self.fill_pieces_during(up, &[bytes], threads, meanwhile)
            .await
    }

    /// [`Gpu::fill_during`] from `pieces` laid end to end (a box's rows
    /// from wherever they lie, without gathering them first).
    pub(crate) async fn fill_pieces_during<R>(
        &self,
        up: &mut UploadBuffer,
        pieces: &[&[u8]],
        threads: usize,
        meanwhile: impl std::future::Future<Output = R>,
    ) -> Result<R> {
        let clock = self.host_clock();
        if let Some((mapped, index)) = up.ready.take() {
            self.wait_for(index)?;
            mapped
                .await
                .map_err(|_| Error::Device("an upload mapping was cancelled".into()))?
                .map_err(|e| Error::Device(format!("mapping an upload buffer failed: {e}")))?;
        }
        self.host_done("upload: wait for its buffer", clock);
        let clock = self.host_clock();
        let len: usize = pieces.iter().map(|p| p.len()).sum();
        if len as u64 > up.buffer.size() {
            return Err(Error::Device("an upload larger than its buffer".into()));
        }
        self.count_bus(true, len as u64);
        let end = (len as u64).div_ceil(4) * 4;
        let mut view = up
            .buffer
            .slice(..end.max(4))
            .get_mapped_range_mut()
            .map_err(|e| Error::Device(format!("mapping an upload buffer failed: {e}")))?;
        let dst = view.slice(..len).as_raw_ptr().as_ptr().cast::<u8>();
        let mut plan = crate::copies::Plan {
            parts: Vec::new(),
            workers: 1,
        };
        let mut at = 0;
        for piece in pieces {
            // Pointer arithmetic only; the pieces' lengths sum to `len`.
            let part =
                crate::copies::plan(piece.as_ptr(), dst.wrapping_add(at), piece.len(), threads);
            plan.parts.extend(part.parts);
            at += piece.len();
        }
        plan.workers = threads.max(1).min(plan.parts.len());
        // SAFETY: the parts tile the mapped view (alive until after the
        // copy) and the pieces; `meanwhile` touches neither.
        #[cfg(not(target_arch = "wasm32"))]
        let r = unsafe { crate::copies::copy_during(&plan, || pollster::block_on(meanwhile)) };
        #[cfg(target_arch = "wasm32")]
        let r = {
            unsafe { crate::copies::copy_during(&plan, || ()) };
            meanwhile.await
        };
        drop(view);
        self.host_done("upload: fill and meanwhile", clock);
        up.buffer.unmap();
        Ok(r)
    }

    /// Keeps `up` for the next stream of the same chunk size: a new mapped
    /// buffer costs the driver a pinning of its pages, as much as a copy.
    /// The two newest are kept (a full pool that refused new buffers made
    /// every call of a third size allocate afresh: SLIC on 300-500³ after
    /// smaller volumes).
    pub(crate) fn release_upload(&self, up: UploadBuffer) {
        if let Some(old) = keep_newest(&self.uploads, up, UPLOADS_KEPT) {
            self.destroy(old.buffer);
        }
    }

    /// Writes `bytes` at the start of `buffer` (before the next submission).
    /// Large writes go in parts of READ_CHUNK: each write stages its bytes
    /// in a fresh host-visible allocation, which for hundreds of megabytes
    /// costs more than the copy (parts come from the allocator's blocks).
    pub(crate) fn upload(&self, buffer: &wgpu::Buffer, bytes: &[u8]) {
        self.count_bus(true, bytes.len() as u64);
        for (i, part) in bytes.chunks(READ_CHUNK as usize).enumerate() {
            self.queue.write_buffer(buffer, i as u64 * READ_CHUNK, part);
        }
    }

    /// Writes `bytes` into `buffer` from byte `offset` (a multiple of 4),
    /// before the next submission.
    pub(crate) fn upload_at(&self, buffer: &wgpu::Buffer, offset: u64, bytes: &[u8]) {
        self.count_bus(true, bytes.len() as u64);
        self.queue.write_buffer(buffer, offset, bytes);
    }

    pub(crate) fn uniform<T: bytemuck::Pod>(&self, value: &T) -> wgpu::Buffer {
        self.count_bus(true, std::mem::size_of::<T>() as u64);
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("params"),
                contents: bytemuck::bytes_of(value),
                usage: wgpu::BufferUsages::UNIFORM,
            })
    }
}

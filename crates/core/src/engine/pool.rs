//! Device buffers: the pool of storage buffers within the memory budget,
//! and the readback (staging) buffers kept for reuse.

use std::sync::Mutex;
use std::sync::atomic::Ordering;

use super::*;
use crate::error::{Error, Result};

/// Adds `item` to `pool`; returns the oldest item when the pool then holds
/// more than `kept` (or `item` itself if the lock is poisoned).
pub(super) fn keep_newest<T>(pool: &Mutex<Vec<T>>, item: T, kept: usize) -> Option<T> {
    match pool.lock() {
        Ok(mut pool) => {
            pool.push(item);
            (pool.len() > kept).then(|| pool.remove(0))
        }
        Err(_) => Some(item),
    }
}

pub(super) const STAGING_KEPT: usize = 4;

/// Buffer sizes are rounded to four classes per power of two so that pooled
/// buffers are reused across slightly different shapes.
pub(super) fn size_class(bytes: u64) -> u64 {
    if bytes <= 4096 {
        return 4096;
    }
    let top = 63 - bytes.leading_zeros();
    let step = 1u64 << (top - 2);
    bytes.div_ceil(step) * step
}

impl Gpu {
    pub(super) fn staging_buffer(&self, size: u64) -> wgpu::Buffer {
        if let Ok(mut pool) = self.staging.lock()
            && let Some(i) = pool.iter().position(|b| b.size() == size)
        {
            return pool.swap_remove(i);
        }
        self.live_bytes.fetch_add(size, Ordering::Relaxed);
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Keeps the newest readback buffers (see `release_upload`).
    pub(super) fn recycle_staging(&self, buffer: wgpu::Buffer) {
        if let Some(old) = keep_newest(&self.staging, buffer, STAGING_KEPT) {
            self.destroy(old);
        }
    }

    /// A storage buffer of at least `bytes` bytes, from the pool when one fits.
    /// Allocation failures surface as `Error::OutOfMemory` so callers can
    /// retry with smaller chunks.
    pub(crate) async fn storage(&self, bytes: u64, what: &str) -> Result<wgpu::Buffer> {
        let size = size_class(bytes.max(4));
        if size > self.max_buffer {
            return Err(Error::OutOfMemory {
                what: format!("{what} ({size} bytes exceed the device's largest buffer)"),
            });
        }
        if let Ok(mut pool) = self.pool.lock()
            && let Some(i) = pool.iter().position(|b| b.size() == size)
        {
            return Ok(pool.swap_remove(i));
        }
        let create = || async {
            let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
            let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(what),
                size,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_DST
                    | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            match scope.pop().await {
                Some(e) => {
                    buffer.destroy();
                    Err(e)
                }
                None => Ok(buffer),
            }
        };
        let mut created = create().await;
        if created.is_err() && self.pooled_bytes() > 0 {
            // Pooled buffers of other sizes may hold the memory: free them.
            self.trim();
            created = create().await;
        }
        let buffer = created.map_err(|e| Error::OutOfMemory {
            what: format!("{what} ({size} bytes): {e}"),
        })?;
        self.live_bytes.fetch_add(size, Ordering::Relaxed);
        Ok(buffer)
    }

    pub(super) fn pooled_bytes(&self) -> u64 {
        self.pool
            .lock()
            .map_or(0, |pool| pool.iter().map(|b| b.size()).sum())
    }

    /// Returns a buffer to the pool; the pool keeps at most its limit (the
    /// memory budget, or more by default on discrete GPUs: `GpuOptions`),
    /// the most recently returned buffers first (an allocation that
    /// fails frees the pool and tries again). Large operations reuse their
    /// buffers from one call to the next: fresh ones cost allocation and
    /// clearing (SLIC on a 400^3 volume holds about 2 GB).
    pub(crate) fn recycle(&self, buffer: wgpu::Buffer) {
        if buffer.size() > self.pool_limit {
            self.destroy(buffer);
            return;
        }
        let Ok(mut pool) = self.pool.lock() else {
            self.destroy(buffer);
            return;
        };
        // Oldest first: a call of another size leaves its buffers behind.
        let mut pooled: u64 = pool.iter().map(|b| b.size()).sum();
        let mut evicted = Vec::new();
        while pooled + buffer.size() > self.pool_limit && !pool.is_empty() {
            let old = pool.remove(0);
            pooled -= old.size();
            evicted.push(old);
        }
        pool.push(buffer);
        drop(pool);
        for b in evicted {
            self.destroy(b);
        }
    }

    pub(super) fn destroy(&self, buffer: wgpu::Buffer) {
        self.live_bytes.fetch_sub(buffer.size(), Ordering::Relaxed);
        buffer.destroy();
    }

    /// Frees every pooled buffer.
    pub fn trim(&self) {
        let mut buffers: Vec<_> = match self.pool.lock() {
            Ok(mut pool) => pool.drain(..).collect(),
            Err(_) => return,
        };
        if let Ok(mut pool) = self.staging.lock() {
            buffers.extend(pool.drain(..));
        }
        if let Ok(mut pool) = self.uploads.lock() {
            buffers.extend(pool.drain(..).map(|u| u.buffer));
        }
        for b in buffers {
            self.destroy(b);
        }
    }
}

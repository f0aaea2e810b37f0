//! Recording dispatches and copies into one submission, with optional
//! timestamp queries per pass.

use std::sync::atomic::Ordering;

use super::*;
use crate::error::{Error, Result};

/// Records dispatches into one command buffer, timestamping each pass when
/// the adapter allows it.
pub(crate) struct Recorder<'g> {
    pub(super) gpu: &'g Gpu,
    pub(super) encoder: wgpu::CommandEncoder,
    pub(super) queries: Option<wgpu::QuerySet>,
    pub(super) passes: u32,
    /// Entry point of each timed pass (for the profile).
    pub(super) names: Vec<String>,
}

impl Recorder<'_> {
    /// Dispatches `entry` over `threads` invocations with the given buffers at
    /// bindings 0, 1, 2... of group 0 (the uniform first, by convention).
    pub(crate) fn dispatch(
        &mut self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
        threads: u64,
    ) -> Result<()> {
        if threads == 0 {
            return Ok(());
        }
        let (x, y) = grid(
            threads,
            self.gpu
                .device
                .limits()
                .max_compute_workgroups_per_dimension,
        )?;
        self.pass(pipeline, buffers, [x, y, 1]);
        Ok(())
    }

    /// Dispatches `groups` workgroups (kernels that give each work item a
    /// whole workgroup, of the shader's own size), split over x and y
    /// within the per-dimension limit; the shader rebuilds the index as
    /// `workgroup_id.x + workgroup_id.y * num_workgroups.x` and returns at
    /// indices past its count.
    pub(crate) fn dispatch_workgroups(
        &mut self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
        groups: u64,
    ) -> Result<()> {
        if groups == 0 {
            return Ok(());
        }
        let max = u64::from(
            self.gpu
                .device
                .limits()
                .max_compute_workgroups_per_dimension
                .max(1),
        );
        let y = groups.div_ceil(max);
        if y > max {
            return Err(Error::InvalidInput(format!(
                "{groups} workgroups exceed one dispatch; the caller should split the work"
            )));
        }
        let x = groups.div_ceil(y);
        self.pass(pipeline, buffers, [x as u32, y as u32, 1]);
        Ok(())
    }

    /// Whether `extent` (x, y, z) should run on a `_grid` entry point
    /// (workgroup [`GRID_WORKGROUP`]): it fits one dispatch and fills the
    /// workgroups. Narrow boxes (an RGB image's 3 channels along x, a 1-D
    /// signal's single row) would leave most invocations idle: they, and
    /// grids over the per-dimension limit, use the 1-D entry.
    pub(crate) fn grid_fits(&self, extent: [usize; 3]) -> bool {
        let filled =
            extent[0] >= GRID_WORKGROUP[0] as usize && extent[1] >= GRID_WORKGROUP[1] as usize;
        filled && self.grid_in_limits(extent)
    }

    /// Whether a grid of `extent` is within the per-dimension workgroup
    /// limit, filled or not: for kernels that have no 1-D entry point.
    pub(crate) fn grid_in_limits(&self, extent: [usize; 3]) -> bool {
        let max = self
            .gpu
            .device
            .limits()
            .max_compute_workgroups_per_dimension as usize;
        (0..3).all(|a| extent[a].div_ceil(GRID_WORKGROUP[a] as usize) <= max)
    }

    /// One invocation per cell of `extent` (x, y, z) for a `_grid` entry
    /// point; the shader returns early outside the extent.
    pub(crate) fn dispatch_grid(
        &mut self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
        extent: [usize; 3],
    ) -> Result<()> {
        if extent.contains(&0) {
            return Ok(());
        }
        if !self.grid_in_limits(extent) {
            return Err(Error::InvalidInput(format!(
                "a {extent:?} grid exceeds one dispatch; the caller should use the 1-D entry point"
            )));
        }
        let groups = [0, 1, 2].map(|a| extent[a].div_ceil(GRID_WORKGROUP[a] as usize) as u32);
        self.pass(pipeline, buffers, groups);
        Ok(())
    }

    /// Passes recorded so far that carry timestamps.
    pub(crate) fn timed_passes(&self) -> u32 {
        self.passes
    }

    pub(super) fn pass(
        &mut self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
        groups: [u32; 3],
    ) {
        let bind_group = self.bind_group(pipeline, buffers);
        let mut pass = self.begin_pass(pipeline);
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
    }

    /// Records `steps` (pipeline, bindings, threads) `times` over in one
    /// compute pass, each step's bind group made once: a loop of small
    /// dispatches (SLIC's search rounds) otherwise costs more host time to
    /// record than GPU time. wgpu still orders the dispatches (a barrier
    /// between storage writes and reads); the profile counts the pass under
    /// the first step's entry point.
    pub(crate) fn dispatch_repeated(
        &mut self,
        steps: &[(&wgpu::ComputePipeline, &[&wgpu::Buffer], u64)],
        times: u32,
    ) -> Result<()> {
        let Some(&(first, _, _)) = steps.first() else {
            return Ok(());
        };
        let max = self
            .gpu
            .device
            .limits()
            .max_compute_workgroups_per_dimension;
        let mut bound = Vec::new();
        for &(pipeline, buffers, threads) in steps {
            let (x, y) = grid(threads.max(1), max)?;
            bound.push((pipeline, self.bind_group(pipeline, buffers), [x, y]));
        }
        let mut pass = self.begin_pass(first);
        for _ in 0..times {
            for (pipeline, bind_group, [x, y]) in &bound {
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, bind_group, &[]);
                pass.dispatch_workgroups(*x, *y, 1);
            }
        }
        Ok(())
    }

    pub(super) fn bind_group(
        &self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
    ) -> wgpu::BindGroup {
        let layout = pipeline.get_bind_group_layout(0);
        let entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        self.gpu
            .device
            .create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &layout,
                entries: &entries,
            })
    }

    /// A compute pass, with timestamps while the query set has room, profiled
    /// under `pipeline`'s entry point.
    pub(super) fn begin_pass(&mut self, pipeline: &wgpu::ComputePipeline) -> wgpu::ComputePass<'_> {
        let index = self.timestamp_index(pipeline);
        let timestamp_writes =
            index
                .zip(self.queries.as_ref())
                .map(|(i, q)| wgpu::ComputePassTimestampWrites {
                    query_set: q,
                    beginning_of_pass_write_index: Some(2 * i),
                    end_of_pass_write_index: Some(2 * i + 1),
                });
        self.encoder
            .begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes,
            })
    }

    /// The index of the next pass's timestamps, while the query set has room.
    pub(super) fn timestamp_index(&mut self, pipeline: &wgpu::ComputePipeline) -> Option<u32> {
        if self.queries.is_none() || self.passes >= MAX_TIMED_PASSES {
            return None;
        }
        let index = self.passes;
        self.passes += 1;
        if self.gpu.profile.is_some() {
            let name = self
                .gpu
                .entry_names
                .lock()
                .ok()
                .and_then(|n| n.get(pipeline).cloned());
            self.names.push(name.unwrap_or_default());
        }
        Some(index)
    }

    /// [`Recorder::submit`], then `up` (copied from in this recording) is
    /// mapped again for its next [`Gpu::fill`] once the copy is done.
    pub(crate) async fn submit_refilling(self, up: &mut UploadBuffer) -> Result<()> {
        let gpu = self.gpu;
        self.submit().await?;
        // An empty submission marks the point after the copy: fills wait for it.
        up.remap_after(gpu.queue.submit([]));
        Ok(())
    }

    /// Submits the recording and, when timed, stores the summed kernel time.
    pub(crate) async fn submit(self) -> Result<()> {
        let Recorder {
            gpu,
            mut encoder,
            queries,
            passes,
            names,
        } = self;
        let resolved = match (&queries, passes) {
            (Some(q), n) if n > 0 => {
                let bytes = u64::from(2 * n) * 8;
                let resolve = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("timestamps"),
                    size: bytes,
                    usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                });
                encoder.resolve_query_set(q, 0..2 * n, &resolve, 0);
                Some((resolve, bytes))
            }
            _ => None,
        };
        gpu.queue.submit([encoder.finish()]);
        if let Some((resolve, bytes)) = resolved {
            let raw = gpu.read(&resolve, bytes).await?;
            resolve.destroy();
            let ticks: &[u64] = bytemuck::try_cast_slice(&raw)
                .map_err(|_| Error::Device("unaligned timestamp readback".into()))?;
            let ns = gpu.add_kernel_ticks(ticks, &names);
            gpu.last_kernel_ns.store(ns, Ordering::Relaxed);
        }
        if let Some(q) = queries {
            q.destroy();
        }
        Ok(())
    }
}

impl Recorder<'_> {
    /// Copies the first `bytes` of an upload buffer into `to`, before the
    /// dispatches recorded next.
    pub(crate) fn copy_in(&mut self, up: &UploadBuffer, to: &wgpu::Buffer, bytes: u64) {
        if bytes > 0 {
            self.encoder
                .copy_buffer_to_buffer(&up.buffer, 0, to, 0, bytes.div_ceil(4) * 4);
        }
    }

    /// Copies `bytes` bytes (a multiple of 4) of `from` at `from_offset` to
    /// `to` at `to_offset`, after the dispatches recorded so far.
    pub(crate) fn copy(
        &mut self,
        from: &wgpu::Buffer,
        from_offset: u64,
        to: &wgpu::Buffer,
        to_offset: u64,
        bytes: u64,
    ) {
        self.encoder
            .copy_buffer_to_buffer(from, from_offset, to, to_offset, bytes);
    }

    /// Submits the recording followed by a copy of the first `bytes` of
    /// `buffer` (and the pass timestamps) to a readback buffer, without
    /// waiting: collect the result with [`Gpu::finish`].
    pub(crate) fn submit_with_readback(
        self,
        buffer: &wgpu::Buffer,
        bytes: u64,
        upload: Option<&mut UploadBuffer>,
    ) -> Pending {
        self.submit_with_readback_at(buffer, 0, bytes, upload)
    }

    /// [`Recorder::submit_with_readback`] from byte `offset` of `buffer`.
    pub(super) fn submit_with_readback_at(
        self,
        buffer: &wgpu::Buffer,
        offset: u64,
        bytes: u64,
        upload: Option<&mut UploadBuffer>,
    ) -> Pending {
        self.submit_with_readback_parts(&[(buffer, offset, bytes)], upload)
    }

    /// Submits the recording with copies of several parts (buffer, byte
    /// offset, bytes; offsets multiples of 4) into one readback buffer,
    /// without waiting: one round trip for all of them. [`Gpu::finish_with`]
    /// hands them over one after another; [`split_parts`] separates them.
    pub(crate) fn submit_with_readback_parts(
        self,
        parts: &[(&wgpu::Buffer, u64, u64)],
        upload: Option<&mut UploadBuffer>,
    ) -> Pending {
        self.submit_with_readback_parts_in(parts, upload, 0)
    }

    /// [`Recorder::submit_with_readback`] into a readback buffer with room
    /// for at least `room` bytes of data: a stream of chunks of several
    /// sizes then reuses one size of buffer (a new one costs the driver a
    /// pinning of its pages, and a pool of mixed sizes evicts the large).
    pub(crate) fn submit_with_readback_in(
        self,
        buffer: &wgpu::Buffer,
        bytes: u64,
        upload: Option<&mut UploadBuffer>,
        room: u64,
    ) -> Pending {
        self.submit_with_readback_parts_in(&[(buffer, 0, bytes)], upload, room)
    }

    pub(super) fn submit_with_readback_parts_in(
        self,
        parts: &[(&wgpu::Buffer, u64, u64)],
        upload: Option<&mut UploadBuffer>,
        room: u64,
    ) -> Pending {
        let Recorder {
            gpu,
            mut encoder,
            queries,
            passes,
            names,
        } = self;
        let starts = part_starts(parts.iter().map(|p| p.2));
        let bytes = parts.last().map_or(0, |p| starts[parts.len() - 1] + p.2);
        let data = bytes.div_ceil(8) * 8;
        let timed = queries
            .as_ref()
            .filter(|_| passes > 0)
            .map(|q| (q, 2 * passes));
        let size = data.max(room.div_ceil(8) * 8) + timed.map_or(0, |(_, n)| 8 * u64::from(n));
        let staging = gpu.staging_buffer(size_class(size.max(8)));
        for (&(buffer, offset, len), &at) in parts.iter().zip(&starts) {
            if len > 0 {
                encoder.copy_buffer_to_buffer(buffer, offset, &staging, at, len.div_ceil(4) * 4);
            }
        }
        let mut timestamps = None;
        if let Some((q, n)) = timed {
            let resolve = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("timestamps"),
                size: 8 * u64::from(n),
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            encoder.resolve_query_set(q, 0..n, &resolve, 0);
            encoder.copy_buffer_to_buffer(&resolve, 0, &staging, data, 8 * u64::from(n));
            timestamps = Some((data, n));
        }
        let index = gpu.queue.submit([encoder.finish()]);
        let (tx, mapped) = futures_channel::oneshot::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        if let Some(up) = upload {
            up.remap_after(index.clone());
        }
        Pending {
            inner: Some(PendingReadback {
                staging,
                bytes,
                timestamps,
                names,
                index,
                mapped,
            }),
            live_bytes: gpu.live_bytes.clone(),
        }
    }
}

/// Splits `threads` invocations into an (x, y) workgroup grid within the
/// per-dimension limit; shaders rebuild the linear index from both.
pub(super) fn grid(threads: u64, max_per_dim: u32) -> Result<(u32, u32)> {
    let groups = threads.div_ceil(u64::from(WORKGROUP_SIZE));
    let max = u64::from(max_per_dim.max(1));
    let y = groups.div_ceil(max);
    if y > max {
        return Err(Error::InvalidInput(format!(
            "{threads} GPU threads exceed one dispatch; the chunk planner should have split this"
        )));
    }
    let x = groups.div_ceil(y);
    Ok((x as u32, y as u32))
}

impl Gpu {
    /// A recording without timestamp queries: its [`Recorder::submit`]
    /// returns without waiting for the GPU (work on device arrays, which
    /// queues behind what came before and is waited for only when read).
    pub(crate) fn recorder_untimed(&self) -> Recorder<'_> {
        Recorder {
            gpu: self,
            encoder: self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None }),
            queries: None,
            passes: 0,
            names: Vec::new(),
        }
    }

    /// Waits until the GPU has finished everything submitted so far.
    pub fn synchronize(&self) -> Result<()> {
        let index = self.queue.submit([]);
        self.wait_for(index)
    }

    pub(crate) fn recorder(&self) -> Recorder<'_> {
        let encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        let queries = self.timestamp_period_ns.map(|_| {
            self.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: 2 * MAX_TIMED_PASSES,
            })
        });
        Recorder {
            gpu: self,
            encoder,
            queries,
            passes: 0,
            names: Vec::new(),
        }
    }
}

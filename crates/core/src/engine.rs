//! The GPU engine: one adapter + device + queue, cached pipelines, a buffer
//! pool, dispatch recording with optional timestamp queries, and readback.
//! The same code runs natively (Vulkan/Metal/DX12/GL) and in the browser
//! (WebGPU); only `poll` differs.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use wgpu::util::DeviceExt;

use crate::error::{Error, Result};

/// Threads per workgroup of 1-D dispatches.
pub const WORKGROUP_SIZE: u32 = 256;
/// Workgroup shape of the 3-D `_grid` entry points (x, y, z). Measured on
/// 2048² f32: 32x8 and 16x16 tied best, 64x4 close, 256x1 much slower for
/// 7x7 windows (neighbouring rows are then on other cores).
pub const GRID_WORKGROUP: [u32; 3] = [32, 8, 1];
/// Maximum number of timestamped passes in one recording.
pub(crate) const MAX_TIMED_PASSES: u32 = 64;

/// How to open the GPU.
#[derive(Clone, Debug, Default)]
pub struct GpuOptions {
    /// Case-insensitive substring of the adapter name to pick, or `#N` for
    /// the N-th adapter of [`adapters`]; `None` takes the high-performance
    /// default.
    pub adapter: Option<String>,
    /// Device memory the operations may use at once, in bytes; the buffer
    /// pool also keeps at most this much between calls. `None`: half of the
    /// largest buffer the device allows, at most 4 GiB, for planning, and a
    /// pool of up to a quarter of a discrete GPU's own memory where the
    /// driver reports it (Vulkan), so that large operations reuse their
    /// buffers from call to call.
    pub memory_budget: Option<u64>,
    /// Cap on one storage binding below the device's own limit, in bytes.
    /// Tests use it to force the chunked paths on small inputs.
    pub max_binding_size: Option<u64>,
}

/// Description of the opened adapter, for `gpuscope devices` and reports.
#[derive(Clone, Debug)]
pub struct DeviceSummary {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub max_binding_size: u64,
    pub max_buffer_size: u64,
    pub memory_budget: u64,
    /// Bytes the buffer pool keeps at most between calls.
    pub pool_limit: u64,
    pub timestamps: bool,
}

/// The shared GPU context. Create it once and pass `&Gpu` to every operation.
pub struct Gpu {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    max_binding: u64,
    max_buffer: u64,
    memory_budget: u64,
    /// The most the buffer pool keeps between calls (see `GpuOptions`).
    pool_limit: u64,
    timestamp_period_ns: Option<f32>,
    pipelines: Mutex<HashMap<String, wgpu::ComputePipeline>>,
    pool: Mutex<Vec<wgpu::Buffer>>,
    live_bytes: Arc<AtomicU64>,
    last_kernel_ns: AtomicU64,
    total_kernel_ns: AtomicU64,
    /// Readback buffers kept for reuse by streaming operations.
    staging: Mutex<Vec<wgpu::Buffer>>,
    /// Upload buffers kept between streams (see [`Gpu::release_upload`]).
    uploads: Mutex<Vec<UploadBuffer>>,
    /// Entry-point name of every pipeline built, for the pass profile.
    entry_names: Mutex<HashMap<wgpu::ComputePipeline, String>>,
    /// GPU time and pass count per entry point, when GPUSCOPE_PROFILE is set.
    profile: Option<Mutex<BTreeMap<String, (u64, u64)>>>,
    /// Shaders keep wgpu's bounds checks and loop bounding (see `pipeline`).
    checked_shaders: bool,
}

/// A host-visible buffer the host fills and the GPU copies from, reused
/// chunk after chunk (a fresh staging allocation per chunk costs as much as
/// the copy itself).
pub(crate) struct UploadBuffer {
    buffer: wgpu::Buffer,
    /// The mapping requested after the last use, and that use's submission.
    ready: Option<(
        futures_channel::oneshot::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
        wgpu::SubmissionIndex,
    )>,
}

impl UploadBuffer {
    /// Maps the buffer again for the next fill once submission `index`
    /// (the last one copying out of it) is done.
    fn remap_after(&mut self, index: wgpu::SubmissionIndex) {
        let (tx, ready) = futures_channel::oneshot::channel();
        self.buffer.map_async(wgpu::MapMode::Write, .., move |r| {
            let _ = tx.send(r);
        });
        self.ready = Some((ready, index));
    }
}

/// Work submitted with its result on the way back to the host; collect it
/// with [`Gpu::finish`]. Streaming operations keep a few of these in flight
/// so that transfers and kernels of consecutive chunks overlap.
pub(crate) struct Pending {
    /// Taken when collected; a Pending dropped uncollected (an error before
    /// it was its turn) frees its readback buffer itself.
    inner: Option<PendingReadback>,
    live_bytes: Arc<AtomicU64>,
}

struct PendingReadback {
    staging: wgpu::Buffer,
    bytes: u64,
    /// Offset and count of the pass timestamps copied behind the data.
    timestamps: Option<(u64, u32)>,
    /// Entry point of each timed pass.
    names: Vec<String>,
    index: wgpu::SubmissionIndex,
    mapped: futures_channel::oneshot::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
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

/// Lists the adapters this machine offers (native only; browsers expose one).
#[cfg(not(target_arch = "wasm32"))]
pub fn list_adapters() -> Vec<String> {
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()))
        .iter()
        .map(|a| {
            let i = a.get_info();
            format!("{} ({:?}, {:?})", i.name, i.backend, i.device_type)
        })
        .collect()
}

/// One adapter of [`adapters`]: its place in the enumeration (`#index`
/// as [`GpuOptions::adapter`] opens exactly this one), name, backend and
/// whether it is a CPU/software rasteriser (llvmpipe, SwiftShader, WARP).
#[derive(Clone, Debug)]
pub struct AdapterEntry {
    pub index: usize,
    pub name: String,
    pub backend: String,
    pub software: bool,
}

/// The adapters in enumeration order (the order `#index` refers to;
/// native only).
#[cfg(not(target_arch = "wasm32"))]
pub fn adapters() -> Vec<AdapterEntry> {
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()))
        .iter()
        .enumerate()
        .map(|(index, a)| {
            let i = a.get_info();
            AdapterEntry {
                index,
                name: i.name,
                backend: format!("{:?}", i.backend),
                software: i.device_type == wgpu::DeviceType::Cpu,
            }
        })
        .collect()
}

impl Gpu {
    /// Opens an adapter and a device with the adapter's own limits, so that
    /// chunk sizes follow what the hardware really offers.
    pub async fn new(options: GpuOptions) -> Result<Gpu> {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = match &options.adapter {
            Some(wanted) => pick_adapter(&instance, wanted).await?,
            None => instance
                .request_adapter(&wgpu::RequestAdapterOptions {
                    power_preference: wgpu::PowerPreference::HighPerformance,
                    force_fallback_adapter: false,
                    compatible_surface: None,
                    apply_limit_buckets: false,
                })
                .await
                .map_err(|e| Error::NoAdapter(e.to_string()))?,
        };
        let info = adapter.get_info();
        let limits = adapter.limits();
        let timestamps = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        let required_features = if timestamps {
            wgpu::Features::TIMESTAMP_QUERY
        } else {
            wgpu::Features::empty()
        };
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("gpuscope"),
                required_features,
                required_limits: limits.clone(),
                experimental_features: wgpu::ExperimentalFeatures::disabled(),
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            .map_err(|e| Error::NoAdapter(format!("{}: {e}", info.name)))?;
        let max_buffer = limits.max_buffer_size;
        let mut max_binding = limits.max_storage_buffer_binding_size.min(max_buffer);
        if let Some(cap) = options.max_binding_size {
            max_binding = max_binding.min(cap.max(1024));
        }
        // Bindings must be multiples of 4 bytes; keep the planner's unit aligned.
        max_binding &= !255;
        let memory_budget = options
            .memory_budget
            .unwrap_or_else(|| (max_buffer / 2).min(4 << 30))
            .max(4096);
        // Fresh buffers of a few GB cost more than the work of a call
        // (slic-3d-500 on an H100: 333 ms a call with a 2 GiB pool, 218 ms
        // with all of its ~4.5 GB pooled). CuPy's pool keeps everything.
        let pool_limit = match options.memory_budget {
            Some(_) => memory_budget,
            None if info.device_type == wgpu::DeviceType::DiscreteGpu => {
                memory_budget.max(device_memory(&adapter).unwrap_or(0) / 4)
            }
            None => memory_budget,
        };
        let timestamp_period_ns = timestamps.then(|| queue.get_timestamp_period());
        let gpu = Gpu {
            device,
            queue,
            info,
            max_binding,
            max_buffer,
            memory_budget,
            pool_limit,
            timestamp_period_ns,
            pipelines: Mutex::new(HashMap::new()),
            pool: Mutex::new(Vec::new()),
            live_bytes: Arc::new(AtomicU64::new(0)),
            last_kernel_ns: AtomicU64::new(0),
            total_kernel_ns: AtomicU64::new(0),
            staging: Mutex::new(Vec::new()),
            uploads: Mutex::new(Vec::new()),
            entry_names: Mutex::new(HashMap::new()),
            profile: profiling_requested().then(|| Mutex::new(BTreeMap::new())),
            checked_shaders: env_set("GPUSCOPE_CHECKED_SHADERS"),
        };
        crate::probe::check(&gpu).await?;
        // A new context starts with an empty pool (tests count its bytes).
        gpu.trim();
        Ok(gpu)
    }

    pub fn summary(&self) -> DeviceSummary {
        DeviceSummary {
            name: self.info.name.clone(),
            backend: format!("{:?}", self.info.backend),
            device_type: format!("{:?}", self.info.device_type),
            driver: format!("{} {}", self.info.driver, self.info.driver_info)
                .trim()
                .to_string(),
            max_binding_size: self.max_binding,
            max_buffer_size: self.max_buffer,
            memory_budget: self.memory_budget,
            pool_limit: self.pool_limit,
            timestamps: self.timestamp_period_ns.is_some(),
        }
    }

    /// The largest storage binding an operation may use, in bytes.
    pub fn max_binding_size(&self) -> u64 {
        self.max_binding
    }

    /// Device memory the operations may hold at once, in bytes.
    pub fn memory_budget(&self) -> u64 {
        self.memory_budget
    }

    /// Bytes of device buffers currently allocated by this context, pooled
    /// or in use. Tests use it to prove that calls leave nothing behind.
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes.load(Ordering::Relaxed)
    }

    /// GPU time of the kernels of the last timed recording, in nanoseconds,
    /// when the adapter offers timestamp queries.
    pub fn last_kernel_ns(&self) -> Option<u64> {
        self.timestamp_period_ns
            .map(|_| self.last_kernel_ns.load(Ordering::Relaxed))
    }

    /// GPU time of every timed kernel since the last [`Gpu::reset_kernel_time`],
    /// in nanoseconds, when the adapter offers timestamp queries.
    pub fn kernel_ns_total(&self) -> Option<u64> {
        self.timestamp_period_ns
            .map(|_| self.total_kernel_ns.load(Ordering::Relaxed))
    }

    /// Starts a new sum for [`Gpu::kernel_ns_total`].
    pub fn reset_kernel_time(&self) {
        self.total_kernel_ns.store(0, Ordering::Relaxed);
    }

    fn add_kernel_ticks(&self, ticks: &[u64], names: &[String]) -> u64 {
        let period = f64::from(self.timestamp_period_ns.unwrap_or(1.0));
        let per_pass: Vec<u64> = ticks
            .chunks_exact(2)
            .map(|p| p[1].saturating_sub(p[0]))
            .collect();
        let ns = (per_pass.iter().sum::<u64>() as f64 * period) as u64;
        self.total_kernel_ns.fetch_add(ns, Ordering::Relaxed);
        if let Some(Ok(mut profile)) = self.profile.as_ref().map(Mutex::lock) {
            for (name, t) in names.iter().zip(&per_pass) {
                let e = profile.entry(name.clone()).or_default();
                e.0 += (*t as f64 * period) as u64;
                e.1 += 1;
            }
        }
        ns
    }

    /// Starts timing a host-side phase for the profile (None when not
    /// profiling): pass the result to [`Gpu::host_done`].
    pub(crate) fn host_clock(&self) -> Option<std::time::Instant> {
        self.profile.as_ref().map(|_| std::time::Instant::now())
    }

    /// Adds the wall time since `clock` to the profile as "host: <name>".
    pub(crate) fn host_done(&self, name: &str, clock: Option<std::time::Instant>) {
        if let (Some(t), Some(Ok(mut profile))) = (clock, self.profile.as_ref().map(Mutex::lock)) {
            let e = profile.entry(format!("host: {name}")).or_default();
            e.0 += t.elapsed().as_nanos() as u64;
            e.1 += 1;
        }
    }

    /// Empties the profile (a benchmark's warm-up left out of it).
    pub fn reset_profile(&self) {
        if let Some(Ok(mut profile)) = self.profile.as_ref().map(Mutex::lock) {
            profile.clear();
        }
    }

    /// GPU time per entry point (name, milliseconds, passes) since the
    /// context was made or the last [`Gpu::reset_profile`], when the
    /// environment variable GPUSCOPE_PROFILE is set and the adapter has
    /// timestamp queries, and the wall time of the host phases timed with
    /// [`Gpu::host_clock`]; slowest first.
    pub fn pass_profile(&self) -> Vec<(String, f64, u64)> {
        let Some(Ok(profile)) = self.profile.as_ref().map(Mutex::lock) else {
            return Vec::new();
        };
        let mut rows: Vec<(String, f64, u64)> = profile
            .iter()
            .map(|(k, &(ns, n))| (k.clone(), ns as f64 / 1e6, n))
            .collect();
        rows.sort_by(|a, b| b.1.total_cmp(&a.1));
        rows
    }

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
    fn wait_for(&self, index: wgpu::SubmissionIndex) -> Result<()> {
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
        if bytes.len() as u64 > up.buffer.size() {
            return Err(Error::Device("an upload larger than its buffer".into()));
        }
        let len = bytes.len();
        let end = (len as u64).div_ceil(4) * 4;
        let mut view = up
            .buffer
            .slice(..end.max(4))
            .get_mapped_range_mut()
            .map_err(|e| Error::Device(format!("mapping an upload buffer failed: {e}")))?;
        let dst = view.slice(..len).as_raw_ptr().as_ptr().cast::<u8>();
        let plan = crate::copies::plan(bytes.as_ptr(), dst, len, threads);
        // SAFETY: the parts tile the mapped view (alive until after the
        // copy) and `bytes`; `meanwhile` touches neither.
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

    fn staging_buffer(&self, size: u64) -> wgpu::Buffer {
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
    fn recycle_staging(&self, buffer: wgpu::Buffer) {
        if let Some(old) = keep_newest(&self.staging, buffer, STAGING_KEPT) {
            self.destroy(old);
        }
    }

    /// A compute pipeline for `entry` of `source`, built once per device.
    pub(crate) fn pipeline(&self, source: &str, entry: &str) -> Result<wgpu::ComputePipeline> {
        self.pipeline_with(source, entry, &[])
    }

    /// `pipeline` with values for the shader's `override` constants (sizes
    /// the driver can unroll loops over); one pipeline per set of values.
    pub(crate) fn pipeline_with(
        &self,
        source: &str,
        entry: &str,
        constants: &[(&str, f64)],
    ) -> Result<wgpu::ComputePipeline> {
        let mut key = format!("{entry}@{:016x}", fingerprint(source));
        for (name, value) in constants {
            key.push_str(&format!(" {name}={value}"));
        }
        let mut cache = self
            .pipelines
            .lock()
            .map_err(|_| Error::Device("pipeline cache poisoned".into()))?;
        if let Some(p) = cache.get(&key) {
            return Ok(p.clone());
        }
        let descriptor = wgpu::ShaderModuleDescriptor {
            label: Some(entry),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        };
        let module = if self.checked_shaders {
            self.device.create_shader_module(descriptor)
        } else {
            // SAFETY: the two checks dropped cost a large share of the time
            // of loop-heavy kernels. Every loop of our shaders is bounded by
            // its parameters (no infinite loop for a driver to assume
            // away), and buffer accesses stay within the driver's own
            // robustness (Vulkan's robustBufferAccess, the browser's
            // WebGPU); workgroup-array indices are bounded by construction
            // and every kernel is tested against its CPU twin on lavapipe
            // in this mode. Integer-division guards stay on.
            // GPUSCOPE_CHECKED_SHADERS=1 restores every check (and the
            // zeroing of workgroup memory, below).
            unsafe {
                self.device.create_shader_module_trusted(
                    descriptor,
                    wgpu::ShaderRuntimeChecks {
                        bounds_checks: false,
                        force_loop_bounding: false,
                        ..wgpu::ShaderRuntimeChecks::checked()
                    },
                )
            }
        };
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: None,
                module: &module,
                entry_point: Some(entry),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants,
                    // Every kernel writes the workgroup memory it reads
                    // before reading it (shaders/*: tiles, histograms,
                    // scan partials; the generated median tile), so the
                    // zeroing WebGPU prescribes is only cost here (a
                    // measurable share of spots' erode_final). Browsers zero
                    // it regardless.
                    zero_initialize_workgroup_memory: self.checked_shaders,
                },
                cache: None,
            });
        cache.insert(key, pipeline.clone());
        if let Ok(mut names) = self.entry_names.lock() {
            names.insert(pipeline.clone(), entry.to_string());
        }
        Ok(pipeline)
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

    fn pooled_bytes(&self) -> u64 {
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

    fn destroy(&self, buffer: wgpu::Buffer) {
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

    /// Writes `bytes` at the start of `buffer` (before the next submission).
    /// Large writes go in parts of READ_CHUNK: each write stages its bytes
    /// in a fresh host-visible allocation, which for hundreds of megabytes
    /// costs more than the copy (parts come from the allocator's blocks).
    pub(crate) fn upload(&self, buffer: &wgpu::Buffer, bytes: &[u8]) {
        for (i, part) in bytes.chunks(READ_CHUNK as usize).enumerate() {
            self.queue.write_buffer(buffer, i as u64 * READ_CHUNK, part);
        }
    }

    /// Writes `bytes` into `buffer` from byte `offset` (a multiple of 4),
    /// before the next submission.
    pub(crate) fn upload_at(&self, buffer: &wgpu::Buffer, offset: u64, bytes: &[u8]) {
        self.queue.write_buffer(buffer, offset, bytes);
    }

    pub(crate) fn uniform<T: bytemuck::Pod>(&self, value: &T) -> wgpu::Buffer {
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("params"),
                contents: bytemuck::bytes_of(value),
                usage: wgpu::BufferUsages::UNIFORM,
            })
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
    async fn read_vec_at<T: bytemuck::Pod>(
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
    async fn read_into(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        out: &mut [std::mem::MaybeUninit<u8>],
    ) -> Result<()> {
        let total = out.len() as u64;
        if total == 0 {
            return Ok(());
        }
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

/// Records dispatches into one command buffer, timestamping each pass when
/// the adapter allows it.
pub(crate) struct Recorder<'g> {
    gpu: &'g Gpu,
    encoder: wgpu::CommandEncoder,
    queries: Option<wgpu::QuerySet>,
    passes: u32,
    /// Entry point of each timed pass (for the profile).
    names: Vec<String>,
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

    /// Whether `extent` (x, y, z) should run on a `_grid` entry point
    /// (workgroup [`GRID_WORKGROUP`]): it fits one dispatch and fills the
    /// workgroups. Narrow boxes (an RGB image's 3 channels along x, a 1-D
    /// signal's single row) would leave most invocations idle: they, and
    /// grids over the per-dimension limit, use the 1-D entry.
    pub(crate) fn grid_fits(&self, extent: [usize; 3]) -> bool {
        let max = self
            .gpu
            .device
            .limits()
            .max_compute_workgroups_per_dimension as usize;
        let filled =
            extent[0] >= GRID_WORKGROUP[0] as usize && extent[1] >= GRID_WORKGROUP[1] as usize;
        filled && (0..3).all(|a| extent[a].div_ceil(GRID_WORKGROUP[a] as usize) <= max)
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
        if !self.grid_fits(extent) {
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

    fn pass(
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

    fn bind_group(
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
    fn begin_pass(&mut self, pipeline: &wgpu::ComputePipeline) -> wgpu::ComputePass<'_> {
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
    fn timestamp_index(&mut self, pipeline: &wgpu::ComputePipeline) -> Option<u32> {
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
    fn submit_with_readback_at(
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

    fn submit_with_readback_parts_in(
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

/// Bytes per part of a large read or write (see `Gpu::read_into`, `Gpu::upload`).
const READ_CHUNK: u64 = 64 << 20;

/// Where parts of these sizes start when laid one after another, each
/// from a multiple of 256 bytes ([`Recorder::submit_with_readback_parts`]):
/// SLIC's 32 MB of labels behind 20 bytes of counts (4-byte aligned) took
/// measurably longer to come back than from an aligned start (slic-3d-200
/// host to host).
fn part_starts(sizes: impl Iterator<Item = u64>) -> Vec<u64> {
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
fn spare_bytes<T: bytemuck::Pod>(
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

/// Adds `item` to `pool`; returns the oldest item when the pool then holds
/// more than `kept` (or `item` itself if the lock is poisoned).
fn keep_newest<T>(pool: &Mutex<Vec<T>>, item: T, kept: usize) -> Option<T> {
    match pool.lock() {
        Ok(mut pool) => {
            pool.push(item);
            (pool.len() > kept).then(|| pool.remove(0))
        }
        Err(_) => Some(item),
    }
}

/// Upload and readback buffers kept between calls, the newest first.
const UPLOADS_KEPT: usize = 2;
const STAGING_KEPT: usize = 4;

/// Splits `threads` invocations into an (x, y) workgroup grid within the
/// per-dimension limit; shaders rebuild the linear index from both.
/// The largest device-local memory heap, in bytes, where the adapter is a
/// Vulkan one (the others report no heap sizes through wgpu).
#[cfg(not(target_arch = "wasm32"))]
fn device_memory(adapter: &wgpu::Adapter) -> Option<u64> {
    // SAFETY: only reads the physical device's memory properties through
    // the adapter's own instance; nothing is created or kept.
    let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
    let props = unsafe {
        hal.shared_instance()
            .raw_instance()
            .get_physical_device_memory_properties(hal.raw_physical_device())
    };
    let count = (props.memory_heap_count as usize).min(props.memory_heaps.len());
    // VK_MEMORY_HEAP_DEVICE_LOCAL_BIT
    props.memory_heaps[..count]
        .iter()
        .filter(|h| h.flags.as_raw() & 1 != 0)
        .map(|h| h.size)
        .max()
}

#[cfg(target_arch = "wasm32")]
fn device_memory(_adapter: &wgpu::Adapter) -> Option<u64> {
    None
}

fn grid(threads: u64, max_per_dim: u32) -> Result<(u32, u32)> {
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

/// Buffer sizes are rounded to four classes per power of two so that pooled
/// buffers are reused across slightly different shapes.
fn size_class(bytes: u64) -> u64 {
    if bytes <= 4096 {
        return 4096;
    }
    let top = 63 - bytes.leading_zeros();
    let step = 1u64 << (top - 2);
    bytes.div_ceil(step) * step
}

fn profiling_requested() -> bool {
    env_set("GPUSCOPE_PROFILE")
}

fn env_set(name: &str) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    return std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0");
    #[cfg(target_arch = "wasm32")]
    return {
        let _ = name;
        false
    };
}

fn fingerprint(s: &str) -> u64 {
    // FNV-1a over 8-byte words: every dispatch looks its pipeline up by
    // source, and byte by byte a 28 kB shader cost about a quarter of a
    // spot frame's recording.
    let words = s.as_bytes().chunks(8).map(|c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(w)
    });
    words.fold(0xcbf2_9ce4_8422_2325 ^ s.len() as u64, |h, w| {
        (h ^ w).wrapping_mul(0x100_0000_01b3)
    })
}

async fn pick_adapter(instance: &wgpu::Instance, wanted: &str) -> Result<wgpu::Adapter> {
    let adapters = instance.enumerate_adapters(wgpu::Backends::all()).await;
    let needle = wanted.to_lowercase();
    let names: Vec<String> = adapters.iter().map(|a| a.get_info().name).collect();
    // `#N`: the N-th adapter of the enumeration (two GPUs of one name).
    if let Some(index) = wanted
        .strip_prefix('#')
        .and_then(|n| n.parse::<usize>().ok())
    {
        let n = adapters.len();
        return adapters.into_iter().nth(index).ok_or_else(|| {
            Error::NoAdapter(format!(
                "there is no adapter #{index}; this machine has {n} (see `gpuscope devices`)"
            ))
        });
    }
    adapters
        .into_iter()
        .find(|a| a.get_info().name.to_lowercase().contains(&needle))
        .ok_or_else(|| {
            Error::NoAdapter(format!(
                "no adapter matches '{wanted}'; available: {}",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_round_up_within_a_quarter_octave() {
        assert_eq!(size_class(1), 4096);
        assert_eq!(size_class(5000), 5120);
        for b in [4097u64, 100_000, 1 << 20, (1 << 20) + 1, 123_456_789] {
            let c = size_class(b);
            assert!(c >= b && c <= b + b / 4 + 1, "{b} -> {c}");
        }
    }

    #[test]
    fn upload_pool_keeps_the_newest_two_sizes() {
        let gpu = pollster::block_on(Gpu::new(GpuOptions::default()))
            .expect("GPU tests need a Vulkan driver (apt-get install mesa-vulkan-drivers)");
        let sizes = [64u64 << 10, 128 << 10, 256 << 10];
        for &s in &sizes {
            let up = gpu.upload_buffer(s);
            gpu.release_upload(up);
        }
        let kept = gpu.live_bytes();
        // The last two sizes come back from the pool; the first was evicted
        // (a pool that refused the third kept the first two instead).
        for &s in &sizes[1..] {
            let up = gpu.upload_buffer(s);
            assert_eq!(gpu.live_bytes(), kept, "{s} bytes were not pooled");
            gpu.release_upload(up);
        }
        let up = gpu.upload_buffer(sizes[0]);
        assert!(gpu.live_bytes() > kept, "the oldest size was still pooled");
        gpu.release_upload(up);
        gpu.trim();
        assert_eq!(gpu.live_bytes(), 0);
    }

    #[test]
    fn pool_keeps_the_newest_buffers_within_the_budget() {
        const KB16: u64 = 16 << 10;
        let gpu = pollster::block_on(Gpu::new(GpuOptions {
            memory_budget: Some(5 * KB16 / 2),
            ..GpuOptions::default()
        }))
        .expect("GPU tests need a Vulkan driver (apt-get install mesa-vulkan-drivers)");
        let take = || pollster::block_on(gpu.storage(KB16, "test")).unwrap();
        let (a, b, c) = (take(), take(), take());
        assert_eq!(gpu.live_bytes(), 3 * KB16);
        gpu.recycle(a.clone());
        gpu.recycle(b.clone());
        gpu.recycle(c.clone());
        // Two fit the budget: the oldest (a) went.
        assert_eq!(gpu.live_bytes(), 2 * KB16);
        assert_eq!(gpu.pooled_bytes(), 2 * KB16);
        let again = take();
        assert!(again != a && (again == b || again == c));
        assert_eq!(gpu.live_bytes(), 2 * KB16);
        // Larger than the whole budget: never pooled.
        let big = pollster::block_on(gpu.storage(4 * KB16, "test")).unwrap();
        gpu.recycle(big);
        assert_eq!(gpu.live_bytes(), 2 * KB16);
        gpu.recycle(again);
        gpu.trim();
        assert_eq!(gpu.live_bytes(), 0);
    }

    #[test]
    fn grid_covers_all_threads_within_limits() {
        let (x, y) = grid(70_000 * 256, 65_535).unwrap();
        assert!(x <= 65_535 && y <= 65_535);
        assert!(u64::from(x) * u64::from(y) * 256 >= 70_000 * 256);
        assert!(grid(u64::MAX / 2, 65_535).is_err());
    }
}

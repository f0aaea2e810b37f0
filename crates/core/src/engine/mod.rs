//! The GPU engine: one adapter + device + queue, cached pipelines, a buffer
//! pool, dispatch recording with optional timestamp queries, and readback.
//! The same code runs natively (Vulkan/Metal/DX12/GL) and in the browser
//! (WebGPU); only `poll` differs.
//!
//! By role: [`adapters`] (finding one), `pipelines` (cached per device),
//! `pool` (device buffers), `upload` and `readback` (crossing the bus),
//! `recorder` (dispatches into a submission) and `profile` (timestamps).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};

mod adapters;
mod pipelines;
mod pool;
mod profile;
mod readback;
mod recorder;
mod upload;

pub use adapters::AdapterEntry;
use adapters::*;
#[cfg(not(target_arch = "wasm32"))]
pub use adapters::{adapters, list_adapters};
pub(crate) use pipelines::Module;
use pool::*;
use profile::*;
use readback::*;
pub(crate) use readback::{Pending, split_parts, vec_from_bytes};
pub(crate) use recorder::Recorder;
pub(crate) use upload::UploadBuffer;

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
    /// No timestamp queries, so no kernel times: a submission then returns
    /// without reading them back, one wait fewer per call (front ends that
    /// report no GPU time; `GPUSCOPE_PROFILE` turns them back on).
    pub untimed: bool,
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
    pipelines: Mutex<HashMap<pipelines::Kernel, wgpu::ComputePipeline>>,
    /// Kernels generated on the host (see [`Gpu::generated`]).
    generated: Mutex<pipelines::Generated>,
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
    /// Bytes written to and read from the device (see [`Gpu::bus_bytes`]).
    bus: [AtomicU64; 2],
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
        let timestamps = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY)
            && (!options.untimed || profile::profiling_requested());
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
            generated: Mutex::new(pipelines::Generated::default()),
            pool: Mutex::new(Vec::new()),
            live_bytes: Arc::new(AtomicU64::new(0)),
            last_kernel_ns: AtomicU64::new(0),
            total_kernel_ns: AtomicU64::new(0),
            staging: Mutex::new(Vec::new()),
            uploads: Mutex::new(Vec::new()),
            entry_names: Mutex::new(HashMap::new()),
            profile: profiling_requested().then(|| Mutex::new(BTreeMap::new())),
            checked_shaders: env_set("GPUSCOPE_CHECKED_SHADERS"),
            bus: [AtomicU64::new(0), AtomicU64::new(0)],
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
}

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

fn env_set(name: &str) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    return std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0");
    #[cfg(target_arch = "wasm32")]
    return {
        let _ = name;
        false
    };
}

#[cfg(test)]
mod tests {
    use super::recorder::grid;
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

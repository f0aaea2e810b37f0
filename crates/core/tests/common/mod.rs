//! Shared test fixtures: one device per test binary (opening one is slow on
//! lavapipe), plus a second one whose bindings are capped to force chunking.
#![allow(dead_code)]

use std::sync::OnceLock;

use gpuscope_core::{Gpu, GpuOptions};

pub fn open(options: GpuOptions) -> Gpu {
    let gpu = pollster::block_on(Gpu::new(options)).unwrap_or_else(|e| {
        panic!("GPU tests need a Vulkan driver (apt-get install mesa-vulkan-drivers): {e}")
    });
    // tests/all.sh runs the suite again with WGPU_BACKEND=gl: make sure that
    // run really is on GL, not on the Vulkan adapter a second time.
    if let Ok(wanted) = std::env::var("WGPU_BACKEND") {
        let backend = gpu.summary().backend.to_lowercase();
        assert!(
            wanted
                .to_lowercase()
                .split(',')
                .any(|w| backend.contains(w.trim())),
            "WGPU_BACKEND={wanted} but the tests opened a {backend} adapter"
        );
    }
    gpu
}

/// The default device (lavapipe in CI).
pub fn gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| open(GpuOptions::default()))
}

/// A device whose bindings are capped at 64 KiB, so that even small inputs
/// go through the chunk planner and the halo exchange.
pub fn tiny_gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| {
        open(GpuOptions {
            max_binding_size: Some(64 << 10),
            ..GpuOptions::default()
        })
    })
}

/// Deterministic pseudo-random values in [0, 1) (xorshift), no dependency.
pub fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64
        })
        .collect()
}

/// Whether this run is tests/all.sh's second pass on another backend
/// (`WGPU_BACKEND` set): tests of host code alone, which no backend
/// changes, return early there; the first pass runs them.
pub fn backend_rerun() -> bool {
    std::env::var_os("WGPU_BACKEND").is_some()
}

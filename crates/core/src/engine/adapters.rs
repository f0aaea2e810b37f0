//! The adapters a machine offers and picking one by name or index.

use crate::error::{Error, Result};

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

pub(super) async fn pick_adapter(instance: &wgpu::Instance, wanted: &str) -> Result<wgpu::Adapter> {
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
                "there is no adapter #{index}; this machine has {n}"
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

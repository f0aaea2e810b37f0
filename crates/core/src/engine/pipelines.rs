//! Compute pipelines, built once per device and cached.

use super::*;
use crate::error::{Error, Result};

pub(super) fn fingerprint(s: &str) -> u64 {
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

impl Gpu {
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
}

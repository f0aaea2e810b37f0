//! Compute pipelines, built once per device and cached.

use super::*;
use crate::error::{Error, Result};
use crate::shaders::Shader;

/// What a compute pipeline is built from, named without its WGSL text: the
/// device's cache is keyed by this, an entry point and the override
/// constants, so a dispatch never hashes or compares shader source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Module {
    /// A shader compiled into the binary.
    Fixed(Shader),
    /// A kernel generated on the host, registered by [`Gpu::generated`].
    Generated(usize),
}

impl From<Shader> for Module {
    fn from(shader: Shader) -> Self {
        Module::Fixed(shader)
    }
}

/// The pipeline cache's key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Kernel {
    module: Module,
    entry: &'static str,
    /// Names and bit patterns of the override constants.
    constants: Vec<(&'static str, u64)>,
}

/// Kernels generated on the host: each distinct text once, under the exact
/// parameters that determine it.
#[derive(Default)]
pub(super) struct Generated {
    ids: HashMap<String, usize>,
    sources: Vec<std::sync::Arc<str>>,
}

impl Gpu {
    /// Registers a kernel generated on the host under `key`, the parameters
    /// that determine its text (which `make` writes only the first time).
    /// Called once per operation, not per dispatch.
    pub(crate) fn generated(&self, key: String, make: impl FnOnce() -> String) -> Result<Module> {
        let mut g = self
            .generated
            .lock()
            .map_err(|_| Error::Device("generated-shader registry poisoned".into()))?;
        if let Some(&id) = g.ids.get(&key) {
            return Ok(Module::Generated(id));
        }
        let id = g.sources.len();
        g.sources.push(make().into());
        g.ids.insert(key, id);
        Ok(Module::Generated(id))
    }

    /// A compute pipeline for `entry` of `module`, built once per device.
    pub(crate) fn pipeline(
        &self,
        module: impl Into<Module>,
        entry: &'static str,
    ) -> Result<wgpu::ComputePipeline> {
        self.pipeline_with(module, entry, &[])
    }

    /// `pipeline` with values for the shader's `override` constants (sizes
    /// the driver can unroll loops over); one pipeline per set of values.
    pub(crate) fn pipeline_with(
        &self,
        module: impl Into<Module>,
        entry: &'static str,
        constants: &[(&'static str, f64)],
    ) -> Result<wgpu::ComputePipeline> {
        let module = module.into();
        let key = Kernel {
            module,
            entry,
            constants: constants.iter().map(|&(n, v)| (n, v.to_bits())).collect(),
        };
        let mut cache = self
            .pipelines
            .lock()
            .map_err(|_| Error::Device("pipeline cache poisoned".into()))?;
        if let Some(p) = cache.get(&key) {
            return Ok(p.clone());
        }
        let source: std::sync::Arc<str> = match module {
            Module::Fixed(shader) => shader.source().into(),
            Module::Generated(id) => self
                .generated
                .lock()
                .ok()
                .and_then(|g| g.sources.get(id).cloned())
                .ok_or_else(|| Error::Device(format!("no generated shader {id}")))?,
        };
        let descriptor = wgpu::ShaderModuleDescriptor {
            label: Some(entry),
            source: wgpu::ShaderSource::Wgsl(source.as_ref().into()),
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

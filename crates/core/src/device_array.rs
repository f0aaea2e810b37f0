//! Arrays that stay on the GPU between operations (CuPy users' habit): an
//! image is uploaded once, filtered, thresholded, labelled and measured on
//! the device, and only what the caller asks for comes back.
//!
//! Operations on device arrays queue their work and return without waiting
//! for the GPU, as CuPy's do; reading an array back (or
//! [`Gpu::synchronize`]) waits for what it depends on.
//!
//! A device array is one storage buffer holding the whole array, so it must
//! fit one binding; larger arrays go through the streamed paths that take
//! host memory. The operations on device arrays live with their families
//! (`filters::gpu::apply_on_device`, `median::gpu::median_on_device`,
//! `segment::on_device`) and give the answers of their host-memory twins.

use std::mem::MaybeUninit;

use bytemuck::Pod;

use crate::chunk::{self, Shape3, shape3};
use crate::engine::Gpu;
use crate::error::{Error, Result};
use crate::stream::{ChunkKernel, StreamSpec};

/// What a device array's elements are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elements {
    F32,
    /// Labels (scipy's int32 labels; 0 is the background).
    I32,
    /// A mask, one byte per element (0 or 1).
    Bool,
}

impl Elements {
    pub fn name(self) -> &'static str {
        match self {
            Elements::F32 => "float32",
            Elements::I32 => "int32",
            Elements::Bool => "bool",
        }
    }

    fn size(self) -> u64 {
        match self {
            Elements::F32 | Elements::I32 => 4,
            Elements::Bool => 1,
        }
    }
}

/// An array held in one GPU buffer. Give it back with [`DeviceArray::free`]
/// (dropping it frees the memory too, without returning the buffer to the
/// device's pool).
#[derive(Debug)]
pub struct DeviceArray {
    pub(crate) buffer: wgpu::Buffer,
    shape: Vec<usize>,
    elements: Elements,
}

impl DeviceArray {
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn elements(&self) -> Elements {
        self.elements
    }

    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of its elements (the buffer may be larger).
    pub fn bytes(&self) -> u64 {
        self.len() as u64 * self.elements.size()
    }

    pub(crate) fn shape3(&self) -> Result<Shape3> {
        shape3(&self.shape)
    }

    /// An array over a buffer an operation produced.
    pub(crate) fn wrap(buffer: wgpu::Buffer, shape: &[usize], elements: Elements) -> Self {
        DeviceArray {
            buffer,
            shape: shape.to_vec(),
            elements,
        }
    }

    /// Returns the buffer to the device's pool.
    pub fn free(self, gpu: &Gpu) {
        gpu.recycle(self.buffer);
    }

    /// A fresh array of `shape` and `elements` (contents undefined).
    pub(crate) async fn alloc(gpu: &Gpu, shape: &[usize], elements: Elements) -> Result<Self> {
        let s = shape3(shape)?;
        let n = s.iter().product::<usize>() as u64;
        let bytes = (n * elements.size()).div_ceil(4) * 4;
        if bytes > gpu.max_binding_size() {
            return Err(Error::InvalidInput(format!(
                "a {} array of shape {shape:?} takes {bytes} bytes, more than the device binds at once \
                 ({} bytes); keep it in host memory, where operations stream it in chunks",
                elements.name(),
                gpu.max_binding_size()
            )));
        }
        let buffer = gpu.storage(bytes, "device array").await?;
        Ok(DeviceArray {
            buffer,
            shape: shape.to_vec(),
            elements,
        })
    }

    /// Uploads float32 values of `shape`.
    pub async fn from_f32(gpu: &Gpu, data: &[f32], shape: &[usize]) -> Result<Self> {
        Self::upload(
            gpu,
            bytemuck::cast_slice(data),
            data.len(),
            shape,
            Elements::F32,
        )
        .await
    }

    /// Uploads int32 labels of `shape`.
    pub async fn from_i32(gpu: &Gpu, data: &[i32], shape: &[usize]) -> Result<Self> {
        Self::upload(
            gpu,
            bytemuck::cast_slice(data),
            data.len(),
            shape,
            Elements::I32,
        )
        .await
    }

    /// Uploads a mask of `shape`.
    pub async fn from_bool(gpu: &Gpu, data: &[bool], shape: &[usize]) -> Result<Self> {
        let bytes: Vec<u8> = data.iter().map(|&b| u8::from(b)).collect();
        Self::upload(gpu, &bytes, data.len(), shape, Elements::Bool).await
    }

    async fn upload(
        gpu: &Gpu,
        bytes: &[u8],
        count: usize,
        shape: &[usize],
        elements: Elements,
    ) -> Result<Self> {
        let expected = shape3(shape)?.iter().product::<usize>();
        if count != expected {
            return Err(Error::InvalidInput(format!(
                "{count} values given for shape {shape:?} ({expected} values)"
            )));
        }
        let array = Self::alloc(gpu, shape, elements).await?;
        if bytes.len().is_multiple_of(4) {
            gpu.upload(&array.buffer, bytes);
        } else {
            let mut padded = bytes.to_vec();
            padded.resize(bytes.len().div_ceil(4) * 4, 0);
            gpu.upload(&array.buffer, &padded);
        }
        Ok(array)
    }

    /// Copies the values back into `out` (as many as the array holds), of
    /// the array's element type: f32 for `F32`, i32 for `I32`, u8 (0 or 1)
    /// for `Bool`.
    pub async fn read_into<T: Pod>(&self, gpu: &Gpu, out: &mut [T]) -> Result<()> {
        // SAFETY: same layout; only initialised values are stored through it.
        let out = unsafe { &mut *(out as *mut [T] as *mut [MaybeUninit<T>]) };
        self.read_into_uninit(gpu, out).await
    }

    /// [`DeviceArray::read_into`] into memory not yet initialised (a fresh
    /// numpy array): every element is written when it returns Ok.
    pub async fn read_into_uninit<T: Pod>(
        &self,
        gpu: &Gpu,
        out: &mut [MaybeUninit<T>],
    ) -> Result<()> {
        let size = std::mem::size_of::<T>() as u64;
        if size != self.elements.size() || out.len() != self.len() {
            return Err(Error::InvalidInput(format!(
                "{} values of {size} bytes asked of a {} array of {} values",
                out.len(),
                self.elements.name(),
                self.len()
            )));
        }
        let len = std::mem::size_of_val(out);
        // SAFETY: the same memory as bytes; T is Pod, so any bytes written
        // make valid values.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<MaybeUninit<u8>>(), len)
        };
        // Masks of a length not a multiple of 4: whole words, then the tail.
        let whole = len / 4 * 4;
        let (head, tail) = bytes.split_at_mut(whole);
        if !head.is_empty() {
            gpu.read_into(&self.buffer, 0, head).await?;
        }
        if !tail.is_empty() {
            let last = gpu.read_at(&self.buffer, whole as u64, 4).await?;
            for (t, &b) in tail.iter_mut().zip(&last) {
                t.write(b);
            }
        }
        Ok(())
    }

    /// Checks that this array holds `elements`, naming the operation.
    pub(crate) fn require(&self, elements: Elements, what: &str) -> Result<()> {
        if self.elements != elements {
            return Err(Error::InvalidInput(format!(
                "{what} takes a {} device array, not {}",
                elements.name(),
                self.elements.name()
            )));
        }
        Ok(())
    }
}

/// Runs a chunk kernel once on a whole array already on the GPU: the input
/// is copied first (kernels ping-pong between their two buffers, and the
/// caller's array must survive), and the buffer holding the result is
/// returned.
pub(crate) async fn apply_kernel<T: Pod>(
    gpu: &Gpu,
    spec: StreamSpec<T>,
    input: &wgpu::Buffer,
    kernel: ChunkKernel<'_>,
) -> Result<wgpu::Buffer> {
    let chunks = chunk::plan(spec.shape, spec.halo, u64::MAX)?;
    let n: usize = spec.shape.iter().product();
    let bytes = (n * std::mem::size_of::<T>()) as u64;
    let a = gpu.storage(bytes, "device array").await?;
    let b = match gpu.storage(bytes, "device array").await {
        Ok(b) => b,
        Err(e) => {
            gpu.recycle(a);
            return Err(e);
        }
    };
    let outcome = async {
        // Queued without waiting: the next operation or read follows it.
        let mut rec = gpu.recorder_untimed();
        rec.copy(input, 0, &a, 0, bytes.div_ceil(4) * 4);
        let mut in_b = false;
        for c in chunks.iter() {
            in_b = kernel(&mut rec, &a, &b, &c)?;
        }
        rec.submit().await?;
        Ok::<_, Error>(in_b)
    }
    .await;
    match outcome {
        Ok(true) => {
            gpu.recycle(a);
            Ok(b)
        }
        Ok(false) => {
            gpu.recycle(b);
            Ok(a)
        }
        Err(e) => {
            gpu.recycle(a);
            gpu.recycle(b);
            Err(e)
        }
    }
}

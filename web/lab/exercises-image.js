// The exercises on the image: two histograms (global atomics, then a
// var<workgroup> histogram per workgroup) and a 2-D convolution checked
// against the page's own convolve (scipy.ndimage.convolve in the wasm
// module). See exercises.js for the shape of an exercise.
import { run as runWasm, message } from '../wasm.js';

const u32 = (xs) => Uint32Array.from(xs);

/** 8-bit bins of the input: integer values in 0..255 (the uint8 samples, the
 * generated arrays) are their own bin; anything else is scaled min..max to
 * 0..255, as an 8-bit display would. */
export function binsOf(data) {
  let integral = true;
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of data) {
    if (!(Number.isInteger(v) && v >= 0 && v <= 255)) integral = false;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  const out = new Uint32Array(data.length);
  const scale = hi > lo ? 256 / (hi - lo) : 0;
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    out[i] = integral ? v : Number.isNaN(v) ? 0 : Math.min(255, Math.floor((v - lo) * scale));
  }
  return out;
}

function histogram(input) {
  const values = binsOf(input.data);
  const n = values.length;
  return {
    n,
    bindings: [
      { binding: 0, name: 'values', kind: 'read', data: values },
      { binding: 1, name: 'hist', kind: 'rw', data: new Uint32Array(256) },
      { binding: 2, name: 'params', kind: 'uniform', data: u32([n]) },
    ],
    out: { binding: 1, type: 'u32', length: 256 },
    reference: () => {
      // numpy.bincount(values, minlength=256)
      const h = new Uint32Array(256);
      for (const v of values) h[v]++;
      return h;
    },
    rule: { exact: true },
    names: (i) => `bin ${i}`,
    bytes: 4 * n,
  };
}

const HIST_HEAD = `struct Params { n: u32 }

@group(0) @binding(0) var<storage, read> values: array<u32>; // 0..255
@group(0) @binding(1) var<storage, read_write> hist: array<atomic<u32>>;
@group(0) @binding(2) var<uniform> params: Params;
`;

const HIST_GLOBAL = `${HIST_HEAD}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let i = id.x;
  if (i >= params.n) {
    return;
  }
  // One indivisible read-add-write: no update is lost.
  atomicAdd(&hist[values[i]], 1u);
}
`;

const HIST_CUPY_HEAD = `import cupy as cp

values = cp.asarray(image, dtype=cp.uint32).ravel()  # 8-bit values 0..255
n = values.size
hist = cp.zeros(256, dtype=cp.uint32)
`;

const CONV_HEAD = `struct Params { width: u32, height: u32 }

@group(0) @binding(0) var<storage, read> image: array<f32>; // row by row
@group(0) @binding(1) var<storage, read> weights: array<f32>; // 3 x 3
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;
`;

const SOBEL = [1, 2, 1, 0, 0, 0, -1, -2, -1];

export const IMAGE_EXERCISES = [
  {
    id: 'hist-global',
    title: 'Histogram: global atomics',
    inputs: ['image', 'array'],
    defaultN: 20000,
    workgroups: 'ceil(n / 256)',
    lesson: `<p>Count how many pixels fall in each of 256 bins (8-bit values; other images are scaled min..max to
      0..255 first, on the CPU). One invocation per pixel adds 1 to its bin.</p>
      <p>The starter does <code>hist[v] = hist[v] + 1</code>: a read, an add and a write. When two invocations do
      that to the same bin at once, both read the same count and one update is lost, so the counts come out too
      low (or, on a device that happens to serialise them, right by luck). Declare the bins
      <code>array&lt;atomic&lt;u32&gt;&gt;</code> and use <code>atomicAdd</code> (CUDA: <code>atomicAdd</code> on
      global memory).</p>
      <p>Check: exact, against <code>numpy.bincount(values, minlength=256)</code> done in JS.</p>`,
    starter: `struct Params { n: u32 }

@group(0) @binding(0) var<storage, read> values: array<u32>; // 0..255
@group(0) @binding(1) var<storage, read_write> hist: array<u32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let i = id.x;
  if (i >= params.n) {
    return;
  }
  let v = values[i];
  hist[v] = hist[v] + 1u; // read, add, write: not one step
}
`,
    solution: HIST_GLOBAL,
    cupy: `${HIST_CUPY_HEAD}
histogram = cp.RawKernel(r'''
extern "C" __global__
void histogram(const unsigned int* values, unsigned int* hist, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hist[values[i]], 1u);
}
''', 'histogram')

histogram(((n + 255) // 256,), (256,), (values, hist, cp.int32(n)))
assert (hist == cp.bincount(values, minlength=256)).all()
`,
    prepare: histogram,
  },
  {
    id: 'hist-shared',
    title: 'Histogram: workgroup memory',
    inputs: ['image', 'array'],
    defaultN: 20000,
    workgroups: 'ceil(n / 256)',
    lesson: `<p>Every pixel of a dark image hits the same few bins, and atomics on one global address wait for each
      other. The workshop's fix: each workgroup keeps its own histogram in <code>var&lt;workgroup&gt;</code> memory
      (CUDA: <code>__shared__</code>), fast and contended by 256 invocations only, then adds it to the global one,
      256 atomics per workgroup instead of one per pixel.</p>
      <p>Variables in workgroup memory start at zero in WGSL (in CUDA you clear them first). After
      <code>workgroupBarrier()</code> every invocation of the workgroup has counted its pixel; invocation b then
      merges bin b. The starter merges with <code>atomicStore</code>: each workgroup overwrites the others' counts.
      Merge with <code>atomicAdd</code>.</p>
      <p>Compare the times with the previous exercise (the timing panel), on a dark image and on a generated one.</p>`,
    starter: `${HIST_HEAD}
var<workgroup> local_hist: array<atomic<u32>, 256>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = id.x;
  // No early return: every invocation must reach the barrier.
  if (i < params.n) {
    atomicAdd(&local_hist[values[i]], 1u);
  }
  workgroupBarrier();
  // Invocation lid merges bin lid of this workgroup's histogram.
  let count = atomicLoad(&local_hist[lid]);
  atomicStore(&hist[lid], count);
}
`,
    solution: `${HIST_HEAD}
var<workgroup> local_hist: array<atomic<u32>, 256>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = id.x;
  if (i < params.n) {
    atomicAdd(&local_hist[values[i]], 1u);
  }
  workgroupBarrier();
  let count = atomicLoad(&local_hist[lid]);
  if (count > 0u) {
    atomicAdd(&hist[lid], count);
  }
}
`,
    cupy: `${HIST_CUPY_HEAD}
histogram = cp.RawKernel(r'''
extern "C" __global__
void histogram(const unsigned int* values, unsigned int* hist, int n) {
    __shared__ unsigned int local[256];
    local[threadIdx.x] = 0;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&local[values[i]], 1u);
    __syncthreads();
    if (local[threadIdx.x]) atomicAdd(&hist[threadIdx.x], local[threadIdx.x]);
}
''', 'histogram')

histogram(((n + 255) // 256,), (256,), (values, hist, cp.int32(n)))
assert (hist == cp.bincount(values, minlength=256)).all()
`,
    prepare: histogram,
  },
  {
    id: 'convolve',
    title: '2-D convolution of the image',
    inputs: ['image', 'array'],
    defaultN: 16384,
    workgroups: 'ceil(width / 16), ceil(height / 16)',
    lesson: `<p>Convolve the image (one channel: RGB is turned to luminance) with a 3×3 kernel, the Sobel
      <code>[[1, 2, 1], [0, 0, 0], [-1, -2, -1]]</code>, one invocation per pixel in 16×16 workgroups, a 2-D
      launch of <code>ceil(width / 16) × ceil(height / 16)</code> workgroups.</p>
      <p>Like <code>scipy.ndimage.convolve</code>, a convolution flips the kernel: weight (ky, kx) meets the pixel at
      (y + 1 − ky, x + 1 − kx). At the border the neighbours fall outside the image; the rule here is scipy's
      <code>mode='nearest'</code>: the edge pixel repeats (clamp the coordinates).</p>
      <p>The starter leaves the border out. The reference is the page's own <code>convolve</code> (the wasm
      module's CPU path, mode nearest), the one the main page checks its WebGPU path against. Check: within 1e-4 of
      the largest |value|.</p>`,
    starter: `${CONV_HEAD}
@compute @workgroup_size(16, 16)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let x = i32(id.x);
  let y = i32(id.y);
  let w = i32(params.width);
  let h = i32(params.height);
  // TODO: the border. For now its pixels are left out (they stay 0).
  if (x < 1 || y < 1 || x >= w - 1 || y >= h - 1) {
    return;
  }
  var acc = 0.0;
  for (var ky = 0; ky < 3; ky++) {
    for (var kx = 0; kx < 3; kx++) {
      acc += weights[ky * 3 + kx] * image[(y + 1 - ky) * w + (x + 1 - kx)];
    }
  }
  out[y * w + x] = acc;
}
`,
    solution: `${CONV_HEAD}
@compute @workgroup_size(16, 16)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let x = i32(id.x);
  let y = i32(id.y);
  let w = i32(params.width);
  let h = i32(params.height);
  if (x >= w || y >= h) {
    return;
  }
  var acc = 0.0;
  for (var ky = 0; ky < 3; ky++) {
    for (var kx = 0; kx < 3; kx++) {
      // The kernel flipped; 'nearest': coordinates clamped to the image.
      let sy = clamp(y + 1 - ky, 0, h - 1);
      let sx = clamp(x + 1 - kx, 0, w - 1);
      acc += weights[ky * 3 + kx] * image[sy * w + sx];
    }
  }
  out[y * w + x] = acc;
}
`,
    cupy: `import cupy as cp
from cupyx.scipy import ndimage

img = cp.asarray(image, dtype=cp.float32)  # (height, width)
h, w = img.shape
weights = cp.array([1, 2, 1, 0, 0, 0, -1, -2, -1], dtype=cp.float32)
out = cp.zeros_like(img)

convolve = cp.RawKernel(r'''
extern "C" __global__
void convolve(const float* image, const float* weights, float* out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float acc = 0.0f;
    for (int ky = 0; ky < 3; ky++)
        for (int kx = 0; kx < 3; kx++) {
            int sy = min(max(y + 1 - ky, 0), h - 1);
            int sx = min(max(x + 1 - kx, 0), w - 1);
            acc += weights[ky * 3 + kx] * image[sy * w + sx];
        }
    out[y * w + x] = acc;
}
''', 'convolve')

convolve(((w + 15) // 16, (h + 15) // 16), (16, 16), (img, weights, out, cp.int32(w), cp.int32(h)))
ref = ndimage.convolve(img, weights.reshape(3, 3), mode='nearest')
assert cp.allclose(out, ref, rtol=0, atol=1e-4 * float(abs(ref).max()))
`,
    prepare: (input) => {
      const [h, w] = input.shape;
      const image = Float32Array.from(input.data);
      const n = w * h;
      return {
        n,
        width: w,
        height: h,
        bindings: [
          { binding: 0, name: 'image', kind: 'read', data: image },
          { binding: 1, name: 'weights', kind: 'read', data: Float32Array.from(SOBEL) },
          { binding: 2, name: 'out', kind: 'rw', data: new Float32Array(n) },
          { binding: 3, name: 'params', kind: 'uniform', data: u32([w, h]) },
        ],
        out: { binding: 2, type: 'f32', length: n, shape: [h, w] },
        reference: () => pageConvolve(image, h, w),
        rule: { rtol: 1e-4 },
        bytes: 8 * n,
      };
    },
  },
];

/** The page's convolve (scipy.ndimage.convolve, mode 'nearest') in the wasm
 * worker; a JS loop with the same rule if the module cannot load, and the
 * result says which one ran. Resolves to {data, ms, source}. */
async function pageConvolve(image, h, w) {
  try {
    const r = await runWasm('cpu', 'convolve', { data: image, shape: [h, w] }, {
      weights: { rows: 3, cols: 3, values: SOBEL },
      mode: 'nearest',
      cval: 0,
    });
    return { data: r.data, ms: r.ms, source: "the page's convolve (wasm, scipy.ndimage.convolve mode='nearest')" };
  } catch (e) {
    const t0 = performance.now();
    const data = convolveJs(image, h, w);
    return { data, ms: performance.now() - t0, source: `a JS convolution (the wasm module failed: ${message(e)})` };
  }
}

export function convolveJs(image, h, w) {
  const out = new Float64Array(h * w);
  const clamp = (v, hi) => Math.min(Math.max(v, 0), hi);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      let acc = 0;
      for (let ky = 0; ky < 3; ky++) {
        for (let kx = 0; kx < 3; kx++) {
          acc += SOBEL[ky * 3 + kx] * image[clamp(y + 1 - ky, h - 1) * w + clamp(x + 1 - kx, w - 1)];
        }
      }
      out[y * w + x] = acc;
    }
  }
  return out;
}

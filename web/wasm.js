// The boundary with the wasm module: everything the page knows about
// gpuscope-web goes through here, as plain JS objects, so the UI never
// handles wasm-bindgen classes (and never forgets to free one).
import init, * as wasm from './pkg/gpuscope_web.js';

let engine = null;

/** Loads the module and opens WebGPU. Resolves to `{device, gpuError}`:
 * `device` is the adapter description or null, `gpuError` why not. */
export async function start() {
  await init({ module_or_path: new URL('./pkg/gpuscope_web_bg.wasm', import.meta.url) });
  try {
    engine = await wasm.open_gpu();
    const device = engine.device_info();
    if (!device.name) {
      // wgpu's WebGPU backend leaves the name empty; the browser's adapter
      // info says at least vendor and architecture ("google swiftshader").
      const info = (await navigator.gpu.requestAdapter())?.info;
      device.name = [info?.vendor, info?.architecture].filter(Boolean).join(' ');
    }
    return { device, gpuError: null };
  } catch (e) {
    engine = null;
    return { device: null, gpuError: message(e) };
  }
}

export const hasGpu = () => engine !== null;

/** The text of an error thrown by wasm (JsError) or JS. */
export function message(e) {
  return e instanceof Error ? e.message : String(e);
}

/** Decodes a file's bytes (format from the name's extension) into
 * `{name, shape, dtype, format, data: Float32Array, stats, header}`. */
export function decode(name, bytes) {
  const volume = wasm.decode(name, bytes);
  try {
    return {
      name,
      shape: Array.from(volume.shape()),
      dtype: volume.dtype(),
      format: volume.format(),
      data: volume.data(),
      stats: volume.stats(),
      header: volume.header(),
    };
  } finally {
    volume.free();
  }
}

// Every operation takes the same parameters on both sides; `where` picks
// 'gpu' (async, WebGPU) or 'cpu' (the f64 reference). Each returns
// `{data, shape, ms, kernelMs?}`; `ms` is wall time around the call
// (upload + kernels + download on the GPU), `kernelMs` the GPU's own
// timestamps when the adapter has them.
function gpu() {
  if (!engine) throw new Error('WebGPU is not available: use the CPU path');
  return engine;
}

export async function gaussianFilter(where, image, { sigma, mode = 'reflect', cval = 0, truncate = 4.0 }) {
  const s = Float64Array.from([sigma].flat());
  return where === 'gpu'
    ? gpu().gaussian_filter(image.data, Uint32Array.from(image.shape), s, mode, cval, truncate)
    : wasm.gaussian_filter(image.data, Uint32Array.from(image.shape), s, mode, cval, truncate);
}

export async function convolve(where, image, { weights, weightsShape, mode = 'reflect', cval = 0 }) {
  const w = Float64Array.from(weights);
  const ws = Uint32Array.from(weightsShape);
  return where === 'gpu'
    ? gpu().convolve(image.data, Uint32Array.from(image.shape), w, ws, mode, cval)
    : wasm.convolve(image.data, Uint32Array.from(image.shape), w, ws, mode, cval);
}

export async function correlate(where, image, { weights, weightsShape, mode = 'reflect', cval = 0 }) {
  const w = Float64Array.from(weights);
  const ws = Uint32Array.from(weightsShape);
  return where === 'gpu'
    ? gpu().correlate(image.data, Uint32Array.from(image.shape), w, ws, mode, cval)
    : wasm.correlate(image.data, Uint32Array.from(image.shape), w, ws, mode, cval);
}

export async function threshold(where, image, { value }) {
  return where === 'gpu'
    ? gpu().threshold(image.data, Uint32Array.from(image.shape), value)
    : wasm.threshold(image.data, Uint32Array.from(image.shape), value);
}

/** A result as a downloadable file: float32 .npy, or uint8 for masks. */
export function encodeNpy(result) {
  const shape = Uint32Array.from(result.shape);
  if (result.data instanceof Uint8Array) return wasm.encode_mask('npy', result.data, shape);
  return wasm.encode_npy(Float32Array.from(result.data), shape);
}

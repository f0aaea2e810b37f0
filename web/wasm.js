// The boundary with the wasm module: everything the page knows about
// gpuscope-web goes through here, as plain JS objects, so the UI never
// handles wasm-bindgen classes (and never forgets to free one).
//
// The GPU path runs here, on the page's thread: it is asynchronous (the
// page stays responsive while the GPU works). The CPU path runs the same
// wasm module in a Web Worker (cpu-worker.js), so a long CPU run never
// freezes the page and cancelling it terminates the worker.
import init, * as wasm from './pkg/gpuscope_web.js';
import { OPS } from './ops.js';

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

/** The text of an error thrown by wasm (JsError), a worker or JS. */
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

// ---- the CPU worker ----

let worker = null;
let nextId = 1;
const pending = new Map();

function cpuWorker() {
  if (worker) return worker;
  worker = new Worker(new URL('./cpu-worker.js', import.meta.url), { type: 'module' });
  worker.onmessage = (e) => {
    const { id, ok, result, error } = e.data;
    const p = pending.get(id);
    if (!p) return;
    pending.delete(id);
    if (ok) p.resolve(result);
    else p.reject(new Error(error));
  };
  worker.onerror = (e) => {
    const why = e.message || 'the CPU worker failed to start';
    for (const p of pending.values()) p.reject(new Error(why));
    pending.clear();
    worker?.terminate();
    worker = null;
  };
  return worker;
}

/** Stops whatever the CPU worker is doing and starts a fresh one. */
export function cancelCpu() {
  if (!worker) return;
  worker.terminate();
  worker = null;
  for (const p of pending.values()) p.reject(new CancelledError());
  pending.clear();
  warmCpu().catch(() => {});
}

/** Starts the CPU worker and resolves once its module is compiled, so the
 * first CPU run is timed without the start-up, and no file is fetched later. */
export function warmCpu() {
  return callCpu(null, null, null, []);
}

export class CancelledError extends Error {
  constructor() {
    super('cancelled');
    this.name = 'CancelledError';
  }
}

function callCpu(fn, data, shape, args) {
  return new Promise((resolve, reject) => {
    const id = nextId++;
    pending.set(id, { resolve, reject });
    // The input is copied (not transferred): the page keeps its image.
    cpuWorker().postMessage({ id, fn, data, shape, args });
  });
}

/** Runs registry operation `id` with parsed `params` on `input`
 * ({data: Float32Array, shape}) on 'gpu' or 'cpu'. `context.image` is the
 * chain's latest image ({data, shape}: the intensities under a mask or
 * labels step), passed to the entry's `args` as its third argument. Resolves to
 * `{data, shape, ms, kernelMs?, wallMs, where, ...}`: `ms` is measured by the
 * module around the computation (upload + kernels + download on the GPU),
 * `wallMs` by the page around the whole call (every copy included),
 * `kernelMs` the GPU's own timestamps when the adapter has them. */
export async function run(where, id, input, params, context = {}) {
  const op = OPS[id];
  const data = input.data instanceof Float32Array ? input.data : Float32Array.from(input.data);
  const shape = Uint32Array.from(input.shape);
  const args = op.args(params, input, { image: input, ...context });
  const t0 = performance.now();
  let r;
  if (where === 'gpu') {
    if (!engine) throw new Error('WebGPU is not available: use the CPU path');
    r = await engine[op.gpu](data, shape, ...args);
  } else {
    r = await callCpu(op.cpu, data, shape, args);
  }
  r.wallMs = performance.now() - t0;
  r.where = where;
  r.shape = Array.from(r.shape);
  return r;
}

/** Frees pooled GPU buffers. */
export function trim() {
  engine?.trim();
}

/** A result array as a file: 'npy' or 'tiff' in the result's own dtype
 * (float32 from the GPU, float64 from the CPU reference, uint8 masks, int32
 * labels), or 'png' (8-bit, scaled min..max; masks 0/255). */
export function encode(format, result) {
  const shape = Uint32Array.from(result.shape);
  const d = result.data;
  if (d instanceof Uint8Array) return wasm.encode_mask(format, d, shape);
  if (d instanceof Float64Array) return wasm.encode_f64(format, d, shape);
  if (d instanceof Int32Array || d instanceof Uint32Array) return wasm.encode_labels(format, Int32Array.from(d), shape);
  return wasm.encode(format, d instanceof Float32Array ? d : Float32Array.from(d), shape);
}

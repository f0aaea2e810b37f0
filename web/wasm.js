// The boundary with the wasm module: everything the page knows about
// gpuscope-web goes through here, as plain JS objects, so the UI never
// handles wasm-bindgen classes (and never forgets to free one).
//
// The GPU path runs here, on the page's thread: it is asynchronous (the
// page stays responsive while the GPU works). The CPU path runs the same
// wasm module in a Web Worker (cpu-worker.js), so a long CPU run never
// freezes the page and cancelling it terminates the worker.
import init, * as wasm from './pkg/gpuscope_web.js';
import { OPS, oneChannel, optionsOf } from './ops.js';

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

// ---- the workers ----

/** One module worker running cpu-worker.js: calls by id, answers by promise. */
class WasmWorker {
  constructor() {
    this.worker = null;
    this.nextId = 1;
    this.pending = new Map();
  }

  start() {
    if (this.worker) return this.worker;
    const w = new Worker(new URL('./cpu-worker.js', import.meta.url), { type: 'module' });
    w.onmessage = (e) => {
      const { id, ok, result, error, crashed } = e.data;
      const p = this.pending.get(id);
      if (!p) return;
      this.pending.delete(id);
      if (ok) {
        p.resolve(result);
        return;
      }
      p.reject(new Error(crashed ? `the WebAssembly module stopped (${error}): please report this file or call` : error));
      if (crashed) {
        // A trapped module is not to be trusted again: start a fresh one.
        this.stop(new Error('the WebAssembly worker was restarted'));
        this.call(null, null, null, []).catch(() => {});
      }
    };
    w.onerror = (e) => {
      e.preventDefault?.();
      this.stop(new Error(e.message || 'the WebAssembly worker failed to start'));
    };
    this.worker = w;
    return w;
  }

  /** Terminates the worker; pending calls reject with `why`. */
  stop(why) {
    this.worker?.terminate();
    this.worker = null;
    for (const p of this.pending.values()) p.reject(why);
    this.pending.clear();
  }

  call(fn, data, shape, args) {
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { resolve, reject });
      // The input is copied (not transferred): the page keeps its data.
      this.start().postMessage({ id, fn, data, shape, args });
    });
  }
}

// Operations on the CPU run in one worker, file decoding in another: a
// decode never waits behind a long CPU run, and a file that trips the
// decoder cannot take the page's own module down with it.
const cpu = new WasmWorker();
const io = new WasmWorker();

/** Decodes a file's bytes (format from the name's extension) in the
 * decoding worker. Resolves to `{name, shape, dtype, format, data:
 * Float32Array, stats, header}`; rejects with the decoder's message. */
export function decode(name, bytes) {
  return io.call('decode', bytes, null, [name]);
}

/** HDF5 in the decoding worker, read by byte ranges of the Files (never
 * whole): `h5Open(files)` opens files[0] (the others are what its external
 * links reach) and resolves to `{tree}`; `h5Select(path)` (null: the NeXus
 * default or the Eiger series) to `{paths, shape, dtype, frames}`;
 * `h5Frame(z)` to a frame as `decode` gives images. */
export const h5Open = (files) => io.call('h5open', files, null, []);
export const h5Select = (path) => io.call('h5select', null, null, [path]);
export const h5Frame = (z) => io.call('h5frame', null, null, [z]);

/** A Zarr store in the decoding worker, read by byte ranges of its Files
 * (one chunk at a time): `zarrOpen(name, files, keys)` (keys: each file's
 * path below the store's folder) resolves to `{path, shape, dtype, frames,
 * zarr_format, chunks, codecs}`; `zarrFrame(z)` to plane z as `decode`
 * gives images. */
export const zarrOpen = (name, files, keys) => io.call('zopen', files, null, [name, keys]);
export const zarrFrame = (z) => io.call('zframe', null, null, [z]);

/** Stops whatever the CPU worker is doing and starts a fresh one. */
export function cancelCpu() {
  if (!cpu.worker) return;
  cpu.stop(new CancelledError());
  warmCpu().catch(() => {});
}

/** Starts both workers and resolves once their modules are compiled, so the
 * first CPU run is timed without the start-up, and no file is fetched later. */
export function warmCpu() {
  return Promise.all([cpu.call(null, null, null, []), io.call(null, null, null, [])]);
}

export class CancelledError extends Error {
  constructor() {
    super('cancelled');
    this.name = 'CancelledError';
  }
}

// GPU calls in flight, the abandoned ones of a cancelled run included (a
// submission cannot be recalled).
const gpuCalls = new Set();

/** Whether a GPU call (e.g. of a cancelled run) is still in flight. */
export const gpuBusy = () => gpuCalls.size > 0;

/** Resolves once every GPU call in flight has finished (or failed). */
export async function gpuIdle() {
  while (gpuCalls.size) await Promise.allSettled([...gpuCalls]);
}

const callCpu = (fn, data, shape, args) => cpu.call(fn, data, shape, args);

/** Runs registry operation `id` with parsed `params` on `input`
 * ({data: Float32Array, shape}) on 'gpu' or 'cpu'. `context.image` is the
 * chain's latest image ({data, shape}: the intensities under a mask or
 * labels step), passed to the entry's `options` as its third argument. The
 * wasm function gets (data, shape, options): one options object with the
 * catalogue's parameter names. Resolves to
 * `{data, shape, ms, kernelMs?, wallMs, where, ...}`: `ms` is measured by the
 * module around the computation (upload + kernels + download on the GPU),
 * `wallMs` by the page around the whole call (every copy included),
 * `kernelMs` the GPU's own timestamps when the adapter has them. */
export async function run(where, id, input, params, context = {}) {
  const op = OPS[id];
  if (op.oneChannel) input = oneChannel(input);
  const data = input.data instanceof Float32Array ? input.data : Float32Array.from(input.data);
  const shape = Uint32Array.from(input.shape);
  const options = optionsOf(id, params, input, context);
  if (where === 'gpu') {
    // A cancelled run's submission is still on the GPU's queue: wait for it
    // here, before the clock starts, so its time is not counted as ours.
    await gpuIdle();
  }
  const t0 = performance.now();
  let r;
  if (where === 'gpu') {
    if (!engine) throw new Error('WebGPU is not available: use the CPU path');
    const call = engine[op.gpu](data, shape, options);
    gpuCalls.add(call);
    const done = () => gpuCalls.delete(call);
    call.then(done, done);
    r = await call;
  } else {
    r = await callCpu(op.cpu, data, shape, [options]);
  }
  if (op.output) r = op.output(r);
  r.wallMs = performance.now() - t0;
  r.where = where;
  r.shape = Array.from(r.shape ?? input.shape);
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

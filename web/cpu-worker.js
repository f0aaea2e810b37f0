// The CPU (wasm) path in a Web Worker: the same module as the page, called
// with the same arguments ((data, shape, options) for an operation), so a long CPU run never blocks the page and can
// be cancelled by terminating the worker. The page runs a second one for
// decoding files (`fn` 'decode').
import init, * as wasm from './pkg/gpuscope_web.js';

// The HDF5 files open in this (decoding) worker: read by byte ranges with
// FileReaderSync, so a file larger than the tab's memory is never read whole.
let h5 = null;
let h5files = [];
const readRange = (i, offset, len) => new Uint8Array(new FileReaderSync().readAsArrayBuffer(h5files[i].slice(offset, offset + len)));

// The Zarr store open in this worker: its files by key index, read by
// ranges the same way (one chunk at a time).
let zarr = null;
let zfiles = [];
let zname = '';
const readZarr = (i, offset, len) => new Uint8Array(new FileReaderSync().readAsArrayBuffer(zfiles[i].slice(offset, offset + len)));

/** A wasm Volume as a plain object (the Volume is freed). */
function plain(volume, name) {
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

/** The HDF5 calls: 'h5open' (data: the picked Files, the first the one to
 * open), 'h5select' (args: [path or null]), 'h5frame' (args: [z]). */
function hdf5Call(fn, data, args) {
  if (fn === 'h5open') {
    h5?.free();
    h5 = null;
    h5files = data;
    h5 = wasm.h5_open(data.map((f) => f.name), Float64Array.from(data.map((f) => f.size)), readRange);
    return { tree: h5.tree() };
  }
  if (!h5) throw new Error('no HDF5 file is open: pick it again');
  if (fn === 'h5select') return h5.select(args[0] ?? undefined);
  return plain(h5.frame(args[0]), h5files[0].name);
}

/** The Zarr calls: 'zopen' (data: the store's Files; args: [store name,
 * each file's key below the store]), 'zframe' (args: [plane]). */
function zarrCall(fn, data, args) {
  if (fn === 'zopen') {
    zarr?.free();
    zarr = null;
    zfiles = data;
    zname = args[0];
    zarr = wasm.zarr_open(args[0], args[1], Float64Array.from(data.map((f) => f.size)), readZarr);
    return zarr.info();
  }
  if (!zarr) throw new Error('no Zarr store is open: pick it again');
  return plain(zarr.frame(args[0]), zname);
}

const ready = init({ module_or_path: new URL('./pkg/gpuscope_web_bg.wasm', import.meta.url) });

self.onmessage = async (e) => {
  const { id, fn, data, shape, args } = e.data;
  try {
    await ready;
    if (fn === null) {
      // A warm-up call: the module is loaded and compiled.
      self.postMessage({ id, ok: true, result: null });
      return;
    }
    if (fn === 'decode') {
      const r = plain(wasm.decode(args[0], data), args[0]);
      self.postMessage({ id, ok: true, result: r }, [r.data.buffer]);
      return;
    }
    if (fn.startsWith('h5')) {
      const r = hdf5Call(fn, data, args);
      self.postMessage({ id, ok: true, result: r }, r.data?.buffer ? [r.data.buffer] : []);
      return;
    }
    if (fn === 'zopen' || fn === 'zframe') {
      const r = zarrCall(fn, data, args);
      self.postMessage({ id, ok: true, result: r }, r.data?.buffer ? [r.data.buffer] : []);
      return;
    }
    if (typeof wasm[fn] !== 'function') throw new Error(`the wasm module has no CPU function '${fn}'`);
    const r = wasm[fn](data, shape, ...args);
    const transfer = r.data?.buffer ? [r.data.buffer] : [];
    self.postMessage({ id, ok: true, result: r }, transfer);
  } catch (err) {
    // A trap (a Rust panic, out of memory) leaves the module unusable: the
    // page restarts this worker when `crashed` is set.
    self.postMessage({
      id,
      ok: false,
      error: err instanceof Error ? err.message : String(err),
      crashed: err instanceof WebAssembly.RuntimeError,
    });
  }
};

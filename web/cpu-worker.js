// The CPU (wasm) path in a Web Worker: the same module as the page, called
// with the same arguments ((data, shape, options) for an operation), so a long CPU run never blocks the page and can
// be cancelled by terminating the worker. The page runs a second one for
// decoding files (`fn` 'decode').
import init, * as wasm from './pkg/gpuscope_web.js';

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
      const volume = wasm.decode(args[0], data);
      let r;
      try {
        r = {
          name: args[0],
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
      self.postMessage({ id, ok: true, result: r }, [r.data.buffer]);
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

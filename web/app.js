// The page: load an image (sample, picker or drop), build a chain of
// operations from the registry (ops.js), run it on WebGPU or on the CPU with
// progress and cancel, look at every step in the viewer, compare CPU and
// GPU, download results. The state that makes a view lives in the URL hash.
import { OPS, defaults, parseStep } from './ops.js';
import { COLORMAPS, STRETCHES } from './colormaps.js';
import { $, gs, setWasm, state } from './state.js';
import { showMessage } from './errors.js';
import { addStep, form, onFormInput, pythonOf, removeStep } from './chain.js';
import { cancel, runChain } from './run.js';
import { compare, speedupText, tableAgreement, verdict } from './workshop.js';
import { sweep } from './sweep.js';
import { createViewer, download, downloadView, refreshView, setSlice, viewer, wireHistogram } from './display.js';
import { applyLink, hashOf, writeHash } from './link.js';
import { loadFiles, loadSample, prefetchSamples, runAfterLoad, selectSampleOptions, useImage } from './load.js';
import * as hdf5 from './hdf5.js';
import * as zarr from './zarr.js';
import { createViews } from './view/index.js';
import { setViews, views } from './view/hooks.js';

function wire() {
  selectSampleOptions();
  for (const c of COLORMAPS) $('cmap').append(new Option(c, c));
  for (const s of STRETCHES) $('stretch').append(new Option(s, s));

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    runChain();
  });
  form.addEventListener('input', onFormInput);
  // Enter in a text input submits; in the kernel textarea Ctrl+Enter does.
  form.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && e.target.tagName === 'TEXTAREA' && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      runChain();
    }
  });
  form.addEventListener('click', (e) => {
    if (e.target.dataset.remove !== undefined) removeStep(Number(e.target.dataset.remove));
  });
  $('add-step').addEventListener('click', addStep);
  $('cancel').addEventListener('click', cancel);
  $('compare').addEventListener('click', compare);
  $('sweep').addEventListener('click', sweep);
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && state.run) {
      e.preventDefault();
      cancel();
    }
  });

  $('sample').addEventListener('change', async (e) => {
    if (e.target.value && (await loadSample(e.target.value))) runAfterLoad();
  });
  $('file').addEventListener('change', async (e) => {
    const files = [...e.target.files];
    if (files.length && (await loadFiles(files))) runAfterLoad();
    e.target.value = '';
  });
  $('zarr-open').addEventListener('click', () => $('zarr-dir').click());
  $('zarr-dir').addEventListener('change', async (e) => {
    const files = [...e.target.files];
    e.target.value = '';
    if (!files.length) return;
    if (!(await zarr.open(files))) return;
    hdf5.close();
    runAfterLoad();
  });
  const drop = $('drop');
  drop.addEventListener('click', (e) => {
    if (e.target !== $('file')) $('file').click();
  });
  drop.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault();
      $('file').click();
    }
  });
  // The whole page accepts a dropped file.
  document.addEventListener('dragover', (e) => {
    e.preventDefault();
    drop.classList.add('over');
  });
  document.addEventListener('dragleave', () => drop.classList.remove('over'));
  document.addEventListener('drop', async (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    const files = [...(e.dataTransfer?.files ?? [])];
    if (!files.length) {
      showMessage('Nothing to open: drop a file (npy, tif, png, jpg, cbf, fits, h5, nxs).');
      return;
    }
    if (await loadFiles(files)) runAfterLoad();
  });

  const redisplay = () => {
    refreshView(false);
    writeHash();
  };
  $('layer').addEventListener('change', (e) => {
    state.layer = Number(e.target.value);
    redisplay();
  });
  for (const id of ['cmap', 'stretch', 'limits', 'plo', 'phi']) $(id).addEventListener('change', redisplay);
  for (const id of ['vmin', 'vmax']) {
    $(id).addEventListener('change', () => {
      $('limits').value = 'manual';
      redisplay();
    });
  }
  $('opacity').addEventListener('input', (e) => {
    viewer.setOpacity(Number(e.target.value));
    writeHash();
  });
  $('slice').addEventListener('input', (e) => setSlice(Number(e.target.value)));
  $('view').addEventListener('slicechange', () => setSlice(viewer.slice));

  $('message-close').addEventListener('click', () => showMessage(''));
  $('dl-npy').addEventListener('click', () => download('npy'));
  $('dl-tif').addEventListener('click', () => download('tiff'));
  $('dl-png').addEventListener('click', downloadView);
  $('copy-python').addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText($('python').textContent);
      showMessage('Python code copied.', 'info');
    } catch {
      showMessage('Select the code and copy it (the clipboard is not available here).', 'info');
    }
  });
  $('fit').addEventListener('click', () => {
    viewer.fitted = false;
    viewer.paint();
  });
  $('dl-link').addEventListener('click', async () => {
    const url = location.href.split('#')[0] + hashOf();
    try {
      await navigator.clipboard.writeText(url);
      showMessage('Link copied: it reproduces this view.', 'info');
    } catch {
      showMessage(`Link to this view: ${url}`, 'info');
    }
  });
  window.addEventListener('hashchange', (e) => {
    // The hash the user gave (e.newURL): the page's own debounced
    // replaceState may have rewritten location.hash since.
    const hash = new URL(e.newURL).hash;
    if (hash !== hashOf()) applyLink(hash, false);
  });

  createViewer();
  setViews(
    createViews({
      viewer,
      state,
      OPS,
      defaults,
      parseStep,
      refresh: () => refreshView(false),
      writeHash,
      hashOf,
      applyHash: (hash) => applyLink(hash, false),
      showMessage,
      run: (where, id, input, params) => gs.run(where, id, input, params),
      where: () => $('where').value,
      decode: (name, bytes) => gs.decode(name, bytes),
      useImage,
      setSlice,
    }),
  );
  wireHistogram();
}

// Test hook and console entry point; results are read from buffers, not pixels.
window.gpuscope = {
  state,
  get status() {
    return state.status;
  },
  get message() {
    return $('message').textContent;
  },
  ops: Object.keys(OPS),
  image: () => state.image && { name: state.image.name, shape: state.image.shape, dtype: state.image.dtype },
  /** Runs operation `id` on the current image on both paths (GPU null without WebGPU). */
  runBoth: async (id, params, image = state.image) => {
    const r = parseStep(id, params, image);
    if (r.error) throw new Error(r.error);
    const gpu = gs.hasGpu() ? await gs.run('gpu', id, image, r.params) : null;
    const cpu = await gs.run('cpu', id, image, r.params);
    const tables = cpu.table ? { gpuTable: gpu?.table ?? null, cpuTable: cpu.table, agreement: gpu && tableAgreement(OPS[id].exact, gpu.table, cpu.table) } : {};
    return { gpu: gpu?.data ?? null, cpu: cpu.data, shape: cpu.shape, gpuMs: gpu?.wallMs, kernelMs: gpu?.kernelMs, cpuMs: cpu.wallMs, count: cpu.count, gpuCount: gpu?.count, ...tables };
  },
  /** One registry operation on one path, the whole result (tables too). */
  runOp: async (where, id, image, params) => {
    const r = parseStep(id, params, image);
    if (r.error) throw new Error(r.error);
    return gs.run(where, id, image, r.params);
  },
  runGaussian: (p) => window.gpuscope.runBoth('gaussian_filter', p),
  runThreshold: (p) => window.gpuscope.runBoth('threshold', p),
  runConvolve: ({ weights, weightsShape, ...rest }) => {
    const cols = weightsShape[weightsShape.length - 1];
    const rows = [];
    for (let i = 0; i < weights.length; i += cols) rows.push(weights.slice(i, i + cols).join(','));
    return window.gpuscope.runBoth('convolve', { weights: rows.join(';'), ...rest });
  },
  run: (where) => runChain(where),
  loadSample,
  view: () => viewer && {
    layer: state.layer,
    ...viewer.display,
    slice: viewer.slice,
    slices: viewer.info?.slices,
    zoom: viewer.zoom,
    ox: viewer.ox,
    oy: viewer.oy,
    overlay: viewer.overlay?.kind ?? null,
  },
  probe: (x, y) => viewer.probe(x, y),
  /** The markers of the layer shown ({y, x, z?, r, label}). */
  markers: () => viewer.markers.map((m) => ({ ...m })),
  /** Draws an overlay ({kind: 'mask'|'labels'|'boundaries', data}) and
   * markers ([{y, x, r?}]) over the current view, as a result of that kind
   * would be: lets the viewer's overlays be checked before the operations
   * that make labels, superpixels and spots exist in the core. */
  preview: (overlay, markers = []) => {
    viewer.overlay = overlay;
    viewer.markers = markers;
    viewer.renderOverlay();
    viewer.paint();
  },
  hash: () => hashOf(),
  hdf5: () => hdf5.status(),
  zarr: () => zarr.status(),
  /** The workshop's wording, for checks: speed-up text and verdict. */
  workshop: { speedupText, verdict: (rows, device = state.device) => verdict(rows, device) },
  views: () => views,
  viewer: () => viewer,
  python: () => pythonOf(),
};

async function main() {
  wire();
  try {
    setWasm(await import('./wasm.js'));
    const panelHooks = {
      show: async (name, image) => {
        image.name = name;
        return useImage(image);
      },
      message: showMessage,
      run: () => runAfterLoad(),
    };
    hdf5.setup(gs, panelHooks);
    zarr.setup(gs, panelHooks);
    const { device, gpuError } = await gs.start();
    state.device = device;
    state.gpuError = gpuError;
    if (device) {
      $('device').textContent =
        `WebGPU: ${device.name || 'adapter'} (${device.backend}), ` +
        `max binding ${(device.maxBindingSize / 2 ** 20).toFixed(0)} MiB`;
    } else {
      $('device').textContent = 'WebGPU: unavailable — using the CPU (wasm) path';
      const banner = $('banner');
      banner.textContent = `${gpuError} Operations run on the CPU in WebAssembly: same answers, slower.`;
      banner.hidden = false;
      $('where').value = 'cpu';
      $('where').querySelector('option[value=gpu]').disabled = true;
      $('compare').title = 'needs WebGPU';
      $('sweep').title = 'needs WebGPU';
    }
    $('run').disabled = false;
    $('compare').disabled = !device;
    $('sweep').disabled = !device;
    await gs.warmCpu().catch(() => {});
    await applyLink(location.hash, true);
    state.status = 'ready';
    prefetchSamples();
  } catch (e) {
    state.status = 'failed';
    const why = e instanceof Error ? e.message : String(e);
    showMessage(`The app could not start: ${why}. Build and serve it with \`cargo xtask serve\`.`);
  }
}

main();

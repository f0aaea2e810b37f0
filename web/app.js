// The page: load an image, run one operation on WebGPU (and on the CPU for
// comparison), show both pictures and the timings.
// The wasm boundary, imported in main() so that a missing build is reported
// on the page instead of failing silently.
let gs;
import { draw, range } from './viewer.js';

const $ = (id) => document.getElementById(id);
const form = $('params');

const state = {
  status: 'loading', // 'loading' | 'ready' | 'failed'
  device: null,
  gpuError: null,
  image: null, // from gs.decode
  result: null, // last {data, shape, ...}
  busy: 0,
};

function showMessage(text, kind = 'error') {
  const el = $('message');
  el.textContent = text;
  el.className = `message ${text ? kind : ''}`;
}

// Test hook and console entry point; results are read from buffers, not pixels.
window.gpuscope = {
  state,
  get status() { return state.status; },
  get message() { return $('message').textContent; },
  image: () => state.image && { name: state.image.name, shape: state.image.shape, dtype: state.image.dtype },
  // Runs both paths on the current image; `gpu` is null without WebGPU.
  runGaussian: (params) => runBoth(gs.gaussianFilter, params),
  runThreshold: (params) => runBoth(gs.threshold, params),
  runConvolve: (params) => runBoth(gs.convolve, params),
};

async function runBoth(op, params) {
  const image = state.image;
  const gpu = gs.hasGpu() ? await op('gpu', image, params) : null;
  const cpu = await op('cpu', image, params);
  return { gpu: gpu?.data ?? null, cpu: cpu.data, shape: cpu.shape, gpuMs: gpu?.ms, kernelMs: gpu?.kernelMs, cpuMs: cpu.ms };
}

function showImage(image) {
  state.image = image;
  state.result = null;
  const note = draw($('input-view'), image.data, image.shape);
  const { min, max, mean } = image.stats;
  $('image-info').textContent =
    `${image.name}: ${image.shape.join(' × ')} ${image.dtype} (${image.format})` +
    `, min ${fmt(min)} max ${fmt(max)} mean ${fmt(mean)}${note ? `, shown: ${note}` : ''}`;
  $('result-view').width = 1;
  $('result-caption').textContent = 'result';
  $('download').disabled = true;
}

const fmt = (v) => (Number.isInteger(v) ? String(v) : v.toPrecision(4));

async function loadBytes(name, bytes) {
  try {
    showImage(gs.decode(name, bytes));
    showMessage('');
    return true;
  } catch (e) {
    showMessage(`Cannot open ${name}: ${gs.message(e)}`);
    return false;
  }
}

async function loadSample(name) {
  const response = await fetch(`web/samples/${name}`);
  if (!response.ok) throw new Error(`sample ${name}: HTTP ${response.status}`);
  return loadBytes(name, new Uint8Array(await response.arrayBuffer()));
}

function numbers(text) {
  return text.split(',').map((t) => (t.trim() === '' ? NaN : Number(t)));
}

function readParams() {
  const f = new FormData(form);
  return {
    op: f.get('op'),
    compare: f.get('compare') === 'on',
    gaussian: {
      sigma: numbers(f.get('sigma')),
      mode: f.get('mode'),
      cval: Number(f.get('cval')),
      truncate: Number(f.get('truncate')),
    },
    threshold: { value: Number(f.get('value')) },
  };
}

const ops = {
  gaussian: (...a) => gs.gaussianFilter(...a),
  threshold: (...a) => gs.threshold(...a),
};

async function run() {
  if (!state.image) return;
  const p = readParams();
  const op = ops[p.op];
  const params = p[p.op];
  state.busy++;
  $('run').disabled = true;
  try {
    const primary = gs.hasGpu() ? 'gpu' : 'cpu';
    const result = await op(primary, state.image, params);
    const cpu = primary === 'gpu' && p.compare ? await op('cpu', state.image, params) : null;
    state.result = result;
    const isMask = result.data instanceof Uint8Array;
    // Filtered images keep the input's grey scale so brightness is comparable.
    const scale = isMask ? [0, 1] : range(state.image.data);
    draw($('result-view'), result.data, result.shape, scale);
    $('result-caption').textContent = `${p.op} on ${primary === 'gpu' ? 'WebGPU' : 'the CPU'}`;
    showTimings(primary, result, cpu);
    $('download').disabled = false;
    showMessage('');
  } catch (e) {
    showMessage(gs.message(e));
  } finally {
    state.busy--;
    $('run').disabled = false;
  }
}

function showTimings(primary, result, cpu) {
  $('timing').hidden = false;
  const ms = (r) => `${r.ms.toFixed(1)} ms${r.kernelMs ? ` (kernels ${r.kernelMs.toFixed(2)} ms)` : ''}`;
  if (primary === 'gpu') {
    $('t-gpu').textContent = ms(result);
    $('t-cpu').textContent = cpu ? ms(cpu) : '—';
    $('t-diff').textContent = cpu ? maxAbsDiff(result.data, cpu.data).toExponential(2) : '—';
  } else {
    $('t-gpu').textContent = 'unavailable';
    $('t-cpu').textContent = ms(result);
    $('t-diff').textContent = '—';
  }
}

function maxAbsDiff(a, b) {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

function download() {
  if (!state.result) return;
  const bytes = gs.encodeNpy(state.result);
  const url = URL.createObjectURL(new Blob([bytes], { type: 'application/octet-stream' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = `${state.image.name.replace(/\.[^.]*$/, '')}-${readParams().op}.npy`;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

function wire() {
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    run();
  });
  form.elements.op.addEventListener('change', () => {
    for (const fs of form.querySelectorAll('fieldset[data-op]')) {
      fs.hidden = fs.dataset.op !== form.elements.op.value;
    }
  });
  $('sample').addEventListener('change', async (e) => {
    if (await loadSample(e.target.value)) run();
  });
  $('file').addEventListener('change', async (e) => {
    const file = e.target.files[0];
    if (file && (await loadBytes(file.name, new Uint8Array(await file.arrayBuffer())))) run();
  });
  $('download').addEventListener('click', download);
}

async function main() {
  wire();
  try {
    gs = await import('./wasm.js');
    const { device, gpuError } = await gs.start();
    state.device = device;
    state.gpuError = gpuError;
    if (device) {
      $('device').textContent = `WebGPU: ${device.name || 'adapter'} (${device.backend}), ` +
        `max binding ${(device.maxBindingSize / 2 ** 20).toFixed(0)} MiB`;
    } else {
      $('device').textContent = 'WebGPU: unavailable — using the CPU path';
      const banner = $('banner');
      banner.textContent = gpuError;
      banner.hidden = false;
    }
    await loadSample($('sample').value);
    $('run').disabled = false;
    await run();
    state.status = 'ready';
  } catch (e) {
    state.status = 'failed';
    const why = e instanceof Error ? e.message : String(e);
    showMessage(`The app could not start: ${why}. Build and serve it with \`cargo xtask serve\`.`);
  }
}

main();

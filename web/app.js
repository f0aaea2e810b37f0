// The page: load an image (sample, picker or drop), build a chain of
// operations from the registry (ops.js), run it on WebGPU or on the CPU with
// progress and cancel, look at every step in the viewer, compare CPU and
// GPU, download results. The state that makes a view lives in the URL hash.
import { OPS, RTOL, defaults, parseStep } from './ops.js';
import { SAMPLES } from './samples.js';
import { COLORMAPS, STRETCHES } from './colormaps.js';
import { Viewer, drawHistogram, layout, summarize } from './viewer.js';
import { renderTable, saveBlob } from './table.js';
import * as hdf5 from './hdf5.js';

// The wasm boundary, imported in main() so that a missing build is reported
// on the page instead of failing silently.
let gs;

const $ = (id) => document.getElementById(id);
const form = $('params');

const state = {
  status: 'loading', // 'loading' | 'ready' | 'failed'
  device: null,
  gpuError: null,
  image: null, // from gs.decode
  sample: null, // the sample's file name when the image is one
  steps: [{ op: 'gaussian_filter', raw: defaults('gaussian_filter') }],
  outputs: [], // one per step of the last run: {kind, op, data, shape, where, ms, wallMs, kernelMs}
  layer: -1, // what the viewer shows: -1 the input, k the output of step k
  busy: 0,
  run: null, // {cancelled} of the run in progress
  lastRun: null,
  compare: null, // rows of the last workshop comparison
  prefetched: false, // every sample is in memory
};

// Display statistics per array. Negative values of detector frames (CBF)
// are masked pixels (-1 module gaps, -2 bad pixels): left out of the
// limits and the histogram.
const summaries = new WeakMap();
function summaryOf(data) {
  let s = summaries.get(data);
  if (!s) {
    // HDF5 frames with a detector mask applied are marked the CBF way.
    const masked = state.image?.format === 'cbf' || state.image?.masked === true;
    summaries.set(data, (s = summarize(data, masked ? { lowest: 0 } : {})));
    s.masked = masked;
  }
  return s;
}

// ---------------------------------------------------------------- messages

function showMessage(text, kind = 'error') {
  const el = $('message');
  el.textContent = text;
  el.className = `message ${text ? kind : ''}`;
}

const fmt = (v) => (typeof v !== 'number' ? String(v) : Number.isInteger(v) ? String(v) : v.toPrecision(4));
const ms = (v) => (v === undefined || v === null ? '—' : `${v.toFixed(1)} ms`);

// ---------------------------------------------------------------- loading

function selectSampleOptions() {
  const sel = $('sample');
  const none = new Option('— a file of yours —', '');
  none.disabled = true;
  sel.append(none, ...SAMPLES.map((s) => new Option(s.label, s.file)));
}

async function loadBytes(name, bytes, sample = null) {
  showMessage(`Decoding ${name}…`, 'info');
  // Let the message paint before a long decode (a hidden tab paints no
  // frames: the timeout goes on without one).
  await new Promise((r) => {
    requestAnimationFrame(() => setTimeout(r, 0));
    setTimeout(r, 100);
  });
  let image;
  try {
    image = await gs.decode(name, bytes);
  } catch (e) {
    showMessage(`Cannot open ${name}: ${gs.message(e)}`);
    return false;
  }
  hdf5.close();
  return adopt(name, image, sample);
}

/** Makes a decoded `image` the page's input (hdf5.js shows frames so). */
function adopt(name, image, sample = null) {
  image.name = name;
  // A run on the previous image is of no use any more.
  if (state.run) cancel();
  state.image = image;
  state.sample = sample;
  state.outputs = [];
  state.layer = -1;
  $('sample').value = sample ?? '';
  const info = SAMPLES.find((s) => s.file === sample);
  $('provenance').textContent = info ? `Source: ${info.provenance}` : '';
  const { min, max, mean } = image.stats;
  const el = $('image-info');
  el.replaceChildren(
    `${name}: ${image.shape.join(' × ')} ${image.dtype} (${image.format}), min ${fmt(min)} max ${fmt(max)} mean ${fmt(mean)}`,
  );
  if (image.header.length) {
    const d = document.createElement('details');
    const s = document.createElement('summary');
    s.textContent = `header (${image.header.length} fields)`;
    const pre = document.createElement('pre');
    pre.textContent = image.header.map(([k, v]) => `${k} = ${v}`).join('\n');
    d.append(s, pre);
    el.append(d);
  }
  showMessage('');
  renderChain(); // per-axis hints depend on the shape
  refreshView(true);
  writeHash();
  return true;
}

// Samples are fetched once (all of them in the background after start-up),
// so nothing needs the network once the page has loaded.
const sampleCache = new Map();
function fetchSample(file) {
  if (!sampleCache.has(file)) {
    const p = fetch(`web/samples/${file}`).then(async (response) => {
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      return new Uint8Array(await response.arrayBuffer());
    });
    // A failed fetch is not kept: the next try fetches again.
    p.catch(() => sampleCache.delete(file));
    sampleCache.set(file, p);
  }
  return sampleCache.get(file);
}

async function prefetchSamples() {
  for (const s of SAMPLES) await fetchSample(s.file).catch(() => {});
  state.prefetched = true;
}

async function loadSample(file) {
  let bytes;
  try {
    bytes = await fetchSample(file);
  } catch (e) {
    showMessage(`Cannot load the sample ${file}: ${gs.message(e)}`);
    return false;
  }
  return loadBytes(file, bytes, file);
}

async function loadFile(file) {
  if (!file) return false;
  return loadBytes(file.name, new Uint8Array(await file.arrayBuffer()));
}

/** Picked or dropped files: HDF5 ones (an Eiger master with its data
 * files) go to hdf5.js, read by ranges; otherwise the first file. */
function loadFiles(files) {
  if ([...files].some((f) => hdf5.isHdf5(f.name))) return hdf5.open(files);
  return loadFile(files[0]);
}

// ---------------------------------------------------------------- the chain form

function renderChain() {
  const list = $('chain');
  list.replaceChildren();
  state.steps.forEach((step, k) => {
    const op = OPS[step.op];
    const li = document.createElement('li');
    li.className = 'step';
    const fs = document.createElement('fieldset');
    const legend = document.createElement('legend');
    legend.textContent = `Step ${k + 1}`;
    fs.append(legend);

    const opLabel = document.createElement('label');
    opLabel.textContent = 'Operation';
    const select = document.createElement('select');
    select.name = 'op';
    select.dataset.step = k;
    for (const [id, o] of Object.entries(OPS)) select.append(new Option(o.title, id, false, id === step.op));
    opLabel.append(select);
    fs.append(opLabel);

    for (const spec of op.params) {
      const label = document.createElement('label');
      label.textContent = spec.name;
      let input;
      if (spec.type === 'choice') {
        input = document.createElement('select');
        for (const c of spec.choices) input.append(new Option(c, c));
      } else if (spec.type === 'matrix') {
        input = document.createElement('textarea');
        input.rows = 3;
        input.spellcheck = false;
      } else if (spec.type === 'bool') {
        input = document.createElement('input');
        input.type = 'checkbox';
        label.className = 'check';
      } else {
        input = document.createElement('input');
        input.inputMode = spec.type === 'float' || spec.type === 'int' ? 'decimal' : 'text';
        input.autocomplete = 'off';
      }
      input.name = spec.name;
      input.dataset.step = k;
      const value = step.raw[spec.name] ?? String(spec.default);
      if (spec.type === 'bool') input.checked = value === 'true';
      else input.value = value;
      let hint = spec.help ?? '';
      if (spec.perAxis && state.image) hint += ` (the input has ${state.image.shape.length} axes: ${state.image.shape.join('×')})`;
      input.title = hint;
      label.append(input);
      fs.append(label);
    }
    const help = document.createElement('p');
    help.className = 'info small';
    help.textContent = `${op.reference}. ${op.help}`;
    fs.append(help);
    if (state.steps.length > 1) {
      const rm = document.createElement('button');
      rm.type = 'button';
      rm.className = 'remove';
      rm.dataset.remove = k;
      rm.textContent = `Remove step ${k + 1}`;
      fs.append(rm);
    }
    li.append(fs);
    list.append(li);
  });
  updatePython();
}

/** The chain as the reference calls in Python, for checking a result in Jupyter. */
function pythonOf() {
  if (!state.image) return '';
  const input = { shape: state.image.shape };
  const lines = [
    'import numpy as np',
    'from scipy import ndimage',
    'import skimage.segmentation',
    '',
    `# image: ${state.image.name} as a numpy array (${state.image.shape.join(' × ')} ${state.image.dtype});`,
    '# the page computes on its values as floats (float32 on the GPU, float64 on the CPU).',
    'x = np.asarray(image, dtype=np.float64)',
  ];
  state.steps.forEach((s, k) => {
    const op = OPS[s.op];
    const r = parseStep(s.op, s.raw, input);
    if (r.error) {
      lines.push(`# step ${k + 1}: ${r.error}`);
      return;
    }
    let expr = op.python ? op.python(r.params, input) : `None  # ${op.reference}: no Python form recorded`;
    if (op.result === 'mask' && k < state.steps.length - 1) expr = `(${expr}).astype(np.float64)`;
    lines.push(`x = ${expr}  # step ${k + 1}`);
  });
  return lines.join('\n');
}

function updatePython() {
  $('python').textContent = pythonOf();
}

function onFormInput(e) {
  const t = e.target;
  t.removeAttribute('aria-invalid');
  if (t.dataset.step === undefined) {
    writeHash();
    return;
  }
  const k = Number(t.dataset.step);
  const step = state.steps[k];
  if (t.name === 'op') {
    state.steps[k] = { op: t.value, raw: defaults(t.value) };
    renderChain();
    form.querySelector(`select[name=op][data-step="${k}"]`)?.focus();
  } else {
    step.raw[t.name] = t.type === 'checkbox' ? String(t.checked) : t.value;
    updatePython();
  }
  writeHash();
}

function addStep() {
  const last = state.steps[state.steps.length - 1]?.op;
  const op = last === 'threshold' ? 'gaussian_filter' : 'threshold';
  state.steps.push({ op, raw: defaults(op) });
  renderChain();
  form.querySelector(`select[name=op][data-step="${state.steps.length - 1}"]`)?.focus();
  writeHash();
}

function removeStep(k) {
  state.steps.splice(k, 1);
  renderChain();
  writeHash();
}

/** Marks the input a validation error names and puts the focus there. */
function markInvalid(e) {
  if (e.step === undefined || !e.param) return;
  const el = form.querySelector(`[data-step="${e.step}"][name="${e.param}"]`);
  if (!el) return;
  el.setAttribute('aria-invalid', 'true');
  el.setAttribute('aria-errormessage', 'message');
  el.focus();
}

/** Every step's parameters parsed and checked before anything runs. */
function parseChain() {
  const input = { shape: state.image.shape };
  return state.steps.map((s, k) => {
    const r = parseStep(s.op, s.raw, input);
    if (r.error) {
      const e = new Error(state.steps.length > 1 ? `step ${k + 1} (${s.op}): ${r.error}` : r.error);
      e.step = k;
      e.param = /^invalid (\w+):/.exec(r.error)?.[1];
      throw e;
    }
    return { op: s.op, params: r.params };
  });
}

// ---------------------------------------------------------------- running

/** What the next step of a chain gets from output `r` of a step of `kind`. */
function nextInput(input, kind, r) {
  if (kind === 'table') return input;
  return { data: r.data instanceof Float32Array ? r.data : Float32Array.from(r.data), shape: r.shape };
}

/** A run's cancel token: `until(p)` resolves as `p` does, or rejects with
 * CancelledError as soon as `cancel()` is called. A GPU submission cannot
 * be recalled: it finishes in the background and its result is dropped. */
function newToken() {
  let reject;
  const cancelled = new Promise((_, r) => (reject = r));
  cancelled.catch(() => {});
  const token = {
    cancelled: false,
    cancel() {
      token.cancelled = true;
      reject(new gs.CancelledError());
    },
    until: (p) => Promise.race([p, cancelled]),
  };
  return token;
}

function setBusy(on, token) {
  state.busy += on ? 1 : -1;
  state.run = on ? token : null;
  $('run').disabled = on;
  $('compare').disabled = on || !gs?.hasGpu();
  $('cancel').disabled = !on;
  $('progress-box').hidden = !on;
}

function progress(done, total, text) {
  $('progress').max = total;
  $('progress').value = done;
  $('progress-text').textContent = text;
}

/** Runs the chain on `where`; resolves to true when it completed. */
async function runChain(where = $('where').value) {
  if (!state.image || state.busy) return false;
  let steps;
  try {
    steps = parseChain();
  } catch (e) {
    showMessage(gs.message(e));
    markInvalid(e);
    return false;
  }
  const token = newToken();
  setBusy(true, token);
  showMessage('');
  const started = performance.now();
  const label = where === 'gpu' ? 'WebGPU' : 'the CPU';
  let current = '';
  const tick = setInterval(() => {
    $('progress-text').textContent = `${current} ${((performance.now() - started) / 1000).toFixed(1)} s`;
  }, 100);
  try {
    const outputs = [];
    let input = { data: state.image.data, shape: state.image.shape };
    let image = input;
    for (let k = 0; k < steps.length; k++) {
      const { op, params } = steps[k];
      current = `step ${k + 1} of ${steps.length}: ${op} on ${label}…`;
      progress(k, steps.length, current);
      const r = await token.until(gs.run(where, op, input, params, { image }));
      const kind = OPS[op].result;
      outputs.push({ ...r, kind, op, params, inputIndex: k - 1 });
      input = nextInput(input, kind, r);
      if (kind === 'image') image = input;
    }
    progress(steps.length, steps.length, 'done');
    state.outputs = outputs;
    state.layer = outputs.length - 1;
    const total = performance.now() - started;
    state.lastRun = { where, ms: total, steps: outputs.map((o) => ({ op: o.op, ms: o.ms, wallMs: o.wallMs, kernelMs: o.kernelMs })) };
    $('run-info').textContent =
      `Ran ${outputs.map((o) => o.op).join(' → ')} on ${label} in ${ms(total)}` +
      (outputs.some((o) => o.kernelMs) ? ` (GPU kernels ${ms(outputs.reduce((a, o) => a + (o.kernelMs ?? 0), 0))})` : '') +
      '.';
    refreshView(false);
    writeHash();
    return true;
  } catch (e) {
    if (e instanceof gs.CancelledError || token.cancelled) {
      showMessage('Cancelled: the previous results are kept.', 'info');
    } else {
      showMessage(gs.message(e));
    }
    return false;
  } finally {
    clearInterval(tick);
    setBusy(false);
  }
}

function cancel() {
  if (!state.run) return;
  // The CPU worker is stopped at once; a GPU submission cannot be recalled,
  // its result is dropped when it arrives.
  gs.cancelCpu();
  state.run.cancel();
}

// ---------------------------------------------------------------- workshop

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** How far the GPU result is from the CPU reference: arrays element by
 * element (exact for integer results, RTOL of the largest magnitude for
 * float sums); tables cell by cell (see tableAgreement). */
function agreement(spec, g, c) {
  if (c.table) return tableAgreement(spec.exact, g.table, c.table);
  return arrayAgreement(spec.exact, g.data, c.data);
}

/** Tables: the same rows; integer and text columns (and every column of an
 * exact operation) equal, float columns within RTOL of the column's largest
 * magnitude (f32 sums on the GPU, f64 on the CPU). */
function tableAgreement(exact, g, c) {
  let mismatches = Math.abs(g.rows.length - c.rows.length);
  let maxDiff = mismatches ? Infinity : 0;
  let maxAbs = 0;
  let ok = mismatches === 0;
  const n = Math.min(g.rows.length, c.rows.length);
  for (const col of c.columns) {
    const scale = c.rows.reduce((m, r) => (typeof r[col.key] === 'number' ? Math.max(m, Math.abs(r[col.key])) : m), 0);
    maxAbs = Math.max(maxAbs, scale);
    for (let i = 0; i < n; i++) {
      const [a, b] = [g.rows[i][col.key], c.rows[i][col.key]];
      if (a === b) continue;
      mismatches++;
      const d = typeof a === 'number' && typeof b === 'number' ? Math.abs(a - b) : Infinity;
      maxDiff = Math.max(maxDiff, Number.isNaN(d) ? Infinity : d);
      if (exact || col.integer || col.text || !(d <= RTOL * scale)) ok = false;
    }
  }
  return { maxDiff, maxAbs, mismatches, ok };
}

function arrayAgreement(exact, gpu, cpu) {
  let maxDiff = 0;
  let maxAbs = 0;
  let mismatches = 0;
  for (let i = 0; i < cpu.length; i++) {
    if (Number.isNaN(gpu[i]) && Number.isNaN(cpu[i])) continue; // NaN in, NaN out on both
    const d = Math.abs(gpu[i] - cpu[i]);
    if (d > maxDiff || Number.isNaN(d)) maxDiff = Number.isNaN(d) ? Infinity : d;
    maxAbs = Math.max(maxAbs, Math.abs(cpu[i]));
    if (gpu[i] !== cpu[i]) mismatches++;
  }
  const ok = exact ? mismatches === 0 : maxDiff <= RTOL * maxAbs;
  return { maxDiff, maxAbs, mismatches, ok };
}

async function compare() {
  if (!state.image || state.busy || !gs.hasGpu()) return;
  let steps;
  try {
    steps = parseChain();
  } catch (e) {
    showMessage(gs.message(e));
    return;
  }
  const repeats = Math.max(1, Math.min(20, Math.round(Number($('repeats').value)) || 1));
  const token = newToken();
  setBusy(true, token);
  showMessage('');
  const rows = [];
  try {
    let input = { data: state.image.data, shape: state.image.shape };
    let image = input;
    const total = steps.length * repeats * 2;
    let done = 0;
    for (let k = 0; k < steps.length; k++) {
      const { op, params } = steps[k];
      const spec = OPS[op];
      // One untimed GPU call first: it compiles the pipelines (a one-off cost).
      await token.until(gs.run('gpu', op, input, params, { image }));
      const g = [];
      const c = [];
      let gpu;
      let cpu;
      for (let i = 0; i < repeats; i++) {
        progress(done++, total, `step ${k + 1}: ${op} on WebGPU, run ${i + 1} of ${repeats}`);
        gpu = await token.until(gs.run('gpu', op, input, params, { image }));
        g.push(gpu);
      }
      for (let i = 0; i < repeats; i++) {
        progress(done++, total, `step ${k + 1}: ${op} on the CPU, run ${i + 1} of ${repeats}`);
        cpu = await token.until(gs.run('cpu', op, input, params, { image }));
        c.push(cpu);
      }
      const a = agreement(spec, gpu, cpu);
      const gpuMs = median(g.map((r) => r.wallMs));
      const cpuMs = median(c.map((r) => r.wallMs));
      const kernels = g.map((r) => r.kernelMs).filter((v) => v !== undefined);
      rows.push({
        step: k + 1,
        operation: op,
        gpu_ms: gpuMs,
        gpu_kernel_ms: kernels.length ? median(kernels) : null,
        cpu_ms: cpuMs,
        speedup: cpuMs / gpuMs,
        max_abs_diff: a.maxDiff,
        mismatches: a.mismatches,
        agree: a.ok ? 'yes' : 'NO',
      });
      // Both paths of the next step get the same input: the CPU reference's output.
      input = nextInput(input, spec.result, cpu);
      if (spec.result === 'image') image = input;
    }
    state.compare = rows;
    $('workshop-results').hidden = false;
    const f2 = (v) => (v === null ? '—' : v.toFixed(2));
    renderTable($('workshop-table'), {
      columns: [
        { key: 'step', label: '#' },
        { key: 'operation', label: 'operation' },
        { key: 'gpu_ms', label: 'GPU ms (with transfers)', format: f2 },
        { key: 'gpu_kernel_ms', label: 'GPU kernels ms', format: f2 },
        { key: 'cpu_ms', label: 'CPU ms', format: f2 },
        { key: 'speedup', label: 'speed-up', format: (v) => `${v.toFixed(1)}×` },
        { key: 'max_abs_diff', label: 'max |GPU−CPU|', format: (v) => v.toExponential(1) },
        { key: 'agree', label: 'agree' },
      ],
      rows,
      caption: `median of ${repeats} run${repeats > 1 ? 's' : ''} on ${state.image.name}`,
      name: 'cpu-vs-gpu',
    });
    const cpuTotal = rows.reduce((s, r) => s + r.cpu_ms, 0);
    const gpuTotal = rows.reduce((s, r) => s + r.gpu_ms, 0);
    const ratio = cpuTotal / gpuTotal;
    $('speedup').textContent =
      `Whole chain: CPU ${ms(cpuTotal)}, GPU ${ms(gpuTotal)} including transfers — speed-up ${ratio.toFixed(2)}×: ` +
      (ratio >= 1
        ? `the GPU is ${ratio.toFixed(1)}× faster.`
        : `the GPU is ${(1 / ratio).toFixed(1)}× slower here (small images pay for the transfers${
            /swiftshader|cpu/i.test(`${state.device?.name} ${state.device?.deviceType}`) ? '; this WebGPU adapter is itself a CPU emulation' : ''
          }).`) +
      (rows.every((r) => r.agree === 'yes') ? ' The results agree.' : ' Some results DISAGREE: see the table.');
    progress(total, total, 'done');
  } catch (e) {
    if (e instanceof gs.CancelledError || token.cancelled) showMessage('Comparison cancelled.', 'info');
    else showMessage(gs.message(e));
  } finally {
    setBusy(false);
  }
}

// ---------------------------------------------------------------- the view

let viewer;
let histogramRange = { from: 0, to: 1 };

/** Dragging across the histogram sets the display limits (manual). */
function wireHistogram() {
  const c = $('histogram');
  let drag = null; // {start, range} fixed at pointerdown: the axis may move while dragging
  const valueAt = (e, range) => {
    const r = c.getBoundingClientRect();
    const t = Math.min(1, Math.max(0, (e.clientX - r.left) / r.width));
    return range.from + t * (range.to - range.from);
  };
  c.addEventListener('pointerdown', (e) => {
    const range = { ...histogramRange };
    drag = { start: valueAt(e, range), range };
    c.setPointerCapture(e.pointerId);
  });
  c.addEventListener('pointerup', () => (drag = null));
  c.addEventListener('pointermove', (e) => {
    if (!drag) return;
    const v = valueAt(e, drag.range);
    if (v === drag.start) return;
    $('limits').value = 'manual';
    $('vmin').value = +Math.min(drag.start, v).toPrecision(6);
    $('vmax').value = +Math.max(drag.start, v).toPrecision(6);
    refreshView(false);
    writeHash();
  });
}

/** Base array, overlay and markers of layer `k` (-1: the input). */
function layerOf(k) {
  const input = { data: state.image.data, shape: state.image.shape, name: state.image.name };
  if (k < 0 || !state.outputs[k]) return { base: input, overlay: null, markers: [], result: null };
  // The base of an overlay is the nearest earlier image in the chain.
  const baseOf = (j) => {
    for (let i = j; i >= 0; i--) if (state.outputs[i].kind === 'image') return state.outputs[i];
    return input;
  };
  const o = state.outputs[k];
  if (o.kind === 'image') return { base: o, overlay: null, markers: [], result: o };
  if (o.kind === 'mask') return { base: baseOf(k - 1), overlay: { kind: 'mask', data: o.data }, markers: [], result: o };
  if (o.kind === 'labels') {
    return { base: baseOf(k - 1), overlay: { kind: OPS[o.op].overlay ?? 'labels', data: o.data }, markers: [], result: o };
  }
  // Tables: markers, over the array the step also returns (strong pixels,
  // source labels) when it has the base image's size.
  const base = baseOf(k - 1);
  const kind = OPS[o.op].overlay;
  const overlay = kind && o.data?.length === base.data.length ? { kind, data: o.data } : null;
  return { base, overlay, markers: OPS[o.op].markers?.(o) ?? [], result: o };
}

function fillLayerSelect() {
  const sel = $('layer');
  sel.replaceChildren(new Option(`input: ${state.image.name}`, '-1'));
  state.outputs.forEach((o, k) =>
    sel.append(new Option(`step ${k + 1}: ${o.op} (${o.where === 'gpu' ? 'WebGPU' : 'CPU'})`, String(k))),
  );
  sel.value = String(state.layer);
}

/** Redraws after a new image, a run or a change of display settings. */
function refreshView(newImage) {
  if (!state.image) return;
  if (state.layer >= state.outputs.length) state.layer = state.outputs.length - 1;
  fillLayerSelect();
  const { base, overlay, markers, result } = layerOf(state.layer);
  const summary = summaryOf(base.data);
  const mode = $('limits').value;
  let lo;
  let hi;
  if (mode === 'manual') {
    lo = Number($('vmin').value);
    hi = Number($('vmax').value);
    if (!Number.isFinite(lo) || !Number.isFinite(hi)) {
      lo = summary.min;
      hi = summary.max;
    }
  } else if (mode === 'minmax') {
    lo = summary.min;
    hi = summary.max;
  } else {
    lo = summary.percentile(Number($('plo').value) || 0);
    hi = summary.percentile(Number($('phi').value) || 100);
  }
  if (mode !== 'manual') {
    $('vmin').value = +lo.toPrecision(6);
    $('vmax').value = +hi.toPrecision(6);
  }
  viewer.display = { cmap: $('cmap').value, stretch: $('stretch').value, lo, hi };
  viewer.opacity = Number($('opacity').value);
  viewer.overlay = overlay;
  viewer.markers = markers;
  if (newImage) viewer.fitted = false;
  viewer.setLayer(base);
  const { slices } = layout(base.shape);
  $('slice-row').hidden = slices <= 1;
  $('slice').max = String(slices - 1);
  $('slice').value = String(viewer.slice);
  $('slice-out').textContent = `${viewer.slice} of ${slices}`;
  const rgb = layout(base.shape).channels > 1;
  $('cmap').disabled = rgb;
  $('cmap').title = rgb ? 'colour images are shown in their own colours' : '';
  const shown = drawHistogram($('histogram'), summary, lo, hi, { cmap: rgb ? 'gray' : $('cmap').value, stretch: $('stretch').value });
  histogramRange = shown;
  $('hist-caption').textContent =
    `histogram of ${state.layer < 0 ? 'the input' : `step ${state.layer + 1}'s ${overlay ? 'input' : 'output'}`}` +
    ` from ${fmt(shown.from)} to ${fmt(shown.to)} (values ${fmt(summary.min)} … ${fmt(summary.max)}, log counts` +
    `${summary.exact ? '' : ', sampled'}${summary.masked ? ', masked negative pixels left out' : ''}); the shaded band is the display range ${fmt(lo)} … ${fmt(hi)}`;
  $('dl-npy').disabled = $('dl-tif').disabled = false;
  $('dl-png').disabled = false;
  showResults(result);
}

function showResults(result) {
  const panel = $('results');
  if (!result || result.kind === 'image') {
    panel.hidden = true;
    return;
  }
  panel.hidden = false;
  if (result.kind === 'table' && result.table) {
    $('results-summary').textContent = `${result.table.rows.length} rows from ${result.op}.`;
    renderTable($('results-table'), { ...result.table, name: `${stem()}-${result.op}` });
    return;
  }
  // Masks and labels: counts per slice.
  const { h, w, channels, slices } = layout(result.shape);
  const n = h * w * channels;
  const rows = [];
  let total = 0;
  for (let z = 0; z < slices; z++) {
    let count = 0;
    const labels = new Set();
    for (let i = z * n; i < (z + 1) * n; i++) {
      if (result.data[i]) {
        count++;
        if (result.kind === 'labels') labels.add(result.data[i]);
      }
    }
    total += count;
    const row = { slice: z, foreground: count, fraction: count / n };
    if (result.kind === 'labels') row.labels = labels.size;
    rows.push(row);
  }
  $('results-summary').textContent =
    `${result.op}: ${total} of ${result.data.length} pixels foreground (${((100 * total) / result.data.length).toFixed(2)}%)` +
    (result.count !== undefined ? `, ${result.count} labels` : '') +
    '.';
  const columns = [
    { key: 'slice', label: 'slice' },
    { key: 'foreground', label: 'foreground pixels' },
    { key: 'fraction', label: 'fraction', format: (v) => v.toFixed(4) },
  ];
  if (result.kind === 'labels') columns.push({ key: 'labels', label: 'labels' });
  renderTable($('results-table'), { columns, rows, name: `${stem()}-${result.op}-counts` });
}

const stem = () => (state.image?.name ?? 'image').replace(/(\.cbf)?\.[^.]*$/i, '');

function hover(p) {
  const el = $('cursor');
  if (!p) {
    el.textContent = 'Move the pointer over the image to read values.';
    return;
  }
  const v = Array.isArray(p.value) ? `(${p.value.map(fmt).join(', ')})` : fmt(p.value);
  let text = `x ${p.x}, y ${p.y}${p.z !== undefined ? `, slice ${p.z}` : ''}: ${v}`;
  if (p.overlay !== undefined) text += p.kind === 'mask' ? `, mask ${p.overlay ? 1 : 0}` : `, label ${p.overlay}`;
  el.textContent = text;
}

// ---------------------------------------------------------------- downloads

function currentArray() {
  const k = state.layer;
  if (k < 0 || !state.outputs[k]) return { data: state.image.data, shape: state.image.shape, name: stem() };
  const o = state.outputs[k];
  return { data: o.data, shape: o.shape, name: `${stem()}-${state.outputs.slice(0, k + 1).map((x) => x.op).join('-')}` };
}

function download(format) {
  try {
    const a = currentArray();
    const bytes = gs.encode(format, a);
    saveBlob(new Blob([bytes], { type: 'application/octet-stream' }), `${a.name}.${format === 'tiff' ? 'tif' : format}`);
  } catch (e) {
    showMessage(`Cannot write the file: ${gs.message(e)}`);
  }
}

async function downloadView() {
  const blob = await viewer.pngBlob();
  saveBlob(blob, `${currentArray().name}-view.png`);
}

// ---------------------------------------------------------------- URL hash

function hashOf() {
  const q = new URLSearchParams();
  if (state.sample) q.set('sample', state.sample);
  q.set('on', $('where').value);
  state.steps.forEach((s, k) => {
    q.set(`${k + 1}.op`, s.op);
    for (const spec of OPS[s.op].params) q.set(`${k + 1}.${spec.name}`, s.raw[spec.name] ?? String(spec.default));
  });
  q.set('cmap', $('cmap').value);
  q.set('scale', $('stretch').value);
  q.set('limits', $('limits').value);
  if ($('limits').value === 'auto') q.set('p', `${$('plo').value},${$('phi').value}`);
  if ($('limits').value === 'manual') q.set('v', `${$('vmin').value},${$('vmax').value}`);
  if (viewer?.info?.slices > 1) q.set('z', String(viewer.slice));
  q.set('opacity', $('opacity').value);
  if (state.layer >= 0) q.set('show', String(state.layer + 1));
  return `#${q.toString()}`;
}

let hashTimer = 0;
function writeHash() {
  clearTimeout(hashTimer);
  hashTimer = setTimeout(() => {
    const h = hashOf();
    if (location.hash !== h) history.replaceState(null, '', h);
  }, 50);
}

/** Applies a hash; returns {sample, show, z, errors}. Unknown entries are reported, not fatal. */
function applyHash(hash) {
  const q = new URLSearchParams(hash.replace(/^#/, ''));
  const errors = [];
  const steps = [];
  for (let k = 1; q.has(`${k}.op`); k++) {
    const op = q.get(`${k}.op`);
    if (!OPS[op]) {
      errors.push(`the link names an unknown operation '${op}'`);
      continue;
    }
    const raw = defaults(op);
    for (const spec of OPS[op].params) if (q.has(`${k}.${spec.name}`)) raw[spec.name] = q.get(`${k}.${spec.name}`);
    steps.push({ op, raw });
  }
  if (steps.length) state.steps = steps;
  const pick = (id, key, allowed) => {
    if (!q.has(key)) return;
    const v = q.get(key);
    if (allowed.includes(v)) $(id).value = v;
    else errors.push(`the link's ${key}=${v} is not one of ${allowed.join(', ')}`);
  };
  pick('where', 'on', ['gpu', 'cpu']);
  pick('cmap', 'cmap', COLORMAPS);
  pick('stretch', 'scale', STRETCHES);
  pick('limits', 'limits', ['auto', 'minmax', 'manual']);
  if (q.has('p')) [$('plo').value, $('phi').value] = q.get('p').split(',');
  if (q.has('v')) [$('vmin').value, $('vmax').value] = q.get('v').split(',');
  if (q.has('opacity')) $('opacity').value = q.get('opacity');
  let sample = q.get('sample');
  if (sample && !SAMPLES.some((s) => s.file === sample)) {
    errors.push(`the link names an unknown sample '${sample}'`);
    sample = null;
  }
  renderChain();
  return { sample, show: q.has('show') ? Number(q.get('show')) - 1 : null, z: q.has('z') ? Number(q.get('z')) : null, errors };
}

async function applyLink(hash, first) {
  const link = applyHash(hash);
  if (!gs.hasGpu()) $('where').value = 'cpu';
  if (link.sample && link.sample !== state.sample) await loadSample(link.sample);
  else if (first || !state.image) await loadSample(link.sample ?? SAMPLES[0].file);
  const ok = await runChain();
  if (ok && link.show !== null && link.show >= -1 && link.show < state.outputs.length) state.layer = link.show;
  refreshView(false);
  if (link.z !== null) setSlice(link.z);
  if (link.errors.length) showMessage(`${link.errors.join('; ')}.`, 'info');
  writeHash();
}

// ---------------------------------------------------------------- wiring

function setSlice(z) {
  viewer.setSlice(z);
  $('slice').value = String(viewer.slice);
  $('slice-out').textContent = `${viewer.slice} of ${viewer.info.slices}`;
  writeHash();
}

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
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && state.run) {
      e.preventDefault();
      cancel();
    }
  });

  $('sample').addEventListener('change', async (e) => {
    if (e.target.value && (await loadSample(e.target.value))) runChain();
  });
  $('file').addEventListener('change', async (e) => {
    if (e.target.files.length && (await loadFiles(e.target.files))) runChain();
    e.target.value = '';
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
    const files = e.dataTransfer?.files;
    if (!files?.length) {
      showMessage('Nothing to open: drop a file (npy, tif, png, jpg, cbf, fits, h5, nxs).');
      return;
    }
    if (await loadFiles(files)) runChain();
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
  window.addEventListener('hashchange', () => {
    if (location.hash !== hashOf()) applyLink(location.hash, false);
  });

  viewer = new Viewer($('view'), { onHover: hover });
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
  hdf5: () => hdf5.status(),
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
  python: () => pythonOf(),
};

async function main() {
  wire();
  try {
    gs = await import('./wasm.js');
    hdf5.setup(gs, { show: async (name, image) => adopt(name, image), message: showMessage, run: () => runChain() });
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
    }
    $('run').disabled = false;
    $('compare').disabled = !device;
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

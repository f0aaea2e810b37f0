// The kernel lab's page: the exercise, its input, the editor, a run with
// its check and timings, the sweep, sharing and export. The pieces live in
// their own modules; this one wires them to the page and keeps the state.
import { Editor } from './editor.js';
import { EXERCISES, byId } from './exercises.js';
import { SAMPLES, file as decodeFile, generated, sample } from './inputs.js';
import { Gpu, LabError, SHOWN_LIMITS, STUCK_MS } from './runner.js';
import { fromHash, loadStored, store, toHash } from './state.js';
import { crossover, measure, plot, sweepSizes } from './timing.js';
import { message } from '../wasm.js';

const $ = (id) => document.getElementById(id);
const gpu = new Gpu();
const stored = loadStored();
const state = {
  ex: EXERCISES[0],
  userImage: null, // the decoded file of the student, if any
  busy: 0,
  last: null, // the last run's result (for the tests and the timing panel)
  sweep: null,
  status: 'starting',
};

// ---- the work of each exercise ----

function defaults(ex) {
  return {
    code: ex.starter,
    workgroups: ex.workgroups,
    n: ex.defaultN,
    input: ex.inputs[0] === 'image' ? 'sample:coins.png' : 'array',
  };
}

const workOf = (ex) => ({ ...defaults(ex), ...(stored.work[ex.id] ?? {}) });

function current() {
  return {
    code: editor.value,
    workgroups: state.ex.fixedWorkgroups ? state.ex.workgroups : $('workgroups').value,
    n: Math.max(1, Math.floor(Number($('n').value) || state.ex.defaultN)),
    input: $('input').value,
  };
}

let saveTimer = 0;
let saveSeq = 0;
/** Saves to localStorage and the address bar, shortly after the last edit. */
function save(now = false) {
  clearTimeout(saveTimer);
  const run = async () => {
    const work = current();
    const id = state.ex.id;
    const seq = ++saveSeq;
    stored.current = id;
    stored.work[id] = work;
    store(stored);
    const hash = await toHash(id, work);
    // Compression is asynchronous: an older save must not win the race.
    if (seq === saveSeq) history.replaceState(null, '', hash);
  };
  if (now) return run();
  saveTimer = setTimeout(run, 300);
  return null;
}

const editor = new Editor($('editor'), () => {
  $('compiler').replaceChildren();
  save();
});

// ---- the page ----

function showExercise(ex, work) {
  state.ex = ex;
  $('exercise').value = ex.id;
  $('lesson').innerHTML = ex.lesson;
  $('solution').textContent = ex.solution;
  $('solution-box').open = false;
  $('cupy').textContent = ex.cupy;
  editor.value = work.code;
  $('compiler').replaceChildren();
  const wg = $('workgroups');
  wg.value = ex.fixedWorkgroups ? ex.workgroups : work.workgroups;
  wg.readOnly = Boolean(ex.fixedWorkgroups);
  wg.title = ex.fixedWorkgroups ? 'fixed in this exercise' : 'a formula of n, width, height: e.g. ceil(n / 256)';
  $('n').value = String(work.n);
  fillInputs(work.input);
  showResult('', '');
  $('timing').replaceChildren();
  $('timing-note').textContent = '';
  $('images').hidden = true;
  $('launch-info').textContent = '';
  $('plot').hidden = true;
  $('sweep-table').replaceChildren();
  $('sweep-info').textContent = '';
  $('sweep').disabled = state.status !== 'ready' || !ex.inputs.includes('array');
  updateInputInfo();
}

function fillInputs(value) {
  const sel = $('input');
  const ex = state.ex;
  const opts = [new Option('generated array (seeded, integers 0..255)', 'array')];
  // multipage.tif is a decoder test (two tiny pages), not an exercise input.
  for (const s of SAMPLES) if (s.file !== 'multipage.tif') opts.push(new Option(`sample: ${s.label}`, `sample:${s.file}`));
  if (state.userImage) opts.push(new Option(`your file: ${state.userImage.label}`, 'file'));
  for (const o of opts) o.disabled = !ex.inputs.includes(o.value === 'array' ? 'array' : 'image');
  sel.replaceChildren(...opts);
  const ok = opts.find((o) => o.value === value && !o.disabled) ?? opts.find((o) => !o.disabled);
  sel.value = ok.value;
  $('file').disabled = !ex.inputs.includes('image');
}

async function inputData() {
  const v = $('input').value;
  const n = current().n;
  if (v === 'array') return generated(n, state.ex.id === 'convolve');
  if (v === 'file' && state.userImage) return state.userImage;
  return sample(v.replace(/^sample:/, ''));
}

async function updateInputInfo() {
  const isArray = $('input').value === 'array';
  $('n-label').hidden = !isArray;
  try {
    const input = await inputData();
    $('input-info').textContent = `${input.label}: ${input.data.length} elements.`;
  } catch (e) {
    $('input-info').textContent = `Cannot load this input: ${message(e)}`;
  }
}

function showResult(kind, text) {
  const el = $('result');
  el.className = `result ${kind}`;
  el.textContent = text;
}

function showCompiler(messages) {
  editor.mark(messages);
  $('compiler').replaceChildren(
    ...messages.map((m) => {
      const li = document.createElement('li');
      li.className = m.type;
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = `line ${m.line}, column ${m.col}`;
      b.addEventListener('click', () => editor.goTo(m.line, m.col));
      li.append(b, `${m.type}: ${m.text}`);
      return li;
    }),
  );
}

function showLimits() {
  const t = $('limits');
  t.replaceChildren();
  for (const [name, what] of SHOWN_LIMITS) {
    const tr = t.insertRow();
    tr.insertCell().textContent = what;
    const td = tr.insertCell();
    td.className = 'num';
    td.textContent = String(gpu.limit(name));
    td.title = name;
  }
  const tr = t.insertRow();
  tr.insertCell().textContent = 'GPU timestamps (timestamp-query)';
  const td = tr.insertCell();
  td.className = 'num';
  td.textContent = gpu.hasTimestamps ? 'yes' : 'no';
}

const ms = (v) => (v === null || v === undefined ? '—' : `${v < 0.1 ? v.toFixed(4) : v < 10 ? v.toFixed(3) : v.toFixed(1)} ms`);
const p3 = (v) => Number(v.toPrecision(3)).toString();
const rate = (bytes, msv) => (msv ? `${p3(bytes / (msv / 1e3) / 1e9)} GB/s` : '—');

function showTiming(r, repeats) {
  const t = $('timing');
  t.replaceChildren();
  const row = (label, value, note = '') => {
    const tr = t.insertRow();
    tr.insertCell().textContent = label;
    const td = tr.insertCell();
    td.className = 'num';
    td.textContent = value;
    tr.insertCell().textContent = note;
    tr.dataset.row = label.split(' ')[0];
  };
  const head = t.createTHead().insertRow();
  for (const h of [`median of ${repeats} run${repeats > 1 ? "s" : ""} (after one warm-up)`, 'time', 'what it means']) {
    const th = document.createElement('th');
    th.textContent = h;
    head.append(th);
  }
  row('GPU kernel (timestamp queries)', gpu.hasTimestamps ? ms(r.gpuMs) : 'not available',
    gpu.hasTimestamps ? 'the GPU’s own clock at the start and end of the compute pass: the kernel alone' : 'this adapter has no timestamp-query: use the waited wall time below, which includes the launch overhead');
  row('wall, submit() returned', ms(r.submitMs), 'the launch is asynchronous: the kernel has not run yet, so this measures nothing about it');
  row('wall, waited for the queue', ms(r.doneMs), 'until onSubmittedWorkDone() (CUDA: cudaDeviceSynchronize): launch + kernel');
  row('CPU reference', ms(r.cpuMs), r.referenceSource);
  const gpuTime = r.gpuMs ?? r.doneMs;
  const bw = gpu.copyBandwidth;
  row('bytes moved', `${p3(r.bytes / 1e6)} MB`, `at ${rate(r.bytes, gpuTime)} (${r.gpuMs ? 'kernel' : 'waited'} time)${bw ? `; this device copies ${p3(bw / 1e9)} GB/s (buffer to buffer, measured): ${p3((100 * r.bytes) / (gpuTime / 1e3) / bw)} % of that` : ''}`);
  row('speed-up', r.cpuMs && r.doneMs ? `${p3(r.cpuMs / r.doneMs)}×` : '—', 'CPU reference time / waited GPU time');
  $('timing-note').textContent = `All runs, waited wall time: ${r.runs.map((x) => x.doneMs.toFixed(3)).join(', ')} ms${gpu.hasTimestamps ? `; kernel: ${r.runs.map((x) => (x.gpuMs === null ? '—' : x.gpuMs.toFixed(4))).join(', ')} ms` : ''}. Browsers may round timestamps (Chrome to 0.1 ms unless WebGPU developer features are on).`;
}

/** For an image exercise: the input, the kernel's output and its wrong
 * pixels (red), each scaled min..max to grey, so a border left out or a
 * flipped kernel is seen at once. */
function showImages(r) {
  const shape = r.shape;
  $('images').hidden = !shape;
  if (!shape) return;
  const [h, w] = shape;
  const wrong = new Uint8Array(h * w);
  for (const [a, b] of r.check.runs) wrong.fill(1, a, b + 1);
  const draw = (canvas, data, mark) => {
    canvas.width = w;
    canvas.height = h;
    const g = canvas.getContext('2d');
    const img = g.createImageData(w, h);
    let lo = Infinity;
    let hi = -Infinity;
    for (const v of data) if (Number.isFinite(v)) [lo, hi] = [Math.min(lo, v), Math.max(hi, v)];
    const k = hi > lo ? 255 / (hi - lo) : 0;
    for (let i = 0; i < w * h; i++) {
      const v = (data[i] - lo) * k;
      const bad = mark && mark[i];
      img.data.set(bad ? [255, 40, 40, 255] : [v, v, v, 255], 4 * i);
    }
    g.putImageData(img, 0, 0);
  };
  draw($('img-in'), r.input[0].data, null);
  draw($('img-out'), r.got, null);
  draw($('img-wrong'), r.got, wrong);
}

/** One row per run, newest first: the exercise, the input, the check and
 * the times, so a student can set two versions of a kernel side by side. */
function addToHistory(r, work) {
  const t = $('history');
  if (!t.tHead) {
    const head = t.createTHead().insertRow();
    for (const h of ['exercise', 'input', 'n', 'workgroups', 'check', 'GPU kernel', 'GPU waited', 'CPU reference']) {
      const th = document.createElement('th');
      th.textContent = h;
      head.append(th);
    }
    t.createTBody();
  }
  const tr = t.tBodies[0].insertRow(0);
  const cells = [state.ex.title, $('input').selectedOptions[0]?.textContent ?? work.input, r.n, r.count.join(' × '), r.check.ok ? 'correct' : `${r.check.wrong} wrong`, ms(r.gpuMs), ms(r.doneMs), ms(r.cpuMs)];
  for (const c of cells) {
    const td = tr.insertCell();
    td.textContent = String(c);
    if (typeof c === 'number' || /ms$/.test(c)) td.className = 'num';
  }
  while (t.tBodies[0].rows.length > 20) t.tBodies[0].deleteRow(-1);
}

/** "0 a: read, 200 f32" — what the lab bound where the shader declares it. */
function describeBinding(b) {
  const type = b.data instanceof Uint32Array ? 'u32' : 'f32';
  if (b.kind === 'uniform') return `${b.binding} ${b.name}: uniform (${Array.from(b.data).join(', ')})`;
  return `${b.binding} ${b.name}: ${b.kind === 'read' ? 'read' : 'read_write'}, ${b.data.length} ${type}`;
}

/** Shows a LabError (or any error) where the student looks. */
function showError(e) {
  if (e instanceof LabError && e.kind === 'compile') {
    showCompiler(e.messages);
    showResult('error', e.message);
  } else if (e instanceof LabError && e.kind === 'limit') {
    showResult('limit', e.message);
  } else {
    showResult('error', message(e));
  }
}

async function run() {
  if (state.busy) return null;
  state.busy++;
  $('run').disabled = true;
  showResult('', '');
  $('compiler').replaceChildren();
  $('launch-info').textContent = '';
  editor.mark([]);
  const work = current();
  const repeats = Math.min(50, Math.max(1, Math.floor(Number($('repeats').value) || 5)));
  try {
    await save(true);
    const input = await inputData();
    await gpu.measureCopyBandwidth();
    const r = await measure(gpu, state.ex, input, work.code, work.workgroups, repeats);
    state.last = r;
    if (r.warnings.length) showCompiler(r.warnings);
    $('launch-info').textContent = `launched ${r.count.join(' × ')} workgroups on n = ${r.n}; bindings: ${r.input.map(describeBinding).join(', ')}`;
    showResult(r.check.ok ? 'ok' : 'wrong', r.check.text);
    showTiming(r, repeats);
    addToHistory(r, work);
    showImages(r);
    return r;
  } catch (e) {
    state.last = { error: e };
    showError(e);
    return null;
  } finally {
    state.busy--;
    $('run').disabled = state.status !== 'ready';
  }
}

async function sweep() {
  if (state.busy) return;
  state.busy++;
  $('sweep').disabled = true;
  const max = Math.max(1024, Number($('sweep-max').value) || 1 << 20);
  const work = current();
  const points = [];
  try {
    for (const n of sweepSizes(max)) {
      $('sweep-info').textContent = `n = ${n}…`;
      const r = await measure(gpu, state.ex, generated(n, state.ex.id === 'convolve'), work.code, work.workgroups, 3);
      points.push({ n: r.n, gpuMs: r.gpuMs, doneMs: r.doneMs, cpuMs: r.cpuMs, ok: r.check.ok });
      $('plot').hidden = false;
      plot($('plot'), points);
    }
    const wrong = points.filter((p) => !p.ok).map((p) => p.n);
    $('sweep-info').textContent = `${crossover(points)}${wrong.length ? ` The check failed at n = ${wrong.join(', ')}.` : ''}`;
    state.sweep = points;
    const rows = points.map((p) => `<tr><td class="num">${p.n}</td><td class="num">${ms(p.gpuMs)}</td><td class="num">${ms(p.doneMs)}</td><td class="num">${ms(p.cpuMs)}</td><td>${p.ok ? 'correct' : 'wrong'}</td></tr>`);
    $('sweep-table').innerHTML = `<table class="timing"><thead><tr><th>n</th><th>GPU kernel</th><th>GPU waited</th><th>CPU reference</th><th>check</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
  } catch (e) {
    showError(e);
    $('sweep-info').textContent = 'The sweep stopped: see the message above.';
  } finally {
    state.busy--;
    $('sweep').disabled = false;
  }
}

// ---- events ----

$('exercise').addEventListener('change', () => {
  save(true);
  const ex = byId($('exercise').value);
  showExercise(ex, workOf(ex));
  save(true);
});
$('use-solution').addEventListener('click', () => {
  editor.value = state.ex.solution;
  if (!state.ex.fixedWorkgroups) $('workgroups').value = state.ex.workgroups;
  save(true);
});
$('reset').addEventListener('click', () => {
  editor.value = state.ex.starter;
  $('workgroups').value = state.ex.workgroups;
  $('n').value = String(state.ex.defaultN);
  save(true);
});
for (const id of ['workgroups', 'n', 'repeats']) $(id).addEventListener('input', () => save());
$('input').addEventListener('change', () => {
  save();
  updateInputInfo();
});
$('n').addEventListener('change', updateInputInfo);
$('file').addEventListener('change', async () => {
  const f = $('file').files?.[0];
  if (!f) return;
  $('input-info').textContent = `Decoding ${f.name}…`;
  try {
    state.userImage = await decodeFile(f);
    fillInputs('file');
    updateInputInfo();
  } catch (e) {
    $('input-info').textContent = `Cannot open ${f.name}: ${message(e)}`;
  }
});
$('run').addEventListener('click', run);
$('sweep').addEventListener('click', sweep);
document.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
    e.preventDefault();
    run();
  }
});
$('copy-link').addEventListener('click', async () => {
  await save(true);
  const link = $('link');
  link.value = location.href;
  link.hidden = false;
  link.select();
  try {
    await navigator.clipboard.writeText(location.href);
  } catch {
    // No clipboard permission: the selected field is there to copy by hand.
  }
});
$('dl-wgsl').addEventListener('click', () => {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([editor.value], { type: 'text/plain' }));
  a.download = `${state.ex.id}.wgsl`;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
});
$('copy-cupy').addEventListener('click', () => navigator.clipboard?.writeText(state.ex.cupy).catch(() => {}));

gpu.onLost = (info, error) => {
  const b = $('banner');
  b.hidden = false;
  b.textContent = error
    ? `The GPU device was lost (${info.reason}: ${info.message}) and could not be made again: ${message(error)}`
    : `The GPU device was lost (${info.reason}${info.message ? `: ${info.message}` : ''}); the lab made a new one (${gpu.losses} so far). Run again.`;
  showLimits();
};

// ---- start ----

async function start() {
  $('exercise').replaceChildren(...EXERCISES.map((e, i) => new Option(`${i + 1} · ${e.title}`, e.id)));
  let fromLink = null;
  try {
    fromLink = await fromHash(location.hash);
  } catch (e) {
    $('banner').hidden = false;
    $('banner').textContent = message(e);
  }
  if (fromLink && EXERCISES.some((e) => e.id === fromLink.id)) {
    const ex = byId(fromLink.id);
    showExercise(ex, { ...workOf(ex), ...fromLink.work });
  } else {
    const ex = byId(stored.current);
    showExercise(ex, workOf(ex));
  }
  try {
    await gpu.open();
    $('device').textContent = `WebGPU: ${gpu.info}${gpu.adapter.info?.isFallbackAdapter ? ' (a software fallback adapter: slow, timings are not a GPU’s)' : ''}`;
    showLimits();
    state.status = 'ready';
    $('run').disabled = false;
    $('sweep').disabled = !state.ex.inputs.includes('array');
  } catch (e) {
    state.status = 'failed';
    $('device').textContent = 'No WebGPU';
    $('banner').hidden = false;
    $('banner').textContent = `${message(e)} The lessons, code and CuPy export still work; running needs WebGPU.`;
  }
}

// The tests drive the page through its controls and read results here.
window.lab = {
  get status() {
    return state.status;
  },
  state,
  gpu,
  editor,
  run,
  STUCK_MS,
  loseDevice: () => gpu.device?.destroy(),
};

start();

// The workshop's size sweep: the chain on the same image resampled to
// several sizes (512², 1024², ... by default), on the CPU and on WebGPU,
// plotted against the number of pixels, so that students see where the GPU
// overtakes the CPU. The first GPU run (pipeline compilation) is shown on
// its own, outside the timings.
import { OPS } from './ops.js';
import { $, gs, ms, state } from './state.js';
import { showError, showMessage } from './errors.js';
import { parseChain } from './chain.js';
import { gpuWarm, newToken, nextInput, progress, setBusy } from './run.js';
import { renderTable } from './table.js';
import { layout } from './viewer.js';
import { viewer } from './display.js';
import { agreement, median, ratioText, speedupText } from './workshop.js';

export const SWEEP_DEFAULT = '512, 1024, 2048, 4096';
const SIDE_MIN = 8;
const SIDE_MAX = 8192;

/** The sweep's sizes from the form: square sides, ascending; throws an
 * error naming the field. */
export function parseSizes(text) {
  const parts = String(text).split(/[\s,;]+/).filter(Boolean);
  const bad = (why) => Object.assign(new Error(`invalid sizes: ${text.trim() || '(empty)'} (${why})`), { field: 'sweep-sizes' });
  if (parts.length === 0) throw bad('give one or more image sides, e.g. 512, 1024, 2048');
  if (parts.length > 8) throw bad('at most 8 sizes');
  const sides = parts.map(Number);
  for (const s of sides) {
    if (!Number.isInteger(s) || s < SIDE_MIN || s > SIDE_MAX) throw bad(`each side an integer from ${SIDE_MIN} to ${SIDE_MAX}`);
  }
  return [...new Set(sides)].sort((a, b) => a - b);
}

/** The 2-D plane (with its colour channels) of `image` the sweep starts
 * from: the image itself, or the slice shown of a stack. */
function plane(image) {
  const { h, w, channels, slices } = layout(image.shape);
  const z = slices > 1 ? Math.min(viewer?.slice ?? 0, slices - 1) : 0;
  const n = h * w * channels;
  return { data: image.data.subarray(z * n, (z + 1) * n), h, w, channels, slice: slices > 1 ? z : null };
}

/** `src` resampled to side × side (nearest neighbour: every value of the
 * result is one of the image's, so value-dependent steps behave alike). */
export function resample(src, side) {
  const { data, h, w, channels } = src;
  const out = new Float32Array(side * side * channels);
  const rows = new Uint32Array(side);
  const cols = new Uint32Array(side);
  for (let i = 0; i < side; i++) rows[i] = Math.min(h - 1, Math.floor(((i + 0.5) * h) / side));
  for (let j = 0; j < side; j++) cols[j] = Math.min(w - 1, Math.floor(((j + 0.5) * w) / side));
  for (let i = 0; i < side; i++) {
    const r = rows[i] * w;
    const o = i * side;
    for (let j = 0; j < side; j++) {
      const s = (r + cols[j]) * channels;
      const d = (o + j) * channels;
      for (let c = 0; c < channels; c++) out[d + c] = data[s + c];
    }
  }
  return { data: out, shape: channels > 1 ? [side, side, channels] : [side, side] };
}

/** Runs the chain once on `where` from `input`; returns the per-step
 * results. Both paths of a step get the same input when `inputs` is given
 * (the CPU reference's outputs of the previous steps). */
async function chainOnce(token, where, steps, input, inputs = null) {
  const results = [];
  let x = input;
  let image = input;
  for (let k = 0; k < steps.length; k++) {
    const from = inputs ? inputs[k] : { x, image };
    const { op, params } = steps[k];
    const r = await token.until(gs.run(where, op, from.x, params, { image: from.image }));
    results.push({ r, from });
    const kind = OPS[op].result;
    x = nextInput(from.x, kind, r);
    image = kind === 'image' ? x : from.image;
  }
  return results;
}

const sum = (xs) => xs.reduce((a, b) => a + b, 0);

/** The size sweep of the whole chain; resolves to the rows or null. */
export async function sweep() {
  if (!state.image || state.busy || !gs.hasGpu()) return null;
  let steps;
  let sides;
  try {
    steps = parseChain();
    sides = parseSizes($('sweep-sizes').value);
  } catch (e) {
    showError(gs.message(e), e);
    if (e.field) {
      $(e.field).setAttribute('aria-invalid', 'true');
      $(e.field).focus();
    }
    return null;
  }
  $('sweep-sizes').removeAttribute('aria-invalid');
  const repeats = Math.max(1, Math.min(20, Math.round(Number($('repeats').value)) || 1));
  const token = newToken();
  setBusy(true, token);
  showMessage('');
  const src = plane(state.image);
  // Operations whose pipelines this page has not compiled yet.
  const cold = [...new Set(steps.map((s) => s.op))].filter((op) => !gpuWarm.has(op));
  const rows = [];
  let first = null;
  const total = sides.length * (2 * repeats + 1);
  let done = 0;
  try {
    for (const side of sides) {
      const input = resample(src, side);
      const label = `${side}²`;
      // The first GPU run at each size allocates its buffers (and, at the
      // first size, compiles the pipelines): timed apart, not in the medians.
      progress(done++, total, `size ${label}: WebGPU, first run`);
      const warm = await chainOnce(token, 'gpu', steps, input);
      const warmMs = sum(warm.map((s) => s.r.wallMs));
      if (!first) {
        first = { side, ms: warmMs, cold };
        for (const op of cold) gpuWarm.add(op);
      }
      const cpuRuns = [];
      let cpu;
      for (let i = 0; i < repeats; i++) {
        progress(done++, total, `size ${label}: CPU, run ${i + 1} of ${repeats}`);
        cpu = await chainOnce(token, 'cpu', steps, input);
        cpuRuns.push(sum(cpu.map((s) => s.r.wallMs)));
      }
      // The GPU gets the CPU reference's input at every step, as in the
      // comparison, so its output can be checked step by step.
      const inputs = cpu.map((s) => s.from);
      const gpuRuns = [];
      const kernelRuns = [];
      let gpu;
      for (let i = 0; i < repeats; i++) {
        progress(done++, total, `size ${label}: WebGPU, run ${i + 1} of ${repeats}`);
        gpu = await chainOnce(token, 'gpu', steps, input, inputs);
        gpuRuns.push(sum(gpu.map((s) => s.r.wallMs)));
        const k = gpu.map((s) => s.r.kernelMs);
        if (k.every((v) => v !== undefined)) kernelRuns.push(sum(k));
      }
      const agree = steps.every((s, k) => agreement(OPS[s.op], gpu[k].r, cpu[k].r).ok);
      const cpuMs = median(cpuRuns);
      const gpuMs = median(gpuRuns);
      rows.push({
        size: label,
        side,
        megapixels: (side * side) / 1e6,
        cpu_ms: cpuMs,
        gpu_ms: gpuMs,
        gpu_kernel_ms: kernelRuns.length ? median(kernelRuns) : null,
        gpu_first_ms: warmMs,
        speedup: cpuMs / gpuMs,
        agree: agree ? 'yes' : 'NO',
      });
      showSweep(rows, first, steps, repeats, src);
    }
    progress(total, total, 'done');
    state.sweep = { rows, first };
    return rows;
  } catch (e) {
    if (e instanceof gs.CancelledError || token.cancelled) showMessage('Size sweep cancelled: the sizes done so far are shown.', 'info');
    else showError(gs.message(e));
    return null;
  } finally {
    gs.trim(); // the large sizes' pooled GPU buffers
    setBusy(false);
  }
}

function showSweep(rows, first, steps, repeats, src) {
  $('sweep-results').hidden = false;
  const f2 = (v) => (v === null ? '—' : v.toFixed(2));
  const what = `${steps.map((s) => s.op).join(' → ')} on ${state.image.name}${src.slice !== null ? ` (slice ${src.slice})` : ''} resampled`;
  renderTable($('sweep-table'), {
    columns: [
      { key: 'size', label: 'size' },
      { key: 'megapixels', label: 'megapixels', format: (v) => v.toFixed(3) },
      { key: 'cpu_ms', label: 'CPU ms', format: f2 },
      { key: 'gpu_ms', label: 'GPU ms (with transfers)', format: f2 },
      { key: 'gpu_kernel_ms', label: 'GPU kernels ms', format: f2 },
      { key: 'gpu_first_ms', label: 'first GPU run ms', format: f2 },
      { key: 'speedup', label: 'GPU against CPU', format: speedupText },
      { key: 'agree', label: 'agree' },
    ],
    rows,
    caption: `${what}; median of ${repeats} run${repeats > 1 ? 's' : ''} per size after a first GPU run`,
    name: 'size-sweep',
  });
  const cross = rows.find((r) => r.speedup >= 1.05);
  const last = rows[rows.length - 1];
  $('sweep-summary').textContent =
    `First GPU run ${ms(first.ms)} at ${first.side}² (` +
    (first.cold.length
      ? `it compiled the shader pipelines of ${first.cold.join(', ')}`
      : 'the shader pipelines were compiled by an earlier run in this page') +
    `; a first run also allocates the buffers), ${ms(rows[0].gpu_ms)} once warm: left out of the timings. ` +
    (cross
      ? `The GPU is faster from ${cross.size} on (${ratioText(cross.speedup)}× there).`
      : last.speedup > 0.95
        ? `The GPU catches up with the CPU at ${last.size} (${speedupText(last.speedup)}).`
        : `The GPU is slower at every size tried (${speedupText(last.speedup)} at ${last.size}).`) +
    (rows.every((r) => r.agree === 'yes') ? ' The results agree at every size.' : ' Some results DISAGREE: see the table.');
  plotSweep($('sweep-plot'), rows);
}

/** Log-log plot of CPU and GPU time against pixels. */
export function plotSweep(canvas, rows) {
  const dpr = window.devicePixelRatio || 1;
  const cw = canvas.clientWidth || 480;
  const ch = canvas.clientHeight || 260;
  canvas.width = Math.round(cw * dpr);
  canvas.height = Math.round(ch * dpr);
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, cw, ch);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, cw, ch);
  if (!rows.length) return;
  const pad = { l: 58, r: 14, t: 26, b: 40 };
  const series = [
    { key: 'cpu_ms', label: 'CPU (wasm, worker)', color: '#d9480f', dash: [] },
    { key: 'gpu_ms', label: 'GPU with transfers', color: '#1f6feb', dash: [] },
    { key: 'gpu_kernel_ms', label: 'GPU kernels', color: '#1f6feb', dash: [5, 4] },
  ].filter((s) => rows.some((r) => r[s.key] > 0));
  const xs = rows.map((r) => r.side * r.side);
  const ys = rows.flatMap((r) => series.map((s) => r[s.key]).filter((v) => v > 0));
  const lx = (v) => Math.log10(v);
  let [x0, x1] = [lx(Math.min(...xs)), lx(Math.max(...xs))];
  if (x1 - x0 < 0.5) [x0, x1] = [x0 - 0.25, x1 + 0.25];
  let [y0, y1] = [Math.floor(lx(Math.min(...ys))), Math.ceil(lx(Math.max(...ys)))];
  if (y1 === y0) y1 = y0 + 1;
  const px = (v) => pad.l + ((lx(v) - x0) / (x1 - x0)) * (cw - pad.l - pad.r);
  const py = (v) => ch - pad.b - ((lx(v) - y0) / (y1 - y0)) * (ch - pad.t - pad.b);
  ctx.font = '11px system-ui, sans-serif';
  ctx.strokeStyle = '#d5dbe0';
  ctx.fillStyle = '#5b6670';
  ctx.lineWidth = 1;
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  for (let e = y0; e <= y1; e++) {
    const y = py(10 ** e);
    ctx.beginPath();
    ctx.moveTo(pad.l, y);
    ctx.lineTo(cw - pad.r, y);
    ctx.stroke();
    ctx.fillText(10 ** e >= 1000 ? `${10 ** (e - 3)} s` : `${+(10 ** e).toPrecision(1)} ms`, pad.l - 5, y);
  }
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  for (const r of rows) {
    const x = px(r.side * r.side);
    ctx.beginPath();
    ctx.moveTo(x, pad.t);
    ctx.lineTo(x, ch - pad.b);
    ctx.stroke();
    ctx.fillText(r.size, x, ch - pad.b + 4);
  }
  ctx.fillText('image size (pixels, log scale)', (pad.l + cw - pad.r) / 2, ch - 14);
  for (const s of series) {
    ctx.strokeStyle = s.color;
    ctx.fillStyle = s.color;
    ctx.lineWidth = 2;
    ctx.setLineDash(s.dash);
    ctx.beginPath();
    let started = false;
    for (const r of rows) {
      if (!(r[s.key] > 0)) continue;
      const [x, y] = [px(r.side * r.side), py(r[s.key])];
      if (started) ctx.lineTo(x, y);
      else ctx.moveTo(x, y);
      started = true;
    }
    ctx.stroke();
    ctx.setLineDash([]);
    for (const r of rows) {
      if (r[s.key] > 0) {
        ctx.beginPath();
        ctx.arc(px(r.side * r.side), py(r[s.key]), 3, 0, 2 * Math.PI);
        ctx.fill();
      }
    }
  }
  // Legend, top left.
  ctx.textAlign = 'left';
  ctx.textBaseline = 'middle';
  let lxp = pad.l + 6;
  for (const s of series) {
    ctx.strokeStyle = s.color;
    ctx.setLineDash(s.dash);
    ctx.beginPath();
    ctx.moveTo(lxp, 12);
    ctx.lineTo(lxp + 22, 12);
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = '#1d232a';
    ctx.fillText(s.label, lxp + 26, 12);
    lxp += 34 + ctx.measureText(s.label).width;
  }
}

// The workshop panel: every step of the chain on the CPU and on the GPU
// with the same input, timed, and checked for agreement.
import { OPS, RTOL } from './ops.js';
import { $, gs, ms, state } from './state.js';
import { showError, showMessage } from './errors.js';
import { parseChain } from './chain.js';
import { gpuWarm, newToken, nextInput, progress, setBusy } from './run.js';
import { renderTable } from './table.js';

export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** How far the GPU result is from the CPU reference: arrays element by
 * element (exact for integer results, RTOL of the largest magnitude for
 * float sums); tables cell by cell (see tableAgreement). */
export function agreement(spec, g, c) {
  if (c.table) return tableAgreement(spec.exact, g.table, c.table);
  return arrayAgreement(spec.exact, g.data, c.data);
}

/** Tables: the same rows; integer and text columns (and every column of an
 * exact operation) equal, float columns within RTOL of the column's largest
 * magnitude (f32 sums on the GPU, f64 on the CPU). */
export function tableAgreement(exact, g, c) {
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

export function arrayAgreement(exact, gpu, cpu) {
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

/** A ratio with two significant digits, never rounded to 0 ("0.032",
 * "2.0", "31"). */
export function ratioText(r) {
  if (!Number.isFinite(r)) return String(r);
  return r >= 9.95 ? r.toFixed(0) : r.toPrecision(2);
}

/** The GPU against the CPU from speed-up `r` = CPU time / GPU time:
 * "3.4× faster", "31× slower", "about as fast". */
export function speedupText(r) {
  if (!Number.isFinite(r) || r <= 0) return '—';
  if (Math.abs(r - 1) < 0.05) return 'about as fast';
  return r > 1 ? `${ratioText(r)}× faster` : `${ratioText(1 / r)}× slower`;
}

/** The workshop's verdict on comparison rows: the whole chain's times, the
 * speed-up, and why the GPU is slower when it is (its kernels themselves,
 * or the copies and overheads around them), and agreement. */
export function verdict(rows, device) {
  const cpu = rows.reduce((s, r) => s + r.cpu_ms, 0);
  const gpu = rows.reduce((s, r) => s + r.gpu_ms, 0);
  const timed = rows.every((r) => r.gpu_kernel_ms !== null && r.gpu_kernel_ms !== undefined);
  const kernels = timed ? rows.reduce((s, r) => s + r.gpu_kernel_ms, 0) : null;
  const ratio = cpu / gpu;
  const emulated = /swiftshader|llvmpipe|lavapipe|cpu/i.test(`${device?.name} ${device?.deviceType}`);
  let why = '';
  if (ratio < 1) {
    if (kernels !== null && kernels >= gpu / 2) {
      why = ` here: the kernels themselves take ${ms(kernels)} of the GPU's ${ms(gpu)}, so the computation, not the copies, is slower on this adapter${emulated ? ' (a CPU emulation of a GPU)' : ''}`;
    } else {
      why =
        ` here: ${kernels === null ? 'most of the GPU time is' : `the kernels take ${ms(kernels)} of ${ms(gpu)}; the rest is`} copies and dispatch overheads, ` +
        `which small images do not repay (the size sweep shows where that changes)${emulated ? '; this WebGPU adapter is itself a CPU emulation' : ''}`;
    }
  }
  return (
    `Whole chain: CPU ${ms(cpu)}, GPU ${ms(gpu)} including transfers — speed-up ${ratioText(ratio)}×: ` +
    `the GPU is ${ratio >= 1 ? `${ratioText(ratio)}× faster` : `${ratioText(1 / ratio)}× slower${why}`}.` +
    (rows.every((r) => r.agree === 'yes') ? ' The results agree.' : ' Some results DISAGREE: see the table.')
  );
}

export async function compare() {
  if (!state.image || state.busy || !gs.hasGpu()) return;
  let steps;
  try {
    steps = parseChain();
  } catch (e) {
    showError(gs.message(e), e);
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
      // The first GPU call compiles the pipelines (a one-off cost): timed
      // and shown on its own, left out of the medians.
      progress(done, total, `step ${k + 1}: ${op} on WebGPU, first run (compiles the pipelines)`);
      const first = await token.until(gs.run('gpu', op, input, params, { image }));
      gpuWarm.add(op);
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
        gpu_first_ms: first.wallMs,
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
        { key: 'gpu_first_ms', label: 'first GPU run ms (compiles the pipelines)', format: f2 },
        { key: 'cpu_ms', label: 'CPU ms', format: f2 },
        { key: 'speedup', label: 'GPU against CPU', format: speedupText },
        { key: 'max_abs_diff', label: 'max |GPU−CPU|', format: (v) => v.toExponential(1) },
        { key: 'agree', label: 'agree' },
      ],
      rows,
      caption:
        `median of ${repeats} run${repeats > 1 ? 's' : ''} on ${state.image.name}, after a first GPU run per step ` +
        '(the first run of an operation in this page also compiles its shader pipelines: Run and Compare differ by that)',
      name: 'cpu-vs-gpu',
    });
    $('speedup').textContent = verdict(rows, state.device);
    progress(total, total, 'done');
  } catch (e) {
    if (e instanceof gs.CancelledError || token.cancelled) showMessage('Comparison cancelled.', 'info');
    else showMessage(gs.message(e));
  } finally {
    setBusy(false);
  }
}

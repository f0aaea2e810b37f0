// The workshop panel: every step of the chain on the CPU and on the GPU
// with the same input, timed, and checked for agreement.
import { OPS, RTOL } from './ops.js';
import { $, gs, ms, state } from './state.js';
import { showMessage } from './errors.js';
import { parseChain } from './chain.js';
import { newToken, nextInput, progress, setBusy } from './run.js';
import { renderTable } from './table.js';

const median = (xs) => {
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

export async function compare() {
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

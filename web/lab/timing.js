// One measured run of a student's kernel (compile, launch, time, check),
// the sweep over input sizes and its plot. What is timed, and why:
//  - submit: wall time until queue.submit() returns. The launch is
//    asynchronous, so this measures almost nothing: the workshop's lesson
//    on timing a GPU call without synchronising.
//  - done: wall time until queue.onSubmittedWorkDone() resolves (CUDA:
//    cudaDeviceSynchronize), including the launch overhead.
//  - gpu: the GPU's timestamps at the start and end of the compute pass
//    (when the adapter has timestamp-query): the kernel alone.
// Each is the median of `repeats` runs after one warm-up run (the first
// run of a pipeline pays for its compilation in the driver).
import { compare } from './check.js';
import { LabError, limitProblem, median, workgroupCount } from './runner.js';

const pipelines = new Map(); // code + layout -> pipeline, per device

/** Runs exercise `ex` on `input` with the student's `code` and launch
 * `formula`. Resolves to {check, count, runs, gpuMs, doneMs, submitMs,
 * cpuMs, bytes, n, warnings, referenceSource}; rejects with a LabError. */
export async function measure(gpu, ex, input, code, formula, repeats) {
  const prepared = ex.prepare(input);
  const vars = { n: prepared.n, width: prepared.width ?? prepared.n, height: prepared.height ?? 1 };
  const count = workgroupCount(formula, vars);
  const maxBinding = gpu.limit('maxStorageBufferBindingSize');
  for (const b of prepared.bindings) {
    if (b.data.byteLength > maxBinding) {
      throw new LabError('limit', `The buffer ${b.name} would hold ${b.data.byteLength} bytes, and this device binds at most ${maxBinding} bytes as one storage buffer (maxStorageBufferBindingSize): use a smaller n or image.`);
    }
  }
  const device = await gpu.ready();
  const key = `${code}\u0000${prepared.bindings.map((b) => `${b.binding}${b.kind}`).join()}`;
  let entry = pipelines.get(key);
  if (entry?.device !== device) {
    const { module, messages } = await gpu.compile(code);
    const problem = limitProblem(gpu, code, null);
    if (problem) throw new LabError('limit', problem);
    const made = await gpu.pipeline(module, prepared.bindings);
    entry = { device, messages, ...made };
    pipelines.set(key, entry);
  }
  const problem = limitProblem(gpu, code, count);
  if (problem) throw new LabError('limit', problem);

  device.pushErrorScope('validation');
  const bound = gpu.buffers(entry.layout, prepared.bindings);
  const bindError = await device.popErrorScope();
  if (bindError) {
    destroy(bound);
    throw new LabError('pipeline', `WebGPU refused the buffers for the shader's bindings: ${bindError.message}. Declare them as the starter does.`);
  }
  try {
    const runs = [];
    for (let i = 0; i <= repeats; i++) {
      const t = await gpu.dispatch(entry.pipeline, bound, count);
      if (i > 0) runs.push(t);
    }
    const out = bound.made.find((b) => b.binding === prepared.out.binding);
    const got = await gpu.read(out.buffer, prepared.out.type, prepared.out.length);

    // The CPU reference, timed the same way (median of repeats).
    const cpuTimes = [];
    let expected = null;
    let referenceSource = 'a JS loop on this page';
    // The page's clock is coarse (0.1 ms in some browsers): a fast
    // reference is repeated `reps` times per sample, reps set by the first.
    let reps = 1;
    for (let i = 0; i <= Math.max(1, repeats); i++) {
      const t0 = performance.now();
      let r;
      for (let k = 0; k < reps; k++) r = await prepared.reference();
      const wall = (performance.now() - t0) / reps;
      if (r && r.data) {
        expected = r.data;
        referenceSource = r.source;
        if (i > 0) cpuTimes.push(r.ms ?? wall);
      } else {
        expected = r;
        if (i > 0) cpuTimes.push(wall);
        else reps = Math.min(1000, Math.max(1, Math.ceil(2 / Math.max(wall, 0.001))));
      }
    }
    const check = compare(got, expected, prepared.rule, prepared.out.shape ?? null, prepared.names ?? null);
    if (prepared.summary) check.text += ` ${prepared.summary(got, expected)}`;
    return {
      check,
      got,
      count,
      n: prepared.n,
      shape: prepared.out.shape ?? null,
      runs,
      gpuMs: median(runs.map((r) => r.gpuMs)),
      doneMs: median(runs.map((r) => r.doneMs)),
      submitMs: median(runs.map((r) => r.submitMs)),
      cpuMs: median(cpuTimes),
      bytes: prepared.bytes,
      warnings: entry.messages.filter((m) => m.type !== 'error'),
      referenceSource,
      input: prepared.bindings,
    };
  } finally {
    destroy(bound);
  }
}

function destroy(bound) {
  for (const b of bound.made) b.buffer.destroy();
}

/** The sizes of a sweep: powers of 4 from 1024 up to `max`. */
export function sweepSizes(max) {
  const sizes = [];
  for (let n = 1024; n <= max; n *= 4) sizes.push(n);
  return sizes;
}

// ---- the plot: time against input size, log-log ----

const SERIES = [
  { key: 'gpuMs', label: 'GPU kernel (timestamps)', color: '#1f6feb' },
  { key: 'doneMs', label: 'GPU, waited (wall)', color: '#8250df' },
  { key: 'cpuMs', label: 'CPU reference', color: '#cf222e' },
];

/** Draws `points` ([{n, gpuMs, doneMs, cpuMs}]) on `canvas`. */
export function plot(canvas, points) {
  const dpr = window.devicePixelRatio || 1;
  const W = canvas.clientWidth || 480;
  const H = canvas.clientHeight || 240;
  canvas.width = W * dpr;
  canvas.height = H * dpr;
  const g = canvas.getContext('2d');
  g.scale(dpr, dpr);
  g.clearRect(0, 0, W, H);
  g.fillStyle = '#fff';
  g.fillRect(0, 0, W, H);
  const values = points.flatMap((p) => SERIES.map((s) => p[s.key])).filter((v) => v > 0);
  if (!points.length || !values.length) return;
  const pad = { l: 56, r: 12, t: 10, b: 34 };
  const lx = (n) => Math.log10(n);
  const x0 = lx(points[0].n) - 0.1;
  const x1 = lx(points[points.length - 1].n) + 0.1;
  const y0 = Math.floor(Math.log10(Math.min(...values)));
  const y1 = Math.ceil(Math.log10(Math.max(...values)));
  const X = (n) => pad.l + ((lx(n) - x0) / (x1 - x0 || 1)) * (W - pad.l - pad.r);
  const Y = (ms) => H - pad.b - ((Math.log10(ms) - y0) / (y1 - y0 || 1)) * (H - pad.t - pad.b);
  g.font = '11px system-ui, sans-serif';
  g.strokeStyle = '#d5dbe0';
  g.fillStyle = '#5b6670';
  for (let e = y0; e <= y1; e++) {
    const y = Y(10 ** e);
    g.beginPath();
    g.moveTo(pad.l, y);
    g.lineTo(W - pad.r, y);
    g.stroke();
    g.fillText(`${10 ** e >= 1 ? 10 ** e : (10 ** e).toPrecision(1)} ms`, 4, y + 4);
  }
  for (const p of points) {
    g.fillText(p.n >= 1e6 ? `${p.n / 2 ** 20}Mi` : p.n >= 1024 ? `${p.n / 1024}Ki` : String(p.n), X(p.n) - 10, H - pad.b + 14);
  }
  g.fillText('input size n (elements), log scale', pad.l, H - 4);
  SERIES.forEach((s, k) => {
    const pts = points.filter((p) => p[s.key] > 0);
    g.strokeStyle = s.color;
    g.fillStyle = s.color;
    g.lineWidth = 2;
    g.beginPath();
    pts.forEach((p, i) => (i ? g.lineTo(X(p.n), Y(p[s.key])) : g.moveTo(X(p.n), Y(p[s.key]))));
    g.stroke();
    for (const p of pts) g.fillRect(X(p.n) - 3, Y(p[s.key]) - 3, 6, 6);
    g.fillText(s.label, pad.l + 8 + k * 150, pad.t + 10);
  });
}

/** "The GPU is faster from n = …" (waited wall time against the CPU), or
 * why not yet. */
export function crossover(points) {
  const win = points.find((p) => p.doneMs !== null && p.cpuMs !== null && p.doneMs < p.cpuMs);
  if (!win) return 'In this range the CPU reference is faster than waiting for the GPU: try larger sizes.';
  return `Waiting for the GPU beats the CPU reference from n = ${win.n} in this sweep.`;
}

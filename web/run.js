// Running the chain on WebGPU or on the CPU, with progress and cancel.
import { OPS } from './ops.js';
import { $, gs, ms, state } from './state.js';
import { showMessage } from './errors.js';
import { markInvalid, parseChain } from './chain.js';
import { refreshView } from './display.js';
import { writeHash } from './link.js';

/** What the next step of a chain gets from output `r` of a step of `kind`. */
export function nextInput(input, kind, r) {
  if (kind === 'table') return input;
  return { data: r.data instanceof Float32Array ? r.data : Float32Array.from(r.data), shape: r.shape };
}

/** A run's cancel token: `until(p)` resolves as `p` does, or rejects with
 * CancelledError as soon as `cancel()` is called. A GPU submission cannot
 * be recalled: it finishes in the background and its result is dropped. */
export function newToken() {
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

export function setBusy(on, token) {
  state.busy += on ? 1 : -1;
  state.run = on ? token : null;
  $('run').disabled = on;
  $('compare').disabled = on || !gs?.hasGpu();
  $('cancel').disabled = !on;
  $('progress-box').hidden = !on;
}

export function progress(done, total, text) {
  $('progress').max = total;
  $('progress').value = done;
  $('progress-text').textContent = text;
}

/** Runs the chain on `where`; resolves to true when it completed. */
export async function runChain(where = $('where').value) {
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

export function cancel() {
  if (!state.run) return;
  // The CPU worker is stopped at once; a GPU submission cannot be recalled,
  // its result is dropped when it arrives.
  gs.cancelCpu();
  state.run.cancel();
}

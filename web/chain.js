// The chain form: one fieldset per step from the registry (ops.js), its
// Python twin, and the parsing of every step before a run.
import { OPS, defaults, parseStep } from './ops.js';
import { $, state } from './state.js';
import { writeHash } from './link.js';

export const form = $('params');

export function renderChain() {
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
export function pythonOf() {
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

export function updatePython() {
  $('python').textContent = pythonOf();
}

export function onFormInput(e) {
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

export function addStep() {
  const last = state.steps[state.steps.length - 1]?.op;
  const op = last === 'threshold' ? 'gaussian_filter' : 'threshold';
  state.steps.push({ op, raw: defaults(op) });
  renderChain();
  form.querySelector(`select[name=op][data-step="${state.steps.length - 1}"]`)?.focus();
  writeHash();
}

export function removeStep(k) {
  state.steps.splice(k, 1);
  renderChain();
  writeHash();
}

/** Marks the input a validation error names and puts the focus there. */
export function markInvalid(e) {
  if (e.step === undefined || !e.param) return;
  const el = form.querySelector(`[data-step="${e.step}"][name="${e.param}"]`);
  if (!el) return;
  el.setAttribute('aria-invalid', 'true');
  el.setAttribute('aria-errormessage', 'message');
  el.focus();
}

/** Every step's parameters parsed and checked before anything runs. */
export function parseChain() {
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

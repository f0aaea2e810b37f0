// The chain form: one fieldset per step from the registry (ops.js), its
// Python twin, and the parsing of every step before a run.
import { OPS, defaultOf, defaults, isColour, parseStep } from './ops.js';
import { $, state } from './state.js';
import { writeHash } from './link.js';
import { paramOf } from './errors.js';

export const form = $('params');

/** A new step of operation `op` with the defaults for the current image;
 * `auto` names the parameters still at their default, which follow the
 * image (a colour image's channel axis is left alone). */
export function newStep(op, raw = null) {
  const names = OPS[op].params.map((s) => s.name);
  const d = defaults(op, state.image?.shape);
  return { op, raw: { ...d, ...(raw ?? {}) }, auto: new Set(names.filter((n) => !raw || !(n in raw))) };
}

/** After a new image: parameters still at their default get the image's default. */
export function applyImageDefaults() {
  for (const step of state.steps) {
    for (const spec of OPS[step.op].params) {
      if (step.auto?.has(spec.name)) step.raw[spec.name] = defaultOf(spec, state.image?.shape);
    }
  }
}

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
    for (const spec of op.params) {
      if (spec.channel === undefined || !step.auto?.has(spec.name) || !isColour(state.image?.shape)) continue;
      const note = document.createElement('p');
      note.className = 'info small channel-note';
      note.textContent =
        `${spec.name} ${step.raw[spec.name]}: on this colour image the default works on rows and columns only; ` +
        `give one value (${spec.default}) to include the channel axis, as scipy does.`;
      fs.append(note);
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

/** Python that reads file `name` into `image`: [imports, line]. */
function pythonReader(name) {
  const n = name.toLowerCase();
  const q = `'${name.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  if (n.endsWith('.npy')) return [[], `image = np.load(${q})`];
  if (/\.tiff?$/.test(n)) return [['import tifffile'], `image = tifffile.imread(${q})`];
  if (/\.(fits|fit|fts)$/.test(n)) return [['from astropy.io import fits'], `image = fits.getdata(${q})`];
  if (/\.cbf(\.gz)?$/.test(n)) return [['import fabio'], `image = fabio.open(${q}).data`];
  return [['import imageio.v3 as iio'], `image = iio.imread(${q})`];
}

/** The chain as the reference calls in Python, for checking a result in
 * Jupyter: a script that runs as it is (given the file and the packages it
 * imports). Table steps print their result and leave `x` alone. */
export function pythonOf() {
  if (!state.image) return '';
  const { name, shape, dtype } = state.image;
  const input = { shape };
  const imports = new Set(['import numpy as np', 'from scipy import ndimage']);
  const [readImports, read] = pythonReader(name);
  for (const i of readImports) imports.add(i);
  const body = [
    `# ${name}: the file opened in the page (the built-in samples are in web/samples/), ${shape.join(' × ')} ${dtype}.`,
    read,
    '# The page computes on its values as floats (float32 on the GPU, float64 on the CPU).',
    'x = np.asarray(image, dtype=np.float64)',
  ];
  state.steps.forEach((s, k) => {
    const op = OPS[s.op];
    const r = parseStep(s.op, s.raw, input);
    if (r.error) {
      body.push(`# step ${k + 1}: ${r.error}`);
      return;
    }
    for (const i of op.imports ?? []) imports.add(i);
    if (op.pythonTable) {
      body.push(`# step ${k + 1}: ${s.op}`, ...op.pythonTable(r.params, input, name));
      return;
    }
    if (s.op === 'slic') imports.add('import skimage.segmentation');
    let expr = op.python ? op.python(r.params, input) : `None  # ${op.reference}: no Python form recorded`;
    if (op.result === 'mask' && k < state.steps.length - 1) expr = `(${expr}).astype(np.float64)`;
    body.push(`x = ${expr}  # step ${k + 1}`);
  });
  return [...imports, '', ...body].join('\n');
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
    state.steps[k] = newStep(t.value);
    renderChain();
    form.querySelector(`select[name=op][data-step="${k}"]`)?.focus();
  } else {
    step.raw[t.name] = t.type === 'checkbox' ? String(t.checked) : t.value;
    step.auto?.delete(t.name);
    updatePython();
  }
  writeHash();
}

export function addStep() {
  const last = state.steps[state.steps.length - 1]?.op;
  const op = last === 'threshold' ? 'gaussian_filter' : 'threshold';
  state.steps.push(newStep(op));
  renderChain();
  form.querySelector(`select[name=op][data-step="${state.steps.length - 1}"]`)?.focus();
  writeHash();
}

export function removeStep(k) {
  state.steps.splice(k, 1);
  renderChain();
  writeHash();
}

/** Every step's parameters parsed and checked before anything runs. */
export function parseChain() {
  const input = { shape: state.image.shape };
  return state.steps.map((s, k) => {
    const r = parseStep(s.op, s.raw, input);
    if (r.error) {
      const e = new Error(state.steps.length > 1 ? `step ${k + 1} (${s.op}): ${r.error}` : r.error);
      e.step = k;
      e.param = paramOf(r.error);
      throw e;
    }
    return { op: s.op, params: r.params };
  });
}

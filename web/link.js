// The URL hash: the sample, the chain, the device, the display settings,
// the slice and the step shown, so that a link reproduces a view.
import { OPS } from './ops.js';
import { SAMPLES } from './samples.js';
import { COLORMAPS, STRETCHES } from './colormaps.js';
import { $, gs, state } from './state.js';
import { showMessage } from './errors.js';
import { newStep, renderChain } from './chain.js';
import { loadSample } from './load.js';
import { runChain } from './run.js';
import { refreshView, setSlice, viewer } from './display.js';
import { views } from './view/hooks.js';

export function hashOf() {
  const q = new URLSearchParams();
  if (state.sample) q.set('sample', state.sample);
  // A local file cannot travel in a link: its name says which to load again.
  else if (state.image) q.set('file', state.image.name);
  else if (state.pendingLink) q.set('file', state.pendingLink.file);
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
  views?.hashWrite(q);
  return `#${q.toString()}`;
}

let hashTimer = 0;
export function writeHash() {
  clearTimeout(hashTimer);
  hashTimer = setTimeout(() => {
    const h = hashOf();
    if (location.hash !== h) history.replaceState(null, '', h);
  }, 50);
}

/** Applies a hash; returns {sample, show, z, errors}. Unknown entries are reported, not fatal. */
export function applyHash(hash) {
  const q = new URLSearchParams(hash.replace(/^#/, ''));
  const errors = [];
  const steps = [];
  for (let k = 1; q.has(`${k}.op`); k++) {
    const op = q.get(`${k}.op`);
    if (!OPS[op]) {
      errors.push(`the link names an unknown operation '${op}'`);
      continue;
    }
    const raw = {};
    for (const spec of OPS[op].params) if (q.has(`${k}.${spec.name}`)) raw[spec.name] = q.get(`${k}.${spec.name}`);
    steps.push(newStep(op, raw));
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
  pick('limits', 'limits', [...$('limits').options].map((o) => o.value));
  if (q.has('p')) [$('plo').value, $('phi').value] = q.get('p').split(',');
  if (q.has('v')) [$('vmin').value, $('vmax').value] = q.get('v').split(',');
  if (q.has('opacity')) $('opacity').value = q.get('opacity');
  errors.push(...views.hashRead(q));
  let sample = q.get('sample');
  if (sample && !SAMPLES.some((s) => s.file === sample)) {
    errors.push(`the link names an unknown sample '${sample}'`);
    sample = null;
  }
  const file = sample ? null : q.get('file');
  renderChain();
  return { sample, file, show: q.has('show') ? Number(q.get('show')) - 1 : null, z: q.has('z') ? Number(q.get('z')) : null, errors };
}

/** After a file was loaded and its chain run: the view a pending link
 * from that file asked for. */
export function applyPendingLink(name) {
  const link = state.pendingLink;
  if (!link) return;
  state.pendingLink = null;
  if (link.file !== name) return;
  if (link.show !== null && link.show >= -1 && link.show < state.outputs.length) state.layer = link.show;
  refreshView(false);
  if (link.z !== null) setSlice(link.z);
  writeHash();
}

export async function applyLink(hash, first) {
  const link = applyHash(hash);
  if (!gs.hasGpu()) $('where').value = 'cpu';
  if (link.file && !(state.image && !state.sample && state.image.name === link.file)) {
    // Made from a local file: the page cannot open it by itself. The chain
    // and the display are set; the view comes back when the file is loaded.
    state.pendingLink = { file: link.file, show: link.show, z: link.z };
    $('sample').value = ''; // '— a file of yours —'
    showMessage(
      `This link was made from a local file, ${link.file}: open it again (drop it on the page or choose it) to see this view. ` +
        'The chain and the display settings of the link are set.' +
        (link.errors.length ? ` Also: ${link.errors.join('; ')}.` : ''),
      'info',
    );
    writeHash();
    return;
  }
  if (link.sample && link.sample !== state.sample) await loadSample(link.sample);
  else if (first || !state.image) await loadSample(link.sample ?? SAMPLES[0].file);
  const ok = await runChain();
  if (ok && link.show !== null && link.show >= -1 && link.show < state.outputs.length) state.layer = link.show;
  refreshView(false);
  if (link.z !== null) setSlice(link.z);
  if (link.errors.length) showMessage(`${link.errors.join('; ')}.`, 'info');
  writeHash();
}

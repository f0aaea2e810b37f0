// gpuscope.show's front end (an anywidget ESM module): the page's viewer
// (web/viewer.js and web/colormaps.js, shipped unchanged in the model's
// `_modules`) in a notebook cell, with the page's controls in small.
//
// The viewer modules import each other by relative paths, which mean
// nothing inside a notebook (anywidget loads this module from a blob: URL),
// so each module becomes a blob: URL of its own, its relative imports
// rewritten to its dependencies' URLs.

const IMPORT = /(\bfrom\s*|\bimport\s*\(?\s*)(['"])(\.{1,2}\/[^'"]+)\2/g;

function resolve(dir, spec) {
  const parts = [];
  for (const p of (dir + spec).split('/')) {
    if (p === '..') parts.pop();
    else if (p !== '.' && p !== '') parts.push(p);
  }
  return parts.join('/');
}

const builders = new Map(); // sources → their blob: URLs, made once

/** Imports `entry` of `sources` ({path: text}); returns its namespace.
 * Modules shared by several entries are one instance. */
export function loadModules(sources, entry = 'viewer.js') {
  const key = JSON.stringify(sources);
  if (!builders.has(key)) {
    const urls = new Map();
    const url = (name, chain = []) => {
      if (urls.has(name)) return urls.get(name);
      if (chain.includes(name)) throw new Error(`gpuscope widget: import cycle ${[...chain, name].join(' → ')}`);
      const text = sources[name];
      if (text === undefined) throw new Error(`gpuscope widget: the viewer module ${name} is not in the package`);
      const dir = name.includes('/') ? name.slice(0, name.lastIndexOf('/') + 1) : '';
      const code = text.replace(IMPORT, (_, pre, q, spec) => pre + JSON.stringify(url(resolve(dir, spec), [...chain, name])));
      const u = URL.createObjectURL(new Blob([code], { type: 'text/javascript' }));
      urls.set(name, u);
      return u;
    };
    builders.set(key, url);
  }
  return import(builders.get(key)(entry));
}

const TYPED = {
  uint8: Uint8Array,
  int8: Int8Array,
  uint16: Uint16Array,
  int16: Int16Array,
  uint32: Uint32Array,
  int32: Int32Array,
  float32: Float32Array,
  float64: Float64Array,
};

/** A typed array of a bytes trait (a DataView in ipywidgets 8, an
 * ArrayBuffer or a typed array elsewhere), copied so that it is aligned. */
function typed(bytes, dtype) {
  if (!bytes || !bytes.byteLength) return null;
  const T = TYPED[dtype];
  if (!T) throw new Error(`gpuscope widget: unsupported dtype ${dtype}`);
  const view = bytes instanceof ArrayBuffer ? new Uint8Array(bytes) : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return new T(view.slice().buffer);
}

// The page's number format (web/app.js fmt).
const fmt = (v) => (typeof v !== 'number' ? String(v) : Number.isInteger(v) ? String(v) : v.toPrecision(4));

const CSS = `
.gpuscope-widget [hidden] { display: none !important; }
.gpuscope-widget { font: 13px system-ui, sans-serif; color: var(--jp-ui-font-color1, #1f2328); max-width: 900px; }
.gpuscope-widget canvas.view { width: 100%; height: 460px; display: block; background: #111; cursor: crosshair; outline: none; }
.gpuscope-widget .bar { display: flex; flex-wrap: wrap; gap: 4px 12px; align-items: center; margin: 6px 0; }
.gpuscope-widget .bar label { display: inline-flex; gap: 4px; align-items: center; }
.gpuscope-widget canvas.hist { width: 100%; height: 56px; display: block; }
.gpuscope-widget .readout { font-family: ui-monospace, monospace; min-height: 1.4em; margin-top: 4px; }
.gpuscope-widget .note { color: #9a6700; margin: 4px 0; }
.gpuscope-widget .caption { color: var(--jp-ui-font-color2, #57606a); font-size: 12px; }
`;

function el(tag, props = {}, children = []) {
  const e = document.createElement(tag);
  Object.assign(e, props);
  e.append(...children);
  return e;
}

async function render({ model, el: root }) {
  const { Viewer, layout, summarize, drawHistogram } = await loadModules(model.get('_modules'));
  const { COLORMAPS, STRETCHES } = await loadModules(model.get('_modules'), 'colormaps.js');
  const view = el('canvas', { className: 'view', tabIndex: 0 });
  // The viewer's keys (arrows, + - 0, Page Up/Down) are not notebook
  // shortcuts while the image has the focus (Lumino honours this attribute).
  view.dataset.lmSuppressShortcuts = 'true';
  view.addEventListener('keydown', (e) => e.stopPropagation());
  const cmap = el('select', {}, COLORMAPS.map((c) => new Option(c, c)));
  const scale = el('select', {}, STRETCHES.map((s) => new Option(s, s)));
  const slice = el('input', { type: 'range', min: '0', step: '1' });
  const sliceOut = el('output');
  const sliceRow = el('label', {}, ['slice ', slice, sliceOut]);
  const opacity = el('input', { type: 'range', min: '0', max: '1', step: '0.05' });
  const opacityRow = el('label', {}, ['overlay ', opacity]);
  const fit = el('button', { type: 'button', textContent: 'fit', title: 'fit the image to the view (0)' });
  const note = el('div', { className: 'note' });
  const hist = el('canvas', { className: 'hist' });
  const caption = el('div', { className: 'caption' });
  const readout = el('div', { className: 'readout' });
  const box = el('div', { className: 'gpuscope-widget' }, [
    el('style', { textContent: CSS }),
    note,
    view,
    el('div', { className: 'bar' }, [el('label', {}, ['colormap ', cmap]), el('label', {}, ['scale ', scale]), sliceRow, opacityRow, fit]),
    hist,
    caption,
    readout,
  ]);
  root.replaceChildren(box);

  let data = null; // {data, shape, summary}
  const step = () => model.get('_step') ?? [1, 1];
  const hover = (p) => {
    if (!p) {
      readout.textContent = 'Move the pointer over the image to read values.';
      return;
    }
    // The page's readout (web/app.js hover), in the original array's
    // coordinates when it is shown downsampled.
    const [kz, k] = step();
    const v = Array.isArray(p.value) ? `(${p.value.map(fmt).join(', ')})` : fmt(p.value);
    let text = `x ${p.x * k}, y ${p.y * k}${p.z !== undefined ? `, slice ${p.z * kz}` : ''}: ${v}`;
    if (p.overlay !== undefined) text += p.kind === 'mask' ? `, mask ${p.overlay ? 1 : 0}` : `, label ${p.overlay}`;
    readout.textContent = text;
  };
  const viewer = new Viewer(view, { onHover: hover });
  hover(null);

  const limits = () => {
    const l = model.get('limits');
    return l && l.length === 2 ? l : [data.summary.percentile(0.5), data.summary.percentile(99.5)];
  };

  function loadData() {
    const arr = typed(model.get('_data'), model.get('_dtype'));
    const shape = model.get('_shape');
    data = arr ? { data: arr, shape, summary: summarize(arr) } : null;
    const labels = typed(model.get('_labels'), model.get('_labels_dtype'));
    viewer.overlay = labels ? { kind: model.get('_labels_kind') || 'labels', data: labels } : null;
    const m = typed(model.get('_markers'), 'float64');
    const markers = [];
    for (let i = 0; m && i < m.length; i += 4) {
      const mk = { y: m[i], x: m[i + 1] };
      if (Number.isFinite(m[i + 2])) mk.z = m[i + 2];
      if (Number.isFinite(m[i + 3])) mk.r = m[i + 3];
      markers.push(mk);
    }
    viewer.markers = markers;
    note.textContent = model.get('message') ?? '';
    note.hidden = !note.textContent;
    viewer.fitted = false;
  }

  function redraw() {
    if (!data) return;
    const info = layout(data.shape);
    const [lo, hi] = limits();
    const rgb = info.channels > 1;
    viewer.display = { cmap: model.get('colormap'), stretch: model.get('scale'), lo, hi };
    viewer.opacity = model.get('opacity');
    const z = model.get('slice');
    viewer.setLayer({ data: data.data, shape: data.shape });
    // The model's slice (-1: the viewer's choice, the middle one).
    if (z >= 0 && z < info.slices && z !== viewer.slice) viewer.setSlice(z);
    cmap.value = model.get('colormap');
    cmap.disabled = rgb;
    cmap.title = rgb ? 'colour images are shown in their own colours' : '';
    scale.value = model.get('scale');
    sliceRow.hidden = info.slices <= 1;
    slice.max = String(info.slices - 1);
    slice.value = String(viewer.slice);
    sliceOut.textContent = ` ${viewer.slice * step()[0]} of ${layout(model.get('_source_shape') ?? data.shape).slices}`;
    opacityRow.hidden = !viewer.overlay && !viewer.markers.length;
    opacity.value = String(model.get('opacity'));
    const shown = drawHistogram(hist, data.summary, lo, hi, { cmap: rgb ? 'gray' : model.get('colormap'), stretch: model.get('scale') });
    const src = model.get('_source_shape') ?? data.shape;
    caption.textContent =
      `${src.join(' × ')} ${model.get('_dtype')}; histogram from ${fmt(shown.from)} to ${fmt(shown.to)} ` +
      `(values ${fmt(data.summary.min)} … ${fmt(data.summary.max)}, log counts${data.summary.exact ? '' : ', sampled'}); ` +
      `display range ${fmt(lo)} … ${fmt(hi)}${model.get('limits')?.length === 2 ? '' : ' (0.5–99.5 percentiles)'}` +
      `${viewer.markers.length ? `; ${viewer.markers.length} markers` : ''}`;
  }

  const set = (name, value) => {
    model.set(name, value);
    model.save_changes();
  };
  cmap.addEventListener('change', () => set('colormap', cmap.value));
  scale.addEventListener('change', () => set('scale', scale.value));
  slice.addEventListener('input', () => set('slice', Number(slice.value)));
  opacity.addEventListener('input', () => set('opacity', Number(opacity.value)));
  // Page Up/Down in the viewer changes its slice itself; keep the model in step.
  view.addEventListener('slicechange', () => set('slice', viewer.slice));
  fit.addEventListener('click', () => {
    viewer.fitted = false;
    viewer.paint();
  });

  // Python's update() changes several traits at once: one redraw for all.
  let pending = 0; // 1: display only, 2: data too
  const schedule = (what) => {
    if (!pending) {
      queueMicrotask(() => {
        const p = pending;
        pending = 0;
        if (p === 2) loadData();
        redraw();
      });
    }
    pending = Math.max(pending, what);
  };
  const onData = () => schedule(2);
  const onDisplay = () => schedule(1);
  const names = ['_data', '_shape', '_dtype', '_labels', '_labels_dtype', '_labels_kind', '_markers', '_step', 'message'];
  const display = ['colormap', 'scale', 'limits', 'slice', 'opacity'];
  for (const n of names) model.on(`change:${n}`, onData);
  for (const n of display) model.on(`change:${n}`, onDisplay);
  loadData();
  redraw();
  // A hook for tests and for debugging in the browser's console.
  root.gpuscope = { viewer, readout };
  return () => {
    for (const n of names) model.off(`change:${n}`, onData);
    for (const n of display) model.off(`change:${n}`, onDisplay);
  };
}

export default { render };

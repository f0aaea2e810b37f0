// The viewer panel around the canvas: the layer shown and its display
// settings, the histogram, the results table, the cursor readout, the slice
// slider and the downloads.
import { OPS } from './ops.js';
import { Viewer, drawHistogram, layout } from './viewer.js';
import { renderTable, saveBlob } from './table.js';
import { $, fmt, gs, state, stem, summaryOf } from './state.js';
import { showMessage } from './errors.js';
import { writeHash } from './link.js';
import { views } from './view/hooks.js';

export let viewer;
export function createViewer() {
  viewer = new Viewer($('view'), { onHover: hover });
}

let histogramRange = { from: 0, to: 1 };

/** Dragging across the histogram sets the display limits (manual). */
export function wireHistogram() {
  const c = $('histogram');
  let drag = null; // {start, range} fixed at pointerdown: the axis may move while dragging
  const valueAt = (e, range) => {
    const r = c.getBoundingClientRect();
    const t = Math.min(1, Math.max(0, (e.clientX - r.left) / r.width));
    return range.from + t * (range.to - range.from);
  };
  c.addEventListener('pointerdown', (e) => {
    const range = { ...histogramRange };
    drag = { start: valueAt(e, range), range };
    c.setPointerCapture(e.pointerId);
  });
  c.addEventListener('pointerup', () => (drag = null));
  c.addEventListener('pointermove', (e) => {
    if (!drag) return;
    const v = valueAt(e, drag.range);
    if (v === drag.start) return;
    $('limits').value = 'manual';
    $('vmin').value = +Math.min(drag.start, v).toPrecision(6);
    $('vmax').value = +Math.max(drag.start, v).toPrecision(6);
    refreshView(false);
    writeHash();
  });
}

/** Base array, overlay and markers of layer `k` (-1: the input). */
export function layerOf(k) {
  const input = { data: state.image.data, shape: state.image.shape, name: state.image.name };
  if (k < 0 || !state.outputs[k]) return { base: input, overlay: null, markers: [], result: null };
  // The base of an overlay is the nearest earlier image in the chain.
  const baseOf = (j) => {
    for (let i = j; i >= 0; i--) if (state.outputs[i].kind === 'image') return state.outputs[i];
    return input;
  };
  const o = state.outputs[k];
  if (o.kind === 'image') return { base: o, overlay: null, markers: [], result: o };
  if (o.kind === 'mask') return { base: baseOf(k - 1), overlay: { kind: 'mask', data: o.data }, markers: [], result: o };
  if (o.kind === 'labels') {
    return { base: baseOf(k - 1), overlay: { kind: OPS[o.op].overlay ?? 'labels', data: o.data }, markers: [], result: o };
  }
  // Tables: markers, over the array the step also returns (strong pixels,
  // source labels) when it has the base image's size.
  const base = baseOf(k - 1);
  const kind = OPS[o.op].overlay;
  const overlay = kind && o.data?.length === base.data.length ? { kind, data: o.data } : null;
  return { base, overlay, markers: OPS[o.op].markers?.(o) ?? [], result: o };
}

export function fillLayerSelect() {
  const sel = $('layer');
  sel.replaceChildren(new Option(`input: ${state.image.name}`, '-1'));
  state.outputs.forEach((o, k) =>
    sel.append(new Option(`step ${k + 1}: ${o.op} (${o.where === 'gpu' ? 'WebGPU' : 'CPU'})`, String(k))),
  );
  sel.value = String(state.layer);
}

/** Redraws after a new image, a run or a change of display settings. */
export function refreshView(newImage) {
  if (!state.image) return;
  if (state.layer >= state.outputs.length) state.layer = state.outputs.length - 1;
  fillLayerSelect();
  const { base, overlay, markers, result } = views.adjustLayer(state.layer, layerOf(state.layer));
  const summary = summaryOf(base.data);
  const mode = $('limits').value;
  const own = views.limits(mode, base, summary); // zscale, DIALS brightness
  let lo;
  let hi;
  if (mode === 'manual') {
    lo = Number($('vmin').value);
    hi = Number($('vmax').value);
    if (!Number.isFinite(lo) || !Number.isFinite(hi)) {
      lo = summary.min;
      hi = summary.max;
    }
  } else if (own) {
    [lo, hi] = own;
  } else if (mode === 'minmax') {
    lo = summary.min;
    hi = summary.max;
  } else {
    lo = summary.percentile(Number($('plo').value) || 0);
    hi = summary.percentile(Number($('phi').value) || 100);
  }
  if (mode !== 'manual') {
    $('vmin').value = +lo.toPrecision(6);
    $('vmax').value = +hi.toPrecision(6);
  }
  viewer.display = { cmap: $('cmap').value, stretch: $('stretch').value, lo, hi, special: views.special(base), poolMax: views.poolMax(base) };
  viewer.opacity = Number($('opacity').value);
  viewer.overlay = overlay;
  viewer.markers = markers;
  if (newImage) viewer.fitted = false;
  viewer.setLayer(base);
  const { slices } = layout(base.shape);
  $('slice-row').hidden = slices <= 1;
  $('slice').max = String(slices - 1);
  $('slice').value = String(viewer.slice);
  $('slice-out').textContent = `${viewer.slice} of ${slices}`;
  const rgb = layout(base.shape).channels > 1;
  $('cmap').disabled = rgb;
  $('cmap').title = rgb ? 'colour images are shown in their own colours' : '';
  const shown = drawHistogram($('histogram'), summary, lo, hi, { cmap: rgb ? 'gray' : $('cmap').value, stretch: $('stretch').value });
  histogramRange = shown;
  $('hist-caption').textContent =
    // Only image steps show their output; masks, labels and tables are
    // drawn over the image the step ran on.
    `histogram of ${state.layer < 0 ? 'the input' : `step ${state.layer + 1}'s ${result?.kind === 'image' ? 'output' : 'input'}`}` +
    ` from ${fmt(shown.from)} to ${fmt(shown.to)} (values ${fmt(summary.min)} … ${fmt(summary.max)}, log counts` +
    `${summary.exact ? '' : ', sampled'}${summary.masked ? ', masked negative pixels left out' : ''}); the shaded band is the display range ${fmt(lo)} … ${fmt(hi)}`;
  $('dl-npy').disabled = $('dl-tif').disabled = false;
  $('dl-png').disabled = false;
  showResults(result);
  views.afterRefresh();
}

export function showResults(result) {
  const panel = $('results');
  if (!result || result.kind === 'image') {
    panel.hidden = true;
    return;
  }
  panel.hidden = false;
  if (result.kind === 'table' && result.table) {
    const n = result.table.rows.length;
    $('results-summary').textContent =
      n === 0 && result.op === 'sources'
        ? `No sources: no pixel is above the detection level ${fmt(result.threshold)} (median + nsigma·std of the clipped background${result.params?.workshop ? '; workshop: nsigma·std' : ''}). Lower nsigma to find fainter ones.`
        : `${n} rows from ${result.op}${result.shape?.length === 3 && result.op === 'sources' ? ` (a volume: centroids are z, y, x; markers on each centroid's slice)` : ''}.`;
    renderTable($('results-table'), {
      ...result.table,
      name: `${stem()}-${result.op}`,
      onRow: OPS[result.op].markers ? (row) => views.focusRow(result, row) : null,
    });
    return;
  }
  // Masks and labels: counts per slice.
  const { h, w, channels, slices } = layout(result.shape);
  const n = h * w * channels;
  const rows = [];
  let total = 0;
  for (let z = 0; z < slices; z++) {
    let count = 0;
    const labels = new Set();
    for (let i = z * n; i < (z + 1) * n; i++) {
      if (result.data[i]) {
        count++;
        if (result.kind === 'labels') labels.add(result.data[i]);
      }
    }
    total += count;
    const row = { slice: z, foreground: count, fraction: count / n };
    if (result.kind === 'labels') row.labels = labels.size;
    rows.push(row);
  }
  $('results-summary').textContent =
    `${result.op}: ${total} of ${result.data.length} pixels foreground (${((100 * total) / result.data.length).toFixed(2)}%)` +
    (result.count !== undefined ? `, ${result.count} labels` : '') +
    '.';
  const columns = [
    { key: 'slice', label: 'slice' },
    { key: 'foreground', label: 'foreground pixels' },
    { key: 'fraction', label: 'fraction', format: (v) => v.toFixed(4) },
  ];
  if (result.kind === 'labels') columns.push({ key: 'labels', label: 'labels' });
  renderTable($('results-table'), { columns, rows, name: `${stem()}-${result.op}-counts` });
}

export function hover(p) {
  const el = $('cursor');
  if (!p) {
    el.textContent = 'Move the pointer over the image to read values.';
    return;
  }
  const v = Array.isArray(p.value) ? `(${p.value.map(fmt).join(', ')})` : fmt(p.value);
  const more = views.readout(p);
  let text = `${more.coords ?? `x ${p.x}, y ${p.y}`}${p.z !== undefined ? `, slice ${p.z}` : ''}: ${v}`;
  if (p.overlay !== undefined) text += p.kind === 'mask' ? `, mask ${p.overlay ? 1 : 0}` : `, label ${p.overlay}`;
  if (more.extra) text += ` — ${more.extra}`;
  el.textContent = text;
}

// ---------------------------------------------------------------- downloads

export function currentArray() {
  const k = state.layer;
  if (k < 0 || !state.outputs[k]) return { data: state.image.data, shape: state.image.shape, name: stem() };
  const o = state.outputs[k];
  return { data: o.data, shape: o.shape, name: `${stem()}-${state.outputs.slice(0, k + 1).map((x) => x.op).join('-')}` };
}

export function download(format) {
  try {
    const a = currentArray();
    const bytes = gs.encode(format, a);
    saveBlob(new Blob([bytes], { type: 'application/octet-stream' }), `${a.name}.${format === 'tiff' ? 'tif' : format}`);
  } catch (e) {
    showMessage(`Cannot write the file: ${gs.message(e)}`);
  }
}

export async function downloadView() {
  const blob = await viewer.pngBlob();
  saveBlob(blob, `${currentArray().name}-view.png`);
}

export function setSlice(z) {
  viewer.setSlice(z);
  $('slice').value = String(viewer.slice);
  $('slice-out').textContent = `${viewer.slice} of ${viewer.info.slices}`;
  views.sliceChanged();
  writeHash();
}

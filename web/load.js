// Loading an image: a built-in sample, a picked or a dropped file.
import { SAMPLES } from './samples.js';
import { $, fmt, gs, state } from './state.js';
import { showError, showMessage } from './errors.js';
import { applyImageDefaults, renderChain } from './chain.js';
import { cancel, runChain } from './run.js';
import { refreshView } from './display.js';
import { applyPendingLink, writeHash } from './link.js';
import { layout } from './viewer.js';

// A new image larger than this (pixels, channels not counted) is shown
// without re-running the chain on it: a long chain (spot finding on a 6
// megapixel frame) would otherwise start on every change of sample.
export const AUTO_RUN_MAX = 2 ** 21;

/** A load error: in the message area, the focus on the drop zone (Enter
 * there picks another file). */
function loadError(text) {
  showError(text);
  $('drop').focus({ preventScroll: true });
}

/** The decoder's message without the file name it may start with (the
 * page's message names the file already). */
function decodeMessage(name, e) {
  let text = gs.message(e);
  while (text.startsWith(`${name}: `)) text = text.slice(name.length + 2);
  return text;
}
import { views } from './view/hooks.js';
import * as hdf5 from './hdf5.js';
import * as zarr from './zarr.js';

export function selectSampleOptions() {
  const sel = $('sample');
  const none = new Option('— a file of yours —', '');
  none.disabled = true;
  sel.append(none, ...SAMPLES.map((s) => new Option(s.label, s.file)));
}

export async function loadBytes(name, bytes, sample = null) {
  if (bytes.length === 0) {
    loadError(`Cannot open ${name}: the file is empty (0 bytes).`);
    return false;
  }
  showMessage(`Decoding ${name}…`, 'info');
  // Let the message paint before a long decode (a hidden tab paints no
  // frames: the timeout goes on without one).
  await new Promise((r) => {
    requestAnimationFrame(() => setTimeout(r, 0));
    setTimeout(r, 100);
  });
  let image;
  try {
    image = await gs.decode(name, bytes);
  } catch (e) {
    loadError(`Cannot open ${name}: ${decodeMessage(name, e)}`);
    return false;
  }
  hdf5.close();
  zarr.close();
  return useImage(image, sample);
}

/** Shows a decoded image (a file, a sample or a series of frames). */
export function useImage(image, sample = null) {
  const name = image.name;
  // A run on the previous image is of no use any more.
  if (state.run) cancel();
  state.image = image;
  state.sample = sample;
  state.outputs = [];
  state.layer = -1;
  $('sample').value = sample ?? '';
  const info = SAMPLES.find((s) => s.file === sample);
  $('provenance').textContent = info ? `Source: ${info.provenance}` : '';
  const { min, max, mean } = image.stats;
  const el = $('image-info');
  el.replaceChildren(
    `${name}: ${image.shape.join(' × ')} ${image.dtype} (${image.format}), min ${fmt(min)} max ${fmt(max)} mean ${fmt(mean)}`,
  );
  if (image.header.length) {
    const d = document.createElement('details');
    const s = document.createElement('summary');
    s.textContent = `header (${image.header.length} fields)`;
    const pre = document.createElement('pre');
    pre.textContent = image.header.map(([k, v]) => `${k} = ${v}`).join('\n');
    d.append(s, pre);
    el.append(d);
  }
  showMessage('');
  applyImageDefaults(); // a colour image's channel axis is left alone
  views.onImage(image);
  renderChain(); // per-axis hints depend on the shape
  refreshView(true);
  writeHash();
  return true;
}

// Samples are fetched once (all of them in the background after start-up),
// so nothing needs the network once the page has loaded.
const sampleCache = new Map();
export function fetchSample(file) {
  if (!sampleCache.has(file)) {
    const p = fetch(`web/samples/${file}`).then(async (response) => {
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      return new Uint8Array(await response.arrayBuffer());
    });
    // A failed fetch is not kept: the next try fetches again.
    p.catch(() => sampleCache.delete(file));
    sampleCache.set(file, p);
  }
  return sampleCache.get(file);
}

export async function prefetchSamples() {
  for (const s of SAMPLES) await fetchSample(s.file).catch(() => {});
  state.prefetched = true;
}

export async function loadSample(file) {
  let bytes;
  try {
    bytes = await fetchSample(file);
  } catch (e) {
    loadError(`Cannot load the sample ${file}: ${gs.message(e)}`);
    return false;
  }
  return loadBytes(file, bytes, file);
}

export async function loadFile(file) {
  if (!file) return false;
  return loadBytes(file.name, new Uint8Array(await file.arrayBuffer()));
}

/** Picked or dropped files: a Zarr folder's (picked with "Open a Zarr
 * folder…") go to zarr.js, HDF5 ones (an Eiger master with its data
 * files) go to hdf5.js, read by ranges; several other frames become a
 * series (no chain run: spot finding over it is a button of its own);
 * else the one file. True when the chain should run on the new image. */
export async function loadFiles(files) {
  if (zarr.isZarr(files)) {
    hdf5.close();
    return zarr.open(files);
  }
  if (files.some((f) => hdf5.isHdf5(f.name))) {
    zarr.close();
    return hdf5.open(files);
  }
  if (files.length > 1) {
    await views.loadSeries(files);
    return false;
  }
  return loadFile(files[0]);
}

/** After a new image was loaded by the user: runs the chain on it, unless
 * it is large (then it is shown as it is, and Run runs the chain). A link
 * waiting for this file is run and applied whatever the size. */
export async function runAfterLoad() {
  if (!state.image) return false;
  const { name, shape } = state.image;
  const { h, w, slices } = layout(shape);
  const pending = state.pendingLink?.file === name && !state.sample;
  if (h * w * slices > AUTO_RUN_MAX && !pending) {
    $('run-info').textContent = '';
    showMessage(
      `${name} has ${((h * w * slices) / 1e6).toFixed(1)} million pixels: it is shown as it is, without running the chain on it. Press Run to run the chain.`,
      'info',
    );
    return false;
  }
  const ok = await runChain();
  if (ok && pending) applyPendingLink(name);
  return ok;
}

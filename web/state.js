// The page's shared state and small helpers, read and written by the
// page's modules (load, chain, run, workshop, display, link, app).
import { summarize } from './viewer.js';
import { defaults } from './ops.js';

// The wasm boundary, imported by app.js's main() so that a missing build is
// reported on the page instead of failing silently.
export let gs;
export function setWasm(module) {
  gs = module;
}

export const $ = (id) => document.getElementById(id);

export const state = {
  status: 'loading', // 'loading' | 'ready' | 'failed'
  device: null,
  gpuError: null,
  image: null, // from gs.decode
  sample: null, // the sample's file name when the image is one
  // A step: {op, raw: form text per parameter, auto: parameters still at the default}.
  steps: [{ op: 'gaussian_filter', raw: defaults('gaussian_filter'), auto: new Set(Object.keys(defaults('gaussian_filter'))) }],
  outputs: [], // one per step of the last run: {kind, op, data, shape, where, ms, wallMs, kernelMs}
  layer: -1, // what the viewer shows: -1 the input, k the output of step k
  busy: 0,
  run: null, // {cancelled} of the run in progress
  lastRun: null,
  compare: null, // rows of the last workshop comparison
  prefetched: false, // every sample is in memory
  pendingLink: null, // {file, show, z} of a link made from a local file, until it is loaded again
};

// Display statistics per array. Negative values of detector frames (CBF)
// are masked pixels (-1 module gaps, -2 bad pixels): left out of the
// limits and the histogram.
const summaries = new WeakMap();
export function summaryOf(data) {
  let s = summaries.get(data);
  if (!s) {
    // HDF5 frames with a detector mask applied are marked the CBF way.
    const masked = state.image?.format === 'cbf' || state.image?.masked === true;
    summaries.set(data, (s = summarize(data, masked ? { lowest: 0 } : {})));
    s.masked = masked;
  }
  return s;
}

export const fmt = (v) => (typeof v !== 'number' ? String(v) : Number.isInteger(v) ? String(v) : v.toPrecision(4));
export const ms = (v) => (v === undefined || v === null ? '—' : `${v.toFixed(1)} ms`);
export const stem = () => (state.image?.name ?? 'image').replace(/(\.cbf)?\.[^.]*$/i, '');

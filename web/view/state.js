// The view in the URL and in a file: zoom and centre as a hash entry
// (`view=zoom,x,y`, the data point at the canvas centre), and the whole
// view state (the link's entries plus the measuring tools) as JSON.

/** The hash entry of a viewer's zoom and centre. */
export function viewEntry(viewer) {
  if (!viewer.layer) return null;
  const [x, y] = viewer.toData(viewer.canvas.width / 2, viewer.canvas.height / 2);
  return `${+viewer.zoom.toPrecision(5)},${x.toFixed(1)},${y.toFixed(1)}`;
}

/** Whether the viewer shows the whole image as fit() places it (then the
 * link leaves the zoom out, and any window fits it again). */
export function isFit(viewer) {
  const { w, h } = viewer.info;
  const cw = viewer.canvas.width;
  const ch = viewer.canvas.height;
  const z = Math.min(cw / w, ch / h);
  return Math.abs(viewer.zoom - z) < 1e-9 * z && Math.abs(viewer.ox - (cw - w * z) / 2) < 0.5 && Math.abs(viewer.oy - (ch - h * z) / 2) < 0.5;
}

/** Parses a `view=` entry: {zoom, x, y} or null when malformed. */
export function parseViewEntry(text) {
  const v = String(text ?? '').split(',').map(Number);
  if (v.length !== 3 || !v.every(Number.isFinite) || !(v[0] > 0)) return null;
  return { zoom: v[0], x: v[1], y: v[2] };
}

export const STATE_VERSION = 1;

/** The view state as a JSON-able object. */
export function stateOf({ hash, image, sample, measure, extras }) {
  return {
    gpuscope_view: STATE_VERSION,
    saved: new Date().toISOString(),
    image: image ? { name: image.name, shape: image.shape, sample: sample ?? null } : null,
    hash,
    line: measure.line,
    rect: measure.rect,
    ...extras,
  };
}

/** Checks a parsed state file; returns the state or throws saying what is wrong. */
export function checkState(s) {
  if (!s || typeof s !== 'object' || s.gpuscope_view === undefined) {
    throw new Error('this file is not a gpuscope view state (no "gpuscope_view" entry): save one with "save view (.json)"');
  }
  if (s.gpuscope_view > STATE_VERSION) throw new Error(`this view state is of version ${s.gpuscope_view}; this page reads version ${STATE_VERSION}`);
  if (typeof s.hash !== 'string') throw new Error('the view state has no "hash" entry');
  const box = (v) => v === null || v === undefined || (Array.isArray(v) && v.length === 4 && v.every(Number.isInteger));
  if (!box(s.line) || !box(s.rect)) throw new Error('the view state\'s "line" or "rect" is not four pixel indices');
  return s;
}

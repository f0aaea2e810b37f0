// Measuring tools of the viewer: a line profile (values of the pixels along
// a dragged line, plotted and as CSV) and rectangle statistics (count, sum,
// mean, std, min, max of the pixels inside a dragged rectangle).

/** The pixels along the line from pixel (x0, y0) to pixel (x1, y1)
 * (integer indices): max(|dx|, |dy|) + 1 samples, each the nearest pixel,
 * so a row or column gives every pixel once. Returns [{i, x, y, distance}]. */
export function linePixels(x0, y0, x1, y1) {
  const dx = x1 - x0;
  const dy = y1 - y0;
  const n = Math.max(Math.abs(dx), Math.abs(dy)) + 1;
  const length = Math.hypot(dx, dy);
  const out = [];
  for (let i = 0; i < n; i++) {
    const t = n > 1 ? i / (n - 1) : 0;
    out.push({ i, x: Math.round(x0 + t * dx), y: Math.round(y0 + t * dy), distance: t * length });
  }
  return out;
}

/** Values of `points` in slice `slice` of an array of layout {h, w, channels}. */
export function profileValues(data, { h, w, channels }, slice, points) {
  const base = slice * h * w;
  return points.map((p) => {
    const i = (base + p.y * w + p.x) * channels;
    return channels === 1 ? data[i] : Array.from(data.subarray(i, i + channels));
  });
}

/** Statistics of the pixels [x0..x1] × [y0..y1] (inclusive indices) of a
 * slice, per channel; values below `lowest` (masked detector pixels) and
 * non-finite values are left out. std is the population one (numpy's
 * default, ddof 0). */
export function rectStats(data, { h, w, channels }, slice, [x0, y0, x1, y1], lowest = -Infinity) {
  const out = [];
  for (let c = 0; c < channels; c++) {
    let count = 0;
    let sum = 0;
    let min = Infinity;
    let max = -Infinity;
    for (let y = y0; y <= y1; y++) {
      for (let x = x0; x <= x1; x++) {
        const v = data[(slice * h * w + y * w + x) * channels + c];
        if (!Number.isFinite(v) || v < lowest) continue;
        count++;
        sum += v;
        if (v < min) min = v;
        if (v > max) max = v;
      }
    }
    const mean = count ? sum / count : NaN;
    let ss = 0;
    for (let y = y0; y <= y1; y++) {
      for (let x = x0; x <= x1; x++) {
        const v = data[(slice * h * w + y * w + x) * channels + c];
        if (!Number.isFinite(v) || v < lowest) continue;
        ss += (v - mean) * (v - mean);
      }
    }
    out.push({ channel: channels > 1 ? 'RGBA'[c] : 'value', count, sum, mean, std: count ? Math.sqrt(ss / count) : NaN, min: count ? min : NaN, max: count ? max : NaN });
  }
  return out;
}

const clampTo = (v, n) => Math.max(0, Math.min(n - 1, Math.floor(v)));

/** The two drag tools over a Viewer. `onProfile(profile)` and
 * `onStats(stats)` get the results; `context()` says what is measured:
 * `{data, masked}` of the array on view. */
export class Measure {
  constructor(viewer, { onProfile, onStats, context }) {
    this.viewer = viewer;
    this.onProfile = onProfile;
    this.onStats = onStats;
    this.context = context;
    this.line = null; // [x0, y0, x1, y1] pixel indices
    this.rect = null; // [x0, y0, x1, y1] pixel indices, inclusive
    this.profile = null;
    this.stats = null;
    this.mode = 'pan';
    this.drag = null;
  }

  setMode(mode) {
    this.mode = mode;
    this.viewer.tool = mode === 'pan' ? null : this.toolOf(mode);
    this.viewer.canvas.style.cursor = mode === 'pan' ? '' : 'crosshair';
  }

  toolOf(mode) {
    const pixel = ([x, y]) => {
      const { w, h } = this.viewer.info;
      return [clampTo(x, w), clampTo(y, h)];
    };
    const move = (p) => {
      if (!this.drag) return;
      const q = pixel(p);
      if (mode === 'line') this.line = [...this.drag, ...q];
      else this.rect = [Math.min(this.drag[0], q[0]), Math.min(this.drag[1], q[1]), Math.max(this.drag[0], q[0]), Math.max(this.drag[1], q[1])];
      this.viewer.paint();
    };
    return {
      down: (p) => {
        this.drag = pixel(p);
        if (mode === 'line') this.line = [...this.drag, ...this.drag];
        else this.rect = [...this.drag, ...this.drag];
        this.viewer.paint();
      },
      move,
      up: (p) => {
        if (!this.drag) return;
        move(p);
        this.drag = null;
        this.update();
      },
    };
  }

  /** Measures again (a new slice, layer or run). */
  update() {
    const v = this.viewer;
    if (!v.layer) return;
    const info = v.info;
    const { data, masked } = this.context();
    if (this.line) {
      const [x0, y0, x1, y1] = this.line;
      if (Math.max(x0, x1) < info.w && Math.max(y0, y1) < info.h) {
        const points = linePixels(x0, y0, x1, y1);
        const values = profileValues(data, info, v.slice, points);
        this.profile = { line: this.line, slice: v.slice, channels: info.channels, points: points.map((p, k) => ({ ...p, value: values[k] })) };
      } else this.profile = null;
      this.onProfile(this.profile);
    }
    if (this.rect) {
      const [x0, y0, x1, y1] = this.rect;
      if (x1 < info.w && y1 < info.h) {
        this.stats = { rect: this.rect, slice: v.slice, masked, rows: rectStats(data, info, v.slice, this.rect, masked ? 0 : -Infinity) };
      } else this.stats = null;
      this.onStats(this.stats);
    }
  }

  clear() {
    this.line = this.rect = this.profile = this.stats = null;
    this.onProfile(null);
    this.onStats(null);
    this.viewer.paint();
  }

  decoration() {
    return (ctx, viewer) => {
      if (!viewer.layer) return;
      const ratio = window.devicePixelRatio || 1;
      ctx.save();
      ctx.lineWidth = 2 * ratio;
      if (this.line) {
        const [x0, y0, x1, y1] = this.line;
        const a = viewer.toCanvas(x0 + 0.5, y0 + 0.5);
        const b = viewer.toCanvas(x1 + 0.5, y1 + 0.5);
        ctx.strokeStyle = '#ff3df2';
        ctx.beginPath();
        ctx.moveTo(...a);
        ctx.lineTo(...b);
        ctx.stroke();
        ctx.fillStyle = '#ff3df2';
        ctx.beginPath();
        ctx.arc(...a, 3 * ratio, 0, 2 * Math.PI);
        ctx.fill();
      }
      if (this.rect) {
        const [x0, y0, x1, y1] = this.rect;
        const a = viewer.toCanvas(x0, y0);
        const b = viewer.toCanvas(x1 + 1, y1 + 1);
        ctx.strokeStyle = '#39ff14';
        ctx.setLineDash([6 * ratio, 4 * ratio]);
        ctx.strokeRect(Math.min(a[0], b[0]), Math.min(a[1], b[1]), Math.abs(b[0] - a[0]), Math.abs(b[1] - a[1]));
      }
      ctx.restore();
    };
  }
}

/** Plots a profile into `canvas`: value against distance, one line per channel. */
export function drawProfile(canvas, profile) {
  const ratio = window.devicePixelRatio || 1;
  const w = Math.max(1, Math.round(canvas.clientWidth * ratio));
  const h = Math.max(1, Math.round(canvas.clientHeight * ratio));
  canvas.width = w;
  canvas.height = h;
  const ctx = canvas.getContext('2d');
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, w, h);
  if (!profile?.points.length) return;
  const pts = profile.points;
  const chans = profile.channels;
  const vals = (k) => pts.map((p) => (chans === 1 ? p.value : p.value[k]));
  let lo = Infinity;
  let hi = -Infinity;
  for (let k = 0; k < chans; k++) for (const v of vals(k)) if (Number.isFinite(v)) [lo, hi] = [Math.min(lo, v), Math.max(hi, v)];
  if (!(hi > lo)) [lo, hi] = [lo - 1, lo + 1];
  const pad = 28 * ratio;
  const total = pts[pts.length - 1].distance || 1;
  const X = (d) => pad + (d / total) * (w - pad - 6 * ratio);
  const Y = (v) => h - 14 * ratio - ((v - lo) / (hi - lo)) * (h - 22 * ratio);
  ctx.font = `${10 * ratio}px system-ui, sans-serif`;
  ctx.fillStyle = '#5b6670';
  ctx.fillText(String(+hi.toPrecision(4)), 2, 10 * ratio);
  ctx.fillText(String(+lo.toPrecision(4)), 2, h - 14 * ratio);
  ctx.fillText(`0 … ${total.toFixed(1)} px along the line`, pad, h - 2 * ratio);
  const colours = chans === 1 ? ['#1f6feb'] : ['#d62728', '#2ca02c', '#1f77b4', '#777'];
  for (let k = 0; k < chans; k++) {
    ctx.strokeStyle = colours[k];
    ctx.lineWidth = 1.5 * ratio;
    ctx.beginPath();
    vals(k).forEach((v, i) => (i ? ctx.lineTo(X(pts[i].distance), Y(v)) : ctx.moveTo(X(pts[i].distance), Y(v))));
    ctx.stroke();
  }
}

/** A profile as CSV rows for table.js's toCsv. */
export function profileTable(profile) {
  const chans = profile.channels;
  const columns = [{ key: 'i' }, { key: 'x' }, { key: 'y' }, { key: 'distance' }];
  if (chans === 1) columns.push({ key: 'value' });
  else for (let c = 0; c < chans; c++) columns.push({ key: 'RGBA'[c] });
  const rows = profile.points.map((p) => {
    const r = { i: p.i, x: p.x, y: p.y, distance: p.distance };
    if (chans === 1) r.value = p.value;
    else p.value.forEach((v, c) => (r['RGBA'[c]] = v));
    return r;
  });
  return { columns, rows };
}

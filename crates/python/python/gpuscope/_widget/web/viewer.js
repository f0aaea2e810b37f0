// The image viewer: one canvas with zoom and pan, the value under the
// cursor, colormaps and scalings with percentile auto-contrast or manual
// limits, a histogram, and overlays (mask, labels in random colours,
// label boundaries, markers) drawn over the image.
import { lut, scaler } from './colormaps.js';

/** How an array of `shape` is shown: `{h, w, channels, slices}`. Grey
 * images (h, w); RGB(A) (h, w, 3|4); stacks (d, h, w) and stacks of RGB
 * (d, h, w, 3|4) get a slice slider over axis 0 (leading axes of higher
 * dimensions are flattened into it). */
export function layout(shape) {
  const n = shape.length;
  if (n === 0) return { h: 1, w: 1, channels: 1, slices: 1 };
  if (n === 1) return { h: 1, w: shape[0], channels: 1, slices: 1 };
  const last = shape[n - 1];
  const rgb = n >= 3 && (last === 3 || last === 4);
  const spatial = rgb ? shape.slice(n - 3, n - 1) : shape.slice(n - 2);
  const lead = shape.slice(0, n - 2 - (rgb ? 1 : 0));
  return {
    h: spatial[0],
    w: spatial[1],
    channels: rgb ? last : 1,
    slices: lead.reduce((a, b) => a * b, 1),
  };
}

/** Min, max, a sorted sample and percentiles over the finite values
 * of `data`. Percentiles are numpy's (linear interpolation between the
 * sorted values), exact up to 2^20 values and taken from an evenly strided
 * sample of 2^20 values beyond. Values below `lowest` are left out (the
 * masked pixels of detector frames). */
export function summarize(data, { lowest = -Infinity } = {}) {
  let lo = Infinity;
  let hi = -Infinity;
  let count = 0;
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (!Number.isFinite(v) || v < lowest) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
    count++;
  }
  if (!count) return { min: 0, max: 1, count: 0, percentile: () => 0, sorted: new Float64Array(0) };
  const limit = 1 << 20;
  const stride = count > limit ? count / limit : 1;
  const sample = new Float64Array(Math.min(count, limit));
  let k = 0;
  let next = 0;
  let seen = 0;
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (!Number.isFinite(v) || v < lowest) continue;
    if (seen >= next && k < sample.length) {
      sample[k++] = v;
      next += stride;
    }
    seen++;
  }
  const sorted = sample.subarray(0, k).sort();
  const percentile = (p) => {
    const x = (Math.min(100, Math.max(0, p)) / 100) * (sorted.length - 1);
    const i = Math.floor(x);
    const f = x - i;
    return i + 1 < sorted.length ? sorted[i] + f * (sorted[i + 1] - sorted[i]) : sorted[i];
  };
  return { min: lo, max: hi, count, percentile, sorted, exact: stride === 1 };
}

/** A colour per label: a fixed hash, so label n has the same colour in every view. */
export function labelColour(n) {
  let x = (n * 2654435761) >>> 0;
  x ^= x >>> 15;
  x = Math.imul(x, 2246822519) >>> 0;
  x = (x ^ (x >>> 13)) >>> 0;
  const hue = (x % 360) / 360;
  const [r, g, b] = hsv(hue, 0.75 + ((x >>> 9) % 25) / 100, 0.95);
  return [r, g, b];
}

function hsv(h, s, v) {
  const i = Math.floor(h * 6);
  const f = h * 6 - i;
  const p = v * (1 - s);
  const q = v * (1 - f * s);
  const t = v * (1 - (1 - f) * s);
  const [r, g, b] = [[v, t, p], [q, v, p], [p, v, t], [p, q, v], [t, p, v], [v, p, q]][i % 6];
  return [Math.round(r * 255), Math.round(g * 255), Math.round(b * 255)];
}

// Mask colours that stand out on each colormap.
const MASK_COLOUR = { gray: [255, 40, 90], viridis: [255, 0, 160], magma: [0, 230, 255], inferno: [0, 230, 255] };

export class Viewer {
  /** `canvas`: the visible canvas; `onChange()` is called after every redraw
   * (cursor moves excluded), `onHover(info|null)` with what is under the cursor. */
  constructor(canvas, { onHover = () => {}, onChange = () => {} } = {}) {
    this.canvas = canvas;
    this.onHover = onHover;
    this.onChange = onChange;
    this.image = document.createElement('canvas');
    this.overlayCanvas = document.createElement('canvas');
    this.layer = null; // {data, shape}
    this.overlay = null; // {kind: 'mask'|'labels'|'boundaries', data}
    this.markers = [];
    this.display = { cmap: 'gray', stretch: 'linear', lo: 0, hi: 1 };
    this.opacity = 0.5;
    this.pool = 1;
    this.slice = 0;
    this.zoom = 1;
    this.ox = 0;
    this.oy = 0;
    this.fitted = false;
    // Hooks of the view modules (web/view/): `flipY` shows row 0 at the
    // bottom (FITS, as DS9); `decorations` draw in canvas pixels after the
    // markers ((ctx, viewer) => void); `tool` ({down, move, up} taking data
    // coordinates) takes pointer drags instead of panning; `markerStyle`
    // shows or hides markers and scales their radius.
    this.flipY = false;
    this.decorations = [];
    this.tool = null;
    this.markerStyle = { show: true, scale: 1 };
    this.wire();
    new ResizeObserver(() => this.paint()).observe(canvas);
  }

  get info() {
    return this.layer ? layout(this.layer.shape) : null;
  }

  /** Shows a new array; keeps zoom and pan when the picture keeps its size. */
  setLayer(layer) {
    const old = this.info;
    this.layer = layer;
    const now = this.info;
    if (!old || old.h !== now.h || old.w !== now.w) this.fitted = false;
    if (this.slice >= now.slices) this.slice = Math.floor(now.slices / 2);
    if (!old || old.slices !== now.slices) this.slice = Math.floor(now.slices / 2);
    this.renderImage();
    this.renderOverlay();
    this.paint();
  }

  setOverlay(overlay, markers = []) {
    this.overlay = overlay;
    this.markers = markers;
    this.renderOverlay();
    this.paint();
  }

  setDisplay(display) {
    Object.assign(this.display, display);
    this.renderImage();
    this.renderOverlay();
    this.paint();
  }

  setOpacity(opacity) {
    this.opacity = opacity;
    this.paint();
  }

  setSlice(z) {
    const n = this.info?.slices ?? 1;
    this.slice = Math.max(0, Math.min(n - 1, z | 0));
    this.renderImage();
    this.renderOverlay();
    this.paint();
  }

  /** The data of the current slice (all channels). */
  sliceData(data = this.layer?.data) {
    const { h, w, channels } = this.info;
    const size = h * w * channels;
    return data.subarray(this.slice * size, (this.slice + 1) * size);
  }

  renderImage() {
    if (!this.layer) return;
    const { h, w, channels } = this.info;
    const data = this.sliceData();
    this.renderPooled(data);
    this.image.width = w;
    this.image.height = h;
    const ctx = this.image.getContext('2d');
    const img = ctx.createImageData(w, h);
    const px = img.data;
    const s = scaler(this.display.lo, this.display.hi, this.display.stretch);
    if (channels === 1) {
      const table = lut(this.display.cmap);
      // `display.special(v)`: an own colour [r, g, b] for some values
      // (masked and saturated detector pixels), or null.
      const special = this.display.special;
      for (let i = 0; i < w * h; i++) {
        const o = 4 * i;
        const c = special?.(data[i]);
        if (c) {
          px[o] = c[0];
          px[o + 1] = c[1];
          px[o + 2] = c[2];
          px[o + 3] = 255;
          continue;
        }
        const k = 3 * s(data[i]);
        px[o] = table[k];
        px[o + 1] = table[k + 1];
        px[o + 2] = table[k + 2];
        px[o + 3] = 255;
      }
    } else {
      // Colour images: the same limits and scaling on each channel.
      for (let i = 0; i < w * h; i++) {
        const o = 4 * i;
        const c = i * channels;
        px[o] = s(data[c]);
        px[o + 1] = s(data[c + 1]);
        px[o + 2] = s(data[c + 2]);
        px[o + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
  }

  /** `display.poolMax` (detector frames, as DIALS' viewer bins them):
   * zoomed out, each screen pixel shows the largest value of its
   * pool×pool block, so single-pixel spots stay visible. Kept in
   * `this.pooled` ({canvas, pool}) for paint(). */
  renderPooled(data = this.sliceData()) {
    this.pooled = null;
    const pool = this.zoom < 1 ? Math.ceil(1 / this.zoom) : 1;
    if (!this.display.poolMax || pool === 1 || this.info.channels !== 1) return;
    const { h, w } = this.info;
    const ow = Math.ceil(w / pool);
    const oh = Math.ceil(h / pool);
    const canvas = document.createElement('canvas');
    canvas.width = ow;
    canvas.height = oh;
    const ctx = canvas.getContext('2d');
    const img = ctx.createImageData(ow, oh);
    const px = img.data;
    const s = scaler(this.display.lo, this.display.hi, this.display.stretch);
    const table = lut(this.display.cmap);
    const special = this.display.special;
    for (let oy = 0; oy < oh; oy++) {
      for (let ox = 0; ox < ow; ox++) {
        let m = -Infinity;
        for (let y = oy * pool; y < Math.min(h, (oy + 1) * pool); y++) {
          for (let x = ox * pool; x < Math.min(w, (ox + 1) * pool); x++) if (data[y * w + x] > m) m = data[y * w + x];
        }
        const o = 4 * (oy * ow + ox);
        const c = special?.(m);
        const k = 3 * s(m);
        px[o] = c ? c[0] : table[k];
        px[o + 1] = c ? c[1] : table[k + 1];
        px[o + 2] = c ? c[2] : table[k + 2];
        px[o + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
    this.pooled = { canvas, pool };
  }

  /** Renders the overlay of the current slice. `pool` > 1 (a zoomed-out
   * view) shows a pool×pool block as marked when any pixel in it is, so
   * single strong pixels stay visible on a whole detector frame. */
  renderOverlay(pool = this.pool) {
    const ov = this.overlay;
    this.overlayAt = null;
    if (!this.layer || !ov) return;
    const { h, w, channels } = this.info;
    // An overlay has the shape of its base: per channel for colour images
    // (a pixel is marked when any channel is).
    const d = ov.data;
    const ch = d.length === this.layer.data.length ? channels : 1;
    const base = this.slice * h * w;
    if (d.length < (base + h * w) * ch) return; // an overlay of another shape
    const at = (i) => {
      if (ch === 1) return d[base + i];
      for (let c = 0; c < ch; c++) if (d[(base + i) * ch + c]) return d[(base + i) * ch + c];
      return 0;
    };
    this.overlayAt = at;
    const colours = new Map();
    const colour = (n) => {
      let c = colours.get(n);
      if (!c) colours.set(n, (c = labelColour(n)));
      return c;
    };
    const maskColour = MASK_COLOUR[this.display.cmap] ?? MASK_COLOUR.gray;
    // [r, g, b, alpha] of data pixel (x, y), or null.
    const paintOf = (x, y) => {
      const i = y * w + x;
      const v = at(i);
      if (ov.kind === 'mask') {
        if (!v) return null;
        // The inside is lighter than the outline, so both the region and
        // what lies under it stay visible.
        const edge =
          (x > 0 && !at(i - 1)) || (x + 1 < w && !at(i + 1)) || (y > 0 && !at(i - w)) || (y + 1 < h && !at(i + w));
        return [...maskColour, edge ? 255 : 150];
      }
      if (ov.kind === 'labels') return v ? [...colour(v), 255] : null;
      if (ov.kind === 'boundaries') {
        const right = x + 1 < w ? at(i + 1) : v;
        const down = y + 1 < h ? at(i + w) : v;
        return right !== v || down !== v ? [255, 230, 0, 255] : null;
      }
      return null;
    };
    const ow = Math.ceil(w / pool);
    const oh = Math.ceil(h / pool);
    this.overlayCanvas.width = ow;
    this.overlayCanvas.height = oh;
    const ctx = this.overlayCanvas.getContext('2d');
    const img = ctx.createImageData(ow, oh);
    const px = img.data;
    const put = (o, c, alpha) => {
      px[o] = c[0];
      px[o + 1] = c[1];
      px[o + 2] = c[2];
      px[o + 3] = alpha;
    };
    if (pool === 1) {
      for (let y = 0; y < h; y++) {
        for (let x = 0; x < w; x++) {
          const c = paintOf(x, y);
          if (c) put(4 * (y * w + x), c, c[3]);
        }
      }
    } else {
      const pooled = new Array(ow * oh).fill(null);
      for (let oy = 0; oy < oh; oy++) {
        for (let ox = 0; ox < ow; ox++) {
          let c = null;
          for (let y = oy * pool; y < Math.min(h, (oy + 1) * pool) && !c; y++) {
            for (let x = ox * pool; x < Math.min(w, (ox + 1) * pool) && !c; x++) c = paintOf(x, y);
          }
          pooled[oy * ow + ox] = c;
        }
      }
      // Marks grow by one screen pixel each way: a lone strong pixel on a
      // whole detector frame is a 3×3 dot, not a sub-pixel speck.
      for (let oy = 0; oy < oh; oy++) {
        for (let ox = 0; ox < ow; ox++) {
          let c = pooled[oy * ow + ox];
          for (let dy = -1; dy <= 1 && !c; dy++) {
            for (let dx = -1; dx <= 1 && !c; dx++) {
              const y = oy + dy;
              const x = ox + dx;
              if (y >= 0 && y < oh && x >= 0 && x < ow) c = pooled[y * ow + x];
            }
          }
          if (c) put(4 * (oy * ow + ox), c, 255);
        }
      }
    }
    this.overlayPool = pool;
    ctx.putImageData(img, 0, 0);
  }

  /** Draws the overlay canvas in image coordinates (transform already set). */
  drawOverlay(ctx) {
    const f = this.overlayPool ?? 1;
    const smooth = ctx.imageSmoothingEnabled;
    ctx.imageSmoothingEnabled = false;
    ctx.globalAlpha = this.opacity;
    ctx.drawImage(this.overlayCanvas, 0, 0, this.overlayCanvas.width * f, this.overlayCanvas.height * f);
    ctx.globalAlpha = 1;
    ctx.imageSmoothingEnabled = smooth;
  }

  fit() {
    const { w, h } = this.info;
    const cw = this.canvas.width;
    const ch = this.canvas.height;
    this.zoom = Math.min(cw / w, ch / h);
    this.ox = (cw - w * this.zoom) / 2;
    this.oy = (ch - h * this.zoom) / 2;
    this.fitted = true;
  }

  /** Zooms by `factor` keeping canvas point (cx, cy) fixed. */
  zoomAt(factor, cx = this.canvas.width / 2, cy = this.canvas.height / 2) {
    const z = Math.max(0.01, Math.min(64, this.zoom * factor));
    const f = z / this.zoom;
    this.ox = cx - (cx - this.ox) * f;
    this.oy = cy - (cy - this.oy) * f;
    this.zoom = z;
    this.paint();
  }

  pan(dx, dy) {
    this.ox += dx;
    this.oy += dy;
    this.paint();
  }

  paint() {
    const c = this.canvas;
    const ratio = window.devicePixelRatio || 1;
    const cw = Math.max(1, Math.round(c.clientWidth * ratio));
    const ch = Math.max(1, Math.round(c.clientHeight * ratio));
    if (c.width !== cw || c.height !== ch) {
      c.width = cw;
      c.height = ch;
      if (this.fitted && this.layer) this.fit();
    }
    const ctx = c.getContext('2d');
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.fillStyle = '#111';
    ctx.fillRect(0, 0, cw, ch);
    if (!this.layer) return;
    if (!this.fitted) this.fit();
    const { w, h } = this.info;
    ctx.imageSmoothingEnabled = this.zoom < 1;
    if (this.flipY) ctx.setTransform(this.zoom, 0, 0, -this.zoom, this.ox, this.oy + h * this.zoom);
    else ctx.setTransform(this.zoom, 0, 0, this.zoom, this.ox, this.oy);
    const pool = this.zoom < 1 ? Math.ceil(1 / this.zoom) : 1;
    if (this.display.poolMax && (this.pooled?.pool ?? 1) !== pool) this.renderPooled();
    if (this.pooled) {
      const { canvas: pc, pool: f } = this.pooled;
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(pc, 0, 0, pc.width * f, pc.height * f);
    } else ctx.drawImage(this.image, 0, 0);
    if (this.overlay) {
      const pool = this.zoom < 1 ? Math.ceil(1 / this.zoom) : 1;
      if (pool !== this.pool) {
        this.pool = pool;
        this.renderOverlay();
      }
      this.drawOverlay(ctx);
    }
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    this.paintMarkers(ctx, (x, y) => this.toCanvas(x, y), this.zoom);
    ctx.strokeStyle = '#555';
    ctx.strokeRect(this.ox - 0.5, this.oy - 0.5, w * this.zoom + 1, h * this.zoom + 1);
    for (const d of this.decorations) d(ctx, this);
    this.onChange();
  }

  /** Markers ({y, x, r?, z?}, pixel centres at integer + 0.5) on the current
   * slice, at the overlay's opacity (0 hides them with the overlay). */
  paintMarkers(ctx, at, scale) {
    if (!this.markers.length || this.opacity <= 0 || !this.markerStyle.show) return;
    ctx.globalAlpha = Math.min(1, this.opacity);
    ctx.lineWidth = 1.5;
    ctx.strokeStyle = this.markerStyle.colour ?? '#00e5ff';
    for (const m of this.markers) {
      if (m.z !== undefined && Math.round(m.z - 0.5) !== this.slice) continue;
      const [sx, sy] = at(m.x, m.y);
      const r = Math.max(4, (m.r ?? 3) * scale) * this.markerStyle.scale;
      ctx.beginPath();
      ctx.arc(sx, sy, r, 0, 2 * Math.PI);
      ctx.stroke();
    }
    ctx.globalAlpha = 1;
  }

  /** The current view at the data's own resolution, colormap and overlay
   * included, as a PNG blob. */
  pngBlob() {
    const { w, h } = this.info;
    const out = document.createElement('canvas');
    out.width = w;
    out.height = h;
    const ctx = out.getContext('2d');
    if (this.flipY) ctx.setTransform(1, 0, 0, -1, 0, h);
    ctx.drawImage(this.image, 0, 0);
    if (this.overlay) {
      // At the data's own resolution: no pooling.
      this.renderOverlay(1);
      this.drawOverlay(ctx);
      this.renderOverlay(this.pool);
    }
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    this.paintMarkers(ctx, (x, y) => [x, this.flipY ? h - y : y], 1);
    return new Promise((resolve) => out.toBlob(resolve, 'image/png'));
  }

  /** Canvas pixel of continuous data coordinates (x, y): pixel (i, j)
   * spans [i, i+1) × [j, j+1). */
  toCanvas(x, y) {
    const h = this.info?.h ?? 0;
    return [this.ox + x * this.zoom, this.oy + (this.flipY ? h - y : y) * this.zoom];
  }

  /** Continuous data coordinates of canvas pixel (cx, cy). */
  toData(cx, cy) {
    const h = this.info?.h ?? 0;
    const y = (cy - this.oy) / this.zoom;
    return [(cx - this.ox) / this.zoom, this.flipY ? h - y : y];
  }

  /** Zoom `zoom` with data point (x, y) at the canvas centre. */
  centreOn(x, y, zoom = this.zoom) {
    this.zoom = Math.max(0.01, Math.min(64, zoom));
    // Marks the view as placed: paint() fits only a view never placed.
    this.fitted = true;
    const [cx, cy] = [this.canvas.width / 2, this.canvas.height / 2];
    const h = this.info?.h ?? 0;
    this.ox = cx - x * this.zoom;
    this.oy = cy - (this.flipY ? h - y : y) * this.zoom;
    this.paint();
  }

  /** What is under canvas point (cx, cy): `{x, y, z, value, overlay}` or null. */
  probe(cx, cy) {
    if (!this.layer) return null;
    const { w, h, channels, slices } = this.info;
    const [fx, fy] = this.toData(cx, cy);
    const x = Math.floor(fx);
    const y = Math.floor(fy);
    if (x < 0 || y < 0 || x >= w || y >= h) return null;
    const i = (this.slice * h * w + y * w + x) * channels;
    const value = channels === 1 ? this.layer.data[i] : Array.from(this.layer.data.subarray(i, i + channels));
    const overlay = this.overlay && this.overlayAt ? this.overlayAt(y * w + x) : undefined;
    return { x, y, z: slices > 1 ? this.slice : undefined, value, overlay, kind: this.overlay?.kind };
  }

  wire() {
    const c = this.canvas;
    const point = (e) => {
      const r = c.getBoundingClientRect();
      const ratio = c.width / Math.max(1, r.width);
      return [(e.clientX - r.left) * ratio, (e.clientY - r.top) * ratio];
    };
    let drag = null;
    let toolDrag = false;
    c.addEventListener('pointerdown', (e) => {
      c.setPointerCapture(e.pointerId);
      // Shift-drag pans while a tool is active.
      if (this.tool && this.layer && !e.shiftKey) {
        toolDrag = true;
        this.tool.down(this.toData(...point(e)), e);
        return;
      }
      drag = point(e);
    });
    c.addEventListener('pointerup', (e) => {
      drag = null;
      if (toolDrag) this.tool?.up(this.toData(...point(e)), e);
      toolDrag = false;
    });
    c.addEventListener('pointermove', (e) => {
      const [x, y] = point(e);
      if (toolDrag) this.tool?.move(this.toData(x, y), e);
      if (drag) {
        this.pan(x - drag[0], y - drag[1]);
        drag = [x, y];
      }
      this.onHover(this.probe(x, y));
    });
    c.addEventListener('pointerleave', () => this.onHover(null));
    c.addEventListener(
      'wheel',
      (e) => {
        e.preventDefault();
        const [x, y] = point(e);
        this.zoomAt(e.deltaY < 0 ? 1.25 : 0.8, x, y);
      },
      { passive: false },
    );
    c.addEventListener('keydown', (e) => {
      const step = 40;
      const keys = {
        ArrowLeft: () => this.pan(step, 0),
        ArrowRight: () => this.pan(-step, 0),
        ArrowUp: () => this.pan(0, step),
        ArrowDown: () => this.pan(0, -step),
        '+': () => this.zoomAt(1.25),
        '=': () => this.zoomAt(1.25),
        '-': () => this.zoomAt(0.8),
        0: () => {
          this.fitted = false;
          this.paint();
        },
        PageUp: () => this.setSlice(this.slice + 1),
        PageDown: () => this.setSlice(this.slice - 1),
      };
      const f = keys[e.key];
      if (f) {
        e.preventDefault();
        f();
        if (e.key.startsWith('Page')) c.dispatchEvent(new CustomEvent('slicechange'));
      }
    });
  }
}

/** Draws a histogram of `summary`'s values (log counts) with the display
 * limits [lo, hi] marked. The horizontal range is min..max, narrowed around
 * the limits when they span less than a tenth of it (detector frames with a
 * few hot pixels). */
export function drawHistogram(canvas, summary, lo, hi, display = null) {
  const ratio = window.devicePixelRatio || 1;
  const w = Math.max(1, Math.round(canvas.clientWidth * ratio));
  const h = Math.max(1, Math.round(canvas.clientHeight * ratio));
  canvas.width = w;
  canvas.height = h;
  const ctx = canvas.getContext('2d');
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, w, h);
  if (!summary.count) return { from: 0, to: 1 };
  let from = summary.min;
  let to = summary.max;
  const span = hi - lo;
  if (span > 0 && span < (to - from) / 10) {
    from = Math.max(from, lo - span / 2);
    to = Math.min(to, hi + span / 2);
  }
  const range = to - from || 1;
  const cols = new Float64Array(w);
  for (const v of summary.sorted) {
    if (v < from || v > to) continue;
    cols[Math.min(w - 1, Math.floor(((v - from) / range) * w))]++;
  }
  let top = 0;
  for (const v of cols) top = Math.max(top, Math.log1p(v));
  const xl = ((lo - from) / range) * w;
  const xh = ((hi - from) / range) * w;
  ctx.fillStyle = '#e8f0fe';
  ctx.fillRect(Math.max(0, xl), 0, Math.max(1, Math.min(w, xh) - Math.max(0, xl)), h);
  ctx.fillStyle = '#3b4b5c';
  for (let x = 0; x < w; x++) {
    const bar = top > 0 ? (Math.log1p(cols[x]) / top) * (h - 2) : 0;
    ctx.fillRect(x, h - bar, 1, bar);
  }
  ctx.fillStyle = '#1f6feb';
  ctx.fillRect(Math.round(xl), 0, 2 * ratio, h);
  ctx.fillRect(Math.round(xh) - 2 * ratio, 0, 2 * ratio, h);
  if (display) {
    // A colour bar along the bottom: the colour each value is shown in.
    const s = scaler(lo, hi, display.stretch);
    const table = lut(display.cmap);
    const band = Math.round(8 * ratio);
    for (let x = 0; x < w; x++) {
      const k = 3 * s(from + ((x + 0.5) / w) * range);
      ctx.fillStyle = `rgb(${table[k]},${table[k + 1]},${table[k + 2]})`;
      ctx.fillRect(x, h - band, 1, band);
    }
  }
  return { from, to };
}

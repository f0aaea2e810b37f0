// Linked orthogonal views of a 3-D stack (d, h, w): the main viewer shows
// XY at slice z; two canvases show XZ (at row y) and YZ (at column x) with
// the same colormap and limits. A crosshair marks (x, y, z) in all three;
// a click in any of them moves it, and the other views follow.
import { lut, scaler } from '../colormaps.js';

/** The XZ plane at row y of a (d, h, w) grey stack: d rows of w values. */
export function planeXZ(data, [d, h, w], y) {
  const out = new Float32Array(d * w);
  for (let z = 0; z < d; z++) out.set(data.subarray(z * h * w + y * w, z * h * w + y * w + w), z * w);
  return out;
}

/** The YZ plane at column x: h rows of d values (z runs left to right, as
 * DS9 and Fiji lay the side view next to XY). */
export function planeYZ(data, [d, h, w], x) {
  const out = new Float32Array(h * d);
  for (let y = 0; y < h; y++) for (let z = 0; z < d; z++) out[y * d + z] = data[z * h * w + y * w + x];
  return out;
}

function flipRows(plane, w, h) {
  const out = new Float32Array(plane.length);
  for (let y = 0; y < h; y++) out.set(plane.subarray(y * w, (y + 1) * w), (h - 1 - y) * w);
  return out;
}

const CROSS = 'rgba(255, 200, 0, 0.9)';

export class Ortho {
  /** `xz`, `yz`: the side canvases; `onMove(point)` after the crosshair moved. */
  constructor(viewer, xz, yz, onMove = () => {}) {
    this.viewer = viewer;
    this.xz = xz;
    this.yz = yz;
    this.onMove = onMove;
    this.on = false;
    this.point = null; // {x, y, z}
    this.planes = null;
    const at = (canvas, e) => {
      const r = canvas.getBoundingClientRect();
      return [(e.clientX - r.left) / r.width, (e.clientY - r.top) / r.height];
    };
    xz.addEventListener('click', (e) => {
      const [u, v] = at(xz, e);
      const { w, slices } = this.viewer.info;
      this.moveTo({ ...this.point, x: Math.floor(u * w), z: Math.floor(v * slices) });
    });
    yz.addEventListener('click', (e) => {
      const [u, v] = at(yz, e);
      const { h, slices } = this.viewer.info;
      const row = Math.floor(v * h);
      this.moveTo({ ...this.point, z: Math.floor(u * slices), y: this.viewer.flipY ? h - 1 - row : row });
    });
    // A click (no drag) on the main view moves x and y.
    let down = null;
    viewer.canvas.addEventListener('pointerdown', (e) => (down = [e.clientX, e.clientY]));
    viewer.canvas.addEventListener('click', (e) => {
      if (!this.on || viewer.tool || !down || Math.hypot(e.clientX - down[0], e.clientY - down[1]) > 3) return;
      const r = viewer.canvas.getBoundingClientRect();
      const ratio = viewer.canvas.width / Math.max(1, r.width);
      const [x, y] = viewer.toData((e.clientX - r.left) * ratio, (e.clientY - r.top) * ratio);
      const { w, h } = viewer.info;
      if (x >= 0 && y >= 0 && x < w && y < h) this.moveTo({ ...this.point, x: Math.floor(x), y: Math.floor(y) });
    });
  }

  /** Whether a layer can be shown in orthogonal views: a grey stack. */
  static fits(info) {
    return !!info && info.slices > 1 && info.channels === 1;
  }

  moveTo(p) {
    const { w, h, slices } = this.viewer.info;
    const c = (v, n) => Math.max(0, Math.min(n - 1, v | 0));
    this.point = { x: c(p.x, w), y: c(p.y, h), z: c(p.z, slices) };
    if (this.viewer.slice !== this.point.z) this.viewer.setSlice(this.point.z);
    this.render();
    this.viewer.paint();
    this.onMove(this.point);
  }

  /** Redraws the side views (new layer, display or crosshair). */
  render() {
    const v = this.viewer;
    if (!this.on || !v.layer || !Ortho.fits(v.info)) {
      this.planes = null;
      return;
    }
    const { w, h, slices } = v.info;
    if (!this.point || this.point.x >= w || this.point.y >= h) this.point = { x: w >> 1, y: h >> 1, z: v.slice };
    this.point.z = v.slice;
    const shape = [slices, h, w];
    this.planes = { xz: planeXZ(v.layer.data, shape, this.point.y), yz: planeYZ(v.layer.data, shape, this.point.x), shape };
    this.draw(this.xz, this.planes.xz, w, slices, [this.point.x, this.point.z]);
    // YZ's rows run as XY's do (bottom to top for FITS).
    const yz = this.viewer.flipY ? flipRows(this.planes.yz, slices, h) : this.planes.yz;
    this.draw(this.yz, yz, slices, h, [this.point.z, this.viewer.flipY ? h - 1 - this.point.y : this.point.y]);
  }

  draw(canvas, plane, pw, ph, [cx, cy]) {
    const { cmap, stretch, lo, hi } = this.viewer.display;
    const img = new ImageData(pw, ph);
    const s = scaler(lo, hi, stretch);
    const table = lut(cmap);
    for (let i = 0; i < pw * ph; i++) {
      const k = 3 * s(plane[i]);
      img.data.set([table[k], table[k + 1], table[k + 2], 255], 4 * i);
    }
    const src = document.createElement('canvas');
    src.width = pw;
    src.height = ph;
    src.getContext('2d').putImageData(img, 0, 0);
    // Square pixels, an integer scale that fills the canvas' CSS width.
    const ratio = window.devicePixelRatio || 1;
    const scale = Math.max(1, Math.floor(((canvas.clientWidth || 256) * ratio) / pw));
    canvas.width = pw * scale;
    canvas.height = ph * scale;
    const ctx = canvas.getContext('2d');
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(src, 0, 0, canvas.width, canvas.height);
    ctx.strokeStyle = CROSS;
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo((cx + 0.5) * scale, 0);
    ctx.lineTo((cx + 0.5) * scale, canvas.height);
    ctx.moveTo(0, (cy + 0.5) * scale);
    ctx.lineTo(canvas.width, (cy + 0.5) * scale);
    ctx.stroke();
  }

  /** Viewer decoration: the crosshair on XY. */
  decoration() {
    return (ctx, viewer) => {
      if (!this.on || !this.point || !Ortho.fits(viewer.info)) return;
      const { w, h } = viewer.info;
      const [x0, y] = viewer.toCanvas(0, this.point.y + 0.5);
      const [x1] = viewer.toCanvas(w, 0);
      const [x, y0] = viewer.toCanvas(this.point.x + 0.5, 0);
      const [, y1] = viewer.toCanvas(0, h);
      ctx.save();
      ctx.strokeStyle = CROSS;
      ctx.lineWidth = window.devicePixelRatio || 1;
      ctx.beginPath();
      ctx.moveTo(x0, y);
      ctx.lineTo(x1, y);
      ctx.moveTo(x, y0);
      ctx.lineTo(x, y1);
      ctx.stroke();
      ctx.restore();
    };
  }
}

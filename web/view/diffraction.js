// Diffraction frames: DIALS-like display of counts (dark spots on white,
// masked, gap and saturated pixels in their own colours), beam centre and
// resolution rings from the CBF header, d-spacing in the readout, and
// series of frames picked together (a frame slider and spot finding over
// every frame).
import { dSpacing, dialsLimits, geometryOf, ringRadiusMm, ringSpacings, saturationOf } from './rings.js';

// Pilatus convention: -1 module gaps, -2 bad pixels; other negatives are
// masked too. The colours stand out on dark-on-white and white-on-dark.
export const PIXEL_COLOURS = {
  gap: [150, 165, 190],
  bad: [230, 30, 30],
  masked: [255, 140, 0],
  saturated: [255, 215, 0],
};
const RING = 'rgb(0, 150, 255)';

export class Diffraction {
  constructor() {
    this.geometry = null; // from the header, or {why}
    this.saturation = Infinity;
    this.rings = { show: true, spacings: null }; // spacings null: automatic
    this.brightness = 10;
  }

  /** A new image: its geometry when it is a detector frame. */
  setImage(image) {
    const frame = image?.format === 'cbf';
    this.geometry = frame ? geometryOf(image.header) : null;
    this.saturation = frame ? saturationOf(image.header) : Infinity;
  }

  get ok() {
    return !!this.geometry && !this.geometry.why;
  }

  /** [lo, hi] of DIALS' display: from the 90th percentile of the counts
   * (`summary` leaves the masked pixels out), taken as DIALS does
   * (nth_element at 0.9 n, no interpolation). */
  limits(summary) {
    const s = summary.sorted;
    const p90 = s.length ? s[Math.min(s.length - 1, Math.floor(0.9 * s.length))] : 0;
    return dialsLimits(p90, this.brightness);
  }

  /** The colour of a value of a frame that is not a count, or null. */
  special() {
    const sat = this.saturation;
    return (v) => {
      if (v >= 0) return v > sat ? PIXEL_COLOURS.saturated : null;
      if (v === -1) return PIXEL_COLOURS.gap;
      if (v === -2) return PIXEL_COLOURS.bad;
      return Number.isNaN(v) ? null : PIXEL_COLOURS.masked;
    };
  }

  /** The readout's d-spacing of data pixel (x, y) (its centre). */
  readout(x, y) {
    if (!this.ok) return '';
    const d = dSpacing(this.geometry, x + 0.5, y + 0.5);
    return Number.isFinite(d) ? `d = ${d.toFixed(d < 10 ? 3 : 1)} Å` : 'd = ∞ (beam centre)';
  }

  /** The rings drawn on a w×h frame: [{d, rx, ry}] radii in pixels. */
  ringList(w, h) {
    if (!this.ok) return [];
    const g = this.geometry;
    const ds = this.rings.spacings ?? ringSpacings(g, w, h);
    return ds
      .map((d) => {
        const mm = ringRadiusMm(g, d);
        return { d, rx: mm / g.pixelMm[0], ry: mm / g.pixelMm[1] };
      })
      .filter((r) => Number.isFinite(r.rx));
  }

  /** Viewer decoration: beam centre and labelled rings. */
  decoration() {
    return (ctx, viewer) => {
      if (!this.ok || !this.rings.show || !viewer.layer) return;
      const { w, h } = viewer.info;
      const g = this.geometry;
      const [bx, by] = viewer.toCanvas(g.beamX, g.beamY);
      const ratio = window.devicePixelRatio || 1;
      ctx.save();
      ctx.strokeStyle = RING;
      ctx.fillStyle = RING;
      ctx.lineWidth = 1.5 * ratio;
      ctx.font = `${12 * ratio}px system-ui, sans-serif`;
      const arm = 10 * ratio;
      ctx.beginPath();
      ctx.moveTo(bx - arm, by);
      ctx.lineTo(bx + arm, by);
      ctx.moveTo(bx, by - arm);
      ctx.lineTo(bx, by + arm);
      ctx.stroke();
      for (const r of this.ringList(w, h)) {
        ctx.beginPath();
        ctx.ellipse(bx, by, r.rx * viewer.zoom, r.ry * viewer.zoom, 0, 0, 2 * Math.PI);
        ctx.stroke();
        // The label at 45° up-right of the beam, where DIALS puts it.
        const a = -Math.PI / 4;
        ctx.fillText(`${r.d} Å`, bx + Math.cos(a) * r.rx * viewer.zoom + 3 * ratio, by + Math.sin(a) * r.ry * viewer.zoom - 3 * ratio);
      }
      ctx.restore();
    };
  }
}

/** Stacks decoded 2-D frames of one shape into a series image ({n, h, w});
 * throws with the file that does not fit. */
export function stackFrames(images) {
  const [first] = images;
  if (first.shape.length !== 2) throw new Error(`${first.name} is not one 2-D frame (${first.shape.join('×')}): a series is made of 2-D frames`);
  const [h, w] = first.shape;
  for (const im of images) {
    if (im.shape.length !== 2 || im.shape[0] !== h || im.shape[1] !== w) {
      throw new Error(`${im.name} is ${im.shape.join('×')}, not ${h}×${w} as ${first.name}: the frames of a series must have one size`);
    }
  }
  const data = new Float32Array(images.length * h * w);
  images.forEach((im, k) => data.set(im.data, k * h * w));
  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  let n = 0;
  for (const im of images) {
    min = Math.min(min, im.stats.min);
    max = Math.max(max, im.stats.max);
    sum += im.stats.mean * im.data.length;
    n += im.data.length;
  }
  return {
    name: `${first.name} … ${images[images.length - 1].name}`,
    shape: [images.length, h, w],
    dtype: first.dtype,
    format: first.format,
    data,
    stats: { min, max, mean: sum / n },
    header: first.header,
    frames: images.map((im) => im.name),
  };
}

/** Spot finding over every frame of a series, one 2-D frame at a time
 * (DIALS' per-image pass, without its merging of spots across frames):
 * `run(frame)` runs find_spots on `{data, shape}` and resolves to its
 * result. Rows get a `frame` column; `progress(k, n)` is called per frame. */
export async function findSpotsOverSeries(image, run, progress = () => {}) {
  const [n, h, w] = image.shape;
  const rows = [];
  let columns = null;
  let strong = 0;
  for (let k = 0; k < n; k++) {
    progress(k, n);
    const r = await run({ data: image.data.subarray(k * h * w, (k + 1) * h * w), shape: [h, w] });
    columns ??= r.table.columns;
    strong += r.nStrong ?? 0;
    for (const row of r.table.rows) rows.push({ frame: k, ...row });
  }
  progress(n, n);
  return {
    columns: [{ key: 'frame', label: 'frame' }, ...(columns ?? [])],
    rows,
    strong,
    markers: rows.map((s) => ({ x: s.x, y: s.y, z: s.frame + 0.5, r: 4 })),
  };
}

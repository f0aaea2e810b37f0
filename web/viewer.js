// Draws arrays on canvases. Grey images and masks are shown as they are,
// (h, w, 3|4) arrays as colour, other 3-D volumes as their middle slice.

/** [lo, hi] over the finite values. */
export function range(data) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of data) {
    if (Number.isFinite(v)) {
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  return lo <= hi ? [lo, hi] : [0, 1];
}

/** Which 2-D picture of an array gets drawn: `{h, w, channels, offset}`. */
export function layout(shape) {
  if (shape.length === 1) return { h: 1, w: shape[0], channels: 1, offset: 0, note: '1-D' };
  if (shape.length === 2) return { h: shape[0], w: shape[1], channels: 1, offset: 0, note: '' };
  const [d, h, w] = shape;
  if (shape.length === 3 && (w === 3 || w === 4)) {
    return { h: d, w: h, channels: w, offset: 0, note: 'colour' };
  }
  const z = Math.floor(d / 2);
  return { h, w, channels: 1, offset: z * h * w, note: `slice ${z} of ${d}` };
}

/** Draws `data` of `shape` scaled linearly from `[lo, hi]` to black..white. */
export function draw(canvas, data, shape, [lo, hi] = range(data)) {
  const { h, w, channels, offset, note } = layout(shape);
  canvas.width = w;
  canvas.height = h;
  const ctx = canvas.getContext('2d');
  const img = ctx.createImageData(w, h);
  const px = img.data;
  const scale = hi > lo ? 255 / (hi - lo) : 0;
  const grey = (v) => (Number.isFinite(v) ? (v - lo) * scale : 0);
  for (let i = 0; i < w * h; i++) {
    const o = 4 * i;
    if (channels === 1) {
      const g = grey(data[offset + i]);
      px[o] = px[o + 1] = px[o + 2] = g;
    } else {
      const s = i * channels;
      px[o] = grey(data[s]);
      px[o + 1] = grey(data[s + 1]);
      px[o + 2] = grey(data[s + 2]);
    }
    px[o + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
  return note;
}

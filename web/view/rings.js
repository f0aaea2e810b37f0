// Diffraction geometry of a flat detector normal to the beam, from the
// Pilatus/Eiger CBF mini-header (Beam_xy, Detector_distance, Wavelength,
// Pixel_size): d-spacing of a pixel, radius of a resolution ring, and the
// display DIALS' image viewer uses for counts.

/** The geometry of a header (`[[key, value], ...]`), or `{why}` naming the
 * missing field. Beam_xy is in pixels with pixel i spanning [i, i+1) (as
 * dxtbx reads it), distances in mm, the wavelength in Å. */
export function geometryOf(header) {
  const h = new Map(header.map(([k, v]) => [k, String(v)]));
  const nums = (k) => (h.get(k) ?? '').match(/[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?/g)?.map(Number) ?? [];
  const beam = nums('Beam_xy');
  const [dist] = nums('Detector_distance');
  const [wavelength] = nums('Wavelength');
  const pix = nums('Pixel_size');
  const missing = [];
  if (beam.length < 2) missing.push('Beam_xy');
  if (!(dist > 0)) missing.push('Detector_distance');
  if (!(wavelength > 0)) missing.push('Wavelength');
  if (!(pix[0] > 0)) missing.push('Pixel_size');
  if (missing.length) return { why: `the header has no usable ${missing.join(', ')}` };
  // Pilatus headers give metres for distance and pixel size.
  const toMm = (v, text) => (/\bm\b/.test(text) && !/\bmm\b/.test(text) ? v * 1000 : v);
  const [twoTheta] = nums('Detector_2theta');
  return {
    beamX: beam[0],
    beamY: beam[1],
    distanceMm: toMm(dist, h.get('Detector_distance')),
    wavelength,
    pixelMm: [toMm(pix[0], h.get('Pixel_size')), toMm(pix[1] ?? pix[0], h.get('Pixel_size'))],
    // A swung detector is outside this model: the rings would be ellipses.
    tilted: Math.abs(twoTheta ?? 0) > 1e-6,
  };
}

/** d-spacing (Å) at continuous pixel coordinate (x, y) (pixel centres at
 * index + 0.5); Infinity at the beam centre. */
export function dSpacing(g, x, y) {
  const rx = (x - g.beamX) * g.pixelMm[0];
  const ry = (y - g.beamY) * g.pixelMm[1];
  const twoTheta = Math.atan(Math.hypot(rx, ry) / g.distanceMm);
  return twoTheta > 0 ? g.wavelength / (2 * Math.sin(twoTheta / 2)) : Infinity;
}

/** Radius in mm of the ring of d-spacing `d` (Å), or NaN beyond 2θ = 90°. */
export function ringRadiusMm(g, d) {
  const s = g.wavelength / (2 * d);
  if (!(s < 1)) return NaN;
  const twoTheta = 2 * Math.asin(s);
  return twoTheta < Math.PI / 2 ? g.distanceMm * Math.tan(twoTheta) : NaN;
}

/** d-spacings of resolution rings: the d at each of `n` radii evenly
 * spaced up to the farthest detector corner, rounded to 2 significant
 * figures (as DIALS' viewer labels them). */
export function ringSpacings(g, w, h, n = 5) {
  const corners = [[0, 0], [w, 0], [0, h], [w, h]];
  const far = Math.max(...corners.map(([x, y]) => Math.hypot((x - g.beamX) * g.pixelMm[0], (y - g.beamY) * g.pixelMm[1])));
  const out = [];
  for (let k = 1; k <= n; k++) {
    const twoTheta = Math.atan((far * k) / n / g.distanceMm);
    const d = g.wavelength / (2 * Math.sin(twoTheta / 2));
    out.push(Number(d.toPrecision(2)));
  }
  return out;
}

/** DIALS' image viewer's display of counts (iotbx FlexImage): white at 0,
 * black from `brightness`-scaled 0.4 / p90 on, where p90 is the 90th
 * percentile of the unmasked pixels (50 counts at brightness 10 when p90 is
 * 0). `brightness` is the viewer's percentage (10 by default). Returns the
 * [lo, hi] of an inverted grey scale. */
export function dialsLimits(p90, brightness = 10) {
  const b = brightness / 100;
  const correction = p90 > 0 ? (b * 0.4) / p90 : b / 5;
  return [0, 1 / correction];
}

/** The Count_cutoff (saturation) of a Pilatus header, or Infinity. */
export function saturationOf(header) {
  const v = header.find(([k]) => k === 'Count_cutoff')?.[1];
  const n = v ? Number(String(v).match(/\d+/)?.[0]) : NaN;
  return Number.isFinite(n) ? n : Infinity;
}

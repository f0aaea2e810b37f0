// IRAF's zscale display limits, as astropy.visualization.ZScaleInterval
// computes them (the astronomers' default in DS9 and JS9): a line is fitted
// to a sorted sample of the pixels with iterative k-sigma rejection, and the
// limits are the median ± the range its slope, divided by `contrast`, spans.

export const ZSCALE_DEFAULTS = {
  nsamples: 1000,
  contrast: 0.25,
  maxReject: 0.5,
  minNpixels: 5,
  krej: 2.5,
  maxIterations: 5,
};

/** [vmin, vmax] of the finite values of `data` (any array-like of numbers),
 * with astropy's parameters and sampling: every `stride`-th finite value,
 * stride = int(max(1, n / nsamples)), at most `nsamples` of them. */
export function zscale(data, options = {}) {
  const o = { ...ZSCALE_DEFAULTS, ...options };
  let n = 0;
  for (let i = 0; i < data.length; i++) if (Number.isFinite(data[i])) n++;
  if (!n) return [0, 1];
  const stride = Math.floor(Math.max(1, n / o.nsamples));
  const samples = [];
  for (let i = 0, k = 0; i < data.length && samples.length < o.nsamples; i++) {
    if (!Number.isFinite(data[i])) continue;
    if (k % stride === 0) samples.push(data[i]);
    k++;
  }
  const s = Float64Array.from(samples).sort();
  const npix = s.length;
  let vmin = s[0];
  let vmax = s[npix - 1];
  const minpix = Math.max(o.minNpixels, Math.floor(npix * o.maxReject));
  const ngrow = Math.max(1, Math.floor(npix * 0.01));
  let bad = new Uint8Array(npix);
  let ngood = npix;
  let lastNgood = npix + 1;
  let slope = 0;
  for (let it = 0; it < o.maxIterations; it++) {
    if (ngood >= lastNgood || ngood < minpix) break;
    const [a, b] = fitLine(s, bad);
    slope = a;
    // The residuals' spread over the good pixels (population std, numpy's).
    let m = 0;
    let c = 0;
    for (let i = 0; i < npix; i++) {
      if (bad[i]) continue;
      m += s[i] - (a * i + b);
      c++;
    }
    m /= c;
    let v = 0;
    for (let i = 0; i < npix; i++) {
      if (bad[i]) continue;
      const d = s[i] - (a * i + b) - m;
      v += d * d;
    }
    const threshold = o.krej * Math.sqrt(v / c);
    for (let i = 0; i < npix; i++) {
      const flat = s[i] - (a * i + b);
      if (flat < -threshold || flat > threshold) bad[i] = 1;
    }
    bad = grow(bad, ngrow);
    lastNgood = ngood;
    ngood = 0;
    for (let i = 0; i < npix; i++) if (!bad[i]) ngood++;
  }
  if (ngood >= minpix) {
    if (o.contrast > 0) slope /= o.contrast;
    const center = Math.floor((npix - 1) / 2);
    const median = npix % 2 ? s[(npix - 1) / 2] : (s[npix / 2 - 1] + s[npix / 2]) / 2;
    vmin = Math.max(vmin, median - (center - 1) * slope);
    vmax = Math.min(vmax, median + (npix - center) * slope);
  }
  return [vmin, vmax];
}

/** Least-squares line a·i + b through the samples not marked bad. */
function fitLine(s, bad) {
  let n = 0;
  let sx = 0;
  let sy = 0;
  for (let i = 0; i < s.length; i++) {
    if (bad[i]) continue;
    n++;
    sx += i;
    sy += s[i];
  }
  const mx = sx / n;
  const my = sy / n;
  let sxx = 0;
  let sxy = 0;
  for (let i = 0; i < s.length; i++) {
    if (bad[i]) continue;
    sxx += (i - mx) * (i - mx);
    sxy += (i - mx) * (s[i] - my);
  }
  const a = sxx > 0 ? sxy / sxx : 0;
  return [a, my - a * mx];
}

/** numpy.convolve(bad, ones(k), mode='same') on booleans: out[i] is set
 * when any of bad[i - floor(k/2) .. i + ceil(k/2) - 1] is. */
function grow(bad, k) {
  const out = new Uint8Array(bad.length);
  const before = Math.floor(k / 2);
  const after = k - 1 - before;
  for (let i = 0; i < bad.length; i++) {
    for (let j = Math.max(0, i - before); j <= Math.min(bad.length - 1, i + after); j++) {
      if (bad[j]) {
        out[i] = 1;
        break;
      }
    }
  }
  return out;
}

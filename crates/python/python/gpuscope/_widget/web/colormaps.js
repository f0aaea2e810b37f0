// Colormaps and intensity scalings of the viewer.
//
// viridis, magma and inferno are matplotlib's, evaluated from the degree-6
// polynomial fits published by Matt Zucker (shadertoy WlfXRN, CC0), which
// stay within about 1/255 of matplotlib's 256-entry tables.

const POLY = {
  viridis: [
    [0.2777273272234177, 0.005407344544966578, 0.3340998053353061],
    [0.1050930431085774, 1.404613529898575, 1.384590162594685],
    [-0.3308618287255563, 0.214847559468213, 0.09509516302823659],
    [-4.634230498983486, -5.799100973351585, -19.33244095627987],
    [6.228269936347081, 14.17993336680509, 56.69055260068105],
    [4.776384997670288, -13.74514537774601, -65.35303263337234],
    [-5.435455855934631, 4.645852612178535, 26.3124352495832],
  ],
  magma: [
    [-0.002136485053939582, -0.000749655052795221, -0.005386127855323933],
    [0.2516605407371642, 0.6775232436837668, 2.494026599312351],
    [8.353717279216625, -3.577719514958484, 0.3144679030132573],
    [-27.66873308576866, 14.26473078096533, -13.64921318813922],
    [52.17613981234068, -27.94360607168351, 12.94416944238394],
    [-50.76852536473588, 29.04658282127291, 4.23415299384598],
    [18.65570506591883, -11.48977351997711, -5.601961508734096],
  ],
  inferno: [
    [0.0002189403691192265, 0.001651004631001012, -0.01948089843709184],
    [0.1065134194856116, 0.5639564367884091, 3.932712388889277],
    [11.60249308247187, -3.972853965665698, -15.9423941062914],
    [-41.70399613139459, 17.43639888205313, 44.35414519872813],
    [77.162935699427, -33.40235894210092, -81.80730925738993],
    [-71.31942824499214, 32.62606426397723, 73.20951985803202],
    [25.13112622477341, -12.24266895238567, -23.07032500287172],
  ],
};

// gray_r: dark on white, as DIALS' image viewer shows diffraction frames.
export const COLORMAPS = ['gray', 'gray_r', 'viridis', 'magma', 'inferno'];
export const STRETCHES = ['linear', 'log', 'sqrt', 'asinh'];

const luts = new Map();

/** 256×RGB lookup table (Uint8Array of 768). */
export function lut(name) {
  if (luts.has(name)) return luts.get(name);
  const t = new Uint8Array(768);
  if (name.endsWith('_r')) {
    const base = lut(name.slice(0, -2));
    for (let i = 0; i < 256; i++) t.set(base.subarray(3 * (255 - i), 3 * (255 - i) + 3), 3 * i);
    luts.set(name, t);
    return t;
  }
  const c = POLY[name];
  for (let i = 0; i < 256; i++) {
    const x = i / 255;
    for (let k = 0; k < 3; k++) {
      let v;
      if (!c) v = x;
      else {
        v = 0;
        for (let d = 6; d >= 0; d--) v = v * x + c[d][k];
      }
      t[3 * i + k] = Math.round(Math.min(1, Math.max(0, v)) * 255);
    }
  }
  luts.set(name, t);
  return t;
}

// DS9's scalings of t = (v - lo) / (hi - lo) clamped to 0..1.
const LOG_A = 1000;
const ASINH_A = 10;
const STRETCH = {
  linear: (t) => t,
  log: (t) => Math.log10(LOG_A * t + 1) / Math.log10(LOG_A + 1),
  sqrt: (t) => Math.sqrt(t),
  asinh: (t) => Math.asinh(ASINH_A * t) / Math.asinh(ASINH_A),
};

/** A function v -> 0..255 for limits [lo, hi] and a scaling. */
export function scaler(lo, hi, stretch = 'linear') {
  const f = STRETCH[stretch] ?? STRETCH.linear;
  const span = hi > lo ? hi - lo : 1;
  // A 4096-entry table of the stretch keeps the per-pixel cost to one lookup.
  const table = new Uint8Array(4097);
  for (let i = 0; i <= 4096; i++) table[i] = Math.round(f(i / 4096) * 255);
  return (v) => {
    let t = (v - lo) / span;
    if (!(t > 0)) t = 0; // NaN too
    else if (t > 1) t = 1;
    return table[Math.round(t * 4096)];
  };
}

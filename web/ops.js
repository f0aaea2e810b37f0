// The operation registry: everything the page knows about an operation is
// one entry of OPS. The form, its validation, the URL hash, the chain, the
// workshop's CPU-vs-GPU comparison and the test hooks are all generated from
// these entries, so adding an operation of the core is one entry here (plus
// its two wasm functions in crates/web/src/bindings.rs).
//
// An entry:
//   id         key in OPS, in the URL hash and in `gpu`/`cpu` below
//   title      what the operation menu shows (the reference function's name)
//   reference  the function users know, with its library ('scipy.ndimage.gaussian_filter')
//   help       one sentence shown under the form
//   params     [{name, type, default, ...}] in the reference's order, with its
//              names and defaults. Types and their checks:
//                float    finite number; `min`, `max`, `minExclusive`
//                int      integer; `min`, `max`
//                floats   comma-separated floats, each checked like `float`;
//                         `perAxis`: 1 value or one per axis of the input
//                ints     the same with integers (e.g. median `size`)
//                choice   one of `choices`
//                bool     a checkbox
//                matrix   rows separated by ';' (or new lines), values by ',' or
//                         spaces; rectangular, finite, at most `maxSize` per side
//              `optional: true` lets a float/int be left empty (null), as a
//              reference's `None`. `help` is the input's tooltip.
//   check(p, input)  optional cross-parameter check; returns a message or null
//   gpu, cpu   names of the wasm `Engine` method and of the free CPU function.
//              Both are called as f(data: Float32Array, shape: Uint32Array, ...args)
//              and return {data, shape, ms, kernelMs?} (+ `count` for labels,
//              `table` for tables: see below)
//   args(p, input, context)  the arguments after (data, shape), from the parsed
//              params; `context.image` is the chain's latest image ({data: Float32Array,
//              shape}), e.g. the intensities for regionprops after label
//   result     what the output is, which decides how it is shown and chained:
//                image   same-shape array: shown with the colormap, feeds the next step
//                mask    0/1 Uint8Array: shown as an overlay on the step's input,
//                        feeds the next step as 0/1
//                labels  integer labels (0 = background): random-colour overlay
//                        (or boundaries with `overlay: 'boundaries'`, for SLIC),
//                        feeds the next step
//                table   `{table: {columns: [{key, label}], rows: [{...}]}}`: shown in
//                        the results table (sortable, CSV); `markers(result)` gives
//                        [{y, x, r?, label?}] drawn on the step's input; the input
//                        passes through to the next step unchanged
//   python(p, input)  the reference call as Python on the array `x` (shown in
//              the page so a result can be checked in Jupyter), e.g.
//              "ndimage.gaussian_filter(x, sigma=2, mode='reflect', cval=0, truncate=4)"
//   exact      true when GPU and CPU must agree exactly (integer outputs);
//              otherwise within RTOL of the largest magnitude (f32 vs f64 sums)
//
// Parameters reach the functions parsed: floats/ints as arrays, matrix as
// {values, rows, cols}, optional empties as null.

export const MODES = ['reflect', 'mirror', 'nearest', 'wrap', 'constant'];

/** GPU (f32) vs CPU (f64) agreement for float outputs, relative to max |CPU|. */
export const RTOL = 1e-4;

/** A Python literal of a parsed parameter value. */
export function py(v) {
  if (Array.isArray(v)) return v.length === 1 ? py(v[0]) : `(${v.map(py).join(', ')})`;
  if (typeof v === 'string') return `'${v}'`;
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (v === null || v === undefined) return 'None';
  return String(v);
}

const mode = {
  name: 'mode',
  type: 'choice',
  choices: MODES,
  default: 'reflect',
  help: 'how the array is extended beyond its edges (scipy.ndimage modes)',
};
const cval = { name: 'cval', type: 'float', default: 0, help: "value outside the edges when mode is 'constant'" };

/** A 2-D kernel as an n-D weights array for an input of `shape`: a stack
 * (d, h, w) gets (1, kh, kw), an RGB image (h, w, 3|4) gets (kh, kw, 1), i.e.
 * the kernel is applied per slice / per channel, as scipy with weights[None]
 * or weights[..., None]. */
export function kernelFor(m, shape) {
  const n = shape.length;
  if (n === 1) return { shape: [m.cols], values: m.values };
  if (n === 2) return { shape: [m.rows, m.cols], values: m.values };
  const rgb = n === 3 && (shape[2] === 3 || shape[2] === 4);
  const ks = rgb ? [m.rows, m.cols, 1] : [...Array(n - 2).fill(1), m.rows, m.cols];
  return { shape: ks, values: m.values };
}

const kernelCheck = (p, input) =>
  input.shape.length === 1 && p.weights.rows !== 1
    ? `invalid weights: a 1-D input needs a kernel of one row (got ${p.weights.rows})`
    : null;

const linearKernel = (flip) => ({
  title: flip ? 'convolve' : 'correlate',
  reference: `scipy.ndimage.${flip ? 'convolve' : 'correlate'}`,
  help: flip
    ? 'True convolution (weights flipped; even extents centred as scipy). A 2-D kernel is applied per slice of a stack and per channel of an RGB image.'
    : 'Correlation (weights not flipped). A 2-D kernel is applied per slice of a stack and per channel of an RGB image.',
  params: [
    {
      name: 'weights',
      type: 'matrix',
      default: '1, 2, 1; 0, 0, 0; -1, -2, -1',
      maxSize: 63,
      help: "kernel rows separated by ';', values by ','",
    },
    mode,
    cval,
  ],
  check: kernelCheck,
  python: (p, input) => {
    const k = kernelFor(p.weights, input.shape);
    const rows = [];
    for (let r = 0; r < p.weights.rows; r++) rows.push(`[${p.weights.values.slice(r * p.weights.cols, (r + 1) * p.weights.cols).join(', ')}]`);
    return `ndimage.${flip ? 'convolve' : 'correlate'}(x, np.array([${rows.join(', ')}], dtype=float).reshape(${py(k.shape)}${k.shape.length === 1 ? ',' : ''}), mode=${py(p.mode)}, cval=${py(p.cval)})`;
  },
  gpu: flip ? 'convolve' : 'correlate',
  cpu: flip ? 'convolve' : 'correlate',
  args: (p, input) => {
    const k = kernelFor(p.weights, input.shape);
    return [Float64Array.from(k.values), Uint32Array.from(k.shape), p.mode, p.cval];
  },
  result: 'image',
  exact: false,
});

export const OPS = {
  gaussian_filter: {
    title: 'gaussian_filter',
    reference: 'scipy.ndimage.gaussian_filter',
    help: 'Gaussian smoothing, one pass per axis, radius int(truncate·sigma + 0.5). For an RGB image give 0 on the channel axis (2, 2, 0) as in scipy.',
    params: [
      {
        name: 'sigma',
        type: 'floats',
        default: '2',
        min: 0,
        perAxis: true,
        help: 'standard deviation: one value, or one per axis (slowest first)',
      },
      mode,
      cval,
      { name: 'truncate', type: 'float', default: 4.0, min: 0, minExclusive: true, help: 'kernel radius in sigmas' },
    ],
    python: (p) => `ndimage.gaussian_filter(x, sigma=${py(p.sigma)}, mode=${py(p.mode)}, cval=${py(p.cval)}, truncate=${py(p.truncate)})`,
    gpu: 'gaussian_filter',
    cpu: 'gaussian_filter',
    args: (p) => [Float64Array.from(p.sigma), p.mode, p.cval, p.truncate],
    result: 'image',
    exact: false,
  },
  convolve: linearKernel(true),
  correlate: linearKernel(false),
  threshold: {
    title: 'threshold (image > value)',
    reference: 'numpy: image > value',
    help: 'Boolean mask of the pixels strictly above value, compared exactly in the input dtype; NaN is never above.',
    params: [{ name: 'value', type: 'float', default: 100, help: 'pixels strictly greater than this are foreground' }],
    python: (p) => `x > ${py(p.value)}`,
    gpu: 'threshold',
    cpu: 'threshold',
    args: (p) => [p.value],
    result: 'mask',
    exact: true,
  },
  median_filter: {
    title: 'median_filter',
    reference: 'scipy.ndimage.median_filter',
    help: 'Element n//2 of the sorted window (exact: the output is one of the inputs). Stacks: size 1,k,k filters slice by slice. NaN neighbours count as -inf (Mantid Imaging).',
    params: [
      { name: 'size', type: 'ints', default: '3', min: 1, max: 1025, perAxis: true, help: 'window extent: one value, or one per axis (slowest first)' },
      mode,
      cval,
    ],
    python: (p) => `ndimage.median_filter(x, size=${py(p.size)}, mode=${py(p.mode)}, cval=${py(p.cval)})`,
    gpu: 'median_filter',
    cpu: 'median_filter',
    args: (p) => [Uint32Array.from(p.size), p.mode, p.cval],
    result: 'image',
    exact: true,
  },
  remove_outliers: {
    title: 'remove_outliers',
    reference: 'Mantid Imaging remove outliers',
    help: 'Replaces an element by the median of its size×size slice window (mode reflect) where it is brighter (bright), darker (dark) or either (both) by more than diff; tomopy: bright with >=.',
    params: [
      { name: 'diff', type: 'float', default: 20, min: 0, minExclusive: true, help: 'difference from the local median that makes an outlier' },
      { name: 'size', type: 'int', default: 3, min: 1, max: 1025, help: 'median window extent in each slice' },
      { name: 'mode', type: 'choice', choices: ['bright', 'dark', 'both', 'tomopy'], default: 'bright' },
    ],
    python: (p) => {
      const size = `(1, ${p.size}, ${p.size}) if x.ndim == 3 else ${p.size}`;
      const med = `ndimage.median_filter(x, size=${size}, mode='reflect')`;
      const test = { bright: `x - m > ${py(p.diff)}`, dark: `m - x > ${py(p.diff)}`, both: `abs(x - m) > ${py(p.diff)}`, tomopy: `x - m >= ${py(p.diff)}` }[p.mode];
      return `(lambda m: np.where(${test}, m, x))(${med})`;
    },
    gpu: 'remove_outliers',
    cpu: 'remove_outliers',
    args: (p) => [p.diff, p.size, p.mode],
    result: 'image',
    exact: true,
  },
  find_spots: {
    title: 'find_spots (DIALS)',
    reference: "dials.find_spots (DIALS' dispersion thresholds)",
    help: "Strong pixels by DIALS' dispersion test (exact: DIALS' double-precision decision), 4-connected spots with their count-weighted centroids. Negative counts (gaps, bad pixels) are masked.",
    params: [
      { name: 'algorithm', type: 'choice', choices: ['dispersion_extended', 'dispersion'], default: 'dispersion_extended' },
      { name: 'kernel_size', type: 'ints', default: '3, 3', min: 1, max: 127, help: 'half-widths of the local window, rows, cols (3, 3 = 7×7)' },
      { name: 'sigma_background', type: 'float', default: 6, min: 0 },
      { name: 'sigma_strong', type: 'float', default: 3, min: 0 },
      { name: 'min_local', type: 'int', default: 2, min: 0, help: 'fewest valid pixels in the window (0: all of it)' },
      { name: 'global_threshold', type: 'float', default: 0, min: 0 },
      { name: 'gain', type: 'float', default: '', optional: true, min: 0, minExclusive: true, help: 'detector gain (empty: none, as DIALS without gain)' },
      { name: 'min_spot_size', type: 'int', default: 3, min: 1 },
      { name: 'max_spot_size', type: 'int', default: 1000, min: 1 },
    ],
    check: (p, input) => {
      if (input.shape.length !== 2) return `find_spots takes one 2-D frame; this image is ${input.shape.join('×')}`;
      if (p.kernel_size.length > 2) return `invalid kernel_size: ${p.kernel_size.join(', ')} (give 1 or 2 half-widths)`;
      if (p.min_spot_size > p.max_spot_size) return `invalid min_spot_size: ${p.min_spot_size} (above max_spot_size ${p.max_spot_size})`;
      return null;
    },
    python: (p) =>
      `# dials.find_spots imported.expt spotfinder.threshold.algorithm=${p.algorithm} ` +
      `kernel_size=${p.kernel_size.join(',')} sigma_background=${p.sigma_background} sigma_strong=${p.sigma_strong} ` +
      `min_local=${p.min_local} global_threshold=${p.global_threshold}${p.gain === null ? '' : ` gain=${p.gain}`} ` +
      `min_spot_size=${p.min_spot_size} max_spot_size=${p.max_spot_size}`,
    gpu: 'find_spots',
    cpu: 'find_spots',
    args: (p) => [
      p.algorithm,
      Uint32Array.from(p.kernel_size),
      p.sigma_background,
      p.sigma_strong,
      p.min_local,
      p.global_threshold,
      p.gain ?? undefined,
      p.min_spot_size,
      p.max_spot_size,
    ],
    result: 'table', // {data: strong-pixel mask, shape, count, table: {columns, rows}}
    exact: true,
    markers: (r) => r.table.rows.map((s) => ({ y: s.y, x: s.x, r: 4, label: String(s.id) })),
  },
};

/** The default parameters of an operation as form text. */
export function defaults(id) {
  const out = {};
  for (const s of OPS[id].params) out[s.name] = String(s.default ?? '');
  return out;
}

const num = (t) => (t.trim() === '' ? NaN : Number(t.trim()));

function checkNumber(spec, v, raw) {
  const bad = (why) => `invalid ${spec.name}: ${raw} (${why})`;
  if (!Number.isFinite(v)) return bad('not a finite number');
  if (spec.type === 'int' || spec.type === 'ints') {
    if (!Number.isInteger(v)) return bad('must be an integer');
  }
  if (spec.min !== undefined) {
    if (spec.minExclusive ? v <= spec.min : v < spec.min) {
      return bad(`must be ${spec.minExclusive ? '>' : '≥'} ${spec.min}`);
    }
  }
  if (spec.max !== undefined && v > spec.max) return bad(`must be ≤ ${spec.max}`);
  return null;
}

function parseMatrix(spec, raw) {
  const rows = raw
    .split(/[;\n]/)
    .map((r) => r.trim())
    .filter((r) => r !== '')
    .map((r) => r.split(/[\s,]+/).filter((t) => t !== '').map(Number));
  const bad = (why) => ({ error: `invalid ${spec.name}: ${raw.trim() || '(empty)'} (${why})` });
  if (rows.length === 0) return bad('give at least one value');
  const cols = rows[0].length;
  if (rows.some((r) => r.length !== cols)) return bad('every row needs the same number of values');
  if (rows.flat().some((v) => !Number.isFinite(v))) return bad('every value must be a finite number');
  const max = spec.maxSize ?? 63;
  if (rows.length > max || cols > max) return bad(`at most ${max} rows and columns`);
  if (rows.flat().every((v) => v === 0)) return bad('all weights are zero');
  return { value: { rows: rows.length, cols, values: rows.flat() } };
}

/** Parses one parameter from its form text (or a JS value). Returns
 * {value} or {error: 'invalid NAME: RAW (why)'}. `input` is {shape} of the
 * array the step will run on (for per-axis checks). */
export function parseParam(spec, raw, input) {
  if (raw === undefined || raw === null) raw = spec.default;
  if (Array.isArray(raw)) raw = raw.join(spec.type === 'matrix' ? '; ' : ', ');
  if (typeof raw === 'boolean' && spec.type === 'bool') return { value: raw };
  raw = String(raw);
  switch (spec.type) {
    case 'float':
    case 'int': {
      if (spec.optional && raw.trim() === '') return { value: null };
      const v = num(raw);
      const error = checkNumber(spec, v, raw);
      return error ? { error } : { value: v };
    }
    case 'floats':
    case 'ints': {
      const parts = raw.split(/[,\s]+/).filter((t) => t !== '');
      if (parts.length === 0) return { error: `invalid ${spec.name}: (empty) (give a number)` };
      const values = parts.map(Number);
      for (let i = 0; i < values.length; i++) {
        const error = checkNumber(spec, values[i], parts[i]);
        if (error) return { error };
      }
      if (spec.perAxis && input && values.length !== 1 && values.length !== input.shape.length) {
        return {
          error: `invalid ${spec.name}: ${raw} (give 1 value or ${input.shape.length}, one per axis of the ${input.shape.join('×')} input)`,
        };
      }
      return { value: values };
    }
    case 'choice':
      return spec.choices.includes(raw)
        ? { value: raw }
        : { error: `invalid ${spec.name}: ${raw} (choose one of ${spec.choices.join(', ')})` };
    case 'bool':
      return { value: raw === 'true' || raw === 'on' || raw === '1' };
    case 'matrix':
      return parseMatrix(spec, raw);
    default:
      return { error: `invalid ${spec.name}: unknown parameter type ${spec.type}` };
  }
}

/** Parses and checks every parameter of a step: {params} or {error}. */
export function parseStep(id, raw, input) {
  const op = OPS[id];
  if (!op) return { error: `unknown operation '${id}' (one of ${Object.keys(OPS).join(', ')})` };
  const params = {};
  for (const spec of op.params) {
    const r = parseParam(spec, raw?.[spec.name], input);
    if (r.error) return { error: r.error };
    params[spec.name] = r.value;
  }
  const error = op.check?.(params, input) ?? null;
  return error ? { error } : { params };
}

// Templates for the operations of the coming issues, for whoever adds their
// bindings: parameter names and defaults are the references' (see
// shared/docs/references.md); the binding names and argument orders are
// placeholders to match to the real `Engine` methods and CPU twins.
//
//   sigma_clip: {   // the kept values as a mask
//     title: 'sigma_clip', reference: 'astropy.stats.sigma_clip',
//     params: [
//       { name: 'sigma', type: 'float', default: 3, min: 0, minExclusive: true },
//       { name: 'sigma_lower', type: 'float', default: '', optional: true, min: 0 },
//       { name: 'sigma_upper', type: 'float', default: '', optional: true, min: 0 },
//       { name: 'maxiters', type: 'int', default: 5, min: 1, optional: true },
//     ],
//     gpu: 'sigma_clip', cpu: 'sigma_clip',
//     args: (p) => [p.sigma, p.sigma_lower ?? p.sigma, p.sigma_upper ?? p.sigma, p.maxiters ?? 0],
//     result: 'mask', exact: true,
//   },
//   label: {
//     title: 'label', reference: 'scipy.ndimage.label',
//     params: [{ name: 'connectivity', type: 'choice', choices: ['1', 'full'], default: '1',
//                help: '1: the cross (4 / 6 neighbours, scipy default); full: 8 / 26' }],
//     gpu: 'label', cpu: 'label', args: (p) => [p.connectivity === 'full'],
//     python: (p) => `ndimage.label(x${p.connectivity === 'full' ? ', structure=np.ones((3,) * x.ndim)' : ''})[0]`,
//     result: 'labels', exact: true,        // {data: Int32Array, shape, count, ms}
//   },
//   regionprops: {  // after a labels step: input = the labels, context.image = the intensities
//     title: 'regionprops', reference: 'skimage.measure.regionprops',
//     params: [],
//     gpu: 'regionprops', cpu: 'regionprops', args: (p, input, context) => [context.image.data],
//     result: 'table', exact: false,        // {table: {columns: [{key, label}], rows: [{label, area, centroid_y, ...}]}}
//     markers: (r) => r.table.rows.map((row) => ({ y: row.centroid_y + 0.5, x: row.centroid_x + 0.5, r: Math.sqrt(row.area / Math.PI) })),
//   },
//   slic: { ..., result: 'labels', overlay: 'boundaries' },
//   find_spots: { ..., result: 'table', markers: (r) => r.table.rows.map((s) => ({ y: s.y, x: s.x, r: 4 })) },

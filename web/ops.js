// The operation registry: everything the page knows about an operation is
// one entry of OPS. The form, its validation, the URL hash, the chain, the
// workshop's CPU-vs-GPU comparison and the test hooks are all generated from
// these entries, so adding an operation of the core is one entry here (plus
// its two wasm functions in crates/web/src/bindings.rs).
//
// Parameters, defaults and limits are not written here: they come from the
// core's operation catalogue, exported by the wasm module (`catalogue()`),
// and an entry only adds how the page presents them (`ui`, `omit`). A
// browser test (web/tests/catalogue.test.mjs) fails if the two disagree.
//
// An entry:
//   id         key in OPS, in the URL hash and in `gpu`/`cpu` below; the
//              catalogue's operation name
//   title      what the operation menu shows (the reference function's name)
//   reference  the function users know, with its library ('scipy.ndimage.gaussian_filter')
//   help       one sentence shown under the form
//   ui         per parameter, what the page adds to or changes in the
//              catalogue's entry: `example` (the form's starting value of a
//              required parameter), `help`, `maxSize`, or a page-only form
//              (SLIC's 'auto' choices, turned into the catalogue's values by
//              `options`); `channel`: on a colour image (h, w, 3|4) the
//              default of a per-axis parameter gets this value on the channel
//              axis (sigma 2 → 2, 2, 0), so it works on the spatial axes only
//   omit       catalogue parameters the page does not offer (their defaults apply)
//   params     built from the catalogue: [{name, type, default, ...}] in the
//              reference's order, with its names and defaults. Types and their checks:
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
//              Both are called as f(data: Float32Array, shape: Uint32Array, options)
//              and return {data, shape, ms, kernelMs?} (+ `count` for labels,
//              `table` for tables: see below)
//   options(p, input, context)  optional: the options object (the catalogue's
//              parameter names) from the parsed params, where the page's form
//              differs from the catalogue's values; otherwise the params as
//              parsed. `context.image` is the chain's latest image ({data:
//              Float32Array, shape}), e.g. the intensities for regionprops after label
//   result     what the output is, which decides how it is shown and chained:
//                image   same-shape array: shown with the colormap, feeds the next step
//                mask    0/1 Uint8Array: shown as an overlay on the step's input,
//                        feeds the next step as 0/1
//                labels  integer labels (0 = background): random-colour overlay
//                        (or boundaries with `overlay: 'boundaries'`, for SLIC),
//                        feeds the next step
//                table   `{table: {columns: [{key, label}], rows: [{...}]}}`: shown in
//                        the results table (sortable, CSV); `markers(result)` gives
//                        [{y, x, r?, label?}] drawn on the step's input; `overlay`
//                        ('mask' | 'labels') also draws the result's `data` there;
//                        the input passes through to the next step unchanged
//   python(p, input)  the reference call as Python on the array `x` (shown in
//              the page so a result can be checked in Jupyter), e.g.
//              "ndimage.gaussian_filter(x, sigma=2, mode='reflect', cval=0, truncate=4)";
//              table operations give `pythonTable(p, input, fileName)` instead:
//              statements that leave `x` alone (the input passes through)
//   imports    optional: the Python imports the code above needs
//   exact      true when GPU and CPU must agree exactly (integer outputs);
//              otherwise within RTOL of the largest magnitude (f32 vs f64 sums);
//              for tables, integer columns always exactly and float columns
//              within RTOL of the column's largest magnitude
//   oneChannel optional: a colour image (h, w, 3|4) is converted to luminance
//              0.2125 R + 0.7154 G + 0.0721 B first (skimage's rgb2gray weights,
//              as the command line does), alpha dropped
//   output(r)  optional: turns the wasm function's result into the shape above
//              (e.g. statistics into a one-row table)
//
// Parameters reach the functions parsed: floats/ints as arrays, matrix as
// {values, rows, cols}, optional empties as null.

// The catalogue, from the same wasm module the page computes with (loaded
// once: wasm.js's `init` finds it ready). Without it (no build) there are no
// parameters, and the app reports the missing module when it starts.
let catalogueOps = [];
try {
  const wasm = await import('./pkg/gpuscope_web.js');
  await wasm.default({ module_or_path: new URL('./pkg/gpuscope_web_bg.wasm', import.meta.url) });
  catalogueOps = wasm.catalogue();
} catch {
  catalogueOps = [];
}

/** The core's operation catalogue: [{name, reference, params: [{name, type,
 * default, required, nullable, min, min_exclusive, max, choices, per_axis, help}], ...}]. */
export const CATALOGUE = catalogueOps;

/** Catalogue operations the page does not offer on their own. */
export const NOT_ON_PAGE = [
  'regionprops', // measured by `sources`
  'normalize', // three inputs (projections, flats, darks): command line and Python
];

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
  ui: {
    weights: { type: 'matrix', example: '1, 2, 1; 0, 0, 0; -1, -2, -1', maxSize: 63, help: "kernel rows separated by ';', values by ','" },
  },
  check: kernelCheck,
  python: (p, input) => {
    const k = kernelFor(p.weights, input.shape);
    const rows = [];
    for (let r = 0; r < p.weights.rows; r++) rows.push(`[${p.weights.values.slice(r * p.weights.cols, (r + 1) * p.weights.cols).join(', ')}]`);
    return `ndimage.${flip ? 'convolve' : 'correlate'}(x, np.array([${rows.join(', ')}], dtype=float).reshape(${py(k.shape)}${k.shape.length === 1 ? ',' : ''}), mode=${py(p.mode)}, cval=${py(p.cval)})`;
  },
  gpu: flip ? 'convolve' : 'correlate',
  cpu: flip ? 'convolve' : 'correlate',
  options: (p, input) => ({ ...p, weights: kernelFor(p.weights, input.shape) }),
  result: 'image',
  exact: false,
});

/** SLIC's spacing: empty (None) or all ones is isotropic. */
const isotropic = (spacing) => spacing === null || spacing.every((v) => v === 1);

/** SLIC's channel axis for an input: 'auto' = -1 for an RGB(A) image (h, w,
 * 3|4), grayscale (undefined = None) otherwise. */
function slicAxis(p, input) {
  if (p.channel_axis === 'auto') {
    const s = input.shape;
    return s.length === 3 && (s[2] === 3 || s[2] === 4) ? -1 : undefined;
  }
  return p.channel_axis === 'none' ? undefined : Number(p.channel_axis);
}

// The core's median selects from at most 2^16 elements per window
// (crates/core/src/filters/median: FOOTPRINT_MAX); the catalogue gives the
// per-axis limit only, so the product is checked here, before a run.
const WINDOW_MAX = 65536;
function windowCheck(extents, raw) {
  const n = extents.reduce((a, b) => a * b, 1);
  return n > WINDOW_MAX
    ? `invalid size: ${raw.join(', ')} (a ${extents.join('×')} window has ${n} elements; the median selects from at most ${WINDOW_MAX}: use a smaller size)`
    : null;
}

/** Python lines of the clipped statistics of `v` (astropy, or the GPU
 * workshop's loop), defining mean, median, std. */
function clipLines(v, p) {
  if (!p.workshop) {
    return [
      `mean, median, std = stats.sigma_clipped_stats(${v}, sigma=${py(p.sigma)}${p.sigma_lower === undefined ? '' : `, sigma_lower=${py(p.sigma_lower)}, sigma_upper=${py(p.sigma_upper)}`}, maxiters=${py(p.maxiters)}, cenfunc=${py(p.cenfunc)}, stdfunc='std')`,
    ];
  }
  // The workshop's variant: strict comparisons until nothing changes.
  return [
    `d = ${v}[np.isfinite(${v})]`,
    'while True:',
    '    m, s = np.median(d), np.std(d)',
    `    kept = d[(d > m - ${py(p.sigma)} * s) & (d < m + ${py(p.sigma)} * s)]`,
    '    if len(kept) == len(d):',
    '        break',
    '    d = kept',
    'mean, median, std = np.mean(d), np.median(d), np.std(d)',
  ];
}

/** The luminance line of a colour image, as the page measures it. */
function grayLines(input) {
  const s = input.shape;
  return s.length === 3 && (s[2] === 3 || s[2] === 4)
    ? ['g = x[..., :3] @ np.array([0.2125, 0.7154, 0.0721])  # luminance, skimage’s rgb2gray weights']
    : ['g = x'];
}

export const OPS = {
  gaussian_filter: {
    title: 'gaussian_filter',
    reference: 'scipy.ndimage.gaussian_filter',
    help: 'Gaussian smoothing, one pass per axis, radius int(truncate·sigma + 0.5). On a colour image the default leaves the channel axis alone (sigma 2, 2, 0); a single 2 blurs across the channels too, as scipy does.',
    ui: { sigma: { example: '2', channel: 0 } },
    python: (p) => `ndimage.gaussian_filter(x, sigma=${py(p.sigma)}, mode=${py(p.mode)}, cval=${py(p.cval)}, truncate=${py(p.truncate)})`,
    gpu: 'gaussian_filter',
    cpu: 'gaussian_filter',
    result: 'image',
    exact: false,
  },
  convolve: linearKernel(true),
  correlate: linearKernel(false),
  threshold: {
    title: 'threshold (image > value)',
    reference: 'numpy: image > value',
    help: 'Boolean mask of the pixels strictly above value, compared exactly in the input dtype; NaN is never above.',
    ui: { value: { example: '100', help: 'pixels strictly greater than this are foreground' } },
    python: (p) => `x > ${py(p.value)}`,
    gpu: 'threshold',
    cpu: 'threshold',
    result: 'mask',
    exact: true,
  },
  median_filter: {
    title: 'median_filter',
    reference: 'scipy.ndimage.median_filter',
    help: 'Element n//2 of the sorted window (exact: the output is one of the inputs). Stacks: size 1,k,k filters slice by slice. NaN neighbours count as -inf (Mantid Imaging).',
    ui: { size: { example: '3', channel: 1, help: 'window extent: one value, or one per axis (slowest first); on a colour image the default is 1 on the channel axis' } },
    omit: ['footprint'],
    check: (p, input) => windowCheck(p.size.length === 1 ? Array(input.shape.length).fill(p.size[0]) : p.size, p.size),
    python: (p) => `ndimage.median_filter(x, size=${py(p.size)}, mode=${py(p.mode)}, cval=${py(p.cval)})`,
    gpu: 'median_filter',
    cpu: 'median_filter',
    result: 'image',
    exact: true,
  },
  remove_outliers: {
    title: 'remove_outliers',
    reference: 'Mantid Imaging remove outliers',
    help: 'Replaces an element by the median of its size×size slice window (mode reflect) where it is brighter (bright), darker (dark) or either (both) by more than diff; tomopy: bright with >=.',
    ui: { diff: { example: '20' }, mode: { help: undefined } },
    check: (p, input) => windowCheck(input.shape.length === 1 ? [p.size] : [p.size, p.size], [p.size]),
    python: (p) => {
      const size = `(1, ${p.size}, ${p.size}) if x.ndim == 3 else ${p.size}`;
      const med = `ndimage.median_filter(x, size=${size}, mode='reflect')`;
      const test = { bright: `x - m > ${py(p.diff)}`, dark: `m - x > ${py(p.diff)}`, both: `abs(x - m) > ${py(p.diff)}`, tomopy: `x - m >= ${py(p.diff)}` }[p.mode];
      return `(lambda m: np.where(${test}, m, x))(${med})`;
    },
    gpu: 'remove_outliers',
    cpu: 'remove_outliers',
    result: 'image',
    exact: true,
  },
  sigma_clipped_stats: {
    title: 'sigma_clipped_stats',
    reference: 'astropy.stats.sigma_clipped_stats',
    help: 'Mean, median and standard deviation (ddof 0) of the values kept by iterative kappa-sigma clipping (exact median on the GPU); NaN and inf left out. workshop: the GPU workshop’s loop (strict comparisons, until nothing changes). A colour image is clipped as its luminance.',
    ui: {
      sigma_lower: { help: 'lower limit (empty: sigma)' },
      sigma_upper: { help: 'upper limit (empty: sigma)' },
      maxiters: { help: 'iterations at most (empty: until convergence, astropy’s None)' },
      cenfunc: { help: undefined },
      workshop: { help: 'the workshop’s variant: strict comparisons, until convergence' },
    },
    oneChannel: true,
    imports: ['from astropy import stats'],
    pythonTable: (p, input) => [...grayLines(input), ...clipLines('g', p), 'print(mean, median, std)'],
    gpu: 'sigma_clipped_stats',
    cpu: 'sigma_clipped_stats',
    output: (r) => ({
      ...r,
      table: {
        columns: [
          { key: 'mean', label: 'mean' },
          { key: 'median', label: 'median' },
          { key: 'std', label: 'std' },
          { key: 'n_kept', label: 'values kept', integer: true },
          { key: 'iterations', label: 'iterations', integer: true },
        ],
        rows: [{ mean: r.mean, median: r.median, std: r.std, n_kept: r.nKept, iterations: r.iterations }],
      },
    }),
    result: 'table',
    exact: false,
  },
  label: {
    title: 'label',
    reference: 'scipy.ndimage.label',
    help: 'Connected components of the elements different from background, numbered 1…n in raster order of their first element, as scipy numbers them. connectivity 1: faces only (4 / 6 neighbours, scipy’s default); 2: also edges (8 / 18); 3: also corners (26). Run it after threshold.',
    ui: {
      connectivity: { help: 'neighbours: 1 faces, 2 + edges, 3 + corners (at most the number of axes)' },
      background: { help: 'the background value (skimage.measure.label’s background)' },
    },
    check: (p, input) =>
      p.connectivity > input.shape.length
        ? `invalid connectivity: ${p.connectivity} (at most ${input.shape.length} for a ${input.shape.length}-D input)`
        : null,
    python: (p) => `ndimage.label(x != ${py(p.background)}, structure=ndimage.generate_binary_structure(x.ndim, ${p.connectivity}))[0]`,
    gpu: 'label',
    cpu: 'label',
    result: 'labels',
    exact: true,
  },
  sources: {
    title: 'sources (clip → threshold → label → measure)',
    reference: 'the GPU workshop’s source finding: astropy sigma_clipped_stats, scipy.ndimage.label, skimage.measure.regionprops',
    help: 'Background by kappa-sigma clipping, foreground above median + nsigma·std (workshop: above nsigma·std), connected regions labelled and measured, all on the GPU. Centroids are (row, column) of pixel indices as regionprops gives them. A colour image is measured on its luminance.',
    ui: {
      maxiters: { help: 'clipping iterations at most (empty: until convergence)' },
      cenfunc: { help: undefined },
      nsigma: { min: 0 }, // a negative level would take the background itself
      workshop: { help: 'the workshop’s variant: strict clipping until convergence, foreground above nsigma·std' },
      connectivity: { max: 2, help: '1: 4 neighbours (scipy’s default); 2: 8 neighbours' }, // the page measures 2-D images
    },
    omit: ['sigma_lower', 'sigma_upper'],
    oneChannel: true,
    imports: ['from astropy import stats', 'from skimage import measure'],
    pythonTable: (p, input) => [
      ...grayLines(input),
      ...clipLines('g', { ...p, sigma_lower: undefined }),
      `lab, n = ndimage.label(g > ${p.workshop ? '' : 'median + '}${py(p.nsigma)} * std, structure=ndimage.generate_binary_structure(g.ndim, ${p.connectivity}))`,
      'regions = measure.regionprops(lab, intensity_image=g)',
      "print(n, 'sources')",
    ],
    gpu: 'sources',
    cpu: 'sources',
    // A volume's regions have (z, y, x) centroids and 6-number boxes.
    output: (r) => {
      const volume = r.shape?.length === 3;
      const axes = volume ? ['z', 'y', 'x'] : ['y', 'x'];
      const pick = (v, name) => v[axes.indexOf(name)];
      return {
        ...r,
        table: {
          columns: [
            { key: 'label', label: 'label', integer: true },
            { key: 'area', label: volume ? 'volume (voxels)' : 'area', integer: true },
            ...axes.map((a) => ({ key: `centroid_${a}`, label: `centroid ${a}` })),
            ...axes.map((a) => ({ key: `weighted_${a}`, label: `weighted centroid ${a}` })),
            { key: 'bbox', label: `bbox (${[...axes.map((a) => `${a}0`), ...axes.map((a) => `${a}1`)].join(', ')})`, text: true },
            { key: 'sum', label: 'intensity sum' },
            { key: 'mean', label: 'intensity mean' },
            { key: 'max', label: 'intensity max' },
          ],
          rows: r.regions.map((g) => {
            const row = { label: g.label, area: g.area };
            for (const a of axes) row[`centroid_${a}`] = pick(g.centroid, a);
            for (const a of axes) row[`weighted_${a}`] = pick(g.centroidWeighted, a);
            Object.assign(row, { bbox: g.bbox.join(', '), sum: g.intensitySum, mean: g.intensityMean, max: g.intensityMax });
            return row;
          }),
        },
      };
    },
    // Pixel (i, j) is drawn over [i, i + 1) x [j, j + 1): its centre is i +
    // 0.5. A volume's markers are drawn on the slice of their centroid.
    markers: (r) =>
      r.table.rows.map((g) => ({
        y: g.centroid_y + 0.5,
        x: g.centroid_x + 0.5,
        ...(g.centroid_z === undefined ? {} : { z: g.centroid_z + 0.5 }),
        r: Math.max(3, Math.sqrt(g.area / Math.PI) + 2),
        label: String(g.label),
      })),
    overlay: 'labels', // the labels under the markers (grey images)
    result: 'table',
    exact: false,
  },
  slic: {
    title: 'slic',
    reference: 'skimage.segmentation.slic',
    help: 'SLIC superpixels: k-means in colour (Lab for RGB) and space from a regular grid of seeds, then small pieces merged into a neighbour; labels numbered as scikit-image. channel_axis auto: -1 for an RGB(A) image, none otherwise.',
    ui: {
      compactness: { help: 'colour against space: higher gives squarer superpixels (try 0.01…100 on a log scale)' },
      spacing: { help: 'voxel spacing: empty or 1 (isotropic), or one per spatial axis' },
      // 'auto' (the form's default) sends the catalogue's -1 for an RGB(A)
      // image and None otherwise: skimage's -1 would take a grey image's
      // columns for channels.
      channel_axis: { type: 'choice', choices: ['auto', 'none', '-1', '0'], default: 'auto', optional: false, help: 'the channel axis, none for grayscale (auto: -1 for RGB(A) images)' },
      convert2lab: { type: 'choice', choices: ['auto', 'true', 'false'], default: 'auto', optional: false, help: 'convert RGB to Lab (auto: for 3 channels)' },
      min_size_factor: { help: undefined },
      max_size_factor: { help: undefined },
      start_label: { type: 'choice', choices: ['1', '0'], min: undefined, max: undefined, help: undefined },
    },
    omit: ['mask'],
    python: (p, input) => {
      const axis = slicAxis(p, input);
      const list = (v) => (v.length === 1 ? py(v[0]) : `[${v.join(', ')}]`);
      const spacing = isotropic(p.spacing) ? 'None' : list(p.spacing);
      const lab = p.convert2lab === 'auto' ? 'None' : p.convert2lab === 'true' ? 'True' : 'False';
      return `skimage.segmentation.slic(x, n_segments=${p.n_segments}, compactness=${py(p.compactness)}, max_num_iter=${p.max_num_iter}, ` +
        `sigma=${list(p.sigma)}, spacing=${spacing}, convert2lab=${lab}, enforce_connectivity=${py(p.enforce_connectivity)}, ` +
        `min_size_factor=${py(p.min_size_factor)}, max_size_factor=${py(p.max_size_factor)}, slic_zero=${py(p.slic_zero)}, ` +
        `start_label=${p.start_label}, channel_axis=${axis === undefined ? 'None' : axis})`;
    },
    gpu: 'slic',
    cpu: 'slic',
    options: (p, input) => ({
      ...p,
      spacing: isotropic(p.spacing) ? null : p.spacing,
      channel_axis: slicAxis(p, input) ?? null,
      convert2lab: p.convert2lab === 'auto' ? null : p.convert2lab === 'true',
      start_label: Number(p.start_label),
    }),
    result: 'labels',
    overlay: 'boundaries',
    exact: true,
  },
  find_spots: {
    title: 'find_spots (DIALS)',
    reference: "dials.find_spots (DIALS' dispersion thresholds)",
    help: "Strong pixels by DIALS' dispersion test (exact: DIALS' double-precision decision), 4-connected spots with their count-weighted centroids. Negative counts (gaps, bad pixels) are masked.",
    ui: {
      algorithm: { help: undefined },
      kernel_size: { help: 'half-widths of the local window, rows, cols (3, 3 = 7×7)' },
      sigma_background: { help: undefined },
      sigma_strong: { help: undefined },
      global_threshold: { help: undefined },
      gain: { help: 'detector gain (empty: none, as DIALS without gain)' },
      min_spot_size: { help: undefined },
      max_spot_size: { help: undefined },
    },
    check: (p, input) => {
      if (input.shape.length !== 2) return `find_spots takes one 2-D frame; this image is ${input.shape.join('×')}`;
      if (p.kernel_size.length > 2) return `invalid kernel_size: ${p.kernel_size.join(', ')} (give 1 or 2 half-widths)`;
      if (p.min_spot_size > p.max_spot_size) return `invalid min_spot_size: ${p.min_spot_size} (above max_spot_size ${p.max_spot_size})`;
      return null;
    },
    // DIALS is a command line, not a Python call on an array: the reference
    // is given as the commands to run on the file.
    pythonTable: (p, input, name) => [
      '# find_spots is DIALS’ spot finder; its reference is the DIALS command line on the file:',
      `#   dials.import ${name ?? 'IMAGE.cbf'}`,
      `#   dials.find_spots imported.expt spotfinder.threshold.algorithm=${p.algorithm} ` +
        `kernel_size=${p.kernel_size.join(',')} sigma_background=${p.sigma_background} sigma_strong=${p.sigma_strong} ` +
        `min_local=${p.min_local} global_threshold=${p.global_threshold}${p.gain === null ? '' : ` gain=${p.gain}`} ` +
        `min_spot_size=${p.min_spot_size} max_spot_size=${p.max_spot_size}`,
    ],
    gpu: 'find_spots',
    cpu: 'find_spots',
    // One half-width stands for both axes.
    options: (p) => ({ ...p, kernel_size: p.kernel_size.length === 1 ? [p.kernel_size[0], p.kernel_size[0]] : p.kernel_size }),
    result: 'table', // {data: strong-pixel mask, shape, count, table: {columns, rows}}
    exact: true,
    markers: (r) => r.table.rows.map((s) => ({ y: s.y, x: s.x, r: 4, label: String(s.id) })),
    overlay: 'mask', // the strong pixels under the spot markers
  },
};

const FORM_TYPES = { float: 'float', int: 'int', bool: 'bool', choice: 'choice', floats: 'floats', ints: 'ints', array: 'matrix' };

/** A catalogue value as form text: lists comma-separated, None empty. */
function formText(v) {
  if (v === null || v === undefined) return '';
  return Array.isArray(v) ? v.join(', ') : String(v);
}

/** The form's parameter spec from a catalogue parameter plus the page's `ui`. */
function specOf(c, ui = {}) {
  const spec = {
    name: c.name,
    type: FORM_TYPES[c.type] ?? c.type,
    default: c.required ? ui.example ?? '' : formText(c.default),
    optional: c.nullable,
    help: c.help,
  };
  if (c.min !== null && c.min !== undefined) spec.min = c.min;
  if (c.min_exclusive) spec.minExclusive = true;
  if (c.max !== null && c.max !== undefined) spec.max = c.max;
  if (c.choices.length > 0) spec.choices = c.choices;
  if (c.per_axis) spec.perAxis = true;
  const { example: _, ...rest } = ui;
  const out = { ...spec, ...rest };
  for (const k of Object.keys(out)) if (out[k] === undefined) delete out[k];
  return out;
}

for (const [id, op] of Object.entries(OPS)) {
  const c = CATALOGUE.find((o) => o.name === id);
  op.params = (c?.params ?? []).filter((p) => !(op.omit ?? []).includes(p.name)).map((p) => specOf(p, op.ui?.[p.name]));
}

/** The options object of a step: what the wasm function of `id` gets. */
export function optionsOf(id, params, input, context = {}) {
  const op = OPS[id];
  return op.options ? op.options(params, input, { image: input, ...context }) : { ...params };
}

/** Luminance of a colour image (h, w, 3|4): skimage's rgb2gray weights on
 * the stored values, alpha dropped. Other inputs come back unchanged. */
export function oneChannel(input) {
  const { shape, data } = input;
  if (shape.length !== 3 || (shape[2] !== 3 && shape[2] !== 4)) return input;
  const [h, w, c] = shape;
  const out = new Float32Array(h * w);
  for (let i = 0; i < h * w; i++) {
    out[i] = 0.2125 * data[i * c] + 0.7154 * data[i * c + 1] + 0.0721 * data[i * c + 2];
  }
  return { data: out, shape: [h, w] };
}

/** Whether a shape is a colour image (h, w, 3|4). */
export const isColour = (shape) => shape?.length === 3 && (shape[2] === 3 || shape[2] === 4);

/** The default of parameter `spec` as form text, for an input of `shape`
 * (when known): per-axis parameters with a `channel` value leave a colour
 * image's channel axis alone. */
export function defaultOf(spec, shape) {
  const d = String(spec.default ?? '');
  if (spec.channel === undefined || !spec.perAxis || !isColour(shape) || d.includes(',') || d.trim() === '') return d;
  return `${d}, ${d}, ${spec.channel}`;
}

/** The default parameters of an operation as form text (for an input of
 * `shape`, when known). */
export function defaults(id, shape) {
  const out = {};
  for (const s of OPS[id].params) out[s.name] = defaultOf(s, shape);
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
      if (spec.optional && raw.trim() === '') return { value: null };
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

// The shape of a table operation's entry, for whoever adds one: parameter
// names and defaults come from the core's catalogue (docs/catalogue.md).
//
//   find_spots: { ..., result: 'table', markers: (r) => r.table.rows.map((s) => ({ y: s.y, x: s.x, r: 4 })) },

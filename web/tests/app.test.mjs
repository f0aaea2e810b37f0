// Browser test of the web app: real WebGPU (SwiftShader in headless
// Chromium) against the CPU reference, through the page's test hook and
// through its controls. Run with `cargo xtask test-web`, which builds,
// serves and sets GPUSCOPE_URL.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { SAMPLES, WEBGPU, fits, launch, npy, openApp, screenshot, waitIdle } from './browser.mjs';

// SwiftShader's float sums differ from the f64 CPU reference by rounding:
// GPU results must agree to 1e-4 of the largest magnitude (relative).
const RTOL = 1e-4;

// Every operation of the registry, on built-in samples. A new registry
// entry without cases here fails the first test below: add its cases.
const CASES = {
  gaussian_filter: [
    ['coins.png', { sigma: 2, mode: 'reflect', cval: 0, truncate: 4.0 }],
    ['coins.png', { sigma: [1, 3.5], mode: 'constant', cval: 50, truncate: 4.0 }],
    ['coins.png', { sigma: 0.7, mode: 'wrap', cval: 0, truncate: 2.5 }],
    ['coins.png', { sigma: 5, mode: 'mirror', cval: 0, truncate: 4.0 }],
    ['coins.png', { sigma: 3, mode: 'nearest', cval: 0, truncate: 4.0 }],
    ['astronaut.png', { sigma: [2, 2, 0] }],
    ['blobs3d.tif', { sigma: 1.5, mode: 'nearest' }],
  ],
  convolve: [
    ['coins.png', { weights: '1,2,1; 0,0,0; -1,-2,-1' }],
    ['astronaut.png', { weights: '0,1,0; 1,-4,1; 0,1,0', mode: 'constant', cval: 10 }],
  ],
  correlate: [
    ['coins.png', { weights: '0,1,2; -1,0,1; -2,-1,0; 1,1,1', mode: 'wrap' }],
    ['blobs3d.tif', { weights: '1,1,1,1,1', mode: 'mirror' }],
  ],
  threshold: [
    ['coins.png', { value: 100 }],
    ['coins.png', { value: 100.5 }],
    ['coins.png', { value: 0 }],
    ['coins.png', { value: 254 }],
    ['hubble_deep_field.jpg', { value: 40 }],
    ['DLS_I03_smargon_0001.cbf.gz', { value: 0 }],
  ],
  median_filter: [
    ['coins.png', { size: 3 }],
    ['coins.png', { size: [5, 4], mode: 'constant', cval: 7 }],
    ['blobs3d.tif', { size: [1, 3, 3], mode: 'wrap' }],
    ['astronaut.png', { size: [3, 3, 1], mode: 'mirror' }],
  ],
  slic: [
    // Small and few iterations: SwiftShader is slow. Labels exact.
    ['coins.png', { n_segments: 60, compactness: 0.1, max_num_iter: 4 }],
  ],
  remove_outliers: [
    ['coins.png', { diff: 20, size: 3, mode: 'both' }],
    ['hubble_deep_field.jpg', { diff: 30, size: 3, mode: 'bright' }],
    ['blobs3d.tif', { diff: 0.5, size: 3, mode: 'tomopy' }],
  ],
  // A third element: {before: [op, params]} runs that step first (on the
  // CPU) and feeds its output in; {crop} cases have a test of their own.
  sigma_clipped_stats: [
    ['hubble_deep_field.jpg', { sigma: 3, maxiters: '' }],
    ['coins.png', { sigma: 2, sigma_upper: 1.5, maxiters: 3, cenfunc: 'mean' }],
  ],
  label: [
    ['coins.png', { connectivity: 1 }, { before: ['threshold', { value: 100 }] }],
    ['coins.png', { connectivity: 2 }, { before: ['threshold', { value: 100 }] }],
    ['blobs3d.tif', { connectivity: 1 }, { before: ['threshold', { value: 2506 }] }],
    ['blobs3d.tif', { connectivity: 3 }, { before: ['threshold', { value: 1100 }] }],
  ],
  sources: [
    ['hubble_deep_field.jpg', {}],
    ['hubble_deep_field.jpg', { workshop: true, nsigma: 5, connectivity: 2 }],
  ],
  // A 200×230 crop of the diffraction frame (spots and a module gap), see
  // the find_spots test below; the full frame is too slow for SwiftShader.
  find_spots: [
    ['DLS_I03_smargon_0001.cbf.gz', {}, { crop: [1400, 850, 200, 230] }],
    ['DLS_I03_smargon_0001.cbf.gz', { algorithm: 'dispersion', kernel_size: '2, 4', gain: 1.5 }, { crop: [1400, 850, 200, 230] }],
  ],
};

/** What scipy.ndimage.label counts for the label cases (checked with scipy
 * 1.x on the same samples and thresholds), so that a wrong count on both
 * paths cannot pass. */
const LABEL_COUNTS = {
  'coins.png 1': 161,
  'coins.png 2': 100,
  'blobs3d.tif 1': 44,
  'blobs3d.tif 3': 16,
};

let browser;
let page;
const pageErrors = [];

// File choosers go to whoever waits for one. Playwright turns interception
// on without waiting for the browser, so it is turned on here, long before a
// test presses a key that opens one.
const choosers = [];

before(async () => {
  browser = await launch(WEBGPU);
  page = await openApp(browser.context, '', pageErrors);
  page.on('filechooser', (chooser) => choosers.shift()?.(chooser));
});

after(async () => {
  await browser?.close();
});

/** Runs `id` on both paths in the page and compares there (no big transfers). */
function compareInPage(id, params, prior) {
  return page.evaluate(
    async ([id, params, prior]) => {
      let image = window.gpuscope.state.image;
      if (prior) {
        const b = await window.gpuscope.runBoth(prior[0], prior[1], image);
        image = { data: Float32Array.from(b.cpu), shape: b.shape };
      }
      const r = await window.gpuscope.runBoth(id, params, image);
      if (r.cpuTable) {
        return { table: true, rows: r.cpuTable.rows, gpuRows: r.gpuTable?.rows, agreement: r.agreement, gpuMs: r.gpuMs, cpuMs: r.cpuMs };
      }
      const input = image.data;
      let maxDiff = 0;
      let maxAbs = 0;
      let moved = 0;
      let ones = 0;
      let mismatches = 0;
      for (let i = 0; i < r.cpu.length; i++) {
        const d = Math.abs(r.gpu[i] - r.cpu[i]);
        maxDiff = Number.isNaN(d) ? Infinity : Math.max(maxDiff, d);
        maxAbs = Math.max(maxAbs, Math.abs(r.cpu[i]));
        moved = Math.max(moved, Math.abs(r.cpu[i] - input[i]));
        ones += r.cpu[i];
        if (r.gpu[i] !== r.cpu[i]) mismatches++;
      }
      return {
        gpuType: r.gpu?.constructor.name,
        cpuType: r.cpu.constructor.name,
        gpuLength: r.gpu?.length,
        length: r.cpu.length,
        shape: r.shape,
        inputShape: window.gpuscope.image().shape,
        maxDiff,
        maxAbs,
        moved,
        ones,
        mismatches,
        gpuMs: r.gpuMs,
        cpuMs: r.cpuMs,
        count: r.count,
        gpuCount: r.gpuCount,
      };
    },
    [id, params, prior],
  );
}

async function loadSample(name) {
  const ok = await page.evaluate((n) => window.gpuscope.loadSample(n), name);
  assert.ok(ok, `sample ${name}: ${await page.evaluate(() => window.gpuscope.message)}`);
}

const state = (expr) => page.evaluate(expr);

describe('gpuscope web app', { timeout: 600_000 }, () => {
  it('starts with the sample image on a real WebGPU adapter', async () => {
    const s = await state(() => ({
      status: window.gpuscope.status,
      device: window.gpuscope.state.device,
      gpuError: window.gpuscope.state.gpuError,
      image: window.gpuscope.image(),
      message: window.gpuscope.message,
      outputs: window.gpuscope.state.outputs.map((o) => [o.op, o.where, o.kind]),
      ops: window.gpuscope.ops,
    }));
    assert.equal(s.gpuError, null, `WebGPU is required for this test: ${s.gpuError}`);
    assert.equal(s.status, 'ready', s.message);
    assert.match(s.device.backend, /WebGpu/i);
    assert.ok(s.device.maxBindingSize >= 128 * 2 ** 20, JSON.stringify(s.device));
    assert.deepEqual(s.image, { name: 'coins.png', shape: [303, 384], dtype: 'uint8' });
    const adapter = await state(async () => {
      const a = await navigator.gpu.requestAdapter();
      return a && { vendor: a.info.vendor, architecture: a.info.architecture, isGPUAdapter: a instanceof GPUAdapter };
    });
    assert.ok(adapter?.isGPUAdapter, 'navigator.gpu.requestAdapter() gave no adapter');
    console.log(`  adapter: ${JSON.stringify(adapter)}; device: ${JSON.stringify(s.device)}`);
    // The page ran the default chain (gaussian_filter) on WebGPU at start-up.
    assert.deepEqual(s.outputs, [['gaussian_filter', 'gpu', 'image']]);
    assert.match(await page.textContent('#run-info'), /gaussian_filter on WebGPU in [\d.]+ ms/);
    assert.equal(await page.isVisible('#banner'), false);
    // 1280×800: the page fits the window, the image and the Run button are in view.
    const fit = await state(() => ({
      scroll: [document.documentElement.scrollWidth, document.documentElement.scrollHeight],
      inner: [innerWidth, innerHeight],
      run: document.querySelector('#run').getBoundingClientRect().bottom,
      view: document.querySelector('#view').getBoundingClientRect().bottom,
    }));
    assert.deepEqual(fit.inner, [1280, 800]);
    assert.ok(fit.scroll[0] <= 1280 && fit.scroll[1] <= 800, JSON.stringify(fit));
    assert.ok(fit.run <= 800 && fit.view <= 800, JSON.stringify(fit));
    // Every operation of the registry has cases below.
    assert.deepEqual([...s.ops].sort(), Object.keys(CASES).sort(), 'registry operations without browser cases');
    // Every sample offered loads (provenance shown) and is listed in PROVENANCE.md.
    const provenance = fs.readFileSync(path.join(SAMPLES, 'PROVENANCE.md'), 'utf8');
    const offered = await state(() => [...document.querySelectorAll('#sample option')].map((o) => o.value).filter(Boolean));
    for (const f of offered) assert.ok(provenance.includes(f), `${f} is missing from PROVENANCE.md`);
    assert.ok(offered.length >= 6);
    assert.match(await page.textContent('#provenance'), /Brooklyn Museum/);
  });

  it('runs every operation of the registry on WebGPU with the CPU reference’s numbers', async () => {
    // GPUSCOPE_OPS=a,b runs only those operations' cases (while developing one).
    const only = process.env.GPUSCOPE_OPS?.split(',');
    for (const [id, cases] of Object.entries(CASES)) {
      if (only && !only.includes(id)) continue;
      for (const [sample, params, extra] of cases) {
        if (extra?.crop) continue; // cropped cases have their own test
        const prior = extra?.before;
        await loadSample(sample);
        const r = await compareInPage(id, params, prior);
        const what = `${id} on ${sample} ${JSON.stringify(params)}${prior ? ` after ${JSON.stringify(prior)}` : ''}`;
        if (r.table) {
          assert.ok(r.rows.length > 0, `${what}: an empty table`);
          assert.ok(r.agreement.ok, `${what}: GPU and CPU tables differ: ${JSON.stringify(r.agreement)}`);
          if (id === 'sigma_clipped_stats') {
            const [g, c] = [r.gpuRows[0], r.rows[0]];
            assert.equal(g.n_kept, c.n_kept, `${what}: values kept`);
            assert.equal(g.iterations, c.iterations, `${what}: iterations`);
            for (const k of ['mean', 'median', 'std']) {
              assert.ok(Math.abs(g[k] - c[k]) <= 1e-6 * Math.abs(c[k]), `${what}: ${k} GPU ${g[k]} CPU ${c[k]}`);
            }
            assert.ok(c.std > 0 && c.n_kept > 0, what);
          } else {
            assert.ok(r.rows.length > 5, `${what}: only ${r.rows.length} sources`);
          }
          console.log(`  ${what}: ${r.rows.length} rows, GPU ${r.gpuMs.toFixed(1)} ms, CPU ${r.cpuMs.toFixed(1)} ms`);
          continue;
        }
        assert.equal(r.gpuLength, r.length, what);
        // SLIC labels have the spatial shape (no channel axis).
        if (id !== 'slic') assert.deepEqual(r.shape, r.inputShape, what);
        assert.equal(r.length, r.shape.reduce((a, b) => a * b, 1), what);
        if (id === 'threshold') {
          assert.equal(r.gpuType, 'Uint8Array', what);
          assert.equal(r.mismatches, 0, `${what}: ${r.mismatches} pixels differ`);
          if (sample === 'coins.png' && params.value === 100) assert.ok(r.ones > 0 && r.ones < r.length, what);
        } else if (id === 'label') {
          assert.equal(r.gpuType, 'Int32Array', what);
          assert.equal(r.mismatches, 0, `${what}: ${r.mismatches} labels differ`);
          assert.equal(r.gpuCount, r.count, what);
          const expected = LABEL_COUNTS[`${sample} ${params.connectivity}`];
          if (expected !== undefined) assert.equal(r.count, expected, `${what}: scipy's count`);
          assert.ok(r.count > 0, what);
        } else if (id === 'slic') {
          assert.equal(r.gpuType, 'Int32Array', what);
          assert.equal(r.cpuType, 'Int32Array', what);
          assert.equal(r.mismatches, 0, `${what}: ${r.mismatches} labels differ`);
          assert.ok(r.maxAbs > 20, `${what}: only ${r.maxAbs} superpixels`);
        } else if (id === 'median_filter' || id === 'remove_outliers') {
          // Selections: one of the input values, identical on both paths.
          assert.equal(r.gpuType, 'Float32Array', what);
          assert.equal(r.cpuType, 'Float32Array', what);
          assert.equal(r.mismatches, 0, `${what}: ${r.mismatches} elements differ`);
          assert.ok(r.moved > 0, `${what}: the result equals the input`);
        } else {
          assert.equal(r.gpuType, 'Float32Array', what);
          assert.equal(r.cpuType, 'Float64Array', what);
          assert.ok(r.maxAbs > 0, `${what}: an all-zero result`);
          assert.ok(r.maxDiff <= RTOL * r.maxAbs, `${what}: max |GPU - CPU| = ${r.maxDiff} exceeds ${RTOL} x ${r.maxAbs}`);
          assert.ok(r.moved > 1, `${what}: the result equals the input`);
        }
        console.log(`  ${what}: max diff ${r.maxDiff.toExponential(2)}, GPU ${r.gpuMs.toFixed(1)} ms, CPU ${r.cpuMs.toFixed(1)} ms`);
      }
    }
  });

  it('finds the same spots on WebGPU as the CPU reference on a crop of a CBF frame', async () => {
    for (const [id, cases] of Object.entries(CASES)) {
      for (const [sample, params, extra] of cases) {
        if (!extra?.crop) continue;
        await loadSample(sample);
        const r = await page.evaluate(
          async ([id, params, [r0, c0, h, w]]) => {
            const full = window.gpuscope.state.image;
            const cols = full.shape[1];
            const data = new Float32Array(h * w);
            for (let r = 0; r < h; r++) data.set(full.data.subarray((r0 + r) * cols + c0, (r0 + r) * cols + c0 + w), r * w);
            const image = { ...full, data, shape: [h, w] };
            const gs = window.gpuscope;
            const both = await gs.runBoth(id, params, image);
            return { ...both, gpu: Array.from(both.gpu), cpu: Array.from(both.cpu) };
          },
          [id, params, extra.crop],
        );
        const what = `${id} on a crop of ${sample} ${JSON.stringify(params)}`;
        assert.equal(r.gpu.length, r.cpu.length, what);
        const ones = r.cpu.reduce((a, b) => a + b, 0);
        assert.ok(ones > 0, `${what}: no strong pixel`);
        assert.deepEqual(r.gpu, r.cpu, `${what}: strong pixels differ`);
        console.log(`  ${what}: ${ones} strong pixels, GPU ${r.gpuMs.toFixed(1)} ms, CPU ${r.cpuMs.toFixed(1)} ms`);
      }
    }
    // The spot table itself, through the page's chain, on both paths.
    const tables = await page.evaluate(async () => {
      const gs = window.gpuscope;
      const full = gs.state.image;
      const [r0, c0, h, w] = [1400, 850, 200, 230];
      const data = new Float32Array(h * w);
      for (let r = 0; r < h; r++) data.set(full.data.subarray((r0 + r) * full.shape[1] + c0, (r0 + r) * full.shape[1] + c0 + w), r * w);
      const out = {};
      for (const where of ['gpu', 'cpu']) {
        const res = await gs.runOp(where, 'find_spots', { data, shape: [h, w] }, {});
        out[where] = res.table.rows;
      }
      return out;
    });
    assert.ok(tables.cpu.length > 0, 'no spots in the crop');
    assert.deepEqual(tables.gpu, tables.cpu, 'the spot tables differ');
  });

  it('decodes the diffraction frame and the TIFF stacks of the samples', async () => {
    await loadSample('DLS_I03_smargon_0001.cbf.gz');
    const cbf = await state(() => ({ ...window.gpuscope.image(), stats: window.gpuscope.state.image.stats, header: window.gpuscope.state.image.header.length }));
    assert.deepEqual(cbf.shape, [2527, 2463]);
    assert.equal(cbf.dtype, 'int32');
    assert.equal(cbf.stats.min, -2, 'bad pixels (-2) are kept as values');
    assert.ok(cbf.header > 0);
    await loadSample('multipage.tif');
    assert.deepEqual((await state(() => window.gpuscope.image())).shape, [2, 15, 10]);
  });

  it('runs a chain from the form: gaussian_filter → threshold, the mask overlaid on the smoothed image', async () => {
    await page.selectOption('#sample', 'coins.png');
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'coins.png');
    await waitIdle(page);
    await page.fill('input[name=sigma][data-step="0"]', '2');
    await page.click('#add-step');
    assert.equal(await page.inputValue('select[name=op][data-step="1"]'), 'threshold');
    await page.fill('input[name=value][data-step="1"]', '110');
    await page.selectOption('#cmap', 'viridis');
    await page.click('#run');
    await page.waitForFunction(() => window.gpuscope.state.outputs.length === 2 && window.gpuscope.state.busy === 0);
    const r = await state(async () => {
      const [g, t] = window.gpuscope.state.outputs;
      // The mask must be exactly threshold(110) of step 1's output, on both paths.
      const check = await window.gpuscope.runBoth('threshold', { value: 110 }, { data: g.data, shape: g.shape });
      let gpuDiff = 0;
      let cpuDiff = 0;
      let ones = 0;
      for (let i = 0; i < t.data.length; i++) {
        gpuDiff += check.gpu[i] !== t.data[i];
        cpuDiff += check.cpu[i] !== t.data[i];
        ones += t.data[i];
      }
      return {
        kinds: [g.kind, t.kind],
        where: [g.where, t.where],
        gType: g.data.constructor.name,
        tType: t.data.constructor.name,
        gpuDiff,
        cpuDiff,
        ones,
        n: t.data.length,
        view: window.gpuscope.view(),
        hash: location.hash,
        summary: document.querySelector('#results-summary').textContent,
      };
    });
    assert.deepEqual(r.kinds, ['image', 'mask']);
    assert.deepEqual(r.where, ['gpu', 'gpu']);
    assert.equal(r.gType, 'Float32Array');
    assert.equal(r.tType, 'Uint8Array');
    assert.equal(r.gpuDiff, 0);
    assert.equal(r.cpuDiff, 0);
    assert.ok(r.ones > 1000 && r.ones < r.n - 1000, `${r.ones} pixels above 110`);
    assert.equal(r.view.layer, 1);
    assert.equal(r.view.overlay, 'mask');
    assert.equal(r.view.cmap, 'viridis');
    assert.match(r.summary, new RegExp(`threshold: ${r.ones} of ${r.n} pixels`));
    assert.match(r.hash, /1\.op=gaussian_filter.*2\.op=threshold.*2\.value=110.*cmap=viridis/);
    // The same chain in Python, to check the numbers in Jupyter.
    assert.equal(
      (await page.textContent('#python')).split('\n').slice(-3).join('\n'),
      [
        'x = np.asarray(image, dtype=np.float64)',
        "x = ndimage.gaussian_filter(x, sigma=2, mode='reflect', cval=0, truncate=4)  # step 1",
        'x = x > 110  # step 2',
      ].join('\n'),
    );
    // The value under the cursor reads the smoothed image and the mask.
    await page.locator('#view').scrollIntoViewIfNeeded();
    const box = await page.locator('#view').boundingBox();
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    assert.match(await page.textContent('#cursor'), /^x \d+, y \d+: [\d.]+, mask [01]$/);
    await page.fill('#opacity', '0.6');
    await page.dispatchEvent('#opacity', 'input');
    await screenshot(page.locator('#view'), 'coins-gaussian-threshold-overlay.png');
    // Dragging across the histogram sets manual limits.
    await page.locator('#histogram').scrollIntoViewIfNeeded();
    const hist = await page.locator('#histogram').boundingBox();
    await page.mouse.move(hist.x + hist.width * 0.25, hist.y + hist.height / 2);
    await page.mouse.down();
    await page.mouse.move(hist.x + hist.width * 0.75, hist.y + hist.height / 2, { steps: 4 });
    await page.mouse.up();
    const lim = await state(() => ({
      mode: document.querySelector('#limits').value,
      vmin: Number(document.querySelector('#vmin').value),
      vmax: Number(document.querySelector('#vmax').value),
      view: window.gpuscope.view(),
    }));
    assert.equal(lim.mode, 'manual');
    assert.ok(lim.vmin < lim.vmax, JSON.stringify(lim));
    assert.deepEqual([lim.view.lo, lim.view.hi], [lim.vmin, lim.vmax]);
    await page.waitForFunction(() => /limits=manual&v=/.test(location.hash));
    await page.selectOption('#limits', 'auto');
  });

  it('draws label overlays in random colours, label boundaries and markers', async () => {
    // Labels of the mask's 4-connected components, made here in JS so that
    // the viewer's drawing is checked on its own (the operations' overlays
    // are checked in 'shows real results over the image').
    const r = await state(() => {
      const mask = window.gpuscope.state.outputs[1].data;
      const [h, w] = window.gpuscope.state.outputs[1].shape;
      const labels = new Int32Array(h * w);
      const sums = [];
      let n = 0;
      for (let s = 0; s < h * w; s++) {
        if (!mask[s] || labels[s]) continue;
        n++;
        const stack = [s];
        labels[s] = n;
        let [sy, sx, c] = [0, 0, 0];
        while (stack.length) {
          const i = stack.pop();
          const y = Math.floor(i / w);
          const x = i % w;
          sy += y;
          sx += x;
          c++;
          for (const j of [x > 0 ? i - 1 : -1, x + 1 < w ? i + 1 : -1, y > 0 ? i - w : -1, y + 1 < h ? i + w : -1]) {
            if (j >= 0 && mask[j] && !labels[j]) {
              labels[j] = n;
              stack.push(j);
            }
          }
        }
        sums.push({ y: sy / c + 0.5, x: sx / c + 0.5, r: Math.sqrt(c / Math.PI), area: c });
      }
      const markers = sums.filter((m) => m.area >= 200);
      window.gpuscope.preview({ kind: 'labels', data: labels }, markers);
      const v = window.gpuscope.view();
      const m = markers[0];
      const p = window.gpuscope.probe(v.ox + m.x * v.zoom, v.oy + m.y * v.zoom);
      return { n, markers: markers.length, probe: p, label: labels[Math.floor(m.y) * w + Math.floor(m.x)] };
    });
    assert.ok(r.n > 10 && r.markers > 10, JSON.stringify(r));
    assert.equal(r.probe.kind, 'labels');
    assert.equal(r.probe.overlay, r.label);
    await screenshot(page.locator('#view'), 'coins-labels-markers-preview.png');
    await state(() => {
      const o = window.gpuscope.state.outputs[1];
      window.gpuscope.preview({ kind: 'boundaries', data: Int32Array.from(o.data, (v, i) => (v ? 1 + ((i % o.shape[1]) >> 5) : 0)) });
    });
    await screenshot(page.locator('#view'), 'coins-boundaries-preview.png');
    // Back to the run's own overlay.
    await page.selectOption('#layer', '1');
  });

  it('validates parameters before running and shows corrupt files as messages', async () => {
    const before = await state(() => window.gpuscope.state.lastRun);
    await page.fill('input[name=sigma][data-step="0"]', '-1');
    await page.click('#run');
    await page.waitForFunction(() => /sigma/.test(window.gpuscope.message));
    assert.match(await page.textContent('#message'), /invalid sigma: -1 \(must be ≥ 0\)/);
    assert.ok(await page.isVisible('#message'));
    // The offending input is marked and focused.
    assert.deepEqual(
      await state(() => [document.activeElement.name, document.activeElement.dataset.step, document.activeElement.getAttribute('aria-invalid')]),
      ['sigma', '0', 'true'],
    );
    await page.fill('input[name=sigma][data-step="0"]', '1, 2, 3');
    await page.click('#run');
    await page.waitForFunction(() => /one per axis/.test(window.gpuscope.message));
    await page.fill('input[name=sigma][data-step="0"]', '2');
    await page.fill('input[name=value][data-step="1"]', 'abc');
    await page.click('#run');
    await page.waitForFunction(() => /step 2 \(threshold\): invalid value: abc/.test(window.gpuscope.message));
    // Nothing ran.
    assert.deepEqual(await state(() => window.gpuscope.state.lastRun), before);
    await page.fill('input[name=value][data-step="1"]', '110');

    const coins = fs.readFileSync(path.join(SAMPLES, 'coins.png'));
    const broken = [
      ['broken.png', Buffer.from('this is not a PNG file'), /Cannot open broken\.png/],
      ['truncated.png', coins.subarray(0, 5000), /Cannot open truncated\.png/],
      ['notes.txt', Buffer.from('hello'), /Cannot open notes\.txt: .*extension/],
      ['empty.npy', Buffer.alloc(0), /Cannot open empty\.npy/],
      ['bad.cbf', Buffer.from('###CBF: VERSION 1.5\n garbage'), /Cannot open bad\.cbf/],
    ];
    for (const [name, buffer, re] of broken) {
      await page.setInputFiles('#file', { name, mimeType: 'application/octet-stream', buffer });
      await page.waitForFunction((n) => window.gpuscope.message.includes(`Cannot open ${n}`), name);
      assert.match(await page.textContent('#message'), re);
      // The previous image stays loaded.
      assert.equal((await state(() => window.gpuscope.image())).name, 'coins.png');
    }
    await page.click('#run');
    await page.waitForFunction(() => window.gpuscope.message === '' && window.gpuscope.state.busy === 0);
  });

  it('opens PNG, npy and FITS files from the picker and by drag-and-drop, with the CPU reference’s numbers', async () => {
    await page.setInputFiles('#file', path.join(SAMPLES, 'camera.png'));
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'camera.png');
    await waitIdle(page);
    assert.deepEqual(await state(() => window.gpuscope.image().shape), [512, 512]);
    const g = await compareInPage('gaussian_filter', { sigma: 1.5, mode: 'reflect', cval: 0, truncate: 4.0 });
    assert.ok(g.maxAbs > 0 && g.maxDiff <= RTOL * g.maxAbs, `gaussian on camera.png: ${g.maxDiff}`);
    const t = await compareInPage('threshold', { value: 128 });
    assert.equal(t.mismatches, 0);

    const ramp = Int16Array.from({ length: 6 * 7 }, (_, i) => i * 100 - 2000);
    await page.setInputFiles('#file', { name: 'ramp.npy', mimeType: 'application/octet-stream', buffer: npy('<i2', [6, 7], ramp) });
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'ramp.npy');
    await waitIdle(page);
    let img = await state(() => ({ ...window.gpuscope.image(), data: Array.from(window.gpuscope.state.image.data) }));
    assert.deepEqual([img.shape, img.dtype], [[6, 7], 'int16']);
    assert.deepEqual(img.data, Array.from(ramp));

    const values = Array.from({ length: 4 * 5 }, (_, i) => i / 4 - 1.5);
    await page.setInputFiles('#file', { name: 'field.fits', mimeType: 'application/fits', buffer: fits([4, 5], values) });
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'field.fits');
    await waitIdle(page);
    img = await state(() => ({ ...window.gpuscope.image(), data: Array.from(window.gpuscope.state.image.data) }));
    assert.deepEqual([img.shape, img.dtype], [[4, 5], 'float32']);
    assert.deepEqual(img.data, values);

    const cube = Float32Array.from({ length: 3 * 8 * 9 }, (_, i) => Math.sin(i));
    const dt = await page.evaluateHandle((b64) => {
      const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      const dt = new DataTransfer();
      dt.items.add(new File([bytes], 'dropped.npy'));
      return dt;
    }, npy('<f4', [3, 8, 9], cube).toString('base64'));
    await page.dispatchEvent('#drop', 'drop', { dataTransfer: dt });
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'dropped.npy');
    await waitIdle(page);
    img = await state(() => window.gpuscope.image());
    assert.deepEqual([img.shape, img.dtype], [[3, 8, 9], 'float32']);
    assert.equal(await state(() => window.gpuscope.message), '');
  });

  it('shows a TIFF stack slice by slice with the slider', async () => {
    await page.fill('input[name=value][data-step="1"]', '1500');
    await page.setInputFiles('#file', path.join(SAMPLES, 'blobs3d.tif'));
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'blobs3d.tif');
    await waitIdle(page);
    assert.deepEqual(await state(() => window.gpuscope.image()), { name: 'blobs3d.tif', shape: [64, 64, 64], dtype: 'uint16' });
    assert.ok(await page.isVisible('#slice'));
    assert.equal(await page.getAttribute('#slice', 'max'), '63');
    assert.equal((await state(() => window.gpuscope.view())).slice, 32);
    // Keyboard on the slider: End goes to the last slice.
    await page.focus('#slice');
    await page.keyboard.press('End');
    await page.waitForFunction(() => window.gpuscope.view().slice === 63);
    assert.match(await page.textContent('#slice-out'), /63 of 64/);
    await page.waitForFunction(() => /z=63/.test(location.hash));
    // The value under the cursor comes from slice 63 of the step shown.
    await page.selectOption('#layer', '-1');
    const probe = await state(() => {
      const p = window.gpuscope.probe(...(() => {
        const v = window.gpuscope.view();
        return [v.ox + 10.5 * v.zoom, v.oy + 20.5 * v.zoom];
      })());
      return { p, expected: window.gpuscope.state.image.data[63 * 64 * 64 + 20 * 64 + 10] };
    });
    assert.deepEqual([probe.p.x, probe.p.y, probe.p.z], [10, 20, 63]);
    assert.equal(probe.p.value, probe.expected);
    await page.focus('#slice');
    for (let i = 0; i < 31; i++) await page.keyboard.press('ArrowLeft');
    await page.waitForFunction(() => window.gpuscope.view().slice === 32);
    await page.selectOption('#layer', '1');
    await page.selectOption('#cmap', 'inferno');
    await screenshot(page.locator('.viewer-panel'), 'blobs3d-slice32-threshold-overlay.png');
    await page.fill('input[name=value][data-step="1"]', '110');
  });

  it('runs from the keyboard alone; Escape cancels a long CPU run, Cancel a long GPU run', async () => {
    // Loading from the keyboard: Enter on the drop zone opens the file chooser.
    await page.focus('#drop');
    const chooserEvent = new Promise((resolve) => choosers.push(resolve));
    await page.keyboard.press('Enter');
    const chooser = await chooserEvent;
    await chooser.setFiles(path.join(SAMPLES, 'coins.png'));
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'coins.png' && window.gpuscope.state.busy === 0);
    const before = await state(() => window.gpuscope.state.lastRun);
    await page.evaluate(() => document.activeElement?.blur());
    let found = false;
    for (let i = 0; i < 40 && !found; i++) {
      await page.keyboard.press('Tab');
      found = await state(() => document.activeElement?.name === 'sigma');
    }
    assert.ok(found, 'Tab never reached the sigma input');
    await page.keyboard.press('Control+A');
    await page.keyboard.type('1.5');
    await page.keyboard.press('Enter');
    await page.waitForFunction((b) => window.gpuscope.state.lastRun !== b && window.gpuscope.state.busy === 0, before);
    assert.deepEqual(await state(() => window.gpuscope.state.outputs[0].params.sigma), [1.5]);

    // The viewer: Tab to it, zoom with +, pan with an arrow, 0 fits again.
    found = false;
    for (let i = 0; i < 60 && !found; i++) {
      await page.keyboard.press('Tab');
      found = await state(() => document.activeElement?.id === 'view');
    }
    assert.ok(found, 'Tab never reached the image view');
    const v0 = await state(() => window.gpuscope.view());
    await page.keyboard.press('+');
    await page.keyboard.press('ArrowLeft');
    const v1 = await state(() => window.gpuscope.view());
    assert.ok(v1.zoom > v0.zoom * 1.2, `zoom ${v0.zoom} -> ${v1.zoom}`);
    await page.keyboard.press('0');
    assert.ok(Math.abs((await state(() => window.gpuscope.view())).zoom - v0.zoom) < 1e-9);

    // A long run on the CPU (worker): the page stays responsive and Escape stops it.
    await page.selectOption('#where', 'cpu');
    await page.selectOption('#sample', 'hubble_deep_field.jpg');
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'hubble_deep_field.jpg' && window.gpuscope.state.busy === 0);
    await page.fill('input[name=sigma][data-step="0"]', '25');
    await page.focus('input[name=sigma][data-step="0"]');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => window.gpuscope.state.busy === 1);
    assert.ok(await page.isVisible('#progress'));
    assert.match(await page.textContent('#progress-text'), /step 1 of 2: gaussian_filter on the CPU/);
    // The main thread is free while the worker computes.
    const t0 = Date.now();
    assert.equal(await state(() => 1 + 1), 2);
    assert.ok(Date.now() - t0 < 1000);
    await page.keyboard.press('Escape');
    await page.waitForFunction(() => window.gpuscope.state.busy === 0, null, { timeout: 10_000 });
    assert.match(await state(() => window.gpuscope.message), /Cancelled/);
    // And the CPU path works again afterwards (a fresh worker).
    await page.fill('input[name=sigma][data-step="0"]', '1');
    await page.click('#run');
    await page.waitForFunction(() => window.gpuscope.state.busy === 0 && window.gpuscope.state.outputs[0]?.where === 'cpu');
    assert.equal(await state(() => window.gpuscope.message), '');

    // A long GPU run: Cancel gives the page back at once (the submission
    // finishes in the background and its result is dropped).
    await page.selectOption('#where', 'gpu');
    await page.selectOption('#sample', 'coins.png');
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'coins.png' && window.gpuscope.state.busy === 0);
    const kept = await state(() => window.gpuscope.state.lastRun);
    await page.fill('input[name=sigma][data-step="0"]', '15');
    await page.click('#run');
    await page.waitForFunction(() => window.gpuscope.state.busy === 1);
    assert.match(await page.textContent('#progress-text'), /gaussian_filter on WebGPU/);
    const t1 = Date.now();
    await page.click('#cancel');
    await page.waitForFunction(() => window.gpuscope.state.busy === 0, null, { timeout: 2000 });
    assert.ok(Date.now() - t1 < 2000);
    assert.match(await state(() => window.gpuscope.message), /Cancelled/);
    assert.deepEqual(await state(() => window.gpuscope.state.lastRun), kept);
    await page.fill('input[name=sigma][data-step="0"]', '1');
  });

  it('decodes a new file while a long CPU run goes on, and the new image replaces the run', async () => {
    await page.selectOption('#where', 'cpu');
    await page.fill('input[name=sigma][data-step="0"]', '25');
    await page.selectOption('#sample', 'hubble_deep_field.jpg');
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'hubble_deep_field.jpg' && window.gpuscope.state.busy === 1);
    const t0 = Date.now();
    await page.setInputFiles('#file', path.join(SAMPLES, 'camera.png'));
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'camera.png', null, { timeout: 10_000 });
    assert.ok(Date.now() - t0 < 10_000);
    await page.waitForFunction(() => window.gpuscope.state.busy === 0 && window.gpuscope.state.outputs.length === 2, null, { timeout: 60_000 });
    assert.deepEqual(await state(() => window.gpuscope.state.outputs[0].shape), [512, 512]);
    await page.fill('input[name=sigma][data-step="0"]', '1');
    await page.selectOption('#where', 'gpu');
  });

  it('workshop panel: times CPU and GPU, shows the speed-up, sortable table with CSV', async () => {
    await page.selectOption('#sample', 'camera.png');
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'camera.png' && window.gpuscope.state.busy === 0);
    await page.fill('#repeats', '2');
    await page.click('#compare');
    await page.waitForFunction(() => window.gpuscope.state.compare?.length === 2 && window.gpuscope.state.busy === 0, null, { timeout: 120_000 });
    const rows = await state(() => window.gpuscope.state.compare);
    assert.deepEqual(rows.map((r) => [r.operation, r.agree]), [['gaussian_filter', 'yes'], ['threshold', 'yes']]);
    for (const r of rows) {
      assert.ok(r.gpu_ms > 0 && r.cpu_ms > 0 && Math.abs(r.speedup - r.cpu_ms / r.gpu_ms) < 1e-9, JSON.stringify(r));
    }
    assert.equal(rows[1].mismatches, 0);
    assert.match(await page.textContent('#speedup'), /Whole chain: CPU [\d.]+ ms, GPU [\d.]+ ms including transfers — speed-up [\d.]+×: the GPU is [\d.]+× (faster|slower).* The results agree\./);
    console.log(`  ${await page.textContent('#speedup')}`);
    // Sorting: by CPU ms descending after two clicks.
    const header = page.locator('#workshop-table th[data-key=cpu_ms] button');
    await header.click();
    assert.equal(await page.getAttribute('#workshop-table th[data-key=cpu_ms]', 'aria-sort'), 'ascending');
    await header.click();
    assert.equal(await page.getAttribute('#workshop-table th[data-key=cpu_ms]', 'aria-sort'), 'descending');
    const order = await page.$$eval('#workshop-table tbody tr', (trs) => trs.map((tr) => tr.cells[1].textContent));
    const expected = [...rows].sort((a, b) => b.cpu_ms - a.cpu_ms).map((r) => r.operation);
    assert.deepEqual(order, expected);
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#workshop-table button.csv')]);
    assert.equal(download.suggestedFilename(), 'cpu-vs-gpu.csv');
    const csv = fs.readFileSync(await download.path(), 'utf8').trim().split(/\r\n/);
    assert.equal(csv[0], 'step,operation,gpu_ms,gpu_kernel_ms,gpu_first_ms,cpu_ms,speedup,max_abs_diff,agree');
    assert.equal(csv.length, 3);
    assert.match(csv[1], /^1,gaussian_filter,[\d.e-]+,/);
  });

  it('downloads the result as .npy and .tif and the view as .png', async () => {
    // The chain's last run is on camera.png: gaussian_filter → threshold(110).
    await page.click('#run');
    await waitIdle(page);
    await page.selectOption('#layer', '1');
    const get = async (button) => {
      const [d] = await Promise.all([page.waitForEvent('download'), page.click(button)]);
      return { name: d.suggestedFilename(), bytes: fs.readFileSync(await d.path()) };
    };
    const n = await get('#dl-npy');
    assert.equal(n.name, 'camera-gaussian_filter-threshold.npy');
    assert.equal(n.bytes.subarray(1, 6).toString('latin1'), 'NUMPY');
    const header = n.bytes.subarray(10, 10 + n.bytes.readUInt16LE(8)).toString('latin1');
    assert.match(header, /'descr': '\|u1'/);
    assert.match(header, /'shape': \(512, 512\)/);
    const mask = n.bytes.subarray(10 + n.bytes.readUInt16LE(8));
    const expected = await state(() => Array.from(window.gpuscope.state.outputs[1].data.subarray(0, 4096)));
    assert.deepEqual(Array.from(mask.subarray(0, 4096)), expected);
    const t = await get('#dl-tif');
    assert.equal(t.name, 'camera-gaussian_filter-threshold.tif');
    assert.ok(['II*\0', 'MM\0*'].includes(t.bytes.subarray(0, 4).toString('latin1')));
    await page.selectOption('#layer', '0');
    const g = await get('#dl-npy');
    assert.match(g.bytes.subarray(10, 10 + g.bytes.readUInt16LE(8)).toString('latin1'), /'descr': '<f4'/);
    const p = await get('#dl-png');
    assert.equal(p.name, 'camera-gaussian_filter-view.png');
    assert.equal(p.bytes.subarray(1, 4).toString('latin1'), 'PNG');
    assert.deepEqual([p.bytes.readUInt32BE(16), p.bytes.readUInt32BE(20)], [512, 512]);
  });

  it('needs no network once loaded: samples and both paths work offline', async () => {
    await page.waitForFunction(() => window.gpuscope.state.prefetched, null, { timeout: 60_000 });
    await browser.context.setOffline(true);
    try {
      // The network really is gone for this page (the failed fetch logs one
      // console error, taken out here: any later one is a real failure).
      const n = pageErrors.length;
      assert.equal(await state(() => fetch('web/samples/PROVENANCE.md').then(() => 'fetched', () => 'failed')), 'failed');
      for (let i = 0; i < 50 && pageErrors.length === n; i++) await page.waitForTimeout(20);
      const probe = pageErrors.splice(n);
      assert.ok(probe.length === 1 && /ERR_INTERNET_DISCONNECTED/.test(probe[0]), JSON.stringify(probe));
      await page.selectOption('#where', 'cpu');
      await page.selectOption('#sample', 'multipage.tif');
      await page.waitForFunction(() => window.gpuscope.image()?.name === 'multipage.tif' && window.gpuscope.state.busy === 0);
      assert.equal(await state(() => window.gpuscope.message), '');
      assert.deepEqual(await state(() => window.gpuscope.state.outputs.map((o) => o.where)), ['cpu', 'cpu']);
      await page.selectOption('#where', 'gpu');
      await page.selectOption('#sample', 'coins.png');
      await page.waitForFunction(() => window.gpuscope.image()?.name === 'coins.png' && window.gpuscope.state.busy === 0);
      assert.equal(await state(() => window.gpuscope.message), '');
      assert.deepEqual(await state(() => window.gpuscope.state.outputs.map((o) => o.where)), ['gpu', 'gpu']);
    } finally {
      await browser.context.setOffline(false);
    }
  });

  it('shows real results over the image: source labels under their markers, superpixel boundaries', async () => {
    const other = await openApp(browser.context, '#sample=coins.png&on=gpu&1.op=sources&1.nsigma=1&show=1', pageErrors);
    await waitIdle(other);
    const s = await other.evaluate(() => ({
      message: window.gpuscope.message,
      view: window.gpuscope.view(),
      outputs: window.gpuscope.state.outputs.map((o) => [o.op, o.where, o.kind, o.table?.rows.length]),
      summary: document.querySelector('#results-summary').textContent,
    }));
    assert.equal(s.message, '');
    assert.deepEqual(s.outputs.map((o) => o.slice(0, 3)), [['sources', 'gpu', 'table']]);
    // scipy on the same image and threshold (median + 1 clipped std) counts 358.
    assert.equal(s.outputs[0][3], 358, 'sources found');
    assert.equal(s.view.overlay, 'labels');
    assert.match(s.summary, /^358 rows from sources/);
    await screenshot(other.locator('#view'), 'coins-sources-labels-markers.png');
    await other.evaluate(() => {
      location.hash = '#sample=coins.png&on=gpu&1.op=slic&1.n_segments=100&1.compactness=0.1&1.max_num_iter=4&show=1';
    });
    await other.waitForFunction(() => window.gpuscope.state.busy === 0 && window.gpuscope.state.outputs[0]?.op === 'slic', null, { timeout: 120_000 });
    const v = await other.evaluate(() => ({ view: window.gpuscope.view(), kind: window.gpuscope.state.outputs[0].kind, message: window.gpuscope.message }));
    assert.equal(v.message, '');
    assert.equal(v.kind, 'labels');
    assert.equal(v.view.overlay, 'boundaries');
    await screenshot(other.locator('#view'), 'coins-slic-boundaries.png');
    await other.close();
  });

  it('a link reproduces a view: the URL hash round trip', async () => {
    const hash =
      '#sample=astronaut.png&on=gpu&1.op=gaussian_filter&1.sigma=3%2C3%2C0&1.mode=nearest&1.cval=0&1.truncate=4' +
      '&2.op=threshold&2.value=120&cmap=magma&scale=asinh&limits=auto&p=1%2C99&opacity=0.7&show=2';
    const other = await openApp(browser.context, hash, pageErrors);
    await waitIdle(other);
    const s = await other.evaluate(() => ({
      image: window.gpuscope.image(),
      steps: window.gpuscope.state.steps,
      outputs: window.gpuscope.state.outputs.map((o) => [o.op, o.where, o.kind, o.shape]),
      view: window.gpuscope.view(),
      sigma: document.querySelector('input[name=sigma][data-step="0"]').value,
      mode: document.querySelector('select[name=mode][data-step="0"]').value,
      value: document.querySelector('input[name=value][data-step="1"]').value,
      hash: window.gpuscope.hash(),
      message: window.gpuscope.message,
    }));
    assert.equal(s.message, '');
    assert.equal(s.image.name, 'astronaut.png');
    assert.deepEqual(s.outputs, [
      ['gaussian_filter', 'gpu', 'image', [512, 512, 3]],
      ['threshold', 'gpu', 'mask', [512, 512, 3]],
    ]);
    assert.deepEqual([s.sigma, s.mode, s.value], ['3,3,0', 'nearest', '120']);
    assert.deepEqual([s.view.cmap, s.view.stretch, s.view.layer, s.view.overlay], ['magma', 'asinh', 1, 'mask']);
    const entries = (h) => Object.fromEntries(new URLSearchParams(h.slice(1)));
    assert.deepEqual(entries(s.hash), entries(hash));
    await screenshot(other, 'page-1280x800-astronaut-magma-asinh-mask.png');

    // Editing the hash of an open page re-applies it; unknown entries are
    // reported and ignored.
    await other.evaluate(() => {
      location.hash = '#sample=DLS_I03_smargon_0001.cbf.gz&1.op=threshold&1.value=20&2.op=nonsense&cmap=bogus&scale=sqrt&limits=auto&p=0.5%2C99.9';
    });
    await other.waitForFunction(() => window.gpuscope.image()?.name === 'DLS_I03_smargon_0001.cbf.gz' && window.gpuscope.state.busy === 0 && window.gpuscope.state.outputs.length === 1, null, { timeout: 120_000 });
    const m = await other.evaluate(() => window.gpuscope.message);
    assert.match(m, /unknown operation 'nonsense'/);
    assert.match(m, /cmap=bogus/);
    assert.equal((await other.evaluate(() => window.gpuscope.view())).stretch, 'sqrt');
    await screenshot(other.locator('#view'), 'diffraction-strong-pixels-sqrt.png');
    await other.close();
  });

  it('fits a narrow window without horizontal scrolling', async () => {
    const narrow = await openApp(browser.context, '#sample=coins.png&1.op=threshold&1.value=100&cmap=gray', pageErrors);
    await narrow.setViewportSize({ width: 420, height: 900 });
    await waitIdle(narrow);
    await narrow.waitForTimeout(200);
    const w = await narrow.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
    assert.ok(w.scroll <= w.inner, `page is ${w.scroll} px wide in a ${w.inner} px window`);
    await screenshot(narrow, 'page-narrow-420.png');
    await narrow.close();
  });

  it('logged no page errors', () => {
    assert.deepEqual(pageErrors, []);
  });
});

// Browser tests of what a new user hit on the page: messages where the user
// looks, tables of volumes, timings after a cancel, links from local files,
// the Python twin, markers and opacity, colour defaults, and the smaller
// bugs. At 1400×900, as the user's window. Run with `cargo xtask test-web`.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { SAMPLES, WEBGPU, launch, openApp, screenshot, waitIdle } from './browser.mjs';

let browser;
let page;
const errors = [];
const state = (fn, arg) => page.evaluate(fn, arg);
const w2 = state;

before(async () => {
  browser = await launch(WEBGPU, { width: 1400, height: 900 });
  page = await openApp(browser.context, '', errors);
  await waitIdle(page);
});

after(async () => {
  await browser?.close();
});

/** Whether element `selector` is on screen and not covered: the element at
 * the centre of its box is it or inside it. */
async function inView(selector) {
  return state((sel) => {
    const el = document.querySelector(sel);
    if (!el) return { ok: false, why: 'missing' };
    const r = el.getBoundingClientRect();
    const [cx, cy] = [r.left + r.width / 2, r.top + r.height / 2];
    const hit = document.elementFromPoint(cx, cy);
    const ok = r.width > 0 && r.height > 0 && r.top >= 0 && r.bottom <= innerHeight && r.left >= 0 && r.right <= innerWidth && !!hit && (hit === el || el.contains(hit));
    return { ok, rect: [r.left, r.top, r.right, r.bottom], hit: hit ? `${hit.tagName}#${hit.id}.${hit.className}` : null, inner: [innerWidth, innerHeight] };
  }, selector);
}

/** Sets the chain from a link hash and waits until it ran. */
async function openLink(hash) {
  const before = await state(() => JSON.stringify(window.gpuscope.state.lastRun));
  await state((h) => {
    location.hash = h;
  }, hash);
  try {
    await page.waitForFunction((b) => JSON.stringify(window.gpuscope.state.lastRun) !== b && window.gpuscope.state.busy === 0, before, { timeout: 180_000 });
  } catch (e) {
    const s = await state(() => ({ busy: window.gpuscope.state.busy, hash: location.hash, message: window.gpuscope.message, progress: document.querySelector('#progress-text').textContent }));
    throw new Error(`the link ${hash} did not run: ${JSON.stringify(s)} (${e.message})`);
  }
}

/** Undefined names and tuple assignments to x in a Python script, by
 * Python's own parser (python3, which the test server needs anyway). */
function checkPython(code) {
  const checker = `
import ast, builtins, json, sys
src = sys.stdin.read()
try:
    tree = ast.parse(src)
except SyntaxError as e:
    print(json.dumps({"syntax": f"{e.msg} at line {e.lineno}: {src.splitlines()[e.lineno - 1] if e.lineno else ''}"}))
    sys.exit(0)
defined, undefined, tuples = set(dir(builtins)), [], []
# Statement by statement: a name must be defined by an earlier statement
# (or by this one, for the names a loop sets in its own body).
for node in tree.body:
    loads = [s.id for s in ast.walk(node) if isinstance(s, ast.Name) and isinstance(s.ctx, ast.Load)]
    if isinstance(node, (ast.While, ast.For, ast.If)):
        defined |= {s.id for s in ast.walk(node) if isinstance(s, ast.Name) and isinstance(s.ctx, ast.Store)}
    lambda_args = {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}
    undefined += [n for n in loads if n not in defined and n not in lambda_args]
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Import, ast.ImportFrom)):
            for a in sub.names:
                defined.add((a.asname or a.name).split('.')[0])
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            defined.add(sub.id)
        if isinstance(sub, ast.Assign) and any(isinstance(t, ast.Name) and t.id == 'x' for t in sub.targets) and isinstance(sub.value, ast.Tuple):
            tuples.append(ast.unparse(sub))
print(json.dumps({"undefined": sorted(set(undefined)), "tuples": tuples}))
`;
  const r = spawnSync('python3', ['-c', checker], { input: code, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

describe('the page as a new user meets it', { timeout: 900_000 }, () => {
  // `cargo xtask test-web` serves dist/ (GPUSCOPE_SERVED=dist) with a plain
  // static server; every test here then runs on the static build.
  it('dist/ is the whole app and only the app', { skip: process.env.GPUSCOPE_SERVED !== 'dist' && 'not served from dist/ (run `cargo xtask test-web`)' }, async () => {
    const seen = errors.length;
    const status = await state(async () => {
      const get = async (p) => (await fetch(p)).status;
      return {
        wasm: await get('web/pkg/gpuscope_web_bg.wasm'),
        glue: await get('web/pkg/gpuscope_web.js'),
        provenance: await get('web/samples/PROVENANCE.md'),
        sample: await get('web/samples/DLS_I03_smargon_0001.cbf.gz'),
        tests: await get('web/tests/browser.mjs'),
        declarations: await get('web/pkg/gpuscope_web.d.ts'),
        cargo: await get('Cargo.toml'),
      };
    });
    assert.deepEqual(status, { wasm: 200, glue: 200, provenance: 200, sample: 200, tests: 404, declarations: 404, cargo: 404 });
    // The three 404s asked for here are logged by Chromium: not the page's errors.
    const asked = errors.splice(seen);
    assert.deepEqual(asked.filter((e) => !/status of 404/.test(e)), []);
    assert.equal(asked.length, 3);
    assert.equal(await state(() => window.gpuscope.status), 'ready');
  });

  it('shows load and validation errors at the top of the viewer, in view, and focuses the field', async () => {
    // The left column as it opens: scrolled to its top, near the file picker.
    await state(() => document.querySelector('.sidebar').scrollTo(0, 0));
    const cbf = fs.readFileSync(path.join(SAMPLES, 'DLS_I03_smargon_0001.cbf.gz'));
    await page.setInputFiles('#file', { name: 'cut.cbf.gz', mimeType: 'application/octet-stream', buffer: cbf.subarray(0, 100_000) });
    await page.waitForFunction(() => /Cannot open cut\.cbf\.gz/.test(window.gpuscope.message));
    const seen = await inView('#message');
    assert.ok(seen.ok, `the message is not in view: ${JSON.stringify(seen)}`);
    assert.match(await page.textContent('#message'), /gzip stream ends early/);
    await screenshot(page, 'page-load-error.png');

    await state(() => document.querySelector('.sidebar').scrollTo(0, 0));
    await page.fill('input[name=sigma][data-step="0"]', '-1');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => /invalid sigma/.test(window.gpuscope.message));
    const v = await inView('#message');
    assert.ok(v.ok, `the validation message is not in view: ${JSON.stringify(v)}`);
    const focused = await state(() => [document.activeElement.name, document.activeElement.getAttribute('aria-invalid')]);
    assert.deepEqual(focused, ['sigma', 'true']);
    assert.ok((await inView('input[name=sigma][data-step="0"]')).ok, 'the invalid field is not in view');
    await screenshot(page, 'page-validation-error.png');
    await page.fill('input[name=sigma][data-step="0"]', '2');
    await page.click('#run');
    await page.waitForFunction(() => window.gpuscope.message === '' && window.gpuscope.state.busy === 0);
    assert.equal(await page.isVisible('#message-box'), false, 'an empty message area takes no room');
  });

  it('reports an empty file as empty and names a file once in a load error', async () => {
    await page.setInputFiles('#file', { name: 'nothing.tif', mimeType: 'application/octet-stream', buffer: Buffer.alloc(0) });
    await page.waitForFunction(() => /Cannot open nothing\.tif/.test(window.gpuscope.message));
    assert.match(await page.textContent('#message'), /^Cannot open nothing\.tif: the file is empty \(0 bytes\)\.$/);
    const coins = fs.readFileSync(path.join(SAMPLES, 'coins.png'));
    const cbf = fs.readFileSync(path.join(SAMPLES, 'DLS_I03_smargon_0001.cbf.gz'));
    const broken = [
      ['cut.cbf.gz', cbf.subarray(0, 50_000)],
      ['truncated.png', coins.subarray(0, 5000)],
      ['broken.tif', Buffer.from('II*\0garbage')],
      ['bad.fits', Buffer.from('SIMPLE  = nonsense')],
      ['bad.npy', Buffer.from('\x93NUMPY\x01\x00garbage')],
    ];
    for (const [name, buffer] of broken) {
      await page.setInputFiles('#file', { name, mimeType: 'application/octet-stream', buffer });
      await page.waitForFunction((n) => window.gpuscope.message.startsWith(`Cannot open ${n}`), name);
      const text = await page.textContent('#message');
      assert.equal(text.split(name).length - 1, 1, `the name is repeated: ${text}`);
      assert.equal((await state(() => window.gpuscope.image())).name, 'coins.png');
    }
  });

  it('measures sources on a 3-D stack with (z, y, x) centroids, 6-number boxes and markers on their slice', async () => {
    await openLink('#sample=blobs3d.tif&on=cpu&1.op=sources&1.nsigma=0.5');
    const r = await state(() => {
      const o = window.gpuscope.state.outputs[0];
      return { columns: o.table.columns.map((c) => c.key), labels: o.table.columns.map((c) => c.label), rows: o.table.rows.slice(0, 50), regions: o.regions.slice(0, 50), shape: o.shape, n: o.table.rows.length };
    });
    assert.deepEqual(r.shape, [64, 64, 64]);
    assert.ok(r.n > 0, 'no sources at nsigma 0.5');
    assert.ok(r.columns.includes('centroid_z') && r.columns.includes('centroid_y') && r.columns.includes('centroid_x'), r.columns.join());
    assert.ok(r.labels.includes('bbox (z0, y0, x0, z1, y1, x1)'), r.labels.join());
    for (let i = 0; i < r.rows.length; i++) {
      const [row, g] = [r.rows[i], r.regions[i]];
      assert.deepEqual([row.centroid_z, row.centroid_y, row.centroid_x], g.centroid);
      assert.equal(row.bbox.split(',').length, 6);
      for (const a of ['z', 'y', 'x']) assert.ok(row[`centroid_${a}`] >= 0 && row[`centroid_${a}`] < 64, JSON.stringify(row));
    }
    // Markers: inside the image, and each on the slice of its centroid.
    const m = await state(() => ({ markers: window.gpuscope.markers() }));
    assert.equal(m.markers.length, r.n);
    for (const k of m.markers) assert.ok(k.x > 0 && k.x < 64 && k.y > 0 && k.y < 64 && k.z > 0 && k.z < 64, JSON.stringify(k));
    const zs = new Set(m.markers.map((k) => Math.floor(k.z)));
    assert.ok(zs.size > 1, 'every marker on one slice');
    // The default nsigma finds nothing here: the page says so.
    await openLink('#sample=blobs3d.tif&on=cpu&1.op=sources');
    const none = await state(() => window.gpuscope.state.outputs[0].table.rows.length);
    if (none === 0) {
      assert.match(await page.textContent('#message'), /found no sources: no pixel is above its detection level [\d.e+-]+\. Lower nsigma/);
      assert.match(await page.textContent('#results-summary'), /No sources/);
    } else {
      assert.match(await page.textContent('#results-summary'), new RegExp(`^${none} rows from sources`));
    }
  });

  it('times the next run without the GPU work of a cancelled one', async () => {
    await openLink('#sample=coins.png&on=gpu&1.op=gaussian_filter&1.sigma=1');
    // The short run timed again, its kernels compiled by the first (as
    // they are for the short run after the cancelled one, below).
    await state(() => { window.firstRun = window.gpuscope.state.lastRun; });
    await page.click('#run');
    await page.waitForFunction(() => window.gpuscope.state.busy === 0 && window.gpuscope.state.lastRun !== window.firstRun && window.gpuscope.state.lastRun.steps[0].wallMs !== undefined, null, { timeout: 180_000 });
    const short = await state(() => window.gpuscope.state.lastRun.steps[0].wallMs);
    await page.fill('input[name=sigma][data-step="0"]', '60');
    await page.click('#run');
    await page.waitForFunction(() => window.gpuscope.state.busy === 0, null, { timeout: 180_000 });
    const long = await state(() => window.gpuscope.state.lastRun.steps[0].wallMs);
    assert.ok(long > 4 * short + 300, `the long run (${long} ms) is not long against the short one (${short} ms)`);
    // Start the long run, cancel it at once, run the short one.
    await page.click('#run');
    await page.waitForFunction(() => window.gpuscope.state.busy === 1);
    await page.keyboard.press('Escape');
    await page.waitForFunction(() => window.gpuscope.state.busy === 0);
    await page.fill('input[name=sigma][data-step="0"]', '1');
    await page.click('#run');
    await page.waitForFunction(() => window.gpuscope.state.busy === 0 && window.gpuscope.state.lastRun.steps[0].wallMs !== undefined && window.gpuscope.state.outputs[0].params.sigma[0] === 1, null, { timeout: 180_000 });
    const after = await state(() => window.gpuscope.state.lastRun);
    const step = after.steps[0];
    console.log(`  short ${short.toFixed(0)} ms, long ${long.toFixed(0)} ms, short after a cancelled long: wall ${step.wallMs.toFixed(0)} ms, kernels ${step.kernelMs?.toFixed(0)} ms, run ${after.ms.toFixed(0)} ms`);
    assert.ok(step.wallMs < long / 2, `the short run took ${step.wallMs} ms: it counted the cancelled run's GPU work (${long} ms)`);
    assert.ok(after.ms < long / 2, `the run's total ${after.ms} ms counted the cancelled run's GPU work`);
    if (step.kernelMs !== undefined) assert.ok(step.kernelMs <= step.wallMs, `kernels ${step.kernelMs} ms > wall ${step.wallMs} ms`);
  });

  it('a link made from a local file says to load the file again, and applies once it is', async () => {
    const camera = fs.readFileSync(path.join(SAMPLES, 'camera.png'));
    await page.setInputFiles('#file', { name: 'my-camera.png', mimeType: 'image/png', buffer: camera });
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'my-camera.png' && window.gpuscope.state.busy === 0);
    await page.fill('input[name=sigma][data-step="0"]', '3');
    await page.click('#run');
    await page.waitForFunction(() => window.gpuscope.state.busy === 0 && window.gpuscope.state.outputs[0]?.params.sigma[0] === 3);
    const hash = await state(() => window.gpuscope.hash());
    assert.match(hash, /file=my-camera\.png/);
    assert.doesNotMatch(hash, /sample=/);
    const other = await openApp(browser.context, hash, errors);
    const s = await other.evaluate(() => ({ image: window.gpuscope.image(), outputs: window.gpuscope.state.outputs.length, busy: window.gpuscope.state.busy, sigma: window.gpuscope.state.steps[0].raw.sigma }));
    assert.deepEqual(s, { image: null, outputs: 0, busy: 0, sigma: '3' });
    assert.match(await other.textContent('#message'), /made from a local file, my-camera\.png: open it again/);
    assert.equal(await other.inputValue('#sample'), '', 'a sample is shown as chosen');
    await screenshot(other, 'page-local-link.png');
    await other.setInputFiles('#file', { name: 'my-camera.png', mimeType: 'image/png', buffer: camera });
    await other.waitForFunction(() => window.gpuscope.state.busy === 0 && window.gpuscope.state.outputs.length === 1, null, { timeout: 60_000 });
    assert.deepEqual(await other.evaluate(() => window.gpuscope.state.outputs[0].params.sigma), [3]);
    assert.match(await other.evaluate(() => location.hash), /file=my-camera\.png/);
    await other.close();
  });

  it('gives Python that runs: every name defined, tables leave x alone', async () => {
    const chains = [
      '#sample=hubble_deep_field.jpg&on=cpu&1.op=sources',
      '#sample=coins.png&on=cpu&1.op=gaussian_filter&2.op=threshold&2.value=100&3.op=label&4.op=sigma_clipped_stats',
      '#sample=coins.png&on=cpu&1.op=sigma_clipped_stats&1.workshop=true&2.op=sources&2.workshop=true&2.connectivity=2',
      '#sample=coins.png&on=cpu&1.op=median_filter&2.op=remove_outliers&3.op=slic&3.max_num_iter=2&3.n_segments=20&4.op=convolve',
      '#sample=blobs3d.tif&on=cpu&1.op=sources&1.nsigma=1',
    ];
    for (const hash of chains) {
      await openLink(hash);
      const code = await state(() => window.gpuscope.python());
      const r = checkPython(code);
      assert.deepEqual(r, { undefined: [], tuples: [] }, `${hash}:\n${code}`);
    }
    // find_spots: DIALS' command line, as comments; the script still runs.
    await page.evaluate(() => window.gpuscope.loadSample('DLS_I03_smargon_0001.cbf.gz'));
    await state(() => {
      location.hash = '#sample=DLS_I03_smargon_0001.cbf.gz&1.op=find_spots';
    });
    await page.waitForFunction(() => window.gpuscope.state.steps[0].op === 'find_spots');
    const code = await state(() => window.gpuscope.python());
    assert.match(code, /^image = fabio\.open\('DLS_I03_smargon_0001\.cbf\.gz'\)\.data$/m);
    assert.match(code, /^# {3}dials\.find_spots imported\.expt spotfinder\.threshold\.algorithm=dispersion_extended/m);
    assert.deepEqual(checkPython(code), { undefined: [], tuples: [] }, code);
    await page.click('#cancel').catch(() => {});
    await waitIdle(page, 300_000);
  });

  it('overlay opacity 0 hides the markers with the overlay', async () => {
    await openLink('#sample=hubble_deep_field.jpg&on=cpu&1.op=sources&opacity=0.5');
    assert.ok((await state(() => window.gpuscope.markers().length)) > 100);
    await page.fill('#opacity', '0');
    await page.dispatchEvent('#opacity', 'input');
    const withMarkers = await state(() => document.querySelector('#view').toDataURL());
    const markers = await state(() => window.gpuscope.markers());
    await state(() => window.gpuscope.preview(null, []));
    const bare = await state(() => document.querySelector('#view').toDataURL());
    assert.ok(withMarkers === bare, 'markers are drawn at opacity 0');
    // At opacity 1 they are drawn.
    await state((m) => window.gpuscope.preview(null, m), markers);
    await page.fill('#opacity', '1');
    await page.dispatchEvent('#opacity', 'input');
    assert.notEqual(await state(() => document.querySelector('#view').toDataURL()), bare);
  });

  it('smooths a colour image on its spatial axes by default, and says so', async () => {
    await openLink('#sample=coins.png&on=cpu&1.op=gaussian_filter');
    await page.selectOption('#sample', 'astronaut.png');
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'astronaut.png' && window.gpuscope.state.busy === 0 && window.gpuscope.state.outputs.length === 1);
    assert.equal(await page.inputValue('input[name=sigma][data-step="0"]'), '2, 2, 0');
    assert.deepEqual(await state(() => window.gpuscope.state.outputs[0].params.sigma), [2, 2, 0]);
    assert.match(await page.textContent('.channel-note'), /colour image.*rows and columns only/);
    // Back on a grey image the default is one value again.
    await page.selectOption('#sample', 'coins.png');
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'coins.png' && window.gpuscope.state.busy === 0);
    assert.equal(await page.inputValue('input[name=sigma][data-step="0"]'), '2');
    // A value given (here by a link) is kept as given.
    await openLink('#sample=astronaut.png&on=cpu&1.op=gaussian_filter&1.sigma=2');
    assert.deepEqual(await state(() => window.gpuscope.state.outputs[0].params.sigma), [2]);
  });

  it('captions a table step’s histogram as its input', async () => {
    await openLink('#sample=coins.png&on=cpu&1.op=sigma_clipped_stats');
    assert.match(await page.textContent('#hist-caption'), /^histogram of step 1's input /);
    await openLink('#sample=coins.png&on=cpu&1.op=gaussian_filter');
    assert.match(await page.textContent('#hist-caption'), /^histogram of step 1's output /);
  });

  it('refuses a median window the run would refuse, before running', async () => {
    await openLink('#sample=coins.png&on=cpu&1.op=median_filter&1.size=3');
    const before = await state(() => window.gpuscope.state.lastRun);
    await page.fill('input[name=size][data-step="0"]', '300');
    await page.click('#run');
    await page.waitForFunction(() => /invalid size/.test(window.gpuscope.message));
    assert.match(await page.textContent('#message'), /invalid size: 300 \(a 300×300 window has 90000 elements; the median selects from at most 65536: use a smaller size\)/);
    assert.deepEqual(await state(() => window.gpuscope.state.lastRun), before);
    assert.equal(await state(() => document.activeElement.name), 'size');
    await page.fill('input[name=size][data-step="0"]', '3');
  });

  it('keeps + Add a step clear of the sticky Run bar', async () => {
    await openLink('#sample=coins.png&on=cpu&1.op=threshold&1.value=100');
    for (let i = 0; i < 3; i++) await page.click('#add-step');
    // Scroll so that the button's natural place is at the bottom of the column.
    await state(() => document.querySelector('#add-step').scrollIntoView({ block: 'end' }));
    const v = await inView('#add-step');
    assert.ok(v.ok, `+ Add a step is covered: ${JSON.stringify(v)}`);
    await screenshot(page, 'page-add-step.png');
    for (let i = 0; i < 3; i++) await page.click('button.remove[data-remove="1"]');
    assert.equal(await state(() => window.gpuscope.state.steps.length), 1);
  });

  it('shows a large new sample without re-running the chain on it', async () => {
    await openLink('#sample=coins.png&on=cpu&1.op=gaussian_filter');
    await page.selectOption('#sample', 'DLS_I03_smargon_0001.cbf.gz');
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'DLS_I03_smargon_0001.cbf.gz', null, { timeout: 60_000 });
    await page.waitForTimeout(500);
    const s = await state(() => ({ busy: window.gpuscope.state.busy, outputs: window.gpuscope.state.outputs.length, layer: window.gpuscope.view().layer }));
    assert.deepEqual(s, { busy: 0, outputs: 0, layer: -1 });
    assert.match(await page.textContent('#message'), /6\.2 million pixels: it is shown as it is.*Press Run/);
    await screenshot(page, 'page-large-sample.png');
    // A small one runs at once, as before.
    await page.selectOption('#sample', 'camera.png');
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'camera.png' && window.gpuscope.state.busy === 0 && window.gpuscope.state.outputs.length === 1, null, { timeout: 60_000 });
  });

  it('workshop: honest speed-ups, the verdict names the kernels when they take the time', async () => {
    const w = (fn, arg) => page.evaluate(fn, arg);
    assert.equal(await w(() => window.gpuscope.workshop.speedupText(3.4 / 106)), '31× slower');
    assert.equal(await w(() => window.gpuscope.workshop.speedupText(106 / 3.4)), '31× faster');
    assert.equal(await w(() => window.gpuscope.workshop.speedupText(2.5)), '2.5× faster');
    assert.equal(await w(() => window.gpuscope.workshop.speedupText(0.4)), '2.5× slower');
    assert.equal(await w(() => window.gpuscope.workshop.speedupText(0.5)), '2.0× slower');
    assert.equal(await w(() => window.gpuscope.workshop.speedupText(1.01)), 'about as fast');
    // The numbers: 106 ms on the CPU, 4,099 ms on the GPU of which
    // 3,991 ms are kernels: the kernels are slow, not the transfers.
    const kernels = await w(() =>
      window.gpuscope.workshop.verdict([{ cpu_ms: 106, gpu_ms: 4099, gpu_kernel_ms: 3991, agree: 'yes' }], { name: 'google swiftshader' }),
    );
    assert.match(kernels, /speed-up 0\.026×: the GPU is 39× slower here: the kernels themselves take 3991\.0 ms of the GPU's 4099\.0 ms/);
    // The old verdict: "(small images pay for the transfers)".
    assert.doesNotMatch(kernels.split('slower')[1], /transfer|copies and dispatch/);
    const copies = await w(() =>
      window.gpuscope.workshop.verdict([{ cpu_ms: 3.4, gpu_ms: 106, gpu_kernel_ms: 2, agree: 'yes' }], { name: 'nvidia' }),
    );
    assert.match(copies, /the GPU is 31× slower here: the kernels take 2\.0 ms of 106\.0 ms; the rest is copies and dispatch overheads/);
    assert.doesNotMatch(copies, /0\.0×/);

    // Run says when its time includes compiling the pipelines (Run and
    // Compare then differ), and only the first time.
    await openLink('#sample=coins.png&on=gpu&1.op=remove_outliers');
    assert.match(await page.textContent('#run-info'), /first WebGPU run of remove_outliers in this page: it includes compiling the shader pipelines/);
    await page.click('#run');
    await page.waitForFunction(() => window.gpuscope.state.busy === 0 && !/first WebGPU run/.test(document.querySelector('#run-info').textContent), null, { timeout: 60_000 });

    // Through the panel: the first GPU run has its own column, speed-ups read as words.
    await openLink('#sample=camera.png&on=gpu&1.op=gaussian_filter&2.op=threshold&2.value=100');
    await page.fill('#repeats', '2');
    await page.click('#compare');
    await page.waitForFunction(() => window.gpuscope.state.compare?.length === 2 && window.gpuscope.state.busy === 0, null, { timeout: 180_000 });
    const rows = await w(() => window.gpuscope.state.compare);
    for (const r of rows) assert.ok(r.gpu_first_ms > 0, JSON.stringify(r));
    const cells = await page.$$eval('#workshop-table tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
    const headers = await page.$$eval('#workshop-table thead th', (ths) => ths.map((th) => th.textContent));
    const col = headers.findIndex((h) => /GPU against CPU/.test(h));
    assert.ok(col >= 0 && headers.some((h) => /first GPU run ms \(compiles the pipelines\)/.test(h)), headers.join(' | '));
    for (const c of cells) assert.match(c[col], /^(\d+(\.\d)?× (faster|slower)|about as fast)$/);
    assert.match(await page.textContent('#workshop-table caption'), /first run of an operation in this page also compiles its shader pipelines/);
  });

  it('workshop size sweep: CPU and GPU time against image size, plotted', async () => {
    await openLink('#sample=coins.png&on=gpu&1.op=gaussian_filter');
    await page.fill('#sweep-sizes', '64, 0');
    await page.click('#sweep');
    await page.waitForFunction(() => /invalid sizes/.test(window.gpuscope.message));
    assert.equal(await w2(() => document.activeElement.id), 'sweep-sizes');
    // Small sides: SwiftShader is slow (512² … 4096² is the page's default).
    await page.fill('#sweep-sizes', '128, 32, 64');
    await page.fill('#repeats', '1');
    await page.click('#sweep');
    await page.waitForFunction(() => window.gpuscope.state.sweep?.rows.length === 3 && window.gpuscope.state.busy === 0, null, { timeout: 300_000 });
    const s = await w2(() => window.gpuscope.state.sweep);
    assert.deepEqual(s.rows.map((r) => r.size), ['32²', '64²', '128²']);
    for (const r of s.rows) {
      assert.ok(r.cpu_ms > 0 && r.gpu_ms > 0 && r.gpu_first_ms > 0, JSON.stringify(r));
      assert.equal(r.agree, 'yes');
      assert.ok(Math.abs(r.speedup - r.cpu_ms / r.gpu_ms) < 1e-9);
    }
    assert.equal(s.first.side, 32);
    assert.match(await page.textContent('#sweep-summary'), /^First GPU run [\d.]+ ms at 32² \((it compiled the shader pipelines of gaussian_filter|the shader pipelines were compiled by an earlier run in this page); a first run also allocates the buffers\), [\d.]+ ms once warm: left out of the timings\. The GPU (is faster from \d+² on \([\d.]+× there\)|catches up with the CPU at 128² \(about as fast\)|is slower at every size tried \([\d.]+× slower at 128²\))\. The results agree at every size\.$/);
    // The plot has lines in both colours.
    const colours = await w2(() => {
      const c = document.querySelector('#sweep-plot');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let cpu = 0;
      let gpu = 0;
      for (let i = 0; i < d.length; i += 4) {
        if (d[i] === 0xd9 && d[i + 1] === 0x48 && d[i + 2] === 0x0f) cpu++;
        if (d[i] === 0x1f && d[i + 1] === 0x6f && d[i + 2] === 0xeb) gpu++;
      }
      return { cpu, gpu, visible: c.getBoundingClientRect().height > 100 };
    });
    assert.ok(colours.cpu > 50 && colours.gpu > 50 && colours.visible, JSON.stringify(colours));
    await page.locator('#sweep-results').scrollIntoViewIfNeeded();
    await screenshot(page.locator('#sweep-results'), 'page-size-sweep.png');
    await screenshot(page, 'page-workshop.png');
  });

  it('logged no page errors', () => {
    assert.deepEqual(errors, []);
  });
});

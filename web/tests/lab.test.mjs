// Browser test of the kernel lab (web/lab/): real WebGPU (SwiftShader in
// headless Chromium), driven through the page's controls. Run with
// `cargo xtask test-web`, which builds, serves and sets GPUSCOPE_URL.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { SAMPLES, URL, WEBGPU, launch, screenshot } from './browser.mjs';

const LAB = `${URL}web/lab/`;

// What each starter's check must say: the failure its lesson explains.
const STARTER = {
  'vadd-one': /Wrong: 136 of 200 elements.*Wrong indices 64 to 199\..*no invocation wrote it/,
  'vadd-grid': /Wrong indices 256 to 4999\./,
  'vadd-stride': /Wrong indices 1024 to 19999\./,
  primes: /The kernel found 9998 primes below 10000; there are 1229\./,
  'hist-global': /Every wrong value is too low, as when updates are lost\./,
  'hist-shared': /Every wrong value is too low, as when updates are lost\./,
  convolve: /All wrong pixels are on the image border: check the boundary rule\./,
  reduce: /Wrong: 40 of 80 elements.*Wrong workgroup 0 max, workgroup 1 max/,
};

let browser;
let page;
const pageErrors = [];

async function openLab(url = LAB) {
  const p = await browser.context.newPage();
  p.on('pageerror', (e) => pageErrors.push(`pageerror: ${e.message}`));
  p.on('console', (m) => {
    if (m.type() === 'error') pageErrors.push(`console: ${m.text()}`);
  });
  await p.goto(url);
  await p.waitForFunction(() => ['ready', 'failed'].includes(window.lab?.status), null, { timeout: 120_000 });
  return p;
}

before(async () => {
  browser = await launch(WEBGPU, { width: 1280, height: 1000 });
  page = await openLab();
});

after(async () => {
  await browser?.close();
});

/** Clicks Run and waits for its result: {cls, text}. */
async function runAndWait(p = page) {
  await p.evaluate(() => {
    window.lab.state.last = null;
  });
  await p.click('#run');
  await p.waitForFunction(() => window.lab.state.busy === 0 && window.lab.state.last !== null, null, { timeout: 120_000 });
  return p.evaluate(() => ({ cls: document.getElementById('result').className, text: document.getElementById('result').textContent }));
}

async function choose(id, { starter = false, solution = false } = {}) {
  await page.selectOption('#exercise', id);
  await page.fill('#repeats', '1');
  if (starter) await page.click('#reset');
  if (solution) {
    await page.click('#solution-box summary');
    await page.click('#use-solution');
  }
}

const code = () => page.evaluate(() => window.lab.editor.value);
const setCode = (text) => page.fill('#code', text);

describe('the kernel lab', () => {
  it('opens WebGPU and shows the device limits', async () => {
    assert.equal(await page.evaluate(() => window.lab.status), 'ready');
    const limits = await page.locator('#limits').innerText();
    assert.match(limits, /invocations per workgroup.*\t\d+/);
    assert.match(limits, /var<workgroup> memory.*\t\d+/);
    // A new exercise without an expected starter message fails here.
    const ids = await page.locator('#exercise option').evaluateAll((os) => os.map((o) => o.value));
    assert.deepEqual([...ids].sort(), Object.keys(STARTER).sort());
  });

  for (const id of Object.keys(STARTER)) {
    it(`${id}: the starter fails its check as the lesson says, the solution passes`, async () => {
      await choose(id, { starter: true });
      const bad = await runAndWait();
      assert.equal(bad.cls, 'result wrong', bad.text);
      assert.match(bad.text, STARTER[id]);
      if (id === 'convolve') {
        // The input, the output and its wrong pixels: here the border.
        assert.equal(await page.locator('#images').isVisible(), true);
        await page.locator('#images').scrollIntoViewIfNeeded();
        await screenshot(page.locator('#images'), 'lab-convolve-starter.png');
      }
      await choose(id, { solution: true });
      const good = await runAndWait();
      assert.equal(good.cls, 'result ok', good.text);
      assert.match(good.text, /^Correct: all \d+ elements equal the CPU reference/);
      if (id === 'convolve') {
        assert.match(await page.locator('#timing').innerText(), /the page's convolve \(wasm/);
        await screenshot(page, 'lab-solved-convolve.png');
      }
    });
  }

  it('the workgroup-memory histogram equals the global-atomics one and a bincount', async () => {
    const counts = {};
    let values;
    for (const id of ['hist-global', 'hist-shared']) {
      await choose(id, { solution: true });
      await page.selectOption('#input', 'sample:coins.png');
      const r = await runAndWait();
      assert.equal(r.cls, 'result ok', r.text);
      const got = await page.evaluate(() => ({
        hist: Array.from(window.lab.state.last.got),
        values: Array.from(window.lab.state.last.input[0].data),
      }));
      counts[id] = got.hist;
      values = got.values;
    }
    // numpy.bincount(values, minlength=256), here in Node.
    const bincount = new Array(256).fill(0);
    for (const v of values) bincount[v]++;
    assert.equal(values.length, 303 * 384);
    assert.deepEqual(counts['hist-shared'], counts['hist-global']);
    // Both runs are in the history, to compare their times.
    const history = await page.locator('#history tbody tr').evaluateAll((trs) => trs.slice(0, 2).map((tr) => tr.cells[0].textContent));
    assert.deepEqual(history, ['Histogram: workgroup memory', 'Histogram: global atomics']);
    assert.deepEqual(counts['hist-global'], bincount);
  });

  it("runs on the student's own image file, decoded by the page's wasm decoder", async () => {
    await choose('hist-shared', { solution: true });
    await page.setInputFiles('#file', path.join(SAMPLES, 'camera.png'));
    await page.waitForFunction(() => document.getElementById('input').value === 'file');
    const r = await runAndWait();
    assert.equal(r.cls, 'result ok', r.text);
    assert.equal(await page.evaluate(() => window.lab.state.last.n), 512 * 512);
    assert.match(await page.locator('#input-info').innerText(), /camera\.png: 512×512 uint8/);
  });

  it('shows a WGSL syntax error at its line and column', async () => {
    await choose('vadd-one', { starter: true });
    const lines = (await code()).split('\n');
    assert.match(lines[11], /c\[i\] = a\[i\] \+ b\[i\];/);
    lines[11] = '    c[i] = a[i] + ;';
    await setCode(lines.join('\n'));
    const r = await runAndWait();
    assert.equal(r.cls, 'result error');
    assert.match(r.text, /at line 12, column \d+/);
    const first = page.locator('#compiler li.error').first();
    assert.match(await first.innerText(), /^line 12, column \d+\s*error:/);
    assert.deepEqual(await page.locator('.gutter .mark-error').evaluateAll((els) => els.map((e) => e.dataset.line)), ['12']);
    assert.equal(await page.locator('.marks .squiggle-error').count(), 1);
    await screenshot(page, 'lab-compile-error.png');
  });

  it('explains a workgroup larger than the device allows, as CUDA’s 1024-thread limit', async () => {
    await choose('vadd-one', { starter: true });
    const max = await page.evaluate(() => window.lab.gpu.limit('maxComputeInvocationsPerWorkgroup'));
    await setCode((await code()).replace('@workgroup_size(64)', `@workgroup_size(${max * 4})`));
    const r = await runAndWait();
    assert.equal(r.cls, 'result limit', r.text);
    assert.match(r.text, new RegExp(`asks for ${max * 4} invocations in one workgroup, and this device runs at most ${max}`));
    assert.match(r.text, /CUDA's limit of 1024 threads per block/);
    await screenshot(page, 'lab-limit.png');
    // Too many workgroups in one dimension: the grid-stride lesson.
    await choose('vadd-grid', { solution: true });
    await page.fill('#workgroups', '70000');
    const g = await runAndWait();
    assert.equal(g.cls, 'result limit', g.text);
    assert.match(g.text, /asks for 70000 workgroups along x.*grid-stride loop/);
  });

  it('reports the wrong elements of a kernel that writes out of bounds, and the page lives on', async () => {
    await choose('vadd-grid', { solution: true });
    // Writes shifted by 7 with no guard: the first 7 elements are never
    // written, and the last invocations write past the end of c, where
    // robustness keeps the writes inside the buffer (where exactly is up to
    // the implementation: SwiftShader loses most of this kernel's writes).
    await setCode((await code()).replace('if (i >= params.n) {', 'if (i >= params.n + 64u) {').replace('c[i] = a[i] + b[i];', 'c[i + 7u] = a[i] + b[i];'));
    const r = await runAndWait();
    assert.equal(r.cls, 'result wrong', r.text);
    assert.match(r.text, /Wrong indices 0 to \d+/);
    assert.equal(await page.evaluate(() => window.lab.status), 'ready');
  });

  it('times the kernel: timestamps, wall times with and without waiting, the CPU reference, bytes/s', async () => {
    await choose('vadd-grid', { solution: true });
    await page.fill('#repeats', '3');
    const r = await runAndWait();
    assert.equal(r.cls, 'result ok', r.text);
    const rows = await page.locator('#timing tr[data-row]').evaluateAll((trs) =>
      Object.fromEntries(trs.map((tr) => [tr.cells[0].textContent, tr.cells[1].textContent])),
    );
    const stamps = await page.evaluate(() => window.lab.gpu.hasTimestamps);
    // SwiftShader has timestamp-query; an adapter without it shows the fallback.
    if (stamps) assert.match(rows['GPU kernel (timestamp queries)'], /^\d+\.\d+ ms$/);
    else assert.equal(rows['GPU kernel (timestamp queries)'], 'not available');
    assert.match(rows['wall, submit() returned'], /^\d+\.\d+ ms$/);
    assert.match(rows['wall, waited for the queue'], /^\d+\.\d+ ms$/);
    assert.match(rows['CPU reference'], /^\d+\.\d+ ms$/);
    assert.match(await page.locator('#timing').innerText(), /GB\/s.*this device copies [\d.]+ GB\/s/);
    const last = await page.evaluate(() => window.lab.state.last);
    assert.equal(last.runs.length, 3);
    for (const run of last.runs) assert.ok(run.submitMs <= run.doneMs, 'submit returns before the work is done');
    if (stamps) assert.ok(last.gpuMs > 0);
  });

  it('plots time against input size', async () => {
    await choose('vadd-grid', { solution: true });
    await page.fill('#sweep-max', '16384');
    await page.click('#sweep');
    await page.waitForFunction(() => window.lab.state.sweep?.length === 3 && window.lab.state.busy === 0, null, { timeout: 120_000 });
    assert.equal(await page.locator('#plot').isVisible(), true);
    assert.equal(await page.locator('#sweep-table tbody tr').count(), 3);
    assert.match(await page.locator('#sweep-info').innerText(), /GPU|CPU/);
    await page.locator('#h-timing').scrollIntoViewIfNeeded();
    await screenshot(page.locator('#h-timing').locator('..'), 'lab-timing.png');
  });

  it('keeps the code through a reload and in a copied link', async () => {
    await choose('primes', { solution: true });
    const mine = `${await code()}// my primes, ${Date.now()}\n`;
    await setCode(mine);
    await page.fill('#n', '5000');
    await page.click('#copy-link');
    await page.waitForFunction(() => document.getElementById('link').value.includes('#ex=primes'));
    const link = await page.inputValue('#link');
    assert.match(link, /#ex=primes&.*code=z/);
    await page.reload();
    await page.waitForFunction(() => window.lab?.status === 'ready');
    assert.equal(await code(), mine);
    assert.equal(await page.inputValue('#n'), '5000');
    // A link opened where nothing is stored (another student's browser).
    await page.evaluate(() => localStorage.clear());
    await page.goto('about:blank');
    await page.goto(link);
    await page.waitForFunction(() => window.lab?.status === 'ready');
    assert.equal(await page.inputValue('#exercise'), 'primes');
    assert.equal(await code(), mine);
    const r = await runAndWait();
    assert.equal(r.cls, 'result ok', r.text);
    assert.match(r.text, /found 669 primes below 5000/);
  });

  it('exports the CuPy RawKernel and the .wgsl file', async () => {
    await choose('hist-shared', { solution: true });
    assert.match(await page.locator('#cupy').textContent(), /cp\.RawKernel\(r'''[\s\S]*__shared__ unsigned int local\[256\]/);
    const download = page.waitForEvent('download');
    await page.click('#dl-wgsl');
    const d = await download;
    assert.equal(d.suggestedFilename(), 'hist-shared.wgsl');
    assert.equal(fs.readFileSync(await d.path(), 'utf8'), await code());
  });

  it('says so and makes a new device when the GPU device is lost', async () => {
    await choose('vadd-one', { solution: true });
    await page.evaluate(() => window.lab.loseDevice());
    await page.waitForFunction(() => !document.getElementById('banner').hidden);
    assert.match(await page.locator('#banner').innerText(), /The GPU device was lost \(destroyed.*the lab made a new one \(1 so far\)/);
    const r = await runAndWait();
    assert.equal(r.cls, 'result ok', r.text);
  });

  it('stops a kernel that runs too long by making a new device, and says so', async () => {
    await choose('convolve', { solution: true });
    await page.selectOption('#input', 'sample:camera.png');
    await page.evaluate(() => {
      document.getElementById('banner').hidden = true;
      window.lab.gpu.stuckMs = 1; // the 512×512 convolution takes longer on SwiftShader
    });
    const losses = await page.evaluate(() => window.lab.gpu.losses);
    const r = await runAndWait();
    await page.evaluate(() => {
      window.lab.gpu.stuckMs = window.lab.STUCK_MS;
    });
    assert.equal(r.cls, 'result error', r.text);
    assert.match(r.text, /still running after 0\.001 s: the lab destroyed the GPU device to stop it and is making a new one/);
    await page.waitForFunction((n) => window.lab.gpu.losses === n + 1 && !document.getElementById('banner').hidden, losses);
    assert.match(await page.locator('#banner').innerText(), /the lab made a new one/);
    const again = await runAndWait();
    assert.equal(again.cls, 'result ok', again.text);
  });

  it('raised no page errors', () => {
    assert.deepEqual(pageErrors, []);
  });
});

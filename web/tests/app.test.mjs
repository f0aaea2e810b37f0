// Browser test of the web app: real WebGPU (SwiftShader in headless
// Chromium) against the CPU reference, through the page's test hook.
// Run with `cargo xtask test-web`, which builds, serves and sets GPUSCOPE_URL.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const URL = process.env.GPUSCOPE_URL;
const CHROMIUM = process.env.GPUSCOPE_CHROMIUM || '/usr/bin/chromium';
const SAMPLES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'samples');

// SwiftShader's float sums differ from the f64 CPU reference by rounding:
// GPU results must agree to 1e-4 of the largest magnitude (relative).
const RTOL = 1e-4;

// Headless Chromium flags. Checked with Debian's Chromium 156 on a machine
// without a GPU: --enable-unsafe-webgpu alone gives a real WebGPU adapter
// (Dawn on SwiftShader: vendor "google", architecture "swiftshader",
// isFallbackAdapter true, 1 GiB storage bindings, timestamp-query) to pages
// of a secure context such as http://127.0.0.1 (a data: URL gets no
// navigator.gpu at all). Adding --use-angle=swiftshader,
// --use-webgpu-adapter=swiftshader or --enable-features=Vulkan changed
// nothing there, so they are left out; the rest keeps Chromium offline.
const ARGS = [
  '--enable-unsafe-webgpu',
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];

let context;
let page;
let userDataDir;
const pageErrors = [];

before(async () => {
  assert.ok(URL, 'GPUSCOPE_URL is not set: run the browser tests with `cargo xtask test-web`');
  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuscope-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (e) => pageErrors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') pageErrors.push(`console: ${m.text()}`);
  });
  await page.goto(URL);
  await page.waitForFunction(() => ['ready', 'failed'].includes(window.gpuscope?.status), null, {
    timeout: 120_000,
  });
});

after(async () => {
  await context?.close();
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
});

/** Max |gpu - cpu| and max |cpu| computed in the page (no big transfers). */
function compareInPage(name, params) {
  return page.evaluate(
    async ([name, params]) => {
      const r = await window.gpuscope[name](params);
      const input = (await window.gpuscope.state.image).data;
      let maxDiff = 0;
      let maxAbs = 0;
      let moved = 0;
      let ones = 0;
      let mismatches = 0;
      for (let i = 0; i < r.cpu.length; i++) {
        maxDiff = Math.max(maxDiff, Math.abs(r.gpu[i] - r.cpu[i]));
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
        maxDiff,
        maxAbs,
        moved,
        ones,
        mismatches,
        gpuMs: r.gpuMs,
        cpuMs: r.cpuMs,
      };
    },
    [name, params],
  );
}

function assertClose(r, what) {
  assert.equal(r.gpuType, 'Float32Array', what);
  assert.equal(r.cpuType, 'Float64Array', what);
  assert.equal(r.gpuLength, r.length, what);
  assert.equal(r.length, r.shape.reduce((a, b) => a * b, 1), what);
  assert.ok(r.maxAbs > 0, `${what}: an all-zero result`);
  assert.ok(
    r.maxDiff <= RTOL * r.maxAbs,
    `${what}: max |GPU - CPU| = ${r.maxDiff} exceeds ${RTOL} x ${r.maxAbs}`,
  );
}

describe('gpuscope web app', { timeout: 300_000 }, () => {
  it('starts with the sample image on a real WebGPU adapter', async () => {
    const state = await page.evaluate(() => ({
      status: window.gpuscope.status,
      device: window.gpuscope.state.device,
      gpuError: window.gpuscope.state.gpuError,
      image: window.gpuscope.image(),
      message: window.gpuscope.message,
    }));
    assert.equal(state.gpuError, null, `WebGPU is required for this test: ${state.gpuError}`);
    assert.equal(state.status, 'ready', state.message);
    assert.match(state.device.backend, /WebGpu/i);
    assert.ok(state.device.maxBindingSize >= 128 * 2 ** 20, JSON.stringify(state.device));
    assert.deepEqual(state.image, { name: 'coins.png', shape: [303, 384], dtype: 'uint8' });
    // The adapter the page used is the browser's own, not a polyfill.
    const adapter = await page.evaluate(async () => {
      const a = await navigator.gpu.requestAdapter();
      return a && { vendor: a.info.vendor, architecture: a.info.architecture, isGPUAdapter: a instanceof GPUAdapter };
    });
    assert.ok(adapter?.isGPUAdapter, 'navigator.gpu.requestAdapter() gave no adapter');
    console.log(`  adapter: ${JSON.stringify(adapter)}; device: ${JSON.stringify(state.device)}`);
    // The page ran the Gaussian on start-up and shows its timing.
    assert.match(await page.textContent('#t-gpu'), /ms/);
    assert.equal(await page.isVisible('#banner'), false);
  });

  it('gaussian_filter on WebGPU matches the CPU reference', async () => {
    const cases = [
      { sigma: 2, mode: 'reflect', cval: 0, truncate: 4.0 },
      { sigma: [1, 3.5], mode: 'constant', cval: 50, truncate: 4.0 },
      { sigma: 0.7, mode: 'wrap', cval: 0, truncate: 2.5 },
      { sigma: 5, mode: 'mirror', cval: 0, truncate: 4.0 },
      { sigma: 3, mode: 'nearest', cval: 0, truncate: 4.0 },
    ];
    for (const params of cases) {
      const r = await compareInPage('runGaussian', params);
      const what = `gaussian ${JSON.stringify(params)}`;
      assertClose(r, what);
      assert.ok(r.moved > 1, `${what}: the result equals the input`);
      console.log(`  ${what}: max diff ${r.maxDiff.toExponential(2)}, GPU ${r.gpuMs.toFixed(1)} ms, CPU ${r.cpuMs.toFixed(1)} ms`);
    }
  });

  it('convolve on WebGPU matches the CPU reference', async () => {
    const r = await compareInPage('runConvolve', {
      weights: [1, 2, 1, 0, 0, 0, -1, -2, -1],
      weightsShape: [3, 3],
      mode: 'reflect',
      cval: 0,
    });
    assertClose(r, 'convolve sobel');
  });

  it('threshold on WebGPU equals the CPU mask exactly', async () => {
    for (const value of [100, 100.5, 0, 254]) {
      const r = await compareInPage('runThreshold', { value });
      assert.equal(r.gpuType, 'Uint8Array');
      assert.equal(r.mismatches, 0, `threshold ${value}: ${r.mismatches} pixels differ`);
      assert.equal(r.gpuLength, 303 * 384);
      if (value === 100) assert.ok(r.ones > 0 && r.ones < r.length, `threshold 100: ${r.ones} pixels above`);
    }
  });

  it('shows invalid parameters and corrupt files as messages, and keeps working', async () => {
    await page.fill('input[name=sigma]', '-1');
    await page.click('#run');
    await page.waitForFunction(() => /sigma/.test(window.gpuscope.message));
    assert.match(await page.textContent('#message'), /invalid sigma: -1/);
    assert.ok(await page.isVisible('#message'));

    await page.setInputFiles('#file', {
      name: 'broken.png',
      mimeType: 'image/png',
      buffer: Buffer.from('this is not a PNG file'),
    });
    await page.waitForFunction(() => /broken\.png/.test(window.gpuscope.message));
    assert.match(await page.textContent('#message'), /Cannot open broken\.png/);
    // The previous image stays loaded and the app still computes.
    assert.equal((await page.evaluate(() => window.gpuscope.image())).name, 'coins.png');
    await page.fill('input[name=sigma]', '2');
    await page.click('#run');
    await page.waitForFunction(() => window.gpuscope.message === '' && window.gpuscope.state.busy === 0);
  });

  it('opens a second file through the file picker and runs on it', async () => {
    await page.setInputFiles('#file', path.join(SAMPLES, 'camera.png'));
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'camera.png');
    assert.deepEqual(await page.evaluate(() => window.gpuscope.image().shape), [512, 512]);
    const r = await compareInPage('runGaussian', { sigma: 1.5, mode: 'reflect', cval: 0, truncate: 4.0 });
    assertClose(r, 'gaussian on camera.png');
    const t = await compareInPage('runThreshold', { value: 128 });
    assert.equal(t.mismatches, 0);
  });

  it('logged no page errors', () => {
    assert.deepEqual(pageErrors, []);
  });
});

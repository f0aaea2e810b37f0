// Without WebGPU the page must say so and still compute on the CPU.
// --disable-webgpu leaves navigator.gpu defined but gives no adapter: the
// case of a blocklisted GPU.
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const URL = process.env.GPUSCOPE_URL;
let context;
let userDataDir;

before(async () => {
  assert.ok(URL, 'GPUSCOPE_URL is not set: run the browser tests with `cargo xtask test-web`');
  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuscope-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.GPUSCOPE_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--disable-webgpu', '--no-sandbox', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'],
  });
});

after(async () => {
  await context?.close();
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
});

it('falls back to the CPU path with a visible banner', { timeout: 120_000 }, async () => {
  const page = context.pages()[0] ?? (await context.newPage());
  await page.goto(URL);
  await page.waitForFunction(() => ['ready', 'failed'].includes(window.gpuscope?.status), null, {
    timeout: 100_000,
  });
  assert.equal(await page.evaluate(() => window.gpuscope.status), 'ready');
  assert.ok(await page.isVisible('#banner'));
  assert.match(await page.textContent('#banner'), /WebGPU/);
  assert.match(await page.textContent('#t-cpu'), /ms/);
  const r = await page.evaluate(async () => {
    const r = await window.gpuscope.runGaussian({ sigma: 2 });
    return { gpu: r.gpu, type: r.cpu.constructor.name, n: r.cpu.length };
  });
  assert.deepEqual(r, { gpu: null, type: 'Float64Array', n: 303 * 384 });
});

// Without WebGPU the page must say so and still compute on the CPU.
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { NO_WEBGPU, launch, openApp, waitIdle } from './browser.mjs';

let browser;
const errors = [];

before(async () => {
  browser = await launch(NO_WEBGPU);
});

after(async () => {
  await browser?.close();
});

it('falls back to the CPU path with a visible banner', { timeout: 180_000 }, async () => {
  const page = await openApp(browser.context, '#sample=coins.png&1.op=gaussian_filter&1.sigma=2&2.op=threshold&2.value=110', errors);
  await waitIdle(page);
  assert.equal(await page.evaluate(() => window.gpuscope.status), 'ready');
  assert.ok(await page.isVisible('#banner'));
  assert.match(await page.textContent('#banner'), /WebGPU/);
  assert.match(await page.textContent('#banner'), /CPU/);
  assert.match(await page.textContent('#device'), /unavailable/);
  // The chain of the link ran on the CPU; the GPU choice is off.
  const s = await page.evaluate(() => ({
    outputs: window.gpuscope.state.outputs.map((o) => [o.op, o.where, o.kind, o.data.constructor.name]),
    where: document.querySelector('#where').value,
    gpuOption: document.querySelector('#where option[value=gpu]').disabled,
    compare: document.querySelector('#compare').disabled,
    message: window.gpuscope.message,
  }));
  assert.deepEqual(s.outputs, [
    ['gaussian_filter', 'cpu', 'image', 'Float64Array'],
    ['threshold', 'cpu', 'mask', 'Uint8Array'],
  ]);
  assert.deepEqual([s.where, s.gpuOption, s.compare, s.message], ['cpu', true, true, '']);
  assert.match(await page.textContent('#run-info'), /on the CPU in [\d.]+ ms/);
  const r = await page.evaluate(async () => {
    const r = await window.gpuscope.runGaussian({ sigma: 2 });
    const out = window.gpuscope.state.outputs[0].data;
    let same = 0;
    for (let i = 0; i < out.length; i++) same += out[i] === r.cpu[i];
    return { gpu: r.gpu, type: r.cpu.constructor.name, n: r.cpu.length, same };
  });
  assert.deepEqual(r, { gpu: null, type: 'Float64Array', n: 303 * 384, same: 303 * 384 });
  // The CPU reference's float result downloads as float64, its mask as uint8.
  const header = async (layer) => {
    await page.selectOption('#layer', layer);
    const [d] = await Promise.all([page.waitForEvent('download'), page.click('#dl-npy')]);
    const bytes = fs.readFileSync(await d.path());
    return bytes.subarray(10, 10 + bytes.readUInt16LE(8)).toString('latin1');
  };
  assert.match(await header('0'), /'descr': '<f8'.*'shape': \(303, 384\)/);
  assert.match(await header('1'), /'descr': '\|u1'/);
  // The form still runs.
  await page.fill('input[name=sigma][data-step="0"]', '1');
  await page.click('#run');
  await page.waitForFunction(() => window.gpuscope.state.outputs[0]?.params.sigma[0] === 1 && window.gpuscope.state.busy === 0);
  assert.deepEqual(errors, []);
});

it('says how to serve the app when index.html is opened as a file', { timeout: 60_000 }, async () => {
  const page = await browser.context.newPage();
  const file = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'index.html');
  await page.goto(`file://${file}`);
  await page.waitForFunction(() => !document.querySelector('#banner').hidden);
  assert.match(await page.textContent('#banner'), /opened as a file.*cargo xtask serve/);
  await page.close();
});

// Zarr stores in the page: the committed fixtures of crates/io (made by
// zarr-python) picked as folders with "Open a Zarr folder…", read chunk by
// chunk in the decoding worker; every plane shown equals the fixture's .npy
// twin (zarr-python's array), read here in node. Damaged stores give one
// clear message.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { WEBGPU, launch, openApp, screenshot, waitIdle } from './browser.mjs';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'crates', 'io', 'tests', 'fixtures', 'zarr');
const fixture = (name) => path.join(FIXTURES, name);

/** A C-order .npy file as {shape, data: number[]}. */
function readNpy(name) {
  const b = fs.readFileSync(fixture(name));
  assert.equal(b.subarray(1, 6).toString('latin1'), 'NUMPY', name);
  const headerLen = b[6] === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = b[6] === 1 ? 10 : 12;
  const header = b.subarray(start, start + headerLen).toString('latin1');
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter(Boolean).map(Number);
  assert.match(header, /'fortran_order':\s*False/);
  const body = Buffer.from(b.subarray(start + headerLen));
  if (descr === '>u2') return { shape, data: Array.from({ length: body.length / 2 }, (_, i) => body.readUInt16BE(2 * i)) };
  const arrays = { '|u1': Uint8Array, '<u2': Uint16Array, '<i2': Int16Array, '<u4': Uint32Array, '<i4': Int32Array, '<f4': Float32Array, '<f8': Float64Array };
  const T = arrays[descr];
  assert.ok(T, `${name}: dtype ${descr} not handled by this test`);
  return { shape, data: Array.from(new T(body.buffer, body.byteOffset, body.length / T.BYTES_PER_ELEMENT)) };
}

const planeOf = (npy, z) => {
  const per = npy.shape.slice(-2).reduce((a, b) => a * b, 1);
  return Array.from(Float32Array.from(npy.data.slice(z * per, (z + 1) * per)));
};

// [store, dtype, what it exercises]
const STORES = [
  ['v3_gzip_u16', 'uint16'],
  ['v3_zstd_f32', 'float32'],
  ['v3_sharded_u32', 'uint32'],
  ['v3_sharded_start', 'uint8'],
  ['blosc_v3', 'uint8'],
  ['v2_zlib_u8', 'uint8'],
  ['v2_gzip_be_u16', 'uint16'],
  ['blosc_v2_lz4_u16', 'uint16'],
  ['ome_v3', 'uint16'],
  ['ome_v2', 'uint16'],
];

describe('Zarr stores in the page', { timeout: 600_000 }, () => {
  let browser;
  const errors = [];
  before(async () => {
    browser = await launch(WEBGPU);
  });
  after(async () => {
    await browser?.close();
    assert.deepEqual(errors, [], 'page errors');
  });

  const pageImage = (page) => page.evaluate(() => ({ ...window.gpuscope.image(), data: Array.from(window.gpuscope.state.image.data) }));

  it('opens v3, v2, sharded, blosc and OME-Zarr folders; every plane equals zarr-python', async () => {
    const page = await openApp(browser.context, '#1.op=gaussian_filter', errors);
    for (const [name, dtype] of STORES) {
      const want = readNpy(`${name}.npy`);
      const planes = want.shape.length > 2 ? want.shape[0] : 1;
      await page.setInputFiles('#zarr-dir', fixture(`${name}.zarr`));
      await page.waitForFunction((n) => window.gpuscope.image()?.name.startsWith(`${n}.zarr`), name, { timeout: 60_000 });
      await waitIdle(page);
      assert.equal(await page.evaluate(() => window.gpuscope.message), '', name);
      const z = await page.evaluate(() => window.gpuscope.zarr());
      assert.deepEqual(z.shape, want.shape, name);
      assert.equal(z.dtype, dtype, name);
      assert.equal(z.frames, planes, name);
      if (name.startsWith('ome')) assert.equal(z.path, 's0', `${name}: the first level`);
      for (const k of planes > 1 ? [0, planes - 1] : [0]) {
        if (k > 0) {
          await page.evaluate((v) => {
            const r = document.getElementById('zarr-frame');
            r.value = String(v);
            r.dispatchEvent(new Event('change'));
          }, k + 1);
          await page.waitForFunction((v) => window.gpuscope.image()?.name.endsWith(`plane ${v}`), k + 1, { timeout: 60_000 });
          await waitIdle(page);
        }
        const img = await pageImage(page);
        assert.deepEqual(img.shape, want.shape.slice(-2), `${name} plane ${k}`);
        assert.deepEqual(img.data, planeOf(want, k), `${name} plane ${k}: differs from zarr-python`);
      }
      if (name === 'v3_sharded_u32') {
        assert.equal(await page.isVisible('#zarr-frame'), true);
        assert.equal(await page.textContent('#zarr-frame-out'), '4 of 4');
        await screenshot(page, 'zarr-sharded-plane4.png');
      }
    }
    await page.close();
  });

  it('gives one clear message for a store without zarr.json or with bad JSON', async () => {
    const page = await openApp(browser.context, '#1.op=gaussian_filter', errors);
    const before = await page.evaluate(() => window.gpuscope.image().name);
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuscope-zarr-'));
    try {
      const store = path.join(tmp, 'broken.zarr');
      fs.cpSync(fixture('v3_gzip_u16.zarr'), store, { recursive: true });
      fs.writeFileSync(path.join(store, 'zarr.json'), '{ "zarr_format": 3, ');
      const missing = path.join(tmp, 'missing.zarr');
      fs.cpSync(fixture('v3_gzip_u16.zarr'), missing, { recursive: true });
      fs.rmSync(path.join(missing, 'zarr.json'));
      const cases = [
        [store, /^Cannot open broken\.zarr: zarr\.json is not valid JSON/],
        [missing, /^Cannot open missing\.zarr: the store holds no zarr\.json, \.zarray or \.zgroup: not a Zarr array or group/],
      ];
      for (const [dir, re] of cases) {
        await page.setInputFiles('#zarr-dir', dir);
        await page.waitForFunction(() => /^Cannot/.test(window.gpuscope.message), null, { timeout: 60_000 });
        const text = await page.textContent('#message');
        assert.match(text, re);
        assert.ok(!text.includes('\n'), `one line: ${text}`);
        console.log(`  ${text}`);
        // The previous image stays loaded.
        assert.equal(await page.evaluate(() => window.gpuscope.image().name), before);
        await page.evaluate(() => {
          document.getElementById('message').textContent = '';
        });
      }
      await screenshot(page, 'zarr-missing.png');
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
    await page.close();
  });
});

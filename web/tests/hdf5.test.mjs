// HDF5/NeXus in the page: the committed fixtures of crates/io (made by
// h5py + hdf5plugin) opened through the file picker, read by byte ranges in
// the decoding worker; every frame shown equals the fixture's .npy twin
// (h5py's array), read here in node.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { WEBGPU, launch, openApp, screenshot, waitIdle } from './browser.mjs';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'crates', 'io', 'tests', 'fixtures', 'hdf5');
const fixture = (name) => path.join(FIXTURES, name);

/** A little-endian .npy file as {shape, data: number[]}. */
function readNpy(name) {
  const b = fs.readFileSync(fixture(name));
  assert.equal(b.subarray(1, 6).toString('latin1'), 'NUMPY', name);
  const major = b[6];
  const headerLen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = b.subarray(start, start + headerLen).toString('latin1');
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter(Boolean).map(Number);
  assert.match(header, /'fortran_order':\s*False/);
  const body = b.subarray(start + headerLen);
  const arrays = { '<u1': Uint8Array, '|u1': Uint8Array, '<u2': Uint16Array, '<i2': Int16Array, '<u4': Uint32Array, '<i4': Int32Array, '<f4': Float32Array, '<f8': Float64Array };
  const T = arrays[descr];
  assert.ok(T, `${name}: dtype ${descr} not handled by this test`);
  const copy = Buffer.from(body);
  const data = Array.from(new T(copy.buffer, copy.byteOffset, copy.length / T.BYTES_PER_ELEMENT));
  return { shape, data };
}

/** Frame z of an npy stack. */
function frameOf(npy, z) {
  const per = npy.shape.slice(1).reduce((a, b) => a * b, 1);
  return npy.data.slice(z * per, (z + 1) * per);
}

// Values as the page holds them (float32).
const f32 = (xs) => Array.from(Float32Array.from(xs));

// The Eiger fixture's count cutoff (its saturation_value; the native
// reader's test checks it is 300).
const CUTOFF = 300;

/** An Eiger frame as the page shows it: the detector's pixel mask and count
 * cutoff applied the CBF way (-1 gap, -2 bad pixel or over the cutoff). */
function masked(frame, mask) {
  return f32(frame.map((v, i) => (mask[i] & 1 ? -1 : mask[i] !== 0 || v > CUTOFF ? -2 : v)));
}

describe('HDF5/NeXus files in the page', { timeout: 600_000 }, () => {
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

  it('opens an Eiger master picked with its data files, finds spots on frame 1 and steps frames', async () => {
    const page = await openApp(browser.context, '#1.op=find_spots', errors);
    const eiger = readNpy('eiger_data.npy');
    assert.deepEqual(eiger.shape, [6, 160, 192]);
    const mask = readNpy('eiger_pixel_mask.npy').data;
    const want = (z) => masked(frameOf(eiger, z), mask);
    await page.setInputFiles('#file', [fixture('eiger_data_000001.h5'), fixture('eiger_master.h5'), fixture('eiger_data_000002.h5')]);
    await page.waitForFunction(() => window.gpuscope.image()?.name.startsWith('eiger_master.h5::'), null, { timeout: 60_000 });
    await waitIdle(page);
    assert.equal(await page.evaluate(() => window.gpuscope.message), '');
    const h = await page.evaluate(() => window.gpuscope.hdf5());
    assert.deepEqual(h.paths, ['/entry/data/data_000001', '/entry/data/data_000002']);
    assert.equal(h.frames, 6);
    assert.ok(h.tree.some((n) => n.path === '/entry/instrument/detector/detectorSpecific/pixel_mask'), 'the tree lists the pixel mask');
    let img = await pageImage(page);
    assert.deepEqual([img.shape, img.dtype], [[160, 192], 'uint32']);
    assert.deepEqual(img.data, want(0), 'frame 1 differs from h5py (masked)');
    assert.ok(img.data.includes(-1) && img.data.includes(-2), 'the mask marks gaps and bad pixels');
    // The chain ran spot finding on frame 1: a table of spots.
    const spots = await page.evaluate(() => {
      const o = window.gpuscope.state.outputs[0];
      return { kind: o.kind, rows: o.table?.rows?.length ?? o.count };
    });
    assert.equal(spots.kind, 'table');
    assert.ok(spots.rows > 0, 'no spots found on frame 1');
    console.log(`  eiger frame 1: ${spots.rows} spots`);
    // The same spots as the CPU reference finds on h5py's frame 1.
    const ref = await page.evaluate(async (data) => {
      const r = await window.gpuscope.runOp('cpu', 'find_spots', { data: Float32Array.from(data), shape: [160, 192] }, {});
      return r.table.rows.length;
    }, want(0));
    assert.equal(spots.rows, ref);
    await screenshot(page, 'hdf5-eiger-frame1.png');

    // The frame slider: frame 5 lies in the second data file.
    assert.equal(await page.isVisible('#h5-frame'), true);
    await page.evaluate(() => {
      const r = document.getElementById('h5-frame');
      r.value = '5';
      r.dispatchEvent(new Event('input'));
      r.dispatchEvent(new Event('change'));
    });
    await page.waitForFunction(() => window.gpuscope.image()?.name.endsWith('frame 5'));
    await waitIdle(page);
    img = await pageImage(page);
    assert.deepEqual(img.data, want(4), 'frame 5 differs from h5py (masked)');
    assert.equal(await page.textContent('#h5-frame-out'), '5 of 6');
    await screenshot(page, 'hdf5-eiger-frame5.png');

    // A dataset picked from the tree: one data file's link alone.
    await page.selectOption('#h5-dataset', '/entry/data/data_000002');
    // (The name changes once the new dataset's frame 1 is shown.)
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'eiger_master.h5::/entry/data/data_000002 frame 1');
    assert.equal(await page.evaluate(() => window.gpuscope.hdf5().frames), 3);
    await waitIdle(page);
    img = await pageImage(page);
    assert.deepEqual(img.data, want(3));
    await page.close();
  });

  it('opens the NXtomo scan at its NeXus default and removes outliers', async () => {
    const page = await openApp(browser.context, '#1.op=remove_outliers', errors);
    const tomo = readNpy('nxtomo.npy');
    await page.setInputFiles('#file', fixture('nxtomo.nxs'));
    await page.waitForFunction(() => window.gpuscope.image()?.name.startsWith('nxtomo.nxs::'), null, { timeout: 60_000 });
    await waitIdle(page);
    assert.equal(await page.evaluate(() => window.gpuscope.message), '');
    const h = await page.evaluate(() => window.gpuscope.hdf5());
    assert.deepEqual(h.paths, ['/entry/data/data']);
    assert.equal(h.frames, tomo.shape[0]);
    const img = await pageImage(page);
    assert.deepEqual(img.shape, tomo.shape.slice(1));
    assert.deepEqual(img.data, f32(frameOf(tomo, 0)));
    const out = await page.evaluate(() => {
      const o = window.gpuscope.state.outputs[0];
      return { op: o.op, shape: o.shape, n: o.data.length };
    });
    assert.equal(out.op, 'remove_outliers');
    assert.deepEqual(out.shape, tomo.shape.slice(1));
    // The page's result equals the CPU reference on h5py's frame.
    const same = await page.evaluate(async ([data, shape]) => {
      const gs = window.gpuscope;
      const mine = gs.state.outputs[0];
      const r = await gs.runOp(mine.where, 'remove_outliers', { data: Float32Array.from(data), shape }, {});
      return Array.from(r.data).every((v, i) => v === mine.data[i]);
    }, [frameOf(tomo, 0), tomo.shape.slice(1)]);
    assert.ok(same, 'remove_outliers on the page differs from the same run on h5py’s frame');
    await screenshot(page, 'hdf5-nxtomo.png');
    await page.close();
  });

  it('gives one clear message for damaged files and a missing data file', async () => {
    const page = await openApp(browser.context, '#1.op=gaussian_filter', errors);
    const before = await page.evaluate(() => window.gpuscope.image().name);
    const master = fs.readFileSync(fixture('eiger_master.h5'));
    const lz4 = fs.readFileSync(fixture('lz4.h5'));
    const cases = [
      [[{ name: 'eiger_master.h5', mimeType: 'application/x-hdf5', buffer: master.subarray(0, 4000) }], /Cannot open eiger_master\.h5: .*(truncated|ends early|damaged)/],
      [[{ name: 'lz4.h5', mimeType: 'application/x-hdf5', buffer: lz4.subarray(0, 100) }], /Cannot open lz4\.h5/],
      [[{ name: 'notes.h5', mimeType: 'application/x-hdf5', buffer: Buffer.from('not an HDF5 file at all') }], /Cannot open notes\.h5/],
      [[fixture('vds.h5'), fixture('vds_source.h5')], /Cannot open vds\.h5: .*virtual dataset, which the page does not read/],
      [[fixture('eiger_master.h5'), fixture('eiger_data_000001.h5')], /Cannot open eiger_master\.h5: .*eiger_data_000002\.h5.*pick the Eiger data files together with their master/],
    ];
    for (const [files, re] of cases) {
      await page.setInputFiles('#file', files);
      await page.waitForFunction(() => /^Cannot/.test(window.gpuscope.message), null, { timeout: 60_000 });
      const text = await page.textContent('#message');
      assert.match(text, re);
      assert.ok(!text.includes('\n'), `one line: ${text}`);
      console.log(`  ${text}`);
      // The previous image stays loaded.
      assert.equal(await page.evaluate(() => window.gpuscope.image().name), before);
      if (files.length === 2) await screenshot(page.locator('#message'), 'hdf5-missing-data-file.png');
      await page.evaluate(() => {
        document.getElementById('message').textContent = '';
      });
    }
    await page.close();
  });
});

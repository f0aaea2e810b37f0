// Browser tests of the view modules (web/view/): diffraction frames
// (display, rings, d-spacing, series), astronomy (zscale, FITS orientation,
// WCS readout, markers), orthogonal views, outlier counts, line profile,
// rectangle statistics, zoom in the URL and the view state file.
// Expected astropy values: web/tests/make_expected.py.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { SAMPLES, WEBGPU, fits, launch, npy, openApp, screenshot, waitIdle } from './browser.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const FIXTURES = path.join(HERE, 'fixtures');
const EXPECTED = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'expected_views.json'), 'utf8'));
const I03 = 'DLS_I03_smargon_0001.cbf.gz';
// A cheap chain (the CPU, one threshold) with the input on view.
const CHEAP = 'on=cpu&1.op=threshold&1.value=100000&show=0';

/** Moves the pointer over the centre of data pixel (x, y); returns the readout. */
async function hoverPixel(page, x, y) {
  await page.locator('#view').scrollIntoViewIfNeeded();
  const at = await page.evaluate(([x, y]) => {
    const v = window.gpuscope.viewer();
    const [cx, cy] = v.toCanvas(x + 0.5, y + 0.5);
    const r = v.canvas.getBoundingClientRect();
    const ratio = v.canvas.width / r.width;
    return [r.left + cx / ratio, r.top + cy / ratio];
  }, [x, y]);
  await page.mouse.move(at[0], at[1]);
  return page.locator('#cursor').textContent();
}

/** Page coordinates of data point (x, y) (continuous). */
function pagePoint(page, x, y) {
  return page.evaluate(([x, y]) => {
    const v = window.gpuscope.viewer();
    const [cx, cy] = v.toCanvas(x, y);
    const r = v.canvas.getBoundingClientRect();
    const ratio = v.canvas.width / r.width;
    return [r.left + cx / ratio, r.top + cy / ratio];
  }, [x, y]);
}

async function dragPixels(page, [x0, y0], [x1, y1]) {
  await page.locator('#view').scrollIntoViewIfNeeded();
  const a = await pagePoint(page, x0 + 0.5, y0 + 0.5);
  const b = await pagePoint(page, x1 + 0.5, y1 + 0.5);
  await page.mouse.move(...a);
  await page.mouse.down();
  await page.mouse.move((a[0] + b[0]) / 2, (a[1] + b[1]) / 2);
  await page.mouse.move(...b);
  await page.mouse.up();
}

/** The header fields of the I03 frame, read here (not by the page). */
function i03Header() {
  const text = zlib.gunzipSync(fs.readFileSync(path.join(SAMPLES, I03))).toString('latin1', 0, 4000);
  const num = (k) => Number(new RegExp(`# ${k} +\\(?([-\\d.e]+)`).exec(text)[1]);
  const beam = /# Beam_xy \(([\d.]+), ([\d.]+)\)/.exec(text);
  return { beam: [Number(beam[1]), Number(beam[2])], distanceM: num('Detector_distance'), wavelength: num('Wavelength'), pixelM: num('Pixel_size') };
}

describe('view modules', () => {
  let browser;
  before(async () => {
    browser = await launch(WEBGPU, { width: 1400, height: 900 });
  });
  after(async () => {
    await browser?.close();
  });

  it('diffraction frame: DIALS display, resolution rings at the radius of their d, d in the readout', async () => {
    const errors = [];
    const page = await openApp(browser.context, `#sample=${I03}&${CHEAP}`, errors);
    await waitIdle(page);
    const view = await page.evaluate(() => window.gpuscope.view());
    assert.equal(view.cmap, 'gray_r');
    assert.equal(await page.locator('#limits').inputValue(), 'dials');
    // DIALS: black from 0.4 / (0.1 · p90) counts on (50 counts when p90 is 0).
    const p90 = await page.evaluate(() => {
      const d = window.gpuscope.state.image.data.filter((v) => v >= 0).sort();
      return d[Math.floor(0.9 * d.length)];
    });
    assert.equal(view.lo, 0);
    assert.ok(Math.abs(view.hi - (p90 > 0 ? p90 / 0.04 : 50)) < 1e-9, `hi ${view.hi}, p90 ${p90}`);

    const h = i03Header();
    await page.fill('#rings-d', '2.5, 4');
    await page.press('#rings-d', 'Enter');
    await page.locator('#rings-d').dispatchEvent('change');
    const rings = await page.evaluate(() => {
      const v = window.gpuscope.viewer();
      return window.gpuscope.views().diffraction.ringList(v.info.w, v.info.h);
    });
    assert.deepEqual(rings.map((r) => r.d), [2.5, 4]);
    for (const r of rings) {
      // Bragg: 2θ = 2 asin(λ / 2d); r = D tan 2θ, in pixels of the header's size.
      const want = (h.distanceM * Math.tan(2 * Math.asin(h.wavelength / (2 * r.d)))) / h.pixelM;
      assert.ok(Math.abs(r.rx - want) < 1e-6 && Math.abs(r.ry - want) < 1e-6, `ring ${r.d} Å at ${r.rx} px, expected ${want}`);
      // Drawn there: the ring's blue on the canvas at the beam centre + r.
      const blue = await page.evaluate(([bx, by, rr]) => {
        const v = window.gpuscope.viewer();
        const [cx, cy] = v.toCanvas(bx + rr, by);
        const px = v.canvas.getContext('2d').getImageData(Math.round(cx) - 2, Math.round(cy) - 2, 5, 5).data;
        let hits = 0;
        for (let i = 0; i < px.length; i += 4) if (px[i + 2] > 200 && px[i] < 120) hits++;
        return hits;
      }, [...h.beam, want]);
      assert.ok(blue > 0, `no ring pixels at ${r.d} Å`);
      // The readout's d at a pixel on the ring (up from the beam centre).
      const text = await hoverPixel(page, Math.floor(h.beam[0]), Math.floor(h.beam[1] - want));
      const d = Number(/d = ([\d.]+) Å/.exec(text)?.[1]);
      assert.ok(Math.abs(d - r.d) < 0.01, `readout '${text}' on the ${r.d} Å ring`);
    }
    // Masked pixels have their own colours: a module gap (-1) and the rings.
    const gap = await page.evaluate(() => {
      const v = window.gpuscope.viewer();
      const { w } = v.info;
      const i = window.gpuscope.state.image.data.findIndex((x) => x === -1);
      const px = v.image.getContext('2d').getImageData(i % w, Math.floor(i / w), 1, 1).data;
      return Array.from(px.slice(0, 3));
    });
    assert.deepEqual(gap, [150, 165, 190]);
    await screenshot(page.locator('.viewer-panel'), 'views-diffraction.png');
    await page.evaluate(([x, y]) => window.gpuscope.viewer().centreOn(x, y - 250, 1), h.beam);
    await screenshot(page.locator('#view'), 'views-diffraction-zoom.png');

    // Two frames picked together: a series with a frame slider, the rings kept.
    const gz = fs.readFileSync(path.join(SAMPLES, I03));
    await page.setInputFiles('#file', [
      { name: 'i03_0002.cbf.gz', mimeType: 'application/octet-stream', buffer: gz },
      { name: 'i03_0001.cbf.gz', mimeType: 'application/octet-stream', buffer: gz },
    ]);
    await page.waitForFunction(() => window.gpuscope.image()?.shape.join() === '2,2527,2463', null, { timeout: 120_000 });
    await page.locator('#slice').fill('1');
    assert.equal(await page.locator('#slice-out').textContent(), 'frame 2 of 2: i03_0002.cbf.gz');
    assert.equal(await page.locator('#rings-box').isVisible(), true);
    assert.match(await hoverPixel(page, Math.floor(h.beam[0]), Math.floor(h.beam[1] - 300)), /slice 1: -?\d+ — d = [\d.]+ Å/);
    assert.equal(await page.evaluate(() => window.gpuscope.view().cmap), 'gray_r');
    await screenshot(page.locator('.viewer-panel'), 'views-diffraction-series.png');
    assert.deepEqual(errors, []);
    await page.close();
  });

  it('spots on the I03 frame: markers over the DIALS display, a table row centres and zooms on its spot', async () => {
    const errors = [];
    const page = await openApp(browser.context, `#sample=${I03}&on=cpu&1.op=find_spots`, errors);
    await waitIdle(page);
    // A large frame may be shown without running the chain: run it.
    if (!(await page.evaluate(() => window.gpuscope.state.outputs.length))) await page.evaluate(() => window.gpuscope.run('cpu'));
    const rows = await page.evaluate(() => window.gpuscope.state.outputs[0].table.rows);
    assert.ok(rows.length > 50, `${rows.length} spots`);
    await screenshot(page.locator('#view'), 'views-diffraction-spots.png');
    const row = page.locator('#results-table tbody tr').nth(5);
    const id = Number(await row.locator('td').first().textContent());
    await row.click();
    const v = await page.evaluate(() => {
      const v = window.gpuscope.viewer();
      return { zoom: v.zoom, centre: v.toData(v.canvas.width / 2, v.canvas.height / 2) };
    });
    const spot = rows.find((r) => r.id === id);
    assert.ok(v.zoom >= 8);
    assert.ok(Math.hypot(v.centre[0] - spot.x, v.centre[1] - spot.y) < 0.01, JSON.stringify([v.centre, spot]));
    await screenshot(page.locator('#view'), 'views-diffraction-spot-zoom.png');
    assert.deepEqual(errors, []);
    await page.close();
  });

  it('astronomy: zscale limits equal astropy on the Hubble image, FITS row 0 at the bottom, WCS readout equals astropy.wcs', async () => {
    const errors = [];
    const page = await openApp(browser.context, `#sample=hubble_deep_field.jpg&${CHEAP}&limits=zscale`, errors);
    await waitIdle(page);
    const view = await page.evaluate(() => window.gpuscope.view());
    const [elo, ehi] = EXPECTED.zscale.hubble_deep_field.limits;
    const tol = 0.01 * Math.max(Math.abs(ehi), Math.abs(ehi - elo));
    assert.ok(Math.abs(view.lo - elo) <= tol && Math.abs(view.hi - ehi) <= tol, `page (${view.lo}, ${view.hi}) vs astropy (${elo}, ${ehi})`);
    await screenshot(page.locator('#view'), 'views-zscale-hubble.png');

    // Markers: shown, hidden, scaled.
    const cyan = () =>
      page.evaluate(() => {
        const c = window.gpuscope.viewer().canvas;
        const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < px.length; i += 4) if (px[i] < 40 && px[i + 1] > 200 && px[i + 2] > 230) n++;
        return n;
      });
    // Markers at full opacity (the overlay's opacity may apply to them).
    await page.locator('#opacity').fill('1');
    // The image has some pixels of the markers' colour of its own.
    const own = await cyan();
    await page.evaluate(() => window.gpuscope.preview(null, [{ x: 300, y: 300, r: 10 }, { x: 600, y: 500, r: 10 }]));
    const shown = (await cyan()) - own;
    assert.ok(shown > 20, `markers drawn: ${shown} cyan pixels`);
    await page.uncheck('#markers-on');
    assert.equal(await cyan(), own);
    await page.waitForFunction(() => /markers=off/.test(location.hash));
    await page.check('#markers-on');
    await page.locator('#marker-size').fill('3');
    const big = (await cyan()) - own;
    assert.ok(big > 2.5 * shown && big < 3.5 * shown, `3x markers: ${big} cyan pixels against ${shown}`);
    await page.waitForFunction(() => /msize=3/.test(location.hash));

    // FITS with a TAN header (CD matrix, then CDELT + PC).
    for (const fx of EXPECTED.wcs) {
      await page.setInputFiles('#file', path.join(FIXTURES, fx.file));
      await page.waitForFunction((f) => window.gpuscope.image()?.name === f, fx.file);
      await waitIdle(page);
      assert.equal(await page.locator('#limits').inputValue(), 'zscale');
      // Row 0 at the bottom: pixel (0, 0) is drawn below pixel (0, 29).
      const [y0, y29] = await page.evaluate(() => {
        const v = window.gpuscope.viewer();
        return [v.toCanvas(0.5, 0.5)[1], v.toCanvas(0.5, 29.5)[1]];
      });
      assert.ok(y0 > y29, `row 0 at y ${y0}, row 29 at y ${y29}`);
      for (const [k, [x, y]] of fx.pixels.entries()) {
        if (!Number.isInteger(x)) continue;
        const text = await hoverPixel(page, x, y);
        assert.ok(text.startsWith(`x ${x + 1}, y ${y + 1} (FITS, 1-based): ${y * 40 + x}`), text);
        const m = /\(([-\d.]+)°, ([-\d.]+)°\)/.exec(text);
        assert.ok(m, text);
        const [era, edec] = fx.world[k];
        assert.ok(Math.abs(Number(m[1]) - era) < 2e-6 && Math.abs(Number(m[2]) - edec) < 2e-6, `${text} vs astropy (${era}, ${edec})`);
      }
    }
    await screenshot(page.locator('.viewer-panel'), 'views-fits-wcs.png');
    await page.setInputFiles('#file', path.join(FIXTURES, 'wcs_sin.fits'));
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'wcs_sin.fits');
    await waitIdle(page);
    assert.match(await hoverPixel(page, 2, 3), /x 3, y 4 .*WCS: projection SIN is not supported/);
    assert.match(await page.locator('#geometry-text').textContent(), /projection SIN is not supported/);
    assert.deepEqual(errors, []);
    await page.close();
  });

  it('volumes: linked orthogonal views of the 3-D sample follow the crosshair', async () => {
    const errors = [];
    const page = await openApp(browser.context, `#sample=blobs3d.tif&${CHEAP}&ortho=1`, errors);
    await waitIdle(page);
    assert.equal(await page.locator('#ortho').isVisible(), true);
    const check = async (x, y, z) => {
      const r = await page.evaluate(() => {
        const o = window.gpuscope.views().ortho;
        return { point: o.point, slice: window.gpuscope.viewer().slice, xz: Array.from(o.planes.xz), yz: Array.from(o.planes.yz) };
      });
      assert.deepEqual(r.point, { x, y, z });
      assert.equal(r.slice, z);
      assert.equal(await page.locator('#slice').inputValue(), String(z));
      // The planes are the stack's own values (64³, z-major).
      const data = await page.evaluate(() => Array.from(window.gpuscope.state.image.data));
      const at = (zz, yy, xx) => data[zz * 4096 + yy * 64 + xx];
      for (let zz = 0; zz < 64; zz++) {
        for (let k = 0; k < 64; k++) {
          if (r.xz[zz * 64 + k] !== at(zz, y, k)) assert.fail(`XZ at z ${zz}, x ${k}`);
          if (r.yz[k * 64 + zz] !== at(zz, k, x)) assert.fail(`YZ at y ${k}, z ${zz}`);
        }
      }
    };
    await check(32, 32, 32);
    // A click on XZ moves x and z; on YZ, z and y; on XY, x and y.
    const click = async (id, u, v) => {
      await page.locator(id).scrollIntoViewIfNeeded();
      const b = await page.locator(id).boundingBox();
      await page.mouse.click(b.x + u * b.width, b.y + v * b.height);
    };
    await click('#ortho-xz', 10.5 / 64, 40.5 / 64);
    await check(10, 32, 40);
    await click('#ortho-yz', 5.5 / 64, 20.5 / 64);
    await check(10, 20, 5);
    await page.locator('#view').scrollIntoViewIfNeeded();
    const p = await pagePoint(page, 50.5, 12.5);
    await page.mouse.click(...p);
    await check(50, 12, 5);
    await page.waitForFunction(() => /ortho=50%2C12/.test(location.hash));
    await screenshot(page.locator('.viewer-panel'), 'views-ortho.png');

    // A FITS cube: row 0 at the bottom in XY and in YZ alike.
    const cube = Array.from({ length: 4 * 8 * 6 }, (_, i) => i);
    await page.setInputFiles('#file', { name: 'cube.fits', mimeType: 'application/fits', buffer: fits([4, 8, 6], cube) });
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'cube.fits');
    await waitIdle(page);
    await click('#ortho-yz', 0.5 / 4, 0.5 / 8);
    assert.equal(await page.evaluate(() => window.gpuscope.views().ortho.point.y), 7);
    await click('#ortho-yz', 0.5 / 4, 7.5 / 8);
    assert.equal(await page.evaluate(() => window.gpuscope.views().ortho.point.y), 0);
    assert.deepEqual(errors, []);
    await page.close();
  });

  it('outlier removal: the count of replaced pixels and the difference view', async () => {
    const errors = [];
    const page = await openApp(browser.context, '#sample=camera.png&on=cpu&1.op=remove_outliers&1.diff=20&1.size=3&1.mode=both', errors);
    await waitIdle(page);
    const count = await page.evaluate(() => {
      const a = window.gpuscope.state.image.data;
      const b = window.gpuscope.state.outputs[0].data;
      let n = 0;
      for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) n++;
      return n;
    });
    assert.ok(count > 100, `${count} replaced`);
    assert.match(await page.locator('#outliers-text').textContent(), new RegExp(`replaced ${count} of 262144 pixels`));
    await page.check('#outliers-diff');
    const same = await page.evaluate(() => {
      const a = window.gpuscope.state.image.data;
      const b = window.gpuscope.state.outputs[0].data;
      const d = window.gpuscope.viewer().layer.data;
      for (let i = 0; i < a.length; i++) if (d[i] !== a[i] - b[i]) return i;
      return -1;
    });
    assert.equal(same, -1);
    await screenshot(page.locator('#view'), 'views-outliers-diff.png');
    assert.deepEqual(errors, []);
    await page.close();
  });

  it('line profile and rectangle statistics equal the array, CSV included', async () => {
    const errors = [];
    const page = await openApp(browser.context, `#sample=camera.png&${CHEAP}`, errors);
    await waitIdle(page);
    const data = await page.evaluate(() => Array.from(window.gpuscope.state.image.data));
    await page.selectOption('#tool', 'line');
    await dragPixels(page, [10, 20], [60, 20]);
    let prof = await page.evaluate(() => window.gpuscope.views().measure.profile);
    assert.deepEqual(prof.points.map((q) => q.value), data.slice(20 * 512 + 10, 20 * 512 + 61));
    // A diagonal: one sample per step of the longer axis, each the pixel it names.
    await dragPixels(page, [5, 5], [40, 30]);
    prof = await page.evaluate(() => window.gpuscope.views().measure.profile);
    assert.equal(prof.points.length, 36);
    assert.deepEqual([prof.points[0].x, prof.points[0].y, prof.points[35].x, prof.points[35].y], [5, 5, 40, 30]);
    for (const q of prof.points) assert.equal(q.value, data[q.y * 512 + q.x]);
    for (let i = 1; i < 36; i++) assert.equal(prof.points[i].x - prof.points[i - 1].x, 1);
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#profile-csv')]);
    const csv = fs.readFileSync(await download.path(), 'utf8').trim().split('\r\n');
    assert.equal(csv[0], 'i,x,y,distance,value');
    assert.deepEqual(csv.slice(1).map((l) => Number(l.split(',')[4])), prof.points.map((q) => q.value));
    await screenshot(page.locator('.viewer-panel'), 'views-profile.png');

    await page.selectOption('#tool', 'roi');
    await dragPixels(page, [100, 50], [140, 90]);
    const st = await page.evaluate(() => window.gpuscope.views().measure.stats.rows[0]);
    const vals = [];
    for (let y = 50; y <= 90; y++) for (let x = 100; x <= 140; x++) vals.push(data[y * 512 + x]);
    const sum = vals.reduce((a, b) => a + b, 0);
    const mean = sum / vals.length;
    const std = Math.sqrt(vals.reduce((a, b) => a + (b - mean) ** 2, 0) / vals.length);
    assert.equal(st.count, 41 * 41);
    assert.equal(st.sum, sum);
    assert.equal(st.min, Math.min(...vals));
    assert.equal(st.max, Math.max(...vals));
    assert.ok(Math.abs(st.mean - mean) < 1e-9 && Math.abs(st.std - std) < 1e-9, `${st.mean} ${st.std} vs ${mean} ${std}`);
    assert.match(await page.locator('#roi-box').textContent(), /x 100…140, y 50…90/);
    await screenshot(page.locator('.viewer-panel'), 'views-roi.png');
    await page.locator('#roi-box').scrollIntoViewIfNeeded();
    await screenshot(page.locator('#measure'), 'views-measure-panels.png');
    assert.deepEqual(errors, []);
    await page.close();
  });

  it('zoom in the URL, and the whole view state saved and loaded as JSON', async () => {
    const errors = [];
    const page = await openApp(browser.context, `#sample=camera.png&${CHEAP}`, errors);
    await waitIdle(page);
    assert.doesNotMatch(page.url(), /view=/);
    const c = await pagePoint(page, 300, 200);
    await page.mouse.move(...c);
    for (let i = 0; i < 4; i++) await page.mouse.wheel(0, -100);
    // The link follows the last zoom step.
    await page.waitForFunction(() => {
      const m = /view=([^&]*)/.exec(location.hash);
      return m && Math.abs(Number(decodeURIComponent(m[1]).split(',')[0]) / window.gpuscope.viewer().zoom - 1) < 1e-4;
    });
    const before = await page.evaluate(() => {
      const v = window.gpuscope.viewer();
      return { zoom: v.zoom, centre: v.toData(v.canvas.width / 2, v.canvas.height / 2) };
    });
    const url = page.url();
    const again = await openApp(browser.context, url.slice(url.indexOf('#')), errors);
    await waitIdle(again);
    const after_ = await again.evaluate(() => {
      const v = window.gpuscope.viewer();
      return { zoom: v.zoom, centre: v.toData(v.canvas.width / 2, v.canvas.height / 2) };
    });
    assert.ok(Math.abs(after_.zoom / before.zoom - 1) < 1e-4, `zoom ${after_.zoom} vs ${before.zoom}`);
    assert.ok(Math.hypot(after_.centre[0] - before.centre[0], after_.centre[1] - before.centre[1]) < 0.1);
    await again.close();

    // The state file: zoom, display and the line come back on a fresh page.
    await page.selectOption('#tool', 'line');
    await dragPixels(page, [280, 190], [320, 210]);
    await page.selectOption('#cmap', 'magma');
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#save-state')]);
    const file = await download.path();
    const saved = JSON.parse(fs.readFileSync(file, 'utf8'));
    assert.equal(saved.gpuscope_view, 1);
    assert.deepEqual(saved.line, [280, 190, 320, 210]);
    assert.match(saved.hash, /cmap=magma/);
    const fresh = await openApp(browser.context, `#${CHEAP}`, errors);
    await waitIdle(fresh);
    await fresh.setInputFiles('#state-file', file);
    await fresh.waitForFunction(() => /View loaded/.test(window.gpuscope.message));
    await waitIdle(fresh);
    const restored = await fresh.evaluate(() => {
      const v = window.gpuscope.viewer();
      return { sample: window.gpuscope.state.sample, cmap: v.display.cmap, zoom: v.zoom, line: window.gpuscope.views().measure.line };
    });
    assert.deepEqual(restored.line, [280, 190, 320, 210]);
    assert.equal(restored.sample, 'camera.png');
    assert.equal(restored.cmap, 'magma');
    assert.ok(Math.abs(restored.zoom / before.zoom - 1) < 1e-4);
    await fresh.close();

    // From a local file: the state says the file must be loaded again.
    await page.setInputFiles('#file', path.join(SAMPLES, 'coins.png'));
    await page.waitForFunction(() => window.gpuscope.image()?.name === 'coins.png' && !window.gpuscope.state.sample);
    await waitIdle(page);
    const [d2] = await Promise.all([page.waitForEvent('download'), page.click('#save-state')]);
    const other = await openApp(browser.context, `#${CHEAP}`, errors);
    await waitIdle(other);
    await other.setInputFiles('#state-file', await d2.path());
    await other.waitForFunction(() => /coins\.png.*load that file again/.test(window.gpuscope.message));
    await other.setInputFiles('#state-file', { name: 'x.json', mimeType: 'application/json', buffer: Buffer.from('{"a": 1}') });
    await other.waitForFunction(() => /not a gpuscope view state/.test(window.gpuscope.message));
    await other.close();
    assert.deepEqual(errors, []);
    await page.close();
  });

  it('a series of frames picked together: frame slider, spots on every frame, a row click centres on its spot', async () => {
    const errors = [];
    const frame = (seed, spots) => {
      const a = new Float32Array(64 * 64);
      let s = seed;
      for (let i = 0; i < a.length; i++) {
        s = (s * 1103515245 + 12345) % 2147483648;
        a[i] = 5 + (s % 4);
      }
      for (const [y, x] of spots) for (let dy = -1; dy <= 1; dy++) for (let dx = -1; dx <= 1; dx++) a[(y + dy) * 64 + x + dx] = 200;
      return a;
    };
    const page = await openApp(browser.context, '#on=cpu&1.op=find_spots', errors);
    await waitIdle(page);
    await page.setInputFiles('#file', [
      { name: 'frame_0002.npy', mimeType: 'application/octet-stream', buffer: npy('<f4', [64, 64], frame(2, [[40, 12], [50, 50]])) },
      { name: 'frame_0001.npy', mimeType: 'application/octet-stream', buffer: npy('<f4', [64, 64], frame(1, [[10, 10], [20, 30], [45, 20]])) },
    ]);
    await page.waitForFunction(() => window.gpuscope.image()?.shape.join() === '2,64,64');
    assert.equal(await page.locator('#slice-row').isVisible(), true);
    assert.match(await page.locator('#slice-out').textContent(), /frame \d of 2: frame_000\d\.npy/);
    assert.match(await page.locator('#series-text').textContent(), /series of 2 frames: frame_0001\.npy, frame_0002\.npy/);
    await page.click('#series-spots');
    await page.waitForFunction(() => /spots on 2 frames/.test(document.getElementById('series-text').textContent), null, { timeout: 120_000 });
    const series = await page.evaluate(() => window.gpuscope.views().series());
    // Each frame as find_spots finds it alone.
    for (let k = 0; k < 2; k++) {
      const alone = await page.evaluate(
        (k) => {
          const im = window.gpuscope.state.image;
          return window.gpuscope.runOp('cpu', 'find_spots', { data: im.data.slice(k * 4096, (k + 1) * 4096), shape: [64, 64] }, {});
        },
        k,
      );
      const rows = series.rows.filter((r) => r.frame === k).map(({ frame, ...r }) => r);
      assert.deepEqual(rows, alone.table.rows);
    }
    assert.deepEqual(series.perFrame, [3, 2]);
    // The table's row of the second frame's spot at (12, 40) centres on it.
    const row = await page.locator('#results-table tbody tr').filter({ hasText: /^1/ }).first();
    await row.click();
    const v = await page.evaluate(() => {
      const v = window.gpuscope.viewer();
      return { slice: v.slice, zoom: v.zoom, centre: v.toData(v.canvas.width / 2, v.canvas.height / 2) };
    });
    const spot = series.rows.find((r) => r.frame === 1);
    assert.equal(v.slice, 1);
    assert.ok(v.zoom >= 8);
    assert.ok(Math.hypot(v.centre[0] - spot.x, v.centre[1] - spot.y) < 0.01, JSON.stringify([v.centre, spot]));
    await page.evaluate(() => window.gpuscope.viewer().centreOn(32, 32, 8));
    await screenshot(page.locator('.viewer-panel'), 'views-series.png');

    // One frame with the chain's find_spots: its table rows centre too.
    await page.setInputFiles('#file', { name: 'one.npy', mimeType: 'application/octet-stream', buffer: npy('<f4', [64, 64], frame(1, [[10, 10], [20, 30], [45, 20]])) });
    await page.waitForFunction(() => window.gpuscope.state.outputs[0]?.op === 'find_spots');
    await waitIdle(page);
    const rows = await page.evaluate(() => window.gpuscope.state.outputs[0].table.rows);
    await page.locator('#results-table tbody tr').nth(2).click();
    const c = await page.evaluate(() => {
      const v = window.gpuscope.viewer();
      return v.toData(v.canvas.width / 2, v.canvas.height / 2);
    });
    assert.ok(rows.some((r) => Math.hypot(c[0] - r.x, c[1] - r.y) < 0.01), JSON.stringify([c, rows]));
    assert.deepEqual(errors, []);
    await page.close();
  });
});

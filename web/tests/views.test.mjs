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
import { SAMPLES, WEBGPU, launch, npy, openApp, screenshot, waitIdle } from './browser.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const FIXTURES = path.join(HERE, 'fixtures');
const EXPECTED = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'expected_views.json'), 'utf8'));
const I03 = 'DLS_I03_smargon_0001.cbf.gz';
// A cheap chain (the CPU, one threshold) with the input on view.
const CHEAP = 'on=cpu&1.op=threshold&1.value=100000&show=0';

/** Moves the pointer over the centre of data pixel (x, y); returns the readout. */
async function hoverPixel(page, x, y) {
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
    assert.deepEqual(errors, []);
    await page.close();
  });
});

// The pure functions of the view modules against their references, in node
// (no browser): zscale against astropy's ZScaleInterval, the TAN WCS against
// astropy.wcs (expected values and fixtures by web/tests/make_expected.py),
// and the diffraction geometry against the I03 frame's header.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { zscale } from '../view/zscale.js';
import { parseWcs, worldText } from '../view/wcs.js';
import { dSpacing, geometryOf, ringRadiusMm, dialsLimits } from '../view/rings.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const EXPECTED = JSON.parse(fs.readFileSync(path.join(HERE, 'fixtures', 'expected_views.json'), 'utf8'));

/** Header cards of a FITS file, as the decoder gives them (strings unquoted). */
export function fitsCards(bytes) {
  const cards = [];
  for (let o = 0; o + 80 <= bytes.length; o += 80) {
    const card = bytes.toString('latin1', o, o + 80);
    const key = card.slice(0, 8).trim();
    if (key === 'END') break;
    if (card.slice(8, 10) !== '= ') continue;
    let value = card.slice(10).replace(/\/.*$/, '').trim();
    const q = /^'(.*)'/.exec(card.slice(10).trim());
    if (q) value = q[1].trim();
    cards.push([key, value]);
  }
  return cards;
}

test('zscale equals astropy on a synthetic array with outliers on both sides', () => {
  const n = EXPECTED.zscale.synthetic.n;
  const v = new Float64Array(n);
  for (let i = 0; i < n; i++) v[i] = 100 + ((i * 7919) % 1000) / 10 + (i % 97 === 0 ? 5000 : 0) - (i % 89 === 0 ? 5000 : 0);
  const [lo, hi] = zscale(v);
  const [elo, ehi] = EXPECTED.zscale.synthetic.limits;
  assert.ok(Math.abs(lo - elo) < 1e-9 * Math.abs(elo) + 1e-9, `vmin ${lo} vs astropy ${elo}`);
  assert.ok(Math.abs(hi - ehi) < 1e-9 * Math.abs(ehi) + 1e-9, `vmax ${hi} vs astropy ${ehi}`);
  // The limits are not the data's extremes: the rejection did its work.
  assert.ok(elo > -4900 && ehi < 5100);
});

test('zscale skips non-finite values and survives constant data', () => {
  assert.deepEqual(zscale(new Float32Array([NaN, 3, 3, 3, Infinity, 3, 3, 3])), [3, 3]);
  assert.deepEqual(zscale(new Float32Array([NaN])), [0, 1]);
});

for (const fx of EXPECTED.wcs) {
  test(`TAN WCS of ${fx.file} equals astropy.wcs to 1e-9 degree`, () => {
    const cards = fitsCards(fs.readFileSync(path.join(HERE, 'fixtures', fx.file)));
    const wcs = parseWcs(cards);
    assert.ok(wcs?.ok, JSON.stringify(wcs));
    fx.pixels.forEach(([x, y], k) => {
      const [ra, dec] = wcs.toWorld(x, y);
      const [era, edec] = fx.world[k];
      assert.ok(Math.abs(ra - era) < 1e-9 && Math.abs(dec - edec) < 1e-9, `pixel (${x}, ${y}): (${ra}, ${dec}) vs astropy (${era}, ${edec})`);
    });
    assert.match(worldText(wcs, 0, 0), /^RA \d\d:\d\d:\d\d\.\d{3} Dec [+-]\d\d:\d\d:\d\d\.\d\d/);
  });
}

test('a SIN header is reported as not supported, a header without WCS gives nothing', () => {
  const wcs = parseWcs(fitsCards(fs.readFileSync(path.join(HERE, 'fixtures', 'wcs_sin.fits'))));
  assert.equal(wcs.ok, false);
  assert.match(worldText(wcs, 0, 0), /projection SIN is not supported/);
  assert.equal(parseWcs([['SIMPLE', 'T'], ['BITPIX', '-32']]), null);
});

test('the I03 header gives the geometry, and a ring of d lies where d is read out', () => {
  const text = zlib.gunzipSync(fs.readFileSync(path.join(HERE, '..', 'samples', 'DLS_I03_smargon_0001.cbf.gz'))).toString('latin1', 0, 4000);
  const field = (k) => new RegExp(`# ${k}:? +([^\\r\\n]+)`).exec(text)[1];
  const header = ['Beam_xy', 'Detector_distance', 'Wavelength', 'Pixel_size'].map((k) => [k, field(k)]);
  const g = geometryOf(header);
  assert.deepEqual([g.beamX, g.beamY, g.distanceMm, g.wavelength], [1229.3, 1200.48, 291.47, 0.97625]);
  assert.ok(Math.abs(g.pixelMm[0] - 0.172) < 1e-12);
  for (const d of [1.5, 2.0, 3.0, 5.0]) {
    // Independent: Bragg's law, 2θ = 2 asin(λ / 2d), r = D tan 2θ.
    const r = (291.47 * Math.tan(2 * Math.asin(0.97625 / (2 * d)))) / 0.172;
    assert.ok(Math.abs(ringRadiusMm(g, d) / 0.172 - r) < 1e-9);
    assert.ok(Math.abs(dSpacing(g, g.beamX + r, g.beamY) - d) < 1e-9);
    assert.ok(Math.abs(dSpacing(g, g.beamX + r * 0.6, g.beamY - r * 0.8) - d) < 1e-9);
  }
  assert.equal(dSpacing(g, g.beamX, g.beamY), Infinity);
  assert.deepEqual(geometryOf([['Beam_xy', '(1, 2) pixels']]).why, 'the header has no usable Detector_distance, Wavelength, Pixel_size');
});

test("DIALS' display limits: black from 0.4 / (brightness · p90)", () => {
  const near = ([lo, hi], want) => assert.ok(lo === 0 && Math.abs(hi - want) < 1e-9, `${hi} vs ${want}`);
  near(dialsLimits(2, 10), 50);
  near(dialsLimits(0, 10), 50);
  near(dialsLimits(4, 20), 50);
  near(dialsLimits(1, 100), 2.5);
});

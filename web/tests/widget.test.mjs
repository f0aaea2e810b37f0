// Browser test of gpuscope.show's front end (the Jupyter widget,
// crates/python/python/gpuscope/_widget/widget.js): its ESM module is loaded
// as anywidget loads it (from a blob: URL of its text), with a minimal fake
// anywidget model (get, set, on, off, save_changes) carrying what the Python
// side sends (raw bytes with shape and dtype, the shipped viewer modules),
// and its canvas, readout, overlays, markers and controls are checked
// against the data (coins.png). Everything comes from the disk, not from the
// server, which serves only the blank page: the test runs against the
// repository root or dist/ alike.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { OFFLINE, SAMPLES, URL, launch, screenshot } from './browser.mjs';

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const PACKAGE = 'crates/python/python/gpuscope/_widget';
const SHIPPED = path.join(ROOT, PACKAGE, 'web');

/** The shipped viewer modules, as gpuscope.widget._modules() sends them. */
function modules() {
  const out = {};
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.js')) out[path.relative(SHIPPED, p).split(path.sep).join('/')] = fs.readFileSync(p, 'utf8');
    }
  };
  walk(SHIPPED);
  return out;
}

let browser;
let page;
const errors = [];

before(async () => {
  browser = await launch(OFFLINE, { width: 1000, height: 900 });
  page = await browser.context.newPage();
  await page.route('**/favicon.ico', (r) => r.fulfill({ status: 204 }));
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  // A blank page of the server's origin, as a notebook's output cell.
  const blank = `${URL}gpuscope-widget-test.html`;
  await page.route(blank, (r) => r.fulfill({ contentType: 'text/html', body: '<!doctype html><meta charset="utf-8"><body></body>' }));
  await page.goto(blank);
  await page.evaluate(
    async ({ sources, widgetJs, png }) => {
      document.body.innerHTML = '<div id="cell" style="width: 800px"></div>';
      // coins.png's grey values (uint8, 303 × 384), as np.asarray(imread(...)).
      const bitmap = await createImageBitmap(new Blob([Uint8Array.from(atob(png), (c) => c.charCodeAt(0))]));
      const c = new OffscreenCanvas(bitmap.width, bitmap.height);
      const ctx = c.getContext('2d');
      ctx.drawImage(bitmap, 0, 0);
      const rgba = ctx.getImageData(0, 0, c.width, c.height).data;
      const coins = new Uint8Array(c.width * c.height);
      for (let i = 0; i < coins.length; i++) coins[i] = rgba[4 * i];
      // A model as anywidget's: traits by name, change events, bytes as DataViews.
      const listeners = new Map();
      const state = {
        _modules: sources,
        _data: new DataView(coins.buffer),
        _shape: [c.height, c.width],
        _dtype: 'uint8',
        _source_shape: [c.height, c.width],
        _step: [1, 1],
        _labels: new DataView(new ArrayBuffer(0)),
        _labels_dtype: '',
        _labels_kind: '',
        _markers: new DataView(new ArrayBuffer(0)),
        colormap: 'gray',
        scale: 'linear',
        limits: [0, 255],
        slice: -1,
        opacity: 0.5,
        message: '',
      };
      const model = {
        saved: [],
        get: (k) => state[k],
        set(k, v) {
          state[k] = v;
          for (const f of listeners.get(`change:${k}`) ?? []) f();
        },
        on: (e, f) => listeners.set(e, [...(listeners.get(e) ?? []), f]),
        off: (e, f) => listeners.set(e, (listeners.get(e) ?? []).filter((g) => g !== f)),
        save_changes() {
          this.saved.push(Object.keys(state).filter((k) => !k.startsWith('_')).map((k) => [k, state[k]]));
        },
      };
      const mod = await import(URL.createObjectURL(new Blob([widgetJs], { type: 'text/javascript' })));
      const widget = mod.default;
      const el = document.getElementById('cell');
      await widget.render({ model, el });
      window.t = {
        model,
        el,
        coins,
        w: c.width,
        h: c.height,
        // The shipped modules the widget draws with (a Python test checks
        // that they are web/'s).
        cm: await mod.loadModules(sources, 'colormaps.js'),
        vw: await mod.loadModules(sources, 'viewer.js'),
        // The canvas pixel (RGBA) that shows data pixel (x, y), and its
        // position in page coordinates.
        at(x, y) {
          const v = el.gpuscope.viewer;
          // The canvas pixel that holds the data pixel's centre.
          const cx = Math.floor(v.ox + (x + 0.5) * v.zoom);
          const cy = Math.floor(v.oy + (y + 0.5) * v.zoom);
          const px = v.canvas.getContext('2d').getImageData(cx, cy, 1, 1).data;
          const r = v.canvas.getBoundingClientRect();
          const ratio = v.canvas.width / r.width;
          // The data pixel under that canvas pixel's centre (nearest-neighbour drawing).
          const back = [Math.floor((cx + 0.5 - v.ox) / v.zoom), Math.floor((cy + 0.5 - v.oy) / v.zoom)];
          return { rgba: Array.from(px), page: [r.left + cx / ratio, r.top + cy / ratio], cx, cy, back, zoom: v.zoom, ox: v.ox, oy: v.oy, cw: v.canvas.width, ch: v.canvas.height };
        },
        tick: () => new Promise((res) => requestAnimationFrame(() => res())),
      };
    },
    {
      sources: modules(),
      widgetJs: fs.readFileSync(path.join(ROOT, PACKAGE, 'widget.js'), 'utf8'),
      png: fs.readFileSync(path.join(SAMPLES, 'coins.png')).toString('base64'),
    },
  );
});

after(async () => {
  await browser?.close();
});

// Data pixels: a dark background pixel and a bright coin pixel of coins.png.
const find = (pred) => page.evaluate((src) => {
  const f = new Function('v', `return ${src}`);
  const { coins, w, h } = window.t;
  // Away from the borders, so that the canvas pixel is the data pixel's.
  for (let y = 20; y < h - 20; y++) for (let x = 20; x < w - 20; x++) if (f(coins[y * w + x])) return { x, y, v: coins[y * w + x] };
  return null;
}, pred);

describe('gpuscope.show widget', () => {
  it('draws the array with the page viewer, gray, limits 0..255', async () => {
    const info = await page.evaluate(() => ({ zoom: t.el.gpuscope.viewer.zoom, fitted: t.el.gpuscope.viewer.fitted }));
    assert.ok(info.fitted && info.zoom > 1, `fitted to the 800 px cell: ${JSON.stringify(info)}`);
    // A 2-D image without overlays: no slice slider, no opacity slider.
    const shown = await page.evaluate(() =>
      Array.from(t.el.querySelectorAll('.bar label'), (l) => [l.textContent.trim().split(' ')[0], getComputedStyle(l).display !== 'none']),
    );
    assert.deepEqual(shown, [['colormap', true], ['scale', true], ['slice', false], ['overlay', false]]);
    for (const [x, y] of [[30, 30], [100, 150], [200, 77], [350, 280]]) {
      const { rgba, v, back } = await page.evaluate(([x, y]) => ({ ...t.at(x, y), v: t.coins[y * t.w + x] }), [x, y]);
      // gray, linear, [0, 255]: the value itself (±1 for the stretch table).
      assert.deepEqual(back, [x, y]);
      for (const c of rgba.slice(0, 3)) assert.ok(Math.abs(c - v) <= 1, `pixel (${x}, ${y}) = ${v} drawn as ${rgba}`);
    }
    assert.deepEqual(errors, []);
  });

  it('reads out the value under the pointer in the page format', async () => {
    const p = await find('v > 150');
    const { page: xy } = await page.evaluate(([x, y]) => t.at(x, y), [p.x, p.y]);
    await page.mouse.move(xy[0], xy[1]);
    const text = await page.evaluate(() => t.el.gpuscope.readout.textContent);
    assert.equal(text, `x ${p.x}, y ${p.y}: ${p.v}`);
  });

  it('follows colormap and scale changes from Python and from its controls', async () => {
    const p = { x: 120, y: 60 };
    await page.evaluate(async () => {
      t.model.set('colormap', 'viridis');
      await t.tick();
    });
    const check = async (cmap, stretch = 'linear') => {
      const { rgba, want } = await page.evaluate(
        ([x, y, cmap, stretch]) => {
          const v = t.coins[y * t.w + x];
          const k = 3 * t.cm.scaler(0, 255, stretch)(v);
          const lut = t.cm.lut(cmap);
          return { ...t.at(x, y), want: [lut[k], lut[k + 1], lut[k + 2]] };
        },
        [p.x, p.y, cmap, stretch],
      );
      rgba.slice(0, 3).forEach((c, i) => assert.ok(Math.abs(c - want[i]) <= 1, `${cmap} ${stretch}: ${rgba} for ${want}`));
    };
    await check('viridis');
    await page.evaluate(async () => {
      t.model.set('scale', 'log');
      await t.tick();
    });
    await check('viridis', 'log');
    assert.equal(await page.evaluate(() => t.el.querySelectorAll('select')[1].value), 'log');
    await page.evaluate(async () => {
      t.model.set('scale', 'linear');
      await t.tick();
    });
    // The select in the widget: the model is changed and saved (Python sees it).
    const saved = await page.evaluate(async () => {
      const sel = t.el.querySelectorAll('select')[0];
      if (sel.value !== 'viridis') throw new Error(`the select shows ${sel.value}, the model viridis`);
      sel.value = 'magma';
      sel.dispatchEvent(new Event('change'));
      await t.tick();
      return t.model.saved.at(-1);
    });
    assert.deepEqual(Object.fromEntries(saved).colormap, 'magma');
    await check('magma');
    await page.evaluate(async () => {
      t.model.set('colormap', 'gray');
      await t.tick();
    });
  });

  it('draws labels in the viewer colours, and the readout names the label', async () => {
    // Labels as blocks of 64 × 64 over the left half (0 elsewhere), int32.
    const p = { x: 70, y: 140 };
    const got = await page.evaluate(async ([x, y]) => {
      const lab = new Int32Array(t.w * t.h);
      for (let j = 0; j < t.h; j++) for (let i = 0; i < t.w / 2; i++) lab[j * t.w + i] = 1 + (i >> 6) + 4 * (j >> 6);
      t.model.set('opacity', 1);
      t.model.set('_labels_dtype', 'int32');
      t.model.set('_labels_kind', 'labels');
      t.model.set('_labels', new DataView(lab.buffer));
      await t.tick();
      const n = lab[y * t.w + x];
      const right = t.at(t.w - 30, y); // no label: the image
      return { n, ...t.at(x, y), colour: t.vw.labelColour(n), right, v: t.coins[y * t.w + t.w - 30] };
    }, [p.x, p.y]);
    assert.equal(got.n, 1 + (70 >> 6) + 4 * (140 >> 6));
    got.rgba.slice(0, 3).forEach((c, i) => assert.ok(Math.abs(c - got.colour[i]) <= 1, `label ${got.n}: ${got.rgba} for ${got.colour}`));
    got.right.rgba.slice(0, 3).forEach((c) => assert.ok(Math.abs(c - got.v) <= 1, `unlabelled: ${got.right.rgba} for ${got.v}`));
    await page.mouse.move(got.page[0], got.page[1]);
    const text = await page.evaluate(() => t.el.gpuscope.readout.textContent);
    assert.equal(text, `x ${p.x}, y ${p.y}: ${await page.evaluate(([x, y]) => t.coins[y * t.w + x], [p.x, p.y])}, label ${got.n}`);
  });

  it('draws markers where the table puts them', async () => {
    // find_spots' convention: (y, x) with pixel centres at +0.5; no z, default radius.
    const got = await page.evaluate(async () => {
      // Full opacity: the page draws markers at the overlay's opacity.
      t.model.set('opacity', 1);
      const m = new Float64Array([250.5, 300.5, NaN, NaN, 50.5, 330.5, NaN, 10]);
      t.model.set('_markers', new DataView(m.buffer));
      await t.tick();
      const v = t.el.gpuscope.viewer;
      const ctx = v.canvas.getContext('2d');
      // Cyan (#00e5ff) on the circle of radius max(4, r·zoom) around each centre.
      const ring = (y, x, r) => {
        const cx = v.ox + x * v.zoom;
        const cy = v.oy + y * v.zoom;
        const rad = Math.max(4, r * v.zoom);
        let hits = 0;
        for (let a = 0; a < 16; a++) {
          const px = ctx.getImageData(Math.round(cx + rad * Math.cos((a * Math.PI) / 8)), Math.round(cy + rad * Math.sin((a * Math.PI) / 8)), 1, 1).data;
          // Cyan over grey, antialiased: clearly more blue than red.
          if (px[2] - px[0] > 60) hits++;
        }
        const inside = Array.from(ctx.getImageData(Math.round(cx), Math.round(cy), 1, 1).data);
        return { hits, inside };
      };
      return { a: ring(250.5, 300.5, 3), b: ring(50.5, 330.5, 10), n: v.markers.length, caption: t.el.querySelector('.caption').textContent };
    });
    assert.equal(got.n, 2);
    assert.ok(got.a.hits >= 12 && got.b.hits >= 12, JSON.stringify(got));
    assert.ok(got.a.inside[2] - got.a.inside[0] < 5 && got.b.inside[2] - got.b.inside[0] < 5, 'the centres are not painted');
    assert.match(got.caption, /2 markers/);
    await page.evaluate(async () => {
      t.model.set('opacity', 0.6);
      await t.tick();
    });
    await screenshot(page.locator('#cell'), 'widget-coins.png');
  });

  it('shows a float stack with a slice slider, and maps a downsampled readout back', async () => {
    const got = await page.evaluate(async () => {
      // (3, h, w) float32: coins, 255 - coins, coins / 2 + 0.25.
      const n = t.w * t.h;
      const stack = new Float32Array(3 * n);
      for (let i = 0; i < n; i++) {
        stack[i] = t.coins[i];
        stack[n + i] = 255 - t.coins[i];
        stack[2 * n + i] = t.coins[i] / 2 + 0.25;
      }
      t.model.set('_markers', new DataView(new ArrayBuffer(0)));
      t.model.set('_labels', new DataView(new ArrayBuffer(0)));
      t.model.set('_dtype', 'float32');
      t.model.set('_shape', [3, t.h, t.w]);
      t.model.set('_source_shape', [3, t.h, t.w]);
      t.model.set('_data', new DataView(stack.buffer));
      await t.tick();
      const v = t.el.gpuscope.viewer;
      const slider = t.el.querySelector('input[type=range]');
      const visible = (e) => getComputedStyle(e).display !== 'none';
      const first = {
        slice: v.slice,
        rows: [visible(slider.closest('label')), visible(t.el.querySelectorAll('.bar label')[3])],
        max: slider.max,
        out: slider.nextSibling.textContent,
        px: t.at(40, 40).rgba[0],
      };
      slider.value = '2';
      slider.dispatchEvent(new Event('input'));
      await t.tick();
      return { first, slice: v.slice, model: t.model.get('slice'), px: t.at(40, 40).rgba[0], c: t.coins[40 * t.w + 40], page: t.at(40, 40).page };
    });
    // The slider shows (the middle slice first); no overlay, no opacity slider.
    assert.deepEqual([got.first.slice, got.first.rows, got.first.max, got.first.out], [1, [true, false], '2', ' 1 of 3']);
    assert.ok(Math.abs(got.first.px - (255 - got.c)) <= 1, `slice 1 at (40, 40): ${got.first.px}`);
    assert.equal(got.slice, 2);
    assert.equal(got.model, 2);
    assert.ok(Math.abs(got.px - (got.c / 2 + 0.25)) <= 1, `slice 2 at (40, 40): ${got.px}`);
    await page.mouse.move(got.page[0], got.page[1]);
    assert.equal(await page.evaluate(() => t.el.gpuscope.readout.textContent), `x 40, y 40, slice 2: ${(got.c / 2 + 0.25).toPrecision(4)}`);
    // Shown downsampled by 2 in rows and columns: the readout gives the
    // original array's coordinates, and the widget says why.
    const text = await page.evaluate(async ([x, y]) => {
      t.model.set('_step', [1, 2]);
      t.model.set('message', 'downsampled (every 2nd row and column)');
      await t.tick();
      const { page: xy } = t.at(x, y);
      return { xy, note: t.el.querySelector('.note').textContent, hidden: t.el.querySelector('.note').hidden };
    }, [40, 40]);
    assert.equal(text.hidden, false);
    assert.match(text.note, /every 2nd row/);
    await page.mouse.move(text.xy[0] + 1, text.xy[1]);
    await page.mouse.move(text.xy[0], text.xy[1]);
    assert.match(await page.evaluate(() => t.el.gpuscope.readout.textContent), /^x 80, y 80, slice 2: /);
    // Page Down on the image: the viewer's key, saved in the model, not
    // passed on to the notebook's shortcuts.
    await page.evaluate(() => {
      t.keys = 0;
      document.addEventListener('keydown', () => t.keys++);
      t.el.gpuscope.viewer.canvas.focus();
    });
    await page.keyboard.press('PageDown');
    const after = await page.evaluate(async () => {
      await t.tick();
      return { slice: t.el.gpuscope.viewer.slice, model: t.model.get('slice'), saved: Object.fromEntries(t.model.saved.at(-1)).slice, keys: t.keys };
    });
    assert.deepEqual(after, { slice: 1, model: 1, saved: 1, keys: 0 });
    assert.equal(await page.evaluate(() => document.querySelector('#cell input[type=range]').value), '1');
    await screenshot(page.locator('#cell'), 'widget-stack.png');
    assert.deepEqual(errors, []);
  });
});

// The page's operations against the core's catalogue (the wasm module's
// `catalogue()`): the same parameters, and with the form's defaults the page
// sends the catalogue's defaults.
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { WEBGPU, launch, openApp } from './browser.mjs';

let browser;

before(async () => {
  browser = await launch(WEBGPU);
});

after(async () => {
  await browser?.close();
});

it('the page offers the catalogue’s parameters with its defaults and limits', { timeout: 180_000 }, async () => {
  const errors = [];
  const page = await openApp(browser.context, '', errors);
  const r = await page.evaluate(async () => {
    const ops = await import(new URL('web/ops.js', location.href).href);
    const problems = [];
    const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
    const names = ops.CATALOGUE.map((o) => o.name);
    for (const name of names) {
      if (!ops.OPS[name] && !ops.NOT_ON_PAGE.includes(name)) problems.push(`${name}: in the catalogue, not on the page`);
    }
    for (const [id, op] of Object.entries(ops.OPS)) {
      const c = ops.CATALOGUE.find((o) => o.name === id);
      if (!c) {
        problems.push(`${id}: on the page, not in the catalogue`);
        continue;
      }
      for (const spec of op.params) {
        if (!c.params.some((p) => p.name === spec.name)) problems.push(`${id}.${spec.name}: not a catalogue parameter`);
      }
      for (const p of c.params) {
        const shown = op.params.find((s) => s.name === p.name);
        if (!shown && !(op.omit ?? []).includes(p.name)) problems.push(`${id}.${p.name}: missing from the page`);
        if (!shown) continue;
        // Limits: the catalogue's, except where the page says otherwise (ui).
        const ui = op.ui?.[p.name] ?? {};
        const limits = [
          ['min', p.min ?? undefined],
          ['max', p.max ?? undefined],
          ['minExclusive', p.min_exclusive || undefined],
          ['choices', p.choices.length ? p.choices : undefined],
          ['perAxis', p.per_axis || undefined],
        ];
        for (const [k, v] of limits) {
          if (!(k in ui) && !same(shown[k], v)) problems.push(`${id}.${p.name}.${k}: page ${JSON.stringify(shown[k])}, catalogue ${JSON.stringify(v)}`);
        }
        if ('default' in ui && ui.type === undefined) problems.push(`${id}.${p.name}: the page writes its own default`);
      }
      // The options object of the form's defaults, on an input where the
      // page's 'auto' choices mean the catalogue's defaults (SLIC: RGB).
      const input = { shape: id === 'slic' ? [16, 16, 3] : [16, 16], data: new Float32Array(id === 'slic' ? 768 : 256) };
      const parsed = ops.parseStep(id, ops.defaults(id), input);
      if (parsed.error) {
        problems.push(`${id}: the form's defaults are refused: ${parsed.error}`);
        continue;
      }
      const sent = ops.optionsOf(id, parsed.params, input);
      for (const p of c.params) {
        if (!(p.name in sent)) {
          if (!(op.omit ?? []).includes(p.name)) problems.push(`${id}.${p.name}: not sent`);
          continue;
        }
        if (p.required) {
          if (sent[p.name] === null || sent[p.name] === undefined) problems.push(`${id}.${p.name}: required, the page sends none`);
        } else if (!same(sent[p.name], p.default)) {
          problems.push(`${id}.${p.name}: the page sends ${JSON.stringify(sent[p.name])}, the catalogue's default is ${JSON.stringify(p.default)}`);
        }
      }
      for (const k of Object.keys(sent)) if (!c.params.some((p) => p.name === k)) problems.push(`${id}: sends unknown option ${k}`);
    }
    return { problems, names, counts: Object.fromEntries(Object.entries(ops.OPS).map(([id, op]) => [id, op.params.length])) };
  });
  assert.deepEqual(r.problems, []);
  assert.ok(r.names.length >= 12, JSON.stringify(r.names));
  // Every operation of the page got its parameters (none is empty).
  for (const [id, n] of Object.entries(r.counts)) assert.ok(n > 0, `${id} has no parameters`);
  assert.deepEqual(errors, []);
});

it('the wasm API refuses unknown and bad options with the core’s messages', { timeout: 120_000 }, async () => {
  const page = await openApp(browser.context);
  const r = await page.evaluate(async () => {
    const wasm = await import(new URL('web/pkg/gpuscope_web.js', location.href).href);
    const data = new Float32Array(16).fill(1);
    const shape = Uint32Array.from([4, 4]);
    const err = (f) => {
      try {
        f();
        return null;
      } catch (e) {
        return e.message;
      }
    };
    return {
      unknown: err(() => wasm.gaussian_filter(data, shape, { sigma: [1], sigmma: 2 })),
      mode: err(() => wasm.gaussian_filter(data, shape, { sigma: [1], mode: 'bogus' })),
      missing: err(() => wasm.gaussian_filter(data, shape, {})),
      ok: wasm.gaussian_filter(data, shape, { sigma: [1] }).data.length,
      label: wasm.label(data, shape, undefined).count,
    };
  });
  assert.match(r.unknown, /sigmma/);
  assert.match(r.mode, /invalid mode: 'bogus'/);
  assert.match(r.missing, /invalid sigma: none given/);
  assert.equal(r.ok, 16);
  assert.equal(r.label, 1);
});

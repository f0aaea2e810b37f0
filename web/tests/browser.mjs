// Shared set-up of the browser tests: headless Chromium with WebGPU on
// SwiftShader, pages served by `cargo xtask test-web` (GPUSCOPE_URL).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const URL = process.env.GPUSCOPE_URL;
export const CHROMIUM = process.env.GPUSCOPE_CHROMIUM || '/usr/bin/chromium';
const HERE = path.dirname(fileURLToPath(import.meta.url));
export const SAMPLES = path.join(HERE, '..', 'samples');
export const SCREENSHOTS = path.join(HERE, 'screenshots');

// Headless Chromium flags. Checked with Debian's Chromium 156 on a machine
// without a GPU: --enable-unsafe-webgpu alone gives a real WebGPU adapter
// (Dawn on SwiftShader: vendor "google", architecture "swiftshader",
// isFallbackAdapter true, 1 GiB storage bindings, timestamp-query) to pages
// of a secure context such as http://127.0.0.1 (a data: URL gets no
// navigator.gpu at all). Adding --use-angle=swiftshader,
// --use-webgpu-adapter=swiftshader or --enable-features=Vulkan changed
// nothing there, so they are left out; the rest keeps Chromium offline.
export const OFFLINE = [
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];
export const WEBGPU = ['--enable-unsafe-webgpu', ...OFFLINE];
// --disable-webgpu leaves navigator.gpu defined but gives no adapter: the
// case of a blocklisted GPU.
export const NO_WEBGPU = ['--disable-webgpu', ...OFFLINE];

/** Launches Chromium; returns {context, close}. */
export async function launch(args, viewport = { width: 1280, height: 800 }) {
  assert.ok(URL, 'GPUSCOPE_URL is not set: run the browser tests with `cargo xtask test-web`');
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuscope-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args,
    viewport,
    acceptDownloads: true,
  });
  return {
    context,
    close: async () => {
      await context.close();
      fs.rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

/** Opens the app (with an optional hash) and waits until it started;
 * `errors` collects page errors and console errors. */
export async function openApp(context, hash = '', errors = []) {
  const page = await context.newPage();
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  await page.goto(URL + hash);
  await waitReady(page);
  return page;
}

export async function waitReady(page) {
  await page.waitForFunction(() => ['ready', 'failed'].includes(window.gpuscope?.status), null, {
    timeout: 120_000,
  });
}

/** Waits until no run is in progress. */
export async function waitIdle(page, timeout = 120_000) {
  await page.waitForFunction(() => window.gpuscope.state.busy === 0, null, { timeout });
}

/** Saves a screenshot of `locator` (or the page) under web/tests/screenshots/. */
export async function screenshot(target, name) {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  const file = path.join(SCREENSHOTS, name);
  await target.screenshot({ path: file });
  return file;
}

/** A .npy file (C order, little endian) of a typed array. */
export function npy(descr, shape, typed) {
  const dict = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  let header = dict;
  while ((10 + header.length + 1) % 64 !== 0) header += ' ';
  header += '\n';
  const pre = Buffer.alloc(10);
  Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]).copy(pre);
  pre.writeUInt16LE(header.length, 8);
  return Buffer.concat([pre, Buffer.from(header, 'latin1'), Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength)]);
}

/** A FITS file with a primary HDU of BITPIX -32 (big-endian float32). */
export function fits(shape, values) {
  const card = (s) => s.padEnd(80, ' ');
  const cards = [
    card('SIMPLE  =                    T'),
    card('BITPIX  =                  -32'),
    card(`NAXIS   = ${String(shape.length).padStart(20)}`),
    // FITS lists the fastest axis first.
    ...[...shape].reverse().map((n, i) => card(`NAXIS${i + 1}  = ${String(n).padStart(20)}`)),
    card("OBJECT  = 'gpuscope test'"),
    card('END'),
  ];
  let head = cards.join('');
  head = head.padEnd(Math.ceil(head.length / 2880) * 2880, ' ');
  const data = Buffer.alloc(Math.ceil((values.length * 4) / 2880) * 2880);
  values.forEach((v, i) => data.writeFloatBE(v, 4 * i));
  return Buffer.concat([Buffer.from(head, 'latin1'), data]);
}

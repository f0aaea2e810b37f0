// Zarr stores in the page: a picked `.zarr` folder is opened in the decoding
// worker, its files read by byte ranges (File.slice with FileReaderSync), one
// chunk at a time, never the whole store. An array of three axes or more is
// shown plane by plane with a slider; an OME-Zarr group opens its first
// (full-resolution) level.
//
// app.js hands over (setup) how to show a decoded plane and how to report;
// this module owns its panel, built under #image-info.

let gs = null;
let hooks = null; // {show(name, image): Promise<bool>, message(text, kind), run()}
let panel = null;
let current = null; // {store, info, z}

const NODE_FILES = ['zarr.json', '.zarray', '.zgroup'];

/** Whether picked files come from a Zarr folder (their relative paths run
 * through a `.zarr` directory, or its metadata files are among them). */
export function isZarr(files) {
  return files.some((f) => {
    const parts = (f.webkitRelativePath || '').split('/');
    return parts.slice(0, -1).some((p) => /\.zarr$/i.test(p)) || (parts.length > 1 && NODE_FILES.includes(parts[parts.length - 1]));
  });
}

/** `gs`: the wasm.js module; `h`: {show, message, run} (see above). */
export function setup(wasmModule, h) {
  gs = wasmModule;
  hooks = h;
}

function buildPanel() {
  if (panel) return panel;
  panel = document.createElement('div');
  panel.id = 'zarr';
  panel.className = 'h5';
  panel.hidden = true;
  const about = document.createElement('span');
  about.id = 'zarr-array';
  const frameLabel = document.createElement('label');
  frameLabel.id = 'zarr-frame-row';
  frameLabel.textContent = 'Plane ';
  const range = document.createElement('input');
  range.type = 'range';
  range.id = 'zarr-frame';
  range.min = '1';
  range.value = '1';
  const out = document.createElement('output');
  out.id = 'zarr-frame-out';
  frameLabel.append(range, ' ', out);
  panel.append(about, ' ', frameLabel);
  document.getElementById('image-info').after(panel);
  // A plane is decoded when the slider is let go (or moved by keys), not on
  // every step of a drag.
  const label = () => {
    out.textContent = `${range.value} of ${range.max}`;
  };
  range.addEventListener('input', label);
  range.addEventListener('change', async () => {
    label();
    if (await showFrame(Number(range.value) - 1)) hooks.run();
  });
  return panel;
}

/** The store's folder among the picked files and each file's key below it:
 * the picked folder itself, or the one `.zarr` folder inside it that holds
 * metadata at its top. */
function storeOf(files) {
  const paths = files.map((f) => (f.webkitRelativePath || f.name).split('/'));
  const atTop = (depth) => paths.some((p) => p.length === depth + 2 && NODE_FILES.includes(p[depth + 1]));
  let root = paths[0].slice(0, 1);
  if (!atTop(0)) {
    const inner = paths.filter((p) => p.length >= 3 && /\.zarr$/i.test(p[1]) && NODE_FILES.includes(p[2])).map((p) => p[1]);
    if (new Set(inner).size === 1) root = [paths[0][0], inner[0]];
  }
  const prefix = `${root.join('/')}/`;
  const picked = [];
  files.forEach((f, i) => {
    const rel = paths[i].join('/');
    if (rel.startsWith(prefix)) picked.push({ file: f, key: rel.slice(prefix.length) });
  });
  return { name: root[root.length - 1], picked };
}

/** Opens the picked folder's files (a File list); resolves to whether a
 * plane is shown. */
export async function open(fileList) {
  const { name, picked } = storeOf([...fileList]);
  hooks.message(`Opening ${name}…`, 'info');
  let info;
  try {
    info = await gs.zarrOpen(
      name,
      picked.map((p) => p.file),
      picked.map((p) => p.key),
    );
  } catch (e) {
    let text = gs.message(e);
    while (text.startsWith(`${name}: `)) text = text.slice(name.length + 2);
    hooks.message(`Cannot open ${name}: ${text}`);
    return false;
  }
  current = { store: name, info, z: 0 };
  const p = buildPanel();
  p.hidden = false;
  p.querySelector('#zarr-array').textContent =
    `${info.path || '/'}: ${info.shape.join('×')} ${info.dtype}, chunks ${info.chunks.join('×')}, Zarr v${info.zarr_format} (${info.codecs})`;
  const range = p.querySelector('#zarr-frame');
  range.max = String(Math.max(info.frames, 1));
  range.value = '1';
  p.querySelector('#zarr-frame-row').hidden = info.frames <= 1;
  p.querySelector('#zarr-frame-out').textContent = `1 of ${info.frames}`;
  return showFrame(0);
}

async function showFrame(z) {
  let image;
  try {
    image = await gs.zarrFrame(z);
  } catch (e) {
    hooks.message(`Cannot read plane ${z + 1} of ${current.store}: ${gs.message(e)}`);
    return false;
  }
  current.z = z;
  const path = current.info.path ? `::${current.info.path}` : '';
  const frame = current.info.frames > 1 ? ` plane ${z + 1}` : '';
  return hooks.show(`${current.store}${path}${frame}`, image);
}

/** Hides the panel when another kind of file is opened. */
export function close() {
  if (panel) panel.hidden = true;
  current = null;
}

/** What the tests and the console read: {store, path, shape, dtype, frames, z}. */
export function status() {
  return current && { store: current.store, ...current.info, z: current.z };
}

// HDF5/NeXus files in the page: the picked files are read by byte ranges in
// the decoding worker (never whole, so a file larger than the tab's memory
// opens one frame at a time); a dataset list and a frame slider choose what
// the viewer shows. An Eiger master is picked together with its data files:
// its external links resolve against them by name.
//
// app.js hands over (setup) how to show a decoded frame and how to report;
// this module owns its panel, built under #image-info.

let gs = null;
let hooks = null; // {show(name, image): Promise<bool>, message(text, kind), run()}
let panel = null;
let current = null; // {file, tree, info, z}

const HDF5 = /\.(h5|hdf5|nxs|nx5|hdf)$/i;
// Eiger data files: opened through their master's links, not on their own.
const EIGER_DATA = /_data_\d+\.(h5|hdf5)$/i;

export const isHdf5 = (name) => HDF5.test(name);

/** `gs`: the wasm.js module; `h`: {show, message, run} (see above). */
export function setup(wasmModule, h) {
  gs = wasmModule;
  hooks = h;
}

function buildPanel() {
  if (panel) return panel;
  panel = document.createElement('div');
  panel.id = 'h5';
  panel.className = 'h5';
  panel.hidden = true;
  const dsLabel = document.createElement('label');
  dsLabel.textContent = 'Dataset ';
  const sel = document.createElement('select');
  sel.id = 'h5-dataset';
  dsLabel.append(sel);
  const frameLabel = document.createElement('label');
  frameLabel.id = 'h5-frame-row';
  frameLabel.textContent = 'Frame ';
  const range = document.createElement('input');
  range.type = 'range';
  range.id = 'h5-frame';
  range.min = '1';
  range.value = '1';
  const out = document.createElement('output');
  out.id = 'h5-frame-out';
  frameLabel.append(range, ' ', out);
  panel.append(dsLabel, ' ', frameLabel);
  document.getElementById('image-info').after(panel);
  // A new dataset or frame runs the chain, as a newly opened file does.
  sel.addEventListener('change', async () => {
    if (await choose(sel.value || null)) hooks.run();
  });
  // A frame is decoded when the slider is let go (or moved by keys), not on
  // every step of a drag.
  range.addEventListener('input', () => {
    out.textContent = `${range.value} of ${range.max}`;
  });
  range.addEventListener('change', async () => {
    if (await showFrame(Number(range.value) - 1)) hooks.run();
  });
  return panel;
}

/** The file to open among the picked ones: a master (or any HDF5 file that
 * is not an Eiger data file), first. */
function order(files) {
  const h5 = files.filter((f) => isHdf5(f.name));
  const main = h5.find((f) => /master/i.test(f.name)) ?? h5.find((f) => !EIGER_DATA.test(f.name)) ?? h5[0];
  return [main, ...files.filter((f) => f !== main)];
}

const describe = (n) => `${n.path}  (${n.shape.join('×')} ${n.dtype})`;

/** Opens the picked files (a File list); resolves to whether a frame is shown. */
export async function open(fileList) {
  const files = order([...fileList]);
  const name = files[0].name;
  hooks.message(`Opening ${name}…`, 'info');
  let tree;
  try {
    ({ tree } = await gs.h5Open(files));
  } catch (e) {
    hooks.message(`Cannot open ${name}: ${gs.message(e)}`);
    return false;
  }
  const readable = tree.filter((n) => n.dtype && n.shape && n.shape.length >= 2);
  const p = buildPanel();
  const sel = p.querySelector('#h5-dataset');
  sel.replaceChildren(new Option('default (NeXus default or Eiger series)', ''), ...readable.map((n) => new Option(describe(n), n.path)));
  current = { file: name, tree, info: null, z: 0 };
  // Without a NeXus default, the first image-like dataset.
  let ok = await choose(null, true);
  if (!ok && readable.length) {
    sel.value = readable[0].path;
    ok = await choose(readable[0].path);
  } else if (!ok) {
    const why = tree.find((n) => n.note)?.note;
    hooks.message(`Cannot open ${name}: it holds no dataset of numbers the page reads${why ? ` (${why})` : ''}.`);
  }
  return ok;
}

async function choose(path, quiet = false) {
  let info;
  try {
    info = await gs.h5Select(path);
  } catch (e) {
    if (!quiet) hooks.message(`Cannot open ${current.file}${path ? `::${path}` : ''}: ${gs.message(e)}`);
    return false;
  }
  current.info = info;
  const p = buildPanel();
  p.hidden = false;
  if (path !== null || p.querySelector('#h5-dataset').value !== '') p.querySelector('#h5-dataset').value = path ?? '';
  const range = p.querySelector('#h5-frame');
  range.max = String(info.frames);
  range.value = '1';
  p.querySelector('#h5-frame-row').hidden = info.frames <= 1;
  p.querySelector('#h5-frame-out').textContent = `1 of ${info.frames}`;
  return showFrame(0);
}

async function showFrame(z) {
  let image;
  try {
    image = await gs.h5Frame(z);
  } catch (e) {
    hooks.message(`Cannot read frame ${z + 1} of ${current.file}: ${gs.message(e)}`);
    return false;
  }
  current.z = z;
  image.masked = current.info.masked;
  const paths = current.info.paths;
  const what = paths.length > 1 ? `${paths[0]}…${paths[paths.length - 1].split('/').pop()}` : paths[0];
  const frame = current.info.frames > 1 ? ` frame ${z + 1}` : '';
  return hooks.show(`${current.file}::${what}${frame}`, image);
}

/** Hides the panel when another kind of file is opened. */
export function close() {
  if (panel) panel.hidden = true;
  current = null;
}

/** What the tests and the console read: {file, paths, frames, z}. */
export function status() {
  return current && { file: current.file, paths: current.info?.paths, frames: current.info?.frames, z: current.z, tree: current.tree };
}

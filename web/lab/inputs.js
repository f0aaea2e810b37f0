// The lab's inputs: a generated array (any size, for the timing sweep) or
// an image, a built-in sample or the student's own file, decoded by the
// same wasm decoder as the main page (in its worker).
import { decode } from '../wasm.js';
import { oneChannel } from '../ops.js';
import { SAMPLES } from '../samples.js';

export { SAMPLES };

/** A generated input of `n` elements: integers 0..255 from a fixed seed
 * (the same array on every run and every machine, so a shared link gives
 * the same check), smooth enough to look like an image. `twoD` gives a
 * square (side ceil(sqrt(n))) for the image exercises. */
export function generated(n, twoD) {
  if (twoD) {
    const side = Math.max(1, Math.ceil(Math.sqrt(n)));
    return { data: pattern(side * side, side), shape: [side, side], source: 'array', label: `generated ${side}×${side}` };
  }
  return { data: pattern(n, 0), shape: [n], source: 'array', label: `generated array of ${n}` };
}

function pattern(n, width) {
  let s = 12345; // xorshift32: deterministic, no Math.random
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    const noise = (s >>> 0) % 64;
    const x = width ? i % width : i;
    const y = width ? Math.floor(i / width) : 0;
    const wave = 96 + 80 * Math.sin(x / 23) * Math.cos(y / 31);
    out[i] = Math.min(255, Math.max(0, Math.floor(wave + noise - 32)));
  }
  return out;
}

const imageCache = new Map();

/** Decodes a sample (by file name) once; resolves to the lab's image form. */
export async function sample(file) {
  if (!imageCache.has(file)) {
    const p = (async () => {
      const response = await fetch(new URL(`../samples/${file}`, import.meta.url));
      if (!response.ok) throw new Error(`cannot fetch the sample ${file} (HTTP ${response.status})`);
      return asImage(await decode(file, new Uint8Array(await response.arrayBuffer())), file);
    })();
    p.catch(() => imageCache.delete(file));
    imageCache.set(file, p);
  }
  return imageCache.get(file);
}

/** Decodes the student's file (a File). */
export async function file(f) {
  const bytes = new Uint8Array(await f.arrayBuffer());
  return asImage(await decode(f.name, bytes), f.name);
}

/** One 2-D channel of a decoded image: RGB(A) as luminance (the main page's
 * weights), the first slice of a stack. */
function asImage(decoded, name) {
  let { shape, data } = oneChannel({ data: decoded.data, shape: decoded.shape });
  if (shape.length === 3) {
    data = data.subarray(0, shape[1] * shape[2]);
    shape = [shape[1], shape[2]];
  } else if (shape.length === 1) {
    shape = [1, shape[0]];
  }
  const rgb = decoded.shape.length === 3 && (decoded.shape[2] === 3 || decoded.shape[2] === 4);
  const note = rgb ? ', luminance' : decoded.shape.length === 3 ? ', first slice' : '';
  return { data, shape, source: 'image', label: `${name}: ${shape[0]}×${shape[1]} ${decoded.dtype}${note}` };
}

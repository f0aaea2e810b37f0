// Keeping the student's work: every exercise's code and settings in the
// browser's localStorage (so a reload or a closed tab loses nothing), and
// the current one in the URL's hash (so a link shares a solution). The code
// in the URL is deflated and base64url-encoded to keep links short.

const KEY = 'gpuscope-lab';

/** {current, work: {exerciseId: {code, workgroups, n, input}}} */
export function loadStored() {
  try {
    const s = JSON.parse(localStorage.getItem(KEY) ?? 'null');
    if (s && typeof s === 'object' && s.work && typeof s.work === 'object') return s;
  } catch {
    // A corrupt entry (edited by hand, another version) starts afresh.
  }
  return { current: null, work: {} };
}

export function store(stored) {
  try {
    localStorage.setItem(KEY, JSON.stringify(stored));
    return true;
  } catch {
    return false; // private mode or quota: the URL still has the work
  }
}

const b64url = (bytes) => {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
};

const unb64url = (text) => {
  const s = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
};

async function pipe(bytes, stream) {
  const out = new Response(new Blob([bytes]).stream().pipeThrough(stream));
  return new Uint8Array(await out.arrayBuffer());
}

/** The hash of a link to `work` of exercise `id`. */
export async function toHash(id, work) {
  const params = new URLSearchParams({ ex: id, input: work.input, n: String(work.n), wg: work.workgroups });
  const raw = new TextEncoder().encode(work.code);
  // 'z' marks deflated text, 'p' plain (a browser without CompressionStream).
  const code = typeof CompressionStream === 'function' ? `z${b64url(await pipe(raw, new CompressionStream('deflate-raw')))}` : `p${b64url(raw)}`;
  params.set('code', code);
  return `#${params}`;
}

/** Reads a hash made by toHash: {id, work} with only the fields present,
 * or null (no lab hash). Rejects with a readable error on a damaged link. */
export async function fromHash(hash) {
  const params = new URLSearchParams(hash.replace(/^#/, ''));
  const id = params.get('ex');
  if (!id) return null;
  const work = {};
  if (params.has('input')) work.input = params.get('input');
  if (params.has('n')) work.n = Number(params.get('n'));
  if (params.has('wg')) work.workgroups = params.get('wg');
  const code = params.get('code');
  if (code) {
    try {
      const bytes = unb64url(code.slice(1));
      const raw = code[0] === 'z' ? await pipe(bytes, new DecompressionStream('deflate-raw')) : bytes;
      work.code = new TextDecoder().decode(raw);
    } catch {
      throw new Error('The code in this link is damaged (cut short when copied?): the stored or starter code is shown instead.');
    }
  }
  return { id, work };
}

// Comparing a kernel's output with the CPU reference, and saying which
// elements are wrong and where, in words a student can act on: runs of
// consecutive wrong indices ("elements 64 to 199"), (row, column) for an
// image, and the first few values got and expected.

/** Compares `got` with `expected` (typed arrays of the same length).
 * `rule`: {exact: true} or {rtol} (tolerance relative to the largest
 * |expected|, plus `atol`). `shape` [h, w] names positions as (row, col);
 * `names` (optional) names each element (a histogram bin, a workgroup's
 * sum). Returns {ok, wrong, total, text, runs, samples, maxDiff}. */
export function compare(got, expected, rule, shape = null, names = null) {
  const total = expected.length;
  let scale = 0;
  for (let i = 0; i < total; i++) scale = Math.max(scale, Math.abs(expected[i]));
  const tol = rule.exact ? 0 : rule.rtol * scale + (rule.atol ?? 0);
  const wrongIdx = [];
  let maxDiff = 0;
  let low = 0; // wrong elements below their expected value (lost updates)
  for (let i = 0; i < total; i++) {
    const g = i < got.length ? got[i] : NaN;
    const e = expected[i];
    const d = Math.abs(g - e);
    const bad = rule.exact ? g !== e : !(d <= tol); // NaN is wrong
    if (bad) {
      wrongIdx.push(i);
      if (g < e) low++;
      if (!(d <= maxDiff)) maxDiff = d;
    }
  }
  const rel = rule.exact ? 'exactly' : `within ${fmt(tol)} (${rule.rtol} of the largest |value| ${fmt(scale)}${rule.atol ? ` + ${rule.atol}` : ''})`;
  if (!wrongIdx.length) {
    return { ok: true, wrong: 0, total, text: `Correct: all ${total} elements equal the CPU reference ${rel}.`, runs: [], samples: [], maxDiff: 0 };
  }
  const runs = toRuns(wrongIdx);
  const where = (i) => (names ? names(i) : shape ? `(row ${Math.floor(i / shape[1])}, col ${i % shape[1]})` : `[${i}]`);
  const samples = wrongIdx.slice(0, 5).map((i) => ({ index: i, where: where(i), got: got[i], expected: expected[i] }));
  const runText = runs
    .slice(0, 4)
    .map(([a, b]) => (a === b ? `${names ? names(a) : a}` : `${names ? names(a) : a} to ${names ? names(b) : b}`))
    .join(', ');
  const parts = [
    `Wrong: ${wrongIdx.length} of ${total} elements differ from the CPU reference (expected ${rel}).`,
    `Wrong ${names ? '' : 'indices '}${runText}${runs.length > 4 ? `, … (${runs.length} runs)` : ''}.`,
  ];
  if (shape) parts.push(borderNote(wrongIdx, shape));
  parts.push(`First: ${samples.map((s) => `${s.where} got ${fmt(s.got)}, expected ${fmt(s.expected)}`).join('; ')}.`);
  if (wrongIdx.every((i) => got[i] === 0)) parts.push('Every wrong element is 0, as the output starts: no invocation wrote it.');
  else if (low === wrongIdx.length && wrongIdx.length > 1) parts.push('Every wrong value is too low, as when updates are lost.');
  return { ok: false, wrong: wrongIdx.length, total, text: parts.filter(Boolean).join(' '), runs, samples, maxDiff };
}

/** Consecutive indices as [first, last] pairs. */
export function toRuns(idx) {
  const runs = [];
  for (const i of idx) {
    const last = runs[runs.length - 1];
    if (last && last[1] === i - 1) last[1] = i;
    else runs.push([i, i]);
  }
  return runs;
}

/** "All on the border" when every wrong pixel of an image is in its first or
 * last row or column: the boundary rule is the thing to look at. */
function borderNote(idx, [h, w]) {
  const onBorder = (i) => {
    const r = Math.floor(i / w);
    const c = i % w;
    return r === 0 || c === 0 || r === h - 1 || c === w - 1;
  };
  if (idx.every(onBorder)) return 'All wrong pixels are on the image border: check the boundary rule.';
  return '';
}

export function fmt(v) {
  if (v === undefined || v === null) return String(v);
  if (Number.isNaN(v)) return 'NaN';
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e6) ? v.toExponential(4) : String(Number(v.toPrecision(6)));
}

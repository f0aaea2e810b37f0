// Outlier removal, looked at: how many pixels the step replaced and the
// difference (before − after) as an image, where every replaced pixel is
// non-zero and every other one is 0.

/** {count, diff}: the pixels whose value changed and before − after. */
export function replaced(before, after) {
  const diff = new Float32Array(after.length);
  let count = 0;
  for (let i = 0; i < after.length; i++) {
    const d = before[i] - after[i];
    // NaN stays NaN in both (not a replacement).
    if (d !== 0 && !(Number.isNaN(before[i]) && Number.isNaN(after[i]))) count++;
    diff[i] = Number.isNaN(d) ? 0 : d;
  }
  return { count, diff };
}

/** The input of step k of a run: the latest earlier output that is not a
 * table (tables pass their input on), or the image. */
export function inputOf(outputs, k, image) {
  for (let j = k - 1; j >= 0; j--) if (outputs[j].kind !== 'table') return outputs[j];
  return image;
}

//! CPU reference, for the tests and `--cpu` only: flood fill from each
//! unlabelled foreground pixel in raster order, which numbers components
//! exactly as scipy does.

use super::*;

pub fn label(mask: &[bool], shape: &[usize], connectivity: usize) -> Result<Labels> {
    let s = check(mask.len(), shape, connectivity)?;
    let mut offsets = backward_offsets(connectivity);
    // Both halves of the structure.
    let forward: Vec<[i64; 3]> = offsets.iter().map(|d| d.map(|v| -v)).collect();
    offsets.extend(forward);
    let mut labels = vec![0i32; mask.len()];
    let mut count = 0usize;
    let mut stack = Vec::new();
    for start in 0..mask.len() {
        if !mask[start] || labels[start] != 0 {
            continue;
        }
        count += 1;
        if count > i32::MAX as usize {
            return Err(too_many());
        }
        labels[start] = count as i32;
        stack.push(start);
        while let Some(i) = stack.pop() {
            let c = [
                (i / (s[1] * s[2])) as i64,
                ((i / s[2]) % s[1]) as i64,
                (i % s[2]) as i64,
            ];
            for d in &offsets {
                let q = [c[0] + d[0], c[1] + d[1], c[2] + d[2]];
                if (0..3).any(|a| q[a] < 0 || q[a] >= s[a] as i64) {
                    continue;
                }
                let j = ((q[0] as usize * s[1]) + q[1] as usize) * s[2] + q[2] as usize;
                if mask[j] && labels[j] == 0 {
                    labels[j] = count as i32;
                    stack.push(j);
                }
            }
        }
    }
    Ok(Labels { labels, count })
}

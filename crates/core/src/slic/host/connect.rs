//! The connectivity step on the host (volumes whose k-means labels do not
//! fit the GPU's connectivity step): the answer of the twin's flood fill
//! (`cpu::connect`, skimage's `_enforce_label_connectivity_cython`), found
//! with a union-find over the pixels, so that only pieces smaller than
//! `min_size` are searched breadth-first, pixel by pixel.

use crate::slic::NONE;

/// The connectivity step: face-connected pieces of each k-means label
/// (`raw`, NONE for none), numbered from `start` in raster order of their
/// first pixel; a piece smaller than `min_size` takes the label of the last
/// pixel of an earlier piece that a breadth-first search from its first
/// pixel meets (neighbours +x, -x, +y, -y, +z, -z) whose label is not the
/// counter's, or else the counter's, which then is not advanced. NONE
/// pixels get `start - 1`. `raw` has `dims` (z, y, x) pixels; its
/// allocation holds the result. A search stops at `max_size` pixels (at
/// least one), as skimage's does: when a piece is that large, the whole
/// step runs as skimage's sequential search ([`capped`]).
pub fn connect(
    raw: Vec<u32>,
    dims: [usize; 3],
    min_size: usize,
    max_size: usize,
    start: i32,
) -> Vec<i32> {
    let piece = pieces(&raw, dims);
    if piece.size.iter().any(|&s| s as usize >= max_size.max(1)) {
        drop(piece);
        return capped(&raw, dims, min_size, max_size, start);
    }
    let labels = piece_labels(&piece, dims, min_size, start);
    let unset = start - 1;
    let mut out = raw;
    for (o, &k) in out.iter_mut().zip(&piece.of) {
        let label = if k == NONE { unset } else { labels[k as usize] };
        *o = label as u32;
    }
    drop(piece);
    // Reinterpreted in place (the same size and alignment).
    out.into_iter().map(|v| v as i32).collect()
}

/// The pieces of a volume: each pixel's piece (NONE for none), numbered in
/// raster order of their first pixel, and each piece's size and first
/// pixel.
struct Pieces {
    of: Vec<u32>,
    size: Vec<u32>,
    first: Vec<u32>,
}

/// A union-find in raster order in which a parent always precedes its
/// child, so that a root is its set's first pixel; then the sets numbered
/// in one pass.
fn pieces(raw: &[u32], [nz, ny, nx]: [usize; 3]) -> Pieces {
    let plane = ny * nx;
    let mut parent: Vec<u32> = (0..raw.len() as u32).collect();
    let mut i = 0;
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                let l = raw[i];
                if l != NONE {
                    if x > 0 && raw[i - 1] == l {
                        unite(&mut parent, i, i - 1);
                    }
                    if y > 0 && raw[i - nx] == l {
                        unite(&mut parent, i, i - nx);
                    }
                    if z > 0 && raw[i - plane] == l {
                        unite(&mut parent, i, i - plane);
                    }
                }
                i += 1;
            }
        }
    }
    // A pixel's parent precedes it, so it already holds its piece number.
    let (mut size, mut first) = (Vec::new(), Vec::new());
    for i in 0..raw.len() {
        if raw[i] == NONE {
            parent[i] = NONE;
            continue;
        }
        let up = parent[i] as usize;
        let k = if up == i {
            size.push(0u32);
            first.push(i as u32);
            (size.len() - 1) as u32
        } else {
            parent[up]
        };
        parent[i] = k;
        size[k as usize] += 1;
    }
    Pieces {
        of: parent,
        size,
        first,
    }
}

/// The root of `x`'s set, halving the path on the way.
fn find(parent: &mut [u32], mut x: usize) -> usize {
    loop {
        let up = parent[x] as usize;
        if up == x {
            return x;
        }
        let upper = parent[up];
        parent[x] = upper;
        x = upper as usize;
    }
}

/// Unites the sets of `a` and `b` under the earlier root.
fn unite(parent: &mut [u32], a: usize, b: usize) {
    let (ra, rb) = (find(parent, a), find(parent, b));
    if ra != rb {
        parent[ra.max(rb)] = ra.min(rb) as u32;
    }
}

/// Each piece's label, in piece order: kept pieces take the counter, small
/// ones their search's answer ([`connect`]).
fn piece_labels(piece: &Pieces, dims: [usize; 3], min_size: usize, start: i32) -> Vec<i32> {
    let mut labels = vec![0i32; piece.size.len()];
    let mut search = Search {
        visited: Vec::new(),
        queue: Vec::new(),
    };
    let mut current = start;
    for k in 0..piece.size.len() {
        if piece.size[k] as usize >= min_size {
            labels[k] = current;
            current += 1;
        } else {
            let met = search.last_met(piece, &labels, k as u32, dims, current);
            labels[k] = met.unwrap_or(current);
        }
    }
    labels
}

/// The breadth-first search of small pieces: visited pixels (one bit each,
/// allocated at the first search) and the queue.
struct Search {
    visited: Vec<u64>,
    queue: Vec<u32>,
}

impl Search {
    /// The label of the last pixel of an earlier piece met by a
    /// breadth-first search of piece `k` whose label is not `current`.
    fn last_met(
        &mut self,
        piece: &Pieces,
        labels: &[i32],
        k: u32,
        [nz, ny, nx]: [usize; 3],
        current: i32,
    ) -> Option<i32> {
        if self.visited.is_empty() {
            self.visited = vec![0; piece.of.len().div_ceil(64)];
        }
        let s = piece.first[k as usize] as usize;
        self.visited[s / 64] |= 1 << (s % 64);
        self.queue.clear();
        self.queue.push(s as u32);
        let mut met = None;
        let mut at = 0;
        while at < self.queue.len() {
            let i = self.queue[at] as usize;
            at += 1;
            for j in neighbours(i, [nz, ny, nx]).into_iter().flatten() {
                let pj = piece.of[j];
                if pj == k {
                    if self.visited[j / 64] & (1 << (j % 64)) == 0 {
                        self.visited[j / 64] |= 1 << (j % 64);
                        self.queue.push(j as u32);
                    }
                } else if pj < k && labels[pj as usize] != current {
                    // NONE is above every piece number: never met.
                    met = Some(labels[pj as usize]);
                }
            }
        }
        met
    }
}

/// skimage's `_enforce_label_connectivity_cython` as it is written: a
/// breadth-first search from each unlabelled pixel in raster order that
/// stops when its piece has `max_size` pixels (at least one; the
/// superpixel's other pixels start new pieces later, and the neighbours
/// not yet looked at are not met); a piece smaller than `min_size` takes
/// the label of the last labelled neighbour met whose label is not the
/// counter's, or keeps the counter, which is then not advanced. Only runs
/// when a piece reaches the cap, where the union-find's pieces are not
/// skimage's.
pub(crate) fn capped(
    raw: &[u32],
    [nz, ny, nx]: [usize; 3],
    min_size: usize,
    max_size: usize,
    start: i32,
) -> Vec<i32> {
    let unset = start - 1;
    let cap = max_size.max(1);
    let mut out = vec![unset; raw.len()];
    let mut queue: Vec<usize> = Vec::new();
    let mut current = start;
    for s in 0..raw.len() {
        if raw[s] == NONE || out[s] != unset {
            continue;
        }
        let label = raw[s];
        let mut adjacent = current;
        out[s] = current;
        queue.clear();
        queue.push(s);
        let mut at = 0;
        'search: while at < queue.len() && queue.len() < cap {
            let i = queue[at];
            at += 1;
            for j in neighbours(i, [nz, ny, nx]).into_iter().flatten() {
                if raw[j] == label && out[j] == unset {
                    out[j] = current;
                    queue.push(j);
                    if queue.len() >= cap {
                        break 'search;
                    }
                } else if out[j] != unset && out[j] != current {
                    adjacent = out[j];
                }
            }
        }
        if queue.len() < min_size {
            for &i in &queue {
                out[i] = adjacent;
            }
        } else {
            current += 1;
        }
    }
    out
}

/// The face neighbours of pixel `i` in skimage's order (+x, -x, +y, -y,
/// +z, -z); None beyond the volume's edges.
fn neighbours(i: usize, [nz, ny, nx]: [usize; 3]) -> [Option<usize>; 6] {
    let plane = ny * nx;
    let (z, y, x) = (i / plane, (i / nx) % ny, i % nx);
    [
        (x + 1 < nx).then(|| i + 1),
        (x > 0).then(|| i - 1),
        (y + 1 < ny).then(|| i + nx),
        (y > 0).then(|| i - nx),
        (z + 1 < nz).then(|| i + plane),
        (z > 0).then(|| i - plane),
    ]
}

//! The seed grid: skimage's `regular_grid`, each axis's seeds, and how far
//! a pixel searches for the centres whose windows can hold it.

/// The seed grid along one axis: seeds at start, start + step, ...
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Axis {
    pub start: usize,
    pub step: usize,
    pub count: usize,
}

impl Axis {
    /// The seed cell of coordinate `q` (the nearest seed, the first or
    /// last one beyond the ends).
    pub(crate) fn own_cell(&self, q: usize) -> usize {
        if q <= self.start {
            0
        } else {
            ((q - self.start + self.step / 2) / self.step).min(self.count - 1)
        }
    }

    /// The farthest any coordinate of an axis of `n` pixels lies from the
    /// seed of its own cell.
    pub(crate) fn own_offset(&self, n: usize) -> usize {
        let last = self.start + self.count.saturating_sub(1) * self.step;
        let ends = self.start.max(n.saturating_sub(1 + last));
        if self.count > 1 {
            ends.max(self.step / 2)
        } else {
            ends
        }
    }
}

/// The seed cells a pixel searches on each side of its own along an axis
/// of seed step `step` (cpu.rs and kmeans.wgsl: `radius`): every centre
/// whose window can hold the pixel, given that no centre has drifted
/// more than `drift` from its seed along the axis. It is seeded less than
/// `drift + reach` (`Prepared::reach`) from the pixel's own seed, so at
/// most this many cells away (the half pixel covers the rounding of the
/// f32 sum and division, which the GPU may round differently: a larger
/// radius only adds candidates that the window test rejects).
pub(crate) fn search_radius(drift: f32, reach: f32, step: usize) -> usize {
    ((drift + reach + 0.5) / step as f32).floor() as usize
}

/// skimage.util.regular_grid for a 3-D shape: (start, step) per axis
/// (a `slice(None)` is (0, 1)).
pub(crate) fn regular_grid(shape: [usize; 3], n_points: usize) -> [(usize, usize); 3] {
    let space = shape.iter().map(|&v| v as f64).product::<f64>();
    let n = n_points as f64;
    if space <= n {
        return [(0, 1); 3];
    }
    // numpy's argsort of three values is stable (insertion sort).
    let mut order = [0usize, 1, 2];
    order.sort_by_key(|&a| shape[a]);
    let sorted: Vec<f64> = order.iter().map(|&a| shape[a] as f64).collect();
    let mut steps = [(space / n).powf(1.0 / 3.0); 3];
    if (0..3).any(|d| sorted[d] < steps[d]) {
        for dim in 0..3 {
            steps[dim] = sorted[dim];
            if dim + 1 < 3 {
                let rest: f64 = sorted[dim + 1..].iter().product();
                let s = (rest / n).powf(1.0 / (3 - dim - 1) as f64);
                for v in steps.iter_mut().skip(dim + 1) {
                    *v = s;
                }
            }
            if (0..3).all(|d| sorted[d] >= steps[d]) {
                break;
            }
        }
    }
    let mut out = [(0, 1); 3];
    for (rank, &axis) in order.iter().enumerate() {
        let start = (steps[rank] / 2.0).floor() as usize;
        // numpy rounds half to even; a step below 0.5 would be a Python error.
        let step = (steps[rank].round_ties_even() as usize).max(1);
        out[axis] = (start, step);
    }
    out
}

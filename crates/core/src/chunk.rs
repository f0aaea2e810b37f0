//! The chunk planner: splits an array of up to three dimensions into boxes
//! that fit the device's binding limit and the memory budget, with a halo on
//! every split axis so that stencils see their real neighbours.
//!
//! Axes that are not split are passed whole and the kernel applies the
//! boundary mode itself; on split axes the host gathers the halo, mapping
//! coordinates outside the array through the same mode, so every mode (wrap
//! included) gives the same answer chunked or not.

use crate::boundary::Mode;
pub use crate::boundary::map_coordinate;
use crate::error::{Error, Result};

/// Shape of an array seen as (z, y, x); 1-D and 2-D arrays get leading ones.
pub type Shape3 = [usize; 3];

/// Pads a shape of 1 to 3 dimensions to (z, y, x).
pub fn shape3(shape: &[usize]) -> Result<Shape3> {
    match *shape {
        [x] => Ok([1, 1, x]),
        [y, x] => Ok([1, y, x]),
        [z, y, x] => Ok([z, y, x]),
        _ => Err(Error::InvalidInput(format!(
            "arrays of {} dimensions are not supported; gpuscope handles 1-D, 2-D and 3-D arrays",
            shape.len()
        ))),
    }
}

/// One box of work: the core region it produces and the halo gathered
/// around it on split axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub core_lo: Shape3,
    pub core_hi: Shape3,
    /// Halo gathered on each side of the core; zero on axes passed whole.
    pub pad: Shape3,
}

impl Chunk {
    pub fn core_shape(&self) -> Shape3 {
        [0, 1, 2].map(|a| self.core_hi[a] - self.core_lo[a])
    }
    pub fn box_shape(&self) -> Shape3 {
        [0, 1, 2].map(|a| self.core_hi[a] - self.core_lo[a] + 2 * self.pad[a])
    }
}

/// The chunks of an array, made one at a time from a few numbers: a
/// stack declaring billions of slices plans in constant memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    shape: Shape3,
    halo: Shape3,
    /// The axis split into runs of `step` (None: one chunk, the whole array;
    /// `count` 0: no chunk, an empty array).
    split: Option<(usize, usize)>,
    count: usize,
}

impl Plan {
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Chunk `i` (< `len()`), in raster order of the axes before the split
    /// one, then along it.
    pub fn get(&self, i: usize) -> Chunk {
        let shape = self.shape;
        let Some((axis, step)) = self.split else {
            return Chunk {
                core_lo: [0; 3],
                core_hi: shape,
                pad: [0; 3],
            };
        };
        let runs = shape[axis].div_ceil(step);
        let (outer, k) = (i / runs, i % runs);
        // The axes before the split one go one index at a time.
        let (z, y) = match axis {
            0 => (0, 0),
            1 => (outer, 0),
            _ => (outer / shape[1], outer % shape[1]),
        };
        let mut core_lo = [z, y, 0];
        let mut core_hi = [z + 1, y + 1, shape[2]];
        let mut pad = [0; 3];
        pad[..axis].copy_from_slice(&self.halo[..axis]);
        core_lo[axis] = k * step;
        core_hi[axis] = ((k + 1) * step).min(shape[axis]);
        for b in axis + 1..3 {
            core_lo[b] = 0;
            core_hi[b] = shape[b];
        }
        if step < shape[axis] {
            pad[axis] = self.halo[axis];
        }
        Chunk {
            core_lo,
            core_hi,
            pad,
        }
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = Chunk> + '_ {
        (0..self.count).map(|i| self.get(i))
    }

    /// The only chunk, where the array is one.
    pub fn single(&self) -> Option<Chunk> {
        (self.count == 1).then(|| self.get(0))
    }

    /// Elements of the largest box (the first chunk's: the split axis is
    /// cut into equal runs and a remainder).
    pub fn largest_box(&self) -> usize {
        self.iter()
            .next()
            .map_or(0, |c| c.box_shape().iter().product())
    }

    /// Elements of the largest core.
    pub fn largest_core(&self) -> usize {
        self.iter()
            .next()
            .map_or(0, |c| c.core_shape().iter().product())
    }
}

/// Plans chunks of `shape` so that a box (core plus halo) holds at most
/// `max_elements` elements. `halo` is the stencil reach per axis.
pub fn plan(shape: Shape3, halo: Shape3, max_elements: u64) -> Result<Plan> {
    if shape.contains(&0) {
        return Ok(Plan {
            shape,
            halo,
            split: None,
            count: 0,
        });
    }
    let n = |v: usize| v as u64;
    let whole: u64 = shape.iter().map(|&v| n(v)).product();
    if whole <= max_elements {
        return Ok(Plan {
            shape,
            halo,
            split: None,
            count: 1,
        });
    }
    // Split the slowest axis first: boxes stay contiguous in host memory.
    for axis in 0..3 {
        let before: u64 = (0..axis).map(|b| n(1 + 2 * halo[b])).product();
        let after: u64 = (axis + 1..3).map(|b| n(shape[b])).product();
        let per_slice = before.saturating_mul(after);
        let fit = (max_elements / per_slice.max(1)).saturating_sub(n(2 * halo[axis]));
        if fit == 0 {
            continue;
        }
        let step = if fit >= n(shape[axis]) {
            shape[axis]
        } else {
            // Equal-sized chunks rather than one small remainder.
            let count = n(shape[axis]).div_ceil(fit);
            n(shape[axis]).div_ceil(count) as usize
        };
        let outer: usize = shape[..axis].iter().product();
        return Ok(Plan {
            shape,
            halo,
            split: Some((axis, step)),
            count: outer * shape[axis].div_ceil(step),
        });
    }
    Err(Error::InvalidInput(format!(
        "the stencil reach {halo:?} is too large for the device's binding limit of {max_elements} elements"
    )))
}

/// Copies the box of `chunk` (core plus halo) out of `src`, mapping halo
/// coordinates outside the array through `mode`.
pub fn gather<T: Copy>(src: &[T], shape: Shape3, chunk: &Chunk, mode: Mode, cval: T) -> Vec<T> {
    let plane = shape[1] * shape[2];
    gather_with(
        |z| &src[z * plane..(z + 1) * plane],
        shape,
        chunk,
        mode,
        cval,
    )
}

/// [`gather`] from an array held slice by slice: `slice(z)` returns slice z
/// (streaming keeps only the slices the current chunks need).
pub fn gather_with<'a, T: Copy + 'a>(
    slice: impl Fn(usize) -> &'a [T],
    shape: Shape3,
    chunk: &Chunk,
    mode: Mode,
    cval: T,
) -> Vec<T> {
    let mut out = Vec::new();
    gather_into(slice, shape, chunk, mode, cval, &mut out);
    out
}

/// [`gather_with`] into `out` (cleared first; its memory is reused).
pub fn gather_into<'a, T: Copy + 'a>(
    slice: impl Fn(usize) -> &'a [T],
    shape: Shape3,
    chunk: &Chunk,
    mode: Mode,
    cval: T,
    out: &mut Vec<T>,
) {
    let nx = shape[2];
    let row = |z: usize, y: usize| slice(z).get(y * nx..(y + 1) * nx);
    gather_rows_into(row, shape, chunk, mode, cval, out);
}

/// [`gather_into`] from rows: `row(z, y)` is row `y` of slice `z` (a
/// missing row is read as the constant; callers provide every row the box
/// reaches).
pub fn gather_rows_into<'a, T: Copy + 'a>(
    row: impl Fn(usize, usize) -> Option<&'a [T]>,
    shape: Shape3,
    chunk: &Chunk,
    mode: Mode,
    cval: T,
    out: &mut Vec<T>,
) {
    let bs = chunk.box_shape();
    let (zs, ys, xs) = (
        box_coordinates(shape, chunk, mode, 0),
        box_coordinates(shape, chunk, mode, 1),
        box_coordinates(shape, chunk, mode, 2),
    );
    let contiguous_rows = chunk.pad[2] == 0 && chunk.core_lo[2] == 0 && bs[2] == shape[2];
    out.clear();
    out.reserve(bs.iter().product());
    for z in &zs {
        for y in &ys {
            match (z, y) {
                (Some(z), Some(y)) => match row(*z, *y) {
                    Some(row) if contiguous_rows => out.extend_from_slice(row),
                    Some(row) => out.extend(xs.iter().map(|x| x.map_or(cval, |x| row[x]))),
                    None => out.extend(std::iter::repeat_n(cval, bs[2])),
                },
                _ => out.extend(std::iter::repeat_n(cval, bs[2])),
            }
        }
    }
}

/// The array coordinate of each box position on `axis` (`None`: the constant).
pub fn box_coordinates(
    shape: Shape3,
    chunk: &Chunk,
    mode: Mode,
    axis: usize,
) -> Vec<Option<usize>> {
    (0..chunk.box_shape()[axis])
        .map(|i| {
            let c = chunk.core_lo[axis] as i64 - chunk.pad[axis] as i64 + i as i64;
            map_coordinate(c, shape[axis], mode)
        })
        .collect()
}

/// Writes the core-shaped result `part` of `chunk` into `dst`.
pub fn scatter<T: Copy>(dst: &mut [T], shape: Shape3, chunk: &Chunk, part: &[T]) {
    let cs = chunk.core_shape();
    for z in 0..cs[0] {
        for y in 0..cs[1] {
            let from = (z * cs[1] + y) * cs[2];
            let to = ((chunk.core_lo[0] + z) * shape[1] + chunk.core_lo[1] + y) * shape[2]
                + chunk.core_lo[2];
            dst[to..to + cs[2]].copy_from_slice(&part[from..from + cs[2]]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_match_scipy_tables() {
        // abcd with 3 extra on each side, from scipy.ndimage's mode docs.
        let row =
            |mode| -> Vec<Option<usize>> { (-3..7).map(|c| map_coordinate(c, 4, mode)).collect() };
        let s = |v: &[usize]| v.iter().map(|&x| Some(x)).collect::<Vec<_>>();
        assert_eq!(row(Mode::Reflect), s(&[2, 1, 0, 0, 1, 2, 3, 3, 2, 1]));
        assert_eq!(row(Mode::Mirror), s(&[3, 2, 1, 0, 1, 2, 3, 2, 1, 0]));
        assert_eq!(row(Mode::Nearest), s(&[0, 0, 0, 0, 1, 2, 3, 3, 3, 3]));
        assert_eq!(row(Mode::Wrap), s(&[1, 2, 3, 0, 1, 2, 3, 0, 1, 2]));
        assert_eq!(row(Mode::Constant)[0], None);
        assert_eq!(map_coordinate(-5, 1, Mode::Mirror), Some(0));
        assert_eq!(map_coordinate(-5, 1, Mode::Reflect), Some(0));
    }

    #[test]
    fn plans_cover_every_element_once_within_the_limit() {
        for (shape, halo, max) in [
            ([1, 100, 37], [0, 3, 3], 700u64),
            ([9, 20, 11], [2, 1, 1], 500),
            ([1, 1, 1000], [0, 0, 7], 100),
            ([5, 5, 5], [1, 1, 1], 1 << 20),
            ([4, 3, 2], [0, 0, 0], 1),
        ] {
            let chunks = plan(shape, halo, max).unwrap();
            let mut seen = vec![0u8; shape.iter().product()];
            for c in chunks.iter() {
                assert!(
                    c.box_shape().iter().product::<usize>() as u64 <= max,
                    "{c:?}"
                );
                for z in c.core_lo[0]..c.core_hi[0] {
                    for y in c.core_lo[1]..c.core_hi[1] {
                        for x in c.core_lo[2]..c.core_hi[2] {
                            seen[(z * shape[1] + y) * shape[2] + x] += 1;
                        }
                    }
                }
            }
            assert!(seen.iter().all(|&s| s == 1), "{shape:?} {halo:?} {max}");
        }
        assert!(plan([1, 10, 10], [0, 50, 50], 99).is_err());
    }

    #[test]
    fn plans_of_billions_of_slices_are_a_few_numbers() {
        // A header may declare any number of frames: the plan does not
        // grow with it.
        let shape = [10_000_000_000, 64, 80];
        let p = plan(shape, [1, 1, 1], 1 << 20).unwrap();
        let per = p.get(0).core_shape()[0];
        assert!(per > 1 && per < shape[0]);
        assert_eq!(p.len(), shape[0].div_ceil(per));
        let last = p.get(p.len() - 1);
        assert_eq!(last.core_hi[0], shape[0]);
        assert_eq!(p.get(1).core_lo[0], per);
        assert!(std::mem::size_of_val(&p) <= 128);
    }

    #[test]
    fn gather_then_scatter_of_the_core_is_identity() {
        let shape = [3, 4, 5];
        let src: Vec<i32> = (0..60).collect();
        let chunks = plan(shape, [1, 1, 2], 50).unwrap();
        assert!(chunks.len() > 1);
        let mut dst = vec![-1; 60];
        for c in chunks.iter() {
            let c = &c;
            let b = gather(&src, shape, c, Mode::Wrap, 0);
            let bs = c.box_shape();
            let cs = c.core_shape();
            let mut core = Vec::new();
            for z in 0..cs[0] {
                for y in 0..cs[1] {
                    for x in 0..cs[2] {
                        let (bz, by, bx) = (z + c.pad[0], y + c.pad[1], x + c.pad[2]);
                        core.push(b[(bz * bs[1] + by) * bs[2] + bx]);
                    }
                }
            }
            scatter(&mut dst, shape, c, &core);
        }
        assert_eq!(dst, src);
    }
}

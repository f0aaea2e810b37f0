//! The parts of a chunk the stream moves between host and device: the
//! rows of a box (borrowed where they lie, or read from a source that
//! reads rows) and the output slices assembled from chunks' cores.

use std::ops::Range;

use bytemuck::Pod;

use super::{Progress, SliceSink, SliceSource};
use crate::boundary::Mode;
use crate::chunk::{self, Chunk, Shape3};
use crate::error::{Error, Result};

/// The box of `c` as runs of rows of one slice in the source's memory (or
/// `constant_row`), without a gather: a chunk that splits y only. Rows
/// next to each other in the source form one run; halo rows the boundary
/// mode maps elsewhere, or to the constant, runs of their own.
pub(super) fn row_runs<'s, T>(
    source: &'s dyn SliceSource<T>,
    shape: Shape3,
    c: &Chunk,
    mode: Mode,
    constant_row: &'s [T],
) -> Option<Vec<&'s [T]>> {
    let box_shape = c.box_shape();
    if box_shape[0] != 1 || c.pad[0] != 0 || c.pad[2] != 0 || box_shape[2] != shape[2] {
        return None;
    }
    let nx = shape[2];
    let plane = source.borrow(c.core_lo[0])?;
    let mut runs: Vec<&[T]> = Vec::new();
    // The run being extended: its first source row and row count.
    let mut open: Option<(usize, usize)> = None;
    for y in chunk::box_coordinates(shape, c, mode, 1) {
        match (y, open) {
            (Some(y), Some((y0, n))) if y == y0 + n => open = Some((y0, n + 1)),
            _ => {
                if let Some((y0, n)) = open.take() {
                    runs.push(plane.get(y0 * nx..(y0 + n) * nx)?);
                }
                match y {
                    Some(y) => open = Some((y, 1)),
                    None => runs.push(constant_row),
                }
            }
        }
    }
    if let Some((y0, n)) = open {
        runs.push(plane.get(y0 * nx..(y0 + n) * nx)?);
    }
    Some(runs)
}

/// The rows of one box read from a source that reads rows (slices too
/// large to hold whole): for each slice of the box, each run of
/// consecutive rows its y coordinates reach (one run, or two where a wrap
/// reaches the far edge), so a box costs its own rows, never a slice.
pub(super) struct Bands<T> {
    /// (slice, first row, rows' values).
    runs: Vec<(usize, usize, Vec<T>)>,
    /// Memory of earlier runs, reused.
    spare: Vec<Vec<T>>,
    nx: usize,
}

impl<T: Pod> Bands<T> {
    pub(super) fn new() -> Self {
        Bands {
            runs: Vec::new(),
            spare: Vec::new(),
            nx: 0,
        }
    }

    pub(super) fn read(
        &mut self,
        source: &mut dyn SliceSource<T>,
        shape: Shape3,
        c: &Chunk,
        mode: Mode,
    ) -> Result<()> {
        self.nx = shape[2];
        self.spare.extend(self.runs.drain(..).map(|(_, _, mut v)| {
            v.clear();
            v
        }));
        let mut ys: Vec<usize> = chunk::box_coordinates(shape, c, mode, 1)
            .into_iter()
            .flatten()
            .collect();
        ys.sort_unstable();
        ys.dedup();
        let mut rows: Vec<Range<usize>> = Vec::new();
        for y in ys {
            match rows.last_mut() {
                Some(r) if r.end == y => r.end = y + 1,
                _ => rows.push(y..y + 1),
            }
        }
        let mut zs: Vec<usize> = chunk::box_coordinates(shape, c, mode, 0)
            .into_iter()
            .flatten()
            .collect();
        zs.sort_unstable();
        zs.dedup();
        for z in zs {
            for r in &rows {
                let mut v = self.spare.pop().unwrap_or_default();
                source.read_rows(z, r.clone(), &mut v)?;
                if v.len() != r.len() * self.nx {
                    return Err(Error::InvalidInput(format!(
                        "rows {r:?} of slice {z} read as {} values, expected {}",
                        v.len(),
                        r.len() * self.nx
                    )));
                }
                self.runs.push((z, r.start, v));
            }
        }
        Ok(())
    }

    /// Row `y` of slice `z`, where read.
    pub(super) fn row(&self, z: usize, y: usize) -> Option<&[T]> {
        let nx = self.nx;
        self.runs.iter().find_map(|(rz, y0, v)| {
            let k = y.checked_sub(*y0).filter(|_| *rz == z)?;
            v.get(k * nx..(k + 1) * nx)
        })
    }
}

/// Output slices being assembled from chunks that split y or x: in the
/// sink itself where it takes part of a slice (rows written in place), or
/// in a slab written whole.
pub(super) struct Assembly<T> {
    shape: Shape3,
    z: Range<usize>,
    slab: Vec<T>,
    /// Rows of slice `z` written into the sink in place (None: the slab).
    in_place: Option<usize>,
    written: usize,
}

impl<T: Pod> Assembly<T> {
    pub(super) fn new(shape: Shape3) -> Self {
        Assembly {
            shape,
            z: 0..0,
            slab: Vec::new(),
            in_place: None,
            written: 0,
        }
    }

    /// Chunk `c`'s core of whole rows of one slice, written into the sink
    /// in place when it can take them: Ok(true) when written.
    fn place_rows(
        &mut self,
        c: &Chunk,
        part: &[T],
        sink: &mut dyn SliceSink<T>,
        progress: Progress<'_>,
        alone: bool,
    ) -> Result<bool> {
        let [_, ny, nx] = self.shape;
        let z = c.core_lo[0];
        let rows_whole = c.core_hi[0] == z + 1 && c.core_lo[2] == 0 && c.core_hi[2] == nx;
        if !rows_whole || (self.z == (z..z + 1) && self.in_place.is_none()) {
            return Ok(false);
        }
        if self.z != (z..z + 1) {
            self.flush(sink, progress, alone)?;
        }
        let offset = (z * ny + c.core_lo[1]) * nx;
        if !sink.write_at(offset, part, alone)? {
            return Ok(false);
        }
        self.z = z..z + 1;
        let rows = self.in_place.unwrap_or(0) + (c.core_hi[1] - c.core_lo[1]);
        self.in_place = Some(rows);
        if rows == ny {
            sink.skip(ny * nx)?;
            self.z = 0..0;
            self.in_place = None;
            self.written += 1;
            progress(self.written, self.shape[0]);
        }
        Ok(true)
    }

    /// [`Assembly::place`] from mapped bytes, without an extra copy when
    /// they are aligned for `T`.
    pub(super) fn place_bytes(
        &mut self,
        c: &Chunk,
        bytes: &[u8],
        sink: &mut dyn SliceSink<T>,
        progress: Progress<'_>,
        alone: bool,
    ) -> Result<()> {
        match bytemuck::try_cast_slice(bytes) {
            Ok(part) => self.place(c, part, sink, progress, alone),
            Err(_) => {
                let part: Vec<T> = bytemuck::pod_collect_to_vec(bytes);
                self.place(c, &part, sink, progress, alone)
            }
        }
    }

    fn place(
        &mut self,
        c: &Chunk,
        part: &[T],
        sink: &mut dyn SliceSink<T>,
        progress: Progress<'_>,
        alone: bool,
    ) -> Result<()> {
        let z = c.core_lo[0]..c.core_hi[0];
        if self.place_rows(c, part, sink, progress, alone)? {
            return Ok(());
        }
        let whole_planes = c.core_lo[1] == 0
            && c.core_hi[1] == self.shape[1]
            && c.core_lo[2] == 0
            && c.core_hi[2] == self.shape[2];
        if z != self.z {
            self.flush(sink, progress, alone)?;
            if whole_planes {
                return self.emit(part, z.len(), sink, progress, alone);
            }
            self.z = z.clone();
            self.slab = vec![T::zeroed(); z.len() * self.shape[1] * self.shape[2]];
        }
        let slab_shape = [z.len(), self.shape[1], self.shape[2]];
        let mut local = *c;
        local.core_lo[0] = 0;
        local.core_hi[0] = z.len();
        chunk::scatter(&mut self.slab, slab_shape, &local, part);
        Ok(())
    }

    pub(super) fn flush(
        &mut self,
        sink: &mut dyn SliceSink<T>,
        progress: Progress<'_>,
        alone: bool,
    ) -> Result<()> {
        if self.z.is_empty() {
            return Ok(());
        }
        if let Some(rows) = self.in_place {
            return Err(Error::Device(format!(
                "slice {} left with {rows} of its {} rows written (an internal error of gpuscope; please report it)",
                self.z.start, self.shape[1]
            )));
        }
        let slab = std::mem::take(&mut self.slab);
        let n = self.z.len();
        self.z = 0..0;
        self.emit(&slab, n, sink, progress, alone)
    }

    fn emit(
        &mut self,
        slices: &[T],
        n: usize,
        sink: &mut dyn SliceSink<T>,
        progress: Progress<'_>,
        alone: bool,
    ) -> Result<()> {
        if alone {
            sink.write_alone(slices)?;
        } else {
            sink.write(slices)?;
        }
        self.written += n;
        progress(self.written, self.shape[0]);
        Ok(())
    }
}

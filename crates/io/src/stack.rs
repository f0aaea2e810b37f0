//! Stacks on disk as block drivers: a source hands out blocks of whole
//! leading-axis slices (any count at once), a sink takes them at their own
//! offsets. The conveyor in `gpuscope_core::conveyor` runs an operation
//! between one of each; the formats' own readers and writers do the
//! decoding.
//!
//! `.npy` and headerless `.raw` files in this machine's byte order are read
//! and written as they lie: large positional reads and writes split over
//! threads, no decoding copy. The output appears only complete (temporary
//! name, then rename) and is synced once at the end, or not at all for a
//! scratch output (`finish(false)`).

use std::path::Path;

use crate::array::{Array, ArrayData, DType};
use crate::error::{IoError, Result};
use crate::hdf5::Hdf5Stack;
use crate::npy::{NpyReader, NpySlabWriter};
use crate::tiff::{TiffStackReader, TiffStackWriter};
use crate::zarr::{ZarrArray, ZarrWriter};

/// A stack read in blocks of leading-axis slices.
pub enum StackSource {
    Npy(NpyReader),
    Tiff(Box<TiffStackReader>),
    Hdf5(Box<Hdf5Stack>),
    Zarr(Box<ZarrArray>),
}

impl StackSource {
    pub fn shape(&self) -> Vec<usize> {
        match self {
            StackSource::Npy(r) => r.shape().to_vec(),
            StackSource::Tiff(r) => r.shape(),
            StackSource::Hdf5(r) => r.shape().to_vec(),
            StackSource::Zarr(r) => r.shape().to_vec(),
        }
    }

    pub fn dtype(&self) -> DType {
        match self {
            StackSource::Npy(r) => r.dtype(),
            StackSource::Tiff(r) => r.dtype(),
            StackSource::Hdf5(r) => r.dtype(),
            StackSource::Zarr(r) => r.dtype(),
        }
    }

    /// Slices `z0..z0 + nz`. `spare`, a block handed out before, is filled
    /// again where its dtype and room fit (no fresh memory to fault in).
    pub fn read_block(&mut self, z0: usize, nz: usize, spare: Option<ArrayData>) -> Result<Array> {
        let mut shape = self.shape();
        match self {
            StackSource::Npy(r) if r.native_order() => {
                shape[0] = nz;
                let n: usize = shape.iter().product();
                let data = refill(spare, r.dtype(), n);
                let mut data = match data {
                    Some(d) => d,
                    None => return r.read_slab(z0, nz),
                };
                r.read_slab_raw(z0, nz, bytes_mut(&mut data))?;
                Array::new(shape, data)
            }
            StackSource::Npy(r) => r.read_slab(z0, nz),
            StackSource::Tiff(r) => {
                if nz == 1 {
                    return r.read_page(z0);
                }
                let pages = (z0..z0 + nz)
                    .map(|z| r.read_page(z))
                    .collect::<Result<Vec<_>>>()?;
                concat(pages, nz)
            }
            StackSource::Hdf5(r) => r.read_slab(z0, nz),
            StackSource::Zarr(r) => r.read_slab(z0, nz),
        }
    }
}

impl StackSource {
    /// Whether [`StackSource::read_rows`] reads part of a slice: every
    /// format but TIFF (whose pages are read whole).
    pub fn reads_rows(&self) -> bool {
        !matches!(self, StackSource::Tiff(_))
    }

    /// Rows `y` (along the second axis) of slice `z`, shape
    /// `[1, y.len(), ...]`: for slices too large to hold whole. `spare` as
    /// in [`StackSource::read_block`].
    pub fn read_rows(
        &mut self,
        z: usize,
        y: std::ops::Range<usize>,
        spare: Option<ArrayData>,
    ) -> Result<Array> {
        let mut shape = self.shape();
        match self {
            StackSource::Npy(r) if r.native_order() && shape.len() >= 2 => {
                shape[0] = 1;
                shape[1] = y.len();
                let n: usize = shape.iter().product();
                let mut data = match refill(spare, r.dtype(), n) {
                    Some(d) => d,
                    None => return r.read_rows(z, y),
                };
                r.read_rows_raw(z, y, bytes_mut(&mut data))?;
                Array::new(shape, data)
            }
            StackSource::Npy(r) => r.read_rows(z, y),
            StackSource::Hdf5(r) => r.read_rows(z, y),
            StackSource::Zarr(r) => r.read_rows(z, y),
            StackSource::Tiff(_) => Err(IoError::invalid(
                "rows asked of a TIFF stack, whose pages are read whole",
                "read whole slices of TIFF stacks",
            )),
        }
    }
}

/// Bytes of `data` as they lie in memory (none for booleans, which are
/// read decoded).
fn bytes_mut(data: &mut ArrayData) -> &mut [u8] {
    match data {
        ArrayData::Bool(_) => &mut [],
        ArrayData::U8(v) => v,
        ArrayData::I8(v) => bytemuck::cast_slice_mut(v),
        ArrayData::U16(v) => bytemuck::cast_slice_mut(v),
        ArrayData::I16(v) => bytemuck::cast_slice_mut(v),
        ArrayData::U32(v) => bytemuck::cast_slice_mut(v),
        ArrayData::I32(v) => bytemuck::cast_slice_mut(v),
        ArrayData::F32(v) => bytemuck::cast_slice_mut(v),
        ArrayData::U64(v) => bytemuck::cast_slice_mut(v),
        ArrayData::I64(v) => bytemuck::cast_slice_mut(v),
        ArrayData::F64(v) => bytemuck::cast_slice_mut(v),
    }
}

#[cfg_attr(not(target_endian = "little"), allow(dead_code))]
fn bytes(data: &ArrayData) -> Option<&[u8]> {
    Some(match data {
        ArrayData::Bool(_) => return None,
        ArrayData::U8(v) => v,
        ArrayData::I8(v) => bytemuck::cast_slice(v),
        ArrayData::U16(v) => bytemuck::cast_slice(v),
        ArrayData::I16(v) => bytemuck::cast_slice(v),
        ArrayData::U32(v) => bytemuck::cast_slice(v),
        ArrayData::I32(v) => bytemuck::cast_slice(v),
        ArrayData::F32(v) => bytemuck::cast_slice(v),
        ArrayData::U64(v) => bytemuck::cast_slice(v),
        ArrayData::I64(v) => bytemuck::cast_slice(v),
        ArrayData::F64(v) => bytemuck::cast_slice(v),
    })
}

/// `n` elements of `dtype`: `spare` resized when it is of that dtype,
/// else fresh; None for booleans.
fn refill(spare: Option<ArrayData>, dtype: DType, n: usize) -> Option<ArrayData> {
    macro_rules! fit {
        ($variant:ident, $t:ty) => {{
            let mut v: Vec<$t> = match spare {
                Some(ArrayData::$variant(v)) => v,
                _ => Vec::new(),
            };
            // Every element is overwritten by the read.
            v.resize(n, <$t>::default());
            ArrayData::$variant(v)
        }};
    }
    Some(match dtype {
        DType::Bool => return None,
        DType::U8 => fit!(U8, u8),
        DType::I8 => fit!(I8, i8),
        DType::U16 => fit!(U16, u16),
        DType::I16 => fit!(I16, i16),
        DType::U32 => fit!(U32, u32),
        DType::I32 => fit!(I32, i32),
        DType::F32 => fit!(F32, f32),
        DType::U64 => fit!(U64, u64),
        DType::I64 => fit!(I64, i64),
        DType::F64 => fit!(F64, f64),
    })
}

/// Pages of one dtype and plane shape as one block.
fn concat(pages: Vec<Array>, nz: usize) -> Result<Array> {
    let Some(first) = pages.first() else {
        return Err(IoError::invalid("no page to read", "ask for at least one"));
    };
    let mut shape = vec![nz];
    shape.extend(first.shape.iter().skip(first.ndim().saturating_sub(2)));
    macro_rules! join {
        ($variant:ident) => {{
            let mut all = Vec::new();
            for p in pages {
                match p.data {
                    ArrayData::$variant(v) => all.extend(v),
                    _ => {
                        return Err(IoError::invalid(
                            "pages of different types in one stack",
                            "re-save the stack with one type",
                        ));
                    }
                }
            }
            ArrayData::$variant(all)
        }};
    }
    let data = match first.data {
        ArrayData::Bool(_) => join!(Bool),
        ArrayData::U8(_) => join!(U8),
        ArrayData::I8(_) => join!(I8),
        ArrayData::U16(_) => join!(U16),
        ArrayData::I16(_) => join!(I16),
        ArrayData::U32(_) => join!(U32),
        ArrayData::I32(_) => join!(I32),
        ArrayData::F32(_) => join!(F32),
        ArrayData::U64(_) => join!(U64),
        ArrayData::I64(_) => join!(I64),
        ArrayData::F64(_) => join!(F64),
    };
    Array::new(shape, data)
}

/// A stack written in blocks of leading-axis slices; the output appears
/// only on [`StackSink::finish`], complete.
pub enum StackSink {
    /// `.npy` or headerless `.raw` (with its sidecar): blocks written at
    /// their offsets.
    Npy(NpySlabWriter),
    Tiff(TiffStackWriter),
    /// Zarr v3, chunks one slice deep: every block is whole chunks.
    Zarr(ZarrWriter),
}

impl StackSink {
    /// A sink when `path` is `.npy`, `.raw`, `.tif`/`.tiff` or a Zarr
    /// store; None for other formats.
    pub fn create(path: &Path, shape: &[usize], dtype: DType) -> Result<Option<StackSink>> {
        if crate::zarr::is_zarr_name(&path.to_string_lossy()) {
            return Ok(Some(StackSink::Zarr(ZarrWriter::create(
                path,
                shape.to_vec(),
                dtype,
            )?)));
        }
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        Ok(Some(match ext.as_str() {
            "npy" => StackSink::Npy(NpySlabWriter::create(path, shape.to_vec(), dtype)?),
            "raw" => StackSink::Npy(NpySlabWriter::create_raw(path, shape.to_vec(), dtype)?),
            "tif" | "tiff" if shape.len() == 3 => {
                let bytes = shape.iter().product::<usize>() as u64 * dtype.size_bytes() as u64;
                // Classic TIFF stops at 4 GiB.
                StackSink::Tiff(if bytes > 3 << 30 {
                    TiffStackWriter::create_bigtiff(path, shape[1], shape[2], dtype)?
                } else {
                    TiffStackWriter::create(path, shape[1], shape[2], dtype)?
                })
            }
            _ => return Ok(None),
        }))
    }

    /// Writes `block` as slices `z0..`; blocks come in order. Returns the
    /// block's memory for the next one where the sink is done with it.
    pub fn write_block(&mut self, z0: usize, block: Array) -> Result<Option<ArrayData>> {
        match self {
            StackSink::Npy(w) => {
                write_npy(w, z0, &block)?;
                Ok(Some(block.data))
            }
            StackSink::Zarr(w) => {
                w.write_slab(&block)?;
                Ok(Some(block.data))
            }
            StackSink::Tiff(w) => {
                let plane: Vec<usize> = block.shape[1..].to_vec();
                let nz = block.shape.first().copied().unwrap_or(0);
                if nz == 1 {
                    let page = Array::new(plane, block.data)?;
                    w.write_page(&page)?;
                    return Ok(None);
                }
                for z in 0..nz {
                    let page = slice_of(&block, z, &plane)?;
                    w.write_page(&page)?;
                }
                Ok(Some(block.data))
            }
        }
    }

    /// Whether [`StackSink::write_rows`] takes part of a slice (`.npy` and
    /// `.raw`; TIFF pages and Zarr chunks one slice deep are written whole).
    pub fn takes_rows(&self) -> bool {
        matches!(self, StackSink::Npy(_))
    }

    /// Writes `rows`, whole rows of slice `z` from row `y0`; the rows of a
    /// slice come in order. Returns their memory, as [`StackSink::write_block`].
    pub fn write_rows(&mut self, z: usize, y0: usize, rows: Array) -> Result<Option<ArrayData>> {
        match self {
            StackSink::Npy(w) => {
                w.write_rows_at(z, y0, &rows)?;
                Ok(Some(rows.data))
            }
            _ => Err(IoError::invalid(
                "rows written to an output that takes whole slices",
                "write whole slices of TIFF and Zarr outputs",
            )),
        }
    }

    /// Completes the output: data synced once (all of it) when `sync`,
    /// then published under its name.
    pub fn finish(self, sync: bool) -> Result<()> {
        match self {
            StackSink::Npy(w) => w.finish_with(sync),
            StackSink::Tiff(w) => w.finish(),
            StackSink::Zarr(w) => w.finish_with(sync),
        }
    }
}

/// A block of a `.npy` output: its memory as the file's bytes where the
/// machine is little-endian (as `.npy` files are written).
#[cfg(target_endian = "little")]
fn write_npy(w: &NpySlabWriter, z0: usize, block: &Array) -> Result<()> {
    match bytes(&block.data) {
        Some(b) => w.write_bytes_at(z0, b),
        None => w.write_at(z0, block),
    }
}

#[cfg(not(target_endian = "little"))]
fn write_npy(w: &NpySlabWriter, z0: usize, block: &Array) -> Result<()> {
    w.write_at(z0, block)
}

/// Slice `z` of a block, as its own array of shape `plane`; an error
/// where the block holds no such slice.
pub fn slice_of(block: &Array, z: usize, plane: &[usize]) -> Result<Array> {
    let n: usize = plane.iter().product();
    let r = z * n..(z + 1) * n;
    let outside = || {
        IoError::invalid(
            format!(
                "slice {z} of {n} values asked of a block of {}",
                block.len()
            ),
            "ask for a slice within the block",
        )
    };
    macro_rules! take {
        ($variant:ident, $v:expr) => {
            ArrayData::$variant($v.get(r).ok_or_else(outside)?.to_vec())
        };
    }
    let data = match &block.data {
        ArrayData::Bool(v) => take!(Bool, v),
        ArrayData::U8(v) => take!(U8, v),
        ArrayData::I8(v) => take!(I8, v),
        ArrayData::U16(v) => take!(U16, v),
        ArrayData::I16(v) => take!(I16, v),
        ArrayData::U32(v) => take!(U32, v),
        ArrayData::I32(v) => take!(I32, v),
        ArrayData::F32(v) => take!(F32, v),
        ArrayData::U64(v) => take!(U64, v),
        ArrayData::I64(v) => take!(I64, v),
        ArrayData::F64(v) => take!(F64, v),
    };
    Array::new(plane.to_vec(), data)
}

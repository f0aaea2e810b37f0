//! `.npy` (or headerless) files written slab by slab, or by slabs at their
//! own offsets; the output appears only when complete.

use super::header_bytes;
use crate::array::{Array, ArrayData, DType, checked_product};
use crate::atomic::TempFile;
use crate::elements::write_data;
use crate::error::{IoError, Result, display_name};
use crate::pair::{SequentialHash, SlabHash, Tee};
use crate::raw::{RawLayout, write_sidecar_hashed};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// Writes a `.npy` file slab by slab; the output appears only on `finish`.
pub struct NpyWriter {
    w: Option<BufWriter<File>>,
    tmp: Option<TempFile>,
    /// Headerless output: the path whose sidecar `finish` writes, and
    /// the pair hash of the data written so far.
    raw: Option<(std::path::PathBuf, Box<SequentialHash>)>,
    name: String,
    shape: Vec<usize>,
    dtype: DType,
    written: usize,
    /// Rows written of slice `written` ([`NpyWriter::write_rows`]).
    rows: usize,
}

impl NpyWriter {
    pub fn create(path: &Path, shape: Vec<usize>, dtype: DType) -> Result<NpyWriter> {
        Self::create_with(path, shape, dtype, false)
    }

    /// A headerless (raw) file, its layout written to a sidecar on
    /// `finish` (see [`crate::raw`]).
    pub fn create_raw(path: &Path, shape: Vec<usize>, dtype: DType) -> Result<NpyWriter> {
        Self::create_with(path, shape, dtype, true)
    }

    fn create_with(path: &Path, shape: Vec<usize>, dtype: DType, raw: bool) -> Result<NpyWriter> {
        let name = display_name(&path.to_string_lossy());
        (|| -> Result<NpyWriter> {
            if shape.is_empty() {
                return Err(IoError::invalid(
                    "NpyWriter needs at least one axis to stream along",
                    "write 0-d arrays with gpuscope_io::write",
                ));
            }
            checked_product(&shape)
                .and_then(|n| n.checked_mul(dtype.size_bytes()))
                .ok_or_else(|| IoError::too_large(format!("shape {shape:?} is too large")))?;
            let (tmp, file) = TempFile::create(path)?;
            let mut w = BufWriter::new(file);
            if !raw {
                w.write_all(&header_bytes(&shape, dtype))
                    .map_err(|e| IoError::io("cannot write the file", e))?;
            }
            let layout = RawLayout::new(shape.clone(), dtype);
            Ok(NpyWriter {
                w: Some(w),
                tmp: Some(tmp),
                raw: raw.then(|| (path.to_path_buf(), Box::new(SequentialHash::new(&layout)))),
                name: name.clone(),
                shape,
                dtype,
                written: 0,
                rows: 0,
            })
        })()
        .map_err(|e| e.in_file(&name))
    }

    /// Append slices along the leading axis; the array's trailing shape must match.
    pub fn write_slab(&mut self, slab: &Array) -> Result<()> {
        let name = self.name.clone();
        self.write_slab_inner(slab).map_err(|e| e.in_file(&name))
    }

    fn write_slab_inner(&mut self, slab: &Array) -> Result<()> {
        slab.validate()?;
        if slab.dtype() != self.dtype {
            return Err(IoError::invalid(
                format!(
                    "slab dtype {} differs from the file's {}",
                    slab.dtype().name(),
                    self.dtype.name()
                ),
                "cast the slab with Array::cast first",
            ));
        }
        if slab.shape.len() != self.shape.len() || slab.shape[1..] != self.shape[1..] {
            return Err(IoError::invalid(
                format!(
                    "slab shape {:?} does not fit file shape {:?}",
                    slab.shape, self.shape
                ),
                "slabs must have the file's shape except along the first axis",
            ));
        }
        let after = self.written + slab.shape[0];
        if self.rows != 0 {
            return Err(IoError::invalid(
                format!("slice {} is part written in rows", self.written),
                "write the rest of its rows first",
            ));
        }
        if after > self.shape[0] {
            return Err(IoError::invalid(
                format!(
                    "writing this slab would give {after} slices but the file declares {}",
                    self.shape[0]
                ),
                "write exactly the declared number of slices",
            ));
        }
        self.append(&slab.data)?;
        self.written = after;
        Ok(())
    }

    /// Appends `data` to the file (and to a raw output's pair hash).
    fn append(&mut self, data: &ArrayData) -> Result<()> {
        let w = self.w.as_mut().ok_or_else(|| {
            IoError::invalid("the writer is already finished", "create a new writer")
        })?;
        match &mut self.raw {
            Some((_, hash)) => write_data(&mut Tee { w, hash }, data),
            None => write_data(w, data),
        }
        .map_err(|e| IoError::io("cannot write the file", e))
    }

    /// Appends whole rows (along the second axis) of the next slice: for
    /// slices too large to hold whole. `rows` has the file's dtype and
    /// `rows.len()` is a multiple of a row; a slice's last row completes it.
    pub fn write_rows(&mut self, rows: &Array) -> Result<()> {
        let name = self.name.clone();
        self.write_rows_inner(rows).map_err(|e| e.in_file(&name))
    }

    fn write_rows_inner(&mut self, rows: &Array) -> Result<()> {
        rows.validate()?;
        let row: usize = self.shape.get(2..).map_or(1, |r| r.iter().product());
        let ny = self.shape.get(1).copied().unwrap_or(0);
        let n = rows.len() / row.max(1);
        if rows.dtype() != self.dtype
            || self.shape.len() < 2
            || !rows.len().is_multiple_of(row.max(1))
            || self.written >= self.shape[0]
            || self.rows + n > ny
        {
            return Err(IoError::invalid(
                format!(
                    "{} {} values after row {} of slice {} do not fit file {:?} {}",
                    rows.len(),
                    rows.dtype().name(),
                    self.rows,
                    self.written,
                    self.shape,
                    self.dtype.name()
                ),
                "write whole rows of the file's dtype within its slices",
            ));
        }
        self.append(&rows.data)?;
        self.rows += n;
        if self.rows == ny {
            self.rows = 0;
            self.written += 1;
        }
        Ok(())
    }

    /// Complete the file; errors (and leaves no output) unless every slice was written.
    pub fn finish(mut self) -> Result<()> {
        let name = self.name.clone();
        if self.written != self.shape[0] {
            return Err(IoError::invalid(
                format!(
                    "only {} of {} slices were written",
                    self.written, self.shape[0]
                ),
                "write every slice before finish; no file was created",
            )
            .in_file(&name));
        }
        match (self.tmp.take(), self.w.take()) {
            (Some(tmp), Some(w)) => tmp.commit(w).map_err(|e| e.in_file(&name))?,
            _ => {
                return Err(IoError::invalid("the writer is already finished", "").in_file(&name));
            }
        }
        match &self.raw {
            Some((path, hash)) => write_sidecar_hashed(
                path,
                &RawLayout::new(self.shape.clone(), self.dtype),
                hash.finish(),
            ),
            None => Ok(()),
        }
    }
}

/// A `.npy` file of a known shape whose slabs are written at their own
/// offsets, by several threads at once (one per GPU); like [`NpyWriter`]
/// the output appears only on `finish`, complete.
pub struct NpySlabWriter {
    file: File,
    tmp: TempFile,
    name: String,
    shape: Vec<usize>,
    dtype: DType,
    header: u64,
    /// Headerless output: the path whose sidecar `finish` writes, and
    /// the pair hash of the slabs written so far.
    raw: Option<(std::path::PathBuf, SlabHash)>,
    written: std::sync::atomic::AtomicUsize,
    /// Bytes written as rows of slices ([`NpySlabWriter::write_rows_at`]).
    rows_written: std::sync::atomic::AtomicUsize,
}

impl NpySlabWriter {
    pub fn create(path: &Path, shape: Vec<usize>, dtype: DType) -> Result<NpySlabWriter> {
        Self::create_with(path, shape, dtype, false)
    }

    /// A headerless (raw) file, its layout written to a sidecar on
    /// `finish` (see [`crate::raw`]).
    pub fn create_raw(path: &Path, shape: Vec<usize>, dtype: DType) -> Result<NpySlabWriter> {
        Self::create_with(path, shape, dtype, true)
    }

    fn create_with(
        path: &Path,
        shape: Vec<usize>,
        dtype: DType,
        raw: bool,
    ) -> Result<NpySlabWriter> {
        let name = display_name(&path.to_string_lossy());
        (|| -> Result<NpySlabWriter> {
            if shape.is_empty() {
                return Err(IoError::invalid(
                    "NpySlabWriter needs at least one axis to write along",
                    "write 0-d arrays with gpuscope_io::write",
                ));
            }
            let data = checked_product(&shape)
                .and_then(|n| n.checked_mul(dtype.size_bytes()))
                .ok_or_else(|| IoError::too_large(format!("shape {shape:?} is too large")))?;
            let (tmp, mut file) = TempFile::create(path)?;
            let header = if raw {
                Vec::new()
            } else {
                header_bytes(&shape, dtype)
            };
            file.write_all(&header)
                .and_then(|()| file.set_len((header.len() + data) as u64))
                .map_err(|e| IoError::io("cannot write the file", e))?;
            let raw = raw.then(|| {
                let layout = RawLayout::new(shape.clone(), dtype);
                (path.to_path_buf(), SlabHash::new(&layout))
            });
            Ok(NpySlabWriter {
                file,
                tmp,
                name: name.clone(),
                shape,
                dtype,
                header: header.len() as u64,
                raw,
                written: std::sync::atomic::AtomicUsize::new(0),
                rows_written: std::sync::atomic::AtomicUsize::new(0),
            })
        })()
        .map_err(|e| e.in_file(&name))
    }

    /// Writes `slab` as slices `z0..z0 + slab.shape[0]`; each slice must
    /// be written exactly once.
    pub fn write_at(&self, z0: usize, slab: &Array) -> Result<()> {
        self.write_at_inner(z0, slab)
            .map_err(|e| e.in_file(&self.name))
    }

    fn write_at_inner(&self, z0: usize, slab: &Array) -> Result<()> {
        slab.validate()?;
        if slab.dtype() != self.dtype
            || slab.shape.len() != self.shape.len()
            || slab.shape[1..] != self.shape[1..]
            || z0 + slab.shape[0] > self.shape[0]
        {
            return Err(IoError::invalid(
                format!(
                    "slab {:?} {} at slice {z0} does not fit file {:?} {}",
                    slab.shape,
                    slab.dtype().name(),
                    self.shape,
                    self.dtype.name()
                ),
                "write slabs of the file's dtype and trailing shape within its slices",
            ));
        }
        let plane: usize = self.shape[1..].iter().product::<usize>() * self.dtype.size_bytes();
        let mut bytes = Vec::with_capacity(slab.shape[0] * plane);
        write_data(&mut bytes, &slab.data).map_err(|e| IoError::io("cannot write the file", e))?;
        let offset = self.header + (z0 * plane) as u64;
        write_all_at(&self.file, &bytes, offset)
            .map_err(|e| IoError::io("cannot write the file", e))?;
        if let Some((_, hash)) = &self.raw {
            hash.add(z0, &bytes);
        }
        self.written
            .fetch_add(slab.shape[0], std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Writes slices `z0..` from `bytes`, the elements as they lie in
    /// memory of a little-endian machine (the file's byte order): no
    /// encoding copy, and large blocks written by several threads at their
    /// own offsets. Each slice must be written exactly once.
    #[cfg(target_endian = "little")]
    pub fn write_bytes_at(&self, z0: usize, bytes: &[u8]) -> Result<()> {
        self.write_bytes_inner(z0, bytes)
            .map_err(|e| e.in_file(&self.name))
    }

    #[cfg(target_endian = "little")]
    fn write_bytes_inner(&self, z0: usize, bytes: &[u8]) -> Result<()> {
        let plane: usize = self.shape[1..].iter().product::<usize>() * self.dtype.size_bytes();
        let nz = bytes.len() / plane.max(1);
        if plane == 0 || !bytes.len().is_multiple_of(plane) || z0 + nz > self.shape[0] {
            return Err(IoError::invalid(
                format!(
                    "{} bytes at slice {z0} do not fit file {:?} {}",
                    bytes.len(),
                    self.shape,
                    self.dtype.name()
                ),
                "write whole slices of the file's dtype within its slices",
            ));
        }
        let offset = self.header + (z0 * plane) as u64;
        // Parts of at least 8 MiB, at most one per core (8 at most): one
        // thread's copies into the page cache stay well below the disk's rate.
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get().min(8));
        let part = bytes.len().div_ceil(cores).max(8 << 20);
        let result = if bytes.len() > part {
            std::thread::scope(|s| {
                let parts: Vec<_> = bytes
                    .chunks(part)
                    .enumerate()
                    .map(|(i, b)| {
                        let at = offset + (i * part) as u64;
                        s.spawn(move || write_all_at(&self.file, b, at))
                    })
                    .collect();
                parts.into_iter().try_for_each(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(std::io::Error::other("a writing thread failed")))
                })
            })
        } else {
            write_all_at(&self.file, bytes, offset)
        };
        result.map_err(|e| IoError::io("cannot write the file", e))?;
        if let Some((_, hash)) = &self.raw {
            hash.add(z0, bytes);
        }
        self.written
            .fetch_add(nz, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Writes `rows`, whole rows (along the second axis) of slice `z` from
    /// row `y0`, of the file's dtype: part of a slice, for slices too large
    /// to hold whole. The rows of a slice come in order, each once.
    pub fn write_rows_at(&self, z: usize, y0: usize, rows: &Array) -> Result<()> {
        self.write_rows_inner(z, y0, rows)
            .map_err(|e| e.in_file(&self.name))
    }

    fn write_rows_inner(&self, z: usize, y0: usize, rows: &Array) -> Result<()> {
        rows.validate()?;
        let item = self.dtype.size_bytes();
        let row: usize = self.shape.get(2..).map_or(1, |r| r.iter().product());
        let ny = self.shape.get(1).copied().unwrap_or(0);
        let n = rows.len() / row.max(1);
        if rows.dtype() != self.dtype
            || self.shape.len() < 2
            || !rows.len().is_multiple_of(row.max(1))
            || z >= self.shape[0]
            || y0 + n > ny
        {
            return Err(IoError::invalid(
                format!(
                    "{} {} values at row {y0} of slice {z} do not fit file {:?} {}",
                    rows.len(),
                    rows.dtype().name(),
                    self.shape,
                    self.dtype.name()
                ),
                "write whole rows of the file's dtype within its slices",
            ));
        }
        let mut bytes = Vec::with_capacity(rows.len() * item);
        write_data(&mut bytes, &rows.data).map_err(|e| IoError::io("cannot write the file", e))?;
        let at = (y0 * row) * item;
        let offset = self.header + (z * ny * row * item + at) as u64;
        write_all_at(&self.file, &bytes, offset)
            .map_err(|e| IoError::io("cannot write the file", e))?;
        if let Some((_, hash)) = &self.raw {
            hash.add_part(z, at, &bytes);
        }
        self.rows_written
            .fetch_add(bytes.len(), std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Completes the file; errors (and leaves no output) unless every
    /// slice was written.
    pub fn finish(self) -> Result<()> {
        self.finish_with(true)
    }

    /// [`NpySlabWriter::finish`]; without `sync` the data is left to the
    /// system to write back (a scratch output: a crash may lose it, but
    /// never leaves part of it under the output's name).
    pub fn finish_with(self, sync: bool) -> Result<()> {
        let slice_bytes = self.shape[1..].iter().product::<usize>() * self.dtype.size_bytes();
        let in_rows = self.rows_written.load(std::sync::atomic::Ordering::Relaxed);
        let written = self.written.load(std::sync::atomic::Ordering::Relaxed)
            + in_rows.checked_div(slice_bytes).unwrap_or(0);
        if written != self.shape[0] || !in_rows.is_multiple_of(slice_bytes.max(1)) {
            return Err(IoError::invalid(
                format!("only {written} of {} slices were written", self.shape[0]),
                "write every slice before finish; no file was created",
            )
            .in_file(&self.name));
        }
        let name = self.name;
        self.tmp
            .commit_file_with(self.file, sync)
            .map_err(|e| e.in_file(&name))?;
        match &self.raw {
            Some((path, hash)) => {
                write_sidecar_hashed(path, &RawLayout::new(self.shape, self.dtype), hash.finish())
            }
            None => Ok(()),
        }
    }
}

#[cfg(unix)]
fn write_all_at(file: &File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
}

#[cfg(windows)]
fn write_all_at(file: &File, mut bytes: &[u8], mut offset: u64) -> std::io::Result<()> {
    while !bytes.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_write(file, bytes, offset)?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        bytes = &bytes[n..];
        offset += n as u64;
    }
    Ok(())
}

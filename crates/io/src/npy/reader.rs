//! Leading-axis slabs of a `.npy` file (or of a headerless file described
//! by a [`RawLayout`]) read without loading the file whole.

use super::header::{Header, parse_header, preamble};
use crate::array::{Array, DType};
use crate::elements::decode_elements;
use crate::error::{IoError, Result, display_name};
use crate::pair::PairCheck;
use crate::raw::{RawLayout, sidecar_hash};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Reads leading-axis slabs of a `.npy` file: a C-order file without
/// loading it whole, a Fortran-order one held in memory in C order (see
/// [`crate::fortran`]).
pub struct NpyReader {
    file: File,
    name: String,
    header: Header,
    /// A raw file with a hashed sidecar: checked once every slice was read.
    pair: Option<PairCheck>,
    /// A Fortran-order file's data in C order, read on the first slab.
    c_order: Option<Vec<u8>>,
}

impl NpyReader {
    pub fn open(path: &Path) -> Result<NpyReader> {
        let name = display_name(&path.to_string_lossy());
        Self::open_inner(path).map_err(|e| e.in_file(&name))
    }

    /// Opens a headerless file described by `layout` (see [`crate::raw`]);
    /// its size must match the layout exactly.
    pub fn open_raw(path: &Path, layout: &RawLayout) -> Result<NpyReader> {
        let name = display_name(&path.to_string_lossy());
        (|| -> Result<NpyReader> {
            let header = Header::from_raw(layout)?;
            let file = crate::links::open_regular(path)?;
            let file_len = file
                .metadata()
                .map_err(|e| IoError::io("cannot stat the file", e))?
                .len();
            layout.check_file_len(file_len)?;
            let pair = sidecar_hash(path).map(|(h, side)| PairCheck::new(layout, h, side));
            Ok(NpyReader {
                file,
                name: name.clone(),
                header,
                pair,
                c_order: None,
            })
        })()
        .map_err(|e| e.in_file(&name))
    }

    fn open_inner(path: &Path) -> Result<NpyReader> {
        let mut file = crate::links::open_regular(path)?;
        let file_len = file
            .metadata()
            .map_err(|e| IoError::io("cannot stat the file", e))?
            .len();
        let mut start = vec![0u8; 12];
        let n = read_up_to(&mut file, &mut start)?;
        start.truncate(n);
        let (pre, hlen, _) = preamble(&start)?;
        // hlen is bounded by MAX_HEADER, so this allocation is small.
        let mut head = vec![0u8; pre + hlen];
        file.seek(SeekFrom::Start(0))
            .map_err(|e| IoError::io("cannot seek", e))?;
        let got = read_up_to(&mut file, &mut head)?;
        head.truncate(got);
        let header = parse_header(&head)?;
        if header.shape.is_empty() {
            return Err(IoError::unsupported(
                "a 0-d array has no slabs to stream",
                "load it with gpuscope_io::read",
            ));
        }
        let need = (header.data_offset as u64).saturating_add(header.data_bytes()? as u64);
        if file_len < need {
            return Err(IoError::truncated(format!(
                "header declares {} bytes of data but the file holds {}",
                header.data_bytes()?,
                file_len.saturating_sub(header.data_offset as u64)
            )));
        }
        let name = display_name(&path.to_string_lossy());
        Ok(NpyReader {
            file,
            name,
            header,
            pair: None,
            c_order: None,
        })
    }

    pub fn shape(&self) -> &[usize] {
        &self.header.shape
    }
    pub fn dtype(&self) -> DType {
        self.header.dtype
    }
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Elements in one leading-axis slice.
    fn slice_len(&self) -> usize {
        // Cannot overflow: the whole product was checked at open.
        self.header.shape[1..].iter().product()
    }

    /// Read slices `z0 .. z0 + nz` of the leading axis.
    pub fn read_slab(&mut self, z0: usize, nz: usize) -> Result<Array> {
        let name = self.name.clone();
        self.read_slab_inner(z0, nz).map_err(|e| e.in_file(&name))
    }

    fn read_slab_inner(&mut self, z0: usize, nz: usize) -> Result<Array> {
        let n0 = self.header.shape[0];
        if z0.checked_add(nz).is_none_or(|end| end > n0) {
            return Err(IoError::invalid(
                format!(
                    "slab {z0}..{} is outside the leading axis of length {n0}",
                    z0.saturating_add(nz)
                ),
                "request slices within the array's shape",
            ));
        }
        let item = self.header.dtype.size_bytes();
        let slice_bytes = self.slice_len() * item;
        let offset = self.header.data_offset as u64 + (z0 * slice_bytes) as u64;
        let mut buf = vec![0u8; nz * slice_bytes];
        if !self.fill_from_c_order(z0 * slice_bytes, &mut buf)? {
            self.file
                .seek(SeekFrom::Start(offset))
                .map_err(|e| IoError::io("cannot seek", e))?;
            self.file.read_exact(&mut buf).map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    IoError::truncated(
                        "the file ended while reading a slab (was it truncated after opening?)",
                    )
                } else {
                    IoError::io("cannot read the file", e)
                }
            })?;
        }
        if let Some(pair) = &mut self.pair {
            pair.read(z0, &buf)?;
        }
        let data = decode_elements(self.header.dtype, &buf, self.header.big_endian);
        let mut shape = self.header.shape.clone();
        shape[0] = nz;
        Array::new(shape, data)
    }
}

impl NpyReader {
    /// Fills `buf` from byte `at` of the C-order copy of a Fortran-order
    /// file (made on the first call); false for a C-order file.
    fn fill_from_c_order(&mut self, at: usize, buf: &mut [u8]) -> Result<bool> {
        let h = &self.header;
        if !(h.fortran_order && h.shape.len() > 1) {
            return Ok(false);
        }
        if self.c_order.is_none() {
            self.c_order = Some(crate::fortran::read_as_c_order(
                &mut self.file,
                h.data_offset as u64,
                h.data_bytes()?,
                &h.shape,
                h.dtype.size_bytes(),
            )?);
        }
        let data = self.c_order.as_deref().unwrap_or_default();
        let src = data.get(at..at + buf.len()).ok_or_else(|| {
            IoError::invalid(
                "a slab outside the array",
                "request slices within its shape",
            )
        })?;
        buf.copy_from_slice(src);
        Ok(true)
    }

    /// Whether the file's elements are in this machine's byte order
    /// (little-endian, or one byte), so [`NpyReader::read_slab_raw`]
    /// gives them as they are in memory.
    pub fn native_order(&self) -> bool {
        !self.header.big_endian || self.header.dtype.size_bytes() == 1
    }

    /// Reads slices z0..z0+nz straight into `out` (exactly their bytes,
    /// in the file's byte order): no decoding copy, and large reads
    /// split over several threads (detector series streamed from the
    /// page cache).
    pub fn read_slab_raw(&mut self, z0: usize, nz: usize, out: &mut [u8]) -> Result<()> {
        let name = self.name.clone();
        self.read_slab_raw_inner(z0, nz, out)
            .map_err(|e| e.in_file(&name))
    }

    fn read_slab_raw_inner(&mut self, z0: usize, nz: usize, out: &mut [u8]) -> Result<()> {
        let slice_bytes = self.slice_len() * self.header.dtype.size_bytes();
        let n0 = self.header.shape[0];
        if z0.checked_add(nz).is_none_or(|end| end > n0) || out.len() != nz * slice_bytes {
            return Err(IoError::invalid(
                format!(
                    "slab {z0}..{} of {} bytes",
                    z0.saturating_add(nz),
                    out.len()
                ),
                "request whole slices within the array's shape",
            ));
        }
        if self.fill_from_c_order(z0 * slice_bytes, out)? {
            return match &mut self.pair {
                Some(pair) => pair.read(z0, out),
                None => Ok(()),
            };
        }
        let offset = self.header.data_offset as u64 + (z0 * slice_bytes) as u64;
        // Parts of at least 8 MiB, at most one per core (8 at most).
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get().min(8));
        let part_len = out.len().div_ceil(cores).max(8 << 20);
        let truncated = |e: std::io::Error| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                IoError::truncated(
                    "the file ended while reading a slab (was it truncated after opening?)",
                )
            } else {
                IoError::io("cannot read the file", e)
            }
        };
        #[cfg(unix)]
        if out.len() > part_len {
            use std::os::unix::fs::FileExt;
            let file = &self.file;
            let results: Vec<std::io::Result<()>> = std::thread::scope(|scope| {
                let parts: Vec<_> = out
                    .chunks_mut(part_len)
                    .enumerate()
                    .map(|(i, part)| {
                        let at = offset + (i * part_len) as u64;
                        scope.spawn(move || file.read_exact_at(part, at))
                    })
                    .collect();
                parts
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(std::io::Error::other("a reading thread failed"))
                        })
                    })
                    .collect()
            });
            results.into_iter().try_for_each(|r| r.map_err(truncated))?;
        } else {
            self.file
                .seek(SeekFrom::Start(offset))
                .map_err(|e| IoError::io("cannot seek", e))?;
            self.file.read_exact(out).map_err(truncated)?;
        }
        #[cfg(not(unix))]
        {
            self.file
                .seek(SeekFrom::Start(offset))
                .map_err(|e| IoError::io("cannot seek", e))?;
            self.file.read_exact(out).map_err(truncated)?;
        }
        match &mut self.pair {
            Some(pair) => pair.read(z0, out),
            None => Ok(()),
        }
    }
}

impl NpyReader {
    /// Rows `y` (along the second axis) of slice `z`, decoded: part of a
    /// slice, for slices too large to hold whole.
    pub fn read_rows(&mut self, z: usize, y: std::ops::Range<usize>) -> Result<Array> {
        let row: usize = self.header.shape.get(2..).map_or(1, |r| r.iter().product());
        let mut buf = vec![0u8; y.len() * row * self.header.dtype.size_bytes()];
        self.read_rows_raw(z, y.clone(), &mut buf)?;
        let data = decode_elements(self.header.dtype, &buf, self.header.big_endian);
        let mut shape = self.header.shape.clone();
        shape[0] = 1;
        shape[1] = y.len();
        Array::new(shape, data).map_err(|e| e.in_file(&self.name))
    }

    /// Rows `y` of slice `z` straight into `out` (their bytes in the
    /// file's byte order), as [`NpyReader::read_slab_raw`] does slices.
    pub fn read_rows_raw(
        &mut self,
        z: usize,
        y: std::ops::Range<usize>,
        out: &mut [u8],
    ) -> Result<()> {
        let name = self.name.clone();
        self.read_rows_raw_inner(z, y, out)
            .map_err(|e| e.in_file(&name))
    }

    fn read_rows_raw_inner(
        &mut self,
        z: usize,
        y: std::ops::Range<usize>,
        out: &mut [u8],
    ) -> Result<()> {
        let shape = &self.header.shape;
        let item = self.header.dtype.size_bytes();
        let row_bytes = shape.get(2..).map_or(1, |r| r.iter().product::<usize>()) * item;
        let slice_bytes = self.slice_len() * item;
        let ny = shape.get(1).copied().unwrap_or(0);
        if shape.len() < 2
            || z >= shape[0]
            || y.start > y.end
            || y.end > ny
            || out.len() != y.len() * row_bytes
        {
            return Err(IoError::invalid(
                format!("rows {y:?} of slice {z} into {} bytes", out.len()),
                "request whole rows within the array's shape",
            ));
        }
        let at = z * slice_bytes + y.start * row_bytes;
        if !self.fill_from_c_order(at, out)? {
            self.file
                .seek(SeekFrom::Start(self.header.data_offset as u64 + at as u64))
                .map_err(|e| IoError::io("cannot seek", e))?;
            self.file.read_exact(out).map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    IoError::truncated(
                        "the file ended while reading rows (was it truncated after opening?)",
                    )
                } else {
                    IoError::io("cannot read the file", e)
                }
            })?;
        }
        match &mut self.pair {
            Some(pair) => pair.read_part(z, y.start * row_bytes, out),
            None => Ok(()),
        }
    }
}

fn read_up_to(f: &mut File, buf: &mut [u8]) -> Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(IoError::io("cannot read the file", e)),
        }
    }
    Ok(n)
}

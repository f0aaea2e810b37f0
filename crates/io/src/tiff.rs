//! TIFF via the `tiff` crate: gray, gray+alpha, RGB(A) and multi-sample
//! pages of any sample type and any compression that crate decodes.
//! One page gives (h, w) or (h, w, c); several give (pages, h, w[, c]).
//! Written uncompressed; 3-D arrays become multi-page files, BigTIFF past 4 GiB.

use crate::array::{Array, ArrayData, DType, checked_product};
use crate::error::{IoError, Result};
use crate::{Format, Image, decoded_size_limit};
use std::io::{Cursor, Read, Seek, Write};
use tiff::ColorType;
use tiff::decoder::{Decoder, DecodingResult, Limits};
use tiff::encoder::{TiffEncoder, TiffKind, TiffKindBig, TiffKindStandard, colortype};
use tiff::tags::Tag;

fn tiff_err(e: tiff::TiffError) -> IoError {
    use tiff::TiffError as E;
    match e {
        E::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            IoError::truncated(format!("the TIFF data ends early ({io})"))
        }
        E::IoError(io) => IoError::corrupt(format!("TIFF read failed: {io}")),
        E::UnsupportedError(u) => IoError::unsupported(
            format!("TIFF feature not supported: {u}"),
            "re-save the image as an uncompressed or deflate TIFF",
        ),
        E::LimitsExceeded | E::IntSizeError => {
            IoError::too_large("TIFF image dimensions exceed what this file could hold")
        }
        other => IoError::corrupt(format!("invalid TIFF: {other}")),
    }
}

/// Layout of one page: (height, width, samples per pixel, dtype).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PageInfo {
    h: usize,
    w: usize,
    c: usize,
    dtype: DType,
}

impl PageInfo {
    fn shape(&self) -> Vec<usize> {
        if self.c == 1 {
            vec![self.h, self.w]
        } else {
            vec![self.h, self.w, self.c]
        }
    }
    fn len(&self) -> usize {
        self.h * self.w * self.c
    }
}

fn page_info<R: Read + Seek>(dec: &mut Decoder<R>) -> Result<PageInfo> {
    let (w, h) = dec.dimensions().map_err(tiff_err)?;
    if w == 0 || h == 0 {
        return Err(IoError::corrupt(format!("TIFF page has size {w}x{h}")));
    }
    let ct = dec.colortype().map_err(tiff_err)?;
    let (bits, c) = match ct {
        ColorType::Gray(b) => (b, 1),
        ColorType::GrayA(b) => (b, 2),
        ColorType::RGB(b) => (b, 3),
        ColorType::RGBA(b) => (b, 4),
        ColorType::Multiband {
            bit_depth,
            num_samples,
        } => (bit_depth, num_samples as usize),
        other => {
            return Err(IoError::unsupported(
                format!("TIFF colour type {other:?} is not supported"),
                "convert to grayscale or RGB(A)",
            ));
        }
    };
    if !matches!(bits, 8 | 16 | 32 | 64) {
        return Err(IoError::unsupported(
            format!("TIFF with {bits}-bit samples is not supported"),
            "convert to 8, 16, 32 or 64-bit samples",
        ));
    }
    if c > 1 {
        let planar: Option<u16> = dec
            .find_tag_unsigned(Tag::PlanarConfiguration)
            .map_err(tiff_err)?;
        if planar == Some(2) {
            return Err(IoError::unsupported(
                "TIFF with separate colour planes (PlanarConfiguration 2) is not supported",
                "re-save with interleaved (contiguous) samples",
            ));
        }
    }
    // The sample type is known only after decoding; use a placeholder that
    // decode_page corrects. Bits tell the size, which is what limits need.
    let dtype = match bits {
        8 => DType::U8,
        16 => DType::U16,
        32 => DType::U32,
        _ => DType::U64,
    };
    // Checked once here so PageInfo::len() cannot overflow later.
    (h as usize)
        .checked_mul(w as usize)
        .and_then(|n| n.checked_mul(c))
        .ok_or_else(|| IoError::too_large(format!("TIFF page {w}x{h}x{c} is too large")))?;
    Ok(PageInfo {
        h: h as usize,
        w: w as usize,
        c,
        dtype,
    })
}

fn result_to_data(r: DecodingResult) -> ArrayData {
    match r {
        DecodingResult::U8(v) => ArrayData::U8(v),
        DecodingResult::U16(v) => ArrayData::U16(v),
        DecodingResult::U32(v) => ArrayData::U32(v),
        DecodingResult::U64(v) => ArrayData::U64(v),
        DecodingResult::I8(v) => ArrayData::I8(v),
        DecodingResult::I16(v) => ArrayData::I16(v),
        DecodingResult::I32(v) => ArrayData::I32(v),
        DecodingResult::I64(v) => ArrayData::I64(v),
        // Half floats are widened; numpy users expect float32 math anyway.
        DecodingResult::F16(v) => ArrayData::F32(v.iter().map(|x| x.to_f32()).collect()),
        DecodingResult::F32(v) => ArrayData::F32(v),
        DecodingResult::F64(v) => ArrayData::F64(v),
    }
}

fn decode_page<R: Read + Seek>(dec: &mut Decoder<R>, info: &PageInfo) -> Result<ArrayData> {
    let data = result_to_data(dec.read_image().map_err(tiff_err)?);
    if data.len() != info.len() {
        return Err(IoError::corrupt(format!(
            "TIFF page decoded to {} samples, expected {}x{}x{}",
            data.len(),
            info.h,
            info.w,
            info.c
        )));
    }
    Ok(data)
}

fn open_decoder<R: Read + Seek>(r: R, input_len: usize) -> Result<Decoder<R>> {
    let limit = decoded_size_limit(input_len);
    let mut limits = Limits::default();
    limits.decoding_buffer_size = limit;
    limits.intermediate_buffer_size = limit;
    Ok(Decoder::new(r).map_err(tiff_err)?.with_limits(limits))
}

fn append(acc: &mut ArrayData, page: ArrayData) -> Result<()> {
    macro_rules! app {
        ($($var:ident),*) => {
            match (acc, page) {
                $((ArrayData::$var(a), ArrayData::$var(b)) => { a.extend_from_slice(&b); Ok(()) })*
                (a, b) => Err(IoError::unsupported(
                    format!("TIFF pages have different sample types ({} then {})", a.dtype().name(), b.dtype().name()),
                    "read the pages one at a time with TiffStackReader, or re-save with one type",
                )),
            }
        };
    }
    app!(Bool, U8, U16, U32, U64, I8, I16, I32, I64, F32, F64)
}

/// Decode a whole TIFF held in memory.
pub fn decode(bytes: &[u8]) -> Result<Image> {
    let limit = decoded_size_limit(bytes.len());
    let mut dec = open_decoder(Cursor::new(bytes), bytes.len())?;
    let first = page_info(&mut dec)?;
    let mut data = decode_page(&mut dec, &first)?;
    let mut total = data.len() * data.dtype().size_bytes();
    let mut pages = 1usize;
    while dec.more_images() {
        dec.next_image().map_err(tiff_err)?;
        let info = page_info(&mut dec)?;
        if (info.h, info.w, info.c) != (first.h, first.w, first.c) {
            return Err(IoError::unsupported(
                format!(
                    "TIFF page {pages} has shape {:?} but page 0 has {:?}",
                    info.shape(),
                    first.shape()
                ),
                "pages of different sizes cannot form one array; split the file",
            ));
        }
        // Pages may share strip data, so bound the total, not just each page.
        total = total.saturating_add(info.len().saturating_mul(info.dtype.size_bytes()));
        if total > limit {
            return Err(IoError::too_large(format!(
                "TIFF pages decode to more than {limit} bytes"
            )));
        }
        let page = decode_page(&mut dec, &info)?;
        append(&mut data, page)?;
        pages += 1;
    }
    let mut shape = first.shape();
    if pages > 1 {
        shape.insert(0, pages);
    }
    Ok(Image {
        array: Array::new(shape, data)?,
        format: Format::Tiff,
        header: vec![("pages".to_string(), pages.to_string())],
    })
}

/// How an array maps onto TIFF pages.
struct Layout {
    pages: usize,
    h: usize,
    w: usize,
    c: usize,
}

fn layout(array: &Array) -> Result<Layout> {
    let s = &array.shape;
    let colour_ok = matches!(array.dtype(), DType::U8 | DType::U16);
    let l = match s.len() {
        2 => Layout {
            pages: 1,
            h: s[0],
            w: s[1],
            c: 1,
        },
        // (h, w, 3|4) of u8/u16 is a colour image, as on reading.
        3 if colour_ok && matches!(s[2], 3 | 4) => Layout {
            pages: 1,
            h: s[0],
            w: s[1],
            c: s[2],
        },
        3 => Layout {
            pages: s[0],
            h: s[1],
            w: s[2],
            c: 1,
        },
        4 if colour_ok && matches!(s[3], 3 | 4) => Layout {
            pages: s[0],
            h: s[1],
            w: s[2],
            c: s[3],
        },
        _ => {
            return Err(IoError::invalid(
                format!("cannot write shape {s:?} as TIFF"),
                "TIFF holds (h, w), (h, w, 3|4) u8/u16 colour, or (pages, h, w) stacks",
            ));
        }
    };
    if l.pages == 0 || l.h == 0 || l.w == 0 {
        return Err(IoError::invalid(
            format!("cannot write shape {s:?} as TIFF: an image needs non-zero sizes"),
            "TIFF pages must be at least 1x1",
        ));
    }
    if u32::try_from(l.h).is_err() || u32::try_from(l.w).is_err() {
        return Err(IoError::invalid(
            format!("image {}x{} is too large for TIFF", l.h, l.w),
            "TIFF sizes are 32-bit",
        ));
    }
    Ok(l)
}

/// Write one page (`range` of the array's data) with the matching TIFF colour type.
fn write_page<W: Write + Seek, K: TiffKind>(
    enc: &mut TiffEncoder<W, K>,
    data: &ArrayData,
    range: std::ops::Range<usize>,
    h: usize,
    w: usize,
    c: usize,
) -> Result<()> {
    let (w32, h32) = (w as u32, h as u32);
    let r = match (data, c) {
        (ArrayData::Bool(v), 1) => {
            let bytes: Vec<u8> = v[range].iter().map(|&b| u8::from(b)).collect();
            enc.write_image::<colortype::Gray8>(w32, h32, &bytes)
        }
        (ArrayData::U8(v), 1) => enc.write_image::<colortype::Gray8>(w32, h32, &v[range]),
        (ArrayData::U8(v), 3) => enc.write_image::<colortype::RGB8>(w32, h32, &v[range]),
        (ArrayData::U8(v), 4) => enc.write_image::<colortype::RGBA8>(w32, h32, &v[range]),
        (ArrayData::U16(v), 1) => enc.write_image::<colortype::Gray16>(w32, h32, &v[range]),
        (ArrayData::U16(v), 3) => enc.write_image::<colortype::RGB16>(w32, h32, &v[range]),
        (ArrayData::U16(v), 4) => enc.write_image::<colortype::RGBA16>(w32, h32, &v[range]),
        (ArrayData::U32(v), 1) => enc.write_image::<colortype::Gray32>(w32, h32, &v[range]),
        (ArrayData::U64(v), 1) => enc.write_image::<colortype::Gray64>(w32, h32, &v[range]),
        (ArrayData::I8(v), 1) => enc.write_image::<colortype::GrayI8>(w32, h32, &v[range]),
        (ArrayData::I16(v), 1) => enc.write_image::<colortype::GrayI16>(w32, h32, &v[range]),
        (ArrayData::I32(v), 1) => enc.write_image::<colortype::GrayI32>(w32, h32, &v[range]),
        (ArrayData::I64(v), 1) => enc.write_image::<colortype::GrayI64>(w32, h32, &v[range]),
        (ArrayData::F32(v), 1) => enc.write_image::<colortype::Gray32Float>(w32, h32, &v[range]),
        (ArrayData::F64(v), 1) => enc.write_image::<colortype::Gray64Float>(w32, h32, &v[range]),
        (d, c) => {
            return Err(IoError::invalid(
                format!(
                    "cannot write {} with {c} samples per pixel as TIFF",
                    d.dtype().name()
                ),
                "colour TIFF is written from uint8 or uint16 only",
            ));
        }
    };
    r.map_err(|e| IoError::io("TIFF encoding failed", std::io::Error::other(e.to_string())))
}

fn write_all_pages<W: Write + Seek, K: TiffKind>(
    enc: &mut TiffEncoder<W, K>,
    array: &Array,
    l: &Layout,
) -> Result<()> {
    let per = l.h * l.w * l.c;
    for p in 0..l.pages {
        write_page(enc, &array.data, p * per..(p + 1) * per, l.h, l.w, l.c)?;
    }
    Ok(())
}

/// Classic TIFF offsets are 32-bit; leave room for the directories.
const CLASSIC_MAX: u64 = (u32::MAX as u64) - (64 << 20);

/// Encode an array as an uncompressed TIFF (BigTIFF when over 4 GiB).
pub fn encode(array: &Array) -> Result<Vec<u8>> {
    let l = layout(array)?;
    let bytes = checked_product(&array.shape)
        .map(|n| n as u64 * array.dtype().size_bytes() as u64)
        .unwrap_or(u64::MAX);
    let mut cur = Cursor::new(Vec::new());
    let io = |e: tiff::TiffError| {
        IoError::io("TIFF encoding failed", std::io::Error::other(e.to_string()))
    };
    if bytes > CLASSIC_MAX {
        let mut enc = TiffEncoder::<_, TiffKindBig>::new_big(&mut cur).map_err(io)?;
        write_all_pages(&mut enc, array, &l)?;
    } else {
        let mut enc = TiffEncoder::<_, TiffKindStandard>::new(&mut cur).map_err(io)?;
        write_all_pages(&mut enc, array, &l)?;
    }
    Ok(cur.into_inner())
}

#[cfg(not(target_arch = "wasm32"))]
pub use stream::{TiffStackReader, TiffStackWriter};

#[cfg(not(target_arch = "wasm32"))]
mod stream {
    use super::*;
    use crate::atomic::TempFile;
    use crate::error::display_name;
    use std::fs::File;
    use std::io::{BufReader, BufWriter, SeekFrom};
    use std::path::Path;
    use std::sync::{Arc, Mutex};

    /// Reads a multi-page TIFF one page at a time.
    pub struct TiffStackReader {
        dec: Decoder<BufReader<File>>,
        name: String,
        pages: usize,
        info: PageInfo,
    }

    impl TiffStackReader {
        pub fn open(path: &Path) -> Result<TiffStackReader> {
            let name = display_name(&path.to_string_lossy());
            Self::open_inner(path, &name).map_err(|e| e.in_file(&name))
        }

        fn open_inner(path: &Path, name: &str) -> Result<TiffStackReader> {
            let file = crate::links::open_regular(path)?;
            let len = file
                .metadata()
                .map_err(|e| IoError::io("cannot stat the file", e))?
                .len();
            let mut dec = open_decoder(
                BufReader::new(file),
                usize::try_from(len).unwrap_or(usize::MAX),
            )?;
            let mut info = page_info(&mut dec)?;
            // Find the sample type by decoding the first page (it is checked again on read).
            let first = decode_page(&mut dec, &info)?;
            info.dtype = first.dtype();
            let mut pages = 1;
            while dec.more_images() {
                dec.next_image().map_err(tiff_err)?;
                let p = page_info(&mut dec)?;
                if (p.h, p.w, p.c) != (info.h, info.w, info.c) {
                    return Err(IoError::unsupported(
                        format!(
                            "TIFF page {pages} has shape {:?} but page 0 has {:?}",
                            p.shape(),
                            info.shape()
                        ),
                        "pages of different sizes cannot form one stack",
                    ));
                }
                pages += 1;
            }
            Ok(TiffStackReader {
                dec,
                name: name.to_string(),
                pages,
                info,
            })
        }

        /// (pages, h, w) or (pages, h, w, c).
        pub fn shape(&self) -> Vec<usize> {
            let mut s = self.info.shape();
            s.insert(0, self.pages);
            s
        }
        pub fn dtype(&self) -> DType {
            self.info.dtype
        }
        pub fn pages(&self) -> usize {
            self.pages
        }

        /// Page `i` as (h, w) or (h, w, c).
        pub fn read_page(&mut self, i: usize) -> Result<Array> {
            let name = self.name.clone();
            self.read_page_inner(i).map_err(|e| e.in_file(&name))
        }

        fn read_page_inner(&mut self, i: usize) -> Result<Array> {
            if i >= self.pages {
                return Err(IoError::invalid(
                    format!("page {i} requested but the file has {}", self.pages),
                    "request a page index below the page count",
                ));
            }
            self.dec.seek_to_image(i).map_err(tiff_err)?;
            let data = decode_page(&mut self.dec, &self.info)?;
            if data.dtype() != self.info.dtype {
                return Err(IoError::unsupported(
                    format!(
                        "TIFF page {i} is {} but page 0 is {}",
                        data.dtype().name(),
                        self.info.dtype.name()
                    ),
                    "re-save the stack with one sample type",
                ));
            }
            Array::new(self.info.shape(), data)
        }
    }

    /// A `Write + Seek` handle that the encoder owns while we keep a second one
    /// to flush and close the file: the tiff encoder has no `into_inner`.
    #[derive(Clone)]
    struct Shared(Arc<Mutex<BufWriter<File>>>);

    impl Shared {
        fn with<T>(
            &self,
            f: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<T>,
        ) -> std::io::Result<T> {
            let mut g = self
                .0
                .lock()
                .map_err(|_| std::io::Error::other("writer lock poisoned"))?;
            f(&mut g)
        }
    }
    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.with(|w| w.write(buf))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            self.with(|w| w.flush())
        }
    }
    impl Seek for Shared {
        fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
            self.with(|w| w.seek(pos))
        }
    }

    enum Enc {
        Classic(TiffEncoder<Shared, TiffKindStandard>),
        Big(TiffEncoder<Shared, TiffKindBig>),
    }

    /// Writes a multi-page TIFF page by page; the output appears only on `finish`.
    pub struct TiffStackWriter {
        enc: Option<Enc>,
        shared: Shared,
        tmp: Option<TempFile>,
        name: String,
        h: usize,
        w: usize,
        dtype: DType,
        pages: usize,
        bytes: u64,
    }

    impl TiffStackWriter {
        /// Classic TIFF, readable everywhere but limited to 4 GiB in total.
        pub fn create(path: &Path, h: usize, w: usize, dtype: DType) -> Result<TiffStackWriter> {
            Self::create_kind(path, h, w, dtype, false)
        }
        /// BigTIFF, for stacks over 4 GiB.
        pub fn create_bigtiff(
            path: &Path,
            h: usize,
            w: usize,
            dtype: DType,
        ) -> Result<TiffStackWriter> {
            Self::create_kind(path, h, w, dtype, true)
        }

        fn create_kind(
            path: &Path,
            h: usize,
            w: usize,
            dtype: DType,
            big: bool,
        ) -> Result<TiffStackWriter> {
            let name = display_name(&path.to_string_lossy());
            (|| -> Result<TiffStackWriter> {
                let probe = Array::zeros(vec![1, 1], dtype)?;
                layout(&Array {
                    shape: vec![h, w],
                    ..probe
                })?;
                let (tmp, file) = TempFile::create(path)?;
                let shared = Shared(Arc::new(Mutex::new(BufWriter::new(file))));
                let io = |e: tiff::TiffError| {
                    IoError::io(
                        "cannot write the file",
                        std::io::Error::other(e.to_string()),
                    )
                };
                let enc = if big {
                    Enc::Big(TiffEncoder::new_big(shared.clone()).map_err(io)?)
                } else {
                    Enc::Classic(TiffEncoder::new(shared.clone()).map_err(io)?)
                };
                Ok(TiffStackWriter {
                    enc: Some(enc),
                    shared,
                    tmp: Some(tmp),
                    name: name.clone(),
                    h,
                    w,
                    dtype,
                    pages: 0,
                    bytes: 0,
                })
            })()
            .map_err(|e| e.in_file(&name))
        }

        /// Append one (h, w) page of the writer's dtype.
        pub fn write_page(&mut self, page: &Array) -> Result<()> {
            let name = self.name.clone();
            self.write_page_inner(page).map_err(|e| e.in_file(&name))
        }

        fn write_page_inner(&mut self, page: &Array) -> Result<()> {
            page.validate()?;
            if page.shape != [self.h, self.w] || page.dtype() != self.dtype {
                return Err(IoError::invalid(
                    format!(
                        "page is {:?} {} but the stack is [{}, {}] {}",
                        page.shape,
                        page.dtype().name(),
                        self.h,
                        self.w,
                        self.dtype.name()
                    ),
                    "every page must have the shape and dtype given to create",
                ));
            }
            let page_bytes = (page.len() * page.dtype().size_bytes()) as u64;
            let after = self.bytes + page_bytes + 512;
            let n = page.len();
            match self.enc.as_mut() {
                Some(Enc::Classic(e)) => {
                    if after > CLASSIC_MAX {
                        return Err(IoError::invalid(
                            "the stack would exceed the 4 GiB limit of classic TIFF",
                            "use TiffStackWriter::create_bigtiff, or write .npy",
                        ));
                    }
                    write_page(e, &page.data, 0..n, self.h, self.w, 1)?
                }
                Some(Enc::Big(e)) => write_page(e, &page.data, 0..n, self.h, self.w, 1)?,
                None => {
                    return Err(IoError::invalid(
                        "the writer is already finished",
                        "create a new writer",
                    ));
                }
            }
            self.bytes = after;
            self.pages += 1;
            Ok(())
        }

        /// Complete the file (temp + rename). At least one page must have been written.
        pub fn finish(mut self) -> Result<()> {
            let name = self.name.clone();
            if self.pages == 0 {
                return Err(IoError::invalid(
                    "no page was written",
                    "write at least one page before finish; no file was created",
                )
                .in_file(&name));
            }
            drop(self.enc.take());
            let Shared(arc) = self.shared;
            let w = Arc::try_unwrap(arc)
                .ok()
                .and_then(|m| m.into_inner().ok())
                .ok_or_else(|| {
                    IoError::invalid("the TIFF writer is still in use", "").in_file(&name)
                })?;
            match self.tmp.take() {
                Some(tmp) => tmp.commit(w).map_err(|e| e.in_file(&name)),
                None => Err(IoError::invalid("the writer is already finished", "").in_file(&name)),
            }
        }
    }
}

//! Sigma clipping (`clip`, `threshold --nsigma`) without holding float64
//! copies: the streamed passes of the core ([`clip::stream`]) over the rows
//! of an image in memory, or over the slices of a stack on disk, so the
//! host holds the input (or one slab of it) and a few histograms. The
//! answer is the CPU reference's, bit for bit.

use std::path::Path;
use std::time::Instant;

use gpuscope_core::segment::threshold;
use serde_json::json;

use gpuscope_core::stats::clip::stream::{ClipSample, InMemory, clipped_stats};
use gpuscope_core::stats::clip::{ClipOptions, ClipStats};
use gpuscope_core::stream::SliceSource;
use gpuscope_io::{Array, ArrayData, DType};

use crate::common::{CliResult, Engine, Failure, peak_rss_bytes, samples};
use crate::segment::{ThresholdCmd, level, reset, stats_json, timing};
use crate::stream::StackReader;
use crate::stream::StackWriter;
use gpuscope_core::Gpu;

/// Host memory a slab may take while clipping: small against any budget,
/// large enough that reads are efficient.
const SLAB_BYTES: usize = 8 << 20;

/// A dtype the CLI clips, as it sits in an [`Array`].
trait Column: ClipSample + 'static {
    fn view(d: &ArrayData) -> Option<&[Self]>;
    fn take(d: ArrayData) -> Option<Vec<Self>>;
}

macro_rules! column {
    ($($t:ty => $v:ident),*) => {$(
        impl Column for $t {
            fn view(d: &ArrayData) -> Option<&[Self]> {
                match d {
                    ArrayData::$v(v) => Some(v),
                    _ => None,
                }
            }
            fn take(d: ArrayData) -> Option<Vec<Self>> {
                match d {
                    ArrayData::$v(v) => Some(v),
                    _ => None,
                }
            }
        }
    )*};
}

column!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32,
    f32 => F32, u64 => U64, i64 => I64, f64 => F64);

/// Calls `$f::<T>($args)` with `T` the Rust type of `$dtype`.
macro_rules! by_dtype {
    ($dtype:expr, $f:ident, $($args:expr),*) => {
        match $dtype {
            DType::U8 => $f::<u8>($($args),*),
            DType::I8 => $f::<i8>($($args),*),
            DType::U16 => $f::<u16>($($args),*),
            DType::I16 => $f::<i16>($($args),*),
            DType::U32 => $f::<u32>($($args),*),
            DType::I32 => $f::<i32>($($args),*),
            DType::F32 => $f::<f32>($($args),*),
            DType::U64 => $f::<u64>($($args),*),
            DType::I64 => $f::<i64>($($args),*),
            DType::F64 => $f::<f64>($($args),*),
            DType::Bool => Err(Failure("the input is already a boolean mask".into())),
        }
    };
}

fn core_error(Failure(m): Failure) -> gpuscope_core::Error {
    gpuscope_core::Error::InvalidInput(m)
}

/// A stack on disk as slices of `T`, or, with `rows` (the rows of a
/// slice), as its rows: slices larger than a slab are read in rows.
struct StackSource<'a, T> {
    reader: &'a mut StackReader,
    rows: Option<usize>,
    _t: std::marker::PhantomData<T>,
}

impl<T: Column> SliceSource<T> for StackSource<'_, T> {
    fn read(&mut self, z: std::ops::Range<usize>, out: &mut Vec<T>) -> gpuscope_core::Result<()> {
        read_parts(self.reader, self.rows, z, |a| {
            let v = T::take(a.data).ok_or_else(|| {
                gpuscope_core::Error::InvalidInput("a slice of another dtype".into())
            })?;
            out.extend(v);
            Ok(())
        })
    }
}

/// Reads parts `i` of a stack: slices, or with `rows` (the rows of a
/// slice) rows counted through the stack, a slice's rows at a time.
fn read_parts(
    reader: &mut StackReader,
    rows: Option<usize>,
    i: std::ops::Range<usize>,
    mut each: impl FnMut(Array) -> gpuscope_core::Result<()>,
) -> gpuscope_core::Result<()> {
    let Some(ny) = rows.filter(|&n| n > 0) else {
        for z in i {
            each(reader.read(z, 1).map_err(core_error)?)?;
        }
        return Ok(());
    };
    // Reads of at most a quarter of a slab: the rows read are copied into
    // the slab, so each read adds its own size to the peak.
    let row_bytes = (reader.shape()[2] * reader.dtype().size_bytes()).max(1);
    let most = (SLAB_BYTES / 4 / row_bytes).max(1);
    let mut at = i.start;
    while at < i.end {
        let (z, y0) = (at / ny, at % ny);
        let y1 = ny.min(y0 + (i.end - at).min(most));
        each(reader.read_rows(z, y0..y1).map_err(core_error)?)?;
        at += y1 - y0;
    }
    Ok(())
}

/// A mask stack on disk: true (excluded) where non-zero; in rows as
/// [`StackSource`].
struct MaskSource(StackReader, Option<usize>);

impl SliceSource<bool> for MaskSource {
    fn read(
        &mut self,
        z: std::ops::Range<usize>,
        out: &mut Vec<bool>,
    ) -> gpuscope_core::Result<()> {
        read_parts(&mut self.0, self.1, z, |a| {
            out.extend(nonzero(&a));
            Ok(())
        })
    }
}

fn nonzero(a: &Array) -> Vec<bool> {
    match &a.data {
        ArrayData::Bool(v) => v.clone(),
        _ => a.to_f64_vec().iter().map(|&v| v != 0.0).collect(),
    }
}

/// A mask file read whole (true = excluded), of shape `shape`.
pub fn whole_mask(path: &Path, shape: &[usize]) -> CliResult<Vec<bool>> {
    let m = crate::common::read_image(path)?.array;
    if m.shape != shape {
        return Err(Failure(format!(
            "the mask has shape {:?} but the image {shape:?}; give a mask of the image's shape",
            m.shape
        )));
    }
    Ok(nonzero(&m))
}

/// Whether the GPU clips `n` values of `dtype`: float32 within the memory
/// budget (the GPU holds them all); everything else is clipped by the
/// streamed passes on the CPU.
pub fn gpu_clips(engine: &Engine, dtype: DType, n: usize) -> Option<&Gpu> {
    match engine {
        Engine::Gpu(gpu) if dtype == DType::F32 && (n as u64) * 4 <= gpu.memory_budget() => {
            Some(gpu)
        }
        _ => None,
    }
}

/// Slices per slab for planes of `plane_bytes`.
fn per_slab(plane_bytes: usize) -> usize {
    (SLAB_BYTES / plane_bytes.max(1)).max(1)
}

/// A mask given as a file: a stack read slice by slice, or anything else
/// read whole (true = excluded). Its shape must be `shape`.
pub enum Mask {
    Stack(StackReader),
    Whole(Vec<bool>),
}

impl Mask {
    pub fn open(path: &Path, shape: &[usize]) -> CliResult<Mask> {
        let (mask, mshape) = match StackReader::open_stack(path)? {
            Some(r) => {
                let s = r.shape();
                (Mask::Stack(r), s)
            }
            None => {
                let m = whole_mask(path, shape)?;
                (Mask::Whole(m), shape.to_vec())
            }
        };
        if mshape != shape {
            return Err(Failure(format!(
                "the mask has shape {mshape:?} but the image {shape:?}; give a mask of the image's shape"
            )));
        }
        Ok(mask)
    }
}

fn run<T: Column>(
    source: &mut dyn SliceSource<T>,
    mask: Option<Mask>,
    nz: usize,
    plane: usize,
    rows: Option<usize>,
    o: &ClipOptions,
) -> CliResult<ClipStats> {
    let per = per_slab(plane * std::mem::size_of::<T>());
    let mut stack;
    let mut whole;
    let m: Option<&mut dyn SliceSource<bool>> = match mask {
        Some(Mask::Stack(r)) => {
            stack = MaskSource(r, rows);
            Some(&mut stack)
        }
        Some(Mask::Whole(v)) => {
            whole = WholeMask(v, plane);
            Some(&mut whole)
        }
        None => None,
    };
    Ok(clipped_stats(source, m, nz, per, o, &mut |_| {})?)
}

/// A mask held whole, with its plane size.
struct WholeMask(Vec<bool>, usize);

impl SliceSource<bool> for WholeMask {
    fn read(
        &mut self,
        z: std::ops::Range<usize>,
        out: &mut Vec<bool>,
    ) -> gpuscope_core::Result<()> {
        InMemory {
            data: &self.0,
            plane: self.1,
        }
        .read(z, out)
    }
}

/// Clipped statistics of an image in memory, its rows as the slices.
pub fn clip_array(a: &Array, mask: Option<Mask>, o: &ClipOptions) -> CliResult<ClipStats> {
    fn go<T: Column>(a: &Array, mask: Option<Mask>, o: &ClipOptions) -> CliResult<ClipStats> {
        let data = T::view(&a.data).ok_or_else(|| Failure("a dtype mismatch".into()))?;
        let plane = a.shape.last().copied().unwrap_or(1).max(1);
        let mut src = InMemory { data, plane };
        run(&mut src, mask, data.len().div_ceil(plane), plane, None, o)
    }
    by_dtype!(a.dtype(), go, a, mask, o)
}

/// Clipped statistics of a stack on disk, read slab by slab.
pub fn clip_stack(
    reader: &mut StackReader,
    mask: Option<Mask>,
    o: &ClipOptions,
) -> CliResult<ClipStats> {
    fn go<T: Column>(
        reader: &mut StackReader,
        mask: Option<Mask>,
        o: &ClipOptions,
    ) -> CliResult<ClipStats> {
        let shape = reader.shape();
        let plane: usize = shape[1..].iter().product();
        // Slices larger than a slab are read in rows (the mask too), so
        // memory stays a slab whatever the frame size.
        let in_rows = plane * std::mem::size_of::<T>() > SLAB_BYTES
            && reader.reads_rows()
            && match &mask {
                Some(Mask::Stack(m)) => m.reads_rows(),
                _ => true,
            };
        let rows = in_rows.then_some(shape[1]);
        let (parts, part) = match rows {
            Some(ny) => (shape[0] * ny, shape[2]),
            None => (shape[0], plane),
        };
        let mut src = StackSource::<T> {
            reader,
            rows,
            _t: std::marker::PhantomData,
        };
        run(&mut src, mask, parts, part, rows, o)
    }
    let dtype = reader.dtype();
    by_dtype!(dtype, go, reader, mask, o)
}

/// `threshold` of a stack on disk, slab by slab: the clipped statistics (if
/// `--nsigma`) by streamed passes, then each slice compared (on the GPU
/// when there is one; the comparison is exact either way) and written.
pub fn threshold_stack(engine: &Engine, mut reader: StackReader, args: &ThresholdCmd) -> CliResult {
    let shape = reader.shape();
    reset(engine);
    let start = Instant::now();
    let (value, stats) = match (args.above, args.nsigma) {
        (Some(v), _) => (v, None),
        (None, Some(n)) => {
            let s = clip_stack(&mut reader, None, &args.clip.options())?;
            (level(&args.clip, n).value(&s)?, Some(s))
        }
        (None, None) => return Err(Failure("give --above V or --nsigma N".into())),
    };
    let Some(mut writer) = StackWriter::create(&args.output, &shape, DType::Bool)? else {
        return Err(Failure("stacks are written as .npy, .raw or .tif".into()));
    };
    // Slices larger than a slab are compared in bands of rows; an output
    // that cannot take rows (TIFF, Zarr) gathers each slice's mask.
    let row_bytes = shape[2] * reader.dtype().size_bytes();
    let band = (shape[1] * row_bytes > SLAB_BYTES && reader.reads_rows())
        .then(|| (SLAB_BYTES / 4 / row_bytes.max(1)).max(1));
    let mut count = 0;
    let gathers = band.is_some() && !matches!(writer, StackWriter::Npy(_));
    for z in 0..shape[0] {
        let mut gathered = Vec::with_capacity(if gathers { shape[1] * shape[2] } else { 0 });
        for y in (0..shape[1]).step_by(band.unwrap_or(shape[1]).max(1)) {
            let slab = match band {
                Some(n) => reader.read_rows(z, y..shape[1].min(y + n))?,
                None => reader.read(z, 1)?,
            };
            let s = samples(&slab)?;
            let mask = match engine {
                Engine::Gpu(gpu) => pollster::block_on(threshold::threshold_above(gpu, s, value))?,
                Engine::Cpu => threshold::cpu::threshold_above(s, value)?,
            };
            count += mask.iter().filter(|&&m| m).count();
            match (&mut writer, band) {
                (StackWriter::Npy(w), Some(_)) => {
                    w.write_rows(&Array::from_bool(slab.shape.clone(), mask)?)?
                }
                (_, Some(_)) => gathered.extend(mask),
                (_, None) => writer.write(&Array::from_bool(slab.shape.clone(), mask)?)?,
            }
        }
        if !gathered.is_empty() {
            writer.write(&Array::from_bool(vec![1, shape[1], shape[2]], gathered)?)?;
        }
    }
    writer.finish()?;
    let (kernel_ms, total_ms) = timing(engine, start);
    if args.json {
        println!(
            "{}",
            json!({
                "shape": shape, "n_above": count, "threshold": value,
                "clip": stats.as_ref().map(stats_json),
                "device": engine.name(), "backend": engine.backend(), "kernel_ms": kernel_ms, "total_ms": total_ms,
                "streamed": true, "peak_rss_bytes": peak_rss_bytes(),
            })
        );
    }
    Ok(())
}

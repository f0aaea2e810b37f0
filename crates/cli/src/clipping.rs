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

/// A stack on disk as slices of `T`.
struct StackSource<'a, T> {
    reader: &'a mut StackReader,
    _t: std::marker::PhantomData<T>,
}

impl<T: Column> SliceSource<T> for StackSource<'_, T> {
    fn read(&mut self, z: std::ops::Range<usize>, out: &mut Vec<T>) -> gpuscope_core::Result<()> {
        for i in z {
            let slab = self.reader.read(i, 1).map_err(core_error)?;
            let v = T::take(slab.data).ok_or_else(|| {
                gpuscope_core::Error::InvalidInput("a slice of another dtype".into())
            })?;
            out.extend(v);
        }
        Ok(())
    }
}

/// A mask stack on disk: true (excluded) where non-zero.
struct MaskSource(StackReader);

impl SliceSource<bool> for MaskSource {
    fn read(
        &mut self,
        z: std::ops::Range<usize>,
        out: &mut Vec<bool>,
    ) -> gpuscope_core::Result<()> {
        for i in z {
            let slab = self.0.read(i, 1).map_err(core_error)?;
            out.extend(nonzero(&slab));
        }
        Ok(())
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
    o: &ClipOptions,
) -> CliResult<ClipStats> {
    let per = per_slab(plane * std::mem::size_of::<T>());
    let mut stack;
    let mut whole;
    let m: Option<&mut dyn SliceSource<bool>> = match mask {
        Some(Mask::Stack(r)) => {
            stack = MaskSource(r);
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
        run(&mut src, mask, data.len().div_ceil(plane), plane, o)
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
        let plane = shape[1..].iter().product();
        let mut src = StackSource::<T> {
            reader,
            _t: std::marker::PhantomData,
        };
        run(&mut src, mask, shape[0], plane, o)
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
    let mut count = 0;
    for z in 0..shape[0] {
        let slab = reader.read(z, 1)?;
        let s = samples(&slab)?;
        let mask = match engine {
            Engine::Gpu(gpu) => pollster::block_on(threshold::threshold_above(gpu, s, value))?,
            Engine::Cpu => threshold::cpu::threshold_above(s, value)?,
        };
        count += mask.iter().filter(|&&m| m).count();
        writer.write(&Array::from_bool(slab.shape.clone(), mask)?)?;
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

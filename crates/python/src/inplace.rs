//! The filters on the GPU for numpy arrays of every dtype, read in place
//! and written into a fresh numpy array (or the caller's `output=`): the
//! only host passes are the conversions the kernels need (float32 values
//! for the linear filters, ordered keys for the median of integer and
//! float64 data), each on threads; float32 travels as stored.

use std::mem::MaybeUninit;

use bytemuck::Pod;
use gpuscope_core::Result;
use gpuscope_core::filters::median::{self, Footprint, OutlierRemoval};
use gpuscope_core::filters::{self, Boundary, Filter, Output};
use gpuscope_core::keys::Samples;
use gpuscope_core::stream::{MemorySink, MemorySource, SliceSink, SliceSource};
use pyo3::prelude::*;

use crate::arrays::{self, Borrowed, Out, Shared};
use crate::convert::{self, FromF32, Keyed};
use crate::device::{Engine, engine, interruptible, py_err};
use crate::ops::{FilterKind, filter_kind, output_of};

/// `op` of `input` on the GPU without host copies (`None`: an empty
/// array, the CPU engine, an unaligned or non-contiguous array: the
/// general path takes them). `dtype`: the linear filters' output dtype
/// (default: the input's); `output`: the caller's array, written in place
/// where it has the result's dtype and shape (the returned object is then
/// `output` itself).
pub(crate) fn filter<'py>(
    py: Python<'py>,
    op: &str,
    input: &Bound<'py, PyAny>,
    options: &str,
    array: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
    output: Option<&Bound<'py, PyAny>>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Some((x, shape)) = arrays::borrowed(input) else {
        return Ok(None);
    };
    if x.samples().is_empty() {
        return Ok(None);
    }
    let engine = engine(py)?;
    if !matches!(engine.as_ref(), Engine::Gpu(_)) {
        return Ok(None);
    }
    let Some(kind) = filter_kind(op, options, array, shape.len())? else {
        return Ok(None);
    };
    let run = Run {
        py,
        engine,
        shape,
        output,
    };
    match kind {
        FilterKind::Median(fp, boundary, removal) => {
            if dtype.is_some_and(|d| d != x.samples().dtype_name()) {
                return Ok(None);
            }
            let rank = Rank {
                footprint: fp,
                boundary,
                removal,
            };
            match x {
                Borrowed::F32(a) => run.median_f32(a, rank),
                Borrowed::U8(a) => run.keyed(a, rank),
                Borrowed::I8(a) => run.keyed(a, rank),
                Borrowed::U16(a) => run.keyed(a, rank),
                Borrowed::I16(a) => run.keyed(a, rank),
                Borrowed::U32(a) => run.keyed(a, rank),
                Borrowed::I32(a) => run.keyed(a, rank),
                Borrowed::U64(a) => run.keyed(a, rank),
                Borrowed::I64(a) => run.keyed(a, rank),
                Borrowed::F64(a) => run.keyed(a, rank),
            }
            .map(Some)
        }
        FilterKind::Linear(f, boundary) => {
            let dtype = dtype.unwrap_or(x.samples().dtype_name()).to_string();
            let quantise = output_of(&dtype)?;
            // Integer outputs of samples beyond float32 (uint32 gaps at
            // 2^32 - 1) take the float64 host path of `ops::filter`.
            if quantise != Output::Float && !filters::gpu_exact(x.samples(), boundary) {
                return Ok(None);
            }
            let lin = Linear {
                filter: f,
                boundary,
                quantise,
            };
            match dtype.as_str() {
                "float32" => run.linear_f32(x, lin),
                "float64" => run.linear::<f64>(x, lin),
                "uint8" => run.linear::<u8>(x, lin),
                "int8" => run.linear::<i8>(x, lin),
                "uint16" => run.linear::<u16>(x, lin),
                "int16" => run.linear::<i16>(x, lin),
                "uint32" => run.linear::<u32>(x, lin),
                "int32" => run.linear::<i32>(x, lin),
                "uint64" => run.linear::<u64>(x, lin),
                "int64" => run.linear::<i64>(x, lin),
                _ => return Ok(None),
            }
            .map(Some)
        }
    }
}

/// What every call shares: the engine, the array's shape, the caller's
/// `output=`.
struct Run<'a, 'py> {
    py: Python<'py>,
    engine: std::sync::Arc<Engine>,
    shape: Vec<usize>,
    output: Option<&'a Bound<'py, PyAny>>,
}

struct Rank {
    footprint: Footprint,
    boundary: Boundary,
    removal: Option<OutlierRemoval>,
}

struct Linear {
    filter: Filter,
    boundary: Boundary,
    quantise: Output,
}

impl<'py> Run<'_, 'py> {
    /// The result's array: the caller's where it can be written in place
    /// (it shares no memory with `input`, the byte span), else a new one.
    fn result<T: numpy::Element>(&self, input: (usize, usize)) -> (Bound<'py, PyAny>, Out<T>) {
        match self
            .output
            .and_then(|o| arrays::output::<T>(o, &self.shape, input))
        {
            Some(given) => given,
            None => arrays::empty::<T>(self.py, &self.shape),
        }
    }

    /// Runs `work` with the GPU (without the GIL, interruptibly).
    fn on_gpu(
        self,
        result: Bound<'py, PyAny>,
        work: impl FnOnce(&gpuscope_core::Gpu, &[usize]) -> Result<()> + Send + 'static,
    ) -> PyResult<Bound<'py, PyAny>> {
        let n = self.shape.iter().product();
        let engine = self.engine;
        let shape = self.shape;
        let done = interruptible(self.py, n, move || match engine.as_ref() {
            Engine::Gpu(gpu) => work(gpu, &shape),
            // `filter` takes this path only with a GPU.
            Engine::Cpu => Ok(()),
        })?;
        done.map_err(py_err)?;
        Ok(result)
    }

    /// The median of float32 data, streamed as stored (the kernels key the
    /// raw bits).
    fn median_f32(self, x: Shared<f32>, rank: Rank) -> PyResult<Bound<'py, PyAny>> {
        let (result, mut out) = self.result::<f32>(span(&x));
        self.on_gpu(result, move |gpu, shape| {
            let x = x.as_slice();
            let s = shape3(shape)?;
            let mut source = MemorySource::new(bytemuck::cast_slice::<f32, u32>(x), s);
            let y = out.as_mut_slice();
            // SAFETY: f32 and u32 have one layout; the sink stores f32 bits.
            let words = unsafe { &mut *(y as *mut [MaybeUninit<f32>] as *mut [MaybeUninit<u32>]) };
            let mut sink = MemorySink::uninit(words);
            u32::stream(gpu, Samples::F32(x), shape, &rank, &mut source, &mut sink)
        })
    }

    /// The median (or outlier removal) of a dtype selected on keys: keys
    /// made on threads, streamed, and turned back into the dtype on
    /// threads as the chunks come back.
    fn keyed<T: Keyed>(self, x: Shared<T>, rank: Rank) -> PyResult<Bound<'py, PyAny>>
    where
        T::Word: Streamed,
    {
        let (result, mut out) = self.result::<T>(span(&x));
        self.on_gpu(result, move |gpu, shape| {
            let x = x.as_slice();
            let keys = convert::map_vec(x, convert::threads_for(x.len(), false), T::key);
            let mut source = MemorySource::new(&keys, shape3(shape)?);
            let mut sink = KeySink {
                data: out.as_mut_slice(),
                filled: 0,
                removal: None,
            };
            // 64-bit dtypes: the GPU gives the medians; the outlier test
            // runs here as the rows come back (GPUs have no f64).
            if T::samples(x).wide()
                && let Some(r) = rank.removal
            {
                sink.removal = Some((r, &keys, T::samples(x).is_float()));
                let median = Rank {
                    removal: None,
                    ..rank
                };
                return <T::Word as Streamed>::stream(
                    gpu,
                    T::samples(x),
                    shape,
                    &median,
                    &mut source,
                    &mut sink,
                );
            }
            <T::Word as Streamed>::stream(gpu, T::samples(x), shape, &rank, &mut source, &mut sink)
        })
    }

    /// A linear filter into a float32 result: float32 input read in place,
    /// other dtypes converted on threads.
    fn linear_f32(self, x: Borrowed, lin: Linear) -> PyResult<Bound<'py, PyAny>> {
        let (result, mut out) = self.result::<f32>(x.span());
        self.on_gpu(result, move |gpu, shape| {
            let y = out.as_mut_slice();
            let apply = |v: &[f32], y| {
                pollster::block_on(filters::apply_into(
                    gpu,
                    &lin.filter,
                    v,
                    shape,
                    lin.boundary,
                    lin.quantise,
                    y,
                ))
            };
            match x.samples() {
                Samples::F32(v) => apply(v, y),
                other => apply(&convert::to_f32(other, threads(other.len())), y),
            }
        })
    }

    /// A linear filter into a result of `T`: computed in float32, stored
    /// in `T` on threads (values the GPU quantised as `T` needs).
    fn linear<T: FromF32>(self, x: Borrowed, lin: Linear) -> PyResult<Bound<'py, PyAny>> {
        let (result, mut out) = self.result::<T>(x.span());
        self.on_gpu(result, move |gpu, shape| {
            let n = x.samples().len();
            let mut y: Vec<f32> = Vec::with_capacity(n);
            let apply = |v: &[f32], y| {
                pollster::block_on(filters::apply_into(
                    gpu,
                    &lin.filter,
                    v,
                    shape,
                    lin.boundary,
                    lin.quantise,
                    y,
                ))
            };
            match x.samples() {
                Samples::F32(v) => apply(v, &mut y.spare_capacity_mut()[..n])?,
                other => apply(
                    &convert::to_f32(other, threads(n)),
                    &mut y.spare_capacity_mut()[..n],
                )?,
            }
            // SAFETY: `apply_into` wrote all `n` elements.
            unsafe { y.set_len(n) };
            convert::map_into(&y, out.as_mut_slice(), threads(n), T::from_f32);
            Ok(())
        })
    }
}

fn threads(n: usize) -> usize {
    convert::threads_for(n, false)
}

fn span<T>(x: &Shared<T>) -> (usize, usize) {
    let s = x.as_slice().as_ptr_range();
    (s.start as usize, s.end as usize)
}

fn shape3(shape: &[usize]) -> Result<gpuscope_core::chunk::Shape3> {
    gpuscope_core::chunk::shape3(shape)
}

/// The key words the median streams: 32-bit (median and outlier removal)
/// or 64-bit (the median; the removal's test of 64-bit dtypes runs on the
/// host, in the general path).
trait Streamed: Pod + Send + Sync {
    fn stream(
        gpu: &gpuscope_core::Gpu,
        dtype: Samples<'_>,
        shape: &[usize],
        rank: &Rank,
        source: &mut dyn SliceSource<Self>,
        sink: &mut dyn SliceSink<Self>,
    ) -> Result<()>;
}

impl Streamed for u32 {
    fn stream(
        gpu: &gpuscope_core::Gpu,
        dtype: Samples<'_>,
        shape: &[usize],
        rank: &Rank,
        source: &mut dyn SliceSource<u32>,
        sink: &mut dyn SliceSink<u32>,
    ) -> Result<()> {
        let none = &mut |_: usize, _: usize| {};
        match &rank.removal {
            Some(r) => pollster::block_on(median::remove_outliers_stream(
                gpu, dtype, shape, r, source, sink, none,
            )),
            None => pollster::block_on(median::median_filter_stream(
                gpu,
                dtype,
                shape,
                &rank.footprint,
                rank.boundary,
                source,
                sink,
                none,
            )),
        }
    }
}

impl Streamed for u64 {
    fn stream(
        gpu: &gpuscope_core::Gpu,
        dtype: Samples<'_>,
        shape: &[usize],
        rank: &Rank,
        source: &mut dyn SliceSource<u64>,
        sink: &mut dyn SliceSink<u64>,
    ) -> Result<()> {
        if rank.removal.is_some() {
            return Err(gpuscope_core::Error::InvalidInput(
                "the outlier removal of 64-bit dtypes takes the general path (an internal error of gpuscope; please report it)".into(),
            ));
        }
        pollster::block_on(median::median_filter_stream(
            gpu,
            dtype,
            shape,
            &rank.footprint,
            rank.boundary,
            source,
            sink,
            &mut |_, _| {},
        ))
    }
}

/// A sink turning key words back into `T`, written into the result array
/// in place (rows as they come, on threads).
struct KeySink<'a, T: Keyed> {
    data: &'a mut [MaybeUninit<T>],
    filled: usize,
    /// 64-bit outlier removal: the removal, the input's keys, and whether
    /// the dtype is float64 (the sink then receives medians).
    removal: Option<(OutlierRemoval, &'a [T::Word], bool)>,
}

impl<T: Keyed> KeySink<'_, T> {
    fn put(&mut self, offset: usize, keys: &[T::Word], busy: bool) -> Result<()> {
        let end = offset + keys.len();
        let Some(dst) = self.data.get_mut(offset..end) else {
            return Err(gpuscope_core::Error::InvalidInput(format!(
                "{end} values written into an array of {}",
                self.data.len()
            )));
        };
        let threads = convert::threads_for(keys.len(), busy);
        match &self.removal {
            None => convert::map_into(keys, dst, threads, T::unkey),
            Some((r, input, float)) => {
                let (r, float) = (*r, *float);
                let Some(input) = input.get(offset..end) else {
                    return Err(gpuscope_core::Error::InvalidInput(format!(
                        "{end} values written into an array of {}",
                        input.len()
                    )));
                };
                convert::for_parts(dst, threads, |o, part| {
                    let (m, x) = (&keys[o..o + part.len()], &input[o..o + part.len()]);
                    for ((d, &m), &x) in part.iter_mut().zip(m).zip(x) {
                        d.write(T::unkey(outlier_key(x, m, &r, float)));
                    }
                });
            }
        }
        Ok(())
    }
}

/// The outlier decision of one element on 64-bit keys (the core's rule,
/// `filters::median`): the median's key `m` where the element `x` is an
/// outlier of the chosen kind, else `x`. float64 differences as numpy
/// computes them; integer ones exactly (keys differ by the difference of
/// the values); NaN (key 0) stays.
fn outlier_key<W: Pod>(xw: W, mw: W, r: &OutlierRemoval, float: bool) -> W {
    use gpuscope_core::filters::median::Outliers;
    // Only 64-bit words come here.
    let (Ok(x), Ok(m)) = (
        bytemuck::try_cast::<W, u64>(xw),
        bytemuck::try_cast::<W, u64>(mw),
    ) else {
        return xw;
    };
    let tomopy = r.outliers == Outliers::Tomopy;
    let exceeds = |hi: u64, lo: u64| {
        if float {
            let d = gpuscope_core::keys::unkey_f64(hi) - gpuscope_core::keys::unkey_f64(lo);
            if tomopy { d >= r.diff } else { d > r.diff }
        } else {
            let d = i128::from(hi) - i128::from(lo);
            if tomopy {
                d >= r.diff.ceil() as i128
            } else {
                d > r.diff.floor() as i128
            }
        }
    };
    let keep = float && x == 0;
    let bright = x > m && exceeds(x, m);
    let dark = m > x && exceeds(m, x);
    let replace = !keep
        && match r.outliers {
            Outliers::Bright | Outliers::Tomopy => bright,
            Outliers::Dark => dark,
            Outliers::Both => bright || dark,
        };
    if replace { mw } else { xw }
}

impl<T: Keyed> SliceSink<T::Word> for KeySink<'_, T> {
    fn write(&mut self, slices: &[T::Word]) -> Result<()> {
        self.put(self.filled, slices, true)?;
        self.filled += slices.len();
        Ok(())
    }

    fn write_alone(&mut self, slices: &[T::Word]) -> Result<()> {
        self.put(self.filled, slices, false)?;
        self.filled += slices.len();
        Ok(())
    }

    fn write_at(&mut self, offset: usize, values: &[T::Word], alone: bool) -> Result<bool> {
        if offset < self.filled {
            return Err(gpuscope_core::Error::InvalidInput(format!(
                "values written at {offset}, before the {} already written",
                self.filled
            )));
        }
        self.put(offset, values, !alone)?;
        Ok(true)
    }

    fn takes_rows(&self) -> bool {
        true
    }

    fn skip(&mut self, n: usize) -> Result<()> {
        let end = self.filled + n;
        if end > self.data.len() {
            return Err(gpuscope_core::Error::InvalidInput(format!(
                "{end} values written into an array of {}",
                self.data.len()
            )));
        }
        self.filled = end;
        Ok(())
    }
}

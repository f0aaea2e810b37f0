//! numpy arrays to and from the core's sample vectors. The Python layer
//! hands over C-contiguous arrays in native byte order (it copies only the
//! ones that are not); the samples are copied out under the GIL so that the
//! GPU work can run without it.

use gpuscope_core::keys::{SampleVec, Samples};
use numpy::{Element, PyArray1, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

/// An array's values, copied, and its shape.
pub struct Input {
    pub values: SampleVec,
    pub shape: Vec<usize>,
}

fn copy<T: Element + Copy>(a: &Bound<'_, PyArrayDyn<T>>) -> PyResult<(Vec<T>, Vec<usize>)> {
    let r = a.try_readonly()?;
    let values = r.as_slice().map_err(|_| {
        PyTypeError::new_err(
            "the array must be C-contiguous and aligned (use numpy.require(a, requirements='CA'))",
        )
    })?;
    Ok((values.to_vec(), a.shape().to_vec()))
}

/// The samples of a numpy array of a numeric dtype gpuscope computes on.
pub fn input(obj: &Bound<'_, PyAny>) -> PyResult<Input> {
    macro_rules! try_dtype {
        ($t:ty, $variant:ident) => {
            if let Ok(a) = obj.cast::<PyArrayDyn<$t>>() {
                let (v, shape) = copy(a)?;
                return Ok(Input {
                    values: SampleVec::$variant(v),
                    shape,
                });
            }
        };
    }
    try_dtype!(f32, F32);
    try_dtype!(f64, F64);
    try_dtype!(u8, U8);
    try_dtype!(u16, U16);
    try_dtype!(i16, I16);
    try_dtype!(i8, I8);
    try_dtype!(u32, U32);
    try_dtype!(i32, I32);
    try_dtype!(u64, U64);
    try_dtype!(i64, I64);
    let dtype = obj
        .getattr("dtype")
        .map(|d| d.to_string())
        .unwrap_or_else(|_| "unknown".into());
    Err(PyTypeError::new_err(format!(
        "arrays of dtype {dtype} are not supported (give bool, an integer dtype, float32 or float64)"
    )))
}

/// A numpy array of one element type, copied.
pub fn typed<T: Element + Copy>(
    obj: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<(Vec<T>, Vec<usize>)> {
    let a = obj.cast::<PyArrayDyn<T>>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a numpy array of {}",
            std::any::type_name::<T>()
        ))
    })?;
    copy(a)
}

/// A numpy array of `shape` holding `values`.
pub fn array<'py, T: Element>(
    py: Python<'py>,
    values: Vec<T>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyArray1::from_vec(py, values)
        .reshape(shape.to_vec())?
        .into_any())
}

/// A sample vector as a numpy array of its own dtype.
pub fn samples_array<'py>(
    py: Python<'py>,
    values: SampleVec,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    match values {
        SampleVec::U8(v) => array(py, v, shape),
        SampleVec::I8(v) => array(py, v, shape),
        SampleVec::U16(v) => array(py, v, shape),
        SampleVec::I16(v) => array(py, v, shape),
        SampleVec::U32(v) => array(py, v, shape),
        SampleVec::I32(v) => array(py, v, shape),
        SampleVec::F32(v) => array(py, v, shape),
        SampleVec::U64(v) => array(py, v, shape),
        SampleVec::I64(v) => array(py, v, shape),
        SampleVec::F64(v) => array(py, v, shape),
    }
}

/// The values as f64 (the CPU references' precision).
pub fn to_f64(s: &SampleVec) -> Vec<f64> {
    fn f<T: Copy + Into<f64>>(v: &[T]) -> Vec<f64> {
        v.iter().map(|&x| x.into()).collect()
    }
    match s {
        SampleVec::U8(v) => f(v),
        SampleVec::I8(v) => f(v),
        SampleVec::U16(v) => f(v),
        SampleVec::I16(v) => f(v),
        SampleVec::U32(v) => f(v),
        SampleVec::I32(v) => f(v),
        SampleVec::F32(v) => f(v),
        SampleVec::F64(v) => v.clone(),
        // 64-bit integers above 2^53 round, as in scipy's double arithmetic.
        SampleVec::U64(v) => v.iter().map(|&x| x as f64).collect(),
        SampleVec::I64(v) => v.iter().map(|&x| x as f64).collect(),
    }
}

/// The values as f32 (what the GPU's linear filters compute in).
/// The samples as float32, taking a float32 vector over without a copy.
pub fn into_f32(s: SampleVec) -> Vec<f32> {
    match s {
        SampleVec::F32(v) => v,
        other => to_f32(&other),
    }
}

pub fn to_f32(s: &SampleVec) -> Vec<f32> {
    match s {
        SampleVec::F32(v) => v.clone(),
        SampleVec::U8(v) => v.iter().map(|&x| f32::from(x)).collect(),
        SampleVec::I8(v) => v.iter().map(|&x| f32::from(x)).collect(),
        SampleVec::U16(v) => v.iter().map(|&x| f32::from(x)).collect(),
        SampleVec::I16(v) => v.iter().map(|&x| f32::from(x)).collect(),
        other => to_f64(other).into_iter().map(|x| x as f32).collect(),
    }
}

/// A linear filter's result: float32 from the GPU, float64 from the CPU
/// reference.
pub enum Floats {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// Values (integral where `dtype` is an integer: the filters quantise them)
/// as a numpy array of `dtype`; a result already in `dtype` is handed over
/// without a copy.
pub fn cast_array<'py>(
    py: Python<'py>,
    values: Floats,
    shape: &[usize],
    dtype: &str,
) -> PyResult<Bound<'py, PyAny>> {
    match values {
        Floats::F32(v) if dtype == "float32" => array(py, v, shape),
        Floats::F32(v) => cast_from(py, v, shape, dtype),
        Floats::F64(v) if dtype == "float64" => array(py, v, shape),
        Floats::F64(v) => cast_from(py, v, shape, dtype),
    }
}

/// `values` converted element by element (`as`: truncation toward zero,
/// saturating; f32 to f64 is exact, so both sources quantise alike).
fn cast_from<'py, S: Copy + Into<f64>>(
    py: Python<'py>,
    values: Vec<S>,
    shape: &[usize],
    dtype: &str,
) -> PyResult<Bound<'py, PyAny>> {
    fn c<S: Copy + Into<f64>, T, F: Fn(f64) -> T>(v: Vec<S>, f: F) -> Vec<T> {
        v.into_iter().map(|x| f(x.into())).collect()
    }
    match dtype {
        "float64" => array(py, c(values, |x| x), shape),
        "float32" => array(py, c(values, |x| x as f32), shape),
        "uint8" => array(py, c(values, |x| x as u8), shape),
        "int8" => array(py, c(values, |x| x as i8), shape),
        "uint16" => array(py, c(values, |x| x as u16), shape),
        "int16" => array(py, c(values, |x| x as i16), shape),
        "uint32" => array(py, c(values, |x| x as u32), shape),
        "int32" => array(py, c(values, |x| x as i32), shape),
        "uint64" => array(py, c(values, |x| x as u64), shape),
        "int64" => array(py, c(values, |x| x as i64), shape),
        other => Err(PyTypeError::new_err(format!(
            "output dtype {other} is not supported (give an integer dtype, float32 or float64)"
        ))),
    }
}

/// A C-contiguous numpy array that GPU work reads in place, without the
/// copy [`input`] makes. The owned reference keeps the array alive while a
/// worker thread reads it, also after a KeyboardInterrupt has abandoned
/// the call (the work then finishes in the background, see
/// `device::interruptible`).
pub struct Shared<T> {
    _owner: Py<PyAny>,
    ptr: *const T,
    len: usize,
}

// SAFETY: the pointer is into the numpy buffer `_owner` keeps alive; the
// slice is only read.
unsafe impl<T: Sync> Send for Shared<T> {}

impl<T> Shared<T> {
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr`/`len` describe the C-contiguous buffer of the array
        // held by `_owner` (checked in `shared`); numpy keeps an array's
        // buffer in place while a reference to it exists.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    fn span(&self) -> (usize, usize) {
        let lo = self.ptr as usize;
        (lo, lo + std::mem::size_of::<T>() * self.len)
    }
}

/// `obj` as a [`Shared`] and its shape when it is a C-contiguous, aligned
/// array of `T`; `None` for anything else (the caller copies through
/// [`input`]).
pub fn shared<T: Element>(obj: &Bound<'_, PyAny>) -> Option<(Shared<T>, Vec<usize>)> {
    let a = obj.cast::<PyArrayDyn<T>>().ok()?;
    let ptr = a.data() as *const T;
    // numpy allows unaligned buffers (arrays from pickled or raw bytes); a
    // Rust slice may not point at one.
    if !a.is_c_contiguous() || !ptr.is_aligned() {
        return None;
    }
    let shape = a.shape().to_vec();
    let len = shape.iter().product();
    Some((
        Shared {
            _owner: obj.clone().unbind(),
            ptr,
            len,
        },
        shape,
    ))
}

/// A numpy array of any dtype the GPU paths take, read in place.
pub enum Borrowed {
    U8(Shared<u8>),
    I8(Shared<i8>),
    U16(Shared<u16>),
    I16(Shared<i16>),
    U32(Shared<u32>),
    I32(Shared<i32>),
    F32(Shared<f32>),
    U64(Shared<u64>),
    I64(Shared<i64>),
    F64(Shared<f64>),
}

impl Borrowed {
    pub fn samples(&self) -> Samples<'_> {
        match self {
            Borrowed::U8(a) => Samples::U8(a.as_slice()),
            Borrowed::I8(a) => Samples::I8(a.as_slice()),
            Borrowed::U16(a) => Samples::U16(a.as_slice()),
            Borrowed::I16(a) => Samples::I16(a.as_slice()),
            Borrowed::U32(a) => Samples::U32(a.as_slice()),
            Borrowed::I32(a) => Samples::I32(a.as_slice()),
            Borrowed::F32(a) => Samples::F32(a.as_slice()),
            Borrowed::U64(a) => Samples::U64(a.as_slice()),
            Borrowed::I64(a) => Samples::I64(a.as_slice()),
            Borrowed::F64(a) => Samples::F64(a.as_slice()),
        }
    }

    /// The bytes the array occupies, for overlap checks with an output.
    pub fn span(&self) -> (usize, usize) {
        match self {
            Borrowed::U8(a) => a.span(),
            Borrowed::I8(a) => a.span(),
            Borrowed::U16(a) => a.span(),
            Borrowed::I16(a) => a.span(),
            Borrowed::U32(a) => a.span(),
            Borrowed::I32(a) => a.span(),
            Borrowed::F32(a) => a.span(),
            Borrowed::U64(a) => a.span(),
            Borrowed::I64(a) => a.span(),
            Borrowed::F64(a) => a.span(),
        }
    }
}

/// `obj` read in place when it is a C-contiguous, aligned array of a
/// numeric dtype (`None`: the caller copies through [`input`]).
pub fn borrowed(obj: &Bound<'_, PyAny>) -> Option<(Borrowed, Vec<usize>)> {
    macro_rules! try_dtype {
        ($t:ty, $variant:ident) => {
            if obj.cast::<PyArrayDyn<$t>>().is_ok() {
                return shared::<$t>(obj).map(|(a, s)| (Borrowed::$variant(a), s));
            }
        };
    }
    try_dtype!(f32, F32);
    try_dtype!(u16, U16);
    try_dtype!(u8, U8);
    try_dtype!(f64, F64);
    try_dtype!(i16, I16);
    try_dtype!(i32, I32);
    try_dtype!(i8, I8);
    try_dtype!(u32, U32);
    try_dtype!(u64, U64);
    try_dtype!(i64, I64);
    None
}

/// A numpy array the GPU work writes into from a worker thread: a fresh
/// one, which Python sees only once the work is done, or the caller's
/// `output=` array ([`output`]).
pub struct Out<T> {
    _owner: Py<PyAny>,
    ptr: *mut std::mem::MaybeUninit<T>,
    len: usize,
}

/// A float32 array written from a worker thread.
pub type OutF32 = Out<f32>;

// SAFETY: a new array is not yet handed to Python: this is the only
// writer, and nobody reads it until the work has finished. A caller's
// `output=` array is writeable and shares no memory with the input
// (checked in `output`); Python code in another thread may touch it
// meanwhile, as with numpy's own operations that release the GIL.
unsafe impl<T: Send> Send for Out<T> {}

impl<T> Out<T> {
    /// The array's memory, to be written in full before the array is
    /// handed to Python.
    pub fn as_mut_slice(&mut self) -> &mut [std::mem::MaybeUninit<T>] {
        // SAFETY: see `empty`: a C-contiguous buffer of `len` elements of
        // T, alive while `_owner` is, written only through this.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

/// The caller's `output=` array as the result's memory, where it is a
/// writeable, aligned, C-contiguous array of `T` and `shape` that shares no
/// memory with the input (`input`: its byte span; the stream reads the
/// input's halo rows after earlier rows of the result are written); None
/// otherwise (the caller computes into a new array and copies).
pub fn output<'py, T: Element>(
    obj: &Bound<'py, PyAny>,
    shape: &[usize],
    input: (usize, usize),
) -> Option<(Bound<'py, PyAny>, Out<T>)> {
    let a = obj.cast::<PyArrayDyn<T>>().ok()?;
    let ptr = a.data();
    if !a.is_c_contiguous() || !ptr.is_aligned() || a.shape() != shape {
        return None;
    }
    // Not writeable, or borrowed mutably elsewhere in Rust: no.
    drop(a.try_readwrite().ok()?);
    let len: usize = shape.iter().product();
    let (out_lo, out_hi) = (ptr as usize, ptr as usize + std::mem::size_of::<T>() * len);
    let (in_lo, in_hi) = input;
    if out_lo < in_hi && in_lo < out_hi {
        return None;
    }
    let out = Out {
        _owner: obj.clone().unbind(),
        ptr: ptr.cast(),
        len,
    };
    Some((obj.clone(), out))
}

/// An array of `T` and `shape`, not initialised (numpy's `empty`), and its
/// writer: the caller fills every element before Python sees the array,
/// and drops the array unseen when the work fails. (numpy's `zeros` asked
/// calloc for memory that glibc serves from its heap once a block of the
/// size has been freed, and zeroed it first: most of a 2048² call's host
/// time, by a profile on the GPU machine.)
pub fn empty<'py, T: Element>(py: Python<'py>, shape: &[usize]) -> (Bound<'py, PyAny>, Out<T>) {
    // SAFETY: the elements are not read before the caller has written them
    // all (see above).
    let a = unsafe { PyArrayDyn::<T>::new(py, shape.to_vec(), false) };
    let out = Out {
        _owner: a.clone().into_any().unbind(),
        ptr: a.data().cast(),
        len: shape.iter().product(),
    };
    (a.into_any(), out)
}

/// [`empty`] of float32.
pub fn empty_f32<'py>(py: Python<'py>, shape: &[usize]) -> (Bound<'py, PyAny>, OutF32) {
    empty::<f32>(py, shape)
}

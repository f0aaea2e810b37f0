//! In-memory n-d arrays with numpy conventions (C order, numpy dtype names).

use crate::error::{IoError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    Bool,
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
    F32,
    F64,
}

impl DType {
    pub const ALL: [DType; 11] = [
        DType::Bool,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F32,
        DType::F64,
    ];

    /// The dtype of a numpy name (`uint16`, `float32`, ...).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// numpy's name for the dtype.
    pub fn name(&self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }
    pub fn size_bytes(&self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
        }
    }
    pub fn is_float(&self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }
    /// Bool is not an integer type (as in numpy's `np.integer`).
    pub fn is_integer(&self) -> bool {
        !self.is_float() && *self != DType::Bool
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ArrayData {
    Bool(Vec<bool>),
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// Runs `$body` with `$v` bound to the inner Vec, whatever the variant.
macro_rules! with_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            ArrayData::Bool($v) => $body,
            ArrayData::U8($v) => $body,
            ArrayData::U16($v) => $body,
            ArrayData::U32($v) => $body,
            ArrayData::U64($v) => $body,
            ArrayData::I8($v) => $body,
            ArrayData::I16($v) => $body,
            ArrayData::I32($v) => $body,
            ArrayData::I64($v) => $body,
            ArrayData::F32($v) => $body,
            ArrayData::F64($v) => $body,
        }
    };
}
pub(crate) use with_data;

impl ArrayData {
    pub fn dtype(&self) -> DType {
        match self {
            ArrayData::Bool(_) => DType::Bool,
            ArrayData::U8(_) => DType::U8,
            ArrayData::U16(_) => DType::U16,
            ArrayData::U32(_) => DType::U32,
            ArrayData::U64(_) => DType::U64,
            ArrayData::I8(_) => DType::I8,
            ArrayData::I16(_) => DType::I16,
            ArrayData::I32(_) => DType::I32,
            ArrayData::I64(_) => DType::I64,
            ArrayData::F32(_) => DType::F32,
            ArrayData::F64(_) => DType::F64,
        }
    }
    pub fn len(&self) -> usize {
        with_data!(self, v => v.len())
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Summary over the finite values of an array.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// NaN when there is no finite value.
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub n_finite: usize,
}

/// An n-d array in C order (last axis fastest).
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    pub shape: Vec<usize>,
    pub data: ArrayData,
}

/// Product of a shape with overflow detection; `None` when it does not fit a usize.
pub fn checked_product(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

macro_rules! from_ctor {
    ($fn:ident, $t:ty, $var:ident) => {
        pub fn $fn(shape: Vec<usize>, v: Vec<$t>) -> Result<Array> {
            Array::new(shape, ArrayData::$var(v))
        }
    };
}

impl Array {
    pub fn new(shape: Vec<usize>, data: ArrayData) -> Result<Array> {
        let n = checked_product(&shape).ok_or_else(|| {
            IoError::invalid(
                format!("shape {shape:?} has more elements than fit in memory"),
                "use a smaller shape",
            )
        })?;
        if n != data.len() {
            return Err(IoError::invalid(
                format!(
                    "shape {shape:?} needs {n} elements but the data holds {}",
                    data.len()
                ),
                "pass data whose length is the product of the shape",
            ));
        }
        Ok(Array { shape, data })
    }
    from_ctor!(from_bool, bool, Bool);
    from_ctor!(from_u8, u8, U8);
    from_ctor!(from_u16, u16, U16);
    from_ctor!(from_u32, u32, U32);
    from_ctor!(from_u64, u64, U64);
    from_ctor!(from_i8, i8, I8);
    from_ctor!(from_i16, i16, I16);
    from_ctor!(from_i32, i32, I32);
    from_ctor!(from_i64, i64, I64);
    from_ctor!(from_f32, f32, F32);
    from_ctor!(from_f64, f64, F64);

    /// An array of zeros of the given dtype.
    pub fn zeros(shape: Vec<usize>, dtype: DType) -> Result<Array> {
        let n = checked_product(&shape).ok_or_else(|| {
            IoError::invalid(
                format!("shape {shape:?} is too large"),
                "use a smaller shape",
            )
        })?;
        Array::new(shape, zero_data(dtype, n))
    }

    /// Check that the shape matches the data (the fields are public, so an
    /// array may have been built without [`Array::new`]); writers call this.
    pub fn validate(&self) -> Result<()> {
        match checked_product(&self.shape) {
            Some(n) if n == self.data.len() => Ok(()),
            _ => Err(IoError::invalid(
                format!(
                    "array shape {:?} does not match its {} data elements",
                    self.shape,
                    self.data.len()
                ),
                "build arrays with Array::new",
            )),
        }
    }

    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }
    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    pub fn to_f32_vec(&self) -> Vec<f32> {
        with_data!(&self.data, v => v.iter().map(|&x| Elem::to_f32(x)).collect())
    }
    pub fn to_f64_vec(&self) -> Vec<f64> {
        with_data!(&self.data, v => v.iter().map(|&x| Elem::to_f64(x)).collect())
    }

    /// numpy `astype` for in-range values. Float to int truncates toward zero,
    /// saturates out of range and maps NaN to 0 (numpy leaves those undefined);
    /// to bool is `value != 0` (NaN is true, as in numpy).
    pub fn cast(&self, to: DType) -> Array {
        let data = with_data!(&self.data, v => cast_slice(v, to));
        Array {
            shape: self.shape.clone(),
            data,
        }
    }

    pub fn stats(&self) -> Stats {
        let mut min = f64::INFINITY;
        let mut max = f64::NEG_INFINITY;
        let mut sum = 0.0f64;
        let mut n = 0usize;
        with_data!(&self.data, v => {
            for &x in v.iter() {
                let x = Elem::to_f64(x);
                if x.is_finite() {
                    min = min.min(x);
                    max = max.max(x);
                    sum += x;
                    n += 1;
                }
            }
        });
        if n == 0 {
            return Stats {
                min: f64::NAN,
                max: f64::NAN,
                mean: f64::NAN,
                n_finite: 0,
            };
        }
        Stats {
            min,
            max,
            mean: sum / n as f64,
            n_finite: n,
        }
    }
}

pub(crate) fn zero_data(dtype: DType, n: usize) -> ArrayData {
    match dtype {
        DType::Bool => ArrayData::Bool(vec![false; n]),
        DType::U8 => ArrayData::U8(vec![0; n]),
        DType::U16 => ArrayData::U16(vec![0; n]),
        DType::U32 => ArrayData::U32(vec![0; n]),
        DType::U64 => ArrayData::U64(vec![0; n]),
        DType::I8 => ArrayData::I8(vec![0; n]),
        DType::I16 => ArrayData::I16(vec![0; n]),
        DType::I32 => ArrayData::I32(vec![0; n]),
        DType::I64 => ArrayData::I64(vec![0; n]),
        DType::F32 => ArrayData::F32(vec![0.0; n]),
        DType::F64 => ArrayData::F64(vec![0.0; n]),
    }
}

/// A scalar element type of [`ArrayData`].
pub(crate) trait Elem: Copy {
    fn to_f64(self) -> f64;
    fn to_f32(self) -> f32;
    /// Exact integer value (bool as 0/1); `None` for floats.
    fn to_i128(self) -> Option<i128>;
    fn is_nonzero(self) -> bool;
}

macro_rules! elem_int {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            fn to_f64(self) -> f64 { self as f64 }
            fn to_f32(self) -> f32 { self as f32 }
            fn to_i128(self) -> Option<i128> { Some(self as i128) }
            fn is_nonzero(self) -> bool { self != 0 }
        }
    )*};
}
elem_int!(u8, u16, u32, u64, i8, i16, i32, i64);

impl Elem for bool {
    fn to_f64(self) -> f64 {
        u8::from(self) as f64
    }
    fn to_f32(self) -> f32 {
        u8::from(self) as f32
    }
    fn to_i128(self) -> Option<i128> {
        Some(i128::from(self))
    }
    fn is_nonzero(self) -> bool {
        self
    }
}
impl Elem for f32 {
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn to_f32(self) -> f32 {
        self
    }
    fn to_i128(self) -> Option<i128> {
        None
    }
    fn is_nonzero(self) -> bool {
        self != 0.0
    }
}
impl Elem for f64 {
    fn to_f64(self) -> f64 {
        self
    }
    fn to_f32(self) -> f32 {
        self as f32
    }
    fn to_i128(self) -> Option<i128> {
        None
    }
    fn is_nonzero(self) -> bool {
        self != 0.0
    }
}

/// Integer targets: saturating from exact integers; Rust's float `as` casts
/// already truncate toward zero, saturate and send NaN to 0.
macro_rules! int_target {
    ($v:expr, $t:ty) => {
        $v.iter()
            .map(|&x| match Elem::to_i128(x) {
                Some(i) => i.clamp(<$t>::MIN as i128, <$t>::MAX as i128) as $t,
                None => Elem::to_f64(x) as $t,
            })
            .collect()
    };
}

fn cast_slice<S: Elem>(v: &[S], to: DType) -> ArrayData {
    match to {
        DType::Bool => ArrayData::Bool(v.iter().map(|&x| x.is_nonzero()).collect()),
        DType::U8 => ArrayData::U8(int_target!(v, u8)),
        DType::U16 => ArrayData::U16(int_target!(v, u16)),
        DType::U32 => ArrayData::U32(int_target!(v, u32)),
        DType::U64 => ArrayData::U64(int_target!(v, u64)),
        DType::I8 => ArrayData::I8(int_target!(v, i8)),
        DType::I16 => ArrayData::I16(int_target!(v, i16)),
        DType::I32 => ArrayData::I32(int_target!(v, i32)),
        DType::I64 => ArrayData::I64(int_target!(v, i64)),
        // Integer sources convert straight to f32 (one rounding, as numpy does).
        DType::F32 => ArrayData::F32(
            v.iter()
                .map(|&x| match Elem::to_i128(x) {
                    Some(i) => i as f32,
                    None => x.to_f32(),
                })
                .collect(),
        ),
        DType::F64 => ArrayData::F64(v.iter().map(|&x| x.to_f64()).collect()),
    }
}

//! Typed sample slices and their ordered integer keys.
//!
//! WGSL has no f64, u64 or 16-bit types. Mapping every value to an unsigned
//! key with the same order (NaN below everything) lets kernels compare and
//! select exactly, whatever the dtype, without converting to f32.

/// A borrowed array of samples of one numeric dtype.
#[derive(Clone, Copy, Debug)]
pub enum Samples<'a> {
    U8(&'a [u8]),
    I8(&'a [i8]),
    U16(&'a [u16]),
    I16(&'a [i16]),
    U32(&'a [u32]),
    I32(&'a [i32]),
    F32(&'a [f32]),
    U64(&'a [u64]),
    I64(&'a [i64]),
    F64(&'a [f64]),
}

/// Ordered keys: 32-bit for dtypes up to 32 bits, 64-bit otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Keys {
    K32(Vec<u32>),
    K64(Vec<u64>),
}

impl Samples<'_> {
    pub fn len(&self) -> usize {
        match self {
            Samples::U8(v) => v.len(),
            Samples::I8(v) => v.len(),
            Samples::U16(v) => v.len(),
            Samples::I16(v) => v.len(),
            Samples::U32(v) => v.len(),
            Samples::I32(v) => v.len(),
            Samples::F32(v) => v.len(),
            Samples::U64(v) => v.len(),
            Samples::I64(v) => v.len(),
            Samples::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ordered keys of a sub-range of the samples.
    pub fn keys(&self, range: std::ops::Range<usize>) -> Keys {
        let r = range;
        match self {
            Samples::U8(v) => Keys::K32(v[r].iter().map(|&x| u32::from(x)).collect()),
            Samples::U16(v) => Keys::K32(v[r].iter().map(|&x| u32::from(x)).collect()),
            Samples::U32(v) => Keys::K32(v[r].to_vec()),
            Samples::I8(v) => Keys::K32(v[r].iter().map(|&x| key_i32(i32::from(x))).collect()),
            Samples::I16(v) => Keys::K32(v[r].iter().map(|&x| key_i32(i32::from(x))).collect()),
            Samples::I32(v) => Keys::K32(v[r].iter().map(|&x| key_i32(x)).collect()),
            Samples::F32(v) => Keys::K32(v[r].iter().map(|&x| key_f32(x)).collect()),
            Samples::U64(v) => Keys::K64(v[r].to_vec()),
            Samples::I64(v) => Keys::K64(v[r].iter().map(|&x| (x as u64) ^ (1 << 63)).collect()),
            Samples::F64(v) => Keys::K64(v[r].iter().map(|&x| key_f64(x)).collect()),
        }
    }

    /// The smallest key of a value strictly greater than `value`, or `None`
    /// when no value of this dtype is (so `x > value` is false everywhere).
    /// `value` must not be NaN.
    pub fn key_above(&self, value: f64) -> Option<u64> {
        let int = |lo: f64, hi: f64, key: &dyn Fn(i128) -> u64| -> Option<u64> {
            if value >= hi {
                None
            } else if value < lo {
                Some(key(lo as i128))
            } else {
                Some(key(value.floor() as i128 + 1))
            }
        };
        match self {
            Samples::U8(_) => int(0.0, 255.0, &|x| x as u64),
            Samples::U16(_) => int(0.0, 65535.0, &|x| x as u64),
            Samples::U32(_) => int(0.0, u32::MAX as f64, &|x| x as u64),
            Samples::I8(_) => int(-128.0, 127.0, &|x| u64::from(key_i32(x as i32))),
            Samples::I16(_) => int(-32768.0, 32767.0, &|x| u64::from(key_i32(x as i32))),
            Samples::I32(_) => int(i32::MIN as f64, i32::MAX as f64, &|x| {
                u64::from(key_i32(x as i32))
            }),
            // Limits as f64 round up to 2^64 and 2^63: values at or above them
            // exceed every representable sample.
            Samples::U64(_) => int(0.0, u64::MAX as f64, &|x| x as u64),
            Samples::I64(_) => int(i64::MIN as f64, i64::MAX as f64, &|x| {
                (x as i64 as u64) ^ (1 << 63)
            }),
            Samples::F32(_) => {
                let mut t = value as f32;
                if f64::from(t) <= value {
                    t = t.next_up();
                }
                (t.is_finite() || t == f32::INFINITY && value < f64::INFINITY)
                    .then(|| u64::from(key_f32(t)))
            }
            Samples::F64(_) => {
                let t = value.next_up();
                (value < f64::INFINITY).then(|| key_f64(t))
            }
        }
    }
}

/// An owned array of samples of one numeric dtype (an operation's output in
/// the input's dtype).
#[derive(Clone, Debug, PartialEq)]
pub enum SampleVec {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl SampleVec {
    pub fn as_samples(&self) -> Samples<'_> {
        match self {
            SampleVec::U8(v) => Samples::U8(v),
            SampleVec::I8(v) => Samples::I8(v),
            SampleVec::U16(v) => Samples::U16(v),
            SampleVec::I16(v) => Samples::I16(v),
            SampleVec::U32(v) => Samples::U32(v),
            SampleVec::I32(v) => Samples::I32(v),
            SampleVec::F32(v) => Samples::F32(v),
            SampleVec::U64(v) => Samples::U64(v),
            SampleVec::I64(v) => Samples::I64(v),
            SampleVec::F64(v) => Samples::F64(v),
        }
    }

    /// Copies `other` into this array, which must have its dtype and length.
    pub fn copy_from(&mut self, other: &SampleVec) -> crate::Result<()> {
        fn copy<T: Copy>(dst: &mut [T], src: &[T]) -> bool {
            let same = dst.len() == src.len();
            if same {
                dst.copy_from_slice(src);
            }
            same
        }
        let copied = match (&mut *self, other) {
            (SampleVec::U8(d), SampleVec::U8(s)) => copy(d, s),
            (SampleVec::I8(d), SampleVec::I8(s)) => copy(d, s),
            (SampleVec::U16(d), SampleVec::U16(s)) => copy(d, s),
            (SampleVec::I16(d), SampleVec::I16(s)) => copy(d, s),
            (SampleVec::U32(d), SampleVec::U32(s)) => copy(d, s),
            (SampleVec::I32(d), SampleVec::I32(s)) => copy(d, s),
            (SampleVec::F32(d), SampleVec::F32(s)) => copy(d, s),
            (SampleVec::U64(d), SampleVec::U64(s)) => copy(d, s),
            (SampleVec::I64(d), SampleVec::I64(s)) => copy(d, s),
            (SampleVec::F64(d), SampleVec::F64(s)) => copy(d, s),
            _ => false,
        };
        if copied {
            return Ok(());
        }
        let (to, from) = (self.as_samples(), other.as_samples());
        Err(crate::Error::InvalidInput(format!(
            "{} {} values cannot be copied into an array of {} {} values",
            from.len(),
            from.dtype_name(),
            to.len(),
            to.dtype_name()
        )))
    }
}

impl Samples<'_> {
    /// True for dtypes whose keys take 64 bits.
    pub fn wide(&self) -> bool {
        matches!(self, Samples::U64(_) | Samples::I64(_) | Samples::F64(_))
    }

    /// True for floating-point dtypes (NaN possible).
    pub fn is_float(&self) -> bool {
        matches!(self, Samples::F32(_) | Samples::F64(_))
    }

    /// The numpy name of the dtype.
    pub fn dtype_name(&self) -> &'static str {
        match self {
            Samples::U8(_) => "uint8",
            Samples::I8(_) => "int8",
            Samples::U16(_) => "uint16",
            Samples::I16(_) => "int16",
            Samples::U32(_) => "uint32",
            Samples::I32(_) => "int32",
            Samples::F32(_) => "float32",
            Samples::U64(_) => "uint64",
            Samples::I64(_) => "int64",
            Samples::F64(_) => "float64",
        }
    }

    /// The key of `value` converted into this dtype by a monotone map (floats
    /// rounded to nearest, integers truncated toward zero), so that selecting
    /// among converted values equals converting the selection of the raw
    /// values, as scipy's final cast does. NaN is `None` for float dtypes
    /// (the caller decides); out-of-range integers are an error.
    pub fn key_of_value(&self, value: f64) -> Result<Option<u64>, String> {
        let int = |lo: f64, hi: f64, key: &dyn Fn(i128) -> u64| -> Result<Option<u64>, String> {
            let t = value.trunc();
            if value.is_nan() || t < lo || t > hi {
                return Err(format!(
                    "{value} is not representable in {} (give a value in [{lo}, {hi}])",
                    self.dtype_name()
                ));
            }
            Ok(Some(key(t as i128)))
        };
        match self {
            Samples::U8(_) => int(0.0, 255.0, &|x| x as u64),
            Samples::U16(_) => int(0.0, 65535.0, &|x| x as u64),
            Samples::U32(_) => int(0.0, u32::MAX as f64, &|x| x as u64),
            Samples::I8(_) => int(-128.0, 127.0, &|x| u64::from(key_i32(x as i32))),
            Samples::I16(_) => int(-32768.0, 32767.0, &|x| u64::from(key_i32(x as i32))),
            Samples::I32(_) => int(i32::MIN as f64, i32::MAX as f64, &|x| {
                u64::from(key_i32(x as i32))
            }),
            Samples::U64(_) => int(0.0, 18446744073709549568.0, &|x| x as u64),
            Samples::I64(_) => int(i64::MIN as f64, 9223372036854774784.0, &|x| {
                (x as i64 as u64) ^ (1 << 63)
            }),
            Samples::F32(_) => Ok((!value.is_nan()).then(|| u64::from(key_f32(value as f32)))),
            Samples::F64(_) => Ok((!value.is_nan()).then(|| key_f64(value))),
        }
    }

    /// Samples of this dtype from their keys (the inverse of [`Samples::keys`]).
    pub fn from_keys(&self, keys: Keys) -> SampleVec {
        let k32 = |k: Keys| match k {
            Keys::K32(v) => v,
            Keys::K64(v) => v.into_iter().map(|x| x as u32).collect(),
        };
        let k64 = |k: Keys| match k {
            Keys::K64(v) => v,
            Keys::K32(v) => v.into_iter().map(u64::from).collect(),
        };
        match self {
            Samples::U8(_) => SampleVec::U8(k32(keys).into_iter().map(|k| k as u8).collect()),
            Samples::U16(_) => SampleVec::U16(k32(keys).into_iter().map(|k| k as u16).collect()),
            Samples::U32(_) => SampleVec::U32(k32(keys)),
            Samples::I8(_) => {
                SampleVec::I8(k32(keys).into_iter().map(|k| unkey_i32(k) as i8).collect())
            }
            Samples::I16(_) => {
                SampleVec::I16(k32(keys).into_iter().map(|k| unkey_i32(k) as i16).collect())
            }
            Samples::I32(_) => SampleVec::I32(k32(keys).into_iter().map(unkey_i32).collect()),
            Samples::F32(_) => SampleVec::F32(k32(keys).into_iter().map(unkey_f32).collect()),
            Samples::U64(_) => SampleVec::U64(k64(keys)),
            Samples::I64(_) => SampleVec::I64(
                k64(keys)
                    .into_iter()
                    .map(|k| (k ^ (1 << 63)) as i64)
                    .collect(),
            ),
            Samples::F64(_) => SampleVec::F64(k64(keys).into_iter().map(unkey_f64).collect()),
        }
    }
}

/// Key of f32 -inf: where the median selects NaN (Mantid Imaging's choice).
pub const NEG_INF_KEY_F32: u32 = 0x007f_ffff;
/// Key of f64 -inf.
pub const NEG_INF_KEY_F64: u64 = 0x000f_ffff_ffff_ffff;

fn unkey_i32(k: u32) -> i32 {
    (k ^ 0x8000_0000) as i32
}

/// Inverse of `key_f32`; key 0 gives NaN.
pub fn unkey_f32(k: u32) -> f32 {
    if k == 0 {
        return f32::NAN;
    }
    if k & 0x8000_0000 != 0 {
        f32::from_bits(k & 0x7fff_ffff)
    } else {
        f32::from_bits(!k)
    }
}

/// Inverse of `key_f64`; key 0 gives NaN.
pub fn unkey_f64(k: u64) -> f64 {
    if k == 0 {
        return f64::NAN;
    }
    if k >> 63 != 0 {
        f64::from_bits(k & !(1 << 63))
    } else {
        f64::from_bits(!k)
    }
}

fn key_i32(x: i32) -> u32 {
    (x as u32) ^ 0x8000_0000
}

pub fn key_f32(x: f32) -> u32 {
    if x.is_nan() {
        return 0;
    }
    let b = x.to_bits();
    if b & 0x8000_0000 != 0 {
        !b
    } else {
        b | 0x8000_0000
    }
}

pub fn key_f64(x: f64) -> u64 {
    if x.is_nan() {
        return 0;
    }
    let b = x.to_bits();
    if b >> 63 != 0 { !b } else { b | (1 << 63) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_keys_follow_numeric_order_with_nan_lowest() {
        let v = [
            f32::NAN,
            f32::NEG_INFINITY,
            -1e30,
            -1.0,
            -1e-45,
            -0.0,
            0.0,
            1e-45,
            2.5,
            f32::INFINITY,
        ];
        let Keys::K32(k) = Samples::F32(&v).keys(0..v.len()) else {
            panic!("32-bit keys expected")
        };
        assert!(k.windows(2).all(|w| w[0] <= w[1]), "{k:?}");
        assert_eq!(k[0], 0);
    }

    #[test]
    fn keys_round_trip_for_every_dtype() {
        let f = [
            f32::NEG_INFINITY,
            -2.5,
            -0.0,
            0.0,
            1e-45,
            7.0,
            f32::INFINITY,
        ];
        let s = Samples::F32(&f);
        assert_eq!(s.from_keys(s.keys(0..f.len())), SampleVec::F32(f.to_vec()));
        let d = [f64::MIN, -1.0, 0.0, 3.25, f64::MAX];
        let s = Samples::F64(&d);
        assert_eq!(s.from_keys(s.keys(0..d.len())), SampleVec::F64(d.to_vec()));
        let i = [i16::MIN, -1, 0, 1, i16::MAX];
        let s = Samples::I16(&i);
        assert_eq!(s.from_keys(s.keys(0..i.len())), SampleVec::I16(i.to_vec()));
        let i = [i64::MIN, -1, 0, i64::MAX];
        let s = Samples::I64(&i);
        assert_eq!(s.from_keys(s.keys(0..i.len())), SampleVec::I64(i.to_vec()));
        assert!(unkey_f32(0).is_nan() && unkey_f64(0).is_nan());
        assert_eq!(unkey_f32(NEG_INF_KEY_F32), f32::NEG_INFINITY);
        assert_eq!(unkey_f64(NEG_INF_KEY_F64), f64::NEG_INFINITY);
    }

    #[test]
    fn values_convert_into_the_dtype_monotonically() {
        assert_eq!(Samples::U8(&[]).key_of_value(2.9), Ok(Some(2)));
        assert!(Samples::U8(&[]).key_of_value(-1.0).is_err());
        assert!(Samples::U8(&[]).key_of_value(256.0).is_err());
        assert_eq!(Samples::U8(&[]).key_of_value(-0.5), Ok(Some(0)));
        assert_eq!(Samples::F32(&[]).key_of_value(f64::NAN), Ok(None));
        assert_eq!(
            Samples::I32(&[]).key_of_value(-1.5),
            Ok(Some(u64::from(key_i32(-1))))
        );
    }

    #[test]
    fn key_above_is_exact_for_every_dtype() {
        let f = [1.0f32, 1.0000001, 0.5];
        let t = Samples::F32(&f).key_above(1.0).unwrap() as u32;
        let Keys::K32(k) = Samples::F32(&f).keys(0..3) else {
            panic!()
        };
        assert_eq!(
            k.iter().map(|&k| k >= t).collect::<Vec<_>>(),
            [false, true, false]
        );
        assert_eq!(Samples::U8(&[]).key_above(254.5), Some(255));
        assert_eq!(Samples::U8(&[]).key_above(255.0), None);
        assert_eq!(Samples::U8(&[]).key_above(-3.0), Some(0));
        assert_eq!(
            Samples::I16(&[]).key_above(-1.5),
            Some(u64::from(key_i32(-1)))
        );
        assert_eq!(Samples::F64(&[]).key_above(f64::INFINITY), None);
        assert!(Samples::F64(&[]).key_above(f64::NEG_INFINITY).unwrap() > 0);
        assert_eq!(Samples::F32(&[]).key_above(f64::INFINITY), None);
        assert_eq!(
            Samples::F32(&[]).key_above(1e300),
            Some(u64::from(key_f32(f32::INFINITY)))
        );
    }
}

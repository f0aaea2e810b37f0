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

fn key_i32(x: i32) -> u32 {
    (x as u32) ^ 0x8000_0000
}

fn key_f32(x: f32) -> u32 {
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

fn key_f64(x: f64) -> u64 {
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

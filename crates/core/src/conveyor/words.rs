//! The words a kernel reads, made from samples as stored and back, on
//! several threads at once, inside the one copy the conveyor makes anyway
//! (never a separate single-threaded pass over the host array).
//!
//! Three codecs: the median's 32-bit words (ordered keys; float32 as its
//! raw bits, keyed in the kernel), its 64-bit keys (64-bit dtypes), and
//! float32 values (convolution and the other float kernels). Each is
//! exactly the in-memory road's conversion ([`Samples::keys`],
//! [`Samples::from_keys`], numpy's `astype`).

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};
use crate::keys::{SampleVec, Samples, key_f32, key_f64, unkey_f64};

/// How samples become a kernel's words (`load`) and words become samples
/// of an output dtype (`store`, into `spare`'s memory where it fits).
pub struct Codec<W> {
    pub load: fn(&SampleVec, &mut [W]) -> Result<()>,
    pub store: fn(Samples<'static>, &[W], Option<SampleVec>) -> Result<SampleVec>,
}

/// Median and outlier words of dtypes up to 32 bits.
pub const MEDIAN32: Codec<u32> = Codec {
    load: load_median32,
    store: store_median32,
};

/// Median keys of 64-bit dtypes.
pub const MEDIAN64: Codec<u64> = Codec {
    load: load_median64,
    store: store_median64,
};

/// float32 values.
pub const VALUES32: Codec<f32> = Codec {
    load: load_f32,
    store: store_f32,
};

/// Threads for a conversion of `n` elements: one per 1 Mi elements, at most
/// the host's cores (16 at most).
fn threads(n: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get().min(16));
    (n >> 20).clamp(1, cores)
}

/// `dst[i] = f(src[i])` on several threads.
pub(crate) fn par_map<S: Copy + Sync, D: Send>(
    src: &[S],
    dst: &mut [D],
    f: impl Fn(S) -> D + Sync,
) {
    let n = src.len().min(dst.len());
    let t = threads(n);
    let each = |d: &mut [D], s: &[S]| {
        for (d, &s) in d.iter_mut().zip(s) {
            *d = f(s);
        }
    };
    if t <= 1 {
        each(&mut dst[..n], &src[..n]);
        return;
    }
    let per = n.div_ceil(t);
    std::thread::scope(|scope| {
        for (d, s) in dst[..n].chunks_mut(per).zip(src[..n].chunks(per)) {
            let each = &each;
            scope.spawn(move || each(d, s));
        }
    });
}

fn length(src: usize, dst: usize) -> Result<()> {
    if src != dst {
        return Err(Error::InvalidInput(format!(
            "a block of {src} samples for {dst} words (an internal error of gpuscope; please report it)"
        )));
    }
    Ok(())
}

fn key_i32(x: i32) -> u32 {
    (x as u32) ^ 0x8000_0000
}

fn unkey_i32(k: u32) -> i32 {
    (k ^ 0x8000_0000) as i32
}

fn load_median32(s: &SampleVec, out: &mut [u32]) -> Result<()> {
    length(s.as_samples().len(), out.len())?;
    match s {
        SampleVec::U8(v) => par_map(v, out, u32::from),
        SampleVec::U16(v) => par_map(v, out, u32::from),
        SampleVec::U32(v) => par_map(v, out, |x| x),
        SampleVec::I8(v) => par_map(v, out, |x| key_i32(i32::from(x))),
        SampleVec::I16(v) => par_map(v, out, |x| key_i32(i32::from(x))),
        SampleVec::I32(v) => par_map(v, out, key_i32),
        // The kernel keys float32 bits itself.
        SampleVec::F32(v) => par_map(v, out, f32::to_bits),
        SampleVec::U64(_) | SampleVec::I64(_) | SampleVec::F64(_) => {
            return Err(Error::InvalidInput(
                "64-bit samples where 32-bit keys were expected".into(),
            ));
        }
    }
    Ok(())
}

/// `n` samples of `tag`'s dtype in `spare`'s memory where it is of that
/// dtype, every one written by `fill`.
macro_rules! refill {
    ($spare:expr, $variant:ident, $t:ty, $n:expr, $fill:expr) => {{
        let mut v: Vec<$t> = match $spare {
            Some(SampleVec::$variant(v)) => v,
            _ => Vec::new(),
        };
        v.resize($n, <$t>::zeroed());
        $fill(&mut v[..]);
        SampleVec::$variant(v)
    }};
}

fn store_median32(tag: Samples<'static>, w: &[u32], spare: Option<SampleVec>) -> Result<SampleVec> {
    let n = w.len();
    Ok(match tag {
        Samples::U8(_) => refill!(spare, U8, u8, n, |d: &mut [u8]| par_map(w, d, |k| k as u8)),
        Samples::U16(_) => {
            refill!(spare, U16, u16, n, |d: &mut [u16]| par_map(w, d, |k| k
                as u16))
        }
        Samples::U32(_) => refill!(spare, U32, u32, n, |d: &mut [u32]| par_map(w, d, |k| k)),
        Samples::I8(_) => refill!(spare, I8, i8, n, |d: &mut [i8]| par_map(w, d, |k| {
            unkey_i32(k) as i8
        })),
        Samples::I16(_) => refill!(spare, I16, i16, n, |d: &mut [i16]| par_map(w, d, |k| {
            unkey_i32(k) as i16
        })),
        Samples::I32(_) => refill!(spare, I32, i32, n, |d: &mut [i32]| par_map(w, d, unkey_i32)),
        Samples::F32(_) => {
            refill!(spare, F32, f32, n, |d: &mut [f32]| par_map(
                w,
                d,
                f32::from_bits
            ))
        }
        Samples::U64(_) | Samples::I64(_) | Samples::F64(_) => {
            return Err(Error::InvalidInput(
                "32-bit keys where 64-bit samples were expected".into(),
            ));
        }
    })
}

fn load_median64(s: &SampleVec, out: &mut [u64]) -> Result<()> {
    length(s.as_samples().len(), out.len())?;
    match s {
        SampleVec::U64(v) => par_map(v, out, |x| x),
        SampleVec::I64(v) => par_map(v, out, |x| (x as u64) ^ (1 << 63)),
        SampleVec::F64(v) => par_map(v, out, key_f64),
        // Narrower dtypes: their 32-bit keys, widened.
        SampleVec::U8(v) => par_map(v, out, u64::from),
        SampleVec::U16(v) => par_map(v, out, u64::from),
        SampleVec::U32(v) => par_map(v, out, u64::from),
        SampleVec::I8(v) => par_map(v, out, |x| u64::from(key_i32(i32::from(x)))),
        SampleVec::I16(v) => par_map(v, out, |x| u64::from(key_i32(i32::from(x)))),
        SampleVec::I32(v) => par_map(v, out, |x| u64::from(key_i32(x))),
        SampleVec::F32(v) => par_map(v, out, |x| u64::from(key_f32(x))),
    }
    Ok(())
}

fn store_median64(tag: Samples<'static>, w: &[u64], spare: Option<SampleVec>) -> Result<SampleVec> {
    let n = w.len();
    Ok(match tag {
        Samples::U64(_) => refill!(spare, U64, u64, n, |d: &mut [u64]| par_map(w, d, |k| k)),
        Samples::I64(_) => refill!(spare, I64, i64, n, |d: &mut [i64]| par_map(w, d, |k| {
            (k ^ (1 << 63)) as i64
        })),
        Samples::F64(_) => refill!(spare, F64, f64, n, |d: &mut [f64]| par_map(w, d, unkey_f64)),
        // Narrower dtypes: as the in-memory road's `from_keys` (truncated keys).
        other => {
            let k: Vec<u32> = w.iter().map(|&k| k as u32).collect();
            other.from_keys(crate::keys::Keys::K32(k))
        }
    })
}

fn load_f32(s: &SampleVec, out: &mut [f32]) -> Result<()> {
    length(s.as_samples().len(), out.len())?;
    match s {
        SampleVec::U8(v) => par_map(v, out, f32::from),
        SampleVec::I8(v) => par_map(v, out, f32::from),
        SampleVec::U16(v) => par_map(v, out, f32::from),
        SampleVec::I16(v) => par_map(v, out, f32::from),
        SampleVec::U32(v) => par_map(v, out, |x| x as f32),
        SampleVec::I32(v) => par_map(v, out, |x| x as f32),
        SampleVec::F32(v) => par_map(v, out, |x| x),
        SampleVec::U64(v) => par_map(v, out, |x| x as f32),
        SampleVec::I64(v) => par_map(v, out, |x| x as f32),
        SampleVec::F64(v) => par_map(v, out, |x| x as f32),
    }
    Ok(())
}

/// numpy's `astype` from float32 as the in-memory road casts: float to
/// integer truncates toward zero, saturates, and maps NaN to 0 (Rust's `as`).
fn store_f32(tag: Samples<'static>, w: &[f32], spare: Option<SampleVec>) -> Result<SampleVec> {
    let n = w.len();
    Ok(match tag {
        Samples::U8(_) => refill!(spare, U8, u8, n, |d: &mut [u8]| par_map(w, d, |x| x as u8)),
        Samples::I8(_) => refill!(spare, I8, i8, n, |d: &mut [i8]| par_map(w, d, |x| x as i8)),
        Samples::U16(_) => {
            refill!(spare, U16, u16, n, |d: &mut [u16]| par_map(w, d, |x| x
                as u16))
        }
        Samples::I16(_) => {
            refill!(spare, I16, i16, n, |d: &mut [i16]| par_map(w, d, |x| x
                as i16))
        }
        Samples::U32(_) => {
            refill!(spare, U32, u32, n, |d: &mut [u32]| par_map(w, d, |x| x
                as u32))
        }
        Samples::I32(_) => {
            refill!(spare, I32, i32, n, |d: &mut [i32]| par_map(w, d, |x| x
                as i32))
        }
        Samples::F32(_) => refill!(spare, F32, f32, n, |d: &mut [f32]| par_map(w, d, |x| x)),
        Samples::U64(_) => {
            refill!(spare, U64, u64, n, |d: &mut [u64]| par_map(w, d, |x| x
                as u64))
        }
        Samples::I64(_) => {
            refill!(spare, I64, i64, n, |d: &mut [i64]| par_map(w, d, |x| x
                as i64))
        }
        Samples::F64(_) => {
            refill!(spare, F64, f64, n, |d: &mut [f64]| par_map(w, d, f64::from))
        }
    })
}

/// Fresh words of `n` (every one written before it is read).
pub(crate) fn words<W: Pod>(spare: Option<Vec<W>>, n: usize) -> Vec<W> {
    match spare {
        Some(mut v) => {
            v.resize(n, W::zeroed());
            v
        }
        None => crate::copies::zeroed_output(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each codec is the in-memory road's conversion, both ways.
    #[test]
    fn codecs_match_the_in_memory_conversions() {
        let n = 3 << 20; // several threads
        let i16s: Vec<i16> = (0..n)
            .map(|i| (i as i64 * 7919 % 65536 - 32768) as i16)
            .collect();
        let s = SampleVec::I16(i16s.clone());
        let mut k = vec![0u32; n];
        load_median32(&s, &mut k).unwrap();
        let crate::keys::Keys::K32(expected) = Samples::I16(&i16s).keys(0..n) else {
            panic!("32-bit keys expected");
        };
        assert_eq!(k, expected);
        let back = store_median32(Samples::I16(&[]), &k, None).unwrap();
        assert!(matches!(back, SampleVec::I16(v) if v == i16s));

        let f: Vec<f32> = (0..n).map(|i| (i as f32 - 1e6) * 0.37).collect();
        let back = store_f32(Samples::I16(&[]), &f, Some(SampleVec::I16(vec![1; 5]))).unwrap();
        let SampleVec::I16(v) = back else {
            panic!("int16 expected");
        };
        assert!(v.iter().zip(&f).all(|(&a, &x)| a == x as i16));
        assert_eq!(v.len(), n);
    }
}

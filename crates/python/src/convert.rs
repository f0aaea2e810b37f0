//! Element-wise conversions between numpy buffers and what the GPU paths
//! stream (float32 values, ordered keys), split over threads for large
//! arrays: one core converting a 2048² stack is slower than the bus.

use std::mem::MaybeUninit;

use bytemuck::Pod;
use gpuscope_core::keys::{Samples, key_f64, unkey_f64};

/// Arrays from this many elements are converted on several threads; a
/// thread's start costs more than converting a smaller one.
const PARALLEL_FROM: usize = 1 << 18;

/// Threads for a conversion of `n` elements while nothing else runs on
/// the host (`busy`: besides the stream's upload threads).
pub fn threads_for(n: usize, busy: bool) -> usize {
    if n < PARALLEL_FROM {
        return 1;
    }
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let all = cores.min(16);
    // The stream writes the next chunk's upload on 4 threads meanwhile.
    if busy {
        all.saturating_sub(4).max(1)
    } else {
        all
    }
}

/// `fill(offset, part)` for consecutive parts of `dst` (each written
/// whole), on up to `threads` threads.
pub fn for_parts<D: Send>(
    dst: &mut [MaybeUninit<D>],
    threads: usize,
    fill: impl Fn(usize, &mut [MaybeUninit<D>]) + Sync,
) {
    if threads <= 1 || dst.len() < 2 * 4096 {
        fill(0, dst);
        return;
    }
    let per = dst.len().div_ceil(threads).next_multiple_of(1024);
    // The parts wait in a queue that the calling thread and its helpers
    // empty: where a helper cannot start, the others do its share.
    let parts = std::sync::Mutex::new(dst.chunks_mut(per).enumerate());
    let work = || {
        loop {
            let next = parts.lock().map(|mut p| p.next()).unwrap_or(None);
            match next {
                Some((k, d)) => fill(k * per, d),
                None => break,
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            if std::thread::Builder::new()
                .spawn_scoped(scope, work)
                .is_err()
            {
                break;
            }
        }
        work();
    });
}

/// `dst[i] = f(src[i])` for every element, on up to `threads` threads;
/// every element of `dst` is written (the lengths must be equal).
pub fn map_into<S: Copy + Sync, D: Send>(
    src: &[S],
    dst: &mut [MaybeUninit<D>],
    threads: usize,
    f: impl Fn(S) -> D + Sync,
) {
    debug_assert_eq!(src.len(), dst.len());
    for_parts(dst, threads, |offset, part| {
        let s = &src[offset..offset + part.len()];
        for (d, &s) in part.iter_mut().zip(s) {
            d.write(f(s));
        }
    });
}

/// A vector of `f(x)` for every element of `src`, converted on threads.
pub fn map_vec<S: Copy + Sync, D: Send>(
    src: &[S],
    threads: usize,
    f: impl Fn(S) -> D + Sync,
) -> Vec<D> {
    let mut v = Vec::with_capacity(src.len());
    map_into(src, &mut v.spare_capacity_mut()[..src.len()], threads, f);
    // SAFETY: `map_into` wrote every one of the `src.len()` elements.
    unsafe { v.set_len(src.len()) };
    v
}

/// A dtype the median selects on as ordered keys (`keys.rs` in the core:
/// the same maps), converted on the host.
pub trait Keyed: Copy + Send + Sync + numpy::Element + 'static {
    /// u32 for dtypes up to 32 bits, u64 for 64-bit ones.
    type Word: Pod + Send + Sync;
    fn key(self) -> Self::Word;
    fn unkey(k: Self::Word) -> Self;
    /// The slice as the core's typed samples.
    fn samples(v: &[Self]) -> Samples<'_>;
}

macro_rules! keyed_unsigned {
    ($t:ty, $w:ty, $variant:ident) => {
        impl Keyed for $t {
            type Word = $w;
            fn key(self) -> $w {
                <$w>::from(self)
            }
            fn unkey(k: $w) -> $t {
                k as $t
            }
            fn samples(v: &[$t]) -> Samples<'_> {
                Samples::$variant(v)
            }
        }
    };
}
keyed_unsigned!(u8, u32, U8);
keyed_unsigned!(u16, u32, U16);
keyed_unsigned!(u32, u32, U32);
keyed_unsigned!(u64, u64, U64);

macro_rules! keyed_signed {
    ($t:ty, $variant:ident) => {
        impl Keyed for $t {
            type Word = u32;
            fn key(self) -> u32 {
                (i32::from(self) as u32) ^ 0x8000_0000
            }
            fn unkey(k: u32) -> $t {
                ((k ^ 0x8000_0000) as i32) as $t
            }
            fn samples(v: &[$t]) -> Samples<'_> {
                Samples::$variant(v)
            }
        }
    };
}
keyed_signed!(i8, I8);
keyed_signed!(i16, I16);
keyed_signed!(i32, I32);

impl Keyed for i64 {
    type Word = u64;
    fn key(self) -> u64 {
        (self as u64) ^ (1 << 63)
    }
    fn unkey(k: u64) -> i64 {
        (k ^ (1 << 63)) as i64
    }
    fn samples(v: &[i64]) -> Samples<'_> {
        Samples::I64(v)
    }
}

impl Keyed for f64 {
    type Word = u64;
    fn key(self) -> u64 {
        key_f64(self)
    }
    fn unkey(k: u64) -> f64 {
        unkey_f64(k)
    }
    fn samples(v: &[f64]) -> Samples<'_> {
        Samples::F64(v)
    }
}

/// A dtype a float32 result is stored in: numpy's `astype` of the
/// integral values the filters give (truncation toward zero, saturating;
/// f32 to f64 is exact).
pub trait FromF32: Copy + Send + numpy::Element + 'static {
    fn from_f32(x: f32) -> Self;
}

macro_rules! from_f32 {
    ($($t:ty),*) => {$(
        impl FromF32 for $t {
            fn from_f32(x: f32) -> $t {
                x as $t
            }
        }
    )*};
}
from_f32!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

/// A vector of `f(a[i], b[i])`, converted on threads (equal lengths).
pub fn zip_vec<A: Copy + Sync, B: Copy + Sync, D: Send>(
    a: &[A],
    b: &[B],
    threads: usize,
    f: impl Fn(A, B) -> D + Sync,
) -> Vec<D> {
    let n = a.len().min(b.len());
    let mut v = Vec::with_capacity(n);
    for_parts(&mut v.spare_capacity_mut()[..n], threads, |offset, part| {
        let (a, b) = (
            &a[offset..offset + part.len()],
            &b[offset..offset + part.len()],
        );
        for ((d, &x), &y) in part.iter_mut().zip(a).zip(b) {
            d.write(f(x, y));
        }
    });
    // SAFETY: every one of the `n` elements was written.
    unsafe { v.set_len(n) };
    v
}

/// The samples as float32 with the masked ones (true) NaN, which the
/// clipping leaves out, on threads.
pub fn masked_f32(s: Samples<'_>, mask: &[bool], threads: usize) -> Vec<f32> {
    fn m<T: Copy + Sync>(
        v: &[T],
        mask: &[bool],
        threads: usize,
        f: impl Fn(T) -> f32 + Sync,
    ) -> Vec<f32> {
        zip_vec(
            v,
            mask,
            threads,
            |x, masked| if masked { f32::NAN } else { f(x) },
        )
    }
    match s {
        Samples::F32(v) => m(v, mask, threads, |x| x),
        Samples::U8(v) => m(v, mask, threads, f32::from),
        Samples::I8(v) => m(v, mask, threads, f32::from),
        Samples::U16(v) => m(v, mask, threads, f32::from),
        Samples::I16(v) => m(v, mask, threads, f32::from),
        Samples::U32(v) => m(v, mask, threads, |x| x as f32),
        Samples::I32(v) => m(v, mask, threads, |x| x as f32),
        Samples::F64(v) => m(v, mask, threads, |x| x as f32),
        Samples::U64(v) => m(v, mask, threads, |x| x as f64 as f32),
        Samples::I64(v) => m(v, mask, threads, |x| x as f64 as f32),
    }
}

/// The samples as float32 (what the GPU's float paths compute in), on
/// threads. 64-bit integers go through f64, as the CPU references'
/// conversion does (so both round alike).
pub fn to_f32(s: Samples<'_>, threads: usize) -> Vec<f32> {
    match s {
        Samples::F32(v) => v.to_vec(),
        Samples::U8(v) => map_vec(v, threads, f32::from),
        Samples::I8(v) => map_vec(v, threads, f32::from),
        Samples::U16(v) => map_vec(v, threads, f32::from),
        Samples::I16(v) => map_vec(v, threads, f32::from),
        Samples::U32(v) => map_vec(v, threads, |x| x as f32),
        Samples::I32(v) => map_vec(v, threads, |x| x as f32),
        Samples::F64(v) => map_vec(v, threads, |x| x as f32),
        Samples::U64(v) => map_vec(v, threads, |x| x as f64 as f32),
        Samples::I64(v) => map_vec(v, threads, |x| x as f64 as f32),
    }
}

/// `f(range)` for consecutive ranges covering `0..len`, on up to `threads`
/// threads: the results in the ranges' order.
pub fn scan<R: Send>(
    len: usize,
    threads: usize,
    f: impl Fn(std::ops::Range<usize>) -> R + Sync,
) -> Vec<R> {
    if threads <= 1 || len < 2 * 4096 {
        return vec![f(0..len)];
    }
    let per = len.div_ceil(threads).next_multiple_of(1024);
    let count = len.div_ceil(per);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::Mutex::new(Vec::with_capacity(count));
    let work = || {
        loop {
            let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if k >= count {
                break;
            }
            let r = f(k * per..((k + 1) * per).min(len));
            if let Ok(mut d) = done.lock() {
                d.push((k, r));
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            if std::thread::Builder::new()
                .spawn_scoped(scope, work)
                .is_err()
            {
                break;
            }
        }
        work();
    });
    let mut d = done.into_inner().unwrap_or_default();
    d.sort_by_key(|(k, _)| *k);
    d.into_iter().map(|(_, r)| r).collect()
}

/// The core's `segment::label::foreground` (elements unequal to the
/// background, compared as f64; 64-bit integers exactly), on threads.
pub fn foreground(s: Samples<'_>, background: f64, threads: usize) -> Vec<bool> {
    fn ne<T: Copy + Into<f64> + Sync>(v: &[T], b: f64, threads: usize) -> Vec<bool> {
        map_vec(v, threads, |x| x.into() != b)
    }
    let b = background;
    match s {
        Samples::U8(v) => ne(v, b, threads),
        Samples::I8(v) => ne(v, b, threads),
        Samples::U16(v) => ne(v, b, threads),
        Samples::I16(v) => ne(v, b, threads),
        Samples::U32(v) => ne(v, b, threads),
        Samples::I32(v) => ne(v, b, threads),
        Samples::F32(v) => ne(v, b, threads),
        Samples::F64(v) => ne(v, b, threads),
        Samples::U64(v) => map_vec(v, threads, |x| b.fract() != 0.0 || (x as i128) != b as i128),
        Samples::I64(v) => map_vec(v, threads, |x| b.fract() != 0.0 || (x as i128) != b as i128),
    }
}

//! Host copies split over a pool of parked threads.
//!
//! Results of a few MB (SLIC's labels, uploads of small volumes) are copied
//! between host memory and mapped GPU memory on every call. One core copies
//! at most about 13 GB/s out of memory the GPU has just written, and
//! starting threads for each copy costs about as much as it saves; threads
//! started once and woken per copy do not (H100 host, 4 MB out of readback
//! memory: 0.28-0.32 ms on one thread, 0.13 ms on 4 threads started per
//! copy, 0.06-0.08 ms on 8 parked threads; 4 MB into the device's mapped
//! memory: 0.24-0.27 ms, 0.14 ms on 4 parked threads).
//!
//! One copy uses the pool at a time; a copy that finds it busy (the stack
//! streams copy in and out at once) uses scoped threads as before.
//! GPUSCOPE_NO_COPY_POOL=1 always uses scoped threads (to compare).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, TryLockError};

/// One part of a copy: `len` bytes from `src` to `dst`.
#[derive(Clone, Copy)]
pub(crate) struct Part {
    pub dst: *mut u8,
    pub src: *const u8,
    pub len: usize,
}

// SAFETY: a part is only sent to a worker while the caller of
// `copy_parts_during` holds both ranges and waits for the worker to finish
// with them.
unsafe impl Send for Part {}

impl Part {
    /// # Safety
    /// `dst` and `src` must be valid for `len` bytes and not overlap.
    unsafe fn run(self) {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(self.src, self.dst, self.len) }
    }
}

/// Copies every part, on the pool's threads while `meanwhile` runs on this
/// one (or on scoped threads when the pool is busy); returns `meanwhile`'s
/// result once every part is copied.
///
/// # Safety
/// Each part's ranges must be valid for its length, must not overlap each
/// other or any other part's destination, and must stay valid and unused
/// by `meanwhile` until this returns.
pub(crate) unsafe fn copy_parts_during<R>(parts: &[Part], meanwhile: impl FnOnce() -> R) -> R {
    if parts.len() <= 1 || cfg!(target_arch = "wasm32") {
        // SAFETY: the caller's contract.
        parts.iter().for_each(|p| unsafe { p.run() });
        return meanwhile();
    }
    match pool().and_then(|p| p.try_start(parts)) {
        Some(job) => {
            let r = meanwhile();
            job.wait();
            r
        }
        None => std::thread::scope(|s| {
            for &p in parts {
                // SAFETY: the caller's contract; the scope joins the thread.
                s.spawn(move || unsafe { p.run() });
            }
            meanwhile()
        }),
    }
}

/// Copies below this many bytes stay on one thread (waking a worker costs
/// about what it saves on 1 MB: astronaut's labels); larger ones get a part
/// per quarter of it, up to the threads asked for.
const SPLIT_FROM: usize = 2 << 20;

/// The parts of a copy of `len` bytes from `src` to `dst` on up to
/// `threads` threads: whole 64-byte lines each, but the last.
pub(crate) fn parts(src: *const u8, dst: *mut u8, len: usize, threads: usize) -> Vec<Part> {
    let count = if len < SPLIT_FROM {
        1
    } else {
        threads.clamp(1, len.div_ceil(SPLIT_FROM / 4))
    };
    let step = (len.div_ceil(count).div_ceil(64) * 64).max(64);
    (0..len)
        .step_by(step)
        .map(|at| Part {
            // Pointer arithmetic only; `at < len`.
            dst: dst.wrapping_add(at),
            src: src.wrapping_add(at),
            len: step.min(len - at),
        })
        .collect()
}

/// `src` into `dst` (the same length) on up to `threads` threads
/// ([`copy_parts_during`]).
pub(crate) fn copy(dst: &mut [std::mem::MaybeUninit<u8>], src: &[u8], threads: usize) {
    let len = src.len().min(dst.len());
    let list = parts(src.as_ptr(), dst.as_mut_ptr().cast(), len, threads);
    // SAFETY: the parts tile `..len` of both slices, which this function
    // borrows until it returns.
    unsafe { copy_parts_during(&list, || {}) }
}

/// The pool: parked workers, one per core but the caller's, at most 15;
/// none where threads are not available (wasm), none could start, or
/// GPUSCOPE_NO_COPY_POOL is set (read once).
fn pool() -> Option<&'static Pool> {
    static POOL: OnceLock<Option<&'static Pool>> = OnceLock::new();
    *POOL.get_or_init(Pool::start)
}

struct Pool {
    /// Held by the one copy using the pool.
    busy: Mutex<()>,
    state: Mutex<State>,
    wake: Condvar,
    /// Parts of the current job not yet copied.
    left: AtomicUsize,
}

#[derive(Default)]
struct State {
    parts: Vec<Part>,
    /// Parts handed out of `parts`.
    taken: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding these locks (parts are copied outside
    // them), so a poisoned lock still guards consistent state.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A copy running on the pool; `wait` returns once every part is copied.
struct Job<'p> {
    pool: &'p Pool,
    _busy: MutexGuard<'p, ()>,
}

impl Pool {
    fn start() -> Option<&'static Pool> {
        if cfg!(target_arch = "wasm32") || std::env::var_os("GPUSCOPE_NO_COPY_POOL").is_some() {
            return None;
        }
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(16)) - 1;
        // Leaked with its threads, which park for the process's lifetime.
        let pool: &'static Pool = Box::leak(Box::new(Pool {
            busy: Mutex::new(()),
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            left: AtomicUsize::new(0),
        }));
        let started = (0..workers)
            .filter(|_| {
                std::thread::Builder::new()
                    .name("gpuscope-copy".into())
                    .spawn(move || pool.work())
                    .is_ok()
            })
            .count();
        (started > 0).then_some(pool)
    }

    /// Hands `parts` to the workers unless another copy holds the pool.
    fn try_start(&self, parts: &[Part]) -> Option<Job<'_>> {
        let busy = match self.busy.try_lock() {
            Ok(guard) => guard,
            // A panic in an earlier caller's `meanwhile` (its parts were
            // all copied before the guard dropped): the pool is free.
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        let mut st = lock(&self.state);
        st.parts.clear();
        st.parts.extend_from_slice(parts);
        st.taken = 0;
        self.left.store(parts.len(), Ordering::Release);
        drop(st);
        // As many workers as parts (the caller copies too once `meanwhile`
        // is done): waking all 15 for 8 parts only has them queue on the
        // lock.
        for _ in 0..parts.len() {
            self.wake.notify_one();
        }
        Some(Job {
            pool: self,
            _busy: busy,
        })
    }

    fn work(&self) {
        let mut st = lock(&self.state);
        loop {
            while st.taken >= st.parts.len() {
                st = self.wake.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            let part = st.parts[st.taken];
            st.taken += 1;
            drop(st);
            // SAFETY: the job's caller keeps the ranges valid until `left`
            // reaches 0, which happens only after this copy.
            unsafe { part.run() };
            self.left.fetch_sub(1, Ordering::Release);
            st = lock(&self.state);
        }
    }
}

impl Job<'_> {
    fn wait(self) {
        drop(self);
    }
}

impl Drop for Job<'_> {
    /// Copies the parts no worker has taken yet, then waits for the rest
    /// (so the job never outlives the memory it copies, even on a panic in
    /// the caller's `meanwhile`). It spins rather than sleeps: the last
    /// parts end within tens of microseconds, about a wake-up's time
    /// (sleeping on a condition variable measured no different).
    fn drop(&mut self) {
        let pool = self.pool;
        loop {
            let mut st = lock(&pool.state);
            if st.taken == st.parts.len() {
                break;
            }
            let part = st.parts[st.taken];
            st.taken += 1;
            drop(st);
            // SAFETY: as in `work`.
            unsafe { part.run() };
            pool.left.fetch_sub(1, Ordering::Release);
        }
        let mut spins = 0u32;
        while pool.left.load(Ordering::Acquire) != 0 {
            spins = spins.saturating_add(1);
            if spins < 1 << 14 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize, seed: usize) -> Vec<u8> {
        (0..len)
            .map(|i| ((i * 131 + seed * 7) % 251) as u8)
            .collect()
    }

    /// Every length around the split points copies every byte, on the
    /// pool or (from several threads at once) on scoped threads.
    #[test]
    fn copies_every_byte_from_many_threads_at_once() {
        let lens = [
            0,
            1,
            63,
            SPLIT_FROM - 1,
            SPLIT_FROM,
            SPLIT_FROM + 1,
            3 * SPLIT_FROM + 17,
            8 << 20,
        ];
        std::thread::scope(|s| {
            for t in 0..4 {
                s.spawn(move || {
                    for (k, &len) in lens.iter().enumerate() {
                        for threads in [1, 2, 5, 16] {
                            let src = pattern(len, t + k);
                            let mut dst = vec![0u8; len];
                            // SAFETY: the same layout; only initialised
                            // bytes are written.
                            let uninit = unsafe {
                                &mut *(dst.as_mut_slice() as *mut [u8]
                                    as *mut [std::mem::MaybeUninit<u8>])
                            };
                            copy(uninit, &src, threads);
                            assert!(dst == src, "len {len}, {threads} threads");
                        }
                    }
                });
            }
        });
    }

    #[test]
    fn parts_tile_the_range_in_whole_lines() {
        for len in [0, 5, SPLIT_FROM, 5 * SPLIT_FROM + 3, 64 << 20] {
            for threads in [1, 3, 8, 16] {
                let p = parts(std::ptr::null(), std::ptr::null_mut(), len, threads);
                assert!(p.len() <= threads.max(1));
                assert_eq!(p.iter().map(|p| p.len).sum::<usize>(), len);
                assert!(p.iter().rev().skip(1).all(|p| p.len % 64 == 0));
                if len < SPLIT_FROM {
                    assert!(p.len() <= 1);
                }
            }
        }
    }

    /// A panic in `meanwhile` still leaves every part copied before it
    /// unwinds out, and later copies still work.
    #[test]
    fn a_panic_beside_a_copy_leaves_it_complete() {
        let src = pattern(4 << 20, 5);
        let mut dst = vec![0u8; src.len()];
        let list = parts(src.as_ptr(), dst.as_mut_ptr(), src.len(), 8);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: the parts tile both vectors, alive and unused
            // meanwhile.
            unsafe { copy_parts_during(&list, || panic!("meanwhile failed")) }
        }));
        assert!(outcome.is_err());
        assert!(dst == src);
        let again = pattern(4 << 20, 6);
        let mut out = vec![0u8; again.len()];
        let list = parts(again.as_ptr(), out.as_mut_ptr(), again.len(), 8);
        // SAFETY: as above.
        unsafe { copy_parts_during(&list, || ()) };
        assert!(out == again);
    }

    /// `meanwhile` runs while the parts are copied, and its result comes
    /// back.
    #[test]
    fn meanwhile_runs_beside_the_copy() {
        let src = pattern(4 << 20, 3);
        let mut dst = vec![0u8; src.len()];
        let list = parts(src.as_ptr(), dst.as_mut_ptr(), src.len(), 8);
        assert!(list.len() > 1);
        // SAFETY: the parts tile both vectors, alive and unused meanwhile.
        let r = unsafe { copy_parts_during(&list, || 42) };
        assert_eq!(r, 42);
        assert!(dst == src);
    }
}

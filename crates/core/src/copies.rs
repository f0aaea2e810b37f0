//! Host memory: copies split over a pool of parked threads, and the
//! helpers that prepare large host buffers (huge pages, faulting in).
//!
//! Results of a few MB (SLIC's labels, uploads of small volumes) are copied
//! between host memory and mapped GPU memory on every call. One core copies
//! far less than the bus carries out of memory the GPU has just written,
//! and starting threads for each copy costs about as much as it saves;
//! threads started once and woken per copy do not: parked threads copy a
//! few MB several times faster than one thread, and about twice as fast
//! as threads started per copy, both out of readback memory and into the
//! device's mapped memory (BENCHMARKS.md).
//!
//! Several copies share the pool at once: the stack streams copy results
//! out while the next chunk is copied in (starting a dozen threads for
//! each chunk's results cost more than the copies gained from them). Each
//! copy asks for a number of workers; a worker whose copy has no parts
//! left helps the others. GPUSCOPE_NO_COPY_POOL=1 uses scoped threads
//! instead (to compare).

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

/// One part of a copy: `len` bytes from `src` to `dst`.
#[derive(Clone, Copy)]
pub(crate) struct Part {
    pub dst: *mut u8,
    pub src: *const u8,
    pub len: usize,
}

// SAFETY: a part is only sent to a worker while the caller of
// `copy_during` holds both ranges and waits for the worker to finish
// with them.
unsafe impl Send for Part {}
// SAFETY: as for Send; a shared part is only read (its fields copied) by
// the one thread that takes it.
unsafe impl Sync for Part {}

impl Part {
    /// # Safety
    /// `dst` and `src` must be valid for `len` bytes and not overlap.
    unsafe fn run(self) {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(self.src, self.dst, self.len) }
    }
}

/// A copy cut into parts, and how many threads share them (each takes the
/// next part left until none are).
pub(crate) struct Plan {
    pub parts: Vec<Part>,
    pub workers: usize,
}

/// Copies every part of `plan`, on the pool's threads while `meanwhile`
/// runs on this one (on scoped threads without the pool);
/// returns `meanwhile`'s result once every part is copied.
///
/// # Safety
/// Each part's ranges must be valid for its length, must not overlap each
/// other or any other part's destination, and must stay valid and unused
/// by `meanwhile` until this returns.
pub(crate) unsafe fn copy_during<R>(plan: &Plan, meanwhile: impl FnOnce() -> R) -> R {
    let parts = &plan.parts[..];
    if parts.len() <= 1 || plan.workers <= 1 || cfg!(target_arch = "wasm32") {
        // SAFETY: the caller's contract.
        parts.iter().for_each(|p| unsafe { p.run() });
        return meanwhile();
    }
    match pool().map(|p| p.start_job(plan)) {
        Some(job) => {
            let r = meanwhile();
            job.wait();
            r
        }
        None => {
            let next = AtomicUsize::new(0);
            let work = || {
                while let Some(&p) = parts.get(next.fetch_add(1, Ordering::Relaxed)) {
                    // SAFETY: the caller's contract; each part is taken once
                    // and the scope joins the threads.
                    unsafe { p.run() };
                }
            };
            std::thread::scope(|s| {
                for _ in 0..plan.workers {
                    s.spawn(work);
                }
                meanwhile()
            })
        }
    }
}

/// Copies below this many bytes stay on one thread (waking a worker costs
/// about what it saves on 1 MB: astronaut's labels); larger ones get a part
/// per quarter of it, up to the threads asked for.
const SPLIT_FROM: usize = 2 << 20;

/// Copies from this many bytes are cut at the destination's 2 MiB
/// boundaries, a part per (transparent huge) page, shared by the threads:
/// a fresh huge page is zeroed by the thread that first touches it, and two
/// threads whose parts share one both zero it (parts of a sixteenth of a
/// 64 MiB chunk shared a page at every cut; cutting at pages made the
/// stack streams faster). Whichever thread is free takes the next page.
const PAGES_FROM: usize = 8 << 20;

/// 2 MiB: the huge page of x86-64 and arm64 Linux.
const PAGE: usize = 2 << 20;

/// How to copy `len` bytes from `src` to `dst` on up to `threads` threads:
/// below [`PAGES_FROM`], one part per thread, whole 64-byte lines each but
/// the last; from it, a part per 2 MiB page of `dst`.
pub(crate) fn plan(src: *const u8, dst: *mut u8, len: usize, threads: usize) -> Plan {
    let threads = threads.max(1);
    let cuts: Vec<usize> = if len >= PAGES_FROM {
        let first = (dst as usize).next_multiple_of(PAGE) - dst as usize;
        std::iter::once(0)
            .chain((first..len).step_by(PAGE).filter(|&at| at > 0))
            .collect()
    } else {
        let count = if len < SPLIT_FROM {
            1
        } else {
            threads.min(len.div_ceil(SPLIT_FROM / 4))
        };
        let step = (len.div_ceil(count).div_ceil(64) * 64).max(64);
        (0..len).step_by(step).collect()
    };
    let parts: Vec<Part> = cuts
        .iter()
        .zip(cuts.iter().skip(1).chain(std::iter::once(&len)))
        .map(|(&at, &end)| Part {
            // Pointer arithmetic only; `at < len`.
            dst: dst.wrapping_add(at),
            src: src.wrapping_add(at),
            len: end - at,
        })
        .collect();
    Plan {
        workers: threads.min(parts.len()),
        parts,
    }
}

/// `src` into `dst` (the same length) on up to `threads` threads
/// ([`copy_during`]).
pub(crate) fn copy(dst: &mut [std::mem::MaybeUninit<u8>], src: &[u8], threads: usize) {
    let len = src.len().min(dst.len());
    let plan = plan(src.as_ptr(), dst.as_mut_ptr().cast(), len, threads);
    // SAFETY: the parts tile `..len` of both slices, which this function
    // borrows until it returns.
    unsafe { copy_during(&plan, || {}) }
}

/// The pool: parked workers, one per core but the caller's, at most 15;
/// none where threads are not available (wasm), none could start, or
/// GPUSCOPE_NO_COPY_POOL is set (read once).
fn pool() -> Option<&'static Pool> {
    static POOL: OnceLock<Option<&'static Pool>> = OnceLock::new();
    *POOL.get_or_init(Pool::start)
}

struct Pool {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    /// Jobs with parts not yet handed out, oldest first.
    jobs: Vec<Active>,
    next_id: u64,
}

struct Active {
    id: u64,
    parts: Vec<Part>,
    /// Parts handed out.
    taken: usize,
    /// Workers copying its parts now, and how many it asked for.
    busy: usize,
    workers: usize,
    /// Parts not yet copied (shared with the job's caller).
    left: Arc<AtomicUsize>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding these locks (parts are copied outside
    // them), so a poisoned lock still guards consistent state.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A copy running on the pool; dropping it returns once every part is
/// copied.
struct Job<'p> {
    pool: &'p Pool,
    id: u64,
    left: Arc<AtomicUsize>,
}

impl Pool {
    fn start() -> Option<&'static Pool> {
        if cfg!(target_arch = "wasm32") || std::env::var_os("GPUSCOPE_NO_COPY_POOL").is_some() {
            return None;
        }
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(16)) - 1;
        // Leaked with its threads, which park for the process's lifetime.
        let pool: &'static Pool = Box::leak(Box::new(Pool {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
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

    /// Hands the plan's parts to the workers.
    fn start_job(&self, plan: &Plan) -> Job<'_> {
        let left = Arc::new(AtomicUsize::new(plan.parts.len()));
        let mut st = lock(&self.state);
        let id = st.next_id;
        st.next_id += 1;
        st.jobs.push(Active {
            id,
            parts: plan.parts.clone(),
            taken: 0,
            busy: 0,
            workers: plan.workers,
            left: left.clone(),
        });
        drop(st);
        // Only the plan's workers (the caller copies too once `meanwhile`
        // is done): waking all 15 for 8 parts only has them queue on the
        // lock, and a stream's copy out shares the cores with its upload.
        for _ in 0..plan.workers {
            self.wake.notify_one();
        }
        Job {
            pool: self,
            id,
            left,
        }
    }

    /// The next part for a worker: from the oldest job with fewer workers
    /// than it asked for, else from the oldest with parts left. So a worker
    /// whose job has no parts left helps the other (a stream's upload and
    /// its copy out end together rather than one idling).
    fn next_part(st: &mut State) -> Option<(Part, u64, Arc<AtomicUsize>)> {
        let i = st
            .jobs
            .iter()
            .position(|j| j.busy < j.workers)
            .or_else(|| (!st.jobs.is_empty()).then_some(0))?;
        let job = &mut st.jobs[i];
        let part = job.parts[job.taken];
        job.taken += 1;
        job.busy += 1;
        let taken = (part, job.id, job.left.clone());
        if job.taken == job.parts.len() {
            st.jobs.remove(i);
        }
        Some(taken)
    }

    fn work(&self) {
        let mut st = lock(&self.state);
        loop {
            let Some((part, id, left)) = Self::next_part(&mut st) else {
                st = self.wake.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            };
            drop(st);
            // SAFETY: the job's caller keeps the ranges valid until `left`
            // reaches 0, which happens only after this copy.
            unsafe { part.run() };
            left.fetch_sub(1, Ordering::Release);
            st = lock(&self.state);
            if let Some(job) = st.jobs.iter_mut().find(|j| j.id == id) {
                job.busy -= 1;
            }
        }
    }
}

impl Job<'_> {
    fn wait(self) {
        drop(self);
    }
}

impl Drop for Job<'_> {
    /// Copies the job's parts no worker has taken yet, then waits for the
    /// rest (so the job never outlives the memory it copies, even on a
    /// panic in the caller's `meanwhile`). It spins rather than sleeps: the
    /// last parts end within tens of microseconds, about a wake-up's time
    /// (sleeping on a condition variable measured no different).
    fn drop(&mut self) {
        loop {
            let mut st = lock(&self.pool.state);
            let Some(i) = st.jobs.iter().position(|j| j.id == self.id) else {
                break;
            };
            let job = &mut st.jobs[i];
            let part = job.parts[job.taken];
            job.taken += 1;
            if job.taken == job.parts.len() {
                st.jobs.remove(i);
            }
            drop(st);
            // SAFETY: as in `work`.
            unsafe { part.run() };
            self.left.fetch_sub(1, Ordering::Release);
        }
        let mut spins = 0u32;
        while self.left.load(Ordering::Acquire) != 0 {
            spins = spins.saturating_add(1);
            if spins < 1 << 14 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// A zeroed vector for a large result. On Linux it asks for transparent
/// huge pages before anything touches it: a fresh 1 GB output otherwise
/// takes 262 144 page faults as the results are copied in, which cost more
/// than the copy itself (measured on this project's stacks). Set
/// GPUSCOPE_NO_HUGE_PAGES=1 to compare.
pub fn zeroed_output<T: bytemuck::Pod>(n: usize) -> Vec<T> {
    let v: Vec<T> = bytemuck::zeroed_vec(n);
    advise_huge_pages(v.as_ptr() as usize, std::mem::size_of_val(&v[..]));
    v
}

/// Asks for transparent huge pages on the whole 2 MiB pages of `len` bytes
/// from address `begin`, which nothing has touched yet (Linux; advice only).
pub(crate) fn advise_huge_pages(begin: usize, len: usize) {
    const HUGE: usize = 2 << 20;
    if len < 8 * HUGE || std::env::var_os("GPUSCOPE_NO_HUGE_PAGES").is_some() {
        return;
    }
    let start = begin.next_multiple_of(HUGE);
    let end = (begin + len) / HUGE * HUGE;
    #[cfg(target_os = "linux")]
    if end > start {
        // SAFETY: advice only, on whole pages inside the caller's
        // allocation; the kernel may ignore it and the contents are unchanged.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, end);
}

/// An empty vector with room for `count` values whose pages are faulted in
/// on another thread ([`Populating`]) while the GPU works, so that results
/// are later copied into memory already mapped.
pub(crate) struct Prefaulted<T> {
    // Declared first, so dropped (joined) before the vector is freed.
    populating: Populating,
    vec: Vec<T>,
}

impl<T> Prefaulted<T> {
    pub(crate) fn new(count: usize) -> Self {
        let vec: Vec<T> = Vec::with_capacity(count);
        let (begin, len) = (vec.as_ptr() as usize, std::mem::size_of::<T>() * count);
        advise_huge_pages(begin, len);
        Prefaulted {
            populating: Populating::start(begin, len),
            vec,
        }
    }

    /// The vector (empty, with its capacity) once its pages are in.
    pub(crate) fn take(self) -> Vec<T> {
        let Prefaulted { populating, vec } = self;
        drop(populating);
        vec
    }
}

/// A thread faulting in the whole pages of a range of memory (Linux:
/// MADV_POPULATE_WRITE, 8 MiB and more; elsewhere nothing): the first touch
/// of fresh pages costs more than copying results into them (see
/// [`zeroed_output`]), and this moves that cost to a time the host would
/// wait for the GPU anyway (SLIC's k-means). Not for the stack streams,
/// whose host threads never wait: faulting in a 1 GiB output beside them
/// made median-stack several times slower. Dropping it waits for the
/// thread: keep it no longer than the memory. GPUSCOPE_NO_PREFAULT=1 turns
/// it off.
pub(crate) struct Populating(Option<std::thread::JoinHandle<()>>);

impl Populating {
    pub(crate) fn start(begin: usize, len: usize) -> Self {
        if len < 8 << 20 || std::env::var_os("GPUSCOPE_NO_PREFAULT").is_some() {
            return Populating(None);
        }
        let start = begin.next_multiple_of(4096);
        let end = (begin + len) / 4096 * 4096;
        #[cfg(target_os = "linux")]
        return Populating(
            std::thread::Builder::new()
                .spawn(move || {
                    // In steps: each call holds the process's memory map
                    // lock, which mapping the GPU's buffers needs too.
                    for at in (start..end).step_by(POPULATE_STEP) {
                        let len = POPULATE_STEP.min(end - at);
                        // SAFETY: the pages lie in memory that outlives
                        // this thread (its owner keeps the Populating no
                        // longer); populating maps them writable without
                        // changing a byte, so it may run while other
                        // threads write there.
                        unsafe {
                            libc::madvise(at as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE);
                        }
                    }
                })
                .ok(),
        );
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (start, end);
            Populating(None)
        }
    }
}

/// Bytes faulted in per call of [`Populating`]'s thread.
#[cfg(target_os = "linux")]
const POPULATE_STEP: usize = 4 << 20;

impl Drop for Populating {
    fn drop(&mut self) {
        if let Some(worker) = self.0.take() {
            let _ = worker.join();
        }
    }
}

/// `dst.copy_from_slice(src)`, split over threads for large copies: one
/// core's memcpy is slower than the bus.
pub fn parallel_copy(dst: &mut [u8], src: &[u8]) {
    parallel_copy_with(as_uninit(dst), src, copy_threads());
}

/// `dst` as memory to be written: the copies write only initialised bytes.
pub(crate) fn as_uninit(dst: &mut [u8]) -> &mut [MaybeUninit<u8>] {
    // SAFETY: same layout; callers of the result only write initialised
    // bytes (copies from `&[u8]`), so `dst` stays initialised.
    unsafe { &mut *(dst as *mut [u8] as *mut [MaybeUninit<u8>]) }
}

/// [`parallel_copy`] into memory not yet initialised (a vector's spare
/// capacity): every byte of `dst` is written.
pub(crate) fn parallel_copy_to_uninit(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
    parallel_copy_with(dst, src, copy_threads());
}

/// [`parallel_copy`] on at most `threads` threads (one on wasm, whose
/// [`copy_threads`] is 1).
pub(crate) fn parallel_copy_with(dst: &mut [MaybeUninit<u8>], src: &[u8], threads: usize) {
    if dst.len() == src.len() {
        copy(dst, src, threads);
    } else {
        dst.write_copy_of_slice(src);
    }
}

/// Threads writing a large upload into mapped upload memory. Where that
/// memory is the device's, seen through its PCIe window (NVIDIA's Vulkan
/// driver), the writes are bound by the bus, and more threads only compete
/// with each other: the spot series ran faster with 8 threads than with
/// 16 on a 16-core host.
pub(crate) fn upload_threads() -> usize {
    available_cores().min(8)
}

/// Threads writing a stream's chunk into upload memory while the previous
/// chunk's result is copied out on the others: 4 of 16 cores measured best
/// for median-stack (8 upload threads beside 8 copying, or 16 copying,
/// were slower).
pub(crate) const STREAM_UPLOAD_THREADS: usize = 4;

/// Threads for large host copies.
pub(crate) fn copy_threads() -> usize {
    available_cores().min(16)
}

/// One where threads are not available (wasm).
fn available_cores() -> usize {
    #[cfg(not(target_arch = "wasm32"))]
    return std::thread::available_parallelism().map_or(1, |n| n.get());
    #[cfg(target_arch = "wasm32")]
    return 1;
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
    fn plans_tile_the_range_in_lines_or_pages() {
        for len in [
            0,
            5,
            SPLIT_FROM,
            5 * SPLIT_FROM + 3,
            PAGES_FROM - 1,
            PAGES_FROM,
            64 << 20,
        ] {
            for threads in [1, 3, 8, 16] {
                for offset in [0usize, 16, PAGE - 64] {
                    let dst = (64 * PAGE + offset) as *mut u8;
                    let p = plan(std::ptr::null(), dst, len, threads);
                    assert!(p.workers <= threads && (len == 0 || p.workers >= 1));
                    assert_eq!(p.parts.iter().map(|p| p.len).sum::<usize>(), len);
                    let mut at = dst as usize;
                    for part in &p.parts {
                        assert_eq!(part.dst as usize, at);
                        at += part.len;
                    }
                    if len < SPLIT_FROM {
                        assert!(p.parts.len() <= 1);
                    } else if len < PAGES_FROM {
                        assert!(p.parts.len() <= threads);
                        assert!(p.parts.iter().rev().skip(1).all(|p| p.len % 64 == 0));
                    } else {
                        // Every cut on a page boundary, no part over a page.
                        assert!(
                            p.parts
                                .iter()
                                .skip(1)
                                .all(|p| (p.dst as usize).is_multiple_of(PAGE))
                        );
                        assert!(p.parts.iter().all(|p| p.len <= PAGE && p.len > 0));
                    }
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
        let list = plan(src.as_ptr(), dst.as_mut_ptr(), src.len(), 8);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: the parts tile both vectors, alive and unused
            // meanwhile.
            unsafe { copy_during(&list, || panic!("meanwhile failed")) }
        }));
        assert!(outcome.is_err());
        assert!(dst == src);
        let again = pattern(4 << 20, 6);
        let mut out = vec![0u8; again.len()];
        let list = plan(again.as_ptr(), out.as_mut_ptr(), again.len(), 8);
        // SAFETY: as above.
        unsafe { copy_during(&list, || ()) };
        assert!(out == again);
    }

    /// A copy inside another's `meanwhile` (a stream's results out while
    /// its next chunk goes in) shares the pool with it; both complete.
    #[test]
    fn a_copy_beside_a_copy_completes_both() {
        let (src_in, src_out) = (pattern(8 << 20, 1), pattern(6 << 20, 2));
        let (mut dst_in, mut dst_out) = (vec![0u8; src_in.len()], vec![0u8; src_out.len()]);
        let list = plan(src_in.as_ptr(), dst_in.as_mut_ptr(), src_in.len(), 4);
        // SAFETY: the parts tile `src_in` and `dst_in`, which `meanwhile`
        // does not touch.
        unsafe {
            copy_during(&list, || {
                let out = &mut *(dst_out.as_mut_slice() as *mut [u8]
                    as *mut [std::mem::MaybeUninit<u8>]);
                copy(out, &src_out, 12);
            })
        };
        assert!(dst_in == src_in);
        assert!(dst_out == src_out);
    }

    /// `meanwhile` runs while the parts are copied, and its result comes
    /// back.
    #[test]
    fn meanwhile_runs_beside_the_copy() {
        let src = pattern(4 << 20, 3);
        let mut dst = vec![0u8; src.len()];
        let list = plan(src.as_ptr(), dst.as_mut_ptr(), src.len(), 8);
        assert!(list.parts.len() > 1);
        // SAFETY: the parts tile both vectors, alive and unused meanwhile.
        let r = unsafe { copy_during(&list, || 42) };
        assert_eq!(r, 42);
        assert!(dst == src);
    }
}

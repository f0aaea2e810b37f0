//! The process's own heap, counted: the global allocator adds up the bytes
//! live on the Rust heap and keeps their peak. The memory tests read it
//! (`GPUSCOPE_MEMORY_REPORT`): unlike the resident size, it does not change
//! with the machine's load (allocator arenas, driver threads), so a bound on
//! it is one the code itself keeps.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Relaxed) + bytes;
    PEAK.fetch_max(now, Relaxed);
}

fn shrank(bytes: usize) {
    LIVE.fetch_sub(bytes, Relaxed);
}

// SAFETY: every call is passed on to the system allocator unchanged; the
// counters only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // Counted as the change in size: large blocks are moved by
            // remapping their pages, never held twice.
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        p
    }
}

/// The most bytes the Rust heap held at once so far.
pub fn peak() -> usize {
    PEAK.load(Relaxed)
}

/// Writes `{"heap_peak_bytes": N}` to the file `GPUSCOPE_MEMORY_REPORT`
/// names, when it is set (the memory tests set it); silent otherwise.
pub fn report() {
    if let Some(path) = std::env::var_os("GPUSCOPE_MEMORY_REPORT") {
        let _ = std::fs::write(path, format!("{{\"heap_peak_bytes\": {}}}\n", peak()));
    }
}

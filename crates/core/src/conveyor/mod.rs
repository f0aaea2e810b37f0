//! The conveyor: an operation run from a block source to a block sink (files
//! on disk, through the io crate's drivers), every stage overlapped:
//!
//! ```text
//! source ─► read-ahead thread (read + words, on several threads) ─► stream (upload, kernels, download)
//!        ─► samples of the output dtype (several threads) ─► write-behind thread ─► sink
//! ```
//!
//! The read-ahead thread reads blocks of whole slices and turns them into
//! the kernel's words in one multi-threaded copy; the stream borrows the
//! slices where they lie (no per-slice copy, no gather for whole planes).
//! A slice larger than a block is read and written in rows instead, where
//! the source and the sink can: each chunk reads the rows of its box and
//! writes the rows of its core, so memory is a few chunks however large a
//! slice is (no read-ahead then: the reads wait for the kernels).
//! Output chunks become samples straight from the mapped readback, and a
//! thread writes them while the next chunks run. Both queues are bounded
//! (a few blocks, sized from the memory budget) and their memory is reused.
//! [`Report`] says where the time went.

mod ops;
mod queues;
pub mod words;

pub use ops::{filter, median, outliers};
pub use queues::{ReadAhead, WriteBehind};

use std::ops::Range;

use crate::error::Result;
use crate::keys::{SampleVec, Samples};

/// A stack read in blocks of whole leading-axis slices (a file's driver).
pub trait BlockSource: Send {
    /// (slices, rows, columns).
    fn shape(&self) -> [usize; 3];

    /// The stored dtype (an empty tag).
    fn dtype(&self) -> Samples<'static>;

    /// Slices `z` as stored; `spare`, a block handed out before, may be
    /// filled again instead of fresh memory.
    fn read(&mut self, z: Range<usize>, spare: Option<SampleVec>) -> Result<SampleVec>;

    /// Whether [`BlockSource::read_rows`] reads part of a slice (npy, raw,
    /// HDF5, Zarr) rather than failing: slices too large to hold whole
    /// are then read in rows.
    fn reads_rows(&self) -> bool {
        false
    }

    /// Rows `y` of slice `z` as stored (`spare` as in [`BlockSource::read`]).
    fn read_rows(
        &mut self,
        z: usize,
        y: Range<usize>,
        spare: Option<SampleVec>,
    ) -> Result<SampleVec> {
        let _ = (z, y, spare);
        Err(crate::error::Error::InvalidInput(
            "this source reads whole slices only".into(),
        ))
    }
}

/// A stack written in blocks of whole leading-axis slices, in order.
pub trait BlockSink: Send {
    /// Writes `block` as slices from `z0`; returns its memory for reuse
    /// where the sink is done with it.
    fn write(&mut self, z0: usize, block: SampleVec) -> Result<Option<SampleVec>>;

    /// Whether [`BlockSink::write_rows`] takes part of a slice.
    fn takes_rows(&self) -> bool {
        false
    }

    /// Writes `block` as whole rows of slice `z` from row `y0`: the rows of
    /// a slice come in order, then the next slice's.
    fn write_rows(&mut self, z: usize, y0: usize, block: SampleVec) -> Result<Option<SampleVec>> {
        let _ = (z, y0, block);
        Err(crate::error::Error::InvalidInput(
            "this output takes whole slices only".into(),
        ))
    }

    /// Completes the output (synced once when `sync`) and publishes it.
    fn finish(self: Box<Self>, sync: bool) -> Result<()>;
}

/// How a conveyor run is sized and finished.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Bytes of the kernel's words in one block read ahead.
    pub block_bytes: u64,
    /// Blocks waiting in each queue.
    pub depth: usize,
    /// Sync the output once at the end (off for scratch outputs).
    pub sync: bool,
}

impl Options {
    /// Blocks of a quarter of the memory budget (64 KiB to 256 MiB of
    /// words), two waiting in each queue: the host holds about twice the
    /// budget in blocks. A slice larger than a block is read in rows.
    pub fn for_budget(budget: u64, sync: bool) -> Options {
        Options {
            block_bytes: (budget / 4).clamp(64 << 10, 256 << 20),
            depth: 2,
            sync,
        }
    }
}

/// Where a run's time went (milliseconds) and what it moved (bytes).
#[derive(Clone, Copy, Debug, Default)]
pub struct Report {
    /// Reading blocks from the source (the read-ahead thread).
    pub read_ms: f64,
    /// Turning read samples into words (the read-ahead thread).
    pub load_ms: f64,
    /// Turning output words into samples (while the stream waits).
    pub store_ms: f64,
    /// Writing blocks to the sink (the write-behind thread).
    pub write_ms: f64,
    /// The final sync and publication of the output.
    pub finish_ms: f64,
    /// Time the stream waited for a block read ahead.
    pub wait_read_ms: f64,
    /// Time the stream waited for room in the write-behind queue.
    pub wait_write_ms: f64,
    /// The stream itself (uploads, kernels, downloads, waits above).
    pub stream_ms: f64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

impl Report {
    /// The report as JSON fields.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "read_ms": self.read_ms, "load_ms": self.load_ms, "store_ms": self.store_ms,
            "write_ms": self.write_ms, "finish_ms": self.finish_ms,
            "wait_read_ms": self.wait_read_ms, "wait_write_ms": self.wait_write_ms,
            "stream_ms": self.stream_ms,
            "read_bytes": self.read_bytes, "write_bytes": self.write_bytes,
        })
    }
}

fn bytes_of(s: &SampleVec) -> u64 {
    let n = s.as_samples().len() as u64;
    let size = match s {
        SampleVec::U8(_) | SampleVec::I8(_) => 1,
        SampleVec::U16(_) | SampleVec::I16(_) => 2,
        SampleVec::U32(_) | SampleVec::I32(_) | SampleVec::F32(_) => 4,
        SampleVec::U64(_) | SampleVec::I64(_) | SampleVec::F64(_) => 8,
    };
    n * size
}

//! The conveyor's two queues: blocks read ahead on a thread and handed to
//! the stream as slices it borrows, and output blocks written behind on
//! another.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytemuck::Pod;

use super::words::{Codec, words};
use super::{BlockSink, BlockSource, bytes_of};
use crate::error::{Error, Result};
use crate::keys::{SampleVec, Samples};
use crate::stream::{SliceSink, SliceSource};

/// What the read-ahead thread measured.
#[derive(Default)]
struct ReadTimes {
    read: Duration,
    load: Duration,
    bytes: u64,
}

type Block<W> = (usize, Vec<W>);

/// Blocks of a [`BlockSource`] read and turned into words on a thread, at
/// most `depth` waiting; the stream borrows their slices in place.
pub struct ReadAhead<W: 'static> {
    rx: Option<Receiver<Result<Block<W>>>>,
    /// Word memory of blocks the stream is done with, for the thread.
    spare: Sender<Vec<W>>,
    /// Blocks held for the stream: consecutive, in z order.
    blocks: VecDeque<Block<W>>,
    plane: usize,
    nz: usize,
    thread: Option<JoinHandle<ReadTimes>>,
    waited: Duration,
    times: Option<ReadTimes>,
    /// Slices too large to hold: rows read on demand, no thread.
    rows: Option<Rows<W>>,
}

/// A source read in rows on the stream's own thread.
struct Rows<W: 'static> {
    source: Box<dyn BlockSource>,
    codec: &'static Codec<W>,
    stored: Option<SampleVec>,
    shape: [usize; 3],
    times: ReadTimes,
}

impl<W: Pod + Send> ReadAhead<W> {
    /// Starts reading `source` in blocks of `block_slices` slices.
    pub fn spawn(
        mut source: Box<dyn BlockSource>,
        codec: &'static Codec<W>,
        block_slices: usize,
        depth: usize,
    ) -> ReadAhead<W> {
        let [nz, ny, nx] = source.shape();
        let plane = ny * nx;
        let block = block_slices.max(1);
        let (tx, rx) = sync_channel::<Result<Block<W>>>(depth.max(1));
        let (spare_tx, spare_rx) = channel::<Vec<W>>();
        let thread = std::thread::spawn(move || {
            let mut times = ReadTimes::default();
            let mut stored: Option<SampleVec> = None;
            let mut z0 = 0;
            while z0 < nz {
                let z1 = (z0 + block).min(nz);
                let t = Instant::now();
                let read = source.read(z0..z1, stored.take());
                times.read += t.elapsed();
                let made = read.and_then(|s| {
                    let n = (z1 - z0) * plane;
                    if s.as_samples().len() != n {
                        return Err(Error::InvalidInput(format!(
                            "slices {z0}..{z1} read as {} values, expected {n}",
                            s.as_samples().len()
                        )));
                    }
                    times.bytes += bytes_of(&s);
                    let t = Instant::now();
                    let mut w = words(spare_rx.try_recv().ok(), n);
                    let loaded = (codec.load)(&s, &mut w);
                    times.load += t.elapsed();
                    stored = Some(s);
                    loaded.map(|()| (z0, w))
                });
                let failed = made.is_err();
                // A closed channel: the stream stopped (finished or failed).
                if tx.send(made).is_err() || failed {
                    break;
                }
                z0 = z1;
            }
            times
        });
        ReadAhead {
            rx: Some(rx),
            spare: spare_tx,
            blocks: VecDeque::new(),
            plane,
            nz,
            thread: Some(thread),
            waited: Duration::ZERO,
            times: None,
            rows: None,
        }
    }

    /// `source` read in rows as the stream asks for them ([`SliceSource::read_rows`]):
    /// for slices too large to hold several of; `source` must read rows.
    pub fn rows(source: Box<dyn BlockSource>, codec: &'static Codec<W>) -> ReadAhead<W> {
        let shape = source.shape();
        let (spare, _) = channel::<Vec<W>>();
        ReadAhead {
            rx: None,
            spare,
            blocks: VecDeque::new(),
            plane: shape[1] * shape[2],
            nz: shape[0],
            thread: None,
            waited: Duration::ZERO,
            times: None,
            rows: Some(Rows {
                source,
                codec,
                stored: None,
                shape,
                times: ReadTimes::default(),
            }),
        }
    }

    fn end(&self) -> usize {
        self.blocks
            .back()
            .map_or(0, |(z0, w)| z0 + w.len() / self.plane.max(1))
    }

    /// Stops the thread; (read, load, wait for blocks, bytes read).
    pub fn finish(&mut self) -> (Duration, Duration, Duration, u64) {
        drop(self.rx.take());
        if let Some(h) = self.thread.take() {
            self.times = h.join().ok();
        }
        let t = match self.rows.take() {
            Some(r) => r.times,
            None => self.times.take().unwrap_or_default(),
        };
        (t.read, t.load, self.waited, t.bytes)
    }
}

impl<W: 'static> Drop for ReadAhead<W> {
    fn drop(&mut self) {
        // The thread stops at its next send; it is not waited for here.
        drop(self.rx.take());
    }
}

impl<W: Pod + Send> SliceSource<W> for ReadAhead<W> {
    fn read(&mut self, z: Range<usize>, out: &mut Vec<W>) -> Result<()> {
        if let Some(r) = &self.rows {
            let ny = r.shape[1];
            for z in z {
                self.read_rows(z, 0..ny, out)?;
            }
            return Ok(());
        }
        self.fetch(z.clone())?;
        for run in self.borrow_runs(z.clone()).unwrap_or_default() {
            out.extend_from_slice(run);
        }
        Ok(())
    }

    fn reads_rows(&self) -> bool {
        self.rows.is_some()
    }

    fn read_rows(&mut self, z: usize, y: Range<usize>, out: &mut Vec<W>) -> Result<()> {
        let Some(r) = &mut self.rows else {
            return Err(Error::InvalidInput(
                "rows asked of a source read in slices (an internal error of gpuscope; please report it)"
                    .into(),
            ));
        };
        let [nz, ny, nx] = r.shape;
        if z >= nz || y.start > y.end || y.end > ny {
            return Err(Error::InvalidInput(format!(
                "rows {y:?} of slice {z} asked of a stack of shape {:?}",
                r.shape
            )));
        }
        let t = Instant::now();
        let read = r.source.read_rows(z, y.clone(), r.stored.take());
        r.times.read += t.elapsed();
        let s = read?;
        let n = y.len() * nx;
        if s.as_samples().len() != n {
            return Err(Error::InvalidInput(format!(
                "rows {y:?} of slice {z} read as {} values, expected {n}",
                s.as_samples().len()
            )));
        }
        r.times.bytes += bytes_of(&s);
        let t = Instant::now();
        let start = out.len();
        out.resize(start + n, W::zeroed());
        let loaded = (r.codec.load)(&s, &mut out[start..]);
        r.times.load += t.elapsed();
        r.stored = Some(s);
        loaded
    }

    fn fetch(&mut self, z: Range<usize>) -> Result<()> {
        if self.rows.is_some() {
            return Ok(());
        }
        if z.end > self.nz {
            return Err(Error::InvalidInput(format!(
                "slices {z:?} asked of a stack of {}",
                self.nz
            )));
        }
        // Blocks wholly before `z` are done with: chunks come in z order.
        while let Some((z0, w)) = self.blocks.front() {
            if z0 + w.len() / self.plane.max(1) > z.start {
                break;
            }
            if let Some((_, w)) = self.blocks.pop_front() {
                let _ = self.spare.send(w);
            }
        }
        if let Some((z0, _)) = self.blocks.front()
            && *z0 > z.start
        {
            return Err(Error::InvalidInput(format!(
                "slice {} asked for after the read went past it (an internal error of gpuscope; please report it)",
                z.start
            )));
        }
        while self.end() < z.end {
            let Some(rx) = &self.rx else {
                return Err(Error::InvalidInput("the reading has stopped".into()));
            };
            let t = Instant::now();
            let got = rx.recv();
            self.waited += t.elapsed();
            match got {
                Ok(block) => self.blocks.push_back(block?),
                Err(_) => {
                    return Err(Error::InvalidInput(
                        "the reading thread stopped early".into(),
                    ));
                }
            }
        }
        Ok(())
    }

    fn borrow(&self, z: usize) -> Option<&[W]> {
        let p = self.plane;
        self.blocks.iter().find_map(|(z0, w)| {
            let k = z.checked_sub(*z0)?;
            w.get(k * p..(k + 1) * p)
        })
    }

    fn borrow_range(&self, z: Range<usize>) -> Option<&[W]> {
        let p = self.plane;
        self.blocks.iter().find_map(|(z0, w)| {
            let k = z.start.checked_sub(*z0)?;
            w.get(k * p..(k + z.len()) * p)
        })
    }

    fn borrow_runs(&self, z: Range<usize>) -> Option<Vec<&[W]>> {
        let p = self.plane;
        let mut runs = Vec::new();
        let mut at = z.start;
        for (z0, w) in &self.blocks {
            let n = w.len() / p.max(1);
            if at >= z.end {
                break;
            }
            if at < *z0 || at >= z0 + n {
                continue;
            }
            let hi = z.end.min(z0 + n);
            runs.push(w.get((at - z0) * p..(hi - z0) * p)?);
            at = hi;
        }
        (at >= z.end).then_some(runs)
    }
}

/// What the write-behind thread measured.
#[derive(Default)]
struct WriteTimes {
    write: Duration,
    bytes: u64,
}

/// The write-behind thread's outcome: the sink to finish, or its error.
type Written = (Result<Box<dyn BlockSink>>, WriteTimes);

/// A block for the write-behind thread: slices from `z`, or rows of slice
/// `z` from the row in the option.
type Piece = (usize, Option<usize>, SampleVec);

/// Output words turned into samples of the output dtype (on several
/// threads, straight from the stream's readback) and written to a
/// [`BlockSink`] by a thread, at most `depth` blocks waiting.
pub struct WriteBehind<W: 'static> {
    tx: Option<SyncSender<Piece>>,
    spare: Receiver<SampleVec>,
    thread: Option<JoinHandle<Written>>,
    codec: &'static Codec<W>,
    dtype: Samples<'static>,
    plane: usize,
    /// Row length where the sink takes rows of a slice (too large to
    /// assemble whole); None: whole slices only.
    row: Option<usize>,
    z: usize,
    store: Duration,
    waited: Duration,
}

impl<W: Pod> WriteBehind<W> {
    /// Writes to `sink`; `rows` (the row length) where slices are too
    /// large to assemble whole and the sink takes rows.
    pub fn spawn(
        mut sink: Box<dyn BlockSink>,
        codec: &'static Codec<W>,
        dtype: Samples<'static>,
        plane: usize,
        rows: Option<usize>,
        depth: usize,
    ) -> WriteBehind<W> {
        let (tx, rx) = sync_channel::<Piece>(depth.max(1));
        let (spare_tx, spare_rx) = channel::<SampleVec>();
        let thread = std::thread::spawn(move || {
            let mut times = WriteTimes::default();
            for (z0, y0, block) in rx {
                times.bytes += bytes_of(&block);
                let t = Instant::now();
                let r = match y0 {
                    None => sink.write(z0, block),
                    Some(y0) => sink.write_rows(z0, y0, block),
                };
                times.write += t.elapsed();
                match r {
                    Ok(Some(s)) => {
                        let _ = spare_tx.send(s);
                    }
                    Ok(None) => {}
                    Err(e) => return (Err(e), times),
                }
            }
            (Ok(sink), times)
        });
        WriteBehind {
            tx: Some(tx),
            spare: spare_rx,
            thread: Some(thread),
            codec,
            dtype,
            plane,
            row: rows.filter(|&nx| nx > 0),
            z: 0,
            store: Duration::ZERO,
            waited: Duration::ZERO,
        }
    }

    /// Waits for the writes; the sink, or the first error.
    fn join(&mut self) -> Written {
        drop(self.tx.take());
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => (
                Err(Error::Device("the writing thread panicked".into())),
                WriteTimes::default(),
            ),
            None => (
                Err(Error::InvalidInput("the writer is already finished".into())),
                WriteTimes::default(),
            ),
        }
    }

    /// Writes what is queued, then completes the output (synced once when
    /// `sync`). (store, wait for room, write, finish, bytes written).
    pub fn finish(mut self, sync: bool) -> Result<(Duration, Duration, Duration, Duration, u64)> {
        let (sink, times) = self.join();
        let t = Instant::now();
        sink?.finish(sync)?;
        Ok((
            self.store,
            self.waited,
            times.write,
            t.elapsed(),
            times.bytes,
        ))
    }
}

/// On failure: waits for the thread, so the sink (and its temporary file)
/// is dropped, and removed, before the caller goes on.
impl<W: 'static> Drop for WriteBehind<W> {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}

impl<W: Pod> WriteBehind<W> {
    /// Turns `values` into samples and queues them as slices from `z` or
    /// rows of slice `z` from `y0`.
    fn send(&mut self, z: usize, y0: Option<usize>, values: &[W]) -> Result<()> {
        let t = Instant::now();
        let block = (self.codec.store)(self.dtype, values, self.spare.try_recv().ok())?;
        self.store += t.elapsed();
        let sent = match &self.tx {
            Some(tx) => {
                let t = Instant::now();
                let ok = tx.send((z, y0, block)).is_ok();
                self.waited += t.elapsed();
                ok
            }
            None => false,
        };
        if sent {
            return Ok(());
        }
        // The thread stopped: its error says why.
        match self.join() {
            (Err(e), _) => Err(e),
            (Ok(_), _) => Err(Error::InvalidInput(
                "the writing thread stopped early".into(),
            )),
        }
    }
}

impl<W: Pod> SliceSink<W> for WriteBehind<W> {
    fn write(&mut self, slices: &[W]) -> Result<()> {
        let z = self.z;
        self.z += slices.len() / self.plane.max(1);
        self.send(z, None, slices)
    }

    fn takes_rows(&self) -> bool {
        self.row.is_some()
    }

    fn write_at(&mut self, offset: usize, values: &[W], _alone: bool) -> Result<bool> {
        let Some(nx) = self.row else {
            return Ok(false);
        };
        let plane = self.plane.max(1);
        let (z, at) = (offset / plane, offset % plane);
        if z != self.z || !at.is_multiple_of(nx) || !values.len().is_multiple_of(nx) {
            return Err(Error::InvalidInput(format!(
                "{} values written at {offset}, not whole rows of slice {} (an internal error of gpuscope; please report it)",
                values.len(),
                self.z
            )));
        }
        self.send(z, Some(at / nx), values)?;
        Ok(true)
    }

    fn skip(&mut self, n: usize) -> Result<()> {
        self.z += n / self.plane.max(1);
        Ok(())
    }
}

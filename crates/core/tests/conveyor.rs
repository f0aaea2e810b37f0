//! The conveyor (block source -> read-ahead -> stream -> write-behind ->
//! block sink) against the in-memory road, bit for bit: every dtype, blocks
//! that do not line up with the stream's chunks, stencils reaching across
//! slices, a source that fails part way, and a sink that must not be
//! finished after a failure.

mod common;

use std::ops::Range;
use std::sync::{Arc, Mutex};

use common::{gpu, noise, tiny_gpu};
use gpuscope_core::conveyor::{self, BlockSink, BlockSource, Options};
use gpuscope_core::filters::median::{self, Footprint, OutlierRemoval, Outliers};
use gpuscope_core::filters::{self, Boundary, GaussianParams, Mode, Output};
use gpuscope_core::keys::{SampleVec, Samples};
use gpuscope_core::{Error, Gpu, Result};

/// One test at a time: on GL two devices polled from two threads contend
/// for the adapter's context (wgpu's lock times out).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A stack in memory handed out in blocks; fails at slice `fail_at`.
struct Memory {
    data: SampleVec,
    shape: [usize; 3],
    fail_at: Option<usize>,
}

fn part(v: &SampleVec, r: Range<usize>) -> SampleVec {
    match v {
        SampleVec::U8(v) => SampleVec::U8(v[r].to_vec()),
        SampleVec::I8(v) => SampleVec::I8(v[r].to_vec()),
        SampleVec::U16(v) => SampleVec::U16(v[r].to_vec()),
        SampleVec::I16(v) => SampleVec::I16(v[r].to_vec()),
        SampleVec::U32(v) => SampleVec::U32(v[r].to_vec()),
        SampleVec::I32(v) => SampleVec::I32(v[r].to_vec()),
        SampleVec::F32(v) => SampleVec::F32(v[r].to_vec()),
        SampleVec::U64(v) => SampleVec::U64(v[r].to_vec()),
        SampleVec::I64(v) => SampleVec::I64(v[r].to_vec()),
        SampleVec::F64(v) => SampleVec::F64(v[r].to_vec()),
    }
}

fn tag(v: &SampleVec) -> Samples<'static> {
    match v {
        SampleVec::U8(_) => Samples::U8(&[]),
        SampleVec::I8(_) => Samples::I8(&[]),
        SampleVec::U16(_) => Samples::U16(&[]),
        SampleVec::I16(_) => Samples::I16(&[]),
        SampleVec::U32(_) => Samples::U32(&[]),
        SampleVec::I32(_) => Samples::I32(&[]),
        SampleVec::F32(_) => Samples::F32(&[]),
        SampleVec::U64(_) => Samples::U64(&[]),
        SampleVec::I64(_) => Samples::I64(&[]),
        SampleVec::F64(_) => Samples::F64(&[]),
    }
}

impl BlockSource for Memory {
    fn shape(&self) -> [usize; 3] {
        self.shape
    }
    fn dtype(&self) -> Samples<'static> {
        tag(&self.data)
    }
    fn read(&mut self, z: Range<usize>, _spare: Option<SampleVec>) -> Result<SampleVec> {
        if self.fail_at.is_some_and(|f| z.contains(&f)) {
            return Err(Error::InvalidInput("the disk failed".into()));
        }
        let p = self.shape[1] * self.shape[2];
        Ok(part(&self.data, z.start * p..z.end * p))
    }
}

/// [`Memory`] that also reads rows of a slice, recording the largest read
/// and every read of whole slices.
struct RowMemory {
    inner: Memory,
    largest: Arc<Mutex<usize>>,
    whole: Arc<Mutex<usize>>,
}

impl BlockSource for RowMemory {
    fn shape(&self) -> [usize; 3] {
        self.inner.shape
    }
    fn dtype(&self) -> Samples<'static> {
        self.inner.dtype()
    }
    fn read(&mut self, z: Range<usize>, spare: Option<SampleVec>) -> Result<SampleVec> {
        *self.whole.lock().unwrap() += z.len();
        self.inner.read(z, spare)
    }
    fn reads_rows(&self) -> bool {
        true
    }
    fn read_rows(
        &mut self,
        z: usize,
        y: Range<usize>,
        _spare: Option<SampleVec>,
    ) -> Result<SampleVec> {
        let [_, ny, nx] = self.inner.shape;
        let at = (z * ny + y.start) * nx;
        let n = y.len() * nx;
        let mut largest = self.largest.lock().unwrap();
        *largest = (*largest).max(n);
        Ok(part(&self.inner.data, at..at + n))
    }
}

/// A block written: slices from z, or rows of slice z from the row given.
type Written = (usize, Option<usize>, SampleVec);

/// Collects the blocks (slices from z, or rows of slice z from the row in
/// the option, where it takes rows); records whether it was finished.
#[derive(Clone, Default)]
struct Collect {
    blocks: Arc<Mutex<Vec<Written>>>,
    finished: Arc<Mutex<Option<bool>>>,
    rows: bool,
}

impl BlockSink for Collect {
    fn write(&mut self, z0: usize, block: SampleVec) -> Result<Option<SampleVec>> {
        self.blocks.lock().unwrap().push((z0, None, block));
        Ok(None)
    }
    fn takes_rows(&self) -> bool {
        self.rows
    }
    fn write_rows(&mut self, z: usize, y0: usize, block: SampleVec) -> Result<Option<SampleVec>> {
        assert!(self.rows, "rows written to a sink of whole slices");
        self.blocks.lock().unwrap().push((z, Some(y0), block));
        Ok(None)
    }
    fn finish(self: Box<Self>, sync: bool) -> Result<()> {
        *self.finished.lock().unwrap() = Some(sync);
        Ok(())
    }
}

impl Collect {
    /// The blocks joined in order (checking they came in order).
    fn joined(&self, plane: usize) -> Vec<u64> {
        self.joined_rows(plane, plane)
    }

    /// [`Collect::joined`] where rows of `nx` values may come apart.
    fn joined_rows(&self, plane: usize, nx: usize) -> Vec<u64> {
        let mut out = Vec::new();
        for (z0, y0, b) in self.blocks.lock().unwrap().iter() {
            let at = z0 * plane + y0.unwrap_or(0) * nx;
            assert_eq!(at, out.len(), "blocks out of order");
            out.extend(bits(b));
        }
        out
    }
}

fn bits(v: &SampleVec) -> Vec<u64> {
    match v {
        SampleVec::U8(v) => v.iter().map(|&x| x as u64).collect(),
        SampleVec::I8(v) => v.iter().map(|&x| x as u8 as u64).collect(),
        SampleVec::U16(v) => v.iter().map(|&x| x as u64).collect(),
        SampleVec::I16(v) => v.iter().map(|&x| x as u16 as u64).collect(),
        SampleVec::U32(v) => v.iter().map(|&x| x as u64).collect(),
        SampleVec::I32(v) => v.iter().map(|&x| x as u32 as u64).collect(),
        SampleVec::F32(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
        SampleVec::U64(v) => v.clone(),
        SampleVec::I64(v) => v.iter().map(|&x| x as u64).collect(),
        SampleVec::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
    }
}

fn dtypes(n: usize, seed: u64) -> Vec<SampleVec> {
    let r = noise(n, seed);
    vec![
        SampleVec::U8(r.iter().map(|v| (v * 256.0) as u8).collect()),
        SampleVec::U16(r.iter().map(|v| (v * 65536.0) as u16).collect()),
        SampleVec::I16(r.iter().map(|v| (v * 65536.0 - 32768.0) as i16).collect()),
        SampleVec::I32(r.iter().map(|v| (v * 4e9 - 2e9) as i32).collect()),
        SampleVec::F32(r.iter().map(|v| (v * 200.0 - 100.0) as f32).collect()),
        SampleVec::F64(r.iter().map(|v| 1.0 + v * 1e-9).collect()),
    ]
}

/// Blocks of 1, 2 and 3 slices' words, one waiting: block edges fall
/// inside the stream's chunks and halos.
fn options(plane: usize, word: usize, slices: usize) -> Options {
    Options {
        block_bytes: (plane * word * slices) as u64,
        depth: 1,
        sync: false,
    }
}

fn run_median(device: &Gpu, data: &SampleVec, shape: [usize; 3], fp: &Footprint, b: Boundary) {
    let plane = shape[1] * shape[2];
    let expected = pollster::block_on(median::median_filter(
        device,
        data.as_samples(),
        &shape,
        fp,
        b,
    ))
    .unwrap();
    let word = if data.as_samples().wide() { 8 } else { 4 };
    for slices in [1, 2, 3] {
        let sink = Collect::default();
        let source = Memory {
            data: part(data, 0..data.as_samples().len()),
            shape,
            fail_at: None,
        };
        let report = conveyor::median(
            device,
            fp,
            b,
            Box::new(source),
            Box::new(sink.clone()),
            options(plane, word, slices),
            &mut |_, _| {},
        )
        .unwrap();
        assert_eq!(
            sink.joined(plane),
            bits(&expected),
            "{} {shape:?} {b:?} blocks of {slices}",
            data.as_samples().dtype_name()
        );
        assert_eq!(*sink.finished.lock().unwrap(), Some(false));
        // Same dtype in and out: as many bytes written as read, all of them.
        assert!(report.read_bytes >= bits(data).len() as u64);
        assert_eq!(report.read_bytes, report.write_bytes);
    }
}

#[test]
fn median_through_the_conveyor_equals_the_in_memory_result_for_every_dtype() {
    let _one = serial();
    let shape = [7, 33, 29];
    let n = shape.iter().product();
    for (i, data) in dtypes(n, 3).iter().enumerate() {
        let flat = Footprint::size(3, &[1, 3, 3]).unwrap();
        let b = Boundary {
            mode: Mode::Reflect,
            cval: 0.0,
        };
        run_median(gpu(), data, shape, &flat, b);
        // A window across slices, chunked small: halos span blocks.
        let cube = Footprint::size(3, &[3, 3, 3]).unwrap();
        let mode = [Mode::Mirror, Mode::Nearest, Mode::Constant][i % 3];
        let b = Boundary { mode, cval: 7.0 };
        run_median(tiny_gpu(), data, shape, &cube, b);
    }
}

#[test]
fn outliers_and_gaussian_through_the_conveyor_equal_the_in_memory_results() {
    let _one = serial();
    let shape = [6, 40, 37];
    let plane = shape[1] * shape[2];
    let n: usize = shape.iter().product();
    let removal = OutlierRemoval::new(20.0, 3, Outliers::Both).unwrap();
    let g = GaussianParams {
        sigma: vec![1.0, 1.5, 0.8],
        ..GaussianParams::default()
    };
    let filter = g.filter(3).unwrap();
    let boundary = Boundary {
        mode: g.mode,
        cval: g.cval,
    };
    for data in dtypes(n, 5) {
        let s = data.as_samples();
        if !s.wide() {
            let expected =
                pollster::block_on(median::remove_outliers(tiny_gpu(), s, &shape, &removal))
                    .unwrap();
            let sink = Collect::default();
            let source = Memory {
                data: part(&data, 0..n),
                shape,
                fail_at: None,
            };
            conveyor::outliers(
                tiny_gpu(),
                &removal,
                Box::new(source),
                Box::new(sink.clone()),
                options(plane, 4, 2),
                &mut |_, _| {},
            )
            .unwrap();
            assert_eq!(sink.joined(plane), bits(&expected), "{}", s.dtype_name());
        }
        // float32 words, written back as float32: the in-memory road's values.
        let values: Vec<f32> = bits_to_f32(&data);
        let expected = pollster::block_on(filters::apply(
            tiny_gpu(),
            &filter,
            &values,
            &shape,
            boundary,
            Output::Float,
        ))
        .unwrap();
        let sink = Collect::default();
        let source = Memory {
            data: part(&data, 0..n),
            shape,
            fail_at: None,
        };
        conveyor::filter(
            tiny_gpu(),
            &filter,
            boundary,
            Output::Float,
            Samples::F32(&[]),
            Box::new(source),
            Box::new(sink.clone()),
            options(plane, 4, 3),
            &mut |_, _| {},
        )
        .unwrap();
        let want: Vec<u64> = expected.iter().map(|x| x.to_bits() as u64).collect();
        assert_eq!(sink.joined(plane), want, "gaussian of {}", s.dtype_name());
    }
}

/// numpy's `astype(float32)` of each sample.
fn bits_to_f32(v: &SampleVec) -> Vec<f32> {
    match v {
        SampleVec::U8(v) => v.iter().map(|&x| x as f32).collect(),
        SampleVec::I8(v) => v.iter().map(|&x| x as f32).collect(),
        SampleVec::U16(v) => v.iter().map(|&x| x as f32).collect(),
        SampleVec::I16(v) => v.iter().map(|&x| x as f32).collect(),
        SampleVec::U32(v) => v.iter().map(|&x| x as f32).collect(),
        SampleVec::I32(v) => v.iter().map(|&x| x as f32).collect(),
        SampleVec::F32(v) => v.clone(),
        SampleVec::U64(v) => v.iter().map(|&x| x as f32).collect(),
        SampleVec::I64(v) => v.iter().map(|&x| x as f32).collect(),
        SampleVec::F64(v) => v.iter().map(|&x| x as f32).collect(),
    }
}

#[test]
fn a_failing_source_fails_the_run_and_the_sink_is_never_finished() {
    let _one = serial();
    let shape = [9, 20, 20];
    let n: usize = shape.iter().product();
    let sink = Collect::default();
    let source = Memory {
        data: SampleVec::U16((0..n).map(|i| i as u16).collect()),
        shape,
        fail_at: Some(5),
    };
    let fp = Footprint::size(3, &[1, 3, 3]).unwrap();
    let b = Boundary {
        mode: Mode::Reflect,
        cval: 0.0,
    };
    let r = conveyor::median(
        tiny_gpu(),
        &fp,
        b,
        Box::new(source),
        Box::new(sink.clone()),
        options(400, 4, 1),
        &mut |_, _| {},
    );
    let e = r.expect_err("the read failed");
    assert!(e.to_string().contains("the disk failed"), "{e}");
    assert_eq!(
        *sink.finished.lock().unwrap(),
        None,
        "a failed run was published"
    );
}

/// Slices larger than a block: read in rows (never a whole slice, no read
/// larger than a chunk's box) and written in rows, with the same results
/// as in memory: stencils within a slice and across slices, a wrap that
/// reaches the far edge, the median's and the float words.
#[test]
fn slices_larger_than_a_block_are_read_and_written_in_rows() {
    let _one = serial();
    let shape = [3, 150, 131];
    let plane = shape[1] * shape[2];
    let n: usize = shape.iter().product();
    let g = GaussianParams {
        sigma: vec![0.0, 1.5, 1.0],
        ..GaussianParams::default()
    };
    let filter = g.filter(3).unwrap();
    let boundary = Boundary {
        mode: g.mode,
        cval: g.cval,
    };
    for (i, data) in dtypes(n, 11).into_iter().enumerate() {
        let s = data.as_samples();
        let name = s.dtype_name();
        let modes = [Mode::Wrap, Mode::Reflect, Mode::Constant];
        let windows = [[1, 5, 3], [3, 3, 3]];
        let word = if s.wide() { 8 } else { 4 };
        for (k, size) in windows.iter().enumerate() {
            let fp = Footprint::size(3, size).unwrap();
            let b = Boundary {
                mode: modes[(i + k) % 3],
                cval: 3.0,
            };
            let expected =
                pollster::block_on(median::median_filter(tiny_gpu(), s, &shape, &fp, b)).unwrap();
            let (largest, whole) = (Arc::default(), Arc::default());
            let source = RowMemory {
                inner: Memory {
                    data: part(&data, 0..n),
                    shape,
                    fail_at: None,
                },
                largest: Arc::clone(&largest),
                whole: Arc::clone(&whole),
            };
            let sink = Collect {
                rows: true,
                ..Collect::default()
            };
            conveyor::median(
                tiny_gpu(),
                &fp,
                b,
                Box::new(source),
                Box::new(sink.clone()),
                options(plane / 2, word, 1),
                &mut |_, _| {},
            )
            .unwrap();
            let what = format!("median {size:?} {:?} of {name}", b.mode);
            assert_eq!(sink.joined_rows(plane, shape[2]), bits(&expected), "{what}");
            assert_eq!(*whole.lock().unwrap(), 0, "{what}: whole slices read");
            let largest = *largest.lock().unwrap();
            assert!(
                largest > 0 && largest < plane,
                "{what}: a read of {largest} values"
            );
            let blocks = sink.blocks.lock().unwrap();
            assert!(
                blocks.len() > shape[0] && blocks.iter().all(|(_, y0, _)| y0.is_some()),
                "{what}: not written in rows"
            );
            assert_eq!(*sink.finished.lock().unwrap(), Some(false));
        }
        let values: Vec<f32> = bits_to_f32(&data);
        let expected = pollster::block_on(filters::apply(
            tiny_gpu(),
            &filter,
            &values,
            &shape,
            boundary,
            Output::Float,
        ))
        .unwrap();
        let (largest, whole) = (Arc::default(), Arc::default());
        let source = RowMemory {
            inner: Memory {
                data: part(&data, 0..n),
                shape,
                fail_at: None,
            },
            largest: Arc::clone(&largest),
            whole: Arc::clone(&whole),
        };
        // A sink of whole slices: the rows are assembled into slices.
        let sink = Collect::default();
        conveyor::filter(
            tiny_gpu(),
            &filter,
            boundary,
            Output::Float,
            Samples::F32(&[]),
            Box::new(source),
            Box::new(sink.clone()),
            options(plane / 2, 4, 1),
            &mut |_, _| {},
        )
        .unwrap();
        let want: Vec<u64> = expected.iter().map(|x| x.to_bits() as u64).collect();
        assert_eq!(sink.joined(plane), want, "gaussian of {name}");
        assert_eq!(
            *whole.lock().unwrap(),
            0,
            "gaussian of {name}: whole slices read"
        );
    }
}

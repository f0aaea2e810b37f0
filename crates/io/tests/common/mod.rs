//! Helpers shared by the integration tests.
#![allow(dead_code)]

use gpuscope_io::{Array, ArrayData, DType, Image, IoError, decode};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

/// The project's shared real data (CI has it beside the checkout).
pub fn shared_data(rel: &str) -> PathBuf {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data"));
    assert!(
        root.is_dir(),
        "shared test data not found: expected the folder at {} (shared/data beside the repository checkout)",
        root.display()
    );
    let p = root.join(rel);
    assert!(p.is_file(), "shared test file missing: {}", p.display());
    p
}

pub fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures")).join(rel)
}

pub fn read_bytes(p: &PathBuf) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);
impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "gpuscope-io-test-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
    pub fn entries(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The value convention of make_fixtures.py for element k.
pub fn convention(k: usize, dtype: DType) -> f64 {
    match dtype {
        DType::Bool => k.is_multiple_of(3) as u8 as f64,
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => ((k * 7) % 100) as f64,
        _ => ((k * 7) % 100) as f64 - 50.0,
    }
}

pub fn convention_array(shape: Vec<usize>, dtype: DType) -> Array {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|k| convention(k, dtype)).collect();
    Array::from_f64(shape, v).unwrap().cast(dtype)
}

/// Equality that treats NaN == NaN (bitwise for floats).
pub fn same(a: &Array, b: &Array) -> bool {
    if a.shape != b.shape {
        return false;
    }
    match (&a.data, &b.data) {
        (ArrayData::F32(x), ArrayData::F32(y)) => x
            .iter()
            .zip(y)
            .all(|(p, q)| p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan())),
        (ArrayData::F64(x), ArrayData::F64(y)) => x
            .iter()
            .zip(y)
            .all(|(p, q)| p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan())),
        (x, y) => x == y,
    }
}

/// An error must be one line naming the file.
pub fn assert_good_error(e: &IoError, name: &str, context: &str) {
    let msg = e.to_string();
    let base = name.rsplit('/').next().unwrap();
    assert!(
        msg.starts_with(&format!("{base}: ")),
        "{context}: message does not start with the file name: {msg}"
    );
    assert!(
        !msg.contains('\n'),
        "{context}: message is not one line: {msg}"
    );
    assert!(
        msg.len() > base.len() + 10,
        "{context}: message says too little: {msg}"
    );
}

pub fn expect_err(name: &str, bytes: &[u8], must_contain: &str) -> IoError {
    match decode(name, bytes) {
        Ok(img) => panic!(
            "{name}: expected an error containing '{must_contain}', got Ok {:?}",
            img.array.shape
        ),
        Err(e) => {
            assert_good_error(&e, name, must_contain);
            assert!(
                e.to_string()
                    .to_lowercase()
                    .contains(&must_contain.to_lowercase()),
                "{name}: error '{e}' does not mention '{must_contain}'"
            );
            e
        }
    }
}

/// Deterministic xorshift, so damaged files are the same on every run.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Decode under catch_unwind; Err(description) if it panicked.
pub fn decode_no_panic(name: &str, bytes: &[u8]) -> Result<Result<Image, IoError>, String> {
    catch_unwind(AssertUnwindSafe(|| decode(name, bytes))).map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    })
}

/// Mutate `count` seeded positions (one per trial; positions drawn from
/// `range`) and require Ok or a proper Err every time, never a panic.
pub fn fuzz(name: &str, bytes: &[u8], count: usize, seed: u64, range: std::ops::Range<usize>) {
    let mut rng = Rng(seed);
    let mut panics = Vec::new();
    let range = range.start.min(bytes.len())..range.end.min(bytes.len());
    if range.is_empty() {
        return;
    }
    for i in 0..count {
        let pos = range.start + rng.below(range.len());
        let mut b = bytes.to_vec();
        let kind = rng.below(4);
        match kind {
            0 => b[pos] ^= 1 << rng.below(8),
            1 => b[pos] = rng.next() as u8,
            2 => b[pos] = 0xFF,
            _ => {
                // Overwrite a run, which hits multi-byte length fields.
                let end = (pos + 8).min(b.len());
                for x in &mut b[pos..end] {
                    *x = rng.next() as u8;
                }
            }
        }
        match decode_no_panic(name, &b) {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => assert_good_error(&e, name, &format!("mutation {i} at {pos}")),
            Err(msg) => panics.push(format!("mutation {i} (kind {kind}) at offset {pos}: {msg}")),
        }
    }
    assert!(
        panics.is_empty(),
        "{name}: decoding panicked:\n{}",
        panics.join("\n")
    );
}

/// Truncate at several points (in the header, in the data, one byte short of
/// `essential`, the length the data need): each must be an Err naming the file.
pub fn truncations(name: &str, bytes: &[u8], essential: usize, extra_points: &[usize]) {
    let n = essential;
    let mut points = vec![
        0,
        1,
        4,
        8,
        12,
        40,
        100,
        n / 3,
        n / 2,
        n.saturating_sub(100),
        n - 1,
    ];
    points.extend_from_slice(extra_points);
    for k in points {
        if k >= n {
            continue;
        }
        match decode_no_panic(name, &bytes[..k]) {
            Ok(Ok(img)) => panic!(
                "{name}: truncated to {k} of {n} bytes but decoded as {:?}",
                img.array.shape
            ),
            Ok(Err(e)) => assert_good_error(&e, name, &format!("truncated to {k}")),
            Err(msg) => panic!("{name}: truncated to {k} bytes panicked: {msg}"),
        }
    }
}

//! What the reader targets share: the in-memory decoder and, for stack
//! formats, the slice-by-slice reader over the same bytes in a file.
#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;

/// A file holding `data` for the path-based readers: one per process and
/// target, rewritten per input (fuzzers run one input at a time).
pub fn file(ext: &str, data: &[u8]) -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(format!("gpuscope-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join(format!("input.{ext}"));
    let mut f = std::fs::File::create(&path).ok()?;
    f.write_all(data).ok()?;
    Some(path)
}

/// Decodes as the CLI does for a file named `name`; a success must give a
/// consistent array (its shape's product is its length).
pub fn decode(name: &str, data: &[u8]) {
    if let Ok(img) = gpuscope_io::decode(name, data) {
        let a = &img.array;
        assert_eq!(gpuscope_io::checked_product(&a.shape), Some(a.len()));
        let _ = a.stats();
    }
}

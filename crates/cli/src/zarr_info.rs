//! What `info` shows of a Zarr array: its layout, without reading a large
//! array whole.

use std::path::Path;

use gpuscope_io::zarr::ZarrArray;
use serde_json::json;

use crate::common::CliResult;

/// Arrays up to this size get min/max/mean; larger ones are not read.
const INFO_STATS_BYTES: usize = 256 << 20;

/// `gpuscope info STORE.zarr[::path]`.
pub fn info(file: &Path, as_json: bool) -> CliResult {
    let mut z = ZarrArray::open_with(&file.to_string_lossy(), &crate::common::read_options())?;
    let shape = z.shape().to_vec();
    let dtype = z.dtype();
    let bytes = shape
        .iter()
        .try_fold(dtype.size_bytes(), |a, &b| a.checked_mul(b));
    let stats = match bytes {
        Some(b) if b <= INFO_STATS_BYTES => Some(z.read_all()?.stats()),
        _ => None,
    };
    let num = |f: fn(&gpuscope_io::Stats) -> f64| {
        stats
            .as_ref()
            .filter(|s| s.n_finite > 0)
            .map(f)
            .filter(|x| x.is_finite())
            .map_or(json!(null), |x| json!(x))
    };
    if as_json {
        let out = json!({
            "shape": shape,
            "dtype": dtype.name(),
            "format": "zarr",
            "zarr_format": z.zarr_format(),
            "array": z.path(),
            "chunks": z.chunks(),
            "inner_chunks": z.inner_chunks(),
            "codecs": z.codecs(),
            "min": num(|s| s.min),
            "max": num(|s| s.max),
            "mean": num(|s| s.mean),
        });
        println!("{out}");
        return Ok(());
    }
    println!("file:     {}", file.display());
    println!("format:   zarr (v{})", z.zarr_format());
    if !z.path().is_empty() {
        println!("array:    {}", z.path());
    }
    println!("shape:    {shape:?}");
    println!("dtype:    {}", dtype.name());
    match z.inner_chunks() {
        Some(inner) => println!(
            "chunks:   {:?} (shards of inner chunks {inner:?})",
            z.chunks()
        ),
        None => println!("chunks:   {:?}", z.chunks()),
    }
    println!("codecs:   {}", z.codecs().join(", "));
    match stats {
        Some(s) => println!("min {}  max {}  mean {}", s.min, s.max, s.mean),
        None => println!("min/max/mean: not computed (more than 256 MiB)"),
    }
    Ok(())
}

//! NeXus/HDF5 inputs: what `info` shows of them, and the detector metadata
//! that spot finding applies by default (pixel mask, count cutoff).

use std::path::{Path, PathBuf};

use gpuscope_io::hdf5::{Hdf5Stack, is_hdf5_name};
use serde_json::{Value, json};

use crate::common::{CliResult, Failure};

/// Datasets up to this size get min/max/mean in `info`; larger ones are
/// not read (a series can be terabytes).
const INFO_STATS_BYTES: usize = 256 << 20;

/// `gpuscope info FILE.h5[::/path]`: layout and NeXus detector fields
/// without reading a large dataset.
pub fn info(file: &Path, as_json: bool) -> CliResult {
    let name = file.to_string_lossy();
    let mut stack = Hdf5Stack::open_with(&name, &crate::common::read_options())?;
    let detector = stack.detector()?;
    let shape = stack.shape().to_vec();
    let dtype = stack.dtype();
    let bytes = shape.iter().product::<usize>() * dtype.size_bytes();
    let stats = if bytes <= INFO_STATS_BYTES {
        Some(stack.read_all()?.stats())
    } else {
        None
    };
    let num = |v: Option<f64>| {
        v.filter(|x| x.is_finite())
            .map_or(json!(null), |x| json!(x))
    };
    if as_json {
        let fields: serde_json::Map<String, Value> = detector
            .fields
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let s = stats.as_ref();
        let out = json!({
            "shape": shape,
            "dtype": dtype.name(),
            "format": "hdf5",
            "datasets": stack.dataset_paths(),
            "chunks": stack.chunks(),
            "filters": stack.filters(),
            "min": num(s.filter(|s| s.n_finite > 0).map(|s| s.min)),
            "max": num(s.filter(|s| s.n_finite > 0).map(|s| s.max)),
            "mean": num(s.filter(|s| s.n_finite > 0).map(|s| s.mean)),
            "nexus": fields,
        });
        println!("{out}");
        return Ok(());
    }
    println!("file:     {}", file.display());
    println!("format:   hdf5");
    println!("datasets: {}", stack.dataset_paths().join(" "));
    println!("shape:    {shape:?}");
    println!("dtype:    {}", dtype.name());
    match stack.chunks() {
        Some(c) => println!("chunks:   {c:?}"),
        None => println!("chunks:   none (contiguous)"),
    }
    let filters = stack.filters().join(", ");
    println!(
        "filters:  {}",
        if filters.is_empty() { "none" } else { &filters }
    );
    match stats {
        Some(s) => println!("min {}  max {}  mean {}", s.min, s.max, s.mean),
        None => println!("min/max/mean: not computed (more than 256 MiB)"),
    }
    for (k, v) in &detector.fields {
        println!("  {k}: {v}");
    }
    Ok(())
}

/// The valid-pixel mask and count cutoff of the first HDF5 input, each
/// unless switched off; the mask is combined with `--mask` (`given`).
pub fn spot_masks(
    inputs: &[PathBuf],
    n: usize,
    given: Option<Vec<bool>>,
    use_mask: bool,
    use_cutoff: bool,
) -> CliResult<(Option<Vec<bool>>, Option<i64>)> {
    let Some(first) = inputs
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .find(|p| is_hdf5_name(p))
    else {
        return Ok((given, None));
    };
    if !use_mask && !use_cutoff {
        return Ok((given, None));
    }
    let detector = Hdf5Stack::open_with(&first, &crate::common::read_options())?.detector()?;
    let mut mask = given;
    let mut notes = Vec::new();
    if use_mask && let Some(pm) = &detector.pixel_mask {
        if pm.len() != n {
            return Err(Failure(format!(
                "{first}: the pixel mask has {} values, a frame has {n} (--no-pixel-mask ignores it)",
                pm.len()
            )));
        }
        let bad = pm.to_f64_vec();
        let valid: Vec<bool> = match mask {
            Some(m) => m.iter().zip(&bad).map(|(&v, &b)| v && b == 0.0).collect(),
            None => bad.iter().map(|&b| b == 0.0).collect(),
        };
        notes.push(format!(
            "the pixel mask ({} bad pixels)",
            bad.iter().filter(|&&b| b != 0.0).count()
        ));
        mask = Some(valid);
    }
    let cutoff = match detector.count_cutoff.filter(|_| use_cutoff) {
        Some(c) if c.is_finite() && c >= 0.0 => {
            notes.push(format!("counts above {} masked", c.floor()));
            Some(c.floor().min(i64::MAX as f64) as i64)
        }
        Some(c) => {
            return Err(Failure(format!(
                "{first}: the count cutoff {c} is not a count (--no-count-cutoff ignores it)"
            )));
        }
        None => None,
    };
    if !notes.is_empty() {
        eprintln!(
            "spots: from the NeXus file: {} (--no-pixel-mask, --no-count-cutoff to ignore)",
            notes.join(", ")
        );
    }
    Ok((mask, cutoff))
}

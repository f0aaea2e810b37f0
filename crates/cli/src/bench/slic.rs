//! The SLIC workloads: 3-D blob volumes of edge L, and a 2-D RGB photograph.

use gpuscope_core::Samples;
use gpuscope_core::slic::{self, SlicParams};
use serde_json::Value;

use super::Bench;
use super::inputs::synthetic_blobs;
use crate::common::CliResult;

/// slic-3d-L: an L³ blob volume (skimage's binary_blobs from --blobs-dir,
/// else a synthetic one of the same size), n_segments = L³/125,
/// compactness 1, 5 iterations, grayscale.
pub fn slic_3d(b: &Bench, l: usize) -> CliResult<Vec<Value>> {
    let name = format!("slic-3d-{l}");
    if !(b.want(&name) || b.want("slic-3d-L")) {
        return Ok(vec![]);
    }
    let file = b
        .args
        .blobs_dir
        .as_ref()
        .map(|d| d.join(format!("blobs_{l}.npy")));
    let (volume, source) = match file.filter(|f| f.exists()) {
        Some(f) => (gpuscope_io::read(&f)?.array.to_f32_vec(), "binary_blobs"),
        None => (synthetic_blobs(l), "synthetic"),
    };
    let p = SlicParams {
        n_segments: l * l * l / 125,
        compactness: 1.0,
        max_num_iter: 5,
        channel_axis: None,
        ..SlicParams::default()
    };
    eprintln!("slic-3d-{l}: {source} volume");
    let row = b.time(
        &name,
        8 * l * l * l,
        &mut || {
            pollster::block_on(slic::slic(b.gpu(), Samples::F32(&volume), &[l, l, l], &p))?;
            Ok(())
        },
        None,
    )?;
    Ok(vec![row])
}

/// slic-2d-rgb: the astronaut photograph (512² RGB, 8-bit), 1000 segments,
/// compactness 10.
pub fn slic_2d_rgb(b: &Bench) -> CliResult<Vec<Value>> {
    if !b.want("slic-2d-rgb") {
        return Ok(vec![]);
    }
    let a = gpuscope_io::read(&b.args.astronaut)?.array;
    let p = SlicParams {
        n_segments: 1000,
        compactness: 10.0,
        ..SlicParams::default()
    };
    let data = a.to_f32_vec();
    let shape = a.shape.clone();
    let rgb: Vec<u8> = data.iter().map(|&v| v as u8).collect();
    let row = b.time(
        "slic-2d-rgb",
        rgb.len() + 4 * shape[0] * shape[1],
        &mut || {
            pollster::block_on(slic::slic(b.gpu(), Samples::U8(&rgb), &shape, &p))?;
            Ok(())
        },
        None,
    )?;
    Ok(vec![row])
}

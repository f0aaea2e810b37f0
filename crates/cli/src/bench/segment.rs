//! The labelling workloads: 2-D and 3-D masks in memory (the peers'
//! inputs), and a stack labelled disk to disk.

use gpuscope_core::segment::label;
use gpuscope_io::npy::NpyWriter;
use gpuscope_io::{Array, ArrayData, DType};
use serde_json::Value;

use super::Bench;
use super::inputs::uniform;
use crate::common::{CliResult, Failure};

/// The labelling workloads of benchmarks.md (scipy's default structure:
/// 4-connected in 2-D, 6-connected in 3-D), on the peers' own inputs.
pub const LABEL_WORKLOADS: [&str; 3] = ["label-sources", "label-blobs-2d", "label-blobs-3d"];

/// One labelling workload: DIR/<name>.npy (uint8, non-zero = foreground)
/// labelled from the host mask to host int32 labels.
pub fn label_in_memory(b: &Bench, name: &str) -> CliResult<Vec<Value>> {
    if !b.want(name) {
        return Ok(vec![]);
    }
    let named = b.named(name);
    let path = match &b.args.inputs {
        Some(dir) => dir.join(format!("{name}.npy")),
        None if named => {
            return Err(Failure(format!(
                "{name} reads the peers' input: give --inputs DIR (written by \
                 python3 bench/segment_peers.py --write-inputs DIR)"
            )));
        }
        None => {
            eprintln!("{name}: skipped (no --inputs DIR)");
            return Ok(vec![]);
        }
    };
    let a = gpuscope_io::read(&path)?.array;
    let shape = a.shape.clone();
    let mask: Vec<bool> = a.to_f32_vec().iter().map(|&v| v != 0.0).collect();
    let mut count = 0;
    let row = b.time(
        name,
        5 * mask.len(),
        &mut || {
            let l = pollster::block_on(label::label(b.gpu(), &mask, &shape, 1))?;
            count = l.count;
            Ok(())
        },
        None,
    )?;
    eprintln!("{name}: {count} labels");
    Ok(vec![row])
}

/// label-stream: a blob stack of `--label-planes` × 2048² uint8 labelled
/// disk to disk (.npy in, int32 .npy out, 6-connected) in slabs of the
/// `--label-budget`, timed from the file in to the file out.
pub fn label_stream(b: &Bench) -> CliResult<Vec<Value>> {
    if !b.want("label-stream") {
        return Ok(vec![]);
    }
    let (gpu, args) = (b.gpu(), b.args);
    let (nz, n) = (args.label_planes.max(1), 2048);
    let base = args.scratch.clone().unwrap_or_else(std::env::temp_dir);
    // A private folder of a name nobody can guess: the files inside cannot
    // be redirected by links planted in a shared scratch folder.
    let scratch = gpuscope_io::ScratchDir::create(&base, "label-stream")?;
    let dir = scratch.path();
    let input = dir.join("blobs.npy");
    let output = dir.join("labels.npy");
    let result = (|| -> CliResult<Value> {
        // Blobs as in synthetic_blobs, from per-axis tables (separable).
        let wave = |k: usize, f: f32, ph: f32, sin: bool| -> Vec<f32> {
            (0..k)
                .map(|i| {
                    let t = i as f32 * f + ph;
                    if sin { t.sin() } else { t.cos() }
                })
                .collect()
        };
        let r = uniform(9, 3);
        let f = 2.0 * std::f32::consts::PI * 40.0 / n as f32;
        let (za, zb) = (
            wave(nz, f, 6.0 * r[0], true),
            wave(nz, f * 0.8, 6.0 * r[5], false),
        );
        let (ya, yb) = (
            wave(n, f * 0.9, 6.0 * r[1], false),
            wave(n, f, 6.0 * r[2], true),
        );
        let (xa, xb) = (
            wave(n, f * 1.1, 6.0 * r[3], false),
            wave(n, f, 6.0 * r[4], true),
        );
        let mut w = NpyWriter::create(&input, vec![nz, n, n], DType::U8)?;
        for z in 0..nz {
            let mut plane = Vec::with_capacity(n * n);
            for y in 0..n {
                for x in 0..n {
                    let v = za[z] * ya[y] + yb[y] * xa[x] + xb[x] * zb[z];
                    plane.push(u8::from(v > 0.3));
                }
            }
            w.write_slab(&Array::new(vec![1, n, n], ArrayData::U8(plane))?)?;
        }
        w.finish()?;
        let max = (args.label_budget / 5) as usize;
        eprintln!(
            "label-stream: {nz}×{n}² uint8 in slabs of {} planes",
            (max.min(label::max_box(gpu)) / (n * n)).max(1)
        );
        b.time(
            "label-stream",
            nz * n * n * 5,
            &mut || {
                let Some(reader) = crate::stream::StackReader::open_stack(&input)? else {
                    return Err(Failure("the label-stream input is not a stack".into()));
                };
                crate::segment::label_stack(gpu, reader, &output, 1, 0.0, max)?;
                Ok(())
            },
            None,
        )
    })();
    drop(scratch);
    Ok(vec![result?])
}

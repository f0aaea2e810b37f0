//! The statistics workload: kappa-sigma.

use gpuscope_core::stats::clip::{self, ClipOptions};
use serde_json::{Value, json};

use super::Bench;
use super::inputs::radio_image;
use crate::common::{CliResult, Failure};

/// kappa-sigma (benchmarks.md): sigma-clipped statistics of a 2048² float32
/// radio image until convergence with the workshop's strict comparisons
/// (`ClipOptions::workshop(3.0)`, the CuPy loop of bench/segment_peers.py),
/// host array in, statistics out. Kernel time: the timestamps of every
/// clipping pass of the call (the upload is a copy, not a pass). `bytes`:
/// the image, once. The row adds the statistics, to be checked against the
/// peers'.
pub fn kappa_sigma(b: &Bench) -> CliResult<Vec<Value>> {
    if !b.want("kappa-sigma") {
        return Ok(vec![]);
    }
    b.hot(0.5)?;
    let args = b.args;
    let radio = args.radio.clone().or_else(|| {
        let p = args.inputs.as_ref()?.join("radio.npy");
        p.exists().then_some(p)
    });
    let image = match &radio {
        Some(path) => {
            let a = gpuscope_io::read(path)?.array;
            if a.shape.len() != 2 {
                return Err(Failure(format!(
                    "{}: kappa-sigma needs a 2-D image, this one has shape {:?}",
                    path.display(),
                    a.shape
                )));
            }
            a.to_f32_vec()
        }
        None => radio_image(),
    };
    let o = ClipOptions::workshop(3.0);
    let mut stats = None;
    let mut rounds = 0;
    let mut row = b.time(
        "kappa-sigma",
        4 * image.len(),
        &mut || {
            let s = pollster::block_on(clip::sigma_clipped_stats(b.gpu(), &image, None, &o))?;
            rounds = s.iterations as usize + 1;
            stats = Some(s);
            Ok(())
        },
        None,
    )?;
    eprintln!("kappa-sigma: {rounds} rounds of the clipping kernels per call");
    let c = stats.ok_or_else(|| Failure("kappa-sigma did not run".into()))?;
    row["n_kept"] = json!(c.n_kept);
    row["iterations"] = json!(c.iterations);
    row["median"] = json!(c.median);
    row["std"] = json!(c.std);
    Ok(vec![row])
}

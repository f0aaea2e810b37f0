//! Segmentation commands: threshold.

use std::path::Path;
use std::time::Instant;

use gpuscope_core::segment::threshold;
use gpuscope_io::Array;
use serde_json::json;

use crate::Cli;
use crate::common::{CliResult, Engine, samples};

pub fn threshold_cmd(cli: &Cli, input: &Path, output: &Path, above: f64, json: bool) -> CliResult {
    let image = gpuscope_io::read(input)?;
    let a = image.array;
    let engine = Engine::open(cli)?;
    let s = samples(&a)?;
    let start = Instant::now();
    let mask = match &engine {
        Engine::Gpu(gpu) => pollster::block_on(threshold::threshold_above(gpu, s, above))?,
        Engine::Cpu => threshold::cpu::threshold_above(s, above)?,
    };
    let elapsed = start.elapsed().as_secs_f64() * 1e3;
    let count = mask.iter().filter(|&&m| m).count();
    let result = Array::from_bool(a.shape.clone(), mask)?;
    gpuscope_io::write(output, &result)?;
    if json {
        println!(
            "{}",
            json!({
                "shape": a.shape, "n_above": count, "device": engine.name(),
                "kernel_ms": engine.kernel_ms(), "total_ms": elapsed,
            })
        );
    }
    Ok(())
}

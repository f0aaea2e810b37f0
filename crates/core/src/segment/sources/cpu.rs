//! CPU reference of the chain, for the tests and `--cpu` only: every
//! step's CPU reference.

use super::*;

pub fn sources(
    data: &[f32],
    shape: &[usize],
    clip: &ClipOptions,
    level: Level,
    connectivity: usize,
) -> Result<Sources> {
    label::check(data.len(), shape, connectivity)?;
    let stats = clip::cpu::sigma_clipped_stats(Samples::F32(data), None, clip)?;
    let threshold = level.value(&stats)?;
    let mask = threshold::cpu::threshold_above(Samples::F32(data), threshold)?;
    let labels = label::cpu::label(&mask, shape, connectivity)?;
    let regions = measure::cpu::regionprops(&labels.labels, data, shape, labels.count)?;
    Ok(Sources {
        stats,
        threshold,
        labels,
        regions,
    })
}

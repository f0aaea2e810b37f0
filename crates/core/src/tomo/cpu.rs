//! The reference twin of [`super::gpu`]: tomopy's float32 formula element
//! by element (IEEE division, so equal to tomopy's numexpr result).

use super::{Fields, NormalizeParams};
use crate::error::Result;

/// `(x - dark) / denominator`, then `min(_, cutoff)`, for projections of
/// `shape` (2-D, or 3-D with projections along axis 0).
pub fn normalize(
    data: &[f32],
    shape: &[usize],
    fields: &Fields,
    params: &NormalizeParams,
) -> Result<Vec<f32>> {
    params.validate()?;
    fields.check(shape)?;
    let n = fields.dark.len();
    let cutoff = params.cutoff_f32();
    Ok(data
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let f = i % n;
            let v = (x - fields.dark[f]) / fields.denominator[f];
            match cutoff {
                Some(c) if v > c => c,
                _ => v,
            }
        })
        .collect())
}

//! CPU reference: every window gathered, the rank selected with
//! `select_nth_unstable` on the same keys. Called only by tests and `--cpu`.

use super::{
    Boundary, Footprint, OutlierRemoval, check_input, cval_key, in_band, nan_band, outlier_key,
};
use crate::chunk::map_coordinate;
use crate::error::Result;
use crate::keys::{Keys, NEG_INF_KEY_F32, NEG_INF_KEY_F64, SampleVec, Samples};

pub fn median_filter(
    input: Samples<'_>,
    shape: &[usize],
    footprint: &Footprint,
    boundary: Boundary,
) -> Result<SampleVec> {
    run(input, shape, footprint, boundary, None)
}

pub fn remove_outliers(
    input: Samples<'_>,
    shape: &[usize],
    removal: &OutlierRemoval,
) -> Result<SampleVec> {
    let footprint = removal.footprint(shape.len())?;
    run(
        input,
        shape,
        &footprint,
        OutlierRemoval::boundary(),
        Some(removal),
    )
}

fn run(
    input: Samples<'_>,
    shape: &[usize],
    footprint: &Footprint,
    boundary: Boundary,
    removal: Option<&OutlierRemoval>,
) -> Result<SampleVec> {
    let s = check_input(input, shape, footprint)?;
    let cval = cval_key(input, boundary)?;
    let keys: Vec<u64> = match input.keys(0..input.len()) {
        Keys::K32(k) => k.into_iter().map(u64::from).collect(),
        Keys::K64(k) => k,
    };
    let float = input.is_float();
    let neg_inf = if input.wide() {
        NEG_INF_KEY_F64
    } else {
        u64::from(NEG_INF_KEY_F32)
    };
    let band = nan_band(input, boundary, footprint);
    let mut window = vec![0u64; footprint.len()];
    let mut out = vec![0u64; keys.len()];
    for z in 0..s[0] {
        for y in 0..s[1] {
            for x in 0..s[2] {
                let i = (z * s[1] + y) * s[2] + x;
                for (w, o) in window.iter_mut().zip(&footprint.offsets) {
                    let at = |a: usize, p: usize| {
                        map_coordinate(p as i64 + i64::from(o[a]), s[a], boundary.mode)
                    };
                    *w = match (at(0, z), at(1, y), at(2, x)) {
                        (Some(cz), Some(cy), Some(cx)) => {
                            let k = keys[(cz * s[1] + cy) * s[2] + cx];
                            if float && k == 0 { neg_inf } else { k }
                        }
                        _ => cval,
                    };
                }
                let rank = footprint.rank();
                let med = *window.select_nth_unstable(rank).1;
                let nan_cval = band.is_some_and(|b| in_band(&b, s, [z, y, x]));
                out[i] = if (float && keys[i] == 0) || nan_cval {
                    0
                } else {
                    match removal {
                        None => med,
                        Some(r) => outlier_key(input, keys[i], med, r),
                    }
                };
            }
        }
    }
    Ok(input.from_keys(if input.wide() {
        Keys::K64(out)
    } else {
        Keys::K32(out.into_iter().map(|k| k as u32).collect())
    }))
}

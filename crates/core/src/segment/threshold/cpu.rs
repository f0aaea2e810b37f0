//! CPU reference of the threshold, for the tests and `--cpu` only: the
//! comparison itself.

use super::*;

pub fn threshold_above(samples: Samples<'_>, value: f64) -> Result<Vec<bool>> {
    check_value(value)?;
    // Widening to f64 is exact for every dtype except 64-bit integers
    // beyond 2^53, compared exactly here as integers.
    Ok(match samples {
        Samples::U8(v) => v.iter().map(|&x| f64::from(x) > value).collect(),
        Samples::I8(v) => v.iter().map(|&x| f64::from(x) > value).collect(),
        Samples::U16(v) => v.iter().map(|&x| f64::from(x) > value).collect(),
        Samples::I16(v) => v.iter().map(|&x| f64::from(x) > value).collect(),
        Samples::U32(v) => v.iter().map(|&x| f64::from(x) > value).collect(),
        Samples::I32(v) => v.iter().map(|&x| f64::from(x) > value).collect(),
        Samples::F32(v) => v.iter().map(|&x| f64::from(x) > value).collect(),
        Samples::F64(v) => v.iter().map(|&x| x > value).collect(),
        Samples::U64(v) => v.iter().map(|&x| int_above(i128::from(x), value)).collect(),
        Samples::I64(v) => v.iter().map(|&x| int_above(i128::from(x), value)).collect(),
    })
}

fn int_above(x: i128, value: f64) -> bool {
    if value >= 2f64.powi(100) {
        false
    } else if value < -(2f64.powi(100)) {
        true
    } else {
        x > value.floor() as i128
    }
}

//! Spot finding for the page (no JS types here: builds and tests natively).
//! A dropped CBF frame arrives as f32 (exact for counts below 2^24, and for
//! the -1/-2 gap and bad-pixel markers); it goes back to integer counts.

use gpuscope_core::spots::{self, Counts, SpotOptions, SpotResult};
use gpuscope_core::{Error, Gpu, Result};

/// Integer counts of a frame given as f32, and its (rows, cols).
pub fn counts(data: &[f32], shape: &[u32]) -> Result<(Vec<i32>, [usize; 2])> {
    let [h, w] = shape else {
        return Err(Error::InvalidInput(format!(
            "spot finding takes one 2-D frame; this image has shape {shape:?}"
        )));
    };
    let v: Option<Vec<i32>> = data
        .iter()
        .map(|&x| (x.fract() == 0.0 && x.abs() < 2147483648.0).then_some(x as i32))
        .collect();
    let v = v.ok_or_else(|| {
        Error::InvalidInput(
            "spot finding needs integer detector counts (this image holds fractions, NaN or huge values)".into(),
        )
    })?;
    Ok((v, [*h as usize, *w as usize]))
}

pub fn find_spots_cpu(data: &[f32], shape: &[u32], o: &SpotOptions) -> Result<SpotResult> {
    let (v, [h, w]) = counts(data, shape)?;
    o.validate()?;
    spots::cpu::find_spots(Counts::I32(&v), [1, h, w], None, o, false)
}

pub async fn find_spots_gpu(
    gpu: &Gpu,
    data: &[f32],
    shape: &[u32],
    o: &SpotOptions,
) -> Result<SpotResult> {
    let (v, [h, w]) = counts(data, shape)?;
    o.validate()?;
    spots::find_spots(gpu, Counts::I32(&v), [1, h, w], None, o, false).await
}

/// The table's columns: (key, label).
pub const COLUMNS: [(&str, &str); 11] = [
    ("id", "id"),
    ("x", "x (px)"),
    ("y", "y (px)"),
    ("n_pixels", "pixels"),
    ("intensity", "intensity"),
    ("x0", "x0"),
    ("x1", "x1"),
    ("y0", "y0"),
    ("y1", "y1"),
    ("variance_x", "var x"),
    ("variance_y", "var y"),
];

/// One row per spot, values in COLUMNS' order.
pub fn rows(r: &SpotResult) -> Vec<[f64; 11]> {
    r.spots
        .iter()
        .map(|s| {
            [
                s.id as f64,
                s.centroid[0],
                s.centroid[1],
                s.n_pixels as f64,
                s.intensity,
                s.bbox[0] as f64,
                s.bbox[1] as f64,
                s.bbox[2] as f64,
                s.bbox[3] as f64,
                s.variance[0],
                s.variance[1],
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_must_be_2d_integer_counts() {
        assert!(counts(&[1.0, 2.0], &[2]).is_err());
        assert!(counts(&[1.5, 2.0], &[1, 2]).is_err());
        assert!(counts(&[f32::NAN, 2.0], &[1, 2]).is_err());
        assert_eq!(
            counts(&[-1.0, 7.0], &[1, 2]).unwrap(),
            (vec![-1, 7], [1, 2])
        );
        let o: SpotOptions = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(o, SpotOptions::default());
        let e = serde_json::from_value::<SpotOptions>(serde_json::json!({"algorithm": "niblack"}));
        assert!(e.is_err());
        let e = serde_json::from_value::<SpotOptions>(
            serde_json::json!({"algorithm": "dispersion", "kernel_size": [3, 3, 3]}),
        );
        assert!(e.is_err());
        let zero = SpotOptions {
            kernel_size: [0, 3],
            ..SpotOptions::default()
        };
        assert!(find_spots_cpu(&[1.0; 4], &[2, 2], &zero).is_err());
    }
}

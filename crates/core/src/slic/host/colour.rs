//! The colour features: skimage.color.rgb2lab on the host in float64, or,
//! for 8-bit RGB, through a table of each byte value's gamma expansion
//! (on the GPU when `on_gpu`: shaders/slic/lab.wgsl).

use super::Rescale;
use crate::error::{Error, Result};
use crate::keys::Samples;
use crate::slic::SlicParams;

/// Lab's largest magnitude for RGB in [0, 1] is below 128 (L <= 100,
/// |a| < 99, |b| < 108): the scale of the fixed-point sums of features the
/// GPU computes (`Prepared::lab_table`).
pub(super) const LAB_BOUND: f64 = 128.0;

/// skimage.color.rgb2lab's gamma expansion of one sRGB value in [0, 1].
fn srgb_to_linear(v: f64) -> f64 {
    if v > 0.04045 {
        ((v + 0.055) / 1.055).powf(2.4)
    } else {
        v / 12.92
    }
}

/// Linear RGB to CIE Lab (D65, 2°): skimage.color.rgb2lab after the gamma
/// expansion.
fn linear_rgb2lab(lin: [f64; 3]) -> [f64; 3] {
    const M: [[f64; 3]; 3] = [
        [0.412453, 0.357580, 0.180423],
        [0.212671, 0.715160, 0.072169],
        [0.019334, 0.119193, 0.950227],
    ];
    const WHITE: [f64; 3] = [0.95047, 1.0, 1.08883];
    let mut f = [0.0; 3];
    for i in 0..3 {
        let xyz = M[i][0] * lin[0] + M[i][1] * lin[1] + M[i][2] * lin[2];
        let t = xyz / WHITE[i];
        f[i] = if t > 0.008856 {
            t.cbrt()
        } else {
            7.787 * t + 16.0 / 116.0
        };
    }
    [
        116.0 * f[1] - 16.0,
        500.0 * (f[0] - f[1]),
        200.0 * (f[1] - f[2]),
    ]
}

/// Runs `work(start, part)` over `data` split into parts of whole `unit`s,
/// one part per core (native builds; one part in the browser); `start` is
/// the part's first index in `data`.
fn on_every_core<T: Send>(data: &mut [T], unit: usize, work: impl Fn(usize, &mut [T]) + Sync) {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cores > 1 && data.len() >= 1 << 16 {
            let per = (data.len() / unit).div_ceil(cores).max(1) * unit;
            std::thread::scope(|scope| {
                for (k, part) in data.chunks_mut(per).enumerate() {
                    let work = &work;
                    scope.spawn(move || work(k * per, part));
                }
            });
            return;
        }
    }
    #[cfg(target_arch = "wasm32")]
    let _ = unit;
    work(0, data)
}

/// 8-bit RGB, channel last, no mask and no smoothing (a colour
/// photograph): the Lab features straight from the bytes in one pass,
/// without float64 copies of the image (each pass over one cost
/// milliseconds on the benchmark host).
pub(super) fn rgb8_input<'a>(
    samples: Samples<'a>,
    shape: &[usize],
    p: &SlicParams,
) -> Option<Samples<'a>> {
    let ndim = shape.len();
    match samples {
        Samples::U8(_) | Samples::I8(_)
            if matches!(p.channel_axis, Some(a) if a == -1 || a == ndim as isize - 1)
                && (3..=4).contains(&ndim)
                && shape[ndim - 1] == 3
                && p.mask.is_none()
                && p.sigma.iter().all(|&s| s == 0.0)
                && p.convert2lab != Some(false) =>
        {
            Some(samples)
        }
        _ => None,
    }
}

/// What the colour conversion gives.
pub(super) struct Colour {
    /// The features are Lab.
    pub lab: bool,
    /// 8-bit RGB's features, computed from the bytes (empty when the GPU
    /// computes them).
    pub rgb8_features: Option<Vec<f32>>,
    /// 8-bit RGB converted on the GPU: each byte value's gamma expansion.
    pub lab_table: Option<Vec<f32>>,
}

/// Converts RGB to Lab as skimage does when it should: 8-bit RGB (`rgb8`)
/// straight from the bytes, other RGB in place in `img` (channel last,
/// rescaled).
#[allow(clippy::too_many_arguments)]
pub(super) fn convert(
    samples: Samples<'_>,
    rgb8: Option<Samples<'_>>,
    img: &mut [f64],
    nc: usize,
    p: &SlicParams,
    rescale: Rescale,
    ratio: f64,
    on_gpu: bool,
) -> Result<Colour> {
    let mut out = Colour {
        lab: false,
        rgb8_features: None,
        lab_table: None,
    };
    if let Some(bytes) = rgb8 {
        // The same arithmetic as the float64 path below, each 8-bit value's
        // rescaled gamma expansion taken from a table.
        let (raw, value): (&[u8], fn(u8) -> f64) = match bytes {
            Samples::I8(v) => (bytemuck::cast_slice(v), |b| f64::from(b as i8)),
            Samples::U8(v) => (v, f64::from),
            _ => (&[], f64::from),
        };
        let table: Vec<f64> = (0..=255u8)
            .map(|b| srgb_to_linear(rescale.apply(value(b))))
            .collect();
        out.lab = true;
        if on_gpu {
            // Three cube roots a pixel took most of a call's host time
            // for a photograph; the GPU does it in a small fraction of
            // that, in float32 (LAB_TOLERANCE).
            out.lab_table = Some(table.iter().map(|&v| v as f32).collect());
            out.rgb8_features = Some(Vec::new());
        } else {
            let mut features = vec![0f32; raw.len()];
            on_every_core(&mut features, 3, |start, part| {
                let src = &raw[start..start + part.len()];
                for (px, rgb) in part.chunks_exact_mut(3).zip(src.chunks_exact(3)) {
                    let lab = linear_rgb2lab([rgb[0], rgb[1], rgb[2]].map(|b| table[b as usize]));
                    for (f, v) in px.iter_mut().zip(lab) {
                        *f = (v * ratio) as f32;
                    }
                }
            });
            out.rgb8_features = Some(features);
        }
    } else if p.channel_axis.is_some() && p.convert2lab != Some(false) {
        if nc != 3 && p.convert2lab == Some(true) {
            return Err(Error::param(
                "convert2lab",
                format!("Lab conversion requires an RGB image (3 channels, got {nc})"),
            ));
        } else if nc == 3 {
            lab_in_place(samples, img, rescale);
            out.lab = true;
        }
    }
    Ok(out)
}

/// Rescaled RGB to Lab in place. Three powers and three cube roots per
/// pixel: most of the host time of a colour image, so on every core. 8-bit
/// images hold at most 257 distinct values (0 for masked pixels): their
/// powers come from a table of the same function's values.
fn lab_in_place(samples: Samples<'_>, img: &mut [f64], rescale: Rescale) {
    let table: Vec<(u64, f64)> = match samples {
        Samples::U8(_) | Samples::I8(_) => {
            let offset = if matches!(samples, Samples::I8(_)) {
                -128.0
            } else {
                0.0
            };
            let mut t: Vec<(u64, f64)> = (0..256)
                .map(|v| rescale.apply(f64::from(v) + offset))
                .chain([0.0])
                .map(|v| (v.to_bits(), srgb_to_linear(v)))
                .collect();
            t.sort_unstable_by_key(|e| e.0);
            t
        }
        _ => Vec::new(),
    };
    let linear = |v: f64| -> f64 {
        match table.binary_search_by_key(&v.to_bits(), |e| e.0) {
            Ok(i) => table[i].1,
            Err(_) => srgb_to_linear(v),
        }
    };
    on_every_core(img, 3, |_, part| {
        for px in part.chunks_exact_mut(3) {
            let v = linear_rgb2lab([linear(px[0]), linear(px[1]), linear(px[2])]);
            px.copy_from_slice(&v);
        }
    });
}

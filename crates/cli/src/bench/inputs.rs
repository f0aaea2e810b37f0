//! The bench's generated inputs: deterministic, so that every run (and the
//! peers' scripts, where they rebuild them) times the same data.

/// Uniform values in [0, 1) (xorshift; the medians' work does not depend on
/// the values).
pub fn uniform(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

/// A blob volume like binary_blobs(L, n_dim=3): sums of waves with random
/// phases, thresholded at zero (about half the volume).
pub fn synthetic_blobs(l: usize) -> Vec<f32> {
    let r = uniform(9, 2);
    let f = 2.0 * std::f32::consts::PI * 10.0 / l as f32;
    let mut v = Vec::with_capacity(l * l * l);
    for z in 0..l {
        for y in 0..l {
            for x in 0..l {
                let (zf, yf, xf) = (z as f32 * f, y as f32 * f, x as f32 * f);
                let s = (zf + 6.0 * r[0]).sin() * (yf * 0.9 + 6.0 * r[1]).cos()
                    + (yf + 6.0 * r[2]).sin() * (xf * 1.1 + 6.0 * r[3]).cos()
                    + (xf + 6.0 * r[4]).sin() * (zf * 0.8 + 6.0 * r[5]).cos();
                v.push(if s > 0.0 { 1.0 } else { 0.0 });
            }
        }
    }
    v
}

/// The radio image of benchmarks.md rebuilt without numpy: N(0, 0.0133)
/// noise (Box-Muller on xorshift) plus 185 Gaussian sources (sigma 1.5 px,
/// 13×13, amplitudes 0.1-2). Same statistics, not the same pixels.
pub fn radio_image() -> Vec<f32> {
    let n = 2048;
    let u = uniform(2 * n * n + 3 * 185, 41);
    let mut img: Vec<f32> = (0..n * n)
        .map(|i| {
            let (a, b) = (f64::from(u[2 * i]).max(1e-7), f64::from(u[2 * i + 1]));
            let g = (-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos();
            (0.0133 * g) as f32
        })
        .collect();
    let s = &u[2 * n * n..];
    for k in 0..185 {
        let y = 20 + (s[3 * k] * 2008.0) as usize;
        let x = 20 + (s[3 * k + 1] * 2008.0) as usize;
        let amp = 0.1 + 1.9 * s[3 * k + 2];
        for dy in -6i32..=6 {
            for dx in -6i32..=6 {
                let psf = (-((dx * dx + dy * dy) as f32) / (2.0 * 1.5 * 1.5)).exp();
                let p = (y as i32 + dy) as usize * n + (x as i32 + dx) as usize;
                img[p] += amp * psf;
            }
        }
    }
    img
}

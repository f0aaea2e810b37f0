// 8-bit RGB to SLIC's colour features: skimage.color.rgb2lab (sRGB, D65,
// 2° observer) times 1 / compactness, one thread per pixel, in float32.
// The host gives each byte value's gamma expansion (its float64 value
// rounded once); the rest is float32 arithmetic, within a few float32
// ulps of skimage's float64 Lab (slic/mod.rs: LAB_TOLERANCE, tested on
// every 8-bit colour). The CPU twin converts in float64 (slic/mod.rs:
// linear_rgb2lab).

struct Params {
    n: u32,           // pixels
    ratio: f32,       // 1 / compactness
    pad0: u32,
    pad1: u32,
    linear: array<vec4<f32>, 64>,  // gamma expansion of byte b at [b / 4][b % 4]
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> rgb: array<u32>;               // 3 bytes a pixel, packed
@group(0) @binding(2) var<storage, read_write> features: array<f32>;    // 3 a pixel

fn byte_at(i: u32) -> u32 {
    return (rgb[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

fn linear(i: u32) -> f32 {
    let b = byte_at(i);
    return p.linear[b >> 2u][b & 3u];
}

// The cube root of t > 0.008856: a third of the exponent through the bits
// (within 6%), then two Halley steps (cubic convergence: 2e-4, then the
// float32 rounding).
fn cube_root(t: f32) -> f32 {
    var y = bitcast<f32>(bitcast<u32>(t) / 3u + 709921077u);
    for (var k = 0; k < 2; k++) {
        let y3 = y * y * y;
        y = y * (y3 + 2.0 * t) / (2.0 * y3 + t);
    }
    return y;
}

// skimage's xyz2lab f(t).
fn lab_f(t: f32) -> f32 {
    if (t > 0.008856) {
        return cube_root(t);
    }
    return 7.787 * t + 16.0 / 116.0;
}

@compute @workgroup_size(256)
fn lab(@builtin(global_invocation_id) gid: vec3<u32>,
       @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i >= p.n) {
        return;
    }
    let r = linear(3u * i);
    let g = linear(3u * i + 1u);
    let b = linear(3u * i + 2u);
    // skimage's sRGB (D65) matrix, each row divided by the white point.
    let fx = lab_f((0.412453 * r + 0.357580 * g + 0.180423 * b) / 0.95047);
    let fy = lab_f(0.212671 * r + 0.715160 * g + 0.072169 * b);
    let fz = lab_f((0.019334 * r + 0.119193 * g + 0.950227 * b) / 1.08883);
    features[3u * i] = (116.0 * fy - 16.0) * p.ratio;
    features[3u * i + 1u] = 500.0 * (fx - fy) * p.ratio;
    features[3u * i + 2u] = 200.0 * (fy - fz) * p.ratio;
}

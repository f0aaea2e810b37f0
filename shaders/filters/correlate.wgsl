// Correlation of a (z, y, x) box with a weights box, scipy.ndimage semantics.
// One thread per output element. The input box may carry a halo on split
// axes (gathered by the host); `offset` is where the output's core starts in
// the input box. Coordinates that still fall outside the input are mapped
// through the boundary mode, as happens on axes passed whole.

struct Params {
    in_shape: vec4<u32>,   // x, y, z, - (x fastest)
    out_shape: vec4<u32>,
    offset: vec4<u32>,     // core start inside the input box
    left: vec4<u32>,       // taps before the kernel's centre
    klen: vec4<u32>,       // kernel extent
    mode: u32,             // 0 reflect, 1 mirror, 2 nearest, 3 wrap, 4 constant
    quantize_bits: u32,    // 0: float output; else integer dtype width, emulating scipy's cast
    quantize_signed: u32,
    cval: f32,
    // Output positions inside [valid_lo, valid_hi) lie inside the array; in
    // constant mode the rest of a padded box is the constant, as scipy pads
    // each pass's result with cval.
    valid_lo: vec4<u32>,
    valid_hi: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> weights: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

// scipy casts each pass's double result to the output dtype with a C cast:
// truncation toward zero, then wrap-around modulo 2^bits. scipy's f64 sum of
// a flat region is the integer itself, where an f32 sum may land one ulp
// below it and truncate a whole count away: results within f32 rounding of
// an integer are taken as that integer.
fn quantize(v: f32) -> f32 {
    if (p.quantize_bits == 0u) {
        return v;
    }
    let span = exp2(f32(p.quantize_bits));
    let nearest = round(v);
    var t = trunc(v);
    if (abs(v - nearest) <= 1e-6 * max(abs(v), 1.0)) {
        t = nearest;
    }
    var lo = 0.0;
    if (p.quantize_signed != 0u) {
        lo = -0.5 * span;
    }
    // In range: no wrap (the modulo below loses precision for 32-bit types).
    if (t >= lo && t < lo + span) {
        return t;
    }
    var w = t - floor(t / span) * span;
    if (p.quantize_signed != 0u && w >= span * 0.5) {
        w -= span;
    }
    return w;
}

// The window sum of an element whose window lies inside the box, starting at
// input index `base`. crates/core/src/filters/gpu.rs replaces this loop with
// the taps unrolled and the weights as literals for kernels of moderate size
// (measured faster: no loop, no weight loads).
// ---- GENERATED: begin ----
fn interior_sum(base: u32) -> f32 {
    var acc = 0.0;
    var w = 0u;
    for (var kz = 0u; kz < p.klen.z; kz++) {
        for (var ky = 0u; ky < p.klen.y; ky++) {
            let row = base + (kz * p.in_shape.y + ky) * p.in_shape.x;
            for (var kx = 0u; kx < p.klen.x; kx++) {
                acc += weights[w] * src[row + kx];
                w++;
            }
        }
    }
    return acc;
}
// ---- GENERATED: end ----

// One thread per output element on a 3-D grid (no index division: measured
// faster), or on a 1-D grid for boxes whose grid would exceed the
// per-dimension workgroup limit (long 1-D signals).
@compute @workgroup_size(32, 8, 1)
fn correlate_grid(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (any(gid >= p.out_shape.xyz)) {
        return;
    }
    correlate_at(gid, (gid.z * p.out_shape.y + gid.y) * p.out_shape.x + gid.x);
}

@compute @workgroup_size(256)
fn correlate(@builtin(global_invocation_id) gid: vec3<u32>,
             @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    let nx = p.out_shape.x;
    let ny = p.out_shape.y;
    if (i >= nx * ny * p.out_shape.z) {
        return;
    }
    correlate_at(vec3<u32>(i % nx, (i / nx) % ny, i / (nx * ny)), i);
}

// Output element o (x, y, z), at index i of the output box.
fn correlate_at(o: vec3<u32>, i: u32) {
    let ox = o.x;
    let oy = o.y;
    let oz = o.z;
    if (p.mode == 4u && (any(o < p.valid_lo.xyz) || any(o >= p.valid_hi.xyz))) {
        dst[i] = p.cval;
        return;
    }
    let in_n = vec3<i32>(p.in_shape.xyz);
    var acc = 0.0;
    var w = 0u;
    // Window start; when the whole window lies inside the box (almost every
    // element) the taps are read without the boundary mapping.
    let start = vec3<i32>(o + p.offset.xyz) - vec3<i32>(p.left.xyz);
    if (all(start >= vec3<i32>(0)) && all(start + vec3<i32>(p.klen.xyz) <= in_n)) {
        let base = (u32(start.z) * p.in_shape.y + u32(start.y)) * p.in_shape.x + u32(start.x);
        dst[i] = quantize(interior_sum(base));
        return;
    }
    for (var kz = 0u; kz < p.klen.z; kz++) {
        let cz = map_coordinate(i32(oz + p.offset.z + kz) - i32(p.left.z), in_n.z, p.mode);
        for (var ky = 0u; ky < p.klen.y; ky++) {
            let cy = map_coordinate(i32(oy + p.offset.y + ky) - i32(p.left.y), in_n.y, p.mode);
            for (var kx = 0u; kx < p.klen.x; kx++) {
                let cx = map_coordinate(i32(ox + p.offset.x + kx) - i32(p.left.x), in_n.x, p.mode);
                var v = p.cval;
                if (cz >= 0 && cy >= 0 && cx >= 0) {
                    v = src[(u32(cz) * p.in_shape.y + u32(cy)) * p.in_shape.x + u32(cx)];
                }
                acc += weights[w] * v;
                w++;
            }
        }
    }
    dst[i] = quantize(acc);
}

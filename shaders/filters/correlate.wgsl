// Correlation of a (z, y, x) box with a weights box, scipy.ndimage semantics:
// the value of one output element (`value_at`). The input box may carry a
// halo on split axes (gathered by the host); `offset` is where the output's
// core starts in the input box. Coordinates that still fall outside the
// input are mapped through the boundary mode, as happens on axes passed
// whole. The buffers and entry points come after this file:
// correlate_words.wgsl (an output per invocation) or correlate_quads.wgsl
// (vec4 words, four outputs along x per invocation); both define
// `src_word(i)`, the input's word i.

struct Params {
    in_shape: vec4<u32>,   // x, y, z, - (x fastest)
    out_shape: vec4<u32>,
    offset: vec4<u32>,     // core start inside the input box
    left: vec4<u32>,       // taps before the kernel's centre
    klen: vec4<u32>,       // kernel extent
    mode: u32,             // 0 reflect, 1 mirror, 2 nearest, 3 wrap, 4 constant
    quantize_bits: u32,    // 0: float output; else integer dtype width, emulating scipy's cast (exact_sum)
    quantize_signed: u32,
    cval: f32,
    // Output positions inside [valid_lo, valid_hi) lie inside the array; in
    // constant mode the rest of a padded box is the constant, as scipy pads
    // each pass's result with cval.
    valid_lo: vec4<u32>,
    valid_hi: vec4<u32>,
    // 0, from the host: a value the shader compiler cannot know, which
    // keeps it from simplifying the two-word sums algebraically ((a + b) -
    // a to b, as Mesa does for operations not marked exact; multiplying by
    // a uniform 1.0 was not enough there).
    zero: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
// Float output: one f32 per tap. Integer output: four per tap, w1 + w2 +
// w3 + w4 = the f64 weight, w1..w3 with 12-bit significands (exact_sum).
@group(0) @binding(2) var<storage, read> weights: array<f32>;

// Integer outputs: the window sum in two-word ("double-f32") arithmetic,
// about 44 bits, so that scipy's truncation of its f64 sum is reproduced
// (an f32 sum lands on the wrong side of an integer on a few percent of
// large uint16 sums). Products are exact: a 12-bit part of a weight times
// a 12-bit part of a sample (samples of integer dtypes up to 24 bits).
// Two-sum needs no FMA; parts are split with bit masks, which no compiler
// contraction can change; `opaque` keeps the sums from being simplified.

// `x` as it is, through an operation no compiler can see through.
fn opaque(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) ^ p.zero);
}

fn two_add(acc: vec2<f32>, b: f32) -> vec2<f32> {
    let s = opaque(acc.x + b);
    let bb = opaque(s - acc.x);
    let err = (acc.x - opaque(s - bb)) + (b - bb);
    let lo = opaque(err + acc.y);
    let hi = opaque(s + lo);
    return vec2<f32>(hi, lo - opaque(hi - s));
}

fn split12(a: f32) -> vec2<f32> {
    let hi = bitcast<f32>(bitcast<u32>(a) & 0xfffff000u);
    return vec2<f32>(hi, a - hi);
}

fn exact_tap(acc: vec2<f32>, w: u32, v: f32) -> vec2<f32> {
    let vs = split12(v);
    var a = acc;
    for (var k = 0u; k < 3u; k++) {
        let wk = weights[4u * w + k];
        a = two_add(a, wk * vs.x);
        a = two_add(a, wk * vs.y);
    }
    return two_add(a, weights[4u * w + 3u] * v);
}

fn exact_sum(o: vec3<u32>) -> vec2<f32> {
    let in_n = vec3<i32>(p.in_shape.xyz);
    var acc = vec2<f32>(0.0, 0.0);
    var w = 0u;
    for (var kz = 0u; kz < p.klen.z; kz++) {
        let cz = map_coordinate(i32(o.z + p.offset.z + kz) - i32(p.left.z), in_n.z, p.mode);
        for (var ky = 0u; ky < p.klen.y; ky++) {
            let cy = map_coordinate(i32(o.y + p.offset.y + ky) - i32(p.left.y), in_n.y, p.mode);
            for (var kx = 0u; kx < p.klen.x; kx++) {
                let cx = map_coordinate(i32(o.x + p.offset.x + kx) - i32(p.left.x), in_n.x, p.mode);
                var v = p.cval;
                if (cz >= 0 && cy >= 0 && cx >= 0) {
                    v = src_word((u32(cz) * p.in_shape.y + u32(cy)) * p.in_shape.x + u32(cx));
                }
                acc = exact_tap(acc, w, v);
                w++;
            }
        }
    }
    return acc;
}

// scipy's cast of the two-word sum s = s.x + s.y: truncation toward zero
// (s.y decides when s.x is a whole number), then wrap-around. A sum within
// 2^-40 of its magnitude of an integer is taken as that integer: scipy's
// f64 sum of a flat region is the integer itself, and the two-word sum is
// not exact to the last f64 bit.
fn quantize_exact(s: vec2<f32>) -> f32 {
    let nearest = round(s.x);
    let d = (s.x - nearest) + s.y;
    var t = trunc(s.x);
    if (abs(d) <= 9.094947e-13 * max(abs(s.x), 1.0)) {
        t = nearest;
    } else if (t == s.x) {
        if (s.x > 0.0 && s.y < 0.0) {
            t -= 1.0;
        } else if (s.x < 0.0 && s.y > 0.0) {
            t += 1.0;
        }
    }
    return wrap_integer(t);
}

// Wrap-around of a whole number into the output dtype, as a C cast does.
fn wrap_integer(t: f32) -> f32 {
    let span = exp2(f32(p.quantize_bits));
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
                acc += weights[w] * src_word(row + kx);
                w++;
            }
        }
    }
    return acc;
}
// ---- GENERATED: end ----

// Output element o (x, y, z) of the output box.
fn value_at(o: vec3<u32>) -> f32 {
    let ox = o.x;
    let oy = o.y;
    let oz = o.z;
    if (p.mode == 4u && (any(o < p.valid_lo.xyz) || any(o >= p.valid_hi.xyz))) {
        return p.cval;
    }
    if (p.quantize_bits != 0u) {
        return quantize_exact(exact_sum(o));
    }
    let in_n = vec3<i32>(p.in_shape.xyz);
    var acc = 0.0;
    var w = 0u;
    // Window start; when the whole window lies inside the box (almost every
    // element) the taps are read without the boundary mapping.
    let start = vec3<i32>(o + p.offset.xyz) - vec3<i32>(p.left.xyz);
    if (all(start >= vec3<i32>(0)) && all(start + vec3<i32>(p.klen.xyz) <= in_n)) {
        let base = (u32(start.z) * p.in_shape.y + u32(start.y)) * p.in_shape.x + u32(start.x);
        return interior_sum(base);
    }
    for (var kz = 0u; kz < p.klen.z; kz++) {
        let cz = map_coordinate(i32(oz + p.offset.z + kz) - i32(p.left.z), in_n.z, p.mode);
        for (var ky = 0u; ky < p.klen.y; ky++) {
            let cy = map_coordinate(i32(oy + p.offset.y + ky) - i32(p.left.y), in_n.y, p.mode);
            for (var kx = 0u; kx < p.klen.x; kx++) {
                let cx = map_coordinate(i32(ox + p.offset.x + kx) - i32(p.left.x), in_n.x, p.mode);
                var v = p.cval;
                if (cz >= 0 && cy >= 0 && cx >= 0) {
                    v = src_word((u32(cz) * p.in_shape.y + u32(cy)) * p.in_shape.x + u32(cx));
                }
                acc += weights[w] * v;
                w++;
            }
        }
    }
    return acc;
}

// Shared by the spot-finding kernels: thread indices, pixel unpacking and
// exact multi-word unsigned integer arithmetic (WGSL has no 64-bit types).

fn thread_index(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * 256u;
}

// Pixel k of the frame from its packed words: fmt 0 = i32 (negative:
// detector-masked), 1 = u16 pairs (pixel 2j in the low half), 2 = u32.
// Returns (value, 1 if the detector marks it invalid).
fn unpack(word: u32, k: u32, fmt: u32) -> vec2<u32> {
    if (fmt == 1u) {
        return vec2<u32>((word >> (16u * (k & 1u))) & 0xffffu, 0u);
    }
    if (fmt == 0u && (word & 0x80000000u) != 0u) {
        return vec2<u32>(0u, 1u);
    }
    return vec2<u32>(word, 0u);
}

fn word_of(k: u32, fmt: u32) -> u32 {
    return select(k, k >> 1u, fmt == 1u);
}

// The full 64-bit product a * b as (low, high) words.
fn mul_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>((p00 & 0xffffu) | (mid << 16u), p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}

// 64-bit (low, high) addition.
fn add2(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

// 64-bit (low, high) a - b for a >= b.
fn sub2(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}

// 96-bit (w0, w1, w2) arithmetic; callers keep every value below 2^96.
fn add3(a: vec3<u32>, b: vec3<u32>) -> vec3<u32> {
    let s0 = a.x + b.x;
    let c0 = select(0u, 1u, s0 < a.x);
    let s1a = a.y + b.y;
    let c1a = select(0u, 1u, s1a < a.y);
    let s1 = s1a + c0;
    let c1b = select(0u, 1u, s1 < s1a);
    return vec3<u32>(s0, s1, a.z + b.z + c1a + c1b);
}

// a - b for a >= b.
fn sub3(a: vec3<u32>, b: vec3<u32>) -> vec3<u32> {
    let d0 = a.x - b.x;
    let b0 = select(0u, 1u, a.x < b.x);
    let d1a = a.y - b.y;
    let b1a = select(0u, 1u, a.y < b.y);
    let d1 = d1a - b0;
    let b1b = select(0u, 1u, d1a < b0);
    return vec3<u32>(d0, d1, a.z - b.z - b1a - b1b);
}

fn lt3(a: vec3<u32>, b: vec3<u32>) -> bool {
    if (a.z != b.z) {
        return a.z < b.z;
    }
    if (a.y != b.y) {
        return a.y < b.y;
    }
    return a.x < b.x;
}

// a (below 2^64) times m.
fn mul3_1(a: vec2<u32>, m: u32) -> vec3<u32> {
    let p0 = mul_wide(a.x, m);
    let p1 = mul_wide(a.y, m);
    return add3(vec3<u32>(p0.x, p0.y, 0u), vec3<u32>(0u, p1.x, p1.y));
}

// a * b for a, b below 2^48 (the product stays below 2^96).
fn mul2_2(a: vec2<u32>, b: vec2<u32>) -> vec3<u32> {
    let p00 = mul_wide(a.x, b.x);
    let p01 = mul_wide(a.x, b.y);
    let p10 = mul_wide(a.y, b.x);
    var r = vec3<u32>(p00.x, p00.y, a.y * b.y);
    r = add3(r, vec3<u32>(0u, p01.x, p01.y));
    return add3(r, vec3<u32>(0u, p10.x, p10.y));
}

// At or above 2^53: an f64 holding it (or computing it) may round.
fn ge53(a: vec3<u32>) -> bool {
    return a.z != 0u || a.y >= 0x200000u;
}

fn f32_of2(a: vec2<u32>) -> f32 {
    return f32(a.y) * 4294967296.0 + f32(a.x);
}

fn f32_of3(a: vec3<u32>) -> f32 {
    return f32(a.z) * 18446744073709551616.0 + f32(a.y) * 4294967296.0 + f32(a.x);
}

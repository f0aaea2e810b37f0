// Region measurements (skimage.measure.regionprops) with integer atomics
// only, so the sums are exact whatever the order the pixels come in: area,
// bounding box, coordinate sums, min/max intensity as ordered keys, and
// intensity sums in fixed point (|v| * 2^k as a 48-bit integer, k chosen by
// the host from the largest |v|), positive and negative parts apart, plus
// coordinate * intensity sums for the weighted centroid. Multi-word sums add
// each 32-bit word atomically and ripple the carry into the next word
// (carries commute, so the total is exact once every thread is done).

struct Params {
    count: u32,      // pixels in this chunk
    nx: u32,
    ny: u32,
    z0: u32,         // first plane of this chunk (chunks are whole planes)
    y0: u32,         // first row of this chunk (2-D chunks are whole rows)
    label_lo: u32,   // labels [label_lo, label_hi) are measured in this pass
    label_hi: u32,
    scale: f32,      // 2^k
}

const W: u32 = 45u; // words per label
const AREA: u32 = 0u;
const BMIN: u32 = 1u;   // 3 words: z, y, x
const BMAX: u32 = 4u;   // 3 words
const CSUM: u32 = 7u;   // 3 x 2 words
const KMAX: u32 = 13u;
const KMIN: u32 = 14u;
const IPOS: u32 = 15u;  // 3 words
const INEG: u32 = 18u;  // 3 words
const WPOS: u32 = 21u;  // 3 axes x 4 words
const WNEG: u32 = 33u;  // 3 axes x 4 words

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> labels: array<u32>;
@group(0) @binding(2) var<storage, read> values: array<f32>;
@group(0) @binding(3) var<storage, read_write> acc: array<atomic<u32>>;

fn thread_index(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * 256u;
}

fn key_of(x: f32) -> u32 {
    var b = bitcast<u32>(x);
    if (b == 0x80000000u) {
        b = 0u;
    }
    if ((b & 0x80000000u) != 0u) {
        return ~b;
    }
    return b | 0x80000000u;
}

// Adds v at word `w` of the multi-word number starting at `base`.
fn add_word(base: u32, w: u32, v: u32) {
    var word = w;
    var add = v;
    loop {
        if (add == 0u) {
            return;
        }
        let old = atomicAdd(&acc[base + word], add);
        if (old + add >= old) {
            return; // no carry out of this word
        }
        add = 1u;
        word += 1u;
    }
}

// Adds v * 2^16 at word `w`.
fn add_half(base: u32, w: u32, v: u32) {
    add_word(base, w, v << 16u);
    add_word(base, w + 1u, v >> 16u);
}

// Adds the 64-bit product c * a at word `w`.
fn add_mul(base: u32, w: u32, c: u32, a: u32) {
    let c0 = c & 0xffffu;
    let c1 = c >> 16u;
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    add_word(base, w, c0 * a0);
    add_half(base, w, c0 * a1);
    add_half(base, w, c1 * a0);
    add_word(base, w + 1u, c1 * a1);
}

@compute @workgroup_size(256)
fn clear(@builtin(global_invocation_id) gid: vec3<u32>,
         @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(gid, groups);
    let n = (p.label_hi - p.label_lo) * W;
    if (i >= n) {
        return;
    }
    let f = i % W;
    let is_min = (f >= BMIN && f < BMIN + 3u) || f == KMIN;
    atomicStore(&acc[i], select(0u, 0xffffffffu, is_min));
    // Keeps bindings 1 and 2 in this entry's layout (never true).
    if (p.count == 0xffffffffu) {
        atomicStore(&acc[0], labels[0] + u32(values[0]));
    }
}

@compute @workgroup_size(256)
fn accumulate(@builtin(global_invocation_id) gid: vec3<u32>,
              @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(gid, groups);
    if (i >= p.count) {
        return;
    }
    let l = labels[i];
    if (l < p.label_lo || l >= p.label_hi) {
        return;
    }
    let base = (l - p.label_lo) * W;
    let c = array<u32, 3>(i / (p.nx * p.ny) + p.z0, (i / p.nx) % p.ny + p.y0, i % p.nx);
    atomicAdd(&acc[base + AREA], 1u);
    for (var a = 0u; a < 3u; a++) {
        atomicMin(&acc[base + BMIN + a], c[a]);
        atomicMax(&acc[base + BMAX + a], c[a]);
        add_word(base + CSUM + 2u * a, 0u, c[a]);
    }
    let v = values[i];
    let k = key_of(v);
    atomicMax(&acc[base + KMAX], k);
    atomicMin(&acc[base + KMIN], k);
    // |v| * 2^k < 2^48: exact in f32 down to 2^-24 of the largest value.
    let x = abs(v) * p.scale;
    let hi = floor(x / 4294967296.0);
    let lo = u32(floor(x - hi * 4294967296.0));
    let hi32 = u32(hi);
    let isum = select(IPOS, INEG, v < 0.0);
    let wsum = select(WPOS, WNEG, v < 0.0);
    add_word(base + isum, 0u, lo);
    add_word(base + isum, 1u, hi32);
    for (var a = 0u; a < 3u; a++) {
        let w = base + wsum + 4u * a;
        add_mul(w, 0u, c[a], lo);
        add_mul(w, 1u, c[a], hi32);
    }
}

// What the host needs before measuring arrays it does not hold (device
// arrays): acc[0] the largest label, acc[1] the largest |value| of a
// labelled pixel as float bits (non-negative floats order as their bits;
// from 0x7f800000 up it is inf or NaN). Both start at 0; one atomic per
// workgroup and word.
var<workgroup> wg_label: atomic<u32>;
var<workgroup> wg_abs: atomic<u32>;

@compute @workgroup_size(256)
fn ranges(@builtin(global_invocation_id) gid: vec3<u32>,
          @builtin(num_workgroups) groups: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    if (lid == 0u) {
        atomicStore(&wg_label, 0u);
        atomicStore(&wg_abs, 0u);
    }
    workgroupBarrier();
    let i = thread_index(gid, groups);
    if (i < p.count) {
        let l = labels[i];
        if (l != 0u) {
            atomicMax(&wg_label, l);
            atomicMax(&wg_abs, bitcast<u32>(values[i]) & 0x7fffffffu);
        }
    }
    workgroupBarrier();
    if (lid == 0u) {
        atomicMax(&acc[0], atomicLoad(&wg_label));
        atomicMax(&acc[1], atomicLoad(&wg_abs));
    }
}

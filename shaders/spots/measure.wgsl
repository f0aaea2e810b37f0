// Per-spot exact sums with integer atomics (order-independent): pixel
// count, Σv, Σv², bounding box, Σv·r, Σv·c, Σv·r², Σv·c². Multi-word sums
// add each word atomically and ripple carries upwards (as segment/measure).

struct Params {
    count: u32,    // pixels
    w: u32,
    fmt: u32,
    cap: u32,      // spots summed at most (the rest: on the host)
    n_blocks: u32, // the label count is blocks[n_blocks]
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

// acc[0..4]: undecided pixels of the two tests, labels, 0; then W words per spot.
const HEAD: u32 = 4u;

const W: u32 = 22u;
const N: u32 = 0u;
const SV: u32 = 1u;    // 2 words
const SV2: u32 = 3u;   // 3 words
const RMIN: u32 = 6u;
const RMAX: u32 = 7u;
const CMIN: u32 = 8u;
const CMAX: u32 = 9u;
const SVR: u32 = 10u;  // 3 words each: v*r, v*c, v*r^2, v*c^2
const SVC: u32 = 13u;
const SVR2: u32 = 16u;
const SVC2: u32 = 19u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> labels: array<u32>;
@group(0) @binding(2) var<storage, read> image: array<u32>;
@group(0) @binding(3) var<storage, read_write> acc: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read> blocks: array<u32>;
@group(0) @binding(5) var<storage, read> list: array<u32>;

fn n_labels() -> u32 {
    return min(blocks[p.n_blocks], p.cap);
}

fn add_word(at: u32, v: u32) {
    var word = at;
    var add = v;
    loop {
        if (add == 0u) {
            return;
        }
        let old = atomicAdd(&acc[word], add);
        if (old + add >= old) {
            return;
        }
        add = 1u;
        word += 1u;
    }
}

fn add64(at: u32, v: vec2<u32>) {
    add_word(at, v.x);
    add_word(at + 1u, v.y);
}

@compute @workgroup_size(256)
fn clear(@builtin(global_invocation_id) gid: vec3<u32>,
         @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(gid, groups);
    if (i < HEAD) {
        atomicStore(&acc[i], select(0u, list[2u * i], i < 2u));
        if (i == 2u) {
            atomicStore(&acc[2], blocks[p.n_blocks]);
        }
        if (p.count == 0xffffffffu) {
            atomicStore(&acc[3], labels[0] + image[0]);
        }
        return;
    }
    if (i >= HEAD + n_labels() * W) {
        return;
    }
    let f = (i - HEAD) % W;
    atomicStore(&acc[i], select(0u, 0xffffffffu, f == RMIN || f == CMIN));
}

@compute @workgroup_size(256)
fn accumulate(@builtin(global_invocation_id) gid: vec3<u32>,
              @builtin(num_workgroups) groups: vec3<u32>) {
    let k = thread_index(gid, groups);
    if (k >= p.count) {
        return;
    }
    let l = labels[k];
    if (p.count == 0xffffffffu) {
        atomicStore(&acc[3], list[0]); // keeps the binding in this layout
    }
    if (l == 0u || l > n_labels()) {
        return;
    }
    let base = HEAD + (l - 1u) * W;
    let v = unpack(image[word_of(k, p.fmt)], k, p.fmt).x;
    let r = k / p.w;
    let c = k % p.w;
    atomicAdd(&acc[base + N], 1u);
    atomicMin(&acc[base + RMIN], r);
    atomicMax(&acc[base + RMAX], r);
    atomicMin(&acc[base + CMIN], c);
    atomicMax(&acc[base + CMAX], c);
    add64(base + SV, vec2<u32>(v, 0u));
    add64(base + SV2, mul_wide(v, v));
    add64(base + SVR, mul_wide(v, r));
    add64(base + SVC, mul_wide(v, c));
    add64(base + SVR2, mul_wide(v, r * r));
    add64(base + SVC2, mul_wide(v, c * c));
}

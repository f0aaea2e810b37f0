// Per-spot exact sums with integer atomics (order-independent): pixel
// count, Σv, Σv², bounding box, Σv·r, Σv·c, Σv·r², Σv·c². Multi-word sums
// add each word atomically and ripple carries upwards (as segment/measure).

struct Params {
    count: u32, // pixels
    w: u32,
    fmt: u32,
    n_labels: u32,
}

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
    if (i >= p.n_labels * W) {
        return;
    }
    let f = i % W;
    atomicStore(&acc[i], select(0u, 0xffffffffu, f == RMIN || f == CMIN));
    if (p.count == 0xffffffffu) {
        atomicStore(&acc[0], labels[0] + image[0]);
    }
}

@compute @workgroup_size(256)
fn accumulate(@builtin(global_invocation_id) gid: vec3<u32>,
              @builtin(num_workgroups) groups: vec3<u32>) {
    let k = thread_index(gid, groups);
    if (k >= p.count) {
        return;
    }
    let l = labels[k];
    if (l == 0u || l > p.n_labels) {
        return;
    }
    let base = (l - 1u) * W;
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

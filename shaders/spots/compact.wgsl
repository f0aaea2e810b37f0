// Spots from the compact list of strong pixels (sparse on diffraction
// frames: ~1000 of 18 million), so that labelling and measuring cost
// nothing per background pixel. Union-find as segment/label.wgsl (hook the
// larger root under the smaller with atomicMin: a component's root is its
// first pixel in raster order, which is scipy's numbering order); each root
// takes a slot in `acc`, where its spot's exact sums accumulate (integer
// atomics, as measure.wgsl). The host sorts the slots by root index.

struct Params {
    w: u32,
    fmt: u32,
    strong_at: u32,   // index of the first strong-pixel index in `list`
    strong_cap: u32,
    spot_cap: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

const W: u32 = 23u;   // measure.wgsl's 22 words + the root's pixel index
const HEAD: u32 = 4u; // acc[0..4]: undecided (first, final), strong pixels, spots
const N: u32 = 0u;
const SV: u32 = 1u;
const SV2: u32 = 3u;
const RMIN: u32 = 6u;
const RMAX: u32 = 7u;
const CMIN: u32 = 8u;
const CMAX: u32 = 9u;
const SVR: u32 = 10u;
const SVC: u32 = 13u;
const SVR2: u32 = 16u;
const SVC2: u32 = 19u;
const ROOT: u32 = 22u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> list: array<atomic<u32>>;
@group(0) @binding(2) var<storage, read_write> parent: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> slot_of: array<u32>;
@group(0) @binding(4) var<storage, read> strong: array<u32>;
@group(0) @binding(5) var<storage, read> image: array<u32>;
@group(0) @binding(6) var<storage, read_write> acc: array<atomic<u32>>;

fn keep() {
    if (p.w == 0xffffffffu) {
        slot_of[0] = strong[0] + image[0];
        atomicAdd(&parent[0], 0u);
        atomicAdd(&list[0], 0u);
        atomicAdd(&acc[0], 0u);
    }
}

fn n_strong() -> u32 {
    return min(atomicLoad(&list[3]), p.strong_cap);
}

fn strong_pixel(i: u32) -> u32 {
    return atomicLoad(&list[p.strong_at + i]);
}

fn find(x: u32) -> u32 {
    var r = x;
    var up = atomicLoad(&parent[r]);
    while (up != r) {
        r = up;
        up = atomicLoad(&parent[r]);
    }
    return r;
}

fn unite(a0: u32, b0: u32) {
    var a = a0;
    var b = b0;
    var done = false;
    while (!done) {
        a = find(a);
        b = find(b);
        if (a == b) {
            done = true;
        } else {
            if (a < b) {
                let t = a;
                a = b;
                b = t;
            }
            // Hook the larger root a under b, unless a stopped being a root.
            let old = atomicMin(&parent[a], b);
            if (old == a) {
                done = true;
            } else {
                a = old;
            }
        }
    }
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

// The sums cleared (bounding-box minima to all ones); the header zeroed.
@compute @workgroup_size(256)
fn clear(@builtin(global_invocation_id) gid: vec3<u32>,
         @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let i = thread_index(gid, groups);
    if (i >= HEAD + p.spot_cap * W) {
        return;
    }
    var v = 0u;
    if (i >= HEAD) {
        let f = (i - HEAD) % W;
        v = select(0u, 0xffffffffu, f == RMIN || f == CMIN);
    }
    atomicStore(&acc[i], v);
}

@compute @workgroup_size(256)
fn init(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let i = thread_index(gid, groups);
    if (i >= n_strong()) {
        return;
    }
    let k = strong_pixel(i);
    atomicStore(&parent[k], k);
}

// 4-connectivity: unite with the strong pixels to the left and above.
@compute @workgroup_size(256)
fn unite_neighbours(@builtin(global_invocation_id) gid: vec3<u32>,
                    @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let i = thread_index(gid, groups);
    if (i >= n_strong()) {
        return;
    }
    let k = strong_pixel(i);
    if (k % p.w != 0u && strong[k - 1u] == 1u) {
        unite(k, k - 1u);
    }
    if (k >= p.w && strong[k - p.w] == 1u) {
        unite(k, k - p.w);
    }
}

// Every root takes a slot (order arbitrary: the host sorts by ROOT).
@compute @workgroup_size(256)
fn roots(@builtin(global_invocation_id) gid: vec3<u32>,
         @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let i = thread_index(gid, groups);
    if (i >= n_strong()) {
        return;
    }
    let k = strong_pixel(i);
    if (atomicLoad(&parent[k]) == k) {
        let s = atomicAdd(&acc[3], 1u);
        slot_of[k] = s;
        if (s < p.spot_cap) {
            atomicStore(&acc[HEAD + s * W + ROOT], k);
        }
    }
}

@compute @workgroup_size(256)
fn accumulate(@builtin(global_invocation_id) gid: vec3<u32>,
              @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let i = thread_index(gid, groups);
    if (i == 0u) {
        atomicStore(&acc[0], atomicLoad(&list[0]));
        atomicStore(&acc[1], atomicLoad(&list[2]));
        atomicStore(&acc[2], atomicLoad(&list[3]));
    }
    if (i >= n_strong()) {
        return;
    }
    let k = strong_pixel(i);
    let s = slot_of[find(k)];
    if (s >= p.spot_cap) {
        return;
    }
    let base = HEAD + s * W;
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

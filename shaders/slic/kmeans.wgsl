// SLIC k-means iterations (skimage.segmentation.slic's _slic_cython),
// pixel-centric and deterministic:
// - assign: one thread per LANES pixels along x looks at the centres seeded within
//   `radius` grid cells of each pixel's cell, keeps those whose skimage
//   window (trunc(c - 2 win) <= p < trunc(c + 2 win + 1)) holds the pixel,
//   and takes the smallest distance, ties to the lower index (skimage's
//   loop over the centres in index order with a strict `<`). The centres
//   nearest the pixel come first, so that the rest can be skipped on a
//   bound (see `assign`). The f32 arithmetic follows skimage's order; the
//   CPU twin (slic/cpu.rs) repeats it in index order.
// - accumulate: integer sums per centre (count, coordinates, fixed-point
//   features) in 64-bit two-word atomics, one set per run of equal labels
//   in a workgroup: exact, so independent of order and grouping.
// - finalize: one thread per centre turns its sums into the means and
//   clears them for the next iteration; an empty centre dies (skimage's
//   NaN centre never wins again).
// - colour_max: SLICO's per-centre maximum colour distance (atomicMax on
//   the bits of non-negative floats, which order like the floats).

// One slab of the volume along z: n = nx * ny * nz pixels from plane z0;
// centres and sums are shared by all slabs.
struct Params {
    nx: u32,
    ny: u32,
    nz: u32,
    nc: u32,
    n: u32,
    n_centres: u32,
    start_x: u32,
    start_y: u32,
    start_z: u32,
    step_x: u32,
    step_y: u32,
    step_z: u32,
    count_x: u32,
    count_y: u32,
    count_z: u32,
    win_x: u32,
    win_y: u32,
    win_z: u32,
    // Word of `maxdist` where the drift and reach per axis start (drift_at).
    drift_word: u32,
    slic_zero: u32,
    use_mask: u32,
    sx: f32,
    sy: f32,
    sz: f32,
    spatial_weight: f32,
    scale: f32,
    inv_scale: f32,
    ratio: f32,  // 1 / compactness
    z0: u32,
    // Cells of the window step per axis (slic/cells.wgsl, masked images).
    cells_x: u32,
    cells_y: u32,
    cells_z: u32,
    // Equal float32 distances are told apart by the exact sums of their
    // parts (slic/cpu.rs: Dist; not for float32 input, as skimage).
    exact_ties: u32,
}

const NONE: u32 = 0xffffffffu;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> features: array<f32>;  // n * nc
// (z, y, x, features...) per centre, padded to whole vec4s (stride()): a
// grey centre is one 16-byte load in `assign`. A dead centre's z is DEAD_Z.
@group(0) @binding(2) var<storage, read_write> centres: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> labels: array<u32>;
@group(0) @binding(4) var<storage, read_write> accum: array<atomic<u32>>; // count, 2 words per sum
@group(0) @binding(5) var<storage, read_write> maxdist: array<atomic<u32>>;
@group(0) @binding(6) var<storage, read> maskw: array<u32>;            // one bit per pixel
// [iteration of the batch (finalize counts it up), min key, max key, NaN (1)
// / inf (2) flags], then one change flag per iteration of a batch (word 4 +
// the iteration): the iterations of a batch share one uniform and bind group.
@group(0) @binding(7) var<storage, read_write> changed: array<atomic<u32>>;

// `assign` reads the features and centres through these read-only views
// of bindings 1 and 2 (the other entry points write them): loads from
// buffers declared read-only may take the GPU's read-only data path.
@group(0) @binding(1) var<storage, read> features_in: array<f32>;
@group(0) @binding(2) var<storage, read> centres_in: array<vec4<f32>>;

// The z of a dead centre: no window holds a pixel with it (c - two < q + 1
// but never q + 1 <= c + two + 1), so `assign` needs no alive flag load.
const DEAD_Z: f32 = -3.0e38;

// Every entry point binds 0..7 (the recorder binds them all): this never
// runs but keeps each binding in each entry's layout.
fn keep() {
    if (p.n == NONE) {
        centres[0] = vec4<f32>(features[0]);
        labels[0] = maskw[0];
        atomicAdd(&accum[0], 0u);
        atomicMax(&maxdist[0], 0u);
        atomicOr(&changed[0], 0u);
    }
}

// keep() for `assign`, through the read-only views.
fn keep_assign() {
    if (p.n == NONE) {
        labels[0] = maskw[0] + bitcast<u32>(features_in[0] + centres_in[0].x);
        atomicAdd(&accum[0], 0u);
        atomicMax(&maxdist[0], 0u);
        atomicOr(&changed[0], 0u);
    }
}

fn thread_index(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * 256u;
}

fn in_mask(i: u32) -> bool {
    return p.use_mask == 0u || ((maskw[i >> 5u] >> (i & 31u)) & 1u) != 0u;
}

// Floats per centre (slic/mod.rs: gpu_stride).
fn stride() -> u32 {
    return (p.nc + 6u) / 4u * 4u;
}

// Float i of the centres.
fn cget(i: u32) -> f32 {
    return centres[i >> 2u][i & 3u];
}

fn cset(i: u32, v: f32) {
    centres[i >> 2u][i & 3u] = v;
}

// skimage's window test along one axis, trunc(max(c - two, 0)) <= q <
// trunc(min(c + two + 1, n)) with two = 2 win (slic/cpu.rs keeps it
// literally), without trunc, max and min: for integers 0 <= q < n and
// c >= 0, trunc(max(x, 0)) <= q <=> x < q + 1, and q < trunc(min(y, n))
// <=> q + 1 <= y. The same f32 values are compared, so the result is the
// same while q + 1 is exact in f32 (axes up to 2^24 pixels); `q1` =
// f32(q + 1) and `two` are the pixel's, computed once.
fn in_window(c: f32, q1: f32, two: f32) -> bool {
    return c - two < q1 && q1 <= c + two + 1.0;
}

// The seed cell of coordinate q along one axis.
fn own_cell(q: u32, start: u32, step: u32, count: u32) -> u32 {
    if (q > start) {
        return min((q - start + step / 2u) / step, count - 1u);
    }
    return 0u;
}

// Seed indices within `radius` cells of coordinate q: (first, last).
fn cands(q: u32, start: u32, step: u32, count: u32, radius: u32) -> vec2<u32> {
    let own = own_cell(q, start, step, count);
    let lo = select(0u, own - radius, own >= radius);
    let hi = min(own + radius, count - 1u);
    return vec2<u32>(lo, hi);
}

// The seed cells searched on each side of a pixel's own along axis a (z,
// y, x = 0, 1, 2): every centre whose window can hold the pixel lies
// within it, however far centres have drifted (slic/host.rs:
// search_radius, which the CPU twin computes the same way; a radius one
// larger after a different rounding only adds candidates that the window
// test rejects).
fn search_radius(a: u32, step: u32) -> u32 {
    let drift = bitcast<f32>(atomicLoad(&maxdist[p.drift_word + a]));
    let reach = bitcast<f32>(atomicLoad(&maxdist[p.drift_word + 3u + a]));
    return u32(floor((drift + reach + 0.5) / f32(step)));
}

// The a-th seed index along one axis (a = 0 ... 2 radius), or NONE past
// the range: from the pixel's own cell outwards (own, own - 1, own + 1,
// ...), so that the nearest centres come first and bound the rest; in
// index order for SLICO (see `assign`).
fn axis_at(a: u32, r: vec2<u32>, own: u32, outwards: bool) -> u32 {
    var i = r.x + a;
    if (outwards) {
        let off = (a + 1u) / 2u;
        if ((a & 1u) == 1u) {
            i = select(NONE, own - off, own >= off);
        } else {
            i = own + off;
        }
    }
    return select(NONE, i, i >= r.x && i <= r.y);
}

fn colour_distance(i: u32, base: u32) -> f32 {
    var d = 0.0;
    for (var c = 0u; c < p.nc; c++) {
        let t = features[i * p.nc + c] - cget(base + 3u + c);
        d += t * t;
    }
    return d;
}

// The colour distances of the LANES pixels from i0 on (reads past the
// slab's end are clamped; those lanes are never used).
fn colour_distances(i0: u32, base: u32) -> vec4<f32> {
    let last = p.n - 1u;
    var d = vec4<f32>(0.0);
    for (var c = 0u; c < p.nc; c++) {
        let f = vec4<f32>(features_in[min(i0, last) * p.nc + c],
                          features_in[min(i0 + 1u, last) * p.nc + c],
                          features_in[min(i0 + 2u, last) * p.nc + c],
                          features_in[min(i0 + 3u, last) * p.nc + c]);
        let j = base + 3u + c;
        let t = f - vec4<f32>(centres_in[j >> 2u][j & 3u]);
        d += t * t;
    }
    return d;
}

var<workgroup> low_keys: array<u32, 256>;
var<workgroup> high_keys: array<u32, 256>;

// Raw float32 input: its minimum and maximum as order-preserving keys, and
// flags for NaN and inf (tested on the bits: compilers may assume no NaN).
// Each workgroup reduces its keys first: an atomic on the same two words
// from every pixel serialised the pass.
@compute @workgroup_size(256)
fn minmax(@builtin(global_invocation_id) gid: vec3<u32>,
          @builtin(local_invocation_index) li: u32,
          @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let i = thread_index(gid, groups);
    var low = 0xffffffffu;
    var high = 0u;
    if (i < p.n) {
        let b = bitcast<u32>(features[i]);
        if ((b & 0x7f800000u) == 0x7f800000u) {
            atomicOr(&changed[3], select(2u, 1u, (b & 0x007fffffu) != 0u));
        } else {
            let key = select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
            low = key;
            high = key;
        }
    }
    low_keys[li] = low;
    high_keys[li] = high;
    workgroupBarrier();
    for (var half = 128u; half > 0u; half >>= 1u) {
        if (li < half) {
            low_keys[li] = min(low_keys[li], low_keys[li + half]);
            high_keys[li] = max(high_keys[li], high_keys[li + half]);
        }
        workgroupBarrier();
    }
    if (li == 0u && low_keys[0] <= high_keys[0]) {
        atomicMin(&changed[1], low_keys[0]);
        atomicMax(&changed[2], high_keys[0]);
    }
}

// The float32 value of an order-preserving key (minmax).
fn unkey(k: u32) -> f32 {
    return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}

// skimage's rescaling to [0, 1] and scaling by 1 / compactness, in float32
// in the order of the CPU twin, with minmax's minimum and maximum read on
// the GPU (no round trip between the two; NaN or inf input is reported
// from the flags after the k-means submission).
@compute @workgroup_size(256)
fn rescale(@builtin(global_invocation_id) gid: vec3<u32>,
           @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let i = thread_index(gid, groups);
    if (i >= p.n) {
        return;
    }
    let lo = unkey(atomicLoad(&changed[1]));
    let hi = unkey(atomicLoad(&changed[2]));
    let d = features[i] - lo;
    var v = d;
    if (hi != lo) {
        v = d / (hi - lo);
    }
    features[i] = v * p.ratio;
}

// Every pixel starts with no centre, so the first assignment counts as a
// change; the sums start at zero (finalize clears them after each use).
@compute @workgroup_size(256)
fn init(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let i = thread_index(gid, groups);
    if (i < p.n) {
        labels[i] = NONE;
    }
    if (i < p.n_centres * words()) {
        atomicStore(&accum[i], 0u);
    }
}

// x, opaque to the compiler: with exact_ties set, p.exact_ties - 1 is 0,
// which the compiler does not know, so it cannot rewrite (a + b) - a as b
// (Mesa's NIR does for operations not marked exact, which made the
// two-sum's error 0).
fn opaque(x: vec4<f32>) -> vec4<f32> {
    return bitcast<vec4<f32>>(bitcast<vec4<u32>>(x) ^ vec4<u32>(p.exact_ties - 1u));
}

// The rounding error of s = a + b, exactly (Knuth's two-sum; a + b = s +
// error), each step through `opaque`.
fn sum_error(a: vec4<f32>, b: vec4<f32>, s: vec4<f32>) -> vec4<f32> {
    let back = opaque(opaque(s) - a);
    return opaque(a - opaque(s - back)) + opaque(b - back);
}

// 1 + 2^-20: far above the rounding of a fused multiply-add, far below
// any real gap.
const SLACK: f32 = 1.00000095367431640625;

// Pixels per `assign` thread, consecutive along x (slic/mod.rs:
// ASSIGN_LANES): they share the candidate loop, the centre loads, the z and
// y window tests and dz^2 + dy^2, which dominate the cost per candidate.
const LANES: u32 = 4u;

@compute @workgroup_size(256)
fn assign(@builtin(global_invocation_id) gid: vec3<u32>,
          @builtin(num_workgroups) groups: vec3<u32>) {
    keep_assign();
    let t = thread_index(gid, groups);
    let quads = (p.nx + LANES - 1u) / LANES;
    let row = t / quads;
    if (row >= p.n / p.nx) {
        return;
    }
    let x0 = (t % quads) * LANES;
    let y = row % p.ny;
    let z = p.z0 + row / p.ny;
    let i0 = row * p.nx + x0;
    let lane = vec4<u32>(0u, 1u, 2u, 3u);
    let xs = vec4<u32>(x0) + lane;
    // Lanes past the row's end or outside the mask get an empty seed range,
    // so they keep NONE, as a masked pixel does.
    let radius_x = search_radius(2u, p.step_x);
    var lo = vec4<u32>(1u);
    var hi = vec4<u32>(0u);
    var f0 = vec4<f32>(0.0);
    var any_lane = false;
    for (var l = 0u; l < LANES; l++) {
        if (xs[l] < p.nx && in_mask(i0 + l)) {
            let r = cands(xs[l], p.start_x, p.step_x, p.count_x, radius_x);
            lo[l] = r.x;
            hi[l] = r.y;
            any_lane = true;
            if (p.nc == 1u) {
                f0[l] = features_in[i0 + l];
            }
        }
    }
    var best = vec4<u32>(NONE);
    var best_d = vec4<f32>(0.0);
    // The best distance's parts, for exact ties.
    var best_sp = vec4<f32>(0.0);
    var best_col = vec4<f32>(0.0);
    if (any_lane) {
        let radius_z = search_radius(0u, p.step_z);
        let radius_y = search_radius(1u, p.step_y);
        let rz = cands(z, p.start_z, p.step_z, p.count_z, radius_z);
        let ry = cands(y, p.start_y, p.step_y, p.count_y, radius_y);
        let own_z = own_cell(z, p.start_z, p.step_z, p.count_z);
        let own_y = own_cell(y, p.start_y, p.step_y, p.count_y);
        // The lanes' seed ranges along x are monotone in x: their union.
        let rx = vec2<u32>(min(min(lo.x, lo.y), min(lo.z, lo.w)),
                           max(max(hi.x, hi.y), max(hi.z, hi.w)));
        let st = stride();
        // ix in [lo, hi] as one unsigned comparison, ix - lo <= hi - lo;
        // an empty lane's (hi < lo) start is NONE, which no ix reaches.
        let empty = hi < lo;
        let lo_t = select(lo, vec4<u32>(NONE), empty);
        let span = select(hi - lo, vec4<u32>(0u), empty);
        let q1z = f32(z + 1u);
        let q1y = f32(y + 1u);
        let q1x = vec4<f32>(xs + vec4<u32>(1u));
        let xf = vec4<f32>(xs);
        let two_x = f32(2u * p.win_x);
        let two_y = f32(2u * p.win_y);
        let two_z = f32(2u * p.win_z);
        let grey = p.nc == 1u;
        // The winner is the smallest distance, ties to the lower index,
        // whatever the order of the candidates: skimage's loop over the
        // centres in index order with a strict `<`. Without SLICO every
        // distance is finite, so the candidates go from the own cell
        // outwards and one whose spatial part alone along z and y exceeds
        // every lane's best so far is skipped (the rounded sums only grow
        // as terms are added, so it could not win). SLICO's colour
        // distance may be 0 / 0 = NaN, which wins only as the first
        // candidate in index order: there the order stays and nothing is
        // skipped.
        let outwards = p.slic_zero == 0u;
        var bound = 3.0e38;
        for (var az = 0u; az <= 2u * radius_z; az++) {
            let iz = axis_at(az, rz, own_z, outwards);
            if (iz == NONE) {
                continue;
            }
            // A whole layer, then a whole row, of centres skipped on the
            // least spatial distance any of them can have (the slack
            // covers a compiler's fused multiply-adds in the candidates'
            // sums).
            var gz = 0.0;
            if (outwards) {
                gz = gap(f32(z), range_at(layer_word(iz)), p.sz);
                if (gz * gz * p.spatial_weight > bound * SLACK) {
                    continue;
                }
            }
            for (var ay = 0u; ay <= 2u * radius_y; ay++) {
                let iy = axis_at(ay, ry, own_y, outwards);
                if (iy == NONE) {
                    continue;
                }
                if (outwards) {
                    let gy = gap(f32(y), range_at(row_word(iz, iy)), p.sy);
                    if ((gz * gz + gy * gy) * p.spatial_weight > bound * SLACK) {
                        continue;
                    }
                }
                let row = (iz * p.count_y + iy) * p.count_x;
                // The next candidate's load is issued before this one's
                // tests, so its latency overlaps them.
                var next = centres_in[((row + rx.x) * st) >> 2u];
                for (var ix = rx.x; ix <= rx.y; ix++) {
                    let k = row + ix;
                    let b = k * st;
                    // One load for the coordinates (and a grey centre's
                    // feature); a dead centre fails the first test (DEAD_Z).
                    let c4 = next;
                    next = centres_in[((row + min(ix + 1u, rx.y)) * st) >> 2u];
                    let cz = c4.x;
                    if (!in_window(cz, q1z, two_z)) {
                        continue;
                    }
                    let cy = c4.y;
                    if (!in_window(cy, q1y, two_y)) {
                        continue;
                    }
                    // skimage's order, as in the CPU twin:
                    // (dz^2 + dy^2 + dx^2) * weight + colour.
                    let dz = p.sz * (cz - f32(z));
                    let dy = p.sy * (cy - f32(y));
                    let dzy = dz * dz + dy * dy;
                    if (dzy * p.spatial_weight > bound) {
                        continue;
                    }
                    let cx = c4.z;
                    let inside = (vec4<f32>(cx - two_x) < q1x) & (q1x <= vec4<f32>(cx + two_x + 1.0))
                        & (vec4<u32>(ix) - lo_t <= span);
                    if (!any(inside)) {
                        continue;
                    }
                    let dx = p.sx * (vec4<f32>(cx) - xf);
                    let sp = (vec4<f32>(dzy) + dx * dx) * p.spatial_weight;
                    var col = vec4<f32>(0.0);
                    if (grey) {
                        let c = f0 - vec4<f32>(c4.w);
                        col = c * c;
                    } else {
                        col = colour_distances(i0, b);
                    }
                    if (p.slic_zero != 0u) {
                        col = col / vec4<f32>(bitcast<f32>(atomicLoad(&maxdist[k])));
                    }
                    let d = sp + col;
                    let kv = vec4<u32>(k);
                    // Equal sums: with exact_ties, ordered by their rounding
                    // errors (two-sum), i.e. as their exact values (slic/
                    // cpu.rs: Dist), computed only when a lane ties (rare).
                    var tie_wins = kv < best;
                    let tied = inside & (d == best_d) & (best != vec4<u32>(NONE));
                    if (p.exact_ties != 0u && any(tied)) {
                        let e = sum_error(sp, col, d);
                        let best_e = sum_error(best_sp, best_col, best_d);
                        tie_wins = (e < best_e) | ((e == best_e) & tie_wins);
                    }
                    let better = inside & ((best == vec4<u32>(NONE)) | (d < best_d)
                        | ((d == best_d) & tie_wins));
                    if (any(better)) {
                        best = select(best, kv, better);
                        best_d = select(best_d, d, better);
                        best_sp = select(best_sp, sp, better);
                        best_col = select(best_col, col, better);
                        if (outwards) {
                            // Lanes without a candidate yet (NONE) keep
                            // the bound open.
                            let open = (best == vec4<u32>(NONE)) & !empty;
                            let m = select(best_d, vec4<f32>(3.0e38), open);
                            let live = select(m, vec4<f32>(-1.0), empty);
                            bound = max(max(live.x, live.y), max(live.z, live.w));
                        }
                    }
                }
            }
        }
    }
    for (var l = 0u; l < LANES; l++) {
        let i = i0 + l;
        if (xs[l] < p.nx && labels[i] != best[l]) {
            labels[i] = best[l];
            // Set once, not an atomic from every changed pixel (all of them
            // change in the first pass).
            let flag = 4u + atomicLoad(&changed[0]);
            if (atomicLoad(&changed[flag]) == 0u) {
                atomicOr(&changed[flag], 1u);
            }
        }
    }
}

fn words() -> u32 {
    return 1u + 2u * (3u + p.nc);
}

// Adds the 64-bit two's complement value s (low word, high word) to the
// word pair at w.
fn add64(w: u32, s: vec2<u32>) {
    let old = atomicAdd(&accum[w], s.x);
    var hi = s.y;
    if (old + s.x < old) {
        hi += 1u;
    }
    if (hi != 0u) {
        atomicAdd(&accum[w + 1u], hi);
    }
}

// s + v in 64 bits, v sign-extended.
fn plus(s: vec2<u32>, v: i32) -> vec2<u32> {
    let u = bitcast<u32>(v);
    let lo = s.x + u;
    return vec2<u32>(lo, s.y + select(0u, 0xffffffffu, v < 0) + select(0u, 1u, lo < u));
}

// s + v in 64 bits, v unsigned.
fn plus_u32(s: vec2<u32>, v: u32) -> vec2<u32> {
    let lo = s.x + v;
    return vec2<u32>(lo, s.y + select(0u, 1u, lo < v));
}

var<workgroup> run_labels: array<u32, 256>;

// One thread per run of equal labels within the workgroup adds the run's
// sums: a centre's pixels are mostly neighbours, so far fewer atomics land
// on the same words than with one set per pixel. The sums are integers,
// so any grouping gives the same result.
@compute @workgroup_size(256)
fn accumulate(@builtin(global_invocation_id) gid: vec3<u32>,
              @builtin(local_invocation_index) li: u32,
              @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let i = thread_index(gid, groups);
    var k = NONE;
    if (i < p.n) {
        k = labels[i];
    }
    run_labels[li] = k;
    workgroupBarrier();
    if (k == NONE || (li > 0u && run_labels[li - 1u] == k)) {
        return;
    }
    var end = li + 1u;
    while (end < 256u && run_labels[end] == k) {
        end++;
    }
    let len = end - li;
    let last = i + len; // past the run; labels past p.n are NONE
    let w = k * words();
    atomicAdd(&accum[w], len);
    var sz = vec2<u32>();
    var sy = vec2<u32>();
    var sx = vec2<u32>();
    let x = i % p.nx;
    if (x + len <= p.nx) {
        // Within one row (nearly every run): the sums in closed form, not a
        // loop of three divisions per pixel by one thread of the run (the
        // pass was bound by those loops). Coordinates are below 2^24, so
        // len * coordinate < 2^32.
        let y = (i / p.nx) % p.ny;
        let z = p.z0 + i / (p.nx * p.ny);
        sz = plus_u32(sz, len * z);
        sy = plus_u32(sy, len * y);
        sx = plus_u32(plus_u32(sx, len * x), len * (len - 1u) / 2u);
    } else {
        for (var j = i; j < last; j++) {
            sz = plus(sz, i32(p.z0 + j / (p.nx * p.ny)));
            sy = plus(sy, i32((j / p.nx) % p.ny));
            sx = plus(sx, i32(j % p.nx));
        }
    }
    add64(w + 1u, sz);
    add64(w + 3u, sy);
    add64(w + 5u, sx);
    for (var c = 0u; c < p.nc; c++) {
        var sf = vec2<u32>();
        for (var j = i; j < last; j++) {
            sf = plus(sf, i32(round(features[j * p.nc + c] * p.scale)));
        }
        add64(w + 7u + 2u * c, sf);
    }
}

fn sum_at(w: u32) -> f32 {
    let lo = atomicLoad(&accum[w]);
    let hi = atomicLoad(&accum[w + 1u]);
    atomicStore(&accum[w], 0u);
    atomicStore(&accum[w + 1u], 0u);
    return f32(bitcast<i32>(hi)) * 4294967296.0 + f32(lo);
}

@compute @workgroup_size(256)
fn finalize(@builtin(global_invocation_id) gid: vec3<u32>,
            @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let k = thread_index(gid, groups);
    if (k == 0u) {
        // The next iteration's change flag (assign reads the count).
        atomicAdd(&changed[0], 1u);
    }
    if (k >= p.n_centres) {
        return;
    }
    let w = k * words();
    let count = atomicLoad(&accum[w]);
    atomicStore(&accum[w], 0u);
    let b = k * stride();
    if (count == 0u) {
        cset(b, DEAD_Z);
        return;
    }
    let n = f32(count);
    for (var a = 0u; a < 3u; a++) {
        cset(b + a, sum_at(w + 1u + 2u * a) / n);
    }
    for (var c = 0u; c < p.nc; c++) {
        cset(b + 3u + c, sum_at(w + 7u + 2u * c) / n * p.inv_scale);
    }
    widen_ranges(k, cget(b), cget(b + 1u));
    widen_drift(k, b);
}

// The largest distance along each axis of a centre from its seed, over
// the centres and iterations so far (the search radius follows it).
fn widen_drift(k: u32, b: u32) {
    let ix = k % p.count_x;
    let iy = (k / p.count_x) % p.count_y;
    let iz = k / (p.count_y * p.count_x);
    let seed = vec3<f32>(f32(p.start_z + iz * p.step_z), f32(p.start_y + iy * p.step_y),
                         f32(p.start_x + ix * p.step_x));
    for (var a = 0u; a < 3u; a++) {
        atomicMax(&maxdist[p.drift_word + a], bitcast<u32>(abs(cget(b + a) - seed[a])));
    }
}

// Words of `maxdist` after the centres' SLICO maxima: for each z layer of
// seeds (index iz), then for each row (iz, iy), the least and the largest
// z (layers) or y (rows) any of its live centres has had in this call, as
// the bits of non-negative floats (which order like the floats). The host
// starts them at the seeds (slic/mod.rs: centre_ranges); they only widen,
// so they always hold the centres' current coordinates.
fn layer_word(iz: u32) -> u32 {
    return p.n_centres + 2u * iz;
}

fn row_word(iz: u32, iy: u32) -> u32 {
    return p.n_centres + 2u * p.count_z + 2u * (iz * p.count_y + iy);
}

fn widen_ranges(k: u32, z: f32, y: f32) {
    let iz = k / (p.count_y * p.count_x);
    let iy = (k / p.count_x) % p.count_y;
    atomicMin(&maxdist[layer_word(iz)], bitcast<u32>(z));
    atomicMax(&maxdist[layer_word(iz) + 1u], bitcast<u32>(z));
    atomicMin(&maxdist[row_word(iz, iy)], bitcast<u32>(y));
    atomicMax(&maxdist[row_word(iz, iy) + 1u], bitcast<u32>(y));
}

// s |q - c| at least, for every c in the range of bits [lo, hi], as `assign`
// computes it: the f32 operations are monotone, so the candidate's own
// value is at least this one. An empty range (lo = +inf) gives +inf.
fn gap(q: f32, range: vec2<u32>, s: f32) -> f32 {
    let lo = bitcast<f32>(range.x);
    let hi = bitcast<f32>(range.y);
    if (lo > q) {
        return s * (lo - q);
    }
    if (hi < q) {
        return s * (q - hi);
    }
    return 0.0;
}

fn range_at(w: u32) -> vec2<u32> {
    return vec2<u32>(atomicLoad(&maxdist[w]), atomicLoad(&maxdist[w + 1u]));
}

@compute @workgroup_size(256)
fn colour_max(@builtin(global_invocation_id) gid: vec3<u32>,
              @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let i = thread_index(gid, groups);
    if (i >= p.n) {
        return;
    }
    let k = labels[i];
    if (k == NONE) {
        return;
    }
    let d = colour_distance(i, k * stride());
    atomicMax(&maxdist[k], bitcast<u32>(d));
}

// Median of any footprint (offsets in a buffer), appended to median.wgsl:
// the rank-th key is found bit by bit, counting the keys below a candidate.
// Needs integer keys (median_key32.wgsl or median_key64.wgsl).

@group(0) @binding(3) var<storage, read> offsets: array<vec4<i32>>;

@compute @workgroup_size(256)
fn median_search(@builtin(global_invocation_id) gid: vec3<u32>,
                 @builtin(num_workgroups) groups: vec3<u32>) {
    var i = 0u;
    var c = vec3<i32>();
    if (position(gid, groups, &i, &c)) {
        key_store(i, finish(key_at(centre_index(c)), search_select(c)));
    }
}

// The rank-th key of the window around c, for any footprint.
fn search_select(c: vec3<i32>) -> Key {
    var lo = load(c + offsets[0].xyz);
    var hi = lo;
    for (var k = 1u; k < p.count; k++) {
        let v = load(c + offsets[k].xyz);
        lo = key_min(lo, v);
        hi = key_max(hi, v);
    }
    // The answer shares the bits above the highest bit where min and max
    // differ; decide the rest from the top: keep a bit when at most `rank`
    // keys lie below the candidate.
    var r = lo;
    if (any(lo != hi)) {
        let top = key_highest_bit(key_xor(lo, hi));
        r = key_clear_below(lo, top + 1u);
        for (var b = i32(top); b >= 0; b--) {
            let candidate = key_set_bit(r, u32(b));
            var below = 0u;
            for (var k = 0u; k < p.count; k++) {
                below += u32(key_lt(load(c + offsets[k].xyz), candidate));
            }
            if (below <= p.rank) {
                r = candidate;
            }
        }
    }
    return r;
}

// ---- large windows: one workgroup per output ----
//
// median_search runs count * (key bits + 1) loop iterations in one
// invocation. Mesa's llvmpipe (lavapipe, and GL on llvmpipe) ends every
// invocation's loops after 65535 iterations in all, silently: a 47 x 47
// window returned a half-finished search. Here SEARCH_GROUP invocations
// share the window of one output (offsets lid, lid + SEARCH_GROUP, ...), so
// that each runs at most count / SEARCH_GROUP * (bits + 1) iterations: under
// the limit for every footprint up to 65536 elements, 64-bit keys
// included (crates/core/src/filters/median/gpu.rs picks the entry). The
// counts are summed in workgroup memory; every decision is workgroup-uniform.

const SEARCH_GROUP: u32 = 128u;

var<workgroup> group_lo: array<Key, SEARCH_GROUP>;
var<workgroup> group_hi: array<Key, SEARCH_GROUP>;
var<workgroup> group_below: atomic<u32>;
var<workgroup> group_total: u32;

// Dispatched as one workgroup per output element (x + y * groups.x).
@compute @workgroup_size(SEARCH_GROUP)
fn median_search_group(@builtin(workgroup_id) wid: vec3<u32>,
                       @builtin(num_workgroups) groups: vec3<u32>,
                       @builtin(local_invocation_index) lid: u32) {
    let i = wid.x + wid.y * groups.x;
    let n = p.out_shape.xyz;
    if (i >= n.x * n.y * n.z) {
        return;
    }
    let c = vec3<i32>(vec3<u32>(i % n.x, (i / n.x) % n.y, i / (n.x * n.y)) + p.offset.xyz);
    // Invocations past the footprint's end take its last element again:
    // harmless to a minimum and a maximum.
    var lo = load(c + offsets[min(lid, p.count - 1u)].xyz);
    var hi = lo;
    for (var k = lid + SEARCH_GROUP; k < p.count; k += SEARCH_GROUP) {
        let v = load(c + offsets[k].xyz);
        lo = key_min(lo, v);
        hi = key_max(hi, v);
    }
    group_lo[lid] = lo;
    group_hi[lid] = hi;
    if (lid == 0u) {
        atomicStore(&group_below, 0u); // workgroup memory is not zeroed
    }
    workgroupBarrier();
    for (var s = SEARCH_GROUP / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            group_lo[lid] = key_min(group_lo[lid], group_lo[lid + s]);
            group_hi[lid] = key_max(group_hi[lid], group_hi[lid + s]);
        }
        workgroupBarrier();
    }
    let low = workgroupUniformLoad(&group_lo[0]);
    let high = workgroupUniformLoad(&group_hi[0]);
    // As search_select, with the count below each candidate summed over
    // the workgroup.
    var r = low;
    if (any(low != high)) {
        let top = key_highest_bit(key_xor(low, high));
        r = key_clear_below(low, top + 1u);
        for (var b = i32(top); b >= 0; b--) {
            let candidate = key_set_bit(r, u32(b));
            var below = 0u;
            for (var k = lid; k < p.count; k += SEARCH_GROUP) {
                below += u32(key_lt(load(c + offsets[k].xyz), candidate));
            }
            atomicAdd(&group_below, below);
            workgroupBarrier();
            if (lid == 0u) {
                group_total = atomicExchange(&group_below, 0u);
            }
            // Its barriers order this read after the exchange, and the
            // next candidate's additions after every read.
            if (workgroupUniformLoad(&group_total) <= p.rank) {
                r = candidate;
            }
        }
    }
    if (lid == 0u) {
        key_store(i, finish(key_at(centre_index(c)), r));
    }
}

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

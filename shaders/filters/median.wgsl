// Median (rank) filter on ordered integer keys (crates/core/src/keys.rs): the
// selection compares keys, never values rounded to f32, so it is exact for
// every dtype, f64 included. One thread per output element. The key width
// (one or two 32-bit words) comes from median_key32.wgsl or median_key64.wgsl,
// prepended with common/boundary.wgsl by crates/core/src/shaders.rs.
//
// median_network: the footprint is compiled into the shader as a pruned
// sorting network; crates/core/src/filters/median.rs writes the body of
// `network_select` between the GENERATED markers (small footprints), and
// for footprints of 10 or more elements a `median_network_tile` entry that
// reads the windows of its 32 x 8 outputs from one workgroup tile. Larger
// footprints use median_search.wgsl, appended to this file.

struct Params {
    in_shape: vec4<u32>,   // x, y, z of the input box
    out_shape: vec4<u32>,
    offset: vec4<u32>,     // input coordinate of output element (0, 0, 0)
    mode: u32,             // boundary mode, as common/boundary.wgsl
    nan_aware: u32,        // float dtypes: key 0 is NaN, selected as -inf (Mantid Imaging)
    count: u32,            // footprint elements (median_search)
    rank: u32,             // index of the selected key in the sorted window
    cval: vec2<u32>,       // key of the constant (low word, high word)
    outliers: u32,         // 0 median; 1 bright, 2 dark, 3 both; 4 bright with >= (tomopy)
    diff_f32: u32,         // 1: outlier differences in f32 (f32 input); 0: exact on integer keys
    diff: vec2<u32>,       // f32 bits of diff, or the integer threshold t of `difference > t`
    f32_bits: u32,         // 1: the buffers hold raw f32 bits, converted to keys on load
    // The bits of f32 -inf, from the host: a WGSL constant that evaluates to
    // an infinity is a shader-creation error (Tint enforces it, naga not).
    neg_inf_bits: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
// The sample buffers (bindings 1 and 2) and their word access, word_at and
// word_store, come from median_words.wgsl (arrays of u32) or
// median_quads.wgsl (arrays of vec4<u32>, for 16-byte loads and stores).

// Key of input element i; NaN is selected as -inf.
fn fetch(i: u32) -> Key {
    return selectable(key_at(i));
}

// A stored key as the selection sees it: NaN as -inf.
fn selectable(k: Key) -> Key {
    if (p.nan_aware != 0u && key_is_nan(k)) {
        return neg_inf_key();
    }
    return k;
}

// Key at box coordinate c (x, y, z), through the boundary mode.
fn load(c: vec3<i32>) -> Key {
    let n = vec3<i32>(p.in_shape.xyz);
    let x = map_coordinate(c.x, n.x, p.mode);
    let y = map_coordinate(c.y, n.y, p.mode);
    let z = map_coordinate(c.z, n.z, p.mode);
    if (x < 0 || y < 0 || z < 0) {
        return key_param(p.cval);
    }
    return fetch((u32(z) * p.in_shape.y + u32(y)) * p.in_shape.x + u32(x));
}

// Output element index and its input coordinate; false past the end.
fn position(gid: vec3<u32>, groups: vec3<u32>, i: ptr<function, u32>, c: ptr<function, vec3<i32>>) -> bool {
    *i = gid.x + gid.y * groups.x * 256u;
    let n = p.out_shape.xyz;
    if (*i >= n.x * n.y * n.z) {
        return false;
    }
    let o = vec3<u32>(*i % n.x, (*i / n.x) % n.y, *i / (n.x * n.y));
    *c = vec3<i32>(o + p.offset.xyz);
    return true;
}

fn centre_index(c: vec3<i32>) -> u32 {
    return (u32(c.z) * p.in_shape.y + u32(c.y)) * p.in_shape.x + u32(c.x);
}

// ---- GENERATED: begin ----
fn network_select(c: vec3<i32>) -> Key {
    return load(c);
}
// ---- GENERATED: end ----

// One invocation per output element, on a 3-D grid (no index division), or
// on a 1-D grid where the 3-D one would exceed the per-dimension limit.
// (Grid-stride loops hung SwiftShader, Chromium's WebGPU without a GPU.)
@compute @workgroup_size(32, 8, 1)
fn median_network_grid(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (any(gid >= p.out_shape.xyz)) {
        return;
    }
    let i = (gid.z * p.out_shape.y + gid.y) * p.out_shape.x + gid.x;
    let c = vec3<i32>(gid + p.offset.xyz);
    key_store(i, finish(key_at(centre_index(c)), network_select(c)));
}

@compute @workgroup_size(256)
fn median_network(@builtin(global_invocation_id) gid: vec3<u32>,
                  @builtin(num_workgroups) groups: vec3<u32>) {
    var i = 0u;
    var c = vec3<i32>();
    if (position(gid, groups, &i, &c)) {
        key_store(i, finish(key_at(centre_index(c)), network_select(c)));
    }
}


// ---- the full 3 x 3 footprint in the x-y plane: size (3, 3) or (1, 3, 3) ----
//
// Four outputs stacked along y per invocation, from a 6 x 3 window (four
// measured faster than eight or two: more invocations hide
// more latency, fewer share fewer rows). Each
// row triple of the window is sorted once and shared by the up to three
// outputs whose windows hold it; the median of nine is then
// med3(max of the row minima, med3 of the row medians, min of the row
// maxima), exact for any keys. About 20 min/max and 4.5 loads an output,
// against 9 loads and the 3 x 3 network's steps per output in the grid
// entry.

const ROWS_3X3: u32 = 4u;

struct SortedRow {
    lo: Key,
    mid: Key,
    hi: Key,
    centre: Key, // the middle key as stored (NaN kept), for finish()
}

fn med3(a: Key, b: Key, c: Key) -> Key {
    return key_max(key_min(a, b), key_min(key_max(a, b), c));
}

fn sorted_row(a: Key, b: Key, c: Key, centre: Key) -> SortedRow {
    let lo_ab = key_min(a, b);
    let hi_ab = key_max(a, b);
    return SortedRow(key_min(lo_ab, c), key_max(lo_ab, key_min(hi_ab, c)), key_max(hi_ab, c), centre);
}

// Row dy of the window around c, sorted: direct loads inside the box,
// through the boundary mapping near its edges.
fn row_3x3(c: vec3<i32>, dy: i32, interior: bool) -> SortedRow {
    let m = c + vec3<i32>(0, dy, 0);
    if (interior) {
        let i = centre_index(m);
        let centre = key_at(i);
        return sorted_row(fetch(i - 1u), selectable(centre), fetch(i + 1u), centre);
    }
    var centre = neg_inf_key(); // rows outside the box are never an output's centre
    if (m.y >= 0 && m.y < i32(p.in_shape.y)) {
        centre = key_at(centre_index(m));
    }
    return sorted_row(load(m - vec3<i32>(1, 0, 0)), load(m), load(m + vec3<i32>(1, 0, 0)), centre);
}

fn store_3x3(o: vec3<u32>, a: SortedRow, b: SortedRow, c: SortedRow) {
    if (o.y >= p.out_shape.y) {
        return;
    }
    let lo = key_max(key_max(a.lo, b.lo), c.lo);
    let hi = key_min(key_min(a.hi, b.hi), c.hi);
    let m = med3(lo, med3(a.mid, b.mid, c.mid), hi);
    key_store((o.z * p.out_shape.y + o.y) * p.out_shape.x + o.x, finish(b.centre, m));
}

// Grid of (out x, ceil(out y / 8), out z) invocations.
@compute @workgroup_size(32, 8, 1)
fn median_3x3_rows(@builtin(global_invocation_id) gid: vec3<u32>) {
    let o = vec3<u32>(gid.x, gid.y * ROWS_3X3, gid.z);
    if (any(o >= p.out_shape.xyz)) {
        return;
    }
    let c = vec3<i32>(o + p.offset.xyz);
    let n = vec3<i32>(p.in_shape.xyz);
    let interior = c.x >= 1 && c.x + 1 < n.x && c.y >= 1 && c.y + i32(ROWS_3X3) < n.y;
    // Rows roll through three registers: each is loaded and sorted once.
    var above = row_3x3(c, -1, interior);
    var middle = row_3x3(c, 0, interior);
    for (var k = 0u; k < ROWS_3X3; k++) {
        let below = row_3x3(c, i32(k) + 1, interior);
        store_3x3(o + vec3<u32>(0u, k, 0u), above, middle, below);
        above = middle;
        middle = below;
    }
}

// The full 3 x 3 footprint in the x-y plane (size (3, 3) or (1, 3, 3)) for
// 32-bit keys, four outputs along x and QUAD_ROWS along y per invocation,
// where every row of the box is whole quads of words (its width a multiple
// of 4, no halo along x; crates/core/src/filters/median.rs checks). The
// sample buffers are arrays of vec4<u32> here: a row of a window is one
// 16-byte load plus its two neighbours, and the four outputs one 16-byte
// store. The selection is median_3x3_rows' (median.wgsl), lane by lane:
// each row triple sorted once and shared by the three outputs whose
// windows hold it, then med3(max of the row minima, med3 of the row
// medians, min of the row maxima). It measured faster than
// median_3x3_rows (a word per access) with 8 rows (4 rows: the same; 6, 12
// and 16 rows were slower; workgroups of 32 x 4 or 32 x 2: no faster).
// Instruction count shows: the plain median's store without finish()
// (quad_words) is cheaper than the outlier test's. Measured and dropped
// (figures in BENCHMARKS.md): the
// keys either side by subgroup shuffles (no faster, with or without halo
// invocations), loads all issued before the stores (arrays or unrolled
// rows: much slower, registers).

@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;

fn word_at(i: u32) -> u32 { return src[i >> 2u][i & 3u]; }
fn word_store(i: u32, w: u32) { dst[i >> 2u][i & 3u] = w; }

const QUAD_ROWS: u32 = 8u;

// A row of the windows sorted per output column. The outputs' own keys
// (for finish()) are loaded again when stored: carrying them with the rows
// took 12 more registers, and the kernel measured slower.
struct QuadRow {
    lo: Key4,
    mid: Key4,
    hi: Key4,
}

fn keys_of_words(w: vec4<u32>) -> Key4 {
    return Key4(key_of_word(w.x), key_of_word(w.y), key_of_word(w.z), key_of_word(w.w));
}

fn selectable4(k: Key4) -> Key4 {
    return Key4(selectable(k.x), selectable(k.y), selectable(k.z), selectable(k.w));
}

fn med3_4(a: Key4, b: Key4, c: Key4) -> Key4 {
    return max(min(a, b), min(max(a, b), c));
}

// Row y of the box (outside it: through the boundary mode) in plane z,
// under the quad from x0, sorted per output column.
fn quad_row(x0: u32, y: i32, z: u32) -> QuadRow {
    let nx = p.in_shape.x;
    var keys = Key4(key_param(p.cval));
    var left = keys.x;
    var right = keys.x;
    let my = map_coordinate(y, i32(p.in_shape.y), p.mode);
    if (my >= 0) {
        let i = (z * p.in_shape.y + u32(my)) * nx + x0;
        keys = selectable4(keys_of_words(src[i >> 2u]));
        if (x0 > 0u) {
            left = fetch(i - 1u);
        } else {
            left = load(vec3<i32>(-1, my, i32(z)));
        }
        if (x0 + 4u < nx) {
            right = fetch(i + 4u);
        } else {
            right = load(vec3<i32>(i32(nx), my, i32(z)));
        }
    }
    // Lane l's triple: a (x - 1), keys (x), c (x + 1); sorted as sorted_row.
    let a = Key4(left, keys.x, keys.y, keys.z);
    let c = Key4(keys.y, keys.z, keys.w, right);
    let lo_ab = min(a, keys);
    let hi_ab = max(a, keys);
    return QuadRow(min(lo_ab, c), max(lo_ab, min(hi_ab, c)), max(hi_ab, c));
}

fn store_quad(o: vec3<u32>, a: QuadRow, b: QuadRow, c: QuadRow) {
    if (o.y >= p.out_shape.y) {
        return;
    }
    let q = o + p.offset.xyz;
    let centre = src[((q.z * p.in_shape.y + q.y) * p.in_shape.x + q.x) >> 2u];
    let lo = max(max(a.lo, b.lo), c.lo);
    let hi = min(min(a.hi, b.hi), c.hi);
    let m = med3_4(lo, med3_4(a.mid, b.mid, c.mid), hi);
    dst[((o.z * p.out_shape.y + o.y) * p.out_shape.x + o.x) >> 2u] = quad_words(centre, m);
}

// Grid of (out x / 4, ceil(out y / QUAD_ROWS), out z) invocations.
@compute @workgroup_size(32, 8, 1)
fn median_3x3_quads(@builtin(global_invocation_id) gid: vec3<u32>) {
    let o = vec3<u32>(gid.x * 4u, gid.y * QUAD_ROWS, gid.z);
    if (any(o >= p.out_shape.xyz)) {
        return;
    }
    let c = vec3<i32>(o + p.offset.xyz);
    let z = u32(c.z);
    // Rows roll through three registers: each is loaded and sorted once.
    var above = quad_row(o.x, c.y - 1, z);
    var middle = quad_row(o.x, c.y, z);
    for (var k = 0u; k < QUAD_ROWS; k++) {
        let below = quad_row(o.x, c.y + i32(k) + 1, z);
        store_quad(o + vec3<u32>(0u, k, 0u), above, middle, below);
        above = middle;
        middle = below;
    }
}

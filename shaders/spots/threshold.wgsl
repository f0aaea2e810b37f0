// DIALS' dispersion / dispersion_extended thresholds (see
// crates/core/src/spots/mod.rs for the exactness argument). One thread per
// pixel; window sums are exact integers; every comparison is decided in f32
// only when its two sides differ by more than MARGIN of their size, which
// is 256x the largest error of the f32 evaluation against DIALS' f64 one:
//  - the left sides (a = m*y - x*x - x*(m-1), b = m*v - x, v) are exact
//    integers and are exact in DIALS' f64 too, because the kernels send a
//    pixel to the host whenever a product reaches 2^53; converting them to
//    f32 costs at most 3 roundings (3 * 2^-24 relative);
//  - the right sides (c, d, the local mean bound) are products, quotients
//    and square roots of non-negative values, so their relative errors add
//    up without cancellation: at most ~8 * 2^-24 in f32 (sqrt and division
//    within a few ulp) and ~6 * 2^-53 in DIALS' f64;
//  - hence |(lhs - rhs) - (LHS64 - RHS64)| < 12 * 2^-24 * (lhs + rhs), far
//    below MARGIN = 2^-16. Zero right sides are decided with integers.
// Undecided pixels (state 2) go to `list` with their exact sums; the host
// decides them in f64 and writes the answers back (fix.wgsl).

struct Params {
    h: u32,
    w: u32,
    ky: u32,
    kx: u32,
    min_count: u32,
    algorithm: u32,   // 0 dispersion, 1 dispersion_extended
    fmt: u32,         // 0 i32, 1 u16 pairs, 2 u32
    has_mask: u32,
    gain_mode: u32,   // 0 none, 1 scalar, 2 map
    thr: u32,         // v > global_threshold <=> v > thr (integer counts)
    thr_none: u32,    // 1: no count exceeds the global threshold
    ed: u32,          // erosion distance min(ky, kx)
    _pad1: u32,
    far_if_none: u32, // DIALS' distance h + w + 1 >= ed when nothing is background
    list_cap: u32,
    slot: u32,        // undecided list: 0 first test (count list[0]), 1 final test (list[2])
    gain: f32,
    nsig_s: f32,
    strong_cap: u32,
    _pad2: f32,
}

const NO: u32 = 0u;
const YES: u32 = 1u;
const UNSURE: u32 = 2u;
const MARGIN: f32 = 1.52587890625e-5; // 2^-16
const BIG: u32 = 16777216u;           // 2^24: left out of the sums
const LIST_HEAD: u32 = 4u;
const ENTRY: u32 = 6u;                // k, m, x lo, x hi, y lo, y hi
// list[1] is unused; list[3] counts strong pixels, whose indices follow both undecided lists
// (at LIST_HEAD + 2 * list_cap * ENTRY), up to strong_cap of them.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> image: array<vec4<u32>>; // 16-byte loads for the tiles
@group(0) @binding(2) var<storage, read> mask: array<u32>;     // one byte per pixel, 0 = masked
@group(0) @binding(3) var<storage, read> gains: array<f32>;
@group(0) @binding(4) var<storage, read> factors: array<f32>;  // per window count m
@group(0) @binding(5) var<storage, read_write> state: array<u32>;  // first test
@group(0) @binding(6) var<storage, read_write> cls: array<u32>;    // bit 0 candidate, bit 1 background
@group(0) @binding(7) var<storage, read_write> strong: array<u32>;
@group(0) @binding(8) var<storage, read_write> list: array<atomic<u32>>;

// Keeps every binding in each entry point's layout (the condition never holds).
fn keep() {
    if (p.h == 0xffffffffu) {
        state[0] = image[0].x + mask[0] + u32(gains[0] + factors[0]) + cls[0] + strong[0];
        atomicAdd(&list[0], 0u);
    }
}

// (value, valid): valid = not masked by the mask nor by the detector.
fn pixel(k: u32) -> vec2<u32> {
    let word = word_of(k, p.fmt);
    let u = unpack(image[word >> 2u][word & 3u], k, p.fmt);
    var ok = u.y == 0u;
    if (p.has_mask != 0u && ((mask[k >> 2u] >> (8u * (k & 3u))) & 0xffu) == 0u) {
        ok = false;
    }
    return vec2<u32>(u.x, select(0u, 1u, ok));
}

fn gain_at(k: u32) -> f32 {
    if (p.gain_mode == 2u) {
        return gains[k];
    }
    return p.gain;
}

// lhs > rhs for lhs, rhs >= 0 approximations of exact values (see above).
fn compare(lhs: f32, rhs: f32) -> u32 {
    let margin = MARGIN * (lhs + rhs);
    if (lhs - rhs > margin) {
        return YES;
    }
    if (rhs - lhs > margin) {
        return NO;
    }
    return UNSURE;
}

fn both(a: u32, b: u32) -> u32 {
    if (a == NO || b == NO) {
        return NO;
    }
    return max(a, b);
}

fn push(k: u32, m: u32, x: vec2<u32>, y: vec2<u32>) {
    let i = atomicAdd(&list[2u * p.slot], 1u);
    if (i < p.list_cap) {
        let at = LIST_HEAD + (p.slot * p.list_cap + i) * ENTRY;
        atomicStore(&list[at], k);
        atomicStore(&list[at + 1u], m);
        atomicStore(&list[at + 2u], x.x);
        atomicStore(&list[at + 3u], x.y);
        atomicStore(&list[at + 4u], y.x);
        atomicStore(&list[at + 5u], y.y);
    }
}

// Appends a strong pixel to the compact list (the spot kernels' input).
fn append_strong(k: u32) {
    let i = atomicAdd(&list[3], 1u);
    if (i < p.strong_cap) {
        atomicStore(&list[LIST_HEAD + 2u * p.list_cap * ENTRY + i], k);
    }
}

// The dispersion test a > c.
fn test_a(m: u32, x: vec2<u32>, y: vec2<u32>, k: u32) -> u32 {
    if (m < p.min_count) {
        return NO;
    }
    if (x.y == 0u && x.x < 32768u && y.y == 0u) {
        return test_a_small(m, x.x, y.x, k);
    }
    let my = mul3_1(y, m);
    let xx = mul2_2(x, x);
    var s = xx;
    if (p.gain_mode == 0u) {
        s = add3(xx, mul3_1(x, m - 1u));
    }
    if (ge53(my) || ge53(s)) {
        return UNSURE; // DIALS' f64 products may round: the host decides
    }
    if (!lt3(s, my)) {
        return NO; // a <= 0 <= c
    }
    let xf = f32_of2(x);
    let f = factors[m];
    if (xf == 0.0 || f == 0.0) {
        return YES; // c is exactly 0 (or below 2^-100) and a >= 1
    }
    var c = xf * f;
    if (p.gain_mode != 0u) {
        c = gain_at(k) * c;
    }
    return compare(f32_of3(sub3(my, s)), c);
}

// test_a for x < 2^15 and y < 2^32 (most windows): m y < 2^40 and
// x^2 + x (m - 1) < 2^31 need two words, not three, and stay below 2^53;
// a converts to the same f32 as in test_a.
fn test_a_small(m: u32, x: u32, y: u32, k: u32) -> u32 {
    let my = mul_wide(y, m);
    var s = x * x;
    if (p.gain_mode == 0u) {
        s += x * (m - 1u);
    }
    if (my.y == 0u && my.x <= s) {
        return NO; // a <= 0 <= c
    }
    let xf = f32(x);
    let f = factors[m];
    if (xf == 0.0 || f == 0.0) {
        return YES;
    }
    var c = xf * f;
    if (p.gain_mode != 0u) {
        c = gain_at(k) * c;
    }
    let a = vec2<u32>(my.x - s, my.y - select(0u, 1u, my.x < s));
    return compare(f32_of2(a), c);
}

// The dispersion algorithm's second test b > d.
fn test_b(m: u32, x: vec2<u32>, v: u32, k: u32) -> u32 {
    let mv = mul_wide(v, m);
    let b3 = vec3<u32>(mv, 0u);
    let x3 = vec3<u32>(x, 0u);
    if (!lt3(x3, b3)) {
        return NO; // b <= 0 <= d
    }
    let xf = f32_of2(x);
    if (xf == 0.0 || p.nsig_s == 0.0) {
        return YES;
    }
    var inner = xf * f32(m);
    if (p.gain_mode != 0u) {
        inner = gain_at(k) * inner;
    }
    return compare(f32_of3(sub3(b3, x3)), p.nsig_s * sqrt(inner));
}

fn global_test(v: u32) -> bool {
    return p.thr_none == 0u && v > p.thr;
}

// Window sums over the pixels that count (valid and below 2^24), then the
// first test: dispersion's whole test, or dispersion_extended's a > c.
@compute @workgroup_size(256)
fn first(@builtin(global_invocation_id) gid: vec3<u32>,
         @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let k = thread_index(gid, groups);
    if (k >= p.h * p.w) {
        return;
    }
    let r = k / p.w;
    let c = k % p.w;
    let r0 = select(0u, r - p.ky, r >= p.ky);
    let r1 = min(r + p.ky, p.h - 1u);
    let c0 = select(0u, c - p.kx, c >= p.kx);
    let c1 = min(c + p.kx, p.w - 1u);
    var m = 0u;
    var x = vec2<u32>(0u, 0u);
    var y = vec2<u32>(0u, 0u);
    for (var rr = r0; rr <= r1; rr++) {
        for (var cc = c0; cc <= c1; cc++) {
            let q = pixel(rr * p.w + cc);
            if (q.y == 1u && q.x < BIG) {
                m += 1u;
                x = add2(x, vec2<u32>(q.x, 0u));
                y = add2(y, mul_wide(q.x, q.x));
            }
        }
    }
    decide_first(k, pixel(k), m, x, y);
}

// The first test of pixel k (`me`: pixel(k)) from its window sums.
fn decide_first(k: u32, me: vec2<u32>, m: u32, x: vec2<u32>, y: vec2<u32>) {
    var out = NO;
    if (p.algorithm == 1u) {
        // Masked pixels count as non-background (they must not erode spots).
        out = select(YES, test_a(m, x, y, k), me.y == 1u);
    } else if (me.y == 1u && m >= p.min_count && global_test(me.x)) {
        out = test_a(m, x, y, k);
        if (out != NO) {
            out = both(out, test_b(m, x, me.x, k));
        }
    }
    if (out == UNSURE) {
        push(k, m, x, y);
    }
    if (p.algorithm == 1u) {
        state[k] = out;
        return;
    }
    strong[k] = out;
    if (out == YES) {
        append_strong(k);
    }
}

// dispersion_extended: candidates are valid non-background pixels at
// Chebyshev distance >= ed from every background pixel (nothing outside
// the image is background); the others, when valid and below 2^24, form
// the background of the final test.
@compute @workgroup_size(256)
fn erode(@builtin(global_invocation_id) gid: vec3<u32>,
         @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let k = thread_index(gid, groups);
    if (k >= p.h * p.w) {
        return;
    }
    let me = pixel(k);
    let candidate = is_candidate(k, me.y == 1u);
    let background = me.y == 1u && !candidate && me.x < BIG;
    cls[k] = select(0u, 1u, candidate) | select(0u, 2u, background);
}

// dispersion_extended's final test over the widened window (ky+2, kx+2).
@compute @workgroup_size(256)
fn final_test(@builtin(global_invocation_id) gid: vec3<u32>,
              @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let k = thread_index(gid, groups);
    if (k >= p.h * p.w) {
        return;
    }
    let me = pixel(k);
    if ((cls[k] & 1u) == 0u || !global_test(me.x)) {
        strong[k] = NO;
        return;
    }
    let r = k / p.w;
    let c = k % p.w;
    let ky = p.ky + 2u;
    let kx = p.kx + 2u;
    let r0 = select(0u, r - ky, r >= ky);
    let r1 = min(r + ky, p.h - 1u);
    let c0 = select(0u, c - kx, c >= kx);
    let c1 = min(c + kx, p.w - 1u);
    var m = 0u;
    var x = vec2<u32>(0u, 0u);
    for (var rr = r0; rr <= r1; rr++) {
        for (var cc = c0; cc <= c1; cc++) {
            let q = rr * p.w + cc;
            if ((cls[q] & 2u) != 0u) {
                m += 1u;
                x = add2(x, vec2<u32>(pixel(q).x, 0u));
            }
        }
    }
    decide_final(k, me.x, m, x);
}

// The final test of candidate pixel k (value v, above the global
// threshold) from the sums over the widened window's background.
fn decide_final(k: u32, v: u32, m: u32, x: vec2<u32>) {
    var out = YES;
    let xf = f32_of2(x);
    if (m >= 2u && xf != 0.0) {
        // v >= mean + nsig_s * sqrt(g * mean), mean = x / m
        let mean = xf / f32(m);
        var inner = mean;
        if (p.gain_mode != 0u) {
            inner = gain_at(k) * mean;
        }
        out = compare(f32(v), mean + p.nsig_s * sqrt(inner));
        if (out == UNSURE) {
            push(k, m, x, vec2<u32>(0u, 0u));
        }
    }
    strong[k] = out;
    if (out == YES) {
        append_strong(k);
    }
}

// ---- Tiled versions of `first` and (further down) `erode` + `final_test`
// for half-widths up to 5 (the common case; erode_final's window is 2
// wider, up to TH): a workgroup loads a
// tile of output pixels plus its halo into workgroup memory once, sums each
// input row over the window's width, then sums columns of row sums:
// separable and exact (the same integers as the loops above, in another
// order). Tiles whose pixels are all below 2^12 (most of a diffraction
// frame) sum squares in single 32-bit words: 11 x 11 squares of 2^12 stay
// below 2^32. The final test skips tiles without a candidate above the
// global threshold (most of them) after one read of the tile's own pixels.
// `first_tiled`: against 16 x 16 tiles with one output per thread,
// runtime window loops and 4-byte loads, 16-byte loads and window sizes as
// pipeline constants each measured faster (figures in BENCHMARKS.md). The
// 32 x 32 tiles below have each thread slide down 4 outputs of a column.
// (Measured and not kept before the window sizes were constants: 256-column
// strips walking down 32 rows, and 64 x 16 tiles of 4 outputs per thread
// with sliding sums: both slower.)

const TW: u32 = 16u;           // erode_final's tile width
const TR: u32 = 16u;           // erode_final's tile rows
const TH: u32 = 7u;            // largest half-width of erode_final's window
const FW: u32 = 32u;           // first_tiled's tile width (a column per thread)
const FR: u32 = 32u;           // first_tiled's tile rows
const FPT: u32 = 4u;           // first_tiled's outputs per thread, down a column
const SW: u32 = 42u;           // row stride of tile_v: FW + 2 * 5
const IW: u32 = 30u;           // row stride of tile_e: TW + 2 TH
const NONE: u32 = 0xffffffffu; // erode_final's tile: not in the sums
const IN_SUMS: u32 = 0x10000000u; // first_tiled's tile: 1 << 28 | value
const VALUE: u32 = 0x0fffffffu;
const SMALL: u32 = 4096u;      // 2^12
// first_tiled's window half-widths (p.ky, p.kx, at most 5), fixed when the
// pipeline is made so that the driver unrolls the window loops.
override KY: u32 = 3u;
override KX: u32 = 3u;
// first_tiled's input tile and row sums.
var<workgroup> tile_v: array<u32, 1764>;  // up to 42 rows of SW; cells as load_tile
var<workgroup> rs_mx: array<u32, 1344>;   // row sums (42 rows of FW): m << 28 | x
var<workgroup> rs_ylo: array<u32, 1344>;  // y low word
var<workgroup> rs_yhi: array<u32, 1344>;  // y high word
// erode_final's own, smaller ones: sharing first_tiled's arrays made it
// more than twice as slow, though it returns early in most
// tiles.
var<workgroup> tile_e: array<u32, 900>;   // (TW + 2 TH) rows of IW
var<workgroup> re_m: array<u32, 480>;     // row sums (TR + 2 TH) * TW: m
var<workgroup> re_x: array<u32, 480>;     // x
var<workgroup> tile_any: atomic<u32>;  // a flag: a large value (first) / a candidate (erode_final)
var<workgroup> tile_flag: u32;

fn tile_origin(wid: vec3<u32>, groups: vec3<u32>, tw: u32, tr: u32) -> vec2<u32> {
    let t = wid.x + wid.y * groups.x;
    let tiles_x = (p.w + tw - 1u) / tw;
    return vec2<u32>((t / tiles_x) * tr, (t % tiles_x) * tw);
}

// Loads first_tiled's input (half-widths ky, kx) at row stride SW: cells
// IN_SUMS | value for the valid pixels below 2^24, 0 for the others.
// Returns the largest value loaded (0 when none).
fn load_tile(o: vec2<u32>, li: u32, ky: u32, kx: u32) -> u32 {
    let iw = FW + 2u * kx;
    let ih = FR + 2u * ky;
    var top = 0u;
    for (var row = li / FW; row < ih; row += 256u / FW) {
        for (var col = li % FW; col < iw; col += FW) {
            let rr = i32(o.x + row) - i32(ky);
            let cc = i32(o.y + col) - i32(kx);
            var cell = 0u;
            if (rr >= 0 && rr < i32(p.h) && cc >= 0 && cc < i32(p.w)) {
                let v = pixel(u32(rr) * p.w + u32(cc));
                if (v.y == 1u && v.x < BIG) {
                    cell = IN_SUMS | v.x;
                    top = max(top, v.x);
                }
            }
            tile_v[row * SW + col] = cell;
        }
    }
    return top;
}

// Loads erode_final's tile of the final test's background (valid, below
// 2^24, not candidates) for half-widths ky, kx at row stride IW.
fn load_background_tile(o: vec2<u32>, li: u32, ky: u32, kx: u32) {
    let iw = TW + 2u * kx;
    let ih = TR + 2u * ky;
    for (var row = li / TW; row < ih; row += 256u / TW) {
        for (var col = li % TW; col < iw; col += TW) {
            let rr = i32(o.x + row) - i32(ky);
            let cc = i32(o.y + col) - i32(kx);
            var s = NONE;
            if (rr >= 0 && rr < i32(p.h) && cc >= 0 && cc < i32(p.w)) {
                let q = u32(rr) * p.w + u32(cc);
                let v = pixel(q);
                if (v.y == 1u && v.x < BIG && !is_candidate(q, true)) {
                    s = v.x;
                }
            }
            tile_e[row * IW + col] = s;
        }
    }
}

// load_tile for the first test of one-word pixels without a mask file, by
// 16-byte loads: each tile row is read as the aligned vectors covering its
// pixels inside the image; cells outside the image are written 0 by the
// thread owning their four columns.
fn load_tile_wide(o: vec2<u32>, li: u32, ky: u32, kx: u32) -> u32 {
    let iw = FW + 2u * kx;
    let ih = FR + 2u * ky;
    let nv = (iw + 6u) / 4u; // vectors per row, at most
    let c0 = i32(o.y) - i32(kx);
    let ca = max(c0, 0);
    let cb = min(c0 + i32(iw) - 1, i32(p.w) - 1);
    var top = 0u;
    for (var t = li; t < ih * nv; t += 256u) {
        let row = t / nv;
        let slot = t % nv;
        let rr = i32(o.x + row) - i32(ky);
        let row_in = rr >= 0 && rr < i32(p.h);
        for (var e = 0u; e < 4u; e++) {
            let tc = 4u * slot + e;
            let cc = c0 + i32(tc);
            if (tc < iw && (!row_in || cc < ca || cc > cb)) {
                tile_v[row * SW + tc] = 0u;
            }
        }
        if (row_in && ca <= cb) {
            let rowbase = u32(rr) * p.w;
            let fa = rowbase + u32(ca);
            let fb = rowbase + u32(cb);
            let vi = fa / 4u + slot;
            if (vi <= fb / 4u) {
                let q4 = image[vi];
                for (var e = 0u; e < 4u; e++) {
                    let f = 4u * vi + e;
                    if (f >= fa && f <= fb) {
                        let u = unpack(q4[e], f, p.fmt);
                        var cell = 0u;
                        if (u.y == 0u && u.x < BIG) {
                            cell = IN_SUMS | u.x;
                            top = max(top, u.x);
                        }
                        tile_v[row * SW + u32(i32(f - rowbase) - c0)] = cell;
                    }
                }
            }
        }
    }
    return top;
}

// Adds (`add`) or removes row j of the row sums to the window's sums.
fn slide(j: u32, small: bool, add: bool, m: ptr<function, u32>, x: ptr<function, u32>,
         y: ptr<function, vec2<u32>>) {
    let mx = rs_mx[j];
    let yl = rs_ylo[j];
    if (add) {
        *m += mx >> 28u;
        *x += mx & 0x0fffffffu;
        if (small) {
            (*y).x += yl;
        } else {
            *y = add2(*y, vec2<u32>(yl, rs_yhi[j]));
        }
    } else {
        *m -= mx >> 28u;
        *x -= mx & 0x0fffffffu;
        if (small) {
            (*y).x -= yl;
        } else {
            *y = sub2(*y, vec2<u32>(yl, rs_yhi[j]));
        }
    }
}

@compute @workgroup_size(256)
fn first_tiled(@builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) groups: vec3<u32>,
               @builtin(local_invocation_index) li: u32) {
    keep();
    let o = tile_origin(wid, groups, FW, FR);
    // Whether the tile holds a value of 2^12 or more: set only by the
    // threads that load one, not an atomic from every thread.
    if (li == 0u) {
        atomicStore(&tile_any, 0u);
    }
    workgroupBarrier();
    var top = 0u;
    if (p.fmt != 1u && p.has_mask == 0u) {
        top = load_tile_wide(o, li, KY, KX);
    } else {
        top = load_tile(o, li, KY, KX);
    }
    if (top >= SMALL) {
        atomicStore(&tile_any, 1u);
    }
    workgroupBarrier();
    if (li == 0u) {
        tile_flag = atomicLoad(&tile_any);
    }
    let small = workgroupUniformLoad(&tile_flag) == 0u;
    // Row sums of every input row for this thread's output column.
    let col = li % FW;
    for (var row = li / FW; row < FR + 2u * KY; row += 256u / FW) {
        // Cells outside the sums are 0: no test per tap.
        var mx = 0u; // m << 28 | x: m <= 11, x < 11 * 2^24 < 2^28
        var y = vec2<u32>(0u, 0u);
        for (var d = 0u; d <= 2u * KX; d++) {
            let cell = tile_v[row * SW + col + d];
            mx += cell;
            let s = cell & VALUE;
            if (small) {
                y.x += s * s;
            } else {
                y = add2(y, mul_wide(s, s));
            }
        }
        let j = row * FW + col;
        rs_mx[j] = mx;
        rs_ylo[j] = y.x;
        if (!small) {
            rs_yhi[j] = y.y; // read only by large tiles
        }
    }
    workgroupBarrier();
    // FPT outputs down the column: the window's sums slide one row at a
    // time (x < 121 * 2^24 and small tiles' y < 121 * 2^24 fit one word).
    let r0 = (li / FW) * FPT;
    var m = 0u;
    var x = 0u;
    var y = vec2<u32>(0u, 0u);
    for (var d = 0u; d < 2u * KY; d++) {
        slide((r0 + d) * FW + col, small, true, &m, &x, &y);
    }
    for (var i = 0u; i < FPT; i++) {
        slide((r0 + i + 2u * KY) * FW + col, small, true, &m, &x, &y);
        let r = o.x + r0 + i;
        let c = o.y + col;
        if (r < p.h && c < p.w) {
            // The pixel from the tile unless it is outside the sums
            // (masked, or 2^24 and above: read again).
            let k = r * p.w + c;
            let cell = tile_v[(r0 + i + KY) * SW + col + KX];
            var me = vec2<u32>(cell & VALUE, 1u);
            if (cell == 0u) {
                me = pixel(k);
            }
            decide_first(k, me, m, vec2<u32>(x, 0u), y);
        }
        slide((r0 + i) * FW + col, small, false, &m, &x, &y);
    }
}

// ---- `erode` and `final_test` in one pass over 16 x 16 tiles (both
// paths use it when the widened window fits the tiles' halo). A pixel's
// candidacy is decided where it is needed instead of being stored: for the
// tile's own pixels (one read of the first test's state; the erosion
// window only for the few non-background ones) and, in the rare tiles
// holding a candidate above the global threshold, for the halo of the
// final test's window. Per pixel that reads the image and the state and
// writes the answer: half the traffic of the two passes.

// erode's rule: valid, not background in the first test, and no
// background pixel within Chebyshev distance ed - 1. DIALS' distance with
// no background pixel at all is h + w + 1 (far_if_none: at least ed);
// where it is shorter, the box of ed - 1 covers the whole frame, so a
// pixel is never a candidate whether or not anything is background.
// Elsewhere no background at all passes the box test like none nearby:
// no frame-wide background flag is needed (reading one from every
// workgroup cost a measurable share of erode_final).
fn is_candidate(q: u32, valid: bool) -> bool {
    if (!valid || state[q] != YES || p.far_if_none == 0u) {
        return false;
    }
    let r = q / p.w;
    let c = q % p.w;
    let d = p.ed - 1u;
    let r0 = select(0u, r - d, r >= d);
    let r1 = min(r + d, p.h - 1u);
    let c0 = select(0u, c - d, c >= d);
    let c1 = min(c + d, p.w - 1u);
    for (var rr = r0; rr <= r1; rr++) {
        for (var cc = c0; cc <= c1; cc++) {
            if (state[rr * p.w + cc] == NO) {
                return false;
            }
        }
    }
    return true;
}

@compute @workgroup_size(256)
fn erode_final(@builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) groups: vec3<u32>,
               @builtin(local_invocation_index) li: u32) {
    keep();
    if (li == 0u) {
        atomicStore(&tile_any, 0u);
    }
    workgroupBarrier();
    let o = tile_origin(wid, groups, TW, TR);
    let r = o.x + li / TW;
    let c = o.y + li % TW;
    let k = r * p.w + c;
    var wanted = false;
    var v = 0u;
    if (r < p.h && c < p.w) {
        let me = pixel(k);
        v = me.x;
        wanted = global_test(v) && is_candidate(k, me.y == 1u);
        if (!wanted) {
            strong[k] = NO;
        }
    }
    if (wanted) {
        atomicStore(&tile_any, 1u); // candidates are few
    }
    workgroupBarrier();
    if (li == 0u) {
        tile_flag = atomicLoad(&tile_any);
    }
    if (workgroupUniformLoad(&tile_flag) == 0u) {
        return; // no candidate in the tile
    }
    // The final test's background over the widened window.
    let ky = p.ky + 2u;
    let kx = p.kx + 2u;
    load_background_tile(o, li, ky, kx);
    workgroupBarrier();
    let col = li % TW;
    for (var row = li / TW; row < TR + 2u * ky; row += 256u / TW) {
        var m = 0u;
        var x = 0u;
        for (var d = 0u; d <= 2u * kx; d++) {
            let s = tile_e[row * IW + col + d];
            if (s != NONE) {
                m += 1u;
                x += s;
            }
        }
        re_m[row * TW + col] = m;
        re_x[row * TW + col] = x;
    }
    workgroupBarrier();
    if (wanted) {
        var m = 0u;
        var x = vec2<u32>(0u, 0u);
        for (var d = 0u; d <= 2u * ky; d++) {
            let j = (li / TW + d) * TW + col;
            m += re_m[j];
            x = add2(x, vec2<u32>(re_x[j], 0u));
        }
        decide_final(k, v, m, x);
    }
}

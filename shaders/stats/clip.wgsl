// Kappa-sigma clipping (astropy.stats.sigma_clip semantics) that stays on
// the GPU: one round is
//   sum_hist0 + reduce1  count, sums of (x - shift) and (x - shift)^2 of the
//                        kept values (float-float; shift = the previous
//                        centre, so no cancellation), and the histogram of
//                        the first radix pass; decides whether this round
//                        is the last one
//   3 x select (+ hist1, hist2)  exact median by radix select on ordered
//                        keys (11, 11, 10 bits), + min_above for even counts
//   finalize             centre, std, next bounds as ordered keys
// A value is kept iff lo_key <= key(x) <= hi_key; NaN, +-inf and masked
// values (uploaded as NaN) have keys outside every bound. The host records
// several rounds per submission: once `frozen` is set, every kernel returns
// at once, so extra rounds are harmless.

struct Params {
    count: u32,      // values in this chunk
    base: u32,       // this chunk's first partial slot
    pass_: u32,      // radix pass 0..2
    n_partials: u32, // partial slots of all chunks
    sigma_lower: f32,
    sigma_upper: f32,
    maxiters: u32,   // 0xffffffff = until convergence
    flags: u32,      // bit 0: cenfunc median, bit 1: strict comparisons
    zero: u32,       // always 0, unknown to the compiler (see opaque)
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

// State words.
const LO: u32 = 0u;        // smallest kept key
const HI: u32 = 1u;        // largest kept key
const NPREV: u32 = 2u;     // count before the last clipping
const ITER: u32 = 3u;      // clippings done
const DONE: u32 = 4u;      // this round's statistics are the final ones
const N: u32 = 5u;         // kept count
const PREFIX: u32 = 6u;    // radix select: key bits found so far
const RANK: u32 = 7u;      // radix select: rank left inside the prefix
const KEY1: u32 = 8u;      // key of the lower median
const KEY2: u32 = 9u;      // key of the upper median
const BELOW: u32 = 10u;    // kept values below the current prefix bin
const MEAN32: u32 = 11u;   // f32 mean of this round
const S1: u32 = 12u;       // float-float sum of x - shift (2 words)
const S2: u32 = 14u;       // float-float sum of (x - shift)^2 (2 words)
const FROZEN: u32 = 16u;   // nothing more to do
const CEN: u32 = 17u;      // f32 centre of the last bounds
const STD: u32 = 18u;      // f32 std of the last bounds
const MEDIAN: u32 = 19u;   // f32 median of this round
const SHIFT: u32 = 20u;    // f32 centre the sums are taken around

const PER_WG: u32 = 8192u; // values per workgroup in the per-value kernels
const BINS: u32 = 2048u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> data: array<f32>;
@group(0) @binding(2) var<storage, read_write> st: array<u32>;
@group(0) @binding(3) var<storage, read_write> hist: array<atomic<u32>>; // BINS + 1 (min_above)
// Two per workgroup: (s1 hi, s1 lo, count bits, 0), (s2 hi, s2 lo, 0, 0).
@group(0) @binding(4) var<storage, read_write> partials: array<vec4<f32>>;

var<workgroup> whist: array<atomic<u32>, 2048>;
var<workgroup> wsum: array<vec2<f32>, 256>;
var<workgroup> wsum2: array<vec2<f32>, 256>;
var<workgroup> wcount: array<u32, 256>;

fn key_of(x: f32) -> u32 {
    var b = bitcast<u32>(x);
    if (b == 0x80000000u) {
        b = 0u; // -0 compares equal to +0
    }
    if ((b & 0x80000000u) != 0u) {
        return ~b;
    }
    return b | 0x80000000u;
}

fn value_of(k: u32) -> f32 {
    if ((k & 0x80000000u) != 0u) {
        return bitcast<f32>(k & 0x7fffffffu);
    }
    return bitcast<f32>(~k);
}

fn kept(k: u32) -> bool {
    return k >= st[LO] && k <= st[HI];
}

// WGSL float operations may be rewritten algebraically by shader compilers
// (Mesa's NIR turns (a + b) - a into b), which would erase the rounding
// errors that float-float arithmetic keeps. Passing a value through an
// integer xor with a uniform the compiler cannot know hides it from those
// rewrites; the value itself is unchanged.
fn opaque(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) ^ p.zero);
}

// a + b = s + e exactly (Knuth's TwoSum).
fn two_sum(a: f32, b: f32) -> vec2<f32> {
    let s = opaque(a + b);
    let bb = opaque(s - a);
    return vec2<f32>(s, (a - opaque(s - bb)) + (b - bb));
}

// Float-float addition: about 44 significant bits.
fn ff_add(x: vec2<f32>, y: vec2<f32>) -> vec2<f32> {
    let s = two_sum(x.x, y.x);
    let e = s.y + x.y + y.y;
    let r = opaque(s.x + e);
    return vec2<f32>(r, e - opaque(r - s.x));
}

fn block(wid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return wid.x + wid.y * groups.x;
}

fn frozen() -> bool {
    return st[FROZEN] != 0u;
}

var<workgroup> wflag: u32;

// `v` as invocation 0 of the workgroup sees it, shared with every
// invocation. Barriers must sit in uniform control flow, and a value read
// from a read_write storage buffer is not uniform to Chrome's WGSL compiler
// (Tint rejects such a shader; naga accepts it): decisions taken on the
// state words before a barrier go through here.
fn workgroup_decision(lid: u32, v: u32) -> u32 {
    if (lid == 0u) {
        wflag = v;
    }
    return workgroupUniformLoad(&wflag);
}

fn median_wanted() -> bool {
    return (p.flags & 1u) != 0u || st[DONE] != 0u;
}

// Keeps every binding in every entry point's layout (the host binds 0..4).
fn touch_all() {
    if (p.count == 0xffffffffu) {
        st[0] = u32(data[0]) + atomicLoad(&hist[0]) + u32(partials[0].x);
    }
}

// Workgroup sum of (wsum, wcount) into slot 0.
fn reduce_workgroup(lid: u32) {
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (lid < s) {
            wsum[lid] = ff_add(wsum[lid], wsum[lid + s]);
            wsum2[lid] = ff_add(wsum2[lid], wsum2[lid + s]);
            wcount[lid] += wcount[lid + s];
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(256)
fn sum_hist0(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
             @builtin(num_workgroups) groups: vec3<u32>) {
    touch_all();
    if (workgroup_decision(lid, u32(frozen())) != 0u) {
        return;
    }
    for (var j = lid; j < BINS; j += 256u) {
        atomicStore(&whist[j], 0u);
    }
    workgroupBarrier();
    let b = block(wid, groups);
    let shift = bitcast<f32>(st[SHIFT]);
    var acc = vec2<f32>(0.0, 0.0);
    var acc2 = vec2<f32>(0.0, 0.0);
    var c = 0u;
    for (var k = 0u; k < PER_WG / 256u; k++) {
        let i = b * PER_WG + k * 256u + lid;
        if (i < p.count) {
            let x = data[i];
            let key = key_of(x);
            if (kept(key)) {
                // Exact deviation as float-float, then its square.
                let d = two_sum(x, -shift);
                acc = ff_add(acc, d);
                let sq = d.x * d.x;
                let err = fma(d.x, d.x, -sq) + 2.0 * d.x * d.y;
                acc2 = ff_add(acc2, vec2<f32>(sq, err));
                c += 1u;
                atomicAdd(&whist[key >> 21u], 1u);
            }
        }
    }
    wsum[lid] = acc;
    wsum2[lid] = acc2;
    wcount[lid] = c;
    reduce_workgroup(lid);
    if (lid == 0u && b * PER_WG < p.count) {
        let slot = 2u * (p.base + b);
        partials[slot] = vec4<f32>(wsum[0].x, wsum[0].y, bitcast<f32>(wcount[0]), 0.0);
        partials[slot + 1u] = vec4<f32>(wsum2[0].x, wsum2[0].y, 0.0, 0.0);
    }
    for (var j = lid; j < BINS; j += 256u) {
        let h = atomicLoad(&whist[j]);
        if (h != 0u) {
            atomicAdd(&hist[j], h);
        }
    }
}

// One workgroup: sums every partial slot into wsum[0], wsum2[0], wcount[0].
fn reduce_partials(lid: u32) {
    var acc = vec2<f32>(0.0, 0.0);
    var acc2 = vec2<f32>(0.0, 0.0);
    var c = 0u;
    for (var i = lid; i < p.n_partials; i += 256u) {
        let q = partials[2u * i];
        acc = ff_add(acc, q.xy);
        acc2 = ff_add(acc2, partials[2u * i + 1u].xy);
        c += bitcast<u32>(q.z);
    }
    wsum[lid] = acc;
    wsum2[lid] = acc2;
    wcount[lid] = c;
    reduce_workgroup(lid);
}

@compute @workgroup_size(256)
fn reduce1(@builtin(local_invocation_index) lid: u32) {
    touch_all();
    if (workgroup_decision(lid, u32(frozen())) != 0u) {
        return;
    }
    reduce_partials(lid);
    if (lid == 0u) {
        let n = wcount[0];
        let s = wsum[0];
        st[N] = n;
        st[S1] = bitcast<u32>(s.x);
        st[S1 + 1u] = bitcast<u32>(s.y);
        st[S2] = bitcast<u32>(wsum2[0].x);
        st[S2 + 1u] = bitcast<u32>(wsum2[0].y);
        st[MEAN32] = bitcast<u32>(bitcast<f32>(st[SHIFT]) + (s.x / f32(n) + s.y / f32(n)));
        // astropy stops when a clipping removed nothing or after maxiters.
        let converged = st[ITER] > 0u && n == st[NPREV];
        st[DONE] = u32(converged || st[ITER] >= p.maxiters || n == 0u);
        // Radix select of the lower median, rank (n - 1) / 2.
        st[PREFIX] = 0u;
        st[RANK] = (max(n, 1u) - 1u) / 2u;
        st[BELOW] = 0u;
        atomicStore(&hist[BINS], 0xffffffffu);
    }
}

fn pass_shift() -> u32 {
    return select(select(0u, 10u, p.pass_ == 1u), 21u, p.pass_ == 0u);
}

fn pass_bits() -> u32 {
    return select(11u, 10u, p.pass_ == 2u);
}

@compute @workgroup_size(256)
fn hist_pass(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
             @builtin(num_workgroups) groups: vec3<u32>) {
    touch_all();
    if (workgroup_decision(lid, u32(frozen() || !median_wanted())) != 0u) {
        return;
    }
    for (var j = lid; j < BINS; j += 256u) {
        atomicStore(&whist[j], 0u);
    }
    workgroupBarrier();
    let shift = pass_shift();
    let top = shift + pass_bits(); // bits above this pass must equal the prefix
    let prefix = st[PREFIX];
    let b = block(wid, groups);
    for (var k = 0u; k < PER_WG / 256u; k++) {
        let i = b * PER_WG + k * 256u + lid;
        if (i < p.count) {
            let key = key_of(data[i]);
            let same = top >= 32u || (key >> top) == (prefix >> top);
            if (same && kept(key)) {
                atomicAdd(&whist[(key >> shift) & ((1u << pass_bits()) - 1u)], 1u);
            }
        }
    }
    workgroupBarrier();
    for (var j = lid; j < BINS; j += 256u) {
        let c = atomicLoad(&whist[j]);
        if (c != 0u) {
            atomicAdd(&hist[j], c);
        }
    }
}

// One workgroup: the bin holding the wanted rank; clears the bins.
@compute @workgroup_size(256)
fn select_bin(@builtin(local_invocation_index) lid: u32) {
    touch_all();
    // 1: nothing to do; 2: no median this round.
    let decision = workgroup_decision(lid, select(select(0u, 2u, !median_wanted()), 1u, frozen()));
    if (decision == 1u) {
        return;
    }
    if (decision == 2u) {
        // sum_hist0 filled the first pass's bins anyway: clear them.
        for (var j = lid; j < BINS; j += 256u) {
            atomicStore(&hist[j], 0u);
        }
        return;
    }
    var c = 0u;
    for (var j = 0u; j < 8u; j++) {
        c += atomicLoad(&hist[lid * 8u + j]);
    }
    wcount[lid] = c;
    workgroupBarrier();
    if (lid == 0u) {
        var r = st[RANK];
        var t = 0u;
        while (t < 255u && r >= wcount[t]) {
            r -= wcount[t];
            t++;
        }
        var bin = t * 8u;
        loop {
            let h = atomicLoad(&hist[bin]);
            if (r < h || bin == t * 8u + 7u) {
                break;
            }
            r -= h;
            bin++;
        }
        let prefix = st[PREFIX] | (bin << pass_shift());
        st[PREFIX] = prefix;
        st[RANK] = r;
        if (p.pass_ == 2u) {
            // The lower median; the upper one is the same key unless the
            // count is even and this key holds the last value below n/2.
            let n = st[N];
            let lower_rank = (max(n, 1u) - 1u) / 2u;
            let count_le = lower_rank - r + atomicLoad(&hist[bin]);
            st[KEY1] = prefix;
            var key2 = prefix;
            if (n % 2u == 0u && count_le <= n / 2u) {
                // The next kept key: the next non-empty bin of this pass,
                // else (0) min_above searches the keys above this bucket.
                key2 = 0u;
                for (var j = bin + 1u; j < 1024u; j++) {
                    if (atomicLoad(&hist[j]) != 0u) {
                        key2 = (prefix & ~0x3ffu) | j;
                        break;
                    }
                }
            }
            st[KEY2] = key2;
        }
    }
    workgroupBarrier();
    for (var j = lid; j < BINS; j += 256u) {
        atomicStore(&hist[j], 0u);
    }
}

// Smallest kept key above KEY1, needed only for even counts (KEY2 == 0).
@compute @workgroup_size(256)
fn min_above(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
             @builtin(num_workgroups) groups: vec3<u32>) {
    touch_all();
    if (workgroup_decision(lid, u32(frozen() || !median_wanted() || st[KEY2] != 0u)) != 0u) {
        return;
    }
    let k1 = st[KEY1];
    let b = block(wid, groups);
    var best = 0xffffffffu;
    for (var k = 0u; k < PER_WG / 256u; k++) {
        let i = b * PER_WG + k * 256u + lid;
        if (i < p.count) {
            let key = key_of(data[i]);
            if (key > k1 && kept(key)) {
                best = min(best, key);
            }
        }
    }
    wcount[lid] = best;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (lid < s) {
            wcount[lid] = min(wcount[lid], wcount[lid + s]);
        }
        workgroupBarrier();
    }
    if (lid == 0u && wcount[0] != 0xffffffffu) {
        atomicMin(&hist[BINS], wcount[0]);
    }
}

// x >= v  <=>  key(x) >= key(v) for finite x and v (with -0 as +0).
fn lower_key(v: f32, strict: bool) -> u32 {
    return key_of(v) + u32(strict);
}

fn upper_key(v: f32, strict: bool) -> u32 {
    return key_of(v) - u32(strict);
}

// One thread: centre and std of this round, then the next bounds, computed
// in f32 as astropy does for float32 data (cen - std * sigma).
@compute @workgroup_size(1)
fn finalize() {
    touch_all();
    if (frozen()) {
        return;
    }
    let n = f32(st[N]);
    let m32 = bitcast<f32>(st[MEAN32]);
    if (median_wanted()) {
        var k2 = st[KEY2];
        if (k2 == 0u) {
            k2 = atomicLoad(&hist[BINS]);
            st[KEY2] = k2;
        }
        st[MEDIAN] = bitcast<u32>((value_of(st[KEY1]) + value_of(k2)) / 2.0);
    }
    // ddof=0 variance from the sums around the shift.
    let d = bitcast<f32>(st[S1]) / n + bitcast<f32>(st[S1 + 1u]) / n;
    let s2 = bitcast<f32>(st[S2]) + bitcast<f32>(st[S2 + 1u]);
    let sd = sqrt(max(s2 / n - d * d, 0.0));
    if (st[DONE] != 0u) {
        st[FROZEN] = 1u;
        return;
    }
    var cen = m32;
    if ((p.flags & 1u) != 0u) {
        cen = bitcast<f32>(st[MEDIAN]);
    }
    st[CEN] = bitcast<u32>(cen);
    st[STD] = bitcast<u32>(sd);
    let strict = (p.flags & 2u) != 0u;
    let lo = cen - sd * p.sigma_lower;
    let hi = cen + sd * p.sigma_upper;
    // Finite values only: keys strictly between those of -inf and +inf.
    st[LO] = max(lower_key(lo, strict), key_of(-0x1.fffffep+127f));
    st[HI] = min(upper_key(hi, strict), key_of(0x1.fffffep+127f));
    st[NPREV] = st[N];
    st[ITER] += 1u;
    st[SHIFT] = bitcast<u32>(cen);
}

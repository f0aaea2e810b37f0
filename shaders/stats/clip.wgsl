// Kappa-sigma clipping (astropy.stats.sigma_clip semantics) that stays on
// the GPU. One round is four passes, up to three of them over the data:
//   sum_hist0  count, sums of (x - shift) and (x - shift)^2 of the kept
//              values (float-float; shift = the previous centre, so no
//              cancellation) into per-workgroup partials, the histogram
//              of the top 11 key bits (level 0), and the histogram of the
//              next 11 bits inside GUESS0, the level-0 bin of the last
//              round's median (that bin seldom changes once the bounds
//              settle)
//   hist1      every workgroup finds the level-0 bin holding the lower
//              median's rank (parallel scan of the 2048 bins; the count n
//              is their total, so it also decides whether this round is
//              the last), then, unless it is GUESS0, histograms the next
//              11 key bits inside it
//   hist2      same for the level-1 bin, histograms the last 10 bits, and
//              keeps the smallest kept key above that bucket (the upper
//              median of an even count when it lies outside the bucket)
//   finalize   one workgroup: the exact median keys from the level-2
//              histogram, the partials reduced in a fixed order, centre,
//              std, the next bounds as ordered keys; clears the histograms
// A value is kept iff lo_key <= key(x) <= hi_key; NaN, +-inf and masked
// values (uploaded as NaN) have keys outside every bound. The host records
// several rounds per submission: once `frozen` is set, every kernel returns
// at once, so extra rounds are harmless. Only integer atomics (counts, a
// minimum): the results do not depend on the order workgroups run in.

struct Params {
    count: u32,      // values in this chunk
    base: u32,       // this chunk's first partial slot
    pass_: u32,      // unused (kept for the layout)
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
const PREFIX0: u32 = 6u;   // level-0 bin of the lower median (key >> 21)
const RANK0: u32 = 7u;     // its rank inside that bin
const KEY1: u32 = 8u;      // key of the lower median
const KEY2: u32 = 9u;      // key of the upper median
const PREFIX1: u32 = 10u;  // level-1 bucket of the lower median (key >> 10)
const MEAN32: u32 = 11u;   // f32 mean of this round
const S1: u32 = 12u;       // float-float sum of x - shift (2 words)
const S2: u32 = 14u;       // float-float sum of (x - shift)^2 (2 words)
const FROZEN: u32 = 16u;   // nothing more to do
const CEN: u32 = 17u;      // f32 centre of the last bounds
const STD: u32 = 18u;      // f32 std of the last bounds
const MEDIAN: u32 = 19u;   // f32 median of this round
const SHIFT: u32 = 20u;    // f32 centre the sums are taken around
const RANK1: u32 = 21u;    // rank of the lower median inside PREFIX1
const GUESS0: u32 = 22u;   // level-0 bin of the last round's median (this round's guess)

// Histogram words: three levels of BINS, level 1 counted speculatively
// in GUESS0's bin, then the minimum above.
const BINS: u32 = 2048u;
const HIST0: u32 = 0u;
const HIST1: u32 = 2048u;
const HIST2: u32 = 4096u;
const HIST1_GUESSED: u32 = 6144u;
const MIN_ABOVE: u32 = 8192u;

// Values per workgroup in the per-value kernels. Every workgroup of hist1
// and hist2 scans the global histograms first, so fewer workgroups cost
// less; 8192 and 32768 both measured slower than 16384.
const PER_WG: u32 = 16384u;
// Values each thread loads before using any: independent loads in flight
// hide the memory latency (one at a time ran far below the bandwidth).
const BATCH: u32 = 8u;
// hist1 and hist2 only count: twice as many loads in flight hold fewer
// registers there (each pass measured faster; sum_hist0's float sums
// ran slower with 16).
const COUNT_BATCH: u32 = 16u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> data: array<f32>;
@group(0) @binding(2) var<storage, read_write> st: array<u32>;
@group(0) @binding(3) var<storage, read_write> hist: array<atomic<u32>>; // 3 * BINS + 1
// Two per workgroup: (s1 hi, s1 lo, count bits, 0), (s2 hi, s2 lo, 0, 0).
@group(0) @binding(4) var<storage, read_write> partials: array<vec4<f32>>;

var<workgroup> whist: array<atomic<u32>, 2048>;
var<workgroup> wsum: array<vec2<f32>, 256>;
var<workgroup> wsum2: array<vec2<f32>, 256>;
var<workgroup> wcount: array<u32, 256>;
var<workgroup> wscan: array<u32, 256>;
var<workgroup> wtotal: u32;
var<workgroup> wfound: vec4<u32>;
var<workgroup> wmin: atomic<u32>;

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
    workgroupBarrier();
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

// Value `j` of this thread's batch `k` (clamped into the chunk: the loads
// never branch, `valid` says which ones count).
fn load(b: u32, k: u32, j: u32, lid: u32) -> f32 {
    let i = b * PER_WG + (k + j) * 256u + lid;
    return data[min(i, max(p.count, 1u) - 1u)];
}

fn valid(b: u32, k: u32, j: u32, lid: u32) -> bool {
    return b * PER_WG + (k + j) * 256u + lid < p.count;
}

fn clear_whist(lid: u32) {
    for (var j = lid; j < BINS; j += 256u) {
        atomicStore(&whist[j], 0u);
    }
    workgroupBarrier();
}

// Adds the workgroup histogram's non-empty bins to hist[at ..].
fn flush_whist(lid: u32, at: u32) {
    workgroupBarrier();
    for (var j = lid; j < BINS; j += 256u) {
        let c = atomicLoad(&whist[j]);
        if (c != 0u) {
            atomicAdd(&hist[at + j], c);
        }
    }
}

// sum_hist0's workgroup histogram: level-0 counts in the low 16 bits,
// the speculative level-1 counts in the high ones (a workgroup counts at
// most PER_WG = 16384 values, so neither half overflows).
fn flush_split_whist(lid: u32) {
    workgroupBarrier();
    for (var j = lid; j < BINS; j += 256u) {
        let c = atomicLoad(&whist[j]);
        if ((c & 0xffffu) != 0u) {
            atomicAdd(&hist[HIST0 + j], c & 0xffffu);
        }
        if ((c >> 16u) != 0u) {
            atomicAdd(&hist[HIST1_GUESSED + j], c >> 16u);
        }
    }
}

// A scan of hist[base .. base + BINS) with few barriers (each one is
// costly on software adapters): each thread owns 8 contiguous bins, 16
// threads sum the counts of 16 threads each, then every thread adds up to
// 15 group sums and 15 thread counts before its own. `own`: its bins' count,
// `incl`: the count up to its last bin, `total`: all bins (uniform),
// `bins`: its 8 bins, kept for `search` (reloading them one after the other
// was a chain of global round trips in every workgroup of every pass).
struct Scan {
    own: u32,
    incl: u32,
    total: u32,
    bins: array<u32, 8>,
}

var<workgroup> wgroup: array<u32, 16>;

fn scan_hist(lid: u32, base: u32) -> Scan {
    var bins: array<u32, 8>;
    for (var j = 0u; j < 8u; j++) {
        bins[j] = atomicLoad(&hist[base + lid * 8u + j]);
    }
    var c = 0u;
    for (var j = 0u; j < 8u; j++) {
        c += bins[j];
    }
    workgroupBarrier();
    wscan[lid] = c;
    workgroupBarrier();
    if (lid < 16u) {
        var g = 0u;
        for (var j = 0u; j < 16u; j++) {
            g += wscan[lid * 16u + j];
        }
        wgroup[lid] = g;
    }
    workgroupBarrier();
    let group = lid / 16u;
    var below = 0u;
    var total = 0u;
    for (var t = 0u; t < 16u; t++) {
        let g = wgroup[t];
        total += g;
        if (t < group) {
            below += g;
        }
    }
    for (var j = group * 16u; j < lid; j++) {
        below += wscan[j];
    }
    if (lid == 0u) {
        wtotal = total;
    }
    return Scan(c, below + c, workgroupUniformLoad(&wtotal), bins);
}

// The bin of the scanned histogram holding rank `rank` (0-based, counted
// from its first bin): (bin, rank left inside it, total, count of the bin),
// uniform. A rank beyond the total gives bin BINS. Only the thread whose
// range holds the rank walks its 8 bins.
fn search(lid: u32, s: Scan, rank: u32) -> vec4<u32> {
    workgroupBarrier();
    if (rank < s.incl && rank >= s.incl - s.own) {
        var r = rank - (s.incl - s.own);
        var j = 0u;
        var h = s.bins[0];
        while (r >= h && j < 7u) {
            r -= h;
            j++;
            h = s.bins[j];
        }
        wfound = vec4<u32>(lid * 8u + j, r, s.total, h);
    } else if (lid == 255u && rank >= s.incl) {
        wfound = vec4<u32>(BINS, rank - s.incl, s.total, 0u);
    }
    return workgroupUniformLoad(&wfound);
}

// Workgroup sum of (wsum, wsum2, wcount) into slot 0.
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
    // The state words this pass reads, loaded together up front (no pass
    // writes a word another workgroup of the same pass reads): one round
    // trip, not one per barrier-separated use.
    let fz = st[FROZEN];
    let shift = bitcast<f32>(st[SHIFT]);
    let lo = st[LO];
    let hi = st[HI];
    let guess = st[GUESS0];
    touch_all();
    if (workgroup_decision(lid, fz) != 0u) {
        return;
    }
    clear_whist(lid);
    let b = block(wid, groups);
    var acc = vec2<f32>(0.0, 0.0);
    var acc2 = vec2<f32>(0.0, 0.0);
    var c = 0u;
    for (var k = 0u; k < PER_WG / 256u; k += BATCH) {
        var xs: array<f32, BATCH>;
        for (var j = 0u; j < BATCH; j++) {
            xs[j] = load(b, k, j, lid);
        }
        for (var j = 0u; j < BATCH; j++) {
            let x = xs[j];
            let key = key_of(x);
            if (valid(b, k, j, lid) && key >= lo && key <= hi) {
                // Exact deviation as float-float, then its square.
                let d = two_sum(x, -shift);
                acc = ff_add(acc, d);
                let sq = d.x * d.x;
                let err = fma(d.x, d.x, -sq) + 2.0 * d.x * d.y;
                acc2 = ff_add(acc2, vec2<f32>(sq, err));
                c += 1u;
                atomicAdd(&whist[key >> 21u], 1u);
                // The median's level-0 bin rarely changes between rounds:
                // level 1 is counted here in the last one's, and hist1
                // reads the data again only when the guess was wrong.
                if ((key >> 21u) == guess) {
                    atomicAdd(&whist[(key >> 10u) & 2047u], 0x10000u);
                }
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
    flush_split_whist(lid);
}

// Level 1. Also decides (from n, the total of level 0) whether this round
// is the last one, for hist2 and finalize.
@compute @workgroup_size(256)
fn hist1(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
         @builtin(num_workgroups) groups: vec3<u32>) {
    // As in sum_hist0: every state word read, up front.
    let fz = st[FROZEN];
    let iter = st[ITER];
    let nprev = st[NPREV];
    let guess = st[GUESS0];
    let lo = st[LO];
    let hi = st[HI];
    touch_all();
    if (workgroup_decision(lid, fz) != 0u) {
        return;
    }
    let b = block(wid, groups);
    let sc = scan_hist(lid, HIST0);
    let n = sc.total;
    // Radix select of the lower median, rank (n - 1) / 2.
    let f = search(lid, sc, (max(n, 1u) - 1u) / 2u);
    // astropy stops when a clipping removed nothing or after maxiters.
    let done = (iter > 0u && n == nprev) || iter >= p.maxiters || n == 0u;
    if (lid == 0u && b == 0u && p.base == 0u) {
        st[N] = n;
        st[DONE] = u32(done);
        st[PREFIX0] = f.x;
        st[RANK0] = f.y;
    }
    let wanted = done || (p.flags & 1u) != 0u;
    if (workgroup_decision(lid, u32(!wanted || f.x == guess)) != 0u) {
        return;
    }
    clear_whist(lid);
    for (var k = 0u; k < PER_WG / 256u; k += COUNT_BATCH) {
        var xs: array<f32, COUNT_BATCH>;
        for (var j = 0u; j < COUNT_BATCH; j++) {
            xs[j] = load(b, k, j, lid);
        }
        for (var j = 0u; j < COUNT_BATCH; j++) {
            let key = key_of(xs[j]);
            if (valid(b, k, j, lid) && (key >> 21u) == f.x && key >= lo && key <= hi) {
                atomicAdd(&whist[(key >> 10u) & 2047u], 1u);
            }
        }
    }
    flush_whist(lid, HIST1);
}

// Level 2, and the smallest kept key above the level-1 bucket.
@compute @workgroup_size(256)
fn hist2(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
         @builtin(num_workgroups) groups: vec3<u32>) {
    // As in sum_hist0: every state word read, up front.
    let fz = st[FROZEN];
    let done = st[DONE];
    let prefix0 = st[PREFIX0];
    let guess = st[GUESS0];
    let rank0 = st[RANK0];
    let lo = st[LO];
    let hi = st[HI];
    touch_all();
    let wants_median = (p.flags & 1u) != 0u || done != 0u;
    if (workgroup_decision(lid, u32(fz != 0u || !wants_median)) != 0u) {
        return;
    }
    let b = block(wid, groups);
    // Level 1 as sum_hist0 guessed it, or as hist1 counted it.
    let level1 = select(HIST1, HIST1_GUESSED, prefix0 == guess);
    let sc = scan_hist(lid, level1);
    let f = search(lid, sc, rank0);
    // 22 bits: key >> 10 of the lower median (no key has it when the
    // level-0 search found nothing, i.e. n = 0).
    let prefix = (prefix0 << 11u) | f.x;
    if (lid == 0u && b == 0u && p.base == 0u) {
        st[PREFIX1] = prefix;
        st[RANK1] = f.y;
    }
    clear_whist(lid);
    if (lid == 0u) {
        atomicStore(&wmin, 0xffffffffu);
    }
    let bucket_end = (prefix << 10u) | 0x3ffu;
    var best = 0xffffffffu;
    for (var k = 0u; k < PER_WG / 256u; k += COUNT_BATCH) {
        var xs: array<f32, COUNT_BATCH>;
        for (var j = 0u; j < COUNT_BATCH; j++) {
            xs[j] = load(b, k, j, lid);
        }
        for (var j = 0u; j < COUNT_BATCH; j++) {
            let key = key_of(xs[j]);
            if (valid(b, k, j, lid) && key >= lo && key <= hi) {
                if ((key >> 10u) == prefix) {
                    atomicAdd(&whist[key & 1023u], 1u);
                } else if (key > bucket_end) {
                    best = min(best, key);
                }
            }
        }
    }
    workgroupBarrier();
    if (best != 0xffffffffu) {
        atomicMin(&wmin, best);
    }
    flush_whist(lid, HIST2);
    if (lid == 0u) {
        let m = atomicLoad(&wmin);
        if (m != 0xffffffffu) {
            atomicMin(&hist[MIN_ABOVE], m);
        }
    }
}

// One workgroup: sums every partial slot (fixed order) into wsum[0],
// wsum2[0], wcount[0].
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
    workgroupBarrier();
    wsum[lid] = acc;
    wsum2[lid] = acc2;
    wcount[lid] = c;
    reduce_workgroup(lid);
}

// x >= v  <=>  key(x) >= key(v) for finite x and v (with -0 as +0).
fn lower_key(v: f32, strict: bool) -> u32 {
    return key_of(v) + u32(strict);
}

fn upper_key(v: f32, strict: bool) -> u32 {
    return key_of(v) - u32(strict);
}

// One workgroup: the median keys, centre and std of this round, then the
// next bounds, computed in f32 as astropy does for float32 data
// (cen - std * sigma); clears the histograms for the next round.
@compute @workgroup_size(256)
fn finalize(@builtin(local_invocation_index) lid: u32) {
    touch_all();
    if (workgroup_decision(lid, u32(frozen())) != 0u) {
        return;
    }
    reduce_partials(lid);
    // Both middle ranks inside the level-1 bucket (uniform control flow:
    // computed even when unused).
    let sc = scan_hist(lid, HIST2);
    let r = st[RANK1];
    let f1 = search(lid, sc, r);
    let f2 = search(lid, sc, r + 1u);
    if (lid == 0u) {
        let nn = wcount[0];
        let n = f32(nn);
        let s = wsum[0];
        st[S1] = bitcast<u32>(s.x);
        st[S1 + 1u] = bitcast<u32>(s.y);
        st[S2] = bitcast<u32>(wsum2[0].x);
        st[S2 + 1u] = bitcast<u32>(wsum2[0].y);
        let m32 = bitcast<f32>(st[SHIFT]) + (s.x / n + s.y / n);
        st[MEAN32] = bitcast<u32>(m32);
        if (median_wanted()) {
            let prefix = st[PREFIX1] << 10u;
            let k1 = prefix | f1.x;
            var k2 = k1;
            if (nn % 2u == 0u) {
                // The upper middle value: in this bucket, else the
                // smallest kept key above it.
                k2 = select(atomicLoad(&hist[MIN_ABOVE]), prefix | f2.x, f2.x < BINS);
            }
            st[KEY1] = k1;
            st[KEY2] = k2;
            st[MEDIAN] = bitcast<u32>((value_of(k1) + value_of(k2)) / 2.0);
        }
        // ddof=0 variance from the sums around the shift.
        let d = s.x / n + s.y / n;
        let s2 = wsum2[0].x + wsum2[0].y;
        let sd = sqrt(max(s2 / n - d * d, 0.0));
        if (st[DONE] != 0u) {
            st[FROZEN] = 1u;
        } else {
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
            st[NPREV] = nn;
            st[ITER] += 1u;
            st[GUESS0] = st[PREFIX0];
            st[SHIFT] = bitcast<u32>(cen);
        }
    }
    workgroupBarrier();
    for (var j = lid; j < 4u * BINS; j += 256u) {
        atomicStore(&hist[j], 0u);
    }
    if (lid == 0u) {
        atomicStore(&hist[MIN_ABOVE], 0xffffffffu);
    }
}

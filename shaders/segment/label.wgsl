// Connected-component labelling, union-find (Playne & Hawick 2018) on tiles
// of 4096 pixels, with scipy.ndimage.label's numbering.
//
// Every union hooks the larger root onto the smaller (atomicMin), so a
// component's root is its smallest linear index: its first pixel in raster
// order. The passes:
//   clear_bits    zero the local-root bits;
//   local_merge   one workgroup per tile labels the tile in workgroup
//                 memory: each run of foreground along x starts as one set
//                 (from a bit mask of the tile, no atomics), then the
//                 remaining edges are united. Every pixel's local root goes
//                 to `roots` (16 bits, tile-local); each local root starts
//                 its own set in `parent` and sets its bit;
//   border_merge  unites the edges that cross tile borders in `parent`;
//   flatten_rank  points each local root at its global root and counts the
//                 global roots per word and per block of 8192 pixels;
//   scan_blocks   prefix sum over the blocks;
//   rank_local    each local root takes its global root's rank;
//   write_labels  every pixel takes its local root's label.
// Between the first and the last pass only local roots are touched in
// `parent`; the per-pixel traffic is the mask, 2 bytes of local root out
// and in, and the labels out.

struct Params {
    nx: u32,
    ny: u32,
    nz: u32,
    count: u32,        // nx * ny * nz
    connectivity: u32, // max number of non-zero offsets of a neighbour (1..3)
    n_blocks: u32,     // ranking blocks of BLOCK_WORDS words
    words: u32,        // ceil(count / 32): length of each bit array
    shift_x: u32,      // log2 of the tile's x extent
    shift_y: u32,      // log2 of its y extent
    shift_z: u32,      // log2 of its z extent
    ntx: u32,          // tiles per axis
    nty: u32,
    ntz: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

const BG: u32 = 0xffffffffu;
const TILE: u32 = 4096u;       // pixels per tile (fewer when the image is smaller)
const PER_THREAD: u32 = 16u;   // TILE / 256
const BLOCK_WORDS: u32 = 256u; // bit words per ranking block (8192 pixels)

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> mask: array<u32>;          // one byte per pixel
@group(0) @binding(2) var<storage, read_write> parent: array<atomic<u32>>;
// [0, n_blocks]: block offsets, then the total; then three arrays of
// `words` words: local-root bits (local_bits()), global-root bits
// (root_bits()), and each word's count of global roots before it within
// its block (before_words()).
@group(0) @binding(3) var<storage, read_write> aux: array<atomic<u32>>;
// Per tile, 2048 words: each pixel's local root as a tile index, 16 bits
// (NO_ROOT for background and pixels outside the image).
@group(0) @binding(4) var<storage, read_write> roots: array<u32>;

const NO_ROOT: u32 = 0xffffu;
const ROOT_WORDS: u32 = 2048u; // TILE / 2

fn local_bits() -> u32 {
    return p.n_blocks + 1u;
}

fn root_bits() -> u32 {
    return p.n_blocks + 1u + p.words;
}

fn before_words() -> u32 {
    return p.n_blocks + 1u + 2u * p.words;
}

// Every entry point binds 0..4 (the driver passes the same five buffers);
// this never-true branch keeps a binding an entry does not otherwise use in
// its layout.
fn keep() {
    if (p.count == 0u) {
        atomicStore(&parent[0], mask[0] + atomicLoad(&aux[0]) + roots[0]);
    }
}

fn thread_index(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * 256u;
}

fn group_index(wid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return wid.x + wid.y * groups.x;
}

fn fg(i: u32) -> bool {
    return ((mask[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu) != 0u;
}

// find, root_of and unite: shaders/common/union_find.wgsl.

// Backward offsets (lexicographically negative: each edge once) of the
// connectivity: k = (dz + 1) * 9 + (dy + 1) * 3 + (dx + 1) for k < 13.
fn offset(k: u32) -> vec3<i32> {
    return vec3<i32>(i32(k % 3u) - 1, i32((k / 3u) % 3u) - 1, i32(k / 9u) - 1);
}

fn wanted(d: vec3<i32>) -> bool {
    let nonzero = u32(d.x != 0) + u32(d.y != 0) + u32(d.z != 0);
    return nonzero <= p.connectivity;
}

// ---- tiles ----

struct Tile {
    origin: vec3<u32>, // first pixel (x, y, z)
    extent: vec3<u32>,
    base: u32,         // linear index of the origin
    valid: bool,
}

fn tile_of(wid: vec3<u32>, groups: vec3<u32>) -> Tile {
    return tile_at(group_index(wid, groups));
}

fn tile_at(t: u32) -> Tile {
    var tile: Tile;
    tile.extent = vec3<u32>(1u << p.shift_x, 1u << p.shift_y, 1u << p.shift_z);
    tile.origin = vec3<u32>(t % p.ntx, (t / p.ntx) % p.nty, t / (p.ntx * p.nty)) * tile.extent;
    tile.valid = t < p.ntx * p.nty * p.ntz;
    tile.base = (tile.origin.z * p.ny + tile.origin.y) * p.nx + tile.origin.x;
    return tile;
}

// Local coordinates of the tile's pixel `li` (x fastest).
fn local_xyz(li: u32) -> vec3<u32> {
    return vec3<u32>(li & ((1u << p.shift_x) - 1u), (li >> p.shift_x) & ((1u << p.shift_y) - 1u),
                     li >> (p.shift_x + p.shift_y));
}

fn inside(tile: Tile, l: vec3<u32>) -> bool {
    let g = tile.origin + l;
    return tile.valid && all(l < tile.extent) && g.x < p.nx && g.y < p.ny && g.z < p.nz;
}

fn global_index(tile: Tile, l: vec3<u32>) -> u32 {
    return tile.base + (l.z * p.ny + l.y) * p.nx + l.x;
}

fn root_half(word: u32, li: u32) -> u32 {
    return (word >> ((li & 1u) * 16u)) & 0xffffu;
}

// Global index of the local root of pixel g (x, y, z); BG for background.
fn local_root_of(g: vec3<u32>) -> u32 {
    let shifts = vec3<u32>(p.shift_x, p.shift_y, p.shift_z);
    let tc = g >> shifts;
    let o = tc << shifts;
    let l = g - o;
    let li = (l.z << (p.shift_x + p.shift_y)) | (l.y << p.shift_x) | l.x;
    let tile = (tc.z * p.nty + tc.y) * p.ntx + tc.x;
    let r = root_half(roots[tile * ROOT_WORDS + (li >> 1u)], li);
    if (r == NO_ROOT) {
        return BG;
    }
    let rl = o + local_xyz(r);
    return (rl.z * p.ny + rl.y) * p.nx + rl.x;
}

// ---- local_merge: the tile's own edges in workgroup memory ----
//
// Thread t owns the 16 consecutive pixels li = 16t .. 16t + 15 of the tile
// (a segment; x is fastest, so with rows of 16 pixels or more a segment
// lies in one row) and works on them as bit masks: at 134 M pixels every
// instruction per pixel costs microseconds, so only run starts and the
// few pixels where runs of neighbouring rows first meet do scalar work.

// Union-find over run starts, by tile index li, each kept in slot li / 2:
// tiles are at least two pixels wide (the host drops unit axes at the fast
// end), so two run starts never share a pair of pixels.
var<workgroup> lp: array<atomic<u32>, 2048>;
var<workgroup> fg_half: array<u32, 256>; // each segment's foreground bits

// Path halving, as find.
fn lfind(start: u32) -> u32 {
    var x = start;
    loop {
        let up = atomicLoad(&lp[x >> 1u]);
        if (up == x) {
            return x;
        }
        let upper = atomicLoad(&lp[up >> 1u]);
        if (upper != up) {
            atomicStore(&lp[x >> 1u], upper);
        }
        x = upper;
    }
    return x;
}

// As root_of, in workgroup memory.
fn local_root(start: u32) -> u32 {
    var x = start;
    loop {
        let up = atomicLoad(&lp[x >> 1u]);
        if (up == x) {
            return x;
        }
        x = up;
    }
    return x;
}

fn lunite(a0: u32, b0: u32) {
    var a = lfind(a0);
    var b = lfind(b0);
    loop {
        if (a == b) {
            return;
        }
        if (a < b) {
            let t = a;
            a = b;
            b = t;
        }
        let old = atomicMin(&lp[a >> 1u], b);
        if (old == a) {
            return;
        }
        a = lfind(old);
        b = lfind(b);
    }
}

fn lfg(li: u32) -> bool {
    return ((fg_half[li >> 4u] >> (li & 15u)) & 1u) != 0u;
}

// Foreground bits of the 16 pixels from `start` on (0 before the tile).
fn fg_window(start: i32) -> u32 {
    if (start <= -16) {
        return 0u;
    }
    if (start < 0) {
        return (fg_half[0] << u32(-start)) & 0xffffu;
    }
    let a = u32(start) >> 4u;
    let b = u32(start) & 15u;
    var v = fg_half[a] >> b;
    if (b != 0u && a + 1u < 256u) {
        v |= fg_half[a + 1u] << (16u - b);
    }
    return v & 0xffffu;
}

// First pixel of the run of foreground along x that holds li (its row
// starts at li - lx): just above the nearest background bit below li.
fn run_start(li: u32) -> u32 {
    let row = li - (li & ((1u << p.shift_x) - 1u));
    var w = li >> 4u;
    var background = ~fg_half[w] & ((1u << (li & 15u)) - 1u);
    loop {
        if (background != 0u) {
            return max(row, w * 16u + firstLeadingBit(background) + 1u);
        }
        if (w * 16u <= row) {
            return row;
        }
        w -= 1u;
        background = ~fg_half[w] & 0xffffu;
    }
    return row;
}

// A thread's segment: which of its pixels start a row, a tile plane
// (y = 0) or the tile (z = 0), which lie inside the image, and the global
// index of each pixel.
struct Segment {
    li0: u32,
    row_first: u32,
    y_first: u32,
    z_first: u32,
    inside: u32,
    i0: u32,        // global index of li0 (rows of 16 pixels or more)
    one_row: bool,  // rows of 16 pixels or more: pixel j is at i0 + j
}

fn segment_of(tile: Tile, t: u32) -> Segment {
    var sg: Segment;
    sg.li0 = 16u * t;
    sg.one_row = p.shift_x >= 4u;
    if (sg.one_row) {
        let l = local_xyz(sg.li0);
        let g = tile.origin + l;
        sg.row_first = u32(l.x == 0u);
        sg.y_first = select(0u, 0xffffu, l.y == 0u);
        sg.z_first = select(0u, 0xffffu, l.z == 0u);
        sg.i0 = global_index(tile, l);
        var n = 0u;
        if (tile.valid && g.y < p.ny && g.z < p.nz && g.x < p.nx) {
            n = min(16u, p.nx - g.x);
        }
        sg.inside = (1u << n) - 1u;
        return sg;
    }
    for (var j = 0u; j < 16u; j++) {
        let l = local_xyz(sg.li0 + j);
        sg.row_first |= u32(l.x == 0u) << j;
        sg.y_first |= u32(l.y == 0u) << j;
        sg.z_first |= u32(l.z == 0u) << j;
        sg.inside |= u32(inside(tile, l)) << j;
    }
    return sg;
}

fn pixel_index(tile: Tile, sg: Segment, j: u32) -> u32 {
    if (sg.one_row) {
        return sg.i0 + j;
    }
    return global_index(tile, local_xyz(sg.li0 + j));
}

// One bit per non-zero byte of a mask word.
fn nibble(word: u32) -> u32 {
    var v = word;
    v |= v >> 4u;
    v |= v >> 2u;
    v |= v >> 1u;
    v &= 0x01010101u;
    return (v | (v >> 7u) | (v >> 14u) | (v >> 21u)) & 0xfu;
}

// Foreground bits of a segment from the mask: four word loads when the
// segment is whole and word-aligned, else byte by byte.
fn load_segment(tile: Tile, sg: Segment) -> u32 {
    var bits = 0u;
    if (sg.one_row && sg.inside == 0xffffu && (sg.i0 & 3u) == 0u) {
        for (var m = 0u; m < 4u; m++) {
            bits |= nibble(mask[(sg.i0 >> 2u) + m]) << (4u * m);
        }
        return bits;
    }
    for (var j = 0u; j < 16u; j++) {
        if ((sg.inside & (1u << j)) != 0u && fg(pixel_index(tile, sg, j))) {
            bits |= 1u << j;
        }
    }
    return bits;
}

// Unites, for connectivity 2 and 3, every pixel's run with the runs of its
// backward neighbours inside the tile (other than along x).
fn merge_inside_all(sg: Segment, seg: u32) {
    let sy = 1u << p.shift_x;
    let sz = 1u << (p.shift_x + p.shift_y);
    let extent = vec3<u32>(sy, 1u << p.shift_y, 1u << p.shift_z);
    var left = seg;
    while (left != 0u) {
        let li = sg.li0 + firstTrailingBit(left);
        left &= left - 1u;
        let l = local_xyz(li);
        for (var k = 0u; k < 12u; k++) { // 12 = (-1, 0, 0): the run's own edge
            let d = offset(k);
            let q = vec3<i32>(l) + d;
            if (!wanted(d) || any(q < vec3<i32>(0)) || any(vec3<u32>(q) >= extent)) {
                continue;
            }
            let u = u32(q.z) * sz + u32(q.y) * sy + u32(q.x);
            if (lfg(u)) {
                lunite(run_start(li), run_start(u));
            }
        }
    }
}

// Unites run starts along `cand` (bits of the segment) with the runs one
// step of `back` pixels back.
fn unite_runs(sg: Segment, cand: u32, back: u32) {
    var left = cand;
    while (left != 0u) {
        let li = sg.li0 + firstTrailingBit(left);
        left &= left - 1u;
        lunite(run_start(li), run_start(li - back));
    }
}

@compute @workgroup_size(256)
fn local_merge(@builtin(workgroup_id) wid: vec3<u32>,
               @builtin(local_invocation_index) t: u32,
               @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let tile = tile_of(wid, groups);
    let tile_index = group_index(wid, groups);
    let sg = segment_of(tile, t);
    // A tile inside the image whose rows are whole mask words is loaded a
    // word per thread and step, consecutive words on consecutive threads
    // (coalesced), the bits passed on through lp (not yet in use).
    let whole = tile.valid && all(tile.origin + tile.extent <= vec3<u32>(p.nx, p.ny, p.nz));
    let coalesced = whole && p.shift_x >= 2u && (p.nx & 3u) == 0u;
    if (coalesced) {
        // A tile smaller than TILE (a small image) has fewer pixels than
        // the threads' words: those past its end are background, not
        // whatever lies in the mask buffer beyond the image.
        let pixels = tile.extent.x * tile.extent.y * tile.extent.z;
        for (var m = 0u; m < 4u; m++) {
            let w = t + 256u * m; // the tile's pixels 4w .. 4w + 3
            var bits = 0u;
            if (4u * w < pixels) {
                let i = global_index(tile, local_xyz(4u * w));
                bits = nibble(mask[i >> 2u]);
            }
            atomicStore(&lp[w], bits);
        }
    }
    workgroupBarrier();
    var seg = 0u;
    if (coalesced) {
        for (var m = 0u; m < 4u; m++) {
            seg |= atomicLoad(&lp[4u * t + m]) << (4u * m);
        }
    } else {
        seg = load_segment(tile, sg);
    }
    fg_half[t] = seg;
    workgroupBarrier();
    // Left neighbours' foreground (none at a row's start).
    let before = select(0u, fg_half[max(t, 1u) - 1u] >> 15u, t > 0u);
    let left = ((seg << 1u) | before) & ~sg.row_first & 0xffffu;
    let starts = seg & ~left;
    var s = starts;
    while (s != 0u) {
        let li = sg.li0 + firstTrailingBit(s);
        s &= s - 1u;
        atomicStore(&lp[li >> 1u], li);
    }
    workgroupBarrier();
    let sy = 1u << p.shift_x;
    let sz = 1u << (p.shift_x + p.shift_y);
    let li0 = i32(sg.li0);
    if (p.connectivity == 1u) {
        // An edge up (or back in z) is implied by the one just left of it
        // when both pixels there are foreground: the runs already join
        // them. So only where two runs first meet is a union needed.
        let up = fg_window(li0 - i32(sy)) & ~sg.y_first;
        let up_left = fg_window(li0 - i32(sy) - 1) & ~sg.y_first & ~sg.row_first;
        unite_runs(sg, seg & up & ~(left & up_left), sy);
        let below = fg_window(li0 - i32(sz)) & ~sg.z_first;
        let below_left = fg_window(li0 - i32(sz) - 1) & ~sg.z_first & ~sg.row_first;
        let below_up = fg_window(li0 - i32(sz) - i32(sy)) & ~sg.z_first & ~sg.y_first;
        unite_runs(sg, seg & below & ~(left & below_left) & ~(up & below_up), sz);
    } else {
        merge_inside_all(sg, seg);
    }
    workgroupBarrier();
    // Each run's local root, kept at its start; local roots start their
    // sets in the global forest.
    s = starts;
    while (s != 0u) {
        let j = firstTrailingBit(s);
        s &= s - 1u;
        let li = sg.li0 + j;
        let root = local_root(li);
        atomicStore(&lp[li >> 1u], root);
        if (root == li) {
            let i = pixel_index(tile, sg, j);
            atomicStore(&parent[i], i);
            atomicOr(&aux[local_bits() + (i >> 5u)], 1u << (i & 31u));
        }
    }
    workgroupBarrier();
    // The root of the run under way at the segment's first pixel.
    var root = NO_ROOT;
    if ((seg & ~starts & 1u) != 0u) {
        root = atomicLoad(&lp[run_start(sg.li0) >> 1u]);
    }
    workgroupBarrier();
    // Each pixel's local root, 16 bits, two pixels a word. The thread's
    // words 8t .. 8t + 7 are the slots of its own run starts, so it reads
    // and overwrites only its own slots; the tile then leaves in
    // consecutive words on consecutive threads (the writes coalesce).
    for (var k = 0u; k < 8u; k++) {
        let slot = 8u * t + k;
        let pair = (seg >> (2u * k)) & 3u;
        let pair_starts = (starts >> (2u * k)) & 3u;
        var word = NO_ROOT | (NO_ROOT << 16u);
        if (pair != 0u) {
            var start_root = NO_ROOT;
            if (pair_starts != 0u) {
                start_root = atomicLoad(&lp[slot]);
            }
            if ((pair_starts & 1u) != 0u) {
                root = start_root;
            }
            let lo = select(NO_ROOT, root, (pair & 1u) != 0u);
            if ((pair_starts & 2u) != 0u) {
                root = start_root;
            }
            let hi = select(NO_ROOT, root, (pair & 2u) != 0u);
            word = lo | (hi << 16u);
        }
        atomicStore(&lp[slot], word);
    }
    workgroupBarrier();
    if (!tile.valid) {
        return;
    }
    for (var k = 0u; k < ROOT_WORDS / 256u; k++) {
        let w = t + 256u * k;
        roots[tile_index * ROOT_WORDS + w] = atomicLoad(&lp[w]);
    }
}

// ---- border_merge: edges that cross tile borders, in global memory ----

// Connectivity 1: the tile's three backward faces as one list of items
// (z face, then y, then x), spread evenly over the threads, each item's
// loads issued together.
fn border_faces(tile: Tile, t: u32) {
    let e = tile.extent;
    let plane = p.nx * p.ny;
    // A face at the image's border has no edges back (e.g. every z face
    // of a 2-D image).
    let nzf = select(0u, e.x * e.y, tile.origin.z > 0u);
    let nyf = select(0u, e.x * e.z, tile.origin.y > 0u);
    let nxf = select(0u, e.y * e.z, tile.origin.x > 0u);
    let mx = e.x - 1u;
    for (var q = t; q < nzf + nyf + nxf; q += 256u) {
        var l: vec3<u32>;
        var axis: u32;
        if (q < nzf) {
            l = vec3<u32>(q & mx, q >> p.shift_x, 0u);
            axis = 2u;
        } else if (q < nzf + nyf) {
            l = vec3<u32>((q - nzf) & mx, 0u, (q - nzf) >> p.shift_x);
            axis = 1u;
        } else {
            let r = q - nzf - nyf;
            l = vec3<u32>(0u, r & (e.y - 1u), r >> p.shift_y);
            axis = 0u;
        }
        let g = tile.origin + l;
        if (!inside(tile, l) || g[axis] == 0u) {
            continue;
        }
        let i = global_index(tile, l);
        let steps = vec3<u32>(1u, p.nx, plane);
        let j = i - steps[axis];
        // The two other axes, where not at the tile's origin: a parallel
        // edge one step back along them implies this one.
        let a = select(0u, steps[(axis + 1u) % 3u], l[(axis + 1u) % 3u] > 0u);
        let b = select(0u, steps[(axis + 2u) % 3u], l[(axis + 2u) % 3u] > 0u);
        let fi = fg(i);
        let fj = fg(j);
        let via_a = a != 0u && fg(i - a) && fg(j - a);
        let via_b = b != 0u && fg(i - b) && fg(j - b);
        if (fi && fj && !via_a && !via_b) {
            var gj = g;
            gj[axis] -= 1u;
            unite(local_root_of(g), local_root_of(gj));
        }
    }
}

@compute @workgroup_size(256)
fn border_merge(@builtin(workgroup_id) wid: vec3<u32>,
                @builtin(local_invocation_index) t: u32,
                @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let tile = tile_of(wid, groups);
    if (!tile.valid) {
        return;
    }
    if (p.connectivity == 1u) {
        border_faces(tile, t);
        return;
    }
    // Larger connectivities: every backward edge that leaves the tile. Only
    // the shell of the tile has such edges ((-1, +1, dx) leaves through the
    // far y face, (dz, dy, +1) through the far x face).
    let e = tile.extent;
    for (var k = 0u; k < PER_THREAD; k++) {
        let l = local_xyz(t + 256u * k);
        let shell = l.x == 0u || l.x + 1u == e.x || l.y == 0u || l.y + 1u == e.y || l.z == 0u;
        if (!shell || !inside(tile, l)) {
            continue;
        }
        let i = global_index(tile, l);
        if (!fg(i)) {
            continue;
        }
        let g = tile.origin + l;
        for (var k2 = 0u; k2 < 13u; k2++) {
            let d = offset(k2);
            let q = vec3<i32>(g) + d;
            let ql = vec3<i32>(l) + d;
            if (!wanted(d) || any(q < vec3<i32>(0))
                || any(vec3<u32>(q) >= vec3<u32>(p.nx, p.ny, p.nz))) {
                continue;
            }
            let same_tile = all(ql >= vec3<i32>(0)) && all(vec3<u32>(ql) < e);
            let j = (u32(q.z) * p.ny + u32(q.y)) * p.nx + u32(q.x);
            if (!same_tile && fg(j)) {
                unite(local_root_of(g), local_root_of(vec3<u32>(q)));
            }
        }
    }
}

// ---- ranking ----

var<workgroup> partial: array<u32, 256>;

// Inclusive Hillis-Steele scan of one value per thread; returns this
// thread's inclusive sum (partial[255] holds the total).
fn scan256(lid: u32, v: u32) -> u32 {
    partial[lid] = v;
    workgroupBarrier();
    for (var s = 1u; s < 256u; s <<= 1u) {
        var add = 0u;
        if (lid >= s) {
            add = partial[lid - s];
        }
        workgroupBarrier();
        partial[lid] += add;
        workgroupBarrier();
    }
    return partial[lid];
}

@compute @workgroup_size(256)
fn clear_bits(@builtin(global_invocation_id) gid: vec3<u32>,
              @builtin(num_workgroups) groups: vec3<u32>) {
    let w = thread_index(gid, groups);
    if (w < p.words) {
        atomicStore(&aux[local_bits() + w], 0u);
    }
    keep();
}

// One thread per word of local-root bits, one workgroup per block: each
// local root points straight at its global root; global roots are counted.
@compute @workgroup_size(256)
fn flatten_rank(@builtin(workgroup_id) wid: vec3<u32>,
                @builtin(local_invocation_index) lid: u32,
                @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let b = group_index(wid, groups);
    let w = b * BLOCK_WORDS + lid;
    var roots = 0u;
    if (w < p.words) {
        var left = atomicLoad(&aux[local_bits() + w]);
        while (left != 0u) {
            let bit = firstTrailingBit(left);
            left &= left - 1u;
            let r = w * 32u + bit;
            let g = root_of(r);
            if (g == r) {
                roots |= 1u << bit;
            } else {
                atomicStore(&parent[r], g);
            }
        }
    }
    let c = countOneBits(roots);
    let inclusive = scan256(lid, c);
    if (w < p.words) {
        atomicStore(&aux[root_bits() + w], roots);
        atomicStore(&aux[before_words() + w], inclusive - c);
    }
    if (lid == 255u && b < p.n_blocks) {
        atomicStore(&aux[b], inclusive);
    }
}

// One workgroup: exclusive scan of the block counts in place, 1024 per
// step (4 per thread); the total goes to aux[n_blocks].
@compute @workgroup_size(256)
fn scan_blocks(@builtin(local_invocation_index) lid: u32) {
    var carry = 0u;
    for (var base = 0u; base < p.n_blocks; base += 1024u) {
        var v: array<u32, 4>;
        var c = 0u;
        for (var k = 0u; k < 4u; k++) {
            let i = base + lid * 4u + k;
            v[k] = select(0u, atomicLoad(&aux[i]), i < p.n_blocks);
            c += v[k];
        }
        let inclusive = scan256(lid, c);
        var run = carry + inclusive - c;
        for (var k = 0u; k < 4u; k++) {
            let i = base + lid * 4u + k;
            if (i < p.n_blocks) {
                atomicStore(&aux[i], run);
            }
            run += v[k];
        }
        carry += partial[255];
        workgroupBarrier();
    }
    if (lid == 0u) {
        atomicStore(&aux[p.n_blocks], carry);
    }
    keep();
}

// 1-based rank of global root g in raster order.
fn rank(g: u32) -> u32 {
    let w = g >> 5u;
    let below = atomicLoad(&aux[root_bits() + w]) & ((1u << (g & 31u)) - 1u);
    return atomicLoad(&aux[w / BLOCK_WORDS]) + atomicLoad(&aux[before_words() + w])
        + countOneBits(below) + 1u;
}

// One thread per word of local-root bits: each local root (holding its
// global root since flatten_rank) takes that root's rank.
@compute @workgroup_size(256)
fn rank_local(@builtin(global_invocation_id) gid: vec3<u32>,
              @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let w = thread_index(gid, groups);
    if (w >= p.words) {
        return;
    }
    var left = atomicLoad(&aux[local_bits() + w]);
    while (left != 0u) {
        let r = w * 32u + firstTrailingBit(left);
        left &= left - 1u;
        atomicStore(&parent[r], rank(atomicLoad(&parent[r])));
    }
}

// A quarter tile per workgroup, two pixels (one word of local roots) per
// thread and step, consecutive words on consecutive threads so the writes
// coalesce: every pixel takes its local root's label. Short per-thread
// chains of loads keep this pass near the memory's speed; 16 pixels per
// thread made it latency-bound. A local root rewrites its own label, so
// pixels reading it see the same value before and after.
@compute @workgroup_size(256)
fn write_labels(@builtin(workgroup_id) wid: vec3<u32>,
                @builtin(local_invocation_index) t: u32,
                @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let part = group_index(wid, groups);
    let tile_index = part >> 2u;
    let tile = tile_at(tile_index);
    if (!tile.valid) {
        return;
    }
    let whole = all(tile.origin + tile.extent <= vec3<u32>(p.nx, p.ny, p.nz));
    for (var k = 0u; k < 2u; k++) {
        let w = (part & 3u) * 512u + t + 256u * k;
        let word = roots[tile_index * ROOT_WORDS + w];
        var label = 0u;
        var last = NO_ROOT;
        for (var h = 0u; h < 2u; h++) {
            let l = local_xyz(2u * w + h);
            if (!whole && !inside(tile, l)) {
                continue;
            }
            let r = (word >> (16u * h)) & 0xffffu;
            if (r != last) {
                last = r;
                label = 0u;
                if (r != NO_ROOT) {
                    label = atomicLoad(&parent[global_index(tile, local_xyz(r))]);
                }
            }
            atomicStore(&parent[global_index(tile, l)], label);
        }
    }
}

// Connected-component labelling, union-find (Playne & Hawick 2018): every
// foreground pixel starts as its own root; each pixel unites with its
// backward neighbours by hooking the larger root onto the smaller with
// atomicMin, so a component's root is its smallest linear index, i.e. its
// first pixel in raster order. Edges inside a tile of 256 pixels (32x8 in
// 2-D, 8x8x4 in 3-D) are united in workgroup memory first (local_merge),
// then only edges that cross tile borders in global memory (border_merge).
// Then every pixel points straight at its root (flatten), roots are ranked
// by a prefix sum over root flags, and each pixel takes its root's rank:
// scipy.ndimage.label's numbering.

struct Params {
    nx: u32,
    ny: u32,
    nz: u32,
    count: u32,        // nx * ny * nz
    connectivity: u32, // max number of non-zero offsets of a neighbour (1..3)
    n_blocks: u32,     // ceil(count / 1024)
    tx: u32,           // tile extents (tx * ty * tz = 256)
    ty: u32,
    tz: u32,
    ntx: u32,          // tiles per axis
    nty: u32,
    ntz: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
    _pad3: u32,
}

const BG: u32 = 0xffffffffu;
// Set on a root's slot once it holds its rank instead of its own index.
const RANKED: u32 = 0x80000000u;
const BLOCK: u32 = 1024u; // elements per workgroup in the ranking kernels

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> mask: array<u32>;          // one byte per pixel
@group(0) @binding(2) var<storage, read_write> parent: array<atomic<u32>>;

fn thread_index(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * 256u;
}

fn fg(i: u32) -> bool {
    return ((mask[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu) != 0u;
}

fn find(start: u32) -> u32 {
    var x = start;
    loop {
        let up = atomicLoad(&parent[x]);
        if (up == x) {
            return x;
        }
        x = up;
    }
    return x;
}

fn unite(a0: u32, b0: u32) {
    var a = find(a0);
    var b = find(b0);
    loop {
        if (a == b) {
            return;
        }
        if (a < b) {
            let t = a;
            a = b;
            b = t;
        }
        // a > b: hook root a under b unless another thread re-hooked a first.
        let old = atomicMin(&parent[a], b);
        if (old == a) {
            return;
        }
        a = find(old);
        b = find(b);
    }
}

// Skips a neighbour already joined through a foreground anchor: the pixel
// above, the one to the left or the one in the previous plane. A neighbour
// adjacent to a foreground anchor is joined to it by an edge that some
// pixel unites (the anchors' own edges are never skipped), so uniting with
// the anchor suffices: fewer atomics on dense masks. The same rule holds in
// both phases, so every edge is either united or implied.
fn skipped(dz: i32, dy: i32, dx: i32, up_fg: bool, left_fg: bool, below_fg: bool) -> bool {
    let via_below = dz < 0 && (dy != 0 || dx != 0) && below_fg;
    let via_up = dz == 0 && dy < 0 && dx != 0 && up_fg;
    let via_left = dz == 0 && dy < 0 && dx < 0 && left_fg;
    return via_below || via_up || via_left;
}

// Backward offsets (lexicographically negative: each edge once) of the
// connectivity, numbered 0..12 in the order of the loops below.
fn offset(k: i32) -> vec3<i32> {
    // k = (dz + 1) * 9 + (dy + 1) * 3 + (dx + 1) for the 13 backward ones.
    return vec3<i32>(k / 9 - 1, (k / 3) % 3 - 1, k % 3 - 1);
}

fn wanted(d: vec3<i32>) -> bool {
    let nonzero = u32(d.x != 0) + u32(d.y != 0) + u32(d.z != 0);
    return nonzero <= p.connectivity;
}

var<workgroup> lp: array<atomic<u32>, 256>;

fn lfind(start: u32) -> u32 {
    var x = start;
    loop {
        let up = atomicLoad(&lp[x]);
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
        let old = atomicMin(&lp[a], b);
        if (old == a) {
            return;
        }
        a = lfind(old);
        b = lfind(b);
    }
}

// One workgroup per tile: parents of every pixel of the tile, with the
// edges inside the tile united in workgroup memory.
@compute @workgroup_size(256)
fn local_merge(@builtin(workgroup_id) wid: vec3<u32>,
               @builtin(local_invocation_index) t: u32,
               @builtin(num_workgroups) groups: vec3<u32>) {
    let tile = wid.x + wid.y * groups.x;
    let ntiles = p.ntx * p.nty * p.ntz;
    let lx = t % p.tx;
    let ly = (t / p.tx) % p.ty;
    let lz = t / (p.tx * p.ty);
    let x = (tile % p.ntx) * p.tx + lx;
    let y = ((tile / p.ntx) % p.nty) * p.ty + ly;
    let z = (tile / (p.ntx * p.nty)) * p.tz + lz;
    let inside = tile < ntiles && x < p.nx && y < p.ny && z < p.nz;
    let i = (z * p.ny + y) * p.nx + x;
    let f = inside && fg(i);
    atomicStore(&lp[t], select(BG, t, f));
    workgroupBarrier();
    if (f) {
        let up_fg = y > 0u && fg(i - p.nx);
        let left_fg = x > 0u && fg(i - 1u);
        let below_fg = z > 0u && fg(i - p.nx * p.ny);
        for (var k = 0; k < 13; k++) {
            let d = offset(k);
            if (!wanted(d) || skipped(d.x, d.y, d.z, up_fg, left_fg, below_fg)) {
                continue;
            }
            // Neighbour inside this tile (and so inside the image)?
            let q = vec3<i32>(i32(lz), i32(ly), i32(lx)) + d;
            if (q.x < 0 || q.y < 0 || q.z < 0 || q.z >= i32(p.tx) || q.y >= i32(p.ty)) {
                continue;
            }
            let u = (u32(q.x) * p.ty + u32(q.y)) * p.tx + u32(q.z);
            if (atomicLoad(&lp[u]) != BG) {
                lunite(t, u);
            }
        }
    }
    workgroupBarrier();
    if (inside) {
        var v = BG;
        if (f) {
            // The local root is the tile's first pixel of the component in
            // raster order, so its global index is the smallest one too.
            let r = lfind(t);
            let rx = r % p.tx;
            let ry = (r / p.tx) % p.ty;
            let rz = r / (p.tx * p.ty);
            v = ((z - lz + rz) * p.ny + (y - ly + ry)) * p.nx + (x - lx + rx);
        }
        atomicStore(&parent[i], v);
    }
}

// Edges that cross a tile border, in global memory.
@compute @workgroup_size(256)
fn border_merge(@builtin(global_invocation_id) gid: vec3<u32>,
                @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(gid, groups);
    if (i >= p.count) {
        return;
    }
    let x = i % p.nx;
    let y = (i / p.nx) % p.ny;
    let z = i / (p.nx * p.ny);
    let lx = x % p.tx;
    let ly = y % p.ty;
    let lz = z % p.tz;
    // Only pixels on a tile's faces have backward neighbours in another
    // tile: the last column and row count too, as (0, -1, +1), (-1, 0, +1)
    // and (-1, +1, dx) are backward offsets.
    let border = (lx == 0u && x > 0u) || lx == p.tx - 1u || (ly == 0u && y > 0u)
        || (ly == p.ty - 1u && z > 0u) || (lz == 0u && z > 0u);
    if (!border || !fg(i)) {
        return;
    }
    let up_fg = y > 0u && fg(i - p.nx);
    let left_fg = x > 0u && fg(i - 1u);
    let below_fg = z > 0u && fg(i - p.nx * p.ny);
    for (var k = 0; k < 13; k++) {
        let d = offset(k);
        if (!wanted(d) || skipped(d.x, d.y, d.z, up_fg, left_fg, below_fg)) {
            continue;
        }
        let q = vec3<i32>(i32(z), i32(y), i32(x)) + d;
        if (q.x < 0 || q.y < 0 || q.z < 0 || q.y >= i32(p.ny) || q.z >= i32(p.nx)) {
            continue;
        }
        // Same tile <=> the local coordinates stay within the tile (|d| <= 1):
        // no divisions per neighbour (13 of them, three divisions each, were
        // most of this kernel's time in 3-D).
        let l = vec3<i32>(i32(lz), i32(ly), i32(lx)) + d;
        let same_tile = l.x < i32(p.tz) && l.y >= 0 && l.y < i32(p.ty) && l.z >= 0
            && l.z < i32(p.tx) && l.x >= 0;
        let j = (u32(q.x) * p.ny + u32(q.y)) * p.nx + u32(q.z);
        if (!same_tile && fg(j)) {
            unite(i, j);
        }
    }
}

@compute @workgroup_size(256)
fn flatten(@builtin(global_invocation_id) gid: vec3<u32>,
           @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(gid, groups);
    if (i >= p.count || !fg(i)) {
        return;
    }
    atomicStore(&parent[i], find(i));
}

// ---- ranking: block counts, one scan over the blocks, ranks, gather ----

@group(0) @binding(3) var<storage, read_write> blocks: array<u32>; // n_blocks + 1 (total)

var<workgroup> partial: array<u32, 256>;

fn is_root(i: u32) -> bool {
    return i < p.count && fg(i) && atomicLoad(&parent[i]) == i;
}

fn block_index(wid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return wid.x + wid.y * groups.x;
}

@compute @workgroup_size(256)
fn count_roots(@builtin(workgroup_id) wid: vec3<u32>,
               @builtin(local_invocation_index) lid: u32,
               @builtin(num_workgroups) groups: vec3<u32>) {
    let b = block_index(wid, groups);
    var c = 0u;
    for (var k = 0u; k < 4u; k++) {
        c += u32(is_root(b * BLOCK + lid * 4u + k));
    }
    partial[lid] = c;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (lid < s) {
            partial[lid] += partial[lid + s];
        }
        workgroupBarrier();
    }
    if (lid == 0u && b < p.n_blocks) {
        blocks[b] = partial[0];
    }
}

// One workgroup: exclusive scan of the block counts in place, 1024 per
// step (4 per thread); the total goes to blocks[n_blocks].
@compute @workgroup_size(256)
fn scan_blocks(@builtin(local_invocation_index) lid: u32) {
    var carry = 0u;
    for (var base = 0u; base < p.n_blocks; base += 1024u) {
        var v: array<u32, 4>;
        var c = 0u;
        for (var k = 0u; k < 4u; k++) {
            let i = base + lid * 4u + k;
            v[k] = select(0u, blocks[i], i < p.n_blocks);
            c += v[k];
        }
        partial[lid] = c;
        workgroupBarrier();
        // Hillis-Steele inclusive scan of the 256 thread sums.
        for (var s = 1u; s < 256u; s <<= 1u) {
            var add = 0u;
            if (lid >= s) {
                add = partial[lid - s];
            }
            workgroupBarrier();
            partial[lid] += add;
            workgroupBarrier();
        }
        var run = carry + partial[lid] - c;
        for (var k = 0u; k < 4u; k++) {
            let i = base + lid * 4u + k;
            if (i < p.n_blocks) {
                blocks[i] = run;
            }
            run += v[k];
        }
        carry += partial[255];
        workgroupBarrier();
    }
    if (lid == 0u) {
        blocks[p.n_blocks] = carry;
    }
    // Never true (empty inputs are not dispatched): it only keeps bindings
    // 1 and 2 in this entry point's layout, as every entry binds 0..3.
    if (p.count == 0u) {
        atomicStore(&parent[0], mask[0]);
    }
}

@compute @workgroup_size(256)
fn rank_roots(@builtin(workgroup_id) wid: vec3<u32>,
              @builtin(local_invocation_index) lid: u32,
              @builtin(num_workgroups) groups: vec3<u32>) {
    let b = block_index(wid, groups);
    let first = b * BLOCK + lid * 4u;
    var flags = 0u;
    var c = 0u;
    for (var k = 0u; k < 4u; k++) {
        if (is_root(first + k)) {
            flags |= 1u << k;
            c += 1u;
        }
    }
    partial[lid] = c;
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
    if (b >= p.n_blocks) {
        return;
    }
    var rank = blocks[b] + partial[lid] - c;
    for (var k = 0u; k < 4u; k++) {
        if ((flags & (1u << k)) != 0u) {
            rank += 1u;
            atomicStore(&parent[first + k], rank | RANKED);
        }
    }
}

// Every pixel takes its root's rank; background becomes 0. Roots only drop
// their own RANKED bit here, so a pixel reading its root sees the rank
// either way.
@compute @workgroup_size(256)
fn gather(@builtin(global_invocation_id) gid: vec3<u32>,
          @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(gid, groups);
    if (i >= p.count) {
        return;
    }
    let up = atomicLoad(&parent[i]);
    if (!fg(i)) {
        atomicStore(&parent[i], 0u);
    } else if ((up & RANKED) != 0u) {
        atomicStore(&parent[i], up & ~RANKED);
    } else {
        atomicStore(&parent[i], atomicLoad(&parent[up]) & ~RANKED);
    }
}

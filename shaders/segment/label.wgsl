// Connected-component labelling, union-find in global memory (Playne &
// Hawick 2018): every foreground pixel starts as its own root; each pixel
// unites with its backward neighbours by hooking the larger root onto the
// smaller with atomicMin, so a component's root is its smallest linear index,
// i.e. its first pixel in raster order. Then every pixel points straight at
// its root (flatten), roots are ranked by a prefix sum over root flags, and
// each pixel takes its root's rank: scipy.ndimage.label's numbering.

struct Params {
    nx: u32,
    ny: u32,
    nz: u32,
    count: u32,        // nx * ny * nz
    connectivity: u32, // max number of non-zero offsets of a neighbour (1..3)
    n_blocks: u32,     // ceil(count / 1024)
    _pad0: u32,
    _pad1: u32,
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

@compute @workgroup_size(256)
fn init(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(gid, groups);
    if (i >= p.count) {
        return;
    }
    atomicStore(&parent[i], select(BG, i, fg(i)));
}

@compute @workgroup_size(256)
fn merge(@builtin(global_invocation_id) gid: vec3<u32>,
         @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(gid, groups);
    if (i >= p.count || !fg(i)) {
        return;
    }
    let x = i32(i % p.nx);
    let y = i32((i / p.nx) % p.ny);
    let z = i32(i / (p.nx * p.ny));
    // Anchors: the pixel above, the one to the left and the one in the
    // previous plane. A neighbour adjacent to a foreground anchor is already
    // joined to it by an edge that some pixel unites (the anchor's own row,
    // column or plane edges, which are never skipped), so uniting with the
    // anchor suffices: fewer atomics on dense masks.
    let up_fg = y > 0 && fg(i - p.nx);
    let left_fg = x > 0 && fg(i - 1u);
    let below_fg = z > 0 && fg(i - p.nx * p.ny);
    // Backward neighbours only (lexicographically negative offsets): each
    // edge is visited once.
    for (var dz = -1; dz <= 0; dz++) {
        for (var dy = -1; dy <= 1; dy++) {
            for (var dx = -1; dx <= 1; dx++) {
                let backward = dz < 0 || (dz == 0 && (dy < 0 || (dy == 0 && dx < 0)));
                let nonzero = u32(dz != 0) + u32(dy != 0) + u32(dx != 0);
                if (!backward || nonzero > p.connectivity) {
                    continue;
                }
                let via_below = dz < 0 && (dy != 0 || dx != 0) && below_fg;
                let via_up = dz == 0 && dy < 0 && dx != 0 && up_fg;
                let via_left = dz == 0 && dy < 0 && dx < 0 && left_fg;
                if (via_below || via_up || via_left) {
                    continue;
                }
                let zz = z + dz;
                let yy = y + dy;
                let xx = x + dx;
                if (zz < 0 || yy < 0 || yy >= i32(p.ny) || xx < 0 || xx >= i32(p.nx)) {
                    continue;
                }
                let j = (u32(zz) * p.ny + u32(yy)) * p.nx + u32(xx);
                if (fg(j)) {
                    unite(i, j);
                }
            }
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

// SLIC's connectivity step (skimage's _enforce_label_connectivity_cython)
// on the GPU, deterministic and with skimage's numbering:
// - init / unite_faces / flatten: face-connected pieces of equal k-means
//   label by union-find, the root being the piece's first pixel in raster
//   order (hooks go to the smaller index with atomicMin): skimage's order
//   of pieces.
// - measure: piece sizes at the roots.
// - count_kept / scan_blocks / rank_pieces: every piece's counter value,
//   start_label + the number of kept (size >= min_size) pieces before it.
//   A kept piece's label is its counter value.
// - find_candidates: a small piece replays skimage's breadth-first search
//   over its pixels once (one thread per piece, the queue a linked list
//   through the piece's own pixels) and keeps the last two distinct
//   earlier pieces it met.
// - bfs_round: a small piece takes the label of the last earlier piece met
//   whose label differs from its counter value, or keeps the counter. A
//   small earlier piece it needs must be resolved first: rounds repeat
//   until no piece is blocked; a piece resolved in round t stamps `state`
//   with t, and round t only reads stamps < t (written by earlier
//   dispatches), so the result never depends on timing.
// - gather: each pixel takes its piece's label (into `parent`), once every
//   piece is resolved.

struct Params {
    nx: u32,
    ny: u32,
    nz: u32,
    n: u32,
    min_size: u32,
    start_label: i32,
    n_blocks: u32,
}

const NONE: u32 = 0xffffffffu;
const END: u32 = 0xfffffffeu;
const BLOCK: u32 = 1024u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> labels: array<u32>;
@group(0) @binding(2) var<storage, read_write> parent: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> size: array<atomic<u32>>;
// Per root: 0 = unresolved, else the round that resolved it; then 4
// counters of blocked searches (round t counts into (t - 1) % 4 and clears
// t % 4 for the next round, so each holds one round's count), the largest
// label + 1, the number of the next round (bfs_round reads it, `advance`
// counts it up: the rounds of a batch share one uniform and bind group),
// the number of kept pieces (copied there for one readback), the last round
// that resolved a piece (the host sizes the next call's first batch of
// rounds from it), the largest piece's size (skimage cuts pieces at
// max_size: the host then runs its search instead), then the waiting
// roots' bits (WAITING_OFFSET).
@group(0) @binding(4) var<storage, read_write> state: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read_write> blocks: array<u32>;
@group(0) @binding(6) var<storage, read_write> piece_label: array<u32>;
// state[n + WAITING_OFFSET + w], bit b: pixel 32 w + b is a small piece's root not
// resolved yet (rounds look at these words, not at every pixel).
const WAITING_OFFSET: u32 = 9u;
// Per pixel: (stamp of the visit, next pixel in the search queue); at a
// small piece's root, after find_candidates: (last, previous) candidate.
@group(0) @binding(7) var<storage, read_write> queue: array<u32>;

// The round being run: 0 outside bfs_round.
var<private> this_round: u32;

fn keep() {
    if (p.n == NONE) {
        atomicStore(&parent[0], labels[0]);
        atomicAdd(&size[0], 0u);
        atomicMax(&state[0], 0u);
        blocks[0] = piece_label[0];
        queue[0] = 0u;
    }
}

fn thread_index(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * 256u;
}

@compute @workgroup_size(256)
fn init(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let i = thread_index(gid, groups);
    if (i >= p.n) {
        return;
    }
    atomicStore(&parent[i], select(i, NONE, labels[i] == NONE));
    atomicStore(&size[i], 0u);
    atomicStore(&state[i], 0u);
    queue[2u * i] = 0u;
    if (i % 32u == 0u) {
        atomicStore(&state[p.n + WAITING_OFFSET + i / 32u], 0u);
    }
    if (i == 0u) {
        atomicStore(&state[p.n + 4u], 0u);
        atomicStore(&state[p.n + 5u], 1u);
        atomicStore(&state[p.n + 7u], 0u);
        atomicStore(&state[p.n + 8u], 0u);
    }
}

// find, root_of and unite: shaders/common/union_find.wgsl.

@compute @workgroup_size(256)
fn unite_faces(@builtin(global_invocation_id) gid: vec3<u32>,
               @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let i = thread_index(gid, groups);
    if (i >= p.n) {
        return;
    }
    let l = labels[i];
    if (l == NONE) {
        return;
    }
    let x = i % p.nx;
    let y = (i / p.nx) % p.ny;
    let z = i / (p.nx * p.ny);
    if (x > 0u && labels[i - 1u] == l) {
        unite(i, i - 1u);
    }
    if (y > 0u && labels[i - p.nx] == l) {
        unite(i, i - p.nx);
    }
    if (z > 0u && labels[i - p.nx * p.ny] == l) {
        unite(i, i - p.nx * p.ny);
    }
}

@compute @workgroup_size(256)
fn flatten(@builtin(global_invocation_id) gid: vec3<u32>,
           @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let i = thread_index(gid, groups);
    if (i >= p.n || labels[i] == NONE) {
        return;
    }
    atomicStore(&parent[i], root_of(i));
}

var<workgroup> run_roots: array<u32, 256>;

@compute @workgroup_size(256)
fn measure(@builtin(global_invocation_id) gid: vec3<u32>,
           @builtin(local_invocation_index) li: u32,
           @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let i = thread_index(gid, groups);
    var root = NONE;
    if (i < p.n && labels[i] != NONE) {
        root = atomicLoad(&parent[i]);
    }
    run_roots[li] = root;
    workgroupBarrier();
    // One atomic per run of pixels of the same piece in the workgroup.
    if (root == NONE || (li > 0u && run_roots[li - 1u] == root)) {
        return;
    }
    var end = li + 1u;
    while (end < 256u && run_roots[end] == root) {
        end++;
    }
    atomicAdd(&size[root], end - li);
}

fn is_root(i: u32) -> bool {
    return i < p.n && labels[i] != NONE && atomicLoad(&parent[i]) == i;
}

fn is_kept(i: u32) -> bool {
    return is_root(i) && atomicLoad(&size[i]) >= p.min_size;
}

var<workgroup> partial: array<u32, 256>;

fn block_index(wid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return wid.x + wid.y * groups.x;
}

@compute @workgroup_size(256)
fn count_kept(@builtin(workgroup_id) wid: vec3<u32>,
              @builtin(local_invocation_index) lid: u32,
              @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let b = block_index(wid, groups);
    var c = 0u;
    var largest = 0u;
    for (var k = 0u; k < 4u; k++) {
        let i = b * BLOCK + lid * 4u + k;
        c += u32(is_kept(i));
        if (is_root(i)) {
            largest = max(largest, atomicLoad(&size[i]));
        }
    }
    if (largest > 0u) {
        atomicMax(&state[p.n + 8u], largest);
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

// One workgroup: exclusive scan of the block counts, 1024 per step.
@compute @workgroup_size(256)
fn scan_blocks(@builtin(local_invocation_index) lid: u32) {
    keep();
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
}

@compute @workgroup_size(256)
fn rank_pieces(@builtin(workgroup_id) wid: vec3<u32>,
               @builtin(local_invocation_index) lid: u32,
               @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let b = block_index(wid, groups);
    let first = b * BLOCK + lid * 4u;
    var c = 0u;
    for (var k = 0u; k < 4u; k++) {
        c += u32(is_kept(first + k));
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
        let i = first + k;
        if (is_root(i)) {
            piece_label[i] = bitcast<u32>(p.start_label + i32(rank));
            if (atomicLoad(&size[i]) >= p.min_size) {
                rank += 1u;
            }
        }
    }
}

@compute @workgroup_size(256)
fn clear_pending(@builtin(global_invocation_id) gid: vec3<u32>) {
    keep();
    if (gid.x < 4u) {
        atomicStore(&state[p.n + gid.x], 0u);
    }
}

// The label of earlier piece r as skimage sees it when it meets it, or
// NONE while r is a small piece not resolved by an earlier round.
fn label_of(r: u32) -> u32 {
    if (atomicLoad(&size[r]) >= p.min_size) {
        return piece_label[r];
    }
    let t = atomicLoad(&state[r]);
    if (t != 0u && t < this_round) {
        return piece_label[r];
    }
    return NONE;
}

// Visit stamp of the candidates pass (rounds stamp their own number).
const CANDIDATES: u32 = 0xfffffffdu;

struct Search {
    last: u32,     // the last earlier piece met (NONE: none)
    previous: u32, // the last earlier piece met other than `last`
    adjacent: u32, // resolving: the label taken
    blocked: bool, // resolving: an earlier piece met is not resolved yet
}

// skimage's breadth-first search over small piece r from its first pixel
// (the queue a linked list through the piece's own pixels, stamped with
// `stamp`), noting the earlier pieces met in order and, when `resolve`,
// taking the label of the last one whose label differs from r's counter
// value. The root's own queue words hold its candidates (below), so its
// visit and link live in registers.
fn search(r: u32, stamp: u32, resolve: bool) -> Search {
    let lab = labels[r];
    let current = piece_label[r];
    var s = Search(NONE, NONE, current, false);
    var root_next = END;
    var tail = r;
    var x = r;
    let plane = p.nx * p.ny;
    loop {
        let px = x % p.nx;
        let py = (x / p.nx) % p.ny;
        let pz = x / plane;
        for (var k = 0u; k < 6u; k++) {
            var j = NONE;
            switch k {
                case 0u: { if (px + 1u < p.nx) { j = x + 1u; } }
                case 1u: { if (px > 0u) { j = x - 1u; } }
                case 2u: { if (py + 1u < p.ny) { j = x + p.nx; } }
                case 3u: { if (py > 0u) { j = x - p.nx; } }
                case 4u: { if (pz + 1u < p.nz) { j = x + plane; } }
                default: { if (pz > 0u) { j = x - plane; } }
            }
            if (j == NONE) {
                continue;
            }
            let lj = labels[j];
            if (lj == lab) {
                // Same label and face-adjacent: the same piece.
                if (j != r && queue[2u * j] != stamp) {
                    queue[2u * j] = stamp;
                    queue[2u * j + 1u] = END;
                    if (tail == r) {
                        root_next = j;
                    } else {
                        queue[2u * tail + 1u] = j;
                    }
                    tail = j;
                }
            } else if (lj != NONE) {
                let rj = atomicLoad(&parent[j]);
                if (rj < r) {
                    if (rj != s.last) {
                        s.previous = s.last;
                        s.last = rj;
                    }
                    if (resolve) {
                        let l = label_of(rj);
                        if (l == NONE) {
                            s.blocked = true;
                            return s;
                        }
                        if (l != current) {
                            s.adjacent = l;
                        }
                    }
                }
            }
        }
        if (x == r) {
            x = root_next;
        } else {
            x = queue[2u * x + 1u];
        }
        if (x == END) {
            break;
        }
    }
    return s;
}

// Once, before the rounds: each small piece's search, keeping the last two
// distinct earlier pieces it met in its root's queue words.
@compute @workgroup_size(256)
fn find_candidates(@builtin(global_invocation_id) gid: vec3<u32>,
                   @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let r = thread_index(gid, groups);
    if (!is_root(r) || atomicLoad(&size[r]) >= p.min_size) {
        return;
    }
    let s = search(r, CANDIDATES, false);
    queue[2u * r] = s.last;
    queue[2u * r + 1u] = s.previous;
    atomicOr(&state[p.n + WAITING_OFFSET + r / 32u], 1u << (r % 32u));
}

fn blocked() {
    atomicAdd(&state[p.n + (this_round - 1u) % 4u], 1u);
}

// One round: each unresolved small piece takes the label of the last
// earlier piece it met whose label differs from its counter value: its two
// candidates answer unless both carry that value (then the search is
// replayed for the earlier ones). A piece waits only for the candidate it
// needs, so chains of small pieces resolve in fewer rounds than when every
// piece met must be resolved first; the labels are the same.
@compute @workgroup_size(256)
fn bfs_round(@builtin(global_invocation_id) gid: vec3<u32>,
             @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    this_round = atomicLoad(&state[p.n + 5u]);
    // One thread per word of waiting roots (32 pixels): rounds cost little
    // once few pieces wait.
    let w = thread_index(gid, groups);
    if (w == 0u) {
        atomicStore(&state[p.n + this_round % 4u], 0u);
    }
    if (w >= (p.n + 31u) / 32u) {
        return;
    }
    let word = p.n + WAITING_OFFSET + w;
    var waiting = atomicLoad(&state[word]);
    var left = waiting;
    while (left != 0u) {
        let b = firstTrailingBit(left);
        left &= left - 1u;
        if (resolve_piece(32u * w + b)) {
            waiting &= ~(1u << b);
        }
    }
    atomicStore(&state[word], waiting);
}

// Small piece r (its root, not resolved yet) in this round: whether it
// was resolved (else it counts as blocked).
fn resolve_piece(r: u32) -> bool {
    let current = piece_label[r];
    var adjacent = current;
    var settled = false;
    // The last candidate, then the previous one (NONE: no more).
    for (var c = 0u; c < 2u && !settled; c++) {
        let candidate = queue[2u * r + c];
        if (candidate == NONE) {
            settled = true;
            break;
        }
        let l = label_of(candidate);
        if (l == NONE) {
            blocked();
            return false;
        }
        if (l != current) {
            adjacent = l;
            settled = true;
        }
    }
    if (!settled) {
        let s = search(r, this_round, true);
        if (s.blocked) {
            blocked();
            return false;
        }
        adjacent = s.adjacent;
    }
    piece_label[r] = adjacent;
    atomicStore(&state[r], this_round);
    atomicMax(&state[p.n + 7u], this_round);
    return true;
}

// After each round: the next round's number.
@compute @workgroup_size(1)
fn advance() {
    keep();
    atomicAdd(&state[p.n + 5u], 1u);
}

var<workgroup> tops: array<u32, 256>;

// The largest label + 1 comes from one atomic per workgroup, not per pixel
// (those all hit one word).
@compute @workgroup_size(256)
fn gather(@builtin(global_invocation_id) gid: vec3<u32>,
          @builtin(local_invocation_index) li: u32,
          @builtin(num_workgroups) groups: vec3<u32>) {
    keep();
    let i = thread_index(gid, groups);
    // Only once the last round was blocked nowhere (counter 3), so the host
    // can record gather after a batch of rounds before it sees that count.
    let resolved = atomicLoad(&state[p.n + 3u]) == 0u;
    var top = 0u;
    if (i < p.n && resolved) {
        if (labels[i] == NONE) {
            atomicStore(&parent[i], bitcast<u32>(p.start_label - 1));
        } else {
            let l = piece_label[atomicLoad(&parent[i])];
            atomicStore(&parent[i], l);
            // Labels are >= 0 here.
            top = l + 1u;
        }
    }
    tops[li] = top;
    workgroupBarrier();
    for (var half = 128u; half > 0u; half >>= 1u) {
        if (li < half) {
            tops[li] = max(tops[li], tops[li + half]);
        }
        workgroupBarrier();
    }
    if (li == 0u && tops[0] > 0u) {
        atomicMax(&state[p.n + 4u], tops[0]);
    }
}

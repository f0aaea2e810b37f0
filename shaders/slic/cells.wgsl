// The k-means assignment of a masked image, appended to kmeans.wgsl (its
// Params, bindings and helpers). scikit-image seeds a masked image by
// k-means of the mask's coordinates (slic/host/mask_seeds.rs), so the
// centres lie anywhere, not on a grid: each iteration `bin_centres` sorts the live
// centres into cells of the window step (win_z, win_y, win_x), and a pixel
// looks at the centres of the cells its ±2·win windows can reach, applying
// skimage's window test to each.
// - bin_centres: one workgroup; each cell's centres get consecutive slots of
//   `members`, in any order within the cell;
// - assign_cells / assign_cells_spatial: one thread per pixel; the winner
//   is the smallest distance, ties to the lower index, against infinity
//   at first (NaN never wins), so the order of the candidates does not
//   matter: skimage's loop over the centres in index order with a strict
//   `<` against DBL_MAX. `_spatial` is skimage's position-only first pass
//   (ignore_color). The CPU twin (slic/cpu.rs: masked_pass) loops as
//   skimage does, with the same f32 arithmetic.

// [start of each cell's slots (cells + 1 words, the last the total)],
// then [a cursor per cell].
@group(0) @binding(8) var<storage, read_write> cells: array<atomic<u32>>;
// The centres' indices, cell by cell.
@group(0) @binding(9) var<storage, read_write> members: array<u32>;

// Every entry point of this file binds 0..9.
fn keep_cells() {
    if (p.n == NONE) {
        centres[0] = vec4<f32>(features[0]);
        labels[0] = maskw[0];
        atomicAdd(&accum[0], 0u);
        atomicMax(&maxdist[0], 0u);
        atomicOr(&changed[0], 0u);
        atomicAdd(&cells[0], 0u);
        members[0] = 0u;
    }
}

fn cell_total() -> u32 {
    return p.cells_x * p.cells_y * p.cells_z;
}

// The cell of a live centre's coordinate c (>= 0) along one axis.
fn cell_of(c: f32, win: u32, count: u32) -> u32 {
    return min(u32(max(c, 0.0)) / win, count - 1u);
}

// The cell of centre k, or NONE for a dead one.
fn centre_cell(k: u32) -> u32 {
    let b = k * stride();
    let z = cget(b);
    if (z == DEAD_Z) {
        return NONE;
    }
    let cz = cell_of(z, p.win_z, p.cells_z);
    let cy = cell_of(cget(b + 1u), p.win_y, p.cells_y);
    let cx = cell_of(cget(b + 2u), p.win_x, p.cells_x);
    return (cz * p.cells_y + cy) * p.cells_x + cx;
}

var<workgroup> partial: array<u32, 256>;

// Cursors to zero, centres counted per cell, the cells' first slots by
// an exclusive prefix sum (each thread a run of cells), then each live
// centre into a slot of its cell.
@compute @workgroup_size(256)
fn bin_centres(@builtin(local_invocation_index) li: u32) {
    keep_cells();
    let total = cell_total();
    let cursor = total + 1u;
    for (var c = li; c < total; c += 256u) {
        atomicStore(&cells[cursor + c], 0u);
    }
    storageBarrier();
    for (var k = li; k < p.n_centres; k += 256u) {
        let c = centre_cell(k);
        if (c != NONE) {
            atomicAdd(&cells[cursor + c], 1u);
        }
    }
    storageBarrier();
    let per = (total + 255u) / 256u;
    let lo = min(li * per, total);
    let hi = min(lo + per, total);
    var own = 0u;
    for (var c = lo; c < hi; c++) {
        own += atomicLoad(&cells[cursor + c]);
    }
    partial[li] = own;
    workgroupBarrier();
    for (var off = 1u; off < 256u; off <<= 1u) {
        var v = 0u;
        if (li >= off) {
            v = partial[li - off];
        }
        workgroupBarrier();
        partial[li] += v;
        workgroupBarrier();
    }
    var run = partial[li] - own;
    for (var c = lo; c < hi; c++) {
        let count = atomicLoad(&cells[cursor + c]);
        atomicStore(&cells[c], run);
        atomicStore(&cells[cursor + c], run);
        run += count;
    }
    if (li == 255u) {
        atomicStore(&cells[total], partial[255]);
    }
    storageBarrier();
    for (var k = li; k < p.n_centres; k += 256u) {
        let c = centre_cell(k);
        if (c != NONE) {
            members[atomicAdd(&cells[cursor + c], 1u)] = k;
        }
    }
}

// The cells along one axis whose centres' windows may hold coordinate q:
// a centre c in the window has q - 2 win - 1 < c < q + 2 win + 1.
fn cell_range(q: u32, win: u32, count: u32) -> vec2<u32> {
    let reach = 2u * win + 1u;
    let lo = select(0u, (q - reach) / win, q > reach);
    let hi = min((q + reach) / win, count - 1u);
    return vec2<u32>(lo, hi);
}

fn assign_in_cells(i: u32, colour: bool) {
    if (i >= p.n) {
        return;
    }
    let x = i % p.nx;
    let y = (i / p.nx) % p.ny;
    let z = p.z0 + i / (p.nx * p.ny);
    var best = NONE;
    var best_d = bitcast<f32>(0x7f800000u);
    var best_e = 0.0;
    if (in_mask(i)) {
        let rz = cell_range(z, p.win_z, p.cells_z);
        let ry = cell_range(y, p.win_y, p.cells_y);
        let rx = cell_range(x, p.win_x, p.cells_x);
        let q1z = f32(z + 1u);
        let q1y = f32(y + 1u);
        let q1x = f32(x + 1u);
        let two_z = f32(2u * p.win_z);
        let two_y = f32(2u * p.win_y);
        let two_x = f32(2u * p.win_x);
        for (var cz = rz.x; cz <= rz.y; cz++) {
            for (var cy = ry.x; cy <= ry.y; cy++) {
                let row = (cz * p.cells_y + cy) * p.cells_x;
                let first = atomicLoad(&cells[row + rx.x]);
                let end = atomicLoad(&cells[row + rx.y + 1u]);
                // The cells of a row along x have consecutive slots.
                for (var s = first; s < end; s++) {
                    let k = members[s];
                    let b = k * stride();
                    let c4 = centres[b >> 2u];
                    let kz = c4.x;
                    let ky = c4.y;
                    let kx = c4.z;
                    if (!in_window(kz, q1z, two_z) || !in_window(ky, q1y, two_y)
                        || !in_window(kx, q1x, two_x)) {
                        continue;
                    }
                    // skimage's order, as in the CPU twin:
                    // (dz^2 + dy^2 + dx^2) * weight + colour.
                    let dz = p.sz * (kz - f32(z));
                    let dy = p.sy * (ky - f32(y));
                    let dx = p.sx * (kx - f32(x));
                    let dzy = dz * dz + dy * dy;
                    let sp = (dzy + dx * dx) * p.spatial_weight;
                    var d = sp;
                    // The rounding error of d (two-sum), which orders equal
                    // sums as their exact values (slic/cpu.rs: Dist).
                    var e = 0.0;
                    if (colour) {
                        var col = colour_distance(i, b);
                        if (p.slic_zero != 0u) {
                            col = col / bitcast<f32>(atomicLoad(&maxdist[k]));
                        }
                        d = sp + col;
                        if (p.exact_ties != 0u) {
                            e = sum_error(vec4<f32>(sp), vec4<f32>(col), vec4<f32>(d)).x;
                        }
                    }
                    if (d < best_d || (d == best_d && (e < best_e || (e == best_e && k < best)))) {
                        best = k;
                        best_d = d;
                        best_e = e;
                    }
                }
            }
        }
    }
    if (labels[i] != best) {
        labels[i] = best;
        let flag = 4u + atomicLoad(&changed[0]);
        if (atomicLoad(&changed[flag]) == 0u) {
            atomicOr(&changed[flag], 1u);
        }
    }
}

@compute @workgroup_size(256)
fn assign_cells(@builtin(global_invocation_id) gid: vec3<u32>,
                @builtin(num_workgroups) groups: vec3<u32>) {
    keep_cells();
    assign_in_cells(thread_index(gid, groups), true);
}

@compute @workgroup_size(256)
fn assign_cells_spatial(@builtin(global_invocation_id) gid: vec3<u32>,
                        @builtin(num_workgroups) groups: vec3<u32>) {
    keep_cells();
    assign_in_cells(thread_index(gid, groups), false);
}

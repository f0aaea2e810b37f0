//! The median's generated WGSL: a pruned selection network per footprint,
//! spliced into the `median*.wgsl` templates (`cargo xtask wgsl` writes
//! every variant to files; crates/core/tests/shaders.rs validates them).

use std::fmt::Write as _;

use super::{Footprint, NETWORK_MAX};
use crate::shaders;

/// One step of a selection network on variables `v{a}`, `v{b}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// `v{a}, v{b} = min, max`
    Exchange(usize, usize),
    /// `v{a} = min(v{a}, v{b})`
    Min(usize, usize),
    /// `v{b} = max(v{a}, v{b})`
    Max(usize, usize),
}

/// Steps that leave element `rank` of `n` inputs (sorted ascending) in the
/// returned variable: Batcher's odd-even merge sort on the next power of two,
/// with the padding wires (+inf) folded away and the steps the output does
/// not depend on pruned.
fn selection_network(n: usize, rank: usize) -> (Vec<Step>, usize) {
    let p = n.next_power_of_two();
    let mut wire: Vec<Option<usize>> = (0..p).map(|i| (i < n).then_some(i)).collect();
    let mut steps = Vec::new();
    let mut half = 1;
    while half < p {
        let mut k = half;
        while k >= 1 {
            let mut j = k % half;
            while j + k < p {
                for i in 0..k.min(p - j - k) {
                    if (i + j) / (2 * half) == (i + j + k) / (2 * half) {
                        let (lo, hi) = (i + j, i + j + k);
                        match (wire[lo], wire[hi]) {
                            (_, None) => {}
                            (None, Some(_)) => wire.swap(lo, hi),
                            (Some(a), Some(b)) => steps.push((a, b)),
                        }
                    }
                }
                j += 2 * k;
            }
            k /= 2;
        }
        half *= 2;
    }
    let out = wire[rank].unwrap_or(0);
    let mut needed = vec![false; n];
    needed[out] = true;
    let mut kept = Vec::new();
    for &(a, b) in steps.iter().rev() {
        match (needed[a], needed[b]) {
            (true, true) => kept.push(Step::Exchange(a, b)),
            (true, false) => {
                kept.push(Step::Min(a, b));
                needed[b] = true;
            }
            (false, true) => {
                kept.push(Step::Max(a, b));
                needed[a] = true;
            }
            (false, false) => {}
        }
    }
    kept.reverse();
    (kept, out)
}

/// Workgroup memory a tile may use: WebGPU's guaranteed minimum.
const TILE_BYTES: usize = 16384;

/// The footprint's reach below and above the centre per axis (z, y, x).
fn reach(footprint: &Footprint) -> ([i32; 3], [i32; 3]) {
    let lo = [0, 1, 2].map(|a| footprint.offsets.iter().map(|o| -o[a]).max().unwrap_or(0));
    let hi = [0, 1, 2].map(|a| footprint.offsets.iter().map(|o| o[a]).max().unwrap_or(0));
    (lo, hi)
}

/// Footprints up to this many elements run without a tile: a 3x3 reads
/// its inputs from the L1 cache faster than from a tile, while a 7x7 is
/// faster with the tile (measured on 2048² f32; BENCHMARKS.md).
const TILE_MIN_ELEMENTS: usize = 10;

/// The (x, y, z) extent of the input a grid workgroup's outputs read, when
/// the footprint is large enough to gain from a tile and the tile fits
/// [`TILE_BYTES`] with keys of `key_bytes`.
pub(super) fn tile_extent(footprint: &Footprint, key_bytes: usize) -> Option<[usize; 3]> {
    if footprint.len() < TILE_MIN_ELEMENTS {
        return None;
    }
    let (lo, hi) = reach(footprint);
    let span = |a: usize| (lo[a].max(0) + hi[a].max(0)) as usize;
    let [gx, gy, gz] = crate::engine::GRID_WORKGROUP.map(|g| g as usize);
    let extent = [gx + span(2), gy + span(1), gz + span(0)];
    (extent.iter().product::<usize>() * key_bytes <= TILE_BYTES).then_some(extent)
}

/// The min/max steps of a selection network on variables `v0..`.
fn write_steps(f: &mut String, steps: &[Step]) {
    for s in steps {
        match *s {
            Step::Exchange(a, b) => {
                let _ = writeln!(
                    f,
                    "    {{ let t = key_min(v{a}, v{b}); v{b} = key_max(v{a}, v{b}); v{a} = t; }}"
                );
            }
            Step::Min(a, b) => {
                let _ = writeln!(f, "    v{a} = key_min(v{a}, v{b});");
            }
            Step::Max(a, b) => {
                let _ = writeln!(f, "    v{b} = key_max(v{a}, v{b});");
            }
        }
    }
}

/// The median shader with `footprint` compiled in as a selection network
/// (keys of `key_bytes`): `network_select` reads interior elements without
/// the boundary mapping; `median_network_tile`, generated when its tile
/// fits workgroup memory, loads the input of its 32 x 8 outputs once into
/// the tile (every element through the boundary mapping, about two per
/// invocation) and runs each output's network from there: neighbouring
/// outputs share all but a row or column of their windows, so the grid
/// entry loads each element up to 49 times.
pub(super) fn network_source(footprint: &Footprint, template: &str, key_bytes: usize) -> String {
    let (steps, out) = selection_network(footprint.len(), footprint.rank());
    let (lo, hi) = reach(footprint);
    let mut f = String::new();
    let n = footprint.len();
    // Writing to a String cannot fail.
    let _ = writeln!(f, "fn network_select(c: vec3<i32>) -> Key {{");
    for i in 0..n {
        let _ = writeln!(f, "    var v{i}: Key;");
    }
    let _ = writeln!(f, "    let n = vec3<i32>(p.in_shape.xyz);");
    let _ = writeln!(
        f,
        "    if (c.x >= {} && c.x < n.x - {} && c.y >= {} && c.y < n.y - {} && c.z >= {} && c.z < n.z - {}) {{",
        lo[2], hi[2], lo[1], hi[1], lo[0], hi[0]
    );
    let _ = writeln!(f, "        let sy = n.x;\n        let sz = n.x * n.y;");
    let _ = writeln!(f, "        let base = i32(centre_index(c));");
    for (i, o) in footprint.offsets.iter().enumerate() {
        let _ = writeln!(
            f,
            "        v{i} = fetch(u32(base + ({}) * sz + ({}) * sy + ({})));",
            o[0], o[1], o[2]
        );
    }
    let _ = writeln!(f, "    }} else {{");
    for (i, o) in footprint.offsets.iter().enumerate() {
        let _ = writeln!(
            f,
            "        v{i} = load(c + vec3<i32>({}, {}, {}));",
            o[2], o[1], o[0]
        );
    }
    let _ = writeln!(f, "    }}");
    write_steps(&mut f, &steps);
    let _ = writeln!(f, "    return v{out};\n}}");
    if let Some([tx, ty, tz]) = tile_extent(footprint, key_bytes) {
        let n = tx * ty * tz;
        let lo = lo.map(|v| v.max(0));
        let _ = writeln!(f, "\nvar<workgroup> tile: array<Key, {n}>;\n");
        let _ = writeln!(f, "@compute @workgroup_size(32, 8, 1)");
        let _ = writeln!(
            f,
            "fn median_network_tile(@builtin(workgroup_id) wid: vec3<u32>, \
             @builtin(local_invocation_id) lid: vec3<u32>, \
             @builtin(local_invocation_index) li: u32) {{"
        );
        let _ = writeln!(f, "    let first = wid * vec3<u32>(32u, 8u, 1u);");
        let _ = writeln!(
            f,
            "    let origin = vec3<i32>(first + p.offset.xyz) - vec3<i32>({}, {}, {});",
            lo[2], lo[1], lo[0]
        );
        let _ = writeln!(f, "    for (var j = li; j < {n}u; j += 256u) {{");
        let _ = writeln!(
            f,
            "        tile[j] = load(origin + vec3<i32>(i32(j % {tx}u), i32((j / {tx}u) % {ty}u), i32(j / {}u)));",
            tx * ty
        );
        let _ = writeln!(f, "    }}\n    workgroupBarrier();");
        let _ = writeln!(f, "    let gid = first + lid;");
        let _ = writeln!(
            f,
            "    if (any(gid >= p.out_shape.xyz)) {{\n        return;\n    }}"
        );
        let _ = writeln!(
            f,
            "    let centre = i32(({}u * {ty}u + lid.y + {}u) * {tx}u + lid.x + {}u);",
            lo[0], lo[1], lo[2]
        );
        for (i, o) in footprint.offsets.iter().enumerate() {
            let at = (o[0] as i64 * ty as i64 + o[1] as i64) * tx as i64 + o[2] as i64;
            let _ = writeln!(f, "    var v{i} = tile[u32(centre + ({at}))];");
        }
        write_steps(&mut f, &steps);
        let _ = writeln!(
            f,
            "    let i = (gid.z * p.out_shape.y + gid.y) * p.out_shape.x + gid.x;"
        );
        let _ = writeln!(
            f,
            "    key_store(i, finish(key_at(centre_index(vec3<i32>(gid + p.offset.xyz))), v{out}));\n}}"
        );
    }
    shaders::splice_generated(template, &f)
}

/// Every kind of generated median shader, named by template and footprint
/// extents (z, y, x): each network size as a 1-D window (1 to
/// [`NETWORK_MAX`] elements), the 2-D boxes (with and without a tile), the
/// in-plane boxes of 3-D outlier removal, and 3-D boxes, a column whose tile
/// fits and a depth whose tile does not.
pub fn variants() -> Vec<(String, String)> {
    let mut extents: Vec<Vec<usize>> = (1..=NETWORK_MAX).map(|n| vec![n]).collect();
    extents.extend((2..=7).map(|n| vec![n, n]));
    extents.extend([vec![3, 5], vec![1, 3, 3], vec![1, 7, 7], vec![3, 3, 3]]);
    extents.extend([vec![1, 49, 1], vec![49, 1, 1]]);
    let templates = [
        ("u32-keys", shaders::MEDIAN32, 4),
        ("u64-keys", shaders::MEDIAN64, 8),
        ("f32", shaders::MEDIAN_F32, 4),
    ];
    let mut out = Vec::new();
    for size in &extents {
        // Every extent above is a valid footprint; none is skipped.
        let Ok(footprint) = Footprint::size(size.len(), size) else {
            continue;
        };
        let dims: Vec<String> = size.iter().map(usize::to_string).collect();
        for (kind, template, key_bytes) in templates {
            out.push((
                format!("median/{kind}/{}.wgsl", dims.join("x")),
                network_source(&footprint, template, key_bytes),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_steps(steps: &[Step], values: &mut [u32]) {
        for &s in steps {
            match s {
                Step::Exchange(a, b) => {
                    let (x, y) = (values[a].min(values[b]), values[a].max(values[b]));
                    values[a] = x;
                    values[b] = y;
                }
                Step::Min(a, b) => values[a] = values[a].min(values[b]),
                Step::Max(a, b) => values[b] = values[a].max(values[b]),
            }
        }
    }

    #[test]
    fn selection_networks_select_the_rank_for_every_size() {
        let mut seed = 7u64;
        for n in 1..=NETWORK_MAX {
            for rank in [0, n / 2, n - 1] {
                let (steps, out) = selection_network(n, rank);
                for trial in 0..200 {
                    let mut v: Vec<u32> = (0..n)
                        .map(|_| {
                            seed ^= seed << 13;
                            seed ^= seed >> 7;
                            seed ^= seed << 17;
                            // Few distinct values in some trials: ties matter.
                            (seed % if trial % 2 == 0 { 4 } else { 1000 }) as u32
                        })
                        .collect();
                    let mut sorted = v.clone();
                    sorted.sort_unstable();
                    run_steps(&steps, &mut v);
                    assert_eq!(v[out], sorted[rank], "n {n} rank {rank}");
                }
            }
        }
        // Pruning pays: the median of 9 needs far fewer than the 19 exchanges
        // of a full 9-sort network on 16 wires.
        let (steps, _) = selection_network(9, 4);
        assert!(steps.len() <= 30, "{} steps", steps.len());
    }

    #[test]
    fn generated_shaders_validate() {
        for (size, ndim) in [(1, 1), (3, 2), (4, 2), (7, 2), (3, 3)] {
            let fp = Footprint::size(ndim, &[size]).unwrap();
            for template in [shaders::MEDIAN32, shaders::MEDIAN64, shaders::MEDIAN_F32] {
                let key_bytes = if template == shaders::MEDIAN64 { 8 } else { 4 };
                let src = network_source(&fp, template, key_bytes);
                assert!(src.contains("v0 = fetch"), "body spliced in");
                assert_eq!(
                    src.contains("fn median_network_tile"),
                    fp.len() >= TILE_MIN_ELEMENTS,
                    "{size}: a tile where it pays"
                );
                let module = naga::front::wgsl::parse_str(&src)
                    .unwrap_or_else(|e| panic!("{size}: {}", e.emit_to_string(&src)));
                naga::valid::Validator::new(
                    naga::valid::ValidationFlags::all(),
                    naga::valid::Capabilities::empty(),
                )
                .validate(&module)
                .unwrap_or_else(|e| panic!("{size}: {e:?}"));
            }
        }
    }

    #[test]
    fn tiles_are_generated_only_where_they_fit_workgroup_memory() {
        let column = Footprint::size(3, &[1, 49, 1]).unwrap();
        // (32) x (8 + 48) x 1 keys: 7 KiB of u32, 14 KiB of 64-bit keys.
        assert_eq!(tile_extent(&column, 8), Some([32, 56, 1]));
        let deep = Footprint::size(3, &[49, 1, 1]).unwrap();
        assert_eq!(tile_extent(&deep, 4), None); // 32 x 8 x 49 keys
        let src = network_source(&deep, shaders::MEDIAN32, 4);
        assert!(!src.contains("fn median_network_tile"));
        assert_eq!(
            tile_extent(&Footprint::size(2, &[7]).unwrap(), 4),
            Some([38, 14, 1])
        );
    }
}

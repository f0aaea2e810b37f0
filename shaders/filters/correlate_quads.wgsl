// correlate.wgsl's float sums on buffers of vec4 words, where the input and
// output boxes' rows are whole quads (widths and x offset multiples of 4;
// crates/core/src/filters/gpu.rs checks): each invocation computes four
// outputs along x and QUAD_ROWS along y. Inside the box a window row is a
// few 16-byte loads shared by the four lanes (and, for taps along y, by the
// QUAD_ROWS outputs), instead of a load per tap and output. Each output's
// sum takes its taps in the order of value_at, so the values are those of
// correlate_words.wgsl. Quads whose windows leave the box, or that hold
// constant-mode padding, take value_at lane by lane.

@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> dst: array<vec4<f32>>;

fn src_word(i: u32) -> f32 { return src[i >> 2u][i & 3u]; }

// The quad interior: generated per kernel by crates/core/src/filters/gpu.rs
// (taps unrolled, weights as literals). QUAD_LEFT and QUAD_RIGHT are the
// vec4 words a window row reaches left and right of the quad's own. The
// template's stand-in (never dispatched) takes value_at lane by lane.
// ---- GENERATED QUADS: begin ----
const QUAD_ROWS: u32 = 1u;
const QUAD_LEFT: u32 = 8u;
const QUAD_RIGHT: u32 = 8u;

fn quad_interior(o: vec3<u32>) {
    for (var j = 0u; j < QUAD_ROWS; j++) {
        let oj = o + vec3<u32>(0u, j, 0u);
        store_lanes(oj);
    }
}
// ---- GENERATED QUADS: end ----

// The quad at `o` through value_at, lane by lane.
fn store_lanes(o: vec3<u32>) {
    let out = ((o.z * p.out_shape.y + o.y) * p.out_shape.x + o.x) >> 2u;
    dst[out] = vec4<f32>(value_at(o), value_at(o + vec3<u32>(1u, 0u, 0u)),
                         value_at(o + vec3<u32>(2u, 0u, 0u)), value_at(o + vec3<u32>(3u, 0u, 0u)));
}

// Whether every lane and row of the quad at `o` lies inside the output box,
// holds an array element (constant mode), and reads only words of the box
// (whole vec4 words along x).
fn quad_inside(o: vec3<u32>) -> bool {
    let last = o + vec3<u32>(3u, QUAD_ROWS - 1u, 0u);
    if (last.y >= p.out_shape.y) {
        return false;
    }
    if (p.mode == 4u && (any(o < p.valid_lo.xyz) || any(last >= p.valid_hi.xyz))) {
        return false;
    }
    let in_n = vec3<i32>(p.in_shape.xyz);
    let start = vec3<i32>(o + p.offset.xyz) - vec3<i32>(p.left.xyz);
    let end = vec3<i32>(last + p.offset.xyz) - vec3<i32>(p.left.xyz) + vec3<i32>(p.klen.xyz);
    let x0 = i32(o.x + p.offset.x);
    return all(start.yz >= vec2<i32>(0)) && all(end.yz <= in_n.yz)
        && x0 >= 4 * i32(QUAD_LEFT) && x0 + 4 * i32(QUAD_RIGHT) + 4 <= in_n.x;
}

// Grid of (out x / 4, ceil(out y / QUAD_ROWS), out z) invocations.
@compute @workgroup_size(32, 8, 1)
fn correlate_quads(@builtin(global_invocation_id) gid: vec3<u32>) {
    let o = vec3<u32>(gid.x * 4u, gid.y * QUAD_ROWS, gid.z);
    if (any(o >= p.out_shape.xyz)) {
        return;
    }
    if (quad_inside(o)) {
        quad_interior(o);
        return;
    }
    for (var j = 0u; j < QUAD_ROWS; j++) {
        let oj = o + vec3<u32>(0u, j, 0u);
        if (oj.y >= p.out_shape.y) {
            return;
        }
        store_lanes(oj);
    }
}

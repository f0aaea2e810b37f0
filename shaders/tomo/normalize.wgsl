// Flat/dark normalisation, tomopy.normalize's formula in float32:
// out = (x - dark) / denominator, then min(out, cutoff) where a cutoff is
// given. The host averages the flats and darks and floors the denominator
// (flat - dark) at 1e-6 as tomopy does, so this pass is one read of the
// projection and of the two per-pixel fields.

struct Params {
    box_shape: vec4<u32>,  // x, y, z extents of this chunk
    origin: vec4<u32>,     // x, y, z of the chunk's first element in the stack
    plane: vec4<u32>,      // x, y extents of a whole projection
    cutoff: f32,
    has_cutoff: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> dark: array<f32>;
@group(0) @binding(4) var<storage, read> denominator: array<f32>;

@compute @workgroup_size(256)
fn normalize(@builtin(global_invocation_id) gid: vec3<u32>,
             @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    let nx = p.box_shape.x;
    let ny = p.box_shape.y;
    if (i >= nx * ny * p.box_shape.z) {
        return;
    }
    // Chunks may cover part of a projection: the field index is the
    // element's (y, x) in the whole plane.
    let x = i % nx + p.origin.x;
    let y = (i / nx) % ny + p.origin.y;
    let f = y * p.plane.x + x;
    var v = (src[i] - dark[f]) / denominator[f];
    if (p.has_cutoff != 0u && v > p.cutoff) {
        v = p.cutoff;
    }
    dst[i] = v;
}

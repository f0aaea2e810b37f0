// correlate.wgsl's entry points on buffers of f32 words: one invocation per
// output element.

@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

fn src_word(i: u32) -> f32 { return src[i]; }

// One thread per output element on a 3-D grid (no index division: measured
// faster), or on a 1-D grid for boxes whose grid would exceed the
// per-dimension workgroup limit (long 1-D signals).
@compute @workgroup_size(32, 8, 1)
fn correlate_grid(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (any(gid >= p.out_shape.xyz)) {
        return;
    }
    dst[(gid.z * p.out_shape.y + gid.y) * p.out_shape.x + gid.x] = value_at(gid);
}

@compute @workgroup_size(256)
fn correlate(@builtin(global_invocation_id) gid: vec3<u32>,
             @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    let nx = p.out_shape.x;
    let ny = p.out_shape.y;
    if (i >= nx * ny * p.out_shape.z) {
        return;
    }
    dst[i] = value_at(vec3<u32>(i % nx, (i / nx) % ny, i / (nx * ny)));
}

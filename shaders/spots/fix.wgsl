// Host decisions written back (apply), and the strong-pixel mask packed one
// byte per pixel for the labelling kernels (pack).

struct Params {
    count: u32, // fixes to apply, or pixels to pack
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

fn thread_index(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * 256u;
}

// src = (pixel, decision) pairs.
@compute @workgroup_size(256)
fn apply(@builtin(global_invocation_id) gid: vec3<u32>,
         @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(gid, groups);
    if (i >= p.count) {
        return;
    }
    dst[src[2u * i]] = src[2u * i + 1u];
}

// One thread per output word of four pixels.
@compute @workgroup_size(256)
fn pack(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(gid, groups);
    if (i * 4u >= p.count) {
        return;
    }
    var word = 0u;
    for (var j = 0u; j < 4u; j++) {
        let k = i * 4u + j;
        if (k < p.count && src[k] == 1u) {
            word |= 1u << (8u * j);
        }
    }
    dst[i] = word;
}

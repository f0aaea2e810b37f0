// Threshold on ordered integer keys: the host maps every dtype to keys whose
// unsigned order is the numeric order (NaN below everything), so one exact
// comparison serves u8...f64. Each thread writes four mask bytes in one word.

struct Params {
    count: u32,      // elements in this chunk
    key_lo: u32,     // smallest key that passes (x > value <=> key >= this)
    key_hi: u32,     // high word, 64-bit keys only
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> keys: array<u32>;
@group(0) @binding(2) var<storage, read_write> mask: array<u32>;

fn word_index(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * 256u;
}

@compute @workgroup_size(256)
fn threshold32(@builtin(global_invocation_id) gid: vec3<u32>,
               @builtin(num_workgroups) groups: vec3<u32>) {
    let w = word_index(gid, groups);
    if (w * 4u >= p.count) {
        return;
    }
    var packed = 0u;
    for (var j = 0u; j < 4u; j++) {
        let i = w * 4u + j;
        if (i < p.count && keys[i] >= p.key_lo) {
            packed |= 1u << (8u * j);
        }
    }
    mask[w] = packed;
}

@compute @workgroup_size(256)
fn threshold64(@builtin(global_invocation_id) gid: vec3<u32>,
               @builtin(num_workgroups) groups: vec3<u32>) {
    let w = word_index(gid, groups);
    if (w * 4u >= p.count) {
        return;
    }
    var packed = 0u;
    for (var j = 0u; j < 4u; j++) {
        let i = w * 4u + j;
        if (i < p.count) {
            // Keys are stored low word first.
            let lo = keys[2u * i];
            let hi = keys[2u * i + 1u];
            if (hi > p.key_hi || (hi == p.key_hi && lo >= p.key_lo)) {
                packed |= 1u << (8u * j);
            }
        }
    }
    mask[w] = packed;
}

// float32 values in `keys` (their bits), ordered in the shader: the GPU
// source-finding chain thresholds the image it already holds. NaN (tested
// on the bits: compilers may assume x == x) is never above.
@compute @workgroup_size(256)
fn threshold_f32(@builtin(global_invocation_id) gid: vec3<u32>,
                 @builtin(num_workgroups) groups: vec3<u32>) {
    let w = word_index(gid, groups);
    if (w * 4u >= p.count) {
        return;
    }
    var packed = 0u;
    for (var j = 0u; j < 4u; j++) {
        let i = w * 4u + j;
        if (i < p.count) {
            var b = keys[i];
            let nan = (b & 0x7fffffffu) > 0x7f800000u;
            if (b == 0x80000000u) {
                b = 0u; // -0 as +0
            }
            let key = select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
            if (!nan && key >= p.key_lo) {
                packed |= 1u << (8u * j);
            }
        }
    }
    mask[w] = packed;
}

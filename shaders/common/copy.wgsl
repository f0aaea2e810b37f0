// A plain device copy, the floor that memory-bound kernels are measured
// against (`gpuscope bench`, workloads copy-2048-*): each invocation moves
// PER_THREAD words, `threads` apart so that neighbouring invocations touch
// neighbouring words. `Word` is f32 here; the host makes a vec4<f32>
// variant by replacing the alias line (wider accesses per invocation).
alias Word = f32;

override PER_THREAD: u32 = 1u;

struct Params {
    count: u32,      // words to copy
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<Word>;
@group(0) @binding(2) var<storage, read_write> dst: array<Word>;

@compute @workgroup_size(256)
fn copy(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
    let threads = groups.x * groups.y * 256u;
    let t = gid.x + gid.y * groups.x * 256u;
    for (var k = 0u; k < PER_THREAD; k++) {
        let i = t + k * threads;
        if (i < p.count) {
            dst[i] = src[i];
        }
    }
}

// The conformance probe: tiny kernels with known answers that a backend must
// reproduce before gpuscope trusts it (crates/core/src/probe.rs). They test
// what the kernels rely on and translators have got wrong: the boundary
// modes (negative coordinates), integer wrap-around and atomics.

struct Params {
    count: u32,   // cases in `cases`
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> cases: array<vec4<i32>>;
@group(0) @binding(2) var<storage, read_write> answers: array<atomic<i32>>;

// answers[i] for case i = (c, n, mode, _): map_coordinate(c, n, mode).
// answers[count]: the sum of all case indices, by atomics.
// answers[count + 1]: 0xffffffff * 3 in u32 (wrap-around), as bits.
@compute @workgroup_size(256)
fn probe(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= p.count) {
        return;
    }
    let k = cases[i];
    atomicStore(&answers[i], map_coordinate(k.x, k.y, u32(k.z)));
    atomicAdd(&answers[p.count], i32(i));
    if (i == 0u) {
        let big = 0xffffffffu + u32(k.w);
        atomicStore(&answers[p.count + 1u], bitcast<i32>(big * 3u));
    }
}

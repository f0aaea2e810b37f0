// The scratch of shaders/decode/bslz4.wgsl in workgroup memory: blocks of
// up to 8 KiB decoded (the bitshuffle default, and what Eiger writes).

const SCRATCH_WORDS: u32 = 2048u;

var<workgroup> scratch: array<u32, 2048>;

// Every block starts at word 0 of its workgroup's scratch.
fn scratch_base(dst_word: u32) -> u32 {
    return 0u;
}

fn scratch_fits(dst_word: u32, bytes: u32) -> bool {
    return bytes <= 4u * SCRATCH_WORDS;
}

// Indices are clamped: workgroup memory has no robust access.
fn scratch_load(w: u32) -> u32 {
    return scratch[min(w, SCRATCH_WORDS - 1u)];
}

fn scratch_store(w: u32, v: u32) {
    scratch[min(w, SCRATCH_WORDS - 1u)] = v;
}

fn scratch_or(w: u32, v: u32) {
    let i = min(w, SCRATCH_WORDS - 1u);
    scratch[i] = scratch[i] | v;
}

fn scratch_sync() {
    workgroupBarrier();
}

// Scratch writes before a workgroupUniformLoad: its barrier publishes
// workgroup memory.
fn scratch_publish() {}

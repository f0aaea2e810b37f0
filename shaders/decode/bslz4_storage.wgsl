// The scratch of shaders/decode/bslz4.wgsl in a storage buffer laid out like
// the output: for blocks larger than the workgroup variant holds.

@group(0) @binding(5) var<storage, read_write> scratch: array<u32>;

// A block's scratch is where its output goes, in the scratch buffer.
fn scratch_base(dst_word: u32) -> u32 {
    return dst_word;
}

fn scratch_fits(dst_word: u32, bytes: u32) -> bool {
    let words = arrayLength(&scratch);
    return dst_word <= words && bytes / 4u <= words - dst_word;
}

fn scratch_load(w: u32) -> u32 {
    return scratch[min(w, arrayLength(&scratch) - 1u)];
}

fn scratch_store(w: u32, v: u32) {
    scratch[min(w, arrayLength(&scratch) - 1u)] = v;
}

fn scratch_or(w: u32, v: u32) {
    let i = min(w, arrayLength(&scratch) - 1u);
    scratch[i] = scratch[i] | v;
}

// Storage writes of invocation 0 made visible to its workgroup.
fn scratch_sync() {
    storageBarrier();
    workgroupBarrier();
}

// Scratch writes before a workgroupUniformLoad, whose barrier covers
// workgroup memory only.
fn scratch_publish() {
    storageBarrier();
}

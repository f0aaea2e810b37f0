// The median's sample buffers as arrays of 32-bit words (every entry of
// median.wgsl and median_search.wgsl).
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

fn word_at(i: u32) -> u32 { return src[i]; }
fn word_store(i: u32, w: u32) { dst[i] = w; }

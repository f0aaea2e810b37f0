// 64-bit keys for the median kernel: f64, u64 and i64 samples, as
// (low word, high word). Outlier removal on these dtypes finishes on the host.

alias Key = vec2<u32>;

// Key of f64 -inf (where NaN is selected, as Mantid Imaging does).
fn neg_inf_key() -> Key { return vec2<u32>(0xffffffffu, 0x000fffffu); }

fn key_at(i: u32) -> Key { return vec2<u32>(word_at(2u * i), word_at(2u * i + 1u)); }
fn key_store(i: u32, k: Key) {
    word_store(2u * i, k.x);
    word_store(2u * i + 1u, k.y);
}
fn key_param(v: vec2<u32>) -> Key { return v; }
fn key_is_nan(k: Key) -> bool { return k.x == 0u && k.y == 0u; }
fn key_lt(a: Key, b: Key) -> bool { return a.y < b.y || (a.y == b.y && a.x < b.x); }
fn key_min(a: Key, b: Key) -> Key { return select(b, a, key_lt(a, b)); }
fn key_max(a: Key, b: Key) -> Key { return select(a, b, key_lt(a, b)); }
fn key_xor(a: Key, b: Key) -> Key { return a ^ b; }
fn key_highest_bit(a: Key) -> u32 {
    if (a.y != 0u) { return 32u + u32(firstLeadingBit(a.y)); }
    return u32(firstLeadingBit(a.x));
}
fn key_set_bit(a: Key, b: u32) -> Key {
    if (b >= 32u) { return vec2<u32>(a.x, a.y | (1u << (b - 32u))); }
    return vec2<u32>(a.x | (1u << b), a.y);
}
fn key_clear_below(a: Key, b: u32) -> Key {
    if (b >= 64u) { return vec2<u32>(0u, 0u); }
    if (b >= 32u) { return vec2<u32>(0u, (a.y >> (b - 32u)) << (b - 32u)); }
    return vec2<u32>((a.x >> b) << b, a.y);
}

fn finish(centre: Key, med: Key) -> Key {
    if (p.nan_aware != 0u && key_is_nan(centre)) {
        return centre;
    }
    return med;
}

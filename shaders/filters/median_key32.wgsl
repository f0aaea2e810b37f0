// 32-bit keys for the median kernel: u8..u32, i8..i32 and f32 samples.

alias Key = u32;

// Key of f32 -inf (where NaN is selected, as Mantid Imaging does).
fn neg_inf_key() -> Key { return 0x007fffffu; }

fn key_of_word(w: u32) -> Key {
    if (p.f32_bits != 0u) {
        return key_of_f32_bits(w);
    }
    return w;
}
fn word_of_key(k: Key) -> u32 {
    if (p.f32_bits != 0u) {
        return f32_bits_of_key(k);
    }
    return k;
}
fn key_at(i: u32) -> Key { return key_of_word(word_at(i)); }
fn key_store(i: u32, k: Key) { word_store(i, word_of_key(k)); }

// Four keys side by side (median_quads.wgsl).
alias Key4 = vec4<u32>;

// The words stored for four outputs: medians m over the centres' stored
// words (finish() decides).
fn quad_words(centre: vec4<u32>, m: Key4) -> vec4<u32> {
    return vec4<u32>(word_of_key(finish(key_of_word(centre.x), m.x)),
                     word_of_key(finish(key_of_word(centre.y), m.y)),
                     word_of_key(finish(key_of_word(centre.z), m.z)),
                     word_of_key(finish(key_of_word(centre.w), m.w)));
}

// f32 data travels as raw bits (no conversion pass on the host); NaN is key 0.
fn key_of_f32_bits(b: u32) -> Key {
    if ((b & 0x7fffffffu) > 0x7f800000u) { return 0u; }
    if ((b & 0x80000000u) != 0u) { return ~b; }
    return b | 0x80000000u;
}
fn f32_bits_of_key(k: Key) -> u32 {
    if (k == 0u) { return 0x7fc00000u; }
    if ((k & 0x80000000u) != 0u) { return k & 0x7fffffffu; }
    return ~k;
}
fn key_param(v: vec2<u32>) -> Key { return v.x; }
fn key_is_nan(k: Key) -> bool { return k == 0u; }
fn key_lt(a: Key, b: Key) -> bool { return a < b; }
fn key_min(a: Key, b: Key) -> Key { return min(a, b); }
fn key_max(a: Key, b: Key) -> Key { return max(a, b); }
fn key_xor(a: Key, b: Key) -> Key { return a ^ b; }
fn key_highest_bit(a: Key) -> u32 { return u32(firstLeadingBit(a)); }
fn key_set_bit(a: Key, b: u32) -> Key { return a | (1u << b); }
fn key_clear_below(a: Key, b: u32) -> Key {
    if (b >= 32u) { return 0u; }
    return (a >> b) << b;
}

fn f32_of_key(k: Key) -> f32 {
    if ((k & 0x80000000u) != 0u) {
        return bitcast<f32>(k & 0x7fffffffu);
    }
    return bitcast<f32>(~k);
}

// x - m > diff (or >= for tomopy), as numpy computes it: in f32 for f32 data,
// exactly for integer data. Callers ensure x > m.
fn exceeds(x: Key, m: Key) -> bool {
    if (p.diff_f32 != 0u) {
        let xf = f32_of_key(x);
        let mf = f32_of_key(m);
        // x > m with an infinity: the difference is +inf.
        if (x >= 0xff800000u || m <= 0x007fffffu) {
            return true;
        }
        let d = xf - mf;
        if (p.outliers == 4u) {
            return d >= bitcast<f32>(p.diff.x);
        }
        return d > bitcast<f32>(p.diff.x);
    }
    // Keys of integers differ by the difference of the values.
    return x - m > p.diff.x;
}

// The output at an element whose own key is `centre` and window median `med`.
fn finish(centre: Key, med: Key) -> Key {
    if (p.nan_aware != 0u && key_is_nan(centre)) {
        return centre;
    }
    switch p.outliers {
        case 0u: { return med; }
        case 1u, 4u: { return select(centre, med, centre > med && exceeds(centre, med)); }
        case 2u: { return select(centre, med, med > centre && exceeds(med, centre)); }
        default: {
            let bright = centre > med && exceeds(centre, med);
            let dark = med > centre && exceeds(med, centre);
            return select(centre, med, bright || dark);
        }
    }
}

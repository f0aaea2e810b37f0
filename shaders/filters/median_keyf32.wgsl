// f32 samples compared as floats in the sorting network: a float min/max is
// one instruction (an integer key would need a conversion per load). NaN is
// detected on the bits and selected as -inf; -0.0 and +0.0 compare equal, as
// in scipy's double comparisons. The buffers hold raw f32 bits.

alias Key = f32;

fn neg_inf_key() -> Key { return bitcast<f32>(p.neg_inf_bits); }

fn key_of_word(w: u32) -> Key { return bitcast<f32>(w); }
fn word_of_key(k: Key) -> u32 { return select(bitcast<u32>(k), 0x7fc00000u, key_is_nan(k)); }
fn key_at(i: u32) -> Key { return key_of_word(word_at(i)); }
fn key_store(i: u32, k: Key) { word_store(i, word_of_key(k)); }

// Four keys side by side (median_quads.wgsl).
alias Key4 = vec4<f32>;

// The words stored for four outputs: medians m over the centres' stored
// words. A plain median needs no finish(): m is never NaN (NaN samples
// and a NaN cval are selected as -inf), and a NaN centre is kept as NaN.
fn quad_words(centre: vec4<u32>, m: Key4) -> vec4<u32> {
    if (p.outliers == 0u) {
        let keep = ((centre & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u))
            & vec4<bool>(p.nan_aware != 0u);
        return select(bitcast<vec4<u32>>(m), vec4<u32>(0x7fc00000u), keep);
    }
    return vec4<u32>(word_of_key(finish(key_of_word(centre.x), m.x)),
                     word_of_key(finish(key_of_word(centre.y), m.y)),
                     word_of_key(finish(key_of_word(centre.z), m.z)),
                     word_of_key(finish(key_of_word(centre.w), m.w)));
}

fn key_is_nan(k: Key) -> bool { return (bitcast<u32>(k) & 0x7fffffffu) > 0x7f800000u; }
fn key_is_inf(k: Key) -> bool { return (bitcast<u32>(k) & 0x7fffffffu) == 0x7f800000u; }
fn key_min(a: Key, b: Key) -> Key { return min(a, b); }
fn key_max(a: Key, b: Key) -> Key { return max(a, b); }

// The constant arrives as an ordered key (crates/core/src/keys.rs).
fn key_param(v: vec2<u32>) -> Key {
    let k = v.x;
    if ((k & 0x80000000u) != 0u) {
        return bitcast<f32>(k & 0x7fffffffu);
    }
    return bitcast<f32>(~k);
}

// x - m > diff (>= for tomopy) in f32, as numpy computes it; x > m.
fn exceeds(x: Key, m: Key) -> bool {
    if (key_is_inf(x) || key_is_inf(m)) {
        return true; // x > m with an infinity: the difference is +inf
    }
    let d = x - m;
    if (p.outliers == 4u) {
        return d >= bitcast<f32>(p.diff.x);
    }
    return d > bitcast<f32>(p.diff.x);
}

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

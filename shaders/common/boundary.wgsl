// Boundary modes of scipy.ndimage, shared by the stencil kernels (prepended
// to their source by crates/core/src/shaders.rs).
//
// Only non-negative operands reach `%`: WGSL defines the remainder of a
// negative integer, but the GLSL that naga writes for the GL backend does
// not, and llvmpipe gave wrong edges there. Each mode folds a negative
// coordinate onto a non-negative one by its own symmetry first.

// Returns the in-range index for coordinate c on an axis of length n, or -1
// for the constant value.
fn map_coordinate(c: i32, n: i32, mode: u32) -> i32 {
    if (c >= 0 && c < n) {
        return c;
    }
    switch mode {
        case 0u: { // reflect: d c b a | a b c d | d c b a (symmetric about -0.5)
            let period = 2u * u32(n);
            let u = select(u32(c), u32(-(c + 1)), c < 0);
            var r = u % period;
            if (r >= u32(n)) { r = period - 1u - r; }
            return i32(r);
        }
        case 1u: { // mirror: d c b | a b c d | c b a (symmetric about 0)
            if (n == 1) { return 0; }
            let period = 2u * u32(n) - 2u;
            let u = select(u32(c), u32(-c), c < 0);
            var r = u % period;
            if (r >= u32(n)) { r = period - r; }
            return i32(r);
        }
        case 2u: { return clamp(c, 0, n - 1); }
        case 3u: { // wrap: b c d | a b c d | a b c
            if (c >= 0) { return i32(u32(c) % u32(n)); }
            return n - 1 - i32(u32(-(c + 1)) % u32(n));
        }
        default: { return -1; }
    }
}

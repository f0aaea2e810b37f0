// Boundary modes of scipy.ndimage, shared by the stencil kernels (prepended
// to their source by crates/core/src/shaders.rs).

// Returns the in-range index for coordinate c on an axis of length n, or -1
// for the constant value.
fn map_coordinate(c: i32, n: i32, mode: u32) -> i32 {
    if (c >= 0 && c < n) {
        return c;
    }
    switch mode {
        case 0u: { // reflect: d c b a | a b c d | d c b a
            let period = 2 * n;
            var r = c % period;
            if (r < 0) { r += period; }
            if (r >= n) { r = period - 1 - r; }
            return r;
        }
        case 1u: { // mirror: d c b | a b c d | c b a
            if (n == 1) { return 0; }
            let period = 2 * n - 2;
            var r = c % period;
            if (r < 0) { r += period; }
            if (r >= n) { r = period - r; }
            return r;
        }
        case 2u: { return clamp(c, 0, n - 1); }
        case 3u: {
            var r = c % n;
            if (r < 0) { r += n; }
            return r;
        }
        default: { return -1; }
    }
}


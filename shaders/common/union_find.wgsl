// Union-find over a storage array `parent` of atomic<u32>, declared by the
// including kernel (prepended to its source by crates/core/src/shaders.rs).
// Every union hooks the larger root onto the smaller (atomicMin), so a set's
// root is its smallest index (its first pixel in raster order) whatever the
// order of the unions.

// Path halving: a non-root's parent only moves up its own path, so
// pointing it at its grandparent keeps the forest valid while other threads
// unite.
fn find(start: u32) -> u32 {
    var x = start;
    loop {
        let up = atomicLoad(&parent[x]);
        if (up == x) {
            return x;
        }
        let upper = atomicLoad(&parent[up]);
        if (upper != up) {
            atomicStore(&parent[x], upper);
        }
        x = upper;
    }
    return x;
}

// The root without writing: once no union is under way. A halving store
// from a find that read its pointers earlier could otherwise overwrite a
// pointer just set to the root with an older ancestor.
fn root_of(start: u32) -> u32 {
    var x = start;
    loop {
        let up = atomicLoad(&parent[x]);
        if (up == x) {
            return x;
        }
        x = up;
    }
    return x;
}

fn unite(a0: u32, b0: u32) {
    var a = find(a0);
    var b = find(b0);
    loop {
        if (a == b) {
            return;
        }
        if (a < b) {
            let t = a;
            a = b;
            b = t;
        }
        // a > b: hook root a under b unless another thread re-hooked a first.
        let old = atomicMin(&parent[a], b);
        if (old == a) {
            return;
        }
        a = find(old);
        b = find(b);
    }
}

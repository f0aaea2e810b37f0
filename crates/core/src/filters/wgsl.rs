//! The correlation kernels generated on the host: each kernel's interior
//! window sum unrolled with its weights as literals (correlate.wgsl), and
//! the quad interiors of correlate_quads.wgsl (vec4 words, four outputs
//! along x per invocation). `cargo xtask wgsl` writes them out for reading.

use std::fmt::Write as _;

use crate::engine::{Gpu, Module};
use crate::error::Result;
use crate::shaders::{self, Shader};

use super::{Filter, Pass};

/// Kernels up to this many taps get their window sum unrolled with the
/// weights as literals; larger ones loop over the weights buffer.
pub(super) const MAX_UNROLLED_TAPS: usize = 512;

/// Generated correlation shaders, named by kernel shape (z, y, x): a
/// Gaussian's 1-D pass, 2-D and 3-D boxes unrolled, and a kernel too large
/// to unroll (the template's loop).
pub(crate) fn generated_shaders() -> Vec<(String, String)> {
    let mut passes = Vec::new();
    if let Ok(f) = Filter::gaussian(1, &[1.5], 4.0) {
        passes.extend(f.passes);
    }
    for shape in [[1, 3, 3], [3, 3, 3], [1, 1, MAX_UNROLLED_TAPS + 1]] {
        let n: usize = shape.iter().product();
        let weights: Vec<f64> = (0..n).map(|i| (i as f64 + 1.0) / n as f64).collect();
        if let Ok(f) = Filter::correlate(3, &weights, &shape) {
            passes.extend(f.passes);
        }
    }
    let mut all: Vec<(String, String)> = passes
        .iter()
        .map(|p| {
            let [z, y, x] = p.shape;
            (format!("correlate/{z}x{y}x{x}.wgsl"), pass_source(p))
        })
        .collect();
    for p in passes.iter().filter(|p| quads_suit(p)) {
        let [z, y, x] = p.shape;
        let rows = default_quad_rows(p);
        all.push((
            format!("correlate_quads/{z}x{y}x{x}, {rows} rows.wgsl"),
            quads_source(p, rows),
        ));
    }
    all
}

/// The correlation kernel for `pass`, generated once per device for each
/// kernel shape and set of weights (see [`pass_source`]).
pub(super) fn pass_module(gpu: &Gpu, pass: &Pass) -> Result<Module> {
    if !unrolled(pass) {
        return Ok(Shader::Correlate.into());
    }
    let bits: Vec<u32> = pass.f32_weights().iter().map(|v| v.to_bits()).collect();
    let key = format!("correlate {:?} {bits:?}", pass.shape);
    gpu.generated(key, || pass_source(pass))
}

/// Whether `pass`'s interior window sum is unrolled: a small kernel with
/// finite weights (a WGSL literal cannot be an infinity).
fn unrolled(pass: &Pass) -> bool {
    pass.weights.len() <= MAX_UNROLLED_TAPS && pass.weights.iter().all(|&w| (w as f32).is_finite())
}

/// The correlation shader for `pass`: the template, with the interior window
/// sum unrolled when the kernel is small enough and its weights finite (a
/// WGSL literal cannot be an infinity).
fn pass_source(pass: &Pass) -> String {
    let weights = pass.f32_weights();
    if !unrolled(pass) {
        return shaders::CORRELATE.to_string();
    }
    let [nz, ny, nx] = pass.shape;
    let mut f = String::new();
    // Writing to a String cannot fail. Same order of the sum as the loop.
    let _ = writeln!(f, "fn interior_sum(base: u32) -> f32 {{");
    let _ = writeln!(
        f,
        "    let sy = p.in_shape.x;\n    let sz = p.in_shape.x * p.in_shape.y;"
    );
    let _ = writeln!(f, "    var acc = 0.0;");
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                let w = weights[(z * ny + y) * nx + x];
                let _ = writeln!(
                    f,
                    "    acc += {w:e}f * src_word(base + {z}u * sz + {y}u * sy + {x}u);"
                );
            }
        }
    }
    let _ = writeln!(f, "    return acc;\n}}");
    shaders::splice_generated(shaders::CORRELATE, &f)
}

/// Kernels of at most this many taps run as quads: one to nine taps along
/// x or y measured faster as quads; 5x5 no faster; 7x7, and 15 or 17 taps
/// along y of a 2-D image, slower (BENCHMARKS.md, dropped ideas).
const QUAD_MAX_TAPS: usize = 9;
/// Window rows of at most this many vec4 words (held in registers at once).
const QUAD_MAX_WORDS: usize = 8;

/// Whether `pass` has a quad kernel: unrolled, and small enough that the
/// quads measured faster than an output per invocation.
pub(super) fn quads_suit(pass: &Pass) -> bool {
    unrolled(pass) && pass.weights.len() <= QUAD_MAX_TAPS && quad_words(pass).2 <= QUAD_MAX_WORDS
}

/// (vec4 words left of the quad's own, right of it, in all) that a window
/// row of the four outputs x0..x0+3 reads, x0 a multiple of 4.
fn quad_words(pass: &Pass) -> (usize, usize, usize) {
    let (nx, left) = (pass.shape[2], pass.left[2]);
    let words_left = left.div_ceil(4);
    let words_right = (3 + nx - 1 - left) / 4;
    (words_left, words_right, words_left + words_right + 1)
}

/// Rows of quads per invocation. More rows share the window rows they
/// load where taps run along y, but measured slower (2, 4 and 8 rows on an
/// H200): fewer invocations hide less of the loads' latency.
pub(super) fn default_quad_rows(_pass: &Pass) -> usize {
    1
}

/// The quad kernel of `pass` with `rows` rows per invocation, generated
/// once per device for each kernel (see [`quads_source`]).
pub(super) fn quads_module(gpu: &Gpu, pass: &Pass, rows: usize) -> Result<Module> {
    let bits: Vec<u32> = pass.f32_weights().iter().map(|v| v.to_bits()).collect();
    let key = format!(
        "correlate quads {rows} {:?} {:?} {bits:?}",
        pass.shape, pass.left
    );
    gpu.generated(key, || quads_source(pass, rows))
}

/// correlate_quads.wgsl with `pass`'s quad interior unrolled: per window
/// row its vec4 words loaded once, then every tap of every output that
/// reads the row, each output's taps in value_at's order (z, y, x), so
/// that the sums are the word kernel's.
fn quads_source(pass: &Pass, rows: usize) -> String {
    let weights = pass.f32_weights();
    let [nz, ny, nx] = pass.shape;
    let left = pass.left[2];
    let (words_left, words_right, words) = quad_words(pass);
    let lane = ["x", "y", "z", "w"];
    let mut f = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(f, "const QUAD_ROWS: u32 = {rows}u;");
    let _ = writeln!(f, "const QUAD_LEFT: u32 = {words_left}u;");
    let _ = writeln!(f, "const QUAD_RIGHT: u32 = {words_right}u;\n");
    let _ = writeln!(f, "fn quad_interior(o: vec3<u32>) {{");
    let _ = writeln!(f, "    let sy = p.in_shape.x >> 2u;");
    let _ = writeln!(f, "    let sz = sy * p.in_shape.y;");
    let _ = writeln!(f, "    let cz = o.z + p.offset.z - p.left.z;");
    let _ = writeln!(f, "    let cy = o.y + p.offset.y - p.left.y;");
    let _ = writeln!(
        f,
        "    let base = (cz * p.in_shape.y + cy) * sy + ((o.x + p.offset.x) >> 2u) - QUAD_LEFT;"
    );
    for j in 0..rows {
        let _ = writeln!(f, "    var a{j} = vec4<f32>(0.0);");
    }
    for z in 0..nz {
        for r in 0..ny + rows - 1 {
            let _ = writeln!(f, "    {{");
            let _ = writeln!(f, "        let row = base + {z}u * sz + {r}u * sy;");
            for q in 0..words {
                let _ = writeln!(f, "        let q{q} = src[row + {q}u];");
            }
            // Output row j reads this row as its tap ky = r - j.
            for j in r.saturating_sub(ny - 1)..=r.min(rows - 1) {
                let ky = r - j;
                for x in 0..nx {
                    let w = weights[(z * ny + ky) * nx + x];
                    // Lane l's word: 4 * words_left + l + x - left words into the row.
                    let d0 = 4 * words_left + x - left;
                    let value = if d0.is_multiple_of(4) {
                        format!("q{}", d0 / 4)
                    } else {
                        let parts: Vec<String> = (d0..d0 + 4)
                            .map(|d| format!("q{}.{}", d / 4, lane[d % 4]))
                            .collect();
                        format!("vec4<f32>({})", parts.join(", "))
                    };
                    let _ = writeln!(f, "        a{j} += {w:e}f * {value};");
                }
            }
            let _ = writeln!(f, "    }}");
        }
    }
    let _ = writeln!(f, "    let so = p.out_shape.x >> 2u;");
    let _ = writeln!(
        f,
        "    let out = (o.z * p.out_shape.y + o.y) * so + (o.x >> 2u);"
    );
    for j in 0..rows {
        let _ = writeln!(f, "    dst[out + {j}u * so] = a{j};");
    }
    let _ = writeln!(f, "}}");
    shaders::splice_section(shaders::CORRELATE_QUADS, "GENERATED QUADS", &f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validate(src: &str, what: &str) {
        let module = naga::front::wgsl::parse_str(src)
            .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(src)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::empty(),
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{what}: {e:?}"));
    }

    #[test]
    fn unrolled_shaders_validate() {
        let k: Vec<f64> = (0..27).map(|i| f64::from(i) - 13.5).collect();
        let big = vec![1.0; MAX_UNROLLED_TAPS + 1];
        for (weights, shape) in [
            (vec![1e-30, -0.0, 2.5], vec![3]),
            (k.clone(), vec![3, 3, 3]),
            (big, vec![MAX_UNROLLED_TAPS + 1]),
        ] {
            let f = Filter::correlate(shape.len(), &weights, &shape).unwrap();
            let src = pass_source(&f.passes[0]);
            assert_eq!(
                src.contains("f * src_word(base + "),
                weights.len() <= MAX_UNROLLED_TAPS,
                "{shape:?}: unrolled only when small"
            );
            validate(&src, &format!("{shape:?}"));
        }
    }

    #[test]
    fn quad_kernels_validate_and_read_each_word_once_per_row() {
        // Odd and even kernels, centred and not, 1-D along each axis and n-D;
        // also kernels above the size that runs as quads (the generator
        // itself has no such limit).
        for (weights, shape) in [
            (vec![1.0; 9], vec![1, 1, 9]),
            (vec![1.0; 17], vec![1, 17, 1]),
            (vec![1.0; 5], vec![5, 1, 1]),
            (vec![0.5; 4], vec![1, 1, 4]),
            (vec![0.25; 9], vec![1, 3, 3]),
            (vec![0.1; 27], vec![3, 3, 3]),
            (vec![0.1; 14], vec![1, 2, 7]),
        ] {
            let f = Filter::correlate(3, &weights, &shape).unwrap();
            let pass = &f.passes[0];
            assert_eq!(
                quads_suit(pass),
                weights.len() <= QUAD_MAX_TAPS,
                "{shape:?}"
            );
            for rows in [1, 4] {
                let src = quads_source(pass, rows);
                let what = format!("{shape:?}, {rows} rows");
                assert!(
                    src.contains("fn quad_interior(o: vec3<u32>) {\n    let sy"),
                    "{what}: spliced"
                );
                validate(&src, &what);
                let (_, _, words) = quad_words(pass);
                let rows_read = shape[0] * (shape[1] + rows - 1);
                assert_eq!(
                    src.matches("= src[row + ").count(),
                    rows_read * words,
                    "{what}"
                );
                assert_eq!(src.matches("f * ").count(), weights.len() * rows, "{what}");
            }
        }
        validate(shaders::CORRELATE_QUADS, "the template");
    }
}

//! The host-memory workload: the host's side of the stack workloads,
//! without the GPU.

use std::time::Instant;

use serde_json::{Value, json};

use super::inputs::uniform;

/// The host's side of the stack workloads, without the GPU: 1 GiB copied
/// on the library's copy threads into an array kept across calls (what
/// median-stack-into's results go through) and into a fresh one from
/// [`gpuscope_core::stream::zeroed_output`] (median-stack's), whose pages
/// the kernel maps and zeroes as the copy first touches them; then the
/// fresh array's release. Medians of `repeat` runs each.
pub fn host_memory(repeat: usize) -> Value {
    let n = 1usize << 28;
    let source = uniform(n, 3);
    let mut kept: Vec<f32> = vec![0.0; n];
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let mut into_kept = Vec::new();
    let mut into_fresh = Vec::new();
    let mut release = Vec::new();
    for _ in 0..repeat {
        let t = Instant::now();
        gpuscope_core::stream::parallel_copy(
            bytemuck::cast_slice_mut(&mut kept),
            bytemuck::cast_slice(&source),
        );
        into_kept.push(ms(t));
        let mut fresh: Vec<f32> = gpuscope_core::stream::zeroed_output(n);
        let t = Instant::now();
        gpuscope_core::stream::parallel_copy(
            bytemuck::cast_slice_mut(&mut fresh),
            bytemuck::cast_slice(&source),
        );
        into_fresh.push(ms(t));
        let t = Instant::now();
        drop(fresh);
        release.push(ms(t));
    }
    let row = json!({
        "workload": "host-memory",
        "bytes": 4 * n,
        "host_cores": std::thread::available_parallelism().map_or(1, |t| t.get()),
        "copy_into_kept_ms": median(into_kept),
        "copy_into_fresh_ms": median(into_fresh),
        "release_fresh_ms": median(release),
    });
    eprintln!("{row}");
    row
}

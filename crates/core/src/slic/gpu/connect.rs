//! The connectivity step on the GPU (shaders/slic/connect.wgsl): pieces by
//! union-find, ranked, then the small pieces' searches in rounds.

use bytemuck::{Pod, Zeroable};

use std::sync::atomic::{AtomicU32, Ordering};

use super::Buffers;
use crate::copies::Prefaulted;
use crate::engine::{Gpu, Recorder, split_parts, vec_from_bytes};
use crate::error::{Error, Result};
use crate::shaders::Shader;
use crate::slic::host::Prepared;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct CParams {
    nx: u32,
    ny: u32,
    nz: u32,
    n: u32,
    min_size: u32,
    start_label: i32,
    n_blocks: u32,
}

/// Elements per workgroup of the connectivity step's ranking kernels.
const BLOCK: usize = 1024;

/// Counters of blocked searches, one per round modulo 4.
const ROUNDS: u32 = 4;

/// Search rounds recorded per submission of the connectivity step (a
/// multiple of [`ROUNDS`]; with the pieces' 9 passes within
/// MAX_TIMED_PASSES).
const ROUNDS_PER_BATCH: u32 = 8 * ROUNDS;

/// Search rounds of the first batch at least, and at most: each round
/// costs GPU time (a few microseconds with its `advance`), many volumes
/// resolve in a few (binary_blobs, coins and camera in 8), and a further
/// batch costs a round trip (astronaut needs 28, so it gains from a larger
/// first batch, while small volumes that resolve in 8 lose by it; the
/// first batch is sized from the previous call).
const FIRST_ROUNDS: u32 = 2 * ROUNDS;
const MAX_FIRST_ROUNDS: u32 = 8 * ROUNDS;

/// The rounds the last connectivity step needed (a multiple of ROUNDS,
/// within FIRST_ROUNDS..=MAX_FIRST_ROUNDS): the next call's first batch,
/// so that a series of similar images resolves in one round trip. Only
/// the time depends on it, never the labels.
static FIRST_ROUNDS_HINT: AtomicU32 = AtomicU32::new(FIRST_ROUNDS);

/// The connectivity step on the GPU, recorded while the k-means batches
/// submitted before it run; returns the final labels (in `labels_out`)
/// and their number of distinct values; None when a piece reaches
/// skimage's `max_size`, whose search skimage cuts there (the host then
/// runs that search: `host::connect`).
pub(super) async fn connect(
    gpu: &Gpu,
    prep: &Prepared,
    labels: &wgpu::Buffer,
    bufs: &mut Buffers<'_>,
    labels_out: Prefaulted<i32>,
) -> Result<Option<(Vec<i32>, usize)>> {
    let mut labels_out = Some(labels_out);
    let n = prep.n();
    let n_blocks = n.div_ceil(BLOCK);
    let clock = gpu.host_clock();
    let parent = bufs.get(4 * n as u64, "slic pieces").await?;
    let size = bufs.get(4 * n as u64, "slic piece sizes").await?;
    // Per root, then 4 blocked-search counters, the largest label + 1, the
    // next round's number, the number of kept pieces, the last round that
    // resolved a piece, the largest piece and a bit per pixel for the
    // small pieces waiting (connect.wgsl).
    let waiting_words = n.div_ceil(32) as u64;
    let state = bufs
        .get(4 * (n as u64 + 9 + waiting_words), "slic piece states")
        .await?;
    let out = bufs.get(4 * n as u64, "slic piece labels").await?;
    let blocks = bufs.get(4 * (n_blocks as u64 + 1), "slic blocks").await?;
    let queue = bufs.get(8 * n as u64, "slic search queue").await?;
    let params = gpu.uniform(&CParams {
        nx: prep.dims[2] as u32,
        ny: prep.dims[1] as u32,
        nz: prep.dims[0] as u32,
        n: n as u32,
        min_size: prep.min_size.min(u32::MAX as usize) as u32,
        start_label: prep.start_label,
        n_blocks: n_blocks as u32,
    });
    let mut rec = gpu.recorder();
    let refs = [
        &params, labels, &parent, &size, &state, &blocks, &out, &queue,
    ];
    for (entry, threads) in [
        ("init", n as u64),
        ("unite_faces", n as u64),
        ("flatten", n as u64),
        ("measure", n as u64),
        ("count_kept", (n_blocks * 256) as u64),
        ("scan_blocks", 256),
        ("rank_pieces", (n_blocks * 256) as u64),
        ("find_candidates", n as u64),
    ] {
        let pipeline = gpu.pipeline(Shader::SlicConnect, entry)?;
        rec.dispatch(&pipeline, &refs, threads)?;
    }
    // Then search rounds until none is blocked by an unresolved earlier
    // piece, FIRST_ROUNDS in the same submission as the pieces, then
    // ROUNDS_PER_BATCH to a submission: chains of small pieces are short once a
    // piece waits only for the candidate it needs (28 rounds on astronaut).
    // Batches are multiples of 4, so the last round of each uses counter 3,
    // which holds that round's count alone: zero means the last round was
    // blocked nowhere, so every piece is resolved.
    let clear = gpu.pipeline(Shader::SlicConnect, "clear_pending")?;
    let bfs = gpu.pipeline(Shader::SlicConnect, "bfs_round")?;
    let advance = gpu.pipeline(Shader::SlicConnect, "advance")?;
    let gather = gpu.pipeline(Shader::SlicConnect, "gather")?;
    // Every pixel's label, and the largest label + 1 and the number of
    // kept pieces copied next to counter 3 (state words n + 3 ... n + 6).
    // gather does nothing while counter 3 is not zero, so it can follow a
    // batch of rounds before the host knows whether they resolved every
    // piece.
    let gather_into = |rec: &mut Recorder<'_>| -> Result<()> {
        rec.dispatch(&gather, &refs, n as u64)?;
        rec.copy(&blocks, 4 * n_blocks as u64, &state, 4 * (n as u64 + 6), 4);
        Ok(())
    };
    let tail_at = 4 * (n as u64 + u64::from(ROUNDS) - 1);
    let first_rounds = FIRST_ROUNDS_HINT.load(Ordering::Relaxed);
    rec.dispatch(&clear, &refs, 4)?;
    rec.dispatch_repeated(
        &[(&bfs, &refs, waiting_words), (&advance, &refs, 1)],
        first_rounds,
    )?;
    // gather in this submission too (it waits for the rounds to resolve
    // every piece), read back with the labels where they fit a pooled
    // readback buffer: when the first batch resolves every piece (the
    // usual case, sized from the previous call), one round trip serves the
    // whole call. Later batches read the counts alone (labels that are
    // not final would cross the bus for nothing), and
    // the labels follow once resolved.
    let whole = n <= ONE_READBACK_MAX_PIXELS;
    gather_into(&mut rec)?;
    // Submits `rec` and reads back the tail of the search state and, with
    // `with_labels`, the labels, kept once they are final.
    let submit_and_read = async |rec: Recorder<'_>,
                                 with_labels: bool,
                                 labels_out: &mut Option<Prefaulted<i32>>|
           -> Result<(Vec<u32>, Option<Vec<i32>>)> {
        let mut parts: Vec<(&wgpu::Buffer, u64, u64)> = vec![(&state, tail_at, 24)];
        if with_labels {
            parts.push((&parent, 0, 4 * n as u64));
        }
        let sizes: Vec<u64> = parts.iter().map(|p| p.2).collect();
        let pending = rec.submit_with_readback_parts(&parts, None);
        gpu.finish_with(pending, |bytes| {
            let mut parts = split_parts(bytes, &sizes)?.into_iter();
            let mut next = || {
                parts
                    .next()
                    .ok_or_else(|| Error::Device("a readback part is missing".into()))
            };
            let tail: Vec<u32> = bytemuck::pod_collect_to_vec(next()?);
            let labels = match tail.first() {
                Some(0) if with_labels => {
                    let room = labels_out.take().map_or_else(Vec::new, Prefaulted::take);
                    Some(vec_from_bytes(room, next()?))
                }
                _ => None,
            };
            Ok((tail, labels))
        })
        .await
    };
    gpu.host_done("slic connectivity: recorded", clock);
    let (mut tail, mut labels) = submit_and_read(rec, whole, &mut labels_out).await?;
    let mut round = 1 + first_rounds;
    while tail.first() != Some(&0) {
        if round > 1 << 20 {
            return Err(Error::Device(
                "the connectivity step did not converge".into(),
            ));
        }
        let mut rec = gpu.recorder();
        rec.dispatch_repeated(
            &[(&bfs, &refs, waiting_words), (&advance, &refs, 1)],
            ROUNDS_PER_BATCH,
        )?;
        round += ROUNDS_PER_BATCH;
        gather_into(&mut rec)?;
        (tail, labels) = submit_and_read(rec, false, &mut labels_out).await?;
    }
    gpu.host_done("slic connectivity: pieces and searches", clock);
    let labels = match labels {
        Some(labels) => labels,
        None => {
            let clock = gpu.host_clock();
            let room = labels_out.take().map_or_else(Vec::new, Prefaulted::take);
            let labels = gpu.read_vec_into(&parent, 0, room, n).await?;
            gpu.host_done("slic connectivity: labels to the host", clock);
            labels
        }
    };
    // [blocked in the last round, largest label + 1, next round, kept
    // pieces, last round that resolved a piece, largest piece]
    let (Some(&top), Some(&kept), Some(&needed), Some(&largest)) =
        (tail.get(1), tail.get(3), tail.get(4), tail.get(5))
    else {
        return Err(Error::Device(
            "the connectivity counts came back short".into(),
        ));
    };
    FIRST_ROUNDS_HINT.store(
        needed
            .div_ceil(ROUNDS)
            .saturating_mul(ROUNDS)
            .clamp(FIRST_ROUNDS, MAX_FIRST_ROUNDS),
        Ordering::Relaxed,
    );
    let top = i64::from(top) - 1;
    let kept = i64::from(kept);
    // Kept piece j has label start + j; small pieces take one of those
    // labels or start + kept (a counter value not yet given to a piece).
    let count = kept + i64::from(top == i64::from(prep.start_label) + kept);
    if largest as usize >= prep.max_size.max(1) {
        return Ok(None);
    }
    Ok(Some((labels, count as usize)))
}

/// Volumes of up to this many pixels read their labels back with the
/// connectivity counts of the first batch of search rounds (a 64 MB
/// readback buffer).
const ONE_READBACK_MAX_PIXELS: usize = 1 << 24;

#[cfg(test)]
mod wgsl_layouts {
    use super::*;
    use crate::layout::mirror_layout;

    mirror_layout!(
        c_params_matches_wgsl,
        CParams,
        crate::shaders::SLIC_CONNECT,
        "Params",
        [nx, ny, nz, n, min_size, start_label, n_blocks]
    );
}

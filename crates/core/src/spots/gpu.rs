//! The GPU path: shaders/spots/threshold.wgsl (window sums and tests),
//! fix.wgsl (host decisions written back, mask packing), the labelling
//! kernels of segment::label, and measure.wgsl (exact per-spot sums).
//! Frames go up as read (u16 pairs or 32-bit words, never widened on the
//! host); buffers are allocated once per call and reused frame after frame.

use bytemuck::{Pod, Zeroable};

use super::*;
use crate::engine::Gpu;
use crate::segment::label;
use crate::shaders;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    h: u32,
    w: u32,
    ky: u32,
    kx: u32,
    min_count: u32,
    algorithm: u32,
    fmt: u32,
    has_mask: u32,
    gain_mode: u32,
    thr: u32,
    thr_none: u32,
    ed: u32,
    _pad1: u32,
    far_if_none: u32,
    list_cap: u32,
    slot: u32,
    gain: f32,
    nsig_s: f32,
    strong_cap: u32,
    _pad2: f32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct CountParams {
    count: u32,
    w: u32,
    fmt: u32,
    n_labels: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct MeasureParams {
    count: u32,
    w: u32,
    fmt: u32,
    cap: u32,
    n_blocks: u32,
    _pad: [u32; 3],
}

/// Undecided pixels one pass can list; beyond, the frame is computed by the
/// CPU reference (correct, slower).
const LIST_CAP: usize = 1 << 16;
const LIST_HEAD: usize = 4;
const ENTRY: usize = 6;
/// Words of per-spot sums (measure.wgsl), after a header of 4 words.
const W: usize = 22;
const HEAD: usize = 4;
/// Spots one frame sums on the GPU; more (absurd for diffraction) are
/// summed on the host from the labels.
const SPOT_CAP: usize = 1 << 16;
/// Spots read back with the frame's header; more take a second read.
const READ_SPOTS: usize = 4096;
/// The fast path's compact list of strong pixels and its spot slots
/// (compact.wgsl, 23 words per spot); a frame beyond either takes the
/// full-frame path.
const STRONG_CAP: usize = 1 << 18;
const FAST_SPOTS: usize = 1 << 14;
const W_FAST: usize = 23;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct CompactParams {
    w: u32,
    fmt: u32,
    strong_at: u32,
    strong_cap: u32,
    spot_cap: u32,
    _pad: [u32; 3],
}

/// The buffers of one call, reused for every frame.
struct Buffers {
    image: wgpu::Buffer,
    mask: wgpu::Buffer,
    gains: wgpu::Buffer,
    factors: wgpu::Buffer,
    state: wgpu::Buffer,
    cls: wgpu::Buffer,
    strong: wgpu::Buffer,
    list: wgpu::Buffer,
    fixes: wgpu::Buffer,
    bytes: wgpu::Buffer,
    parent: wgpu::Buffer,
    blocks: wgpu::Buffer,
    label_roots: wgpu::Buffer,
    acc: wgpu::Buffer,
}

impl Buffers {
    fn all(&self) -> [&wgpu::Buffer; 14] {
        [
            &self.image,
            &self.mask,
            &self.gains,
            &self.factors,
            &self.state,
            &self.cls,
            &self.strong,
            &self.list,
            &self.fixes,
            &self.bytes,
            &self.parent,
            &self.blocks,
            &self.label_roots,
            &self.acc,
        ]
    }
}

/// Everything a frame needs besides its counts.
pub(super) struct Setup<'a> {
    h: usize,
    w: usize,
    options: &'a SpotOptions,
    mask: Option<&'a [bool]>,
    base: Params,
}

fn fmt_of(c: Counts<'_>) -> u32 {
    match c {
        Counts::I32(_) => 0,
        Counts::U16(_) => 1,
        Counts::U32(_) => 2,
    }
}

fn frame_bytes(c: Counts<'_>) -> &[u8] {
    match c {
        Counts::I32(v) => bytemuck::cast_slice(v),
        Counts::U16(v) => bytemuck::cast_slice(v),
        Counts::U32(v) => bytemuck::cast_slice(v),
    }
}

fn words(raw: &[u8]) -> Vec<u32> {
    raw.chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

async fn allocate(gpu: &Gpu, n: usize, setup: &Setup<'_>) -> Result<Buffers> {
    let px = 4 * n as u64;
    let roots = 4 * label::root_words([1, setup.h, setup.w]) as u64;
    let need = px.max(roots);
    if need > gpu.max_binding_size() {
        return Err(Error::InvalidInput(format!(
            "a frame of {} x {} pixels needs {need}-byte buffers, above this device's binding limit of {} bytes; use --cpu",
            setup.h,
            setup.w,
            gpu.max_binding_size()
        )));
    }
    let sizes: [(u64, &str); 14] = [
        (px, "spots image"),
        (n.div_ceil(4) as u64 * 4, "spots mask"),
        (
            if matches!(setup.options.gain, Gain::Map(_)) {
                px
            } else {
                4
            },
            "spots gain",
        ),
        (4 * (window_max(setup.options) as u64 + 1), "spots factors"),
        (px, "spots state"),
        // Only the per-pixel erode and final test keep classes.
        (if tiled(setup.options) { 4 } else { px }, "spots classes"),
        (px, "spots strong"),
        (
            4 * (LIST_HEAD + 2 * LIST_CAP * ENTRY + STRONG_CAP) as u64,
            "spots list",
        ),
        (8 * LIST_CAP as u64 + 8, "spots fixes"),
        (n.div_ceil(4) as u64 * 4, "spots mask bytes"),
        (px, "spots labels"),
        (4 * label::aux_words(n) as u64, "spots label aux"),
        (
            4 * label::root_words([1, setup.h, setup.w]) as u64,
            "spots label roots",
        ),
        (
            4 * (HEAD + (SPOT_CAP * W).max(FAST_SPOTS * W_FAST)) as u64,
            "spot sums",
        ),
    ];
    let mut got: Vec<wgpu::Buffer> = Vec::new();
    for (bytes, what) in sizes {
        match gpu.storage(bytes, what).await {
            Ok(b) => got.push(b),
            Err(e) => {
                for b in got {
                    gpu.recycle(b);
                }
                return Err(e);
            }
        }
    }
    let mut it = got.into_iter();
    let mut next = || {
        it.next()
            .ok_or_else(|| Error::Device("buffer allocation".into()))
    };
    Ok(Buffers {
        image: next()?,
        mask: next()?,
        gains: next()?,
        factors: next()?,
        state: next()?,
        cls: next()?,
        strong: next()?,
        list: next()?,
        fixes: next()?,
        bytes: next()?,
        parent: next()?,
        blocks: next()?,
        label_roots: next()?,
        acc: next()?,
    })
}

/// The kernels' integer words hold sums over windows below 2^16 pixels.
pub(super) fn check_window(options: &SpotOptions) -> Result<()> {
    if window_max(options) >= 1 << 16 {
        return Err(Error::param(
            "kernel-size",
            format!(
                "{:?}: the GPU takes windows below 65536 pixels (half-widths up to 127); use --cpu",
                options.kernel_size
            ),
        ));
    }
    Ok(())
}

fn window_max(o: &SpotOptions) -> usize {
    let [ky, kx] = o.kernel_size;
    (2 * ky + 1) * (2 * kx + 1)
}

fn release(gpu: &Gpu, b: Buffers) {
    for buf in b.all() {
        gpu.recycle(buf.clone());
    }
}

pub(super) fn setup<'a>(
    h: usize,
    w: usize,
    options: &'a SpotOptions,
    mask: Option<&'a [bool]>,
) -> Setup<'a> {
    let [ky, kx] = options.kernel_size;
    let thr = options.global_threshold.floor();
    let base = Params {
        h: h as u32,
        w: w as u32,
        ky: ky as u32,
        kx: kx as u32,
        min_count: options.min_count() as u32,
        algorithm: u32::from(options.algorithm == Algorithm::DispersionExtended),
        fmt: 0,
        has_mask: u32::from(mask.is_some()),
        gain_mode: match options.gain {
            Gain::None => 0,
            Gain::Scalar(_) => 1,
            Gain::Map(_) => 2,
        },
        thr: if thr < 4294967296.0 { thr as u32 } else { 0 },
        thr_none: u32::from(thr >= 4294967296.0),
        ed: ky.min(kx) as u32,
        _pad1: 0,
        far_if_none: u32::from(h + w + 1 >= ky.min(kx)),
        list_cap: LIST_CAP as u32,
        slot: 0,
        gain: match options.gain {
            Gain::Scalar(g) => g as f32,
            _ => 1.0,
        },
        nsig_s: options.sigma_strong as f32,
        strong_cap: STRONG_CAP as u32,
        _pad2: 0.0,
    };
    Setup {
        h,
        w,
        options,
        mask,
        base,
    }
}

/// Uploads what stays the same for every frame: mask, gain map, factors.
fn upload_constants(gpu: &Gpu, b: &Buffers, s: &Setup<'_>) {
    let o = s.options;
    if let Some(m) = s.mask {
        let mut bytes: Vec<u8> = m.iter().map(|&v| u8::from(v)).collect();
        bytes.resize(m.len().div_ceil(4) * 4, 0);
        gpu.upload(&b.mask, &bytes);
    }
    if let Gain::Map(g) = &o.gain {
        let g32: Vec<f32> = g.iter().map(|&v| v as f32).collect();
        gpu.upload(&b.gains, bytemuck::cast_slice(&g32));
    }
    // The right side of a > c without x, in DIALS' operation order (f64),
    // per window count m; rounded once to f32.
    let factors: Vec<f32> = (0..=window_max(o))
        .map(|m| {
            if m < 2 {
                return 0.0;
            }
            let m = m as f64;
            let s = (2.0 * (m - 1.0)).sqrt();
            match o.gain {
                Gain::None => (o.sigma_background * s) as f32,
                _ => (m - 1.0 + o.sigma_background * s) as f32,
            }
        })
        .collect();
    gpu.upload(&b.factors, bytemuck::cast_slice(&factors));
}

/// Reads an undecided list (slot 0: first test, 1: final test): (pixel,
/// m, x, y) entries, or None on overflow.
async fn read_list(gpu: &Gpu, b: &Buffers, slot: usize) -> Result<Option<Vec<[u64; 4]>>> {
    let head = words(&gpu.read_at(&b.list, 0, 16).await?);
    let count = head[2 * slot] as usize;
    if count > LIST_CAP {
        return Ok(None);
    }
    if count == 0 {
        return Ok(Some(Vec::new()));
    }
    let raw = words(
        &gpu.read_at(
            &b.list,
            4 * (LIST_HEAD + slot * LIST_CAP * ENTRY) as u64,
            4 * (count * ENTRY) as u64,
        )
        .await?,
    );
    let entries = raw
        .chunks_exact(ENTRY)
        .map(|e| {
            [
                u64::from(e[0]),
                u64::from(e[1]),
                u64::from(e[2]) | u64::from(e[3]) << 32,
                u64::from(e[4]) | u64::from(e[5]) << 32,
            ]
        })
        .collect();
    Ok(Some(entries))
}

/// Writes host decisions into `target` (state or strong).
async fn apply(gpu: &Gpu, b: &Buffers, target: &wgpu::Buffer, fixes: &[u32]) -> Result<()> {
    if fixes.is_empty() {
        return Ok(());
    }
    gpu.upload(&b.fixes, bytemuck::cast_slice(fixes));
    let params = gpu.uniform(&CountParams {
        count: (fixes.len() / 2) as u32,
        w: 0,
        fmt: 0,
        n_labels: 0,
    });
    let mut rec = gpu.recorder();
    rec.dispatch(
        &gpu.pipeline(shaders::SPOTS_FIX, "apply")?,
        &[&params, &b.fixes, target],
        (fixes.len() / 2) as u64,
    )?;
    rec.submit().await
}

fn clear_list(gpu: &Gpu, b: &Buffers) {
    gpu.upload(&b.list, &[0u8; 16]);
}

/// The threshold kernels' bindings.
fn threshold_set(params: &wgpu::Buffer, b: &Buffers) -> [wgpu::Buffer; 9] {
    [
        params.clone(),
        b.image.clone(),
        b.mask.clone(),
        b.gains.clone(),
        b.factors.clone(),
        b.state.clone(),
        b.cls.clone(),
        b.strong.clone(),
        b.list.clone(),
    ]
}

/// Records one threshold kernel. "first" and "erode_final" (erode and
/// final_test) run as their workgroup-tiled versions (32 x 32 and 16 x 16
/// pixels per workgroup) when the half-widths fit the tiles' halo
/// (kernel_size up to 5: the final test widens it by 2, its tiles hold 7).
fn dispatch_threshold(
    rec: &mut crate::engine::Recorder<'_>,
    gpu: &Gpu,
    entry: &str,
    params: &wgpu::Buffer,
    b: &Buffers,
    s: &Setup<'_>,
) -> Result<()> {
    let set = threshold_set(params, b);
    let refs: Vec<&wgpu::Buffer> = set.iter().collect();
    let tiled = tiled(s.options);
    let (entry, threads) = match entry {
        "first" if tiled => {
            // The window's half-widths are the pipeline's constants.
            let [ky, kx] = s.options.kernel_size;
            let tiles = s.h.div_ceil(FIRST_TILE) * s.w.div_ceil(FIRST_TILE);
            let pipeline = gpu.pipeline_with(
                shaders::SPOTS_THRESHOLD,
                "first_tiled",
                &[("KY", ky as f64), ("KX", kx as f64)],
            )?;
            return rec.dispatch(&pipeline, &refs, (tiles * 256) as u64);
        }
        "erode_final" if tiled => {
            let tiles = s.h.div_ceil(TILE_ROWS) * s.w.div_ceil(TILE_WIDTH);
            ("erode_final", (tiles * 256) as u64)
        }
        // The per-pixel kernels: erode, then final_test.
        "erode_final" => {
            dispatch_threshold(rec, gpu, "erode", params, b, s)?;
            ("final_test", (s.h * s.w) as u64)
        }
        _ => (entry, (s.h * s.w) as u64),
    };
    rec.dispatch(
        &gpu.pipeline(shaders::SPOTS_THRESHOLD, entry)?,
        &refs,
        threads,
    )
}

/// first_tiled's square tiles (threshold.wgsl FW, FR); erode_final's tile
/// shape and largest halo (TW, TR, TH).
const FIRST_TILE: usize = 32;
const TILE_WIDTH: usize = 16;
const TILE_ROWS: usize = 16;
const TILE_HALO: usize = 7;

/// Whether the tiled kernels serve these options (their halo holds the
/// window plus the final test's 2).
fn tiled(options: &SpotOptions) -> bool {
    let [ky, kx] = options.kernel_size;
    ky.max(kx) + 2 <= TILE_HALO
}

/// The slow, exact path of one frame whose image is already on the GPU:
/// each test, then the host's f64 decisions for the undecided pixels.
/// Leaves the strong states (0/1) in `b.strong`; returns false when the
/// host must compute the frame (more undecided pixels than the list holds).
async fn threshold_frame(gpu: &Gpu, b: &Buffers, s: &Setup<'_>, frame: Counts<'_>) -> Result<bool> {
    let o = s.options;
    clear_list(gpu, b);
    let mut p = s.base;
    p.fmt = fmt_of(frame);
    let params = gpu.uniform(&p);
    let mut rec = gpu.recorder();
    dispatch_threshold(&mut rec, gpu, "first", &params, b, s)?;
    rec.submit().await?;
    let Some(list) = read_list(gpu, b, 0).await? else {
        return Ok(false);
    };
    let extended = o.algorithm == Algorithm::DispersionExtended;
    let mut fixes = Vec::with_capacity(2 * list.len());
    for &[k, m, x, y] in &list {
        let k = k as usize;
        let g = o.gain.at(k);
        let yes = if extended {
            dispersion_nonbackground(m as i64, x as i64, i128::from(y), g, o)
        } else {
            dispersion_strong(m as i64, x as i64, i128::from(y), frame.get(k), g, o)
        };
        fixes.extend([k as u32, u32::from(yes)]);
    }
    apply(gpu, b, if extended { &b.state } else { &b.strong }, &fixes).await?;
    if !extended {
        return Ok(true);
    }
    p.slot = 1;
    let params = gpu.uniform(&p);
    let mut rec = gpu.recorder();
    dispatch_threshold(&mut rec, gpu, "erode_final", &params, b, s)?;
    rec.submit().await?;
    let Some(list) = read_list(gpu, b, 1).await? else {
        return Ok(false);
    };
    let mut fixes = Vec::with_capacity(2 * list.len());
    for &[k, m, x, _] in &list {
        let k = k as usize;
        let yes = final_strong(m as i64, x as i64, frame.get(k), o.gain.at(k), o);
        fixes.extend([k as u32, u32::from(yes)]);
    }
    apply(gpu, b, &b.strong, &fixes).await?;
    Ok(true)
}

/// Records pack, label and measure after the strong states are in place.
fn dispatch_spots(
    rec: &mut crate::engine::Recorder<'_>,
    gpu: &Gpu,
    b: &Buffers,
    s: &Setup<'_>,
    fmt: u32,
) -> Result<()> {
    let n = s.h * s.w;
    let pack = gpu.uniform(&CountParams {
        count: n as u32,
        w: s.w as u32,
        fmt,
        n_labels: 0,
    });
    rec.dispatch(
        &gpu.pipeline(shaders::SPOTS_FIX, "pack")?,
        &[&pack, &b.strong, &b.bytes],
        n.div_ceil(4) as u64,
    )?;
    let plan = label::plan(gpu, [1, s.h, s.w], 1);
    let scratch = label::Scratch {
        aux: b.blocks.clone(),
        roots: b.label_roots.clone(),
    };
    label::dispatch_label(rec, gpu, &plan, &b.bytes, &b.parent, &scratch)?;
    let params = gpu.uniform(&MeasureParams {
        count: n as u32,
        w: s.w as u32,
        fmt,
        cap: SPOT_CAP as u32,
        n_blocks: plan.n_blocks as u32,
        _pad: [0; 3],
    });
    let set = [&params, &b.parent, &b.image, &b.acc, &b.blocks, &b.list];
    rec.dispatch(
        &gpu.pipeline(shaders::SPOTS_MEASURE, "clear")?,
        &set,
        (HEAD + SPOT_CAP * W) as u64,
    )?;
    rec.dispatch(
        &gpu.pipeline(shaders::SPOTS_MEASURE, "accumulate")?,
        &set,
        n as u64,
    )
}

/// Records the whole frame in one go, assuming no pixel is left undecided
/// (the usual case: the header read back says whether it held).
fn dispatch_frame(
    rec: &mut crate::engine::Recorder<'_>,
    gpu: &Gpu,
    b: &Buffers,
    s: &Setup<'_>,
    fmt: u32,
) -> Result<()> {
    let mut p = s.base;
    p.fmt = fmt;
    if s.options.algorithm == Algorithm::DispersionExtended {
        let first = gpu.uniform(&p);
        p.slot = 1;
        let second = gpu.uniform(&p);
        dispatch_threshold(rec, gpu, "first", &first, b, s)?;
        dispatch_threshold(rec, gpu, "erode_final", &second, b, s)?;
    } else {
        let first = gpu.uniform(&p);
        dispatch_threshold(rec, gpu, "first", &first, b, s)?;
    }
    dispatch_compact(rec, gpu, b, s, fmt)
}

/// Records the spot kernels of the compact list of strong pixels.
fn dispatch_compact(
    rec: &mut crate::engine::Recorder<'_>,
    gpu: &Gpu,
    b: &Buffers,
    s: &Setup<'_>,
    fmt: u32,
) -> Result<()> {
    let params = gpu.uniform(&CompactParams {
        w: s.w as u32,
        fmt,
        strong_at: (LIST_HEAD + 2 * LIST_CAP * ENTRY) as u32,
        strong_cap: STRONG_CAP as u32,
        spot_cap: FAST_SPOTS as u32,
        _pad: [0; 3],
    });
    // `state` is free once the threshold kernels are done: the root slots.
    let set = [
        &params, &b.list, &b.parent, &b.state, &b.strong, &b.image, &b.acc,
    ];
    for (entry, threads) in [
        ("clear", HEAD + FAST_SPOTS * W_FAST),
        ("init", STRONG_CAP),
        ("unite_neighbours", STRONG_CAP),
        ("roots", STRONG_CAP),
        ("accumulate", STRONG_CAP),
    ] {
        rec.dispatch(
            &gpu.pipeline(shaders::SPOTS_COMPACT, entry)?,
            &set,
            threads as u64,
        )?;
    }
    Ok(())
}

/// The fast path's spots from the acc words (header included), ordered by
/// their first pixel; None when the frame must take the full-frame path.
async fn fast_sums(
    gpu: &Gpu,
    b: &Buffers,
    head: &[u32],
    z: usize,
) -> Result<Option<Vec<SpotSums>>> {
    let (n_strong, n_spots) = (head[2] as usize, head[3] as usize);
    if head[0] != 0 || head[1] != 0 || n_strong > STRONG_CAP || n_spots > FAST_SPOTS {
        return Ok(None);
    }
    let words_needed = HEAD + n_spots * W_FAST;
    let more;
    let a: &[u32] = if head.len() >= words_needed {
        head
    } else {
        more = words(&gpu.read(&b.acc, 4 * words_needed as u64).await?);
        &more
    };
    let wide = |w: &[u32]| {
        w.iter()
            .rev()
            .fold(0u128, |acc, &x| (acc << 32) | u128::from(x))
    };
    let mut slots: Vec<&[u32]> = a[HEAD..words_needed].chunks_exact(W_FAST).collect();
    slots.sort_by_key(|e| e[22]);
    Ok(Some(
        slots
            .iter()
            .map(|e| {
                let sv = wide(&e[1..3]);
                SpotSums {
                    n: u64::from(e[0]),
                    sum_v: sv,
                    sum_v2: wide(&e[3..6]),
                    lo: [z as u64, u64::from(e[6]), u64::from(e[8])],
                    hi: [z as u64, u64::from(e[7]), u64::from(e[9])],
                    sum_vc: [z as u128 * sv, wide(&e[10..13]), wide(&e[13..16])],
                    sum_vc2: [(z * z) as u128 * sv, wide(&e[16..19]), wide(&e[19..22])],
                }
            })
            .collect(),
    ))
}

/// The strong-pixel mask of a fast-path frame from its compact list.
async fn fast_mask(gpu: &Gpu, b: &Buffers, n: usize, n_strong: usize) -> Result<Vec<bool>> {
    let mut mask = vec![false; n];
    if n_strong > 0 {
        let at = 4 * (LIST_HEAD + 2 * LIST_CAP * ENTRY) as u64;
        for k in words(&gpu.read_at(&b.list, at, 4 * n_strong as u64).await?) {
            mask[k as usize] = true;
        }
    }
    Ok(mask)
}

/// Header (undecided counts, label count) and spot sums from acc words.
fn parse_sums(a: &[u32], z: usize, count: usize) -> Vec<SpotSums> {
    let wide = |w: &[u32]| {
        w.iter()
            .rev()
            .fold(0u128, |acc, &x| (acc << 32) | u128::from(x))
    };
    a[HEAD..HEAD + count * W]
        .chunks_exact(W)
        .map(|e| {
            let sv = wide(&e[1..3]);
            SpotSums {
                n: u64::from(e[0]),
                sum_v: sv,
                sum_v2: wide(&e[3..6]),
                lo: [z as u64, u64::from(e[6]), u64::from(e[8])],
                hi: [z as u64, u64::from(e[7]), u64::from(e[9])],
                sum_vc: [z as u128 * sv, wide(&e[10..13]), wide(&e[13..16])],
                sum_vc2: [(z * z) as u128 * sv, wide(&e[16..19]), wide(&e[19..22])],
            }
        })
        .collect()
}

/// The spot sums of a frame whose kernels have run: from the acc words
/// already read (`head`), reading more when needed.
async fn collect_sums(
    gpu: &Gpu,
    b: &Buffers,
    s: &Setup<'_>,
    frame: Counts<'_>,
    z: usize,
    head: &[u32],
) -> Result<Vec<SpotSums>> {
    let count = head[2] as usize;
    if count > SPOT_CAP {
        // More spots than the GPU sums hold: sum on the host from the labels.
        let labels = words(&gpu.read(&b.parent, 4 * (s.h * s.w) as u64).await?);
        let mut sums = vec![SpotSums::default(); count];
        for (i, &l) in labels.iter().enumerate() {
            if l > 0 {
                let v = frame.get(i).max(0) as u64;
                sums[l as usize - 1].add([z as u64, (i / s.w) as u64, (i % s.w) as u64], v);
            }
        }
        return Ok(sums);
    }
    if head.len() >= HEAD + count * W {
        return Ok(parse_sums(head, z, count));
    }
    let a = words(&gpu.read(&b.acc, 4 * (HEAD + count * W) as u64).await?);
    Ok(parse_sums(&a, z, count))
}

/// The frame again on the exact slow path (image already on the GPU).
async fn slow_frame(
    gpu: &Gpu,
    b: &Buffers,
    s: &Setup<'_>,
    frame: Counts<'_>,
    z: usize,
) -> Result<Vec<SpotSums>> {
    if !threshold_frame(gpu, b, s, frame).await? {
        // Too many undecided pixels: the CPU reference decides.
        let cpu_mask = cpu::strong_pixels(frame, [s.h, s.w], s.mask, s.options)?;
        let states: Vec<u32> = cpu_mask.iter().map(|&v| u32::from(v)).collect();
        gpu.upload(&b.strong, bytemuck::cast_slice(&states));
    }
    clear_list(gpu, b);
    let mut rec = gpu.recorder();
    dispatch_spots(&mut rec, gpu, b, s, fmt_of(frame))?;
    rec.submit().await?;
    let head = words(&gpu.read(&b.acc, 4 * HEAD as u64).await?);
    collect_sums(gpu, b, s, frame, z, &head).await
}

/// Strong pixels of one frame on the GPU (DIALS' definition, exactly).
pub async fn strong_pixels(
    gpu: &Gpu,
    counts: Counts<'_>,
    shape: [usize; 2],
    mask: Option<&[bool]>,
    options: &SpotOptions,
) -> Result<Vec<bool>> {
    let r = find_spots(gpu, counts, [1, shape[0], shape[1]], mask, options, false).await?;
    Ok(r.strong)
}

/// Strong pixels and spots of `shape` = [frames, rows, cols] on the GPU.
/// See [`find_spots_with`]; this one also returns the strong-pixel mask.
pub async fn find_spots(
    gpu: &Gpu,
    counts: Counts<'_>,
    shape: [usize; 3],
    mask: Option<&[bool]>,
    options: &SpotOptions,
    three_d: bool,
) -> Result<SpotResult> {
    find_spots_with(gpu, counts, shape, mask, options, three_d, true).await
}

/// Strong pixels and spots of a series on the GPU. Per frame the
/// thresholds, the 4-connected labelling and the exact spot sums run in one
/// submission and only the sums come back (plus the strong-pixel mask when
/// `want_mask`, or for `three_d`, where the strong pixels of all frames are
/// then labelled 6-connected through the stack). Two frames are in flight:
/// the upload of one overlaps the kernels of the other. A frame with
/// undecided pixels (rare) is redone on the exact slow path.
pub async fn find_spots_with(
    gpu: &Gpu,
    counts: Counts<'_>,
    shape: [usize; 3],
    mask: Option<&[bool]>,
    options: &SpotOptions,
    three_d: bool,
    want_mask: bool,
) -> Result<SpotResult> {
    spots_of(gpu, counts, shape, 0, mask, options, three_d, want_mask).await
}

/// [`find_spots_with`] (2-D) on frames `first_frame..` of a longer series:
/// spot z coordinates are those of the whole series, summed as the whole
/// series sums them, so the spots of contiguous frame ranges, joined range
/// after range, are bit for bit those of one call on the whole series (the
/// CLI's `--adapters` runs one range per GPU).
pub async fn find_spots_from(
    gpu: &Gpu,
    counts: Counts<'_>,
    shape: [usize; 3],
    first_frame: usize,
    mask: Option<&[bool]>,
    options: &SpotOptions,
    want_mask: bool,
) -> Result<SpotResult> {
    spots_of(
        gpu,
        counts,
        shape,
        first_frame,
        mask,
        options,
        false,
        want_mask,
    )
    .await
}

#[allow(clippy::too_many_arguments)]
async fn spots_of(
    gpu: &Gpu,
    counts: Counts<'_>,
    shape: [usize; 3],
    z0: usize,
    mask: Option<&[bool]>,
    options: &SpotOptions,
    three_d: bool,
    want_mask: bool,
) -> Result<SpotResult> {
    let [nz, h, w] = shape;
    let n = h * w;
    if nz == 0 || counts.len() != nz * n {
        return Err(Error::InvalidInput(format!(
            "{} values do not fill {nz} frames of {h} x {w}",
            counts.len()
        )));
    }
    check_frame(n, [h, w], mask, options)?;
    check_window(options)?;
    let s = setup(h, w, options, mask);
    let want_mask = want_mask || three_d;
    let frame_len = frame_bytes(counts.slice(0..n)).len().div_ceil(4) * 4;
    // Two frames in flight, three upload buffers (see run_series).
    let mut slots = Slots::open(gpu, &s, nz.min(2), nz.min(2) + 1, frame_len as u64).await?;
    let result = run_series(gpu, &mut slots, &s, counts, nz, z0, want_mask).await;
    slots.close(gpu);
    let (strong, mut sums) = result?;
    if three_d {
        let l = label::label(gpu, &strong, &[nz, h, w], 1).await?;
        sums = vec![SpotSums::default(); l.count];
        for (i, &lab) in l.labels.iter().enumerate() {
            if lab > 0 {
                let (z, r, c) = (z0 + i / n, (i / w) % h, i % w);
                let v = counts.get(i).max(0) as u64;
                sums[lab as usize - 1].add([z as u64, r as u64, c as u64], v);
            }
        }
    }
    let mut r = SpotResult::from_sums(strong, &sums, options);
    if !want_mask {
        r.n_strong = sums.iter().map(|s| s.n).sum();
    }
    Ok(r)
}

/// The device buffers of the frames in flight (one set per frame) and
/// the upload buffers feeding them, allocated once per series and reused
/// frame after frame.
pub(super) struct Slots {
    bufs: Vec<Buffers>,
    ups: Vec<crate::engine::UploadBuffer>,
}

impl Slots {
    /// `sets` sets of frame buffers and `uploads` upload buffers for frames
    /// of up to `frame_bytes` packed bytes.
    pub(super) async fn open(
        gpu: &Gpu,
        s: &Setup<'_>,
        sets: usize,
        uploads: usize,
        frame_bytes: u64,
    ) -> Result<Slots> {
        let mut slots = Slots {
            bufs: Vec::new(),
            ups: Vec::new(),
        };
        for _ in 0..sets {
            match allocate(gpu, s.h * s.w, s).await {
                Ok(b) => {
                    upload_constants(gpu, &b, s);
                    slots.bufs.push(b);
                }
                Err(e) => {
                    slots.close(gpu);
                    return Err(e);
                }
            }
        }
        for _ in 0..uploads {
            slots.ups.push(gpu.upload_buffer(frame_bytes));
        }
        Ok(slots)
    }

    /// Gives the buffers back to the engine's pools.
    pub(super) fn close(&mut self, gpu: &Gpu) {
        for b in self.bufs.drain(..) {
            release(gpu, b);
        }
        for u in self.ups.drain(..) {
            gpu.release_upload(u);
        }
    }

    /// Uploads frame `z` (packed as read) and submits its kernels; the
    /// header of its spot sums comes back with the returned `Pending`. The
    /// upload waits only for its buffer's previous copy, not its kernels.
    pub(super) async fn submit(
        &mut self,
        gpu: &Gpu,
        z: usize,
        s: &Setup<'_>,
        frame: Counts<'_>,
    ) -> Result<crate::engine::Pending> {
        let k = z % self.ups.len();
        let clock = gpu.host_clock();
        gpu.fill(&mut self.ups[k], frame_bytes(frame)).await?;
        gpu.host_done("spots series: copy into upload memory", clock);
        let b = &self.bufs[z % self.bufs.len()];
        submit_filled(gpu, b, &mut self.ups[k], s, frame)
    }

    /// Waits for frame `z` (submitted on `submit`) and returns its spot
    /// sums (ordered by first pixel) and, when `want_mask`, its strong
    /// pixels (empty otherwise).
    pub(super) async fn collect(
        &self,
        gpu: &Gpu,
        s: &Setup<'_>,
        frame: Counts<'_>,
        z: usize,
        pending: crate::engine::Pending,
        want_mask: bool,
    ) -> Result<(Vec<bool>, Vec<SpotSums>)> {
        let b = &self.bufs[z % self.bufs.len()];
        collect_frame(gpu, b, s, frame, z, pending, want_mask).await
    }
}

/// Submits the frame in `up` (packed as read) on the buffers `b`.
fn submit_filled(
    gpu: &Gpu,
    b: &Buffers,
    up: &mut crate::engine::UploadBuffer,
    s: &Setup<'_>,
    frame: Counts<'_>,
) -> Result<crate::engine::Pending> {
    let clock = gpu.host_clock();
    let read_bytes = 4 * (HEAD + READ_SPOTS * W_FAST) as u64;
    clear_list(gpu, b);
    let mut rec = gpu.recorder();
    rec.copy_in(up, &b.image, frame_bytes(frame).len() as u64);
    dispatch_frame(&mut rec, gpu, b, s, fmt_of(frame))?;
    let pending = rec.submit_with_readback(&b.acc, read_bytes, Some(up));
    gpu.host_done("spots series: record and submit", clock);
    Ok(pending)
}

/// Waits for the frame `z` submitted on `b` and returns its spot sums
/// (ordered by first pixel) and, when `want_mask`, its strong pixels
/// (empty otherwise). Frames the fast path cannot decide are redone on the
/// exact slow path.
async fn collect_frame(
    gpu: &Gpu,
    b: &Buffers,
    s: &Setup<'_>,
    frame: Counts<'_>,
    z: usize,
    pending: crate::engine::Pending,
    want_mask: bool,
) -> Result<(Vec<bool>, Vec<SpotSums>)> {
    let n = s.h * s.w;
    let clock = gpu.host_clock();
    let head = gpu.finish_with(pending, |bytes| Ok(words(bytes))).await?;
    gpu.host_done("spots series: wait for a frame", clock);
    match fast_sums(gpu, b, &head, z).await? {
        Some(sums) => {
            let mask = if want_mask {
                fast_mask(gpu, b, n, head[2] as usize).await?
            } else {
                Vec::new()
            };
            Ok((mask, sums))
        }
        None => {
            // Undecided pixels or more strong pixels than the compact
            // path holds: the exact step-by-step full-frame path.
            let sums = slow_frame(gpu, b, s, frame, z).await?;
            let mask = if want_mask {
                let raw = gpu.read(&b.bytes, n as u64).await?;
                raw.iter().map(|&v| v != 0).collect()
            } else {
                Vec::new()
            };
            Ok((mask, sums))
        }
    }
}

/// The frames of `counts` through `slots`: while frame z + 1 is copied
/// into its upload buffer on other threads, this thread submits frame z
/// and collects frame z - 1, so the host's copy (the bound: over the bus
/// into device memory on NVIDIA) never waits for recording or collecting.
/// Needs one more upload buffer than frame sets: frame z + 1's was last
/// used by frame z + 1 - uploads, collected one step before.
async fn run_series(
    gpu: &Gpu,
    slots: &mut Slots,
    s: &Setup<'_>,
    counts: Counts<'_>,
    nz: usize,
    z0: usize,
    want_mask: bool,
) -> Result<(Vec<bool>, Vec<SpotSums>)> {
    let n = s.h * s.w;
    let frame = |z: usize| counts.slice(z * n..(z + 1) * n);
    let (sets, uploads) = (slots.bufs.len(), slots.ups.len());
    if sets == 0 || uploads <= sets {
        return Err(Error::Device(
            "a spot series needs more upload buffers than frame sets".into(),
        ));
    }
    let mut strong = Vec::with_capacity(if want_mask { nz * n } else { 0 });
    let mut sums = Vec::new();
    let mut in_flight: std::collections::VecDeque<(usize, crate::engine::Pending)> =
        Default::default();
    if nz > 0 {
        gpu.fill(&mut slots.ups[0], frame_bytes(frame(0))).await?;
    }
    for z in 0..nz {
        // Frame z + 1 takes frame z + 1 - sets' buffers: collect that one.
        let keep = if z + 1 < nz { sets - 1 } else { 0 };
        let (this_up, next_up) = pair_mut(&mut slots.ups, z % uploads, (z + 1) % uploads);
        let bufs = &slots.bufs;
        let in_flight = &mut in_flight;
        let step = async {
            in_flight.push_back((
                z,
                submit_filled(gpu, &bufs[z % sets], this_up, s, frame(z))?,
            ));
            let mut done = Vec::new();
            while in_flight.len() > keep {
                let Some((zf, pending)) = in_flight.pop_front() else {
                    break;
                };
                let b = &bufs[zf % sets];
                done.push(collect_frame(gpu, b, s, frame(zf), z0 + zf, pending, want_mask).await?);
            }
            Ok::<_, Error>(done)
        };
        let done = match next_up {
            Some(next_up) if z + 1 < nz => {
                let clock = gpu.host_clock();
                let done = gpu
                    .fill_during(
                        next_up,
                        frame_bytes(frame(z + 1)),
                        crate::copies::upload_threads(),
                        step,
                    )
                    .await?;
                gpu.host_done("spots series: copy next frame, submit, collect", clock);
                done?
            }
            _ => step.await?,
        };
        for (mask, frame_sums) in done {
            sums.extend(frame_sums);
            strong.extend(mask);
        }
    }
    Ok((strong, sums))
}

/// Mutable references to items `i` and `j` of `v` (None for the second
/// when they are the same item).
fn pair_mut<T>(v: &mut [T], i: usize, j: usize) -> (&mut T, Option<&mut T>) {
    if i < j {
        let (a, b) = v.split_at_mut(j);
        (&mut a[i], Some(&mut b[0]))
    } else if j < i {
        let (a, b) = v.split_at_mut(i);
        (&mut b[0], Some(&mut a[j]))
    } else {
        (&mut v[i], None)
    }
}

#[cfg(test)]
mod wgsl_layouts {
    use super::*;
    use crate::layout::mirror_layout;

    mirror_layout!(
        params_matches_wgsl,
        Params,
        crate::shaders::SPOTS_THRESHOLD,
        "Params",
        [
            h,
            w,
            ky,
            kx,
            min_count,
            algorithm,
            fmt,
            has_mask,
            gain_mode,
            thr,
            thr_none,
            ed,
            _pad1,
            far_if_none,
            list_cap,
            slot,
            gain,
            nsig_s,
            strong_cap,
            _pad2
        ]
    );
    mirror_layout!(
        count_params_matches_wgsl,
        CountParams,
        crate::shaders::SPOTS_FIX,
        "Params",
        [count, w, fmt, n_labels]
    );
    mirror_layout!(
        measure_params_matches_wgsl,
        MeasureParams,
        crate::shaders::SPOTS_MEASURE,
        "Params",
        [count, w, fmt, cap, n_blocks, _pad]
    );
    mirror_layout!(
        compact_params_matches_wgsl,
        CompactParams,
        crate::shaders::SPOTS_COMPACT,
        "Params",
        [w, fmt, strong_at, strong_cap, spot_cap, _pad]
    );
}

//! The GPU path: shaders/spots/threshold.wgsl (window sums and tests),
//! fix.wgsl (host decisions written back, mask packing), the labelling
//! kernels of segment::label, and measure.wgsl (exact per-spot sums).
//! Frames go up as read (u16 pairs or 32-bit words, never widened on the
//! host); buffers are allocated once per call and reused frame after frame.
//! The frames in flight are driven by `super::frames`, the undecided
//! pixels decided by `super::host`.

use bytemuck::{Pod, Zeroable};

use super::*;
use crate::Remedy;
use crate::engine::Gpu;
use crate::segment::label;
use crate::shaders::Shader;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct Params {
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
pub(super) const LIST_CAP: usize = 1 << 16;
pub(super) const LIST_HEAD: usize = 4;
pub(super) const ENTRY: usize = 6;
/// Words of per-spot sums (measure.wgsl), after a header of 4 words.
pub(super) const W: usize = 22;
pub(super) const HEAD: usize = 4;
/// Spots one frame sums on the GPU; more (absurd for diffraction) are
/// summed on the host from the labels.
pub(super) const SPOT_CAP: usize = 1 << 16;
/// Spots read back with the frame's header; more take a second read.
pub(super) const READ_SPOTS: usize = 4096;
/// The fast path's compact list of strong pixels and its spot slots
/// (compact.wgsl, 23 words per spot); a frame beyond either takes the
/// full-frame path.
pub(super) const STRONG_CAP: usize = 1 << 18;
pub(super) const FAST_SPOTS: usize = 1 << 14;
pub(super) const W_FAST: usize = 23;

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
pub(super) struct Buffers {
    pub(super) image: wgpu::Buffer,
    pub(super) mask: wgpu::Buffer,
    pub(super) gains: wgpu::Buffer,
    pub(super) factors: wgpu::Buffer,
    pub(super) state: wgpu::Buffer,
    pub(super) cls: wgpu::Buffer,
    pub(super) strong: wgpu::Buffer,
    pub(super) list: wgpu::Buffer,
    pub(super) fixes: wgpu::Buffer,
    pub(super) bytes: wgpu::Buffer,
    pub(super) parent: wgpu::Buffer,
    pub(super) blocks: wgpu::Buffer,
    pub(super) label_roots: wgpu::Buffer,
    pub(super) acc: wgpu::Buffer,
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
    pub(super) h: usize,
    pub(super) w: usize,
    pub(super) options: &'a SpotOptions,
    pub(super) mask: Option<&'a [bool]>,
    base: Params,
}

pub(super) fn fmt_of(c: Counts<'_>) -> u32 {
    match c {
        Counts::I32(_) => 0,
        Counts::U16(_) => 1,
        Counts::U32(_) => 2,
    }
}

pub(super) fn frame_bytes(c: Counts<'_>) -> &[u8] {
    match c {
        Counts::I32(v) => bytemuck::cast_slice(v),
        Counts::U16(v) => bytemuck::cast_slice(v),
        Counts::U32(v) => bytemuck::cast_slice(v),
    }
}

pub(super) fn words(raw: &[u8]) -> Vec<u32> {
    raw.chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

pub(super) async fn allocate(gpu: &Gpu, n: usize, setup: &Setup<'_>) -> Result<Buffers> {
    let px = 4 * n as u64;
    let roots = 4 * label::root_words([1, setup.h, setup.w]) as u64;
    let need = px.max(roots);
    if need > gpu.max_binding_size() {
        return Err(Error::beyond(
            format!(
                "a frame of {} x {} pixels needs {need}-byte buffers, above this device's binding limit of {} bytes",
                setup.h,
                setup.w,
                gpu.max_binding_size()
            ),
            &[Remedy::UseCpu],
        ));
    }
    let sizes: [(u64, &str); 14] = [
        (px, "spots image"),
        // Without a mask the kernels never read it (has_mask = 0).
        (
            if setup.mask.is_some() {
                n.div_ceil(4) as u64 * 4
            } else {
                4
            },
            "spots mask",
        ),
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
        return Err(Error::beyond(
            format!(
                "invalid kernel-size: {:?}: the GPU takes windows below 65536 pixels (half-widths up to 127)",
                options.kernel_size
            ),
            &[Remedy::UseCpu],
        ));
    }
    Ok(())
}

pub(super) fn window_max(o: &SpotOptions) -> usize {
    let [ky, kx] = o.kernel_size;
    (2 * ky + 1) * (2 * kx + 1)
}

pub(super) fn release(gpu: &Gpu, b: Buffers) {
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
pub(super) fn upload_constants(gpu: &Gpu, b: &Buffers, s: &Setup<'_>) {
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
pub(super) async fn read_list(
    gpu: &Gpu,
    b: &Buffers,
    slot: usize,
) -> Result<Option<Vec<[u64; 4]>>> {
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
pub(super) async fn apply(
    gpu: &Gpu,
    b: &Buffers,
    target: &wgpu::Buffer,
    fixes: &[u32],
) -> Result<()> {
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
        &gpu.pipeline(Shader::SpotsFix, "apply")?,
        &[&params, &b.fixes, target],
        (fixes.len() / 2) as u64,
    )?;
    rec.submit().await
}

pub(super) fn clear_list(gpu: &Gpu, b: &Buffers) {
    gpu.upload(&b.list, &[0u8; 16]);
}

/// The threshold kernels' bindings.
pub(super) fn threshold_set(params: &wgpu::Buffer, b: &Buffers) -> [wgpu::Buffer; 9] {
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
pub(super) fn dispatch_threshold(
    rec: &mut crate::engine::Recorder<'_>,
    gpu: &Gpu,
    entry: &'static str,
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
                Shader::SpotsThreshold,
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
        &gpu.pipeline(Shader::SpotsThreshold, entry)?,
        &refs,
        threads,
    )
}

/// first_tiled's square tiles (threshold.wgsl FW, FR); erode_final's tile
/// shape and largest halo (TW, TR, TH).
pub(super) const FIRST_TILE: usize = 32;
pub(super) const TILE_WIDTH: usize = 16;
pub(super) const TILE_ROWS: usize = 16;
pub(super) const TILE_HALO: usize = 7;

/// Whether the tiled kernels serve these options (their halo holds the
/// window plus the final test's 2).
pub(super) fn tiled(options: &SpotOptions) -> bool {
    let [ky, kx] = options.kernel_size;
    ky.max(kx) + 2 <= TILE_HALO
}

/// The slow, exact path of one frame whose image is already on the GPU:
/// each test, then the host's f64 decisions for the undecided pixels.
/// Leaves the strong states (0/1) in `b.strong`; returns false when the
/// host must compute the frame (more undecided pixels than the list holds).
pub(super) async fn threshold_frame(
    gpu: &Gpu,
    b: &Buffers,
    s: &Setup<'_>,
    frame: Counts<'_>,
) -> Result<bool> {
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
    let fixes = host::decide(host::Test::First, &list, frame, o);
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
    let fixes = host::decide(host::Test::Final, &list, frame, o);
    apply(gpu, b, &b.strong, &fixes).await?;
    Ok(true)
}

/// Records pack, label and measure after the strong states are in place.
pub(super) fn dispatch_spots(
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
        &gpu.pipeline(Shader::SpotsFix, "pack")?,
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
        &gpu.pipeline(Shader::SpotsMeasure, "clear")?,
        &set,
        (HEAD + SPOT_CAP * W) as u64,
    )?;
    rec.dispatch(
        &gpu.pipeline(Shader::SpotsMeasure, "accumulate")?,
        &set,
        n as u64,
    )
}

/// Records the whole frame in one go, assuming no pixel is left undecided
/// (the usual case: the header read back says whether it held).
pub(super) fn dispatch_frame(
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
pub(super) fn dispatch_compact(
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
            &gpu.pipeline(Shader::SpotsCompact, entry)?,
            &set,
            threads as u64,
        )?;
    }
    Ok(())
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

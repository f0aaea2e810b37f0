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
    no_background: u32,
    far_if_none: u32,
    list_cap: u32,
    _pad: u32,
    gain: f32,
    nsig_s: f32,
    _pad1: f32,
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

/// Undecided pixels one pass can list; beyond, the frame is computed by the
/// CPU reference (correct, slower).
const LIST_CAP: usize = 1 << 16;
const LIST_HEAD: usize = 4;
const ENTRY: usize = 6;
/// Words of per-spot sums (measure.wgsl).
const W: usize = 22;

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
}

impl Buffers {
    fn all(&self) -> [&wgpu::Buffer; 12] {
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
        ]
    }
}

/// Everything a frame needs besides its counts.
struct Setup<'a> {
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
    if px > gpu.max_binding_size() {
        return Err(Error::InvalidInput(format!(
            "a frame of {} x {} pixels needs {px}-byte buffers, above this device's binding limit of {} bytes; use --cpu",
            setup.h,
            setup.w,
            gpu.max_binding_size()
        )));
    }
    let n_blocks = n.div_ceil(1024);
    let sizes: [(u64, &str); 12] = [
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
        (px, "spots classes"),
        (px, "spots strong"),
        (4 * (LIST_HEAD + LIST_CAP * ENTRY) as u64, "spots list"),
        (8 * LIST_CAP as u64 + 8, "spots fixes"),
        (n.div_ceil(4) as u64 * 4, "spots mask bytes"),
        (px, "spots labels"),
        (4 * (n_blocks as u64 + 1), "spots label blocks"),
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
    })
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

fn setup<'a>(h: usize, w: usize, options: &'a SpotOptions, mask: Option<&'a [bool]>) -> Setup<'a> {
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
        no_background: 0,
        far_if_none: u32::from(h + w + 1 >= ky.min(kx)),
        list_cap: LIST_CAP as u32,
        _pad: 0,
        gain: match options.gain {
            Gain::Scalar(g) => g as f32,
            _ => 1.0,
        },
        nsig_s: options.sigma_strong as f32,
        _pad1: 0.0,
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

/// Reads the undecided list: (pixel, m, x, y) entries, or None on overflow.
async fn read_list(gpu: &Gpu, b: &Buffers) -> Result<(Option<Vec<[u64; 4]>>, u32)> {
    let head = words(&gpu.read_at(&b.list, 0, 8).await?);
    let (count, n_background) = (head[0] as usize, head[1]);
    if count > LIST_CAP {
        return Ok((None, n_background));
    }
    if count == 0 {
        return Ok((Some(Vec::new()), n_background));
    }
    let raw = words(
        &gpu.read_at(&b.list, 4 * LIST_HEAD as u64, 4 * (count * ENTRY) as u64)
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
    Ok((Some(entries), n_background))
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

/// The strong-pixel states (0/1) of one frame into `b.strong`. Returns
/// false when the host must compute the frame (too many undecided pixels).
async fn threshold_frame(gpu: &Gpu, b: &Buffers, s: &Setup<'_>, frame: Counts<'_>) -> Result<bool> {
    let o = s.options;
    let n = s.h * s.w;
    let mut bytes = frame_bytes(frame).to_vec();
    bytes.resize(bytes.len().div_ceil(4) * 4, 0);
    gpu.upload(&b.image, &bytes);
    clear_list(gpu, b);
    let mut p = s.base;
    p.fmt = fmt_of(frame);
    let params = gpu.uniform(&p);
    let bind = |params: &wgpu::Buffer| -> [wgpu::Buffer; 9] {
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
    };
    let first = gpu.pipeline(shaders::SPOTS_THRESHOLD, "first")?;
    let mut rec = gpu.recorder();
    let set = bind(&params);
    rec.dispatch(&first, &set.iter().collect::<Vec<_>>(), n as u64)?;
    rec.submit().await?;
    let (Some(list), n_background) = read_list(gpu, b).await? else {
        return Ok(false);
    };
    let extended = o.algorithm == Algorithm::DispersionExtended;
    let mut fixes = Vec::with_capacity(2 * list.len());
    let mut resolved_background = 0u32;
    for &[k, m, x, y] in &list {
        let k = k as usize;
        let g = o.gain.at(k);
        let yes = if extended {
            dispersion_nonbackground(m as i64, x as i64, i128::from(y), g, o)
        } else {
            dispersion_strong(m as i64, x as i64, i128::from(y), frame.get(k), g, o)
        };
        resolved_background += u32::from(!yes);
        fixes.extend([k as u32, u32::from(yes)]);
    }
    apply(gpu, b, if extended { &b.state } else { &b.strong }, &fixes).await?;
    if !extended {
        return Ok(true);
    }
    clear_list(gpu, b);
    p.no_background = u32::from(n_background + resolved_background == 0);
    let params = gpu.uniform(&p);
    let set = bind(&params);
    let refs: Vec<&wgpu::Buffer> = set.iter().collect();
    let mut rec = gpu.recorder();
    rec.dispatch(
        &gpu.pipeline(shaders::SPOTS_THRESHOLD, "erode")?,
        &refs,
        n as u64,
    )?;
    rec.dispatch(
        &gpu.pipeline(shaders::SPOTS_THRESHOLD, "final_test")?,
        &refs,
        n as u64,
    )?;
    rec.submit().await?;
    let (Some(list), _) = read_list(gpu, b).await? else {
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

/// Strong pixels and spots of `shape` = [frames, rows, cols] on the GPU:
/// per frame the thresholds, 4-connected labelling and exact spot sums all
/// run on the GPU; with `three_d` the strong pixels of all frames are
/// labelled 6-connected through the stack.
pub async fn find_spots(
    gpu: &Gpu,
    counts: Counts<'_>,
    shape: [usize; 3],
    mask: Option<&[bool]>,
    options: &SpotOptions,
    three_d: bool,
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
    let s = setup(h, w, options, mask);
    let b = allocate(gpu, n, &s).await?;
    let outcome = async {
        upload_constants(gpu, &b, &s);
        let mut strong = Vec::with_capacity(nz * n);
        let mut sums: Vec<SpotSums> = Vec::new();
        for z in 0..nz {
            let frame = counts.slice(z * n..(z + 1) * n);
            if !threshold_frame(gpu, &b, &s, frame).await? {
                // Too many undecided pixels: the CPU reference decides.
                let cpu_mask = cpu::strong_pixels(frame, [h, w], mask, options)?;
                let states: Vec<u32> = cpu_mask.iter().map(|&v| u32::from(v)).collect();
                gpu.upload(&b.strong, bytemuck::cast_slice(&states));
            }
            let (mask_z, sums_z) = label_and_measure(gpu, &b, &s, frame, z, !three_d).await?;
            strong.extend(mask_z);
            sums.extend(sums_z);
        }
        if three_d {
            let l = label::label(gpu, &strong, &[nz, h, w], 1).await?;
            sums = vec![SpotSums::default(); l.count];
            for (i, &lab) in l.labels.iter().enumerate() {
                if lab > 0 {
                    let (z, r, c) = (i / n, (i / w) % h, i % w);
                    let v = counts.get(i).max(0) as u64;
                    sums[lab as usize - 1].add([z as u64, r as u64, c as u64], v);
                }
            }
        }
        Ok::<_, Error>(SpotResult::from_sums(strong, &sums, options))
    }
    .await;
    release(gpu, b);
    outcome
}

/// Packs the strong states to bytes, labels them 4-connected and (when
/// `measure`) sums each spot; returns the mask and the spots' sums.
async fn label_and_measure(
    gpu: &Gpu,
    b: &Buffers,
    s: &Setup<'_>,
    frame: Counts<'_>,
    z: usize,
    measure: bool,
) -> Result<(Vec<bool>, Vec<SpotSums>)> {
    let n = s.h * s.w;
    let params = gpu.uniform(&CountParams {
        count: n as u32,
        w: s.w as u32,
        fmt: fmt_of(frame),
        n_labels: 0,
    });
    let mut rec = gpu.recorder();
    rec.dispatch(
        &gpu.pipeline(shaders::SPOTS_FIX, "pack")?,
        &[&params, &b.strong, &b.bytes],
        n.div_ceil(4) as u64,
    )?;
    rec.submit().await?;
    let raw = gpu.read(&b.bytes, n as u64).await?;
    let mask: Vec<bool> = raw.iter().map(|&v| v != 0).collect();
    if !measure || !mask.iter().any(|&v| v) {
        return Ok((mask, Vec::new()));
    }
    let plan = label::plan(gpu, [1, s.h, s.w], 1);
    label::record_label(gpu, &plan, &b.bytes, &b.parent, &b.blocks).await?;
    let count = words(&gpu.read_at(&b.blocks, 4 * plan.n_blocks as u64, 4).await?)[0] as usize;
    if count == 0 {
        return Ok((mask, Vec::new()));
    }
    let acc_bytes = 4 * (count * W) as u64;
    if acc_bytes > gpu.max_binding_size() {
        // More spots than one binding of sums holds: sum on the host.
        let labels = words(&gpu.read(&b.parent, 4 * n as u64).await?);
        let mut sums = vec![SpotSums::default(); count];
        for (i, &l) in labels.iter().enumerate() {
            if l > 0 {
                let v = frame.get(i).max(0) as u64;
                sums[l as usize - 1].add([z as u64, (i / s.w) as u64, (i % s.w) as u64], v);
            }
        }
        return Ok((mask, sums));
    }
    let acc = gpu.storage(acc_bytes, "spot sums").await?;
    let outcome = async {
        let params = gpu.uniform(&CountParams {
            count: n as u32,
            w: s.w as u32,
            fmt: fmt_of(frame),
            n_labels: count as u32,
        });
        let set = [&params, &b.parent, &b.image, &acc];
        let mut rec = gpu.recorder();
        rec.dispatch(
            &gpu.pipeline(shaders::SPOTS_MEASURE, "clear")?,
            &set,
            (count * W) as u64,
        )?;
        rec.dispatch(
            &gpu.pipeline(shaders::SPOTS_MEASURE, "accumulate")?,
            &set,
            n as u64,
        )?;
        rec.submit().await?;
        gpu.read(&acc, acc_bytes).await
    }
    .await;
    gpu.recycle(acc);
    let a = words(&outcome?);
    let wide = |w: &[u32]| {
        w.iter()
            .rev()
            .fold(0u128, |acc, &x| (acc << 32) | u128::from(x))
    };
    let sums = a
        .chunks_exact(W)
        .map(|e| SpotSums {
            n: u64::from(e[0]),
            sum_v: wide(&e[1..3]),
            sum_v2: wide(&e[3..6]),
            lo: [z as u64, u64::from(e[6]), u64::from(e[8])],
            hi: [z as u64, u64::from(e[7]), u64::from(e[9])],
            sum_vc: [
                z as u128 * wide(&e[1..3]),
                wide(&e[10..13]),
                wide(&e[13..16]),
            ],
            sum_vc2: [
                (z * z) as u128 * wide(&e[1..3]),
                wide(&e[16..19]),
                wide(&e[19..22]),
            ],
        })
        .collect();
    Ok((mask, sums))
}

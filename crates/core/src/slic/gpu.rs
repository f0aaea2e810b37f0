//! The GPU path of SLIC: buffers and dispatches of the k-means iterations
//! (shaders/slic/kmeans.wgsl; the volume resident in z-slabs that fit a
//! binding each, sharing the centres); `streamed` runs the k-means on
//! volumes beyond the memory budget, `connect` the connectivity step
//! (shaders/slic/connect.wgsl), `lab` the Lab conversion of 8-bit RGB
//! (shaders/slic/lab.wgsl), `cells` the assignment of a masked image
//! (shaders/slic/cells.wgsl).

mod cells;
mod connect;
mod lab;
mod streamed;

pub(super) use lab::{byte_samples, lab_features};
pub(super) use streamed::run_streamed;

use lab::record_lab;

use bytemuck::{Pod, Zeroable};

use std::collections::VecDeque;

use super::Segments;
use super::host::{self, Prepared, inf_error, nan_error};
use crate::copies::Prefaulted;
use crate::engine::{Gpu, Pending, Recorder};
use crate::error::{Error, Remedy, Result};
use crate::shaders::Shader;

/// Pixels per thread of `assign`, consecutive along x (kmeans.wgsl: LANES).
const ASSIGN_LANES: usize = 4;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct KParams {
    nx: u32,
    ny: u32,
    nz: u32,
    nc: u32,
    n: u32,
    n_centres: u32,
    start_x: u32,
    start_y: u32,
    start_z: u32,
    step_x: u32,
    step_y: u32,
    step_z: u32,
    count_x: u32,
    count_y: u32,
    count_z: u32,
    win_x: u32,
    win_y: u32,
    win_z: u32,
    drift_word: u32,
    slic_zero: u32,
    use_mask: u32,
    sx: f32,
    sy: f32,
    sz: f32,
    spatial_weight: f32,
    scale: f32,
    inv_scale: f32,
    ratio: f32,
    z0: u32,
    cells_x: u32,
    cells_y: u32,
    cells_z: u32,
    exact_ties: u32,
}

/// What [`run`] uploads: the prepared features, or the input from which
/// the GPU computes them.
#[derive(Clone, Copy)]
pub(super) enum GpuInput<'a> {
    Features,
    /// Float32 grey values, rescaled on the GPU (`Prepared::gpu_rescale`).
    Rescale(&'a [f32]),
    /// 8-bit RGB (3 bytes a pixel), converted to Lab on the GPU
    /// (`Prepared::lab_table`).
    Rgb8(&'a [u8]),
}

/// Buffers of one run, recycled together whatever happens.
struct Buffers<'g> {
    gpu: &'g Gpu,
    list: Vec<wgpu::Buffer>,
}

impl Buffers<'_> {
    async fn get(&mut self, bytes: u64, what: &str) -> Result<wgpu::Buffer> {
        let max = self.gpu.max_binding_size();
        if bytes > max {
            return Err(Error::beyond(
                format!(
                    "the {what} need {bytes} bytes, more than the device's largest binding ({max} bytes); \
                     volumes this large are not chunked by slic yet"
                ),
                &[Remedy::UseCpu, Remedy::SmallerInput],
            ));
        }
        let b = self.gpu.storage(bytes, what).await?;
        self.list.push(b.clone());
        Ok(b)
    }

    /// Recycles `b` now: work queued later may get it from the pool.
    fn give_back(&mut self, b: &wgpu::Buffer) {
        if let Some(i) = self.list.iter().position(|x| x == b) {
            self.gpu.recycle(self.list.swap_remove(i));
        }
    }
}

impl Drop for Buffers<'_> {
    fn drop(&mut self) {
        for b in self.list.drain(..) {
            self.gpu.recycle(b);
        }
    }
}

/// The k-means kernels' parameters of `prep` (slab fields set per slab).
fn kparams(prep: &Prepared) -> KParams {
    let g = &prep.grid;
    KParams {
        nx: prep.dims[2] as u32,
        ny: prep.dims[1] as u32,
        nz: 0,
        nc: prep.nc as u32,
        n: 0,
        n_centres: prep.n_centres() as u32,
        start_x: g[2].start as u32,
        start_y: g[1].start as u32,
        start_z: g[0].start as u32,
        step_x: g[2].step as u32,
        step_y: g[1].step as u32,
        step_z: g[0].step as u32,
        count_x: g[2].count as u32,
        count_y: g[1].count as u32,
        count_z: g[0].count as u32,
        win_x: prep.win[2] as u32,
        win_y: prep.win[1] as u32,
        win_z: prep.win[0] as u32,
        drift_word: drift_word(prep) as u32,
        slic_zero: u32::from(prep.slic_zero),
        use_mask: u32::from(prep.mask.is_some()),
        sx: prep.spacing[2],
        sy: prep.spacing[1],
        sz: prep.spacing[0],
        spatial_weight: prep.spatial_weight,
        scale: prep.scale(),
        inv_scale: 2f32.powi(-prep.shift),
        ratio: prep.ratio,
        z0: 0,
        cells_x: prep.cells[2] as u32,
        cells_y: prep.cells[1] as u32,
        cells_z: prep.cells[0] as u32,
        exact_ties: u32::from(prep.exact_ties),
    }
}

/// The slab fields of the k-means parameters: first plane `z0`, `pixels`
/// pixels.
fn slab_params(kp: &KParams, z0: usize, pixels: usize) -> KParams {
    KParams {
        z0: z0 as u32,
        nz: (pixels / (kp.nx as usize * kp.ny as usize)) as u32,
        n: pixels as u32,
        ..*kp
    }
}

/// A z-slab of the resident volume: `n` pixels from plane `z0`.
struct Slab {
    z0: usize,
    n: usize,
    features: wgpu::Buffer,
    labels: wgpu::Buffer,
    mask: wgpu::Buffer,
    /// The slab's 8-bit RGB (GpuInput::Rgb8).
    rgb: Option<wgpu::Buffer>,
}

/// The k-means kernels.
struct Kernels {
    assign: wgpu::ComputePipeline,
    accumulate: wgpu::ComputePipeline,
    finalize: wgpu::ComputePipeline,
    colour_max: wgpu::ComputePipeline,
    /// Labels to NONE, sums to 0.
    init: wgpu::ComputePipeline,
}

impl Kernels {
    fn new(gpu: &Gpu) -> Result<Kernels> {
        let k = |entry| gpu.pipeline(Shader::SlicKmeans, entry);
        Ok(Kernels {
            assign: k("assign")?,
            accumulate: k("accumulate")?,
            finalize: k("finalize")?,
            colour_max: k("colour_max")?,
            init: k("init")?,
        })
    }
}

/// The resident volume's buffers: every slab's, the change flags, and each
/// slab's bindings (with the centres, sums and colour maxima all share).
struct Resident {
    slabs: Vec<Slab>,
    /// Planes per slab (the last may hold fewer).
    depth: usize,
    changed: wgpu::Buffer,
    binds: Vec<[wgpu::Buffer; 8]>,
}

/// One dispatch of an iteration: kernel, bindings, threads.
type Step<'a> = (&'a wgpu::ComputePipeline, &'a [&'a wgpu::Buffer], u64);

/// SLIC on the GPU with the volume resident, in z-slabs that fit a
/// binding each; `input` is what it uploads.
pub(super) async fn run(
    gpu: &Gpu,
    mut prepared: Prepared,
    input: GpuInput<'_>,
) -> Result<Segments> {
    let prep = &prepared;
    let clock = gpu.host_clock();
    let n = prep.n();
    let mut bufs = Buffers {
        gpu,
        list: Vec::new(),
    };
    let r = resident_buffers(gpu, prep, input, &mut bufs, clock).await?;
    let kernels = Kernels::new(gpu)?;
    // The connectivity step on the GPU when one slab holds the volume and
    // its search queue (8 bytes per pixel) fits a binding; otherwise on
    // the host from the k-means labels.
    let gpu_connect = prep.enforce && r.slabs.len() == 1 && 8 * n as u64 <= gpu.max_binding_size();
    // Several iterations to a submission on small images, where the
    // round trip costs more than an iteration: one change flag each, and
    // the iterations after the first without a change repeat its fixed
    // point (the same labels give the same centres), so the result is
    // skimage's early stop. The rescaling and the first batch share a
    // submission; the NaN/inf flags come back with its change flags.
    let per_submit = if n <= BATCHED_ITERATIONS_MAX_PIXELS {
        ITERATIONS_PER_SUBMIT
    } else {
        1
    };
    let refs: Vec<Vec<&wgpu::Buffer>> = r.binds.iter().map(|b| b.iter().collect()).collect();
    // A masked image: a position-only pass (`steps`), then the full one.
    let cells = match prep.free_seeds {
        Some(_) => Some(cells::Cells::new(gpu, prep, &mut bufs).await?),
        None => None,
    };
    let cell_binds: Vec<[wgpu::Buffer; 10]> = cells
        .iter()
        .flat_map(|c| r.binds.iter().map(|b| c.bind(b)))
        .collect();
    let cell_refs: Vec<Vec<&wgpu::Buffer>> =
        cell_binds.iter().map(|b| b.iter().collect()).collect();
    let masked = |colour| cells.as_ref().map(|c| (c, &cell_refs[..], colour));
    let steps = iteration_steps(prep, &r.slabs, &refs, &kernels, masked(false));
    let colour_steps = iteration_steps(prep, &r.slabs, &refs, &kernels, masked(true));
    let first_count = per_submit.min(prep.max_num_iter);
    let record = || record_first(gpu, prep, input, &r, &refs, &kernels, &steps, first_count);
    let first = upload_input(gpu, prep, input, &r, record).await?;
    // The features are on the device now: their host memory goes back
    // before the connectivity step's buffers are made.
    prepared.features = Vec::new();
    let prep = &prepared;
    gpu.host_done("slic upload", clock);
    // The labels' host memory is faulted in while the host waits for the
    // GPU, not during the upload: beside the upload's copies it made
    // large volumes markedly slower.
    let labels_out = Prefaulted::new(if gpu_connect { n } else { 0 });
    let clock = gpu.host_clock();
    let batches = Batches {
        gpu,
        changed: &r.changed,
        steps: &steps,
        per_submit,
        max: prep.max_num_iter,
    };
    let (mut iterations, stopped, in_flight) = if cells.is_some() {
        // Batches of the first pass still in flight after its early stop
        // repeat its fixed point: the second pass may follow them.
        drop(batches.run((first, first_count), false).await?);
        let colour = Batches {
            steps: &colour_steps,
            ..batches
        };
        let rec = cells::restart(&colour, &r, &refs, &kernels, prep, first_count)?;
        colour.run((rec, first_count), gpu_connect).await?
    } else {
        batches.run((first, first_count), gpu_connect).await?
    };
    gpu.host_done("slic k-means", clock);
    if gpu_connect {
        let clock = gpu.host_clock();
        // Nothing queued after the k-means reads the features: the
        // connectivity step may take their buffer for one of its own.
        bufs.give_back(&r.slabs[0].features);
        let connected =
            connect::connect(gpu, prep, &r.slabs[0].labels, &mut bufs, labels_out).await?;
        gpu.host_done("slic connectivity", clock);
        // The batches still in flight are done by now (the connectivity
        // step came back after them); past an early stop they are not read.
        if !stopped {
            for (pending, count) in in_flight {
                let (done, stop) = collect_batch(gpu, pending, count).await?;
                iterations += done;
                if stop {
                    break;
                }
            }
        }
        let Some((labels, n_segments)) = connected else {
            // A piece reached skimage's max_size: skimage's search, cut
            // there, on the host from the k-means labels.
            let raw = gpu.read_vec::<u32>(&r.slabs[0].labels, n).await?;
            return Ok(host::segments(raw, prep, iterations));
        };
        return Ok(Segments {
            labels,
            shape: prep.out_shape.clone(),
            n_segments,
            iterations,
        });
    }
    // Batches submitted past the early stop: nothing to read.
    drop(in_flight);
    let mut raw: Vec<u32> = Vec::with_capacity(n);
    for s in &r.slabs {
        raw.extend(gpu.read_vec::<u32>(&s.labels, s.n).await?);
    }
    Ok(host::segments(raw, prep, iterations))
}

/// The resident volume's buffers, the centres, change flags and mask
/// uploaded. Slabs along z, each within one binding (features: 4·nc bytes
/// per pixel); the centres and their sums are shared by all slabs.
async fn resident_buffers(
    gpu: &Gpu,
    prep: &Prepared,
    input: GpuInput<'_>,
    bufs: &mut Buffers<'_>,
    clock: Option<std::time::Instant>,
) -> Result<Resident> {
    let k = prep.n_centres();
    let nc = prep.nc;
    let plane = prep.dims[1] * prep.dims[2];
    let per_slab = (gpu.max_binding_size() / (4 * nc as u64)) as usize / plane;
    if per_slab == 0 {
        return Err(Error::beyond(
            format!(
                "one {}x{} plane of {nc} channel(s) exceeds the device's largest binding ({} bytes)",
                prep.dims[1],
                prep.dims[2],
                gpu.max_binding_size()
            ),
            &[Remedy::UseCpu],
        ));
    }
    let n_slabs = prep.dims[0].div_ceil(per_slab);
    let depth = prep.dims[0].div_ceil(n_slabs);
    let centres = bufs
        .get(4 * (k * gpu_stride(nc)) as u64, "slic centres")
        .await?;
    let stride = 1 + 2 * (3 + nc);
    let accum = bufs.get(4 * (k * stride) as u64, "slic sums").await?;
    let maxdist = maxdist_buffer(gpu, bufs, prep).await?;
    // [change flag, min key, max key, NaN/inf flags], then one change flag
    // per iteration of a submission.
    let changed = bufs
        .get(16 + 4 * ITERATIONS_PER_SUBMIT as u64, "slic change flags")
        .await?;
    gpu.upload(&centres, bytemuck::cast_slice(&gpu_centres(prep)));
    let mut flags = vec![0u32; 4 + ITERATIONS_PER_SUBMIT];
    flags[1] = u32::MAX;
    gpu.upload(&changed, bytemuck::cast_slice(&flags));
    gpu.host_done("slic upload: centres", clock);
    let kp = kparams(prep);
    // Every slab's buffers, then the first submission's recording, then
    // the input.
    let mut slabs = Vec::new();
    for z0 in (0..prep.dims[0]).step_by(depth) {
        let m = depth.min(prep.dims[0] - z0) * plane;
        let rgb = match input {
            GpuInput::Rgb8(_) => Some(
                bufs.get(4 * (3 * m as u64).div_ceil(4), "slic 8-bit RGB")
                    .await?,
            ),
            _ => None,
        };
        let slab = Slab {
            z0,
            n: m,
            features: bufs.get(4 * (m * nc) as u64, "slic features").await?,
            labels: bufs.get(4 * m as u64, "slic labels").await?,
            mask: bufs.get(4 * m.div_ceil(32) as u64, "slic mask").await?,
            rgb,
        };
        if let Some(mk) = &prep.mask {
            let lo = z0 * plane;
            gpu.upload(
                &slab.mask,
                bytemuck::cast_slice(&mask_bits(&mk[lo..lo + m])),
            );
        }
        slabs.push(slab);
    }
    // One uniform per slab (its offset and size).
    let binds = slabs
        .iter()
        .map(|s| {
            [
                &gpu.uniform(&slab_params(&kp, s.z0, s.n)),
                &s.features,
                &centres,
                &s.labels,
                &accum,
                &maxdist,
                &s.mask,
                &changed,
            ]
            .map(|b| b.clone())
        })
        .collect();
    Ok(Resident {
        slabs,
        depth,
        changed,
        binds,
    })
}

/// Threads of a kernel over a slab's rows, `lanes` pixels each.
fn row_threads(prep: &Prepared, s: &Slab, lanes: usize) -> u64 {
    let plane = prep.dims[1] * prep.dims[2];
    (s.n / plane * prep.dims[1] * prep.dims[2].div_ceil(lanes)) as u64
}

/// One iteration's dispatches: assign and accumulate over every slab,
/// finalize (which counts the batch's iteration up on the GPU, so the
/// iterations of a batch share these bind groups), then SLICO's colour
/// maxima. A masked image bins its centres and assigns through the cells
/// (`masked`; its position-only pass has no colour maxima).
fn iteration_steps<'a>(
    prep: &Prepared,
    slabs: &[Slab],
    refs: &'a [Vec<&'a wgpu::Buffer>],
    kernels: &'a Kernels,
    masked: cells::Masked<'a>,
) -> Vec<Step<'a>> {
    let mut steps: Vec<Step<'a>> = Vec::new();
    match masked {
        None => {
            for (s, refs) in slabs.iter().zip(refs) {
                steps.push((&kernels.assign, refs, row_threads(prep, s, ASSIGN_LANES)));
            }
        }
        Some((c, cell_refs, colour)) => {
            steps.push((&c.bin, &cell_refs[0], cells::BIN_THREADS));
            for (s, refs) in slabs.iter().zip(cell_refs) {
                steps.push((c.assign(colour), refs, s.n as u64));
            }
        }
    }
    for (s, refs) in slabs.iter().zip(refs) {
        steps.push((&kernels.accumulate, refs, row_threads(prep, s, 1)));
    }
    steps.push((&kernels.finalize, &refs[0], prep.n_centres() as u64));
    if prep.slic_zero && masked.is_none_or(|(_, _, colour)| colour) {
        for (s, refs) in slabs.iter().zip(refs) {
            steps.push((&kernels.colour_max, refs, row_threads(prep, s, 1)));
        }
    }
    steps
}

/// The first submission: the GPU's own features (rescaling or Lab), init
/// and the first batch of iterations.
#[allow(clippy::too_many_arguments)]
fn record_first<'g>(
    gpu: &'g Gpu,
    prep: &Prepared,
    input: GpuInput<'_>,
    r: &Resident,
    refs: &[Vec<&wgpu::Buffer>],
    kernels: &Kernels,
    steps: &[Step<'_>],
    first_count: usize,
) -> Result<Recorder<'g>> {
    let mut rec = gpu.recorder();
    if let GpuInput::Rescale(_) = input {
        // skimage's rescaling to [0, 1], then 1 / compactness.
        for entry in ["minmax", "rescale"] {
            let pipeline = gpu.pipeline(Shader::SlicKmeans, entry)?;
            for (s, refs) in r.slabs.iter().zip(refs) {
                rec.dispatch(&pipeline, refs, row_threads(prep, s, 1))?;
            }
        }
    }
    if let Some(table) = &prep.lab_table {
        for s in &r.slabs {
            let rgb = s
                .rgb
                .as_ref()
                .ok_or_else(|| Error::Device("an 8-bit RGB slab has no buffer".into()))?;
            record_lab(gpu, &mut rec, table, prep.ratio, s.n, rgb, &s.features)?;
        }
    }
    let stride = 1 + 2 * (3 + prep.nc);
    for (s, refs) in r.slabs.iter().zip(refs) {
        rec.dispatch(
            &kernels.init,
            refs,
            s.n.max(prep.n_centres() * stride) as u64,
        )?;
    }
    rec.dispatch_repeated(steps, first_count as u32)?;
    Ok(rec)
}

/// Every slab's input through a pooled mapped buffer (a fresh staging
/// buffer of this size per call, `queue.write_buffer`, costs more than the
/// copy), then the upload buffer back to the pool whatever happened. The
/// first slab is copied on the copy threads while this thread records the
/// first submission (`record`; the two take about as long; a single thread
/// started for the copy was slower than doing both in turn:
/// BENCHMARKS.md), which it returns.
async fn upload_input<'g>(
    gpu: &'g Gpu,
    prep: &Prepared,
    input: GpuInput<'_>,
    r: &Resident,
    record: impl Fn() -> Result<Recorder<'g>>,
) -> Result<Recorder<'g>> {
    let nc = prep.nc;
    let plane = prep.dims[1] * prep.dims[2];
    let mut up = gpu.upload_buffer(4 * (r.depth * plane * nc) as u64);
    let uploaded: Result<Recorder<'g>> = async {
        let mut first = None;
        for s in &r.slabs {
            let (lo, hi) = (s.z0 * plane, s.z0 * plane + s.n);
            let bytes: &[u8] = match input {
                GpuInput::Features => bytemuck::cast_slice(&prep.features[lo * nc..hi * nc]),
                GpuInput::Rescale(v) => bytemuck::cast_slice(&v[lo..hi]),
                GpuInput::Rgb8(v) => &v[3 * lo..3 * hi],
            };
            if first.is_none() {
                let threads = crate::copies::upload_threads();
                first = Some(
                    gpu.fill_during(&mut up, bytes, threads, async { record() })
                        .await??,
                );
            } else {
                gpu.fill(&mut up, bytes).await?;
            }
            let mut rec = gpu.recorder();
            let to = s.rgb.as_ref().unwrap_or(&s.features);
            rec.copy_in(&up, to, bytes.len() as u64);
            rec.submit_refilling(&mut up).await?;
        }
        first.ok_or_else(|| Error::Device("a volume without slabs".into()))
    }
    .await;
    gpu.release_upload(up);
    uploaded
}

/// The k-means batches after the first: `per_submit` iterations each, up
/// to `max`.
struct Batches<'a> {
    gpu: &'a Gpu,
    changed: &'a wgpu::Buffer,
    steps: &'a [Step<'a>],
    per_submit: usize,
    max: usize,
}

impl<'a> Batches<'a> {
    /// Submits the batches, the first recorded already. The host waits
    /// for a batch's change flags only once the next batch is submitted,
    /// so the GPU runs the batches back to back; a batch past the early
    /// stop repeats its fixed point (at most one batch of wasted work, the
    /// same labels). When the connectivity step follows on the GPU
    /// (`then_connect`), the host records it while the last batches run and
    /// reads their flags after its readback: the batches still in flight
    /// come back. Returns the iterations counted, whether they stopped
    /// early, and the batches in flight.
    #[allow(clippy::type_complexity)]
    async fn run(
        &self,
        first: (Recorder<'a>, usize),
        then_connect: bool,
    ) -> Result<(usize, bool, VecDeque<(Pending, usize)>)> {
        let gpu = self.gpu;
        let mut iterations = 0;
        let mut submitted = 0;
        let mut in_flight: VecDeque<(Pending, usize)> = VecDeque::new();
        let mut first = Some(first);
        loop {
            while in_flight.len() < 2 && submitted < self.max {
                let (rec, count) = match first.take() {
                    Some(batch) => batch,
                    None => {
                        let count = self.per_submit.min(self.max - submitted);
                        // The iteration counter and this batch's change
                        // flags to 0 (the min/max keys and NaN/inf flags
                        // stay).
                        gpu.upload_at(self.changed, 0, &[0u8; 4]);
                        gpu.upload_at(self.changed, 16, &vec![0u8; 4 * count]);
                        let mut rec = gpu.recorder();
                        rec.dispatch_repeated(self.steps, count as u32)?;
                        (rec, count)
                    }
                };
                submitted += count;
                let flags = [(self.changed, 0, flag_bytes(count))];
                in_flight.push_back((rec.submit_with_readback_parts(&flags, None), count));
            }
            if then_connect && submitted == self.max {
                return Ok((iterations, false, in_flight));
            }
            let Some((pending, count)) = in_flight.pop_front() else {
                return Ok((iterations, false, in_flight));
            };
            let (done, stop) = collect_batch(gpu, pending, count).await?;
            iterations += done;
            if stop {
                return Ok((iterations, true, in_flight));
            }
        }
    }
}

/// A mask as one bit per pixel, 32 to a word (the shaders' `maskw`).
fn mask_bits(mask: &[bool]) -> Vec<u32> {
    let mut bits = vec![0u32; mask.len().div_ceil(32)];
    for (i, &v) in mask.iter().enumerate() {
        if v {
            bits[i / 32] |= 1 << (i % 32);
        }
    }
    bits
}

/// A k-means batch's change flags once it is done: the iterations it
/// counts and whether it stopped early ([`batch_iterations`]).
async fn collect_batch(gpu: &Gpu, pending: Pending, count: usize) -> Result<(usize, bool)> {
    let words: Vec<u32> = gpu
        .finish_with(pending, |b| Ok(bytemuck::pod_collect_to_vec(b)))
        .await?;
    batch_iterations(&words, count)
}

/// kmeans.wgsl's `maxdist` binding, filled with [`maxdist_words`].
async fn maxdist_buffer(
    gpu: &Gpu,
    bufs: &mut Buffers<'_>,
    prep: &Prepared,
) -> Result<wgpu::Buffer> {
    let words = maxdist_words(prep);
    let maxdist = bufs
        .get(4 * words.len() as u64, "slic colour maxima and ranges")
        .await?;
    gpu.upload(&maxdist, bytemuck::cast_slice(&words));
    Ok(maxdist)
}

/// The words of kmeans.wgsl's `maxdist` binding: each centre's SLICO
/// colour maximum (1.0 to start), then the range of z over each layer of
/// seeds and of y over each row (kmeans.wgsl: layer_word, row_word), from
/// the live seeds; a layer or row without one has the empty range
/// [+inf, 0]; then the largest drift of a centre from its seed along z, y
/// and x (0 to start) and the reach along each ([`Prepared::reach`]).
fn maxdist_words(prep: &Prepared) -> Vec<u32> {
    let [cz, cy, _] = [0, 1, 2].map(|a| prep.grid[a].count);
    let k = prep.n_centres();
    let mut words = vec![1f32.to_bits(); k];
    let empty = [f32::INFINITY.to_bits(), 0];
    words.extend(std::iter::repeat_n(empty, cz + cz * cy).flatten());
    // The drift per axis (none yet) and the reach (kmeans.wgsl: search_radius).
    debug_assert_eq!(words.len(), drift_word(prep));
    words.extend([0f32.to_bits(); 3]);
    words.extend([0, 1, 2].map(|a| prep.reach(a).to_bits()));
    let cx = prep.grid[2].count;
    prep.each_seed(|k_seed, [z, y, _], alive| {
        if !alive {
            return;
        }
        let (iz, iy) = (k_seed / (cy * cx), k_seed / cx % cy);
        for (at, v) in [(k + 2 * iz, z), (k + 2 * cz + 2 * (iz * cy + iy), y)] {
            words[at] = words[at].min(v.to_bits());
            words[at + 1] = words[at + 1].max(v.to_bits());
        }
    });
    words
}

/// The first of `maxdist`'s drift and reach words (after the SLICO
/// maxima and the layer and row ranges: [`maxdist_words`]).
fn drift_word(prep: &Prepared) -> usize {
    let [cz, cy, _] = [0, 1, 2].map(|a| prep.grid[a].count);
    prep.n_centres() + 2 * (cz + cz * cy)
}

/// Floats per centre on the GPU (kmeans.wgsl: stride): z, y, x, then the
/// features, padded to whole vec4s, so that `assign` loads a grey centre's
/// coordinates and feature in one 16-byte load. No alive flag: a dead
/// centre's z is DEAD_Z.
fn gpu_stride(nc: usize) -> usize {
    (3 + nc).div_ceil(4) * 4
}

/// The seeds in the GPU's layout ([`gpu_stride`]).
fn gpu_centres(prep: &Prepared) -> Vec<f32> {
    let stride = gpu_stride(prep.nc);
    let mut out = vec![0f32; prep.n_centres() * stride];
    prep.each_seed(|k, zyx, _| out[k * stride..k * stride + 3].copy_from_slice(&zyx));
    out
}

/// Bytes of the change flags a batch of `count` iterations reads back:
/// [iteration, min key, max key, NaN/inf flags], then one flag each.
fn flag_bytes(count: usize) -> u64 {
    16 + 4 * count as u64
}

/// A batch's change flags read back: the iterations it counts (up to and
/// including the first that changed no label) and whether that early stop
/// came; an error for NaN or inf input (minmax's flags).
fn batch_iterations(words: &[u32], count: usize) -> Result<(usize, bool)> {
    let (Some(&flags), Some(changes)) = (words.get(3), words.get(4..4 + count)) else {
        return Err(Error::Device("the k-means flags came back short".into()));
    };
    if flags & 1 != 0 {
        return Err(nan_error());
    }
    if flags & 2 != 0 {
        return Err(inf_error());
    }
    Ok(match changes.iter().position(|&f| f == 0) {
        Some(j) => (j + 1, true),
        None => (count, false),
    })
}

/// k-means iterations recorded per submission on images of up to
/// [`BATCHED_ITERATIONS_MAX_PIXELS`] pixels (larger ones submit each
/// iteration alone: an iteration past the early stop costs more there than
/// a round trip).
const ITERATIONS_PER_SUBMIT: usize = 5;
const BATCHED_ITERATIONS_MAX_PIXELS: usize = 1 << 22;

#[cfg(test)]
mod wgsl_layouts {
    use super::*;
    use crate::layout::mirror_layout;

    mirror_layout!(
        k_params_matches_wgsl,
        KParams,
        crate::shaders::SLIC_KMEANS,
        "Params",
        [
            nx,
            ny,
            nz,
            nc,
            n,
            n_centres,
            start_x,
            start_y,
            start_z,
            step_x,
            step_y,
            step_z,
            count_x,
            count_y,
            count_z,
            win_x,
            win_y,
            win_z,
            drift_word,
            slic_zero,
            use_mask,
            sx,
            sy,
            sz,
            spatial_weight,
            scale,
            inv_scale,
            ratio,
            z0,
            cells_x,
            cells_y,
            cells_z,
            exact_ties
        ]
    );
}

//! Kappa-sigma clipping with astropy's `sigma_clip` / `sigma_clipped_stats`
//! semantics: keep `cen - sigma_lower*std <= x <= cen + sigma_upper*std`
//! (strict `<` / `>` in the workshop's variant), repeat until a round
//! removes nothing or `maxiters` rounds; median of an even count = mean of
//! the two middle values; std with ddof = 0; NaN, inf and masked values
//! excluded. For float32 data the bounds are computed in float32, as numpy
//! does for astropy (a float32 centre times a Python float stays float32),
//! so the kept set is the same; other dtypes use float64 bounds.
//!
//! GPU (float32 data): shaders/stats/clip.wgsl. The exact median is a radix
//! select on ordered keys (three histogram levels, no sort); the sums are
//! float-float (about 44 bits), reduced in f64 on the host. One round is
//! four passes (three over the data), all on the GPU; the host reads the
//! state back once per batch of rounds.

pub mod stream;

use bytemuck::{Pod, Zeroable};

use crate::engine::Gpu;
use crate::error::{Error, Remedy, Result};
use crate::keys::Samples;
use crate::shaders::Shader;

/// The centre of the clipping interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CenFunc {
    Median,
    Mean,
}

named_enum!(CenFunc);

impl CenFunc {
    /// astropy's name of the centre function.
    pub fn name(self) -> &'static str {
        match self {
            CenFunc::Median => "median",
            CenFunc::Mean => "mean",
        }
    }
}

impl std::str::FromStr for CenFunc {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "median" => Ok(CenFunc::Median),
            "mean" => Ok(CenFunc::Mean),
            other => Err(Error::param(
                "cenfunc",
                format!("'{other}' (use median or mean)"),
            )),
        }
    }
}

/// astropy's parameters (`sigma_lower`/`sigma_upper` default to `sigma`;
/// `maxiters: None` = until convergence) plus the workshop's strict variant.
#[derive(Clone, Copy, Debug)]
pub struct ClipOptions {
    pub sigma: f64,
    pub sigma_lower: Option<f64>,
    pub sigma_upper: Option<f64>,
    pub maxiters: Option<u32>,
    pub cenfunc: CenFunc,
    /// Keep `cen - sl*std < x < cen + su*std` (the workshop's CuPy loop).
    pub strict: bool,
}

impl Default for ClipOptions {
    fn default() -> Self {
        super::SigmaClipParams::default().options()
    }
}

impl ClipOptions {
    /// The workshop's loop: strict comparisons, until nothing changes.
    pub fn workshop(sigma: f64) -> Self {
        ClipOptions {
            sigma,
            maxiters: None,
            strict: true,
            ..ClipOptions::default()
        }
    }

    pub(crate) fn sigmas(&self) -> Result<(f64, f64)> {
        let lo = self.sigma_lower.unwrap_or(self.sigma);
        let hi = self.sigma_upper.unwrap_or(self.sigma);
        for (name, v) in [
            ("sigma", self.sigma),
            ("sigma_lower", lo),
            ("sigma_upper", hi),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::param(
                    name,
                    format!("{v} (must be a finite number above 0, e.g. 3)"),
                ));
            }
        }
        Ok((lo, hi))
    }
}

/// `sigma_clipped_stats`' answer plus what the clipping did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClipStats {
    pub mean: f64,
    pub median: f64,
    pub std: f64,
    /// Values kept after the last round.
    pub n_kept: usize,
    /// Clipping rounds done (astropy's `niterations`).
    pub iterations: u32,
}

fn no_values() -> Error {
    Error::InvalidInput(
        "no finite, unmasked values to clip (the data is empty, all NaN/inf or all masked)".into(),
    )
}

fn check_mask(n: usize, mask: Option<&[bool]>) -> Result<()> {
    match mask {
        Some(m) if m.len() != n => Err(Error::InvalidInput(format!(
            "the mask has {} values but the data {n}; give a mask of the data's shape",
            m.len()
        ))),
        _ => Ok(()),
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    count: u32,
    base: u32,
    pass: u32,
    n_partials: u32,
    sigma_lower: f32,
    sigma_upper: f32,
    maxiters: u32,
    flags: u32,
    zero: u32,
    _pad: [u32; 3],
}

const PER_WG: usize = 16384;
/// Histogram words: three levels of 2048 bins, level 1 as sum_hist0 guessed
/// it, and the minimum above (shaders/stats/clip.wgsl).
const HIST_WORDS: usize = 4 * 2048 + 1;
const STATE_WORDS: usize = 23;
/// Timed passes one recording may hold (the engine's timestamp slots).
const MAX_PASSES: usize = 64;
/// Rounds recorded before the first look at the state: clipping until
/// convergence typically takes 5-10 rounds (the workshop's 2048² image 8);
/// rounds recorded after convergence still cost a few microseconds each
/// (their kernels return at once), later batches are shorter.
const FIRST_BATCH: usize = 8;
const LATER_BATCH: usize = 4;

/// Sigma-clipped statistics of float32 data on the GPU. `mask`: true =
/// excluded, as in numpy masked arrays.
pub async fn sigma_clipped_stats(
    gpu: &Gpu,
    data: &[f32],
    mask: Option<&[bool]>,
    options: &ClipOptions,
) -> Result<ClipStats> {
    options.sigmas()?;
    check_mask(data.len(), mask)?;
    // Masked values become NaN, which every bound excludes; unmasked data
    // is uploaded from where it lies.
    let values: std::borrow::Cow<'_, [f32]> = match mask {
        Some(m) => data
            .iter()
            .zip(m)
            .map(|(&x, &masked)| if masked { f32::NAN } else { x })
            .collect(),
        None => std::borrow::Cow::Borrowed(data),
    };
    if !values.iter().any(|v| v.is_finite()) {
        return Err(no_values());
    }
    let n = values.len();
    let per_chunk = ((gpu.max_binding_size() / 4) as usize / PER_WG * PER_WG).max(PER_WG);
    let chunks: Vec<&[f32]> = values.chunks(per_chunk).collect();
    if (n as u64) * 4 > gpu.memory_budget() {
        return Err(Error::beyond(
            format!(
                "clipping {n} values ({} MiB) does not fit the memory budget of {} MiB",
                (n * 4) >> 20,
                gpu.memory_budget() >> 20
            ),
            &[Remedy::LargerBudget, Remedy::UseCpu],
        ));
    }
    let mut bufs: Vec<wgpu::Buffer> = Vec::new();
    let mut uploaded = Ok(());
    for c in &chunks {
        match gpu.storage(4 * c.len() as u64, "clip data").await {
            Ok(b) => {
                gpu.upload(&b, bytemuck::cast_slice(c));
                bufs.push(b);
            }
            Err(e) => {
                uploaded = Err(e);
                break;
            }
        }
    }
    let lens: Vec<usize> = chunks.iter().map(|c| c.len()).collect();
    let outcome = match uploaded {
        Ok(()) => clip_buffers(gpu, &bufs, &lens, initial_shift(&values), options).await,
        Err(e) => Err(e),
    };
    for b in bufs {
        gpu.recycle(b);
    }
    outcome
}

/// The clipping rounds on f32 values already on the GPU (one buffer per
/// chunk of `lens[k]` values, each a multiple of PER_WG except the last).
pub(crate) async fn clip_buffers(
    gpu: &Gpu,
    bufs: &[wgpu::Buffer],
    lens: &[usize],
    shift: f32,
    options: &ClipOptions,
) -> Result<ClipStats> {
    let (sl, su) = options.sigmas()?;
    let n_partials: usize = lens.iter().map(|c| c.div_ceil(PER_WG)).sum();
    let mut held: Vec<wgpu::Buffer> = Vec::new();
    let outcome = async {
        let state = gpu.storage(4 * STATE_WORDS as u64, "clip state").await?;
        held.push(state.clone());
        let hist = gpu.storage(4 * HIST_WORDS as u64, "clip histogram").await?;
        held.push(hist.clone());
        let partials = gpu.storage(32 * n_partials as u64, "clip partials").await?;
        held.push(partials.clone());
        let mut init = [0u32; STATE_WORDS];
        init[0] = key_f32(-f32::MAX);
        init[1] = key_f32(f32::MAX);
        init[20] = shift.to_bits();
        // The first round's guess of the median's level-0 bin.
        init[22] = key_f32(shift) >> 21;
        gpu.upload(&state, bytemuck::cast_slice(&init));
        let mut zero_hist = vec![0u32; HIST_WORDS];
        zero_hist[HIST_WORDS - 1] = u32::MAX; // the minimum above: none yet
        gpu.upload(&hist, bytemuck::cast_slice(&zero_hist));
        let flags =
            u32::from(options.cenfunc == CenFunc::Median) | (u32::from(options.strict) << 1);
        let params = |count: usize, base: usize| {
            gpu.uniform(&Params {
                count: count as u32,
                base: base as u32,
                pass: 0,
                n_partials: n_partials as u32,
                sigma_lower: sl as f32,
                sigma_upper: su as f32,
                maxiters: options.maxiters.unwrap_or(u32::MAX),
                flags,
                zero: 0,
                _pad: [0; 3],
            })
        };
        // One uniform per chunk and the global one, made once.
        let mut chunk_params = Vec::new();
        let mut base = 0;
        for &c in lens {
            chunk_params.push(params(c, base));
            base += c.div_ceil(PER_WG);
        }
        let global = params(0, 0);
        let pipe = |e: &'static str| gpu.pipeline(Shader::Clip, e);
        let per_value = [pipe("sum_hist0")?, pipe("hist1")?, pipe("hist2")?];
        let finalize = pipe("finalize")?;
        // A round: three passes per chunk and finalize, within the timed
        // passes of one recording.
        let passes_per_round = 3 * lens.len() + 1;
        let fit = (MAX_PASSES / passes_per_round).max(1);
        // At most maxiters + 1 rounds (the last one only measures).
        let needed = options
            .maxiters
            .map_or(usize::MAX, |m| (m as usize).saturating_add(1));
        // Each round that does not stop removes at least one value: more
        // rounds than values means the kernels are not doing their work.
        let total: usize = lens.iter().sum();
        let mut rounds = 0usize;
        loop {
            let batch = if rounds == 0 {
                FIRST_BATCH
            } else {
                LATER_BATCH
            }
            .min(fit)
            .min(needed.saturating_sub(rounds).max(1));
            if rounds > total + 2 {
                return Err(Error::Device(format!(
                    "the clipping kernels did not converge after {rounds} rounds; please report this with the input"
                )));
            }
            rounds += batch;
            // A kernel the device rejects must fail the call, not loop on
            // stale state.
            let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
            let mut rec = gpu.recorder();
            for _ in 0..batch {
                for pipeline in &per_value {
                    for (k, c) in lens.iter().enumerate() {
                        rec.dispatch(
                            pipeline,
                            &[&chunk_params[k], &bufs[k], &state, &hist, &partials],
                            (c.div_ceil(PER_WG) * 256) as u64,
                        )?;
                    }
                }
                rec.dispatch(
                    &finalize,
                    &[&global, &bufs[0], &state, &hist, &partials],
                    256,
                )?;
            }
            let submitted = rec.submit().await;
            if let Some(e) = scope.pop().await {
                return Err(Error::Device(format!("the GPU rejected the clipping kernels: {e}")));
            }
            submitted?;
            let raw = gpu.read(&state, 4 * STATE_WORDS as u64).await?;
            let st: Vec<u32> = raw
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            if st[16] != 0 {
                return Ok(stats_from_state(&st));
            }
        }
    }
    .await;
    for b in held {
        gpu.recycle(b);
    }
    outcome
}

/// A first centre for the sums of the first round: the median of at most
/// 1001 evenly spaced finite values, near the data's centre so that the
/// float-float sums of squares lose no precision to cancellation.
pub(crate) fn initial_shift(values: &[f32]) -> f32 {
    let step = (values.len() / 1001).max(1);
    let mut sample: Vec<f32> = values
        .iter()
        .step_by(step)
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    if sample.is_empty() {
        sample = values.iter().copied().filter(|v| v.is_finite()).collect();
    }
    sample.sort_by(f32::total_cmp);
    sample.get(sample.len() / 2).copied().unwrap_or(0.0)
}

/// Final statistics in f64 from the GPU's float-float sums and median keys.
fn stats_from_state(st: &[u32]) -> ClipStats {
    let f = |i: usize| f64::from(f32::from_bits(st[i]));
    let n = st[5] as f64;
    if st[5] == 0 {
        return ClipStats {
            mean: f64::NAN,
            median: f64::NAN,
            std: f64::NAN,
            n_kept: 0,
            iterations: st[3],
        };
    }
    // Sums around the shift of the last round.
    let d = (f(12) + f(13)) / n;
    let mean = f(20) + d;
    let var = ((f(14) + f(15)) / n - d * d).max(0.0);
    let median = (f64::from(value_of(st[8])) + f64::from(value_of(st[9]))) / 2.0;
    ClipStats {
        mean,
        median,
        std: var.sqrt(),
        n_kept: st[5] as usize,
        iterations: st[3],
    }
}

fn key_f32(x: f32) -> u32 {
    let b = if x == 0.0 { 0 } else { x.to_bits() };
    if b & 0x8000_0000 != 0 {
        !b
    } else {
        b | 0x8000_0000
    }
}

fn value_of(k: u32) -> f32 {
    if k & 0x8000_0000 != 0 {
        f32::from_bits(k & 0x7fff_ffff)
    } else {
        f32::from_bits(!k)
    }
}

pub mod cpu;

#[cfg(test)]
mod wgsl_layouts {
    use super::*;
    use crate::layout::mirror_layout;

    mirror_layout!(
        params_matches_wgsl,
        Params,
        crate::shaders::CLIP,
        "Params",
        [
            count,
            base,
            pass,
            n_partials,
            sigma_lower,
            sigma_upper,
            maxiters,
            flags,
            zero,
            _pad
        ]
    );
}

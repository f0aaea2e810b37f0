//! Kernel time from timestamp queries, and the per-entry-point profile
//! (GPUSCOPE_PROFILE=1).

use std::sync::Mutex;
use std::sync::atomic::Ordering;

use super::*;

pub(super) fn profiling_requested() -> bool {
    env_set("GPUSCOPE_PROFILE")
}

impl Gpu {
    /// GPU time of the kernels of the last timed recording, in nanoseconds,
    /// when the adapter offers timestamp queries.
    pub fn last_kernel_ns(&self) -> Option<u64> {
        self.timestamp_period_ns
            .map(|_| self.last_kernel_ns.load(Ordering::Relaxed))
    }

    /// GPU time of every timed kernel since the last [`Gpu::reset_kernel_time`],
    /// in nanoseconds, when the adapter offers timestamp queries.
    pub fn kernel_ns_total(&self) -> Option<u64> {
        self.timestamp_period_ns
            .map(|_| self.total_kernel_ns.load(Ordering::Relaxed))
    }

    /// Bytes copied host to device and device to host since the context
    /// was made: front ends show with it that a chain of operations
    /// crossed the bus once each way.
    pub fn bus_bytes(&self) -> (u64, u64) {
        (
            self.bus[0].load(Ordering::Relaxed),
            self.bus[1].load(Ordering::Relaxed),
        )
    }

    pub(super) fn count_bus(&self, to_device: bool, bytes: u64) {
        self.bus[usize::from(!to_device)].fetch_add(bytes, Ordering::Relaxed);
    }

    /// Starts a new sum for [`Gpu::kernel_ns_total`].
    pub fn reset_kernel_time(&self) {
        self.total_kernel_ns.store(0, Ordering::Relaxed);
    }

    pub(super) fn add_kernel_ticks(&self, ticks: &[u64], names: &[String]) -> u64 {
        let period = f64::from(self.timestamp_period_ns.unwrap_or(1.0));
        let per_pass: Vec<u64> = ticks
            .chunks_exact(2)
            .map(|p| p[1].saturating_sub(p[0]))
            .collect();
        let ns = (per_pass.iter().sum::<u64>() as f64 * period) as u64;
        self.total_kernel_ns.fetch_add(ns, Ordering::Relaxed);
        if let Some(Ok(mut profile)) = self.profile.as_ref().map(Mutex::lock) {
            for (name, t) in names.iter().zip(&per_pass) {
                let e = profile.entry(name.clone()).or_default();
                e.0 += (*t as f64 * period) as u64;
                e.1 += 1;
            }
        }
        ns
    }

    /// Starts timing a host-side phase for the profile (None when not
    /// profiling): pass the result to [`Gpu::host_done`].
    pub(crate) fn host_clock(&self) -> Option<std::time::Instant> {
        self.profile.as_ref().map(|_| std::time::Instant::now())
    }

    /// Adds the wall time since `clock` to the profile as "host: <name>".
    pub(crate) fn host_done(&self, name: &str, clock: Option<std::time::Instant>) {
        if let (Some(t), Some(Ok(mut profile))) = (clock, self.profile.as_ref().map(Mutex::lock)) {
            let e = profile.entry(format!("host: {name}")).or_default();
            e.0 += t.elapsed().as_nanos() as u64;
            e.1 += 1;
        }
    }

    /// Empties the profile (a benchmark's warm-up left out of it).
    pub fn reset_profile(&self) {
        if let Some(Ok(mut profile)) = self.profile.as_ref().map(Mutex::lock) {
            profile.clear();
        }
    }

    /// GPU time per entry point (name, milliseconds, passes) since the
    /// context was made or the last [`Gpu::reset_profile`], when the
    /// environment variable GPUSCOPE_PROFILE is set and the adapter has
    /// timestamp queries, and the wall time of the host phases timed with
    /// [`Gpu::host_clock`]; slowest first.
    pub fn pass_profile(&self) -> Vec<(String, f64, u64)> {
        let Some(Ok(profile)) = self.profile.as_ref().map(Mutex::lock) else {
            return Vec::new();
        };
        let mut rows: Vec<(String, f64, u64)> = profile
            .iter()
            .map(|(k, &(ns, n))| (k.clone(), ns as f64 / 1e6, n))
            .collect();
        rows.sort_by(|a, b| b.1.total_cmp(&a.1));
        rows
    }
}

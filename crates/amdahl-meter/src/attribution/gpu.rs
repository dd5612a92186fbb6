//! Which processes used each GPU in an interval, and how much: what attribution needs to split a
//! GPU's energy. Behind the [`GpuUsageSource`] trait so tests drive it with a fake driver; the
//! real one is [`BackendUsage`] over any [`GpuBackend`] (NVML in the exporter).
//!
//! AMD GPUs get the same from the KFD sysfs tree ([`super::kfd`]); [`Chain`] asks both.
//!
//! The rule ([`gpu_weights`], docs/methodology.md "Energy attribution (exporter)"):
//! 1. by per-process SM utilisation (NVML `nvmlDeviceGetProcessUtilization`; on AMD, each
//!    process's KFD `cu_occupancy`) where the driver gives it and it is not all zero;
//! 2. else equally over the processes holding a compute or graphics context on the GPU (on AMD,
//!    a nonzero KFD `vram_<gpuid>`);
//! 3. else (no process, or nothing readable) the interval's energy stays unattributed.

use crate::gpu::{GpuBackend, ProcessSample};
use std::collections::BTreeMap;

/// What the driver said about one GPU's processes for one interval.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuUsage {
    /// Per-process utilisation samples taken in the interval; None where the driver does not
    /// give them (pre-Maxwell, some vGPU and MIG setups) or the call failed.
    pub samples: Option<Vec<ProcessSample>>,
    /// Pids holding a context on the GPU now; None where unreadable.
    pub processes: Option<Vec<u32>>,
}

/// A source of per-GPU process usage.
pub trait GpuUsageSource: Send {
    /// Each GPU's usage since the previous call, keyed by the device id its energy source gives
    /// it (`gpu:N`, [`crate::gpu::GpuSource`]). GPUs missing here leave their energy
    /// unattributed.
    fn usage(&mut self) -> Vec<(String, GpuUsage)>;
}

/// Which rule split a GPU's energy in the latest interval (exported as a label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GpuRule {
    Utilisation,
    Processes,
    Unattributed,
}

impl GpuRule {
    pub fn as_str(self) -> &'static str {
        match self {
            GpuRule::Utilisation => "utilisation",
            GpuRule::Processes => "processes",
            GpuRule::Unattributed => "unattributed",
        }
    }
}

/// The weight of each pid on one GPU for one interval, and the rule that gave them. Weights are
/// SM-percent summed over the process's samples in the interval (NVML returns one sample per
/// sampling period, so the sum tracks utilisation × time), or 1 per process for the equal
/// split. Pids are sorted and unique; the weights of a non-empty result sum to more than 0.
pub fn gpu_weights(u: &GpuUsage) -> (GpuRule, Vec<(u32, f64)>) {
    if let Some(samples) = &u.samples {
        let mut w: BTreeMap<u32, f64> = BTreeMap::new();
        for s in samples {
            *w.entry(s.pid).or_insert(0.0) += f64::from(s.sm_percent);
        }
        w.retain(|_, v| *v > 0.0);
        if !w.is_empty() {
            return (GpuRule::Utilisation, w.into_iter().collect());
        }
    }
    match &u.processes {
        Some(p) if !p.is_empty() => {
            let mut p = p.clone();
            p.sort_unstable();
            p.dedup();
            (
                GpuRule::Processes,
                p.into_iter().map(|pid| (pid, 1.0)).collect(),
            )
        }
        _ => (GpuRule::Unattributed, Vec::new()),
    }
}

/// Usage read from a [`GpuBackend`] (NVML in the exporter; the fake in tests). Remembers the
/// newest sample timestamp of each GPU so each interval gets only its own samples.
pub struct BackendUsage<B: GpuBackend> {
    backend: B,
    last_us: BTreeMap<u32, u64>,
}

impl<B: GpuBackend> BackendUsage<B> {
    pub fn new(backend: B) -> Self {
        BackendUsage {
            backend,
            last_us: BTreeMap::new(),
        }
    }
}

impl<B: GpuBackend> GpuUsageSource for BackendUsage<B> {
    fn usage(&mut self) -> Vec<(String, GpuUsage)> {
        // A failed call reads as "not given" (the next rule applies); the exporter shows the
        // rule each GPU got (`amdahl_gpu_attribution_rule`), so a failing driver is visible.
        let Ok(n) = self.backend.count() else {
            return Vec::new();
        };
        (0..n)
            .map(|i| {
                let since = self.last_us.get(&i).copied().unwrap_or(0);
                let samples = self.backend.process_utilisation(i, since).ok().flatten();
                if let Some(newest) = samples.iter().flatten().map(|s| s.timestamp_us).max() {
                    self.last_us.insert(i, newest.max(since));
                }
                let processes = self.backend.processes(i).ok().flatten();
                (format!("gpu:{i}"), GpuUsage { samples, processes })
            })
            .collect()
    }
}

/// Several usage sources asked in turn (NVML for `gpu:N`, KFD for `amdgpu:N`); their device ids
/// do not overlap.
pub struct Chain(pub Vec<Box<dyn GpuUsageSource>>);

impl GpuUsageSource for Chain {
    fn usage(&mut self) -> Vec<(String, GpuUsage)> {
        self.0.iter_mut().flat_map(|s| s.usage()).collect()
    }
}

/// Usage from NVML: a second NVML handle beside the energy source's (NVML counts its
/// initialisations, so both stay valid). Errs with the reason where NVML cannot be opened or
/// the `nvml` feature is off. Only compiled, not run, in CI: no GPU there.
pub fn nvml_usage() -> Result<Box<dyn GpuUsageSource>, String> {
    #[cfg(feature = "nvml")]
    {
        let b = crate::nvml::NvmlBackend::init()?;
        Ok(Box::new(BackendUsage::new(b)))
    }
    #[cfg(not(feature = "nvml"))]
    Err("built without the `nvml` feature".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(pid: u32, ts: u64, sm: u32) -> ProcessSample {
        ProcessSample {
            pid,
            timestamp_us: ts,
            sm_percent: sm,
        }
    }

    #[test]
    fn utilisation_first_then_processes_then_nothing() {
        let u = GpuUsage {
            samples: Some(vec![s(7, 1, 60), s(9, 1, 20), s(7, 2, 20), s(11, 2, 0)]),
            processes: Some(vec![7, 9, 11]),
        };
        // pid 7: 60 + 20 = 80; pid 9: 20; pid 11 had samples of 0 % only: no weight.
        assert_eq!(
            gpu_weights(&u),
            (GpuRule::Utilisation, vec![(7, 80.0), (9, 20.0)])
        );
        // All-zero samples (or none) fall back to the processes, each counted once.
        let u = GpuUsage {
            samples: Some(vec![s(7, 1, 0)]),
            processes: Some(vec![9, 7, 9]),
        };
        assert_eq!(
            gpu_weights(&u),
            (GpuRule::Processes, vec![(7, 1.0), (9, 1.0)])
        );
        let u = GpuUsage {
            samples: None,
            processes: Some(vec![]),
        };
        assert_eq!(gpu_weights(&u), (GpuRule::Unattributed, vec![]));
        assert_eq!(
            gpu_weights(&GpuUsage::default()),
            (GpuRule::Unattributed, vec![])
        );
    }
}

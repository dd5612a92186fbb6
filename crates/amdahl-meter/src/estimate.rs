//! Estimates when no counter is readable, and process-scope attribution of machine counters.
//!
//! CPU: E = t_cpu × TDP / n_logical — the CPU's TDP shared equally among its logical CPUs and
//! charged per second of CPU time (the "per-core share of TDP" model of Green Algorithms,
//! Lannelongue et al., Adv. Sci. 2021, eq. 1, with usage factor folded into CPU time).
//! RAM: P = 0.375 W/GB, "3 W per 8 GB of DDR3/DDR4" (Crucial, as used by CodeCarbon ≤ 2.x,
//! `codecarbon/external/ram.py`). Which TDP, and over how many logical CPUs: `cpu_power.rs`.

use crate::procfs;
use crate::source::{DeviceInfo, DeviceKind, EnergySource, Method, Raw};
use crate::MeterError;
use amdahl_model::units::{Joules, Watts};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// W per GB of RAM (3 W / 8 GB, Crucial via CodeCarbon).
pub const RAM_WATTS_PER_GB: f64 = 3.0 / 8.0;

/// Share of a machine counter charged to a process: its CPU time over the machine's busy CPU
/// time in the same window, clamped to [0, 1] so process scope never exceeds the machine.
pub fn cpu_share(process_cpu_s: f64, machine_busy_s: f64) -> f64 {
    if machine_busy_s > 0.0 && process_cpu_s.is_finite() {
        (process_cpu_s / machine_busy_s).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

pub fn attribute(machine: Joules, share: f64) -> Joules {
    machine * share.clamp(0.0, 1.0)
}

/// Where the estimate gets its CPU time and memory size.
pub enum Target {
    /// Whole machine: busy ticks of `/proc/stat`, `MemTotal`.
    Machine,
    /// The command's process tree: `/proc/*/stat` while it runs, then the exact figure set with
    /// [`ProcessProbe::finish`] from `getrusage(RUSAGE_CHILDREN)` after it is reaped.
    Process(Arc<ProcessProbe>),
}

/// CPU ticks and RSS of everything this process started (the command and its descendants,
/// orphans included: the runner makes amdahl their subreaper), and the exact total once the
/// command has exited.
pub struct ProcessProbe {
    final_ticks: AtomicU64,
    last_ticks: AtomicU64,
    last_rss: AtomicU64,
    /// Count this process's own CPU time and memory too: the Python tracker measures the code
    /// that runs in the process itself, `amdahl run` only the command it started.
    with_self: bool,
    /// Ticks already spent when the probe was made (this process's life before the tracker
    /// started), subtracted from every figure.
    base_ticks: u64,
}

const UNSET: u64 = u64::MAX;

impl ProcessProbe {
    pub fn new() -> Arc<Self> {
        Self::build(false)
    }
    /// A probe of this process and everything it started (the Python tracker's process scope).
    pub fn of_this_process() -> Arc<Self> {
        Self::build(true)
    }
    fn build(with_self: bool) -> Arc<Self> {
        let p = ProcessProbe {
            final_ticks: AtomicU64::new(UNSET),
            last_ticks: AtomicU64::new(0),
            last_rss: AtomicU64::new(0),
            with_self,
            base_ticks: 0,
        };
        if !with_self {
            return Arc::new(p);
        }
        p.refresh();
        let base = p.last_ticks.load(Ordering::SeqCst);
        Arc::new(ProcessProbe {
            base_ticks: base,
            ..p
        })
    }
    /// Record the exact CPU time (`getrusage(RUSAGE_CHILDREN)`) once the command was reaped.
    pub fn finish(&self, cpu_s: f64) {
        let ticks = (cpu_s * procfs::clk_tck()).round().max(0.0) as u64;
        self.final_ticks.store(ticks, Ordering::SeqCst);
    }
    /// CPU seconds of the command's tree so far (after [`ProcessProbe::finish`]: the larger of
    /// the exact rusage figure and the last live scan, which also saw orphans still running).
    pub fn cpu_seconds(&self) -> f64 {
        self.ticks() as f64 / procfs::clk_tck()
    }
    /// Read the process tree now (a scan of /proc).
    pub fn refresh(&self) {
        if self.final_ticks.load(Ordering::SeqCst) != UNSET {
            return;
        }
        let me = std::process::id();
        let procs = procfs::all_pid_stats();
        let (mut ticks, mut pages) = procfs::tree_usage(me, &procs);
        if self.with_self {
            if let Some((_, s)) = procs.iter().find(|(p, _)| *p == me) {
                ticks += s.ticks;
                pages += s.rss_pages;
            }
        }
        // Monotone: a process between exit and reaping may briefly be in neither sum.
        self.last_ticks.fetch_max(ticks, Ordering::SeqCst);
        self.last_rss
            .store(pages * procfs::page_size(), Ordering::SeqCst);
    }
    fn ticks(&self) -> u64 {
        let last = self.last_ticks.load(Ordering::SeqCst);
        let t = match self.final_ticks.load(Ordering::SeqCst) {
            UNSET => last,
            f => f.max(last),
        };
        t.saturating_sub(self.base_ticks)
    }
    /// The latest RSS; after the end, the last one seen (the final interval is integrated with it).
    fn rss_bytes(&self) -> u64 {
        self.last_rss.load(Ordering::SeqCst)
    }
}

/// Refreshes a [`ProcessProbe`] at every sample. It has no devices of its own; placed first
/// among the sources, it updates the tree's CPU time before the estimate reads it, and keeps
/// the live figure that process-scope attribution uses even when RAPL measures the energy.
pub struct ProbeSource(pub Arc<ProcessProbe>);

impl EnergySource for ProbeSource {
    fn devices(&self) -> Vec<DeviceInfo> {
        Vec::new()
    }
    fn read(&mut self) -> Vec<Result<Raw, MeterError>> {
        self.0.refresh();
        Vec::new()
    }
}

/// Estimated CPU and RAM devices (either may be left out when a counter covers it).
pub struct EstimateSource {
    target: Target,
    cpu_tdp: Option<Watts>,
    ram: bool,
    ncpu: usize,
    tck: f64,
    mem_total: u64,
}

impl EstimateSource {
    /// `cpu_tdp`: Some to estimate the CPU; `ram`: whether to estimate RAM.
    pub fn new(target: Target, cpu_tdp: Option<Watts>, ram: bool) -> Self {
        EstimateSource {
            target,
            cpu_tdp,
            ram,
            ncpu: procfs::cpu_count(),
            tck: procfs::clk_tck(),
            mem_total: procfs::mem_total_bytes().unwrap_or(0),
        }
    }
}

impl EnergySource for EstimateSource {
    fn devices(&self) -> Vec<DeviceInfo> {
        let mut v = Vec::new();
        if let Some(tdp) = self.cpu_tdp {
            v.push(DeviceInfo {
                id: "estimate:cpu".into(),
                kind: DeviceKind::Cpu,
                name: format!("CPU time × {tdp:.0}/{} logical CPUs", self.ncpu),
                method: Method::Estimate,
            });
        }
        if self.ram {
            v.push(DeviceInfo {
                id: "estimate:ram".into(),
                kind: DeviceKind::Ram,
                name: format!("RAM × {RAM_WATTS_PER_GB} W/GB"),
                method: Method::Estimate,
            });
        }
        v
    }

    fn read(&mut self) -> Vec<Result<Raw, MeterError>> {
        let mut v = Vec::new();
        if let Some(tdp) = self.cpu_tdp {
            let ticks = match &self.target {
                Target::Machine => {
                    crate::small_file::read("/proc/stat".as_ref(), crate::small_file::TABLE)
                        .ok()
                        .and_then(|s| procfs::parse_stat_busy_ticks(&s))
                        .unwrap_or(0)
                }
                Target::Process(p) => p.ticks(),
            };
            // J per tick = (TDP / n_logical) W × (1 / CLK_TCK) s, so ticks per J is its inverse.
            v.push(Ok(Raw::Counter {
                value: ticks,
                units_per_joule: self.ncpu as f64 * self.tck / tdp.get(),
                max: None,
                power: None,
            }));
        }
        if self.ram {
            let bytes = match &self.target {
                Target::Machine => self.mem_total,
                Target::Process(p) => p.rss_bytes(),
            };
            v.push(Ok(Raw::Power(Watts(bytes as f64 / 1e9 * RAM_WATTS_PER_GB))));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn process_scope_never_exceeds_machine(machine in 0.0f64..1e7, p in -10.0f64..1e6, m in 0.0f64..1e6) {
            let e = attribute(Joules(machine), cpu_share(p, m));
            prop_assert!(e.get() <= machine && e.get() >= 0.0);
        }
    }

    #[test]
    fn share_is_cpu_time_ratio() {
        // 3 s of 12 busy CPU-seconds: a quarter of 400 J.
        assert_eq!(
            attribute(Joules(400.0), cpu_share(3.0, 12.0)),
            Joules(100.0)
        );
        assert_eq!(cpu_share(5.0, 0.0), 0.0);
    }
}

//! Estimates when no counter is readable, and process-scope attribution of machine counters.
//!
//! CPU: E = t_cpu × TDP / n_logical — the CPU's TDP shared equally among its logical CPUs and
//! charged per second of CPU time (the "per-core share of TDP" model of Green Algorithms,
//! Lannelongue et al., Adv. Sci. 2021, eq. 1, with usage factor folded into CPU time).
//! RAM: CodeCarbon 3.3.2's rule ([`ram_watts`], `codecarbon/external/ram.py`): DIMMs guessed
//! from the installed size, 5 W each (1.5 W on ARM) with a falling marginal power; in process
//! scope the machine's figure is shared by RSS / `MemTotal` ([`ram_power`]). CodeCarbon ≤ 2.x used
//! 3 W per 8 GB (0.375 W/GB, Crucial), which 3.x dropped. Which TDP, and over how many logical
//! CPUs: `cpu_power.rs`.

use crate::procfs;
use crate::source::{DeviceInfo, DeviceKind, EnergySource, Method, Raw};
use crate::MeterError;
use amdahl_model::units::{Joules, Watts};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The CodeCarbon version whose RAM rule [`ram_watts`] follows (and whose CSV amdahl writes).
pub const CODECARBON_VERSION: &str = "3.3.2";

/// W per DIMM on x86 (`RAM_SLOT_POWER_X86`) and on ARM, CodeCarbon 3.3.2 `external/ram.py`.
const DIMM_WATTS_X86: f64 = 5.0;
const DIMM_WATTS_ARM: f64 = 1.5;

/// Bytes per GiB: CodeCarbon's `B_TO_GB` (`external/hardware.py`) is 1024³, so its "GB" of RAM
/// (`ram_total_size`, `ram_used_gb`, the size its RAM rule reads) are GiB.
pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// How many DIMMs CodeCarbon 3.3.2 assumes for `gib` of RAM (`RAM._estimate_dimm_count`):
/// 1 up to 2 GiB, 2 up to 16, 4 up to 32 or 64, 8 up to 128; above, `ceil(gib / size)` for the
/// largest common DIMM size (128, 64, …, 4 GiB) of at most gib / 8, capped at 32.
pub fn dimm_count(gib: f64) -> u32 {
    match gib {
        g if g <= 2.0 => 1,
        g if g <= 16.0 => 2,
        g if g <= 64.0 => 4,
        g if g <= 128.0 => 8,
        g => [128.0, 64.0, 32.0, 16.0, 8.0, 4.0]
            .into_iter()
            .find(|size| *size <= g / 8.0)
            .map(|size| ((g / size).ceil() as u32).min(32))
            .unwrap_or(8),
    }
}

/// RAM power by CodeCarbon 3.3.2's rule (`RAM._calculate_ram_power`) for `gib` of RAM: per DIMM
/// 5 W (x86) or 1.5 W (ARM) for the first 4, then 90 % of that for DIMMs 5–8, 80 % for 9–16 and
/// 70 % beyond; at least 2 DIMMs' worth on x86 (10 W) and 3 W on ARM. 23.5 GiB: 4 DIMMs, 20 W.
pub fn ram_watts(gib: f64, arm: bool) -> Watts {
    let (per, min) = if arm {
        (DIMM_WATTS_ARM, 3.0)
    } else {
        (DIMM_WATTS_X86, 2.0 * DIMM_WATTS_X86)
    };
    let n = f64::from(dimm_count(gib));
    // DIMMs in each band of falling marginal power: [0, 4], (4, 8], (8, 16], (16, ∞).
    let bands = [
        (0.0, 4.0, 1.0),
        (4.0, 8.0, 0.9),
        (8.0, 16.0, 0.8),
        (16.0, f64::MAX, 0.7),
    ];
    let total: f64 = bands
        .iter()
        .map(|(lo, hi, f)| (n.min(*hi) - lo).max(0.0) * per * f)
        .sum();
    Watts(total.max(min))
}

/// Whether this binary runs on ARM (CodeCarbon: `platform.machine()` containing arm/aarch).
pub const ARM: bool = cfg!(any(target_arch = "aarch64", target_arch = "arm"));

/// The estimated RAM power: machine scope, CodeCarbon 3.3.2's rule for the installed RAM
/// (`MemTotal`, as CodeCarbon's machine mode reads `psutil.virtual_memory().total`); process
/// scope, that power × the command's share of the RAM (RSS / `MemTotal`). The share is amdahl's
/// own rule, not CodeCarbon's: CodeCarbon 3.3.2's process mode feeds the RSS to the DIMM rule,
/// which gives at least 10 W even for a process of a few MB, more than its share of the machine.
pub fn ram_power(mem_total_bytes: u64, rss_bytes: Option<u64>, arm: bool) -> Watts {
    if mem_total_bytes == 0 {
        return Watts::ZERO;
    }
    let machine = ram_watts(mem_total_bytes as f64 / GIB, arm);
    match rss_bytes {
        None => machine,
        Some(rss) => machine * (rss as f64 / mem_total_bytes as f64).clamp(0.0, 1.0),
    }
}

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
                name: ram_name(self.mem_total, matches!(self.target, Target::Process(_))),
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
            let rss = match &self.target {
                Target::Machine => None,
                Target::Process(p) => Some(p.rss_bytes()),
            };
            v.push(Ok(Raw::Power(ram_power(self.mem_total, rss, ARM))));
        }
        v
    }
}

/// The RAM estimate's device name: the rule, the DIMMs it assumed and the power.
fn ram_name(mem_total: u64, process: bool) -> String {
    let gib = mem_total as f64 / GIB;
    format!(
        "RAM, CodeCarbon {CODECARBON_VERSION} rule: {} DIMM(s) for {gib:.1} GiB, {:.1}{}",
        dimm_count(gib),
        ram_watts(gib, ARM),
        if process { " × RSS share" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Regression: the RAM estimate was 0.375 W/GB (CodeCarbon ≤ 2.x), 9.5 W for this 25.3 GB
    /// machine where CodeCarbon 3.3.2 writes 20 W. The fixture row CodeCarbon 3.3.2 wrote here
    /// (`crates/amdahl-cli/tests/fixtures/codecarbon/country_FRA.csv`) has ram_total_size
    /// 23.540584564208984 (GiB) and ram_power 20.0.
    #[test]
    fn ram_power_follows_codecarbon_3_rule() {
        let mem_total = 24_683_652u64 * 1024; // MemTotal: 24683652 kB
        assert!((mem_total as f64 / GIB - 23.5406).abs() < 1e-3);
        assert_eq!(ram_power(mem_total, None, false), Watts(20.0));
        assert_eq!(ram_watts(23.540584564208984, false), Watts(20.0));
    }

    /// `_calculate_ram_power` by hand for each band (x86, 5 W per DIMM):
    /// 1 GiB: 1 DIMM → 5 W, floor 10 W; 8 GiB: 2 → 10 W; 64 GiB: 4 → 20 W;
    /// 128 GiB: 8 → 20 + 4 × 4.5 = 38 W; 256 GiB: 32 GiB DIMMs, 8 → 38 W;
    /// 512 GiB: 64 GiB DIMMs, 8 → 38 W; 2048 GiB: 128 GiB DIMMs, 16 → 38 + 8 × 4 = 70 W;
    /// 6144 GiB: 128 GiB DIMMs, 48 capped at 32 → 70 + 16 × 3.5 = 126 W.
    /// 200 GiB: 16 GiB DIMMs, 13 → 38 + 5 × 4 = 58 W.
    /// ARM (1.5 W per DIMM): 1 GiB → 1.5 W, floor 3 W; 128 GiB → 6 + 4 × 1.35 = 11.4 W.
    /// Every figure also checked by running CodeCarbon 3.3.2's own two methods on these sizes.
    #[test]
    fn ram_rule_bands_by_hand() {
        for (gib, dimms, watts) in [
            (1.0, 1, 10.0),
            (8.0, 2, 10.0),
            (64.0, 4, 20.0),
            (128.0, 8, 38.0),
            (256.0, 8, 38.0),
            (200.0, 13, 58.0),
            (512.0, 8, 38.0),
            (2048.0, 16, 70.0),
            (6144.0, 32, 126.0),
        ] {
            assert_eq!(dimm_count(gib), dimms, "{gib} GiB");
            assert!(
                (ram_watts(gib, false).get() - watts).abs() < 1e-9,
                "{gib} GiB"
            );
        }
        assert!((ram_watts(1.0, true).get() - 3.0).abs() < 1e-12);
        assert!((ram_watts(128.0, true).get() - 11.4).abs() < 1e-9);
    }

    /// Process scope: the machine's 20 W × RSS share; 2.5 GiB of a 25 GiB machine is 2 W.
    #[test]
    fn process_scope_ram_is_the_rss_share_of_the_machine() {
        let total = (25.0 * GIB) as u64;
        let rss = (2.5 * GIB) as u64;
        assert!((ram_power(total, Some(rss), false).get() - 2.0).abs() < 1e-9);
        assert_eq!(ram_power(total, Some(2 * total), false), Watts(20.0));
        assert_eq!(ram_power(0, None, false), Watts::ZERO);
    }

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

//! Machine-wide CPU and RAM utilisation over a run, the figures CodeCarbon 3.3.2 writes in its
//! `cpu_utilization_percent`, `ram_utilization_percent` and `ram_used_gb` columns.
//!
//! CodeCarbon (`EmissionsTracker._monitor_power`, every second whatever its tracking mode)
//! samples `psutil.cpu_percent()`, `psutil.virtual_memory().percent` and
//! `virtual_memory().used / 1024³`, and writes the mean of each over the run. amdahl reads the
//! same kernel figures at every sample: `/proc/stat` for the CPU (psutil: busy = total − idle −
//! iowait, over the ticks since the last call, so the mean of equal intervals is the run's busy
//! ticks over its total ticks, which is what is kept) and `/proc/meminfo` for the RAM (psutil
//! `_pslinux.virtual_memory`: percent = (total − available) / total, used = total − free −
//! buffers − cached − SReclaimable), averaged over the samples.

use serde::{Deserialize, Serialize};

/// Machine-wide utilisation over the run (not the command's: CodeCarbon's columns are the
/// machine's in both tracking modes).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Utilization {
    /// Busy CPU ticks over all ticks of `/proc/stat` during the run, in % (0–100).
    pub cpu_percent: f64,
    /// Mean over the samples of (MemTotal − MemAvailable) / MemTotal, in %.
    pub ram_percent: f64,
    /// Mean over the samples of used memory (MemTotal − MemFree − Buffers − Cached −
    /// SReclaimable), in GiB (1024³ bytes, CodeCarbon's `ram_used_gb` unit).
    pub ram_used_gib: f64,
}

/// RAM in use at one instant, as psutil computes it from `/proc/meminfo`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemUsage {
    pub percent: f64,
    pub used_gib: f64,
}

/// psutil's `virtual_memory()` percent and used from the text of `/proc/meminfo` (kB figures).
/// Without `MemAvailable` (kernels before 3.14) psutil falls back to free + buffers + cached.
pub fn parse_mem_usage(meminfo: &str) -> Option<MemUsage> {
    let kb = |key: &str| -> Option<f64> {
        let line = meminfo.lines().find(|l| l.starts_with(key))?;
        line.get(key.len()..)?
            .split_whitespace()
            .next()?
            .parse::<f64>()
            .ok()
    };
    let total = kb("MemTotal:").filter(|t| *t > 0.0)?;
    let free = kb("MemFree:")?;
    let buffers = kb("Buffers:").unwrap_or(0.0);
    let cached = kb("Cached:").unwrap_or(0.0) + kb("SReclaimable:").unwrap_or(0.0);
    let available = kb("MemAvailable:").unwrap_or(free + buffers + cached);
    let mut used = total - free - cached - buffers;
    if used < 0.0 {
        used = total - free;
    }
    Some(MemUsage {
        percent: ((total - available) / total * 100.0).clamp(0.0, 100.0),
        used_gib: used * 1024.0 / crate::estimate::GIB,
    })
}

/// Busy and total ticks of the `cpu` line of `/proc/stat`, as psutil counts them: total is
/// every field but guest and guest_nice (already inside user and nice), busy is total less
/// idle and iowait.
pub fn parse_cpu_ticks(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let total: u64 = f.iter().take(8).sum();
    let idle = f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

/// The utilisation of a run so far, updated at every sample.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    first_cpu: Option<(u64, u64)>,
    last_cpu: Option<(u64, u64)>,
    samples: u32,
    ram_percent_sum: f64,
    ram_used_sum: f64,
}

impl Tally {
    /// Take one sample's CPU ticks and RAM use (either may be unreadable).
    pub fn add(&mut self, cpu: Option<(u64, u64)>, mem: Option<MemUsage>) {
        if let Some(c) = cpu {
            self.first_cpu.get_or_insert(c);
            self.last_cpu = Some(c);
        }
        if let Some(m) = mem {
            self.samples += 1;
            self.ram_percent_sum += m.percent;
            self.ram_used_sum += m.used_gib;
        }
    }

    /// Read `/proc/stat` and `/proc/meminfo` now and take them as a sample.
    pub fn sample(&mut self) {
        let read = |p: &str| crate::small_file::read(p.as_ref(), crate::small_file::TABLE).ok();
        let cpu = read("/proc/stat").as_deref().and_then(parse_cpu_ticks);
        let mem = read("/proc/meminfo").as_deref().and_then(parse_mem_usage);
        self.add(cpu, mem);
    }

    /// The figures so far; None before any RAM sample. CPU is 0 until two readings differ.
    pub fn utilization(&self) -> Option<Utilization> {
        if self.samples == 0 {
            return None;
        }
        let cpu_percent = match (self.first_cpu, self.last_cpu) {
            (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
                (b1.saturating_sub(b0) as f64 / (t1 - t0) as f64 * 100.0).clamp(0.0, 100.0)
            }
            _ => 0.0,
        };
        let n = f64::from(self.samples);
        Some(Utilization {
            cpu_percent,
            ram_percent: self.ram_percent_sum / n,
            ram_used_gib: self.ram_used_sum / n,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's `/proc/meminfo` (kB), by hand with psutil's formulas:
    /// available 23467972 of 24683652 → (24683652 − 23467972) / 24683652 = 4.9251 %;
    /// used = 24683652 − 21446316 − (2177884 + 99576) − 17360 = 942516 kB = 0.898853 GiB.
    #[test]
    fn mem_usage_as_psutil_computes_it() {
        let text = "MemTotal:       24683652 kB\nMemFree:        21446316 kB\n\
                    MemAvailable:   23467972 kB\nBuffers:           17360 kB\n\
                    Cached:          2177884 kB\nSwapCached:            0 kB\n\
                    SReclaimable:      99576 kB\n";
        let m = parse_mem_usage(text).unwrap();
        assert!((m.percent - 4.92508).abs() < 1e-4, "{m:?}");
        assert!((m.used_gib - 942516.0 / 1048576.0).abs() < 1e-12, "{m:?}");
        assert!(parse_mem_usage("MemFree: 1 kB\n").is_none());
    }

    /// user nice system idle iowait irq softirq steal guest guest_nice: busy excludes idle and
    /// iowait; guest is already in user. 100+0+50+800+50+0+0+0 = 1000 total, 150 busy.
    #[test]
    fn cpu_ticks_as_psutil_counts_them() {
        let stat = "cpu  100 0 50 800 50 0 0 0 30 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n";
        assert_eq!(parse_cpu_ticks(stat), Some((150, 1000)));
        assert_eq!(parse_cpu_ticks("intr 1 2\n"), None);
    }

    /// Two CPU readings 1000 ticks apart with 250 busy: 25 %; RAM the mean of its samples.
    #[test]
    fn tally_means() {
        let mut t = Tally::default();
        assert_eq!(t.utilization(), None);
        let mem = |p, g| {
            Some(MemUsage {
                percent: p,
                used_gib: g,
            })
        };
        t.add(Some((150, 1000)), mem(10.0, 2.0));
        t.add(Some((300, 1600)), mem(20.0, 3.0));
        t.add(Some((400, 2000)), mem(30.0, 7.0));
        let u = t.utilization().unwrap();
        assert!((u.cpu_percent - 25.0).abs() < 1e-12);
        assert!((u.ram_percent - 20.0).abs() < 1e-12);
        assert!((u.ram_used_gib - 4.0).abs() < 1e-12);
    }
}

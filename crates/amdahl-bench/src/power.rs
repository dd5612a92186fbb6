//! Power in a steady state: at idle (a quiet window before any load) and under a load held for a
//! window, read from the same [`EnergyProbe`](crate::energy::EnergyProbe) as the per-case energy (RAPL for the CPU
//! benchmarks, NVML for `bench gpu`). A device profile stores these as `power.idle_w`,
//! `power.compute_w` and `power.memory_w`; without a readable counter the status says why and no
//! number is made up.

use crate::Hooks;
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use std::time::{Duration, Instant};

/// How long idle power is read, and how long `bench gpu` holds each power load. Two seconds
/// cover two of the 1 s averaging windows of NVML's power reading on Ampere (but GA100) and
/// newer GPUs (NVML API reference, `nvmlDeviceGetPowerUsage`: "power averaged over 1 sec
/// interval") and
/// about 20 updates of its energy counter, which advances about every 100 ms (ML.ENERGY blog,
/// "Thermally Stable Profiling for Accurate GPU Energy Measurement"), so one update's
/// quantisation is at most 5 %; RAPL updates about every millisecond (Hähnel et al. 2012, see
/// [`crate::energy::MIN_INTERVAL`]), 2,000 updates. `--power-window` changes it.
pub const POWER_WINDOW: Duration = Duration::from_secs(2);

/// Power over one window, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PowerStatus {
    /// Average power over `seconds`: the counters' energy over the window / its length.
    Measured {
        watts: f64,
        seconds: f64,
        /// What ran: `idle`, `bf16 GEMM n=8192`, `device-to-device copy of 1024 MiB`.
        during: String,
        /// The counters read (`intel-rapl:0 package-0 (counter) + …`, `gpu:0 … (counter)`).
        source: String,
    },
    NotMeasured {
        reason: String,
    },
}

impl Default for PowerStatus {
    /// A report saved before power was measured.
    fn default() -> Self {
        PowerStatus::NotMeasured {
            reason: "not measured by this version of the benchmark".into(),
        }
    }
}

impl PowerStatus {
    pub fn not_measured(reason: impl Into<String>) -> Self {
        PowerStatus::NotMeasured {
            reason: reason.into(),
        }
    }

    /// The average power, where measured.
    pub fn watts(&self) -> Option<f64> {
        match self {
            PowerStatus::Measured { watts, .. } => Some(*watts),
            PowerStatus::NotMeasured { .. } => None,
        }
    }

    /// "`idle` 31.2 W over 2.00 s" or "not measured: why", for notes and tables.
    pub fn describe(&self) -> String {
        match self {
            PowerStatus::Measured {
                watts,
                seconds,
                during,
                source,
            } => format!("{during}: {watts:.1} W over {seconds:.2} s ({source})"),
            PowerStatus::NotMeasured { reason } => format!("not measured: {reason}"),
        }
    }

    /// From `joules` over `seconds`: no number unless both are positive and finite.
    pub fn from_energy(
        joules: Option<f64>,
        seconds: f64,
        during: &str,
        source: String,
        reason: impl FnOnce() -> String,
    ) -> Self {
        match joules {
            Some(j) if j > 0.0 && j.is_finite() && seconds > 0.0 && seconds.is_finite() => {
                PowerStatus::Measured {
                    watts: j / seconds,
                    seconds,
                    during: during.into(),
                    source,
                }
            }
            _ => PowerStatus::not_measured(reason()),
        }
    }
}

/// Said when the window is 0.
pub const WINDOW_ZERO: &str = "power window of 0 s (--power-window 0)";

impl Hooks<'_> {
    /// Run `work` repeatedly until `window` has passed (at least once), with the energy probe
    /// around it, and give the average power. No work runs when the probe cannot measure or the
    /// window is 0: the status says why instead. `work` must leave nothing in flight when it
    /// returns (a GPU load synchronises), so the energy belongs to the window.
    pub fn power_during<E>(
        &mut self,
        during: &str,
        window: Duration,
        mut work: impl FnMut() -> Result<(), E>,
    ) -> Result<PowerStatus, E> {
        if window.is_zero() {
            return Ok(PowerStatus::not_measured(WINDOW_ZERO));
        }
        if !self.energy.measures() {
            return Ok(PowerStatus::not_measured(self.energy.reason_unmeasured()));
        }
        // Each end of the window is the midpoint of its counter read, which can take a while
        // (a busy machine can deschedule the thread inside it): the energy and the time then
        // cover the same interval to within half of each read.
        let before_start = Instant::now();
        self.energy.start();
        let started = Instant::now();
        loop {
            work()?;
            if started.elapsed() >= window {
                break;
            }
        }
        let before_stop = Instant::now();
        let joules = self.energy.stop();
        let stopped = Instant::now();
        let seconds = ((before_stop - before_start) + (stopped - started)).as_secs_f64() / 2.0;
        let source = self.energy.source();
        let probe = &self.energy;
        Ok(PowerStatus::from_energy(
            joules.map(|j| j.0),
            seconds,
            during,
            source,
            || probe.reason_unmeasured(),
        ))
    }

    /// Idle power: the probe read across `window` of doing nothing (before the loads). Nothing
    /// is waited for where no counter is readable.
    pub fn idle_power(&mut self, window: Duration) -> PowerStatus {
        match self.power_during("idle", window, || {
            std::thread::sleep(window);
            Ok::<(), Infallible>(())
        }) {
            Ok(s) => s,
            Err(never) => match never {},
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::energy::{EnergyProbe, MeterProbe, ESTIMATE_ONLY};
    use amdahl_meter::rapl::{fake, FileReader};
    use amdahl_meter::EnergySource;
    use amdahl_model::units::{Joules, Watts};
    use std::path::Path;
    use std::sync::Arc;

    /// A reader over a fake powercap tree whose `energy_uj` advances at `watts` in real time
    /// since the reader was made, as a RAPL counter under a constant load does.
    fn at_rate(watts: f64) -> FileReader {
        let t0 = Instant::now();
        Arc::new(move |p: &Path| {
            let text = std::fs::read_to_string(p)?;
            if p.file_name().is_some_and(|n| n == "energy_uj") {
                let base: u64 = text.trim().parse().unwrap_or(0);
                let uj = base + (watts * 1e6 * t0.elapsed().as_secs_f64()) as u64;
                return Ok(format!("{uj}\n"));
            }
            Ok(text)
        })
    }

    fn rapl_sources(root: &Path, reader: FileReader) -> Vec<Box<dyn EnergySource>> {
        amdahl_meter::sensors::discover(amdahl_meter::sensors::Options {
            powercap_root: root.to_path_buf(),
            reader,
            cpu_tdp: Some(Watts(100.0)),
            gpus: false,
            visible: amdahl_meter::gpu::Visible::All,
            hwmon_root: root.join("no-hwmon"),
            amd_visible: amdahl_meter::hwmon::AmdVisible::all(),
            amd_smi: false,
            target: amdahl_meter::estimate::Target::Machine,
        })
        .sources
    }

    fn package(root: &Path) {
        fake::zone(
            root,
            "intel-rapl:0",
            "package-0",
            5_000_000,
            262_143_328_850,
        )
        .unwrap();
    }

    #[test]
    fn idle_power_is_the_counter_rate_over_the_window() {
        let t = tempfile::tempdir().unwrap();
        package(t.path());
        let probe = MeterProbe::new(rapl_sources(t.path(), at_rate(30.0)));
        let mut h = Hooks::default().with_energy(probe);
        let window = Duration::from_millis(500);
        let s = h.idle_power(window);
        let PowerStatus::Measured {
            watts,
            seconds,
            during,
            source,
        } = &s
        else {
            panic!("{s:?}");
        };
        // 30 J/s on the counter: 30 W, to within the time between a counter read and the clock
        // read that bound the window (microseconds; 2 % leaves room for a busy machine).
        assert!((watts - 30.0).abs() < 0.6, "{watts}");
        assert!(*seconds >= window.as_secs_f64(), "{seconds}");
        assert_eq!(during, "idle");
        assert!(
            source.starts_with("intel-rapl:0 package-0 (counter)"),
            "{source}"
        );
        assert_eq!(s.watts(), Some(*watts));
    }

    #[test]
    fn a_load_is_held_for_the_window_and_its_errors_pass_through() {
        let t = tempfile::tempdir().unwrap();
        package(t.path());
        let probe = MeterProbe::new(rapl_sources(t.path(), at_rate(120.0)));
        let mut h = Hooks::default().with_energy(probe);
        let mut runs = 0;
        let s = h
            .power_during("fp32 GEMM n=64", Duration::from_millis(100), || {
                runs += 1;
                std::thread::sleep(Duration::from_millis(10));
                Ok::<(), String>(())
            })
            .unwrap();
        assert!(runs >= 10, "{runs}");
        assert!((s.watts().unwrap() - 120.0).abs() < 2.4, "{s:?}");
        let e = h.power_during("x", Duration::from_millis(50), || Err("broken".to_string()));
        assert_eq!(e, Err("broken".to_string()));
    }

    #[test]
    fn without_a_counter_nothing_is_waited_for_and_no_number_is_made() {
        // An empty powercap root: the meter can only estimate.
        let t = tempfile::tempdir().unwrap();
        let probe = MeterProbe::new(rapl_sources(t.path(), amdahl_meter::rapl::fs_reader()));
        let mut h = Hooks::default().with_energy(probe);
        let started = Instant::now();
        let s = h.idle_power(Duration::from_secs(30));
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(s, PowerStatus::not_measured(ESTIMATE_ONLY));
        assert_eq!(s.watts(), None);
        // The default hooks have no probe at all.
        let s = Hooks::default().idle_power(Duration::from_secs(30));
        assert_eq!(
            s,
            PowerStatus::not_measured("no energy sensor wired to the benchmark")
        );
        // A window of 0 measures nothing, even with a counter.
        package(t.path());
        let probe = MeterProbe::new(rapl_sources(t.path(), at_rate(30.0)));
        let s = Hooks::default()
            .with_energy(probe)
            .idle_power(Duration::ZERO);
        assert_eq!(s, PowerStatus::not_measured(WINDOW_ZERO));
    }

    /// A counter that reads but does not move (a frozen zone) gives no number, not 0 W.
    #[test]
    fn a_frozen_counter_is_not_zero_watts() {
        struct Frozen;
        impl EnergyProbe for Frozen {
            fn source(&self) -> String {
                "frozen".into()
            }
            fn reason_unmeasured(&self) -> String {
                "frozen read no energy".into()
            }
            fn start(&mut self) {}
            fn stop(&mut self) -> Option<Joules> {
                None
            }
        }
        let s = Hooks::default()
            .with_energy(Frozen)
            .idle_power(Duration::from_millis(20));
        assert_eq!(s, PowerStatus::not_measured("frozen read no energy"));
        let zero = PowerStatus::from_energy(Some(0.0), 1.0, "idle", "x".into(), || "0 J".into());
        assert_eq!(zero, PowerStatus::not_measured("0 J"));
    }
}

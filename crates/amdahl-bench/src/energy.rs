//! Energy per benchmark. The sensors live in `amdahl-meter`; a benchmark sees them through
//! [`EnergyProbe`], and [`MeterProbe`] is the probe over a meter's sources. Without a measured
//! sensor every energy field is `None`, rendered as "not measured" with the reason — never a
//! made-up number.

use amdahl_meter::record::{in_total, total_energy};
use amdahl_meter::{DeviceEnergy, DeviceKind, EnergySource, Meter, Method};
use amdahl_model::units::Joules;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// Something that can measure the energy used between `start` and `stop` (RAPL, NVML, ...).
pub trait EnergyProbe {
    /// Which sensor this is, recorded next to every reading ("intel-rapl:0 package-0 (counter)").
    fn source(&self) -> String;
    /// Why readings are missing: the probe cannot measure at all, or the latest `stop` that
    /// gave `None`. Printed as `not measured (<reason>)`.
    fn reason_unmeasured(&self) -> String;
    /// Whether any reading can come at all (false: every `stop` is `None`), so a caller can skip
    /// a wait that could only end in "not measured" (the idle window).
    fn measures(&self) -> bool {
        true
    }
    /// Begin an interval.
    fn start(&mut self);
    /// End the interval: joules used since `start`, or `None` when nothing was measured.
    fn stop(&mut self) -> Option<Joules>;
}

/// The default probe: measures nothing, so every energy field stays `None`.
pub struct NoProbe;

impl EnergyProbe for NoProbe {
    fn source(&self) -> String {
        "none".into()
    }
    fn reason_unmeasured(&self) -> String {
        "no energy sensor wired to the benchmark".into()
    }
    fn measures(&self) -> bool {
        false
    }
    fn start(&mut self) {}
    fn stop(&mut self) -> Option<Joules> {
        None
    }
}

/// What a report says about its energy columns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum EnergyStatus {
    /// Readings come from these sensors; `missing` says which cases have none, and why.
    Measured {
        source: String,
        missing: Option<String>,
    },
    /// No reading, and why ("estimate only: CPU time × TDP share").
    NotMeasured { reason: String },
}

impl EnergyStatus {
    /// From a probe after a run in which `measured` of `cases` cases got a reading.
    pub fn of(probe: &dyn EnergyProbe, measured: usize, cases: usize) -> Self {
        if measured == 0 {
            return EnergyStatus::NotMeasured {
                reason: probe.reason_unmeasured(),
            };
        }
        EnergyStatus::Measured {
            source: probe.source(),
            missing: (measured < cases).then(|| {
                format!(
                    "{} of {cases} cases not measured: {}",
                    cases - measured,
                    probe.reason_unmeasured()
                )
            }),
        }
    }

    pub fn is_measured(&self) -> bool {
        matches!(self, EnergyStatus::Measured { .. })
    }
}

/// Energy of one benchmark case, per run and per unit of work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EnergyReading {
    pub source: String,
    /// Joules per run of the kernel (the interval's energy divided by the repeats).
    pub joules_per_run: Joules,
    /// Joules per unit of work: per FLOP (GEMM), per OP (int8) or per byte (STREAM).
    pub joules_per_unit: f64,
    /// "J/FLOP", "J/OP" or "J/B".
    pub unit: String,
    /// Seconds between the two counter readings (the timed repeats): the interval's average
    /// power is `joules_per_run` × runs / `interval_s`. Absent in reports saved before it was
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<f64>,
}

impl EnergyReading {
    /// Build a reading from an interval total over `runs` runs of `work_per_run` units each.
    pub fn new(
        source: String,
        total: Option<Joules>,
        runs: usize,
        work_per_run: f64,
        unit: &str,
    ) -> Option<Self> {
        let total = total?;
        if runs == 0 || !total.0.is_finite() || total.0 < 0.0 {
            return None;
        }
        let per_run = total.0 / runs as f64;
        Some(Self {
            source,
            joules_per_run: Joules(per_run),
            joules_per_unit: per_run / work_per_run,
            unit: unit.to_string(),
            interval_s: None,
        })
    }

    /// The same reading, over an interval of `seconds`.
    pub fn over(mut self, seconds: f64) -> Self {
        self.interval_s = (seconds > 0.0 && seconds.is_finite()).then_some(seconds);
        self
    }

    /// Average power over the interval: the runs' joules over its length, where recorded.
    pub fn watts(&self, runs: usize) -> Option<f64> {
        let s = self.interval_s?;
        let w = self.joules_per_run.0 * runs as f64 / s;
        (w > 0.0 && w.is_finite()).then_some(w)
    }
}

/// Said of a meter with estimates only: a model of the machine, not a measurement of the kernel.
pub const ESTIMATE_ONLY: &str = "estimate only: CPU time × TDP share";

/// Shortest interval read from a counter. RAPL updates its energy counters about once per
/// millisecond (Hähnel, Döbel, Völp & Härtig, "Measuring energy consumption for short code paths
/// using RAPL", SIGMETRICS PER 40(3), 2012; Khan et al., "RAPL in Action", ACM TOMPECS 3(2),
/// 2018); ten updates keep the quantisation error of one update at or below 10 %.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// An [`EnergyProbe`] over an `amdahl-meter` [`Meter`]: one sample at `start`, one at `stop`, and
/// the energy of the devices that enter the machine total (psys replaces package and dram, as in
/// `amdahl run`). Only counters and integrated power count: estimated devices (CPU time × TDP
/// share, RAM by the DIMM rule) model the machine, not the kernel, so they are left out and named.
pub struct MeterProbe {
    meter: Meter,
    /// The estimated devices left out ("estimate:ram"), for the source description.
    estimated: Vec<String>,
    started: Option<Instant>,
    /// Why the latest interval without a reading had none.
    last_problem: Option<String>,
}

impl MeterProbe {
    /// Build from the sources `amdahl_meter::sensors::discover` chose; sources without a measured
    /// device are dropped (their readings would never be used).
    pub fn new(sources: Vec<Box<dyn EnergySource>>) -> Self {
        let mut estimated = Vec::new();
        let measured: Vec<Box<dyn EnergySource>> = sources
            .into_iter()
            .filter(|s| {
                let devs = s.devices();
                estimated.extend(
                    devs.iter()
                        .filter(|d| d.method == Method::Estimate)
                        .map(|d| d.id.clone()),
                );
                devs.iter().any(|d| d.method != Method::Estimate)
            })
            .collect();
        MeterProbe {
            meter: Meter::new(measured),
            estimated,
            started: None,
            last_problem: None,
        }
    }

    /// The measured devices that enter the total, as (id, name, method).
    fn counted(&self) -> Vec<(String, String, Method)> {
        let infos = self.meter.device_infos();
        let psys = infos.iter().any(|d| d.kind == DeviceKind::Psys);
        infos
            .into_iter()
            .filter(|d| d.method != Method::Estimate && in_total(d.kind, psys))
            .map(|d| (d.id, d.name, d.method))
            .collect()
    }

    /// Whether any sensor can measure (false: estimates only).
    pub fn measures(&self) -> bool {
        !self.counted().is_empty()
    }
}

impl EnergyProbe for MeterProbe {
    fn source(&self) -> String {
        let mut s = self
            .counted()
            .iter()
            .map(|(id, name, m)| format!("{id} {name} ({})", m.as_str()))
            .collect::<Vec<_>>()
            .join(" + ");
        if !self.estimated.is_empty() {
            s.push_str(&format!(
                "; left out ({ESTIMATE_ONLY}): {}",
                self.estimated.join(", ")
            ));
        }
        s
    }

    fn measures(&self) -> bool {
        MeterProbe::measures(self)
    }

    fn reason_unmeasured(&self) -> String {
        if !self.measures() {
            return ESTIMATE_ONLY.into();
        }
        self.last_problem
            .clone()
            .unwrap_or_else(|| "the energy counters were not read".into())
    }

    fn start(&mut self) {
        self.meter.reset();
        self.meter.sample();
        self.started = Some(Instant::now());
    }

    fn stop(&mut self) -> Option<Joules> {
        if !self.measures() {
            return None;
        }
        self.meter.sample();
        let elapsed = self.started.take().map(|t| t.elapsed());
        match self.interval_energy(elapsed) {
            Ok(j) => Some(j),
            Err(why) => {
                self.last_problem = Some(why);
                None
            }
        }
    }
}

impl MeterProbe {
    /// The energy of the devices in the total since `start`, or why there is no number.
    fn interval_energy(&self, elapsed: Option<Duration>) -> Result<Joules, String> {
        match elapsed {
            None => return Err("stop without start".into()),
            Some(d) if d < MIN_INTERVAL => {
                return Err(format!(
                    "the timed runs took {:.2} ms, under the {} ms needed to read the energy \
                     counters (RAPL updates about every 1 ms): pass more --repeats or larger --sizes",
                    d.as_secs_f64() * 1e3,
                    MIN_INTERVAL.as_millis()
                ))
            }
            Some(_) => {}
        }
        // Sources with estimates only were dropped; drop any estimated device of a mixed one.
        let energies: Vec<DeviceEnergy> = self
            .meter
            .energies()
            .into_iter()
            .filter(|d| d.method != Method::Estimate)
            .collect();
        let psys = energies.iter().any(|d| d.kind == DeviceKind::Psys);
        // A counter that did not move, or a device lost mid-run: no number rather than 0 J.
        if let Some(d) = energies
            .iter()
            .filter(|d| in_total(d.kind, psys))
            .find(|d| d.energy_j.get().is_nan() || d.energy_j.get() <= 0.0)
        {
            return Err(format!(
                "{} ({}) read no energy over the interval{}",
                d.id,
                d.name,
                d.note
                    .as_ref()
                    .map(|n| format!(": {n}"))
                    .unwrap_or_default()
            ));
        }
        Ok(total_energy(&energies))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdahl_meter::estimate::{EstimateSource, Target};
    use amdahl_meter::rapl::{self, fake, FileReader};
    use amdahl_model::units::Watts;
    use std::path::Path;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn no_probe_gives_no_reading() {
        let mut p = NoProbe;
        p.start();
        assert!(EnergyReading::new(p.source(), p.stop(), 3, 1e9, "J/FLOP").is_none());
        assert_eq!(
            EnergyStatus::of(&p, 0, 3),
            EnergyStatus::NotMeasured {
                reason: "no energy sensor wired to the benchmark".into()
            }
        );
    }

    #[test]
    fn reading_divides_by_runs_and_work() {
        let r = EnergyReading::new("fake".into(), Some(Joules(6.0)), 3, 1e9, "J/FLOP").unwrap();
        assert_eq!(r.joules_per_run, Joules(2.0));
        assert!((r.joules_per_unit - 2e-9).abs() < 1e-24);
    }

    /// A reader over a real fake tree whose `energy_uj` files advance by `step` µJ at every read,
    /// so each start/stop interval sees an exactly known counter delta.
    fn advancing(step: u64) -> FileReader {
        let reads = Arc::new(AtomicU64::new(0));
        Arc::new(move |p: &Path| {
            let text = std::fs::read_to_string(p)?;
            if p.file_name().is_some_and(|n| n == "energy_uj") {
                let k = reads.fetch_add(1, Ordering::SeqCst);
                let base: u64 = text.trim().parse().unwrap_or(0);
                return Ok(format!("{}\n", base + k * step));
            }
            Ok(text)
        })
    }

    fn sources(root: &Path, reader: FileReader) -> Vec<Box<dyn EnergySource>> {
        amdahl_meter::sensors::discover(amdahl_meter::sensors::Options {
            powercap_root: root.to_path_buf(),
            reader,
            cpu_tdp: Some(Watts(100.0)),
            gpus: false,
            visible: amdahl_meter::gpu::Visible::All,
            hwmon_root: root.join("no-hwmon"),
            amd_visible: amdahl_meter::hwmon::AmdVisible::all(),
            amd_smi: false,
            target: Target::Machine,
        })
        .sources
    }

    /// package-0 only (no dram zone): the reader adds 3 J per read of the one counter, so one
    /// start/stop interval is exactly 3 J; the RAM estimate the meter adds is left out and named.
    #[test]
    fn meter_probe_reports_the_counter_delta() {
        let t = tempfile::tempdir().unwrap();
        fake::zone(
            t.path(),
            "intel-rapl:0",
            "package-0",
            1_000_000,
            262_143_328_850,
        )
        .unwrap();
        let mut p = MeterProbe::new(sources(t.path(), advancing(3_000_000)));
        assert!(p.measures());
        assert_eq!(
            p.source(),
            format!("intel-rapl:0 package-0 (counter); left out ({ESTIMATE_ONLY}): estimate:ram")
        );
        p.start();
        std::thread::sleep(MIN_INTERVAL + Duration::from_millis(2));
        assert_eq!(p.stop(), Some(Joules(3.0)));
        // Too short an interval: no number, and the reason says how to fix it.
        p.start();
        assert_eq!(p.stop(), None);
        assert!(
            p.reason_unmeasured().contains("--repeats"),
            "{}",
            p.reason_unmeasured()
        );
    }

    /// Package and dram both count (dram is outside the package); with psys only psys counts.
    #[test]
    fn meter_probe_sums_the_devices_in_the_total() {
        let t = tempfile::tempdir().unwrap();
        fake::standard(t.path()).unwrap();
        let mut p = MeterProbe::new(sources(t.path(), advancing(1_000_000)));
        p.start();
        std::thread::sleep(MIN_INTERVAL + Duration::from_millis(2));
        // Each of package-0 and dram is read once per sample; the shared read count advances
        // by 2 per sample, so each counter moves 2 J between start and stop: 4 J in all.
        assert_eq!(p.stop(), Some(Joules(4.0)));

        fake::zone(t.path(), "intel-rapl:1", "psys", 5_000_000, 262_143_328_850).unwrap();
        let mut p = MeterProbe::new(sources(t.path(), advancing(1_000_000)));
        assert_eq!(p.source(), "intel-rapl:1 psys (counter)");
        p.start();
        std::thread::sleep(MIN_INTERVAL + Duration::from_millis(2));
        // Three counters read per sample: psys moves 3 J.
        assert_eq!(p.stop(), Some(Joules(3.0)));
    }

    #[test]
    fn a_counter_that_does_not_move_is_not_zero_joules() {
        let t = tempfile::tempdir().unwrap();
        fake::standard(t.path()).unwrap();
        let mut p = MeterProbe::new(sources(t.path(), rapl::fs_reader()));
        p.start();
        std::thread::sleep(MIN_INTERVAL + Duration::from_millis(2));
        assert_eq!(p.stop(), None);
        assert!(
            p.reason_unmeasured()
                .starts_with("intel-rapl:0 (package-0) read no energy"),
            "{}",
            p.reason_unmeasured()
        );
    }

    #[test]
    fn estimates_alone_are_not_measured() {
        let t = tempfile::tempdir().unwrap();
        let mut p = MeterProbe::new(sources(t.path(), rapl::fs_reader()));
        assert!(!p.measures());
        p.start();
        assert_eq!(p.stop(), None);
        assert_eq!(p.reason_unmeasured(), ESTIMATE_ONLY);
        assert_eq!(
            EnergyStatus::of(&p, 0, 3),
            EnergyStatus::NotMeasured {
                reason: "estimate only: CPU time × TDP share".into()
            }
        );
        // An estimate source on its own is dropped too.
        let p = MeterProbe::new(vec![Box::new(EstimateSource::new(
            Target::Machine,
            Some(Watts(10.0)),
            true,
        ))]);
        assert!(!p.measures());
    }
}

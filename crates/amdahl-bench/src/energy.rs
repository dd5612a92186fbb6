//! Energy per benchmark: a hook, not a sensor. The sensors live in `amdahl-meter`; the binary
//! passes one in through [`EnergyProbe`]. Without one every energy field is `None`, rendered as
//! "not measured" — never a made-up number.

use amdahl_model::units::Joules;
use serde::{Deserialize, Serialize};

/// Something that can measure the energy used between `start` and `stop` (RAPL, NVML, ...).
pub trait EnergyProbe {
    /// Which sensor this is, recorded next to every reading ("rapl:package-0").
    fn source(&self) -> String;
    /// Begin an interval.
    fn start(&mut self);
    /// End the interval: joules used since `start`, or `None` when the sensor could not read.
    fn stop(&mut self) -> Option<Joules>;
}

/// The default probe: measures nothing, so every energy field stays `None`.
pub struct NoProbe;

impl EnergyProbe for NoProbe {
    fn source(&self) -> String {
        "none".into()
    }
    fn start(&mut self) {}
    fn stop(&mut self) -> Option<Joules> {
        None
    }
}

/// Energy of one benchmark case, per run and per unit of work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergyReading {
    pub source: String,
    /// Joules per run of the kernel (the interval's energy divided by the repeats).
    pub joules_per_run: Joules,
    /// Joules per unit of work: per FLOP (GEMM), per OP (int8) or per byte (STREAM).
    pub joules_per_unit: f64,
    /// "J/FLOP", "J/OP" or "J/B".
    pub unit: String,
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
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_probe_gives_no_reading() {
        let mut p = NoProbe;
        p.start();
        assert!(EnergyReading::new(p.source(), p.stop(), 3, 1e9, "J/FLOP").is_none());
    }

    #[test]
    fn reading_divides_by_runs_and_work() {
        let r = EnergyReading::new("fake".into(), Some(Joules(6.0)), 3, 1e9, "J/FLOP").unwrap();
        assert_eq!(r.joules_per_run, Joules(2.0));
        assert!((r.joules_per_unit - 2e-9).abs() < 1e-24);
    }
}

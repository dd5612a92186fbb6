//! IT energy of a job: devices × power × time, or a measured total; and the time a compute budget
//! takes at an achieved fraction of peak.

use super::{fraction, positive, CarbonError};
use crate::units::{Flops, FlopsPerSecond, Joules, Seconds, Watts};
use serde::{Deserialize, Serialize};

/// Whether the energy was measured (sensors) or estimated (power × time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    Measured,
    Estimated,
}

impl Basis {
    pub fn name(self) -> &'static str {
        match self {
            Basis::Measured => "measured",
            Basis::Estimated => "estimated",
        }
    }
}

/// Energy drawn by the IT equipment (before facility overhead).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ItEnergy {
    pub energy: Joules,
    /// Wall-clock duration of the job.
    pub duration: Seconds,
    /// Devices working in parallel (`None` for a measured total of unknown hardware).
    pub count: Option<u32>,
    /// Average power per device, when the energy was estimated from it.
    pub power_per_device: Option<Watts>,
    pub basis: Basis,
    /// How the figure was obtained, in words ("330 W average per device, given").
    pub method: String,
    /// A prediction (a plan, or a time derived from FLOPs) rather than a job that ran: the
    /// statement then says "would".
    pub predicted: bool,
    /// What a reader must know before citing the figures (a failed or interrupted run).
    pub caveats: Vec<String>,
}

impl ItEnergy {
    /// E = N × P × t: `count` devices drawing `power` each for `duration` (Patterson et al. 2021,
    /// Eq. 1 without the PUE factor, which [`super::estimate()`] applies).
    pub fn from_power(
        count: u32,
        duration: Seconds,
        power: Watts,
        method: impl Into<String>,
    ) -> Result<Self, CarbonError> {
        positive("device count", f64::from(count))?;
        positive("duration", duration.get())?;
        positive("power per device", power.get())?;
        Ok(Self {
            energy: power * duration * f64::from(count),
            duration,
            count: Some(count),
            power_per_device: Some(power),
            basis: Basis::Estimated,
            method: method.into(),
            predicted: false,
            caveats: Vec::new(),
        })
    }

    /// A measured total (e.g. RAPL + NVML over a run).
    pub fn measured(
        energy: Joules,
        duration: Seconds,
        method: impl Into<String>,
    ) -> Result<Self, CarbonError> {
        positive("measured energy", energy.get())?;
        positive("duration", duration.get())?;
        Ok(Self {
            energy,
            duration,
            count: None,
            power_per_device: None,
            basis: Basis::Measured,
            method: method.into(),
            predicted: false,
            caveats: Vec::new(),
        })
    }

    /// Device-hours (count × wall-clock hours), when the count is known.
    pub fn device_hours(&self) -> Option<f64> {
        self.count.map(|n| f64::from(n) * self.duration.hours())
    }
}

/// Training compute ≈ 6·P·D FLOPs, shared with the catalogs (see [`crate::flops`]).
pub use crate::flops::training_flops;

/// Wall-clock time of `flops` on `count` devices each sustaining `mfu` × `peak`:
/// t = F / (N · MFU · peak).
pub fn compute_duration(
    flops: Flops,
    count: u32,
    peak: FlopsPerSecond,
    mfu: f64,
) -> Result<Seconds, CarbonError> {
    positive("FLOP count", flops.get())?;
    positive("device count", f64::from(count))?;
    positive("device peak", peak.get())?;
    fraction("MFU", mfu)?;
    Ok(flops / (peak * (f64::from(count) * mfu)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt3_compute_path_matches_patterson() {
        // Patterson et al. 2021 Table 4: GPT-3 on 10,000 V100 for 14.8 days at 24.6 TFLOP/s
        // achieved of 125 peak. 6·175e9·300e9 = 3.15e23 FLOP. Within 10 % (the bound the carbon
        // accounting was specified with).
        let f = training_flops(175e9, 300e9);
        let t =
            compute_duration(f, 10_000, FlopsPerSecond::from_tflops(125.0), 24.6 / 125.0).unwrap();
        assert!((t.days() / 14.8 - 1.0).abs() < 0.10, "{} days", t.days());
        assert!((t.days() / 14.8 - 1.0).abs() < 0.01, "{} days", t.days());
    }

    #[test]
    fn rejects_nonsense() {
        assert!(ItEnergy::from_power(0, Seconds(1.0), Watts(1.0), "").is_err());
        assert!(ItEnergy::from_power(1, Seconds(-1.0), Watts(1.0), "").is_err());
        assert!(ItEnergy::from_power(1, Seconds(1.0), Watts(0.0), "").is_err());
        assert!(compute_duration(Flops(1.0), 1, FlopsPerSecond(1.0), 1.5).is_err());
        assert!(ItEnergy::measured(Joules(f64::NAN), Seconds(1.0), "").is_err());
    }

    proptest::proptest! {
        #[test]
        fn energy_is_linear_in_count(n in 1u32..10_000, h in 0.01f64..1e4, w in 1.0f64..2000.0) {
            let one = ItEnergy::from_power(1, Seconds::from_hours(h), Watts(w), "").unwrap();
            let many = ItEnergy::from_power(n, Seconds::from_hours(h), Watts(w), "").unwrap();
            let r = many.energy / one.energy;
            proptest::prop_assert!((r - f64::from(n)).abs() < 1e-9 * f64::from(n));
        }
    }
}

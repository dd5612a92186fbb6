//! The sensor abstraction: every energy source (RAPL powercap, NVML, CPU-time estimate, fakes)
//! lists its devices once and then returns one raw reading per device on each sample.

use crate::MeterError;
use amdahl_model::units::Watts;
use serde::{Deserialize, Serialize};

/// How a device's energy was obtained. Every output row states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Differences of a hardware energy counter (RAPL `energy_uj`, NVML total energy).
    Counter,
    /// Power readings integrated over time (trapezoid rule): less exact between samples.
    IntegratedPower,
    /// A model: CPU time × per-core TDP share, RAM size × a per-DIMM power (CodeCarbon 3.3.2). Not a measurement.
    Estimate,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Counter => "counter",
            Method::IntegratedPower => "integrated-power",
            Method::Estimate => "estimate",
        }
    }
}

/// What part of the machine a device covers; decides how it enters totals and CSV columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceKind {
    /// A CPU socket (RAPL `package-N`; already contains its cores and uncore).
    CpuPackage,
    /// DRAM attached to a socket (RAPL `dram`).
    Dram,
    /// The whole platform (RAPL `psys`): covers packages and more, so they leave the total.
    Psys,
    /// An NVIDIA GPU.
    Gpu,
    /// Estimated CPU energy.
    Cpu,
    /// Estimated RAM energy.
    Ram,
}

impl DeviceKind {
    /// A bound no device of this kind draws, used to reject impossible counter steps (see
    /// `accum`). About twice the largest shipping part, so no real reading comes near it:
    /// CPU packages top out at 500 W TDP (AMD EPYC 9965, Intel Xeon 6980P); DRAM of one socket
    /// (12 channels × 2 DIMMs at ~15 W) stays under 400 W; a psys zone covers a whole platform;
    /// the largest GPU module is 2700 W (NVIDIA GB200 superchip). None for estimates.
    pub fn plausible_max_power(self) -> Option<Watts> {
        match self {
            DeviceKind::CpuPackage | DeviceKind::Dram => Some(Watts(1000.0)),
            DeviceKind::Psys => Some(Watts(10_000.0)),
            DeviceKind::Gpu => Some(Watts(6000.0)),
            DeviceKind::Cpu | DeviceKind::Ram => None,
        }
    }
}

/// A device as a source describes it once, before sampling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceInfo {
    /// Stable id, e.g. `intel-rapl:0`, `gpu:0`, `estimate:cpu`.
    pub id: String,
    pub kind: DeviceKind,
    /// Human name, e.g. `package-0`, `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// The method used while the device reads normally.
    pub method: Method,
}

/// One raw reading. Counters stay integers until the wrap-around is handled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Raw {
    Counter {
        value: u64,
        /// Counter units per joule: 1e6 for RAPL µJ, 1e3 for NVML mJ. A divisor, so integer
        /// deltas convert with one correctly rounded division (5_000_000 µJ is exactly 5 J).
        units_per_joule: f64,
        /// The counter wraps to 0 after this value (RAPL `max_energy_range_uj`); None: never.
        max: Option<u64>,
        /// A power reading taken alongside, integrated as a fallback if the counter never moves.
        power: Option<Watts>,
    },
    Power(Watts),
}

/// A sensor. `read` returns exactly one entry per device of `devices`, in the same order; an
/// `Err` entry means that device could not be read this time (it vanished, permission lost).
pub trait EnergySource: Send {
    fn devices(&self) -> Vec<DeviceInfo>;
    fn read(&mut self) -> Vec<Result<Raw, MeterError>>;
    /// For each device (same order as `devices`; missing entries: None), the estimate charged
    /// for intervals it cannot measure. Sources without one leave such intervals out and say so.
    fn fallbacks(&self) -> Vec<Option<crate::accum::Fallback>> {
        Vec::new()
    }
}

//! Time, device-hours, energy and carbon to train on D tokens.
//!
//! Power: the shared power model ([`crate::power`]) over the step's activity (busy share, HFU,
//! memory-bound share). Facility energy = IT energy × PUE; emissions = kWh × PUE × gCO2e/kWh.

use super::hardware::Hardware;
use super::perf::Estimate;
use crate::units::{GramsCo2e, GramsPerKwh, Joules, Seconds, Watts};
use serde::{Deserialize, Serialize};

/// What the cost depends on beyond the estimate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CostInputs {
    /// Training tokens D.
    pub tokens: f64,
    pub pue: f64,
    pub intensity: GramsPerKwh,
    /// Price of one device-hour, in the user's currency; `None` = report device-hours only.
    pub price_per_device_hour: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cost {
    pub tokens: f64,
    pub steps: f64,
    pub train_time: Seconds,
    pub device_hours: f64,
    pub power_per_device: Watts,
    pub it_energy: Joules,
    pub facility_energy: Joules,
    pub pue: f64,
    pub intensity: GramsPerKwh,
    pub emissions: GramsCo2e,
    pub price: Option<f64>,
    /// The server (wall) scope, where the device's server is known: wall power per device with
    /// its share of the host, and the facility energy and emissions at that scope (× PUE).
    #[serde(default)]
    pub server_power_per_device: Option<Watts>,
    #[serde(default)]
    pub server_facility_energy: Option<Joules>,
    #[serde(default)]
    pub server_emissions: Option<GramsCo2e>,
}

pub fn cost(est: &Estimate, hw: &Hardware, inp: &CostInputs) -> Cost {
    let tokens_per_step = est.tokens_per_s * est.step_time.get();
    let steps = inp.tokens / tokens_per_step;
    let train_time = est.step_time * steps;
    let n = est.gpus as f64;
    let power = hw.power(&est.activity);
    let it_energy = power * train_time * n;
    let facility_energy = it_energy * inp.pue;
    let wall = hw.wall_power(power);
    let server_facility_energy = wall.map(|w| w * train_time * n * inp.pue);
    let device_hours = train_time.hours() * n;
    Cost {
        tokens: inp.tokens,
        steps,
        train_time,
        device_hours,
        power_per_device: power,
        it_energy,
        facility_energy,
        pue: inp.pue,
        intensity: inp.intensity,
        emissions: facility_energy * inp.intensity,
        price: inp.price_per_device_hour.map(|p| p * device_hours),
        server_power_per_device: wall,
        server_facility_energy,
        server_emissions: server_facility_energy.map(|e| e * inp.intensity),
    }
}

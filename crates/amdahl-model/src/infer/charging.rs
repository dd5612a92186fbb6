//! The facility and grid that serving energy is charged to. A leaf of `infer`: the search and
//! the results both use it, and neither imports the other for it.

use crate::catalog::grid::GridIntensity;
use crate::units::{GramsPerKwh, Joules};
use serde::{Deserialize, Serialize};

/// Facility and grid the energy is charged to: the PUE and intensity `amdahl carbon` resolves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Charging {
    pub pue: f64,
    pub pue_source: String,
    pub grid: GridIntensity,
}

impl Charging {
    /// gCO2e of `it_energy` joules at the devices: kWh × PUE × gCO2e/kWh.
    pub fn co2e_g(&self, it_energy: f64) -> f64 {
        (Joules(it_energy * self.pue) * self.grid.g_per_kwh).get()
    }

    pub fn intensity(&self) -> GramsPerKwh {
        self.grid.g_per_kwh
    }
}

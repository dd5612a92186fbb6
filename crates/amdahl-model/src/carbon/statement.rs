//! The data of an energy/carbon statement a paper can paste: hardware, time, energy, PUE, intensity
//! with source and year, emissions, and whether the energy was measured or estimated. Rendering
//! (Markdown, LaTeX, JSON) lives in `amdahl-report`.

use super::{Basis, CarbonReport};
use serde::Serialize;

/// The `schema` of `amdahl carbon --statement json`.
pub const SCHEMA: &str = "amdahl.statement/1";

/// Everything a statement says (`"schema": "amdahl.statement/1"`).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Statement {
    pub schema: &'static str,
    /// The device name, when known.
    pub device: Option<String>,
    /// How many devices, when known.
    pub count: Option<u32>,
    pub duration_hours: f64,
    pub device_hours: Option<f64>,
    pub basis: Basis,
    pub method: String,
    /// A prediction: the statement says "would".
    pub predicted: bool,
    /// Printed first: what a reader must know before citing (a failed or interrupted run).
    pub caveats: Vec<String>,
    pub it_energy_kwh: f64,
    pub pue: f64,
    pub pue_source: String,
    pub energy_kwh: f64,
    pub intensity_g_per_kwh: f64,
    pub intensity_region: String,
    pub intensity_year: Option<u16>,
    pub intensity_scope: &'static str,
    pub intensity_source: String,
    pub co2e_kg: f64,
    pub embodied_co2e_kg: Option<f64>,
    pub embodied_lifetime_years: Option<f64>,
}

impl Statement {
    pub fn from_report(r: &CarbonReport) -> Self {
        Self {
            schema: SCHEMA,
            device: r.device.clone(),
            count: r.count,
            duration_hours: r.duration_s / 3600.0,
            device_hours: r.device_hours,
            basis: r.basis,
            method: r.method.clone(),
            predicted: r.predicted,
            caveats: r.caveats.clone(),
            it_energy_kwh: r.it_energy_kwh,
            pue: r.pue.value,
            pue_source: r.pue.source.clone(),
            energy_kwh: r.energy_kwh,
            intensity_g_per_kwh: r.intensity.g_per_kwh.get(),
            intensity_region: r.intensity.name.clone(),
            intensity_year: r.intensity.year,
            intensity_scope: r.intensity.scope.name(),
            intensity_source: r.intensity.source.clone(),
            co2e_kg: r.co2e_kg,
            embodied_co2e_kg: r.embodied.as_ref().map(|e| e.co2e.kg()),
            embodied_lifetime_years: r.embodied.as_ref().map(|e| e.lifetime_years),
        }
    }
}

//! The estimate: facility energy = IT energy × PUE; operational CO2e = facility kWh × g/kWh
//! (Patterson et al. 2021, Eq. 1: tCO2e = MWh × tCO2e/MWh, with MWh = hours × processors × average
//! power × PUE); plus the embodied share and equivalents. [`CarbonReport`] is the `amdahl.carbon/1`
//! result every output format is rendered from.

use super::network::{Move, NetworkIntensity, Transfer};
use super::{Basis, CarbonError, Embodied, Equivalents, ItEnergy};
use crate::catalog::grid::{GridIntensity, GridScope};
use crate::units::{GramsCo2e, Joules};
use serde::{Deserialize, Serialize};

/// A PUE value and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pue {
    pub value: f64,
    pub source: String,
}

impl Pue {
    /// The largest PUE accepted: 3.0, the "very inefficient" end of the scale in The Green Grid,
    /// White Paper #6, *Green Grid Data Center Power Efficiency Metrics: PUE and DCiE* (2007),
    /// which rates 3.0 very inefficient, 2.5 inefficient, 2.0 average, 1.5 efficient and 1.2 very
    /// efficient. Survey averages sit near 1.6 (Uptime Institute Global Data Center Survey 2023:
    /// 1.58), so a larger figure is almost always a typo (150 for 1.5) rather than a facility.
    pub const MAX: f64 = 3.0;

    /// PUE must lie in [1, [`Pue::MAX`]] (facility energy includes the IT energy).
    pub fn new(value: f64, source: impl Into<String>) -> Result<Self, CarbonError> {
        if !value.is_finite() {
            return Err(CarbonError::NotPositive { what: "PUE", value });
        }
        if value < 1.0 {
            return Err(CarbonError::PueBelowOne(value));
        }
        if value > Self::MAX {
            return Err(CarbonError::PueAboveMax(value));
        }
        Ok(Self {
            value,
            source: source.into(),
        })
    }
}

/// The same job on another grid.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Comparison {
    pub intensity: GridIntensity,
    pub co2e_kg: f64,
    /// This grid's emissions ÷ the chosen grid's.
    /// `None` (JSON `null`) when the chosen grid's emissions are zero: no ratio exists.
    pub ratio: Option<f64>,
    /// With `--data-gb`: the job moved here, its data shipped from the chosen grid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved: Option<Move>,
}

/// The `schema` of an `amdahl carbon` result.
pub const SCHEMA: &str = "amdahl.carbon/1";

/// The result of `amdahl carbon` (`"schema": "amdahl.carbon/1"`).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CarbonReport {
    pub schema: &'static str,
    /// Measured or estimated energy.
    pub basis: Basis,
    /// How the IT energy was obtained, in words.
    pub method: String,
    /// A prediction rather than a job that ran (see [`ItEnergy::predicted`]).
    pub predicted: bool,
    /// What a reader must know before citing the figures (a failed or interrupted run).
    pub caveats: Vec<String>,
    pub device: Option<String>,
    pub count: Option<u32>,
    pub duration_s: f64,
    pub duration_days: f64,
    pub device_hours: Option<f64>,
    pub power_per_device_w: Option<f64>,
    /// IT energy (before facility overhead), kWh.
    pub it_energy_kwh: f64,
    pub pue: Pue,
    /// Facility energy = IT energy × PUE, kWh.
    pub energy_kwh: f64,
    pub intensity: GridIntensity,
    /// Operational emissions, kgCO2e.
    pub co2e_kg: f64,
    pub embodied: Option<Embodied>,
    pub embodied_co2e_kg: f64,
    /// Operational + embodied, kgCO2e.
    pub total_co2e_kg: f64,
    /// Equivalents of the total.
    pub equivalents: Equivalents,
    pub compare: Vec<Comparison>,
    /// With `--data-gb`: the data shipped to each `compare` site (charged to the chosen grid).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transfer: Option<Transfer>,
}

/// A note for the comparison table when the compared grids are not all of the chosen grid's scope:
/// a direct (combustion) figure leaves out the upstream emissions a life-cycle one counts, so their
/// ratio is not like for like (e.g. an EPA eGRID subregion against a country's life-cycle
/// average). Not a caveat of the estimate itself, which uses one grid.
pub fn mixed_scopes(grid: &GridIntensity, compare: &[GridIntensity]) -> Option<String> {
    let other: Vec<&str> = compare
        .iter()
        .filter(|c| c.scope != grid.scope)
        .map(|c| c.code.as_str())
        .collect();
    (!other.is_empty()).then(|| {
        let theirs = match grid.scope {
            GridScope::Direct => GridScope::Lifecycle,
            GridScope::Lifecycle => GridScope::Direct,
        };
        format!(
            "the chosen grid {} is {} but {} {} {}: direct figures count combustion only, \
             life-cycle ones add upstream emissions, so those ratios mix two bases",
            grid.code,
            grid.scope.name(),
            other.join(", "),
            if other.len() == 1 { "is" } else { "are" },
            theirs.name(),
        )
    })
}

/// Turn IT energy into facility energy and emissions on `grid`, with the same job on the
/// `compare` grids alongside.
pub fn estimate(
    it: &ItEnergy,
    device: Option<&str>,
    pue: Pue,
    grid: GridIntensity,
    embodied: Option<Embodied>,
    compare: Vec<GridIntensity>,
) -> CarbonReport {
    let facility: Joules = it.energy * pue.value;
    let operational: GramsCo2e = facility * grid.g_per_kwh;
    let embodied_g = embodied.as_ref().map(|e| e.co2e).unwrap_or(GramsCo2e::ZERO);
    let total = operational + embodied_g;
    let compare = compare
        .into_iter()
        .map(|g| {
            let c = facility * g.g_per_kwh;
            Comparison {
                intensity: g,
                co2e_kg: c.kg(),
                ratio: (operational.get() > 0.0).then(|| c / operational),
                moved: None,
            }
        })
        .collect();
    CarbonReport {
        schema: SCHEMA,
        basis: it.basis,
        method: it.method.clone(),
        predicted: it.predicted,
        caveats: it.caveats.clone(),
        device: device.map(String::from),
        count: it.count,
        duration_s: it.duration.get(),
        duration_days: it.duration.days(),
        device_hours: it.device_hours(),
        power_per_device_w: it.power_per_device.map(|w| w.get()),
        it_energy_kwh: it.energy.kwh(),
        energy_kwh: facility.kwh(),
        pue,
        intensity: grid,
        co2e_kg: operational.kg(),
        embodied_co2e_kg: embodied_g.kg(),
        embodied,
        total_co2e_kg: total.kg(),
        equivalents: Equivalents::of(total),
        compare,
        transfer: None,
    }
}

impl CarbonReport {
    /// Where to run: ship `data_gb` over `network` from the chosen grid to each `compare` site,
    /// charging the transfer to the chosen grid, and say whether moving the job still pays (see
    /// [`super::network`]).
    pub fn with_transfer(
        mut self,
        data_gb: f64,
        network: NetworkIntensity,
    ) -> Result<Self, CarbonError> {
        let origin = self.intensity.g_per_kwh;
        let t = Transfer::new(data_gb, network, &self.intensity.code, origin)?;
        let facility = Joules::from_kwh(self.energy_kwh);
        for c in &mut self.compare {
            c.moved = Some(Move::of(facility, origin, c.intensity.g_per_kwh, &t));
        }
        self.transfer = Some(t);
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::grid::GridScope;
    use crate::units::{Seconds, Watts};

    fn grid(g: f64) -> GridIntensity {
        GridIntensity::custom(g, GridScope::Direct, Some(2021)).unwrap()
    }

    fn within(x: f64, want: f64, tol: f64) {
        assert!((x / want - 1.0).abs() < tol, "{x} vs {want}");
    }

    #[test]
    fn patterson_gpt3() {
        // Patterson et al. 2021 Table 4: 10,000 V100, 14.8 days, 330 W, PUE 1.1, 0.429 kg/kWh
        // -> 1,287 MWh and 552 tCO2e.
        let it = ItEnergy::from_power(10_000, Seconds::from_days(14.8), Watts(330.0), "").unwrap();
        let r = estimate(
            &it,
            None,
            Pue::new(1.1, "").unwrap(),
            grid(429.0),
            None,
            vec![],
        );
        within(r.energy_kwh / 1e3, 1287.0, 0.01);
        within(r.co2e_kg / 1e3, 552.0, 0.01);
    }

    #[test]
    fn patterson_t5() {
        // Patterson et al. 2021 Table 4: 512 TPU v3, 20 days, 310 W, PUE 1.12, 0.545 kg/kWh
        // -> 85.7 MWh and 46.7 tCO2e.
        let it = ItEnergy::from_power(512, Seconds::from_days(20.0), Watts(310.0), "").unwrap();
        let r = estimate(
            &it,
            None,
            Pue::new(1.12, "").unwrap(),
            grid(545.0),
            None,
            vec![],
        );
        within(r.energy_kwh / 1e3, 85.7, 0.01);
        within(r.co2e_kg / 1e3, 46.7, 0.01);
    }

    #[test]
    fn llama_65b() {
        // Touvron et al. 2023 (LLaMA) Table 15: 1,022,362 GPU-hours, 400 W, PUE 1.1, 0.385 kg/kWh
        // -> 449 MWh and 173 tCO2e.
        let it =
            ItEnergy::from_power(1, Seconds::from_hours(1_022_362.0), Watts(400.0), "").unwrap();
        let r = estimate(
            &it,
            None,
            Pue::new(1.1, "").unwrap(),
            grid(385.0),
            None,
            vec![],
        );
        within(r.energy_kwh / 1e3, 449.0, 0.01);
        within(r.co2e_kg / 1e3, 173.0, 0.01);
    }

    #[test]
    fn compare_ratios_follow_intensity() {
        let it = ItEnergy::from_power(8, Seconds::from_hours(10.0), Watts(700.0), "").unwrap();
        let r = estimate(
            &it,
            None,
            Pue::new(1.2, "").unwrap(),
            grid(100.0),
            None,
            vec![grid(50.0), grid(800.0)],
        );
        assert!((r.compare[0].ratio.unwrap() - 0.5).abs() < 1e-12);
        assert!((r.compare[1].co2e_kg - 8.0 * r.co2e_kg).abs() < 1e-9);
    }

    /// Regression: an eGRID subregion (direct, CO2 only) compared with a
    /// country's life-cycle average must say the two bases differ, not print a bare ratio.
    #[test]
    fn mixed_scope_comparison_is_flagged() {
        let srvc = crate::catalog::grid::lookup("SRVC").unwrap();
        let us = crate::catalog::grid::lookup("US").unwrap();
        let egrid_us = crate::catalog::grid::lookup("US-EGRID").unwrap();
        let note = mixed_scopes(&srvc, &[us, egrid_us.clone()]).unwrap();
        assert!(
            note.contains("SRVC is direct") && note.contains("US is lifecycle"),
            "{note}"
        );
        assert!(!note.contains("US-EGRID"), "{note}");
        // Same scope on both sides: no note.
        assert_eq!(mixed_scopes(&srvc, &[egrid_us]), None);
    }

    #[test]
    fn pue_below_one_rejected() {
        assert_eq!(Pue::new(0.9, ""), Err(CarbonError::PueBelowOne(0.9)));
    }

    proptest::proptest! {
        #[test]
        fn facility_at_least_it_and_emissions_linear(
            kwh in 0.001f64..1e7, pue in 1.0f64..3.0, g in 0.0f64..2000.0,
        ) {
            let it = ItEnergy::measured(Joules::from_kwh(kwh), Seconds(3600.0), "").unwrap();
            let r = estimate(&it, None, Pue::new(pue, "").unwrap(), grid(g), None, vec![]);
            proptest::prop_assert!(r.energy_kwh >= r.it_energy_kwh * (1.0 - 1e-12));
            proptest::prop_assert!((r.co2e_kg - kwh * pue * g / 1e3).abs() <= 1e-9 * (1.0 + r.co2e_kg));
        }
    }
}

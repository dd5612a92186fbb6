//! Software Carbon Intensity (ISO/IEC 21031:2024, the Green Software Foundation's SCI):
//! `SCI = ((E × I) + M) per R` — E the energy the software used (kWh; here the facility energy,
//! IT × PUE), I the grid's carbon intensity (gCO2e/kWh), M the embodied emissions of the hardware
//! charged to it (its share of the devices' manufacture by time used, the standard's
//! `M = TE × TS × RS`, which is what [`super::embodied::share`] computes), R the functional unit.
//!
//! The units are those of the GSF's "SCI for AI" extension (Green-Software-Foundation/sci-ai,
//! SPEC.md §8): a **consumer** unit (runtime operations: per token, per inference, per image,
//! per second of video, per page, per execution) or a **provider** unit (data engineering and
//! training: per parameter, per training token, per FLOP). R and, when the figures do not give
//! it, M are declared by the user; this module only divides and says what it divided.

use super::CarbonError;
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "amdahl.sci/1";

/// The standard and the formula, as every output names them.
pub const STANDARD: &str = "ISO/IEC 21031:2024 Software Carbon Intensity: SCI = (E × I + M) per R";

/// The functional unit R counts (SCI for AI, SPEC.md §8.1 and §8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Unit {
    /// LLM consumer unit.
    Token,
    /// Classical ML consumer unit (one request answered).
    Inference,
    /// Image generation consumer unit.
    Image,
    /// Video generation consumer unit (a second of video).
    Second,
    /// OCR/analysis consumer unit.
    Page,
    /// Agentic AI consumer unit.
    Execution,
    /// Provider unit: SCI for AI quotes it per billion parameters; R counts parameters here.
    Parameter,
    /// Provider unit: a token of training data.
    TrainingToken,
    /// Provider unit: a floating-point operation of training.
    Flop,
}

/// Whose boundary a unit belongs to (SCI for AI, SPEC.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    /// Runtime operations (inference, serving).
    Consumer,
    /// Data engineering, model training, system integration, end of life.
    Provider,
}

impl Unit {
    pub fn side(self) -> Side {
        match self {
            Unit::Parameter | Unit::TrainingToken | Unit::Flop => Side::Provider,
            _ => Side::Consumer,
        }
    }

    /// The unit in words, singular ("training token", "FLOP").
    pub fn name(self) -> &'static str {
        match self {
            Unit::Token => "token",
            Unit::Inference => "inference",
            Unit::Image => "image",
            Unit::Second => "second of video",
            Unit::Page => "page",
            Unit::Execution => "execution",
            Unit::Parameter => "parameter",
            Unit::TrainingToken => "training token",
            Unit::Flop => "FLOP",
        }
    }
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Consumer => "consumer",
            Side::Provider => "provider",
        }
    }
}

/// What the figures describe, for the boundary check: a serving estimate or simulation is
/// runtime operations (consumer), a training plan or run provider work; a lifetime holds both; a
/// measured run or hardware-hours can be either (amdahl cannot tell).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Covers {
    Serving,
    Training,
    TrainingAndServing,
    Unknown,
}

/// One operational part: facility energy (kWh) on a grid (gCO2e/kWh).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Part {
    pub energy_kwh: f64,
    pub g_per_kwh: f64,
}

/// M as declared: kgCO2e and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Embodied {
    pub kg: f64,
    pub source: String,
}

/// One SCI figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SciItem {
    /// What the figure is of ("the job", an alternative's label, "training + serving").
    pub label: String,
    /// The figures it was computed from, in words.
    pub source: String,
    /// E: facility energy (IT × PUE), kWh.
    pub energy_kwh: f64,
    /// I: gCO2e/kWh (energy-weighted when E has parts on different grids).
    pub intensity_g_per_kwh: f64,
    /// E × I, kgCO2e.
    pub operational_kg: f64,
    /// M, kgCO2e.
    pub embodied_kg: f64,
    /// Where M came from (amdahl's embodied share, or declared with `--sci-m`).
    pub embodied_source: String,
    /// E × I + M, kgCO2e.
    pub total_kg: f64,
    /// The SCI: (E × I + M) / R, gCO2e per unit.
    pub g_per_unit: f64,
}

/// The result of `amdahl carbon --sci` (`"schema": "amdahl.sci/1"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SciResult {
    pub schema: String,
    /// The standard and formula.
    pub standard: String,
    pub unit: Unit,
    /// The SCI for AI boundary of the unit.
    pub side: Side,
    /// R: how many units the figures cover, as declared.
    pub r: f64,
    pub items: Vec<SciItem>,
    /// What a reader must know: boundaries crossed, what M is.
    pub notes: Vec<String>,
}

/// Check R (declared: positive) and M (≥ 0).
fn check(r: f64, m: &Embodied) -> Result<(), CarbonError> {
    super::positive("R (the number of functional units, --sci-r)", r)?;
    if !(m.kg.is_finite() && m.kg >= 0.0) {
        return Err(CarbonError::Negative {
            what: "M (embodied kgCO2e, --sci-m)",
            value: m.kg,
        });
    }
    Ok(())
}

/// The SCI of operational `parts` plus `m`, over `r` units.
pub fn item(
    label: impl Into<String>,
    source: impl Into<String>,
    parts: &[Part],
    m: &Embodied,
    r: f64,
) -> Result<SciItem, CarbonError> {
    check(r, m)?;
    let energy: f64 = parts.iter().map(|p| p.energy_kwh).sum();
    let operational_g: f64 = parts.iter().map(|p| p.energy_kwh * p.g_per_kwh).sum();
    for p in parts {
        if !(p.energy_kwh.is_finite() && p.energy_kwh >= 0.0) {
            return Err(CarbonError::Negative {
                what: "E (facility energy, kWh)",
                value: p.energy_kwh,
            });
        }
        if !(p.g_per_kwh.is_finite() && p.g_per_kwh >= 0.0) {
            return Err(CarbonError::Negative {
                what: "I (gCO2e/kWh)",
                value: p.g_per_kwh,
            });
        }
    }
    let total_g = operational_g + m.kg * 1e3;
    Ok(SciItem {
        label: label.into(),
        source: source.into(),
        energy_kwh: energy,
        intensity_g_per_kwh: if energy > 0.0 {
            operational_g / energy
        } else {
            0.0
        },
        operational_kg: operational_g / 1e3,
        embodied_kg: m.kg,
        embodied_source: m.source.clone(),
        total_kg: total_g / 1e3,
        g_per_unit: total_g / r,
    })
}

/// The result for `items` of figures that cover `covers`, per `r` `unit`s, with the notes the
/// standard asks a reader to see.
pub fn result(unit: Unit, r: f64, covers: Covers, items: Vec<SciItem>) -> SciResult {
    let side = unit.side();
    let mut notes = Vec::new();
    match (covers, side) {
        (Covers::TrainingAndServing, _) => notes.push(format!(
            "amortising training into per-{} figures goes beyond the standard: ISO/IEC \
             21031:2024 charges the software's own operation, and SCI for AI puts model training \
             in the provider's boundary and serving in the consumer's, each with its own \
             functional unit; the \"training + serving\" rows spread the one-off training over \
             the R units of this horizon, the \"serving\" rows are the consumer SCI",
            unit.name()
        )),
        (Covers::Training, Side::Consumer) => notes.push(format!(
            "these figures are of training, which SCI for AI puts in the provider's boundary \
             (per parameter, training token or FLOP); a per-{} figure of training goes beyond \
             the standard",
            unit.name()
        )),
        (Covers::Serving, Side::Provider) => notes.push(format!(
            "these figures are of serving, which SCI for AI puts in the consumer's boundary \
             (per token, inference, ...); a per-{} figure of serving goes beyond the standard",
            unit.name()
        )),
        _ => {}
    }
    if items.iter().any(|i| i.embodied_kg == 0.0) {
        notes.push(
            "M is 0 for some rows: the standard includes the hardware's embodied emissions; a \
             zero M leaves them out"
                .into(),
        );
    }
    SciResult {
        schema: SCHEMA.into(),
        standard: STANDARD.into(),
        unit,
        side,
        r,
        items,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(kg: f64) -> Embodied {
        Embodied {
            kg,
            source: "given".into(),
        }
    }

    /// By hand: E = 100 kWh at I = 400 g/kWh is 40,000 g; M = 10 kg = 10,000 g; total 50 kg;
    /// over R = 1e6 tokens, SCI = 50,000 g / 1e6 = 0.05 g per token.
    #[test]
    fn sci_is_e_times_i_plus_m_over_r() {
        let i = item(
            "job",
            "test",
            &[Part {
                energy_kwh: 100.0,
                g_per_kwh: 400.0,
            }],
            &m(10.0),
            1e6,
        )
        .unwrap();
        assert!((i.operational_kg - 40.0).abs() < 1e-12);
        assert!((i.total_kg - 50.0).abs() < 1e-12);
        assert!((i.g_per_unit - 0.05).abs() < 1e-15);
        assert!((i.intensity_g_per_kwh - 400.0).abs() < 1e-12);
    }

    /// Two parts on two grids: 10 kWh × 50 g + 30 kWh × 450 g = 500 + 13,500 = 14,000 g over
    /// 40 kWh, I = 350 g/kWh; M = 0; R = 7,000 requests → 2 g per request.
    #[test]
    fn parts_on_two_grids_weight_the_intensity_by_energy() {
        let parts = [
            Part {
                energy_kwh: 10.0,
                g_per_kwh: 50.0,
            },
            Part {
                energy_kwh: 30.0,
                g_per_kwh: 450.0,
            },
        ];
        let i = item("x", "y", &parts, &m(0.0), 7000.0).unwrap();
        assert!((i.intensity_g_per_kwh - 350.0).abs() < 1e-12);
        assert!((i.g_per_unit - 2.0).abs() < 1e-12);
        let r = result(Unit::Inference, 7000.0, Covers::Serving, vec![i]);
        assert_eq!(r.side, Side::Consumer);
        assert!(
            r.notes.iter().any(|n| n.contains("M is 0")),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn r_must_be_positive_and_m_not_negative() {
        let p = [Part {
            energy_kwh: 1.0,
            g_per_kwh: 1.0,
        }];
        for r in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = item("x", "y", &p, &m(0.0), r).unwrap_err().to_string();
            assert!(e.contains("--sci-r"), "{e}");
        }
        let e = item("x", "y", &p, &m(-1.0), 1.0).unwrap_err().to_string();
        assert!(e.contains("--sci-m"), "{e}");
    }

    /// A lifetime says it goes beyond the standard; a consumer unit on training says so too.
    #[test]
    fn boundaries_crossed_are_named() {
        let r = result(Unit::Token, 1.0, Covers::TrainingAndServing, Vec::new());
        assert!(
            r.notes[0].contains("goes beyond the standard"),
            "{:?}",
            r.notes
        );
        let r = result(Unit::Token, 1.0, Covers::Training, Vec::new());
        assert!(r.notes[0].contains("provider's boundary"), "{:?}", r.notes);
        assert!(result(Unit::Flop, 1.0, Covers::Training, Vec::new())
            .notes
            .is_empty());
        assert_eq!(Unit::TrainingToken.side(), Side::Provider);
    }
}

//! Prediction intervals of `amdahl infer`: throughput and TTFT from the signed errors of the
//! serving validation set (data/validation/infer.csv) of their class (quantity × device
//! generation × precision, falling back to quantity × generation, then the quantity's every
//! row), and energy per output token from the energy set's held-out errors
//! (data/validation/energy.csv, rows in the accuracy claim). TPOT has no published row of its
//! own: "no validation data". Method: [`crate::interval`].

use super::validation::InferCase;
use crate::energy_validation::{EnergyCase, Quantity};
use crate::interval::{first_band, min_runs, Class, Direction, Interval, LEVEL};
use serde::{Deserialize, Serialize};

/// The intervals of an `amdahl infer` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InferIntervals {
    pub output_tokens_per_s: Interval,
    pub ttft_s: Interval,
    pub tpot_s: Interval,
    pub energy_per_token_j: Interval,
}

/// One reference error and its class.
struct Ref<'a> {
    arch: &'a str,
    precision: &'a str,
    error: f64,
}

/// The interval of `value` from `refs` for a device of `arch` at `precision`.
fn interval_of(
    quantity: &str,
    refs: &[Ref<'_>],
    (arch, precision): (&str, &str),
    value: f64,
    direction: Direction,
) -> Interval {
    let mut ap = Vec::new();
    let mut a = Vec::new();
    let mut all = Vec::new();
    for r in refs {
        all.push(r.error);
        if r.arch.eq_ignore_ascii_case(arch) {
            a.push(r.error);
            if r.precision.eq_ignore_ascii_case(precision) {
                ap.push(r.error);
            }
        }
    }
    let need = min_runs(LEVEL);
    let chain = [
        Class {
            name: format!("{quantity} × {arch} × {precision}"),
            errors: &ap,
            min: need,
        },
        Class {
            name: format!("{quantity} × {arch}"),
            errors: &a,
            min: need,
        },
        Class {
            name: format!("{quantity}, every device"),
            errors: &all,
            min: need,
        },
        Class {
            name: format!("{quantity}, every device"),
            errors: &all,
            min: crate::plan::intervals::MIN_WIDEST,
        },
    ];
    match first_band(&chain, LEVEL) {
        Ok((b, basis)) => b.interval(value, direction, LEVEL, basis),
        Err(why) => Interval::none(value, why),
    }
}

/// The figures of one serving configuration.
pub struct Figures {
    pub output_tokens_per_s: f64,
    pub ttft_s: f64,
    pub tpot_s: f64,
    pub energy_per_token_j: f64,
}

/// The intervals of `figures` for a device of `arch` serving `precision` weights. `serving`:
/// infer.csv's cases; `energy`: the energy set's cases with the device generation of each
/// (`None` where the system is not catalogued).
pub fn infer_intervals(
    serving: &[InferCase],
    energy: &[(EnergyCase, Option<String>)],
    (arch, precision): (&str, &str),
    f: &Figures,
) -> InferIntervals {
    let refs_of = |keep: fn(&str) -> bool| -> Vec<Ref<'_>> {
        serving
            .iter()
            .filter(|c| keep(&c.metric))
            .map(|c| Ref {
                arch: &c.arch,
                precision: &c.precision,
                error: c.signed_error(),
            })
            .collect()
    };
    let throughput = refs_of(|m| m == "tok_s" || m == "tok_s_gpu");
    let ttft = refs_of(|m| m == "ttft_ms");
    let ept: Vec<Ref<'_>> = energy
        .iter()
        .filter(|(c, _)| c.quantity == Quantity::EnergyPerToken.name() && c.in_claim())
        .filter_map(|(c, arch)| {
            Some(Ref {
                arch: arch.as_deref()?,
                precision: &c.precision,
                error: c.held_out_error,
            })
        })
        .collect();
    let class = (arch, precision);
    InferIntervals {
        output_tokens_per_s: interval_of(
            "serving throughput",
            &throughput,
            class,
            f.output_tokens_per_s,
            Direction::Rate,
        ),
        ttft_s: interval_of("TTFT", &ttft, class, f.ttft_s, Direction::Time),
        tpot_s: Interval::none(
            f.tpot_s,
            "TPOT: no validation data (no published TPOT row)".into(),
        ),
        energy_per_token_j: interval_of(
            "energy per output token (held out)",
            &ept,
            class,
            f.energy_per_token_j,
            Direction::Rate,
        ),
    }
}

/// The energy set's cases as committed ([`crate::energy_validation::energy_validation_committed`]),
/// each with its device's generation (the catalog's `arch`).
pub fn energy_cases_with_arch() -> Result<Vec<(EnergyCase, Option<String>)>, String> {
    let v = crate::energy_validation::energy_validation_committed().map_err(|e| e.to_string())?;
    Ok(v.cases
        .into_iter()
        .map(|c| {
            let arch = crate::catalog::devices::lookup(&c.system)
                .ok()
                .map(|d| d.arch.clone());
            (c, arch)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::validation::infer_validation;

    #[test]
    fn infer_classes_fall_back_and_tpot_has_none() {
        let serving = infer_validation().unwrap_or_else(|e| panic!("{e}"));
        let energy = energy_cases_with_arch().unwrap_or_else(|e| panic!("{e}"));
        let f = Figures {
            output_tokens_per_s: 1000.0,
            ttft_s: 0.1,
            tpot_s: 0.02,
            energy_per_token_j: 0.2,
        };
        let i = infer_intervals(&serving, &energy, ("Hopper", "fp8"), &f);
        let t = &i.output_tokens_per_s;
        assert!(t.has_band(), "{}", t.basis);
        assert!(t.low <= t.high);
        assert!(!i.tpot_s.has_band() && i.tpot_s.basis.contains("no validation data"));
        // Hopper bf16 energy per token: 14 held-out rows of ML.ENERGY on H100 (energy.csv).
        let e = infer_intervals(&serving, &energy, ("Hopper", "bf16"), &f).energy_per_token_j;
        assert!(
            e.has_band()
                && e.basis
                    .starts_with("energy per output token (held out) × Hopper × bf16"),
            "{}",
            e.basis
        );
        // A generation without rows falls back to every device, saying so.
        let v = infer_intervals(&serving, &energy, ("Volta", "fp16"), &f);
        assert!(
            v.energy_per_token_j.basis.contains("every device"),
            "{}",
            v.energy_per_token_j.basis
        );
    }
}

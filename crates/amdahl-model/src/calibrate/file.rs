//! `amdahl.calibration/1`: the fitted constants with their standard errors, what could not be
//! fitted and why, and the before / after / leave-one-out errors per row and per quantity; loaded
//! by `plan` and `infer` (`--calibration FILE`) and laid over the device by [`Calibration::apply`].

use super::fit::{Fit, LooMethod};
use super::{set, Quantity, Row};
use crate::infer::Engine;
use crate::plan::Hardware;
use serde::{Deserialize, Serialize};

pub const CALIBRATION_SCHEMA: &str = "amdahl.calibration/1";

/// The version of the model the constants were fitted through. A calibration is only valid for
/// the formulas it was fitted with: raise this whenever a formula the constants feed changes
/// (the step models of plan/perf and infer/step, the GEMM curve, the power model), so that old
/// calibrations are refused instead of silently mis-applied.
pub const MODEL_VERSION: u32 = 1;

/// A fitted constant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Constant {
    /// `gemm_efficiency`, `memory_efficiency`, `kernel_latency_s`, `step_overhead_s`,
    /// `per_sequence_s`, `power_active`, `power_compute`, `power_memory`.
    pub name: String,
    pub value: f64,
    /// Of the linearised fit at the optimum (docs/methodology.md, "Calibration").
    pub standard_error: f64,
    /// What the model used before (the catalog's, or the device profile's).
    pub prior: f64,
}

/// A constant the rows could not identify, kept at its prior.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Refusal {
    pub name: String,
    pub reason: String,
}

/// The errors of one measured quantity over its rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QuantityFit {
    pub quantity: Quantity,
    pub rows: usize,
    /// Mean |predicted / measured − 1| before the fit, after it, and with each row left out.
    pub mean_abs_before: f64,
    pub mean_abs_after: f64,
    pub mean_abs_loo: f64,
    /// Each row's leave-one-out signed relative error of the quantity itself, predicted /
    /// measured − 1 (positive: the model predicts more than was measured, so for a time it is
    /// pessimistic), in row order: the residuals the prediction intervals of a calibrated model
    /// are drawn from (`calibrate::intervals` turns a time's into the rate convention).
    pub loo_signed_errors: Vec<f64>,
}

/// One row's errors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RowError {
    /// Where the row came from ("runs.csv line 4").
    pub origin: String,
    pub quantity: Quantity,
    pub measured: f64,
    /// Signed relative errors, as in [`QuantityFit`].
    pub before: f64,
    pub after: f64,
    pub loo: f64,
}

/// The result of `amdahl calibrate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Calibration {
    pub schema: String,
    pub amdahl_version: String,
    /// [`MODEL_VERSION`] at fit time.
    pub model_version: u32,
    /// The device the rows ran on (its catalog name).
    pub system: String,
    /// The measured rows' file.
    pub source: String,
    /// Measured rows (runs) fitted to; one row may measure several quantities.
    pub rows: usize,
    pub constants: Vec<Constant>,
    pub not_identified: Vec<Refusal>,
    pub quantities: Vec<QuantityFit>,
    /// `exact` (each row left out and refitted) or `leverage` (rᵢ / (1 − hᵢᵢ)).
    pub loo_method: String,
    /// The serving engine (`--engine`) of the rows `per_sequence_s` was fitted to: the host time
    /// per running sequence is that engine's, and `infer`/`serve` with another `--engine`
    /// refuse the calibration. Absent when `per_sequence_s` was not fitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<Engine>,
    pub row_errors: Vec<RowError>,
    /// Held-back rows (`--check`) predicted with the fitted constants and never fitted to:
    /// `before` the model as shipped, `after` calibrated (`loo` is `after`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_back: Vec<RowError>,
}

/// One fit's pieces, as [`build`] reads them.
pub struct StageView<'a> {
    pub names: &'a [&'static str],
    pub rows: &'a [usize],
    /// Where the fit started: the model's value of each constant.
    pub priors: &'a [f64],
    pub fit: &'a Fit,
}

/// The calibration of `rows` from the time and power fits.
pub fn build(rows: &[Row], hw: &Hardware, stages: &[StageView<'_>], source: &str) -> Calibration {
    let mut constants = Vec::new();
    let mut not_identified = Vec::new();
    let mut errors: Vec<Option<RowError>> = vec![None; rows.len()];
    let mut exact = true;
    for s in stages {
        exact &= s.fit.loo_method == LooMethod::Exact;
        for (k, name) in s.names.iter().enumerate() {
            if let Some((_, why)) = s.fit.refused.iter().find(|(i, _)| *i == k) {
                not_identified.push(Refusal {
                    name: (*name).into(),
                    reason: why.clone(),
                });
            } else if let Some(se) = s.fit.standard_errors[k] {
                constants.push(Constant {
                    name: (*name).into(),
                    value: s.fit.values[k],
                    standard_error: se,
                    prior: s.priors[k],
                });
            }
        }
        for (k, &i) in s.rows.iter().enumerate() {
            errors[i] = Some(RowError {
                origin: rows[i].origin.clone(),
                quantity: rows[i].quantity,
                measured: rows[i].measured,
                before: s.fit.before[k],
                after: s.fit.after[k],
                loo: s.fit.loo[k],
            });
        }
    }
    let row_errors: Vec<RowError> = errors.into_iter().flatten().collect();
    let quantities = Quantity::ALL
        .iter()
        .filter_map(|&q| {
            let of: Vec<&RowError> = row_errors.iter().filter(|e| e.quantity == q).collect();
            let mean = |f: fn(&RowError) -> f64| {
                of.iter().map(|e| f(e).abs()).sum::<f64>() / of.len() as f64
            };
            (!of.is_empty()).then(|| QuantityFit {
                quantity: q,
                rows: of.len(),
                mean_abs_before: mean(|e| e.before),
                mean_abs_after: mean(|e| e.after),
                mean_abs_loo: mean(|e| e.loo),
                loo_signed_errors: of.iter().map(|e| e.loo).collect(),
            })
        })
        .collect();
    Calibration {
        schema: CALIBRATION_SCHEMA.into(),
        amdahl_version: env!("CARGO_PKG_VERSION").into(),
        model_version: MODEL_VERSION,
        system: hw.name.clone(),
        source: source.into(),
        rows: {
            let mut origins: Vec<&str> = rows.iter().map(|r| r.origin.as_str()).collect();
            origins.sort_unstable();
            origins.dedup();
            origins.len()
        },
        constants,
        not_identified,
        quantities,
        loo_method: if exact { "exact" } else { "leverage" }.into(),
        engine: None,
        row_errors,
        held_back: Vec::new(),
    }
}

/// Why a calibration file cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CalibrationFileError {
    #[error("{file}: schema `{found}`, not `{CALIBRATION_SCHEMA}`: give a file written by `amdahl calibrate`")]
    Schema { file: String, found: String },
    #[error("{file}: fitted through model version {found}, this amdahl's model is version {MODEL_VERSION}: the formulas the constants feed have changed; rerun `amdahl calibrate` on the same rows")]
    ModelVersion { file: String, found: u32 },
    #[error("{file}: calibrated on the {calibrated}, but --system is the {system}: give --system for that device, or calibrate on runs of this one")]
    Device {
        file: String,
        calibrated: String,
        system: String,
    },
    #[error("{file}: the time per running sequence (per_sequence_s) was fitted to {calibrated} runs, but --engine is {engine}: give --engine {calibrated}, or calibrate on runs of {engine}")]
    Engine {
        file: String,
        calibrated: &'static str,
        engine: &'static str,
    },
    #[error("{file}: constant `{name}` = {value} is not a usable value; the file was edited or damaged: rerun `amdahl calibrate`")]
    Value {
        file: String,
        name: String,
        value: f64,
    },
}

impl Calibration {
    /// Check the schema and the model version against this build's (`file` names it in errors).
    pub fn check(&self, file: &str) -> Result<(), CalibrationFileError> {
        if self.schema != CALIBRATION_SCHEMA {
            return Err(CalibrationFileError::Schema {
                file: file.into(),
                found: self.schema.clone(),
            });
        }
        if self.model_version != MODEL_VERSION {
            return Err(CalibrationFileError::ModelVersion {
                file: file.into(),
                found: self.model_version,
            });
        }
        for c in &self.constants {
            let known = super::TIME_CONSTANTS
                .iter()
                .chain(&super::POWER_CONSTANTS)
                .any(|n| *n == c.name);
            if !(known && c.value.is_finite() && c.value >= 0.0) {
                return Err(CalibrationFileError::Value {
                    file: file.into(),
                    name: c.name.clone(),
                    value: c.value,
                });
            }
        }
        Ok(())
    }

    /// Lay the fitted constants over `hw`, which must be the device calibrated on, and name the
    /// calibration in its provenance.
    pub fn apply(&self, hw: &mut Hardware, file: &str) -> Result<(), CalibrationFileError> {
        self.check(file)?;
        if !self.system.eq_ignore_ascii_case(&hw.name) {
            return Err(CalibrationFileError::Device {
                file: file.into(),
                calibrated: self.system.clone(),
                system: hw.name.clone(),
            });
        }
        let names: Vec<&str> = self.constants.iter().map(|c| c.name.as_str()).collect();
        let values: Vec<f64> = self.constants.iter().map(|c| c.value).collect();
        set(hw, &names, &values);
        hw.tuning.provenance.push(self.provenance(file));
        Ok(())
    }

    /// Check that the serving engine a prediction runs (`--engine`) is the one the host time per
    /// running sequence was fitted to, where it was.
    pub fn check_engine(&self, engine: Engine, file: &str) -> Result<(), CalibrationFileError> {
        match self.engine {
            Some(e) if e != engine && self.constants.iter().any(|c| c.name == "per_sequence_s") => {
                Err(CalibrationFileError::Engine {
                    file: file.into(),
                    calibrated: e.name(),
                    engine: engine.name(),
                })
            }
            _ => Ok(()),
        }
    }

    /// Held-back rows' errors with and without the fitted constants (rows of this device,
    /// checked with [`super::check_rows`]).
    pub fn check_held_back(&self, rows: &[Row]) -> Vec<RowError> {
        let names: Vec<&str> = self.constants.iter().map(|c| c.name.as_str()).collect();
        let values: Vec<f64> = self.constants.iter().map(|c| c.value).collect();
        rows.iter()
            .map(|r| {
                let mut hw = r.workload.hardware().clone();
                set(&mut hw, &names, &values);
                let after = super::predict(&r.workload, &hw, r.quantity) / r.measured - 1.0;
                RowError {
                    origin: r.origin.clone(),
                    quantity: r.quantity,
                    measured: r.measured,
                    before: super::predict_row(r) / r.measured - 1.0,
                    after,
                    loo: after,
                }
            })
            .collect()
    }

    /// "calibrated on 12 rows of runs.csv (gemm_efficiency 0.61 ± 0.01, …)".
    pub fn provenance(&self, file: &str) -> String {
        let constants: Vec<String> = self
            .constants
            .iter()
            .map(|c| {
                format!(
                    "{} {} ± {}",
                    c.name,
                    crate::units::sig(c.value, 3),
                    crate::units::sig(c.standard_error, 2)
                )
            })
            .collect();
        format!(
            "calibrated on {} rows of {} ({}; file {file})",
            self.rows,
            self.source,
            constants.join(", ")
        )
    }
}

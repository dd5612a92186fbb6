//! The energy validation set (data/validation/energy.csv): published power and energy
//! measurements with the configurations a user would type, each predicted by amdahl and set
//! beside its published figure. `amdahl catalog validation --energy` prints it.
//!
//! The power model's coefficients are fitted on the set's power rows ([`fit`]), so an in-sample
//! error says little: every row is also predicted with coefficients fitted *without its
//! configuration* (all batches of one model on one system left out together), and only that
//! held-out error is an accuracy claim.

mod caps;
mod fit;
mod predict;
mod rows;
mod simulated;

pub use caps::CapCase;
pub use fit::{fit, PowerFit};
pub use predict::Quantity;
pub use rows::EnergySetError;

use crate::infer::engine::VLLM_PER_SEQUENCE_S;
use crate::stats::{median, sorted};
use fit::{fit_host, HostSample, Term};
use predict::Modelled;
use rows::Row;
use serde::{Deserialize, Serialize};
use simulated::Simulations;

/// The accuracy targets on held-out rows: median |error| at most 15 % for power and for energy
/// per token, no row beyond 35 %.
pub const TARGET_MEDIAN: f64 = 0.15;
pub const TARGET_WORST: f64 = 0.35;

/// A configuration whose measured power falls by more than this share from one batch to the next
/// larger is host-bound: the GPU waits on the serving engine's CPU work, which the serving model
/// does not represent, so more work shows as less power. Such a configuration is left out of the
/// power model's fit (it would pull the coefficients towards an effect the model lacks) but stays
/// in the accuracy claim: a rule read off the rows' own results may explain an error, never hide
/// it.
pub const HOST_BOUND_DROP: f64 = 0.10;

/// Whether the serving model represents this engine: TensorRT-LLM and SGLang, and vLLM from 0.6,
/// whose multi-step scheduling and asynchronous output processing removed most of its per-step
/// CPU time ("vLLM v0.6.0: 2.7x Throughput Improvement and 5x Latency Reduction", vLLM blog,
/// Sep 2024: Llama-3-8B on one H100). The serving model's constants were set against
/// TensorRT-LLM measurements (data/validation/infer.csv); older engines (vLLM 0.5, Hugging Face
/// generation through FastChat) are reported, outside the accuracy claim.
pub fn engine_modelled(framework: &str, version: &str) -> bool {
    match framework.trim().to_ascii_lowercase().as_str() {
        "tensorrt-llm" | "trt-llm" | "sglang" => true,
        "vllm" => {
            let mut parts = version
                .trim()
                .split('.')
                .map(|p| p.parse::<u32>().unwrap_or(0));
            let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
            (major, minor) >= (0, 6)
        }
        _ => false,
    }
}

/// One published number and its predictions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EnergyCase {
    pub id: String,
    /// Rows of one configuration (a model on a system at every batch) share it.
    pub configuration: String,
    pub quantity: String,
    pub model: String,
    pub system: String,
    pub gpus: u32,
    pub batch: u32,
    /// Weights / arithmetic format as typed (bf16, fp8, …).
    #[serde(default)]
    pub precision: String,
    /// The serving engine and its version.
    pub framework: String,
    /// What the measurement covers: `gpu` (board counters) or `server-wall`.
    pub scope: String,
    pub published: f64,
    /// With the shipped coefficients (fitted on the whole set: in-sample for fitted power rows).
    pub predicted: f64,
    /// predicted / published − 1.
    pub error: f64,
    /// With coefficients fitted without this row's configuration: the accuracy claim.
    pub held_out: f64,
    pub held_out_error: f64,
    /// The typed batch fits the modelled memory.
    pub fits: bool,
    /// The software is one amdahl represents: a serving engine ([`engine_modelled`]) or a
    /// training framework the planner models.
    pub engine_modelled: bool,
    /// The configuration is host-bound ([`HOST_BOUND_DROP`]): an explanation of its error, not
    /// an exclusion from the claim.
    pub host_bound: bool,
    /// The row is kept out of every fit (`fit = no` in the set): added after the shipped
    /// constants were fitted, so its predictions are out of sample.
    #[serde(default)]
    pub out_of_sample: bool,
    pub source: String,
}

impl EnergyCase {
    /// Whether the row counts towards the accuracy claim: its software is one amdahl represents,
    /// a property typed with the row. Nothing read off its published result takes it out.
    pub fn in_claim(&self) -> bool {
        self.engine_modelled
    }
}

/// A row amdahl cannot express yet, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Excluded {
    pub id: String,
    pub why: String,
}

/// Errors of one quantity over a subset of the set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    pub quantity: String,
    /// `claim` (modelled engines), `out_of_sample` (the claim's rows no fit used) or `all`.
    pub subset: String,
    pub rows: usize,
    pub median_abs_error: f64,
    pub worst_abs_error: f64,
    pub worst: String,
    pub held_out_median_abs_error: f64,
    pub held_out_worst_abs_error: f64,
    pub held_out_worst: String,
}

/// The whole set, predicted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EnergyValidation {
    /// The coefficients amdahl ships (crate::power).
    pub coefficients: PowerFit,
    /// The coefficients fitted on every fitted power row now (equal to the shipped ones, rounded,
    /// unless the set or the serving model changed since they were fitted).
    pub fitted: PowerFit,
    /// Power rows the fit used.
    pub fitted_rows: usize,
    /// vLLM's time per running sequence as amdahl ships it ([`VLLM_PER_SEQUENCE_S`]), s.
    #[serde(default)]
    pub vllm_host_s: f64,
    /// The same fitted on every fitted throughput row now (equal to the shipped one, rounded,
    /// unless the set or the serving model changed since), s; `None` without such rows.
    #[serde(default)]
    pub fitted_vllm_host_s: Option<f64>,
    /// Throughput rows that fit used.
    #[serde(default)]
    pub fitted_host_rows: usize,
    pub cases: Vec<EnergyCase>,
    pub summaries: Vec<Summary>,
    pub excluded: Vec<Excluded>,
    /// The power-cap pairs (data/validation/power_caps.csv): throughput kept at a cap.
    #[serde(default)]
    pub power_caps: Vec<CapCase>,
}

/// Whether amdahl represents the software of a row: a serving engine ([`engine_modelled`]) or,
/// for training, one of the planner's frameworks (crate::plan::validation::MODELLED).
fn software_modelled(r: &Row) -> bool {
    if r.kind == "training" {
        crate::plan::validation::MODELLED
            .contains(&r.framework.trim().to_ascii_lowercase().as_str())
    } else {
        engine_modelled(&r.framework, &r.framework_version)
    }
}

/// Configurations whose published power falls by more than [`HOST_BOUND_DROP`] between
/// consecutive batches.
fn host_bound(rows: &[Row]) -> Vec<String> {
    let mut configs: Vec<&str> = rows.iter().map(Row::configuration).collect();
    configs.sort();
    configs.dedup();
    configs
        .into_iter()
        .filter(|c| {
            let mut power: Vec<(u32, f64)> = rows
                .iter()
                .filter(|r| r.configuration() == *c && r.measured.starts_with("gpu_power_w"))
                .map(|r| (r.batch, r.value))
                .collect();
            power.sort_by_key(|(b, _)| *b);
            power
                .windows(2)
                .any(|w| w[1].1 < w[0].1 * (1.0 - HOST_BOUND_DROP))
        })
        .map(str::to_string)
        .collect()
}

/// Host time per sequence at which the fit probes each row's slope (`infer`'s time per token is
/// linear in it, and a simulated row's is read off the line through its two simulations
/// ([`simulated::Line`]), so any positive value gives the exact slope).
const HOST_PROBE_S: f64 = 1e-5;

/// Every modelled row at `host_s` of vLLM per-sequence time: rows that do not use it are
/// taken from `base` as they are.
fn remodel<'a>(
    base: &[(&'a Row, Modelled)],
    host_s: f64,
    sims: &Simulations,
) -> Result<Vec<(&'a Row, Modelled)>, EnergySetError> {
    base.iter()
        .map(|(r, m)| {
            if !m.uses_host {
                return Ok((*r, m.clone()));
            }
            predict::model_row(r, host_s, sims)
                .map(|m| (*r, m))
                .map_err(|what| EnergySetError {
                    file: rows::ENERGY_CSV_PATH,
                    row: r.id.clone(),
                    what,
                })
        })
        .collect()
}

/// The throughput rows the vLLM per-sequence time is fitted on (those of `fitted_in`'s
/// configurations), by configuration: each row's time per token without host time and its slope.
fn host_samples<'a>(
    modelled: &[(&'a Row, Modelled)],
    fitted_in: &dyn Fn(&Row) -> bool,
    sims: &Simulations,
) -> Result<Vec<(&'a str, HostSample)>, EnergySetError> {
    let (zero, probe) = (
        remodel(modelled, 0.0, sims)?,
        remodel(modelled, HOST_PROBE_S, sims)?,
    );
    Ok(zero
        .iter()
        .zip(&probe)
        .filter(|((r, m), _)| m.uses_host && m.quantity == Quantity::Throughput && fitted_in(r))
        .map(|((r, m0), (_, m1))| {
            let tau0 = m0.seconds_per_token();
            (
                r.configuration(),
                HostSample {
                    tau0,
                    slope: (m1.seconds_per_token() - tau0) / HOST_PROBE_S,
                    measured: 1.0 / m0.published,
                },
            )
        })
        .collect())
}

/// What a configuration's rows are predicted with when it is held out: its name (`None` for every
/// configuration no fit uses), the power model fitted without it, and every row modelled with the
/// host time fitted without it.
type HeldOut<'a> = (Option<String>, PowerFit, Vec<(&'a Row, Modelled)>);

/// [`energy_validation`]'s result as last committed (data/validation/energy-predictions.json),
/// for the commands that quote it under every energy figure (`infer`, `plan`, `carbon`) and
/// `infer`'s prediction intervals: predicting the set simulates 112 offline runs twice (about
/// 1.1 s), which those commands should not pay on every call. A test recomputes it and fails when
/// the file is stale (`AMDAHL_UPDATE_ENERGY_PREDICTIONS=1` rewrites it); `amdahl catalog
/// validation --energy` always predicts afresh.
pub fn energy_validation_committed() -> Result<EnergyValidation, EnergySetError> {
    serde_json::from_str(COMMITTED).map_err(|e| EnergySetError {
        file: "data/validation/energy-predictions.json",
        row: "the whole file".into(),
        what: e.to_string(),
    })
}

/// The file [`energy_validation_committed`] reads (embedded: no file is read at run time).
const COMMITTED: &str = include_str!("../../../../data/validation/energy-predictions.json");

/// Predict every row of the set.
pub fn energy_validation() -> Result<EnergyValidation, EnergySetError> {
    let rows = rows::rows()?;
    let host_bound = host_bound(&rows);
    let sims = simulated::simulate_rows(&rows);
    let mut modelled = Vec::new();
    let mut excluded = Vec::new();
    for r in &rows {
        match predict::model_row(r, VLLM_PER_SEQUENCE_S, &sims) {
            Ok(m) => modelled.push((r, m)),
            Err(why) => excluded.push(Excluded {
                id: r.id.clone(),
                why,
            }),
        }
    }
    let fitted_in = |r: &Row| {
        r.in_fit() && software_modelled(r) && !host_bound.iter().any(|c| c == r.configuration())
    };
    let bad = |what: &str| EnergySetError {
        file: rows::ENERGY_CSV_PATH,
        row: "power rows".into(),
        what: what.into(),
    };
    let samples = host_samples(&modelled, &fitted_in, &sims)?;
    let host_fit = |leave_out: Option<&str>| -> Option<f64> {
        let of: Vec<HostSample> = samples
            .iter()
            .filter(|(c, _)| Some(*c) != leave_out)
            .map(|(_, s)| *s)
            .collect();
        fit_host(&of)
    };
    let terms = |of: &[(&Row, Modelled)], leave_out: Option<&str>| -> Vec<Term> {
        of.iter()
            .filter(|(r, _)| fitted_in(r) && Some(r.configuration()) != leave_out)
            .filter_map(|(_, m)| m.regression())
            .collect()
    };
    let all_terms = terms(&modelled, None);
    let fitted = fit(&all_terms).ok_or_else(|| bad("too few to fit the power model"))?;
    let fitted_host_s = host_fit(None);
    let shipped = PowerFit::shipped();
    let mut cases = Vec::new();
    // Per configuration held out: the host time and the power model fitted without it, and
    // every row modelled with that host time. A configuration no fit uses (host-bound, an
    // engine not represented, `fit = no`) leaves both fits as they are: all such share one.
    let in_a_fit: std::collections::HashSet<&str> = rows
        .iter()
        .filter(|r| fitted_in(r))
        .map(Row::configuration)
        .collect();
    let mut held_out_models: Vec<HeldOut> = Vec::new();
    for (i, (r, m)) in modelled.iter().enumerate() {
        let config = r.configuration().to_string();
        let left_out = in_a_fit.contains(config.as_str()).then(|| config.clone());
        let at = match held_out_models.iter().position(|(c, _, _)| *c == left_out) {
            Some(at) => at,
            None => {
                let host_s = host_fit(left_out.as_deref()).unwrap_or(VLLM_PER_SEQUENCE_S);
                let rows_then = remodel(&modelled, host_s, &sims)?;
                let k = fit(&terms(&rows_then, left_out.as_deref()))
                    .ok_or_else(|| bad("too few left out of a configuration to fit"))?;
                held_out_models.push((left_out, k, rows_then));
                held_out_models.len() - 1
            }
        };
        let (_, k, rows_then) = &held_out_models[at];
        let (predicted, held_out) = (m.predict(&shipped), rows_then[i].1.predict(k));
        cases.push(EnergyCase {
            predicted,
            error: predicted / m.published - 1.0,
            held_out,
            held_out_error: held_out / m.published - 1.0,
            host_bound: host_bound.contains(&config),
            ..case_of(r, m)
        });
    }
    let summaries = summaries(&cases);
    Ok(EnergyValidation {
        coefficients: shipped,
        fitted,
        fitted_rows: all_terms.len(),
        vllm_host_s: VLLM_PER_SEQUENCE_S,
        fitted_vllm_host_s: fitted_host_s,
        fitted_host_rows: samples.len(),
        cases,
        summaries,
        excluded,
        power_caps: caps::caps_validation()?,
    })
}

/// A row's case with its identity and published value; the predictions are the caller's.
fn case_of(r: &Row, m: &Modelled) -> EnergyCase {
    EnergyCase {
        id: r.id.clone(),
        configuration: r.configuration().to_string(),
        quantity: m.quantity.name().into(),
        model: r.model.clone(),
        system: r.system.clone(),
        gpus: r.gpus,
        batch: r.batch,
        precision: r.precision.clone(),
        framework: format!("{} {}", r.framework, r.framework_version)
            .trim()
            .to_string(),
        scope: r.scope.clone(),
        published: m.published,
        predicted: f64::NAN,
        error: f64::NAN,
        held_out: f64::NAN,
        held_out_error: f64::NAN,
        fits: m.fits,
        engine_modelled: software_modelled(r),
        host_bound: false,
        out_of_sample: !r.in_fit(),
        source: r.source.clone(),
    }
}

/// Per quantity, over the claim, over the claim's rows that no fit used, and over every row.
fn summaries(cases: &[EnergyCase]) -> Vec<Summary> {
    let mut out = Vec::new();
    for subset in ["claim", "out_of_sample", "all"] {
        for q in [
            Quantity::PowerPerGpu,
            Quantity::EnergyPerToken,
            Quantity::EnergyPerRequest,
            Quantity::Throughput,
            Quantity::NodeWallPower,
        ] {
            let of: Vec<&EnergyCase> = cases
                .iter()
                .filter(|c| {
                    c.quantity == q.name()
                        && match subset {
                            "claim" => c.in_claim(),
                            "out_of_sample" => c.in_claim() && c.out_of_sample,
                            _ => true,
                        }
                })
                .collect();
            out.extend(summarise(&of, q.name(), subset));
        }
    }
    out
}

fn summarise(of: &[&EnergyCase], quantity: &str, subset: &str) -> Option<Summary> {
    let worst_by = |err: fn(&EnergyCase) -> f64| {
        of.iter()
            .max_by(|a, b| err(a).abs().total_cmp(&err(b).abs()))
            .map(|c| (err(c).abs(), c.id.clone()))
    };
    let median_by = |err: fn(&EnergyCase) -> f64| {
        median(&sorted(
            &of.iter().map(|c| err(c).abs()).collect::<Vec<_>>(),
        ))
    };
    let (worst_abs_error, worst) = worst_by(|c| c.error)?;
    let (held_out_worst_abs_error, held_out_worst) = worst_by(|c| c.held_out_error)?;
    Some(Summary {
        quantity: quantity.into(),
        subset: subset.into(),
        rows: of.len(),
        median_abs_error: median_by(|c| c.error)?,
        worst_abs_error,
        worst,
        held_out_median_abs_error: median_by(|c| c.held_out_error)?,
        held_out_worst_abs_error,
        held_out_worst,
    })
}

#[cfg(test)]
mod tests;

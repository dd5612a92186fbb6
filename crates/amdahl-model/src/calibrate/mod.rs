//! `amdahl calibrate`: the model's free constants fitted to the user's measured runs
//! (docs/methodology.md, "Calibration"; docs/usage/calibrate.md).
//!
//! A measured row is a workload the model can predict ([`Workload`]: a training layout, a serving
//! configuration, or a GEMM loop on a profiled device), one measured quantity ([`Quantity`]) and
//! its value. [`calibrate`] fits the time constants ([`TIME_CONSTANTS`]) to the time rows, then,
//! with those fixed, the power model's coefficients ([`POWER_CONSTANTS`]) to the power rows
//! ([`fit`]), and writes the result as an [`Calibration`] (`amdahl.calibration/1`) that
//! [`Calibration::apply`] lays over a device's [`Hardware`] for `plan` and `infer`.

pub mod file;
pub mod fit;
pub mod intervals;
mod linalg;

pub use file::{
    Calibration, Constant, QuantityFit, Refusal, RowError, CALIBRATION_SCHEMA, MODEL_VERSION,
};
pub use fit::{LooMethod, Param};

use crate::infer::{estimate, setup_unchecked, Engine, Requests, Serving};
use crate::plan::{estimate as plan_estimate, Hardware, Layout, ModelShape, Network};
use crate::units::Seconds;
use serde::{Deserialize, Serialize};

/// What a measured row ran.
#[derive(Debug, Clone)]
pub enum Workload {
    /// A training iteration of `layout` (`amdahl plan …`).
    Train {
        model: ModelShape,
        hw: Hardware,
        net: Network,
        layout: Layout,
    },
    /// Serving at a fixed batch (`amdahl infer … --batch B`).
    Serve {
        model: ModelShape,
        hw: Hardware,
        net: Network,
        serving: Serving,
        requests: Requests,
        batch: u32,
    },
    /// One GEMM of `flops` FLOPs on a device whose sustained rate at its precision is `peak`
    /// (the device profile's), timed by the planner's curve: `latency + flops / (efficiency ×
    /// peak)` (plan/hardware.rs, [`crate::plan::GemmCurve`]). This is how a CPU, which the
    /// catalog cannot plan, takes part in the measure → calibrate → predict loop.
    Gemm { flops: f64, peak: f64, hw: Hardware },
}

impl Workload {
    /// The device the workload ran on.
    pub fn hardware(&self) -> &Hardware {
        match self {
            Workload::Train { hw, .. } | Workload::Serve { hw, .. } | Workload::Gemm { hw, .. } => {
                hw
            }
        }
    }
}

/// A measured figure of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Quantity {
    /// Seconds per training iteration, per serving decode step (= TPOT) or per GEMM.
    StepS,
    /// Training: tokens per second of the whole job; serving: output tokens per second.
    TokensPerS,
    TtftS,
    TpotS,
    /// Average power per device in W (GPU scope: the board, as NVML reads it).
    PowerW,
}

impl Quantity {
    pub const ALL: [Quantity; 5] = [
        Quantity::StepS,
        Quantity::TokensPerS,
        Quantity::TtftS,
        Quantity::TpotS,
        Quantity::PowerW,
    ];

    /// Its column in a measured-runs CSV.
    pub fn column(self) -> &'static str {
        match self {
            Quantity::StepS => "step_s",
            Quantity::TokensPerS => "tokens_per_s",
            Quantity::TtftS => "ttft_s",
            Quantity::TpotS => "tpot_s",
            Quantity::PowerW => "power_w",
        }
    }

    pub fn is_power(self) -> bool {
        self == Quantity::PowerW
    }
}

/// One measured row.
#[derive(Debug, Clone)]
pub struct Row {
    /// Where it came from, for messages ("runs.csv line 4").
    pub origin: String,
    pub workload: std::sync::Arc<Workload>,
    pub quantity: Quantity,
    pub measured: f64,
}

/// The time constants, in the order the fit prefers them when two cannot be told apart (the
/// per-step overhead before the serving engine's time per running sequence: at one batch
/// the two add the same time to every step, and the overhead is the better known).
pub const TIME_CONSTANTS: [&str; 5] = [
    "gemm_efficiency",
    "memory_efficiency",
    "kernel_latency_s",
    "step_overhead_s",
    "per_sequence_s",
];
/// The power model's coefficients (crate::power), fitted to the power rows.
pub const POWER_CONSTANTS: [&str; 3] = ["power_active", "power_compute", "power_memory"];

/// The fit's view of the constant `name` on `hw`: its prior (what the model uses now), bounds
/// and scale. `None` for an unknown name.
/// `serving` says the rows are all serving rows, whose model already has a fixed step overhead
/// ([`crate::infer::step::STEP_OVERHEAD_S`]): the overhead's fit starts there, else at none.
/// `engine` is the serving rows' engine (`--engine`), where they share one: the host time per
/// running sequence starts at its figure ([`Engine::per_sequence_s`]), else at none.
pub fn param(name: &str, hw: &Hardware, serving: bool, engine: Option<Engine>) -> Option<Param> {
    let curve = hw.curve();
    let power = hw.power_coefficients();
    let p = |name, what, prior, lower, upper, scale, why| Param {
        name,
        what,
        prior,
        lower,
        upper,
        scale,
        insensitive_because: why,
    };
    Some(match name {
        "gemm_efficiency" => p(
            "gemm_efficiency",
            "GEMM efficiency",
            curve.max_efficiency,
            0.01,
            1.5,
            0.1,
            "no row's time is spent in GEMMs",
        ),
        "memory_efficiency" => p(
            "memory_efficiency",
            "achieved bandwidth fraction",
            curve.memory_efficiency,
            0.01,
            1.5,
            0.1,
            "no row's time is spent streaming memory",
        ),
        "kernel_latency_s" => p(
            "kernel_latency_s",
            "kernel latency",
            curve.latency.get(),
            0.0,
            1e-2,
            1e-5,
            "every row's GEMMs are large",
        ),
        "step_overhead_s" => p(
            "step_overhead_s",
            "per-step overhead",
            hw.step_overhead().map_or(
                if serving {
                    crate::infer::step::STEP_OVERHEAD_S
                } else {
                    0.0
                },
                Seconds::get,
            ),
            0.0,
            1e3,
            1e-3,
            "no row measures a step",
        ),
        "per_sequence_s" => p(
            "per_sequence_s",
            "time per running sequence",
            hw.per_sequence_overhead()
                .map_or(engine.map_or(0.0, Engine::per_sequence_s), Seconds::get),
            0.0,
            1e-1,
            1e-5,
            "no row is served: it is the serving engine's time per running sequence per step",
        ),
        "power_active" => p(
            "power_active",
            "busy power coefficient",
            power.active,
            0.0,
            1.5,
            0.1,
            "no row measures power",
        ),
        "power_compute" => p(
            "power_compute",
            "compute power coefficient",
            power.compute,
            0.0,
            3.0,
            0.1,
            "no power row computes",
        ),
        "power_memory" => p(
            "power_memory",
            "memory power coefficient",
            power.memory,
            0.0,
            3.0,
            0.1,
            "no power row streams memory",
        ),
        _ => return None,
    })
}

/// `hw` with the constants `names` set to `values`.
pub fn tuned(hw: &Hardware, names: &[&str], values: &[f64]) -> Hardware {
    let mut hw = hw.clone();
    set(&mut hw, names, values);
    hw
}

/// Set the constants `names` to `values` on `hw` (unknown names are ignored: the callers take
/// them from [`TIME_CONSTANTS`] and [`POWER_CONSTANTS`]).
pub fn set(hw: &mut Hardware, names: &[&str], values: &[f64]) {
    let mut curve = hw.curve();
    let mut power = hw.power_coefficients();
    let (mut c, mut p) = (false, false);
    for (name, &v) in names.iter().zip(values) {
        match *name {
            "gemm_efficiency" => (curve.max_efficiency, c) = (v, true),
            "memory_efficiency" => (curve.memory_efficiency, c) = (v, true),
            "kernel_latency_s" => (curve.latency, c) = (Seconds(v), true),
            "step_overhead_s" => hw.tuning.step_overhead = Some(Seconds(v)),
            "per_sequence_s" => hw.tuning.per_sequence_overhead = Some(Seconds(v)),
            "power_active" => (power.active, p) = (v, true),
            "power_compute" => (power.compute, p) = (v, true),
            "power_memory" => (power.memory, p) = (v, true),
            _ => {}
        }
    }
    if c {
        hw.tuning.curve = Some(curve);
    }
    if p {
        hw.tuning.power = Some(power);
    }
}

/// The model's prediction of `q` for `w` on `hw` (the workload's own device with constants
/// set); NaN where the workload has no such figure (the caller refuses such rows first).
pub fn predict(w: &Workload, hw: &Hardware, q: Quantity) -> f64 {
    match w {
        Workload::Train {
            model, net, layout, ..
        } => {
            let e = plan_estimate(model, hw, net, layout);
            match q {
                Quantity::StepS => e.step_time.get(),
                Quantity::TokensPerS => e.tokens_per_s,
                Quantity::PowerW => hw.power(&e.activity).get(),
                Quantity::TtftS | Quantity::TpotS => f64::NAN,
            }
        }
        Workload::Serve {
            model,
            net,
            serving,
            requests,
            batch,
            ..
        } => {
            let Ok(s) = setup_unchecked(model, hw, net, *serving, *requests) else {
                return f64::NAN;
            };
            let e = estimate(&s, hw, net, *batch);
            match q {
                Quantity::StepS | Quantity::TpotS => e.tpot_s,
                Quantity::TtftS => e.ttft_s,
                Quantity::TokensPerS => e.output_tokens_per_s,
                Quantity::PowerW => e.power_per_gpu_w,
            }
        }
        Workload::Gemm { flops, peak, .. } => {
            let c = hw.curve();
            match q {
                Quantity::StepS => {
                    c.latency.get()
                        + hw.step_overhead().map_or(0.0, Seconds::get)
                        + flops / (c.max_efficiency * peak)
                }
                _ => f64::NAN,
            }
        }
    }
}

/// The uncalibrated model's prediction of a row.
pub fn predict_row(r: &Row) -> f64 {
    predict(&r.workload, r.workload.hardware(), r.quantity)
}

/// Whether the model gives `q` for `w` at all (training has no TTFT; a GEMM loop only a time).
pub fn predicts(w: &Workload, q: Quantity) -> bool {
    match w {
        Workload::Train { .. } => !matches!(q, Quantity::TtftS | Quantity::TpotS),
        Workload::Serve { .. } => true,
        Workload::Gemm { .. } => q == Quantity::StepS,
    }
}

/// What went wrong with the rows, before any fit.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CalibrateError {
    #[error("{origin}: {field} = {value} is not a positive number of {unit}; fix or drop the row")]
    Measurement {
        origin: String,
        field: &'static str,
        value: f64,
        unit: &'static str,
    },
    #[error("{origin}: the model gives no {field} for this workload ({why}); drop the column or the row")]
    Unpredicted {
        origin: String,
        field: &'static str,
        why: &'static str,
    },
    #[error("{origin}: the model's {field} for this workload is not a number ({why}); check the row's configuration")]
    Unevaluable {
        origin: String,
        field: &'static str,
        why: String,
    },
    #[error("the rows are of {first} and {other} ({origin}): one calibration describes one device; split the file")]
    Devices {
        first: String,
        other: String,
        origin: String,
    },
    #[error("no measured rows: give at least two rows with a measured column (step_s, tokens_per_s, ttft_s, tpot_s, power_w)")]
    Empty,
    #[error("unknown constant `{0}`; the constants are gemm_efficiency, memory_efficiency, kernel_latency_s, step_overhead_s, per_sequence_s, power_active, power_compute, power_memory")]
    UnknownConstant(String),
    #[error("{0}")]
    Unidentifiable(String),
}

/// Check every row before fitting: a positive finite measurement, a quantity the model predicts
/// for its workload, a finite positive prediction, one device for all.
pub fn check_rows(rows: &[Row]) -> Result<(), CalibrateError> {
    let Some(first) = rows.first() else {
        return Err(CalibrateError::Empty);
    };
    let device = &first.workload.hardware().name;
    for r in rows {
        let field = r.quantity.column();
        if !(r.measured.is_finite() && r.measured > 0.0) {
            return Err(CalibrateError::Measurement {
                origin: r.origin.clone(),
                field,
                value: r.measured,
                unit: if r.quantity.is_power() {
                    "watts"
                } else if r.quantity == Quantity::TokensPerS {
                    "tokens per second"
                } else {
                    "seconds"
                },
            });
        }
        if !predicts(&r.workload, r.quantity) {
            return Err(CalibrateError::Unpredicted {
                origin: r.origin.clone(),
                field,
                why: match *r.workload {
                    Workload::Train { .. } => "a training step has no TTFT or TPOT",
                    _ => "a GEMM loop has only a time per GEMM (step_s)",
                },
            });
        }
        let hw = r.workload.hardware();
        let p = predict(&r.workload, hw, r.quantity);
        if !(p.is_finite() && p > 0.0) {
            return Err(CalibrateError::Unevaluable {
                origin: r.origin.clone(),
                field,
                why: format!("predicted {p}"),
            });
        }
        if &hw.name != device {
            return Err(CalibrateError::Devices {
                first: device.clone(),
                other: hw.name.clone(),
                origin: r.origin.clone(),
            });
        }
    }
    Ok(())
}

/// What to fit: the constants asked for (`None`: every constant the rows' quantities touch).
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub constants: Option<Vec<String>>,
}

/// One of the two fits (time, then power): its constants, rows, and outcome.
struct Stage {
    names: Vec<&'static str>,
    rows: Vec<usize>,
    priors: Vec<f64>,
    fit: fit::Fit,
}

/// Fit the constants to `rows` (checked with [`check_rows`]) and build the calibration.
/// `source` names the rows' file in the calibration and its provenance line.
pub fn calibrate(rows: &[Row], req: &Request, source: &str) -> Result<Calibration, CalibrateError> {
    check_rows(rows)?;
    let wanted: Vec<&'static str> = match &req.constants {
        None => TIME_CONSTANTS
            .iter()
            .chain(&POWER_CONSTANTS)
            .copied()
            .collect(),
        Some(names) => names
            .iter()
            .map(|n| {
                TIME_CONSTANTS
                    .iter()
                    .chain(&POWER_CONSTANTS)
                    .find(|c| **c == n.as_str())
                    .copied()
                    .ok_or_else(|| CalibrateError::UnknownConstant(n.clone()))
            })
            .collect::<Result<_, _>>()?,
    };
    let hw0 = rows[0].workload.hardware().clone();
    let time: Vec<&'static str> = wanted
        .iter()
        .copied()
        .filter(|n| TIME_CONSTANTS.contains(n))
        .collect();
    let power: Vec<&'static str> = wanted
        .iter()
        .copied()
        .filter(|n| POWER_CONSTANTS.contains(n))
        .collect();
    let time_rows: Vec<usize> = (0..rows.len())
        .filter(|&i| !rows[i].quantity.is_power())
        .collect();
    let power_rows: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].quantity.is_power())
        .collect();
    let t = stage(rows, &time, &time_rows, &[], &[]);
    let fixed_values: Vec<f64> = t.fit.values.clone();
    let p = stage(rows, &power, &power_rows, &t.names, &fixed_values);
    if req.constants.is_some() {
        let refused: Vec<String> = [&t, &p]
            .iter()
            .flat_map(|s| s.fit.refused.iter().map(|(_, why)| why.clone()))
            .collect();
        if !refused.is_empty() {
            return Err(CalibrateError::Unidentifiable(refused.join("; ")));
        }
    }
    if [&t, &p]
        .iter()
        .all(|s| s.names.len() == s.fit.refused.len())
    {
        let refused: Vec<String> = [&t, &p]
            .iter()
            .flat_map(|s| s.fit.refused.iter().map(|(_, why)| why.clone()))
            .collect();
        return Err(CalibrateError::Unidentifiable(format!(
            "no constant can be fitted to these rows: {}",
            if refused.is_empty() {
                "none was asked for".to_string()
            } else {
                refused.join("; ")
            }
        )));
    }
    let mut cal = file::build(rows, &hw0, &[t_view(&t), t_view(&p)], source);
    if cal.constants.iter().any(|c| c.name == "per_sequence_s") {
        // Fitted only where the serving rows share one engine (else refused): name it, so that
        // `infer --engine` of another engine refuses the calibration.
        cal.engine = serving_engines(rows, &t.rows).first().map(|(e, _)| *e);
    }
    Ok(cal)
}

/// The engines of the serving rows among `idx`, each with the first row that ran it.
fn serving_engines<'a>(rows: &'a [Row], idx: &[usize]) -> Vec<(Engine, &'a str)> {
    let mut out: Vec<(Engine, &str)> = Vec::new();
    for &i in idx {
        if let Workload::Serve { serving, .. } = &*rows[i].workload {
            if !out.iter().any(|(e, _)| *e == serving.engine) {
                out.push((serving.engine, &rows[i].origin));
            }
        }
    }
    out
}

/// Why the serving engine's time per running sequence cannot be fitted to the rows `idx`,
/// known from the rows themselves before any Jacobian (docs/methodology.md, "The fit"):
/// - the serving rows run different engines: the constant replaces one engine's figure
///   ([`Engine::per_sequence_s`]), and one value cannot be two engines' host time;
/// - every serving row is at one batch while the per-step overhead is held at its prior (not
///   among `names`): at batch B the host time adds B·h to every step, which the rows cannot
///   tell from an error of the overhead. When the overhead is fitted too, the Gram–Schmidt test
///   of [`fit`] finds the two columns proportional and refuses the host time the same way.
fn per_sequence_refusal(
    rows: &[Row],
    idx: &[usize],
    engines: &[(Engine, &str)],
    names: &[&str],
    param: &Param,
) -> Option<String> {
    if engines.len() > 1 {
        let list: Vec<String> = engines
            .iter()
            .map(|(e, origin)| format!("{} ({origin})", e.name()))
            .collect();
        return Some(format!(
            "cannot identify {}: the serving rows run different engines, {}, and one time per \
             sequence cannot be both engines'; calibrate each engine's rows in a file of \
             their own",
            param.what,
            list.join(", ")
        ));
    }
    let mut batches: Vec<u32> = idx
        .iter()
        .filter_map(|&i| match &*rows[i].workload {
            Workload::Serve { batch, .. } => Some(*batch),
            _ => None,
        })
        .collect();
    batches.sort_unstable();
    batches.dedup();
    match batches.as_slice() {
        [b] if !names.contains(&"step_overhead_s") => Some(format!(
            "cannot identify {}: every serving row is at batch {b}, where it adds {b} × its value \
             to every step, which the rows cannot tell from an error of the per-step overhead \
             (held at its prior); add serving rows at other batches",
            param.what
        )),
        _ => None,
    }
}

fn t_view(s: &Stage) -> file::StageView<'_> {
    file::StageView {
        names: &s.names,
        rows: &s.rows,
        priors: &s.priors,
        fit: &s.fit,
    }
}

/// Fit `names` on the rows `idx`, with the constants `fixed` already set to `fixed_values`.
fn stage(
    rows: &[Row],
    names: &[&'static str],
    idx: &[usize],
    fixed: &[&'static str],
    fixed_values: &[f64],
) -> Stage {
    let names: Vec<&'static str> = names.to_vec();
    let hw0 = tuned(rows[0].workload.hardware(), fixed, fixed_values);
    let serving = idx
        .iter()
        .all(|&i| matches!(*rows[i].workload, Workload::Serve { .. }));
    let engines = serving_engines(rows, idx);
    let engine = match engines.as_slice() {
        [(e, _)] => Some(*e),
        _ => None,
    };
    let params: Vec<Param> = names
        .iter()
        .filter_map(|n| param(n, &hw0, serving, engine))
        .collect();
    let preset: Vec<(usize, String)> = params
        .iter()
        .position(|p| p.name == "per_sequence_s")
        .and_then(|k| {
            per_sequence_refusal(rows, idx, &engines, &names, &params[k]).map(|why| (k, why))
        })
        .into_iter()
        .collect();
    let measured: Vec<f64> = idx.iter().map(|&i| rows[i].measured).collect();
    let predict = |x: &[f64], k: usize| {
        let r = &rows[idx[k]];
        let mut hw = tuned(r.workload.hardware(), fixed, fixed_values);
        set(&mut hw, &names, x);
        predict(&r.workload, &hw, r.quantity)
    };
    let mut fit = if idx.is_empty() {
        fit::none_measured(&params, if fixed.is_empty() { "time" } else { "power" })
    } else {
        fit::fit_refusing(&params, preset, &measured, &predict)
    };
    // "Before" is the model as shipped, not the fit's starting point (which sets every constant,
    // the per-step overhead included, to one value for all rows).
    fit.before = idx
        .iter()
        .map(|&i| {
            let r = &rows[i];
            predict_row(r) / r.measured - 1.0
        })
        .collect();
    Stage {
        priors: params.iter().map(|p| p.prior).collect(),
        names,
        rows: idx.to_vec(),
        fit,
    }
}

#[cfg(test)]
mod tests;

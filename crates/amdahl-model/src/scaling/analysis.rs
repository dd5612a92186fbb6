//! From a parsed [`Dataset`] to the [`FitResult`] every renderer draws: per-point speedup,
//! efficiency, α_eff and Karp–Flatt e; every model fitted; the choice by AICc; the Karp–Flatt
//! trend; predictions; and the phase decomposition when phase times were given.

use super::decompose::{decompose, Decomposition};
use super::error::ScalingError;
use super::input::{Dataset, Measure, Row, Series};
use super::laws;
use super::models::{fit, ModelFit, ModelKind, Skipped};
use super::whatif::{WhatIf, WhatIfResult};
use serde::{Deserialize, Serialize};

/// The `schema` field of [`FitResult`].
pub const SCHEMA: &str = "amdahl.fit/1";

/// Differences in AICc below this are not evidence (Burnham & Anderson 2002, §2.6: Δ ≤ 2 means
/// "substantial support" for both); the model with fewer parameters is then preferred.
pub const AICC_TIE: f64 = 2.0;

/// A Karp–Flatt slope is called rising or falling when it is this many standard errors from 0
/// (≈ 95 % two-sided for a normal estimate).
pub const TREND_SIGMAS: f64 = 2.0;

/// How the analysis is run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FitOptions {
    /// Reference run: speedup S = T(N0)/T(N), p = N/N0. Default: the smallest measured N for
    /// `time`/`throughput`, 1 for `speedup`/`efficiency`/`rmax`.
    pub baseline_n: Option<f64>,
    /// Processor counts to predict at with the chosen model.
    pub predict: Vec<f64>,
    /// What N counts, when the input does not say (overrides nothing the file states).
    pub n_counts: Option<String>,
    /// Végh's what-if applied to the chosen model's 1−α at the largest predicted (else
    /// measured) N.
    pub what_if: Option<WhatIfSpec>,
}

/// The what-if question without N and 1−α, which come from the fit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WhatIfSpec {
    /// Speed-up of the parallel part.
    pub k: f64,
    /// Share of 1−α that is communication, in [0, 1].
    pub comm_share: f64,
    /// Factor on the communication bytes (fp32 → bf16: 0.5).
    pub bytes_ratio: f64,
}

/// A what-if evaluated for one series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WhatIfAt {
    pub n: f64,
    pub spec: WhatIfSpec,
    pub result: WhatIfResult,
}

/// One measured run, analysed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PointResult {
    pub n: f64,
    /// N/N0.
    pub p: f64,
    pub speedup: f64,
    pub efficiency: f64,
    /// α_eff = (p/(p−1))·(S−1)/S (Végh); None at the baseline.
    pub alpha_eff: Option<f64>,
    /// e = (1/S − 1/p)/(1 − 1/p) (Karp & Flatt 1990) = 1 − α_eff; None at the baseline.
    pub karp_flatt: Option<f64>,
    /// The input value (time, throughput, speedup, efficiency or Rmax/Rpeak).
    pub value: f64,
}

/// Karp–Flatt trend of e against N.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Trend {
    /// A true serial part: Amdahl's law holds.
    Constant,
    /// Overhead that grows with N (communication, synchronisation).
    Rising,
    /// Superlinear effects (caches) or a baseline with its own overhead.
    Falling,
    /// Not tested: fewer than three points beyond the baseline (or all at one N), so there is no
    /// slope to test. Never reported as `constant`, which would claim Amdahl's law holds.
    Untested,
}

/// A prediction of the chosen model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Prediction {
    pub n: f64,
    pub speedup: f64,
    pub efficiency: f64,
    pub alpha_eff: Option<f64>,
}

/// The analysis of one labelled series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SeriesResult {
    pub label: String,
    pub n_counts: Option<String>,
    pub measure: Measure,
    pub baseline_n: f64,
    pub points: Vec<PointResult>,
    pub models: Vec<ModelFit>,
    pub skipped: Vec<Skipped>,
    pub chosen_model: ModelKind,
    pub choice_reason: String,
    /// The chosen model's 1−α.
    pub serial_fraction: f64,
    pub s_max: Option<f64>,
    pub n_half: Option<f64>,
    pub n_opt: Option<f64>,
    pub trend: Trend,
    /// Slope of e against N and its standard error (None with fewer than 3 points beyond N0).
    pub trend_slope: Option<f64>,
    pub trend_slope_stderr: Option<f64>,
    pub predictions: Vec<Prediction>,
    pub decomposition: Option<Decomposition>,
    pub what_if: Option<WhatIfAt>,
}

impl SeriesResult {
    /// The chosen model's fit.
    pub fn chosen(&self) -> Option<&ModelFit> {
        self.models.iter().find(|m| m.model == self.chosen_model)
    }
}

/// The whole `amdahl fit` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FitResult {
    pub schema: String,
    /// Where the data came from (file name or built-in data set), when known.
    pub source: Option<String>,
    pub series: Vec<SeriesResult>,
}

/// Analyse every series of a dataset.
pub fn analyse(d: &Dataset, opts: &FitOptions) -> Result<FitResult, ScalingError> {
    for &n in &opts.predict {
        if !(n >= 1.0 && n.is_finite()) {
            return Err(ScalingError::Argument {
                name: "predict".into(),
                value: n,
                message: "predict at N ≥ 1".into(),
            });
        }
    }
    let series = d
        .series
        .iter()
        .map(|s| analyse_series(d, s, opts))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(FitResult {
        schema: SCHEMA.into(),
        source: None,
        series,
    })
}

fn analyse_series(
    d: &Dataset,
    s: &Series,
    opts: &FitOptions,
) -> Result<SeriesResult, ScalingError> {
    let n0 = baseline_n(d, s, opts)?;
    let r0 = baseline_rate(d, s, n0)?;
    let points = point_results(d.measure, s, n0, r0);
    let ns: Vec<f64> = s.rows.iter().map(|r| r.n).collect();
    let ts: Vec<f64> = s
        .rows
        .iter()
        .map(|r| 1.0 / rate(d.measure, r, n0))
        .collect();
    let (models, skipped) = fit_all(&s.label, &ns, &ts, n0)?;
    let (chosen_idx, choice_reason) = choose(&models);
    let chosen = &models[chosen_idx];
    let (trend, trend_slope, trend_slope_stderr) = trend(&points);
    let predictions = predictions_at(opts, chosen, n0);
    let decomposition = phase_decomposition(d, s, n0);
    let what_if = what_if_at(opts, &s.label, &ns, n0, chosen)?;
    Ok(SeriesResult {
        what_if,
        label: s.label.clone(),
        n_counts: d.n_counts.clone().or_else(|| opts.n_counts.clone()),
        measure: d.measure,
        baseline_n: n0,
        points,
        chosen_model: chosen.model,
        serial_fraction: chosen.serial_fraction,
        s_max: chosen.s_max,
        n_half: chosen.n_half,
        n_opt: chosen.n_opt,
        choice_reason,
        models,
        skipped,
        trend,
        trend_slope,
        trend_slope_stderr,
        predictions,
        decomposition,
    })
}

/// Whether the measure is absolute (time, throughput), so that the baseline is a measured run;
/// speedup, efficiency and Rmax are already relative to one.
fn measured_baseline(m: Measure) -> bool {
    matches!(m, Measure::Time | Measure::Throughput)
}

/// N0: `--baseline-n`, else the smallest measured N for an absolute measure, else 1.
fn baseline_n(d: &Dataset, s: &Series, opts: &FitOptions) -> Result<f64, ScalingError> {
    let min_n = s.rows.iter().map(|r| r.n).fold(f64::INFINITY, f64::min);
    let n0 = opts.baseline_n.unwrap_or(if measured_baseline(d.measure) {
        min_n
    } else {
        1.0
    });
    if n0.is_nan() || n0 < 1.0 {
        return Err(ScalingError::Argument {
            name: "baseline-n".into(),
            value: n0,
            message: "the baseline N must be ≥ 1".into(),
        });
    }
    Ok(n0)
}

/// A run's rate, so that every measure compares the same way: rate ∝ 1/time; for
/// speedup/efficiency inputs the baseline rate is 1 by definition.
fn rate(m: Measure, r: &Row, n0: f64) -> f64 {
    match m {
        Measure::Time => 1.0 / r.value,
        Measure::Throughput | Measure::Speedup => r.value,
        Measure::Efficiency | Measure::Rmax => r.value * r.n / n0,
    }
}

/// The rate speedups are relative to: the run at N0 for an absolute measure (an error when
/// there is none), else 1.
fn baseline_rate(d: &Dataset, s: &Series, n0: f64) -> Result<f64, ScalingError> {
    if !measured_baseline(d.measure) {
        return Ok(1.0);
    }
    let base = s
        .rows
        .iter()
        .find(|r| r.n == n0)
        .ok_or(ScalingError::BaselineMissing {
            label: s.label.clone(),
            n: n0,
        })?;
    Ok(rate(d.measure, base, n0))
}

/// Every run's speedup, efficiency, α_eff and Karp–Flatt e against the baseline (`r0`: its
/// rate); the last two are undefined at p = 1.
fn point_results(m: Measure, s: &Series, n0: f64, r0: f64) -> Vec<PointResult> {
    s.rows
        .iter()
        .map(|r| {
            let p = r.n / n0;
            let speedup = rate(m, r, n0) / r0;
            let defined = (p - 1.0).abs() > 1e-12;
            PointResult {
                n: r.n,
                p,
                speedup,
                efficiency: speedup / p,
                alpha_eff: defined.then(|| laws::alpha_eff_from_speedup(p, speedup)),
                karp_flatt: defined.then(|| laws::karp_flatt(p, speedup)),
                value: r.value,
            }
        })
        .collect()
}

/// The chosen model's speedup and efficiency at every `--predict` N.
fn predictions_at(opts: &FitOptions, chosen: &ModelFit, n0: f64) -> Vec<Prediction> {
    opts.predict
        .iter()
        .map(|&n| {
            let sp = chosen.speedup(n, n0);
            let p = n / n0;
            Prediction {
                n,
                speedup: sp,
                efficiency: sp / p,
                alpha_eff: ((p - 1.0).abs() > 1e-12).then(|| laws::alpha_eff_from_speedup(p, sp)),
            }
        })
        .collect()
}

/// Where the time goes by phase; only phase times of a time measure can be decomposed.
fn phase_decomposition(d: &Dataset, s: &Series, n0: f64) -> Option<Decomposition> {
    if d.phase_names.is_empty() || d.measure != Measure::Time {
        return None;
    }
    let runs: Vec<(f64, Vec<f64>)> = s.rows.iter().map(|r| (r.n, r.phases.clone())).collect();
    decompose(&d.phase_names, n0, &runs)
}

/// Every scaling model fitted to the series (`ns`, `ts`: counts and times), and the ones that
/// could not be with the reason; an error when none could.
fn fit_all(
    label: &str,
    ns: &[f64],
    ts: &[f64],
    n0: f64,
) -> Result<(Vec<ModelFit>, Vec<Skipped>), ScalingError> {
    let mut models = Vec::new();
    let mut skipped = Vec::new();
    for kind in ModelKind::ALL {
        match fit(kind, ns, ts, n0) {
            Ok(m) => models.push(m),
            Err(sk) => skipped.push(sk),
        }
    }
    if models.is_empty() {
        let reasons = skipped
            .iter()
            .map(|k| format!("{}: {}", k.model.name(), k.reason))
            .collect::<Vec<_>>()
            .join("; ");
        return Err(ScalingError::NoModelFits {
            label: display_label(label),
            reasons,
        });
    }
    Ok((models, skipped))
}

/// The what-if of `--what-if` at the largest N measured or predicted, from the chosen model's
/// serial fraction there.
fn what_if_at(
    opts: &FitOptions,
    label: &str,
    ns: &[f64],
    n0: f64,
    chosen: &ModelFit,
) -> Result<Option<WhatIfAt>, ScalingError> {
    Ok(match opts.what_if {
        None => None,
        Some(spec) => {
            let n = opts
                .predict
                .iter()
                .copied()
                .fold(ns.iter().copied().fold(0.0, f64::max), f64::max);
            // 1−α at that N from the chosen model's Karp–Flatt value (equals σ-like constants
            // for Amdahl; includes the growing overhead for the others).
            let p = n / n0;
            let speedup = chosen.speedup(n, n0);
            let serial = laws::karp_flatt(p, speedup);
            // A retrograde fit (USL past its peak) can predict a speed-up below 1 far out, where
            // Karp–Flatt's e exceeds 1: say so in the user's terms, not the what-if's argument.
            if serial.is_nan() || serial >= 1.0 {
                return Err(ScalingError::WhatIfBeyondFit {
                    label: display_label(label),
                    model: chosen.model.name().into(),
                    n,
                    speedup,
                });
            }
            let result = WhatIf {
                n: p,
                serial,
                k: spec.k,
                comm_share: spec.comm_share,
                bytes_ratio: spec.bytes_ratio,
            }
            .evaluate()?;
            Some(WhatIfAt { n, spec, result })
        }
    })
}

fn display_label(l: &str) -> String {
    if l.is_empty() {
        "(unlabelled)".into()
    } else {
        l.into()
    }
}

/// Model choice: the lowest AICc among physically meaningful fits; a model with fewer parameters
/// within [`AICC_TIE`] of the best is preferred (parsimony). Without AICc (too few points) the
/// simplest physical fit is taken; if no fit is physical, the lowest relative RSS.
fn choose(models: &[ModelFit]) -> (usize, String) {
    let k = |m: &ModelFit| m.params.len();
    let with_aicc: Vec<(usize, f64)> = models
        .iter()
        .enumerate()
        .filter(|(_, m)| m.physical)
        .filter_map(|(i, m)| m.aicc.map(|a| (i, a)))
        .collect();
    if let Some(&(best, best_a)) = with_aicc.iter().min_by(|a, b| a.1.total_cmp(&b.1)) {
        let pick = with_aicc
            .iter()
            .filter(|(_, a)| *a - best_a <= AICC_TIE)
            .min_by(|x, y| {
                k(&models[x.0])
                    .cmp(&k(&models[y.0]))
                    .then(x.1.total_cmp(&y.1))
            })
            .map_or(best, |x| x.0);
        let others: Vec<String> = with_aicc
            .iter()
            .filter(|(i, _)| *i != pick)
            .map(|(i, a)| {
                format!(
                    "{} {:+.2}",
                    models[*i].model.name(),
                    a - models[pick].aicc.unwrap_or(best_a)
                )
            })
            .collect();
        let mut why = if pick == best {
            format!("lowest AICc ({:.2})", best_a)
        } else {
            format!(
                "fewest parameters within ΔAICc ≤ {AICC_TIE} of the best ({} at {:.2})",
                models[best].model.name(),
                best_a
            )
        };
        if !others.is_empty() {
            why.push_str(&format!("; ΔAICc of others: {}", others.join(", ")));
        }
        let unphysical: Vec<&str> = models
            .iter()
            .filter(|m| !m.physical)
            .map(|m| m.model.name())
            .collect();
        if !unphysical.is_empty() {
            why.push_str(&format!(
                "; not considered (a parameter < 0 beyond 2 standard errors): {}",
                unphysical.join(", ")
            ));
        }
        return (pick, why);
    }
    if let Some((i, _)) = models
        .iter()
        .enumerate()
        .filter(|(_, m)| m.physical)
        .min_by_key(|(_, m)| k(m))
    {
        return (
            i,
            "too few points for AICc; the simplest physically meaningful fit".into(),
        );
    }
    let i = models
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.rss_rel.total_cmp(&b.1.rss_rel))
        .map_or(0, |x| x.0);
    (
        i,
        "no fit is physically meaningful; lowest relative residuals (treat with care)".into(),
    )
}

/// Ordinary least-squares slope of e against N with its standard error; `rising`/`falling` when
/// the slope is more than [`TREND_SIGMAS`] standard errors from zero.
fn trend(points: &[PointResult]) -> (Trend, Option<f64>, Option<f64>) {
    let xy: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| p.karp_flatt.map(|e| (p.n, e)))
        .filter(|(_, e)| e.is_finite())
        .collect();
    let m = xy.len() as f64;
    if xy.len() < 3 {
        return (Trend::Untested, None, None);
    }
    let mx = xy.iter().map(|v| v.0).sum::<f64>() / m;
    let my = xy.iter().map(|v| v.1).sum::<f64>() / m;
    let sxx: f64 = xy.iter().map(|v| (v.0 - mx).powi(2)).sum();
    let sxy: f64 = xy.iter().map(|v| (v.0 - mx) * (v.1 - my)).sum();
    if sxx.is_nan() || sxx <= 0.0 {
        return (Trend::Untested, None, None);
    }
    let slope = sxy / sxx;
    let rss: f64 = xy
        .iter()
        .map(|v| (v.1 - my - slope * (v.0 - mx)).powi(2))
        .sum();
    let se = (rss / (m - 2.0) / sxx).sqrt();
    let scale = my.abs().max(f64::MIN_POSITIVE);
    let t = if se > 1e-12 * scale / sxx.sqrt() {
        slope / se
    } else if slope.abs() * sxx.sqrt() > 1e-9 * scale {
        slope.signum() * f64::INFINITY
    } else {
        0.0
    };
    let tr = if t > TREND_SIGMAS {
        Trend::Rising
    } else if t < -TREND_SIGMAS {
        Trend::Falling
    } else {
        Trend::Constant
    };
    (tr, Some(slope), Some(se))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaling::input::parse_csv;

    #[test]
    fn baseline_other_than_one() {
        // T(N) = 1 + 99·8/N measured from N0 = 8: S = T(8)/T(N), p = N/8.
        let mut csv = String::from("n,time\n");
        for n in [8, 16, 32, 64, 128] {
            csv.push_str(&format!("{n},{}\n", 1.0 + 792.0 / n as f64));
        }
        let d = parse_csv(&csv).unwrap();
        let r = analyse(&d, &FitOptions::default()).unwrap();
        let s = &r.series[0];
        assert_eq!(s.baseline_n, 8.0);
        let pt = &s.points[2];
        assert_eq!(pt.p, 4.0);
        let sp = 100.0 / (1.0 + 792.0 / 32.0);
        assert!((pt.speedup - sp).abs() < 1e-12);
        assert!((pt.karp_flatt.unwrap() - laws::karp_flatt(4.0, sp)).abs() < 1e-15);
        // Serial fraction against the baseline time T(8) = 100: 1/100, constant → Amdahl.
        assert_eq!(s.chosen_model, ModelKind::Amdahl);
        assert!((s.serial_fraction - 0.01).abs() < 1e-9);
        assert_eq!(s.trend, Trend::Constant);
        let opts = FitOptions {
            baseline_n: Some(3.0),
            ..Default::default()
        };
        assert!(matches!(
            analyse(&d, &opts),
            Err(ScalingError::BaselineMissing { .. })
        ));
    }

    #[test]
    fn rising_karp_flatt_is_detected() {
        let mut csv = String::from("n,time\n");
        for n in [1.0f64, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0] {
            csv.push_str(&format!("{n},{}\n", 0.01 + 1.0 / n + 0.002 * n));
        }
        let r = analyse(&parse_csv(&csv).unwrap(), &FitOptions::default()).unwrap();
        assert_eq!(r.series[0].trend, Trend::Rising);
        assert!(matches!(
            r.series[0].chosen_model,
            ModelKind::AmdahlLinear | ModelKind::Usl
        ));
    }

    #[test]
    fn too_few_points_is_an_error_naming_the_models() {
        let d = parse_csv("n,time\n1,1\n2,0.6\n").unwrap();
        let e = analyse(&d, &FitOptions::default()).unwrap_err();
        assert!(e.to_string().contains("amdahl: needs at least 3"), "{e}");
    }
}

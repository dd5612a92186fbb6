//! `amdahl bench scaling`: a real kernel at 1..P threads — the fp32 GEMM and one training step
//! of a small MLP — with speedup, efficiency and the Karp–Flatt serial fraction per thread count.
//!
//! Karp & Flatt (CACM 33(5), 1990): e(p) = (1/S − 1/p)/(1 − 1/p), identical to Végh's 1 − α_eff.
//! A constant e as p grows means Amdahl's law describes the kernel; a rising e means overhead
//! that grows with p (synchronisation, memory bandwidth). The law itself — α_eff, the trend of e
//! with its standard error, the model chosen by AICc and its predictions at larger P — comes from
//! `amdahl_model::scaling`'s fitter, fed with [`ScalingSeries::samples`] (see [`analyze`]).

use crate::energy::{EnergyReading, EnergyStatus};
use crate::error::{BenchError, Result};
use crate::kernels::{matmul, Exec, Rng, View};
use crate::machine::{available_memory, check_fits, MachineInfo, Threads};
use crate::mlp::{Mlp, MlpShape};
use crate::stats::Stats;
use crate::Hooks;
use amdahl_model::scaling::analysis::{Prediction, Trend};
use amdahl_model::scaling::input::{Dataset, Measure, Row, Series};
use amdahl_model::scaling::laws::karp_flatt;
use amdahl_model::scaling::models::ModelKind;
use amdahl_model::scaling::{analyse, FitOptions, ScalingError};
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "amdahl.bench.scaling/1";

#[derive(Debug, Clone)]
pub struct ScalingConfig {
    /// Largest thread count P.
    pub threads: Threads,
    /// Order of the fp32 GEMM.
    pub gemm_n: usize,
    pub mlp: MlpShape,
    pub warmup: usize,
    pub repeats: usize,
}

impl ScalingConfig {
    pub fn full(threads: Threads) -> Self {
        Self {
            threads,
            gemm_n: 1024,
            mlp: MlpShape::full(),
            warmup: 1,
            repeats: 5,
        }
    }

    pub fn quick(threads: Threads) -> Self {
        Self {
            gemm_n: 128,
            mlp: MlpShape::quick(),
            repeats: 3,
            ..Self::full(threads)
        }
    }
}

/// One thread count of one kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScalingPoint {
    pub threads: usize,
    pub seconds: Stats,
    /// T(1)/T(p) on median times.
    pub speedup: f64,
    /// speedup / p.
    pub efficiency: f64,
    /// Karp–Flatt e(p); `None` at p = 1 where it is undefined.
    pub karp_flatt: Option<f64>,
    /// α_eff = 1 − e(p) (Végh); `None` at p = 1.
    pub alpha_eff: Option<f64>,
    /// Energy per run and per FLOP at this thread count; `None` when not measured.
    pub energy: Option<EnergyReading>,
}

/// What the scaling-law fitter (`amdahl_model::scaling::analyse`) concluded for one series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScalingFit {
    /// The model chosen by AICc (Amdahl, Amdahl + log₂ N, Amdahl + N, USL).
    pub model: ModelKind,
    pub formula: String,
    /// Why this model (AICc differences, parsimony).
    pub choice_reason: String,
    /// The chosen model's 1 − α at one thread.
    pub serial_fraction: f64,
    /// α_eff = 1 − `serial_fraction`.
    pub alpha_eff: f64,
    /// Trend of the per-point Karp–Flatt e against N; `None` when fewer than three points
    /// beyond one thread leave it undetermined (the fitter's slope needs a residual).
    pub trend: Option<Trend>,
    /// Least-squares slope of e against N and its standard error.
    pub trend_slope: Option<f64>,
    pub trend_slope_stderr: Option<f64>,
    /// The chosen model's speedup and efficiency at 2P, 4P, 8P, 16P and 64P.
    pub predicted: Vec<Prediction>,
    /// N where the chosen model's efficiency falls to 50 %.
    pub half_efficiency_threads: Option<f64>,
    /// N where the chosen model's throughput peaks (a cost growing with N), when it does.
    pub peak_threads: Option<f64>,
}

/// The fit of one series, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScalingAnalysis {
    /// What N counts: "threads".
    pub n_counts: String,
    pub fit: Option<ScalingFit>,
    /// Why no model was fitted ("no fit possible with 2 points; per-point Karp–Flatt only
    /// (…the fitter's reasons…)"); `None` when `fit` is there.
    pub no_fit: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScalingSeries {
    /// "gemm fp32 n=1024" or "mlp step 784-512-512-10 batch 256".
    pub kernel: String,
    /// FLOPs per run (GEMM: 2n³; MLP: its GEMMs, see `MlpShape::gemm_flops`).
    pub work: f64,
    pub points: Vec<ScalingPoint>,
    pub analysis: ScalingAnalysis,
}

impl ScalingSeries {
    /// Attach the energy measured at each thread count, in the order of the points.
    fn with_energy(mut self, energy: Vec<Option<EnergyReading>>) -> Self {
        for (p, e) in self.points.iter_mut().zip(energy) {
            p.energy = e;
        }
        self
    }

    /// Per-point speedup and Karp–Flatt from (threads, times), and the fitter's analysis.
    pub fn new(kernel: String, work: f64, times: &[(usize, Stats)]) -> Self {
        let mut s = Self {
            kernel,
            work,
            points: points_from_times(times),
            analysis: ScalingAnalysis {
                n_counts: N_COUNTS.into(),
                fit: None,
                no_fit: None,
            },
        };
        s.analysis = analyze(&s.kernel, &s.samples());
        s
    }

    /// (threads, median seconds) pairs: the input the scaling-law fitter takes.
    pub fn samples(&self) -> Vec<(f64, f64)> {
        self.points
            .iter()
            .map(|p| (p.threads as f64, p.seconds.median.0))
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScalingReport {
    pub schema: String,
    pub machine: MachineInfo,
    pub debug_build: bool,
    pub series: Vec<ScalingSeries>,
    /// The energy sensors used, or why energy was not measured.
    pub energy: EnergyStatus,
}

/// Thread counts measured: every p in 1..=P up to 16, then powers of two and P itself.
pub fn thread_counts(max: usize) -> Vec<usize> {
    let max = max.max(1);
    let mut v: Vec<usize> = (1..=max.min(16)).collect();
    let mut p = 32;
    while p < max {
        v.push(p);
        p *= 2;
    }
    if v.last() != Some(&max) {
        v.push(max);
    }
    v
}

/// Speedup, efficiency and Karp–Flatt per point from (threads, seconds) — the baseline is the
/// point with the fewest threads, so a series starting at p0 > 1 uses p/p0 (Karp–Flatt against
/// a baseline, see `karp_flatt`'s docs).
pub fn points_from_times(samples: &[(usize, Stats)]) -> Vec<ScalingPoint> {
    let Some(&(p0, base)) = samples.iter().min_by_key(|(p, _)| *p) else {
        return Vec::new();
    };
    samples
        .iter()
        .map(|&(p, seconds)| {
            let speedup = base.median.0 / seconds.median.0;
            let rel = p as f64 / p0.max(1) as f64;
            let e = (rel > 1.0).then(|| karp_flatt(rel, speedup));
            ScalingPoint {
                threads: p,
                seconds,
                speedup,
                efficiency: speedup / rel,
                karp_flatt: e,
                alpha_eff: e.map(|e| 1.0 - e),
                energy: None,
            }
        })
        .collect()
}

/// Multiples of the largest measured thread count P at which the fitted model is evaluated.
const PREDICT_AT: [f64; 5] = [2.0, 4.0, 8.0, 16.0, 64.0];

/// What N counts in every scaling series here (printed next to every α_eff).
pub const N_COUNTS: &str = "threads";

/// The series as the fitter's input: strong scaling, the median time at each thread count.
pub fn dataset(label: &str, samples: &[(f64, f64)]) -> Dataset {
    Dataset {
        measure: Measure::Time,
        n_counts: Some(N_COUNTS.into()),
        phase_names: Vec::new(),
        series: vec![Series {
            label: label.into(),
            rows: samples
                .iter()
                .enumerate()
                .map(|(i, &(n, t))| Row {
                    row: i + 1,
                    n,
                    value: t,
                    phases: Vec::new(),
                })
                .collect(),
        }],
    }
}

/// Fit the (threads, median seconds) samples with `amdahl_model::scaling::analyse`: every model,
/// the AICc choice, the Karp–Flatt trend and predictions at 2P…64P. With too few thread counts
/// for any model (a 2-core machine measures 1 and 2 threads only) the fitter's reason is kept
/// instead of a number.
pub fn analyze(label: &str, samples: &[(f64, f64)]) -> ScalingAnalysis {
    let no_fit = |why: String| ScalingAnalysis {
        n_counts: N_COUNTS.into(),
        fit: None,
        no_fit: Some(why),
    };
    // The input parser refuses these; the dataset is built directly, so check here.
    if let Some(&(n, t)) = samples.iter().find(|(_, t)| !(t.is_finite() && *t > 0.0)) {
        return no_fit(format!(
            "no fit: the median time at {n} threads is {t} s (not a positive time); per-point \
             Karp–Flatt only"
        ));
    }
    let pmax = samples.iter().map(|s| s.0).fold(1.0, f64::max);
    let opts = FitOptions {
        predict: PREDICT_AT.iter().map(|k| k * pmax).collect(),
        n_counts: Some(N_COUNTS.into()),
        ..FitOptions::default()
    };
    let result = analyse(&dataset(label, samples), &opts);
    let series = match result {
        Ok(r) => r.series.into_iter().next(),
        Err(ScalingError::NoModelFits { reasons, .. }) => {
            return no_fit(format!(
                "no fit possible with {} points; per-point Karp–Flatt only ({reasons})",
                samples.len()
            ))
        }
        Err(e) => return no_fit(format!("no fit: {e}; per-point Karp–Flatt only")),
    };
    let Some(s) = series else {
        return no_fit("no fit: the fitter returned no series; per-point Karp–Flatt only".into());
    };
    let formula = s.chosen().map(|m| m.formula.clone()).unwrap_or_default();
    ScalingAnalysis {
        n_counts: N_COUNTS.into(),
        no_fit: None,
        fit: Some(ScalingFit {
            model: s.chosen_model,
            formula,
            choice_reason: s.choice_reason,
            serial_fraction: s.serial_fraction,
            alpha_eff: 1.0 - s.serial_fraction,
            trend: s.trend_slope.map(|_| s.trend),
            trend_slope: s.trend_slope,
            trend_slope_stderr: s.trend_slope_stderr,
            predicted: s.predictions,
            half_efficiency_threads: s.n_half,
            peak_threads: s.n_opt,
        }),
    }
}

pub fn run(cfg: &ScalingConfig, hooks: &mut Hooks<'_>) -> Result<ScalingReport> {
    let n = cfg.gemm_n;
    if n == 0 {
        return Err(BenchError::NotPositive {
            what: "--sizes",
            value: 0,
        });
    }
    let need = (n as u64)
        .checked_mul(n as u64)
        .and_then(|x| x.checked_mul(12))
        .ok_or_else(|| BenchError::TooLarge {
            what: format!("scaling GEMM at n = {n}"),
            detail: "n² overflows".into(),
        })?;
    check_fits(&format!("fp32 GEMM at n = {n}"), need, available_memory())?;
    let counts = thread_counts(cfg.threads.used);
    let total = 2 * counts.len();
    let mut done = 0;

    let mut rng = Rng::new(3);
    let a: Vec<f32> = (0..n * n).map(|_| rng.unit() as f32).collect();
    let b: Vec<f32> = (0..n * n).map(|_| rng.unit() as f32).collect();
    let mut c = vec![0.0f32; n * n];
    let (gemm_work, mlp_work) = (2.0 * (n as f64).powi(3), cfg.mlp.gemm_flops());
    let (mut gemm_times, mut gemm_energy) = (Vec::new(), Vec::new());
    let (mut mlp_times, mut mlp_energy) = (Vec::new(), Vec::new());
    let mut mlp = Mlp::new(cfg.mlp.clone(), 9)?;
    for &p in &counts {
        let exec = Exec::new(p)?;
        hooks.step(done, total, format!("gemm fp32 n={n}, {p} thread(s)"));
        let mut err = None;
        let (s, en) = hooks.measure(cfg.warmup, cfg.repeats, gemm_work, "J/FLOP", || {
            if let Err(e) = matmul(
                &exec,
                &mut c,
                View::col_major(&a, n, n),
                View::col_major(&b, n, n),
                1.0,
            ) {
                err = Some(e);
            }
        });
        gemm_times.push((p, s));
        gemm_energy.push(en);
        done += 1;
        hooks.step(done, total, format!("mlp step, {p} thread(s)"));
        let (s, en) = hooks.measure(cfg.warmup, cfg.repeats, mlp_work, "J/FLOP", || {
            if let Err(e) = mlp.step(&exec) {
                err = Some(e);
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        mlp_times.push((p, s));
        mlp_energy.push(en);
        done += 1;
    }
    hooks.step(total, total, "done");
    let widths: Vec<String> = cfg.mlp.widths.iter().map(|w| w.to_string()).collect();
    let measured = gemm_energy
        .iter()
        .chain(&mlp_energy)
        .filter(|e| e.is_some())
        .count();
    let energy = hooks.energy_status(measured, gemm_energy.len() + mlp_energy.len());
    Ok(ScalingReport {
        schema: SCHEMA.into(),
        machine: MachineInfo::detect(cfg.threads),
        debug_build: crate::DEBUG_BUILD,
        series: vec![
            ScalingSeries::new(format!("gemm fp32 n={n}"), gemm_work, &gemm_times)
                .with_energy(gemm_energy),
            ScalingSeries::new(
                format!("mlp step {} batch {}", widths.join("-"), cfg.mlp.batch),
                mlp_work,
                &mlp_times,
            )
            .with_energy(mlp_energy),
        ],
        energy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdahl_model::units::Seconds;

    fn st(t: f64) -> Stats {
        Stats {
            min: Seconds(t),
            median: Seconds(t),
            max: Seconds(t),
            repeats: 1,
        }
    }

    fn series(times: &[(usize, Stats)]) -> ScalingSeries {
        ScalingSeries::new("synthetic".into(), 1.0, times)
    }

    /// T(p) = T1·(s + (1−s)/p) is Amdahl-shaped with serial fraction s: Karp–Flatt recovers s at
    /// every p, and the fitter chooses Amdahl with 1 − α = s, a constant trend and Amdahl's
    /// efficiency 1/(N·s + 1 − s) at larger N.
    #[test]
    fn the_scaling_fit_on_a_synthetic_amdahl_series_recovers_its_serial_fraction() {
        let s = 0.07;
        let times: Vec<(usize, Stats)> = (1..=32)
            .map(|p| (p, st(2.5 * (s + (1.0 - s) / p as f64))))
            .collect();
        let r = series(&times);
        for p in r.points.iter().skip(1) {
            assert!((p.karp_flatt.unwrap() - s).abs() < 1e-12, "{p:?}");
        }
        assert!(r.analysis.no_fit.is_none());
        let f = r.analysis.fit.unwrap();
        assert_eq!(f.model, ModelKind::Amdahl, "{}", f.choice_reason);
        // Exact data: least squares recovers s to rounding.
        assert!(
            (f.serial_fraction - s).abs() < 1e-9,
            "{}",
            f.serial_fraction
        );
        assert!((f.alpha_eff - (1.0 - s)).abs() < 1e-9);
        assert_eq!(f.trend, Some(Trend::Constant));
        // Amdahl: E(64·32) = 1/(2048·0.07 + 0.93).
        let last = f.predicted.last().unwrap();
        assert_eq!(last.n, 2048.0);
        assert!((last.efficiency - 1.0 / (2048.0 * s + 0.93)).abs() < 1e-9);
        // E = 50 % at N = (1 + s)/s.
        assert!((f.half_efficiency_threads.unwrap() - 1.07 / 0.07).abs() < 1e-6);
    }

    /// Overhead growing with p (T = T1·(s + (1−s)/p + c·p)) shows as a rising Karp–Flatt e.
    #[test]
    fn growing_overhead_reads_as_rising() {
        let times: Vec<(usize, Stats)> = (1..=16)
            .map(|p| (p, st(0.02 + 0.98 / p as f64 + 0.01 * p as f64)))
            .collect();
        let f = series(&times).analysis.fit.unwrap();
        assert_eq!(f.trend, Some(Trend::Rising));
        assert!(f.peak_threads.is_some());
    }

    /// A 2-core machine measures threads 1 and 2 only: no model has enough points, and the
    /// report says so instead of giving a number.
    #[test]
    fn two_points_give_the_fitters_reason_not_a_number() {
        let a = series(&[(1, st(1.0)), (2, st(0.6))]).analysis;
        assert!(a.fit.is_none());
        let why = a.no_fit.unwrap();
        assert!(
            why.starts_with("no fit possible with 2 points; per-point Karp–Flatt only ("),
            "{why}"
        );
        assert!(
            why.contains("amdahl: needs at least 3 distinct N, has 2"),
            "{why}"
        );
        assert_eq!(a.n_counts, "threads");
        // Three points fit Amdahl, but leave the trend undetermined.
        let f = series(&[(1, st(1.0)), (2, st(0.6)), (3, st(0.47))])
            .analysis
            .fit
            .unwrap();
        assert_eq!(f.trend, None);
    }

    #[test]
    fn a_zero_time_is_not_fitted() {
        let a = series(&[(1, st(1.0)), (2, st(0.0)), (3, st(0.4))]).analysis;
        assert!(a.no_fit.unwrap().contains("not a positive time"));
    }

    #[test]
    fn thread_counts_cover_one_to_p() {
        assert_eq!(thread_counts(1), vec![1]);
        assert_eq!(thread_counts(4), vec![1, 2, 3, 4]);
        let big = thread_counts(100);
        assert_eq!(&big[14..], &[15, 16, 32, 64, 100]);
    }

    #[test]
    fn quick_run_has_both_kernels() {
        let t = Threads {
            used: 2,
            capped_from: None,
        };
        let mut cfg = ScalingConfig::quick(t);
        cfg.gemm_n = 48;
        cfg.repeats = 1;
        let r = run(&cfg, &mut Hooks::default()).unwrap();
        assert_eq!(r.series.len(), 2);
        for s in &r.series {
            assert_eq!(s.points.len(), 2);
            assert_eq!(s.points[0].speedup, 1.0);
            assert_eq!(s.samples().len(), 2);
            assert!(s.analysis.fit.is_none() && s.analysis.no_fit.is_some());
        }
    }
}

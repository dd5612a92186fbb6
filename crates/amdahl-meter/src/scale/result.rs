//! The `amdahl.scale/1` result: per-N statistics of time and energy, speedup, efficiency, α_eff
//! and Karp–Flatt e against the baseline N, energy per job, and the `amdahl.fit/1` analysis of the
//! median times. It is also an `amdahl fit` input: its `rows` array holds `{n, time}` medians.

use super::stats::Stats;
use crate::meter::DeviceEnergy;
use crate::record::{Host, Intensity};
use crate::source::{DeviceKind, Method};
use amdahl_model::scaling::input::{Dataset, Measure, Row, Series};
use amdahl_model::scaling::{analyse, laws, FitOptions, FitResult};
use amdahl_model::units::{GramsCo2e, Joules, Seconds, Watts};
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "amdahl.scale/1";

/// One timed and metered run of the command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunSample {
    pub time_s: Seconds,
    pub energy_j: Joules,
    /// Outside Tukey's fences of this N's times (see `docs/methodology.md`).
    pub time_outlier: bool,
    pub energy_outlier: bool,
}

/// A device and how its energy was obtained (the method every energy figure rests on).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceMethod {
    pub id: String,
    pub kind: DeviceKind,
    pub name: String,
    pub method: Method,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl From<&DeviceEnergy> for DeviceMethod {
    fn from(d: &DeviceEnergy) -> Self {
        DeviceMethod {
            id: d.id.clone(),
            kind: d.kind,
            name: d.name.clone(),
            method: d.method,
            note: d.note.clone(),
        }
    }
}

/// Everything measured and derived at one N.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScalePoint {
    pub n: u64,
    /// The command as run at this N (after `{n}` substitution).
    pub command: Vec<String>,
    pub runs: Vec<RunSample>,
    pub time_s: Stats,
    pub energy_j: Stats,
    /// Median energy per job × PUE, in kWh, and its emissions at the grid intensity.
    pub energy_kwh: f64,
    pub co2e_g: GramsCo2e,
    /// S = T̃(N0)/T̃(N) from the median times; None until the baseline N is measured.
    pub speedup: Option<f64>,
    /// E = S/p, p = N/N0.
    pub efficiency: Option<f64>,
    /// α_eff = (p/(p−1))·(S−1)/S (Végh); None at the baseline.
    pub alpha_eff: Option<f64>,
    /// e = (1/S − 1/p)/(1 − 1/p) (Karp & Flatt 1990) = 1 − α_eff; None at the baseline.
    pub karp_flatt: Option<f64>,
    /// Ẽ(N)/Ẽ(N0): joules per job relative to the baseline (above 1: more processors cost more).
    pub energy_ratio: Option<f64>,
    /// Ẽ(N0)/Ẽ(N): energy efficiency, the energy counterpart of E.
    pub energy_efficiency: Option<f64>,
    /// Energy above idle per run, E − P_idle·T (with `--idle`; may be negative in noise).
    pub net_energy_j: Option<Stats>,
}

/// Idle power of the machine, measured once before the sweep (hyperfine's calibrate-and-
/// subtract, applied to power).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Idle {
    pub duration_s: Seconds,
    pub power_w: Watts,
}

/// A `{n, time}` row of the median times: what `amdahl fit` reads from this file.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FitRow {
    pub n: f64,
    pub time: f64,
}

/// Why the sweep stopped early.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Failure {
    pub n: u64,
    /// 1-based run at that N (warm-ups included), and whether it was a warm-up.
    pub run: u32,
    pub warmup: bool,
    /// As a shell reports it: the exit status, or 128 + signal; 127 not found, 126 not executable.
    pub exit_code: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// The last lines the command wrote to stderr (or why it could not start).
    pub stderr_tail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScaleResult {
    pub schema: String,
    pub amdahl_version: String,
    /// The command template, `{n}` unsubstituted.
    pub command: Vec<String>,
    /// `--env` templates, `KEY=VALUE`.
    pub env: Vec<String>,
    /// What N counts (for the fit and every α_eff); `amdahl fit` reads it from here.
    pub n_counts: Option<String>,
    pub runs: u32,
    pub warmup: u32,
    pub baseline_n: u64,
    /// The N asked for, in the order run.
    pub n_requested: Vec<u64>,
    pub started_at: String,
    pub host: Host,
    pub pue: f64,
    pub intensity: Intensity,
    /// Idle power, when measured (`--idle`).
    pub idle: Option<Idle>,
    /// Devices metered and the method of each (from the first run).
    pub devices: Vec<DeviceMethod>,
    /// Finished N, sorted by N.
    pub points: Vec<ScalePoint>,
    /// Median time per finished N: an `amdahl fit` input (`amdahl fit scale.json`).
    pub rows: Vec<FitRow>,
    /// The scaling-law analysis of `rows` (schema `amdahl.fit/1`); null when no model fits.
    pub fit: Option<FitResult>,
    /// Why `fit` is null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_fit_reason: Option<String>,
    /// True when every requested N finished.
    pub complete: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    pub warnings: Vec<String>,
}

impl ScaleResult {
    /// The point at the baseline N, once measured.
    pub fn baseline(&self) -> Option<&ScalePoint> {
        self.points.iter().find(|p| p.n == self.baseline_n)
    }

    /// Recompute everything derived from the points: per-N ratios against the baseline, the
    /// `rows` for `amdahl fit`, and the fit itself. Called after every finished N.
    pub fn refresh(&mut self) {
        self.points.sort_by_key(|p| p.n);
        let base = self
            .baseline()
            .map(|b| (b.n as f64, b.time_s.median, b.energy_j.median));
        for p in &mut self.points {
            let derived = base.filter(|&(_, t0, _)| t0 > 0.0 && p.time_s.median > 0.0);
            let Some((n0, t0, e0)) = derived else {
                (p.speedup, p.efficiency, p.alpha_eff, p.karp_flatt) = (None, None, None, None);
                (p.energy_ratio, p.energy_efficiency) = (None, None);
                continue;
            };
            let ratio = p.n as f64 / n0;
            let s = t0 / p.time_s.median;
            let beyond = (ratio - 1.0).abs() > 1e-12;
            p.speedup = Some(s);
            p.efficiency = Some(s / ratio);
            p.alpha_eff = beyond.then(|| laws::alpha_eff_from_speedup(ratio, s));
            p.karp_flatt = beyond.then(|| laws::karp_flatt(ratio, s));
            let e = p.energy_j.median;
            (p.energy_ratio, p.energy_efficiency) = if e > 0.0 && e0 > 0.0 {
                (Some(e / e0), Some(e0 / e))
            } else {
                (None, None)
            };
        }
        self.rows = self
            .points
            .iter()
            .filter(|p| p.time_s.median > 0.0)
            .map(|p| FitRow {
                n: p.n as f64,
                time: p.time_s.median,
            })
            .collect();
        (self.fit, self.no_fit_reason) = self.analyse();
    }

    fn analyse(&self) -> (Option<FitResult>, Option<String>) {
        if self.rows.len() < 2 {
            return (
                None,
                Some(format!(
                    "{} distinct N measured: a speedup needs at least two, a fit at least three",
                    self.rows.len()
                )),
            );
        }
        if self.baseline().is_none() {
            return (
                None,
                Some(format!(
                    "the baseline N = {} is not measured yet",
                    self.baseline_n
                )),
            );
        }
        // With three N or more (what a fit needs; fewer are said by the fitter itself), no law is
        // fitted to times that do not fall.
        if self.rows.len() >= 3 {
            if let Err(why) = self.significant_speedup() {
                return (None, Some(why));
            }
        }
        let d = Dataset {
            measure: Measure::Time,
            n_counts: self.n_counts.clone(),
            phase_names: Vec::new(),
            series: vec![Series {
                // The command names the series on plots (`amdahl surface --from`).
                label: self.command.join(" "),
                rows: self
                    .rows
                    .iter()
                    .enumerate()
                    .map(|(i, r)| Row {
                        row: i + 1,
                        n: r.n,
                        value: r.time,
                        phases: Vec::new(),
                    })
                    .collect(),
            }],
        };
        let opts = FitOptions {
            baseline_n: Some(self.baseline_n as f64),
            ..Default::default()
        };
        match analyse(&d, &opts) {
            Ok(mut f) => {
                f.source = Some("amdahl scale (median time per N)".into());
                (Some(f), None)
            }
            Err(e) => (None, Some(e.to_string())),
        }
    }
}

impl ScaleResult {
    /// Whether some N above the baseline runs significantly faster than it; a scaling law fitted
    /// to times that do not fall with N only describes noise (a single-threaded command once got
    /// `1−α = 0.81, S_max = 1.23`). The test: at some N > N0 the median speedup is at least
    /// [`MIN_SPEEDUP`] and every measured run is faster than every run at N0 — the exact
    /// one-sided Mann–Whitney U test at U = 0, whose p-value is 1/C(r0 + r, r) for r0 and r runs
    /// (0.05 for 3 runs each, 0.004 for 5). With fewer runs the same rule holds but is weaker;
    /// the message states the p-value reached.
    fn significant_speedup(&self) -> Result<(), String> {
        let Some(base) = self.baseline() else {
            return Ok(());
        };
        let slowest = |p: &ScalePoint| {
            p.runs
                .iter()
                .map(|r| r.time_s.get())
                .fold(f64::MIN, f64::max)
        };
        let fastest = |p: &ScalePoint| {
            p.runs
                .iter()
                .map(|r| r.time_s.get())
                .fold(f64::MAX, f64::min)
        };
        let above: Vec<&ScalePoint> = self.points.iter().filter(|p| p.n > base.n).collect();
        if above.is_empty() {
            return Ok(());
        }
        let significant = above.iter().any(|p| {
            p.speedup.is_some_and(|s| s >= MIN_SPEEDUP)
                && !p.runs.is_empty()
                && !base.runs.is_empty()
                && slowest(p) < fastest(base)
        });
        if significant {
            return Ok(());
        }
        let p_value = above
            .iter()
            .map(|p| mann_whitney_p_at_u0(base.runs.len(), p.runs.len()))
            .fold(1.0, f64::min);
        Err(format!(
            "no significant speedup: at no N above N0 = {} is the median time at least {:.0} % \
             shorter with every run faster than every run at N0 (one-sided exact Mann–Whitney \
             test, p = {} with these run counts), so no scaling law is fitted to what is noise; \
             check that the command uses N (OMP_NUM_THREADS, for example, changes only OpenMP \
             programs)",
            base.n,
            (1.0 - 1.0 / MIN_SPEEDUP) * 100.0,
            p_text(p_value),
        ))
    }
}

/// The smallest median speedup over the baseline that counts as one (5 %): below it, timer and
/// scheduling noise of a few per cent can order the runs by chance.
pub const MIN_SPEEDUP: f64 = 1.05;

/// P(U = 0) for samples of sizes a and b under the null hypothesis: 1/C(a + b, a) (Mann &
/// Whitney 1947): the chance that all b runs come out faster than all a runs by luck.
pub(crate) fn mann_whitney_p_at_u0(a: usize, b: usize) -> f64 {
    let (a, b) = (a as f64, b as f64);
    // C(a+b, a) = Π_{i=1..a} (b + i)/i
    let mut c = 1.0;
    let mut i = 1.0;
    while i <= a {
        c *= (b + i) / i;
        i += 1.0;
    }
    1.0 / c
}

/// A p-value for reading: two significant digits.
fn p_text(p: f64) -> String {
    format!("{}", (p * 1e3).round() / 1e3)
}

/// Median energy per job → kWh × PUE and gCO2e at the grid intensity (Green Algorithms,
/// Lannelongue et al. 2021, eq. 1–2; the same accounting as `amdahl.run/1`).
pub fn carbon(energy: Joules, pue: f64, intensity: &Intensity) -> (f64, GramsCo2e) {
    let kwh = energy.kwh() * pue;
    (kwh, GramsCo2e(kwh * intensity.g_per_kwh.get()))
}

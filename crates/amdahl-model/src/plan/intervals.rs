//! Prediction intervals of `amdahl plan`: each figure's band from the signed errors of the
//! validation runs of its class (framework × device generation × precision, falling back to
//! framework × generation, framework, then every run), by [`crate::interval`]. The runs are
//! predicted as a user types them (published layout, framework preset, defaults elsewhere), so
//! the band is what a user typing a layout can expect.

use super::framework::Framework;
use super::validation::ValidationRun;
use crate::interval::{first_band, min_runs, Band, Class, Direction, Interval, LEVEL};
use serde::{Deserialize, Serialize};

/// A framework whose runs are fewer than [`min_runs`] in every finer class still gets its own
/// band, by its widest error, from this many runs on (marked in `basis`); below it the band of
/// every run is used. Three: two runs give a band of one score, too little to call a spread.
pub const MIN_WIDEST: usize = 3;

/// The class a plan's figures are judged by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanClass {
    pub framework: Framework,
    /// The device's microarchitecture (the catalog's `arch`).
    pub arch: String,
    /// Training precision (`bf16`, `fp8`, …).
    pub precision: String,
}

impl PlanClass {
    /// A validation run's class; `None` for a framework without a preset (the set's loader
    /// refuses those).
    pub fn of_run(r: &ValidationRun) -> Option<Self> {
        Some(PlanClass {
            framework: Framework::parse(&r.framework)?,
            arch: r.arch.clone(),
            precision: r.precision.clone(),
        })
    }
}

/// The band of a class from `runs`, leaving out the run called `leave_out` (the coverage test
/// judges each run by a band it had no part in). `Err` says why there is none.
pub fn band(
    runs: &[ValidationRun],
    class: &PlanClass,
    leave_out: Option<&str>,
) -> Result<(Band, String), String> {
    let mut fwap = Vec::new();
    let mut fwa = Vec::new();
    let mut fw = Vec::new();
    let mut all = Vec::new();
    for r in runs.iter().filter(|r| Some(r.name.as_str()) != leave_out) {
        all.push(r.error);
        let Some(c) = PlanClass::of_run(r) else {
            continue;
        };
        if c.framework != class.framework {
            continue;
        }
        fw.push(r.error);
        if c.arch.eq_ignore_ascii_case(&class.arch) {
            fwa.push(r.error);
            if c.precision == class.precision {
                fwap.push(r.error);
            }
        }
    }
    let f = class.framework.name();
    let need = min_runs(LEVEL);
    // A framework with no run at all has no band: other software's errors say nothing of it.
    let all_min = if fw.is_empty() { usize::MAX } else { need };
    let chain = [
        Class {
            name: format!("{f} × {} × {}", class.arch, class.precision),
            errors: &fwap,
            min: need,
        },
        Class {
            name: format!("{f} × {}", class.arch),
            errors: &fwa,
            min: need,
        },
        Class {
            name: f.to_string(),
            errors: &fw,
            min: need,
        },
        Class {
            name: f.to_string(),
            errors: &fw,
            min: MIN_WIDEST,
        },
        Class {
            name: format!("all frameworks (only {} {f} runs)", fw.len()),
            errors: &all,
            min: all_min,
        },
    ];
    first_band(&chain, LEVEL)
}

/// The intervals of a plan's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanIntervals {
    pub step_time_s: Interval,
    pub tokens_per_s: Interval,
    pub tflops_per_gpu: Interval,
    /// Energy to train the tokens (facility, kWh), from the energy set's held-out errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_kwh: Option<Interval>,
}

/// Step time, throughput and TFLOP/s of one plan, with their intervals (energy is added by the
/// caller from the energy set).
pub fn plan_intervals(
    runs: &[ValidationRun],
    class: &PlanClass,
    step_time_s: f64,
    tokens_per_s: f64,
    tflops_per_gpu: f64,
) -> PlanIntervals {
    match band(runs, class, None) {
        Ok((b, basis)) => PlanIntervals {
            step_time_s: b.interval(step_time_s, Direction::Time, LEVEL, basis.clone()),
            tokens_per_s: b.interval(tokens_per_s, Direction::Rate, LEVEL, basis.clone()),
            tflops_per_gpu: b.interval(tflops_per_gpu, Direction::Rate, LEVEL, basis),
            energy_kwh: None,
        },
        Err(why) => PlanIntervals {
            step_time_s: Interval::none(step_time_s, why.clone()),
            tokens_per_s: Interval::none(tokens_per_s, why.clone()),
            tflops_per_gpu: Interval::none(tflops_per_gpu, why),
            energy_kwh: None,
        },
    }
}

/// Leave-one-out coverage of one class (or of the whole set).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Coverage {
    /// `FRAMEWORK × ARCH × PRECISION` of the runs, or `all`.
    pub class: String,
    pub runs: usize,
    pub covered: usize,
    /// Runs judged by the widest error of a small class (no finite-sample guarantee).
    pub widest: usize,
    /// Runs that got no band: without them their framework has no validation run ("no
    /// validation data" is printed, not a band, so there is nothing to cover).
    pub no_band: usize,
}

impl Coverage {
    /// Covered share of the runs that got a band.
    pub fn share(&self) -> f64 {
        self.covered as f64 / (self.runs - self.no_band).max(1) as f64
    }
}

/// Leave-one-out coverage over `runs`: each run is judged by the band its class has without it.
/// Per class (sorted), then `all`.
pub fn loo_coverage(runs: &[ValidationRun]) -> Vec<Coverage> {
    let mut per: Vec<Coverage> = Vec::new();
    let mut total = Coverage {
        class: "all".into(),
        runs: 0,
        covered: 0,
        widest: 0,
        no_band: 0,
    };
    for r in runs {
        let Some(class) = PlanClass::of_run(r) else {
            continue;
        };
        let name = format!(
            "{} × {} × {}",
            class.framework.name(),
            class.arch,
            class.precision
        );
        let (covered, widest, no_band) = match band(runs, &class, Some(&r.name)) {
            Ok((b, _)) => (b.covers(r.error), !b.guaranteed, false),
            Err(_) => (false, false, true),
        };
        let entry = match per.iter_mut().position(|c| c.class == name) {
            Some(i) => &mut per[i],
            None => {
                per.push(Coverage {
                    class: name,
                    runs: 0,
                    covered: 0,
                    widest: 0,
                    no_band: 0,
                });
                let last = per.len() - 1;
                &mut per[last]
            }
        };
        for c in [entry, &mut total] {
            c.runs += 1;
            c.covered += usize::from(covered);
            c.widest += usize::from(widest);
            c.no_band += usize::from(no_band);
        }
    }
    per.sort_by(|a, b| a.class.cmp(&b.class));
    per.push(total);
    per
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::validation_set;

    fn set() -> Vec<ValidationRun> {
        validation_set().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn leave_one_out_coverage_of_the_ninety_percent_band_is_at_least_85_percent() {
        // Each run judged by the band of its class without it (its own error excluded): the
        // training set as a user types it. Per class for the record (docs/methodology.md,
        // "Prediction intervals").
        let cov = loo_coverage(&set());
        let table: String = cov
            .iter()
            .map(|c| {
                format!(
                    "{:<40} {:3} runs {:3} covered ({:5.1} %), {} by the widest error, {} no band\n",
                    c.class,
                    c.runs,
                    c.covered,
                    100.0 * c.share(),
                    c.widest,
                    c.no_band
                )
            })
            .collect();
        eprintln!("{table}");
        let all = cov.last().expect("total");
        assert_eq!(all.class, "all");
        assert_eq!(all.runs, set().len());
        assert!(all.share() >= 0.85, "{table}");
        // Counting the runs without a band as missed, too.
        assert!(all.covered as f64 >= 0.85 * all.runs as f64, "{table}");
    }

    #[test]
    fn classes_fall_back_and_say_which() {
        let runs = set();
        let class = |f: Framework, arch: &str, p: &str| PlanClass {
            framework: f,
            arch: arch.into(),
            precision: p.into(),
        };
        // NeMo on Hopper in fp8: a class of its own (11 runs in train.csv).
        let (b, basis) = band(&runs, &class(Framework::Nemo, "Hopper", "fp8"), None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            b.guaranteed && basis.starts_with("nemo × Hopper × fp8: "),
            "{basis}"
        );
        // NeMo on Ampere: no run; the framework's runs are used.
        let (_, basis) = band(&runs, &class(Framework::Nemo, "Ampere", "bf16"), None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(basis.starts_with("nemo: "), "{basis}");
        // Meta has three runs: its own widest error, marked.
        let (b, basis) = band(&runs, &class(Framework::Meta, "Hopper", "bf16"), None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!b.guaranteed && basis.contains("widest"), "{basis}");
        // HAI-LLM has one: every run's band, saying so.
        let (_, basis) = band(&runs, &class(Framework::HaiLlm, "Hopper", "fp8"), None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            basis.starts_with("all frameworks (only 1 hai-llm runs)"),
            "{basis}"
        );
    }

    #[test]
    fn a_framework_without_runs_gets_no_band() {
        let runs: Vec<ValidationRun> = set()
            .into_iter()
            .filter(|r| r.framework != "metaseq")
            .collect();
        let class = PlanClass {
            framework: Framework::Fsdp,
            arch: "Ampere".into(),
            precision: "bf16".into(),
        };
        let i = plan_intervals(&runs, &class, 10.0, 1.0, 1.0);
        assert!(!i.step_time_s.has_band());
        assert_eq!(
            i.step_time_s.basis,
            "fsdp × Ampere × bf16: no validation data"
        );
    }
}

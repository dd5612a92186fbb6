//! Scaling runs of a command (`amdahl scale`): run it at several N with warm-ups and repeats,
//! meter every run, and summarise time and energy per N robustly.
//!
//! Measurement sits behind the [`Executor`] trait (hyperfine's design): [`MeterExecutor`] spawns
//! and meters the real command through [`crate::runner`] and [`crate::Meter`]; [`MockExecutor`]
//! returns scripted outcomes so the whole sweep is tested deterministically. Progress and
//! per-N results reach the caller through a callback; nothing here prints.

mod exec;
pub mod result;
pub mod stats;

pub use exec::{MeterExecutor, MockExecutor};
pub use result::{DeviceMethod, Failure, FitRow, Idle, RunSample, ScalePoint, ScaleResult, SCHEMA};

use crate::meter::DeviceEnergy;
use crate::record::{self, Host, Intensity};
use crate::MeterError;
use amdahl_model::units::{Joules, Seconds};

/// The placeholder replaced by N in arguments and `--env` values.
pub const PLACEHOLDER: &str = "{n}";

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScaleError {
    #[error("no N given: pass e.g. --n 1,2,4,8")]
    NoN,
    #[error("N = {0}: processor counts must be ≥ 1")]
    NonPositive(u64),
    #[error("N = {0} is given twice: list each N once (repeats come from --runs)")]
    Duplicate(u64),
    #[error("--runs 0: at least one measured run per N is needed")]
    NoRuns,
    #[error("--baseline-n {0} is not among the N to run ({1}); add it to --n or pick one of them")]
    BaselineNotRun(u64, String),
    #[error("--env `{0}`: expected KEY=VALUE, e.g. OMP_NUM_THREADS={{n}}")]
    BadEnv(String),
    #[error("no command given: put it after `--`, e.g. amdahl scale --n 1,2 -- ./app {{n}}")]
    NoCommand,
}

/// A validated sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// In the order to run.
    pub ns: Vec<u64>,
    /// Template, may contain `{n}`.
    pub command: Vec<String>,
    /// `(KEY, VALUE)` templates; the value may contain `{n}`.
    pub env: Vec<(String, String)>,
    pub runs: u32,
    pub warmup: u32,
    pub baseline_n: u64,
}

impl Plan {
    /// Check the N list (≥ 1, distinct), runs and baseline; parse `KEY=VALUE` env templates.
    /// The baseline defaults to the smallest N.
    pub fn new(
        ns: Vec<u64>,
        command: Vec<String>,
        env: &[String],
        runs: u32,
        warmup: u32,
        baseline_n: Option<u64>,
    ) -> Result<Plan, ScaleError> {
        if command.is_empty() {
            return Err(ScaleError::NoCommand);
        }
        if ns.is_empty() {
            return Err(ScaleError::NoN);
        }
        for (i, &n) in ns.iter().enumerate() {
            if n == 0 {
                return Err(ScaleError::NonPositive(n));
            }
            if ns.iter().take(i).any(|&m| m == n) {
                return Err(ScaleError::Duplicate(n));
            }
        }
        if runs == 0 {
            return Err(ScaleError::NoRuns);
        }
        let min = ns.iter().copied().min().unwrap_or(1);
        let baseline_n = baseline_n.unwrap_or(min);
        if !ns.contains(&baseline_n) {
            let list = ns.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
            return Err(ScaleError::BaselineNotRun(baseline_n, list));
        }
        let env = env
            .iter()
            .map(|kv| match kv.split_once('=') {
                Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
                _ => Err(ScaleError::BadEnv(kv.clone())),
            })
            .collect::<Result<_, _>>()?;
        Ok(Plan {
            ns,
            command,
            env,
            runs,
            warmup,
            baseline_n,
        })
    }

    /// Whether `{n}` appears anywhere; if not, every N runs the same thing.
    pub fn uses_n(&self) -> bool {
        self.command.iter().any(|a| a.contains(PLACEHOLDER))
            || self.env.iter().any(|(_, v)| v.contains(PLACEHOLDER))
    }

    /// The job for one N: `{n}` substituted in every argument and env value.
    pub fn job(&self, n: u64) -> Job {
        let sub = |s: &str| s.replace(PLACEHOLDER, &n.to_string());
        Job {
            n,
            argv: self.command.iter().map(|a| sub(a)).collect(),
            env: self.env.iter().map(|(k, v)| (k.clone(), sub(v))).collect(),
        }
    }

    /// Runs in the whole sweep, warm-ups included (the progress total).
    pub fn total_runs(&self) -> u64 {
        (self.ns.len() as u64).saturating_mul(u64::from(self.runs.saturating_add(self.warmup)))
    }
}

/// One N's command, ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub n: u64,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// What one run gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub time: Seconds,
    /// Per device, with its method; the total follows [`record::total_energy`].
    pub devices: Vec<DeviceEnergy>,
    /// As a shell reports it (128 + signal when killed).
    pub exit_code: i32,
    pub signal: Option<i32>,
    /// The last lines of the command's stderr (empty when not captured).
    pub stderr_tail: String,
}

impl Outcome {
    pub fn energy(&self) -> Joules {
        record::total_energy(&self.devices)
    }
}

/// Runs a job once. Errors are failures to start or wait for it; a non-zero exit is an
/// [`Outcome`] with that exit code.
pub trait Executor {
    fn execute(&mut self, job: &Job) -> Result<Outcome, MeterError>;
}

/// Progress of a sweep, for the caller's progress bar and results file.
#[derive(Debug)]
pub enum Event<'a> {
    /// A run is about to start: `done` of `total` runs (warm-ups included) are finished.
    Starting {
        n: u64,
        run: u32,
        warmup: bool,
        done: u64,
        total: u64,
    },
    /// An N finished (or the sweep stopped at a failure): the result so far.
    Updated(&'a ScaleResult),
}

/// What the result records besides the measurements.
#[derive(Debug, Clone)]
pub struct Setup {
    pub n_counts: Option<String>,
    pub started_unix_s: f64,
    pub host: Host,
    pub pue: f64,
    pub intensity: Intensity,
    pub idle: Option<Idle>,
    pub warnings: Vec<String>,
}

/// A start failure as the shell would report it: 127 not found, 126 not executable.
fn start_failure(e: &MeterError) -> i32 {
    match e {
        MeterError::CommandNotExecutable { .. } => 126,
        _ => 127,
    }
}

impl ScaleResult {
    /// The empty result of a sweep about to start (write it first: a bad output path then fails
    /// before anything runs). Warns when `{n}` is used nowhere.
    pub fn new(plan: &Plan, setup: Setup) -> ScaleResult {
        let mut warnings = setup.warnings;
        if !plan.uses_n() {
            warnings.push(format!(
                "`{PLACEHOLDER}` appears in no argument and no --env value: every N runs the same command, so N changes nothing"
            ));
        }
        let mut res = ScaleResult {
            schema: SCHEMA.into(),
            amdahl_version: env!("CARGO_PKG_VERSION").into(),
            command: plan.command.clone(),
            env: plan.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            n_counts: setup.n_counts,
            runs: plan.runs,
            warmup: plan.warmup,
            baseline_n: plan.baseline_n,
            n_requested: plan.ns.clone(),
            started_at: record::utc_iso(setup.started_unix_s),
            host: setup.host,
            pue: setup.pue,
            intensity: setup.intensity,
            idle: setup.idle,
            devices: Vec::new(),
            points: Vec::new(),
            rows: Vec::new(),
            fit: None,
            no_fit_reason: None,
            complete: false,
            failure: None,
            warnings,
        };
        res.refresh();
        res
    }
}

/// Run the sweep into `res` (from [`ScaleResult::new`]): for each N, `warmup` unrecorded runs
/// then `runs` measured ones. Stops at the first failing run, recording the failure; the
/// finished N stay in the result.
pub fn sweep(
    plan: &Plan,
    mut res: ScaleResult,
    exec: &mut dyn Executor,
    on_event: &mut dyn FnMut(Event<'_>),
) -> ScaleResult {
    let total = plan.total_runs();
    let mut done = 0;
    for &n in &plan.ns {
        let job = plan.job(n);
        let mut measured: Vec<Outcome> = Vec::new();
        for k in 0..plan.warmup.saturating_add(plan.runs) {
            let warmup = k < plan.warmup;
            on_event(Event::Starting {
                n,
                run: k + 1,
                warmup,
                done,
                total,
            });
            let out = exec.execute(&job);
            done += 1;
            let fail = |exit_code, signal, stderr_tail| Failure {
                n,
                run: k + 1,
                warmup,
                exit_code,
                signal,
                stderr_tail,
            };
            let failure = match out {
                Err(e) => Some(fail(start_failure(&e), None, e.to_string())),
                Ok(o) if o.exit_code != 0 => Some(fail(
                    o.exit_code,
                    o.signal.map(crate::runner::signal_name),
                    o.stderr_tail,
                )),
                Ok(o) => {
                    if res.devices.is_empty() {
                        res.devices = o.devices.iter().map(DeviceMethod::from).collect();
                    }
                    if !warmup {
                        measured.push(o);
                    }
                    None
                }
            };
            if let Some(f) = failure {
                res.failure = Some(f);
                res.refresh();
                on_event(Event::Updated(&res));
                return res;
            }
        }
        if let Some(p) = point(&job, &measured, &res) {
            res.points.push(p);
        }
        res.complete = res.points.len() == plan.ns.len();
        res.refresh();
        on_event(Event::Updated(&res));
    }
    res
}

/// Summarise one N's measured runs.
fn point(job: &Job, runs: &[Outcome], res: &ScaleResult) -> Option<ScalePoint> {
    let times: Vec<f64> = runs.iter().map(|o| o.time.get()).collect();
    let energies: Vec<f64> = runs.iter().map(|o| o.energy().get()).collect();
    let (t_out, e_out) = (stats::outliers(&times), stats::outliers(&energies));
    let time_s = stats::summarise(&times)?;
    let energy_j = stats::summarise(&energies)?;
    let (energy_kwh, co2e_g) = result::carbon(Joules(energy_j.median), res.pue, &res.intensity);
    let net_energy_j = res.idle.and_then(|i| {
        let net: Vec<f64> = times
            .iter()
            .zip(&energies)
            .map(|(&t, &e)| e - i.power_w.get() * t)
            .collect();
        stats::summarise(&net)
    });
    Some(ScalePoint {
        n: job.n,
        command: job.argv.clone(),
        runs: times
            .iter()
            .zip(&energies)
            .zip(t_out.iter().zip(&e_out))
            .map(|((&t, &e), (&to, &eo))| RunSample {
                time_s: Seconds(t),
                energy_j: Joules(e),
                time_outlier: to,
                energy_outlier: eo,
            })
            .collect(),
        time_s,
        energy_j,
        energy_kwh,
        co2e_g,
        speedup: None,
        efficiency: None,
        alpha_eff: None,
        karp_flatt: None,
        energy_ratio: None,
        energy_efficiency: None,
        net_energy_j,
    })
}

#[cfg(test)]
mod tests;

//! `amdahl scale --n 1,2,4,8 -- CMD ARGS... {n}`: run a command at several degrees of
//! parallelism, time and meter every run, and report Végh's picture of it (speedup, efficiency,
//! α_eff, the Karp–Flatt trend, the fitted model) next to the energy each N costs per job.
//!
//! The sweep lives in `amdahl_meter::scale` behind an `Executor`; this module validates the
//! arguments (usage errors exit 2 before anything runs), discovers the sensors as `amdahl run`
//! does (machine scope), draws the progress bar, rewrites the result file after every finished
//! N, and exits with a failing command's status.

use super::measure_args::{measure_baseline, Cost, CostArgs, SensorArgs};
use crate::output::{self, FormatArgs};
use amdahl_meter::record::{self, Host};
use amdahl_meter::scale::{sweep, Event, Idle, MeterExecutor, Plan, ScaleResult, Setup};
use amdahl_meter::{estimate::Target, runner, sensors, Meter};
use amdahl_model::catalog::Catalogs;
use amdahl_report::render::Render;
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Degrees of parallelism to run, each ≥ 1 and listed once: 1,2,4,8.
    #[arg(
        help_heading = "Scaling",
        long = "n",
        value_delimiter = ',',
        required = true,
        // `--n -1,2` is a bad N list (said so by the value parser), not an unknown option.
        allow_hyphen_values = true,
        value_name = "N,...",
        value_parser = crate::domain::natural
    )]
    pub n: Vec<u64>,
    // Help texts spell the placeholder `{ n }`: clap turns a literal braces-n into a line break.
    /// Environment variable for the command, KEY=VALUE, with the placeholder `{ n }` (written
    /// without spaces) replaced by N. Repeatable.
    #[arg(help_heading = "Scaling", long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Measured runs per N (the median is reported).
    #[arg(help_heading = "Scaling", long, default_value_t = 5)]
    pub runs: u32,
    /// Unrecorded warm-up runs per N before the measured ones.
    #[arg(help_heading = "Scaling", long, default_value_t = 1)]
    pub warmup: u32,
    /// Reference N for speedup, efficiency and energy ratios [default: the smallest N].
    #[arg(help_heading = "Scaling", long, value_name = "N0", value_parser = crate::domain::natural)]
    pub baseline_n: Option<u64>,
    /// What N counts (threads, ranks, GPUs, nodes), printed next to every α_eff.
    #[arg(help_heading = "Scaling", long, value_name = "TEXT")]
    pub n_counts: Option<String>,
    /// Write the result as JSON (schema amdahl.scale/1), rewritten after every finished N.
    #[arg(help_heading = "Output", short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also write speedup, efficiency and energy per job against N to this SVG file.
    #[arg(help_heading = "Output", long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Let the command's stdout and stderr through (default: stdout discarded, the tail of
    /// stderr kept for the failure report).
    #[arg(help_heading = "Scaling", long)]
    pub show_output: bool,
    /// Measure idle power for this long before the sweep, and report energy per job above it.
    #[arg(help_heading = "Sampling", long, value_parser = crate::domain::duration, value_name = "DURATION")]
    pub idle: Option<Duration>,
    /// Time between energy samples during each run: 1s, 250ms (at least 10ms).
    #[arg(help_heading = "Sampling", long, default_value = "1s", value_parser = crate::domain::interval)]
    pub interval: Duration,
    #[command(flatten, next_help_heading = "Cost")]
    pub cost: CostArgs,
    #[command(flatten, next_help_heading = "Sensors")]
    pub sensors: SensorArgs,
    #[command(flatten, next_help_heading = "Output")]
    pub format: FormatArgs,
    /// The command and its arguments, with the placeholder `{ n }` (written without spaces)
    /// replaced by N in each; a launcher (srun, mpirun, torchrun) is timed and metered whole.
    // No `allow_hyphen_values`: an unknown option before the command is a usage error (exit 2);
    // see `run`.
    #[arg(
        help_heading = "Arguments",
        trailing_var_arg = true,
        required = true,
        value_name = "CMD"
    )]
    pub command: Vec<String>,
}

/// The meter for every run: the sensors `amdahl run` would use in machine scope, with the
/// CPU power note (which catalog row, or the fallback) among the warnings when the CPU is estimated.
fn meter(args: &Args, catalogs: &Catalogs) -> (Meter, Vec<String>) {
    let (options, tdp_note) = args.sensors.options(catalogs, Target::Machine);
    let d = sensors::discover(options);
    let mut warnings = d.warnings;
    if let Some(note) = tdp_note.filter(|_| sensors::estimates_cpu(&d.sources)) {
        warnings.insert(0, note);
    }
    (Meter::new(d.sources), warnings)
}

fn write_result(path: &Path, r: &ScaleResult) -> Result<()> {
    output::write_file(
        path,
        &amdahl_report::to_json(r).context("serialising the result")?,
    )
}

fn progress_bar(total: u64) -> ProgressBar {
    let bar = output::progress_bar(Some(total));
    if let Ok(style) =
        ProgressStyle::with_template("{bar:30} {pos}/{len} runs {elapsed} ETA {eta} {msg}")
    {
        bar.set_style(style);
    }
    bar
}

pub fn run(args: Args) -> Result<ExitCode> {
    let plan = match Plan::new(
        args.n.clone(),
        args.command.clone(),
        &args.env,
        args.runs,
        args.warmup,
        args.baseline_n,
    ) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let cost = args.cost.resolve()?;
    let (mut meter, warnings) = meter(&args, &cost.catalogs);
    let setup = setup(&args, cost, &mut meter, warnings);
    let start = ScaleResult::new(&plan, setup);
    announce(&args, &plan, &start)?;
    let result = measure(&args, &plan, start, meter)?;
    emit(&args, &result)?;
    Ok(exit_code(&args, &result))
}

/// What the sweep records besides its points: the idle power (measured now, before the start
/// time is taken, when `--idle` asks), the host, the cost factors and the sensors' warnings.
fn setup(args: &Args, cost: Cost, meter: &mut Meter, warnings: Vec<String>) -> Setup {
    let idle = args.idle.map(|d| {
        let (duration_s, power_w) = measure_baseline(meter, d);
        Idle {
            duration_s,
            power_w,
        }
    });
    Setup {
        n_counts: args.n_counts.clone(),
        started_unix_s: record::unix_now(),
        host: Host::this_machine(),
        pue: cost.pue.value,
        intensity: cost.intensity,
        idle,
        warnings,
    }
}

/// The warnings before anything runs, and the result file written first with no N finished,
/// so a path that cannot be written fails before the sweep rather than after it.
fn announce(args: &Args, plan: &Plan, start: &ScaleResult) -> Result<()> {
    for w in &start.warnings {
        eprintln!("amdahl: warning: {w}");
    }
    if plan.ns.len() < 2 {
        eprintln!("amdahl: warning: one N only: it is measured, but speedup and fit need at least two (a fit three)");
    }
    if let Some(o) = &args.output {
        write_result(o, start).with_context(|| {
            format!(
                "cannot write the result file {} (fix the path or its permissions)",
                o.display()
            )
        })?;
    }
    Ok(())
}

/// The sweep (signals forwarded to the command) with its progress bar, the result file
/// rewritten after every finished N (a failed rewrite warned about once).
fn measure(args: &Args, plan: &Plan, start: ScaleResult, meter: Meter) -> Result<ScaleResult> {
    runner::install_forwarding()?;
    let mut exec = MeterExecutor::new(meter, args.interval, !args.show_output, true);
    let bar = progress_bar(plan.total_runs());
    let mut write_warned = false;
    let result = sweep(plan, start, &mut exec, &mut |e| match e {
        Event::Starting {
            n,
            run,
            warmup,
            done,
            ..
        } => {
            bar.set_position(done);
            bar.set_message(if warmup {
                format!("N = {n} warm-up {run}/{}", plan.warmup)
            } else {
                format!("N = {n} run {}/{}", run - plan.warmup, plan.runs)
            });
        }
        Event::Updated(r) => {
            if let Some(o) = &args.output {
                if let Err(e) = write_result(o, r) {
                    if !write_warned {
                        bar.suspend(|| eprintln!("amdahl: warning: {e:#}"));
                        write_warned = true;
                    }
                }
            }
        }
    });
    bar.finish_and_clear();
    Ok(result)
}

/// The SVG when asked, the result in the chosen format on stdout, and where the file went.
fn emit(args: &Args, result: &ScaleResult) -> Result<()> {
    if let Some(path) = &args.svg {
        output::check_result(result)?;
        output::write_plot(path, &amdahl_report::scale::svg(result))?;
    }
    let text = result.render(args.format.format())?;
    output::print_result(result, &text)?;
    if let Some(o) = &args.output {
        output::wrote(o);
    }
    Ok(())
}

/// 0 when every run succeeded; else the failing command's status (1–255), after saying where
/// it failed, how its stderr ended and which finished N the result file keeps.
fn exit_code(args: &Args, result: &ScaleResult) -> ExitCode {
    let Some(f) = &result.failure else {
        return ExitCode::SUCCESS;
    };
    eprintln!(
        "amdahl: error: the command failed at N = {} (run {}{}) with exit status {}{}{}",
        f.n,
        f.run,
        if f.warmup { ", warm-up" } else { "" },
        f.exit_code,
        f.signal
            .as_deref()
            .map_or_else(String::new, |s| format!(" ({s})")),
        if f.stderr_tail.is_empty() {
            String::new()
        } else {
            format!("; its stderr ended with:\n{}", f.stderr_tail)
        }
    );
    if let Some(o) = &args.output {
        eprintln!(
            "amdahl: the {} finished N are kept in {}",
            result.points.len(),
            o.display()
        );
    }
    ExitCode::from(f.exit_code.clamp(1, 255) as u8)
}

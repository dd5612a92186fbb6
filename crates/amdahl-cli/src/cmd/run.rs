//! `amdahl run -- CMD ARGS...`: run a command and measure the energy it uses.
//!
//! Order matters: everything that can fail (arguments, region, output paths) fails before the
//! command starts; the result file is rewritten after every sample (`partial: true` until the
//! end) and the sample log is flushed per line, so a killed run leaves valid files.
//! The summary goes to stderr: the command's own stdout passes through amdahl's stdout, and a
//! summary there would corrupt it (`amdahl run -- ./export > data.csv`), as with time(1).

use super::measure_args::{CostArgs, SensorArgs};
use amdahl_meter::estimate::{ProcessProbe, Target};
use amdahl_meter::progress::Work;
use amdahl_meter::record::MeasurementScope;
use amdahl_meter::session::{Ending, Notice, Notify, Session, Settings};
use amdahl_meter::sink::codecarbon::{self, CodeCarbonCsv};
use amdahl_meter::sink::RecordSink;
use amdahl_meter::sink::{json::JsonRecord, samples::SampleLog, textfile::PrometheusTextfile};
use amdahl_meter::{procfs, runner, stdout_progress, MeterError};
use amdahl_report::meter::{
    codecarbon_row_in, prometheus_textfile, run_summary, CODECARBON_HEADER,
};
use anyhow::{bail, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ScopeArg {
    Machine,
    Process,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Time between samples: 1s, 250ms, 0.5s, 2m (at least 10ms).
    #[arg(help_heading = "Sampling", long, default_value = "1s", value_parser = crate::domain::interval)]
    pub interval: Duration,
    #[command(flatten, next_help_heading = "Cost")]
    pub cost: CostArgs,
    /// Measure the whole machine, or only the command's share of it.
    #[arg(help_heading = "Sampling", long, value_enum, default_value_t = ScopeArg::Machine)]
    pub scope: ScopeArg,
    /// Measure idle power for this long before starting, and report the energy above it.
    #[arg(help_heading = "Sampling", long, value_parser = crate::domain::duration, value_name = "DURATION")]
    pub baseline: Option<Duration>,
    /// Write the result as JSON (schema amdahl.run/1), rewritten after every sample.
    #[arg(help_heading = "Output", short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write every sample as a JSON line, flushed as it is taken.
    #[arg(help_heading = "Output", long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Write the run in Prometheus text format after every sample (for node_exporter's textfile
    /// collector: give a path inside its --collector.textfile.directory, ending in .prom).
    #[arg(help_heading = "Output", long, value_name = "FILE")]
    pub prometheus: Option<PathBuf>,
    /// Append a row to a CodeCarbon-compatible emissions.csv.
    #[arg(help_heading = "Output", long, value_name = "FILE")]
    pub codecarbon_csv: Option<PathBuf>,
    /// Name the project the run belongs to: the record's `project` and the CodeCarbon row's
    /// project_name [default: none; the row says amdahl].
    #[arg(help_heading = "Output", long, value_name = "NAME", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub project: Option<String>,
    #[command(flatten, next_help_heading = "Sensors")]
    pub sensors: SensorArgs,
    #[command(flatten, next_help_heading = "Projection")]
    pub progress: ProgressArgs,
    /// The command and its arguments (after `--`, or after amdahl's own options).
    // No `allow_hyphen_values`: an option amdahl does not know before the command (`run -q --
    // true`) is a usage error (exit 2), not a command named `-q`. Options after the command's
    // first word belong to the command (`run ls -la`), and `--` passes anything (`run -- -x`).
    #[arg(
        help_heading = "Arguments",
        trailing_var_arg = true,
        required = true,
        value_name = "CMD"
    )]
    pub command: Vec<String>,
}

/// How the command reports its progress, for the projection of the whole run: a progress file
/// or lines of its stdout (one of the two).
#[derive(clap::Args, Debug, Clone, Default)]
#[command(group(clap::ArgGroup::new("progress_source").args(["progress_file", "progress_regex"])))]
pub struct ProgressArgs {
    /// A file the command appends its step count to (the last number of its last line is read at
    /// every sample); with --total-steps the record projects the whole run.
    #[arg(long, value_name = "FILE", requires = "total_steps")]
    pub progress_file: Option<PathBuf>,
    /// Count steps in the command's stdout, which then passes through amdahl byte for byte: each
    /// line matching RE is a step, or with a capture group the group is the step count
    /// (`step (\d+)`); with --total-steps the record projects the whole run.
    #[arg(long, value_name = "RE", requires = "total_steps", value_parser = crate::domain::progress_regex)]
    pub progress_regex: Option<regex::bytes::Regex>,
    /// Steps in the whole run, for the projection of its duration, energy and CO2e.
    #[arg(long, value_name = "S", requires = "progress_source", value_parser = crate::domain::count_wide)]
    pub total_steps: Option<u64>,
}

fn validate(args: &Args) -> Result<()> {
    if args.baseline.is_some() && matches!(args.scope, ScopeArg::Process) {
        bail!("--baseline measures the idle machine and applies to --scope machine only");
    }
    // A FIFO (or a device) would block the read at every sample: `--progress-file FIFO` hung
    // before the command started, deaf to SIGINT/SIGTERM. A file yet to be created is fine.
    if let Some(p) = &args.progress.progress_file {
        if let Ok(m) = std::fs::metadata(p) {
            if !m.is_file() {
                bail!(
                    "--progress-file {}: not a regular file (a FIFO, a device or a directory); \
                     give a file the command appends its step count to, or use \
                     --progress-regex to count steps in its output",
                    p.display()
                );
            }
        }
    }
    Ok(())
}

/// The session's settings from `run`'s flags: the cost resolved through the catalogs, the
/// sensors for the scope's target (`probe`: the processes process scope charges).
fn settings(
    args: &Args,
    probe: &Arc<ProcessProbe>,
    python_version: Option<String>,
) -> Result<Settings> {
    validate(args)?;
    let cost = args.cost.resolve()?;
    let scope = match args.scope {
        ScopeArg::Machine => MeasurementScope::Machine,
        ScopeArg::Process => MeasurementScope::Process,
    };
    let target = match scope {
        MeasurementScope::Machine => Target::Machine,
        MeasurementScope::Process => Target::Process(Arc::clone(probe)),
    };
    let (sensors, cpu_tdp_note) = args.sensors.options(&cost.catalogs, target);
    Ok(Settings {
        project: args.project.clone(),
        command: args.command.clone(),
        scope,
        interval: args.interval,
        pue: cost.pue.value,
        intensity: cost.intensity,
        baseline: args.baseline,
        sensors,
        cpu_tdp_note,
        progress_file: args.progress.progress_file.clone(),
        total_steps: args.progress.total_steps,
        python_version,
    })
}

/// The outputs `run` was asked for, in the order they are created before the command starts
/// (so a bad path fails first).
fn sinks(args: &Args) -> Vec<Box<dyn RecordSink>> {
    let mut sinks: Vec<Box<dyn RecordSink>> = Vec::new();
    if let Some(p) = &args.output {
        sinks.push(Box::new(JsonRecord::new(p)));
    }
    if let Some(p) = &args.prometheus {
        sinks.push(Box::new(PrometheusTextfile::new(p, prometheus_textfile)));
    }
    if let Some(p) = &args.codecarbon_csv {
        let format = codecarbon::Format {
            header: CODECARBON_HEADER,
            row: |r, columns| codecarbon_row_in(r, columns).map_err(Into::into),
        };
        sinks.push(Box::new(CodeCarbonCsv::new(p, format)));
    }
    if let Some(p) = &args.log {
        sinks.push(Box::new(SampleLog::new(p)));
    }
    sinks
}

/// Notices on stderr: warnings and notes always, progress unless `--quiet`.
fn notify() -> Notify {
    Arc::new(|n| match n {
        Notice::Warning(w) => eprintln!("amdahl: warning: {w}"),
        Notice::Note(m) => eprintln!("amdahl: {m}"),
        Notice::Progress(m) => crate::output::note(&m),
    })
}

/// `run`'s measurement around work: the command's (`amdahl run`) or the tracked code's (the
/// Python tracker, through [`crate::embed`], which names its interpreter's `python_version`).
pub fn start_session(
    args: &Args,
    probe: Arc<ProcessProbe>,
    work: Arc<Work>,
    python_version: Option<String>,
) -> Result<Session> {
    let settings = settings(args, &probe, python_version)?;
    Ok(Session::start(
        settings,
        sinks(args),
        probe,
        work,
        notify(),
    )?)
}

/// Start the command; with `--progress-regex` its stdout is piped and copied through by a
/// thread that counts the steps into `work` (without it, the command keeps amdahl's stdout).
fn spawn(
    args: &Args,
    work: &Arc<Work>,
) -> Result<(std::process::Child, Option<stdout_progress::Tee>), MeterError> {
    let Some(re) = &args.progress.progress_regex else {
        return Ok((runner::spawn(&args.command)?, None));
    };
    let mut child = runner::spawn_piping_stdout(&args.command)?;
    let tee = child
        .stdout
        .take()
        .map(|out| stdout_progress::start(out, re.clone(), Arc::clone(work)));
    Ok((child, tee))
}

/// After the command exited: its output is all in the pipe, so the copy ends at once unless
/// background processes it started hold the pipe open; they get a moment, not the whole run.
fn finish_tee(tee: stdout_progress::Tee) -> Vec<String> {
    const GRACE: Duration = Duration::from_secs(2);
    match tee.finish(GRACE) {
        Some(end) => end.warnings,
        None => vec![format!(
            "--progress-regex: the command's stdout was still open {} s after it exited (a process it started in the background holds it); steps printed after that are not in the record",
            GRACE.as_secs()
        )],
    }
    .into_iter()
    .inspect(|w| eprintln!("amdahl: warning: {w}"))
    .collect()
}

pub fn run(args: Args) -> Result<ExitCode> {
    validate(&args)?;
    // Before anything is measured: from here on every catchable signal is forwarded to the
    // command and the final record still gets written.
    runner::install_forwarding()?;
    let probe = ProcessProbe::new();
    let work = Arc::new(Work::default());
    let session = start_session(&args, Arc::clone(&probe), Arc::clone(&work), None)?;
    let mut warnings = Vec::new();
    let (finished, spawn_error) = match spawn(&args, &work) {
        Ok((mut child, tee)) => {
            let finished = runner::wait(&mut child, true)?;
            warnings.extend(tee.map(finish_tee).unwrap_or_default());
            (Some(finished), None)
        }
        Err(e) => (None, Some(e)),
    };
    if let Some(f) = &finished {
        probe.finish(f.cpu.get());
    }
    let exit_code = match (&finished, &spawn_error) {
        (Some(f), _) => f.exit_code,
        (None, Some(MeterError::CommandNotExecutable { .. })) => 126,
        _ => 127,
    };
    if let Some(e) = &spawn_error {
        eprintln!("amdahl: error: {e}");
    }
    if finished.is_some() {
        let left = procfs::live_children(std::process::id(), &procfs::all_pid_stats());
        if !left.is_empty() {
            let pids: Vec<String> = left.iter().map(|p| p.to_string()).collect();
            let w = format!(
                "{} process(es) the command started in the background still run after it exited (pid {}); they were measured only until the command exited",
                left.len(),
                pids.join(", ")
            );
            eprintln!("amdahl: warning: {w}");
            warnings.push(w);
        }
    }
    for sig in runner::received() {
        if !runner::TERMINATING.contains(&sig) {
            warnings.push(format!(
                "amdahl received {} and forwarded it to the command",
                runner::signal_name(sig)
            ));
        }
    }
    let interrupted = runner::interrupted();
    let rec = session.finish(Ending {
        exit_code: Some(exit_code),
        child_signal: finished.and_then(|f| f.signal),
        partial: interrupted.is_some(),
        interrupted_by: interrupted.map(runner::signal_name),
        not_started: spawn_error.as_ref().map(|e| e.to_string()),
        cpu_time: finished.map(|f| f.cpu),
        max_rss: finished.map(|f| f.max_rss),
        warnings,
        ran: finished.is_some(),
    })?;
    if spawn_error.is_none() && !crate::output::quiet() {
        eprint!("{}", run_summary(&rec));
    }
    for p in [
        &args.output,
        &args.log,
        &args.prometheus,
        &args.codecarbon_csv,
    ]
    .into_iter()
    .flatten()
    {
        crate::output::wrote(p);
    }
    Ok(ExitCode::from(exit_code.clamp(0, 255) as u8))
}

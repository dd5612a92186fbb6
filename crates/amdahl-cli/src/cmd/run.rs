//! `amdahl run -- CMD ARGS...`: run a command and measure the energy it uses.
//!
//! Order matters: everything that can fail (arguments, region, output paths) fails before the
//! command starts; the result file is rewritten after every sample (`partial: true` until the
//! end) and the sample log is flushed per line, so a killed run leaves valid files.
//! The summary goes to stderr: the command's own stdout passes through amdahl's stdout, and a
//! summary there would corrupt it (`amdahl run -- ./export > data.csv`), as with time(1).

use super::codecarbon::CodeCarbon;
use super::measure_args::{measure_baseline, CostArgs, SensorArgs};
use crate::output::{is_stream, write_file};
use amdahl_meter::cluster::{self, Role};
use amdahl_meter::estimate::{self, ProcessProbe, Target};
use amdahl_meter::meter::Meter;
use amdahl_meter::progress::{self, Work};
use amdahl_meter::record::{self, Host, Progress, RunContext, RunRecord, Scope};
use amdahl_meter::{
    procfs, runner, sampler, sensors, stdout_progress, EnergySource, MeterError, Sample,
};
use amdahl_model::carbon::kg_per_joule;
use amdahl_model::units::Seconds;
use amdahl_report::meter::{prometheus_textfile, run_summary};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
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
    #[arg(long, value_name = "S", requires = "progress_source", value_parser = clap::value_parser!(u64).range(1..))]
    pub total_steps: Option<u64>,
}

/// The files rewritten after every sample: the JSON result and the Prometheus textfile.
#[derive(Clone, Default)]
struct LiveOutputs {
    json: Option<PathBuf>,
    prometheus: Option<PathBuf>,
}

impl LiveOutputs {
    fn new(args: &Args) -> Self {
        Self {
            json: args.output.clone(),
            prometheus: args.prometheus.clone(),
        }
    }

    /// Write both. Before the end (`last` false) a FIFO or device (`-o /dev/stdout`) is left
    /// alone: it gets one document, the final one, rather than one per sample.
    fn write(&self, r: &RunRecord, last: bool) -> Result<()> {
        let now = |p: &Path| last || !is_stream(p);
        if let Some(o) = self.json.as_deref().filter(|p| now(p)) {
            write_record(o, r)?;
        }
        if let Some(p) = self.prometheus.as_deref().filter(|p| now(p)) {
            write_file(p, &prometheus_textfile(r))
                .with_context(|| format!("writing the Prometheus textfile {}", p.display()))?;
        }
        Ok(())
    }
}

fn write_record(path: &Path, r: &RunRecord) -> Result<()> {
    let json = amdahl_report::to_json(r).context("serialising the result")?;
    write_file(path, &json)
}

fn validate(args: &Args) -> Result<()> {
    if args.baseline.is_some() && matches!(args.scope, ScopeArg::Process) {
        bail!("--baseline measures the idle machine and applies to --scope machine only");
    }
    Ok(())
}

/// The sources for this process: none for a reference rank (local rank 0 measures the node).
fn sources(
    options: sensors::Options,
    ctx: &RunContext,
) -> (Vec<Box<dyn EnergySource>>, Vec<String>) {
    if ctx.cluster.role == Role::Reference {
        return (Vec::new(), Vec::new());
    }
    let d = sensors::discover(options);
    (d.sources, d.warnings)
}

fn in_progress(duration: Seconds, warnings: &[String]) -> Progress {
    Progress {
        duration,
        partial: true,
        warnings: warnings.to_vec(),
        ..Default::default()
    }
}

/// Create every output before the command starts, so a bad path fails first. Returns the log
/// and the CodeCarbon CSV.
fn open_outputs(
    args: &Args,
    ctx: &RunContext,
    meter: &Meter,
    warnings: &[String],
) -> Result<(Option<std::fs::File>, Option<Arc<CodeCarbon>>)> {
    let first = record::build(ctx, &meter.energies(), in_progress(Seconds::ZERO, warnings));
    LiveOutputs::new(args).write(&first, false).context(
        "cannot write an output file before starting the command (fix the path or its permissions)",
    )?;
    let codecarbon = match &args.codecarbon_csv {
        Some(c) => {
            let (cc, recovered) = CodeCarbon::open(c, &ctx.run_id)?;
            for note in recovered {
                eprintln!("amdahl: {note}");
            }
            Some(Arc::new(cc))
        }
        None => None,
    };
    let Some(p) = &args.log else {
        return Ok((None, codecarbon));
    };
    let mut f = std::fs::File::create(p).with_context(|| {
        format!(
            "cannot write the sample log {} (fix the path or its permissions)",
            p.display()
        )
    })?;
    let head = amdahl_meter::meter::SampleLogHeader::new(&ctx.run_id, meter.device_infos());
    let head = serde_json::to_string(&head).context("serialising the sample log header")?;
    writeln!(f, "{head}").with_context(|| format!("writing {}", p.display()))?;
    Ok((Some(f), codecarbon))
}

/// What every sample updates besides the meter: the units of work and, from them, the
/// projection the record carries.
#[derive(Clone)]
struct Tally {
    work: Arc<Work>,
    progress_file: Option<PathBuf>,
    /// PUE × g/kWh ÷ 3.6·10⁹: kg CO2e per joule, as the record converts its energy.
    kg_per_joule: f64,
}

impl Tally {
    /// Read the progress file, mark the units at this record's time and energy, and put the
    /// projection into the record.
    fn update(&self, r: &mut RunRecord) {
        if let Some((n, at)) = self
            .progress_file
            .as_deref()
            .and_then(progress::read_progress_file)
        {
            self.work.steps.set(n, at);
        }
        self.work
            .mark(r.duration_s.get(), r.total_energy_j.get(), r.started_unix_s);
        r.projection = self
            .work
            .projection()
            .map(|p| p.with_carbon(self.kg_per_joule));
    }
}

/// Per sample: append the log line (flushed) and rewrite the partial result. Write failures
/// are reported once and do not stop the measurement.
fn on_sample(
    args: &Args,
    ctx: &RunContext,
    mut log: Option<std::fs::File>,
    warnings: &[String],
    codecarbon: Option<Arc<CodeCarbon>>,
    tally: Tally,
) -> sampler::OnSample {
    let (ctx, outputs, warnings) = (ctx.clone(), LiveOutputs::new(args), warnings.to_vec());
    let log_path = args.log.clone().unwrap_or_default();
    let mut warned = false;
    Box::new(move |m: &Meter, s: &Sample| {
        let mut err = None;
        if let Some(f) = log.as_mut() {
            let line = serde_json::to_string(s).unwrap_or_default();
            if let Err(e) = writeln!(f, "{line}").and_then(|_| f.flush()) {
                err = Some(format!("sample log {}: {e}", log_path.display()));
            }
        }
        let mut r = record::build(&ctx, &m.energies(), in_progress(s.t_s, &warnings));
        tally.update(&mut r);
        if let Some(cc) = &codecarbon {
            if let Err(e) = cc.save_pending(&r) {
                err = Some(format!("{e:#}"));
            }
        }
        if let Err(e) = outputs.write(&r, false) {
            err = Some(format!("{e:#}"));
        }
        if let (Some(e), false) = (err, warned) {
            eprintln!("amdahl: warning: {e}");
            warned = true;
        }
    })
}

/// A measurement in progress around some work: `amdahl run` around its command, the Python
/// tracker (`crates/amdahl-py`) around a block of code in its own process. Everything that can
/// fail before the work starts (region, PUE, output paths) has failed in [`Session::start`];
/// from then on the result file is rewritten after every sample, and [`Session::finish`] writes
/// the final record and the CodeCarbon row.
pub struct Session {
    ctx: RunContext,
    outputs: LiveOutputs,
    codecarbon: Option<Arc<CodeCarbon>>,
    sampler: sampler::Sampler,
    probe: Arc<ProcessProbe>,
    warnings: Vec<String>,
    busy0: Option<Seconds>,
    tally: Tally,
}

/// How the measured work ended, as far as the caller knows it.
#[derive(Debug, Default)]
pub struct Ending {
    pub exit_code: Option<i32>,
    pub child_signal: Option<i32>,
    pub partial: bool,
    pub interrupted_by: Option<String>,
    pub not_started: Option<String>,
    /// CPU time of the work in machine scope (process scope charges the probe's figure).
    pub cpu_time: Option<Seconds>,
    pub max_rss: Option<amdahl_model::units::Bytes>,
    pub warnings: Vec<String>,
    /// Whether the work ran at all: one that never started has no share and no CodeCarbon row.
    pub ran: bool,
}

impl Session {
    /// Resolve the cost, find the sensors, create every output, measure the baseline if asked,
    /// and start sampling. `probe` follows the processes the scope charges (`amdahl run`: the
    /// command's tree; the tracker: its own process too); `work` counts units for projection.
    pub fn start(args: &Args, probe: Arc<ProcessProbe>, work: Arc<Work>) -> Result<Session> {
        validate(args)?;
        let cost = args.cost.resolve()?;
        let mut ctx = RunContext {
            run_id: record::new_run_id(),
            project: args.project.clone(),
            command: args.command.clone(),
            started_unix_s: record::unix_now(),
            scope: match args.scope {
                ScopeArg::Machine => Scope::Machine,
                ScopeArg::Process => Scope::Process,
            },
            interval: Seconds(args.interval.as_secs_f64()),
            host: Host::this_machine(),
            cluster: cluster::detect(|k| std::env::var(k).ok()),
            pue: cost.pue.value,
            intensity: cost.intensity,
            baseline: None,
        };
        let target = match ctx.scope {
            Scope::Machine => Target::Machine,
            Scope::Process => Target::Process(Arc::clone(&probe)),
        };
        let (options, tdp_note) = args.sensors.options(&cost.catalogs, target);
        let (sources, mut warnings) = sources(options, &ctx);
        // Which catalog row (or the fallback) the CPU estimate uses: printed, and kept in the record.
        if let Some(note) = tdp_note.filter(|_| sensors::estimates_cpu(&sources)) {
            warnings.insert(0, note);
        }
        for w in &warnings {
            eprintln!("amdahl: warning: {w}");
        }
        let mut meter = Meter::new(sources);
        let (log, codecarbon) = open_outputs(args, &ctx, &meter, &warnings)?;
        if let Some(d) = args.baseline.filter(|_| ctx.cluster.role == Role::Measured) {
            ctx.baseline = Some(measure_baseline(&mut meter, d));
        }
        if let Some(t) = args.progress.total_steps {
            work.steps.set_total(t);
        }
        let tally = Tally {
            work,
            progress_file: args.progress.progress_file.clone(),
            kg_per_joule: kg_per_joule(ctx.pue, ctx.intensity.g_per_kwh),
        };
        // The work starts now: the baseline phase is not part of the run's window.
        ctx.started_unix_s = record::unix_now();
        let busy0 = procfs::machine_busy();
        let sampler = sampler::start(
            meter,
            args.interval,
            on_sample(
                args,
                &ctx,
                log,
                &warnings,
                codecarbon.clone(),
                tally.clone(),
            ),
        );
        Ok(Session {
            ctx,
            outputs: LiveOutputs::new(args),
            codecarbon,
            sampler,
            probe,
            warnings,
            busy0,
            tally,
        })
    }

    pub fn context(&self) -> &RunContext {
        &self.ctx
    }

    /// Stop sampling, and write the final record (every output is attempted before an error
    /// is returned).
    pub fn finish(self, end: Ending) -> Result<RunRecord> {
        let meter = self.sampler.stop()?;
        let busy1 = procfs::machine_busy();
        // Process scope: the work's CPU time over the machine's busy CPU time in the same
        // window. The probe's figure is the larger of rusage and the live /proc scans (which
        // also saw orphans still running when the command exited).
        let share = match (self.ctx.scope, end.ran, self.busy0, busy1) {
            (Scope::Process, true, Some(a), Some(b)) => {
                Some(estimate::cpu_share(self.probe.cpu_seconds(), (b - a).get()))
            }
            (Scope::Process, ..) => Some(0.0),
            (Scope::Machine, ..) => None,
        };
        let mut warnings = self.warnings;
        warnings.extend(end.warnings);
        let mut rec = record::build(
            &self.ctx,
            &meter.energies(),
            Progress {
                duration: meter.elapsed(),
                exit_code: end.exit_code,
                child_signal: end.child_signal,
                partial: end.partial,
                interrupted_by: end.interrupted_by,
                not_started: end.not_started,
                cpu_time: end
                    .ran
                    .then(|| match self.ctx.scope {
                        Scope::Process => Some(Seconds(self.probe.cpu_seconds())),
                        Scope::Machine => end.cpu_time,
                    })
                    .flatten(),
                max_rss: end.max_rss,
                share,
                warnings,
            },
        );
        self.tally.update(&mut rec);
        // Both outputs are attempted before either error is reported: a failing `-o` must not
        // cost the CodeCarbon row, nor the reverse.
        let written = self.outputs.write(&rec, true);
        let appended = match self.codecarbon {
            // The sampler has stopped, so this is the only reference left.
            Some(cc) => match Arc::try_unwrap(cc) {
                // Work that never ran gets no row: CodeCarbon would have measured nothing.
                Ok(cc) => cc.finish(end.ran.then_some(&rec)),
                Err(_) => Err(anyhow::anyhow!("the CodeCarbon file is still in use")),
            },
            None => Ok(()),
        };
        written?;
        appended?;
        Ok(rec)
    }
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
    let session = Session::start(&args, Arc::clone(&probe), Arc::clone(&work))?;
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

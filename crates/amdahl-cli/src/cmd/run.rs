//! `amdahl run -- CMD ARGS...`: run a command and measure the energy it uses.
//!
//! Order matters: everything that can fail (arguments, region, output paths) fails before the
//! command starts; the result file is rewritten after every sample (`partial: true` until the
//! end) and the sample log is flushed per line, so a killed run leaves valid files.
//! The summary goes to stderr: the command's own stdout passes through amdahl's stdout, and a
//! summary there would corrupt it (`amdahl run -- ./export > data.csv`), as with time(1).

use super::resolve::{self, GridArgs};
use crate::output::write_file;
use amdahl_meter::cluster::{self, Role};
use amdahl_meter::estimate::{self, ProcessProbe, Target};
use amdahl_meter::gpu::parse_visible;
use amdahl_meter::meter::Meter;
use amdahl_meter::record::{self, Host, Intensity, Progress, RunContext, RunRecord, Scope};
use amdahl_meter::{procfs, rapl, runner, sampler, sensors, EnergySource, MeterError, Sample};
use amdahl_model::catalog::Catalogs;
use amdahl_model::units::{Seconds, Watts};
use amdahl_report::meter::{codecarbon_row, prometheus_textfile, run_summary, CODECARBON_HEADER};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ScopeArg {
    Machine,
    Process,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Time between samples: 1s, 250ms, 0.5s, 2m.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    #[command(flatten)]
    pub cost: CostArgs,
    /// Measure the whole machine, or only the command's share of it.
    #[arg(long, value_enum, default_value_t = ScopeArg::Machine)]
    pub scope: ScopeArg,
    /// Measure idle power for this long before starting, and report the energy above it.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub baseline: Option<Duration>,
    /// Write the result as JSON (schema amdahl.run/1), rewritten after every sample.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write every sample as a JSON line, flushed as it is taken.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Write the run in Prometheus text format after every sample (for node_exporter's textfile
    /// collector: give a path inside its --collector.textfile.directory, ending in .prom).
    #[arg(long, value_name = "FILE")]
    pub prometheus: Option<PathBuf>,
    /// Append a row to a CodeCarbon-compatible emissions.csv.
    #[arg(long, value_name = "FILE")]
    pub codecarbon_csv: Option<PathBuf>,
    #[command(flatten)]
    pub sensors: SensorArgs,
    /// The command and its arguments (after `--`, or after amdahl's own options).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        value_name = "CMD"
    )]
    pub command: Vec<String>,
}

/// The sensor options `run` and `scale` share.
#[derive(clap::Args, Debug, Clone)]
pub struct SensorArgs {
    #[command(flatten)]
    pub powercap: PowercapArgs,
    /// TDP of the CPU package in watts, for the estimate when no RAPL counter is readable
    /// [default: from the device catalog when /proc/cpuinfo names a known CPU].
    #[arg(long, value_name = "W", value_parser = positive_watts)]
    pub cpu_tdp: Option<f64>,
    /// Do not open NVML (no GPU measurement).
    #[arg(long)]
    pub no_gpu: bool,
}

fn positive_watts(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(w) if w.is_finite() && w > 0.0 => Ok(w),
        _ => Err(format!("`{s}`: must be a power in watts > 0")),
    }
}

/// What turns measured joules into kWh and CO2e, as `run` and `scale` take it: the grid, the PUE
/// and extra catalog files.
#[derive(clap::Args, Debug, Clone)]
pub struct CostArgs {
    #[command(flatten)]
    pub grid: GridArgs,
    /// PUE: a number ≥ 1 or a preset (local = 1.0, hyperscale, industry) [default: local].
    #[arg(long, value_name = "PUE|PRESET")]
    pub pue: Option<String>,
    /// Extra catalog files (devices, regions, PUE presets); rows override embedded ones by name.
    #[arg(long = "catalog", value_name = "FILE")]
    pub catalogs: Vec<PathBuf>,
}

/// Where the RAPL counters are: `--powercap-root DIR` or `AMDAHL_POWERCAP_ROOT` (a bind-mounted
/// /sys/class/powercap in a container, a fake tree in tests). Shared with `amdahl bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct PowercapArgs {
    /// Root of the powercap tree (RAPL).
    #[arg(long, env = "AMDAHL_POWERCAP_ROOT", default_value = rapl::DEFAULT_ROOT, value_name = "DIR")]
    pub powercap_root: PathBuf,
}

/// `1s`, `250ms`, `0.5s`, `2m`, `1h`, or a bare number of seconds; must be > 0.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (examples: 1s, 250ms, 0.5s, 2m)"))?;
    let secs = v * scale;
    if !(secs.is_finite() && secs > 0.0) {
        return Err(format!("`{s}`: the duration must be greater than zero"));
    }
    // About 31 years: beyond it the value is a typo, and timers would overflow.
    if secs > 1e9 {
        return Err(format!("`{s}`: too long (at most 1e9 s)"));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| format!("`{s}`: {e}"))
}

/// The grid intensity for the record, from `--region` / `--intensity` through the grid catalog.
pub(crate) fn intensity(grid: &GridArgs, c: &Catalogs) -> Result<Intensity> {
    let g = grid.resolve(c)?;
    Ok(Intensity {
        g_per_kwh: g.g_per_kwh,
        region: g.code.clone(),
        source: format!("{} ({})", g.source, g.scope),
        year: Some(g.year),
    })
}

/// The CPU power the estimate charges: `--cpu-tdp`, else the catalog's entry for the CPU that
/// /proc/cpuinfo names. The estimate divides it over the logical CPUs this process sees, so a
/// catalog TDP is first scaled to them — TDP per physical core × visible CPUs, at most the whole
/// package — or a container seeing 2 of 128 cores would charge each one 64× too much. Counting
/// a logical CPU as a core errs high on SMT machines; the note printed says so.
pub(crate) fn cpu_tdp(given: Option<f64>, c: &Catalogs) -> (Option<Watts>, Option<String>) {
    if let Some(w) = given {
        return (Some(Watts(w)), None);
    }
    let model = procfs::cpu_model();
    let Some(dev) = model.as_deref().and_then(|m| c.devices.identify(m)) else {
        return (None, None);
    };
    let (Some(tdp), Some(per_core)) = (dev.tdp, dev.tdp_per_core()) else {
        return (None, None);
    };
    let visible = procfs::cpu_count() as f64;
    let scaled = Watts((per_core.get() * visible).min(tdp.get()));
    let note = format!(
        "CPU estimate from the device catalog: {} ({:.0} W over {} cores) scaled to {visible} visible logical CPUs = {:.0} W (a logical CPU is counted as a core; give --cpu-tdp to override)",
        dev.name,
        tdp.get(),
        dev.cores.unwrap_or(0),
        scaled.get()
    );
    (Some(scaled), Some(note))
}

pub(crate) fn host() -> Host {
    Host {
        hostname: procfs::hostname(),
        os: procfs::os_string(),
        cpu_model: procfs::cpu_model().unwrap_or_default(),
        cpu_count: procfs::cpu_count(),
        ram_total_gb: procfs::mem_total_bytes()
            .map(|b| b as f64 / 1e9)
            .unwrap_or(0.0),
    }
}

/// Open the CodeCarbon CSV for appending, checking an existing header first.
fn check_codecarbon(path: &Path) -> Result<()> {
    match std::fs::read_to_string(path) {
        Ok(text) if !text.trim().is_empty() => {
            let first = text
                .lines()
                .next()
                .unwrap_or_default()
                .trim_end_matches('\r');
            if first != CODECARBON_HEADER {
                bail!(
                    "{}: its header is not CodeCarbon 3.x's 38 columns; rows would not line up. Use a new file, or move this one away",
                    path.display()
                );
            }
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(e).with_context(|| {
                format!(
                    "cannot write {} (fix the path or its permissions)",
                    path.display()
                )
            })
        }
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| {
            format!(
                "cannot write {} (fix the path or its permissions)",
                path.display()
            )
        })?;
    Ok(())
}

fn append_codecarbon(path: &Path, r: &RunRecord) -> Result<()> {
    let row = codecarbon_row(r).context("formatting the CodeCarbon row")?;
    let empty = std::fs::metadata(path)
        .map(|m| m.len() == 0)
        .unwrap_or(true);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    let text = if empty {
        format!("{CODECARBON_HEADER}\n{row}")
    } else {
        row
    };
    f.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

pub(crate) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
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

    fn write(&self, r: &RunRecord) -> Result<()> {
        if let Some(o) = &self.json {
            write_record(o, r)?;
        }
        if let Some(p) = &self.prometheus {
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

/// Whether the CPU is estimated (no readable RAPL package counter), so the TDP note matters.
pub(crate) fn meter_estimates_cpu(sources: &[Box<dyn EnergySource>]) -> bool {
    sources.iter().flat_map(|s| s.devices()).any(|d| {
        d.method == amdahl_meter::Method::Estimate && d.kind == amdahl_meter::DeviceKind::Cpu
    })
}

/// The sources for this process: none for a reference rank (local rank 0 measures the node).
fn sources(
    args: &Args,
    cpu_tdp: Option<Watts>,
    ctx: &RunContext,
    probe: &Arc<ProcessProbe>,
) -> (Vec<Box<dyn EnergySource>>, Vec<String>) {
    if ctx.cluster.role == Role::Reference {
        return (Vec::new(), Vec::new());
    }
    let d = sensors::discover(sensors::Options {
        powercap_root: args.sensors.powercap.powercap_root.clone(),
        reader: rapl::fs_reader(),
        cpu_tdp,
        nvml: !args.sensors.no_gpu,
        visible: parse_visible(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref()),
        target: match ctx.scope {
            Scope::Machine => Target::Machine,
            Scope::Process => Target::Process(Arc::clone(probe)),
        },
    });
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

/// Create every output before the command starts, so a bad path fails first. Returns the log.
fn open_outputs(
    args: &Args,
    ctx: &RunContext,
    meter: &Meter,
    warnings: &[String],
) -> Result<Option<std::fs::File>> {
    let first = record::build(ctx, &meter.energies(), in_progress(Seconds::ZERO, warnings));
    LiveOutputs::new(args).write(&first).context(
        "cannot write an output file before starting the command (fix the path or its permissions)",
    )?;
    if let Some(c) = &args.codecarbon_csv {
        check_codecarbon(c)?;
    }
    let Some(p) = &args.log else { return Ok(None) };
    let mut f = std::fs::File::create(p).with_context(|| {
        format!(
            "cannot write the sample log {} (fix the path or its permissions)",
            p.display()
        )
    })?;
    let head = serde_json::json!({"schema": "amdahl.samples/1", "run_id": ctx.run_id, "devices": meter.device_infos()});
    writeln!(f, "{head}").with_context(|| format!("writing {}", p.display()))?;
    Ok(Some(f))
}

/// Idle power over `d` before the command starts (hyperfine's calibrate-and-subtract, for power).
pub(crate) fn measure_baseline(meter: &mut Meter, d: Duration) -> (Seconds, Watts) {
    eprintln!(
        "amdahl: measuring idle power for {} s before starting",
        d.as_secs_f64()
    );
    meter.restart_clock();
    meter.sample();
    std::thread::sleep(d);
    meter.sample();
    let secs = meter.elapsed();
    let p = record::total_power(&meter.energies(), secs);
    meter.reset();
    (secs, p)
}

/// Per sample: append the log line (flushed) and rewrite the partial result. Write failures
/// are reported once and do not stop the measurement.
fn on_sample(
    args: &Args,
    ctx: &RunContext,
    mut log: Option<std::fs::File>,
    warnings: &[String],
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
        if outputs.json.is_some() || outputs.prometheus.is_some() {
            let r = record::build(&ctx, &m.energies(), in_progress(s.t_s, &warnings));
            if let Err(e) = outputs.write(&r) {
                err = Some(format!("{e:#}"));
            }
        }
        if let (Some(e), false) = (err, warned) {
            eprintln!("amdahl: warning: {e}");
            warned = true;
        }
    })
}

pub fn run(args: Args) -> Result<ExitCode> {
    validate(&args)?;
    let catalogs = resolve::load(&args.cost.catalogs)?;
    let pue = resolve::pue(args.cost.pue.as_deref(), "local", &catalogs)?;
    let host = host();
    let now = unix_now();
    let mut ctx = RunContext {
        run_id: record::new_run_id(now, std::process::id(), &host.hostname),
        command: args.command.clone(),
        started_unix_s: now,
        scope: match args.scope {
            ScopeArg::Machine => Scope::Machine,
            ScopeArg::Process => Scope::Process,
        },
        interval: Seconds(args.interval.as_secs_f64()),
        host,
        cluster: cluster::detect(|k| std::env::var(k).ok()),
        pue: pue.value,
        intensity: intensity(&args.cost.grid, &catalogs)?,
        baseline: None,
    };
    let probe = ProcessProbe::new();
    let (tdp, tdp_note) = cpu_tdp(args.sensors.cpu_tdp, &catalogs);
    let (sources, mut warnings) = sources(&args, tdp, &ctx, &probe);
    if let Some(note) = tdp_note.filter(|_| meter_estimates_cpu(&sources)) {
        eprintln!("amdahl: {note}");
    }
    for w in &warnings {
        eprintln!("amdahl: warning: {w}");
    }
    let mut meter = Meter::new(sources);
    let log = open_outputs(&args, &ctx, &meter, &warnings)?;
    if let Some(d) = args.baseline.filter(|_| ctx.cluster.role == Role::Measured) {
        ctx.baseline = Some(measure_baseline(&mut meter, d));
    }

    // The command starts now: the baseline phase is not part of the run's window.
    ctx.started_unix_s = unix_now();
    runner::install_forwarding();
    let busy0 = procfs::machine_busy();
    let sampler = sampler::start(meter, args.interval, on_sample(&args, &ctx, log, &warnings));
    let (finished, spawn_error) = match runner::spawn(&args.command) {
        Ok(mut child) => (Some(runner::wait(&mut child, true)?), None),
        Err(e) => (None, Some(e)),
    };
    if let Some(f) = &finished {
        probe.finish(f.cpu.get());
    }
    let meter = sampler.stop()?;
    let busy1 = procfs::machine_busy();

    let exit_code = match (&finished, &spawn_error) {
        (Some(f), _) => f.exit_code,
        (None, Some(MeterError::CommandNotExecutable { .. })) => 126,
        _ => 127,
    };
    if let Some(e) = &spawn_error {
        eprintln!("amdahl: error: {e}");
        warnings.push(e.to_string());
    }
    // Process scope: the command's CPU time over the machine's busy CPU time in the same window.
    // The probe's figure is the larger of rusage and the live /proc scans (which also saw
    // orphans still running when the command exited).
    let share = match (ctx.scope, &finished, busy0, busy1) {
        (Scope::Process, Some(_), Some(a), Some(b)) => {
            Some(estimate::cpu_share(probe.cpu_seconds(), (b - a).get()))
        }
        (Scope::Process, ..) => Some(0.0),
        (Scope::Machine, ..) => None,
    };
    let interrupted = runner::interrupted();
    let rec = record::build(
        &ctx,
        &meter.energies(),
        Progress {
            duration: meter.elapsed(),
            exit_code: Some(exit_code),
            child_signal: finished.and_then(|f| f.signal),
            partial: interrupted.is_some(),
            interrupted_by: interrupted.map(runner::signal_name),
            cpu_time: finished.map(|f| match ctx.scope {
                Scope::Process => Seconds(probe.cpu_seconds()),
                Scope::Machine => f.cpu,
            }),
            max_rss: finished.map(|f| f.max_rss),
            share,
            warnings,
        },
    );
    LiveOutputs::new(&args).write(&rec)?;
    if let Some(c) = &args.codecarbon_csv {
        append_codecarbon(c, &rec)?;
    }
    if spawn_error.is_none() {
        eprint!("{}", run_summary(&rec));
    }
    Ok(ExitCode::from(exit_code.clamp(0, 255) as u8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("0.5"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("1e300s").is_err());
    }

    fn grid(region: &str) -> GridArgs {
        GridArgs {
            region: Some(region.into()),
            intensity: None,
            intensity_scope: "lifecycle".into(),
            intensity_year: None,
            intensity_source: None,
        }
    }

    #[test]
    fn region_resolves_through_the_grid_catalog() {
        let c = resolve::load(&[]).unwrap();
        // data/grid.csv: France 56.0 g/kWh (OWID/Ember 2023); world 475 (IEA 2019).
        let fr = intensity(&grid("FR"), &c).unwrap();
        assert_eq!((fr.g_per_kwh.get(), fr.year), (56.0, Some(2023)));
        assert_eq!(
            intensity(&grid("world"), &c).unwrap().g_per_kwh.get(),
            475.0
        );
        let e = format!("{:#}", intensity(&grid("Frnace"), &c).unwrap_err());
        assert!(e.contains("France"), "suggests the nearest name: {e}");
    }
}

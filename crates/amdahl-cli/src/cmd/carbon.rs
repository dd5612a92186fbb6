//! `amdahl carbon` — estimate the energy and emissions of a job from (a) hardware-hours, (b) compute
//! (6·P·D or a FLOP count at an achieved fraction of peak) or (c) the saved JSON result of another
//! amdahl command; compare grids; print a statement a paper can cite.
//!
//! Arguments are checked in two stages (raw flags → [`Plan`]) so that conflicting or missing
//! options are reported with what to do, as ordinary errors (exit 1).

use crate::cmd::resolve::{exclusive, grid_for, load, pue_for, GridArgs};
use crate::domain;
use crate::output::{print_result, Format, FormatArgs};
use amdahl_model::carbon::network::NetworkIntensity;
use amdahl_model::carbon::{self, embodied, from_result, ItEnergy, Statement};
use amdahl_model::catalog::devices::{Device, PeakPrecision};
use amdahl_model::catalog::{embodied as factors, Catalogs};
use amdahl_model::units::{Flops, FlopsPerSecond, Seconds, Watts};
use amdahl_report::{carbon as render, render::Render, to_json};
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatementFormat {
    Md,
    Tex,
    Json,
}

/// The subcommand's arguments; boxed because they are many (keeps `Command` small).
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub options: Box<Options>,
}

#[derive(clap::Args, Debug)]
pub struct Options {
    /// Device name or alias from `amdahl catalog devices` (e.g. h100, v100, tpuv4).
    #[arg(help_heading = "Job", long)]
    pub device: Option<String>,
    /// Number of devices working in parallel.
    #[arg(help_heading = "Job", long, value_parser = domain::count)]
    pub count: Option<u32>,
    /// Wall-clock duration in hours.
    #[arg(help_heading = "Job", long, value_parser = domain::positive)]
    pub hours: Option<f64>,
    /// Wall-clock duration in days.
    #[arg(help_heading = "Job", long, value_parser = domain::positive)]
    pub days: Option<f64>,
    /// Total device-hours (e.g. "GPU-hours" in a paper), with --count: the wall-clock time is
    /// H / count (without the count the duration, and the embodied share, would be invented).
    #[arg(help_heading = "Job", long, value_name = "H", value_parser = domain::positive, requires = "count")]
    pub device_hours: Option<f64>,
    /// Average power per device in watts.
    #[arg(help_heading = "Job", long, value_name = "W", value_parser = domain::device_watts)]
    pub power: Option<f64>,
    /// A device profile of --device (`amdahl bench … --profile-out`): its power measured under
    /// load replaces the TDP assumption (instead of --power or --utilisation).
    #[arg(help_heading = "Job", long, value_name = "FILE")]
    pub device_profile: Option<PathBuf>,
    /// Average utilisation in (0, 1]: power = device TDP × utilisation.
    #[arg(
        help_heading = "Job",
        long,
        alias = "utilization",
        value_name = "U", value_parser = domain::fraction)]
    pub utilisation: Option<f64>,
    /// Model parameters (compute path: FLOPs = 6·P·D).
    #[arg(help_heading = "Compute path", long, value_name = "P", value_parser = domain::positive)]
    pub params: Option<f64>,
    /// Take the parameter count from `amdahl catalog models`.
    #[arg(help_heading = "Compute path", long, value_name = "NAME")]
    pub model: Option<String>,
    /// Training tokens D (compute path).
    #[arg(help_heading = "Compute path", long, value_name = "D", value_parser = domain::positive)]
    pub tokens: Option<f64>,
    /// A FLOP count instead of 6·P·D.
    #[arg(help_heading = "Compute path", long, value_name = "F", value_parser = domain::positive)]
    pub flops: Option<f64>,
    /// Model FLOPs utilisation in (0, 1]: achieved ÷ peak.
    #[arg(help_heading = "Compute path", long, value_parser = domain::fraction)]
    pub mfu: Option<f64>,
    /// Achieved TFLOP/s per device (instead of --mfu).
    #[arg(help_heading = "Compute path", long, value_name = "T", value_parser = domain::positive)]
    pub achieved_tflops: Option<f64>,
    /// Precision whose peak the compute path uses (fp64, fp32, tf32, bf16/fp16, fp8, int8).
    #[arg(help_heading = "Compute path", long, default_value = "fp16")]
    pub precision: String,
    /// Read the energy from a saved result: `amdahl run -o FILE` (amdahl.run/1: measured, or
    /// estimated where no counter was readable), or the `--json` output of `amdahl plan`,
    /// `infer` or `serve` (amdahl.plan/1, amdahl.infer/1, amdahl.serve/1: estimated).
    #[arg(help_heading = "Saved result", long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// PUE: a number ≥ 1 or a preset (local, hyperscale, industry) [default: the saved result's
    /// with --from, else local = 1.0, as in every command].
    #[arg(help_heading = "Cost", long)]
    pub pue: Option<String>,
    #[command(flatten, next_help_heading = "Cost")]
    pub grid: GridArgs,
    /// Show the same job on other grids, e.g. FR,PL,US,IN,NO,AU.
    #[arg(
        help_heading = "Where to run",
        long,
        value_delimiter = ',',
        value_name = "CODES"
    )]
    pub compare: Vec<String>,
    /// Where to run: gigabytes shipped from the chosen grid to each --compare site; adds the
    /// transfer's energy and CO2e (on the chosen grid) and says whether moving still pays.
    #[arg(help_heading = "Where to run", long, value_name = "G")]
    pub data_gb: Option<f64>,
    /// Network electricity per GB for --data-gb. Default: an estimate, Aslan et al. 2018's
    /// 0.06 kWh/GB (2015) halving every 2 years, extrapolated to 2025 (0.001875).
    #[arg(help_heading = "Where to run", long, value_name = "KWH")]
    pub network_kwh_per_gb: Option<f64>,
    /// Service life over which embodied carbon is spread, in years.
    #[arg(help_heading = "Cost", long, default_value_t = embodied::DEFAULT_LIFETIME_YEARS, value_parser = domain::lifetime_years)]
    pub lifetime_years: f64,
    /// Leave embodied carbon out.
    #[arg(help_heading = "Cost", long)]
    pub no_embodied: bool,
    /// Print a paragraph a paper can cite instead of the table.
    #[arg(help_heading = "Output", long, value_enum)]
    pub statement: Option<StatementFormat>,
    /// Print the Software Carbon Intensity (ISO/IEC 21031:2024), (E × I + M) per R, per this
    /// functional unit (SCI for AI: consumer token, inference, image, second, page,
    /// execution; provider parameter, training-token, flop) instead of the table. Also reads
    /// `amdahl serve --json` and `amdahl lifetime --json` results with --from.
    #[arg(help_heading = "SCI", long, value_enum, value_name = "UNIT")]
    pub sci: Option<crate::cmd::sci::UnitArg>,
    /// R: how many units the figures cover (tokens served, requests, training FLOPs, ...);
    /// required with --sci.
    #[arg(help_heading = "SCI", long, value_name = "R", requires = "sci")]
    pub sci_r: Option<f64>,
    /// M: the embodied emissions to charge, kgCO2e [default: amdahl's embodied share of the
    /// devices, where it knows them; 0 leaves them out].
    #[arg(help_heading = "SCI", long, value_name = "KG", requires = "sci")]
    pub sci_m: Option<f64>,
    /// Override or extend a catalog with a CSV file in the format of data/*.csv (repeatable).
    #[arg(help_heading = "Cost", long = "catalog", value_name = "FILE")]
    pub catalogs: Vec<PathBuf>,
    #[command(flatten, next_help_heading = "Output")]
    pub format: FormatArgs,
}

/// Power per device: given, TDP × utilisation, or TDP (with a warning).
fn power(args: &Options, device: Option<&Device>) -> Result<(Watts, String)> {
    exclusive(&[
        ("--power", args.power.is_some()),
        ("--utilisation", args.utilisation.is_some()),
        ("--device-profile", args.device_profile.is_some()),
    ])?;
    if let Some(w) = args.power {
        check_positive("--power", w)?;
        // An average above the board limit is not a reading of that device (a node's power,
        // or W per server, given per device): say so, and keep the user's figure.
        if let Some((d, tdp)) = device.and_then(|d| Some((d, d.tdp?))) {
            if w > tdp.get() {
                eprintln!(
                    "warning: --power {w} W is above the {}'s TDP ({} W): a device cannot average \
                     more than its power limit; is it the power of a whole node? give W per device",
                    d.name,
                    tdp.get()
                );
            }
        }
        return Ok((Watts(w), format!("{w} W average per device, given")));
    }
    let d = device.context("give --power W, or --device NAME so its TDP can be used")?;
    if let Some(p) = &args.device_profile {
        return profiled_power(p, d);
    }
    let tdp = d
        .tdp
        .with_context(|| format!("{} has no published TDP; give --power W", d.name))?;
    match args.utilisation {
        Some(u) => {
            if !(u.is_finite() && u > 0.0 && u <= 1.0) {
                bail!("--utilisation {u} is outside (0, 1]; give a fraction (0.6 for 60 %)");
            }
            Ok((tdp * u, format!("TDP {} W × utilisation {u}", tdp.get())))
        }
        None => {
            eprintln!(
                "warning: no --power or --utilisation; assuming every device draws its full TDP ({} W)",
                tdp.get()
            );
            Ok((tdp, format!("TDP {} W, utilisation 1 assumed", tdp.get())))
        }
    }
}

/// The power a profile of `d` measured under its compute-bound load, with its provenance.
fn profiled_power(path: &std::path::Path, d: &Device) -> Result<(Watts, String)> {
    let file = path.display().to_string();
    let p: amdahl_model::profile::DeviceProfile =
        crate::cmd::shape::read_json("--device-profile", path)?;
    p.check(&file)?;
    if !p
        .system
        .as_deref()
        .is_some_and(|s| s.eq_ignore_ascii_case(&d.name))
    {
        bail!(
            "{file}: a profile of {} (`{}`), but --device is the {}: give the profile of that \
             device, or --power W",
            p.system.as_deref().unwrap_or("no catalogued device"),
            p.device,
            d.name
        );
    }
    let Some(w) = p.power.compute_w else {
        bail!(
            "{file}: the profile measured no power under load ({}); give --power W or \
             --utilisation U",
            p.power.method
        );
    };
    Ok((
        Watts(w),
        format!(
            "{w:.0} W per device measured under GEMM load ({}), {}",
            p.power.method,
            p.provenance(&d.name, &file)
        ),
    ))
}

/// IT energy by path (a), (b) or (c); `saved` is the result file of path (c), already read.
fn it_energy(
    args: &Options,
    c: &Catalogs,
    device: Option<&Device>,
    saved: Option<&from_result::Saved>,
) -> Result<ItEnergy> {
    let time = time_flags(args);
    let compute = compute_path(args);
    exclusive_flags(args, &time)?;
    if let Some(saved) = saved {
        return saved_energy(args, device, saved, &time, compute);
    }
    if args.count.is_none() && (args.hours.is_some() || args.days.is_some()) {
        eprintln!("warning: no --count; the energy is that of one device for the given time");
    }
    let count = args.count.unwrap_or(1);
    let (watts, how) = power(args, device)?;
    let duration = if compute {
        if time.iter().any(|t| t.1) {
            bail!("the compute path (--params/--model/--tokens/--flops) derives the time; drop --hours/--days/--device-hours");
        }
        compute_path_duration(args, c, device)?
    } else {
        given_duration(args, count)?
    };
    let mut e = ItEnergy::from_power(count, duration, watts, how)?;
    // The compute path derives the time from FLOPs and an assumed MFU: a prediction, which the
    // statement words as "would".
    e.predicted = compute;
    Ok(e)
}

/// The duration flags of path (a), each with whether it was given.
fn time_flags(args: &Options) -> [(&'static str, bool); 3] {
    [
        ("--hours", args.hours.is_some()),
        ("--days", args.days.is_some()),
        ("--device-hours", args.device_hours.is_some()),
    ]
}

/// Whether any flag of the compute path (b) was given.
fn compute_path(args: &Options) -> bool {
    args.params.is_some() || args.model.is_some() || args.tokens.is_some() || args.flops.is_some()
}

/// Refuses flags that give the same quantity twice (a duration, a FLOP count, an efficiency).
fn exclusive_flags(args: &Options, time: &[(&str, bool)]) -> Result<()> {
    exclusive(time)?;
    exclusive(&[
        ("--params", args.params.is_some()),
        ("--model", args.model.is_some()),
        ("--flops", args.flops.is_some()),
    ])?;
    exclusive(&[
        ("--mfu", args.mfu.is_some()),
        ("--achieved-tflops", args.achieved_tflops.is_some()),
    ])
}

/// Path (c): the saved result's energy. Flags of paths (a) and (b) are refused rather than
/// ignored, since the user would believe they changed the figure.
fn saved_energy(
    args: &Options,
    device: Option<&Device>,
    saved: &from_result::Saved,
    time: &[(&'static str, bool)],
    compute: bool,
) -> Result<ItEnergy> {
    for (flag, set) in time.iter().copied().chain([
        ("--params/--model/--tokens/--flops", compute),
        ("--power", args.power.is_some()),
        ("--utilisation", args.utilisation.is_some()),
        ("--device-profile", args.device_profile.is_some()),
    ]) {
        if set {
            bail!("--from and {flag} cannot be combined: the result file already holds the energy");
        }
    }
    let mut e = saved.energy.clone();
    // --count applies to a measured total only with a device (for the embodied share); a
    // plan already knows its device count.
    if let Some(n) = args.count.filter(|_| device.is_some()) {
        e.count = Some(n);
    }
    Ok(e)
}

/// Path (b): the wall-clock time of the job's FLOPs on --count devices at the given MFU.
fn compute_path_duration(args: &Options, c: &Catalogs, device: Option<&Device>) -> Result<Seconds> {
    let flops = job_flops(args, c)?;
    let d = device.context("the compute path needs --device NAME for its peak FLOP/s")?;
    let peak = precision_peak(args, d)?;
    let mfu = match (args.mfu, args.achieved_tflops) {
        (Some(m), None) => m,
        (None, Some(t)) => t / peak.tflops(),
        _ => bail!("the compute path needs --mfu X or --achieved-tflops T"),
    };
    // The time is FLOPs ÷ (N × peak × MFU): without N it would be invented (the same defect
    // as --device-hours without --count, a regression), so N is required here.
    let Some(n) = args.count else {
        bail!("the compute path needs --count N (devices in parallel): the wall-clock time is FLOPs ÷ (N × peak × MFU)");
    };
    Ok(carbon::compute_duration(flops, n, peak, mfu)?)
}

/// The job's FLOPs: --flops, or 6·P·D from --params or --model and --tokens.
fn job_flops(args: &Options, c: &Catalogs) -> Result<Flops> {
    Ok(
        match (args.flops, args.params, args.model.as_deref(), args.tokens) {
            (Some(f), _, _, None) => Flops(f),
            (Some(_), _, _, Some(_)) => bail!(
                "--flops and --tokens cannot be combined; --tokens goes with --params or --model"
            ),
            (None, Some(p), None, Some(d)) => carbon::training_flops(
                check_positive("--params", p)?,
                check_positive("--tokens", d)?,
            ),
            (None, None, Some(m), Some(d)) => c
                .models
                .lookup(m)?
                .training_flops(check_positive("--tokens", d)?),
            _ => bail!(
                "the compute path needs --tokens D with --params P or --model NAME, or --flops F"
            ),
        },
    )
}

/// The device's peak at --precision; the error lists the precisions it does publish.
fn precision_peak(args: &Options, d: &Device) -> Result<FlopsPerSecond> {
    let precision: PeakPrecision = args.precision.parse().map_err(anyhow::Error::msg)?;
    d.peak(precision).with_context(|| {
        let have: Vec<&str> = PeakPrecision::ALL
            .iter()
            .filter(|p| d.peak(**p).is_some())
            .map(|p| p.name())
            .collect();
        format!(
            "{} has no published {precision} peak; use --precision {}",
            d.name,
            have.join("|")
        )
    })
}

/// Path (a): the wall-clock time from --hours, --days or --device-hours over `count` devices.
fn given_duration(args: &Options, count: u32) -> Result<Seconds> {
    Ok(match (args.hours, args.days, args.device_hours) {
        (Some(h), _, _) => Seconds::from_hours(check_positive("--hours", h)?),
        (_, Some(d), _) => Seconds::from_days(check_positive("--days", d)?),
        (_, _, Some(h)) => Seconds::from_hours(check_positive("--device-hours", h)? / f64::from(count)),
        _ => bail!(
            "say how long: --hours H, --days D or --device-hours H; or the compute path (--params P --tokens D), or --from FILE"
        ),
    })
}

fn check_positive(flag: &str, v: f64) -> Result<f64> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        bail!("{flag} must be a positive number (got {v})")
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    let args = *args.options;
    if let Some(unit) = args.sci {
        return crate::cmd::sci::run(&args, unit);
    }
    if args.statement.is_some() && args.format.format() != Format::Table {
        bail!("--statement and --json/--csv cannot be combined; --statement json prints the statement as JSON");
    }
    let report = estimate(&args)?;
    let text = match (args.statement, args.format.format()) {
        (Some(StatementFormat::Md), _) => {
            render::statement_markdown(&Statement::from_report(&report))
        }
        (Some(StatementFormat::Tex), _) => {
            render::statement_latex(&Statement::from_report(&report))
        }
        (Some(StatementFormat::Json), _) => to_json(&Statement::from_report(&report))?,
        (None, format) => report.render(format)?,
    };
    print_result(&report, &text)?;
    // A saved plan's or serving estimate's energy is the power model's: say how far it holds,
    // as `plan` and `infer` do under their tables.
    if args.from.is_some() && report.predicted && args.format.format() == Format::Table {
        crate::cmd::energy_note::note_energy_accuracy();
    }
    Ok(ExitCode::SUCCESS)
}

/// The carbon estimate `args` describe (what `amdahl carbon` prints); also used by `amdahl
/// report` for the statement of a saved result (`carbon --from FILE` with its defaults).
pub fn estimate(args: &Options) -> Result<carbon::CarbonReport> {
    let c = load(&args.catalogs)?;
    let saved = match &args.from {
        Some(path) => {
            let text = crate::input::read_text(path)?;
            Some(amdahl_report::kind::energy(
                &text,
                &path.display().to_string(),
            )?)
        }
        None => None,
    };
    let device = match (&args.device, saved.as_ref().and_then(|s| s.device.as_ref())) {
        (Some(d), _) => Some(c.devices.lookup(d)?),
        // The device a plan was made for: a catalog name, unless the plan used a --catalog file
        // this run does not have, in which case the embodied share is left out with a warning.
        (None, Some(d)) => match c.devices.lookup(d) {
            Ok(dev) => Some(dev),
            Err(e) => {
                eprintln!("warning: {e}; no embodied carbon for the plan's device (give --device or --catalog)");
                None
            }
        },
        (None, None) => None,
    };
    let it = it_energy(args, &c, device, saved.as_ref())?;
    for caveat in &it.caveats {
        eprintln!("warning: {caveat}");
    }
    // PUE and grid: given; else the saved result's; else the defaults (see `resolve`).
    let pue = pue_for(args.pue.as_deref(), saved.as_ref(), &c)?;
    let grid = grid_for(&args.grid, saved.as_ref(), &c)?;
    let compare = args
        .compare
        .iter()
        .map(|code| c.grid.lookup(code))
        .collect::<Result<Vec<_>, _>>()?;
    let embodied = match device {
        Some(d) if !args.no_embodied => {
            let f = factors::embedded()?;
            embodied::share(
                d,
                f,
                it.count.unwrap_or(1),
                it.duration,
                args.lifetime_years,
            )?
        }
        _ => None,
    };
    // A job longer than the service life charges more than one device's whole manufacture:
    // possible (a long run on old hardware), more often a wrong --lifetime-years or duration.
    let life = Seconds::from_days(args.lifetime_years * 365.25);
    if embodied.is_some() && it.duration.get() > life.get() {
        eprintln!(
            "warning: the job lasts {:.0} % of the {}-year service life (--lifetime-years); its \
             embodied share is more than the devices' whole manufacture",
            100.0 * it.duration.get() / life.get(),
            args.lifetime_years
        );
    }
    let mut report = carbon::estimate(
        &it,
        device.map(|d| d.name.as_str()),
        pue,
        grid,
        embodied,
        compare,
    );
    match (args.data_gb, args.network_kwh_per_gb) {
        (Some(_), _) if args.compare.is_empty() => {
            bail!("--data-gb needs --compare CODES: the sites the data would be shipped to")
        }
        (Some(gb), k) => {
            let network = match k {
                Some(k) => NetworkIntensity::given(k)?,
                None => NetworkIntensity::default_estimate(),
            };
            report = report.with_transfer(gb, network)?;
        }
        (None, Some(_)) => bail!("--network-kwh-per-gb goes with --data-gb G"),
        (None, None) => {}
    }
    Ok(report)
}

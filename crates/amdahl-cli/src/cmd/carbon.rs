//! `amdahl carbon` — estimate the energy and emissions of a job from (a) hardware-hours, (b) compute
//! (6·P·D or a FLOP count at an achieved fraction of peak) or (c) the saved JSON result of another
//! amdahl command; compare grids; print a statement a paper can cite.
//!
//! Arguments are checked in two stages (raw flags → [`Plan`]) so that conflicting or missing
//! options are reported with what to do, as ordinary errors (exit 1).

use crate::cmd::catalog::load;
use crate::output::{print, Format, FormatArgs};
use amdahl_model::carbon::{self, embodied, from_result, ItEnergy, Pue, Statement};
use amdahl_model::catalog::devices::{Device, Precision};
use amdahl_model::catalog::grid::{GridIntensity, Scope};
use amdahl_model::catalog::{embodied as factors, Catalogs};
use amdahl_model::units::{Flops, Seconds, Watts};
use amdahl_report::{carbon as render, to_json};
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
    #[arg(long)]
    pub device: Option<String>,
    /// Number of devices working in parallel.
    #[arg(long, allow_negative_numbers = true)]
    pub count: Option<i64>,
    /// Wall-clock duration in hours.
    #[arg(long, allow_negative_numbers = true)]
    pub hours: Option<f64>,
    /// Wall-clock duration in days.
    #[arg(long, allow_negative_numbers = true)]
    pub days: Option<f64>,
    /// Total device-hours (e.g. "GPU-hours" in a paper); with --count the wall-clock time is H / count.
    #[arg(allow_negative_numbers = true, long, value_name = "H")]
    pub device_hours: Option<f64>,
    /// Average power per device in watts.
    #[arg(allow_negative_numbers = true, long, value_name = "W")]
    pub power: Option<f64>,
    /// Average utilisation in (0, 1]: power = device TDP × utilisation.
    #[arg(
        allow_negative_numbers = true,
        long,
        alias = "utilization",
        value_name = "U"
    )]
    pub utilisation: Option<f64>,
    /// Model parameters (compute path: FLOPs = 6·P·D).
    #[arg(allow_negative_numbers = true, long, value_name = "P")]
    pub params: Option<f64>,
    /// Take the parameter count from `amdahl catalog models`.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Training tokens D (compute path).
    #[arg(allow_negative_numbers = true, long, value_name = "D")]
    pub tokens: Option<f64>,
    /// A FLOP count instead of 6·P·D.
    #[arg(allow_negative_numbers = true, long, value_name = "F")]
    pub flops: Option<f64>,
    /// Model FLOPs utilisation in (0, 1]: achieved ÷ peak.
    #[arg(long, allow_negative_numbers = true)]
    pub mfu: Option<f64>,
    /// Achieved TFLOP/s per device (instead of --mfu).
    #[arg(allow_negative_numbers = true, long, value_name = "T")]
    pub achieved_tflops: Option<f64>,
    /// Precision whose peak the compute path uses (fp64, fp32, tf32, bf16/fp16, fp8, int8).
    #[arg(long, default_value = "fp16")]
    pub precision: String,
    /// Read measured energy from a saved result (`amdahl run --json` output, schema amdahl.run/1).
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// PUE: a number ≥ 1 or a preset (local, hyperscale, industry). Default: local with --from, else industry.
    #[arg(long)]
    pub pue: Option<String>,
    /// Grid: ISO code (FR, FRA), country name, cloud region (aws:eu-west-3, gcp:europe-west1) or world.
    #[arg(long)]
    pub region: Option<String>,
    /// Explicit grid intensity in gCO2e/kWh (0-2000) instead of --region.
    #[arg(allow_negative_numbers = true, long, value_name = "G")]
    pub intensity: Option<f64>,
    /// Scope of --intensity.
    #[arg(long, value_name = "lifecycle|direct", default_value = "lifecycle")]
    pub intensity_scope: String,
    /// Year of --intensity (default: this year).
    #[arg(long, value_name = "YEAR")]
    pub intensity_year: Option<u16>,
    /// Where --intensity comes from (printed in the statement).
    #[arg(long, value_name = "TEXT")]
    pub intensity_source: Option<String>,
    /// Show the same job on other grids, e.g. FR,PL,US,IN,NO,AU.
    #[arg(long, value_delimiter = ',', value_name = "CODES")]
    pub compare: Vec<String>,
    /// Service life over which embodied carbon is spread, in years.
    #[arg(allow_negative_numbers = true, long, default_value_t = embodied::DEFAULT_LIFETIME_YEARS)]
    pub lifetime_years: f64,
    /// Leave embodied carbon out.
    #[arg(long)]
    pub no_embodied: bool,
    /// Print a paragraph a paper can cite instead of the table.
    #[arg(long, value_enum)]
    pub statement: Option<StatementFormat>,
    /// Override or extend a catalog with a CSV file in the format of data/*.csv (repeatable).
    #[arg(long = "catalog", value_name = "FILE")]
    pub catalogs: Vec<PathBuf>,
    #[command(flatten)]
    pub format: FormatArgs,
}

/// Reject options that cannot be combined, naming both.
fn exclusive(pairs: &[(&str, bool)]) -> Result<()> {
    let given: Vec<&str> = pairs.iter().filter(|p| p.1).map(|p| p.0).collect();
    if given.len() > 1 {
        bail!(
            "{} cannot be combined; give one of them",
            given.join(" and ")
        );
    }
    Ok(())
}

fn current_year() -> u16 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    (1970.0 + secs / (365.2425 * 86_400.0)).floor() as u16
}

/// Power per device: given, TDP × utilisation, or TDP (with a warning).
fn power(args: &Options, device: Option<&Device>) -> Result<(Watts, String)> {
    exclusive(&[
        ("--power", args.power.is_some()),
        ("--utilisation", args.utilisation.is_some()),
    ])?;
    if let Some(w) = args.power {
        check_positive("--power", w)?;
        return Ok((Watts(w), format!("{w} W average per device, given")));
    }
    let d = device.context("give --power W, or --device NAME so its TDP can be used")?;
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
            Ok((tdp, format!("TDP {} W (utilisation 1 assumed)", tdp.get())))
        }
    }
}

/// IT energy by path (a), (b) or (c).
fn it_energy(args: &Options, c: &Catalogs, device: Option<&Device>) -> Result<ItEnergy> {
    let time = [
        ("--hours", args.hours.is_some()),
        ("--days", args.days.is_some()),
        ("--device-hours", args.device_hours.is_some()),
    ];
    let compute = args.params.is_some()
        || args.model.is_some()
        || args.tokens.is_some()
        || args.flops.is_some();
    exclusive(&time)?;
    exclusive(&[
        ("--params", args.params.is_some()),
        ("--model", args.model.is_some()),
        ("--flops", args.flops.is_some()),
    ])?;
    exclusive(&[
        ("--mfu", args.mfu.is_some()),
        ("--achieved-tflops", args.achieved_tflops.is_some()),
    ])?;
    let any_time = time.iter().any(|t| t.1);
    if let Some(path) = &args.from {
        for (flag, set) in time.iter().copied().chain([
            ("--params/--model/--tokens/--flops", compute),
            ("--power", args.power.is_some()),
            ("--utilisation", args.utilisation.is_some()),
        ]) {
            if set {
                bail!("--from and {flag} cannot be combined: the result file already holds the energy");
            }
        }
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut e = from_result::it_energy(&text, &path.display().to_string())?;
        e.count = count(args)?.filter(|_| device.is_some());
        return Ok(e);
    }
    let count = count(args)?.unwrap_or(1);
    let (watts, how) = power(args, device)?;
    let duration = if compute {
        if any_time {
            bail!("the compute path (--params/--model/--tokens/--flops) derives the time; drop --hours/--days/--device-hours");
        }
        let flops = match (args.flops, args.params, args.model.as_deref(), args.tokens) {
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
        };
        let d = device.context("the compute path needs --device NAME for its peak FLOP/s")?;
        let precision: Precision = args.precision.parse().map_err(anyhow::Error::msg)?;
        let peak = d.peak(precision).with_context(|| {
            let have: Vec<&str> = Precision::ALL
                .iter()
                .filter(|p| d.peak(**p).is_some())
                .map(|p| p.name())
                .collect();
            format!(
                "{} has no published {precision} peak; use --precision {}",
                d.name,
                have.join("|")
            )
        })?;
        let mfu = match (args.mfu, args.achieved_tflops) {
            (Some(m), None) => m,
            (None, Some(t)) => t / peak.tflops(),
            _ => bail!("the compute path needs --mfu X or --achieved-tflops T"),
        };
        carbon::compute_duration(flops, count, peak, mfu)?
    } else {
        match (args.hours, args.days, args.device_hours) {
            (Some(h), _, _) => Seconds::from_hours(check_positive("--hours", h)?),
            (_, Some(d), _) => Seconds::from_days(check_positive("--days", d)?),
            (_, _, Some(h)) => Seconds::from_hours(check_positive("--device-hours", h)? / f64::from(count)),
            _ => bail!(
                "say how long: --hours H, --days D or --device-hours H; or the compute path (--params P --tokens D), or --from FILE"
            ),
        }
    };
    Ok(ItEnergy::from_power(count, duration, watts, how)?)
}

/// `--count`, parsed wide so that 0 and negative counts get a clear error (exit 1), not a usage error.
fn count(args: &Options) -> Result<Option<u32>> {
    args.count
        .map(|n| match u32::try_from(n) {
            Ok(n) if n > 0 => Ok(n),
            _ => bail!("--count must be at least 1 (got {n})"),
        })
        .transpose()
}

fn check_positive(flag: &str, v: f64) -> Result<f64> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        bail!("{flag} must be a positive number (got {v})")
    }
}

fn pue(args: &Options, c: &Catalogs) -> Result<Pue> {
    let default = if args.from.is_some() {
        "local"
    } else {
        "industry"
    };
    let s = args.pue.as_deref().unwrap_or(default);
    Ok(match s.parse::<f64>() {
        Ok(v) => Pue::new(v, "given")?,
        Err(_) => {
            let p = c.pue.lookup(s)?;
            Pue::new(p.pue, format!("{} preset: {}", p.name, p.source))?
        }
    })
}

fn grid(args: &Options, c: &Catalogs) -> Result<GridIntensity> {
    exclusive(&[
        ("--region", args.region.is_some()),
        ("--intensity", args.intensity.is_some()),
    ])?;
    match args.intensity {
        Some(g) => {
            let scope = match args.intensity_scope.as_str() {
                "lifecycle" => Scope::Lifecycle,
                "direct" => Scope::Direct,
                s => bail!("--intensity-scope `{s}` is not lifecycle or direct"),
            };
            let mut i =
                GridIntensity::custom(g, scope, args.intensity_year.unwrap_or_else(current_year))
                    .map_err(anyhow::Error::msg)?;
            if let Some(s) = &args.intensity_source {
                i.source = s.clone();
            }
            Ok(i)
        }
        None => Ok(c.grid.lookup(args.region.as_deref().unwrap_or("world"))?),
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    let args = *args.options;
    let c = load(&args.catalogs)?;
    if args.statement.is_some() && args.format.format() != Format::Table {
        bail!("--statement and --json/--csv cannot be combined; --statement json prints the statement as JSON");
    }
    let device = args
        .device
        .as_deref()
        .map(|d| c.devices.lookup(d))
        .transpose()?;
    let it = it_energy(&args, &c, device)?;
    let pue = pue(&args, &c)?;
    let grid = grid(&args, &c)?;
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
    let report = carbon::estimate(
        &it,
        device.map(|d| d.name.as_str()),
        pue,
        grid,
        embodied,
        compare,
    );
    let text = match (args.statement, args.format.format()) {
        (Some(StatementFormat::Md), _) => {
            render::statement_markdown(&Statement::from_report(&report))
        }
        (Some(StatementFormat::Tex), _) => {
            render::statement_latex(&Statement::from_report(&report))
        }
        (Some(StatementFormat::Json), _) => to_json(&Statement::from_report(&report))?,
        (None, Format::Json) => to_json(&report)?,
        (None, Format::Csv) => render::csv(&report)?,
        (None, Format::Table) => render::table(&report),
    };
    print(&text)?;
    Ok(ExitCode::SUCCESS)
}

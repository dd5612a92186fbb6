//! `amdahl lifetime` — training once plus serving every day: energy and CO2e of each phase, the
//! inference share, the day serving overtakes training, and between two alternatives the number
//! of requests after which the costlier-to-train one pays back. Composes saved results (read by
//! their kind's energy reader, `amdahl_report::kind::energy`, as `carbon --from` reads them); PUE
//! and grid resolve per phase as in
//! `amdahl carbon`.

use crate::cmd::resolve::{exclusive, grid_for, load, pue_for, GridArgs};
use crate::output::{print_unchecked, FormatArgs};
use amdahl_model::carbon::from_result::Saved;
use amdahl_model::carbon::lifetime::{
    serving_from, training_from, Horizon, LifetimeReport, Serving, Side, Training,
};
use amdahl_model::carbon::Basis;
use amdahl_model::catalog::Catalogs;
use amdahl_model::units::Joules;
use amdahl_report::{lifetime as render, render::Render};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Compare two alternatives: the --json outputs of two earlier `amdahl lifetime` runs
    /// (amdahl.lifetime/1), e.g. a larger model trained briefly vs a smaller one trained longer.
    #[arg(value_name = "LIFETIME_JSON", num_args = 0..=2)]
    pub alternatives: Vec<PathBuf>,
    /// Training: `amdahl plan --json` (amdahl.plan/1) or `amdahl run -o` (amdahl.run/1).
    #[arg(long, value_name = "FILE")]
    pub train: Option<PathBuf>,
    /// Training's IT energy in kWh (before PUE), instead of --train.
    #[arg(long, value_name = "KWH")]
    pub train_kwh: Option<f64>,
    /// Serving: `amdahl infer --json` (amdahl.infer/1), `amdahl serve --json` (amdahl.serve/1:
    /// the simulated run's energy over its requests), or `amdahl run -o` of a serving run
    /// (amdahl.run/1) with --requests-in-run.
    #[arg(long, value_name = "FILE")]
    pub serve: Option<PathBuf>,
    /// Requests the measured serving run (--serve run.json) answered: a request is one call
    /// to the model, prompt in, completion out.
    #[arg(long, value_name = "N")]
    pub requests_in_run: Option<f64>,
    /// Serving's IT energy per 1,000 requests in kWh (before PUE), instead of --serve.
    #[arg(long, value_name = "KWH")]
    pub kwh_per_1000_requests: Option<f64>,
    /// Requests served per day.
    #[arg(long, value_name = "R")]
    pub requests_per_day: Option<f64>,
    /// Days of serving.
    #[arg(long, value_name = "D")]
    pub days: Option<f64>,
    /// Name of this alternative in tables and plots (default A).
    #[arg(long)]
    pub label: Option<String>,
    /// PUE for both phases: a number ≥ 1 or a preset (local, hyperscale, industry). Default per
    /// phase as `amdahl carbon`: a saved result's own, else local = 1.0 (every command's default).
    #[arg(long)]
    pub pue: Option<String>,
    #[command(flatten)]
    pub grid: GridArgs,
    /// Write cumulative energy over the days of serving as an SVG plot.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Override or extend a catalog with a CSV file in the format of data/*.csv (repeatable).
    #[arg(long = "catalog", value_name = "FILE")]
    pub catalogs: Vec<PathBuf>,
    #[command(flatten)]
    pub format: FormatArgs,
}

fn read_saved(path: &Path) -> Result<Saved> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(amdahl_report::kind::energy(
        &text,
        &path.display().to_string(),
    )?)
}

/// Training from --train or --train-kwh, and whether it is a model's prediction (a plan).
fn training(a: &Args, c: &Catalogs) -> Result<(Training, bool)> {
    exclusive(&[
        ("--train", a.train.is_some()),
        ("--train-kwh", a.train_kwh.is_some()),
    ])?;
    let saved = a.train.as_deref().map(read_saved).transpose()?;
    let (it, basis, method) = match (&saved, a.train_kwh) {
        (Some(s), _) => {
            let file = a.train.as_deref().map(Path::display);
            training_from(s, &file.map(|f| f.to_string()).unwrap_or_default())?
        }
        (None, Some(k)) => (
            Joules::from_kwh(k),
            Basis::Estimated,
            format!("{k} kWh IT energy, given"),
        ),
        (None, None) => {
            bail!("say what training cost: --train FILE (a plan or run result) or --train-kwh KWH")
        }
    };
    let pue = pue_for(a.pue.as_deref(), saved.as_ref(), c)?;
    let grid = grid_for(&a.grid, saved.as_ref(), c)?;
    let predicted = saved.as_ref().is_some_and(|s| s.energy.predicted);
    Ok((Training::new(it, basis, method, pue, grid)?, predicted))
}

/// Serving from --serve or --kwh-per-1000-requests, and whether it is a model's prediction (an
/// infer estimate or a serve simulation).
fn serving(a: &Args, c: &Catalogs) -> Result<(Serving, bool)> {
    exclusive(&[
        ("--serve", a.serve.is_some()),
        ("--kwh-per-1000-requests", a.kwh_per_1000_requests.is_some()),
    ])?;
    let saved = a.serve.as_deref().map(read_saved).transpose()?;
    let (per_request, basis, method) = match (&saved, a.kwh_per_1000_requests) {
        (Some(s), _) => {
            let file = a.serve.as_deref().map(|f| f.display().to_string());
            serving_from(s, a.requests_in_run, &file.unwrap_or_default())?
        }
        (None, Some(k)) => {
            if a.requests_in_run.is_some() {
                bail!("--requests-in-run goes with --serve run.json (a measured serving run)");
            }
            (
                Joules::from_kwh(k / 1000.0),
                Basis::Estimated,
                format!("{k} kWh IT energy per 1,000 requests, given"),
            )
        }
        (None, None) => bail!(
            "say what serving costs: --serve FILE (an infer or serve result, or a run with \
             --requests-in-run N) or --kwh-per-1000-requests KWH"
        ),
    };
    let pue = pue_for(a.pue.as_deref(), saved.as_ref(), c)?;
    let grid = grid_for(&a.grid, saved.as_ref(), c)?;
    let predicted = saved.as_ref().is_some_and(|s| s.energy.predicted);
    Ok((
        Serving::new(per_request, basis, method, pue, grid)?,
        predicted,
    ))
}

/// Two saved alternatives; the horizon is the flags', else theirs when they agree.
fn compare(a: &Args) -> Result<(Horizon, Vec<Side>)> {
    for (flag, set) in [
        ("--train", a.train.is_some()),
        ("--train-kwh", a.train_kwh.is_some()),
        ("--serve", a.serve.is_some()),
        ("--kwh-per-1000-requests", a.kwh_per_1000_requests.is_some()),
        ("--requests-in-run", a.requests_in_run.is_some()),
        ("--label", a.label.is_some()),
        ("--pue", a.pue.is_some()),
        (
            "--region/--intensity",
            a.grid.region.is_some() || a.grid.intensity.is_some(),
        ),
    ] {
        if set {
            bail!("{flag} describes one alternative; with A.json B.json each file already holds its own (only --requests-per-day, --days and the output options apply)");
        }
    }
    let mut sides = Vec::new();
    let mut horizons = Vec::new();
    for path in &a.alternatives {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let file = path.display().to_string();
        sides.push(LifetimeReport::read_alternative(&text, &file)?);
        // The file was just read as amdahl.lifetime/1, so its horizon is there.
        let v: serde_json::Value = serde_json::from_str(&text)?;
        let field = |k: &str| v.get(k).and_then(serde_json::Value::as_f64);
        horizons.push((field("requests_per_day"), field("days")));
    }
    let pick = |flag: Option<f64>, name: &str, i: usize| -> Result<f64> {
        if let Some(x) = flag {
            return Ok(x);
        }
        let vals: Vec<Option<f64>> = horizons
            .iter()
            .map(|h| if i == 0 { h.0 } else { h.1 })
            .collect();
        match vals.as_slice() {
            [Some(x), Some(y)] if x == y => Ok(*x),
            _ => bail!(
                "the two results differ in {name}; give --{name} to compare them over one horizon"
            ),
        }
    };
    let h = Horizon::new(
        pick(a.requests_per_day, "requests-per-day", 0)?,
        pick(a.days, "days", 1)?,
    )?;
    if sides.len() == 2 && sides.first().map(|s| &s.0) == sides.get(1).map(|s| &s.0) {
        // Same labels would make the break-even sentence ambiguous.
        if let Some(s) = sides.get_mut(1) {
            s.0.push_str(" (2)");
        }
    }
    Ok((h, sides))
}

pub fn run(a: Args) -> Result<ExitCode> {
    // Whether a phase is the power model's energy (a plan, an infer or serve result).
    let mut modelled = false;
    let (h, sides) = match a.alternatives.len() {
        0 => {
            let c = load(&a.catalogs)?;
            let r = a
                .requests_per_day
                .context("give --requests-per-day R (requests served per day)")?;
            let d = a.days.context("give --days D (days of serving)")?;
            let h = Horizon::new(r, d)?;
            let label = a.label.clone().unwrap_or_else(|| "A".into());
            let ((train, t), (serve, s)) = (training(&a, &c)?, serving(&a, &c)?);
            modelled = t || s;
            (h, vec![(label, train, serve)])
        }
        2 => compare(&a)?,
        n => bail!("{n} alternative file given; compare two (A.json B.json), or describe one with --train/--serve"),
    };
    let report = LifetimeReport::new(h, sides)?;
    if let Some(path) = &a.svg {
        crate::output::write_plot(path, &render::svg(&report))?;
    }
    print_unchecked(&report, &report.render(a.format.format())?)?;
    // The power model's energy says how far it holds, as `carbon --from` does.
    if modelled && a.format.format() == crate::output::Format::Table {
        crate::cmd::energy_note::note_energy_accuracy();
    }
    Ok(ExitCode::SUCCESS)
}

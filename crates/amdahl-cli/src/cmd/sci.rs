//! `amdahl carbon --sci UNIT --sci-r R [--sci-m KG]`: the Software Carbon Intensity
//! (ISO/IEC 21031:2024) of what `carbon` estimates — hardware-hours, the compute path, or a saved
//! run, plan or serving estimate — and of two saved results `carbon` does not read otherwise:
//! a serving simulation (`amdahl serve --json`) and a lifetime (`amdahl lifetime --json`).
//! The arithmetic is `amdahl_model::carbon::sci`'s; here the figures are gathered.

use crate::cmd::carbon::Options;
use crate::output::{print_result, FormatArgs};
use amdahl_model::carbon::embodied;
use amdahl_model::carbon::lifetime::LifetimeReport;
use amdahl_model::carbon::sci::{self, Covers, Embodied, Part, SciItem, SciResult, Unit};
use amdahl_model::catalog::embodied as factors;
use amdahl_model::serve::ServeResult;
use amdahl_model::units::{readable, Seconds};
use amdahl_report::render::Render;
use anyhow::{bail, Context, Result};
use std::process::ExitCode;

/// The functional units `--sci` takes (SCI for AI, SPEC.md §8).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitArg {
    /// Consumer (LLM): tokens served.
    Token,
    /// Consumer (classical ML): inferences or requests answered.
    Inference,
    /// Consumer: images generated.
    Image,
    /// Consumer: seconds of video generated.
    Second,
    /// Consumer: pages analysed.
    Page,
    /// Consumer (agents): executions.
    Execution,
    /// Provider: model parameters.
    Parameter,
    /// Provider: tokens of training data.
    TrainingToken,
    /// Provider: FLOPs of training.
    Flop,
}

impl From<UnitArg> for Unit {
    fn from(u: UnitArg) -> Unit {
        match u {
            UnitArg::Token => Unit::Token,
            UnitArg::Inference => Unit::Inference,
            UnitArg::Image => Unit::Image,
            UnitArg::Second => Unit::Second,
            UnitArg::Page => Unit::Page,
            UnitArg::Execution => Unit::Execution,
            UnitArg::Parameter => Unit::Parameter,
            UnitArg::TrainingToken => Unit::TrainingToken,
            UnitArg::Flop => Unit::Flop,
        }
    }
}

/// `carbon --sci`: build the SCI result and print it in the chosen format.
pub fn run(args: &Options, unit: UnitArg) -> Result<ExitCode> {
    let result = estimate(args, unit.into())?;
    let text = result.render(FormatArgs::format(&args.format))?;
    print_result(&result, &text)?;
    Ok(ExitCode::SUCCESS)
}

/// The SCI `args` describe.
pub fn estimate(args: &Options, unit: Unit) -> Result<SciResult> {
    if args.statement.is_some() || !args.compare.is_empty() || args.data_gb.is_some() {
        bail!("--sci cannot be combined with --statement, --compare or --data-gb: it prints the SCI of the chosen grid");
    }
    let r = args.sci_r.with_context(|| {
        format!(
            "--sci {} needs --sci-r R: how many {}s the figures cover (e.g. --sci-r 1e6 for a million)",
            unit.name(),
            unit.name()
        )
    })?;
    let declared = args.sci_m.map(|kg| Embodied {
        kg,
        source: "declared with --sci-m".into(),
    });
    let saved = match &args.from {
        Some(path) => {
            let text = crate::input::read_text(path)?;
            let v: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("{}: not valid JSON", path.display()))?;
            Some((path.display().to_string(), v))
        }
        None => None,
    };
    let schema = saved
        .as_ref()
        .and_then(|(_, v)| v.get("schema")?.as_str().map(String::from));
    let (covers, items) = match (schema.as_deref(), &saved) {
        (Some(amdahl_model::carbon::lifetime::SCHEMA), Some((file, v))) => {
            own_figures_only(args, "an `amdahl lifetime`")?;
            let life: LifetimeReport = typed(v, file)?;
            lifetime(&life, file, unit, r, declared)?
        }
        (Some(amdahl_model::serve::SERVE_SCHEMA), Some((file, v))) => {
            own_figures_only(args, "an `amdahl serve`")?;
            let s: ServeResult = typed(v, file)?;
            (Covers::Serving, vec![serve(&s, file, args, r, declared)?])
        }
        (schema, _) => {
            let covers = match schema {
                Some("amdahl.infer/1") => Covers::Serving,
                Some("amdahl.plan/1") => Covers::Training,
                Some(_) => Covers::Unknown,
                None if args.params.is_some() || args.model.is_some() || args.flops.is_some() => {
                    Covers::Training
                }
                None => Covers::Unknown,
            };
            (covers, vec![from_carbon(args, r, declared)?])
        }
    };
    Ok(sci::result(unit, r, covers, items))
}

fn typed<T: serde::de::DeserializeOwned>(v: &serde_json::Value, file: &str) -> Result<T> {
    serde_json::from_value(v.clone())
        .with_context(|| format!("{file}: does not match its schema; was it edited by hand?"))
}

/// A serve or lifetime result carries its own PUE, grid and devices: refuse flags that would
/// seem to change them.
fn own_figures_only(args: &Options, what: &str) -> Result<()> {
    let given = [
        ("--pue", args.pue.is_some()),
        ("--region", args.grid.region.is_some()),
        ("--intensity", args.grid.intensity.is_some()),
        ("--device", args.device.is_some()),
        ("--count", args.count.is_some()),
    ];
    if let Some((flag, _)) = given.iter().find(|(_, set)| *set) {
        bail!(
            "--from {what} result and {flag} cannot be combined: the SCI uses the result's own \
             PUE, grid and devices; run that command again with {flag}"
        );
    }
    Ok(())
}

/// M: declared, else `computed` (amdahl's embodied share), else an error saying how to declare.
fn m_or(declared: Option<Embodied>, computed: Option<Embodied>, why: &str) -> Result<Embodied> {
    match (declared, computed) {
        (Some(m), _) => Ok(m),
        (None, Some(m)) => Ok(m),
        (None, None) => bail!(
            "the SCI needs M, the hardware's embodied emissions, and {why}: declare it with \
             --sci-m KG (--sci-m 0 leaves embodied emissions out, which the output then says)"
        ),
    }
}

/// Any `carbon` estimate: E is its facility energy, I its grid, M its embodied share.
fn from_carbon(args: &Options, r: f64, declared: Option<Embodied>) -> Result<SciItem> {
    let report = crate::cmd::carbon::estimate(args)?;
    let computed = report.embodied.as_ref().map(|e| Embodied {
        kg: report.embodied_co2e_kg,
        source: format!(
            "embodied share of {} over {} days of a {}-year life (LLMCarbon, Faiz et al. 2024)",
            report.device.as_deref().unwrap_or("the devices"),
            amdahl_report::num(report.duration_days),
            e.lifetime_years
        ),
    });
    let m = m_or(
        declared,
        computed,
        "amdahl knows no embodied share here (give --device NAME, or leave out --no-embodied)",
    )?;
    // PUE and intensity as `carbon`'s table and statement show them ("PUE 1.12345" stood
    // beside the table's "1.12").
    let source = format!(
        "{}; PUE {}, {} gCO2e/kWh ({})",
        report.method,
        readable(report.pue.value, 3),
        readable(report.intensity.g_per_kwh.get(), 4),
        report.intensity.code
    );
    let parts = [Part {
        energy_kwh: report.energy_kwh,
        g_per_kwh: report.intensity.g_per_kwh.get(),
    }];
    Ok(sci::item("the job", source, &parts, &m, r)?)
}

/// A serving simulation: E = its GPU energy (busy and idle) × PUE, I its grid, M the embodied
/// share of its GPUs over the simulated time when the catalog knows the device.
fn serve(
    s: &ServeResult,
    file: &str,
    args: &Options,
    r: f64,
    declared: Option<Embodied>,
) -> Result<SciItem> {
    let c = crate::cmd::resolve::load(&args.catalogs)?;
    let computed = match c.devices.lookup(&s.system) {
        Ok(d) if !args.no_embodied && s.duration_s > 0.0 => {
            let count = u32::try_from(s.gpus).context("the serve result's `gpus` is too large")?;
            embodied::share(
                d,
                factors::embedded()?,
                count,
                Seconds(s.duration_s),
                args.lifetime_years,
            )?
            .map(|e| Embodied {
                kg: e.co2e.kg(),
                source: format!(
                    "embodied share of {count} × {} over the {} s simulated, of a {}-year life (LLMCarbon, Faiz et al. 2024)",
                    d.name,
                    amdahl_report::num(s.duration_s),
                    args.lifetime_years
                ),
            })
        }
        _ => None,
    };
    let m = m_or(
        declared,
        computed,
        "the serve result's device has no embodied figures",
    )?;
    let output_tokens = s.mean_output_tokens * s.requests as f64;
    let source = format!(
        "`amdahl serve` simulation ({file}): {} on {} × {}, {} requests, {} output tokens in {} s, GPU energy (busy and idle) × PUE {}, {} gCO2e/kWh ({})",
        s.model,
        s.gpus,
        s.system,
        s.requests,
        amdahl_report::count(output_tokens.round()),
        amdahl_report::num(s.duration_s),
        s.pue,
        amdahl_report::num(s.grid_g_per_kwh),
        s.grid
    );
    let parts = [Part {
        energy_kwh: s.energy_j * s.pue / 3.6e6,
        g_per_kwh: s.grid_g_per_kwh,
    }];
    Ok(sci::item("serving", source, &parts, &m, r)?)
}

/// A lifetime: per alternative, serving alone (the consumer SCI) and training + serving
/// (beyond the standard) for a consumer unit; training alone for a provider unit. M must be
/// declared: a lifetime result holds no hardware.
fn lifetime(
    life: &LifetimeReport,
    file: &str,
    unit: Unit,
    r: f64,
    declared: Option<Embodied>,
) -> Result<(Covers, Vec<SciItem>)> {
    let m = m_or(
        declared,
        None,
        "a lifetime result names no hardware to take an embodied share of",
    )?;
    let mut items = Vec::new();
    for a in &life.alternatives {
        let training = Part {
            energy_kwh: a.training.energy_kwh,
            g_per_kwh: a.training.intensity.g_per_kwh.get(),
        };
        let serving = Part {
            energy_kwh: a.serving_energy_kwh,
            g_per_kwh: a.serving.intensity.g_per_kwh.get(),
        };
        let horizon = format!(
            "`amdahl lifetime` ({file}), {} requests over {} days",
            amdahl_report::count(life.requests),
            amdahl_report::num(life.days)
        );
        let label = |what: &str| {
            if life.alternatives.len() > 1 {
                format!("{}: {what}", a.label)
            } else {
                what.to_string()
            }
        };
        match unit.side() {
            sci::Side::Consumer => {
                items.push(sci::item(
                    label("serving"),
                    format!("{horizon}: serving ({})", a.serving.method),
                    &[serving],
                    &m,
                    r,
                )?);
                items.push(sci::item(
                    label("training + serving"),
                    format!("{horizon}: training ({}) and serving", a.training.method),
                    &[training, serving],
                    &m,
                    r,
                )?);
            }
            sci::Side::Provider => items.push(sci::item(
                label("training"),
                format!("{horizon}: training ({})", a.training.method),
                &[training],
                &m,
                r,
            )?),
        }
    }
    let covers = match unit.side() {
        sci::Side::Consumer => Covers::TrainingAndServing,
        sci::Side::Provider => Covers::Training,
    };
    Ok((covers, items))
}

//! `amdahl catalog` — list the embedded catalogs (devices, grid regions, models, PUE presets, the
//! planner's validation runs) or show one entry with its sources.

use crate::cmd::resolve::load;
use crate::output::{print, Format, FormatArgs};
use amdahl_model::catalog::models::ModelShape;
use amdahl_model::catalog::{Catalogs, Listing};
use amdahl_model::energy_validation::energy_validation;
use amdahl_model::plan::{find_validation_run, summarise, validation_set};
use amdahl_model::serve::validation::serve_validation;
use amdahl_report::catalog as render;
use amdahl_report::energy_validation as energy;
use amdahl_report::serve_validation as serving;
use amdahl_report::to_json;
use amdahl_report::validation;
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// Accelerators and server CPUs.
    Devices,
    /// Grid carbon intensity: countries, cloud regions, the world default.
    Regions,
    /// Model shapes.
    Models,
    /// PUE presets.
    Pue,
    /// Servers around the GPUs, for the server (wall) scope of energy.
    Servers,
    /// Published training runs the planner is validated against, with its error on each.
    Validation,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which catalog to list.
    #[arg(value_enum)]
    pub which: Which,
    /// Show one entry (a device, grid code, model, preset or validation run) in full, with its
    /// sources.
    pub name: Option<String>,
    /// Override or extend a catalog with a CSV file in the format of data/*.csv (repeatable).
    #[arg(long = "catalog", value_name = "FILE")]
    pub catalogs: Vec<PathBuf>,
    #[command(flatten)]
    pub format: FormatArgs,
    /// `validation` only: write a plot of each run's signed error against its GPU count (SVG,
    /// or PNG/PDF by the file's extension).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// `validation` only: the energy validation set (published power and energy measurements,
    /// data/validation/energy.csv) instead of the training runs.
    #[arg(long, conflicts_with = "serve")]
    pub energy: bool,
    /// `validation` only: the serving validation set (published tail latencies under a request
    /// stream, data/validation/serve.csv), each row simulated by `amdahl serve`'s simulator.
    #[arg(long)]
    pub serve: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.svg.is_some() && args.which != Which::Validation {
        bail!("--svg draws the validation set only: `amdahl catalog validation --svg FILE`");
    }
    if args.energy && args.which != Which::Validation {
        bail!("--energy selects a validation set: `amdahl catalog validation --energy`");
    }
    if args.serve {
        if args.which != Which::Validation {
            bail!("--serve selects a validation set: `amdahl catalog validation --serve`");
        }
        if args.svg.is_some() || args.name.is_some() {
            bail!("--serve lists the whole serving set: drop --svg and the row name (filter the --csv output instead)");
        }
        print(&serve_validation_text(args.format.format())?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.energy {
        if args.svg.is_some() || args.name.is_some() {
            bail!("--energy lists the whole energy set: drop --svg and the row name (filter the --csv output instead)");
        }
        print(&energy_validation_text(args.format.format())?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let c = load(&args.catalogs)?;
    let format = args.format.format();
    let name = args.name.as_deref();
    let text = match args.which {
        Which::Devices => devices_text(&c, format, name)?,
        Which::Regions => regions_text(&c, format, name)?,
        Which::Models => models_text(&c, format, name)?,
        Which::Pue => pue_text(&c, format, name)?,
        Which::Servers => servers_text(&c, format, name)?,
        Which::Validation => {
            validation_text(!args.catalogs.is_empty(), args.svg.as_deref(), format, name)?
        }
    };
    print(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// The devices, or the one named, in `format` (a named one in full in a table).
fn devices_text(c: &Catalogs, format: Format, name: Option<&str>) -> Result<String> {
    let items: Vec<_> = match name {
        Some(n) => vec![c.devices.lookup(n)?],
        None => c.devices.iter().collect(),
    };
    Ok(match (format, name) {
        (Format::Json, _) => to_json(&Listing::new("devices", items))?,
        (Format::Csv, _) => render::devices_csv(&items)?,
        (Format::Table, Some(_)) => items.iter().map(|d| render::device_detail(d)).collect(),
        (Format::Table, None) => render::devices_table(&items),
    })
}

/// The grid regions, or the one named, in `format`.
fn regions_text(c: &Catalogs, format: Format, name: Option<&str>) -> Result<String> {
    let items = match name {
        Some(n) => vec![c.grid.lookup(n)?],
        None => c.grid.all(),
    };
    Ok(match format {
        Format::Json => to_json(&Listing::new("regions", items))?,
        Format::Csv => render::regions_csv(&items)?,
        Format::Table => render::regions_table(&items),
    })
}

/// The model shapes, or the one named, in `format` (a named one with its source in a table).
fn models_text(c: &Catalogs, format: Format, name: Option<&str>) -> Result<String> {
    let items: Vec<_> = match name {
        Some(n) => vec![c.models.lookup(n)?],
        None => c.models.iter().collect(),
    };
    Ok(match format {
        Format::Json => to_json(&Listing::new("models", items))?,
        Format::Csv => models_csv(&items)?,
        Format::Table => {
            let mut s = render::models_table(&items);
            if name.is_some() {
                for m in &items {
                    s.push_str(&format!("source: {}\n", m.source));
                }
            }
            s
        }
    })
}

/// The model shapes as CSV, one column per field (an unknown one empty).
fn models_csv(items: &[&ModelShape]) -> Result<String> {
    Ok(render::csv_rows(
        &[
            "name", "arch", "params", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab",
            "seq", "source",
        ],
        items.iter().map(|m| {
            let n = |x: Option<u32>| x.map(|v| v.to_string()).unwrap_or_default();
            vec![
                m.name.clone(),
                m.arch.clone(),
                m.params.to_string(),
                n(m.layers),
                n(m.hidden),
                n(m.heads),
                n(m.kv_heads),
                n(m.ffn),
                n(m.vocab),
                n(m.seq),
                m.source.clone(),
            ]
        }),
    )?)
}

/// The PUE presets, or the one named, in `format`.
fn pue_text(c: &Catalogs, format: Format, name: Option<&str>) -> Result<String> {
    let items: Vec<_> = match name {
        Some(n) => vec![c.pue.lookup(n)?],
        None => c.pue.iter().collect(),
    };
    Ok(match format {
        Format::Json => to_json(&Listing::new("pue", items))?,
        Format::Csv => render::csv_rows(
            &["name", "pue", "year", "source"],
            items.iter().map(|p| {
                vec![
                    p.name.clone(),
                    p.pue.to_string(),
                    p.year.to_string(),
                    p.source.clone(),
                ]
            }),
        )?,
        Format::Table => render::pue_table(&items),
    })
}

/// The servers, or the one named, in `format`.
fn servers_text(c: &Catalogs, format: Format, name: Option<&str>) -> Result<String> {
    let items: Vec<_> = match name {
        Some(n) => vec![c.servers.lookup(n)?],
        None => c.servers.iter().collect(),
    };
    Ok(match format {
        Format::Json => to_json(&Listing::new("servers", items))?,
        Format::Csv => render::csv_rows(
            &[
                "name",
                "aliases",
                "gpu",
                "gpus",
                "max_power_w",
                "psu_efficiency",
                "cpus",
                "source",
                "year",
            ],
            items.iter().map(|s| {
                vec![
                    s.name.clone(),
                    s.aliases.join(";"),
                    s.gpu.clone(),
                    s.gpus.to_string(),
                    s.max_power_w.to_string(),
                    s.psu_efficiency.to_string(),
                    s.cpus.clone(),
                    s.source.clone(),
                    s.year.to_string(),
                ]
            }),
        )?,
        Format::Table => render::servers_table(&items),
    })
}

/// The energy validation set in `format`.
fn energy_validation_text(format: Format) -> Result<String> {
    let v = energy_validation()?;
    Ok(match format {
        Format::Json => to_json(&Listing::new("energy-validation", vec![v]))?,
        Format::Csv => energy::energy_validation_csv(&v)?,
        Format::Table => energy::energy_validation_table(&v),
    })
}

/// The serving validation set in `format`.
fn serve_validation_text(format: Format) -> Result<String> {
    let v = serve_validation()?;
    Ok(match format {
        Format::Json => to_json(&Listing::new("serve-validation", vec![v]))?,
        Format::Csv => serving::serve_validation_csv(&v)?,
        Format::Table => serving::serve_validation_table(&v),
    })
}

/// The planner's validation runs, or the one named, in `format`; the plot written first when
/// `svg` names a file. `catalogs_given` (`--catalog` files) only earns a warning.
fn validation_text(
    catalogs_given: bool,
    svg: Option<&Path>,
    format: Format,
    name: Option<&str>,
) -> Result<String> {
    // The published runs' systems are fixed: the embedded catalogs, not --catalog.
    if catalogs_given {
        eprintln!(
            "warning: --catalog does not apply to validation: the published runs are \
             predicted on the embedded catalogs' devices and models"
        );
    }
    let runs = validation_set()?;
    let items = match name {
        Some(n) => vec![find_validation_run(&runs, n)?.clone()],
        None => runs,
    };
    if let Some(p) = svg {
        crate::output::write_plot(p, &validation::validation_svg(&items))?;
    }
    Ok(match (format, name) {
        (Format::Json, _) => to_json(&Listing::new("validation", items))?,
        (Format::Csv, _) => validation::validation_csv(&items)?,
        (Format::Table, Some(_)) => items.iter().map(validation::validation_detail).collect(),
        (Format::Table, None) => validation::validation_table(&items, &summarise(&items)),
    })
}

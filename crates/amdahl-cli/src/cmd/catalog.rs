//! `amdahl catalog` — list the embedded catalogs (devices, grid regions, models, PUE presets) or
//! show one entry with its sources.

use crate::cmd::resolve::load;
use crate::output::{print, Format, FormatArgs};
use amdahl_model::catalog::Listing;
use amdahl_report::catalog as render;
use amdahl_report::to_json;
use anyhow::Result;
use std::path::PathBuf;
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
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which catalog to list.
    #[arg(value_enum)]
    pub which: Which,
    /// Show one entry (a device, grid code, model or preset) in full, with its sources.
    pub name: Option<String>,
    /// Override or extend a catalog with a CSV file in the format of data/*.csv (repeatable).
    #[arg(long = "catalog", value_name = "FILE")]
    pub catalogs: Vec<PathBuf>,
    #[command(flatten)]
    pub format: FormatArgs,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let c = load(&args.catalogs)?;
    let format = args.format.format();
    let name = args.name.as_deref();
    let text = match args.which {
        Which::Devices => {
            let items: Vec<_> = match name {
                Some(n) => vec![c.devices.lookup(n)?],
                None => c.devices.iter().collect(),
            };
            match (format, name) {
                (Format::Json, _) => to_json(&Listing::new("devices", items))?,
                (Format::Csv, _) => render::devices_csv(&items)?,
                (Format::Table, Some(_)) => {
                    items.iter().map(|d| render::device_detail(d)).collect()
                }
                (Format::Table, None) => render::devices_table(&items),
            }
        }
        Which::Regions => {
            let items = match name {
                Some(n) => vec![c.grid.lookup(n)?],
                None => c.grid.all(),
            };
            match format {
                Format::Json => to_json(&Listing::new("regions", items))?,
                Format::Csv => render::regions_csv(&items)?,
                Format::Table => render::regions_table(&items),
            }
        }
        Which::Models => {
            let items: Vec<_> = match name {
                Some(n) => vec![c.models.lookup(n)?],
                None => c.models.iter().collect(),
            };
            match format {
                Format::Json => to_json(&Listing::new("models", items))?,
                Format::Csv => render::csv_rows(
                    &[
                        "name", "arch", "params", "layers", "hidden", "heads", "kv_heads", "ffn",
                        "vocab", "seq", "source",
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
                )?,
                Format::Table => {
                    let mut s = render::models_table(&items);
                    if name.is_some() {
                        for m in &items {
                            s.push_str(&format!("source: {}\n", m.source));
                        }
                    }
                    s
                }
            }
        }
        Which::Pue => {
            let items: Vec<_> = match name {
                Some(n) => vec![c.pue.lookup(n)?],
                None => c.pue.iter().collect(),
            };
            match format {
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
            }
        }
    };
    print(&text)?;
    Ok(ExitCode::SUCCESS)
}

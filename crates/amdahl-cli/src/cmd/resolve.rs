//! Resolving catalog-backed options shared by several subcommands (`carbon`, `plan`, `catalog`):
//! the catalogs with the user's `--catalog` files, the grid (`--region` / `--intensity …`) and
//! the PUE (a number or a preset). One place, so every command accepts the same spellings.

use amdahl_model::carbon::from_result::{Saved, SavedGrid};
use amdahl_model::carbon::{defaults, Pue};
use amdahl_model::catalog::grid::{GridIntensity, GridScope};
use amdahl_model::catalog::Catalogs;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;

/// The embedded catalogs extended by the user's files, in order.
pub fn load(files: &[PathBuf]) -> Result<Catalogs> {
    let mut c = Catalogs::embedded().context("reading the embedded catalogs")?;
    for f in files {
        let text = crate::input::read_text(f).context("reading a --catalog file")?;
        c.add_user_file(&text, &f.display().to_string())?;
    }
    Ok(c)
}

/// Reject options that cannot be combined, naming both.
pub fn exclusive(pairs: &[(&str, bool)]) -> Result<()> {
    let given: Vec<&str> = pairs.iter().filter(|p| p.1).map(|p| p.0).collect();
    if given.len() > 1 {
        bail!(
            "{} cannot be combined; give one of them",
            given.join(" and ")
        );
    }
    Ok(())
}

/// The grid options: a catalogued region or an explicit intensity with its provenance.
#[derive(clap::Args, Debug, Clone)]
pub struct GridArgs {
    /// Grid: ISO code (FR, FRA), country name, cloud region (aws:eu-west-3, gcp:europe-west1) or world.
    #[arg(long)]
    pub region: Option<String>,
    /// Explicit grid intensity in gCO2e/kWh (0-2000) instead of --region.
    #[arg(long, value_name = "G")]
    pub intensity: Option<f64>,
    /// Scope of --intensity [default: lifecycle, the scope of every catalogued grid].
    #[arg(long, value_name = "lifecycle|direct")]
    pub intensity_scope: Option<String>,
    /// Data year of --intensity, recorded with it and printed beside the intensity (and in
    /// `carbon --statement`) [default: none; shown as "year not given"].
    #[arg(long, value_name = "YEAR")]
    pub intensity_year: Option<u16>,
    /// Where --intensity comes from: recorded with it in every JSON result, and printed in
    /// carbon's statement.
    #[arg(long, value_name = "TEXT")]
    pub intensity_source: Option<String>,
}

impl GridArgs {
    /// `--intensity` with its scope, year and source; else `--region` looked up in the grid
    /// catalog (unknown names get the nearest suggestions); else the default grid
    /// ([`defaults::GRID_REGION`]), marked as the default in its name.
    pub fn resolve(&self, c: &Catalogs) -> Result<GridIntensity> {
        exclusive(&[
            ("--region", self.region.is_some()),
            ("--intensity", self.intensity.is_some()),
        ])?;
        match self.intensity {
            Some(g) => {
                let scope = match self.intensity_scope.as_deref() {
                    None => defaults::INTENSITY_SCOPE,
                    Some("lifecycle") => GridScope::Lifecycle,
                    Some("direct") => GridScope::Direct,
                    Some(s) => bail!("--intensity-scope `{s}` is not lifecycle or direct"),
                };
                let mut i = GridIntensity::custom(g, scope, self.intensity_year)
                    .map_err(anyhow::Error::msg)?;
                if let Some(s) = &self.intensity_source {
                    i.source = s.clone();
                }
                Ok(i)
            }
            None => match self.region.as_deref() {
                Some(r) => Ok(c.grid.lookup(r)?),
                None => {
                    let mut g = c.grid.lookup(defaults::GRID_REGION)?;
                    g.name = format!("{} ({})", g.name, defaults::DEFAULT_MARK);
                    Ok(g)
                }
            },
        }
    }
}

/// `--pue`: a number ≥ 1, or a preset name from the PUE catalog (`local`, `hyperscale`,
/// `industry`); the one default ([`defaults::PUE_PRESET`]) when not given, marked as such.
pub fn pue(spec: Option<&str>, c: &Catalogs) -> Result<Pue> {
    let s = spec.unwrap_or(defaults::PUE_PRESET);
    let mark = if spec.is_none() {
        format!(", {}", defaults::DEFAULT_MARK)
    } else {
        String::new()
    };
    Ok(match s.parse::<f64>() {
        Ok(v) => Pue::new(v, "given")?,
        Err(_) => {
            let p = c.pue.lookup(s)?;
            Pue::new(p.pue, format!("{} preset{mark}: {}", p.name, p.source))?
        }
    })
}

/// The PUE of a job as `amdahl carbon` resolves it: `--pue` (a number or preset) when given;
/// else the one a saved result recorded (a run, a plan, an inference result); else the one
/// default every command uses (`defaults::PUE_PRESET`).
pub fn pue_for(spec: Option<&str>, saved: Option<&Saved>, c: &Catalogs) -> Result<Pue> {
    match (spec, saved.and_then(|s| s.pue)) {
        (None, Some(p)) => Ok(Pue::new(
            p,
            match saved.and_then(|s| s.pue_source.as_deref()) {
                Some(src) => format!("as in the saved result: {src}"),
                None => "as in the saved result".into(),
            },
        )?),
        (spec, _) => pue(spec, c),
    }
}

/// The grid of a job as `amdahl carbon` resolves it: the saved result's own grid unless
/// `--region`/`--intensity` is given; else those flags (default `world`).
pub fn grid_for(args: &GridArgs, saved: Option<&Saved>, c: &Catalogs) -> Result<GridIntensity> {
    match saved.and_then(|s| s.grid.as_ref()) {
        Some(g) if args.region.is_none() && args.intensity.is_none() => saved_grid(g, c),
        _ => args.resolve(c),
    }
}

/// The grid a saved result used: its catalog entry when the recorded figure is that entry's
/// (so scope and name come along), else the recorded figure with its recorded source.
fn saved_grid(g: &SavedGrid, c: &Catalogs) -> Result<GridIntensity> {
    match c.grid.lookup(&g.region) {
        // Named as the saved result's, so the output says the grid was not the default.
        Ok(mut entry) if (entry.g_per_kwh.get() - g.g_per_kwh).abs() < 1e-9 => {
            entry.name = format!("{}, as in the saved result", entry.name);
            Ok(entry)
        }
        _ => {
            // `amdahl run` records the scope at the end of the source: "… (direct)".
            let scope = if g.source.ends_with("(direct)") {
                GridScope::Direct
            } else {
                GridScope::Lifecycle
            };
            let mut custom =
                GridIntensity::custom(g.g_per_kwh, scope, g.year).map_err(anyhow::Error::msg)?;
            custom.name = format!("as recorded in the saved result ({})", g.region);
            custom.source = g.source.clone();
            Ok(custom)
        }
    }
}

//! Resolving catalog-backed options shared by several subcommands (`carbon`, `plan`, `catalog`):
//! the catalogs with the user's `--catalog` files, the grid (`--region` / `--intensity …`) and
//! the PUE (a number or a preset). One place, so every command accepts the same spellings.

use amdahl_model::carbon::Pue;
use amdahl_model::catalog::grid::{GridIntensity, Scope};
use amdahl_model::catalog::Catalogs;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;

/// The embedded catalogs extended by the user's files, in order.
pub fn load(files: &[PathBuf]) -> Result<Catalogs> {
    let mut c = Catalogs::embedded().context("reading the embedded catalogs")?;
    for f in files {
        let text = std::fs::read_to_string(f)
            .with_context(|| format!("reading catalog file {}", f.display()))?;
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

fn current_year() -> u16 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    (1970.0 + secs / (365.2425 * 86_400.0)).floor() as u16
}

/// The grid options: a catalogued region or an explicit intensity with its provenance.
#[derive(clap::Args, Debug, Clone)]
pub struct GridArgs {
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
}

impl GridArgs {
    /// `--intensity` with its scope, year and source; else `--region` looked up in the grid
    /// catalog (unknown names get the nearest suggestions); else the world default.
    pub fn resolve(&self, c: &Catalogs) -> Result<GridIntensity> {
        exclusive(&[
            ("--region", self.region.is_some()),
            ("--intensity", self.intensity.is_some()),
        ])?;
        match self.intensity {
            Some(g) => {
                let scope = match self.intensity_scope.as_str() {
                    "lifecycle" => Scope::Lifecycle,
                    "direct" => Scope::Direct,
                    s => bail!("--intensity-scope `{s}` is not lifecycle or direct"),
                };
                let mut i = GridIntensity::custom(
                    g,
                    scope,
                    self.intensity_year.unwrap_or_else(current_year),
                )
                .map_err(anyhow::Error::msg)?;
                if let Some(s) = &self.intensity_source {
                    i.source = s.clone();
                }
                Ok(i)
            }
            None => Ok(c.grid.lookup(self.region.as_deref().unwrap_or("world"))?),
        }
    }
}

/// `--pue`: a number ≥ 1, or a preset name from the PUE catalog (`local`, `hyperscale`,
/// `industry`); `default` (a preset name) when not given.
pub fn pue(spec: Option<&str>, default: &str, c: &Catalogs) -> Result<Pue> {
    let s = spec.unwrap_or(default);
    Ok(match s.parse::<f64>() {
        Ok(v) => Pue::new(v, "given")?,
        Err(_) => {
            let p = c.pue.lookup(s)?;
            Pue::new(p.pue, format!("{} preset: {}", p.name, p.source))?
        }
    })
}

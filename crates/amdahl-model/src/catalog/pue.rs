//! PUE presets (facility energy ÷ IT energy): local machine, hyperscale, industry average.

use super::{normalise, suggest, table, CatalogError};
use serde::Serialize;
use std::sync::OnceLock;

const FILE: &str = "data/pue.csv";
const TEXT: &str = include_str!("../../../../data/pue.csv");

/// One preset.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct PuePreset {
    pub name: String,
    pub pue: f64,
    pub year: u16,
    pub source: String,
}

/// The PUE catalog.
#[derive(Debug, Clone, Default)]
pub struct PuePresets {
    items: Vec<PuePreset>,
}

impl PuePresets {
    /// Parse a PUE CSV (the format of `data/pue.csv`). PUE < 1 is impossible by definition.
    pub fn parse(text: &str, file: &str) -> Result<Self, CatalogError> {
        let items = table::parse(text, file, &["name", "pue", "year", "source"], |r| {
            let pue = r.positive("pue")?;
            if pue < 1.0 {
                return Err(r.err(
                    "pue",
                    format!("{pue} is below 1; PUE = facility / IT energy ≥ 1"),
                ));
            }
            Ok(PuePreset {
                name: r.text("name")?,
                pue,
                year: r.year("year")?,
                source: r.text("source")?,
            })
        })?;
        Ok(Self { items })
    }

    pub fn lookup(&self, name: &str) -> Result<&PuePreset, CatalogError> {
        let key = normalise(name);
        self.items
            .iter()
            .find(|p| normalise(&p.name) == key)
            .ok_or_else(|| CatalogError::Unknown {
                kind: "PUE preset",
                name: name.into(),
                suggestions: suggest::nearest(name, self.items.iter().map(|p| p.name.as_str())),
            })
    }

    pub fn iter(&self) -> impl Iterator<Item = &PuePreset> {
        self.items.iter()
    }

    pub fn merge(&mut self, user: PuePresets) {
        table::merge_by(&mut self.items, user.items, |p| normalise(&p.name));
    }
}

/// The embedded presets, parsed on first use.
pub fn embedded() -> Result<&'static PuePresets, CatalogError> {
    static CELL: OnceLock<Result<PuePresets, CatalogError>> = OnceLock::new();
    CELL.get_or_init(|| PuePresets::parse(TEXT, FILE))
        .as_ref()
        .map_err(Clone::clone)
}

/// Look a preset up in the embedded catalog.
pub fn lookup(name: &str) -> Result<&'static PuePreset, CatalogError> {
    embedded()?.lookup(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets() {
        assert_eq!(lookup("local").unwrap().pue, 1.0);
        assert_eq!(lookup("hyperscale").unwrap().pue, 1.10);
        // Uptime Institute Global Data Center Survey 2024: 1.56.
        assert_eq!(lookup("Industry").unwrap().pue, 1.56);
    }

    #[test]
    fn pue_below_one_rejected() {
        let e = PuePresets::parse("name,pue,year,source\nx,0.9,2024,me\n", "p.csv").unwrap_err();
        assert!(
            e.to_string().starts_with("p.csv: line 2, column `pue`"),
            "{e}"
        );
    }
}

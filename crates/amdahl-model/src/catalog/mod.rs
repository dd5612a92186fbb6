//! Embedded reference catalogs: devices, grid carbon intensities (countries and cloud regions), PUE
//! presets, model shapes and embodied-carbon factors.
//!
//! Each catalog is a CSV file under `data/` (every row carries its `source` and `year`; licences in
//! `data/README.md`), embedded with `include_str!` and parsed once on first use. A user file in the
//! same format overrides or extends a catalog by name ([`Catalogs::add_user_file`]). Parse errors name
//! the file, the line and the column.

pub mod cpu_power;
pub mod devices;
pub mod embodied;
pub mod grid;
pub mod models;
pub mod pue;
pub mod servers;

pub(crate) mod suggest;
mod table;

use thiserror::Error;

/// What went wrong reading or querying a catalog.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum CatalogError {
    /// A cell that does not parse or is out of range.
    #[error("{file}: line {line}, column `{column}`: {message}")]
    Field {
        file: String,
        line: u64,
        column: String,
        message: String,
    },
    /// A file-level problem (not CSV, missing column, unknown kind).
    #[error("{file}: {message}")]
    File { file: String, message: String },
    /// A name that is in no catalog.
    #[error("unknown {kind} `{name}`{}", suggest::render(kind, .suggestions))]
    Unknown {
        kind: &'static str,
        name: String,
        suggestions: Vec<String>,
    },
}

/// The `schema` of `amdahl catalog --json`.
pub const SCHEMA: &str = "amdahl.catalog/1";

/// A catalog listing, the `amdahl catalog --json` result (`"schema": "amdahl.catalog/1"`).
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct Listing<T: serde::Serialize> {
    pub schema: &'static str,
    /// `devices`, `regions`, `models`, `pue` or `validation`.
    pub catalog: &'static str,
    pub items: Vec<T>,
}

impl<T: serde::Serialize> Listing<T> {
    pub fn new(catalog: &'static str, items: Vec<T>) -> Self {
        Self {
            schema: SCHEMA,
            catalog,
            items,
        }
    }
}

/// Which catalog a user file extends, recognised from its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Devices,
    Countries,
    Subnational,
    Regions,
    Models,
    Pue,
}

impl Kind {
    /// Recognise a catalog from its header columns (the first non-comment line of the file).
    fn detect(headers: &[&str]) -> Option<Kind> {
        let has = |c: &str| headers.contains(&c);
        if has("tdp_w") {
            Some(Kind::Devices)
        } else if has("alpha2") && has("g_per_kwh") {
            Some(Kind::Countries)
        } else if has("code") && has("published_unit") {
            Some(Kind::Subnational)
        } else if has("id") && has("grid") {
            Some(Kind::Regions)
        } else if has("params") {
            Some(Kind::Models)
        } else if has("pue") {
            Some(Kind::Pue)
        } else {
            None
        }
    }
}

/// All catalogs together: the embedded data, possibly extended by user files.
#[derive(Debug, Clone)]
pub struct Catalogs {
    pub devices: devices::Devices,
    pub grid: grid::Grid,
    pub models: models::Models,
    pub pue: pue::PuePresets,
    pub servers: servers::Servers,
}

impl Catalogs {
    /// A copy of the embedded catalogs, ready to be extended with [`Catalogs::add_user_file`].
    pub fn embedded() -> Result<Self, CatalogError> {
        Ok(Self {
            devices: devices::embedded()?.clone(),
            grid: grid::embedded()?.clone(),
            models: models::embedded()?.clone(),
            pue: pue::embedded()?.clone(),
            servers: servers::embedded()?.clone(),
        })
    }

    /// Override or extend one catalog with a user CSV file (`file` names it in error messages).
    /// The catalog is recognised from the header; rows replace embedded rows of the same name.
    pub fn add_user_file(&mut self, text: &str, file: &str) -> Result<Kind, CatalogError> {
        let headers = table::header_line(text);
        let cols: Vec<&str> = headers.split(',').map(str::trim).collect();
        let kind = Kind::detect(&cols).ok_or_else(|| CatalogError::File {
            file: file.into(),
            message: format!(
                "cannot tell which catalog this is from its header `{headers}`; \
                 copy the header of one of data/devices.csv, grid.csv, subnational.csv, regions.csv, models.csv, pue.csv"
            ),
        })?;
        match kind {
            Kind::Devices => self.devices.merge(devices::Devices::parse(text, file)?),
            Kind::Countries => self
                .grid
                .merge_countries(grid::Grid::parse_countries(text, file)?),
            Kind::Subnational => self
                .grid
                .merge_subnational(grid::Grid::parse_subnational(text, file)?),
            Kind::Regions => self
                .grid
                .merge_regions(grid::Grid::parse_regions(text, file)?),
            Kind::Models => self.models.merge(models::Models::parse(text, file)?),
            Kind::Pue => self.pue.merge(pue::PuePresets::parse(text, file)?),
        }
        // Regions refer to country and sub-national grids: check the merged catalog still resolves every region.
        self.grid.validate(file)?;
        Ok(kind)
    }
}

/// Lower-case and drop everything but letters and digits, so `H100 SXM5`, `h100-sxm5` and
/// `h100_sxm5` are one name.
pub(crate) fn normalise(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_embedded_catalogs_parse() {
        let c = Catalogs::embedded().unwrap();
        assert!(c.devices.iter().count() >= 25);
        assert!(c.grid.countries().len() > 200);
        assert!(c.models.iter().count() >= 25);
        assert_eq!(c.pue.iter().count(), 3);
    }

    #[test]
    fn user_file_overrides_by_name() {
        let mut c = Catalogs::embedded().unwrap();
        let user =
            "name,pue,year,source\nhyperscale,1.2,2025,my datacentre\nlab,1.4,2025,facility team\n";
        assert_eq!(c.add_user_file(user, "mine.csv").unwrap(), Kind::Pue);
        assert_eq!(c.pue.lookup("hyperscale").unwrap().pue, 1.2);
        assert_eq!(c.pue.lookup("lab").unwrap().pue, 1.4);
        assert_eq!(c.pue.iter().count(), 4);
    }

    #[test]
    fn unknown_header_is_an_error() {
        let mut c = Catalogs::embedded().unwrap();
        let e = c.add_user_file("a,b\n1,2\n", "x.csv").unwrap_err();
        assert!(e.to_string().contains("x.csv"), "{e}");
    }

    #[test]
    fn malformed_user_row_names_file_line_column() {
        let mut c = Catalogs::embedded().unwrap();
        let user = "name,pue,year,source\nlab,abc,2025,me\n";
        let e = c.add_user_file(user, "mine.csv").unwrap_err();
        assert_eq!(
            e.to_string(),
            "mine.csv: line 2, column `pue`: `abc` is not a number"
        );
    }
}

//! Grid carbon intensity per country (ISO 3166 alpha-2, alpha-3, name), per sub-national grid (EPA
//! eGRID subregions, Canadian provinces, Australian states), per cloud region (mapped to a
//! sub-national or country grid, or with the provider's own published value) and the world default.

use super::{normalise, suggest, table, CatalogError};
use crate::units::GramsPerKwh;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

const COUNTRIES_FILE: &str = "data/grid.csv";
const COUNTRIES_TEXT: &str = include_str!("../../../../data/grid.csv");
const REGIONS_FILE: &str = "data/regions.csv";
const REGIONS_TEXT: &str = include_str!("../../../../data/regions.csv");
const SUBNATIONAL_FILE: &str = "data/subnational.csv";
const SUBNATIONAL_TEXT: &str = include_str!("../../../../data/subnational.csv");

/// Grams per pound: eGRID publishes lb/MWh, and 1 lb/MWh = 453.59237 g / 1,000 kWh.
pub const G_PER_KWH_PER_LB_PER_MWH: f64 = 0.453_592_37;

/// Highest plausible grid intensity: pure lignite generation is ~1,100-1,200 g/kWh lifecycle
/// (IPCC AR5 WG3 Annex III, Table A.III.2), so 2,000 leaves headroom while catching unit mistakes
/// (kg/MWh is the same number; lb/MWh and g/MJ are not).
pub const MAX_G_PER_KWH: f64 = 2000.0;

/// Whether an intensity counts only combustion at the plant or the whole life cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(rename = "Scope")]
pub enum GridScope {
    /// Life-cycle emissions of generation (construction, fuel supply, operation).
    Lifecycle,
    /// Direct (stack) emissions of generation only.
    Direct,
}

impl std::fmt::Display for GridScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GridScope::Lifecycle => "lifecycle",
            GridScope::Direct => "direct",
        })
    }
}

impl GridScope {
    fn parse(s: &str) -> Option<GridScope> {
        match s.to_ascii_lowercase().as_str() {
            "lifecycle" => Some(GridScope::Lifecycle),
            "direct" => Some(GridScope::Direct),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            GridScope::Lifecycle => "lifecycle",
            GridScope::Direct => "direct",
        }
    }
}

/// A country grid row (or the world default, alpha-3 `WLD`).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Country {
    pub alpha2: String,
    pub alpha3: String,
    pub name: String,
    pub g_per_kwh: GramsPerKwh,
    pub year: u16,
    pub scope: GridScope,
    pub source: String,
    pub licence: String,
}

/// A grid below the national level (an EPA eGRID subregion, a province, a state), or the national
/// figure of the same source (`US-EGRID`, `CA-NIR`, `AU-EMAPS`) to compare it with.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Subnational {
    /// `SRVC` (eGRID subregion acronym) or an ISO 3166-2 code (`CA-QC`, `AU-NSW`).
    pub code: String,
    /// ISO alpha-2 of the country it belongs to.
    pub country: String,
    pub name: String,
    /// `eGRID subregion`, `province`, `state`, `territory`, or `… national total` for the source's
    /// national figure.
    pub kind: String,
    pub g_per_kwh: GramsPerKwh,
    /// The figure as the source publishes it, in `published_unit` (`lb/MWh` or `g/kWh`).
    pub published: f64,
    pub published_unit: String,
    pub year: u16,
    pub scope: GridScope,
    pub source: String,
    pub licence: String,
}

impl Subnational {
    /// `published` converted to g/kWh (lb/MWh × 0.45359237), to check `g_per_kwh` against.
    pub fn published_g_per_kwh(&self) -> Option<f64> {
        match self.published_unit.as_str() {
            "lb/MWh" => Some(self.published * G_PER_KWH_PER_LB_PER_MWH),
            "g/kWh" | "kg/MWh" => Some(self.published),
            _ => None,
        }
    }
}

/// A cloud region: where it is and, when the provider publishes one, its own intensity.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CloudRegion {
    /// `provider:region`, e.g. `aws:eu-west-3`.
    pub id: String,
    pub location: String,
    /// The grid the region draws from: a sub-national code (`SRVC`, `CA-QC`) or a country's ISO
    /// alpha-2.
    pub grid: String,
    /// The provider's published intensity used as the region's; `None` means "use the grid".
    pub g_per_kwh: Option<GramsPerKwh>,
    /// The provider's own figure where the default is the grid's (Google's, for a GCP region on a
    /// sub-national grid): named in the source, never multiplied.
    pub provider_g_per_kwh: Option<GramsPerKwh>,
    pub scope: Option<GridScope>,
    pub year: u16,
    pub source: String,
}

/// The location of a grid region as CodeCarbon's CSV names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Location {
    pub country_name: String,
    /// ISO 3166-1 alpha-3, as CodeCarbon writes it (`FRA`).
    pub country_iso_code: String,
    /// `aws`, `gcp`, `azure`, ... for a cloud region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_provider: Option<String>,
    /// The provider's region name (`eu-west-3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_region: Option<String>,
}

/// A resolved intensity: what a carbon estimate multiplies energy by, with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GridIntensity {
    /// The canonical code: ISO alpha-2, a region id, `world` or `custom`.
    pub code: String,
    /// Human name ("France", "aws:eu-west-3 (Paris) on the FR grid").
    pub name: String,
    pub g_per_kwh: GramsPerKwh,
    /// The data year; `None` for a user-supplied intensity given without one (never guessed:
    /// stamping today's year on a 2019 figure misdates it in a citable statement).
    pub year: Option<u16>,
    pub scope: GridScope,
    pub source: String,
}

/// A data year as every output prints it: "2022", or "year not given" where none is known.
pub fn year_label(year: Option<u16>) -> String {
    year.map_or_else(|| "year not given".into(), |y| y.to_string())
}

impl GridIntensity {
    /// A user-given intensity (`--intensity`), checked to lie in 0-2,000 g/kWh.
    pub fn custom(g_per_kwh: f64, scope: GridScope, year: Option<u16>) -> Result<Self, String> {
        check(g_per_kwh)?;
        Ok(Self {
            code: "custom".into(),
            name: "user-supplied intensity".into(),
            g_per_kwh: GramsPerKwh(g_per_kwh),
            year,
            scope,
            source: "given by the user".into(),
        })
    }
}

fn check(g: f64) -> Result<(), String> {
    if g.is_finite() && (0.0..=MAX_G_PER_KWH).contains(&g) {
        Ok(())
    } else {
        Err(format!(
            "carbon intensity {g} g/kWh is outside 0-{MAX_G_PER_KWH}; give gCO2e per kWh (kg/MWh is the same number)"
        ))
    }
}

/// Countries, sub-national grids and cloud regions.
#[derive(Debug, Clone, Default)]
pub struct Grid {
    countries: Vec<Country>,
    subnational: Vec<Subnational>,
    regions: Vec<CloudRegion>,
}

/// What a cloud region's `grid` names.
enum GridRow<'a> {
    Country(&'a Country),
    Sub(&'a Subnational),
}

fn intensity(r: &table::Row, column: &str) -> Result<Option<GramsPerKwh>, CatalogError> {
    let s = r.cell(column);
    if s.is_empty() {
        return Ok(None);
    }
    let g: f64 = s
        .parse()
        .map_err(|_| r.err(column, format!("`{s}` is not a number")))?;
    check(g).map_err(|m| r.err(column, m))?;
    Ok(Some(GramsPerKwh(g)))
}

fn scope(r: &table::Row) -> Result<Option<GridScope>, CatalogError> {
    match r.cell("scope") {
        "" => Ok(None),
        s => GridScope::parse(s)
            .map(Some)
            .ok_or_else(|| r.err("scope", format!("`{s}` is not `lifecycle` or `direct`"))),
    }
}

impl Grid {
    /// Parse a countries CSV (the format of `data/grid.csv`).
    pub fn parse_countries(text: &str, file: &str) -> Result<Vec<Country>, CatalogError> {
        let req = &[
            "alpha2",
            "alpha3",
            "name",
            "g_per_kwh",
            "year",
            "scope",
            "source",
        ];
        table::parse(text, file, req, |r| {
            Ok(Country {
                alpha2: r.cell("alpha2").to_ascii_uppercase(),
                alpha3: r.text("alpha3")?.to_ascii_uppercase(),
                name: r.text("name")?,
                g_per_kwh: intensity(r, "g_per_kwh")?
                    .ok_or_else(|| r.err("g_per_kwh", "is empty; every country needs a value"))?,
                year: r.year("year")?,
                scope: scope(r)?
                    .ok_or_else(|| r.err("scope", "is empty; say lifecycle or direct"))?,
                source: r.text("source")?,
                licence: r.cell("licence").to_string(),
            })
        })
    }

    /// Parse a sub-national grids CSV (the format of `data/subnational.csv`).
    pub fn parse_subnational(text: &str, file: &str) -> Result<Vec<Subnational>, CatalogError> {
        let req = &[
            "code",
            "country",
            "name",
            "kind",
            "g_per_kwh",
            "published",
            "published_unit",
            "year",
            "scope",
            "source",
        ];
        table::parse(text, file, req, |r| {
            let code = r.text("code")?.to_ascii_uppercase();
            if code.contains(':') {
                return Err(r.err(
                    "code",
                    format!("`{code}` has a `:`, which marks cloud regions"),
                ));
            }
            let published_unit = r.text("published_unit")?;
            if !matches!(published_unit.as_str(), "lb/MWh" | "g/kWh" | "kg/MWh") {
                return Err(r.err(
                    "published_unit",
                    format!("`{published_unit}` is not lb/MWh, g/kWh or kg/MWh"),
                ));
            }
            let g_per_kwh = intensity(r, "g_per_kwh")?
                .ok_or_else(|| r.err("g_per_kwh", "is empty; every grid needs a value"))?;
            let published = r.positive("published")?;
            // The stored figure must be the published one converted (rounding to 0.1 g/kWh or
            // 0.5 % allowed): catches a lb/MWh figure typed as g/kWh and the reverse.
            let converted = match published_unit.as_str() {
                "lb/MWh" => published * G_PER_KWH_PER_LB_PER_MWH,
                _ => published,
            };
            if (g_per_kwh.get() - converted).abs() > (0.05_f64).max(0.005 * converted) + 1e-9 {
                return Err(r.err(
                    "g_per_kwh",
                    format!(
                        "{} is not {published} {published_unit} converted ({converted:.1} g/kWh)",
                        g_per_kwh.get()
                    ),
                ));
            }
            Ok(Subnational {
                code,
                country: r.text("country")?.to_ascii_uppercase(),
                name: r.text("name")?,
                kind: r.text("kind")?,
                g_per_kwh,
                published,
                published_unit,
                year: r.year("year")?,
                scope: scope(r)?
                    .ok_or_else(|| r.err("scope", "is empty; say lifecycle or direct"))?,
                source: r.text("source")?,
                licence: r.cell("licence").to_string(),
            })
        })
    }

    /// Parse a cloud-regions CSV (the format of `data/regions.csv`).
    pub fn parse_regions(text: &str, file: &str) -> Result<Vec<CloudRegion>, CatalogError> {
        let req = &[
            "id",
            "location",
            "grid",
            "g_per_kwh",
            "year",
            "scope",
            "source",
        ];
        table::parse(text, file, req, |r| {
            let id = r.text("id")?.to_ascii_lowercase();
            if !id.contains(':') {
                return Err(r.err("id", format!("`{id}` is not `provider:region`")));
            }
            let g = intensity(r, "g_per_kwh")?;
            let scope = scope(r)?;
            if g.is_some() && scope.is_none() {
                return Err(r.err("scope", "a region with its own g_per_kwh needs a scope"));
            }
            Ok(CloudRegion {
                id,
                location: r.cell("location").to_string(),
                grid: r.text("grid")?.to_ascii_uppercase(),
                g_per_kwh: g,
                provider_g_per_kwh: intensity(r, "provider_g_per_kwh")?,
                scope,
                year: r.year("year")?,
                source: r.text("source")?,
            })
        })
    }

    pub fn merge_countries(&mut self, user: Vec<Country>) {
        table::merge_by(&mut self.countries, user, |c| c.alpha3.clone());
    }

    pub fn merge_regions(&mut self, user: Vec<CloudRegion>) {
        table::merge_by(&mut self.regions, user, |r| r.id.clone());
    }

    pub fn merge_subnational(&mut self, user: Vec<Subnational>) {
        table::merge_by(&mut self.subnational, user, |s| s.code.clone());
    }

    /// Every region without its own value must point at a known country grid; a world row must exist.
    pub fn validate(&self, file: &str) -> Result<(), CatalogError> {
        if self.world().is_none() {
            return Err(CatalogError::File {
                file: file.into(),
                message: "no world row (alpha3 WLD) in the grid catalog".into(),
            });
        }
        for s in &self.subnational {
            if self.country_by_alpha2(&s.country).is_none() {
                return Err(CatalogError::File {
                    file: file.into(),
                    message: format!("grid `{}` names unknown country `{}`", s.code, s.country),
                });
            }
        }
        for r in &self.regions {
            if r.g_per_kwh.is_none() && self.grid_row(&r.grid).is_none() {
                return Err(CatalogError::File {
                    file: file.into(),
                    message: format!("region `{}` points at unknown grid `{}`", r.id, r.grid),
                });
            }
        }
        Ok(())
    }

    pub fn countries(&self) -> &[Country] {
        &self.countries
    }

    pub fn regions(&self) -> &[CloudRegion] {
        &self.regions
    }

    pub fn subnational(&self) -> &[Subnational] {
        &self.subnational
    }

    fn world(&self) -> Option<&Country> {
        self.countries.iter().find(|c| c.alpha3 == "WLD")
    }

    fn country_by_alpha2(&self, a2: &str) -> Option<&Country> {
        self.countries
            .iter()
            .find(|c| !c.alpha2.is_empty() && c.alpha2.eq_ignore_ascii_case(a2))
    }

    fn subnational_by_code(&self, code: &str) -> Option<&Subnational> {
        self.subnational
            .iter()
            .find(|s| s.code.eq_ignore_ascii_case(code))
    }

    /// A region's `grid`: a sub-national code first (`SRVC`), else a country's alpha-2.
    fn grid_row(&self, code: &str) -> Option<GridRow<'_>> {
        self.subnational_by_code(code)
            .map(GridRow::Sub)
            .or_else(|| self.country_by_alpha2(code).map(GridRow::Country))
    }

    /// The country (and cloud provider and region) of a resolved grid code, as CodeCarbon 3.x
    /// fills its CSV: `FR` → France, FRA; `aws:eu-west-3` → the country of the region's grid,
    /// plus provider `aws` and region `eu-west-3`. None for `world` and custom intensities.
    pub fn location(&self, code: &str) -> Option<Location> {
        let (cloud, grid) = match code.split_once(':') {
            Some((provider, region)) => {
                let r = self.regions.iter().find(|r| r.id == code)?;
                (
                    Some((provider.to_string(), region.to_string())),
                    r.grid.as_str(),
                )
            }
            None => (None, code),
        };
        let alpha2 = match self.grid_row(grid)? {
            GridRow::Sub(s) => s.country.as_str(),
            GridRow::Country(c) => c.alpha2.as_str(),
        };
        let country = self.country_by_alpha2(alpha2)?;
        Some(Location {
            country_name: country.name.clone(),
            country_iso_code: country.alpha3.clone(),
            cloud_provider: cloud.as_ref().map(|(p, _)| p.clone()),
            cloud_region: cloud.map(|(_, r)| r),
        })
    }

    fn country_intensity(c: &Country) -> GridIntensity {
        let code = if c.alpha3 == "WLD" {
            "world".to_string()
        } else if c.alpha2.is_empty() {
            c.alpha3.clone()
        } else {
            c.alpha2.clone()
        };
        GridIntensity {
            code,
            name: c.name.clone(),
            g_per_kwh: c.g_per_kwh,
            year: Some(c.year),
            scope: c.scope,
            source: c.source.clone(),
        }
    }

    fn subnational_intensity(&self, s: &Subnational) -> GridIntensity {
        let country = self
            .country_by_alpha2(&s.country)
            .map_or(s.country.as_str(), |c| c.name.as_str());
        let name = if s.kind.ends_with("national total") {
            format!("{} ({})", s.name, s.kind)
        } else {
            format!("{} ({}, {})", s.name, s.kind, country)
        };
        GridIntensity {
            code: s.code.clone(),
            name,
            g_per_kwh: s.g_per_kwh,
            year: Some(s.year),
            scope: s.scope,
            source: s.source.clone(),
        }
    }

    fn region_intensity(&self, r: &CloudRegion) -> Option<GridIntensity> {
        let place = if r.location.is_empty() {
            r.id.clone()
        } else {
            format!("{} ({})", r.id, r.location)
        };
        match (r.g_per_kwh, r.scope) {
            (Some(g), Some(scope)) => Some(GridIntensity {
                code: r.id.clone(),
                name: place,
                g_per_kwh: g,
                year: Some(r.year),
                scope,
                source: r.source.clone(),
            }),
            _ => {
                let grid = match self.grid_row(&r.grid)? {
                    GridRow::Country(c) => {
                        let mut g = Self::country_intensity(c);
                        g.name = format!("{} grid", g.name);
                        g
                    }
                    GridRow::Sub(s) => {
                        let mut g = self.subnational_intensity(s);
                        g.name = format!("grid of {} {} ({})", s.kind, s.code, s.name);
                        g
                    }
                };
                let provider = r.provider_g_per_kwh.map_or(String::new(), |p| {
                    format!(
                        "; the provider publishes {} g/kWh for this region (not used)",
                        p.get()
                    )
                });
                Some(GridIntensity {
                    code: r.id.clone(),
                    name: format!("{place} on the {}", grid.name),
                    g_per_kwh: grid.g_per_kwh,
                    year: grid.year,
                    scope: grid.scope,
                    source: format!("{}; region: {}{provider}", grid.source, r.source),
                })
            }
        }
    }

    /// Every entry resolved: the world row, countries by name, sub-national grids (by country,
    /// in file order), then cloud regions by id.
    pub fn all(&self) -> Vec<GridIntensity> {
        let mut out: Vec<GridIntensity> = self
            .world()
            .map(Self::country_intensity)
            .into_iter()
            .collect();
        let mut countries: Vec<&Country> = self
            .countries
            .iter()
            .filter(|c| c.alpha3 != "WLD")
            .collect();
        countries.sort_by(|a, b| a.name.cmp(&b.name));
        out.extend(countries.into_iter().map(Self::country_intensity));
        let mut subs: Vec<&Subnational> = self.subnational.iter().collect();
        subs.sort_by(|a, b| a.country.cmp(&b.country));
        out.extend(subs.into_iter().map(|s| self.subnational_intensity(s)));
        out.extend(self.regions.iter().filter_map(|r| self.region_intensity(r)));
        out
    }

    /// Resolve a code: ISO alpha-2 (`FR`), alpha-3 (`FRA`), a country name (`France`), a sub-national
    /// grid (eGRID subregion `SRVC`, ISO 3166-2 `CA-QC`, `AU-NSW`, or its name), a cloud region
    /// (`aws:eu-west-3`, or `eu-west-3` when only one provider has it) or `world`. Case-insensitive.
    pub fn lookup(&self, code: &str) -> Result<GridIntensity, CatalogError> {
        let q = code.trim();
        let lower = q.to_ascii_lowercase();
        let found = if matches!(lower.as_str(), "world" | "wld" | "global") {
            self.world().map(Self::country_intensity)
        } else if lower.contains(':') {
            self.regions
                .iter()
                .find(|r| r.id == lower)
                .and_then(|r| self.region_intensity(r))
        } else {
            let key = normalise(q);
            self.countries
                .iter()
                .find(|c| {
                    c.alpha2.eq_ignore_ascii_case(q)
                        || c.alpha3.eq_ignore_ascii_case(q)
                        || normalise(&c.name) == key
                })
                .map(Self::country_intensity)
                .or_else(|| {
                    self.subnational
                        .iter()
                        .find(|s| s.code.eq_ignore_ascii_case(q) || normalise(&s.name) == key)
                        .map(|s| self.subnational_intensity(s))
                })
                .or_else(|| {
                    let mut bare = self
                        .regions
                        .iter()
                        .filter(|r| r.id.split_once(':').map(|(_, b)| b) == Some(lower.as_str()));
                    match (bare.next(), bare.next()) {
                        (Some(r), None) => self.region_intensity(r),
                        _ => None,
                    }
                })
        };
        found.ok_or_else(|| CatalogError::Unknown {
            kind: "grid region",
            name: code.into(),
            suggestions: suggest::nearest(
                q,
                self.countries
                    .iter()
                    .flat_map(|c| [c.alpha2.as_str(), c.alpha3.as_str(), c.name.as_str()])
                    .chain(
                        self.subnational
                            .iter()
                            .flat_map(|s| [s.code.as_str(), s.name.as_str()]),
                    )
                    .chain(self.regions.iter().map(|r| r.id.as_str()))
                    .chain(std::iter::once("world"))
                    .filter(|s| !s.is_empty()),
            ),
        })
    }
}

/// The embedded grid catalog, parsed on first use.
pub fn embedded() -> Result<&'static Grid, CatalogError> {
    static CELL: OnceLock<Result<Grid, CatalogError>> = OnceLock::new();
    CELL.get_or_init(|| {
        let grid = Grid {
            countries: Grid::parse_countries(COUNTRIES_TEXT, COUNTRIES_FILE)?,
            subnational: Grid::parse_subnational(SUBNATIONAL_TEXT, SUBNATIONAL_FILE)?,
            regions: Grid::parse_regions(REGIONS_TEXT, REGIONS_FILE)?,
        };
        grid.validate(REGIONS_FILE)?;
        Ok(grid)
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Resolve a code in the embedded catalog (see [`Grid::lookup`]).
pub fn lookup(code: &str) -> Result<GridIntensity, CatalogError> {
    embedded()?.lookup(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_names_the_country_and_the_cloud_region() {
        let g = embedded().unwrap();
        let fr = g.location("FR").unwrap();
        assert_eq!(
            (fr.country_name.as_str(), fr.country_iso_code.as_str()),
            ("France", "FRA")
        );
        assert_eq!(fr.cloud_provider, None);
        let aws = g.location("aws:eu-west-3").unwrap();
        assert_eq!(aws.country_iso_code, "FRA");
        assert_eq!(aws.cloud_provider.as_deref(), Some("aws"));
        assert_eq!(aws.cloud_region.as_deref(), Some("eu-west-3"));
        assert!(g.location("world").is_none() && g.location("custom").is_none());
    }

    /// Regression: the world default was a direct-emissions figure (IEA 475) while every
    /// country row is life-cycle; it is now Ember's life-cycle world average for 2022 (436 g/kWh,
    /// Global Electricity Review 2023), the same data set and year as the country rows.
    #[test]
    fn world_default_is_lifecycle_like_the_country_rows() {
        let w = lookup(crate::carbon::defaults::GRID_REGION).unwrap();
        assert_eq!(w.g_per_kwh, GramsPerKwh(436.0));
        assert_eq!(w.year, Some(2022));
        assert_eq!(w.scope, GridScope::Lifecycle);
        let g = embedded().unwrap();
        assert!(g
            .countries()
            .iter()
            .all(|c| c.scope == GridScope::Lifecycle));
    }

    #[test]
    fn country_by_alpha2_alpha3_name() {
        // OWID/Ember 2023 value for France as shipped in codecarbon 3.3.2: 56.039 g/kWh.
        let a = lookup("FR").unwrap();
        assert_eq!(a.g_per_kwh, GramsPerKwh(56.0));
        assert_eq!(a.scope, GridScope::Lifecycle);
        assert_eq!(lookup("fra").unwrap(), a);
        assert_eq!(lookup("France").unwrap(), a);
    }

    #[test]
    fn cloud_regions() {
        let aws = lookup("aws:eu-west-3").unwrap();
        assert_eq!(aws.g_per_kwh, lookup("FR").unwrap().g_per_kwh);
        assert!(aws.name.contains("France"), "{}", aws.name);
        // Google publishes europe-west1 (St. Ghislain) at 122 g/kWh (via codecarbon's impact.csv).
        let gcp = lookup("gcp:europe-west1").unwrap();
        assert_eq!(gcp.g_per_kwh, GramsPerKwh(122.0));
        assert_eq!(
            lookup("azure:francecentral").unwrap().g_per_kwh,
            aws.g_per_kwh
        );
        assert_eq!(lookup("francecentral").unwrap().code, "azure:francecentral");
    }

    #[test]
    fn unknown_code_suggests_nearest() {
        let e = lookup("Frnace").unwrap_err().to_string();
        assert!(e.contains("France"), "{e}");
        let e = lookup("aws:eu-west-9").unwrap_err().to_string();
        assert!(
            e.contains("aws:eu-west-3") || e.contains("aws:eu-west-1"),
            "{e}"
        );
    }

    #[test]
    fn every_country_resolves_by_each_of_its_codes() {
        let g = embedded().unwrap();
        for c in g.countries().iter().filter(|c| c.alpha3 != "WLD") {
            let by3 = g.lookup(&c.alpha3).unwrap();
            assert_eq!(by3.g_per_kwh, c.g_per_kwh, "{}", c.alpha3);
            assert_eq!(g.lookup(&c.alpha2).unwrap(), by3, "{}", c.alpha2);
            assert_eq!(g.lookup(&c.name.to_uppercase()).unwrap(), by3, "{}", c.name);
        }
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    /// Regression: AWS us-east-1 (Northern Virginia) draws from EPA eGRID subregion SRVC
    /// (eGRID2022: 622.987 lb CO2/MWh = 282.6 g/kWh), not from a US average.
    #[test]
    fn aws_us_east_1_is_the_srvc_subregion_not_the_us_mean() {
        let r = lookup("aws:us-east-1").unwrap();
        assert!(
            close(r.g_per_kwh.get(), 622.987 * 0.453_592_37, 0.05),
            "{r:?}"
        );
        assert_eq!((r.year, r.scope), (Some(2022), GridScope::Direct));
        assert!(
            r.name.contains("SRVC") && r.name.contains("SERC Virginia/Carolina"),
            "{}",
            r.name
        );
        assert!(
            r.source.contains("eGRID2022") && r.source.contains("AWS Regions"),
            "{}",
            r.source
        );
        // Against the US total of the same source and scope (823.149 lb/MWh = 373.4 g/kWh),
        // Northern Virginia is 24 % lower.
        let us = lookup("US-EGRID").unwrap();
        assert!(close(us.g_per_kwh.get(), 373.4, 0.05), "{us:?}");
        assert_eq!(us.scope, GridScope::Direct);
        let below = 1.0 - r.g_per_kwh.get() / us.g_per_kwh.get();
        assert!(close(below, 0.243, 0.002), "{below}");
        // The country row (OWID/Ember, life-cycle) is a different figure on a different basis.
        let country = lookup("US").unwrap();
        assert_eq!(country.scope, GridScope::Lifecycle);
        assert!((country.g_per_kwh.get() - r.g_per_kwh.get()).abs() > 50.0);
        // Azure's and Google's Virginia regions resolve to the same grid.
        for id in ["azure:eastus", "azure:eastus2", "gcp:us-east4", "us-east4"] {
            assert_eq!(lookup(id).unwrap().g_per_kwh, r.g_per_kwh, "{id}");
        }
    }

    #[test]
    fn subnational_grids_by_code_and_name() {
        let srvc = lookup("SRVC").unwrap();
        assert_eq!(srvc.code, "SRVC");
        assert_eq!(lookup("srvc").unwrap(), srvc);
        assert_eq!(lookup("SERC Virginia/Carolina").unwrap(), srvc);
        // NIR 2021 edition, 2019 data: Quebec 1.5, Ontario 30, Alberta 670 g CO2 eq/kWh.
        let qc = lookup("CA-QC").unwrap();
        assert_eq!((qc.g_per_kwh, qc.year), (GramsPerKwh(1.5), Some(2019)));
        assert_eq!(lookup("ca-on").unwrap().g_per_kwh, GramsPerKwh(30.0));
        assert_eq!(lookup("Alberta").unwrap().g_per_kwh, GramsPerKwh(670.0));
        // Electricity Maps 2024, life-cycle: New South Wales 541, Tasmania 133.
        let nsw = lookup("New South Wales").unwrap();
        assert_eq!(
            (nsw.code.as_str(), nsw.g_per_kwh),
            ("AU-NSW", GramsPerKwh(541.0))
        );
        assert_eq!(nsw.scope, GridScope::Lifecycle);
        assert_eq!(lookup("AU-TAS").unwrap().g_per_kwh, GramsPerKwh(133.0));
    }

    #[test]
    fn cloud_regions_on_subnational_grids() {
        let cases = [
            ("gcp:us-central1", "MROW"),
            ("azure:centralus", "MROW"),
            ("gcp:us-west1", "NWPP"),
            ("aws:us-west-2", "NWPP"),
            ("azure:westus2", "NWPP"),
            ("aws:us-east-2", "RFCW"),
            ("gcp:us-east5", "RFCW"),
            ("aws:ca-central-1", "CA-QC"),
            ("gcp:northamerica-northeast1", "CA-QC"),
            ("gcp:northamerica-northeast2", "CA-ON"),
            ("azure:canadacentral", "CA-ON"),
            ("aws:ap-southeast-2", "AU-NSW"),
            ("gcp:australia-southeast1", "AU-NSW"),
            ("azure:australiaeast", "AU-NSW"),
            ("gcp:australia-southeast2", "AU-VIC"),
        ];
        for (id, grid) in cases {
            let r = lookup(id).unwrap();
            let g = lookup(grid).unwrap();
            assert_eq!(
                (r.g_per_kwh, r.scope, r.year),
                (g.g_per_kwh, g.scope, g.year),
                "{id}"
            );
            assert!(r.name.contains(grid), "{id}: {}", r.name);
        }
        // The grid's figure is the default; Google's own (430 g/kWh for us-central1, 2023) is
        // named in the source but not used.
        let c1 = lookup("gcp:us-central1").unwrap();
        assert!(
            close(c1.g_per_kwh.get(), 936.485 * 0.453_592_37, 0.05),
            "{c1:?}"
        );
        assert!(
            c1.source
                .contains("publishes 430 g/kWh for this region (not used)"),
            "{}",
            c1.source
        );
        // A GCP region without a sub-national grid keeps Google's figure (europe-west1: 122).
        assert_eq!(
            lookup("gcp:europe-west1").unwrap().g_per_kwh,
            GramsPerKwh(122.0)
        );
    }

    #[test]
    fn unknown_subnational_code_suggests_nearest() {
        let e = lookup("SRVX").unwrap_err().to_string();
        assert!(e.contains("SRVC"), "{e}");
        let e = lookup("Quebc").unwrap_err().to_string();
        assert!(e.contains("Quebec"), "{e}");
        // US states are not rows (eGRID subregions are): the nearest codes are offered.
        let e = lookup("US-EGRD").unwrap_err().to_string();
        assert!(e.contains("US-EGRID"), "{e}");
    }

    #[test]
    fn location_of_a_subnational_grid_is_its_country() {
        let g = embedded().unwrap();
        for code in ["SRVC", "aws:us-east-1"] {
            assert_eq!(g.location(code).unwrap().country_iso_code, "USA", "{code}");
        }
        assert_eq!(
            g.location("gcp:northamerica-northeast1")
                .unwrap()
                .country_iso_code,
            "CAN"
        );
        assert_eq!(g.location("AU-NSW").unwrap().country_iso_code, "AUS");
    }

    /// Every sub-national row has a source and a year; its g/kWh is the published figure
    /// converted (lb/MWh × 0.45359237, rounded to 0.1); every country with sub-national rows has
    /// a national row of the same source, scope and year to compare them with.
    #[test]
    fn every_subnational_row_is_sourced_and_converted() {
        let g = embedded().unwrap();
        assert!(g.subnational().len() >= 45, "{}", g.subnational().len());
        for s in g.subnational() {
            assert!(!s.source.is_empty() && !s.licence.is_empty(), "{}", s.code);
            assert!((2019..=2024).contains(&s.year), "{}", s.code);
            let published = s.published_g_per_kwh().unwrap();
            assert!(
                close(s.g_per_kwh.get(), published, 0.05 + 1e-9),
                "{}: {published}",
                s.code
            );
            let national = g
                .subnational()
                .iter()
                .find(|n| n.country == s.country && n.kind.ends_with("national total"))
                .unwrap_or_else(|| panic!("no same-source national row for {}", s.code));
            assert_eq!(
                (national.scope, national.year, &national.source),
                (s.scope, s.year, &s.source),
                "{}",
                s.code
            );
        }
        // eGRID rows are direct (CO2 from combustion only), as EPA computes output rates.
        assert!(g
            .subnational()
            .iter()
            .filter(|s| s.country == "US")
            .all(|s| s.scope == GridScope::Direct && s.published_unit == "lb/MWh"));
    }

    #[test]
    fn subnational_file_errors_name_the_column() {
        let head = "code,country,name,kind,g_per_kwh,published,published_unit,year,scope,source\n";
        let bad_unit = format!("{head}X1,US,x,egrid subregion,1,1,lb/kWh,2022,direct,s\n");
        let e = Grid::parse_subnational(&bad_unit, "f.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("published_unit"), "{e}");
        let no_scope = format!("{head}X1,US,x,egrid subregion,1,1,g/kWh,2022,,s\n");
        let e = Grid::parse_subnational(&no_scope, "f.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("scope"), "{e}");
        // 622.987 lb/MWh stored as if it were g/kWh: refused, the conversion named.
        let raw = format!("{head}X1,US,x,eGRID subregion,622.987,622.987,lb/MWh,2022,direct,s\n");
        let e = Grid::parse_subnational(&raw, "f.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("g_per_kwh") && e.contains("282.6 g/kWh"), "{e}");
    }

    #[test]
    fn custom_intensity_range() {
        assert!(GridIntensity::custom(300.0, GridScope::Lifecycle, Some(2024)).is_ok());
        assert!(GridIntensity::custom(-1.0, GridScope::Lifecycle, Some(2024)).is_err());
        assert!(GridIntensity::custom(2500.0, GridScope::Lifecycle, Some(2024)).is_err());
    }

    #[test]
    fn every_embedded_value_in_range_with_source() {
        let g = embedded().unwrap();
        for c in g.countries() {
            assert!(
                (0.0..=MAX_G_PER_KWH).contains(&c.g_per_kwh.get()),
                "{}",
                c.name
            );
            assert!(!c.source.is_empty());
        }
        for r in g.regions() {
            assert!(g.lookup(&r.id).is_ok(), "{}", r.id);
        }
    }
}

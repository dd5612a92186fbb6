//! Grid carbon intensity per country (ISO 3166 alpha-2, alpha-3, name), per cloud region (mapped to a
//! country grid, or with the provider's own published value) and the world default.

use super::{normalise, suggest, table, CatalogError};
use crate::units::GramsPerKwh;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

const COUNTRIES_FILE: &str = "data/grid.csv";
const COUNTRIES_TEXT: &str = include_str!("../../../../data/grid.csv");
const REGIONS_FILE: &str = "data/regions.csv";
const REGIONS_TEXT: &str = include_str!("../../../../data/regions.csv");

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

/// A cloud region: where it is and, when the provider publishes one, its own intensity.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CloudRegion {
    /// `provider:region`, e.g. `aws:eu-west-3`.
    pub id: String,
    pub location: String,
    /// ISO alpha-2 of the country grid the region draws from.
    pub grid: String,
    /// The provider's published intensity; `None` means "use the country grid".
    pub g_per_kwh: Option<GramsPerKwh>,
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

/// Countries and cloud regions.
#[derive(Debug, Clone, Default)]
pub struct Grid {
    countries: Vec<Country>,
    regions: Vec<CloudRegion>,
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

    /// Every region without its own value must point at a known country grid; a world row must exist.
    pub fn validate(&self, file: &str) -> Result<(), CatalogError> {
        if self.world().is_none() {
            return Err(CatalogError::File {
                file: file.into(),
                message: "no world row (alpha3 WLD) in the grid catalog".into(),
            });
        }
        for r in &self.regions {
            if r.g_per_kwh.is_none() && self.country_by_alpha2(&r.grid).is_none() {
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

    fn world(&self) -> Option<&Country> {
        self.countries.iter().find(|c| c.alpha3 == "WLD")
    }

    fn country_by_alpha2(&self, a2: &str) -> Option<&Country> {
        self.countries
            .iter()
            .find(|c| !c.alpha2.is_empty() && c.alpha2.eq_ignore_ascii_case(a2))
    }

    /// The country (and cloud provider and region) of a resolved grid code, as CodeCarbon 3.x
    /// fills its CSV: `FR` → France, FRA; `aws:eu-west-3` → the country of the region's grid,
    /// plus provider `aws` and region `eu-west-3`. None for `world` and custom intensities.
    pub fn location(&self, code: &str) -> Option<Location> {
        let (cloud, alpha2) = match code.split_once(':') {
            Some((provider, region)) => {
                let r = self.regions.iter().find(|r| r.id == code)?;
                (
                    Some((provider.to_string(), region.to_string())),
                    r.grid.as_str(),
                )
            }
            None => (None, code),
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
                let c = self.country_by_alpha2(&r.grid)?;
                Some(GridIntensity {
                    code: r.id.clone(),
                    name: format!("{place} on the {} grid", c.name),
                    g_per_kwh: c.g_per_kwh,
                    year: Some(c.year),
                    scope: c.scope,
                    source: format!("{}; region: {}", c.source, r.source),
                })
            }
        }
    }

    /// Every entry resolved: the world row, countries by name, then cloud regions by id.
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
        out.extend(self.regions.iter().filter_map(|r| self.region_intensity(r)));
        out
    }

    /// Resolve a code: ISO alpha-2 (`FR`), alpha-3 (`FRA`), a country name (`France`), a cloud region
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

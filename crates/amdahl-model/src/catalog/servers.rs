//! Servers (data/servers.csv): the machine around the GPUs, for the server (wall) scope of
//! energy figures.

use super::{normalise, suggest, table, CatalogError};
use serde::Serialize;
use std::sync::OnceLock;

const FILE: &str = "data/servers.csv";
const TEXT: &str = include_str!("../../../../data/servers.csv");

/// One server model.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Server {
    pub name: String,
    pub aliases: Vec<String>,
    /// The catalog name of its GPU (`amdahl catalog devices`).
    pub gpu: String,
    pub gpus: u32,
    /// The data sheet's maximum system power (AC input), W.
    pub max_power_w: f64,
    /// Of its power supplies, at the load amdahl models.
    pub psu_efficiency: f64,
    pub cpus: String,
    pub source: String,
    pub year: u16,
}

/// The server catalog.
#[derive(Debug, Clone, Default)]
pub struct Servers {
    items: Vec<Server>,
}

impl Servers {
    /// Parse a server CSV (the format of `data/servers.csv`).
    pub fn parse(text: &str, file: &str) -> Result<Self, CatalogError> {
        let columns = [
            "name",
            "aliases",
            "gpu",
            "gpus",
            "max_power_w",
            "psu_efficiency",
            "cpus",
            "source",
            "year",
        ];
        let items = table::parse(text, file, &columns, |r| {
            let psu_efficiency = r.positive("psu_efficiency")?;
            if psu_efficiency > 1.0 {
                return Err(r.err("psu_efficiency", "an efficiency is at most 1"));
            }
            let gpus = r.positive("gpus")?;
            if gpus.fract() != 0.0 {
                return Err(r.err("gpus", "a count of GPUs is a whole number"));
            }
            Ok(Server {
                name: r.text("name")?,
                aliases: r
                    .cell("aliases")
                    .split(';')
                    .map(|a| a.trim().to_string())
                    .filter(|a| !a.is_empty())
                    .collect(),
                gpu: r.text("gpu")?,
                gpus: gpus as u32,
                max_power_w: r.positive("max_power_w")?,
                psu_efficiency,
                cpus: r.text("cpus")?,
                source: r.text("source")?,
                year: r.year("year")?,
            })
        })?;
        Ok(Self { items })
    }

    /// The server called `name` or one of its aliases, or an error naming the nearest.
    pub fn lookup(&self, name: &str) -> Result<&Server, CatalogError> {
        let key = normalise(name);
        self.items
            .iter()
            .find(|s| normalise(&s.name) == key || s.aliases.iter().any(|a| normalise(a) == key))
            .ok_or_else(|| CatalogError::Unknown {
                kind: "server",
                name: name.into(),
                suggestions: suggest::nearest(
                    name,
                    self.items.iter().flat_map(|s| {
                        std::iter::once(s.name.as_str()).chain(s.aliases.iter().map(String::as_str))
                    }),
                ),
            })
    }

    /// The first server built around the device called `gpu` (its catalog name).
    pub fn for_gpu(&self, gpu: &str) -> Option<&Server> {
        let key = normalise(gpu);
        self.items.iter().find(|s| normalise(&s.gpu) == key)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Server> {
        self.items.iter()
    }
}

/// The embedded servers, parsed on first use.
pub fn embedded() -> Result<&'static Servers, CatalogError> {
    static CELL: OnceLock<Result<Servers, CatalogError>> = OnceLock::new();
    CELL.get_or_init(|| Servers::parse(TEXT, FILE))
        .as_ref()
        .map_err(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_and_their_gpus() {
        let s = embedded().unwrap();
        let dgx = s.lookup("hgx-h100").unwrap();
        assert_eq!(
            (dgx.name.as_str(), dgx.gpus, dgx.max_power_w),
            ("DGX H100", 8, 10200.0)
        );
        // Every server's GPU is in the device catalog.
        for server in s.iter() {
            crate::catalog::devices::lookup(&server.gpu).unwrap();
        }
        assert_eq!(s.for_gpu("B200 SXM 180GB").unwrap().name, "DGX B200");
        assert!(s.for_gpu("MI300X").is_none());
        let e = s.lookup("dgx-h10").unwrap_err().to_string();
        assert!(e.contains("dgx-h100"), "{e}");
    }

    #[test]
    fn an_efficiency_above_one_is_refused() {
        let text = "name,aliases,gpu,gpus,max_power_w,psu_efficiency,cpus,source,year\n\
                    x,,H100 SXM5 80GB,8,10000,1.2,c,s,2024\n";
        let e = Servers::parse(text, "s.csv").unwrap_err().to_string();
        assert!(
            e.starts_with("s.csv: line 2, column `psu_efficiency`"),
            "{e}"
        );
    }
}

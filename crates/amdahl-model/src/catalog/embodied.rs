//! Embodied-carbon factors (LLMCarbon, Faiz et al. ICLR 2024, after ACT, Gupta et al. ISCA 2022):
//! kgCO2e per cm² of logic die at a process node, and per GB of memory.

use super::{table, CatalogError};
use serde::Serialize;
use std::sync::OnceLock;

const FILE: &str = "data/embodied.csv";
const TEXT: &str = include_str!("../../../../data/embodied.csv");

/// One factor row.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Factor {
    /// `logic` (per cm² at `node_nm`) or `dram` (per GB).
    pub component: String,
    pub node_nm: Option<f64>,
    pub kg_co2e: f64,
    pub year: u16,
    pub source: String,
}

/// The factor table.
#[derive(Debug, Clone, Default)]
pub struct Factors {
    items: Vec<Factor>,
}

impl Factors {
    pub fn parse(text: &str, file: &str) -> Result<Self, CatalogError> {
        let items = table::parse(
            text,
            file,
            &["component", "kg_co2e", "year", "source"],
            |r| {
                let component = r.text("component")?.to_ascii_lowercase();
                let node_nm = r.opt_positive("node_nm")?;
                match component.as_str() {
                    "logic" if node_nm.is_none() => {
                        return Err(r.err("node_nm", "a logic factor needs its process node"))
                    }
                    "logic" | "dram" => {}
                    other => {
                        return Err(r.err("component", format!("`{other}` is not logic or dram")))
                    }
                }
                Ok(Factor {
                    component,
                    node_nm,
                    kg_co2e: r.positive("kg_co2e")?,
                    year: r.year("year")?,
                    source: r.text("source")?,
                })
            },
        )?;
        Ok(Self { items })
    }

    /// kgCO2e per cm² for a die made at `node_nm`: the catalogued node nearest in log scale
    /// (node names shrink geometrically; 5 nm takes the 4 nm factor, 10 nm the 12 nm one).
    pub fn logic_per_cm2(&self, node_nm: f64) -> Option<&Factor> {
        self.items
            .iter()
            .filter(|f| f.component == "logic")
            .filter_map(|f| f.node_nm.map(|n| ((n.ln() - node_nm.ln()).abs(), f)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, f)| f)
    }

    /// kgCO2e per GB of DRAM/HBM.
    pub fn dram_per_gb(&self) -> Option<&Factor> {
        self.items.iter().find(|f| f.component == "dram")
    }
}

/// The embedded factors, parsed on first use.
pub fn embedded() -> Result<&'static Factors, CatalogError> {
    static CELL: OnceLock<Result<Factors, CatalogError>> = OnceLock::new();
    CELL.get_or_init(|| Factors::parse(TEXT, FILE))
        .as_ref()
        .map_err(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llmcarbon_factors() {
        let f = embedded().unwrap();
        assert_eq!(f.logic_per_cm2(12.0).unwrap().kg_co2e, 1.2);
        assert_eq!(f.logic_per_cm2(5.0).unwrap().kg_co2e, 1.8);
        assert_eq!(f.logic_per_cm2(7.0).unwrap().kg_co2e, 1.6);
        assert_eq!(f.dram_per_gb().unwrap().kg_co2e, 0.4);
    }
}

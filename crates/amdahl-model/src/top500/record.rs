//! Typed TOP500 records, one per system and list.

use crate::units::{FlopsPerSecond, Watts};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A TOP500 edition, published each June and November since 1993-06.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub struct ListId {
    pub year: u16,
    pub month: u8,
}

impl ListId {
    /// The n-th edition (1 = 1993-06): TOP500 names its sheets by this number ("52" = 2018-11).
    pub fn from_edition(edition: u32) -> Option<Self> {
        if !(1..=400).contains(&edition) {
            return None;
        }
        let year = 1993 + (edition - 1) / 2;
        let month = if edition % 2 == 1 { 6 } else { 11 };
        Some(Self {
            year: year as u16,
            month,
        })
    }

    /// Parse "2018-11", "201811" or "2018/11".
    pub fn parse(s: &str) -> Option<Self> {
        let digits: String = s.chars().filter(char::is_ascii_digit).collect();
        if digits.len() != 6 || s.trim().len() > 8 {
            return None;
        }
        let year: u16 = digits.get(..4)?.parse().ok()?;
        let month: u8 = digits.get(4..)?.parse().ok()?;
        ((1993..=2200).contains(&year) && (1..=12).contains(&month)).then_some(Self { year, month })
    }

    /// Find `TOP500_YYYYMM` in a file name (the name top500.org gives its downloads).
    pub fn from_file_name(name: &str) -> Option<Self> {
        let upper = name.to_ascii_uppercase();
        let at = upper.rfind("TOP500_")?;
        let rest = upper.get(at + 7..)?;
        ListId::parse(rest.get(..6)?)
    }
}

impl fmt::Display for ListId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}", self.year, self.month)
    }
}

/// One system on one list, in SI units whatever unit the spreadsheet used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct System {
    pub list: Option<ListId>,
    pub rank: u32,
    /// "Name" column; the "Computer" description when a list gives no name.
    pub name: String,
    /// "Computer" (or "System") column: model, processor, interconnect, accelerator.
    pub computer: String,
    pub site: String,
    pub country: String,
    /// "Total Cores": CPU cores plus accelerator cores (GPU streaming multiprocessors for NVIDIA).
    pub total_cores: u64,
    /// "Accelerator/Co-Processor Cores"; `None` when empty or 0.
    pub accelerator_cores: Option<u64>,
    /// "Accelerator/Co-Processor"; `None` when empty or "None".
    pub accelerator: Option<String>,
    /// "Nodes" where the list (or the built-in history) gives it.
    pub nodes: Option<u64>,
    pub rmax: FlopsPerSecond,
    pub rpeak: FlopsPerSecond,
    pub hpcg: Option<FlopsPerSecond>,
    pub power: Option<Watts>,
    /// Energy efficiency as the list states it, converted to GFlop/s per W.
    pub listed_gflops_per_watt: Option<f64>,
    /// Where the row came from: file, sheet and row, or the citation of the built-in history.
    pub source: String,
}

/// What one file (or one sheet of it) held.
#[derive(Debug, Clone, PartialEq)]
pub struct ListFile {
    pub file: String,
    pub sheet: String,
    /// True when fields are rows and systems are columns.
    pub transposed: bool,
    pub systems: Vec<System>,
    /// How the reader interpreted the file (units assumed, sheets skipped): shown as warnings.
    pub notes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editions_map_to_dates() {
        // TOP500 sheet names in the shared lists: 41 = 2013-06, 52 = 2018-11, 62 = 2023-11.
        assert_eq!(
            ListId::from_edition(41).map(|l| l.to_string()).as_deref(),
            Some("2013-06")
        );
        assert_eq!(
            ListId::from_edition(52).map(|l| l.to_string()).as_deref(),
            Some("2018-11")
        );
        assert_eq!(
            ListId::from_edition(62).map(|l| l.to_string()).as_deref(),
            Some("2023-11")
        );
        assert_eq!(ListId::from_edition(0), None);
    }

    #[test]
    fn list_ids_parse_from_names() {
        let l = ListId::from_file_name("data/TOP500_201811.xls");
        assert_eq!(
            l,
            Some(ListId {
                year: 2018,
                month: 11
            })
        );
        assert_eq!(
            ListId::parse("2013-06"),
            Some(ListId {
                year: 2013,
                month: 6
            })
        );
        assert_eq!(ListId::parse("2013-13"), None);
        assert_eq!(ListId::from_file_name("list.xls"), None);
    }
}

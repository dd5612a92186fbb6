//! CPU package TDP by model name, for the CPU energy estimate when no RAPL counter is readable:
//! CodeCarbon's CPU power table (`data/cpu_power.csv`, ~4,900 Intel and AMD models; source and
//! licence in `data/README.md`), and the matching of `/proc/cpuinfo` model names against it.
//!
//! Matching is by name tokens, not by fuzzy score: both sides are normalised (lower case; `(R)`,
//! `(TM)`, vendor words, "CPU", "Processor", "NN-Core", "with Radeon Graphics", the clock after `@`
//! and "12th Gen" dropped), then a row matches when its tokens equal the reported tokens, or
//! appear in them as a contiguous run that contains a model number. The longest such row wins;
//! two rows of equal length with different TDPs match nothing. A generic name such as GCP's
//! "Intel(R) Xeon(R) CPU @ 2.20GHz" has no model number and matches nothing, by design.

use super::{table, CatalogError};
use crate::units::Watts;
use serde::Serialize;
use std::sync::OnceLock;

const FILE: &str = "data/cpu_power.csv";
const TEXT: &str = include_str!("../../../../data/cpu_power.csv");

/// One row: a CPU model and its package TDP.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CpuPower {
    /// The model as the table names it ("Intel Xeon Platinum 8380").
    pub name: String,
    /// Thermal design power of one package, W.
    pub tdp_w: Watts,
}

/// The CPU power table, each row with its normalised name tokens.
#[derive(Debug, Clone, Default)]
pub struct CpuPowerTable {
    rows: Vec<(Vec<String>, CpuPower)>,
}

impl CpuPowerTable {
    /// Parse a table in the format of `data/cpu_power.csv` (`name,tdp_w`).
    pub fn parse(text: &str, file: &str) -> Result<Self, CatalogError> {
        let rows = table::parse(text, file, &["name", "tdp_w"], |r| {
            let row = CpuPower {
                name: r.text("name")?,
                tdp_w: Watts(r.positive("tdp_w")?),
            };
            Ok((tokens(&row.name), row))
        })?;
        Ok(Self { rows })
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The row for a CPU model name as the system reports it (`/proc/cpuinfo` "model name"),
    /// or `None` when no row matches unambiguously (see the module documentation).
    pub fn identify(&self, reported: &str) -> Option<&CpuPower> {
        let text = tokens(reported);
        if text.is_empty() {
            return None;
        }
        if let Some((_, row)) = self.rows.iter().find(|(t, _)| *t == text) {
            return Some(row);
        }
        let mut best: Vec<&(Vec<String>, CpuPower)> = Vec::new();
        let size = |t: &[String]| (t.len(), t.iter().map(String::len).sum::<usize>());
        for row in &self.rows {
            let t = &row.0;
            let has_number = t.iter().any(|w| w.chars().any(|c| c.is_ascii_digit()));
            if !has_number || !text.windows(t.len()).any(|w| w == t.as_slice()) {
                continue;
            }
            match best.first().map(|b| size(&b.0).cmp(&size(t))) {
                Some(std::cmp::Ordering::Greater) => {}
                Some(std::cmp::Ordering::Equal) => best.push(row),
                _ => best = vec![row],
            }
        }
        let first = &best.first()?.1;
        best.iter()
            .all(|(_, r)| r.tdp_w == first.tdp_w)
            .then_some(first)
    }
}

/// Normalised name tokens: what two spellings of one CPU model have in common.
pub fn tokens(name: &str) -> Vec<String> {
    let mut s = name.to_lowercase();
    for mark in ["(r)", "(tm)", "(c)", "®", "™"] {
        s = s.replace(mark, " ");
    }
    // The clock ("CPU @ 2.30GHz") and an integrated GPU ("with Radeon Graphics") name no model.
    for cut in ["@", " with "] {
        if let Some(i) = s.find(cut) {
            s.truncate(i);
        }
    }
    // Parenthesised remarks ("(9M Cache, up to 4.00 GHz)") are dropped.
    let mut plain = String::with_capacity(s.len());
    let mut depth = 0usize;
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => plain.push(if c == ',' { ' ' } else { c }),
            _ => {}
        }
    }
    let words: Vec<&str> = plain.split_whitespace().collect();
    let ordinal = |w: &str| {
        let digits = w.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        !digits.is_empty()
            && digits.chars().all(|c| c.is_ascii_digit())
            && ["st", "nd", "rd", "th"].contains(&&w[digits.len()..])
    };
    let mut out = Vec::with_capacity(words.len());
    for (i, w) in words.iter().enumerate() {
        let generation = ordinal(w) && words.get(i + 1) == Some(&"gen");
        let after_ordinal = *w == "gen" && i > 0 && words.get(i - 1).is_some_and(|p| ordinal(p));
        let core_count = w
            .strip_suffix("-core")
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        let filler = matches!(*w, "intel" | "amd" | "cpu" | "processor");
        if !(generation || after_ordinal || core_count || filler) {
            out.push((*w).to_string());
        }
    }
    out
}

/// Whether the catalog name `name` names the reported model: its tokens appear, contiguous, among
/// the reported tokens. "Xeon Platinum 8380" names "Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz"
/// but not "... Platinum 8380H ...", which a substring test would accept.
pub fn names(name: &str, reported: &str) -> bool {
    let (n, r) = (tokens(name), tokens(reported));
    !n.is_empty() && r.windows(n.len()).any(|w| w == n.as_slice())
}

/// Physical cores per package when the model name says so ("AMD EPYC 7763 64-Core Processor").
pub fn cores_in_name(reported: &str) -> Option<u32> {
    reported
        .to_lowercase()
        .split_whitespace()
        .find_map(|w| w.strip_suffix("-core")?.parse().ok())
        .filter(|&n| n > 0)
}

/// The embedded table, parsed on first use.
pub fn embedded() -> Result<&'static CpuPowerTable, CatalogError> {
    static CELL: OnceLock<Result<CpuPowerTable, CatalogError>> = OnceLock::new();
    CELL.get_or_init(|| CpuPowerTable::parse(TEXT, FILE))
        .as_ref()
        .map_err(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tdp(reported: &str) -> Option<(String, f64)> {
        let t = embedded().unwrap();
        t.identify(reported)
            .map(|r| (r.name.clone(), r.tdp_w.get()))
    }

    #[test]
    fn the_embedded_table_has_thousands_of_rows() {
        let t = embedded().unwrap();
        assert!(t.len() > 4_800, "{}", t.len());
    }

    /// Model names as /proc/cpuinfo prints them (kernel `model name`, from the CPUID brand
    /// string), against the rows of data/cpu_power.csv (CodeCarbon 3.3.2).
    #[test]
    fn real_cpuinfo_names_match_their_row() {
        for (reported, row, watts) in [
            (
                "Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz",
                "Intel Xeon Platinum 8380",
                270.0,
            ),
            (
                "Intel(R) Xeon(R) CPU E5-2690 v4 @ 2.60GHz",
                "Intel Xeon E5-2690 v4",
                135.0,
            ),
            (
                "Intel(R) Xeon(R) CPU E5-2690 0 @ 2.90GHz",
                "Intel Xeon E5-2690",
                135.0,
            ),
            (
                "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz",
                "Intel Xeon Gold 6338",
                205.0,
            ),
            (
                "Intel(R) Xeon(R) Platinum 8480+",
                "Intel Xeon Platinum 8480+",
                350.0,
            ),
            (
                "Intel(R) Core(TM) i7-8700K CPU @ 3.70GHz",
                "Intel Core i7-8700K",
                95.0,
            ),
            (
                "12th Gen Intel(R) Core(TM) i7-12700K",
                "Intel Core i7-12700K",
                190.0,
            ),
            (
                "13th Gen Intel(R) Core(TM) i9-13900K",
                "Intel Core i9-13900K",
                125.0,
            ),
            (
                "Intel(R) Core(TM) Ultra 7 155H",
                "Intel Core Ultra 7 155H",
                28.0,
            ),
            ("AMD EPYC 7763 64-Core Processor", "AMD EPYC 7763", 280.0),
            ("AMD EPYC 7742 64-Core Processor", "AMD EPYC 7742", 225.0),
            ("AMD EPYC 9654 96-Core Processor", "AMD EPYC 9654", 360.0),
            (
                "AMD Ryzen 9 7950X 16-Core Processor",
                "AMD Ryzen 9 7950X",
                170.0,
            ),
            (
                "AMD Ryzen 7 5800H with Radeon Graphics",
                "AMD Ryzen 7 5800H",
                45.0,
            ),
        ] {
            assert_eq!(tdp(reported), Some((row.to_string(), watts)), "{reported}");
        }
    }

    /// A suffix is part of the model: 8380 is not 8380H, 5800H is not 5800HS.
    #[test]
    fn suffixes_are_not_dropped() {
        assert_eq!(
            tdp("Intel(R) Xeon(R) Platinum 8380H CPU @ 2.90GHz").map(|r| r.1),
            Some(250.0)
        );
        assert_eq!(
            tdp("AMD Ryzen 7 5800HS with Radeon Graphics").map(|r| r.1),
            Some(35.0)
        );
    }

    /// Names that carry no model number, or a model the table lacks, match nothing: the
    /// caller then uses the per-core fallback instead of a guess.
    #[test]
    fn generic_and_unlisted_names_match_nothing() {
        for reported in [
            "Intel(R) Xeon(R) CPU @ 2.20GHz",
            "AMD EPYC 7B13",
            "AMD EPYC 9R14 96-Core Processor",
            "Common KVM processor",
            "QEMU Virtual CPU version 2.5+",
            "",
        ] {
            assert_eq!(tdp(reported), None, "{reported}");
        }
    }

    #[test]
    fn a_name_names_whole_tokens_only() {
        let r = "Intel(R) Xeon(R) Platinum 8380H CPU @ 2.90GHz";
        assert!(names("Xeon Platinum 8380H", r));
        assert!(!names("Xeon Platinum 8380", r));
        assert!(names("EPYC 7763", "AMD EPYC 7763 64-Core Processor"));
        assert!(!names("", r));
    }

    #[test]
    fn core_counts_in_amd_names() {
        assert_eq!(cores_in_name("AMD EPYC 7763 64-Core Processor"), Some(64));
        assert_eq!(cores_in_name("Intel(R) Xeon(R) Platinum 8380"), None);
    }

    #[test]
    fn equal_matches_with_different_tdps_are_ambiguous() {
        let t = CpuPowerTable::parse(
            "name,tdp_w\nFoo 100 A,50\nFoo 100 B,60\nBar 7,10\n",
            "t.csv",
        )
        .unwrap();
        assert_eq!(t.identify("Foo 100 A"), t.rows.first().map(|r| &r.1));
        assert_eq!(t.identify("x Bar 7 y").map(|r| r.tdp_w.get()), Some(10.0));
        let u = CpuPowerTable::parse("name,tdp_w\nX 1,5\nY 2,6\n", "u.csv").unwrap();
        assert_eq!(u.identify("X 1 Y 2"), None);
    }

    #[test]
    fn a_bad_row_names_file_line_and_column() {
        let e = CpuPowerTable::parse("name,tdp_w\nFoo,27.29.5\n", "c.csv").unwrap_err();
        let s = e.to_string();
        assert!(s.contains("c.csv") && s.contains("tdp_w"), "{s}");
    }
}

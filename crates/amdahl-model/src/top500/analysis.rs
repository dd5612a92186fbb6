//! Per-system scaling analysis of a TOP500 entry (Végh, arXiv:2005.00872, section on TOP500):
//!
//! - HPL efficiency E = Rmax / Rpeak;
//! - the non-parallel fraction 1−α_eff = (1−E) / (E·(N−1)) (`laws::serial_from_efficiency`),
//!   identical to the Karp–Flatt serial fraction, for an N the caller chooses — TOP500's
//!   "Total Cores" counts each GPU streaming multiprocessor as a core, so the same run gives
//!   1−α_eff differing by the SMs per GPU depending on what N counts;
//! - HPCG efficiency HPCG / Rpeak and its 1−α_eff with the same N;
//! - energy efficiency Rmax / Power in GFlop/s per W.

use super::devices::device_for;
use super::record::{ListFile, System};
use crate::scaling::laws::serial_from_efficiency;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The `schema` field of a `top500` result.
pub const SCHEMA: &str = "amdahl.top500/1";

/// What the processor count N counts.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum NCounts {
    /// TOP500 "Total Cores": CPU cores plus accelerator cores (SMs, CUs, Xe cores).
    #[default]
    Cores,
    /// Accelerator devices: "Accelerator/Co-Processor Cores" ÷ cores per device.
    Accelerators,
    /// Nodes, where the list gives them.
    Nodes,
}

impl NCounts {
    pub fn as_str(self) -> &'static str {
        match self {
            NCounts::Cores => "cores",
            NCounts::Accelerators => "accelerators",
            NCounts::Nodes => "nodes",
        }
    }
}

impl fmt::Display for NCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for NCounts {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cores" => Ok(NCounts::Cores),
            "accelerators" | "gpus" => Ok(NCounts::Accelerators),
            "nodes" => Ok(NCounts::Nodes),
            other => Err(format!(
                "unknown N \"{other}\"; use cores, accelerators or nodes"
            )),
        }
    }
}

/// N for one system and how it was obtained (printed next to every α_eff).
#[derive(Debug, Clone, PartialEq)]
pub struct NCount {
    pub n: Option<u64>,
    pub how: String,
}

/// Count N for `s`. Never invents a count: where the list does not allow one, `n` is `None` and
/// `how` says why.
pub fn count_n(s: &System, what: NCounts) -> NCount {
    match what {
        NCounts::Cores => NCount {
            n: Some(s.total_cores),
            how: match s.accelerator_cores {
                Some(a) => format!("Total Cores, of which {a} accelerator cores (SMs/CUs)"),
                None => "Total Cores".into(),
            },
        },
        NCounts::Accelerators => match (s.accelerator_cores, s.accelerator.as_deref()) {
            (Some(cores), Some(name)) => match device_for(name) {
                Some(d) => {
                    let per = u64::from(d.cores_per_device);
                    // Rounded in floating point: no overflow for absurd counts.
                    let n = (cores as f64 / per as f64).round() as u64;
                    let exact = if cores % per == 0 {
                        ""
                    } else {
                        " (not a whole number: rounded)"
                    };
                    NCount {
                        n: (n > 0).then_some(n),
                        how: format!(
                            "{cores} accelerator cores / {per} {} per {} = {n} devices{exact}",
                            plural(&d.unit, per),
                            d.device
                        ),
                    }
                }
                None => NCount {
                    n: None,
                    how: format!(
                        "unknown: no cores-per-device entry for \"{name}\" in data/top500/accelerators.csv"
                    ),
                },
            },
            (None, _) => NCount {
                n: None,
                how: "unknown: no accelerator cores listed (CPU-only system)".into(),
            },
            (Some(_), None) => NCount {
                n: None,
                how: "unknown: accelerator cores listed without the accelerator's name".into(),
            },
        },
        NCounts::Nodes => match s.nodes {
            Some(n) => NCount {
                n: Some(n),
                how: "Nodes".into(),
            },
            None => NCount {
                n: None,
                how: "unknown: the list gives no node count".into(),
            },
        },
    }
}

/// What the user asked for.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub n_counts: NCounts,
    /// Follow one machine across lists: systems with this name, ignoring case and punctuation;
    /// if none has exactly this name, those whose name or computer description contains it.
    pub system: Option<String>,
    /// Only ranks 1..=K of each list.
    pub top: Option<u32>,
}

/// One system's analysis: the `systems[]` element of `amdahl.top500/1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SystemAnalysis {
    /// "YYYY-MM", or "unknown" when neither the file name nor the sheet says.
    pub list: String,
    pub rank: u32,
    pub name: String,
    pub system: String,
    pub site: String,
    pub country: String,
    /// N as `n_counts` says; `null` when it cannot be derived (see `n_source`).
    pub n: Option<u64>,
    /// How N was obtained (or why it is unknown).
    pub n_source: String,
    pub rmax_tflops: f64,
    pub rpeak_tflops: f64,
    pub efficiency_hpl: f64,
    /// 1−α_eff of the HPL run for this N.
    pub serial_fraction_hpl: Option<f64>,
    pub efficiency_hpcg: Option<f64>,
    pub serial_fraction_hpcg: Option<f64>,
    pub gflops_per_watt: Option<f64>,
    pub total_cores: u64,
    pub accelerator: Option<String>,
    pub source: String,
}

/// The result of `amdahl top500`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Top500Result {
    pub schema: String,
    pub n_counts: NCounts,
    pub systems: Vec<SystemAnalysis>,
    /// How the inputs were interpreted (units assumed, sheets skipped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

fn key(s: &str) -> String {
    s.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// 1−α_eff for efficiency `e` at `n`; `None` where it is undefined (N < 2).
fn serial(n: Option<u64>, e: f64) -> Option<f64> {
    let n = n.filter(|&n| n >= 2)? as f64;
    let s = serial_from_efficiency(n, e);
    s.is_finite().then_some(s)
}

/// Analyse one system.
pub fn analyse_system(s: &System, what: NCounts) -> SystemAnalysis {
    let NCount { n, how } = count_n(s, what);
    let e_hpl = s.rmax / s.rpeak;
    let e_hpcg = s.hpcg.map(|h| h / s.rpeak);
    let gflops_per_watt = match s.power {
        Some(p) => Some(s.rmax.get() / 1e9 / p.get()),
        None => s.listed_gflops_per_watt,
    };
    SystemAnalysis {
        list: s.list.map_or_else(|| "unknown".into(), |l| l.to_string()),
        rank: s.rank,
        name: s.name.clone(),
        system: s.computer.clone(),
        site: s.site.clone(),
        country: s.country.clone(),
        n,
        n_source: how,
        rmax_tflops: s.rmax.tflops(),
        rpeak_tflops: s.rpeak.tflops(),
        efficiency_hpl: e_hpl,
        serial_fraction_hpl: serial(n, e_hpl),
        efficiency_hpcg: e_hpcg,
        serial_fraction_hpcg: e_hpcg.and_then(|e| serial(n, e)),
        gflops_per_watt,
        total_cores: s.total_cores,
        accelerator: s.accelerator.clone(),
        source: s.source.clone(),
    }
}

/// Analyse every system of `lists` that `q` selects, ordered by list then rank.
pub fn analyse(lists: &[ListFile], q: &Query) -> Top500Result {
    let wanted = q.system.as_deref().map(key);
    let all = || lists.iter().flat_map(|l| l.systems.iter());
    // An exact name match wins ("Piz Daint" is not "Piz Daint Multicore"); otherwise any name or
    // computer description containing the query.
    let exact = wanted
        .as_deref()
        .is_some_and(|w| all().any(|s| key(&s.name) == w));
    let selected = |s: &System| match wanted.as_deref() {
        None => true,
        Some(w) if exact => key(&s.name) == w,
        Some(w) => key(&s.name).contains(w) || key(&s.computer).contains(w),
    };
    let mut systems: Vec<(&System, SystemAnalysis)> = all()
        .filter(|s| q.top.is_none_or(|k| s.rank <= k))
        .filter(|s| selected(s))
        .map(|s| (s, analyse_system(s, q.n_counts)))
        .collect();
    systems.sort_by_key(|a| (a.0.list, a.0.rank));
    Top500Result {
        schema: SCHEMA.into(),
        n_counts: q.n_counts,
        systems: systems.into_iter().map(|(_, a)| a).collect(),
        notes: lists.iter().flat_map(|l| l.notes.iter().cloned()).collect(),
    }
}

/// "128 cores", "80 SMs", "1 core" (a regression: "128 core per" was printed).
fn plural(unit: &str, count: u64) -> String {
    if count == 1 {
        unit.to_string()
    } else {
        format!("{unit}s")
    }
}

#[cfg(test)]
mod plural_tests {
    #[test]
    fn cores_per_device_unit_was_singular() {
        assert_eq!(super::plural("core", 128), "cores");
        assert_eq!(super::plural("SM", 80), "SMs");
        assert_eq!(super::plural("core", 1), "core");
    }
}

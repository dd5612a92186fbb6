//! Attribution of the Karp–Flatt serial fraction 1−α_eff to measured phases.
//!
//! With the baseline run at N0 (total time T0, phase times T_k(N0)) and p = N/N0, Karp–Flatt
//! gives e = (T(N)/T0 − 1/p)/(1 − 1/p). Writing T(N) = Σ_k T_k(N) splits it exactly:
//!
//!   e_k = (T_k(N)/T0 − T_k(N0)/(p·T0)) / (1 − 1/p),   Σ_k e_k = e.
//!
//! Each phase is charged for the time it takes *beyond perfect scaling of its own baseline
//! time*: a constant serial phase contributes T_s/T0 at every N, a communication phase that was
//! absent at N0 contributes all of its time, a perfectly scaling compute phase contributes 0
//! (load imbalance shows up as a positive compute share). The dominant phase at N is the one with
//! the largest e_k.

use serde::{Deserialize, Serialize};

/// Per-N attribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DecompositionRow {
    pub n: f64,
    /// Karp–Flatt e at this N (= Σ contributions).
    pub karp_flatt: f64,
    /// e_k aligned with [`Decomposition::phases`].
    pub contributions: Vec<f64>,
    pub dominant: String,
}

/// Attribution of 1−α_eff for one series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Decomposition {
    pub phases: Vec<String>,
    pub baseline_n: f64,
    pub rows: Vec<DecompositionRow>,
}

/// `runs` are (N, phase times aligned with `phases`), including the baseline at `n0`. Runs at
/// p = 1 are skipped (e is undefined there). None when the baseline is absent or its total is 0.
pub fn decompose(phases: &[String], n0: f64, runs: &[(f64, Vec<f64>)]) -> Option<Decomposition> {
    let base = &runs.iter().find(|(n, _)| *n == n0)?.1;
    let t0: f64 = base.iter().sum();
    if t0.is_nan() || t0 <= 0.0 {
        return None;
    }
    let rows = runs
        .iter()
        .filter(|(n, _)| (n / n0 - 1.0).abs() > 1e-12)
        .map(|(n, times)| {
            let p = n / n0;
            let contributions: Vec<f64> = times
                .iter()
                .zip(base)
                .map(|(tk, bk)| (tk / t0 - bk / (p * t0)) / (1.0 - 1.0 / p))
                .collect();
            let dominant = contributions
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .and_then(|(i, _)| phases.get(i))
                .cloned()
                .unwrap_or_default();
            DecompositionRow {
                n: *n,
                karp_flatt: contributions.iter().sum(),
                contributions,
                dominant,
            }
        })
        .collect();
    Some(Decomposition {
        phases: phases.to_vec(),
        baseline_n: n0,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaling::laws;

    #[test]
    fn contributions_sum_to_karp_flatt_and_name_the_dominant_phase() {
        let names: Vec<String> = ["compute", "communication", "serial"]
            .map(String::from)
            .to_vec();
        // Compute scales perfectly from 100 s, serial is a constant 1 s, communication 0.5·log2 N.
        let runs: Vec<(f64, Vec<f64>)> = [1.0, 4.0, 64.0, 1024.0]
            .iter()
            .map(|&n: &f64| (n, vec![100.0 / n, 0.5 * n.log2(), 1.0]))
            .collect();
        let d = decompose(&names, 1.0, &runs).unwrap();
        for (row, (n, t)) in d.rows.iter().zip(runs.iter().skip(1)) {
            let s = 101.0 / t.iter().sum::<f64>();
            assert!((row.karp_flatt - laws::karp_flatt(*n, s)).abs() < 1e-12);
            assert!(row.contributions[0].abs() < 1e-12);
            // Constant serial phase: T_s/T0 = 1/101 at every N.
            assert!((row.contributions[2] - 1.0 / 101.0).abs() < 1e-12);
        }
        assert_eq!(d.rows[0].dominant, "communication");
        assert!(decompose(&names, 2.0, &runs).is_none());
    }
}

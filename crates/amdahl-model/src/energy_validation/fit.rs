//! Fitting the power model: weighted linear least squares on the power rows, each weighted by
//! 1/y² so that the fit minimises the sum of squared *relative* errors (a 40 W error matters as
//! much on a 300 W GPU as 130 W on a 1 kW one). The unknowns are one busy draw per generation
//! present in the rows, and the compute and memory coefficients shared by all.

use crate::power::{Coefficients, ACTIVE, ACTIVE_UNFITTED, COMPUTE, MEMORY};
use serde::{Deserialize, Serialize};

/// One power row's terms: its generation, regressors (busy, compute, memory shares) and target
/// (power over TDP less the idle share).
#[derive(Debug, Clone)]
pub struct Term {
    pub arch: String,
    pub x: [f64; 3],
    pub y: f64,
}

/// A set of power-model coefficients: fitted, or the shipped ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PowerFit {
    /// Busy draw per generation (lower-case `arch`), as a fraction of TDP.
    pub active: Vec<(String, f64)>,
    /// For generations not in `active`.
    pub active_unfitted: f64,
    pub compute: f64,
    pub memory: f64,
}

impl PowerFit {
    /// The coefficients amdahl ships (crate::power).
    pub fn shipped() -> PowerFit {
        PowerFit {
            active: ACTIVE.iter().map(|(a, v)| (a.to_string(), *v)).collect(),
            active_unfitted: ACTIVE_UNFITTED,
            compute: COMPUTE,
            memory: MEMORY,
        }
    }

    pub fn coefficients(&self, arch: &str) -> Coefficients {
        let arch = arch.trim().to_ascii_lowercase();
        Coefficients {
            active: self
                .active
                .iter()
                .find(|(a, _)| *a == arch)
                .map_or(self.active_unfitted, |(_, v)| *v),
            compute: self.compute,
            memory: self.memory,
        }
    }
}

/// The coefficients minimising Σ ((x·k − y)/y)² over `terms`. `None` when the terms do not
/// determine every unknown (too few, or collinear).
pub fn fit(terms: &[Term]) -> Option<PowerFit> {
    let mut archs: Vec<String> = terms.iter().map(|t| t.arch.to_ascii_lowercase()).collect();
    archs.sort();
    archs.dedup();
    let n = archs.len() + 2;
    let row = |t: &Term| {
        let mut v = vec![0.0; n];
        let g = archs.iter().position(|a| a.eq_ignore_ascii_case(&t.arch))?;
        v[g] = t.x[0];
        v[n - 2] = t.x[1];
        v[n - 1] = t.x[2];
        Some(v)
    };
    let mut a = vec![vec![0.0; n]; n];
    let mut b = vec![0.0; n];
    for t in terms.iter().filter(|t| t.y.is_finite() && t.y > 0.0) {
        let x = row(t)?;
        let w = 1.0 / (t.y * t.y);
        for i in 0..n {
            b[i] += w * x[i] * t.y;
            for j in 0..n {
                a[i][j] += w * x[i] * x[j];
            }
        }
    }
    let k = solve(a, b)?;
    let active: Vec<(String, f64)> = archs.into_iter().zip(k.iter().copied()).collect();
    let active_unfitted = active.iter().map(|(_, v)| v).sum::<f64>() / active.len() as f64;
    Some(PowerFit {
        active,
        active_unfitted,
        compute: k[n - 2],
        memory: k[n - 1],
    })
}

/// Gaussian elimination with partial pivoting; `None` when singular.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (upper, lower) = a.split_at_mut(col + 1);
        let pivot_row = &upper[col];
        for (offset, row) in lower.iter_mut().enumerate() {
            let f = row[col] / pivot_row[col];
            for (x, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                *x -= f * p;
            }
            b[col + 1 + offset] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| a[i][k] * x[k]).sum();
        x[i] = (b[i] - s) / a[i][i];
    }
    Some(x)
}

/// One throughput row as the engine host-time fit sees it: the modelled time per output token
/// without host time (`tau0`), how fast it grows with the per-sequence time (`slope`, exact:
/// the time is linear in it), and the measured time per output token.
#[derive(Debug, Clone, Copy)]
pub struct HostSample {
    pub tau0: f64,
    pub slope: f64,
    pub measured: f64,
}

/// The time per running sequence that minimises the squared relative error of the modelled
/// time per token over `samples`: with r = (τ0 + c·g)/τm − 1 linear in c, the least-squares c is
/// Σ (g/τm)(1 − τ0/τm) / Σ (g/τm)², never below zero. `None` with nothing to fit.
pub fn fit_host(samples: &[HostSample]) -> Option<f64> {
    let (mut num, mut den) = (0.0, 0.0);
    for s in samples {
        let g = s.slope / s.measured;
        num += g * (1.0 - s.tau0 / s.measured);
        den += g * g;
    }
    (den > 0.0).then(|| (num / den).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(arch: &str, x: [f64; 3], k: [f64; 3]) -> Term {
        Term {
            arch: arch.into(),
            x,
            y: k[0] * x[0] + k[1] * x[1] + k[2] * x[2],
        }
    }

    #[test]
    fn recovers_exact_coefficients_per_generation() {
        // Hopper busy draw 0.4, Blackwell 0.6; compute 0.7, memory 0.5 for both.
        let xs = [
            [1.0, 0.1, 0.6],
            [1.0, 0.5, 0.3],
            [0.8, 0.2, 0.2],
            [1.0, 0.05, 0.9],
        ];
        let mut terms: Vec<Term> = xs
            .iter()
            .map(|x| term("Hopper", *x, [0.4, 0.7, 0.5]))
            .collect();
        terms.extend(xs.iter().map(|x| term("blackwell", *x, [0.6, 0.7, 0.5])));
        let f = fit(&terms).unwrap();
        let h = f.coefficients("hopper");
        let b = f.coefficients("Blackwell");
        assert!(
            (h.active - 0.4).abs() < 1e-9 && (b.active - 0.6).abs() < 1e-9,
            "{f:?}"
        );
        assert!(
            (h.compute - 0.7).abs() < 1e-9 && (h.memory - 0.5).abs() < 1e-9,
            "{f:?}"
        );
        // A generation without rows takes the mean busy draw.
        assert!((f.coefficients("volta").active - 0.5).abs() < 1e-9);
    }

    #[test]
    fn underdetermined_is_none() {
        assert!(fit(&[term("hopper", [1.0, 0.2, 0.3], [0.4, 0.7, 0.5])]).is_none());
        assert!(fit(&[]).is_none());
    }

    #[test]
    fn host_time_is_recovered_exactly_and_never_negative() {
        // Rows made with 40 µs per sequence at batches 8 to 512: the fit returns it.
        let made = |c: f64| -> Vec<HostSample> {
            [8.0, 64.0, 512.0]
                .iter()
                .map(|&b| {
                    let (tau0, slope) = (0.01 + b * 1e-5, b / 100.0);
                    HostSample {
                        tau0,
                        slope,
                        measured: tau0 + c * slope,
                    }
                })
                .collect()
        };
        let c = fit_host(&made(40e-6)).unwrap();
        assert!((c - 40e-6).abs() < 1e-12, "{c}");
        // Rows faster than the model without host time give zero, not a negative time.
        let fast: Vec<HostSample> = made(0.0)
            .into_iter()
            .map(|s| HostSample {
                measured: s.tau0 * 0.8,
                ..s
            })
            .collect();
        assert_eq!(fit_host(&fast), Some(0.0));
        assert_eq!(fit_host(&[]), None);
    }
}

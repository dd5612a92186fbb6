//! Weighted nonlinear least squares of the model's free constants against measured rows
//! (docs/methodology.md, "Calibration").
//!
//! Each row's residual is its relative error, `predicted / measured − 1` (positive: the model
//! predicts more than was measured: optimistic for a rate, pessimistic for a time), so a 10 ms step and a 10 s step weigh alike. The
//! minimiser is Levenberg–Marquardt (Marquardt 1963; Nocedal & Wright, *Numerical Optimization*,
//! 2nd ed., §10.3) on a forward-difference Jacobian taken through the real model, with the
//! constants kept inside their physical bounds by projection. Standard errors are those of the
//! linearised model at the optimum: `Cov = s²·(JᵀJ)⁻¹`, `s² = RSS / (n − p)` (Bates & Watts,
//! *Nonlinear Regression Analysis*, 1988, §2.3). Before fitting, a constant that no row depends
//! on, one whose effect is (nearly) proportional to that of a constant already taken, or one more
//! than the rows can carry is refused by name and kept at its prior value.

use super::linalg::{cholesky, cholesky_solve, inverse, normal_equations};
use rayon::prelude::*;

/// A constant the fit may change.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// Its name in files and flags (`kernel_latency_s`).
    pub name: &'static str,
    /// What it is, in words ("kernel latency").
    pub what: &'static str,
    /// Its value before the fit (the catalog's, the profile's), where the fit starts.
    pub prior: f64,
    pub lower: f64,
    pub upper: f64,
    /// A typical magnitude: the Jacobian's step and the identifiability test are in units of it.
    pub scale: f64,
    /// Why no row may depend on it, for the refusal ("every row's GEMMs are large").
    pub insensitive_because: &'static str,
}

/// How the leave-one-out errors were computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LooMethod {
    /// Each row left out in turn and the constants refitted without it.
    Exact,
    /// The linearised shortcut `rᵢ / (1 − hᵢᵢ)` with `hᵢᵢ` the leverage of row i (the hat
    /// matrix `J(JᵀJ)⁻¹Jᵀ` at the optimum): exact for a linear model, one fit for all rows.
    Leverage,
}

/// Rows up to which leave-one-out refits every row exactly; above, the leverage shortcut.
pub const EXACT_LOO_MAX_ROWS: usize = 40;

/// The outcome of a fit.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// Every constant's value: fitted, or its prior where refused.
    pub values: Vec<f64>,
    /// Standard error of each fitted constant; `None` for a refused one.
    pub standard_errors: Vec<Option<f64>>,
    /// Refused constants: (index, why).
    pub refused: Vec<(usize, String)>,
    /// Signed relative error of each row with the priors, with the fit, and left out of the fit.
    pub before: Vec<f64>,
    pub after: Vec<f64>,
    pub loo: Vec<f64>,
    pub loo_method: LooMethod,
}

/// A row's prediction at the constants `x` (all of them, in the order of the parameters).
pub type Predict<'a> = dyn Fn(&[f64], usize) -> f64 + Sync + 'a;

/// Fit `params` to `measured` (all positive and finite: the caller checks) through `predict`.
/// Constants the rows cannot identify are refused into [`Fit::refused`] and kept at their prior;
/// the caller decides whether that is an error (a constant the user named) or a note.
pub fn fit(params: &[Param], measured: &[f64], predict: &Predict<'_>) -> Fit {
    fit_refusing(params, Vec::new(), measured, predict)
}

/// [`fit`] with some constants refused before any test, for reasons the caller knows from the
/// rows themselves (the serving rows run different engines, …): (index, why).
pub fn fit_refusing(
    params: &[Param],
    preset: Vec<(usize, String)>,
    measured: &[f64],
    predict: &Predict<'_>,
) -> Fit {
    let prior: Vec<f64> = params.iter().map(|p| p.prior).collect();
    let all: Vec<usize> = (0..measured.len()).collect();
    let before = residuals(&prior, measured, &all, predict);
    let mut refused = identify(params, &preset, &prior, measured, predict);
    // Fit, then refuse the least determined constant while one is left whose standard error
    // exceeds both its value and its typical magnitude (the rows leave it undetermined), and fit
    // again without it.
    let (values, after, standard_errors, hat) = loop {
        let free: Vec<usize> = (0..params.len())
            .filter(|i| !refused.iter().any(|(r, _)| r == i))
            .collect();
        let values = minimise(params, &free, prior.clone(), measured, &all, predict);
        let after = residuals(&values, measured, &all, predict);
        let (se, hat) = covariance(params, &free, &values, measured, &after, predict);
        let worst = free
            .iter()
            .filter_map(|&j| {
                let spread = se[j]? / values[j].abs().max(params[j].scale);
                (spread > 1.0).then_some((j, spread))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1));
        match worst {
            Some((j, _)) => refused.push((
                j,
                format!(
                    "cannot identify {}: the rows leave it at {} ± {}, more than its value; add \
                     rows that change how much of the time it accounts for",
                    params[j].what,
                    crate::units::sig(values[j], 3),
                    crate::units::sig(se[j].unwrap_or(f64::NAN), 2)
                ),
            )),
            None => break (values, after, se, hat),
        }
    };
    refused.sort_by_key(|(i, _)| *i);
    let free: Vec<usize> = (0..params.len())
        .filter(|i| !refused.iter().any(|(r, _)| r == i))
        .collect();
    let (loo, loo_method) = if free.is_empty() {
        (after.clone(), LooMethod::Exact)
    } else if measured.len() <= EXACT_LOO_MAX_ROWS {
        let loo = (0..measured.len())
            .map(|i| {
                let rest: Vec<usize> = all.iter().copied().filter(|&k| k != i).collect();
                let x = minimise(params, &free, values.clone(), measured, &rest, predict);
                predict(&x, i) / measured[i] - 1.0
            })
            .collect();
        (loo, LooMethod::Exact)
    } else {
        let loo = after
            .iter()
            .zip(&hat)
            .map(|(r, h)| r / (1.0 - h.min(0.999)))
            .collect();
        (loo, LooMethod::Leverage)
    };
    Fit {
        values,
        standard_errors,
        refused,
        before,
        after,
        loo,
        loo_method,
    }
}

/// The fit of constants no row measures: each refused, at its prior.
pub fn none_measured(params: &[Param], what: &str) -> Fit {
    Fit {
        values: params.iter().map(|p| p.prior).collect(),
        standard_errors: vec![None; params.len()],
        refused: params
            .iter()
            .enumerate()
            .map(|(i, p)| {
                (
                    i,
                    format!("cannot identify {}: no row measures {what}", p.what),
                )
            })
            .collect(),
        before: Vec::new(),
        after: Vec::new(),
        loo: Vec::new(),
        loo_method: LooMethod::Exact,
    }
}

/// Signed relative errors of `rows` at `x`; a prediction that is not a positive number counts as
/// a relative error of 10 (the step that produced it is rejected).
fn residuals(x: &[f64], measured: &[f64], rows: &[usize], predict: &Predict<'_>) -> Vec<f64> {
    rows.par_iter()
        .map(|&i| {
            let p = predict(x, i);
            if p.is_finite() && p > 0.0 {
                p / measured[i] - 1.0
            } else {
                10.0
            }
        })
        .collect()
}

/// Forward-difference Jacobian of the residuals of `rows` in the scaled constants `x_j / scale_j`
/// of `free`: one row per measured row.
fn jacobian(
    params: &[Param],
    free: &[usize],
    x: &[f64],
    measured: &[f64],
    rows: &[usize],
    predict: &Predict<'_>,
) -> Vec<Vec<f64>> {
    rows.par_iter()
        .map(|&i| {
            let base = predict(x, i);
            free.iter()
                .map(|&j| {
                    let p = &params[j];
                    // Step toward the interior so bounded constants stay evaluable.
                    let h = 1e-6 * p.scale.max(x[j].abs());
                    let h = if x[j] + h > p.upper { -h } else { h };
                    let mut y = x.to_vec();
                    y[j] += h;
                    (predict(&y, i) - base) / measured[i] / (h / p.scale)
                })
                .collect()
        })
        .collect()
}

/// The constants the rows cannot identify, with why: a column of the scaled Jacobian at the
/// priors whose RMS is below `1e-4` (a change by its typical magnitude moves no row by 0.01 %),
/// one that is within 5 % of the span of the columns taken before it (Gram–Schmidt in the
/// parameters' order, which puts the better-known constants first), or one beyond `n − 1`
/// constants for `n` rows (a standard error needs a residual degree of freedom). The `preset`
/// refusals are kept and their constants skipped.
fn identify(
    params: &[Param],
    preset: &[(usize, String)],
    x: &[f64],
    measured: &[f64],
    predict: &Predict<'_>,
) -> Vec<(usize, String)> {
    let n = measured.len();
    let all: Vec<usize> = (0..params.len()).collect();
    let rows: Vec<usize> = (0..n).collect();
    let j = jacobian(params, &all, x, measured, &rows, predict);
    let column = |c: usize| -> Vec<f64> { j.iter().map(|r| r[c]).collect() };
    let norm = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>().sqrt();
    let mut basis: Vec<(usize, Vec<f64>)> = Vec::new();
    let mut refused = preset.to_vec();
    for (c, p) in params.iter().enumerate() {
        if preset.iter().any(|(i, _)| *i == c) {
            continue;
        }
        let v = column(c);
        let size = norm(&v);
        let rms = size / (n.max(1) as f64).sqrt();
        if rms.is_nan() || rms < 1e-4 {
            refused.push((
                c,
                format!(
                    "cannot identify {}: no row's prediction depends on it ({})",
                    p.what, p.insensitive_because
                ),
            ));
            continue;
        }
        let mut rest = v.clone();
        let mut closest: Option<(usize, f64)> = None;
        for (b, u) in &basis {
            let dot: f64 = rest.iter().zip(u).map(|(a, b)| a * b).sum();
            let own: f64 = v.iter().zip(u).map(|(a, b)| a * b).sum::<f64>().abs();
            if closest.is_none_or(|(_, d)| own > d) {
                closest = Some((*b, own));
            }
            for (r, ui) in rest.iter_mut().zip(u) {
                *r -= dot * ui;
            }
        }
        if norm(&rest) < 0.05 * size {
            let other = closest.map_or("the others", |(b, _)| params[b].what);
            refused.push((
                c,
                format!(
                    "cannot identify {}: its effect on every row is (nearly) proportional to \
                     that of {other}; add rows that change one and not the other",
                    p.what
                ),
            ));
            continue;
        }
        if basis.len() + 1 >= n {
            refused.push((
                c,
                format!(
                    "cannot identify {}: {n} rows fit at most {} constants (one degree of \
                     freedom is kept for the standard errors); add rows",
                    p.what,
                    n.saturating_sub(1)
                ),
            ));
            continue;
        }
        let r = norm(&rest);
        basis.push((c, rest.into_iter().map(|a| a / r).collect()));
    }
    refused
}

/// Levenberg–Marquardt over the `free` constants on `rows`, from `x`.
fn minimise(
    params: &[Param],
    free: &[usize],
    mut x: Vec<f64>,
    measured: &[f64],
    rows: &[usize],
    predict: &Predict<'_>,
) -> Vec<f64> {
    if free.is_empty() {
        return x;
    }
    let cost = |x: &[f64]| -> f64 {
        residuals(x, measured, rows, predict)
            .iter()
            .map(|r| r * r)
            .sum()
    };
    let mut c = cost(&x);
    let mut lambda = 1e-3;
    for _ in 0..100 {
        let r = residuals(&x, measured, rows, predict);
        let j = jacobian(params, free, &x, measured, rows, predict);
        let (a, g) = normal_equations(&j, &r, free.len());
        let mut improved = false;
        while lambda < 1e12 {
            let mut damped = a.clone();
            for (k, row) in damped.iter_mut().enumerate() {
                row[k] += lambda * a[k][k].max(1e-12);
            }
            let Some(l) = cholesky(&damped) else {
                lambda *= 10.0;
                continue;
            };
            let step = cholesky_solve(&l, &g);
            let mut y = x.clone();
            for (k, &j) in free.iter().enumerate() {
                let p = &params[j];
                y[j] = (x[j] - step[k] * p.scale).clamp(p.lower, p.upper);
            }
            let cy = cost(&y);
            if cy < c {
                let done = (c - cy) <= 1e-12 * c.max(1e-300);
                x = y;
                c = cy;
                lambda = (lambda / 10.0).max(1e-12);
                improved = !done;
                break;
            }
            lambda *= 10.0;
        }
        if !improved {
            break;
        }
    }
    x
}

/// Standard errors of the free constants and the leverage of each row at the optimum.
fn covariance(
    params: &[Param],
    free: &[usize],
    x: &[f64],
    measured: &[f64],
    r: &[f64],
    predict: &Predict<'_>,
) -> (Vec<Option<f64>>, Vec<f64>) {
    let n = measured.len();
    let mut se = vec![None; params.len()];
    if free.is_empty() {
        return (se, vec![0.0; n]);
    }
    let rows: Vec<usize> = (0..n).collect();
    let j = jacobian(params, free, x, measured, &rows, predict);
    let (a, _) = normal_equations(&j, r, free.len());
    let Some(inv) = inverse(&a) else {
        return (se, vec![0.0; n]);
    };
    let dof = n.saturating_sub(free.len()).max(1) as f64;
    let s2 = r.iter().map(|e| e * e).sum::<f64>() / dof;
    for (k, &c) in free.iter().enumerate() {
        se[c] = Some((s2 * inv[k][k]).max(0.0).sqrt() * params[c].scale);
    }
    let hat = j
        .iter()
        .map(|ji| {
            (0..free.len())
                .map(|a| {
                    (0..free.len())
                        .map(|b| ji[a] * inv[a][b] * ji[b])
                        .sum::<f64>()
                })
                .sum()
        })
        .collect();
    (se, hat)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn params() -> Vec<Param> {
        vec![
            Param {
                name: "rate",
                what: "rate",
                prior: 1.0,
                lower: 0.01,
                upper: 10.0,
                scale: 1.0,
                insensitive_because: "",
            },
            Param {
                name: "latency",
                what: "latency",
                prior: 0.0,
                lower: 0.0,
                upper: 1.0,
                scale: 0.01,
                insensitive_because: "every row is large",
            },
        ]
    }

    #[test]
    fn recovers_a_line_with_noise_within_its_standard_error() {
        // t = latency + size / rate with rate 2.5, latency 0.03, 1 % multiplicative noise.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let sizes: Vec<f64> = (1..=30).map(|k| 0.05 * f64::from(k)).collect();
        let measured: Vec<f64> = sizes
            .iter()
            .map(|s| (0.03 + s / 2.5) * (1.0 + 0.01 * (rng.random::<f64>() - 0.5) * 2.0))
            .collect();
        let f = |x: &[f64], i: usize| x[1] + sizes[i] / x[0];
        let fit = fit(&params(), &measured, &f);
        assert!(fit.refused.is_empty(), "{:?}", fit.refused);
        for (k, want) in [(0, 2.5), (1, 0.03)] {
            let se = fit.standard_errors[k].unwrap();
            assert!(
                (fit.values[k] - want).abs() < 3.0 * se,
                "{k}: {} ± {se}",
                fit.values[k]
            );
        }
        let worst = fit.after.iter().fold(0.0f64, |m, e| m.max(e.abs()));
        assert!(worst < 0.015, "{worst}");
        assert_eq!(fit.loo_method, LooMethod::Exact);
        assert!(fit
            .loo
            .iter()
            .zip(&fit.after)
            .all(|(l, a)| l.abs() >= a.abs() - 1e-9));
    }

    #[test]
    fn refuses_what_the_rows_cannot_tell() {
        let sizes = [1.0, 2.0, 3.0, 4.0];
        let measured: Vec<f64> = sizes.iter().map(|s| s / 2.0).collect();
        // The prediction does not depend on the latency at all.
        let f = |x: &[f64], i: usize| sizes[i] / x[0];
        let fit = fit(&params(), &measured, &f);
        assert_eq!(fit.refused.len(), 1);
        assert!(
            fit.refused[0].1.contains("every row is large"),
            "{:?}",
            fit.refused
        );
        assert!((fit.values[0] - 2.0).abs() < 1e-6);
        assert_eq!(fit.values[1], 0.0);
        // Two rows for two constants: the second is refused for want of rows.
        let f = |x: &[f64], i: usize| x[1] + sizes[i] / x[0];
        let fit2 = super::fit(&params(), &measured[..2], &f);
        assert!(fit2.refused[0].1.contains("2 rows"), "{:?}", fit2.refused);
    }
}

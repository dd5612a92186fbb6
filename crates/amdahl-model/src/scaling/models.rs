//! Fitted scaling models and what they predict.
//!
//! Every model is written as the time of a fixed amount of work, t(N) = 1/rate(N), in the units
//! of the input (seconds for `time`, 1/throughput for `throughput`, 1/S for `speedup`):
//!
//! * `amdahl`        t = a + b/N                      (Amdahl 1967: a serial, b parallel)
//! * `amdahl_log2`   t = a + b/N + c·log2 N           (tree/ring-style collective cost)
//! * `amdahl_linear` t = a + b/N + c·N                (cost growing linearly with N)
//! * `usl`           X = λN / (1 + σ(N−1) + κN(N−1))  (Gunther 2007, fitted on the rate X = 1/t)
//!
//! The three linear models are weighted least squares with weights 1/t², i.e. they minimise the
//! squared *relative* residuals, so runs at large N (small t) count as much as the baseline.
//! USL is fitted by Levenberg–Marquardt on the rate, unweighted, exactly as Gunther's R `usl`
//! package and usl4j do, so their published coefficients are reproduced.

use super::laws;
use super::lsq::{Lsq, MAX_P};
use serde::{Deserialize, Serialize};

/// Which model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ModelKind {
    Amdahl,
    AmdahlLog2,
    AmdahlLinear,
    Usl,
}

impl ModelKind {
    pub const ALL: [ModelKind; 4] = [
        ModelKind::Amdahl,
        ModelKind::AmdahlLog2,
        ModelKind::AmdahlLinear,
        ModelKind::Usl,
    ];
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Amdahl => "amdahl",
            ModelKind::AmdahlLog2 => "amdahl_log2",
            ModelKind::AmdahlLinear => "amdahl_linear",
            ModelKind::Usl => "usl",
        }
    }
    pub fn formula(self) -> &'static str {
        match self {
            ModelKind::Amdahl => "T = a + b/N",
            ModelKind::AmdahlLog2 => "T = a + b/N + c*log2(N)",
            ModelKind::AmdahlLinear => "T = a + b/N + c*N",
            ModelKind::Usl => "X = lambda*N/(1 + sigma*(N-1) + kappa*N*(N-1))",
        }
    }
    pub fn param_names(self) -> &'static [&'static str] {
        match self {
            ModelKind::Amdahl => &["a", "b"],
            ModelKind::AmdahlLog2 | ModelKind::AmdahlLinear => &["a", "b", "c"],
            ModelKind::Usl => &["sigma", "kappa", "lambda"],
        }
    }
    /// Points needed: one more than parameters, so the residual variance (and with it every
    /// standard error) is defined.
    pub fn min_points(self) -> usize {
        self.param_names().len() + 1
    }
}

/// One fitted parameter with its standard error (None when the fit has no residual freedom).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Param {
    pub name: String,
    pub value: f64,
    pub stderr: Option<f64>,
}

/// A fitted model: parameters, goodness of fit and the quantities it predicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ModelFit {
    pub model: ModelKind,
    pub formula: String,
    pub params: Vec<Param>,
    /// Σ ((t − t̂)/t)²: the relative residuals every model is compared on.
    pub rss_rel: f64,
    /// Corrected Akaike information criterion on `rss_rel` (Hurvich & Tsai 1989); None when
    /// there are too few points (n ≤ k + 2 with k = parameters + 1).
    pub aicc: Option<f64>,
    /// False when a parameter is negative beyond two standard errors (a, b, c, σ, κ must be ≥ 0):
    /// such a fit describes the noise, not the machine, and is never chosen.
    pub physical: bool,
    /// 1−α at the baseline: a/t̂(N0) for the T-models, σ for USL.
    pub serial_fraction: f64,
    /// Largest speedup against the baseline: t̂(N0)/a (Amdahl) or the speedup at `n_opt`.
    pub s_max: Option<f64>,
    /// N where efficiency against the baseline falls to 50 %.
    pub n_half: Option<f64>,
    /// N where throughput peaks (models with a cost growing in N and c > 0 / κ > 0).
    pub n_opt: Option<f64>,
}

impl ModelFit {
    fn p(&self, i: usize) -> f64 {
        self.params.get(i).map_or(0.0, |p| p.value)
    }

    /// Modelled time of the fixed work at N, in input units.
    pub fn time(&self, n: f64) -> f64 {
        let (a, b, c) = (self.p(0), self.p(1), self.p(2));
        match self.model {
            ModelKind::Amdahl => a + b / n,
            ModelKind::AmdahlLog2 => a + b / n + c * n.log2(),
            ModelKind::AmdahlLinear => a + b / n + c * n,
            ModelKind::Usl => 1.0 / (c * laws::usl_speedup(n, a, b)),
        }
    }

    /// Modelled speedup at N against the baseline N0.
    pub fn speedup(&self, n: f64, n0: f64) -> f64 {
        self.time(n0) / self.time(n)
    }

    /// Modelled efficiency at N against the baseline N0: S / (N/N0).
    pub fn efficiency(&self, n: f64, n0: f64) -> f64 {
        self.speedup(n, n0) / (n / n0)
    }
}

/// A model that could not be fitted, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Skipped {
    pub model: ModelKind,
    pub reason: String,
}

/// Fit `kind` to times `t` measured at `n` (equal lengths, distinct N, all positive), with
/// derived quantities referred to the baseline `n0`.
pub fn fit(kind: ModelKind, n: &[f64], t: &[f64], n0: f64) -> Result<ModelFit, Skipped> {
    let skip = |reason: String| Skipped {
        model: kind,
        reason,
    };
    let m = n.len().min(t.len());
    if m < kind.min_points() {
        return Err(skip(format!(
            "needs at least {} distinct N, has {m}",
            kind.min_points()
        )));
    }
    let (values, cov) = fit_scaled(kind, n, &t[..m]).map_err(skip)?;
    let params: Vec<Param> = kind
        .param_names()
        .iter()
        .zip(values.iter())
        .enumerate()
        .map(|(i, (name, &value))| Param {
            name: (*name).into(),
            value,
            stderr: cov
                .get(i)
                .and_then(|r| r.get(i))
                .map(|v| v.max(0.0).sqrt())
                .filter(|v| v.is_finite()),
        })
        .collect();
    let physical = params.iter().enumerate().all(|(i, p)| {
        let tol = 2.0 * p.stderr.unwrap_or(0.0);
        let nonneg = p.value >= -tol;
        match (kind, i) {
            (ModelKind::Usl, 0) => nonneg && p.value <= 1.0 + tol,
            (ModelKind::Usl, 2) => p.value > 0.0,
            (_, 1) => p.value > 0.0,
            _ => nonneg,
        }
    });
    let mut f = ModelFit {
        model: kind,
        formula: kind.formula().into(),
        params,
        rss_rel: 0.0,
        aicc: None,
        physical,
        serial_fraction: f64::NAN,
        s_max: None,
        n_half: None,
        n_opt: None,
    };
    f.rss_rel = n
        .iter()
        .zip(t)
        .map(|(&ni, &ti)| ((ti - f.time(ni)) / ti).powi(2))
        .sum();
    f.aicc = aicc(f.rss_rel, m, kind.param_names().len());
    derive(&mut f, n0);
    Ok(f)
}

/// AICc = n·ln(RSS/n) + 2k + 2k(k+1)/(n−k−1), k = parameters + 1 for the error variance
/// (Hurvich & Tsai 1989, Biometrika 76(2), eq. 3 for least squares).
pub fn aicc(rss: f64, n: usize, params: usize) -> Option<f64> {
    let k = (params + 1) as f64;
    let nf = n as f64;
    if nf - k - 1.0 <= 0.0 {
        return None;
    }
    // An exact fit has RSS = 0; floor it so ln stays finite and the penalty decides.
    let var = (rss / nf).max(1e-300);
    Some(nf * var.ln() + 2.0 * k + 2.0 * k * (k + 1.0) / (nf - k - 1.0))
}

fn derive(f: &mut ModelFit, n0: f64) {
    let (a, b, c) = (f.p(0), f.p(1), f.p(2));
    let t0 = f.time(n0);
    f.n_opt = match f.model {
        ModelKind::Amdahl => None,
        ModelKind::AmdahlLog2 => (c > 0.0 && b > 0.0).then(|| b * std::f64::consts::LN_2 / c),
        ModelKind::AmdahlLinear => (c > 0.0 && b > 0.0).then(|| (b / c).sqrt()),
        ModelKind::Usl => (b > 0.0 && a < 1.0).then(|| laws::usl_n_opt(a, b)),
    }
    .filter(|v| v.is_finite() && *v > 0.0);
    f.serial_fraction = match f.model {
        ModelKind::Usl => a,
        _ => a / t0,
    };
    f.s_max = match (f.model, f.n_opt) {
        (_, Some(no)) => Some(f.speedup(no, n0)),
        (ModelKind::Amdahl, None) => (a > 0.0).then(|| t0 / a),
        // USL without coherency delay is Amdahl with 1−α = σ: X(∞) = λ/σ.
        (ModelKind::Usl, None) => (a > 0.0).then(|| c / a * t0),
        _ => None,
    }
    .filter(|v| v.is_finite() && *v > 0.0);
    f.n_half = solve_half(|n| f.efficiency(n, n0) - 0.5, n0);
}

/// N ≥ n0 where g(N) = 0, by bisection on log N (g(n0) > 0 is efficiency 1 − 0.5).
fn solve_half(g: impl Fn(f64) -> f64, n0: f64) -> Option<f64> {
    let (mut lo, mut hi) = (n0.ln(), (1e18f64).ln());
    let g0 = g(n0);
    if g0.is_nan() || g0 <= 0.0 {
        return None;
    }
    // Walk up by decades to the first sign change (efficiency may recover for odd fits).
    let mut x = lo;
    let mut found = false;
    while x < hi {
        let nx = (x + std::f64::consts::LN_10).min(hi);
        if g(nx.exp()) <= 0.0 {
            lo = x;
            hi = nx;
            found = true;
            break;
        }
        x = nx;
    }
    if !found {
        return None;
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if g(mid.exp()) > 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some((0.5 * (lo + hi)).exp())
}

type Fitted = (Vec<f64>, Vec<Vec<f64>>);

/// Fit on times divided by their largest value, then scale the parameters back. The fitters'
/// convergence and singularity tests use absolute thresholds tuned for values near 1; FLOP/s
/// throughputs (t ~ 1e-15) or tiny times left USL "not converged" and the linear models "singular"
/// (a regression, tested below). Every model is linear in the time scale: a, b, c scale with t;
/// USL's λ (a rate) scales with 1/t; σ and κ are dimensionless.
fn fit_scaled(kind: ModelKind, n: &[f64], t: &[f64]) -> Result<Fitted, String> {
    let t_ref = t.iter().copied().fold(0.0, f64::max);
    if !(t_ref.is_finite() && t_ref > 0.0) || t.iter().any(|&x| !(x.is_finite() && x > 0.0)) {
        return Err("needs positive, finite times".into());
    }
    let scaled: Vec<f64> = t.iter().map(|&x| x / t_ref).collect();
    if scaled.iter().any(|&x| x < f64::MIN_POSITIVE) {
        return Err(format!(
            "the values span more than {:.0} orders of magnitude",
            f64::MAX_10_EXP
        ));
    }
    let (mut values, mut cov) = match kind {
        ModelKind::Usl => fit_usl(n, &scaled).ok_or_else(|| "did not converge".to_string())?,
        _ => fit_linear(kind, n, &scaled)
            .ok_or_else(|| "design is singular (too few distinct N)".to_string())?,
    };
    // Per-parameter factor back to input units.
    let factor = |i: usize| match (kind, i) {
        (ModelKind::Usl, 2) => 1.0 / t_ref,
        (ModelKind::Usl, _) => 1.0,
        _ => t_ref,
    };
    for (i, v) in values.iter_mut().enumerate() {
        *v *= factor(i);
    }
    for (i, row) in cov.iter_mut().enumerate() {
        for (j, c) in row.iter_mut().enumerate() {
            *c *= factor(i) * factor(j);
        }
    }
    Ok((values, cov))
}

fn fit_linear(kind: ModelKind, n: &[f64], t: &[f64]) -> Option<Fitted> {
    let p = kind.param_names().len();
    let mut l = Lsq::new(p);
    for (&ni, &ti) in n.iter().zip(t) {
        let g = match kind {
            ModelKind::AmdahlLog2 => ni.log2(),
            _ => ni,
        };
        l.add(&[1.0, 1.0 / ni, g][..p], ti, 1.0 / (ti * ti));
    }
    let s = l.solve()?;
    let dof = l.rows() as f64 - p as f64;
    let var = s.rss / dof;
    let cov = scale(&s.cov_unscaled, var);
    Some((s.x, cov))
}

fn scale(m: &[Vec<f64>], k: f64) -> Vec<Vec<f64>> {
    m.iter()
        .map(|r| r.iter().map(|v| v * k).collect())
        .collect()
}

/// USL rate X(N; σ, κ, λ) and its gradient.
fn usl_eval(n: f64, th: &[f64; MAX_P]) -> (f64, [f64; MAX_P]) {
    let (s, k, l) = (th[0], th[1], th[2]);
    let d = 1.0 + s * (n - 1.0) + k * n * (n - 1.0);
    let x = l * n / d;
    let dd = l * n / (d * d);
    (x, [-dd * (n - 1.0), -dd * n * (n - 1.0), n / d])
}

/// Levenberg–Marquardt (Marquardt 1963, with diag(JᵀJ) scaling) on Σ (X_i − X(N_i))², X = 1/t.
/// Started from the weighted linear fit of t = a + b/N + c·N, which is USL rewritten:
/// a = (σ−κ)/λ, b = (1−σ)/λ, c = κ/λ (so λ = 1/(a+b+c), σ = 1 − bλ, κ = cλ).
#[allow(clippy::needless_range_loop)]
fn fit_usl(n: &[f64], t: &[f64]) -> Option<Fitted> {
    let (lin, _) = fit_linear(ModelKind::AmdahlLinear, n, t)?;
    let (a, b, c) = (lin[0], lin[1], lin[2]);
    let mut th = [0.0; MAX_P];
    let lam = 1.0 / (a + b + c);
    if lam.is_finite() && lam > 0.0 {
        th = [1.0 - b * lam, c * lam, lam];
    } else {
        // Fall back to "linear scaling from the smallest run".
        let i = (0..n.len()).min_by(|&i, &j| n[i].total_cmp(&n[j]))?;
        th[2] = 1.0 / (t[i] * n[i]);
    }
    // One pass gives the SSE, JᵀJ and Jᵀr at θ, so an accepted trial step is already the next
    // iteration's system. Steps use the (Jacobi-scaled, damped) normal equations — cheap to
    // accumulate, and a step only has to be a good descent direction; the covariance at the
    // solution comes from the stable QR below.
    type Normal = (f64, [[f64; MAX_P]; MAX_P], [f64; MAX_P]);
    let system = |th: &[f64; MAX_P]| -> Normal {
        let mut jtj = [[0.0; MAX_P]; MAX_P];
        let mut jtr = [0.0; MAX_P];
        let mut sse = 0.0;
        for (&ni, &ti) in n.iter().zip(t) {
            let (x, g) = usl_eval(ni, th);
            let r = 1.0 / ti - x;
            sse += r * r;
            for i in 0..MAX_P {
                jtr[i] += g[i] * r;
                for j in i..MAX_P {
                    jtj[i][j] += g[i] * g[j];
                }
            }
        }
        (sse, jtj, jtr)
    };
    let (mut cur, mut jtj, mut jtr) = system(&th);
    let mut mu = 1e-3;
    let mut converged = false;
    for _ in 0..500 {
        let mut improved = false;
        for _ in 0..40 {
            let Some(step) = damped_step(&jtj, &jtr, mu) else {
                mu *= 10.0;
                continue;
            };
            let mut next = th;
            for (v, d) in next.iter_mut().zip(&step) {
                *v += d;
            }
            let (s, nj, nr) = system(&next);
            if s.is_finite() && s <= cur {
                let rel = (cur - s) / cur.max(f64::MIN_POSITIVE);
                th = next;
                (cur, jtj, jtr) = (s, nj, nr);
                mu = (mu * 0.3).max(1e-15);
                improved = true;
                let small = step
                    .iter()
                    .zip(&th)
                    .all(|(d, v)| d.abs() <= 1e-10 * v.abs().max(1e-300));
                // 1e-12 relative SSE change: far below the 2e-4 agreement with published fits.
                if rel < 1e-12 || small {
                    converged = true;
                }
                break;
            }
            mu *= 10.0;
        }
        if converged || !improved {
            converged = true;
            break;
        }
    }
    if !converged || th.iter().any(|v| !v.is_finite()) {
        return None;
    }
    // Covariance (JᵀJ)⁻¹ at the solution by streaming QR.
    let mut l = Lsq::new(3);
    for (&ni, &ti) in n.iter().zip(t) {
        let (x, g) = usl_eval(ni, &th);
        l.add(&g, 1.0 / ti - x, 1.0);
    }
    let s = l.solve()?;
    let var = cur / (n.len() as f64 - 3.0);
    Some((th.to_vec(), scale(&s.cov_unscaled, var)))
}

/// Marquardt step: solve (C + μI) z = g with C = D⁻¹JᵀJD⁻¹, g = D⁻¹Jᵀr, D = √diag(JᵀJ), by
/// Cholesky; δ = D⁻¹z. `jtj` holds the upper triangle. None if not positive definite.
// Dense 3×3 algebra reads as the textbook does with explicit indices.
#[allow(clippy::needless_range_loop)]
fn damped_step(jtj: &[[f64; MAX_P]; MAX_P], jtr: &[f64; MAX_P], mu: f64) -> Option<[f64; MAX_P]> {
    let mut d = [0.0; MAX_P];
    for i in 0..MAX_P {
        d[i] = jtj[i][i].sqrt();
        if d[i].is_nan() || d[i] <= 0.0 {
            return None;
        }
    }
    let mut a = [[0.0; MAX_P]; MAX_P];
    for i in 0..MAX_P {
        for j in 0..MAX_P {
            let v = if i <= j { jtj[i][j] } else { jtj[j][i] };
            a[i][j] = v / (d[i] * d[j]) + if i == j { mu } else { 0.0 };
        }
    }
    // Cholesky A = LLᵀ.
    let mut l = [[0.0; MAX_P]; MAX_P];
    for i in 0..MAX_P {
        for j in 0..=i {
            let s: f64 = a[i][j] - (0..j).map(|k| l[i][k] * l[j][k]).sum::<f64>();
            if i == j {
                if s.is_nan() || s <= 0.0 {
                    return None;
                }
                l[i][i] = s.sqrt();
            } else {
                l[i][j] = s / l[j][j];
            }
        }
    }
    let mut y = [0.0; MAX_P];
    for i in 0..MAX_P {
        y[i] = (jtr[i] / d[i] - (0..i).map(|k| l[i][k] * y[k]).sum::<f64>()) / l[i][i];
    }
    let mut z = [0.0; MAX_P];
    for i in (0..MAX_P).rev() {
        z[i] = (y[i] - (i + 1..MAX_P).map(|k| l[k][i] * z[k]).sum::<f64>()) / l[i][i];
    }
    let mut out = [0.0; MAX_P];
    for i in 0..MAX_P {
        out[i] = z[i] / d[i];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amdahl_exact_data_gives_its_laws() {
        // t = 1 + 99/N: 1−α = 1/100 at N0 = 1, S_max = 100, N_½ = (1+s)/s = 101.
        let n: Vec<f64> = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0].to_vec();
        let t: Vec<f64> = n.iter().map(|n| 1.0 + 99.0 / n).collect();
        let f = fit(ModelKind::Amdahl, &n, &t, 1.0).unwrap();
        assert!((f.serial_fraction - 0.01).abs() < 1e-12);
        assert!((f.s_max.unwrap() - 100.0).abs() < 1e-9);
        assert!((f.n_half.unwrap() - laws::half_efficiency_n(0.01)).abs() < 1e-6);
        assert!(f.physical);
    }

    #[test]
    fn usl_exact_data_is_recovered() {
        let n: Vec<f64> = (1..=12).map(|i| (i * 4) as f64).collect();
        let t: Vec<f64> = n
            .iter()
            .map(|&n| 1.0 / (50.0 * laws::usl_speedup(n, 0.05, 2e-4)))
            .collect();
        let f = fit(ModelKind::Usl, &n, &t, 4.0).unwrap();
        assert!((f.params[0].value - 0.05).abs() < 1e-9, "{:?}", f.params);
        assert!((f.params[1].value - 2e-4).abs() < 1e-11);
        assert!((f.params[2].value - 50.0).abs() < 1e-7);
        assert!((f.n_opt.unwrap() - laws::usl_n_opt(0.05, 2e-4)).abs() < 1e-6);
    }

    #[test]
    fn too_few_points_is_skipped_with_a_reason() {
        let e = fit(ModelKind::Usl, &[1.0, 2.0, 3.0], &[1.0, 0.6, 0.5], 1.0).unwrap_err();
        assert!(e.reason.contains("at least 4"), "{}", e.reason);
    }

    #[test]
    fn usl_fits_flops_throughputs_after_scaling() {
        // Regression: throughputs ≥ ~1e10 (FLOP/s) left USL "did not converge", and at
        // extreme scales every model failed as "too few distinct N". The fit must not depend on
        // the unit: σ, κ and 1−α are the same at every scale; λ scales with the data.
        let n = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0];
        let x = [1.0, 1.9, 3.5, 6.0, 9.0, 11.0];
        let base: Vec<ModelFit> = ModelKind::ALL
            .iter()
            .map(|&k| fit(k, &n, &x.map(|v| 1.0 / v), 1.0).unwrap())
            .collect();
        for scale in [1e-300, 1e-100, 1e-10, 1e10, 1e12, 1e16, 1e100, 1e250, 1e300] {
            let t: Vec<f64> = x.iter().map(|v| 1.0 / (v * scale)).collect();
            for b in &base {
                let f = fit(b.model, &n, &t, 1.0)
                    .unwrap_or_else(|e| panic!("{:?} at {scale}: {}", b.model, e.reason));
                let rel = |a: f64, b: f64| ((a - b) / b).abs();
                assert!(rel(f.serial_fraction, b.serial_fraction) < 1e-6, "{scale}");
                assert!(
                    rel(f.rss_rel, b.rss_rel) < 1e-6 || f.rss_rel < 1e-20,
                    "{scale}"
                );
                if b.model == ModelKind::Usl {
                    assert!(rel(f.params[0].value, b.params[0].value) < 1e-6);
                    assert!(rel(f.params[2].value, b.params[2].value * scale) < 1e-6);
                }
            }
        }
    }
}

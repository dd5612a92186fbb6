//! Small dense least squares by streaming Givens rotations.
//!
//! Rows are folded one at a time into an upper-triangular `R` (p × p) and `Qᵀy`, so a fit over a
//! million points needs O(p²) memory and O(n·p²) time, and is as stable as a QR factorisation
//! (Golub & Van Loan, *Matrix Computations*, §5.1.8) — the normal equations would square the
//! condition number of columns like 1, 1/N and N that span six decades.

// Dense triangular algebra reads as the textbook does with explicit indices.
#![allow(clippy::needless_range_loop)]

/// Most parameters any scaling model here has (a, b, c or σ, κ, λ).
pub const MAX_P: usize = 3;

/// Accumulated QR factorisation of a weighted design matrix.
#[derive(Debug, Clone)]
pub struct Lsq {
    p: usize,
    r: [[f64; MAX_P]; MAX_P],
    qty: [f64; MAX_P],
    /// Sum of squares of the part of y orthogonal to the columns: the residual sum of squares.
    rss: f64,
    rows: usize,
}

/// Solution of a least-squares problem: parameters and the unscaled covariance (RᵀR)⁻¹.
#[derive(Debug, Clone)]
pub struct Solution {
    pub x: Vec<f64>,
    /// (XᵀWX)⁻¹; multiply by the residual variance for the parameter covariance.
    pub cov_unscaled: Vec<Vec<f64>>,
    pub rss: f64,
}

impl Lsq {
    /// An empty problem with `p ≤ MAX_P` unknowns.
    pub fn new(p: usize) -> Self {
        Self {
            p: p.min(MAX_P),
            r: [[0.0; MAX_P]; MAX_P],
            qty: [0.0; MAX_P],
            rss: 0.0,
            rows: 0,
        }
    }

    /// Add the row `x·β ≈ y` with weight `w` (minimises Σ w·(y − x·β)²).
    pub fn add(&mut self, x: &[f64], y: f64, w: f64) {
        let sw = w.sqrt();
        let mut row = [0.0; MAX_P];
        for (dst, src) in row.iter_mut().zip(x.iter()).take(self.p) {
            *dst = src * sw;
        }
        let mut yy = y * sw;
        for j in 0..self.p {
            let (a, b) = (self.r[j][j], row[j]);
            if b == 0.0 {
                continue;
            }
            // sqrt rather than hypot: ~3× faster, and the rows here are far from overflow.
            let h = (a * a + b * b).sqrt();
            let inv = 1.0 / h;
            let (c, s) = (a * inv, b * inv);
            for k in j..self.p {
                let (rk, xk) = (self.r[j][k], row[k]);
                self.r[j][k] = c * rk + s * xk;
                row[k] = -s * rk + c * xk;
            }
            let q = self.qty[j];
            self.qty[j] = c * q + s * yy;
            yy = -s * q + c * yy;
        }
        self.rss += yy * yy;
        self.rows += 1;
    }

    /// Rows added so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Back-substitute. `None` when the design is rank-deficient (a zero pivot relative to the
    /// largest), e.g. every point at the same N.
    pub fn solve(&self) -> Option<Solution> {
        let p = self.p;
        let big = (0..p).map(|j| self.r[j][j].abs()).fold(0.0, f64::max);
        if big.is_nan() || big <= 0.0 || (0..p).any(|j| self.r[j][j].abs() <= big * 1e-13) {
            return None;
        }
        let mut x = vec![0.0; p];
        for i in (0..p).rev() {
            let mut s = self.qty[i];
            for k in i + 1..p {
                s -= self.r[i][k] * x[k];
            }
            x[i] = s / self.r[i][i];
        }
        // R⁻¹ (upper triangular), then (RᵀR)⁻¹ = R⁻¹R⁻ᵀ.
        let mut inv = vec![vec![0.0; p]; p];
        for col in 0..p {
            for i in (0..=col).rev() {
                let mut s = if i == col { 1.0 } else { 0.0 };
                for k in i + 1..=col {
                    s -= self.r[i][k] * inv[k][col];
                }
                inv[i][col] = s / self.r[i][i];
            }
        }
        let mut cov = vec![vec![0.0; p]; p];
        for i in 0..p {
            for j in 0..p {
                cov[i][j] = (0..p).map(|k| inv[i][k] * inv[j][k]).sum();
            }
        }
        Some(Solution {
            x,
            cov_unscaled: cov,
            rss: self.rss,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_line_is_recovered() {
        // y = 2 + 3x at x = 0..5.
        let mut l = Lsq::new(2);
        for i in 0..6 {
            let x = i as f64;
            l.add(&[1.0, x], 2.0 + 3.0 * x, 1.0);
        }
        let s = l.solve().unwrap();
        assert!((s.x[0] - 2.0).abs() < 1e-12 && (s.x[1] - 3.0).abs() < 1e-12);
        assert!(s.rss < 1e-20);
        // Var(slope) for unit weights = 1/Σ(x−x̄)² = 1/17.5.
        assert!((s.cov_unscaled[1][1] - 1.0 / 17.5).abs() < 1e-12);
    }

    #[test]
    fn rank_deficient_is_none() {
        let mut l = Lsq::new(2);
        for _ in 0..4 {
            l.add(&[1.0, 2.0], 1.0, 1.0);
        }
        assert!(l.solve().is_none());
    }
}

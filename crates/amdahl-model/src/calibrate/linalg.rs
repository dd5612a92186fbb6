//! The few dense linear-algebra steps the fit needs, on matrices of a handful of columns (one per
//! fitted constant): normal equations, a Cholesky solve and an inverse. Small enough to keep here
//! rather than pull in a linear-algebra crate.

/// `JᵀJ` (p × p) and `Jᵀr` (p) of an n × p Jacobian stored row by row.
pub fn normal_equations(j: &[Vec<f64>], r: &[f64], p: usize) -> (Vec<Vec<f64>>, Vec<f64>) {
    let mut a = vec![vec![0.0; p]; p];
    let mut g = vec![0.0; p];
    for (row, &ri) in j.iter().zip(r) {
        for i in 0..p {
            g[i] += row[i] * ri;
            for k in 0..p {
                a[i][k] += row[i] * row[k];
            }
        }
    }
    (a, g)
}

/// Lower-triangular `L` with `L·Lᵀ = a`; `None` when `a` is not positive definite.
pub fn cholesky(a: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let p = a.len();
    let mut l = vec![vec![0.0; p]; p];
    for i in 0..p {
        for k in 0..=i {
            let s: f64 = (0..k).map(|m| l[i][m] * l[k][m]).sum();
            if i == k {
                let d = a[i][i] - s;
                if !(d > 0.0 && d.is_finite()) {
                    return None;
                }
                l[i][i] = d.sqrt();
            } else {
                l[i][k] = (a[i][k] - s) / l[k][k];
            }
        }
    }
    Some(l)
}

/// Solve `L·Lᵀ x = b`.
pub fn cholesky_solve(l: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let p = l.len();
    let mut y = vec![0.0; p];
    for i in 0..p {
        let s: f64 = (0..i).map(|k| l[i][k] * y[k]).sum();
        y[i] = (b[i] - s) / l[i][i];
    }
    let mut x = vec![0.0; p];
    for i in (0..p).rev() {
        let s: f64 = (i + 1..p).map(|k| l[k][i] * x[k]).sum();
        x[i] = (y[i] - s) / l[i][i];
    }
    x
}

/// `a⁻¹` of a positive-definite `a`, `None` when it is singular.
pub fn inverse(a: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let l = cholesky(a)?;
    let p = a.len();
    let mut inv = vec![vec![0.0; p]; p];
    for c in 0..p {
        let mut e = vec![0.0; p];
        e[c] = 1.0;
        let x = cholesky_solve(&l, &e);
        for r in 0..p {
            inv[r][c] = x[r];
        }
    }
    Some(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_of_a_known_matrix() {
        // [[4, 2], [2, 3]]⁻¹ = [[3, −2], [−2, 4]] / 8.
        let inv = inverse(&[vec![4.0, 2.0], vec![2.0, 3.0]]).unwrap();
        let want = [[0.375, -0.25], [-0.25, 0.5]];
        for r in 0..2 {
            for c in 0..2 {
                assert!((inv[r][c] - want[r][c]).abs() < 1e-12);
            }
        }
        assert!(inverse(&[vec![1.0, 1.0], vec![1.0, 1.0]]).is_none());
    }
}

//! The efficiency surface E(N, 1−α) = 1 / (N·(1−α) + α) (Végh, arXiv:2005.00872) and its
//! iso-efficiency curves, for plotting.
//!
//! For a fixed efficiency E the surface's level set is a closed-form curve: solving
//! E = 1/(N·s + 1 − s) for s gives s = (1−E) / (E·(N−1)) — the same expression as 1−α_eff from a
//! measured efficiency (`laws::serial_from_efficiency`), so contours are drawn exactly, not
//! interpolated from a grid.

use crate::scaling::laws::{amdahl_efficiency, serial_from_efficiency};

/// 1−α on the iso-efficiency curve E at processor count `n` (n > 1, 0 < e < 1).
pub fn iso_efficiency_serial(n: f64, e: f64) -> f64 {
    serial_from_efficiency(n, e)
}

/// `samples` points (N, 1−α) of the iso-efficiency curve E, log-spaced in N over [n_lo, n_hi]
/// (n_lo > 1). Points are exact; a renderer joins them with straight segments.
pub fn iso_efficiency_curve(e: f64, n_lo: f64, n_hi: f64, samples: usize) -> Vec<(f64, f64)> {
    let n_lo = n_lo.max(1.0 + 1e-9);
    let valid = e > 0.0 && e < 1.0 && n_hi > n_lo && samples >= 2;
    if !valid {
        return Vec::new();
    }
    let (a, b) = (n_lo.ln(), n_hi.ln());
    (0..samples)
        .map(|i| {
            let n = (a + (b - a) * i as f64 / (samples - 1) as f64).exp();
            (n, iso_efficiency_serial(n, e))
        })
        .collect()
}

/// Efficiency at (N, 1−α): the value the colour map shows.
pub fn efficiency(n: f64, serial: f64) -> f64 {
    amdahl_efficiency(n, serial)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn half_efficiency_contour_point() {
        // Closed form: on the 50 % curve at N = 1001, 1−α = 0.5/(0.5·1000) = 1e-3, and
        // E(1001, 1e-3) = 1/(1.001 + 0.999) = 0.5 exactly.
        let s = iso_efficiency_serial(1001.0, 0.5);
        assert!((s - 1e-3).abs() < 1e-15);
        assert!((efficiency(1001.0, s) - 0.5).abs() < 1e-12);
    }

    proptest! {
        #[test]
        fn every_curve_point_has_its_efficiency(e in 0.01f64..0.99, lo in 2.0f64..100.0, span in 10.0f64..1e6) {
            for (n, s) in iso_efficiency_curve(e, lo, lo * span, 17) {
                prop_assert!((efficiency(n, s) - e).abs() < 1e-9);
            }
        }
    }
}

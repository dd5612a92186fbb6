//! Closed-form scaling laws. All quantities are dimensionless; `n` is a processor count as `f64`
//! because real counts reach millions (TOP500 "Total Cores") and Karp–Flatt against a baseline
//! uses the ratio N/N0. `serial` is the non-parallelizable fraction 1−α.
//!
//! Sources: G. Amdahl (1967); J. L. Gustafson, "Reevaluating Amdahl's law", CACM 31(5) 1988;
//! A. H. Karp and H. P. Flatt, "Measuring parallel processor performance", CACM 33(5) 1990;
//! N. J. Gunther, "Guerrilla Capacity Planning" (2007), USL; J. Végh, "How deep the machine
//! learning can be", arXiv:2005.00872 (α_eff and the efficiency surface).
//!
//! Domain: callers validate inputs (n ≥ 1, speedup > 0, efficiency in (0, 1]); these functions
//! never panic and return NaN/inf outside the domain.

/// Amdahl speedup S = 1 / ((1−α) + α/N).
pub fn amdahl_speedup(n: f64, serial: f64) -> f64 {
    1.0 / (serial + (1.0 - serial) / n)
}

/// Efficiency surface E(N, 1−α) = S/N = 1 / (N·(1−α) + α)  (Végh, eq. for the surface).
pub fn amdahl_efficiency(n: f64, serial: f64) -> f64 {
    1.0 / (n * serial + (1.0 - serial))
}

/// Effective parallelism from a measured speedup: α_eff = N/(N−1) · (S−1)/S  (Végh).
pub fn alpha_eff_from_speedup(n: f64, speedup: f64) -> f64 {
    n / (n - 1.0) * (speedup - 1.0) / speedup
}

/// Non-parallel fraction from efficiency: 1−α_eff = (1−E) / (E·(N−1))  (Végh).
pub fn serial_from_efficiency(n: f64, efficiency: f64) -> f64 {
    (1.0 - efficiency) / (efficiency * (n - 1.0))
}

/// Karp–Flatt experimentally determined serial fraction e = (1/S − 1/p) / (1 − 1/p).
/// Against a baseline run at N0 ≠ 1 use S = T(N0)/T(N) and p = N/N0. Identical to 1−α_eff.
pub fn karp_flatt(p: f64, speedup: f64) -> f64 {
    (1.0 / speedup - 1.0 / p) / (1.0 - 1.0 / p)
}

/// Processor count at which Amdahl efficiency falls to 50 %: 1/(N·s + 1 − s) = ½ ⇒ N = (1+s)/s.
pub fn half_efficiency_n(serial: f64) -> f64 {
    (1.0 + serial) / serial
}

/// Upper bound of Amdahl speedup as N → ∞: S_max = 1/(1−α).
pub fn max_speedup(serial: f64) -> f64 {
    1.0 / serial
}

/// Gustafson's scaled speedup S = N − (1−α)·(N−1), the serial fraction measured on the parallel
/// system with the problem grown with N.
pub fn gustafson_speedup(n: f64, serial: f64) -> f64 {
    n - serial * (n - 1.0)
}

/// Universal Scalability Law, relative capacity C(N) = N / (1 + σ(N−1) + κ·N(N−1))  (Gunther).
pub fn usl_speedup(n: f64, sigma: f64, kappa: f64) -> f64 {
    n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
}

/// USL throughput peak N* = √((1−σ)/κ)  (Gunther); infinite when κ = 0.
pub fn usl_n_opt(sigma: f64, kappa: f64) -> f64 {
    ((1.0 - sigma) / kappa).sqrt()
}

/// Végh's accelerator what-if: the parallel part runs k× faster, the serial part does not.
/// New serial fraction (1−α)' = (1−α) / ((1−α) + α/k).
pub fn accelerate_serial(serial: f64, k: f64) -> f64 {
    serial / (serial + (1.0 - serial) / k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn alpha_from_speedup_and_efficiency_agree_with_karp_flatt() {
        // N = 64, S = 40: E = 0.625; every route gives the same serial fraction.
        let (n, s) = (64.0, 40.0);
        let from_s = 1.0 - alpha_eff_from_speedup(n, s);
        let from_e = serial_from_efficiency(n, s / n);
        let kf = karp_flatt(n, s);
        assert!((from_s - from_e).abs() < 1e-15);
        assert!((from_s - kf).abs() < 1e-15);
        // Hand value: (1/40 − 1/64)/(1 − 1/64) = 0.009375/0.984375 = 0.0095238…
        assert!((kf - 0.009_523_809_523_809_525).abs() < 1e-15);
    }

    #[test]
    fn half_efficiency_at_n_times_serial_near_one() {
        let s = 1e-3;
        assert!((amdahl_efficiency(half_efficiency_n(s), s) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn usl_peak_is_a_maximum() {
        // usl4j README example coefficients (σ ≈ 0.0267, κ ≈ 7.69e-4): peak at √((1−σ)/κ) = √(0.97328/7.6909e-4) = 35.57.
        let (sg, kp) = (0.02671591, 7.690945e-4);
        let n = usl_n_opt(sg, kp);
        assert!((n - 35.57).abs() < 0.01, "{n}");
        assert!(usl_speedup(n, sg, kp) > usl_speedup(n - 1.0, sg, kp));
        assert!(usl_speedup(n, sg, kp) > usl_speedup(n + 1.0, sg, kp));
    }

    proptest! {
        #[test]
        fn efficiency_round_trips(n in 2.0f64..1e7, serial in 1e-9f64..0.999) {
            let e = amdahl_efficiency(n, serial);
            prop_assert!(e > 0.0 && e <= 1.0);
            let back = serial_from_efficiency(n, e);
            prop_assert!(((back - serial) / serial).abs() < 1e-6);
            let s = amdahl_speedup(n, serial);
            prop_assert!(s <= n * (1.0 + 1e-12));
            prop_assert!(((1.0 - alpha_eff_from_speedup(n, s)) - serial).abs() / serial < 1e-6);
        }

        #[test]
        fn efficiency_falls_with_n_and_with_serial(n in 2.0f64..1e6, serial in 1e-6f64..0.5) {
            prop_assert!(amdahl_efficiency(n * 2.0, serial) < amdahl_efficiency(n, serial));
            prop_assert!(amdahl_efficiency(n, serial * 2.0) < amdahl_efficiency(n, serial));
        }

        #[test]
        fn faster_parallel_part_raises_serial_fraction(serial in 1e-9f64..0.9, k in 1.01f64..100.0) {
            prop_assert!(accelerate_serial(serial, k) > serial);
        }
    }
}

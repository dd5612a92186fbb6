//! Built-in measured series, embedded at build time so `amdahl fit --builtin` and `amdahl demo`
//! need no files.

use super::input::{parse_csv, Dataset};

/// The Cisco benchmark of B. Schwartz, *Practical Scalability Analysis with the Universal
/// Scalability Law* (VividCortex e-book, 2015): throughput at 1–32 concurrent clients, as typed
/// into usl4j's test suite (codahale/usl4j, `ModelTest.java`). Published USL fit:
/// σ = 0.02671591, κ = 7.690945e-4, λ = 995.6486, N_max = 35, X_max = 12341.
pub const CISCO_CSV: &str = include_str!("../../../../data/scaling/cisco_schwartz.csv");

/// Source line for [`cisco`], printed next to results.
pub const CISCO_SOURCE: &str =
    "built-in: Cisco benchmark, B. Schwartz, Practical Scalability Analysis with the USL (2015), via codahale/usl4j";

/// The embedded Cisco series. `None` only if the embedded file were broken, which the unit test
/// below rules out for every build.
pub fn cisco() -> Option<Dataset> {
    parse_csv(CISCO_CSV).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaling::analysis::{analyse, FitOptions};
    use crate::scaling::models::ModelKind;

    #[test]
    fn reproduces_the_published_usl_coefficients() {
        let d = cisco().unwrap();
        assert_eq!(d.series[0].rows.len(), 32);
        let r = analyse(&d, &FitOptions::default()).unwrap();
        let usl = r.series[0]
            .models
            .iter()
            .find(|m| m.model == ModelKind::Usl)
            .unwrap();
        // usl4j asserts agreement with the book within 0.02 % (relative); so do we.
        let close = |got: f64, want: f64| (got / want - 1.0).abs() < 2e-4;
        let v: Vec<f64> = usl.params.iter().map(|p| p.value).collect();
        assert!(close(v[0], 0.02671591), "sigma {}", v[0]);
        assert!(close(v[1], 7.690945e-4), "kappa {}", v[1]);
        assert!(close(v[2], 995.6486), "lambda {}", v[2]);
        // N_max = 35 (book, rounded down) and X_max = 12341 at N = 35.
        assert_eq!(usl.n_opt.unwrap().floor(), 35.0);
        let x35 = 1.0 / usl.time(35.0);
        assert!(close(x35, 12341.0), "X(35) {x35}");
    }
}

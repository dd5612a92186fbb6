//! Robust summary of repeated runs: median, extremes, quartiles, MAD, and outliers flagged by
//! Tukey's fences (J. W. Tukey, *Exploratory Data Analysis*, 1977, §2C): a value below
//! Q1 − 1.5·IQR or above Q3 + 1.5·IQR. Outliers are flagged, never dropped: the median that
//! every derived figure uses is already insensitive to them.

use amdahl_model::stats::{median, quantile, sorted};
use serde::{Deserialize, Serialize};

/// Tukey's fence multiplier (1.5 × IQR: "outside"; Tukey 1977).
pub const TUKEY_K: f64 = 1.5;

/// Fewer samples than this give quartiles too coarse to call anything an outlier.
pub const MIN_FOR_OUTLIERS: usize = 4;

/// Summary of one quantity over the repeats at one N.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    // Computed by amdahl_model::stats::quantile (a plain comment: doc comments become the JSON
    // Schema's description).
    /// Quartiles (linear interpolation between order statistics: Hyndman & Fan 1996, type 7).
    pub q1: f64,
    pub q3: f64,
    /// Median absolute deviation from the median (unscaled).
    pub mad: f64,
    pub samples: usize,
}

/// Summarise `xs`; None when empty.
pub fn summarise(xs: &[f64]) -> Option<Stats> {
    let s = sorted(xs);
    let (&min, &max) = (s.first()?, s.last()?);
    let mid = median(&s)?;
    let dev = sorted(&s.iter().map(|x| (x - mid).abs()).collect::<Vec<_>>());
    Some(Stats {
        median: mid,
        min,
        max,
        mean: s.iter().sum::<f64>() / s.len() as f64,
        q1: quantile(&s, 0.25)?,
        q3: quantile(&s, 0.75)?,
        mad: median(&dev)?,
        samples: s.len(),
    })
}

/// Which of `xs` lie outside Tukey's fences (all false below [`MIN_FOR_OUTLIERS`] samples).
pub fn outliers(xs: &[f64]) -> Vec<bool> {
    match summarise(xs) {
        Some(st) if xs.len() >= MIN_FOR_OUTLIERS => {
            let iqr = st.q3 - st.q1;
            let (lo, hi) = (st.q1 - TUKEY_K * iqr, st.q3 + TUKEY_K * iqr);
            xs.iter().map(|&x| x < lo || x > hi).collect()
        }
        _ => vec![false; xs.len()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_quartiles_and_mad() {
        // Sorted 1..=5: median 3, Q1 2, Q3 4 (type 7), |x−3| = 2,1,0,1,2 → MAD 1.
        let s = summarise(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.mean), (3.0, 1.0, 5.0, 3.0));
        assert_eq!((s.q1, s.q3, s.mad, s.samples), (2.0, 4.0, 1.0, 5));
        // Even count: median between the middle two.
        assert_eq!(summarise(&[1.0, 2.0, 3.0, 10.0]).unwrap().median, 2.5);
        assert!(summarise(&[]).is_none());
    }

    #[test]
    fn tukey_fences_flag_the_straggler_only() {
        // 1.00, 1.01, 1.02, 1.03, 2.0: Q1 1.01, Q3 1.03, IQR 0.02, upper fence 1.06.
        let f = outliers(&[1.00, 1.01, 2.0, 1.02, 1.03]);
        assert_eq!(f, [false, false, true, false, false]);
        // Three samples: too few to judge.
        assert_eq!(outliers(&[1.0, 1.0, 9.0]), [false; 3]);
    }

    proptest::proptest! {
        #[test]
        fn median_lies_between_min_and_max(xs in proptest::collection::vec(-1e6f64..1e6, 1..20)) {
            let s = summarise(&xs).unwrap();
            proptest::prop_assert!(s.min <= s.median && s.median <= s.max);
            proptest::prop_assert!(s.q1 <= s.median && s.median <= s.q3);
            proptest::prop_assert!(s.mad >= 0.0);
        }
    }
}

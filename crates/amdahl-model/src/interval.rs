//! Prediction intervals from signed relative errors (predicted / measured − 1 of a throughput,
//! positive = the model optimistic: the validation sets' convention; a calibration's
//! leave-one-out residuals use the same one).
//!
//! Method (docs/methodology.md, "Prediction intervals"): split conformal prediction on the log
//! ratio (Vovk, Gammerman & Shafer 2005; Lei et al. 2018, "Distribution-free predictive inference
//! for regression", JASA 113, §2.2). With u = ln(1 + e) for each of n reference errors, centre
//! m = median(u) (robust to the few runs of software far off the model) and scores sᵢ = |uᵢ − m|, the band for a new run is m ± s₍k₎ with
//! k = ⌈(n + 1)·level⌉, which covers a new exchangeable run with probability ≥ level. When
//! k > n (fewer than level/(1 − level) runs: 9 at 90 %) no finite band has that guarantee; the
//! caller then takes a broader class, or the widest score (k = n, guaranteed n/(n + 1)) and says
//! so. Intervals are asymmetric in the figure itself and can exclude the prediction when the
//! class is biased: the centre is the class's median error, the value stays the model's.

use serde::{Deserialize, Serialize};

/// The default level of every interval amdahl prints.
pub const LEVEL: f64 = 0.9;

/// A figure and its prediction interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Interval {
    /// The model's prediction.
    pub value: f64,
    /// The band's ends; `None` (null) when the class has no validation data.
    pub low: Option<f64>,
    pub high: Option<f64>,
    /// Coverage the band is built for (0.9).
    pub level: f64,
    /// Where the band comes from: the class of reference runs, their number and the rule used
    /// (or why there is no band).
    pub basis: String,
}

/// How a quantity relates to the throughput the signed errors are defined on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A rate (tokens/s, TFLOP/s) or any figure whose error is predicted / measured − 1
    /// (power, energy): measured = predicted / (1 + e).
    Rate,
    /// A time (step time, TTFT, TPOT): the inverse of a rate, measured = predicted · (1 + e).
    Time,
}

/// The band of log errors learned from reference runs: ln(1 + e) ∈ [centre − half, centre + half].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band {
    pub centre: f64,
    pub half: f64,
    /// Reference runs.
    pub n: usize,
    /// Whether k = ⌈(n + 1)·level⌉ ≤ n (the finite-sample guarantee holds); false: the widest
    /// score was taken (coverage guaranteed only n / (n + 1)).
    pub guaranteed: bool,
}

/// Runs a class needs for the finite-sample rank to exist at `level`: the least n with
/// ⌈(n + 1)·level⌉ ≤ n.
pub fn min_runs(level: f64) -> usize {
    (1..10_000)
        .find(|&n| rank(n, level) <= n)
        .unwrap_or(usize::MAX)
}

/// k = ⌈(n + 1)·level⌉, guarded against the float just above an integer (0.9 × 10 = 9.000…2).
fn rank(n: usize, level: f64) -> usize {
    ((n as f64 + 1.0) * level - 1e-9).ceil().max(1.0) as usize
}

impl Band {
    /// The band of `errors` (signed relative errors) at `level`; `None` for no errors, or for
    /// an error ≤ −100 % or not finite (no log ratio). Fewer runs than [`min_runs`] give the
    /// widest score, marked not `guaranteed`.
    pub fn from_errors(errors: &[f64], level: f64) -> Option<Band> {
        if errors.is_empty() || !(level > 0.0 && level < 1.0) {
            return None;
        }
        let logs: Vec<f64> = errors.iter().map(|e| (1.0 + e).ln()).collect::<Vec<_>>();
        if logs.iter().any(|u| !u.is_finite()) {
            return None;
        }
        let n = logs.len();
        let centre = crate::stats::median(&crate::stats::sorted(&logs)).unwrap_or(0.0);
        let mut scores: Vec<f64> = logs.iter().map(|u| (u - centre).abs()).collect();
        scores.sort_by(f64::total_cmp);
        let k = rank(n, level);
        let guaranteed = k <= n;
        let half = scores[k.min(n) - 1];
        Some(Band {
            centre,
            half,
            n,
            guaranteed,
        })
    }

    /// Whether a run with signed error `e` falls in the band.
    pub fn covers(&self, e: f64) -> bool {
        let u = (1.0 + e).ln();
        u >= self.centre - self.half - 1e-12 && u <= self.centre + self.half + 1e-12
    }

    /// The interval of a predicted figure: where its measured value lies.
    pub fn interval(
        &self,
        value: f64,
        direction: Direction,
        level: f64,
        basis: String,
    ) -> Interval {
        let (lo, hi) = (self.centre - self.half, self.centre + self.half);
        let (low, high) = match direction {
            // measured = predicted / (1 + e): the optimistic end (hi) gives the low figure.
            Direction::Rate => (value * (-hi).exp(), value * (-lo).exp()),
            Direction::Time => (value * lo.exp(), value * hi.exp()),
        };
        Interval {
            value,
            low: Some(low),
            high: Some(high),
            level,
            basis,
        }
    }

    /// A phrase for `basis`: the runs and the rule.
    pub fn describe(&self, class: &str) -> String {
        if self.guaranteed {
            format!("{class}: {} validation runs, split conformal", self.n)
        } else {
            format!(
                "{class}: {} validation runs, the widest error seen (fewer than {} runs: \
                 covers with probability ≥ {:.0} %, not the level)",
                self.n,
                min_runs(LEVEL),
                100.0 * self.n as f64 / (self.n as f64 + 1.0)
            )
        }
    }
}

impl Interval {
    /// A figure with no band: its class has no validation data.
    pub fn none(value: f64, basis: String) -> Interval {
        Interval {
            value,
            low: None,
            high: None,
            level: LEVEL,
            basis,
        }
    }

    /// Whether the interval has a band.
    pub fn has_band(&self) -> bool {
        self.low.is_some_and(f64::is_finite) && self.high.is_some_and(f64::is_finite)
    }
}

/// One class of reference runs in a fallback chain, used when it has at least `min` runs.
pub struct Class<'a> {
    pub name: String,
    pub errors: &'a [f64],
    pub min: usize,
}

/// The band of the first class of `chain` with at least its `min` runs (by the finite-sample
/// rank when it has [`min_runs`], else by its widest error, marked). `Err` with the reason when
/// none qualifies: "CLASS: no validation data", naming the finest class.
pub fn first_band(chain: &[Class<'_>], level: f64) -> Result<(Band, String), String> {
    for c in chain {
        if c.errors.len() >= c.min.max(1) {
            if let Some(b) = Band::from_errors(c.errors, level) {
                return Ok((b, b.describe(&c.name)));
            }
        }
    }
    Err(match chain.first() {
        Some(c) => format!("{}: no validation data", c.name),
        None => "no validation data".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finite_sample_rank_needs_nine_runs_at_ninety_percent() {
        // ⌈(n + 1)·0.9⌉ ≤ n first at n = 9 (⌈9⌉ = 9); at n = 8 it is ⌈8.1⌉ = 9 > 8.
        assert_eq!(min_runs(0.9), 9);
        assert_eq!(min_runs(0.8), 4);
        assert_eq!(rank(9, 0.9), 9);
        assert_eq!(rank(19, 0.9), 18);
    }

    #[test]
    fn direction_puts_the_optimistic_error_on_the_right_side() {
        // Every reference run is 25 % optimistic (predicted throughput 1.25 × measured): a
        // predicted 100 tokens/s is measured 80; a predicted 10 s step is measured 12.5 s.
        let b = Band::from_errors(&[0.25; 10], 0.9).expect("band");
        assert!(b.guaranteed && b.half.abs() < 1e-12);
        let rate = b.interval(100.0, Direction::Rate, 0.9, String::new());
        let near = |v: Option<f64>, want: f64| v.is_some_and(|v| (v - want).abs() < 1e-9);
        assert!(near(rate.low, 80.0) && near(rate.high, 80.0));
        let time = b.interval(10.0, Direction::Time, 0.9, String::new());
        assert!(near(time.low, 12.5) && near(time.high, 12.5));
    }

    #[test]
    fn band_takes_the_kth_score_and_covers_its_runs() {
        // Ten errors symmetric in log about 0: scores ln-spaced; k = ⌈11 × 0.9⌉ = 10 = n: the
        // widest. At 80 %: k = ⌈8.8⌉ = 9, the ninth of ten.
        let errors: Vec<f64> = (1..=5)
            .flat_map(|i| {
                let u = 0.01 * f64::from(i);
                [u.exp() - 1.0, (-u).exp() - 1.0]
            })
            .collect();
        let b = Band::from_errors(&errors, 0.9).expect("band");
        assert!(b.centre.abs() < 1e-12 && (b.half - 0.05).abs() < 1e-12);
        assert!(errors.iter().all(|&e| b.covers(e)));
        let b80 = Band::from_errors(&errors, 0.8).expect("band");
        assert!((b80.half - 0.05).abs() < 1e-12, "{}", b80.half);
        let b50 = Band::from_errors(&errors, 0.5).expect("band");
        assert!((b50.half - 0.03).abs() < 1e-12, "{}", b50.half);
        let i = b.interval(100.0, Direction::Rate, 0.9, String::new());
        let near = |v: Option<f64>, want: f64| v.is_some_and(|v| (v - want).abs() < 1e-9);
        assert!(near(i.low, 100.0 * (-0.05f64).exp()));
        assert!(near(i.high, 100.0 * 0.05f64.exp()));
    }

    #[test]
    fn small_classes_are_marked_and_empty_ones_refused() {
        let b = Band::from_errors(&[0.1, -0.1, 0.0], 0.9).expect("band");
        assert!(!b.guaranteed);
        assert!(b.describe("x").contains("75 %"), "{}", b.describe("x"));
        assert!(Band::from_errors(&[], 0.9).is_none());
        assert!(Band::from_errors(&[-1.0], 0.9).is_none());
        assert!(Band::from_errors(&[f64::NAN], 0.9).is_none());
        let empty: [f64; 0] = [];
        let few = [0.1, 0.2];
        let many = [0.0; 12];
        let class = |name: &str, errors, min| Class {
            name: name.into(),
            errors,
            min,
        };
        let chain = [class("fine", &few[..], 9), class("broad", &many[..], 9)];
        let (_, basis) = first_band(&chain, 0.9).expect("band");
        assert!(basis.starts_with("broad: 12"), "{basis}");
        let chain = [class("fine", &few[..], 9), class("fine", &few[..], 2)];
        let (b, _) = first_band(&chain, 0.9).expect("band");
        assert!(!b.guaranteed && b.n == 2);
        let chain = [class("fsdp", &empty[..], 9)];
        assert_eq!(
            first_band(&chain, 0.9).err().as_deref(),
            Some("fsdp: no validation data")
        );
        assert!(!Interval::none(1.0, String::new()).has_band());
    }
}

//! Timing: warm-up runs, then repeats, summarised as min / median / max.
//!
//! Min is the classic micro-benchmark estimate (least disturbed run, as in STREAM's "best
//! rate"); median is robust to a noisy neighbour; max shows how noisy the machine was.

use amdahl_model::{stats, units::Seconds};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Summary of repeated timings of one kernel.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stats {
    pub min: Seconds,
    pub median: Seconds,
    pub max: Seconds,
    pub repeats: usize,
}

impl Stats {
    /// Summarise timings; `None` when there are none (or any is not finite).
    pub fn from_samples(samples: &[f64]) -> Option<Self> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite()) {
            return None;
        }
        let v = stats::sorted(samples);
        Some(Self {
            min: Seconds(*v.first()?),
            median: Seconds(stats::median(&v)?),
            max: Seconds(*v.last()?),
            repeats: v.len(),
        })
    }

    /// Rates (work per second) derived from the timings: (fastest, median, slowest).
    pub fn rates(&self, work: f64) -> Rate {
        Rate {
            max: work / self.min.0,
            median: work / self.median.0,
            min: work / self.max.0,
        }
    }
}

/// A throughput summary in work units per second (FLOP/s, OP/s or B/s).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rate {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

/// Run `f` `warmup` times untimed, then `repeats` times timed (at least once).
pub fn measure(warmup: usize, repeats: usize, mut f: impl FnMut()) -> Stats {
    for _ in 0..warmup {
        f();
    }
    // Bounded: the CLI refuses more than MAX_REPEATS; a library caller gets the cap.
    let repeats = repeats.clamp(1, crate::machine::MAX_REPEATS);
    let samples: Vec<f64> = (0..repeats)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    // Elapsed times are finite and there is at least one sample.
    Stats::from_samples(&samples).unwrap_or(Stats {
        min: Seconds(f64::NAN),
        median: Seconds(f64::NAN),
        max: Seconds(f64::NAN),
        repeats: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        let s = Stats::from_samples(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.min.0, s.median.0, s.max.0), (1.0, 2.0, 3.0));
        let s = Stats::from_samples(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.median.0, 2.5);
        assert!(Stats::from_samples(&[]).is_none());
        assert!(Stats::from_samples(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn rates_invert_times() {
        let s = Stats::from_samples(&[1.0, 2.0, 4.0]).unwrap();
        let r = s.rates(8.0);
        assert_eq!((r.max, r.median, r.min), (8.0, 4.0, 2.0));
    }
}

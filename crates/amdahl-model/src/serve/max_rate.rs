//! `amdahl serve --max-rate`: the highest request rate one configuration serves within its SLOs
//! — MLPerf Inference's server-scenario result (the rate is raised until the p99 of TTFT or TPOT
//! passes its limit; Reddi et al. 2020) and the capacity Vidur's search reports. A rate passes
//! when the run's queue stays bounded ([`super::result::is_overloaded`]) and the p99 TTFT and
//! TPOT are within the SLOs given (with none given, the bounded queue alone: the rate the
//! configuration sustains).
//!
//! Every rate draws the same requests: one seed, so the arrival times at rate r are those at
//! rate 1 divided by r, and the lengths are the same draws. The search starts at a guess
//! (`--rate`, default 1; the validation set starts at the published rate), doubles or halves it
//! until one run passes and another fails, then bisects between them (geometrically) until they
//! are within [`TOLERANCE`] of each other.
//! Latency is not monotone in the rate for every seed, so what is reported is a rate that passed
//! with the failing rate just above it, both printed with every rate tried.

use serde::{Deserialize, Serialize};

/// The schema of `serve --max-rate --json`.
pub const SERVE_MAX_RATE_SCHEMA: &str = "amdahl.serve-max-rate/1";

/// The bisection stops when the failing rate is within this fraction above the passing one:
/// below the 5 % step the validation set uses to call a figure capacity-bound.
pub const TOLERANCE: f64 = 0.01;

/// Doublings of the first guess before the search says the limit is above it (2^30 of it), and
/// halvings before it says no rate passes (1/1024 of it: a run that fails at a thousandth of
/// the guess fails on a lone request's latency, which no lower rate improves).
const MAX_DOUBLINGS: u32 = 30;
const MAX_HALVINGS: u32 = 10;

/// One rate tried: what its run gave and whether it passed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RateProbe {
    /// Requests per second offered.
    pub rate_rps: f64,
    pub requests: u64,
    pub completed_requests_per_s: f64,
    pub ttft_p99_s: f64,
    /// `None` when no request produced two tokens.
    pub tpot_p99_s: Option<f64>,
    /// The GPUs' energy of the run over its requests, J (idle replicas included, as `serve
    /// --search` charges it).
    pub energy_per_request_j: f64,
    /// The queue grew without bound.
    pub overloaded: bool,
    /// Queue bounded and every SLO given met.
    pub passes: bool,
}

/// The result of the search: the highest passing rate found and every rate tried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MaxRate {
    pub schema: String,
    /// The configuration, as `amdahl serve` describes it.
    pub model: String,
    pub system: String,
    pub tp: u32,
    pub pp: u32,
    pub replicas: u32,
    pub gpus: u64,
    pub precision: String,
    pub kv_precision: String,
    pub engine: String,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    /// The requests at every rate: lengths, arrival process, duration.
    pub workload: String,
    pub seed: u64,
    pub slo_ttft_s: Option<f64>,
    pub slo_tpot_s: Option<f64>,
    /// The highest rate that passed; `None` when even the lowest tried failed (an SLO below what
    /// one request alone gets).
    pub max_rate_rps: Option<f64>,
    /// The lowest rate that failed; `None` when none did up to 2^30 times the first guess.
    pub first_failing_rps: Option<f64>,
    /// Every rate tried, by rate.
    pub probes: Vec<RateProbe>,
}

/// A run at `rate` judged against the SLOs: p99 TTFT and TPOT within those given, the queue
/// bounded.
pub fn judge(
    run: &super::Run,
    client: &super::Client,
    rate: f64,
    slo_ttft_s: Option<f64>,
    slo_tpot_s: Option<f64>,
) -> RateProbe {
    let p99 = |xs: Vec<f64>| crate::stats::quantile(&crate::stats::sorted(&xs), 0.99);
    let recs = &run.records;
    let ttft = p99(recs.iter().map(|r| r.ttft_s).collect()).unwrap_or(f64::NAN);
    let tpot = p99(recs.iter().filter_map(|r| r.tpot_s).collect());
    let overloaded = super::result::is_overloaded(run, client);
    let within = |slo: Option<f64>, x: Option<f64>| match (slo, x) {
        (Some(s), Some(x)) => x <= s,
        _ => true,
    };
    let duration = (run.end_s - run.first_arrival_s).max(1e-12);
    RateProbe {
        rate_rps: rate,
        requests: recs.len() as u64,
        completed_requests_per_s: recs.len() as f64 / duration,
        ttft_p99_s: ttft,
        tpot_p99_s: tpot,
        energy_per_request_j: (run.energy_busy_j + run.energy_idle_j) / recs.len().max(1) as f64,
        overloaded,
        passes: !overloaded && within(slo_ttft_s, Some(ttft)) && within(slo_tpot_s, tpot),
    }
}

/// What [`search`] found: the highest passing rate and the lowest failing one (`None` where it
/// ran out of doublings or halvings), and every probe, by rate.
#[derive(Debug, Clone, PartialEq)]
pub struct Bracket {
    pub passing: Option<f64>,
    pub failing: Option<f64>,
    pub probes: Vec<RateProbe>,
}

/// Search the rate with `probe` (which simulates one rate) from the guess `start`, doubling or
/// halving it to a bracket.
pub fn search<E>(start: f64, probe: impl FnMut(f64) -> Result<RateProbe, E>) -> Result<Bracket, E> {
    search_by(start, 2.0, probe)
}

/// [`search`] with the bracket found by steps of `factor` (> 1): a guess known to be near the
/// answer (a benchmark's published rate) needs fewer runs with a smaller one. The halvings'
/// limit is the same fraction of the guess, 1/1024.
pub fn search_by<E>(
    start: f64,
    factor: f64,
    mut probe: impl FnMut(f64) -> Result<RateProbe, E>,
) -> Result<Bracket, E> {
    let max_halvings = (f64::from(MAX_HALVINGS) * 2f64.ln() / factor.ln()).ceil() as u32;
    let max_doublings = (f64::from(MAX_DOUBLINGS) * 2f64.ln() / factor.ln()).ceil() as u32;
    let mut probes = Vec::new();
    let mut run = |rate: f64, probes: &mut Vec<RateProbe>| -> Result<bool, E> {
        let p = probe(rate)?;
        let passes = p.passes;
        probes.push(p);
        Ok(passes)
    };
    let (mut lo, mut hi) = (None, None);
    let (mut rate, mut doublings, mut halvings) = (start, 0, 0);
    loop {
        if run(rate, &mut probes)? {
            lo = Some(rate);
            if hi.is_some() || doublings == max_doublings {
                break;
            }
            rate *= factor;
            doublings += 1;
        } else {
            hi = Some(rate);
            if lo.is_some() || halvings == max_halvings {
                break;
            }
            rate /= factor;
            halvings += 1;
        }
    }
    while let (Some(l), Some(h)) = (lo, hi) {
        if h <= l * (1.0 + TOLERANCE) {
            break;
        }
        let mid = (l * h).sqrt();
        if run(mid, &mut probes)? {
            lo = Some(mid);
        } else {
            hi = Some(mid);
        }
    }
    probes.sort_by(|a, b| a.rate_rps.total_cmp(&b.rate_rps));
    Ok(Bracket {
        passing: lo,
        failing: hi,
        probes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe_below(limit: f64) -> impl FnMut(f64) -> Result<RateProbe, ()> {
        move |rate| {
            Ok(RateProbe {
                rate_rps: rate,
                requests: 1,
                completed_requests_per_s: rate.min(limit),
                ttft_p99_s: 0.1,
                tpot_p99_s: None,
                energy_per_request_j: 1.0,
                overloaded: rate > limit,
                passes: rate <= limit,
            })
        }
    }

    #[test]
    fn the_search_brackets_the_limit_within_the_tolerance_from_either_side() {
        for start in [0.01, 3.0, 37.0, 1e4] {
            let b = search(start, probe_below(37.0)).unwrap();
            let (lo, hi, probes) = (b.passing.unwrap(), b.failing.unwrap(), b.probes);
            assert!(lo <= 37.0 && hi > 37.0, "{start}: {lo} {hi}");
            assert!(hi <= lo * (1.0 + TOLERANCE), "{start}: {lo} {hi}");
            // Ordered by rate, and the reported pair are among the rates tried.
            assert!(probes.windows(2).all(|w| w[0].rate_rps <= w[1].rate_rps));
            assert!(probes.iter().any(|p| p.rate_rps == lo && p.passes));
            assert!(probes.iter().any(|p| p.rate_rps == hi && !p.passes));
            // Doubling or halving to the bracket, then about log2(ratio / 1 %) bisections.
            assert!(probes.len() <= 2 + 14 + 8, "{start}: {}", probes.len());
        }
        // From a guess near the answer, steps of 1.25 bracket it in two runs.
        let b = search_by(36.0, 1.25, probe_below(37.0)).unwrap();
        assert!(b.failing.unwrap() <= b.passing.unwrap() * (1.0 + TOLERANCE));
        assert!(b.probes.len() <= 2 + 5, "{}", b.probes.len());
    }

    #[test]
    fn nothing_passing_or_nothing_failing_is_said() {
        let b = search(1.0, probe_below(0.0)).unwrap();
        assert_eq!((b.passing, b.failing.is_some()), (None, true));
        assert_eq!(b.probes.len() as u32, MAX_HALVINGS + 1);
        let b = search(1.0, probe_below(f64::INFINITY)).unwrap();
        assert_eq!((b.passing.is_some(), b.failing), (true, None));
    }

    #[test]
    fn a_failing_probe_stops_the_search_with_its_error() {
        let mut n = 0;
        let r = search(1.0, |_| {
            n += 1;
            if n == 3 {
                Err("broke")
            } else {
                Ok(RateProbe {
                    rate_rps: 1.0,
                    requests: 1,
                    completed_requests_per_s: 1.0,
                    ttft_p99_s: 0.1,
                    tpot_p99_s: None,
                    energy_per_request_j: 1.0,
                    overloaded: false,
                    passes: true,
                })
            }
        });
        assert_eq!(r.unwrap_err(), "broke");
    }
}

//! Rendering of `amdahl serve --max-rate` ([`MaxRate`]): the highest rate within the SLOs, why
//! the rate just above it failed, and every rate tried. Pure functions.

use crate::catalog::csv_rows;
use crate::sig;
use crate::table::Table;
use amdahl_model::serve::max_rate::{MaxRate, RateProbe};
use std::fmt::Write;

fn ms(s: f64) -> String {
    sig(s * 1e3, 3)
}

/// Why a rate failed: the queue, or each SLO it passed.
fn why_failed(r: &MaxRate, p: &RateProbe) -> String {
    if p.overloaded {
        return "the queue grew without bound".into();
    }
    let over = |name: &str, x: Option<f64>, slo: Option<f64>| {
        x.zip(slo)
            .filter(|(x, s)| x > s)
            .map(|(x, s)| format!("{name} {} ms over {} ms", sig(x * 1e3, 4), sig(s * 1e3, 4)))
    };
    [
        over("p99 TTFT", Some(p.ttft_p99_s), r.slo_ttft_s),
        over("p99 TPOT", p.tpot_p99_s, r.slo_tpot_s),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(", ")
}

fn slos(r: &MaxRate) -> String {
    let slo = |x: Option<f64>, name: &str| x.map(|v| format!("{name} ≤ {} ms", ms(v)));
    let given: Vec<String> = [slo(r.slo_ttft_s, "p99 TTFT"), slo(r.slo_tpot_s, "p99 TPOT")]
        .into_iter()
        .flatten()
        .collect();
    if given.is_empty() {
        "none given: a rate passes when its queue stays bounded".into()
    } else {
        given.join(", ")
    }
}

fn headline(r: &MaxRate) -> String {
    let probe = |rate: f64| r.probes.iter().find(|p| p.rate_rps == rate);
    let what = if r.slo_ttft_s.is_none() && r.slo_tpot_s.is_none() {
        "highest rate with a bounded queue"
    } else {
        "highest rate within the SLOs"
    };
    match (r.max_rate_rps, r.first_failing_rps) {
        (Some(lo), Some(hi)) => format!(
            "{what}: {} requests/s, {} J per request (GPU) there ({} requests/s failed: {})",
            sig(lo, 4),
            probe(lo).map_or("-".into(), |p| sig(p.energy_per_request_j, 3)),
            sig(hi, 4),
            probe(hi).map_or(String::new(), |p| why_failed(r, p))
        ),
        (Some(lo), None) => format!(
            "every rate tried passed, up to {} requests/s: the configuration's limit is above it",
            sig(lo, 4)
        ),
        (None, Some(hi)) => format!(
            "no rate passed, down to {} requests/s ({}): an SLO is below what a lone request gets",
            sig(hi, 4),
            probe(hi).map_or(String::new(), |p| why_failed(r, p))
        ),
        (None, None) => "no rate was tried".into(),
    }
}

pub fn serve_max_rate_table(r: &MaxRate) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} on {} × {}: tp {} × pp {} × {} replica(s); weights {}, KV {}, {}, max-num-seqs {}, \
         max-num-batched-tokens {}",
        r.model,
        r.gpus,
        r.system,
        r.tp,
        r.pp,
        r.replicas,
        r.precision,
        r.kv_precision,
        r.engine,
        r.max_num_seqs,
        r.max_num_batched_tokens
    );
    let _ = writeln!(out, "workload: {} (seed {})", r.workload, r.seed);
    let _ = writeln!(out, "SLOs: {}", slos(r));
    let _ = writeln!(out, "{}\n", headline(r));
    let mut t = Table::new([
        "rate/s",
        "completed/s",
        "TTFT p99 ms",
        "TPOT p99 ms",
        "J/request",
        "queue",
        "within",
    ]);
    for p in &r.probes {
        t.row([
            sig(p.rate_rps, 4),
            sig(p.completed_requests_per_s, 4),
            ms(p.ttft_p99_s),
            p.tpot_p99_s.map_or("-".into(), ms),
            sig(p.energy_per_request_j, 3),
            if p.overloaded { "unbounded" } else { "bounded" }.into(),
            if p.passes { "yes" } else { "no" }.into(),
        ]);
    }
    out.push_str(&t.render());
    out
}

pub fn serve_max_rate_csv(r: &MaxRate) -> Result<String, csv::Error> {
    let opt = |x: Option<f64>| x.map_or(String::new(), |v| v.to_string());
    csv_rows(
        &[
            "rate_rps",
            "requests",
            "completed_requests_per_s",
            "ttft_p99_s",
            "tpot_p99_s",
            "energy_per_request_j",
            "overloaded",
            "passes",
            "max_rate_rps",
        ],
        r.probes.iter().map(|p| {
            vec![
                p.rate_rps.to_string(),
                p.requests.to_string(),
                p.completed_requests_per_s.to_string(),
                p.ttft_p99_s.to_string(),
                opt(p.tpot_p99_s),
                p.energy_per_request_j.to_string(),
                p.overloaded.to_string(),
                p.passes.to_string(),
                opt(r.max_rate_rps),
            ]
        }),
    )
}

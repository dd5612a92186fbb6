//! Rendering of `amdahl serve --search` ([`ServeSearch`]): the two picks (least energy per
//! request, fewest GPUs), the feasible configurations by energy, and the Pareto front of p99
//! end-to-end latency against energy per request. Pure functions.

use crate::catalog::csv_rows;
use crate::sig;
use crate::table::{Align, Table};
use amdahl_model::serve::search::{ServeCandidate, ServeSearch};
use std::fmt::Write;

fn ms(s: f64) -> String {
    sig(s * 1e3, 3)
}

fn candidates_table(cs: &[ServeCandidate]) -> String {
    let mut t = Table::new([
        "tp",
        "replicas",
        "GPUs",
        "weights",
        "max seqs",
        "cap W",
        "TTFT p99 ms",
        "TPOT p99 ms",
        "e2e p99 s",
        "J/request",
    ])
    .align(3, Align::Left);
    for c in cs {
        t.row([
            c.tp.to_string(),
            c.replicas.to_string(),
            c.gpus.to_string(),
            c.precision.name().into(),
            c.max_num_seqs.to_string(),
            c.power_cap_w.map_or("-".into(), |w| format!("{w:.0}")),
            ms(c.ttft_p99_s),
            c.tpot_p99_s.map_or("-".into(), ms),
            sig(c.e2e_p99_s, 3),
            sig(c.energy_per_request_j, 3),
        ]);
    }
    t.render()
}

pub fn serve_search_table(s: &ServeSearch) -> String {
    let mut out = String::new();
    let slo = |x: Option<f64>, name: &str| x.map(|v| format!("{name} ≤ {} ms", ms(v)));
    let slos: Vec<String> = [slo(s.slo_ttft_s, "p99 TTFT"), slo(s.slo_tpot_s, "p99 TPOT")]
        .into_iter()
        .flatten()
        .collect();
    let _ = writeln!(
        out,
        "{} on {}: {}, {} requests; {} configurations simulated, {} {}{}",
        s.model,
        s.system,
        s.workload,
        s.requests,
        s.evaluated,
        s.feasible,
        // A closed loop has no rate to fall behind: every configuration serves its N users.
        match s.client.max_concurrency {
            Some(n) => format!("serve the {n} in flight"),
            None => "sustain the rate".into(),
        },
        if slos.is_empty() {
            String::new()
        } else {
            format!(" and meet {}", slos.join(", "))
        }
    );
    let _ = writeln!(
        out,
        "least energy: {} — {} J per request (GPU, idle replicas included)",
        s.cheapest_energy.describe(),
        sig(s.cheapest_energy.energy_per_request_j, 3)
    );
    let _ = writeln!(
        out,
        "fewest GPUs:  {} — {} J per request\n",
        s.fewest_gpus.describe(),
        sig(s.fewest_gpus.energy_per_request_j, 3)
    );
    out.push_str("feasible configurations, least energy per request first\n");
    out.push_str(&candidates_table(&s.ranked));
    out.push_str("\nPareto front: p99 end-to-end latency against energy per request\n");
    out.push_str(&candidates_table(&s.pareto));
    if !s.skipped.is_empty() {
        let _ = writeln!(
            out,
            "\n{} configurations not simulated (they do not fit); the first: {}",
            s.skipped.len(),
            s.skipped[0]
        );
    }
    out
}

pub fn serve_search_csv(s: &ServeSearch) -> Result<String, csv::Error> {
    let opt = |x: Option<f64>| x.map_or(String::new(), |v| v.to_string());
    csv_rows(
        &[
            "tp",
            "pp",
            "replicas",
            "gpus",
            "precision",
            "max_num_seqs",
            "power_cap_w",
            "ttft_p99_s",
            "tpot_p99_s",
            "e2e_p99_s",
            "completed_requests_per_s",
            "energy_per_request_j",
            "pareto",
        ],
        s.ranked.iter().map(|c| {
            vec![
                c.tp.to_string(),
                c.pp.to_string(),
                c.replicas.to_string(),
                c.gpus.to_string(),
                c.precision.name().into(),
                c.max_num_seqs.to_string(),
                opt(c.power_cap_w),
                c.ttft_p99_s.to_string(),
                opt(c.tpot_p99_s),
                c.e2e_p99_s.to_string(),
                c.completed_requests_per_s.to_string(),
                c.energy_per_request_j.to_string(),
                s.pareto.contains(c).to_string(),
            ]
        }),
    )
}

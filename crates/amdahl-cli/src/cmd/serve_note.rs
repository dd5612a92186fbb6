//! One line under `serve`'s table on how far its latencies and throughput can be trusted: the
//! serving validation set's accuracy claim, from the committed summary (a test keeps it equal to
//! what `amdahl catalog validation --serve` computes afresh). Silenced by `--quiet`; JSON and CSV
//! carry no note.

use amdahl_model::serve::validation::{serve_claim_committed, ServeSummary};

pub fn note_serve_accuracy() {
    if crate::output::quiet() {
        return;
    }
    let Ok(claim) = serve_claim_committed() else {
        return; // `amdahl catalog validation --serve` reports a broken file.
    };
    let (Some(p50), Some(p99), Some(tput)) = (
        claim.class("p50"),
        claim.class("p99"),
        claim.class("throughput"),
    ) else {
        return;
    };
    let pct = |x: f64| format!("{:.1} %", 100.0 * x);
    let target = |s: &ServeSummary| format!("{:.0} %", 100.0 * s.target.unwrap_or(f64::NAN));
    let capacity = claim.class("capacity").map_or(String::new(), |c| {
        format!(
            ", the highest rate within a benchmark's limits (`--max-rate`) within {} on {} of {}",
            target(c),
            c.within,
            c.figures
        )
    });
    crate::output::note(&format!(
        "latency: simulated; on the {} published serving runs of the validation claim, p50 is \
         within {} on {} of {} figures (median |error| {}), p99 within {} on {} of {} (median {}; \
         {} of the {} that the simulated capacity alone does not decide), throughput within {} on \
         {} of {}{capacity}; near capacity the tail is the queue's; `amdahl catalog validation \
         --serve` lists them",
        claim.rows,
        target(p50),
        p50.within,
        p50.figures,
        pct(p50.median_abs_error),
        target(p99),
        p99.within,
        p99.figures,
        pct(p99.median_abs_error),
        p99.well_conditioned_within,
        p99.well_conditioned,
        target(tput),
        tput.within,
        tput.figures,
    ));
}

//! `amdahl accelerate`'s result as a table and as CSV: Végh's what-if (the parallel part K×
//! faster, the serial part not) before and after.

use crate::{sig, table::Table};
use amdahl_model::scaling::whatif::AccelerateResult;

/// One CSV row: the what-if's inputs and the before/after figures, full precision.
pub fn csv(r: &AccelerateResult) -> String {
    let (input, result) = (&r.input, &r.result);
    format!(
        "n,k,comm_share,bytes_ratio,serial_before,serial_after,efficiency_before,efficiency_after,payload_gain\n{},{},{},{},{},{},{},{},{}\n",
        input.n, input.k, input.comm_share, input.bytes_ratio, result.serial_before,
        result.serial_after, result.efficiency_before, result.efficiency_after, result.payload_gain
    )
}

/// 1−α, E and the payload speed before and after, and one sentence saying why E moved.
pub fn table(r: &AccelerateResult) -> String {
    let (i, o) = (&r.input, &r.result);
    let mut t = Table::new(["", "before", "after"]);
    t.row([
        "1−α".to_string(),
        sig(o.serial_before, 3),
        sig(o.serial_after, 3),
    ]);
    t.row([
        "efficiency E".to_string(),
        format!("{:.1} %", 100.0 * o.efficiency_before),
        format!("{:.1} %", 100.0 * o.efficiency_after),
    ]);
    // Both columns in the same unit (a regression: "1" stood beside "2.247×").
    t.row([
        "payload speed".to_string(),
        "1×".into(),
        format!("{:.3}×", o.payload_gain),
    ]);
    let verdict = if o.efficiency_after < o.efficiency_before {
        "the non-parallel part did not speed up as much, so 1−α grew and E fell"
    } else {
        "the non-parallel part shrank at least as much, so E held"
    };
    let comm = if i.comm_share > 0.0 {
        format!(
            ", {:.0} % of 1−α communication scaled by {}",
            100.0 * i.comm_share,
            i.bytes_ratio
        )
    } else {
        String::new()
    };
    if o.serial_before == 0.0 && i.comm_share == 0.0 {
        // E = 1: nothing serial stays behind, so the whole job runs K times faster.
        return format!(
            "N = {}, parallel part {}× faster\n{}The job runs {:.2}× faster: with 1-α = 0 (E = 100 %) every part of it sped up.\n",
            i.n,
            i.k,
            t.render(),
            o.payload_gain,
        );
    }
    format!(
        "N = {}, parallel part {}× faster{comm}\n{}The job runs {:.2}× faster, not {}×: {verdict}.\n",
        i.n,
        i.k,
        t.render(),
        o.payload_gain,
        i.k,
    )
}

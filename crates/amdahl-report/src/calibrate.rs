//! Renderers of [`Calibration`] (`amdahl calibrate`): the fitted constants with their standard
//! errors and priors, what could not be fitted and why, the errors per quantity before, after and
//! left out, and per row; CSV of the rows.

use crate::sig;
use crate::table::{Align, Table};
use amdahl_model::calibrate::{Calibration, RowError};
use std::fmt::Write as _;

fn pct(x: f64) -> String {
    format!("{:+.1} %", 100.0 * x)
}

/// The human report.
pub fn table(c: &Calibration) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "calibration of the {} on {} rows of {} (model version {}{})",
        c.system,
        c.rows,
        c.source,
        c.model_version,
        c.engine
            .map_or(String::new(), |e| format!("; engine {}", e.name()))
    );
    let mut t = Table::new(["constant", "fitted", "± 1 s.e.", "before"]).align(0, Align::Left);
    for k in &c.constants {
        t.row([
            k.name.clone(),
            sig(k.value, 4),
            sig(k.standard_error, 2),
            sig(k.prior, 4),
        ]);
    }
    out.push('\n');
    out.push_str(&t.render());
    for r in &c.not_identified {
        let _ = writeln!(
            out,
            "not fitted: {} ({}): kept at its prior",
            r.name, r.reason
        );
    }
    let mut q = Table::new([
        "quantity",
        "rows",
        "mean |error| before",
        "after",
        "left out",
    ])
    .align(0, Align::Left);
    for f in &c.quantities {
        q.row([
            f.quantity.column().to_string(),
            f.rows.to_string(),
            format!("{:.1} %", 100.0 * f.mean_abs_before),
            format!("{:.1} %", 100.0 * f.mean_abs_after),
            format!("{:.1} %", 100.0 * f.mean_abs_loo),
        ]);
    }
    out.push('\n');
    out.push_str(&q.render());
    out.push('\n');
    out.push_str(&rows_table(&c.row_errors).render());
    let _ = writeln!(
        out,
        "errors: predicted / measured − 1 (+: the model optimistic); left out: {}",
        if c.loo_method == "exact" {
            "each row refitted without it"
        } else {
            "the leverage shortcut r / (1 − h)"
        }
    );
    out
}

/// Per-row errors (also the held-back rows of `--check`).
pub fn rows_table(rows: &[RowError]) -> Table {
    let mut r = Table::new(["row", "quantity", "measured", "before", "after", "left out"])
        .align(0, Align::Left);
    for e in rows {
        r.row([
            e.origin.clone(),
            e.quantity.column().to_string(),
            sig(e.measured, 4),
            pct(e.before),
            pct(e.after),
            if e.loo.is_finite() {
                pct(e.loo)
            } else {
                "-".into()
            },
        ]);
    }
    r
}

/// One CSV row per measured row.
pub fn csv(c: &Calibration) -> Result<String, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(["origin", "quantity", "measured", "before", "after", "loo"])?;
    for e in &c.row_errors {
        w.write_record([
            e.origin.clone(),
            e.quantity.column().to_string(),
            e.measured.to_string(),
            e.before.to_string(),
            e.after.to_string(),
            e.loo.to_string(),
        ])?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

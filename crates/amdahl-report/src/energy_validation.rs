//! Rendering of the energy validation set (`amdahl catalog validation --energy`): every published
//! power or energy figure with amdahl's prediction, in-sample and with its configuration held out
//! of the power model's fit, the summaries against the targets, and the rows not expressible yet.

use crate::catalog::csv_rows;
use crate::sig;
use crate::table::{Align, Table};
use amdahl_model::energy_validation::{CapCase, EnergyValidation, TARGET_MEDIAN, TARGET_WORST};

fn percent(x: f64) -> String {
    format!("{:+.1} %", 100.0 * x)
}

/// Which rows count towards the accuracy claim, in words.
fn claim(c: &amdahl_model::energy_validation::EnergyCase) -> &'static str {
    match (c.engine_modelled, c.host_bound) {
        (true, false) => "yes",
        (true, true) => "yes: host-bound",
        (false, _) => "no: engine",
    }
}

pub fn energy_validation_table(v: &EnergyValidation) -> String {
    let mut s = cases_table(v);
    s.push_str(&claim_summary_table(v));
    s.push_str(&targets_line(v));
    s.push_str(&out_of_sample_table(v));
    s.push_str(&power_model_line(v));
    s.push_str(&excluded_lines(v));
    s.push_str(&caps_table(&v.power_caps));
    s
}

/// Every expressible row with its prediction, in-sample and held out.
fn cases_table(v: &EnergyValidation) -> String {
    let mut t = Table::new([
        "row",
        "quantity",
        "published",
        "predicted",
        "error",
        "held out",
        "in claim",
    ])
    .align(1, Align::Left)
    .align(6, Align::Left);
    for c in &v.cases {
        t.row([
            c.id.clone(),
            c.quantity.clone(),
            sig(c.published, 4),
            sig(c.predicted, 4),
            percent(c.error),
            percent(c.held_out_error),
            claim(c).into(),
        ]);
    }
    let mut s = t.render();
    s.push_str(
        "error: predicted / published − 1 with the shipped power model; held out: with the power \
         model fitted without the row's configuration (the accuracy claim); scope: GPU board \
         counters, per GPU\n\n",
    );
    s
}

/// The held-out errors per quantity over the rows in the claim.
fn claim_summary_table(v: &EnergyValidation) -> String {
    let mut t = Table::new([
        "quantity",
        "rows",
        "held-out median |error|",
        "held-out worst",
        "worst row",
        "in-sample median",
    ])
    .align(0, Align::Left)
    .align(4, Align::Left);
    for m in v.summaries.iter().filter(|m| m.subset == "claim") {
        t.row([
            m.quantity.clone(),
            m.rows.to_string(),
            format!("{:.1} %", 100.0 * m.held_out_median_abs_error),
            format!("{:.1} %", 100.0 * m.held_out_worst_abs_error),
            m.held_out_worst.clone(),
            format!("{:.1} %", 100.0 * m.median_abs_error),
        ]);
    }
    t.render()
}

/// The shipped model's errors on the claim's rows that no fit used (`fit = no`): out of sample
/// as they stand, no refit needed; empty without such rows.
fn out_of_sample_table(v: &EnergyValidation) -> String {
    let of: Vec<_> = v
        .summaries
        .iter()
        .filter(|m| m.subset == "out_of_sample")
        .collect();
    if of.is_empty() {
        return String::new();
    }
    let mut t = Table::new(["quantity", "rows", "median |error|", "worst", "worst row"])
        .align(0, Align::Left)
        .align(4, Align::Left);
    for m in of {
        t.row([
            m.quantity.clone(),
            m.rows.to_string(),
            format!("{:.1} %", 100.0 * m.median_abs_error),
            format!("{:.1} %", 100.0 * m.worst_abs_error),
            m.worst.clone(),
        ]);
    }
    format!(
        "\nof which out of sample (fit = no: added after the shipped constants were fitted and in \
         no fit; the shipped model's errors):\n{}",
        t.render()
    )
}

/// Whether the claim's held-out errors of quantity `q` meet both targets, and which not.
fn verdict(v: &EnergyValidation, q: &str) -> &'static str {
    v.summaries
        .iter()
        .find(|m| m.subset == "claim" && m.quantity == q)
        .map_or("no rows", |m| {
            match (
                m.held_out_median_abs_error <= TARGET_MEDIAN,
                m.held_out_worst_abs_error <= TARGET_WORST,
            ) {
                (true, true) => "met",
                (true, false) => "not met (median met, worst not)",
                (false, true) => "not met (median not, worst met)",
                (false, false) => "not met (neither median nor worst)",
            }
        })
}

/// The targets, whether power and energy per token meet them, and which rows the claim covers.
fn targets_line(v: &EnergyValidation) -> String {
    format!(
        "targets (held out: median |error| ≤ {:.0} %, none beyond {:.0} %): power {}, energy per \
         token {}; rows in the claim: engines the serving model represents (vLLM ≥ 0.6, \
         TensorRT-LLM, SGLang), host-bound ones included\n",
        100.0 * TARGET_MEDIAN,
        100.0 * TARGET_WORST,
        verdict(v, "power per GPU (W)"),
        verdict(v, "energy per output token (J)"),
    )
}

/// The shipped power model's coefficients and how many rows they were fitted on.
fn power_model_line(v: &EnergyValidation) -> String {
    let k = &v.coefficients;
    let active: Vec<String> = k
        .active
        .iter()
        .map(|(a, x)| format!("{a} {x:.2}"))
        .collect();
    format!(
        "power model (× TDP): busy {} (other generations {:.3}), + {:.2} × compute share + {:.2} × \
         memory share; fitted on {} power rows (docs/methodology.md, \"Power model\")\n",
        active.join(", "),
        k.active_unfitted,
        k.compute,
        k.memory,
        v.fitted_rows
    ) + &format!(
        "vLLM time per running sequence per step (GPU work): {:.1} µs, fitted on {} throughput \
         rows (docs/methodology.md, \"Engine per-sequence time\"); held out, both fits leave the row's \
         configuration out\n",
        v.vllm_host_s * 1e6,
        v.fitted_host_rows
    ) + "ML.ENERGY v3 rows: each offline run simulated (`amdahl serve --rate inf`) and read over \
         the benchmark's own steady-state window (docs/methodology.md, \"The serving rows: the \
         benchmark's window\"); other serving rows: `amdahl infer`'s steady state\n"
}

/// The rows not expressible yet, counted by reason in order of first appearance; empty when
/// there are none.
fn excluded_lines(v: &EnergyValidation) -> String {
    if v.excluded.is_empty() {
        return String::new();
    }
    let mut reasons: Vec<(&str, usize)> = Vec::new();
    for e in &v.excluded {
        match reasons.iter_mut().find(|(w, _)| *w == e.why) {
            Some((_, n)) => *n += 1,
            None => reasons.push((&e.why, 1)),
        }
    }
    let mut s = format!(
        "\nnot expressible yet: {} of {} rows\n",
        v.excluded.len(),
        v.excluded.len() + v.cases.len()
    );
    for (why, n) in reasons {
        s.push_str(&format!("  {n:>3}  {why}\n"));
    }
    s
}

/// The power-cap pairs (data/validation/power_caps.csv): the throughput kept at the cap,
/// published and modelled; empty without pairs.
fn caps_table(cases: &[CapCase]) -> String {
    if cases.is_empty() {
        return String::new();
    }
    let mut t = Table::new([
        "pair",
        "cap",
        "published kept",
        "predicted kept",
        "error",
        "fit",
    ])
    .align(0, Align::Left)
    .align(5, Align::Left);
    for c in cases {
        t.row([
            c.id.clone(),
            format!("{:.0} W", c.cap_w),
            format!("{:.3}", c.published),
            format!("{:.3}", c.predicted),
            percent(c.error()),
            (if c.fitted { "fitted" } else { "held out" }).into(),
        ]);
    }
    let clipped: Vec<&str> = cases
        .iter()
        .filter(|c| c.batch_clipped)
        .map(|c| c.id.as_str())
        .collect();
    let mut s = format!(
        "\npower caps: throughput at the cap over the same system's uncapped throughput \
         (data/validation/power_caps.csv; `amdahl infer` with and without --power-cap)\n{}",
        t.render()
    );
    s.push_str(
        "fitted: the pair chose the Hopper clock-energy exponent (0: each FLOP costs the same \
         energy at any clock; docs/methodology.md, \"Power caps\"); held out: used for nothing\n",
    );
    if !clipped.is_empty() {
        s.push_str(&format!(
            "configured batch larger than the memory model fits, the largest that fits used: {}\n",
            clipped.join(", ")
        ));
    }
    s
}

pub fn energy_validation_csv(v: &EnergyValidation) -> Result<String, csv::Error> {
    let f = |x: f64| x.to_string();
    csv_rows(
        &[
            "id",
            "configuration",
            "quantity",
            "model",
            "system",
            "gpus",
            "batch",
            "framework",
            "scope",
            "published",
            "predicted",
            "error",
            "held_out",
            "held_out_error",
            "fits",
            "engine_modelled",
            "host_bound",
            "out_of_sample",
            "source",
        ],
        v.cases.iter().map(|c| {
            vec![
                c.id.clone(),
                c.configuration.clone(),
                c.quantity.clone(),
                c.model.clone(),
                c.system.clone(),
                c.gpus.to_string(),
                c.batch.to_string(),
                c.framework.clone(),
                c.scope.clone(),
                f(c.published),
                f(c.predicted),
                f(c.error),
                f(c.held_out),
                f(c.held_out_error),
                c.fits.to_string(),
                c.engine_modelled.to_string(),
                c.host_bound.to_string(),
                c.out_of_sample.to_string(),
                c.source.clone(),
            ]
        }),
    )
}

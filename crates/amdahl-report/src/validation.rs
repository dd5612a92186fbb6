//! Rendering of the planner's validation set (`amdahl catalog validation`): every published run
//! with its signed error, the summaries per framework against the targets, and one run in full.

use crate::catalog::csv_rows;
use crate::sig;
use crate::svg::{figure, Axis, Plot, Scale, Series, Style, PALETTE};
use crate::table::{Align, Table};
use amdahl_model::plan::validation::{ErrorSummary, TARGET_MEAN, TARGET_WORST};
use amdahl_model::plan::ValidationRun;

fn percent(x: f64) -> String {
    format!("{:+.1} %", 100.0 * x)
}

/// One row per run, then the error summaries and whether they meet the targets.
pub fn validation_table(runs: &[ValidationRun], summaries: &[ErrorSummary]) -> String {
    let mut t = Table::new([
        "run",
        "framework",
        "device",
        "GPUs",
        "metric",
        "published",
        "predicted",
        "error",
    ])
    .align(1, Align::Left)
    .align(2, Align::Left)
    .align(4, Align::Left);
    for r in runs {
        t.row([
            r.name.clone(),
            r.framework.clone(),
            r.device.clone(),
            r.gpus.to_string(),
            r.metric.clone(),
            sig(r.published, 4),
            sig(r.predicted, 4),
            percent(r.error),
        ]);
    }
    let mut s = t.render();
    s.push_str(
        "error: predicted throughput / published − 1 (positive: the planner is optimistic); \
         every run as a user types it (published layout, its framework's preset, defaults \
         elsewhere)\n",
    );
    s.push_str(&inferred_note(runs));
    s.push('\n');
    if summaries.is_empty() {
        return s;
    }
    s.push_str(&summary_table(summaries));
    s
}

/// The runs that also have an error with knobs inferred from their own result: reported apart,
/// outside every summary and interval.
fn inferred_note(runs: &[ValidationRun]) -> String {
    let with: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            r.error_with_inferred
                .map(|e| format!("{} {}", r.name, percent(e)))
        })
        .collect();
    let Some(knobs) = runs
        .iter()
        .find(|r| !r.inferred.is_empty())
        .map(|r| &r.inferred)
    else {
        return String::new();
    };
    format!(
        "with knobs inferred from their own results ({knobs}; not a claim): {}\n",
        with.join(", ")
    )
}

/// The summaries, and the targets they are held to.
fn summary_table(summaries: &[ErrorSummary]) -> String {
    let mut t = Table::new([
        "group",
        "runs",
        "mean |error|",
        "signed mean",
        "worst run",
        "its error",
        "beyond 12 %",
    ])
    .align(4, Align::Left);
    for g in summaries {
        t.row([
            g.group.clone(),
            g.runs.to_string(),
            format!("{:.1} %", 100.0 * g.mean_abs),
            percent(g.signed_mean),
            g.worst.clone(),
            percent(g.worst_error),
            g.beyond_target.to_string(),
        ]);
    }
    let mut s = t.render();
    let verdict = |name: &str| {
        summaries.iter().find(|g| g.group == name).map(|g| {
            if g.meets_targets() {
                "met"
            } else {
                "not met"
            }
        })
    };
    if let (Some(all), Some(modelled)) = (verdict("all"), verdict("modelled frameworks")) {
        s.push_str(&format!(
            "targets (mean |error| ≤ {:.0} %, no run beyond {:.0} %): {all} over all runs, \
             {modelled} over the modelled frameworks (megatron-lm, meta, nemo)\n",
            100.0 * TARGET_MEAN,
            100.0 * TARGET_WORST,
        ));
    }
    s.push_str(
        "`amdahl catalog validation NAME` shows a run's layout, where its predicted step goes \
         and its source; docs/methodology.md discusses the worst cases\n",
    );
    s
}

/// One run in full: its layout, the published and predicted step and the prediction's parts,
/// and its source.
pub fn validation_detail(r: &ValidationRun) -> String {
    let mut t = Table::new(["field", "value"]).align(1, Align::Left);
    let mut kv = |k: &str, v: String| t.row([k.to_string(), v]);
    kv("run", r.name.clone());
    kv(
        "framework",
        format!(
            "{}{}",
            r.framework,
            if r.modelled {
                " (modelled)"
            } else {
                " (not modelled: the planner assumes Megatron-LM's kernels and schedules)"
            }
        ),
    );
    kv("system", format!("{} × {}", r.gpus, r.device));
    kv("layout", r.layout.clone());
    if let Some(n) = r.dp_rails {
        kv(
            "DP network interfaces",
            format!(
                "{n} per node (the row's dp_rails; default: one per rank of the group on the node)"
            ),
        );
    }
    kv(&format!("published ({})", r.metric), sig(r.published, 4));
    kv(&format!("predicted ({})", r.metric), sig(r.predicted, 4));
    kv("error", percent(r.error));
    if let Some(e) = r.error_with_inferred {
        kv(
            "error with inferred knobs",
            format!(
                "{} with {} (inferred from the run's own result: no claim)",
                percent(e),
                r.inferred
            ),
        );
    }
    kv(
        "published step",
        format!("{} s", sig(r.published_step_s, 4)),
    );
    kv(
        "predicted step",
        format!("{} s", sig(r.predicted_step_s, 4)),
    );
    let b = r.breakdown;
    for (part, secs) in [
        ("  compute (GEMM)", b.compute),
        ("  memory-bound", b.memory_bound),
        ("  TP communication", b.tp_comm),
        ("  CP communication", b.cp_comm),
        ("  EP all-to-all", b.ep_comm),
        ("  PP communication", b.pp_comm),
        ("  DP communication", b.dp_comm),
        ("  pipeline bubble", b.bubble),
        ("  optimizer", b.optimizer),
        ("  other", b.other),
    ] {
        if secs.get() > 0.0 {
            kv(part, format!("{} s", sig(secs.get(), 3)));
        }
    }
    kv(
        "memory per device",
        format!(
            "{} GiB ({})",
            sig(r.memory_gib, 3),
            if r.fits { "fits" } else { "does not fit" }
        ),
    );
    // The source is a paragraph: after the table, so it does not set the table's width.
    format!("{}source: {}\n", t.render(), r.source)
}

/// The runs as CSV, one row each with the prediction's parts in seconds.
pub fn validation_csv(runs: &[ValidationRun]) -> Result<String, csv::Error> {
    let f = |x: f64| x.to_string();
    csv_rows(
        &[
            "name",
            "framework",
            "modelled",
            "device",
            "gpus",
            "layout",
            "metric",
            "published",
            "predicted",
            "error",
            "published_step_s",
            "predicted_step_s",
            "compute_s",
            "memory_bound_s",
            "tp_s",
            "cp_s",
            "ep_s",
            "pp_s",
            "dp_s",
            "bubble_s",
            "optimizer_s",
            "other_s",
            "memory_gib",
            "fits",
            "source",
        ],
        runs.iter().map(|r| {
            let b = r.breakdown;
            let mut row = vec![
                r.name.clone(),
                r.framework.clone(),
                r.modelled.to_string(),
                r.device.clone(),
                r.gpus.to_string(),
                r.layout.clone(),
                r.metric.clone(),
                f(r.published),
                f(r.predicted),
                f(r.error),
                f(r.published_step_s),
                f(r.predicted_step_s),
            ];
            row.extend(
                [
                    b.compute,
                    b.memory_bound,
                    b.tp_comm,
                    b.cp_comm,
                    b.ep_comm,
                    b.pp_comm,
                    b.dp_comm,
                    b.bubble,
                    b.optimizer,
                    b.other,
                ]
                .map(|s| f(s.get())),
            );
            row.extend([f(r.memory_gib), r.fits.to_string(), r.source.clone()]);
            row
        }),
    )
}

/// Signed error against job size, one colour per framework, with the targets' bands: where the
/// planner is optimistic or pessimistic, and whether that grows with the job.
pub fn validation_svg(runs: &[ValidationRun]) -> String {
    let mut plot = Plot::new(
        "planner vs published training runs",
        Axis::new(Scale::Log10, "GPUs").powers_of_two(),
        Axis::new(Scale::Linear, "error, % (positive: optimistic)"),
    );
    let mut frameworks: Vec<&str> = runs.iter().map(|r| r.framework.as_str()).collect();
    frameworks.sort_unstable();
    frameworks.dedup();
    let (lo, hi) = runs.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), r| {
        (lo.min(r.gpus as f64), hi.max(r.gpus as f64))
    });
    if lo.is_finite() {
        for (bound, style) in [
            (TARGET_WORST, Style::Line),
            (TARGET_MEAN, Style::DashedLine),
        ] {
            for sign in [1.0, -1.0] {
                let y = sign * 100.0 * bound;
                let label = if sign > 0.0 {
                    format!("±{:.0} %", 100.0 * bound)
                } else {
                    String::new()
                };
                plot.series
                    .push(Series::new(label, "#999999", style).points([(lo, y), (hi, y)]));
            }
        }
    }
    for (i, fw) in frameworks.iter().enumerate() {
        plot.series.push(
            Series::new(*fw, PALETTE[i % PALETTE.len()], Style::Points).points(
                runs.iter()
                    .filter(|r| r.framework == *fw)
                    .map(|r| (r.gpus as f64, 100.0 * r.error)),
            ),
        );
    }
    figure(&[plot], 640.0, 420.0)
}

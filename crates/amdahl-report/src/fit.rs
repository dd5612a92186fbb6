//! Renderers of [`FitResult`] (`amdahl fit`): a terminal report, CSV of points and predictions,
//! and a two-panel SVG (speedup and efficiency against N on log axes).

use crate::sig;
use crate::svg::{figure, Axis, Plot, Scale, Series, Style, PALETTE};
use crate::table::{Align, Table};
use amdahl_model::scaling::analysis::{FitResult, SeriesResult};
use amdahl_model::scaling::decompose::Decomposition;
use amdahl_model::scaling::models::ModelFit;
use std::fmt::Write as _;

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |x| sig(x, digits))
}

/// N as people write it: integers without decimals, anything else to 6 significant digits.
fn fmt_n(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{n:.0}")
    } else {
        sig(n, 6)
    }
}

fn label(s: &SeriesResult) -> &str {
    if s.label.is_empty() {
        "series"
    } else {
        &s.label
    }
}

fn params(m: &ModelFit) -> String {
    m.params
        .iter()
        .map(|p| match p.stderr {
            Some(se) => format!("{} = {} ± {}", p.name, sig(p.value, 4), sig(se, 2)),
            None => format!("{} = {}", p.name, sig(p.value, 4)),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The human report: per series, the points, every model, the choice and why, the trend,
/// predictions and (with phase columns) the decomposition of 1−α_eff.
pub fn table(r: &FitResult) -> String {
    let mut out = String::new();
    if let Some(src) = &r.source {
        let _ = writeln!(out, "source: {src}");
    }
    for (i, s) in r.series.iter().enumerate() {
        if i > 0 || r.source.is_some() {
            out.push('\n');
        }
        series_report(&mut out, s);
    }
    out
}

/// One series' part of [`table`].
fn series_report(out: &mut String, s: &SeriesResult) {
    let counts = s.n_counts.as_deref().unwrap_or("processors (unspecified)");
    let _ = writeln!(
        out,
        "== {} — measure: {}, N counts: {}, baseline N0 = {}",
        label(s),
        s.measure.as_str(),
        counts,
        fmt_n(s.baseline_n)
    );
    out.push_str(&points_table(s));
    out.push('\n');
    out.push_str(&models_table(s));
    choice_lines(out, s, counts);
    trend_line(out, s);
    if !s.predictions.is_empty() {
        out.push('\n');
        out.push_str(&predictions_table(s));
    }
    what_if_line(out, s);
    if let Some(d) = &s.decomposition {
        out.push('\n');
        let _ = writeln!(out, "contributions to 1−α_eff (Karp-Flatt e) by phase:");
        out.push_str(&decomposition_table(d));
    }
}

/// The measured points: speedup, efficiency, α_eff and Karp–Flatt e per N.
fn points_table(s: &SeriesResult) -> String {
    let mut t = Table::new(["n", "speedup", "efficiency", "alpha_eff", "karp_flatt"])
        .align(0, Align::Right);
    for p in &s.points {
        t.row([
            fmt_n(p.n),
            sig(p.speedup, 4),
            sig(p.efficiency, 4),
            opt(p.alpha_eff, 6),
            opt(p.karp_flatt, 3),
        ]);
    }
    t.render()
}

/// Every model fitted, the chosen one starred.
fn models_table(s: &SeriesResult) -> String {
    let mut m = Table::new([
        "model",
        "parameters (± 1 s.e.)",
        "AICc",
        "1−α",
        "S_max",
        "N(E=50%)",
        "N_opt",
    ])
    .align(1, Align::Left);
    for f in &s.models {
        let mut name = f.model.name().to_string();
        if f.model == s.chosen_model {
            name.push_str(" *");
        }
        if !f.physical {
            name.push_str(" (non-physical)");
        }
        m.row([
            name,
            params(f),
            opt(f.aicc, 5),
            sig(f.serial_fraction, 3),
            opt(f.s_max, 4),
            opt(f.n_half, 4),
            opt(f.n_opt, 4),
        ]);
    }
    m.render()
}

/// The models skipped and why, the one chosen and why, and what it says.
fn choice_lines(out: &mut String, s: &SeriesResult, counts: &str) {
    for k in &s.skipped {
        let _ = writeln!(out, "skipped {}: {}", k.model.name(), k.reason);
    }
    let _ = writeln!(
        out,
        "chosen: {} — {}",
        s.chosen_model.name(),
        s.choice_reason
    );
    let _ = writeln!(
        out,
        "serial fraction 1−α = {} (N counts {}); S_max = {}; E = 50 % at N = {}; {}",
        sig(s.serial_fraction, 4),
        counts,
        opt(s.s_max, 4),
        opt(s.n_half, 4),
        // "throughput peak at N = -" would read as a missing number; a model without a peak
        // (Amdahl's law rises forever) says so in words.
        s.n_opt.map_or_else(
            || "no throughput peak (throughput rises with N in this model)".to_string(),
            |n| format!("throughput peak at N = {}", sig(n, 4))
        )
    );
}

/// The Karp–Flatt trend and what it means, or that it was not tested.
fn trend_line(out: &mut String, s: &SeriesResult) {
    let meaning = match s.trend {
        amdahl_model::scaling::analysis::Trend::Constant => {
            "a true serial part; Amdahl's law holds"
        }
        amdahl_model::scaling::analysis::Trend::Rising => {
            "overhead grows with N (communication, synchronisation)"
        }
        amdahl_model::scaling::analysis::Trend::Falling => {
            "serial share shrinks with N (superlinear effects or a costly baseline)"
        }
        amdahl_model::scaling::analysis::Trend::Untested => "",
    };
    // Without a slope the trend was not tested: say so, and claim nothing about its meaning.
    let _ = match (s.trend_slope, s.trend_slope_stderr) {
        (Some(b), Some(se)) => writeln!(
            out,
            "Karp-Flatt trend: {} (slope of e vs N: {} ± {}) — {meaning}",
            trend_name(s),
            sig(b, 3),
            sig(se, 2)
        ),
        _ => writeln!(
            out,
            "Karp-Flatt trend: not tested (fewer than 3 points beyond the baseline)"
        ),
    };
}

/// The model's predictions at the N asked for.
fn predictions_table(s: &SeriesResult) -> String {
    let mut p =
        Table::new(["predict n", "speedup", "efficiency", "alpha_eff"]).align(0, Align::Right);
    for q in &s.predictions {
        p.row([
            fmt_n(q.n),
            sig(q.speedup, 4),
            sig(q.efficiency, 4),
            opt(q.alpha_eff, 6),
        ]);
    }
    p.render()
}

/// Végh's what-if (a faster parallel part, cheaper communication), when asked for.
fn what_if_line(out: &mut String, s: &SeriesResult) {
    if let Some(w) = &s.what_if {
        let r = &w.result;
        let _ = writeln!(
            out,
            "\nwhat-if (Végh): parallel part {}x faster at N = {}, communication share {} of 1−α scaled by {}:\n  1−α {} -> {}, efficiency {} -> {}, payload gain {}x",
            sig(w.spec.k, 3),
            fmt_n(w.n),
            sig(w.spec.comm_share, 3),
            sig(w.spec.bytes_ratio, 3),
            sig(r.serial_before, 4),
            sig(r.serial_after, 4),
            sig(r.efficiency_before, 4),
            sig(r.efficiency_after, 4),
            sig(r.payload_gain, 4)
        );
    }
}

/// Each phase's contribution to 1−α_eff per N, and the dominant one.
fn decomposition_table(d: &Decomposition) -> String {
    let mut head = vec!["n".to_string(), "e".to_string()];
    head.extend(d.phases.iter().cloned());
    head.push("dominant".into());
    let mut t = Table::new(head).align(0, Align::Right);
    let last = d.phases.len() + 2;
    t = t.align(last, Align::Left);
    for row in &d.rows {
        let mut cells = vec![fmt_n(row.n), sig(row.karp_flatt, 3)];
        cells.extend(row.contributions.iter().map(|c| sig(*c, 3)));
        cells.push(row.dominant.clone());
        t.row(cells);
    }
    t.render()
}

fn trend_name(s: &SeriesResult) -> &'static str {
    match s.trend {
        amdahl_model::scaling::analysis::Trend::Constant => "constant",
        amdahl_model::scaling::analysis::Trend::Rising => "rising",
        amdahl_model::scaling::analysis::Trend::Falling => "falling",
        amdahl_model::scaling::analysis::Trend::Untested => "untested",
    }
}

fn num(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite())
        .map_or_else(String::new, |x| format!("{x}"))
}

/// CSV: one row per measured point (`kind` = measured) and per prediction of the chosen model
/// (`kind` = predicted).
pub fn csv(r: &FitResult) -> Result<String, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    // One long table: `measured` and `predicted` rows per N, then one `model` row per fitted
    // model (so the fits travel with the data they were fitted to), each with the columns that
    // apply.
    w.write_record([
        "label",
        "kind",
        "model",
        "n",
        "speedup",
        "efficiency",
        "alpha_eff",
        "karp_flatt",
        "parameters",
        "aicc",
        "serial_fraction",
        "s_max",
        "n_half",
        "n_opt",
        "chosen",
        "physical",
    ])?;
    let empty = || std::iter::repeat_n(String::new(), 8);
    for s in &r.series {
        for p in &s.points {
            let row = [
                s.label.clone(),
                "measured".into(),
                String::new(),
                format!("{}", p.n),
                format!("{}", p.speedup),
                format!("{}", p.efficiency),
                num(p.alpha_eff),
                num(p.karp_flatt),
            ];
            w.write_record(row.into_iter().chain(empty()))?;
        }
        for q in &s.predictions {
            let row = [
                s.label.clone(),
                "predicted".into(),
                s.chosen_model.name().into(),
                format!("{}", q.n),
                format!("{}", q.speedup),
                format!("{}", q.efficiency),
                num(q.alpha_eff),
                num(q.alpha_eff.map(|a| 1.0 - a)),
            ];
            w.write_record(row.into_iter().chain(empty()))?;
        }
        for f in &s.models {
            let params = f
                .params
                .iter()
                .map(|p| match p.stderr {
                    Some(se) => format!("{}={}±{}", p.name, p.value, se),
                    None => format!("{}={}", p.name, p.value),
                })
                .collect::<Vec<_>>()
                .join(";");
            let row = [
                s.label.clone(),
                "model".into(),
                f.model.name().into(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                params,
                num(f.aicc),
                format!("{}", f.serial_fraction),
                num(f.s_max),
                num(f.n_half),
                num(f.n_opt),
                (f.model == s.chosen_model).to_string(),
                f.physical.to_string(),
            ];
            w.write_record(row)?;
        }
    }
    let bytes = w
        .into_inner()
        .map_err(|e| csv::Error::from(e.into_error()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Two panels: speedup and efficiency against N (log axes), measured points, the fitted curves
/// (the chosen one solid, the others dashed when there is one series) and the ideal line.
pub fn svg(r: &FitResult) -> String {
    let mut sp = Plot::new(
        "Speedup vs N",
        Axis::new(Scale::Log10, "N").powers_of_two(),
        Axis::new(Scale::Log10, "speedup S = T(N0)/T(N)"),
    );
    let mut ef = Plot::new(
        "Efficiency vs N",
        Axis::new(Scale::Log10, "N").powers_of_two(),
        Axis::new(Scale::Linear, "efficiency E = S/(N/N0)"),
    );
    let single = r.series.len() == 1;
    let all_n = r.series.iter().flat_map(|s| {
        s.points
            .iter()
            .map(|p| p.n)
            .chain(s.predictions.iter().map(|p| p.n))
    });
    let (lo, hi) = all_n.fold((f64::INFINITY, 0.0f64), |(a, b), n| (a.min(n), b.max(n)));
    if !(lo.is_finite() && hi >= lo) {
        return figure(&[sp, ef], 480.0, 360.0);
    }
    // A little past the last run or prediction, to show where the curves head.
    let hi = (hi * 1.5).max(lo * 2.0);
    let n0 = r.series.first().map_or(1.0, |s| s.baseline_n);
    let g = crate::svg::log_space(lo, hi, 120);
    sp.series.push(
        Series::new("ideal", "#888888", Style::DashedLine).points(g.iter().map(|&n| (n, n / n0))),
    );
    // One legend (on the speedup panel) serves both panels: the efficiency panel's series are
    // unlabelled, so no legend covers the curves that start at its top left.
    ef.series
        .push(Series::new("", "#888888", Style::DashedLine).points(g.iter().map(|&n| (n, 1.0))));
    let mut ymax: f64 = 1.05;
    for (i, s) in r.series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let name = if single {
            "measured".to_string()
        } else {
            label(s).to_string()
        };
        sp.series.push(
            Series::new(name.clone(), color, Style::Points)
                .points(s.points.iter().map(|p| (p.n, p.speedup))),
        );
        ef.series.push(
            Series::new("", color, Style::Points)
                .points(s.points.iter().map(|p| (p.n, p.efficiency))),
        );
        ymax = s
            .points
            .iter()
            .map(|p| p.efficiency * 1.05)
            .fold(ymax, f64::max);
        for (j, m) in s.models.iter().enumerate() {
            let chosen = m.model == s.chosen_model;
            if !single && !chosen {
                continue;
            }
            let (c, style) = if single {
                (
                    PALETTE[(j + 1) % PALETTE.len()],
                    if chosen {
                        Style::Line
                    } else {
                        Style::DashedLine
                    },
                )
            } else {
                (color, Style::Line)
            };
            let lbl = if single {
                format!(
                    "{}{}",
                    m.model.name(),
                    if chosen { " (chosen)" } else { "" }
                )
            } else {
                format!("{} {}", label(s), m.model.name())
            };
            let b = s.baseline_n;
            sp.series.push(
                Series::new(lbl.clone(), c, style).points(g.iter().map(|&n| (n, m.speedup(n, b)))),
            );
            ef.series
                .push(Series::new("", c, style).points(g.iter().map(|&n| (n, m.efficiency(n, b)))));
        }
    }
    ef.y = ef.y.range(0.0, ymax.min(2.0));
    figure(&[sp, ef], 520.0, 380.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::svg::Size;
    use amdahl_model::scaling::{analyse, builtin, FitOptions};

    fn cisco() -> FitResult {
        let d = builtin::cisco().unwrap();
        let opts = FitOptions {
            predict: vec![64.0],
            ..Default::default()
        };
        analyse(&d, &opts).unwrap()
    }

    #[test]
    fn table_names_models_choice_and_trend() {
        let t = table(&cisco());
        for want in [
            "usl",
            "amdahl_log2",
            "chosen:",
            "Karp-Flatt trend:",
            "predict n",
            "concurrent clients",
        ] {
            assert!(t.contains(want), "missing {want}:\n{t}");
        }
    }

    #[test]
    fn csv_has_points_and_predictions() {
        let r = cisco();
        let c = csv(&r).unwrap();
        let models: usize = r.series.iter().map(|s| s.models.len()).sum();
        assert_eq!(c.lines().count(), 1 + 32 + 1 + models);
        assert!(c.starts_with("label,kind,model,n,speedup,efficiency,alpha_eff,karp_flatt,"));
        assert!(c.contains(",predicted,") && c.contains(",model,"));
    }

    #[test]
    fn svg_has_two_panels_points_and_curves() {
        let (s, _) = crate::svg::split_data(&svg(&cisco()));
        assert!(s.starts_with("<svg"));
        assert_eq!(s.matches("Speedup vs N").count(), 1);
        assert_eq!(s.matches("Efficiency vs N").count(), 1);
        // 32 points per panel, each with a white outline.
        assert_eq!(
            s.matches(r#"stroke="white" stroke-width="0.8""#).count(),
            64
        );
        assert!(s.contains("(chosen)"));
    }

    /// The legend sat on the measured points and the fitted curves of the speedup panel: it
    /// must cover no marker and no line (in a corner that is free, else above the plot).
    #[test]
    fn svg_legend_covers_no_data() {
        for size in [Size::Column, Size::Page, Size::Slide] {
            let f = crate::svg::with_size(size, || crate::svg::testing::checked(|| svg(&cisco())));
            assert!(f.panels[0].legend.is_some());
            assert_eq!(f.panels[0].legend_entries.len(), 6, "{size:?}");
        }
    }
}

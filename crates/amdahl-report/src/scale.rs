//! Renderers of [`ScaleResult`] (`amdahl scale`): a terminal report (per-N time and energy, the
//! derived ratios, the failure if any, then the `amdahl fit` report of the median times), CSV of
//! the per-N rows, and a three-panel SVG (speedup; parallel and energy efficiency; energy per job).

use crate::sig;
use crate::svg::{figure, Axis, Plot, Scale, Series, Style, PALETTE};
use crate::table::Table;
use amdahl_meter::scale::{Failure, ScalePoint, ScaleResult};
use std::fmt::Write as _;

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |x| sig(x, digits))
}

/// Arguments as a shell would need them: single-quoted unless made only of characters no
/// shell treats specially.
fn shell_words(args: &[String]) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,{}+@%".contains(c);
    args.iter()
        .map(|a| {
            if !a.is_empty() && a.chars().all(plain) {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn outliers(p: &ScalePoint, energy: bool) -> usize {
    p.runs
        .iter()
        .filter(|r| {
            if energy {
                r.energy_outlier
            } else {
                r.time_outlier
            }
        })
        .count()
}

/// The human report: what ran and how it was measured, the points, a failure if one stopped the
/// sweep, and the scaling-law fit of the median times.
pub fn table(r: &ScaleResult) -> String {
    let mut out = String::new();
    let counts = r.n_counts.as_deref().unwrap_or("processors (unspecified)");
    setup_lines(&mut out, r, counts);
    out.push_str(&points_table(r));
    if r.points
        .iter()
        .any(|p| p.net_energy_j.is_some_and(|s| s.median < 0.0))
    {
        // A negative energy above idle is explained, not printed without a word: the same note
        // as `amdahl run --baseline`.
        out.push_str(&crate::meter::negative_net_note(
            -1.0,
            "lengthen --idle or give the command more work",
        ));
    }
    if let Some(f) = &r.failure {
        failure_lines(&mut out, f);
    }
    match (&r.fit, &r.no_fit_reason) {
        (Some(fit), _) => {
            let _ = writeln!(out, "\nscaling-law fit of the median times:");
            out.push_str(&crate::fit::table(fit));
        }
        (None, Some(why)) => {
            let _ = writeln!(out, "\nno fit: {why}");
        }
        (None, None) => {}
    }
    out
}

/// The command, its environment, what N counts, how runs are summarised, the energy sources and
/// the idle power subtracted.
fn setup_lines(out: &mut String, r: &ScaleResult, counts: &str) {
    let _ = writeln!(out, "command: {}", shell_words(&r.command));
    if !r.env.is_empty() {
        let _ = writeln!(out, "env: {}", r.env.join(" "));
    }
    let _ = writeln!(
        out,
        "N counts: {counts}; baseline N0 = {}; {} measured run(s) + {} warm-up per N; medians, outliers by Tukey's fences",
        r.baseline_n, r.runs, r.warmup
    );
    let methods = r
        .devices
        .iter()
        .map(|d| format!("{} {} ({})", d.id, d.name, d.method.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        out,
        "energy: {}; PUE {}; grid {} g/kWh ({})\n",
        if methods.is_empty() { "-" } else { &methods },
        sig(r.pue, 3),
        sig(r.intensity.g_per_kwh.get(), 4),
        r.intensity.region
    );
    if let Some(i) = &r.idle {
        let _ = writeln!(
            out,
            "idle power {} W (measured over {} s before the sweep); `J above idle` = J/job − idle W × time\n",
            sig(i.power_w.get(), 4),
            sig(i.duration_s.get(), 3)
        );
    }
}

/// One row per N: time (median, range, outliers), the scaling figures, energy and carbon.
fn points_table(r: &ScaleResult) -> String {
    let mut head = vec![
        "N",
        "time s",
        "min",
        "max",
        "out",
        "speedup",
        "E",
        "α_eff",
        "e",
        "J/job",
        "J/job ÷ N0",
        "energy eff",
        "gCO2e/job",
    ];
    if r.idle.is_some() {
        head.push("J above idle");
    }
    let mut t = Table::new(head);
    for p in &r.points {
        let net = p.net_energy_j.map(|s| sig(s.median, 4));
        t.row(
            [
                p.n.to_string(),
                sig(p.time_s.median, 4),
                sig(p.time_s.min, 4),
                sig(p.time_s.max, 4),
                format!("{}/{}", outliers(p, false), p.runs.len()),
                opt(p.speedup, 4),
                opt(p.efficiency, 3),
                opt(p.alpha_eff, 4),
                opt(p.karp_flatt, 3),
                sig(p.energy_j.median, 4),
                opt(p.energy_ratio, 3),
                opt(p.energy_efficiency, 3),
                sig(p.co2e_g.get(), 3),
            ]
            .into_iter()
            .chain(net),
        );
    }
    t.render()
}

/// The run that stopped the sweep: which, how, and the tail of its stderr.
fn failure_lines(out: &mut String, f: &Failure) {
    let _ = writeln!(
        out,
        "\nstopped: N = {} failed on run {}{} with exit status {}{}; the N above are kept",
        f.n,
        f.run,
        if f.warmup { " (warm-up)" } else { "" },
        f.exit_code,
        f.signal
            .as_deref()
            .map_or_else(String::new, |s| format!(" ({s})"))
    );
    if !f.stderr_tail.is_empty() {
        let _ = writeln!(out, "stderr (tail):");
        for l in f.stderr_tail.lines() {
            let _ = writeln!(out, "  | {l}");
        }
    }
}

fn num(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite())
        .map_or_else(String::new, |x| format!("{x}"))
}

/// CSV: one row per finished N.
pub fn csv(r: &ScaleResult) -> Result<String, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "n",
        "runs",
        "time_median_s",
        "time_min_s",
        "time_max_s",
        "time_mad_s",
        "time_outliers",
        "energy_median_j",
        "energy_min_j",
        "energy_max_j",
        "energy_outliers",
        "speedup",
        "efficiency",
        "alpha_eff",
        "karp_flatt",
        "energy_ratio",
        "energy_efficiency",
        "energy_kwh",
        "co2e_g",
        "net_energy_median_j",
    ])?;
    for p in &r.points {
        w.write_record([
            p.n.to_string(),
            p.runs.len().to_string(),
            format!("{}", p.time_s.median),
            format!("{}", p.time_s.min),
            format!("{}", p.time_s.max),
            format!("{}", p.time_s.mad),
            outliers(p, false).to_string(),
            format!("{}", p.energy_j.median),
            format!("{}", p.energy_j.min),
            format!("{}", p.energy_j.max),
            outliers(p, true).to_string(),
            num(p.speedup),
            num(p.efficiency),
            num(p.alpha_eff),
            num(p.karp_flatt),
            num(p.energy_ratio),
            num(p.energy_efficiency),
            format!("{}", p.energy_kwh),
            format!("{}", p.co2e_g.get()),
            num(p.net_energy_j.map(|s| s.median)),
        ])?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| csv::Error::from(e.into_error()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Three panels against N (log axis): speedup (measured medians, ideal, the chosen model);
/// parallel efficiency next to energy efficiency Ẽ(N0)/Ẽ(N); median energy per job with its
/// min–max range.
pub fn svg(r: &ScaleResult) -> String {
    let n_axis = || Axis::new(Scale::Log10, "N").powers_of_two();
    let mut sp = Plot::new(
        "Speedup vs N",
        n_axis(),
        Axis::new(Scale::Log10, "speedup T(N0)/T(N)"),
    );
    let mut ef = Plot::new(
        "Efficiency vs N",
        n_axis(),
        Axis::new(Scale::Linear, "parallel S/p, energy E(N0)/E(N)"),
    );
    let mut en = Plot::new(
        "Energy per job vs N",
        n_axis(),
        Axis::new(Scale::Linear, "energy per job (J)"),
    );
    let ns: Vec<f64> = r.points.iter().map(|p| p.n as f64).collect();
    let (lo, hi) = ns
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(a, b), &n| (a.min(n), b.max(n)));
    if lo.is_finite() && hi >= lo {
        let n0 = r.baseline_n as f64;
        let g = crate::svg::log_space(lo, (hi * 1.5).max(lo * 2.0), 120);
        sp.series.push(
            Series::new("ideal", "#888888", Style::DashedLine)
                .points(g.iter().map(|&n| (n, n / n0))),
        );
        ef.series.push(
            Series::new("", "#888888", Style::DashedLine).points(g.iter().map(|&n| (n, 1.0))),
        );
        let pts = |f: fn(&ScalePoint) -> Option<f64>| -> Vec<(f64, f64)> {
            r.points
                .iter()
                .filter_map(|p| f(p).map(|y| (p.n as f64, y)))
                .collect()
        };
        sp.series
            .push(Series::new("measured", PALETTE[0], Style::Points).points(pts(|p| p.speedup)));
        ef.series.push(
            Series::new("parallel", PALETTE[0], Style::LinePoints).points(pts(|p| p.efficiency)),
        );
        ef.series.push(
            Series::new("energy", PALETTE[1], Style::LinePoints)
                .points(pts(|p| p.energy_efficiency)),
        );
        if let Some(m) = r
            .fit
            .as_ref()
            .and_then(|f| f.series.first())
            .and_then(|s| s.chosen())
        {
            sp.series.push(
                Series::new(format!("{} fit", m.model.name()), PALETTE[2], Style::Line)
                    .points(g.iter().map(|&n| (n, m.speedup(n, n0)))),
            );
        }
        en.series.push(
            Series::new("median", PALETTE[1], Style::LinePoints)
                .points(pts(|p| Some(p.energy_j.median))),
        );
        // The bounds are drawn alike: one legend entry names both.
        en.series.push(
            Series::new("min, max", PALETTE[1], Style::DashedLine)
                .points(pts(|p| Some(p.energy_j.min))),
        );
        en.series.push(
            Series::new("", PALETTE[1], Style::DashedLine).points(pts(|p| Some(p.energy_j.max))),
        );
        let ymax = r
            .points
            .iter()
            .flat_map(|p| [p.efficiency, p.energy_efficiency])
            .flatten()
            .fold(1.05f64, |a, e| a.max(e * 1.05));
        ef.y = ef.y.range(0.0, ymax.min(4.0));
        let emax = r
            .points
            .iter()
            .map(|p| p.energy_j.max * 1.05)
            .fold(0.0, f64::max);
        if emax > 0.0 {
            en.y = en.y.range(0.0, emax);
        }
    }
    figure(&[sp, ef, en], 440.0, 360.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdahl_meter::record::{Host, Intensity};
    use amdahl_meter::scale::{sweep, MockExecutor, Plan, Setup};
    use amdahl_model::units::GramsPerKwh;

    /// Amdahl series with serial fraction 0.1 (T(N) = 0.1 + 0.9/N s), energy (20 + 5N)·T.
    fn result(ns: &[u64], fail_at: Option<u64>) -> ScaleResult {
        let plan = Plan::new(
            ns.to_vec(),
            vec!["app".into(), "{n}".into()],
            &[],
            3,
            0,
            None,
        )
        .unwrap();
        let setup = Setup {
            n_counts: Some("threads".into()),
            started_unix_s: 0.0,
            host: Host {
                hostname: "h".into(),
                os: "Linux".into(),
                cpu_model: "x".into(),
                cpu_count: 8,
                ram_total_gb: 8.0,
                boot_id: None,
            },
            pue: 1.0,
            intensity: Intensity {
                g_per_kwh: GramsPerKwh(475.0),
                region: "world".into(),
                source: "IEA 2019".into(),
                year: Some(2019),
                location: None,
            },
            idle: None,
            warnings: Vec::new(),
        };
        let mut exec = MockExecutor::new(move |job, _| {
            let t = 0.1 + 0.9 / job.n as f64;
            let mut o = MockExecutor::ok(t, (20.0 + 5.0 * job.n as f64) * t);
            if Some(job.n) == fail_at {
                o.exit_code = 2;
                o.stderr_tail = "bad things".into();
            }
            Ok(o)
        });
        sweep(
            &plan,
            ScaleResult::new(&plan, setup),
            &mut exec,
            &mut |_| {},
        )
    }

    #[test]
    fn commands_are_quoted_for_a_shell() {
        let w = |a: &[&str]| shell_words(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(w(&["sh", "-c", "sleep 0.0{n}"]), "sh -c 'sleep 0.0{n}'");
        assert_eq!(w(&["echo", "it's", ""]), r"echo 'it'\''s' ''");
        assert_eq!(w(&["python3", "-c", "f(2*3)"]), "python3 -c 'f(2*3)'");
    }

    #[test]
    fn csv_rows() {
        insta::assert_snapshot!("scale_csv", csv(&result(&[1, 2, 4, 8], None)).unwrap());
    }

    #[test]
    fn table_has_points_fit_and_failure() {
        let t = table(&result(&[1, 2, 4, 8], None));
        for want in [
            "J/job",
            "scaling-law fit",
            "chosen:",
            "mock:0 mock package (counter)",
        ] {
            assert!(t.contains(want), "missing {want}:\n{t}");
        }
        let t = table(&result(&[1, 2, 4], Some(4)));
        assert!(
            t.contains("N = 4 failed on run 1 with exit status 2"),
            "{t}"
        );
        assert!(t.contains("| bad things"), "{t}");
        assert!(t.contains("no fit:"), "{t}");
    }

    #[test]
    fn svg_has_three_panels() {
        let (s, _) = crate::svg::split_data(&svg(&result(&[1, 2, 4, 8], None)));
        for want in [
            "Speedup vs N",
            "Efficiency vs N",
            "Energy per job vs N",
            "amdahl fit",
        ] {
            assert_eq!(s.matches(want).count(), 1, "{want}");
        }
        // The energy panel's bounds are drawn alike and named once ("min" and "max" were two
        // identical dashed entries); no legend covers data, no text overlaps.
        let f = crate::svg::testing::checked(|| svg(&result(&[1, 2, 4, 8], None)));
        let entries: Vec<&str> = f.panels[2]
            .legend_entries
            .iter()
            .map(|e| e.label.as_str())
            .collect();
        assert_eq!(entries, ["median", "min, max"]);
        // Empty result: still a valid document.
        assert!(svg(&result(&[1], Some(1))).starts_with("<svg"));
    }
}

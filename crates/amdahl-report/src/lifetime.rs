//! Rendering of `amdahl lifetime` results: a table (one column per alternative), CSV (one row
//! per alternative) and an SVG of cumulative energy over the days of serving.

use crate::carbon::{kg, kwh, num};
use crate::svg::{figure, Axis, Label, Plot, Scale, Series, Style, PALETTE};
use crate::table::{Align, Table};
use amdahl_model::carbon::lifetime::{Alternative, BreakEven, LifetimeReport};

fn day(d: Option<f64>, days: f64) -> String {
    match d {
        Some(d) => format!("day {}", num(d, 3)),
        None => format!("not within {} days", num(days, 4)),
    }
}

fn percent(x: f64) -> String {
    format!("{} %", num(x * 100.0, 3))
}

fn grid(a: &Alternative, serving: bool) -> String {
    let (i, p) = if serving {
        (&a.serving.intensity, &a.serving.pue)
    } else {
        (&a.training.intensity, &a.training.pue)
    };
    format!(
        "PUE {}, {} g/kWh ({}, {})",
        num(p.value, 3),
        num(i.g_per_kwh.get(), 4),
        i.code,
        amdahl_model::catalog::grid::year_label(i.year)
    )
}

/// Relative distance from a whole number within which a break-even is that number: the quotient
/// `(T_c − T_o) / (s_o − s_c)` carries floating-point error from the PUE and intensity products
/// (a break-even of 5e8 requests by energy came out as 500,000,000.0000001 by CO2e, two ulps above), far below 1e-9 of it.
const WHOLE_TOLERANCE: f64 = 1e-9;

/// The first whole request at which a break-even of `n` requests is reached: `n` itself when it
/// is a whole number up to floating-point error ([`WHOLE_TOLERANCE`]), else the next one up (a
/// break-even between two whole requests is reached at the next).
fn whole_requests(n: f64) -> f64 {
    let nearest = n.round();
    if (n - nearest).abs() <= WHOLE_TOLERANCE * nearest.abs() {
        nearest
    } else {
        n.ceil()
    }
}

/// The sentence for one break-even.
fn break_even(b: &BreakEven, what: &str, r: &LifetimeReport) -> String {
    match (b.requests, b.day) {
        (Some(n), Some(d)) => format!(
            "by {what}: {} (the costlier to train) becomes the cheaper after {} requests, day {} \
             at {} a day ({})\n",
            b.costlier_training,
            crate::count(whole_requests(n)),
            num(d, 4),
            crate::count(r.requests_per_day),
            if b.within_horizon {
                "within the horizon"
            } else {
                "beyond the horizon"
            }
        ),
        _ => format!(
            "by {what}: {} (the costlier to train) never becomes the cheaper: it does not serve \
             more cheaply than {}\n",
            b.costlier_training, b.other
        ),
    }
}

/// One column per alternative, then how each phase's energy was obtained and the break-even.
pub fn table(r: &LifetimeReport) -> String {
    let mut out = format!(
        "{} requests a day for {} days = {} requests\n\n",
        crate::count(r.requests_per_day),
        crate::count(r.days),
        crate::count(r.requests)
    );
    let mut t = Table::new(
        std::iter::once("quantity".to_string())
            .chain(r.alternatives.iter().map(|a| a.label.clone())),
    );
    for i in 1..=r.alternatives.len() {
        t = t.align(i, Align::Left);
    }
    let mut row = |k: &str, f: &dyn Fn(&Alternative) -> String| {
        t.row(std::iter::once(k.to_string()).chain(r.alternatives.iter().map(f)));
    };
    row("training IT energy", &|a| {
        format!(
            "{} ({})",
            kwh(a.training.it_energy_kwh),
            a.training.basis.name()
        )
    });
    row("training site", &|a| grid(a, false));
    row("training facility energy", &|a| kwh(a.training.energy_kwh));
    row("training CO2e", &|a| kg(a.training.co2e_kg));
    row("serving IT per 1,000 requests", &|a| {
        format!(
            "{} ({})",
            kwh(a.serving.it_kwh_per_1000_requests),
            a.serving.basis.name()
        )
    });
    row("serving site", &|a| grid(a, true));
    row("serving facility energy", &|a| kwh(a.serving_energy_kwh));
    row("serving CO2e", &|a| kg(a.serving_co2e_kg));
    row("total energy", &|a| kwh(a.total_energy_kwh));
    row("total CO2e", &|a| kg(a.total_co2e_kg));
    row("inference share (energy)", &|a| {
        percent(a.inference_share_energy)
    });
    row("inference share (CO2e)", &|a| {
        percent(a.inference_share_co2e)
    });
    row("serving overtakes training (energy)", &|a| {
        day(a.overtake_day_energy, r.days)
    });
    row("serving overtakes training (CO2e)", &|a| {
        day(a.overtake_day_co2e, r.days)
    });
    out.push_str(&t.render());
    for a in &r.alternatives {
        out.push_str(&format!(
            "{}: training {}; serving {}\n",
            a.label, a.training.method, a.serving.method
        ));
    }
    if let Some(v) = &r.break_even {
        out.push('\n');
        out.push_str(&break_even(&v.energy, "energy", r));
        out.push_str(&break_even(&v.co2e, "CO2e", r));
    }
    out
}

/// One row per alternative.
pub fn csv(r: &LifetimeReport) -> Result<String, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "label",
        "requests_per_day",
        "days",
        "training_energy_kwh",
        "training_co2e_kg",
        "kwh_per_1000_requests",
        "co2e_kg_per_1000_requests",
        "serving_energy_kwh",
        "serving_co2e_kg",
        "total_energy_kwh",
        "total_co2e_kg",
        "inference_share_energy",
        "overtake_day_energy",
    ])?;
    let opt = |x: Option<f64>| x.map_or(String::new(), |d| d.to_string());
    for a in &r.alternatives {
        w.write_record([
            a.label.clone(),
            r.requests_per_day.to_string(),
            r.days.to_string(),
            a.training.energy_kwh.to_string(),
            a.training.co2e_kg.to_string(),
            a.serving.kwh_per_1000_requests.to_string(),
            a.serving.co2e_kg_per_1000_requests.to_string(),
            a.serving_energy_kwh.to_string(),
            a.serving_co2e_kg.to_string(),
            a.total_energy_kwh.to_string(),
            a.total_co2e_kg.to_string(),
            a.inference_share_energy.to_string(),
            opt(a.overtake_day_energy),
        ])?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Cumulative facility energy over the days of serving: per alternative the total (training at
/// day 0 plus serving so far, solid), serving alone (dashed), training (dotted level); the day
/// serving overtakes training and the break-even day are labelled.
pub fn svg(r: &LifetimeReport) -> String {
    let top = r
        .alternatives
        .iter()
        .map(|a| a.total_energy_kwh)
        .fold(0.0, f64::max);
    let (unit, div) = if top >= 1e4 {
        ("MWh", 1e3)
    } else {
        ("kWh", 1.0)
    };
    let mut p = Plot::new(
        "Cumulative energy over the model's life",
        Axis::new(Scale::Linear, "days of serving").range(0.0, r.days),
        Axis::new(Scale::Linear, format!("facility energy ({unit})")).range(0.0, top / div * 1.05),
    );
    let one = r.alternatives.len() == 1;
    // Several alternatives: one legend entry per kind of line (in grey) and one per alternative
    // (its colour), not every kind once per alternative.
    let what = |w: &'static str| if one { w } else { "" };
    if !one {
        for (w, style) in [
            ("training + serving", Style::Line),
            ("serving", Style::DashedLine),
            ("training (once)", Style::LinePoints),
        ] {
            p.series.push(Series::new(w, "#555555", style));
        }
    }
    for (i, a) in r.alternatives.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        if !one {
            p.series
                .push(Series::new(a.label.clone(), color, Style::Points));
        }
        let t = a.training.energy_kwh / div;
        let s = a.serving_energy_kwh / div;
        p.series.push(
            Series::new(what("training + serving"), color, Style::Line)
                .points([(0.0, t), (r.days, t + s)]),
        );
        p.series.push(
            Series::new(what("serving"), color, Style::DashedLine)
                .points([(0.0, 0.0), (r.days, s)]),
        );
        // Training is paid once: a flat reference line, so the day the dashed serving line
        // crosses it (serving overtakes training) can be seen, not only read from the label.
        p.series.push(
            Series::new(what("training (once)"), color, Style::LinePoints)
                .points([(0.0, t), (r.days, t)]),
        );
        if let Some(d) = a.overtake_day_energy {
            p.labels.push(Label {
                x: d,
                y: t,
                text: format!(
                    "{}serving > training, day {}",
                    if one {
                        String::new()
                    } else {
                        format!("{}: ", a.label)
                    },
                    num(d, 3)
                ),
            });
        }
    }
    if let (Some(v), [a, _]) = (&r.break_even, r.alternatives.as_slice()) {
        if let (Some(d), true) = (v.energy.day, v.energy.within_horizon) {
            let y = (a.training.energy_kwh + a.serving_energy_kwh * d / r.days) / div;
            p.labels.push(Label {
                x: d,
                y,
                text: format!(
                    "break-even: {} cheaper after day {}",
                    v.energy.costlier_training,
                    num(d, 3)
                ),
            });
        }
    }
    figure(&[p], 720.0, 440.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdahl_model::carbon::lifetime::{Horizon, Serving, Side, Training};
    use amdahl_model::carbon::{Basis, Pue};
    use amdahl_model::catalog::grid::{GridIntensity, GridScope};
    use amdahl_model::units::Joules;

    fn side(label: &str, train_kwh: f64, kwh_per_1000: f64) -> Side {
        let g = GridIntensity::custom(100.0, GridScope::Lifecycle, Some(2023)).unwrap();
        let p = Pue::new(1.0, "given").unwrap();
        (
            label.into(),
            Training::new(
                Joules::from_kwh(train_kwh),
                Basis::Estimated,
                "t",
                p.clone(),
                g.clone(),
            )
            .unwrap(),
            Serving::new(
                Joules::from_kwh(kwh_per_1000 / 1e3),
                Basis::Estimated,
                "s",
                p,
                g,
            )
            .unwrap(),
        )
    }

    #[test]
    fn table_states_overtake_and_break_even() {
        // B pays back after (3,000 − 1,000) / (2 − 1) × 1,000 = 2,000,000 requests, day 20.
        let r = LifetimeReport::new(
            Horizon::new(1e5, 30.0).unwrap(),
            vec![side("big", 1000.0, 2.0), side("small", 3000.0, 1.0)],
        )
        .unwrap();
        let t = table(&r);
        assert!(t.contains("small (the costlier to train) becomes the cheaper after 2,000,000 requests, day 20"), "{t}");
        // big: 1,000 kWh / 200 kWh a day = day 5; small: 3,000 / 100 = day 30.
        let row = t
            .lines()
            .find(|l| l.starts_with("serving overtakes training (energy)"))
            .unwrap();
        let days: Vec<&str> = row.split("day ").skip(1).map(str::trim).collect();
        assert_eq!(days, ["5", "30"], "{row}");
        let svg = svg(&r);
        assert!(
            svg.contains("break-even: small cheaper after day 20"),
            "{svg}"
        );
        // The legend covers no line and says each thing once: three kinds of line in grey and
        // one colour per alternative, not each kind per alternative (six entries).
        let f = crate::svg::testing::last_figure();
        crate::svg::testing::check_layout(&f);
        let entries: Vec<&str> = f.panels[0]
            .legend_entries
            .iter()
            .map(|e| e.label.as_str())
            .collect();
        assert_eq!(
            entries,
            [
                "training + serving",
                "serving",
                "training (once)",
                "big",
                "small"
            ]
        );
        let csv = csv(&r).unwrap();
        assert_eq!(csv.lines().count(), 3);
    }

    #[test]
    fn a_whole_break_even_off_by_rounding_error_is_not_one_request_more() {
        // `amdahl lifetime` 50,000 kWh + 0.4 kWh/1,000 requests against 200,000 kWh + 0.1 on the
        // US grid, PUE hyperscale: 500,000,000 requests by energy, and by CO2e 500,000,000.0000001
        // (two ulps above) that the old `ceil` printed as 500,000,001.
        let above = f64::from_bits(5e8f64.to_bits() + 2);
        assert_eq!(above, 500_000_000.000_000_1);
        assert!(above > 5e8);
        assert_eq!(whole_requests(above), 5e8);
        assert_eq!(whole_requests(f64::from_bits(5e8f64.to_bits() - 1)), 5e8);
        assert_eq!(whole_requests(5e8), 5e8);
        // A genuine fraction is still reached at the next whole request.
        assert_eq!(whole_requests(2.5), 3.0);
        assert_eq!(whole_requests(5e8 + 0.75), 5e8 + 1.0);
        assert_eq!(whole_requests(0.25), 1.0);
        let r = LifetimeReport::new(
            Horizon::new(1e6, 365.0).unwrap(),
            vec![side("A", 1000.0, 2.0), side("B", 3000.0, 1.0)],
        )
        .unwrap();
        let b = BreakEven {
            requests: Some(above),
            day: Some(above / 1e6),
            ..r.break_even.clone().unwrap().co2e
        };
        let s = break_even(&b, "CO2e", &r);
        assert!(s.contains("after 500,000,000 requests, day 500"), "{s}");
    }

    #[test]
    fn not_within_the_horizon_is_said() {
        let r = LifetimeReport::new(Horizon::new(10.0, 7.0).unwrap(), vec![side("A", 1e6, 1.0)])
            .unwrap();
        assert!(table(&r).contains("not within 7 days"));
    }
}

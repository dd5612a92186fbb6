//! Rendering of `amdahl carbon` results: a human table, CSV, and the statement as Markdown or LaTeX
//! (JSON is `to_json` of the structs).

use crate::sig;
use crate::table::{Align, Table};
use amdahl_model::carbon::{CarbonReport, Statement};

/// `sig` without trailing zeros, with thousands separators: 1.10 → "1.1", 1291159 → "1,291,159".
pub(crate) fn num(x: f64, digits: usize) -> String {
    let s = sig(x, digits);
    if s.contains('e') || !x.is_finite() {
        return s;
    }
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    let (sign, rest) = s.strip_prefix('-').map_or(("", s.as_str()), |r| ("-", r));
    let (int, frac) = rest
        .split_once('.')
        .map_or((rest, None), |(i, f)| (i, Some(f)));
    let mut grouped = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

fn kg(x: f64) -> String {
    if x >= 1e4 {
        format!("{} t", num(x / 1e3, 4))
    } else {
        format!("{} kg", num(x, 4))
    }
}

fn kwh(x: f64) -> String {
    if x >= 1e4 {
        format!("{} MWh", num(x / 1e3, 4))
    } else {
        format!("{} kWh", num(x, 4))
    }
}

/// The estimate as a two-column table, then the region comparison when asked for.
pub fn table(r: &CarbonReport) -> String {
    let mut t = Table::new(["quantity", "value"]).align(1, Align::Left);
    let mut kv = |k: &str, v: String| t.row([k.to_string(), v]);
    kv("energy", format!("{} ({})", r.basis.name(), r.method));
    if let Some(d) = &r.device {
        let n = r
            .count
            .map(|n| format!("{} × ", num(f64::from(n), 10)))
            .unwrap_or_default();
        kv("hardware", format!("{n}{d}"));
    }
    let mut dur = format!(
        "{} days ({} h)",
        num(r.duration_days, 4),
        num(r.duration_s / 3600.0, 4)
    );
    if let Some(h) = r.device_hours {
        dur.push_str(&format!(", {} device-hours", num(h, 4)));
    }
    kv("duration", dur);
    if let Some(w) = r.power_per_device_w {
        kv("power per device", format!("{} W", num(w, 4)));
    }
    kv("IT energy", kwh(r.it_energy_kwh));
    kv("PUE", format!("{} ({})", num(r.pue.value, 3), r.pue.source));
    kv("facility energy", kwh(r.energy_kwh));
    let g = &r.intensity;
    kv(
        "grid",
        format!(
            "{} gCO2e/kWh, {} ({}, {}; {})",
            num(g.g_per_kwh.get(), 4),
            g.name,
            g.year,
            g.scope.name(),
            g.source
        ),
    );
    kv("operational CO2e", kg(r.co2e_kg));
    if let Some(e) = &r.embodied {
        kv(
            "embodied CO2e",
            format!(
                "{} ({}% of a {}-year life; LLMCarbon)",
                kg(e.co2e.kg()),
                num(e.life_share * 100.0, 3),
                num(e.lifetime_years, 3)
            ),
        );
    }
    kv("total CO2e", kg(r.total_co2e_kg));
    let q = &r.equivalents;
    kv(
        "equivalent to",
        format!(
            "{} km by car; {} passenger round trips New York-San Francisco",
            num(q.car_km, 3),
            num(q.flights_ny_sf, 3)
        ),
    );
    let mut out = t.render();
    out.push_str(&format!(
        "equivalents: {}; {}\n",
        q.car_source, q.flight_source
    ));
    if !r.compare.is_empty() {
        out.push('\n');
        let mut c = Table::new([
            "grid",
            "name",
            "gCO2e/kWh",
            "year",
            "scope",
            "operational CO2e",
            "× chosen",
        ])
        .align(1, Align::Left)
        .align(4, Align::Left);
        for x in &r.compare {
            c.row([
                x.intensity.code.clone(),
                x.intensity.name.clone(),
                num(x.intensity.g_per_kwh.get(), 4),
                x.intensity.year.to_string(),
                x.intensity.scope.name().to_string(),
                kg(x.co2e_kg),
                num(x.ratio, 3),
            ]);
        }
        out.push_str(&c.render());
    }
    out
}

/// One CSV row per grid (the chosen grid first, then `--compare` grids), the job's energy repeated.
pub fn csv(r: &CarbonReport) -> Result<String, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "grid",
        "g_per_kwh",
        "year",
        "scope",
        "basis",
        "duration_s",
        "it_energy_kwh",
        "pue",
        "energy_kwh",
        "co2e_kg",
        "embodied_co2e_kg",
    ])?;
    let row = |code: &str, g: f64, year: u16, scope: &str, co2e: f64| {
        vec![
            code.to_string(),
            g.to_string(),
            year.to_string(),
            scope.to_string(),
            r.basis.name().to_string(),
            r.duration_s.to_string(),
            r.it_energy_kwh.to_string(),
            r.pue.value.to_string(),
            r.energy_kwh.to_string(),
            co2e.to_string(),
            r.embodied_co2e_kg.to_string(),
        ]
    };
    let i = &r.intensity;
    w.write_record(row(
        &i.code,
        i.g_per_kwh.get(),
        i.year,
        i.scope.name(),
        r.co2e_kg,
    ))?;
    for c in &r.compare {
        let i = &c.intensity;
        w.write_record(row(
            &i.code,
            i.g_per_kwh.get(),
            i.year,
            i.scope.name(),
            c.co2e_kg,
        ))?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Markup differences between the statement formats.
struct Markup {
    escape: fn(&str) -> String,
    co2: &'static str,
    times: &'static str,
}

fn statement(s: &Statement, m: &Markup) -> String {
    let e = m.escape;
    let hardware = match (&s.device, s.count) {
        (Some(d), Some(n)) => format!("{} {} {}", num(f64::from(n), 10), m.times, e(d)),
        (Some(d), None) => e(d),
        (None, Some(n)) => format!("{} devices", num(f64::from(n), 10)),
        (None, None) => "the measured hardware".into(),
    };
    let mut out = format!(
        "The computation ran on {hardware} for {} hours",
        num(s.duration_hours, 4)
    );
    if let Some(h) = s.device_hours {
        out.push_str(&format!(" ({} device-hours)", num(h, 4)));
    }
    let how = match s.basis {
        amdahl_model::carbon::Basis::Measured => "measured",
        amdahl_model::carbon::Basis::Estimated => "estimated",
    };
    out.push_str(&format!(
        ". Its IT energy was {how} at {} kWh ({}). With a power usage effectiveness (PUE) of {} ({}), the facility energy was {} kWh. ",
        num(s.it_energy_kwh, 4),
        e(&s.method),
        num(s.pue, 3),
        e(&s.pue_source),
        num(s.energy_kwh, 4),
    ));
    out.push_str(&format!(
        "At a grid carbon intensity of {} g{co2}/kWh ({}, {}, {} emissions; source: {}), this corresponds to {} kg{co2} of operational emissions",
        num(s.intensity_g_per_kwh, 4),
        e(&s.intensity_region),
        s.intensity_year,
        s.intensity_scope,
        e(&s.intensity_source),
        num(s.co2e_kg, 4),
        co2 = m.co2,
    ));
    if let (Some(kg), Some(y)) = (s.embodied_co2e_kg, s.embodied_lifetime_years) {
        out.push_str(&format!(
            ", plus {} kg{} embodied in the hardware (its share of a {}-year service life, after LLMCarbon, Faiz et al. 2024)",
            num(kg, 4),
            m.co2,
            num(y, 3)
        ));
    }
    out.push_str(". Computed with amdahl.\n");
    out
}

/// The statement as a Markdown paragraph.
pub fn statement_markdown(s: &Statement) -> String {
    statement(
        s,
        &Markup {
            escape: |t| t.to_string(),
            co2: "CO₂e",
            times: "×",
        },
    )
}

/// Escape LaTeX's special characters in running text.
fn tex_escape(t: &str) -> String {
    let mut o = String::with_capacity(t.len());
    for c in t.chars() {
        match c {
            '\\' => o.push_str("\\textbackslash{}"),
            '&' | '%' | '$' | '#' | '_' | '{' | '}' => {
                o.push('\\');
                o.push(c);
            }
            '~' => o.push_str("\\textasciitilde{}"),
            '^' => o.push_str("\\textasciicircum{}"),
            _ => o.push(c),
        }
    }
    o
}

/// The statement as a LaTeX paragraph (needs no packages).
pub fn statement_latex(s: &Statement) -> String {
    statement(
        s,
        &Markup {
            escape: tex_escape,
            co2: "CO$_2$e",
            times: "$\\times$",
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdahl_model::carbon::{estimate, ItEnergy, Pue};
    use amdahl_model::catalog::grid::{self, GridIntensity, Scope};
    use amdahl_model::units::{Seconds, Watts};

    fn gpt3() -> CarbonReport {
        let it = ItEnergy::from_power(
            10_000,
            Seconds::from_days(14.8),
            Watts(330.0),
            "330 W average per device (given)",
        )
        .unwrap();
        estimate(
            &it,
            Some("V100 SXM2 16GB"),
            Pue::new(1.1, "given").unwrap(),
            GridIntensity::custom(429.0, Scope::Direct, 2021).unwrap(),
            None,
            vec![grid::lookup("FR").unwrap()],
        )
    }

    #[test]
    fn numbers_are_trimmed_and_grouped() {
        assert_eq!(num(1.10, 3), "1.1");
        assert_eq!(num(1291159.4, 4), "1,291,159");
        assert_eq!(num(-1234.5, 5), "-1,234.5");
        assert_eq!(num(5.0, 3), "5");
        assert_eq!(num(7.19e-7, 3), "7.19e-7");
    }

    #[test]
    fn table_has_facility_energy_and_emissions() {
        let s = table(&gpt3());
        assert!(s.contains("facility energy   1,289 MWh"), "{s}");
        assert!(s.contains("operational CO2e  553.1 t"), "{s}");
        assert!(s.contains("FR"), "{s}");
    }

    #[test]
    fn latex_statement_escapes_and_marks_estimate() {
        let mut r = gpt3();
        r.intensity.source = "100% made_up & co".into();
        let s = statement_latex(&Statement::from_report(&r));
        assert!(s.contains("100\\% made\\_up \\& co"), "{s}");
        assert!(s.contains("10,000 $\\times$ V100"), "{s}");
        assert!(s.contains("was estimated at"), "{s}");
    }

    /// The statement is what people paste into papers: any change to its wording shows up here.
    #[test]
    fn statement_snapshots() {
        let s = Statement::from_report(&gpt3());
        insta::assert_snapshot!("statement_md", statement_markdown(&s));
        insta::assert_snapshot!("statement_tex", statement_latex(&s));
        insta::assert_snapshot!("carbon_table", table(&gpt3()));
    }

    #[test]
    fn csv_has_one_row_per_grid() {
        let s = csv(&gpt3()).unwrap();
        assert_eq!(s.lines().count(), 3);
        assert!(s
            .lines()
            .nth(2)
            .unwrap()
            .starts_with("FR,56,2023,lifecycle,estimated,"));
    }
}

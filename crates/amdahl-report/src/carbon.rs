//! Rendering of `amdahl carbon` results: a human table, CSV, and the statement as Markdown or LaTeX
//! (JSON is `to_json` of the structs).

use crate::table::{Align, Table};
use amdahl_model::carbon::network::{Move, Transfer};
use amdahl_model::carbon::{CarbonReport, Statement};
use amdahl_model::catalog::grid::year_label;

/// `sig` without trailing zeros, with thousands separators: 1.10 → "1.1", 1291159 → "1,291,159".
pub(crate) fn num(x: f64, digits: usize) -> String {
    amdahl_model::units::readable(x, digits)
}

pub(crate) fn kg(x: f64) -> String {
    if x >= 1e4 {
        format!("{} t", num(x / 1e3, 4))
    } else {
        format!("{} kg", num(x, 4))
    }
}

pub(crate) fn kwh(x: f64) -> String {
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
            year_label(g.year),
            g.scope.name(),
            first_clause(&g.source)
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
        out.push_str(&compare_table(r));
        let compared: Vec<_> = r.compare.iter().map(|c| c.intensity.clone()).collect();
        if let Some(note) = amdahl_model::carbon::estimate::mixed_scopes(&r.intensity, &compared) {
            out.push_str(&format!("note: {note}\n"));
        }
    }
    if let Some(t) = &r.transfer {
        out.push_str(&moving(r, t));
    }
    out
}

/// The same energy on each grid compared, and its ratio to the chosen one.
fn compare_table(r: &CarbonReport) -> String {
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
            year_label(x.intensity.year),
            x.intensity.scope.name().to_string(),
            kg(x.co2e_kg),
            x.ratio.map_or_else(|| "-".into(), |v| num(v, 3)),
        ]);
    }
    c.render()
}

/// A data volume in GB, TB or PB (decimal, as network figures are quoted per GB = 10⁹ bytes).
fn volume(gb: f64) -> String {
    if gb >= 1e6 {
        format!("{} PB", num(gb / 1e6, 3))
    } else if gb >= 1e3 {
        format!("{} TB", num(gb / 1e3, 3))
    } else {
        format!("{} GB", num(gb, 3))
    }
}

/// Where to run: each `--compare` site with the data shipped there from the chosen grid.
fn moving(r: &CarbonReport, t: &Transfer) -> String {
    let mut out = format!(
        "\nmoving the job: {} × {} kWh/GB = {} for the transfer ({}), charged to the chosen \
         grid ({}): {}\n",
        volume(t.data_gb),
        num(t.network.kwh_per_gb, 4),
        kwh(t.energy_kwh),
        t.network.source,
        t.charged_to,
        kg(t.co2e_kg),
    );
    let mut c = Table::new([
        "grid",
        "operational CO2e",
        "+ transfer",
        "total",
        "× staying",
        "moving pays?",
        "break-even data",
    ]);
    for x in &r.compare {
        let Some(m) = &x.moved else { continue };
        c.row([
            x.intensity.code.clone(),
            kg(x.co2e_kg),
            kg(m.transfer_co2e_kg),
            kg(m.total_co2e_kg),
            num(m.ratio, 3),
            if m.pays { "yes" } else { "no" }.to_string(),
            match m.break_even_gb {
                Some(gb) if gb.is_finite() => volume(gb),
                Some(_) => "any volume".to_string(),
                None => "never (grid not cleaner)".to_string(),
            },
        ]);
    }
    out.push_str(&c.render());
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
        "transfer_co2e_kg",
        "pays",
    ])?;
    // `transfer_co2e_kg` and `pays` are empty except for `--compare` rows with `--data-gb`.
    let row =
        |code: &str, g: f64, year: Option<u16>, scope: &str, co2e: f64, moved: Option<&Move>| {
            vec![
                code.to_string(),
                g.to_string(),
                year.map(|y| y.to_string()).unwrap_or_default(),
                scope.to_string(),
                r.basis.name().to_string(),
                r.duration_s.to_string(),
                r.it_energy_kwh.to_string(),
                r.pue.value.to_string(),
                r.energy_kwh.to_string(),
                co2e.to_string(),
                r.embodied_co2e_kg.to_string(),
                moved.map_or(String::new(), |m| m.transfer_co2e_kg.to_string()),
                moved.map_or(String::new(), |m| m.pays.to_string()),
            ]
        };
    let i = &r.intensity;
    w.write_record(row(
        &i.code,
        i.g_per_kwh.get(),
        i.year,
        i.scope.name(),
        r.co2e_kg,
        None,
    ))?;
    for c in &r.compare {
        let i = &c.intensity;
        w.write_record(row(
            &i.code,
            i.g_per_kwh.get(),
            i.year,
            i.scope.name(),
            c.co2e_kg,
            c.moved.as_ref(),
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

/// Text that goes inside the statement's own parentheses: inner parentheses become commas and
/// code ticks go, so the paragraph never nests parentheses (sources and method strings carry
/// their own). A run's `covers` clause (the method's last) keeps its groups as brackets: as
/// commas, "CPU packages (counter) + DRAM (counter)" read "CPU packages, counter + DRAM,
/// counter", each part no longer with its methods.
fn flat(t: &str) -> String {
    let commas = |t: &str| t.replace(" (", ", ").replace(['(', ')', '`'], "");
    match t.find("; covers ") {
        Some(i) => {
            let (head, covers) = t.split_at(i);
            commas(head) + &covers.replace('(', "[").replace(')', "]").replace('`', "")
        }
        None => commas(t),
    }
}

/// A duration in the unit a reader expects: seconds, minutes, hours, then days, each with the
/// table's 4 digits (seconds and minutes had 3: "101 seconds" beside the table's "0.02797 h").
/// Seconds and minutes are not a decimal shift of the table's hours, so they are rounded from
/// the exact value.
fn duration_words(hours: f64) -> String {
    let secs = hours * 3600.0;
    if secs < 120.0 {
        format!("{} seconds", num(secs, 4))
    } else if secs < 7200.0 {
        format!("{} minutes", num(secs / 60.0, 4))
    } else if hours < 72.0 {
        format!("{} hours", num(hours, 4))
    } else {
        format!("{} days", num(hours / 24.0, 4))
    }
}

/// An energy in J, Wh, kWh or MWh, whichever keeps the number readable. Wh are the table's kWh
/// figure ([`kwh`]) rounded first, then scaled, so both show the same digits; kWh and MWh are
/// computed as the table computes them; J are not a decimal shift of kWh, so they are rounded
/// from the exact value.
pub(crate) fn energy_words(exact_kwh: f64) -> String {
    let kwh = amdahl_model::units::rounded(exact_kwh, 4);
    if kwh >= 1e4 {
        format!("{} MWh", num(exact_kwh / 1e3, 4))
    } else if kwh >= 1.0 {
        format!("{} kWh", num(exact_kwh, 4))
    } else if kwh >= 1e-3 {
        format!("{} Wh", num(kwh * 1e3, 4))
    } else {
        format!("{} J", num(exact_kwh * 3.6e6, 4))
    }
}

/// A mass of CO2e in mg, g, kg or t, whichever keeps the number readable: the table's kg figure
/// ([`kg`]) rounded first, then scaled, so both show the same digits (kg and t are computed as
/// the table computes them).
pub(crate) fn mass_words(exact_kg: f64, co2: &str) -> String {
    let kg = amdahl_model::units::rounded(exact_kg, 4);
    if kg >= 1e4 {
        format!("{} t{co2}", num(exact_kg / 1e3, 4))
    } else if kg >= 1.0 {
        format!("{} kg{co2}", num(exact_kg, 4))
    } else if kg >= 1e-3 {
        format!("{} g{co2}", num(kg * 1e3, 4))
    } else if kg >= 1e-6 {
        format!("{} mg{co2}", num(kg * 1e6, 4))
    } else {
        // A run of a few milliseconds on an estimated CPU: micrograms, never "6.9e-3 mg".
        format!("{} µg{co2}", num(kg * 1e9, 4))
    }
}

fn statement(s: &Statement, m: &Markup) -> String {
    let e = |t: &str| (m.escape)(&flat(t));
    let co2 = m.co2;
    let hardware = match (&s.device, s.count) {
        (Some(d), Some(n)) => format!("{} {} {}", num(f64::from(n), 10), m.times, e(d)),
        (Some(d), None) => e(d),
        (None, Some(n)) => format!("{} devices", num(f64::from(n), 10)),
        // A run record names no device; its energy is measured only if every device in its
        // total was ("the measured hardware" was said of a run estimated throughout).
        (None, None) => match s.basis {
            amdahl_model::carbon::Basis::Measured => "the measured hardware".into(),
            amdahl_model::carbon::Basis::Estimated => "the observed hardware".into(),
        },
    };
    // A prediction is worded in the conditional; a job that ran, in the past.
    let (ran, was, is) = if s.predicted {
        ("would run", "would be", "would correspond")
    } else {
        ("ran", "was", "corresponds")
    };
    let mut out = String::new();
    for c in &s.caveats {
        out.push_str(&format!("Caution: {}. ", e(c)));
    }
    out.push_str(&format!(
        "The computation {ran} on {hardware} for {}",
        duration_words(s.duration_hours)
    ));
    if let Some(h) = s.device_hours {
        out.push_str(&format!(" ({} device-hours)", num(h, 4)));
    }
    let energy = match (s.predicted, s.basis) {
        (true, _) => format!("would be {}", energy_words(s.it_energy_kwh)),
        (false, amdahl_model::carbon::Basis::Measured) => {
            format!("was measured at {}", energy_words(s.it_energy_kwh))
        }
        (false, amdahl_model::carbon::Basis::Estimated) => {
            format!("was estimated at {}", energy_words(s.it_energy_kwh))
        }
    };
    out.push_str(&format!(
        ". Its IT energy {energy} ({}). With a power usage effectiveness (PUE) of {} ({}), the facility energy {was} {}. ",
        e(&s.method),
        num(s.pue, 3),
        e(&s.pue_source),
        energy_words(s.energy_kwh),
    ));
    out.push_str(&format!(
        "At a grid carbon intensity of {} g{co2}/kWh ({}, {}, {} emissions; source: {}), this {is} to {} of operational emissions",
        num(s.intensity_g_per_kwh, 4),
        e(&s.intensity_region),
        year_label(s.intensity_year),
        s.intensity_scope,
        e(&s.intensity_source),
        mass_words(s.co2e_kg, co2),
    ));
    if let (Some(kg), Some(y)) = (s.embodied_co2e_kg, s.embodied_lifetime_years) {
        out.push_str(&format!(
            ", plus {} embodied in the hardware: its share of a {}-year service life, after LLMCarbon, Faiz et al. 2024",
            mass_words(kg, co2),
            num(y, 3)
        ));
    }
    // The version lets a reader reproduce the figure: models and catalogs change between releases.
    out.push_str(&format!(
        ". Computed with amdahl {}.\n",
        env!("CARGO_PKG_VERSION")
    ));
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

/// The statement as a LaTeX paragraph (needs no packages).
pub fn statement_latex(s: &Statement) -> String {
    statement(
        s,
        &Markup {
            escape: crate::escape::latex,
            co2: "CO$_2$e",
            times: "$\\times$",
        },
    )
}

/// The first clause of a provenance text ("EPA eGRID2022 …; read from …; region: …"): what a
/// table row has room for. JSON and the statement keep the whole text.
fn first_clause(source: &str) -> &str {
    source.split("; ").next().unwrap_or(source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_row_shows_the_first_clause_of_a_long_provenance() {
        // The eGRID rows carry the conversion, the file read and the ZIP evidence of the cloud
        // region: the carbon table's grid row had grown to 570 characters.
        let src =
            "EPA eGRID2022 subregion CO2 rate x 0.45359237 = g/kWh; read from USEPA/ggcapdthemes; \
                   region: AWS Regions documentation";
        assert_eq!(
            first_clause(src),
            "EPA eGRID2022 subregion CO2 rate x 0.45359237 = g/kWh"
        );
        assert_eq!(first_clause("Ember 2023"), "Ember 2023");
    }
    use amdahl_model::carbon::{estimate, ItEnergy, Pue};
    use amdahl_model::catalog::grid::{self, GridIntensity, GridScope};
    use amdahl_model::units::{Seconds, Watts};

    fn gpt3() -> CarbonReport {
        let it = ItEnergy::from_power(
            10_000,
            Seconds::from_days(14.8),
            Watts(330.0),
            "330 W average per device, given",
        )
        .unwrap();
        estimate(
            &it,
            Some("V100 SXM2 16GB"),
            Pue::new(1.1, "given").unwrap(),
            GridIntensity::custom(429.0, GridScope::Direct, Some(2021)).unwrap(),
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

    /// The deepest nesting of parentheses in `t`.
    fn paren_depth(t: &str) -> usize {
        let (mut depth, mut max) = (0usize, 0usize);
        for c in t.chars() {
            match c {
                '(' => {
                    depth += 1;
                    max = max.max(depth);
                }
                ')' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        max
    }

    /// A one-minute measured run on the world default grid that failed (exit 2).
    fn failed_short_run() -> CarbonReport {
        let mut it = ItEnergy::measured(
            amdahl_model::units::Joules(353_500.0),
            Seconds(35.35),
            "measured by amdahl run, file r.json",
        )
        .unwrap();
        it.caveats.push(
            "the measured command failed with exit status 2, so the figures describe a failed run"
                .into(),
        );
        let mut world = grid::lookup("world").unwrap();
        world.name = "World (default)".into();
        estimate(
            &it,
            None,
            Pue::new(
                1.0,
                "local preset, default: No facility overhead (a laptop)",
            )
            .unwrap(),
            world,
            None,
            vec![],
        )
    }

    /// The statement of a prediction says what the computation would use (never "The computation
    /// ran … for 997.9 hours"), that of a failed run says it failed, and neither prints
    /// "9.820e-5 hours", internal ids like `estimate:cpu` or nested parentheses.
    #[test]
    fn statement_of_a_prediction_says_would_and_of_a_failed_run_says_so() {
        let mut plan = gpt3();
        plan.predicted = true;
        plan.method = "amdahl plan prediction, file plan.json: GPT-3 (175B) on 1024 × A100".into();
        let p = statement_markdown(&Statement::from_report(&plan));
        assert!(p.contains("The computation would run on"), "{p}");
        assert!(
            p.contains("would be 1,172 MWh") && !p.contains(" ran "),
            "{p}"
        );
        assert_eq!(paren_depth(&p), 1, "{p}");
        insta::assert_snapshot!("statement_md_prediction", p);

        let f = statement_markdown(&Statement::from_report(&failed_short_run()));
        assert!(
            f.starts_with("Caution: the measured command failed with exit status 2"),
            "{f}"
        );
        assert!(f.contains("for 35.35 seconds"), "{f}");
        assert!(f.contains("measured at 98.19 Wh"), "{f}");
        assert!(f.contains("42.81 gCO₂e"), "{f}");
        let sci = f.as_bytes().windows(3).any(|w| {
            w[0].is_ascii_digit() && w[1] == b'e' && (w[2] == b'-' || w[2].is_ascii_digit())
        });
        assert!(!sci, "no scientific notation: {f}");
        assert_eq!(paren_depth(&f), 1, "{f}");
        insta::assert_snapshot!("statement_md_failed_short_run", f);
        let tex = statement_latex(&Statement::from_report(&failed_short_run()));
        assert_eq!(paren_depth(&tex), 1, "{tex}");
    }

    #[test]
    fn readable_units() {
        assert_eq!(duration_words(9.82e-5), "0.3535 seconds");
        assert_eq!(duration_words(0.5), "30 minutes");
        assert_eq!(duration_words(997.9), "41.58 days");
        assert_eq!(energy_words(2e-7), "0.72 J");
        assert_eq!(mass_words(2e-4, "CO2e"), "200 mgCO2e");
        // The flaky statement test's case: a 6 ms failed run, 0.0069 mg.
        assert_eq!(mass_words(6.899e-9, "CO2e"), "6.899 µgCO2e");
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

//! Rendering of `amdahl carbon --sci` results (`amdahl.sci/1`): the formula and the declared R
//! above one row per figure (E, I, E × I, M, SCI), the notes below; CSV one row per figure.

use crate::carbon::{kg, kwh, num};
use crate::table::{Align, Table};
use amdahl_model::carbon::sci::SciResult;

/// The table `amdahl carbon --sci` prints.
pub fn table(r: &SciResult) -> String {
    let mut out = format!(
        "{}\nfunctional unit R = {} {}{} (declared; SCI for AI {} unit)\n\n",
        r.standard,
        crate::count(r.r),
        r.unit.name(),
        if r.r == 1.0 { "" } else { "s" },
        r.side.name()
    );
    let mut t = Table::new(["figure", "E", "I gCO2e/kWh", "E × I", "M", "SCI"]);
    for c in 1..=5 {
        t = t.align(c, Align::Right);
    }
    for i in &r.items {
        t.row([
            i.label.clone(),
            kwh(i.energy_kwh),
            num(i.intensity_g_per_kwh, 4),
            kg(i.operational_kg),
            kg(i.embodied_kg),
            format!("{} gCO2e per {}", num(i.g_per_unit, 4), r.unit.name()),
        ]);
    }
    out.push_str(&t.render());
    for i in &r.items {
        out.push_str(&format!(
            "{}: {}; M: {}\n",
            i.label, i.source, i.embodied_source
        ));
    }
    for n in &r.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

/// One CSV row per figure, in SI-free units named in the header.
pub fn csv(r: &SciResult) -> Result<String, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "figure",
        "unit",
        "side",
        "r",
        "energy_kwh",
        "intensity_g_per_kwh",
        "operational_kg",
        "embodied_kg",
        "total_kg",
        "g_per_unit",
    ])?;
    for i in &r.items {
        w.write_record([
            i.label.clone(),
            r.unit.name().to_string(),
            r.side.name().to_string(),
            format!("{:?}", r.r),
            format!("{:?}", i.energy_kwh),
            format!("{:?}", i.intensity_g_per_kwh),
            format!("{:?}", i.operational_kg),
            format!("{:?}", i.embodied_kg),
            format!("{:?}", i.total_kg),
            format!("{:?}", i.g_per_unit),
        ])?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdahl_model::carbon::sci::{item, result, Covers, Embodied, Part, Unit};

    /// 2 kWh at 300 g/kWh (600 g) + M 0.4 kg (400 g) = 1 kg over R = 10,000 tokens: 0.1 g each.
    #[test]
    fn table_shows_the_formula_r_and_the_figure() {
        let i = item(
            "the job",
            "given",
            &[Part {
                energy_kwh: 2.0,
                g_per_kwh: 300.0,
            }],
            &Embodied {
                kg: 0.4,
                source: "declared".into(),
            },
            1e4,
        )
        .unwrap();
        let r = result(Unit::Token, 1e4, Covers::Serving, vec![i]);
        let t = table(&r);
        assert!(t.contains("SCI = (E × I + M) per R"), "{t}");
        assert!(t.contains("R = 10,000 tokens"), "{t}");
        assert!(t.contains("0.1 gCO2e per token"), "{t}");
        assert!(t.contains("0.6 kg") && t.contains("0.4 kg"), "{t}");
        let c = csv(&r).unwrap();
        assert!(c.lines().nth(1).unwrap().ends_with(",1.0,0.1"), "{c}");
    }
}

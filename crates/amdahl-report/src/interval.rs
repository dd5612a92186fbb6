//! A figure with its prediction interval, as tables print it: "55.0 s (90 %: 51.2–58.9)", or
//! "(no validation data)" where the class has none.

use crate::sig;
use amdahl_model::interval::Interval;

/// `text` (the figure as the table prints it) followed by its band in `scale` units (the band's
/// ends divided by `scale`, e.g. 1e3 for kWh printed as MWh), 3 significant digits.
pub fn with_band(text: String, i: Option<&Interval>, scale: f64) -> String {
    let Some(i) = i else {
        return text;
    };
    match (i.low, i.high) {
        (Some(lo), Some(hi)) => format!(
            "{text} ({:.0} %: {}–{})",
            100.0 * i.level,
            sig(lo / scale, 3),
            sig(hi / scale, 3)
        ),
        _ => format!("{text} (no validation data)"),
    }
}

/// One line naming where the bands come from, for under a table; empty when none.
pub fn basis_note(intervals: &[(&str, &Interval)]) -> String {
    let mut bases: Vec<String> = Vec::new();
    for (what, i) in intervals {
        let line = format!("{what}: {}", i.basis);
        if !bases.iter().any(|b| b.ends_with(&i.basis)) {
            bases.push(line);
        }
    }
    if bases.is_empty() {
        return String::new();
    }
    format!(
        "intervals ({:.0} %, from validation errors): {}\n",
        100.0 * intervals[0].1.level,
        bases.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_print_beside_the_figure() {
        let i = Interval {
            value: 55.0,
            low: Some(51.23),
            high: Some(58.91),
            level: 0.9,
            basis: "nemo".into(),
        };
        assert_eq!(
            with_band("55.0 s".into(), Some(&i), 1.0),
            "55.0 s (90 %: 51.2–58.9)"
        );
        let none = Interval::none(1.0, "x: no validation data".into());
        assert_eq!(
            with_band("1 s".into(), Some(&none), 1.0),
            "1 s (no validation data)"
        );
        assert_eq!(with_band("1 s".into(), None, 1.0), "1 s");
        assert_eq!(
            basis_note(&[("step time", &i), ("tokens/s", &i)]),
            "intervals (90 %, from validation errors): step time: nemo\n"
        );
    }
}

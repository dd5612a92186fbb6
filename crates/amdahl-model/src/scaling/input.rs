//! Reading measured scaling runs from CSV or JSON into a typed [`Dataset`].
//!
//! Columns (case-insensitive): `n` (processor count, ≥ 1) plus exactly one measure — `time`,
//! `throughput`, `speedup`, `efficiency`, or `rmax` with `rpeak` — optional per-phase times
//! (`compute`, `communication`, `sync`, `copy`, `serial`; without `time` their sum is the time) and
//! an optional `label` that splits the file into several series. CSV lines starting with `#` are
//! comments. JSON is an array of row objects, or `{"n_counts": "...", "rows": [...]}`.
//!
//! Every error names the row and column; the caller adds the file name.

use super::error::ScalingError;
use serde::{Deserialize, Serialize};

/// What the value column of a series measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Measure {
    /// Wall time of a fixed amount of work (strong scaling).
    Time,
    /// Work per unit time.
    Throughput,
    /// Speedup against the baseline run.
    Speedup,
    /// Parallel efficiency S/p in (0, 1].
    Efficiency,
    /// TOP500-style Rmax/Rpeak: efficiency against the peak.
    Rmax,
}

impl Measure {
    pub fn as_str(self) -> &'static str {
        match self {
            Measure::Time => "time",
            Measure::Throughput => "throughput",
            Measure::Speedup => "speedup",
            Measure::Efficiency => "efficiency",
            Measure::Rmax => "rmax/rpeak",
        }
    }
}

/// Phase columns, in the order they are reported. `copy` is host↔device copying; `serial` is any
/// other non-parallel work.
pub const PHASES: [&str; 5] = ["compute", "communication", "sync", "copy", "serial"];

/// Name of the pseudo-phase holding `time − Σ phases` when both are given.
pub const UNATTRIBUTED: &str = "unattributed";

/// One measured run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Row {
    /// 1-based source row (CSV line or JSON array element) for error messages.
    pub row: usize,
    pub n: f64,
    /// The measure's value; for [`Measure::Rmax`] this is Rmax/Rpeak.
    pub value: f64,
    /// Phase times aligned with [`Dataset::phase_names`] (empty when no phase columns).
    pub phases: Vec<f64>,
}

/// The runs of one label, in file order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Series {
    pub label: String,
    pub rows: Vec<Row>,
}

/// A parsed input file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Dataset {
    pub measure: Measure,
    /// What N counts (processes, GPUs, nodes, clients), when the file says.
    pub n_counts: Option<String>,
    pub phase_names: Vec<String>,
    pub series: Vec<Series>,
}

/// Input format hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Json,
}

impl Format {
    /// Guess from the first non-blank character: `{` or `[` is JSON, anything else CSV.
    pub fn sniff(text: &str) -> Format {
        match text.trim_start().chars().next() {
            Some('{') | Some('[') => Format::Json,
            _ => Format::Csv,
        }
    }
}

/// Parse `text` in the given format.
pub fn parse(text: &str, format: Format) -> Result<Dataset, ScalingError> {
    match format {
        Format::Csv => parse_csv(text),
        Format::Json => parse_json(text),
    }
}

/// A cell before it is known to be a number.
#[derive(Debug, Clone)]
enum Cell {
    Text(String),
    Num(f64),
    Empty,
}

/// Parse CSV text with a header line.
pub fn parse_csv(text: &str) -> Result<Dataset, ScalingError> {
    let mut rdr = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let csv_err = |e: csv::Error| ScalingError::Csv {
        line: e.position().map(|p| p.line()).unwrap_or(0),
        message: e.to_string(),
    };
    let header: Vec<String> = rdr
        .headers()
        .map_err(csv_err)?
        .iter()
        .map(|h| h.trim_start_matches('\u{feff}').to_ascii_lowercase())
        .collect();
    let label_col = header.iter().position(|h| h == "label");
    let n_counts = text
        .lines()
        .take_while(|l| l.trim().is_empty() || l.trim_start().starts_with('#') || !l.contains(','))
        .filter_map(|l| l.trim().strip_prefix('#'))
        .find_map(|l| l.trim().strip_prefix("n_counts:"))
        .map(|s| s.trim().to_string());
    let mut b = Builder::new(&header, n_counts)?;
    // One reused record and cell buffer, numbers parsed on the spot: a million rows stay cheap.
    let mut rec = csv::StringRecord::new();
    let mut cells = Vec::with_capacity(header.len());
    while rdr.read_record(&mut rec).map_err(csv_err)? {
        let line = rec.position().map(|p| p.line()).unwrap_or(0) as usize;
        cells.clear();
        cells.extend(rec.iter().enumerate().map(|(i, s)| {
            if s.is_empty() {
                Cell::Empty
            } else if Some(i) == label_col {
                Cell::Text(s.to_string())
            } else {
                s.parse::<f64>()
                    .map_or_else(|_| Cell::Text(s.to_string()), Cell::Num)
            }
        }));
        b.push(line, &cells)?;
    }
    b.finish()
}

/// Parse JSON: an array of row objects, or an object with `rows` (and optional `n_counts`).
pub fn parse_json(text: &str) -> Result<Dataset, ScalingError> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| ScalingError::Json {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let (arr, n_counts) = match &v {
        serde_json::Value::Array(a) => (a, None),
        serde_json::Value::Object(o) => match o.get("rows") {
            Some(serde_json::Value::Array(a)) => (
                a,
                o.get("n_counts").and_then(|s| s.as_str()).map(String::from),
            ),
            _ => {
                return Err(ScalingError::Shape {
                    what: "JSON object".into(),
                    expected: "a `rows` array of objects like {\"n\": 4, \"time\": 2.5}".into(),
                })
            }
        },
        _ => {
            return Err(ScalingError::Shape {
                what: "JSON document".into(),
                expected: "an array of row objects or an object with `rows`".into(),
            })
        }
    };
    let mut header: Vec<String> = Vec::new();
    for (i, item) in arr.iter().enumerate() {
        let obj = item.as_object().ok_or_else(|| ScalingError::Shape {
            what: format!("JSON row {}", i + 1),
            expected: "an object like {\"n\": 4, \"time\": 2.5}".into(),
        })?;
        for k in obj.keys() {
            let k = k.to_ascii_lowercase();
            if !header.contains(&k) {
                header.push(k);
            }
        }
    }
    let mut b = Builder::new(&header, n_counts)?;
    for (i, item) in arr.iter().enumerate() {
        let obj = item.as_object();
        let cells: Vec<Cell> = header
            .iter()
            .map(|h| {
                let val = obj.and_then(|o| o.iter().find(|(k, _)| k.eq_ignore_ascii_case(h)));
                match val.map(|(_, v)| v) {
                    None | Some(serde_json::Value::Null) => Cell::Empty,
                    Some(serde_json::Value::Number(n)) => n.as_f64().map_or(Cell::Empty, Cell::Num),
                    Some(serde_json::Value::String(s)) => Cell::Text(s.clone()),
                    Some(other) => Cell::Text(other.to_string()),
                }
            })
            .collect();
        b.push(i + 1, &cells)?;
    }
    b.finish()
}

/// Where each known column sits in the header.
struct Layout {
    n: usize,
    label: Option<usize>,
    measure: Measure,
    value: Option<usize>,
    rpeak: Option<usize>,
    phases: Vec<usize>,
}

fn layout(header: &[String]) -> Result<Layout, ScalingError> {
    let mut seen: Vec<&str> = Vec::new();
    for (i, h) in header.iter().enumerate() {
        let known = [
            "n",
            "label",
            "time",
            "throughput",
            "speedup",
            "efficiency",
            "rmax",
            "rpeak",
        ];
        if !known.contains(&h.as_str()) && !PHASES.contains(&h.as_str()) {
            return Err(ScalingError::UnknownColumn {
                column: h.clone(),
                index: i + 1,
            });
        }
        if seen.contains(&h.as_str()) {
            return Err(ScalingError::Shape {
                what: format!("column `{h}` (column {})", i + 1),
                expected: "each column name once".into(),
            });
        }
        seen.push(h);
    }
    let pos = |name: &str| header.iter().position(|h| h == name);
    let n = pos("n").ok_or_else(|| ScalingError::MissingColumn {
        column: "n".into(),
        hint: "add the processor count of each run as column `n`".into(),
    })?;
    let mut measures: Vec<(&str, Measure)> = [
        ("time", Measure::Time),
        ("throughput", Measure::Throughput),
        ("speedup", Measure::Speedup),
        ("efficiency", Measure::Efficiency),
        ("rmax", Measure::Rmax),
    ]
    .into_iter()
    .filter(|(c, _)| pos(c).is_some())
    .collect();
    let phases: Vec<usize> = PHASES.iter().filter_map(|p| pos(p)).collect();
    if pos("rpeak").is_some() && pos("rmax").is_none() {
        return Err(ScalingError::MissingColumn {
            column: "rmax".into(),
            hint: "`rpeak` needs `rmax` (efficiency = Rmax/Rpeak)".into(),
        });
    }
    if measures.len() > 1 {
        return Err(ScalingError::AmbiguousMeasure {
            first: measures[0].0.into(),
            second: measures[1].0.into(),
        });
    }
    let (measure, value) = match measures.pop() {
        Some((c, m)) => (m, pos(c)),
        None if !phases.is_empty() => (Measure::Time, None),
        None => {
            return Err(ScalingError::MissingColumn {
                column: "time".into(),
                hint: "give one of `time`, `throughput`, `speedup`, `efficiency`, or `rmax` and `rpeak` (or phase columns)".into(),
            })
        }
    };
    let rpeak = pos("rpeak");
    if measure == Measure::Rmax && rpeak.is_none() {
        return Err(ScalingError::MissingColumn {
            column: "rpeak".into(),
            hint: "`rmax` needs `rpeak` (efficiency = Rmax/Rpeak)".into(),
        });
    }
    Ok(Layout {
        n,
        label: pos("label"),
        measure,
        value,
        rpeak,
        phases,
    })
}

fn number(cells: &[Cell], idx: usize, row: usize, column: &str) -> Result<f64, ScalingError> {
    let err = |message: String| ScalingError::Value {
        row,
        column: column.into(),
        message,
    };
    let v = match cells.get(idx) {
        Some(Cell::Num(v)) => *v,
        Some(Cell::Text(s)) => s
            .parse::<f64>()
            .map_err(|_| err(format!("`{s}` is not a number")))?,
        Some(Cell::Empty) | None => return Err(err("empty; every row needs a value".into())),
    };
    if !v.is_finite() {
        return Err(err(format!("{v} is not a finite number")));
    }
    Ok(v)
}

/// Turns rows of cells into series, validating each row as it arrives.
struct Builder<'h> {
    header: &'h [String],
    lay: Layout,
    phase_names: Vec<String>,
    split_rest: bool,
    n_counts: Option<String>,
    series: Vec<Series>,
}

impl<'h> Builder<'h> {
    fn new(header: &'h [String], n_counts: Option<String>) -> Result<Self, ScalingError> {
        if header.is_empty() {
            return Err(ScalingError::Empty);
        }
        let lay = layout(header)?;
        let mut phase_names: Vec<String> = lay.phases.iter().map(|&i| header[i].clone()).collect();
        let split_rest = !lay.phases.is_empty() && lay.value.is_some();
        if split_rest {
            phase_names.push(UNATTRIBUTED.into());
        }
        Ok(Self {
            header,
            lay,
            phase_names,
            split_rest,
            n_counts,
            series: Vec::new(),
        })
    }

    /// Duplicate N within a series, found by sorting (O(n log n), no hashing per row). The
    /// reported pair is the earliest repeat in file order.
    fn check_duplicates(&self) -> Result<(), ScalingError> {
        for s in &self.series {
            let mut keys: Vec<(u64, usize)> =
                s.rows.iter().map(|r| (r.n.to_bits(), r.row)).collect();
            keys.sort_unstable();
            let dup = keys
                .windows(2)
                .filter(|w| w[0].0 == w[1].0)
                .min_by_key(|w| w[1].1);
            if let Some(w) = dup {
                return Err(ScalingError::DuplicateN {
                    label: s.label.clone(),
                    n: f64::from_bits(w[0].0),
                    first_row: w[0].1,
                    row: w[1].1,
                });
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<Dataset, ScalingError> {
        if self.series.is_empty() {
            return Err(ScalingError::Empty);
        }
        self.check_duplicates()?;
        Ok(Dataset {
            measure: self.lay.measure,
            n_counts: self.n_counts,
            phase_names: self.phase_names,
            series: self.series,
        })
    }

    fn push(&mut self, row: usize, cells: &[Cell]) -> Result<(), ScalingError> {
        let (header, lay, split_rest) = (self.header, &self.lay, self.split_rest);
        let phase_names = &self.phase_names;
        let bad = |column: &str, message: String| ScalingError::Value {
            row,
            column: column.into(),
            message,
        };
        let n = number(cells, lay.n, row, "n")?;
        if n < 1.0 {
            return Err(bad("n", format!("{n} is below 1; N counts processors")));
        }
        let mut phases = Vec::with_capacity(phase_names.len());
        for &i in &lay.phases {
            let v = number(cells, i, row, &header[i])?;
            if v < 0.0 {
                return Err(bad(
                    &header[i],
                    format!("{v} is negative; phase times are ≥ 0"),
                ));
            }
            phases.push(v);
        }
        let value = match (lay.measure, lay.value) {
            (Measure::Time, None) => {
                let t: f64 = phases.iter().sum();
                if t <= 0.0 {
                    return Err(bad(
                        "compute",
                        "phase times sum to 0; the run must take time".into(),
                    ));
                }
                t
            }
            (m, Some(i)) => {
                let col = header[i].as_str();
                let v = number(cells, i, row, col)?;
                match m {
                    Measure::Efficiency if !(v > 0.0 && v <= 1.0) => {
                        return Err(bad(col, format!("{v} is outside (0, 1]; give efficiency as a fraction (0.85, not 85)")));
                    }
                    Measure::Rmax => {
                        let peak = number(cells, lay.rpeak.unwrap_or(usize::MAX), row, "rpeak")?;
                        if v <= 0.0 || peak <= 0.0 {
                            return Err(bad(col, "Rmax and Rpeak must be positive".into()));
                        }
                        if v > peak {
                            return Err(bad(col, format!("Rmax {v} exceeds Rpeak {peak}; check the units of both columns")));
                        }
                        v / peak
                    }
                    _ if v <= 0.0 => {
                        return Err(bad(col, format!("{v} must be positive")));
                    }
                    _ => v,
                }
            }
            (_, None) => {
                return Err(bad("n", "no measure column".into()));
            }
        };
        if split_rest {
            let sum: f64 = phases.iter().sum();
            if sum > value * (1.0 + 1e-9) {
                return Err(bad(
                    "time",
                    format!("phase times sum to {sum}, more than the time {value}"),
                ));
            }
            phases.push((value - sum).max(0.0));
        }
        let label = match lay.label.and_then(|i| cells.get(i)) {
            Some(Cell::Text(s)) => s.clone(),
            Some(Cell::Num(v)) => v.to_string(),
            _ => String::new(),
        };
        let series = &mut self.series;
        let idx = match series.iter().position(|s| s.label == label) {
            Some(i) => i,
            None => {
                series.push(Series {
                    label,
                    rows: Vec::new(),
                });
                series.len() - 1
            }
        };
        if let Some(s) = series.get_mut(idx) {
            s.rows.push(Row {
                row,
                n,
                value,
                phases,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_with_labels_comments_and_phases() {
        let d = parse_csv(
            "# n_counts: GPUs\nn,label,compute,communication\n1,a,10,0\n2,a,5,1\n1,b,8,0\n",
        )
        .unwrap();
        assert_eq!(d.measure, Measure::Time);
        assert_eq!(d.n_counts.as_deref(), Some("GPUs"));
        assert_eq!(d.series.len(), 2);
        assert_eq!(d.series[0].rows[1].value, 6.0);
        assert_eq!(d.series[0].rows[1].row, 4);
    }

    #[test]
    fn errors_name_row_and_column() {
        let e = parse_csv("n,time\n1,10\n2,-3\n").unwrap_err();
        assert!(
            matches!(e, ScalingError::Value { row: 3, ref column, .. } if column == "time"),
            "{e}"
        );
        let e = parse_csv("n,time,foo\n1,1,1\n").unwrap_err();
        assert!(
            matches!(e, ScalingError::UnknownColumn { index: 3, .. }),
            "{e}"
        );
        let e = parse_csv("n,efficiency\n1,1\n4,85\n").unwrap_err();
        assert!(e.to_string().contains("row 3, column `efficiency`"), "{e}");
        let e = parse_csv("n,time\n1,1\n1,2\n").unwrap_err();
        assert!(
            matches!(
                e,
                ScalingError::DuplicateN {
                    first_row: 2,
                    row: 3,
                    ..
                }
            ),
            "{e}"
        );
        let e = parse_csv("n,time\n0.5,1\n").unwrap_err();
        assert!(e.to_string().contains("below 1"), "{e}");
        let e = parse_csv("n,time\n1,1,7\n").unwrap_err();
        assert!(matches!(e, ScalingError::Csv { line: 2, .. }), "{e}");
        assert!(matches!(
            parse_csv("time\n1\n").unwrap_err(),
            ScalingError::MissingColumn { .. }
        ));
        assert!(matches!(
            parse_csv("n,time,speedup\n1,1,1\n").unwrap_err(),
            ScalingError::AmbiguousMeasure { .. }
        ));
        assert!(matches!(
            parse_csv("n,time\n").unwrap_err(),
            ScalingError::Empty
        ));
    }

    #[test]
    fn json_rows_and_errors() {
        let d = parse_json(r#"{"n_counts":"nodes","rows":[{"n":1,"rmax":7,"rpeak":10},{"n":2,"rmax":6,"rpeak":10}]}"#).unwrap();
        assert_eq!(d.measure, Measure::Rmax);
        assert!((d.series[0].rows[0].value - 0.7).abs() < 1e-15);
        let e = parse_json(r#"[{"n":1,"time":1},{"n":2}]"#).unwrap_err();
        assert!(matches!(e, ScalingError::Value { row: 2, .. }), "{e}");
        let e = parse_json("[{\"n\":1,\n\"time\":}]").unwrap_err();
        assert!(matches!(e, ScalingError::Json { line: 2, .. }), "{e}");
        assert!(parse_json("42").is_err());
        assert!(parse_json(r#"[{"n":1,"rmax":11,"rpeak":10}]"#).is_err());
    }

    #[test]
    fn time_with_phases_keeps_the_rest_unattributed() {
        let d = parse_csv("n,time,compute\n1,10,9\n").unwrap();
        assert_eq!(d.phase_names, ["compute", UNATTRIBUTED]);
        assert_eq!(d.series[0].rows[0].phases, [9.0, 1.0]);
        assert!(parse_csv("n,time,compute\n1,10,11\n").is_err());
    }
}

//! `amdahl report`: one self-contained HTML page from saved results, to share or archive with
//! a paper.
//!
//! Each file is read through the same schema types the commands serialise (`RunRecord`,
//! `FitResult`, …), so a file that does not match its declared schema is refused with the field
//! serde names, and a schema this build does not know (another kind, or a newer version) gets a
//! message saying which. The page embeds everything — styles, inline SVG plots, tables — and loads
//! nothing: no script, font, image or stylesheet from anywhere, so it opens offline and can be
//! archived with a paper.
//!
//! Per result the page shows: the key figures (every number at the top of the JSON and one level
//! down, formatted like the terminal tables), the result's plot, its detail table (the same rows
//! as its `--csv`), its terminal summary, its provenance (commands, versions, data sources, and
//! which figures are measured and which estimated) and, for results `carbon --from` reads, the
//! citable statement. Results of one kind are compared side by side.

use crate::kind::{self, Saved, Typed};
use crate::sig;
use serde_json::Value;
use std::fmt::Write as _;

/// One file given to the report: its name, the saved result (read by [`kind::read`]: its kind,
/// the typed result, and the JSON the key figures and provenance walk) and, where `carbon --from`
/// reads the kind, the citable statement the binary computed from it (Markdown).
#[derive(Debug, Clone)]
pub struct Entry {
    pub file: String,
    pub saved: Saved,
    pub statement: Option<String>,
}

impl Entry {
    fn schema(&self) -> &'static str {
        self.saved.kind.id
    }
}

fn title_of(schema: &str) -> &'static str {
    kind::kind(schema)
        .and_then(kind::Kind::title)
        .unwrap_or("Results")
}

/// What one result contributes to the page.
struct Parts {
    /// Terminal summary (the command's table output).
    text: String,
    /// Detail table as CSV (header row first), the rows of the command's `--csv`.
    csv: Option<String>,
    svg: Option<String>,
    /// One sentence: which of its figures are measured and which estimated.
    nature: String,
}

fn parts(s: &Saved) -> Parts {
    let r = s.typed.render();
    Parts {
        text: r.table(),
        csv: r.csv().ok(),
        svg: r.svg(),
        nature: nature(s),
    }
}

/// What a result's figures are, from what the result records where the kind's figures can be
/// of either nature: a run's or a merge's devices (measured, partly or wholly estimated) opened
/// by the run's caveats (a failed or interrupted command, as its statement opens), a lifetime's
/// phases; the kind's fixed sentence otherwise.
fn nature(s: &Saved) -> String {
    let text = match &s.typed {
        Typed::Run(r) if r.devices.is_empty() => {
            "Measured by another rank: this record holds no devices.".to_string()
        }
        Typed::Run(r) => run_nature(r.devices.iter().filter(|d| d.in_total).map(|d| {
            (
                d.id.as_str(),
                matches!(d.method, amdahl_meter::Method::Estimate),
            )
        })),
        Typed::Merge(m) => merge_nature(m),
        Typed::Lifetime(l) => lifetime_nature(l),
        Typed::Plan(p) if !p.device.tuning.provenance.is_empty() => {
            tuned_nature("a model prediction", &p.device.tuning.provenance)
        }
        Typed::Infer(i) if !i.tuning.is_empty() => {
            tuned_nature("a serving model's prediction", &i.tuning)
        }
        _ => return s.kind.nature().to_string(),
    };
    let caveats = match &s.typed {
        Typed::Run(_) | Typed::Merge(_) => amdahl_model::carbon::from_result::run_caveats(&s.json),
        _ => Vec::new(),
    };
    caveats
        .iter()
        .map(|c| format!("Caution: {c}. "))
        .chain([text])
        .collect()
}

/// The caption of a prediction whose device constants came from the user's measurements (a
/// device profile, a calibration) rather than only from published specifications.
fn tuned_nature(what: &str, provenance: &[String]) -> String {
    format!(
        "Estimated: {what} from published device specifications with constants measured by the \
         user ({}); the prediction itself measured nothing.",
        provenance.join("; ")
    )
}

/// The caption of a merge from the methods of its nodes' devices: "Measured" was said of a merge
/// of runs whose every device was estimated.
fn merge_nature(m: &amdahl_meter::record::MergeResult) -> String {
    use amdahl_meter::Method;
    let methods = || m.nodes.iter().flat_map(|n| n.methods.iter());
    let estimated = methods().any(|x| *x == Method::Estimate);
    let measured = methods().any(|x| *x != Method::Estimate);
    match (estimated, measured) {
        (false, _) => "Measured: the sum of the merged runs' measured records (each run's \
                       devices keep their own method)."
            .to_string(),
        (true, false) => "Estimated, not measured: the sum of the merged runs' records, whose \
                          devices had no readable counter and were estimated from their use \
                          (CPU time × TDP share, RAM × W per GB)."
            .to_string(),
        (true, true) => "Partly estimated: the sum of the merged runs' records, some of whose \
                         devices had no readable counter and were estimated from their use; the \
                         others were measured (each run's devices keep their own method)."
            .to_string(),
    }
}

/// The caption of a lifetime from its phases' bases: it was "training and serving energy
/// predicted by the model, embodied carbon from published factors", also for given or measured
/// energies, and a lifetime charges no embodied carbon.
fn lifetime_nature(l: &amdahl_model::carbon::lifetime::LifetimeReport) -> String {
    use amdahl_model::carbon::Basis;
    let phase = |basis: &dyn Fn(&amdahl_model::carbon::lifetime::Alternative) -> Basis| {
        let all = |b: Basis| l.alternatives.iter().all(|a| basis(a) == b);
        if all(Basis::Measured) {
            "measured"
        } else if all(Basis::Estimated) {
            "estimated"
        } else {
            "measured for some alternatives, estimated for others"
        }
    };
    format!(
        "Training energy {}, serving energy {}, as each alternative's methods say (terminal \
         summary); operational emissions only, no embodied carbon.",
        phase(&|a| a.training.basis),
        phase(&|a| a.serving.basis)
    )
}

/// The caption of a run from its devices in the total, (id, estimated): measured, partly
/// estimated (naming both sides), or estimated throughout — an all-estimate run was called
/// "partly estimated … the other devices were measured".
fn run_nature<'a>(devices: impl Iterator<Item = (&'a str, bool)>) -> String {
    let (estimated, measured): (Vec<_>, Vec<_>) = devices.partition(|d| d.1);
    let ids = |v: &[(&str, bool)]| v.iter().map(|d| d.0).collect::<Vec<_>>().join(", ");
    const ASSUMED: &str = "PUE and grid intensity are assumed values (see provenance).";
    match (estimated.is_empty(), measured.is_empty()) {
        (true, _) => format!(
            "Measured: every device in the total was read from an energy counter or a power \
             reading during the run; {ASSUMED}"
        ),
        (false, true) => format!(
            "Estimated, not measured: no device in the total had a readable counter; {} were \
             estimated from their use (CPU time × TDP share, RAM × W per GB). {ASSUMED}",
            ids(&estimated)
        ),
        (false, false) => format!(
            "Partly estimated: {} had no readable counter and were estimated from their use; {} \
             were measured. {ASSUMED}",
            ids(&estimated),
            ids(&measured)
        ),
    }
}

/// A number as the page shows it: [`crate::num`].
pub use crate::num;

/// HTML-escape text (element content and attribute values): [`crate::escape::html`].
pub use crate::escape::html as esc;

/// The scalar figures of a result: every number, string and boolean at the top level and inside
/// objects (paths joined with dots, e.g. `training.train_time`), arrays left to the detail table.
/// `schema` itself is left out.
pub fn key_figures(v: &Value) -> Vec<(String, Value)> {
    fn walk(prefix: &str, v: &Value, depth: usize, out: &mut Vec<(String, Value)>) {
        let Some(obj) = v.as_object() else { return };
        for (k, x) in obj {
            let path = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            match x {
                Value::Object(_) if depth < 3 => walk(&path, x, depth + 1, out),
                Value::Number(_) | Value::Bool(_) => out.push((path, x.clone())),
                Value::String(s) if path != "schema" && s.chars().count() <= 120 => {
                    out.push((path, x.clone()))
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk("", v, 0, &mut out);
    out
}

/// Keys whose values say where a figure came from.
fn is_provenance(path: &str) -> bool {
    let last = path.rsplit('.').next().unwrap_or(path);
    [
        "version",
        "command",
        "source",
        "method",
        "basis",
        "origin",
        "citation",
        "year",
        "host",
        "hostname",
        "cpu",
        "device",
        "name",
        "estimated",
        "measured",
        "predicted",
        "started_at",
        "run_id",
        "file",
        "build",
    ]
    .iter()
    .any(|w| last.contains(w))
}

/// Provenance lines of a result: its file and schema, the command that made it (where the
/// result records it) and every field naming a version, source, method or basis, with its path.
fn provenance(e: &Entry) -> Vec<(String, String)> {
    let mut out = vec![
        ("file".to_string(), e.file.clone()),
        ("schema".to_string(), e.schema().to_string()),
    ];
    if let Some(cmd) = e.saved.json.get("command").and_then(Value::as_array) {
        let words: Vec<&str> = cmd.iter().filter_map(Value::as_str).collect();
        out.push(("command".into(), words.join(" ")));
    }
    fn walk(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(o) => {
                for (k, x) in o {
                    let path = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&path, x, out);
                }
            }
            Value::String(s)
                if is_provenance(prefix)
                    && prefix != "schema"
                    && !out.iter().any(|(p, _)| p == prefix) =>
            {
                out.push((prefix.to_string(), s.clone()));
            }
            Value::Bool(b) if is_provenance(prefix) => {
                out.push((prefix.to_string(), b.to_string()))
            }
            Value::Array(items) => {
                // Sources listed in arrays (a run's devices, a search's layouts) are summarised by
                // their distinct values so a long list does not drown the section.
                let mut seen: Vec<(String, String)> = Vec::new();
                for it in items {
                    let mut sub = Vec::new();
                    walk(&format!("{prefix}[]"), it, &mut sub);
                    for (p, s) in sub {
                        if !seen.iter().any(|(q, t)| *q == p && *t == s) && seen.len() < 40 {
                            seen.push((p, s));
                        }
                    }
                }
                out.extend(seen);
            }
            _ => {}
        }
    }
    walk("", &e.saved.json, &mut out);
    out
}

const STYLE: &str = r#"
body{font-family:"DejaVu Sans",Verdana,"Liberation Sans",Arial,sans-serif;margin:1.5rem auto;max-width:1400px;padding:0 1rem;color:#1a1a1a;line-height:1.4}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.3rem;border-bottom:2px solid #0072B2;padding-bottom:.2rem;margin-top:2.2rem}
h3{font-size:1.05rem;margin:.2rem 0 .6rem;word-break:break-all}
.meta{color:#555;font-size:.9rem}
.side{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,560px),1fr));gap:1rem}
.card{border:1px solid #ddd;border-radius:6px;padding:.8rem 1rem;background:#fff;min-width:0}
table{border-collapse:collapse;font-size:.85rem;margin:.4rem 0}
th,td{border-bottom:1px solid #e3e3e3;padding:.15rem .5rem;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
th{background:#f4f6f8;position:sticky;top:0}
.scroll{max-height:28rem;overflow:auto;border:1px solid #eee}
figure{margin:.6rem 0}figure svg{width:100%;max-width:960px;height:auto;display:block}
pre{font-size:.78rem;overflow-x:auto;background:#f7f7f7;padding:.5rem}
blockquote{margin:.5rem 0;padding:.5rem .8rem;border-left:4px solid #009E73;background:#f2faf7}
.nature{font-size:.9rem;background:#fff8e6;border-left:4px solid #E69F00;padding:.3rem .6rem}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.1rem .8rem;font-size:.82rem;margin:.3rem 0}
dt{color:#555}dd{margin:0;word-break:break-word}
details{margin:.4rem 0}summary{cursor:pointer;font-weight:600}
"#;

/// The whole page for `entries` (at least one), grouped by kind in the order each kind first
/// appears; `generator` names the amdahl that wrote it (shown in the header).
pub fn page(entries: &[Entry], generator: &str) -> String {
    let mut order: Vec<&'static str> = Vec::new();
    for e in entries {
        if !order.contains(&e.schema()) {
            order.push(e.schema());
        }
    }
    let mut out = String::with_capacity(64 * 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    // No network: the page may load nothing from anywhere (inline styles and SVG only).
    out.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n");
    out.push_str("<title>amdahl report</title>\n<style>");
    out.push_str(STYLE);
    out.push_str("</style>\n</head>\n<body>\n<h1>amdahl report</h1>\n");
    let _ = writeln!(
        out,
        "<p class=\"meta\">{} result file(s), written by {}. Every figure below is read from the files listed; nothing was recomputed except the plots, tables and statements drawn from them.</p>",
        entries.len(),
        esc(generator)
    );
    out.push_str("<nav><ul>\n");
    for schema in &order {
        let n = entries.iter().filter(|e| e.schema() == *schema).count();
        let _ = writeln!(
            out,
            "<li><a href=\"#{}\">{}</a> ({n})</li>",
            anchor(schema),
            esc(title_of(schema))
        );
    }
    out.push_str("</ul></nav>\n");
    let mut svg_index = 0usize;
    for schema in &order {
        let group: Vec<(usize, &Entry)> = entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.schema() == *schema)
            .collect();
        let _ = writeln!(
            out,
            "<section id=\"{}\">\n<h2>{} <span class=\"meta\">({})</span></h2>",
            anchor(schema),
            esc(title_of(schema)),
            esc(schema)
        );
        if group.len() > 1 {
            compare_table(&mut out, &group);
        }
        out.push_str("<div class=\"side\">\n");
        for (i, e) in &group {
            card(&mut out, *i, e, group.len() == 1, &mut svg_index);
        }
        out.push_str("</div>\n</section>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn anchor(schema: &str) -> String {
    schema
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn value_cell(file: usize, path: &str, v: &Value) -> String {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(x) => format!(
                "<td class=\"n\" data-file=\"{file}\" data-field=\"{}\">{}</td>",
                esc(path),
                esc(&crate::field_names::value(path, x))
            ),
            None => format!("<td>{}</td>", esc(&n.to_string())),
        },
        Value::String(s) => format!("<td>{}</td>", esc(s)),
        Value::Bool(b) => format!("<td>{b}</td>"),
        _ => "<td></td>".into(),
    }
}

/// Several results of one kind: one row per figure, one column per file.
fn compare_table(out: &mut String, group: &[(usize, &Entry)]) {
    let figures: Vec<Vec<(String, Value)>> = group
        .iter()
        .map(|(_, e)| key_figures(&e.saved.json))
        .collect();
    let mut paths: Vec<&str> = Vec::new();
    for f in &figures {
        for (p, _) in f {
            if !paths.contains(&p.as_str()) {
                paths.push(p);
            }
        }
    }
    out.push_str("<h3>Side by side</h3>\n<div class=\"scroll\"><table class=\"compare\">\n<tr><th>field</th>");
    for (_, e) in group {
        let _ = write!(out, "<th>{}</th>", esc(&e.file));
    }
    out.push_str("</tr>\n");
    for p in paths {
        let _ = write!(
            out,
            "<tr><th title=\"{}\">{}</th>",
            esc(p),
            esc(&crate::field_names::name(p))
        );
        for ((i, _), f) in group.iter().zip(&figures) {
            match f.iter().find(|(q, _)| q == p) {
                Some((_, v)) => out.push_str(&value_cell(*i, p, v)),
                None => out.push_str("<td></td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table></div>\n");
}

/// Give every `id` in an inline SVG a prefix unique in the page (several plots share one DOM).
fn unique_ids(svg: &str, n: usize) -> String {
    svg.replace("id=\"", &format!("id=\"f{n}-"))
        .replace("url(#", &format!("url(#f{n}-"))
}

fn card(out: &mut String, i: usize, e: &Entry, alone: bool, svg_index: &mut usize) {
    let p = parts(&e.saved);
    let _ = writeln!(
        out,
        "<article class=\"card\" data-file=\"{i}\">\n<h3>{}</h3>\n<p class=\"nature\">{}</p>",
        esc(&e.file),
        esc(&p.nature)
    );
    if let Some(svg) = &p.svg {
        // The data the SVG carries for `--svg` (written beside it as CSV) stay out of the page:
        // the detail table shows the result's rows.
        let (svg, _) = crate::svg::split_data(svg);
        *svg_index += 1;
        let _ = writeln!(
            out,
            "<figure>{}</figure>",
            unique_ids(
                svg.trim_start_matches("<?xml version=\"1.0\"?>"),
                *svg_index
            )
        );
    }
    if alone {
        out.push_str("<details open><summary>Key figures</summary><div class=\"scroll\"><table class=\"figures\">\n");
        for (path, v) in key_figures(&e.saved.json) {
            let _ = writeln!(
                out,
                "<tr><th title=\"{}\">{}</th>{}</tr>",
                esc(&path),
                esc(&crate::field_names::name(&path)),
                value_cell(i, &path, &v)
            );
        }
        out.push_str("</table></div></details>\n");
    }
    if let Some(csv_text) = &p.csv {
        if let Some(table) = csv_table(csv_text) {
            let _ = writeln!(
                out,
                "<details open><summary>Detail table</summary><div class=\"scroll\">{table}</div></details>"
            );
        }
    }
    if let Some(statement) = &e.statement {
        let _ = writeln!(
            out,
            "<h4>Citable statement</h4><blockquote class=\"statement\">{}</blockquote>",
            esc(statement.trim()).replace('\n', "<br>")
        );
    }
    if !p.text.trim().is_empty() {
        let _ = writeln!(
            out,
            "<details><summary>Terminal summary</summary><pre>{}</pre></details>",
            esc(&p.text)
        );
    }
    out.push_str("<details><summary>Provenance</summary><dl>\n");
    for (k, v) in provenance(e) {
        let _ = writeln!(out, "<dt>{}</dt><dd>{}</dd>", esc(&k), esc(&v));
    }
    out.push_str("</dl></details>\n</article>\n");
}

/// A CSV text (header first) as an HTML table; numeric cells right-aligned.
fn csv_table(text: &str) -> Option<String> {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(text.as_bytes());
    let headers = r.headers().ok()?.clone();
    let mut out = String::from("<table class=\"detail\">\n<tr>");
    for h in &headers {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>\n");
    let mut rows = 0;
    for rec in r.records() {
        let rec = rec.ok()?;
        out.push_str("<tr>");
        for cell in &rec {
            let value = cell.trim().parse::<f64>().ok();
            // CSV keeps full precision (90.09542622257399); the page shows long fractions with
            // four significant digits like every other number on it. Integers (counts, years,
            // ids) stay as written.
            let shown = match value {
                Some(v) if v.is_finite() && cell.len() > 8 && cell.contains(['.', 'e', 'E']) => {
                    sig(v, 4)
                }
                _ => cell.to_string(),
            };
            let _ = write!(
                out,
                "<td{}>{}</td>",
                if value.is_some() { " class=\"n\"" } else { "" },
                esc(&shown)
            );
        }
        out.push_str("</tr>\n");
        rows += 1;
    }
    out.push_str("</table>");
    (rows > 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_called_measured_partly_estimated_or_estimated_by_its_devices() {
        let measured = run_nature([("rapl:package-0", false)].into_iter());
        assert!(measured.starts_with("Measured: every device"), "{measured}");
        let partly = run_nature([("rapl:package-0", false), ("estimate:ram", true)].into_iter());
        assert!(
            partly.starts_with("Partly estimated: estimate:ram had no readable counter")
                && partly.contains("; rapl:package-0 were measured"),
            "{partly}"
        );
        let all = run_nature([("estimate:cpu", true), ("estimate:ram", true)].into_iter());
        assert!(
            all.starts_with("Estimated, not measured:")
                && all.contains("estimate:cpu, estimate:ram were estimated")
                && !all.contains("measured."),
            "{all}"
        );
    }

    #[test]
    fn key_figures_flatten_objects_and_skip_arrays() {
        let v: Value = serde_json::from_str(
            r#"{"schema":"x","a":1.5,"b":{"c":2,"d":[1,2]},"e":[{"f":1}],"g":"FR"}"#,
        )
        .unwrap();
        let k = key_figures(&v);
        let paths: Vec<&str> = k.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["a", "b.c", "g"]);
    }

    #[test]
    fn numbers_show_whole_counts_in_full_and_others_at_four_digits() {
        assert_eq!(num(100_000_000.0), "100,000,000");
        assert_eq!(num(0.781_77), "0.7818");
        assert_eq!(num(7.19e-7), "7.190e-7");
    }

    #[test]
    fn ids_of_inline_plots_are_made_unique() {
        let s = unique_ids(
            r#"<clipPath id="clip0_0"/><g clip-path="url(#clip0_0)">"#,
            3,
        );
        assert_eq!(
            s,
            r#"<clipPath id="f3-clip0_0"/><g clip-path="url(#f3-clip0_0)">"#
        );
    }
}

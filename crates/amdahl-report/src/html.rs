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

use crate::{bench, count, fit, infer, lifetime, meter, plan, scale, sig, top500};
use amdahl_bench::{gemm, gpu, memory, roofline, scaling as bench_scaling, sparse};
use amdahl_meter::{record, scale::result as scale_result};
use amdahl_model::carbon::lifetime as life;
use amdahl_model::{infer as inf, plan::result as plan_result, scaling, top500 as t5};
use serde_json::Value;
use std::fmt::Write as _;

/// A saved result, parsed into the type that wrote it.
#[derive(Debug, Clone)]
pub enum Saved {
    Run(Box<record::RunRecord>),
    Merge(Box<record::MergeResult>),
    Scale(Box<scale_result::ScaleResult>),
    Fit(Box<scaling::analysis::FitResult>),
    Top500(Box<t5::Top500Result>),
    Plan(Box<plan_result::PlanResult>),
    PlanSearch(Box<plan_result::SearchResult>),
    Infer(Box<inf::InferResult>),
    InferSearch(Box<inf::InferSearchResult>),
    Lifetime(Box<life::LifetimeReport>),
    Gemm(Box<gemm::GemmReport>),
    Sparse(Box<sparse::SparseReport>),
    Memory(Box<memory::MemoryReport>),
    Roofline(Box<roofline::RooflineReport>),
    BenchScaling(Box<bench_scaling::ScalingReport>),
    Gpu(Box<gpu::GpuReport>),
}

/// The schemas `amdahl report` shows, with a title for each kind's section.
pub const SUPPORTED: &[(&str, &str)] = &[
    (record::RUN_SCHEMA, "Measured runs"),
    (record::MERGE_SCHEMA, "Merged runs"),
    (scale_result::SCHEMA, "Scaling measurements"),
    (scaling::analysis::SCHEMA, "Scaling fits"),
    (t5::SCHEMA, "TOP500 analyses"),
    (plan_result::PLAN_SCHEMA, "Training plans"),
    (plan_result::SEARCH_SCHEMA, "Training plan searches"),
    (inf::INFER_SCHEMA, "Inference plans"),
    (inf::INFER_SEARCH_SCHEMA, "Inference plan searches"),
    (life::SCHEMA, "Lifetime costs"),
    (gemm::SCHEMA, "GEMM benchmarks"),
    (sparse::SCHEMA, "Sparse benchmarks"),
    (memory::SCHEMA, "Memory benchmarks"),
    (roofline::SCHEMA, "Roofline benchmarks"),
    (bench_scaling::SCHEMA, "Thread-scaling benchmarks"),
    (gpu::SCHEMA, "GPU benchmarks"),
];

/// Why a file cannot be shown.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ReadError {
    pub file: String,
    pub message: String,
}

/// One file given to the report: its name, the parsed result, the JSON it came from (for the
/// key figures and provenance, which walk it generically) and, where `carbon --from` reads the
/// kind, the citable statement the binary computed from it (Markdown).
#[derive(Debug, Clone)]
pub struct Entry {
    pub file: String,
    pub saved: Saved,
    pub json: Value,
    pub statement: Option<String>,
}

impl Saved {
    /// The `schema` this result was read as.
    pub fn schema(&self) -> &'static str {
        match self {
            Saved::Run(_) => record::RUN_SCHEMA,
            Saved::Merge(_) => record::MERGE_SCHEMA,
            Saved::Scale(_) => scale_result::SCHEMA,
            Saved::Fit(_) => scaling::analysis::SCHEMA,
            Saved::Top500(_) => t5::SCHEMA,
            Saved::Plan(_) => plan_result::PLAN_SCHEMA,
            Saved::PlanSearch(_) => plan_result::SEARCH_SCHEMA,
            Saved::Infer(_) => inf::INFER_SCHEMA,
            Saved::InferSearch(_) => inf::INFER_SEARCH_SCHEMA,
            Saved::Lifetime(_) => life::SCHEMA,
            Saved::Gemm(_) => gemm::SCHEMA,
            Saved::Sparse(_) => sparse::SCHEMA,
            Saved::Memory(_) => memory::SCHEMA,
            Saved::Roofline(_) => roofline::SCHEMA,
            Saved::BenchScaling(_) => bench_scaling::SCHEMA,
            Saved::Gpu(_) => gpu::SCHEMA,
        }
    }
}

/// Parse one result file's text (`file` names it in errors) into its schema type.
pub fn read(text: &str, file: &str) -> Result<Entry, ReadError> {
    let err = |message: String| ReadError {
        file: file.to_string(),
        message,
    };
    if text.trim().is_empty() {
        return Err(err(
            "the file is empty; give the JSON an amdahl command wrote with --json or -o".into(),
        ));
    }
    let json: Value = serde_json::from_str(text).map_err(|e| {
        if e.is_eof() {
            err(format!(
                "the JSON ends early (line {}, column {}): the file is truncated; write it again",
                e.line(),
                e.column()
            ))
        } else {
            err(format!(
                "not JSON ({e}); give the JSON an amdahl command wrote with --json or -o"
            ))
        }
    })?;
    let schema = json
        .get("schema")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            err("no `schema` field; is this the --json output of an amdahl command?".into())
        })?
        .to_string();
    let saved = parse_as(&schema, &json).map_err(err)?;
    Ok(Entry {
        file: file.to_string(),
        saved,
        json,
        statement: None,
    })
}

fn typed<T: serde::de::DeserializeOwned>(schema: &str, v: &Value) -> Result<Box<T>, String> {
    T::deserialize(v)
        .map(Box::new)
        .map_err(|e| format!("does not match the {schema} schema: {e}"))
}

fn parse_as(schema: &str, v: &Value) -> Result<Saved, String> {
    Ok(match schema {
        record::RUN_SCHEMA => Saved::Run(typed(schema, v)?),
        record::MERGE_SCHEMA => Saved::Merge(typed(schema, v)?),
        scale_result::SCHEMA => Saved::Scale(typed(schema, v)?),
        scaling::analysis::SCHEMA => Saved::Fit(typed(schema, v)?),
        t5::SCHEMA => Saved::Top500(typed(schema, v)?),
        plan_result::PLAN_SCHEMA => Saved::Plan(typed(schema, v)?),
        plan_result::SEARCH_SCHEMA => Saved::PlanSearch(typed(schema, v)?),
        inf::INFER_SCHEMA => Saved::Infer(typed(schema, v)?),
        inf::INFER_SEARCH_SCHEMA => Saved::InferSearch(typed(schema, v)?),
        life::SCHEMA => Saved::Lifetime(typed(schema, v)?),
        gemm::SCHEMA => Saved::Gemm(typed(schema, v)?),
        sparse::SCHEMA => Saved::Sparse(typed(schema, v)?),
        memory::SCHEMA => Saved::Memory(typed(schema, v)?),
        roofline::SCHEMA => Saved::Roofline(typed(schema, v)?),
        bench_scaling::SCHEMA => Saved::BenchScaling(typed(schema, v)?),
        gpu::SCHEMA => Saved::Gpu(typed(schema, v)?),
        other => return Err(unknown_schema(other)),
    })
}

/// The message for a schema `report` cannot show: a newer version of a known kind, a kind it
/// does not show, or something that is not an amdahl schema at all.
fn unknown_schema(schema: &str) -> String {
    let shown: Vec<&str> = SUPPORTED.iter().map(|(s, _)| *s).collect();
    let (kind, version) = schema.rsplit_once('/').unwrap_or((schema, ""));
    if let Some((known, _)) = SUPPORTED
        .iter()
        .find(|(s, _)| s.rsplit_once('/').is_some_and(|(k, _)| k == kind))
    {
        let newer = match (version.parse::<u32>(), known.rsplit_once('/')) {
            (Ok(v), Some((_, k))) => k.parse::<u32>().is_ok_and(|k| v > k),
            _ => false,
        };
        return if newer {
            format!(
                "schema `{schema}` is newer than this amdahl ({}) reads (`{known}`); upgrade amdahl, or write the result again with this version",
                env!("CARGO_PKG_VERSION")
            )
        } else {
            format!("schema `{schema}` is not a version this amdahl reads (`{known}`)")
        };
    }
    if crate::schema::kind(schema).is_some() {
        return format!(
            "`{schema}` results are not shown by `amdahl report`; it shows: {}",
            shown.join(", ")
        );
    }
    format!(
        "unknown schema `{schema}`; `amdahl report` reads results of amdahl commands: {}",
        shown.join(", ")
    )
}

fn title_of(schema: &str) -> &'static str {
    SUPPORTED
        .iter()
        .find(|(s, _)| *s == schema)
        .map_or("Results", |(_, t)| t)
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
    let ok = |r: Result<String, csv::Error>| r.ok();
    match s {
        Saved::Run(r) => {
            let estimated: Vec<&str> = r
                .devices
                .iter()
                .filter(|d| d.in_total && matches!(d.method, amdahl_meter::Method::Estimate))
                .map(|d| d.id.as_str())
                .collect();
            let nature = if r.devices.is_empty() {
                "Measured by another rank: this record holds no devices.".to_string()
            } else if estimated.is_empty() {
                "Measured: every device in the total was read from an energy counter or a power reading during the run; PUE and grid intensity are assumed values (see provenance).".to_string()
            } else {
                format!(
                    "Partly estimated: {} had no readable counter and were estimated from CPU time × TDP share; the other devices were measured. PUE and grid intensity are assumed values.",
                    estimated.join(", ")
                )
            };
            Parts {
                text: meter::run_summary(r),
                csv: devices_csv(r).ok(),
                svg: None,
                nature,
            }
        }
        Saved::Merge(m) => Parts {
            text: meter::merge_summary(m),
            csv: ok(meter::merge_csv(m)),
            svg: None,
            nature: "Measured: the sum of the merged runs' measured records (each run's devices keep their own method).".into(),
        },
        Saved::Scale(r) => Parts {
            text: scale::table(r),
            csv: ok(scale::csv(r)),
            svg: Some(scale::svg(r)),
            nature: "Measured times and energies at each N; the fitted models and their predictions are estimates.".into(),
        },
        Saved::Fit(r) => Parts {
            text: fit::table(r),
            csv: ok(fit::csv(r)),
            svg: Some(fit::svg(r)),
            nature: "The points are the input measurements; the models, their parameters and predictions are fitted estimates.".into(),
        },
        Saved::Top500(r) => Parts {
            text: top500::table(r),
            csv: ok(top500::csv(r)),
            svg: None,
            nature: "Rmax and Rpeak are the published TOP500 figures; α_eff and the derived quantities are estimates from them.".into(),
        },
        Saved::Plan(r) => Parts {
            text: plan::plan_table(r),
            csv: Some(plan::plan_csv(r)),
            svg: Some(plan::plan_svg(r)),
            nature: "Estimated: a model prediction from published device specifications; nothing was measured.".into(),
        },
        Saved::PlanSearch(r) => Parts {
            text: plan::search_table(r),
            csv: Some(plan::search_csv(r)),
            svg: Some(plan::search_svg(r)),
            nature: "Estimated: model predictions for each layout searched; nothing was measured.".into(),
        },
        Saved::Infer(r) => Parts {
            text: infer::infer_table(r),
            csv: Some(infer::infer_csv(r)),
            svg: Some(infer::infer_svg(r)),
            nature: "Estimated: a serving model's prediction from published device specifications; nothing was measured.".into(),
        },
        Saved::InferSearch(r) => Parts {
            text: infer::search_table(r),
            csv: Some(infer::search_csv(r)),
            svg: Some(infer::search_svg(r)),
            nature: "Estimated: serving predictions for each configuration searched; nothing was measured.".into(),
        },
        Saved::Lifetime(r) => Parts {
            text: lifetime::table(r),
            csv: ok(lifetime::csv(r)),
            svg: Some(lifetime::svg(r)),
            nature: "Estimated: training and serving energy predicted by the model, embodied carbon from published factors.".into(),
        },
        Saved::Gemm(r) => bench_parts(bench::gemm_text(r), bench::gemm_grid(r), Some(bench::gemm_svg(r))),
        Saved::Sparse(r) => bench_parts(bench::sparse_text(r), bench::sparse_grid(r), Some(bench::sparse_svg(r))),
        Saved::Memory(r) => bench_parts(bench::memory_text(r), bench::memory_grid(r), Some(bench::memory_svg(r))),
        Saved::Roofline(r) => bench_parts(bench::roofline_text(r), bench::roofline_grid(r), Some(bench::roofline_svg(r))),
        Saved::BenchScaling(r) => bench_parts(bench::scaling_text(r), bench::scaling_grid(r), Some(bench::scaling_svg(r))),
        Saved::Gpu(r) => bench_parts(crate::bench_gpu::gpu_text(r), crate::bench_gpu::gpu_grid(r), None),
    }
}

fn bench_parts(text: String, grid: bench::Grid, svg: Option<String>) -> Parts {
    Parts {
        text,
        csv: grid.csv().ok(),
        svg,
        nature: "Measured on the machine named in the provenance: rates are timed repeats; energy is measured where a counter was readable, else marked \"not measured\".".into(),
    }
}

/// The devices of a run as CSV: what was read, how, and what it contributed (numbers as the
/// page shows them).
pub(crate) fn devices_csv(r: &record::RunRecord) -> Result<String, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "id",
        "name",
        "method",
        "energy_j",
        "avg_power_w",
        "in_total",
    ])?;
    for d in &r.devices {
        let method = d.method.as_str().to_string();
        w.write_record([
            d.id.clone(),
            d.name.clone(),
            method,
            num(d.energy_j.get()),
            num(d.avg_power_w.get()),
            d.in_total.to_string(),
        ])?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A number as the page shows it: whole numbers in full with thousands separators, others with
/// four significant digits (what the terminal tables print). Tests read them back and compare
/// with the JSON at a relative tolerance of 1e-3.
pub fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        count(x)
    } else {
        sig(x, 4)
    }
}

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
        ("schema".to_string(), e.saved.schema().to_string()),
    ];
    if let Some(cmd) = e.json.get("command").and_then(Value::as_array) {
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
    walk("", &e.json, &mut out);
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
        if !order.contains(&e.saved.schema()) {
            order.push(e.saved.schema());
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
        let n = entries
            .iter()
            .filter(|e| e.saved.schema() == *schema)
            .count();
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
            .filter(|(_, e)| e.saved.schema() == *schema)
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
                esc(&num(x))
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
    let figures: Vec<Vec<(String, Value)>> =
        group.iter().map(|(_, e)| key_figures(&e.json)).collect();
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
        let _ = write!(out, "<tr><th>{}</th>", esc(p));
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
        for (path, v) in key_figures(&e.json) {
            let _ = writeln!(
                out,
                "<tr><th>{}</th>{}</tr>",
                esc(&path),
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
    fn unknown_newer_and_unshown_schemas_get_distinct_messages() {
        let e = read(r#"{"schema":"amdahl.run/2"}"#, "r.json").unwrap_err();
        assert!(e.message.contains("newer than this amdahl"), "{e}");
        let e = read(r#"{"schema":"amdahl.catalog/1"}"#, "c.json").unwrap_err();
        assert!(e.message.contains("not shown by `amdahl report`"), "{e}");
        let e = read(r#"{"schema":"other/1"}"#, "o.json").unwrap_err();
        assert!(e.message.contains("unknown schema `other/1`"), "{e}");
        let e = read(r#"{"schema":"amdahl.run/1","#, "t.json").unwrap_err();
        assert!(e.message.contains("truncated"), "{e}");
        let e = read("hello", "h.txt").unwrap_err();
        assert!(e.message.contains("not JSON"), "{e}");
        let e = read(r#"{"schema":"amdahl.fit/1","series":3}"#, "f.json").unwrap_err();
        assert!(
            e.message.contains("does not match the amdahl.fit/1 schema"),
            "{e}"
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

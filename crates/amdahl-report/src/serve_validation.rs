//! Rendering of the serving validation set (`amdahl catalog validation --serve`): every
//! published latency percentile and throughput with the simulator's prediction, the summaries
//! against the targets (p50 20 %, p99 30 %, throughput 15 %), and the rows not expressible.

use crate::catalog::csv_rows;
use crate::sig;
use crate::table::{Align, Table};
use amdahl_model::serve::validation::{ServeCase, ServeValidation};

fn percent(x: f64) -> String {
    format!("{:+.1} %", 100.0 * x)
}

fn claim(c: &ServeCase) -> String {
    if c.in_claim && c.overloaded {
        "yes (overloaded)".into()
    } else if c.in_claim {
        "yes".into()
    } else if c.lengths == "own" {
        "no: own lengths".into()
    } else if c.settings == "assumed" {
        "no: knobs assumed".into()
    } else {
        "no: engine".into()
    }
}

pub fn serve_validation_table(v: &ServeValidation) -> String {
    let mut t = Table::new([
        "row",
        "figure",
        "published",
        "predicted",
        "error",
        "+5 % load",
        "in claim",
    ])
    .align(1, Align::Left)
    .align(6, Align::Left);
    for c in &v.cases {
        for m in &c.metrics {
            t.row([
                c.id.clone(),
                m.metric.clone(),
                sig(m.published, 4),
                sig(m.predicted, 4),
                percent(m.error),
                m.load_sensitivity.map_or("-".into(), percent),
                claim(c),
            ]);
        }
    }
    let mut s = t.render();
    s.push_str(&format!(
        "error: predicted / published − 1, each row simulated as typed in \
         data/validation/serve.csv (seed {}); sources and what is assumed: \
         data/validation/serve.md\n+5 % load: how far the prediction moves when the same \
         requests arrive 5 % faster (about what a modelled capacity 5 % too high does); where it \
         exceeds the target the figure is ill-conditioned: capacity alone decides it\n\n",
        v.seed
    ));
    let mut t = Table::new([
        "class",
        "figures",
        "within target",
        "median |error|",
        "worst",
        "worst figure",
        "well-conditioned: within",
        "median |error|",
    ])
    .align(0, Align::Left)
    .align(5, Align::Left);
    for m in v.summaries.iter().filter(|m| m.subset == "claim") {
        let within = match m.target {
            Some(tgt) => format!("{} of {} (±{:.0} %)", m.within, m.figures, 100.0 * tgt),
            None => "no target".into(),
        };
        t.row([
            m.class.clone(),
            m.figures.to_string(),
            within,
            format!("{:.1} %", 100.0 * m.median_abs_error),
            format!("{:.1} %", 100.0 * m.worst_abs_error),
            m.worst.clone(),
            match m.target {
                Some(_) => format!("{} of {}", m.well_conditioned_within, m.well_conditioned),
                None => "-".into(),
            },
            m.well_conditioned_median_abs_error
                .filter(|_| m.target.is_some())
                .map_or("-".into(), |e| format!("{:.1} %", 100.0 * e)),
        ]);
    }
    s.push_str(&t.render());
    let rows = v.cases.iter().filter(|c| c.in_claim).count();
    s.push_str(&format!(
        "rows in the claim: {rows} of {}; out of it: scheduler limits not published (knobs \
         assumed) and rows whose lengths come from their own result\n",
        v.cases.len()
    ));
    let whole = v.rows_meeting_every_target();
    s.push_str(&format!(
        "rows in the claim with every figure within its target: {} of {rows} ({})\n",
        whole.len(),
        whole.join(", ")
    ));
    s.push_str(&itl_line(v));
    s.push_str(&alike_line(v));
    for e in &v.excluded {
        s.push_str(&format!("not expressible: {}: {}\n", e.id, e.why));
    }
    s
}

/// The inter-token latency figures of every row, in the claim or not: how many within the
/// class's target and their median |error|; empty without such figures.
fn itl_line(v: &ServeValidation) -> String {
    let parts: Vec<String> = v
        .summaries
        .iter()
        .filter(|m| m.subset == "itl")
        .map(|m| match m.target {
            Some(t) => format!(
                "{} {} of {} within {:.0} % (median {:.1} %)",
                m.class,
                m.within,
                m.figures,
                100.0 * t,
                100.0 * m.median_abs_error
            ),
            None => format!("{} median {:.1} %", m.class, 100.0 * m.median_abs_error),
        })
        .collect();
    if parts.is_empty() {
        return String::new();
    }
    format!(
        "inter-token latency, every row (the ML.ENERGY offline runs are out of the claim: their \
         lengths are their own): {}\n",
        parts.join(", ")
    )
}

/// How far the published figures of runs typed alike differ; empty without such runs.
fn alike_line(v: &ServeValidation) -> String {
    let a = &v.alike;
    if a.groups.is_empty() {
        return String::new();
    }
    let runs: usize = a.groups.iter().map(Vec::len).sum();
    let parts: Vec<String> = a
        .spreads
        .iter()
        .map(|s| {
            format!(
                "{} median {:.1} %, up to {:.1} % ({})",
                s.class,
                100.0 * s.median_spread,
                100.0 * s.max_spread,
                s.widest
            )
        })
        .collect();
    format!(
        "runs typed alike (the same inputs to amdahl serve, other submitters): {} groups, {runs} \
         runs; their published figures differ by {}: a floor under any model's error on one \
         run\n",
        a.groups.len(),
        parts.join("; ")
    )
}

pub fn serve_validation_csv(v: &ServeValidation) -> Result<String, csv::Error> {
    let f = |x: f64| x.to_string();
    csv_rows(
        &[
            "id",
            "source",
            "engine",
            "model",
            "system",
            "gpus",
            "tp",
            "replicas",
            "rate_rps",
            "requests",
            "settings",
            "lengths",
            "in_claim",
            "metric",
            "class",
            "published",
            "predicted",
            "error",
            "load_sensitivity",
        ],
        v.cases.iter().flat_map(|c| {
            c.metrics.iter().map(move |m| {
                vec![
                    c.id.clone(),
                    c.source.clone(),
                    c.engine.clone(),
                    c.model.clone(),
                    c.system.clone(),
                    c.gpus.to_string(),
                    c.tp.to_string(),
                    c.replicas.to_string(),
                    c.rate_rps.map_or(String::new(), f),
                    c.requests.to_string(),
                    c.settings.clone(),
                    c.lengths.clone(),
                    c.in_claim.to_string(),
                    m.metric.clone(),
                    m.class.clone(),
                    f(m.published),
                    f(m.predicted),
                    f(m.error),
                    m.load_sensitivity.map_or(String::new(), f),
                ]
            })
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdahl_model::serve::validation::Metric;

    /// One row per published figure, the case's identity repeated on each (the CLI test reads
    /// the table instead: simulating the set twice in a debug build would double its time).
    #[test]
    fn csv_has_a_row_per_figure() {
        let case = ServeCase {
            id: "r".into(),
            source: "s".into(),
            engine: "vllm 0.11.1".into(),
            model: "Qwen3-8B".into(),
            system: "H100".into(),
            gpus: 1,
            tp: 1,
            replicas: 1,
            max_num_seqs: 64,
            max_num_batched_tokens: 8192,
            num_scheduler_steps: 1,
            settings: "published".into(),
            rate_rps: None,
            requests: 1024,
            lengths: "own".into(),
            in_claim: false,
            why_not: "own lengths".into(),
            overloaded: true,
            metrics: ["itl_p50_ms", "itl_p99_ms"]
                .map(|m| Metric {
                    metric: m.into(),
                    class: m[4..7].into(),
                    published: 20.0,
                    predicted: 18.0,
                    error: -0.1,
                    load_sensitivity: None,
                })
                .to_vec(),
            locator: "l".into(),
        };
        let v = ServeValidation {
            seed: 0,
            cases: vec![case],
            summaries: vec![],
            excluded: vec![],
            alike: Default::default(),
        };
        let text = serve_validation_csv(&v).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("id,source,engine,model,system"));
        assert_eq!(
            lines[2],
            "r,s,vllm 0.11.1,Qwen3-8B,H100,1,1,1,,1024,published,own,false,itl_p99_ms,p99,20,18,-0.1,"
        );
    }
}

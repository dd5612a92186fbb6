//! Validation against published serving measurements (data/validation/infer.csv, sources in its
//! header and in docs/methodology.md, "Inference: validation"). Prints the signed error of every
//! case; asserts each row's stated tolerance, the serving model's three headline rows
//! (its specification's acceptance cases) at 25 % and the
//! ratio of the two TensorRT-LLM v1.0 rows at 20 %.

use super::model::{estimate, setup, Requests, Serving};
use super::precision::{KvFormat, WeightFormat};
use crate::plan::{catalog_model, catalog_system};

const DATA: &str = include_str!("../../../../data/validation/infer.csv");

struct Case {
    id: String,
    predicted: f64,
    published: f64,
    tol: f64,
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let mut lines = DATA
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty());
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let get = |name: &str| f[col(name)];
        let num = |name: &str| get(name).parse::<f64>().unwrap();
        let model = catalog_model(get("model")).unwrap();
        let (hw, net) = catalog_system(get("system")).unwrap();
        let (tp, pp, gpus) = (num("tp") as u32, num("pp") as u32, num("gpus") as u32);
        let serving = Serving {
            tp,
            pp,
            replicas: gpus / (tp * pp),
            weights: WeightFormat::parse(get("precision")).unwrap(),
            kv: KvFormat::parse(get("kv")).unwrap(),
        };
        let req = Requests {
            input: num("input") as u32,
            output: num("output") as u32,
            beams: 1,
        };
        let s =
            setup(&model, &hw, &net, serving, req).unwrap_or_else(|e| panic!("{}: {e}", get("id")));
        let batch = match get("batch") {
            "" => s.max_batch,
            b => b.parse().unwrap(),
        };
        if batch > s.max_batch {
            println!("{}: published batch {batch} exceeds the modelled memory (max {}); evaluated at {batch}", get("id"), s.max_batch);
        }
        let e = estimate(&s, &hw, &net, batch);
        let predicted = match get("metric") {
            "tok_s" => e.output_tokens_per_s,
            "tok_s_gpu" => e.output_tokens_per_s / f64::from(gpus),
            "ttft_ms" => e.ttft_s * 1e3,
            "j_per_token" => e.energy_per_token_j,
            m => panic!("unknown metric {m}"),
        };
        out.push(Case {
            id: get("id").into(),
            predicted,
            published: num("value"),
            tol: num("tol"),
        });
    }
    out
}

#[test]
fn published_serving_measurements() {
    let cases = cases();
    assert!(cases.len() >= 23, "{} cases", cases.len());
    let mut abs = Vec::new();
    for c in &cases {
        let err = c.predicted / c.published - 1.0;
        abs.push(err.abs());
        println!(
            "{:<28} published {:>11.4} predicted {:>11.4} error {:+6.1} %",
            c.id,
            c.published,
            c.predicted,
            err * 100.0
        );
    }
    let mean = abs.iter().sum::<f64>() / abs.len() as f64;
    let worst = abs.iter().cloned().fold(0.0, f64::max);
    println!(
        "mean |error| {:.1} %, worst {:.1} %",
        mean * 100.0,
        worst * 100.0
    );
    for c in &cases {
        let err = c.predicted / c.published - 1.0;
        assert!(
            err.abs() <= c.tol,
            "{}: error {:+.1} % beyond ±{:.0} %",
            c.id,
            err * 100.0,
            c.tol * 100.0
        );
    }
    let get = |id: &str| cases.iter().find(|c| c.id == id).unwrap();
    // The three headline rows are held at 25 % here, not only by the data file's `tol` column,
    // so loosening a row in the CSV cannot loosen them.
    for id in [
        "mlperf41-70b-offline",
        "trt10-8b-128-128",
        "trt10-8b-2048-128",
    ] {
        let c = get(id);
        let err = c.predicted / c.published - 1.0;
        assert!(
            err.abs() <= 0.25,
            "{id}: error {:+.1} % beyond ±25 %",
            err * 100.0
        );
    }
    // The set as a whole: mean |error| was 21.1 % when the set was assembled (23 cases), 16.8 %
    // since fp8 GEMMs run at the planner's fp8 efficiency; a change that makes the model worse
    // on average than 19 % fails even if every row stays in its band.
    assert!(
        mean <= 0.19,
        "mean |error| {:.1} % above 19 %",
        mean * 100.0
    );
    let (a, b) = (get("trt10-8b-128-128"), get("trt10-8b-2048-128"));
    let ratio = (a.predicted / b.predicted) / (a.published / b.published) - 1.0;
    println!(
        "trt10 128/128 ÷ 2048/128 ratio error {:+.1} %",
        ratio * 100.0
    );
    assert!(ratio.abs() <= 0.20, "ratio error {ratio}");
}

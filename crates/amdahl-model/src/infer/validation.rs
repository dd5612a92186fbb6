//! Validation against published serving measurements (data/validation/infer.csv, sources in its
//! header and in docs/methodology.md, "Inference: validation"). Prints the signed error of every
//! case; asserts each row's stated tolerance, the serving model's three headline rows
//! (its specification's acceptance cases) at 25 % and the
//! ratio of the two TensorRT-LLM v1.0 rows at 20 %.

use super::model::{estimate, setup, Requests, Serving};
use super::precision::{KvFormat, WeightFormat};
use crate::plan::{catalog_model, catalog_system};

const DATA: &str = include_str!("../../../../data/validation/infer.csv");

/// One published serving measurement and its prediction.
#[derive(Debug, Clone, PartialEq)]
pub struct InferCase {
    pub id: String,
    /// The source tag (`trt061`, `mlperf41`, `mlenergy`, …).
    pub source: String,
    /// The device's microarchitecture (the catalog's `arch`).
    pub arch: String,
    /// Weight format as typed (`fp8`, `fp16`, …).
    pub precision: String,
    /// `tok_s`, `tok_s_gpu`, `ttft_ms` or `j_per_token`.
    pub metric: String,
    pub predicted: f64,
    pub published: f64,
    pub tol: f64,
}

impl InferCase {
    /// predicted / published − 1 of the figure itself.
    pub fn figure_error(&self) -> f64 {
        self.predicted / self.published - 1.0
    }

    /// The signed error in the throughput convention of [`crate::interval`] (positive = the
    /// model optimistic): a time's error is inverted (published / predicted − 1).
    pub fn signed_error(&self) -> f64 {
        if self.metric == "ttft_ms" {
            self.published / self.predicted - 1.0
        } else {
            self.figure_error()
        }
    }
}

/// A broken row of the embedded set: a bug in amdahl, reported instead of a panic.
fn bad(row: usize, what: impl std::fmt::Display) -> String {
    format!("data/validation/infer.csv, row {row}: {what}")
}

/// Every row of data/validation/infer.csv, predicted.
pub fn infer_validation() -> Result<Vec<InferCase>, String> {
    let mut r = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .from_reader(DATA.as_bytes());
    let header = r.headers().map_err(|e| bad(0, e))?.clone();
    let mut out = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let rec = rec.map_err(|e| bad(i + 1, e))?;
        out.push(case(&header, &rec).map_err(|e| bad(i + 1, e))?);
    }
    Ok(out)
}

fn case(header: &csv::StringRecord, rec: &csv::StringRecord) -> Result<InferCase, String> {
    let get = |name: &str| -> Result<&str, String> {
        header
            .iter()
            .position(|h| h == name)
            .and_then(|i| rec.get(i))
            .ok_or_else(|| format!("no column {name}"))
    };
    let num = |name: &str| -> Result<f64, String> {
        get(name)?
            .parse::<f64>()
            .map_err(|e| format!("{name}: {e}"))
    };
    let model = catalog_model(get("model")?).map_err(|e| e.to_string())?;
    let (hw, net) = catalog_system(get("system")?).map_err(|e| e.to_string())?;
    let (tp, pp, gpus) = (num("tp")? as u32, num("pp")? as u32, num("gpus")? as u32);
    let serving = Serving {
        tp,
        pp,
        replicas: gpus / (tp * pp).max(1),
        weights: WeightFormat::parse(get("precision")?).ok_or("precision")?,
        kv: KvFormat::parse(get("kv")?).ok_or("kv")?,
        engine: get("engine")?.parse().map_err(|e| format!("{e}"))?,
        memory_fraction: None,
    };
    let req = Requests {
        input: num("input")? as u32,
        output: num("output")? as u32,
        beams: 1,
    };
    let s = setup(&model, &hw, &net, serving, req).map_err(|e| e.to_string())?;
    let batch = match get("batch")? {
        "" => s.max_batch,
        b => b.parse().map_err(|e| format!("batch: {e}"))?,
    };
    let e = estimate(&s, &hw, &net, batch);
    let metric = get("metric")?;
    let predicted = match metric {
        "tok_s" => e.output_tokens_per_s,
        "tok_s_gpu" => e.output_tokens_per_s / f64::from(gpus),
        "ttft_ms" => e.ttft_s * 1e3,
        "j_per_token" => e.energy_per_token_j,
        m => return Err(format!("unknown metric {m}")),
    };
    Ok(InferCase {
        id: get("id")?.into(),
        source: get("source")?.into(),
        arch: hw.arch.clone(),
        precision: get("precision")?.into(),
        metric: metric.into(),
        predicted,
        published: num("value")?,
        tol: num("tol")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cases() -> Vec<InferCase> {
        infer_validation().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn published_serving_measurements() {
        let cases = cases();
        assert!(cases.len() >= 23, "{} cases", cases.len());
        let mut abs = Vec::new();
        for c in &cases {
            let err = c.figure_error();
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
            let err = c.figure_error();
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
            let err = c.figure_error();
            assert!(
                err.abs() <= 0.25,
                "{id}: error {:+.1} % beyond ±25 %",
                err * 100.0
            );
        }
        // The set as a whole: mean |error| was 21.1 % when the set was assembled (23 cases), 16.8 %
        // since fp8 GEMMs run at the planner's fp8 efficiency, 16.9 % since the LM head stays
        // 16-bit under every format, 16.8 % since TensorRT-LLM's KV cache is 90 % of what the
        // weights leave, 16.7 % with the held-out 8 × H200 offline row (−15.3 %; 24 cases, all
        // 2026-12-07); a change that makes the model worse on average
        // than 19 % fails even if every row stays in its band.
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
}

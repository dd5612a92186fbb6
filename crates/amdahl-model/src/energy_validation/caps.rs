//! Validation of the power-cap response (data/validation/power_caps.csv): how much throughput a
//! system keeps at a GPU power cap, published (the capped run over the uncapped one of the same
//! system) against `amdahl infer` with and without `--power-cap`. The ratio isolates the cap:
//! whatever the model gets wrong about the uncapped run cancels.

use super::rows::EnergySetError;
use crate::infer::model::{estimate, setup, Requests, Serving};
use crate::infer::precision::{KvFormat, WeightFormat};
use crate::plan::{catalog_model, catalog_system};
use crate::units::Watts;

const DATA: &str = include_str!("../../../../data/validation/power_caps.csv");

/// One published pair of runs and the modelled ratio.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct CapCase {
    pub id: String,
    pub cap_w: f64,
    /// Published throughput at the cap over the uncapped throughput.
    pub published: f64,
    /// The same ratio from `infer`'s steady state.
    pub predicted: f64,
    /// The row was used to choose a constant (`fit` = yes): not evidence of accuracy.
    pub fitted: bool,
    /// The configured batch did not fit the memory model: the largest that fits was used.
    pub batch_clipped: bool,
}

impl CapCase {
    /// predicted / published − 1.
    pub fn error(&self) -> f64 {
        self.predicted / self.published - 1.0
    }
}

/// A broken row of the embedded set: a bug in amdahl, reported instead of a panic.
fn bad(row: usize, what: impl std::fmt::Display) -> EnergySetError {
    EnergySetError {
        file: "data/validation/power_caps.csv",
        row: format!("row {row}"),
        what: what.to_string(),
    }
}

/// A row as typed (the columns the model reads; the locators and notes are for people).
#[derive(Debug, serde::Deserialize)]
struct Row {
    id: String,
    model: String,
    system: String,
    tp: u32,
    precision: String,
    kv: String,
    input: u32,
    output: u32,
    batch: u32,
    engine: String,
    cap_w: f64,
    uncapped: f64,
    capped: f64,
    fit: String,
}

/// Every row of data/validation/power_caps.csv, predicted.
pub fn caps_validation() -> Result<Vec<CapCase>, EnergySetError> {
    csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .from_reader(DATA.as_bytes())
        .deserialize::<Row>()
        .enumerate()
        .map(|(i, row)| {
            let row = row.map_err(|e| bad(i + 1, e))?;
            case(&row).map_err(|e| bad(i + 1, e))
        })
        .collect()
}

fn case(r: &Row) -> Result<CapCase, String> {
    let model = catalog_model(&r.model).map_err(|e| e.to_string())?;
    let (mut hw, net) = catalog_system(&r.system).map_err(|e| e.to_string())?;
    let serving = Serving {
        tp: r.tp,
        pp: 1,
        replicas: 1,
        weights: WeightFormat::parse(&r.precision).ok_or("precision")?,
        kv: KvFormat::parse(&r.kv).ok_or("kv")?,
        engine: r.engine.parse().map_err(|e| format!("{e}"))?,
        memory_fraction: None,
    };
    let req = Requests {
        input: r.input,
        output: r.output,
        beams: 1,
    };
    let s = setup(&model, &hw, &net, serving, req).map_err(|e| e.to_string())?;
    let batch = r.batch.min(s.max_batch);
    let uncapped = estimate(&s, &hw, &net, batch).output_tokens_per_s;
    hw.power_cap = Some(Watts(r.cap_w));
    let capped = estimate(&s, &hw, &net, batch).output_tokens_per_s;
    Ok(CapCase {
        id: r.id.clone(),
        cap_w: r.cap_w,
        published: r.capped / r.uncapped,
        predicted: capped / uncapped,
        fitted: match r.fit.as_str() {
            "yes" => true,
            "no" => false,
            other => return Err(format!("fit: `{other}` is neither yes nor no")),
        },
        batch_clipped: batch < r.batch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_costs_what_mlperf_measured() {
        let cases = caps_validation().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cases.len(), 3);
        for c in &cases {
            println!(
                "{:<32} {:>4} W  published {:.3}  predicted {:.3}  error {:+.1} %{}",
                c.id,
                c.cap_w,
                c.published,
                c.predicted,
                c.error() * 100.0,
                if c.fitted { "  (fitted)" } else { "" }
            );
        }
        // The two fitted pairs chose the Hopper exponent (power.rs, CLOCK_ENERGY_EXPONENT): with
        // it their ratios are within 3 %; with the textbook 2 they were +20.6 % (GPT-J, 0.786 for
        // 0.652) and +10.3 % (Mixtral). The held-out Llama-2-70B pair was +13.6 % with 2 and is
        // held at 6 % (+4.3 % when the exponent was chosen, 2026-12-08).
        for c in &cases {
            let bound = if c.fitted { 0.03 } else { 0.06 };
            assert!(
                c.error().abs() <= bound,
                "{}: ratio {:.3} for {:.3} published ({:+.1} %, bound ±{:.0} %)",
                c.id,
                c.predicted,
                c.published,
                c.error() * 100.0,
                bound * 100.0
            );
        }
        assert!(cases.iter().any(|c| !c.fitted), "no held-out pair");
    }
}

//! The rows of data/validation/energy.csv, as typed (its header explains every column).

use serde::Deserialize;

/// The set as committed (embedded: no file is read at run time).
const ENERGY_CSV: &str = include_str!("../../../../data/validation/energy.csv");

/// One published number and the configuration it was measured on.
#[derive(Debug, Clone, Deserialize)]
pub struct Row {
    pub id: String,
    pub kind: String,
    pub model: String,
    pub system: String,
    pub gpus: u32,
    pub tp: Option<u32>,
    pub pp: Option<u32>,
    pub precision: String,
    pub kv_precision: String,
    pub batch: u32,
    pub input_tokens: Option<f64>,
    pub output_tokens: Option<f64>,
    pub mbs: Option<u32>,
    pub cp: Option<u32>,
    pub lora_rank: Option<u32>,
    pub beams: Option<u32>,
    pub framework: String,
    pub framework_version: String,
    pub power_cap_w: Option<f64>,
    pub measured: String,
    pub value: f64,
    pub scope: String,
    pub source: String,
    /// `no`: kept out of every fit, predicted out of sample (the header's `fit` column).
    #[serde(default)]
    pub fit: String,
    /// The offline run the row measured over the benchmark's steady-state window: its requests,
    /// token budget and output cap (the header's last columns); `None`: `infer`'s steady state.
    #[serde(default)]
    pub requests: Option<u32>,
    #[serde(default)]
    pub max_num_batched_tokens: Option<u32>,
    #[serde(default)]
    pub output_max: Option<u32>,
}

impl Row {
    /// Whether a fit may use the row: not when it is marked `fit = no`, a row added after the
    /// shipped constants were fitted to check them out of sample.
    pub fn in_fit(&self) -> bool {
        self.fit != "no"
    }
    /// The run a row measured: its id without the quantity
    /// (`mlenergy3-llama3.1-8b-h100-tp1-b64-power` → `mlenergy3-llama3.1-8b-h100-tp1-b64`), shared
    /// by the power, energy and throughput rows of one run.
    pub fn run(&self) -> &str {
        self.id
            .rsplit_once('-')
            .map_or(self.id.as_str(), |(a, _)| a)
    }

    /// The configuration a row belongs to: its id without the batch and the quantity
    /// (`mlenergy3-llama3.1-8b-h100-tp1-b64-power` → `mlenergy3-llama3.1-8b-h100-tp1`), so that
    /// a configuration's rows are left out of a fit together.
    pub fn configuration(&self) -> &str {
        let id = self.run();
        match id.rsplit_once('-') {
            Some((head, b)) if b.starts_with('b') && b[1..].chars().all(|c| c.is_ascii_digit()) => {
                head
            }
            _ => id,
        }
    }
}

/// A broken row of the embedded set: a bug in amdahl, reported instead of a panic.
#[derive(Debug, thiserror::Error)]
#[error("{file}, {row}: {what}")]
pub struct EnergySetError {
    /// The embedded file at fault (data/validation/energy.csv unless said).
    pub file: &'static str,
    pub row: String,
    pub what: String,
}

/// The set's file, as errors name it.
pub const ENERGY_CSV_PATH: &str = "data/validation/energy.csv";

/// Every row of the set.
pub fn rows() -> Result<Vec<Row>, EnergySetError> {
    let mut r = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .from_reader(ENERGY_CSV.as_bytes());
    r.deserialize::<Row>()
        .enumerate()
        .map(|(i, row)| {
            let row = row.map_err(|e| EnergySetError {
                file: ENERGY_CSV_PATH,
                row: format!("row {}", i + 1),
                what: e.to_string(),
            })?;
            match row.fit.as_str() {
                "" | "no" => Ok(row),
                other => Err(EnergySetError {
                    file: ENERGY_CSV_PATH,
                    row: row.id,
                    what: format!("fit `{other}`: leave it empty or write `no`"),
                }),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_set_reads_and_configurations_group_batches() {
        let rows = rows().unwrap();
        assert_eq!(rows.len(), 394);
        // 174 of them (Qwen3 8B, 14B and 32B; Llama 3.3 70B) are kept out of every fit.
        assert_eq!(rows.iter().filter(|r| !r.in_fit()).count(), 174);
        let r = rows
            .iter()
            .find(|r| r.id == "mlenergy3-llama3.1-8b-h100-tp1-b64-power")
            .unwrap();
        assert_eq!(r.configuration(), "mlenergy3-llama3.1-8b-h100-tp1");
        let r = rows
            .iter()
            .find(|r| r.id == "mlpt40-smc-gpt3-64x8-energy")
            .unwrap();
        assert_eq!(r.configuration(), "mlpt40-smc-gpt3-64x8");
    }
}

//! IT energy from the saved JSON result of another amdahl command, dispatched on its `schema`.
//!
//! Supported: `amdahl.run/1` (`total_energy_j`, `duration_s`; measured where every device in the
//! total was read from a counter or an integrated power reading, estimated as soon as one was
//! only estimated from CPU time; with the run's PUE and grid) and `amdahl.plan/1`
//! (estimated: the predicted training run — `training.power_per_device` × `training.train_time`
//! × `gpus`, which is the plan's `training.it_energy` — with the plan's device and PUE). A new
//! producer adds one arm to [`read`].

use super::{CarbonError, ItEnergy};
use crate::units::{Joules, Seconds, Watts};
use serde_json::Value;

/// Schemas `amdahl carbon --from` understands.
pub const SUPPORTED: &[&str] = &["amdahl.run/1", "amdahl.plan/1"];

/// What a saved result says: its IT energy, and where it knows them the device (a catalog name)
/// and the PUE it assumed.
#[derive(Debug, Clone, PartialEq)]
pub struct Saved {
    pub energy: ItEnergy,
    pub device: Option<String>,
    pub pue: Option<f64>,
    /// Where that PUE came from, as the producer recorded it.
    pub pue_source: Option<String>,
    /// The grid the producer used, where it recorded one.
    pub grid: Option<SavedGrid>,
}

/// A grid intensity as a saved result recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedGrid {
    /// The region code it was looked up by (`FR`, `world`), or what the producer called it.
    pub region: String,
    pub g_per_kwh: f64,
    pub source: String,
    pub year: Option<u16>,
}

/// Read a result file's text (`file` names it in errors).
pub fn read(text: &str, file: &str) -> Result<Saved, CarbonError> {
    let err = |message: String| CarbonError::Input {
        file: file.into(),
        message,
    };
    let v: Value = serde_json::from_str(text).map_err(|e| err(format!("not valid JSON: {e}")))?;
    let schema = v.get("schema").and_then(Value::as_str).ok_or_else(|| {
        err("no `schema` field; is this the --json output of an amdahl command?".into())
    })?;
    // A field by its path (`training.train_time`), which must be a number.
    let number = |path: &str| -> Result<f64, CarbonError> {
        path.split('.')
            .try_fold(&v, |node, key| node.get(key))
            .and_then(Value::as_f64)
            .ok_or_else(|| err(format!("field `{path}` is missing or not a number")))
    };
    let text_at = |path: &str| -> Option<String> {
        path.split('.')
            .try_fold(&v, |node, key| node.get(key))
            .and_then(Value::as_str)
            .map(String::from)
    };
    match schema {
        "amdahl.run/1" => {
            let j = number("total_energy_j")?;
            let s = number("duration_s")?;
            // Devices counted in the total whose energy was only estimated (CPU time × TDP).
            let estimated: Vec<String> = v
                .get("devices")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|d| d.get("in_total").and_then(Value::as_bool).unwrap_or(true))
                .filter(|d| d.get("method").and_then(Value::as_str) == Some("estimate"))
                .map(|d| {
                    d.get("id")
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_string()
                })
                .collect();
            let mut energy = ItEnergy::measured(
                Joules(j),
                Seconds(s),
                format!("measured by `amdahl run` ({file})"),
            )
            .map_err(|e| err(e.to_string()))?;
            if !estimated.is_empty() {
                energy.basis = crate::carbon::Basis::Estimated;
                energy.method = format!(
                    "`amdahl run` ({file}) with no readable counter for {}: estimated from CPU \
                     time × TDP share and RAM size",
                    estimated.join(", ")
                );
            }
            let grid = v.get("intensity").and_then(|i| {
                Some(SavedGrid {
                    region: i.get("region")?.as_str()?.to_string(),
                    g_per_kwh: i.get("g_per_kwh")?.as_f64()?,
                    source: i.get("source")?.as_str()?.to_string(),
                    year: i
                        .get("year")
                        .and_then(Value::as_u64)
                        .and_then(|y| u16::try_from(y).ok()),
                })
            });
            Ok(Saved {
                energy,
                device: None,
                pue: v.get("pue").and_then(Value::as_f64),
                pue_source: Some("as recorded by `amdahl run`".into()),
                grid,
            })
        }
        "amdahl.plan/1" => {
            let gpus = number("gpus")?;
            let count = u32::try_from(gpus as u64)
                .ok()
                .filter(|n| f64::from(*n) == gpus && *n > 0)
                .ok_or_else(|| err(format!("field `gpus` = {gpus} is not a device count")))?;
            let time = Seconds(number("training.train_time")?);
            let power = Watts(number("training.power_per_device")?);
            let device = text_at("device.name");
            let idle_estimated = v
                .pointer("/device/idle_power_estimated")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let method = format!(
                "`amdahl plan` prediction ({file}): {} on {count} × {}, {:e} tokens, {:.0} W per \
                 device{}",
                text_at("model.name").as_deref().unwrap_or("a model"),
                device.as_deref().unwrap_or("devices"),
                number("training.tokens")?,
                power.get(),
                if idle_estimated {
                    " (idle power estimated as 1/8 of TDP)"
                } else {
                    ""
                },
            );
            let energy =
                ItEnergy::from_power(count, time, power, method).map_err(|e| err(e.to_string()))?;
            Ok(Saved {
                energy,
                device,
                pue: Some(number("training.pue")?),
                pue_source: text_at("pue_source"),
                grid: None,
            })
        }
        other => Err(err(format!(
            "schema `{other}` is not supported by `amdahl carbon --from`; supported: {}",
            SUPPORTED.join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carbon::Basis;

    #[test]
    fn run_result_with_an_estimated_device_is_estimated() {
        let saved = read(
            r#"{"schema":"amdahl.run/1","total_energy_j":36,"duration_s":1,"pue":1.1,
               "devices":[{"id":"rapl:0","method":"counter","in_total":true},
                          {"id":"estimate:ram","method":"estimate","in_total":true}],
               "intensity":{"g_per_kwh":56.0,"region":"FR","source":"OWID","year":2023}}"#,
            "r.json",
        )
        .unwrap();
        assert_eq!(saved.energy.basis, Basis::Estimated);
        assert!(
            saved.energy.method.contains("estimate:ram"),
            "{}",
            saved.energy.method
        );
        assert_eq!(saved.pue, Some(1.1));
        let g = saved.grid.unwrap();
        assert_eq!(
            (g.region.as_str(), g.g_per_kwh, g.year),
            ("FR", 56.0, Some(2023))
        );
    }

    #[test]
    fn run_result_is_measured() {
        let e = read(
            r#"{"schema":"amdahl.run/1","total_energy_j":7.2e6,"duration_s":3600,"extra":1}"#,
            "r.json",
        )
        .unwrap()
        .energy;
        assert_eq!(e.basis, Basis::Measured);
        assert!((e.energy.kwh() - 2.0).abs() < 1e-12);
    }

    #[test]
    fn plan_result_is_the_estimated_training_run() {
        // A plan's own JSON: its IT energy is power per device × training time × devices.
        use crate::plan::{catalog_model, catalog_system, evaluate};
        use crate::plan::{CostInputs, Layout, PlanResult, Recompute};
        let (hw, net) = catalog_system("a100-80gb").unwrap();
        let m = catalog_model("megatron-39b").unwrap();
        let l = Layout {
            tp: 8,
            pp: 2,
            dp: 32,
            batch: 1536,
            recompute: Recompute::Full,
            ..Layout::default()
        };
        let e = evaluate(&m, &hw, &net, &l).unwrap();
        let inputs = CostInputs {
            tokens: 1e9,
            pue: 1.1,
            intensity: crate::catalog::grid::lookup("world").unwrap().g_per_kwh,
            price_per_device_hour: None,
        };
        let plan = PlanResult::new(&m, &hw, &net, &e, &inputs);
        let text = serde_json::to_string(&plan).unwrap();
        let s = read(&text, "plan.json").unwrap();
        assert_eq!(s.energy.basis, Basis::Estimated);
        assert_eq!(s.energy.count, Some(512));
        assert_eq!(s.device.as_deref(), Some("A100 SXM4 80GB"));
        assert_eq!(s.pue, Some(1.1));
        let want = plan.training.it_energy.get();
        assert!((s.energy.energy.get() / want - 1.0).abs() < 1e-12);
        assert!(
            (s.energy.device_hours().unwrap() / plan.training.device_hours - 1.0).abs() < 1e-12
        );
        assert!(s
            .energy
            .method
            .contains("Megatron-39B on 512 × A100 SXM4 80GB"));
        assert!(s.energy.method.contains("idle power estimated"));
    }

    #[test]
    fn bad_inputs_are_named() {
        for (text, want) in [
            ("{", "not valid JSON"),
            (r#"{"a":1}"#, "no `schema`"),
            (r#"{"schema":"amdahl.fit/1"}"#, "not supported"),
            (r#"{"schema":"amdahl.plan/1"}"#, "`gpus` is missing"),
            (
                r#"{"schema":"amdahl.plan/1","gpus":8.5}"#,
                "not a device count",
            ),
            (
                r#"{"schema":"amdahl.run/1","duration_s":1}"#,
                "total_energy_j",
            ),
            (
                r#"{"schema":"amdahl.run/1","total_energy_j":-5,"duration_s":1}"#,
                "positive",
            ),
        ] {
            let e = read(text, "r.json").unwrap_err().to_string();
            assert!(e.starts_with("r.json: ") && e.contains(want), "{e}");
        }
    }
}

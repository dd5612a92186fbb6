//! IT energy from the saved JSON result of another amdahl command, dispatched on its `schema`.
//!
//! Supported: `amdahl.run/1` (measured: `total_energy_j`, `duration_s`). A new producer (e.g.
//! `amdahl.plan/1`: predicted step time × steps × device power) adds one arm to [`it_energy`].

use super::{CarbonError, ItEnergy};
use crate::units::{Joules, Seconds};
use serde_json::Value;

/// Schemas `amdahl carbon --from` understands.
pub const SUPPORTED: &[&str] = &["amdahl.run/1"];

/// Read the IT energy out of a result file's text (`file` names it in errors).
pub fn it_energy(text: &str, file: &str) -> Result<ItEnergy, CarbonError> {
    let err = |message: String| CarbonError::Input {
        file: file.into(),
        message,
    };
    let v: Value = serde_json::from_str(text).map_err(|e| err(format!("not valid JSON: {e}")))?;
    let schema = v.get("schema").and_then(Value::as_str).ok_or_else(|| {
        err("no `schema` field; is this the --json output of an amdahl command?".into())
    })?;
    let number = |field: &str| -> Result<f64, CarbonError> {
        v.get(field)
            .and_then(Value::as_f64)
            .ok_or_else(|| err(format!("field `{field}` is missing or not a number")))
    };
    match schema {
        "amdahl.run/1" => {
            let j = number("total_energy_j")?;
            let s = number("duration_s")?;
            ItEnergy::measured(
                Joules(j),
                Seconds(s),
                format!("measured by `amdahl run` ({file})"),
            )
            .map_err(|e| err(e.to_string()))
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
    fn run_result_is_measured() {
        let e = it_energy(
            r#"{"schema":"amdahl.run/1","total_energy_j":7.2e6,"duration_s":3600,"extra":1}"#,
            "r.json",
        )
        .unwrap();
        assert_eq!(e.basis, Basis::Measured);
        assert!((e.energy.kwh() - 2.0).abs() < 1e-12);
    }

    #[test]
    fn bad_inputs_are_named() {
        for (text, want) in [
            ("{", "not valid JSON"),
            (r#"{"a":1}"#, "no `schema`"),
            (r#"{"schema":"amdahl.plan/1"}"#, "not supported"),
            (
                r#"{"schema":"amdahl.run/1","duration_s":1}"#,
                "total_energy_j",
            ),
            (
                r#"{"schema":"amdahl.run/1","total_energy_j":-5,"duration_s":1}"#,
                "positive",
            ),
        ] {
            let e = it_energy(text, "r.json").unwrap_err().to_string();
            assert!(e.starts_with("r.json: ") && e.contains(want), "{e}");
        }
    }
}

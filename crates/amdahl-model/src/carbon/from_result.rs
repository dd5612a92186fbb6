//! IT energy from the saved JSON result of another amdahl command, dispatched on its `schema`.
//!
//! Supported: `amdahl.run/1` (`total_energy_j`, `duration_s`; measured where every device in the
//! total was read from a counter or an integrated power reading, estimated as soon as one was
//! only estimated from CPU time; with the run's PUE and grid) and `amdahl.plan/1`
//! (estimated: the predicted training run — `training.power_per_device` × `training.train_time`
//! × `gpus`, which is the plan's `training.it_energy` — with the plan's device and PUE) and
//! `amdahl.infer/1` (estimated: 1,000 requests served, `energy_per_request_j` × 1,000, taking
//! 1,000 ÷ `requests_per_s` seconds on `gpus` devices, with the result's PUE and grid). A new
//! producer adds one arm to [`read`].

use super::{CarbonError, ItEnergy};
use crate::units::{Joules, Seconds, Watts};
use serde_json::Value;

/// Schemas `amdahl carbon --from` understands.
pub const SUPPORTED: &[&str] = &["amdahl.run/1", "amdahl.plan/1", "amdahl.infer/1"];

/// Requests an `amdahl.infer/1` result is read as: the unit `co2e_per_1000_requests_g` uses.
pub const INFER_REQUESTS: f64 = 1000.0;

/// What a saved result says: its IT energy, and where it knows them the device (a catalog name)
/// and the PUE it assumed.
#[derive(Debug, Clone, PartialEq)]
pub struct Saved {
    /// The result's schema, one of [`SUPPORTED`].
    pub schema: &'static str,
    pub energy: ItEnergy,
    /// How many requests `energy` served, where the producer says (an inference result:
    /// [`INFER_REQUESTS`]); `None` for training runs and plans, and for measured runs, which do
    /// not know what a request is.
    pub requests: Option<f64>,
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
    let d = Doc { v: &v, file };
    match schema {
        "amdahl.run/1" => read_run(&d),
        "amdahl.plan/1" => read_plan(&d),
        "amdahl.infer/1" => read_infer(&d),
        "amdahl.infer-search/1" => Err(err(
            "this is an `amdahl infer --search` result, a ranking of configurations rather than \
             one; re-run `amdahl infer` without --search on the configuration you chose and pass \
             its --json output"
                .into(),
        )),
        other => Err(err(format!(
            "schema `{other}` is not supported by `amdahl carbon --from`; supported: {}",
            SUPPORTED.join(", ")
        ))),
    }
}

/// A saved result being read: its JSON and the file it came from (named in every error).
struct Doc<'a> {
    v: &'a Value,
    file: &'a str,
}

impl Doc<'_> {
    fn err(&self, message: String) -> CarbonError {
        CarbonError::Input {
            file: self.file.into(),
            message,
        }
    }

    /// A field by its path (`training.train_time`), which must be a number.
    fn number(&self, path: &str) -> Result<f64, CarbonError> {
        path.split('.')
            .try_fold(self.v, |node, key| node.get(key))
            .and_then(Value::as_f64)
            .ok_or_else(|| self.err(format!("field `{path}` is missing or not a number")))
    }

    fn text_at(&self, path: &str) -> Option<String> {
        path.split('.')
            .try_fold(self.v, |node, key| node.get(key))
            .and_then(Value::as_str)
            .map(String::from)
    }
}

/// `amdahl run`'s measured energy, its estimated devices named, and the grid it recorded.
fn read_run(d: &Doc) -> Result<Saved, CarbonError> {
    let (v, file) = (d.v, d.file);
    let err = |message: String| d.err(message);
    let number = |path: &str| d.number(path);
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
        format!("measured by amdahl run, file {file}"),
    )
    .map_err(|e| err(e.to_string()))?;
    if !estimated.is_empty() {
        energy.basis = crate::carbon::Basis::Estimated;
        let parts: Vec<&str> = estimated.iter().map(|id| device_words(id)).collect();
        energy.method = format!(
            "amdahl run, file {file}; {} had no readable energy counter and \
                 was estimated from CPU time × TDP share and RAM size",
            parts.join(" and ")
        );
    }
    energy.caveats = run_caveats(v);
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
        schema: "amdahl.run/1",
        energy,
        requests: None,
        device: None,
        pue: v.get("pue").and_then(Value::as_f64),
        pue_source: Some("as recorded by `amdahl run`".into()),
        grid,
    })
}

/// `amdahl plan`'s predicted training energy: devices × time × modelled power.
fn read_plan(d: &Doc) -> Result<Saved, CarbonError> {
    let (v, file) = (d.v, d.file);
    let err = |message: String| d.err(message);
    let number = |path: &str| d.number(path);
    let text_at = |path: &str| d.text_at(path);
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
        "amdahl plan prediction, file {file}: {} on {count} × {}, {:e} tokens, {:.0} W \
             per device{}",
        text_at("model.name").as_deref().unwrap_or("a model"),
        device.as_deref().unwrap_or("devices"),
        number("training.tokens")?,
        power.get(),
        if idle_estimated {
            ", idle power estimated as 1/8 of TDP"
        } else {
            ""
        },
    );
    let mut energy =
        ItEnergy::from_power(count, time, power, method).map_err(|e| err(e.to_string()))?;
    energy.predicted = true;
    Ok(Saved {
        schema: "amdahl.plan/1",
        energy,
        requests: None,
        device,
        pue: Some(number("training.pue")?),
        pue_source: text_at("pue_source"),
        grid: None,
    })
}

/// `amdahl infer`'s predicted serving energy, per [`INFER_REQUESTS`] requests.
fn read_infer(d: &Doc) -> Result<Saved, CarbonError> {
    let file = d.file;
    let err = |message: String| d.err(message);
    let number = |path: &str| d.number(path);
    let text_at = |path: &str| d.text_at(path);
    // The serving contract: `energy_per_request_j` is IT energy at the devices (before
    // PUE); `co2e_per_1000_requests_g` already includes PUE and grid, so it is not read.
    let per_request = number("energy_per_request_j")?;
    let rate = number("requests_per_s")?;
    for (field, x) in [
        ("energy_per_request_j", per_request),
        ("requests_per_s", rate),
    ] {
        if !(x.is_finite() && x > 0.0) {
            return Err(err(format!("field `{field}` = {x} must be positive")));
        }
    }
    let gpus = number("gpus")?;
    let count = u32::try_from(gpus as u64)
        .ok()
        .filter(|n| f64::from(*n) == gpus && *n > 0)
        .ok_or_else(|| err(format!("field `gpus` = {gpus} is not a device count")))?;
    let power = Watts(number("power_per_gpu_w")?);
    // The model and system may be plain names or objects with a `name`.
    let name = |key: &str| text_at(key).or_else(|| text_at(&format!("{key}.name")));
    let device = name("system").or_else(|| name("device"));
    let method = format!(
        "`amdahl infer` prediction ({file}): {} on {count} × {}, {} J per request, {:.0} W \
             per device, {} requests/s",
        name("model").as_deref().unwrap_or("a model"),
        device.as_deref().unwrap_or("devices"),
        per_request,
        power.get(),
        rate,
    );
    let mut energy = ItEnergy::from_power(count, Seconds(INFER_REQUESTS / rate), power, method)
        .map_err(|e| err(e.to_string()))?;
    energy.energy = Joules(per_request * INFER_REQUESTS);
    let grid = Some(SavedGrid {
        region: name("region").unwrap_or_else(|| "amdahl infer".into()),
        g_per_kwh: number("grid_g_per_kwh")?,
        source: text_at("grid_source").unwrap_or_else(|| "as recorded by `amdahl infer`".into()),
        year: None,
    });
    Ok(Saved {
        schema: "amdahl.infer/1",
        energy,
        requests: Some(INFER_REQUESTS),
        device,
        pue: Some(number("pue")?),
        pue_source: text_at("pue_source").or_else(|| Some("as recorded by `amdahl infer`".into())),
        grid,
    })
}

/// A measured device as a reader names it: `estimate:cpu` → "the CPU". Internal ids stay out of
/// citable text.
fn device_words(id: &str) -> &str {
    match id.split_once(':').map_or(id, |(_, rest)| rest) {
        "cpu" => "the CPU",
        "ram" | "dram" | "memory" => "memory",
        "gpu" => "the GPU",
        _ => "a device",
    }
}

/// What a run record says that a citation must not hide: the command failed, was killed by a
/// signal, or the record is partial (amdahl was stopped before the command ended).
fn run_caveats(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    match v.get("exit_code").and_then(Value::as_i64) {
        Some(0) | None => {}
        Some(code) => out.push(format!(
            "the measured command failed with exit status {code}, so the figures describe a \
             failed run"
        )),
    }
    if let Some(sig) = v.get("child_signal").and_then(Value::as_str) {
        out.push(format!(
            "the measured command was killed by {sig}, so the figures describe an incomplete run"
        ));
    }
    if v.get("partial").and_then(Value::as_bool) == Some(true) {
        let by = v
            .get("interrupted_by")
            .and_then(Value::as_str)
            .map(|s| format!(" by {s}"))
            .unwrap_or_default();
        out.push(format!(
            "the measurement was interrupted{by} before the command ended, so the figures cover \
             only part of it"
        ));
    }
    out
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
            saved.energy.method.contains("memory") && !saved.energy.method.contains("estimate:"),
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

    /// Regression: a statement was written for a run that failed (exit 2) without a word.
    #[test]
    fn failed_run_carries_a_caveat() {
        let saved = read(
            r#"{"schema":"amdahl.run/1","total_energy_j":36,"duration_s":1,"exit_code":2}"#,
            "r.json",
        )
        .unwrap();
        assert_eq!(saved.energy.caveats.len(), 1);
        assert!(saved.energy.caveats[0].contains("exit status 2"));
        assert!(!saved.energy.predicted);
        let ok = read(
            r#"{"schema":"amdahl.run/1","total_energy_j":36,"duration_s":1,"exit_code":0}"#,
            "r.json",
        )
        .unwrap();
        assert!(ok.energy.caveats.is_empty());
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
        assert!(
            s.energy.predicted,
            "a plan is a prediction: the statement says would"
        );
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
    fn infer_result_is_a_thousand_requests() {
        // 8 GPUs × 500 W ÷ 20 requests/s = 200 J per request (the hand-written contract fixture
        // crates/amdahl-cli/tests/fixtures/infer.json); 1,000 requests = 200 kJ in 50 s.
        let s = read(
            r#"{"schema":"amdahl.infer/1","model":"llama3-8b","system":"h100","gpus":8,
               "power_per_gpu_w":500,"requests_per_s":20,"energy_per_request_j":200,
               "pue":1.1,"grid_g_per_kwh":56,"region":"FR","co2e_per_1000_requests_g":3.42}"#,
            "i.json",
        )
        .unwrap();
        assert_eq!(s.schema, "amdahl.infer/1");
        assert_eq!(s.requests, Some(1000.0));
        assert_eq!(s.energy.basis, Basis::Estimated);
        assert!((s.energy.energy.get() - 200e3).abs() < 1e-6);
        assert!((s.energy.duration.get() - 50.0).abs() < 1e-12);
        assert_eq!(s.energy.count, Some(8));
        assert_eq!((s.device.as_deref(), s.pue), (Some("h100"), Some(1.1)));
        let g = s.grid.unwrap();
        assert_eq!((g.region.as_str(), g.g_per_kwh), ("FR", 56.0));
        assert!(
            s.energy.method.contains("llama3-8b on 8 × h100"),
            "{}",
            s.energy.method
        );
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
            (r#"{"schema":"amdahl.infer-search/1"}"#, "without --search"),
            (
                r#"{"schema":"amdahl.infer/1","energy_per_request_j":200}"#,
                "`requests_per_s` is missing",
            ),
            (
                r#"{"schema":"amdahl.infer/1","energy_per_request_j":0,"requests_per_s":1}"#,
                "must be positive",
            ),
        ] {
            let e = read(text, "r.json").unwrap_err().to_string();
            assert!(e.starts_with("r.json: ") && e.contains(want), "{e}");
        }
    }
}

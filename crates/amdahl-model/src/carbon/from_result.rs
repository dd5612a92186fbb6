//! IT energy from the saved JSON result of another amdahl command, one reader per kind.
//!
//! `amdahl.run/1` ([`read_run`]: `total_energy_j`, `duration_s`; measured where every device in
//! the total was read from a counter or an integrated power reading, estimated as soon as one was
//! only estimated from CPU time; with the run's PUE and grid), `amdahl.plan/1` ([`read_plan`]:
//! estimated, the predicted training run — `training.power_per_device` × `training.train_time`
//! × `gpus`, which is the plan's `training.it_energy` — with the plan's device and PUE),
//! `amdahl.infer/1` ([`read_infer`]: estimated, 1,000 requests served, `energy_per_request_j` ×
//! 1,000, taking 1,000 ÷ `requests_per_s` seconds on `gpus` devices, with the result's PUE and
//! grid) and `amdahl.serve/1` ([`read_serve`]: estimated, the simulated run's `requests` served
//! with `energy_j` in `duration_s` on `gpus` devices, with its PUE and grid). Each reads only
//! the fields its producer's contract names, so a hand-written result with those fields works.
//! Which schema goes to which reader is the registry of result kinds' (`amdahl_report::kind`,
//! which also knows the meter's and the report's own types); a new producer adds a reader here
//! and one `.energy(…)` there.

use super::covered::CoveredScope;
use super::{CarbonError, ItEnergy};
use crate::units::{readable, Joules, Seconds, Watts};
use serde_json::Value;

/// Requests an `amdahl.infer/1` result is read as: the unit `co2e_per_1000_requests_g` uses.
pub const INFER_REQUESTS: f64 = 1000.0;
// `read_infer`'s text says "1,000 requests".
const _: () = assert!(INFER_REQUESTS == 1000.0);

/// What a predicted energy (a plan's, a serving estimate's) covers, in the words of the
/// commands' own tables ("GPU scope", beside a larger server figure).
const GPU_SCOPE: &str = "GPU scope: the GPU boards only";

/// What a saved result says: its IT energy, and where it knows them the device (a catalog name)
/// and the PUE it assumed.
#[derive(Debug, Clone, PartialEq)]
pub struct Saved {
    /// The result's schema: `amdahl.run/1`, `amdahl.plan/1`, `amdahl.infer/1` or
    /// `amdahl.serve/1`.
    pub schema: &'static str,
    pub energy: ItEnergy,
    /// How many requests `energy` served, where the producer says (an inference result:
    /// [`INFER_REQUESTS`]; a serving simulation: its requests); `None` for training runs and
    /// plans, and for measured runs, which do not know what a request is.
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
pub fn read_run(v: &Value, file: &str) -> Result<Saved, CarbonError> {
    let d = &Doc { v, file };
    let err = |message: String| d.err(message);
    let number = |path: &str| d.number(path);
    let j = number("total_energy_j")?;
    let s = number("duration_s")?;
    // Refused rather than stated: "measured at 0 J" would say that hardware that ran used no
    // energy, when its counters only never advanced (a command shorter than their update
    // interval: about 1 ms for RAPL, a 10 ms CPU-time tick for an estimate).
    if j == 0.0 {
        return Err(err(format!(
            "the record's total is 0 J: the command ended ({} s) before any device in its \
             total registered energy, so the record holds no measured energy to state (0 J would say the run \
             used none). Measure a longer run, e.g. repeat the command in a loop inside one \
             `amdahl run` and divide by the repetitions",
            readable(s, 4)
        )));
    }
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
                 {} estimated from CPU time × TDP share and RAM size",
            parts.join(" and "),
            if parts.len() > 1 { "were" } else { "was" }
        );
    }
    // What the counters covered (the record's `covers`, absent in older records): a measured
    // total is never the whole server, so say which scope it compares with.
    if let Some(parts) = v.pointer("/covers/parts").and_then(Value::as_str) {
        let scope = v
            .pointer("/covers/scope")
            .cloned()
            .and_then(|s| serde_json::from_value::<CoveredScope>(s).ok());
        energy.method = match scope {
            Some(s) => format!("{}; covers {parts} — {}", energy.method, s.words()),
            None => format!("{}; covers {parts}", energy.method),
        };
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
pub fn read_plan(v: &Value, file: &str) -> Result<Saved, CarbonError> {
    let d = &Doc { v, file };
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
    // The power as the carbon table's "power per device" row shows it, the tokens as the
    // plan's table does ("training on 3.00e11 tokens"; "3e11" was printed), and the scope the
    // plan's own table gives it: the GPU boards' energy, below the server (wall) figure.
    let method = format!(
        "amdahl plan prediction, file {file}: {} on {count} × {}, {} tokens, {} W \
             per device{}, {GPU_SCOPE}",
        text_at("model.name").as_deref().unwrap_or("a model"),
        device.as_deref().unwrap_or("devices"),
        crate::units::sig(number("training.tokens")?, 3),
        readable(power.get(), 4),
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
        // The grid the plan charged (`grid`, with its region code); the intensity alone where an
        // older plan recorded no `grid` object. Ignoring it charged a US plan at the world mean.
        grid: recorded_grid(d, "amdahl plan", "/training/intensity")?,
    })
}

/// The grid a saved plan or serving estimate recorded: its `grid` object (code, intensity,
/// year, source), else the bare intensity at `intensity_at` of an older result.
fn recorded_grid(
    d: &Doc,
    tool: &str,
    intensity_at: &str,
) -> Result<Option<SavedGrid>, CarbonError> {
    if d.v.get("grid").is_some_and(Value::is_object) {
        return Ok(Some(SavedGrid {
            region: d.text_at("grid.code").unwrap_or_else(|| tool.into()),
            g_per_kwh: d.number("grid.g_per_kwh")?,
            source: d
                .text_at("grid.source")
                .unwrap_or_else(|| format!("as recorded by `{tool}`")),
            year: d
                .v
                .pointer("/grid/year")
                .and_then(Value::as_u64)
                .and_then(|y| u16::try_from(y).ok()),
        }));
    }
    Ok(d.v
        .pointer(intensity_at)
        .and_then(Value::as_f64)
        .map(|g| SavedGrid {
            region: tool.into(),
            g_per_kwh: g,
            source: format!("as recorded by `{tool}`"),
            year: None,
        }))
}

/// `amdahl infer`'s predicted serving energy, per [`INFER_REQUESTS`] requests.
pub fn read_infer(v: &Value, file: &str) -> Result<Saved, CarbonError> {
    let d = &Doc { v, file };
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
    let count = device_count(d)?;
    let power = Watts(number("power_per_gpu_w")?);
    // The model and system may be plain names or objects with a `name`.
    let name = |key: &str| text_at(key).or_else(|| text_at(&format!("{key}.name")));
    let device = name("system").or_else(|| name("device"));
    // The statement quotes this text: rounded as the tables round (the power as the carbon
    // table's "power per device" row: "465 W" stood beside "465.5 W"), saying that the figures
    // are those of 1,000 requests (a raw `196.4238052073119 J` was printed) and, as `infer`'s
    // table does, that they are the GPU scope's.
    let method = format!(
        "`amdahl infer` prediction of 1,000 requests ({file}): {} on {count} × {}, {} J per \
         request, {} W per device, {} requests/s, {GPU_SCOPE}",
        name("model").as_deref().unwrap_or("a model"),
        device.as_deref().unwrap_or("devices"),
        readable(per_request, 4),
        readable(power.get(), 4),
        readable(rate, 4),
    );
    let mut energy = ItEnergy::from_power(count, Seconds(INFER_REQUESTS / rate), power, method)
        .map_err(|e| err(e.to_string()))?;
    energy.energy = Joules(per_request * INFER_REQUESTS);
    // A prediction: the statement says "would run", not "ran" (it said "ran … was estimated").
    energy.predicted = true;
    // Its `grid` object (with the year: "year not given" was printed beside a recorded 2022);
    // an older result's `region` and bare intensity otherwise.
    let grid = recorded_grid(d, "amdahl infer", "/grid_g_per_kwh")?.map(|mut g| {
        if d.v.get("grid").is_none() {
            g.region = name("region").unwrap_or(g.region);
        }
        g
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

/// `amdahl serve`'s simulated run: `energy_j`, the GPUs' energy over the whole run (idle
/// replicas included, before PUE: what `kwh_per_1000_requests` is made of), served `requests`
/// requests in `duration_s` on `gpus` devices; with the run's PUE and grid.
pub fn read_serve(v: &Value, file: &str) -> Result<Saved, CarbonError> {
    let d = &Doc { v, file };
    let err = |message: String| d.err(message);
    let joules = d.number("energy_j")?;
    let requests = d.number("requests")?;
    let duration = d.number("duration_s")?;
    for (field, x) in [
        ("energy_j", joules),
        ("requests", requests),
        ("duration_s", duration),
    ] {
        if !(x.is_finite() && x > 0.0) {
            return Err(err(format!("field `{field}` = {x} must be positive")));
        }
    }
    let count = device_count(d)?;
    let power = Watts(joules / duration / f64::from(count));
    let name = |key: &str| d.text_at(key);
    let method = format!(
        "`amdahl serve` simulation of {} requests ({file}): {} on {count} × {}, {}, {} J per \
         request, {} W per device on average over {} s, idle time included, {GPU_SCOPE}",
        readable(requests, 6),
        name("model").as_deref().unwrap_or("a model"),
        name("system").as_deref().unwrap_or("devices"),
        name("workload").as_deref().unwrap_or("its workload"),
        readable(joules / requests, 4),
        readable(power.get(), 4),
        readable(duration, 4),
    );
    let mut energy = ItEnergy::from_power(count, Seconds(duration), power, method)
        .map_err(|e| err(e.to_string()))?;
    energy.energy = Joules(joules);
    energy.predicted = true;
    // Its grid as `serve` records it: the name, the intensity, the data year and the source.
    let grid = d
        .v
        .get("grid_g_per_kwh")
        .and_then(Value::as_f64)
        .map(|g| SavedGrid {
            // The catalog code where recorded (results before it was): the name otherwise.
            region: name("grid_code")
                .filter(|c| !c.is_empty())
                .or_else(|| name("grid"))
                .unwrap_or_else(|| "amdahl serve".into()),
            g_per_kwh: g,
            source: name("grid_source").unwrap_or_else(|| "as recorded by `amdahl serve`".into()),
            year: d
                .v
                .get("grid_year")
                .and_then(Value::as_u64)
                .and_then(|y| u16::try_from(y).ok()),
        });
    Ok(Saved {
        schema: "amdahl.serve/1",
        energy,
        requests: Some(requests),
        device: name("system"),
        pue: Some(d.number("pue")?),
        pue_source: Some("as recorded by `amdahl serve`".into()),
        grid,
    })
}

/// The `gpus` field: a whole number of devices, at least one.
fn device_count(d: &Doc) -> Result<u32, CarbonError> {
    let gpus = d.number("gpus")?;
    u32::try_from(gpus as u64)
        .ok()
        .filter(|n| f64::from(*n) == gpus && *n > 0)
        .ok_or_else(|| d.err(format!("field `gpus` = {gpus} is not a device count")))
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

/// What a run record (or a merge of them) says that a citation must not hide: the command
/// failed, was killed by a signal, or the record is partial (amdahl was stopped before the
/// command ended). The statement opens with them, and `amdahl report` captions the result with
/// them.
pub fn run_caveats(v: &Value) -> Vec<String> {
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

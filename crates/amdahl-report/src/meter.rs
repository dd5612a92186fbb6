//! Rendering of measured runs: the terminal summary of `amdahl run`, `amdahl merge` and
//! `amdahl detect`, and the CodeCarbon-compatible CSV row.
//!
//! CodeCarbon 3.3.2 ([`CODECARBON_VERSION`], the version this CSV is pinned to) writes
//! `emissions.csv` with one column per field of its `EmissionsData` dataclass
//! (`codecarbon/output_methods/emissions_data.py`), in declaration order — the 38 names of
//! [`CODECARBON_HEADER`]. Units there: duration s, emissions kg CO2eq, emissions_rate kg/s, powers
//! W, energies kWh, water L, ram_total_size and ram_used_gb GiB (`B_TO_GB` = 1024³), utilisation
//! % of the machine; PUE multiplies powers and energies (`EmissionsTracker._do_measurements`).
//! The mapping is documented in `docs/methodology.md`.

use crate::sig;
use crate::table::{Align, Table};
use amdahl_meter::estimate::GIB;
use amdahl_meter::record::{utc_iso, MergeResult, RunRecord};
use amdahl_meter::sensors::DetectResult;
use amdahl_meter::DeviceKind;

/// The CodeCarbon version whose CSV format and column meanings the rows follow.
pub use amdahl_meter::estimate::CODECARBON_VERSION;

/// The header of CodeCarbon 3.3.2's `emissions.csv`, exactly.
pub const CODECARBON_HEADER: &str = "timestamp,project_name,run_id,experiment_id,duration,emissions,emissions_rate,cpu_power,gpu_power,ram_power,cpu_energy,gpu_energy,ram_energy,energy_consumed,water_consumed,country_name,country_iso_code,region,cloud_provider,cloud_region,os,python_version,codecarbon_version,cpu_count,cpu_model,gpu_count,gpu_model,longitude,latitude,ram_total_size,tracking_mode,cpu_utilization_percent,gpu_utilization_percent,ram_utilization_percent,ram_used_gb,on_cloud,pue,wue";

/// CodeCarbon's default `experiment_id` (`EmissionsTracker.__init__`), used when no job id.
const CODECARBON_DEFAULT_EXPERIMENT: &str = "5b0fa12a-3dd7-45bb-9766-cc326314d9f1";

fn fmt_f(x: f64) -> String {
    // Full precision, like pandas' to_csv of a float.
    format!("{x:?}")
}

/// A text cell as a spreadsheet will not evaluate it: one that starts with `=`, `+`, `-`, `@`, a tab
/// or a carriage return gets a leading `'` (OWASP, "CSV Injection"), which Excel, LibreOffice and
/// Sheets read as "this cell is text" and do not show. Only text columns go through here: the
/// numeric ones are written by [`fmt_f`] and `-0.5` stays a number.
fn text(s: impl Into<String>) -> String {
    let s = s.into();
    if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{s}")
    } else {
        s
    }
}

/// The `codecarbon_version` cell: the pinned CodeCarbon version with amdahl's as a PEP 440 local
/// version label (`3.3.2+amdahl.0.1.0`): a reader that parses the version gets the format's
/// version, and the row still says which program wrote it.
pub fn codecarbon_version_cell(amdahl_version: &str) -> String {
    let local: String = amdahl_version
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '.' })
        .collect();
    format!("{CODECARBON_VERSION}+amdahl.{local}")
}

/// One CodeCarbon CSV line (no header, with trailing newline) for a run, in the 38 columns of
/// [`CODECARBON_HEADER`].
pub fn codecarbon_row(r: &RunRecord) -> Result<String, csv::Error> {
    let columns: Vec<&str> = CODECARBON_HEADER.split(',').collect();
    codecarbon_row_in(r, &columns)
}

/// The row in the columns of an existing file's header (an older CodeCarbon's, or the same
/// names in another order, as CodeCarbon's own appends follow the file's order). Names it does
/// not write are left empty; the sink checks the header before.
pub fn codecarbon_row_in(r: &RunRecord, columns: &[&str]) -> Result<String, csv::Error> {
    let fields = codecarbon_fields(r);
    let cells = columns.iter().map(|c| {
        fields
            .iter()
            .find(|(name, _)| name == c)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    });
    let mut w = csv::WriterBuilder::new().from_writer(Vec::new());
    w.write_record(cells)?;
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Energy in kWh × PUE of the in-total devices: (cpu, gpu, ram).
fn energies(r: &RunRecord) -> (f64, f64, f64) {
    let (mut cpu, mut gpu, mut ram) = (0.0, 0.0, 0.0);
    for d in r.devices.iter().filter(|d| d.in_total) {
        let kwh = d.energy_j.kwh() * r.pue;
        match d.kind {
            DeviceKind::CpuPackage | DeviceKind::Psys | DeviceKind::Cpu => cpu += kwh,
            DeviceKind::Gpu => gpu += kwh,
            DeviceKind::Dram | DeviceKind::Ram => ram += kwh,
        }
    }
    (cpu, gpu, ram)
}

/// Every column CodeCarbon 3.3.2 writes, by name, in its header's order.
fn codecarbon_fields(r: &RunRecord) -> Vec<(&'static str, String)> {
    let mut fields = Vec::with_capacity(38);
    fields.extend(run_fields(r));
    fields.extend(energy_fields(r));
    fields.extend(location_fields(r));
    fields.extend(host_fields(r));
    fields.extend(usage_fields(r));
    fields.extend([
        (
            "on_cloud",
            if cloud(r).is_some() { "Y" } else { "N" }.into(),
        ),
        ("pue", fmt_f(r.pue)),
        ("wue", fmt_f(0.0)),
    ]);
    fields
}

/// When the run ended and who it belongs to: timestamp, project_name, run_id, experiment_id.
fn run_fields(r: &RunRecord) -> [(&'static str, String); 4] {
    let end = utc_iso(r.started_unix_s + r.duration_s.get());
    [
        ("timestamp", end.trim_end_matches('Z').to_string()),
        // CodeCarbon's own default is "codecarbon"; a row without a project says who wrote it.
        (
            "project_name",
            text(r.project.clone().unwrap_or_else(|| "amdahl".into())),
        ),
        ("run_id", text(r.run_id.clone())),
        (
            "experiment_id",
            text(
                r.cluster
                    .job_id
                    .clone()
                    .unwrap_or_else(|| CODECARBON_DEFAULT_EXPERIMENT.into()),
            ),
        ),
    ]
}

/// Duration, emissions, and power and energy by component (duration … water_consumed).
fn energy_fields(r: &RunRecord) -> [(&'static str, String); 11] {
    let secs = r.duration_s.get();
    let (cpu, gpu, ram) = energies(r);
    // Average power in W over the run, with PUE, from kWh: kWh × 3.6e6 / s.
    let watts = |kwh: f64| if secs > 0.0 { kwh * 3.6e6 / secs } else { 0.0 };
    let kg = r.co2e_g.kg();
    [
        ("duration", fmt_f(secs)),
        ("emissions", fmt_f(kg)),
        (
            "emissions_rate",
            fmt_f(if secs > 0.0 { kg / secs } else { 0.0 }),
        ),
        ("cpu_power", fmt_f(watts(cpu))),
        ("gpu_power", fmt_f(watts(gpu))),
        ("ram_power", fmt_f(watts(ram))),
        ("cpu_energy", fmt_f(cpu)),
        ("gpu_energy", fmt_f(gpu)),
        ("ram_energy", fmt_f(ram)),
        ("energy_consumed", fmt_f(r.energy_kwh)),
        // WUE × kWh (`_do_measurements`); amdahl takes no WUE, so CodeCarbon's default 0.
        ("water_consumed", fmt_f(0.0)),
    ]
}

/// The cloud provider and region of the grid's location, when it is a cloud region.
fn cloud(r: &RunRecord) -> Option<(&str, &str)> {
    let l = r.intensity.location.as_ref()?;
    Some((l.cloud_provider.as_deref()?, l.cloud_region.as_deref()?))
}

/// Location columns as CodeCarbon 3.x fills them (`EmissionsTracker._prepare_emissions_data`):
/// country name and ISO alpha-3, and for a cloud region its provider and name (`on_cloud` = Y
/// is written with the last columns).
fn location_fields(r: &RunRecord) -> [(&'static str, String); 5] {
    let loc = r.intensity.location.as_ref();
    let cloud = cloud(r);
    [
        (
            "country_name",
            text(loc.map(|l| l.country_name.clone()).unwrap_or_default()),
        ),
        (
            "country_iso_code",
            text(loc.map(|l| l.country_iso_code.clone()).unwrap_or_default()),
        ),
        // CodeCarbon's `region` is a sub-national region (`california`), never the country.
        ("region", String::new()),
        (
            "cloud_provider",
            text(cloud.map(|(p, _)| p.to_string()).unwrap_or_default()),
        ),
        (
            "cloud_region",
            text(cloud.map(|(_, r)| r.to_string()).unwrap_or_default()),
        ),
    ]
}

/// The machine and software that ran (os … latitude).
fn host_fields(r: &RunRecord) -> [(&'static str, String); 9] {
    let gpus: Vec<&str> = r
        .devices
        .iter()
        .filter(|d| d.kind == DeviceKind::Gpu)
        .map(|d| d.name.as_str())
        .collect();
    [
        ("os", text(r.host.os.clone())),
        (
            "python_version",
            text(r.python_version.clone().unwrap_or_default()),
        ),
        (
            "codecarbon_version",
            codecarbon_version_cell(&r.amdahl_version),
        ),
        ("cpu_count", fmt_f(r.host.cpu_count as f64)),
        ("cpu_model", text(r.host.cpu_model.clone())),
        ("gpu_count", fmt_f(gpus.len() as f64)),
        ("gpu_model", text(gpus.join(", "))),
        ("longitude", String::new()),
        ("latitude", String::new()),
    ]
}

/// Memory size, measurement scope and utilisation (ram_total_size … ram_used_gb).
fn usage_fields(r: &RunRecord) -> [(&'static str, String); 6] {
    let u = r.utilization;
    [
        // The record keeps decimal GB; CodeCarbon writes GiB.
        ("ram_total_size", fmt_f(r.host.ram_total_gb * 1e9 / GIB)),
        (
            "tracking_mode",
            match r.scope {
                amdahl_meter::record::MeasurementScope::Machine => "machine".into(),
                amdahl_meter::record::MeasurementScope::Process => "process".into(),
            },
        ),
        (
            "cpu_utilization_percent",
            fmt_f(u.map(|u| u.cpu_percent).unwrap_or(0.0)),
        ),
        ("gpu_utilization_percent", fmt_f(0.0)),
        (
            "ram_utilization_percent",
            fmt_f(u.map(|u| u.ram_percent).unwrap_or(0.0)),
        ),
        (
            "ram_used_gb",
            fmt_f(u.map(|u| u.ram_used_gib).unwrap_or(0.0)),
        ),
    ]
}

fn method_list(r: &RunRecord) -> String {
    let mut m: Vec<&str> = Vec::new();
    for d in &r.devices {
        if !m.contains(&d.method.as_str()) {
            m.push(d.method.as_str());
        }
    }
    m.join(", ")
}

/// The human summary of one run.
pub fn run_summary(r: &RunRecord) -> String {
    let mut out = run_headline(r);
    if r.devices.is_empty() {
        out.push_str(&format!(
            "rank {} on {}: energy is measured by local rank 0 on this node (not counted here)\n",
            r.cluster
                .rank
                .map(|x| x.to_string())
                .unwrap_or_else(|| "?".into()),
            r.host.hostname
        ));
        return out;
    }
    out.push_str(&devices_table(r));
    out.push_str(&format!(
        "total {} J, average {} W ({}; {} scope{})\n",
        sig(r.total_energy_j.get(), 4),
        sig(r.average_power_w.get(), 4),
        method_list(r),
        match r.scope {
            amdahl_meter::record::MeasurementScope::Machine => "machine",
            amdahl_meter::record::MeasurementScope::Process => "process",
        },
        r.process_share
            .map(|s| format!(", CPU-time share {}", sig(s, 3)))
            .unwrap_or_default()
    ));
    if let Some(c) = &r.covers {
        out.push_str(&format!("covers {}: {}\n", c.parts, c.scope.words()));
    }
    if let Some(b) = &r.baseline {
        out.push_str(&format!(
            "idle baseline {} W over {} s: net {} J above idle\n",
            sig(b.power_w.get(), 4),
            sig(b.duration_s.get(), 3),
            sig(b.net_energy_j.get(), 4)
        ));
        out.push_str(&negative_net_note(
            b.net_energy_j.get(),
            "lengthen --baseline or run longer",
        ));
    }
    out.push_str(&format!(
        "{} with PUE {} → {} at {} gCO2e/kWh ({}: {}{})\n",
        crate::carbon::energy_words(r.energy_kwh),
        r.pue,
        crate::carbon::mass_words(r.co2e_g.get() / 1e3, "CO2e"),
        sig(r.intensity.g_per_kwh.get(), 4),
        r.intensity.region,
        r.intensity.source,
        r.intensity
            .year
            .map(|y| format!(", {y}"))
            .unwrap_or_default()
    ));
    for d in r
        .devices
        .iter()
        .filter_map(|d| d.note.as_ref().map(|n| (d, n)))
    {
        out.push_str(&format!("note: {}: {}\n", d.0.id, d.1));
    }
    for w in r.projection.iter().flat_map(|p| &p.warnings) {
        out.push_str(&format!("warning: projection: {w}\n"));
    }
    out
}

/// The command, how it ended and after how long (and whether the record is partial).
fn run_headline(r: &RunRecord) -> String {
    let status = match (r.exit_code, &r.child_signal) {
        (Some(c), Some(s)) => format!("killed by {s} (exit {c})"),
        (Some(c), None) => format!("exited {c}"),
        (None, _) => "still running".into(),
    };
    format!(
        "amdahl run: `{}` {status} after {} s{}\n",
        r.command.join(" "),
        sig(r.duration_s.get(), 4),
        if r.partial {
            format!(
                " — PARTIAL (interrupted{})",
                r.interrupted_by
                    .as_deref()
                    .map(|s| format!(" by {s}"))
                    .unwrap_or_default()
            )
        } else {
            String::new()
        }
    )
}

/// One row per device: how its energy was measured, how much, and whether it is in the total.
fn devices_table(r: &RunRecord) -> String {
    let mut t = Table::new(["device", "name", "method", "energy J", "avg W", "in total"])
        .align(1, Align::Left)
        .align(2, Align::Left);
    for d in &r.devices {
        t.row([
            d.id.clone(),
            d.name.clone(),
            d.method.as_str().to_string(),
            sig(d.energy_j.get(), 4),
            sig(d.avg_power_w.get(), 4),
            if d.in_total {
                "yes".into()
            } else {
                "no (in psys)".to_string()
            },
        ]);
    }
    t.render()
}

/// The human summary of a merged job.
pub fn merge_summary(m: &MergeResult) -> String {
    let mut t = Table::new([
        "host",
        "job",
        "ranks",
        "files",
        "energy J",
        "kWh (PUE)",
        "gCO2e",
        "methods",
    ])
    .align(7, Align::Left);
    for n in &m.nodes {
        t.row([
            n.hostname.clone(),
            n.job_id.clone().unwrap_or_else(|| "-".into()),
            n.ranks
                .iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(","),
            n.counted.len().to_string(),
            sig(n.energy_j.get(), 4),
            sig(n.energy_kwh, 4),
            sig(n.co2e_g.get(), 4),
            n.methods
                .iter()
                .map(|x| x.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        ]);
    }
    let mut out = t.render();
    out.push_str(&format!(
        "job total: {} J, {} with PUE, {} over {} node(s) from {} file(s){}\n",
        sig(m.total_energy_j.get(), 4),
        crate::carbon::energy_words(m.energy_kwh),
        crate::carbon::mass_words(m.co2e_g.get() / 1e3, "CO2e"),
        m.nodes.len(),
        m.files,
        if m.partial {
            " — PARTIAL: some runs were interrupted"
        } else {
            ""
        }
    ));
    out
}

/// The sensor table of `amdahl detect`.
pub fn detect_table(d: &DetectResult) -> String {
    let mut t = Table::new(["sensor", "device", "status", "detail"])
        .align(1, Align::Left)
        .align(2, Align::Left)
        .align(3, Align::Left);
    for s in &d.sensors {
        t.row([
            s.sensor.clone(),
            s.device.clone(),
            s.status.clone(),
            s.detail.clone(),
        ]);
    }
    let mut out = t.render();
    for s in d.sensors.iter().filter(|s| s.fix.is_some()) {
        out.push_str(&format!(
            "fix ({} {}): {}\n",
            s.sensor,
            s.device,
            s.fix.as_deref().unwrap_or_default()
        ));
    }
    out
}

fn csv_lines(header: &[&str], rows: Vec<Vec<String>>) -> Result<String, csv::Error> {
    let mut w = csv::WriterBuilder::new().from_writer(Vec::new());
    w.write_record(header)?;
    for r in rows {
        w.write_record(&r)?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The devices of a run as CSV: what was read, how, and what it contributed (numbers as
/// `amdahl report`'s page shows them, [`crate::num`]).
pub fn run_devices_csv(r: &RunRecord) -> Result<String, csv::Error> {
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
            crate::num(d.energy_j.get()),
            crate::num(d.avg_power_w.get()),
            d.in_total.to_string(),
        ])?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// One CSV row per node of a merged job.
pub fn merge_csv(m: &MergeResult) -> Result<String, csv::Error> {
    let rows = m
        .nodes
        .iter()
        .map(|n| {
            vec![
                n.hostname.clone(),
                n.job_id.clone().unwrap_or_default(),
                n.ranks
                    .iter()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(" "),
                n.counted.len().to_string(),
                n.energy_j.get().to_string(),
                n.energy_kwh.to_string(),
                n.co2e_g.get().to_string(),
                n.partial.to_string(),
            ]
        })
        .collect();
    csv_lines(
        &[
            "hostname",
            "job_id",
            "ranks",
            "files_counted",
            "energy_j",
            "energy_kwh",
            "co2e_g",
            "partial",
        ],
        rows,
    )
}

/// One CSV row per sensor of `amdahl detect`.
pub fn detect_csv(d: &DetectResult) -> Result<String, csv::Error> {
    let rows = d
        .sensors
        .iter()
        .map(|s| {
            vec![
                s.sensor.clone(),
                s.device.clone(),
                s.path.clone().unwrap_or_default(),
                s.status.clone(),
                s.detail.clone(),
                s.fix.clone().unwrap_or_default(),
            ]
        })
        .collect();
    csv_lines(
        &["sensor", "device", "path", "status", "detail", "fix"],
        rows,
    )
}

/// The run as Prometheus text exposition format (version 0.0.4), for node_exporter's textfile
/// collector (`--collector.textfile.directory`): the file is rewritten after every sample, so a
/// dashboard sees energy grow while the job runs. Every series carries the run id and host; device
/// series say how their energy was obtained (`method`: counter, integrated-power, estimate).
pub fn prometheus_textfile(r: &RunRecord) -> String {
    // Label values escape backslash, double quote and newline (exposition format spec).
    let esc = crate::escape::prometheus_label;
    let run = format!(
        "run_id=\"{}\",host=\"{}\"",
        esc(&r.run_id),
        esc(&r.host.hostname)
    );
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, rows: Vec<(String, f64)>| {
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        for (labels, v) in rows {
            out.push_str(&format!("{name}{{{labels}}} {v}\n"));
        }
    };
    let device = |d: &amdahl_meter::record::DeviceRecord| {
        let kind = serde_json::to_value(d.kind)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        format!(
            "{run},device=\"{}\",kind=\"{}\",method=\"{}\",in_total=\"{}\"",
            esc(&d.id),
            esc(&kind),
            d.method.as_str(),
            d.in_total
        )
    };
    family(
        "amdahl_device_energy_joules",
        "counter",
        "Energy charged to the run since it started, per device.",
        r.devices
            .iter()
            .map(|d| (device(d), d.energy_j.get()))
            .collect(),
    );
    family(
        "amdahl_device_power_watts",
        "gauge",
        "Average power of the device since the run started.",
        r.devices
            .iter()
            .map(|d| (device(d), d.avg_power_w.get()))
            .collect(),
    );
    family(
        "amdahl_run_energy_joules",
        "counter",
        "Energy of the devices in the run's total (each counted once), before PUE.",
        vec![(run.clone(), r.total_energy_j.get())],
    );
    family(
        "amdahl_run_co2e_grams",
        "counter",
        "Operational emissions so far: kWh x PUE x grid intensity.",
        vec![(run.clone(), r.co2e_g.get())],
    );
    family(
        "amdahl_run_duration_seconds",
        "gauge",
        "Wall-clock time since the command started.",
        vec![(run.clone(), r.duration_s.get())],
    );
    family(
        "amdahl_run_partial",
        "gauge",
        "1 while the command runs or when it was interrupted, 0 once it finished.",
        vec![(run.clone(), if r.partial { 1.0 } else { 0.0 })],
    );
    family(
        "amdahl_run_info",
        "gauge",
        "Run metadata as labels; the value is always 1.",
        vec![(
            format!(
                "{run},command=\"{}\",scope=\"{}\",region=\"{}\",g_per_kwh=\"{}\",pue=\"{}\"",
                esc(&r.command.join(" ")),
                serde_json::to_value(r.scope)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
                esc(&r.intensity.region),
                r.intensity.g_per_kwh.get(),
                r.pue
            ),
            1.0,
        )],
    );
    out
}

/// Why an energy above idle can be negative, so that the number is not printed without a word:
/// the command drew less power than the idle baseline measured before it. Not clamped, because
/// clamping would bias averages; explained instead.
/// `fix` says how to measure longer (`--baseline` for `run`, `--idle` for `scale`).
pub fn negative_net_note(net_j: f64, fix: &str) -> String {
    if net_j < 0.0 {
        format!(
            "  (negative: the command drew less than the idle power measured before it, so its \
             own energy is within the noise of that baseline; {fix})\n"
        )
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn baseline_negative_energy_was_unexplained() {
        assert!(negative_net_note(-1.5, "x").contains("within the noise"));
        assert!(negative_net_note(0.0, "x").is_empty());
    }
    use super::*;

    /// The header line CodeCarbon 3.3.2 writes: the `EmissionsData` field names in declaration
    /// order, copied from `codecarbon/output_methods/emissions_data.py` of the PyPI wheel
    /// `codecarbon-3.3.2-py3-none-any.whl` (`_version.py`: `__version__ = "3.3.2"`), and equal to
    /// the header row CodeCarbon 3.3.2 wrote in `crates/amdahl-cli/tests/fixtures/codecarbon/`.
    const CODECARBON_3_FIELDS: [&str; 38] = [
        "timestamp",
        "project_name",
        "run_id",
        "experiment_id",
        "duration",
        "emissions",
        "emissions_rate",
        "cpu_power",
        "gpu_power",
        "ram_power",
        "cpu_energy",
        "gpu_energy",
        "ram_energy",
        "energy_consumed",
        "water_consumed",
        "country_name",
        "country_iso_code",
        "region",
        "cloud_provider",
        "cloud_region",
        "os",
        "python_version",
        "codecarbon_version",
        "cpu_count",
        "cpu_model",
        "gpu_count",
        "gpu_model",
        "longitude",
        "latitude",
        "ram_total_size",
        "tracking_mode",
        "cpu_utilization_percent",
        "gpu_utilization_percent",
        "ram_utilization_percent",
        "ram_used_gb",
        "on_cloud",
        "pue",
        "wue",
    ];

    fn record() -> RunRecord {
        use amdahl_meter::cluster::{Cluster, Role};
        use amdahl_meter::record::{
            build, Host, Intensity, MeasurementScope, RunContext, RunState,
        };
        use amdahl_meter::{DeviceEnergy, Method};
        use amdahl_model::units::{GramsPerKwh, Joules, Seconds};
        let ctx = RunContext {
            run_id: "0f0f0f0f-0000-4000-8000-000000000001".into(),
            project: None,
            command: vec!["train".into(), "--epochs=1".into()],
            started_unix_s: 1_709_210_096.0,
            scope: MeasurementScope::Machine,
            interval: Seconds(1.0),
            host: Host {
                hostname: "node1".into(),
                os: "Linux-6.8-x86_64".into(),
                cpu_model: "Intel(R) Xeon(R), 2.1GHz".into(),
                cpu_count: 8,
                ram_total_gb: 16.0,
                boot_id: None,
            },
            cluster: Cluster {
                launcher: None,
                job_id: None,
                rank: None,
                local_rank: None,
                role: Role::Measured,
            },
            pue: 1.5,
            intensity: Intensity {
                g_per_kwh: GramsPerKwh(475.0),
                region: "world".into(),
                source: "IEA 2019".into(),
                year: Some(2019),
                location: None,
            },
            baseline: None,
            python_version: None,
        };
        let dev = |id: &str, kind, j| DeviceEnergy {
            id: id.into(),
            kind,
            name: match kind {
                DeviceKind::Gpu => "NVIDIA H100 80GB HBM3".into(),
                DeviceKind::Dram => "dram".into(),
                _ => "package-0".into(),
            },
            method: Method::Counter,
            energy_j: Joules(j),
            note: None,
            rejected_steps: 0,
        };
        let devs = [
            dev("intel-rapl:0", DeviceKind::CpuPackage, 300.0),
            dev("intel-rapl:0:2", DeviceKind::Dram, 60.0),
            dev("gpu:0", DeviceKind::Gpu, 3240.0),
        ];
        build(
            &ctx,
            &devs,
            RunState {
                duration: Seconds(10.0),
                exit_code: Some(0),
                ..Default::default()
            },
        )
    }

    #[test]
    fn prometheus_textfile_has_one_series_per_device_and_escapes_labels() {
        let mut r = record();
        r.command = vec!["say".into(), "\"hi\"\n".into()];
        let text = prometheus_textfile(&r);
        let series = |name: &str| {
            text.lines()
                .filter(|l| l.starts_with(&format!("{name}{{")))
                .count()
        };
        assert_eq!(series("amdahl_device_energy_joules"), 3);
        assert_eq!(series("amdahl_run_energy_joules"), 1);
        // 300 J package + 60 J dram + 3240 J GPU, all counters in the total.
        assert!(text.contains("amdahl_run_energy_joules{run_id=\"0f0f0f0f-0000-4000-8000-000000000001\",host=\"node1\"} 3600\n"), "{text}");
        assert!(
            text.contains(r#"device="gpu:0",kind="gpu",method="counter",in_total="true"} 3240"#),
            "{text}"
        );
        assert!(text.contains(r#"command="say \"hi\"\n""#), "{text}");
        assert!(text.contains("# TYPE amdahl_run_co2e_grams counter\n"));
    }

    #[test]
    fn codecarbon_row_maps_units() {
        let row = codecarbon_row(&record()).unwrap();
        let mut rd = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(row.as_bytes());
        let rec = rd.records().next().unwrap().unwrap();
        assert_eq!(rec.len(), 38);
        let get = |name: &str| {
            let i = CODECARBON_3_FIELDS.iter().position(|f| *f == name).unwrap();
            rec.get(i).unwrap().to_string()
        };
        let num = |name: &str| get(name).parse::<f64>().unwrap();
        // 300 J × PUE 1.5 / 3.6e6 = 1.25e-4 kWh; 60 J → 2.5e-5; 3240 J → 1.35e-3; sum 1.5e-3.
        assert!((num("cpu_energy") - 1.25e-4).abs() < 1e-15);
        assert!((num("ram_energy") - 2.5e-5).abs() < 1e-15);
        assert!((num("gpu_energy") - 1.35e-3).abs() < 1e-15);
        assert!((num("energy_consumed") - 1.5e-3).abs() < 1e-15);
        // 1.5e-3 kWh × 475 g/kWh = 0.7125 g = 7.125e-4 kg; over 10 s.
        assert!((num("emissions") - 7.125e-4).abs() < 1e-15);
        assert!((num("emissions_rate") - 7.125e-5).abs() < 1e-15);
        // GPU: 3240 J × 1.5 / 10 s = 486 W.
        assert!((num("gpu_power") - 486.0).abs() < 1e-9);
        assert_eq!(get("timestamp"), "2024-02-29T12:35:06");
        assert_eq!(get("cpu_model"), "Intel(R) Xeon(R), 2.1GHz");
        assert_eq!(get("tracking_mode"), "machine");
        assert_eq!(get("experiment_id"), CODECARBON_DEFAULT_EXPERIMENT);
    }

    /// Regression: `ram_total_size` was the record's decimal GB (16.0) where CodeCarbon 3.3.2
    /// writes GiB (`psutil.virtual_memory().total / 1024³`): 16e9 B = 14.901161193847656 GiB.
    /// The utilisation columns were 0 and `python_version` empty whatever was measured; they
    /// now carry the record's utilisation and the tracker's interpreter, and
    /// `codecarbon_version` names the pinned format (3.3.2) with amdahl as its local label.
    #[test]
    fn codecarbon_row_has_codecarbon_units_and_utilisation() {
        let mut r = record();
        r.utilization = Some(amdahl_meter::utilization::Utilization {
            cpu_percent: 37.5,
            ram_percent: 12.25,
            ram_used_gib: 3.5,
        });
        r.python_version = Some("3.11.7".into());
        let row = codecarbon_row(&r).unwrap();
        let rec = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(row.as_bytes())
            .records()
            .next()
            .unwrap()
            .unwrap();
        let get = |name: &str| {
            let i = CODECARBON_3_FIELDS.iter().position(|f| *f == name).unwrap();
            rec.get(i).unwrap().to_string()
        };
        assert_eq!(get("ram_total_size"), "14.901161193847656");
        assert_eq!(get("cpu_utilization_percent"), "37.5");
        assert_eq!(get("ram_utilization_percent"), "12.25");
        assert_eq!(get("ram_used_gb"), "3.5");
        assert_eq!(get("python_version"), "3.11.7");
        assert_eq!(
            get("codecarbon_version"),
            format!("3.3.2+amdahl.{}", env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(CODECARBON_VERSION, "3.3.2");
        // An older file's columns, in its order: only those cells.
        let older = codecarbon_row_in(&r, &["pue", "run_id", "ram_total_size"]).unwrap();
        assert_eq!(older, format!("1.5,{},14.901161193847656\n", r.run_id));
    }

    /// Regression: a `--project`, job id, CPU or GPU name starting with `=`, `+`, `-` or `@` was
    /// written verbatim, and a spreadsheet opening emissions.csv evaluated it as a formula.
    #[test]
    fn codecarbon_row_text_cells_cannot_start_a_formula_numbers_stay_numbers() {
        let mut r = record();
        r.project = Some("=HYPERLINK(\"http://x\",\"y\")".into());
        r.cluster.job_id = Some("+1".into());
        r.host.os = "\tLinux".into();
        r.host.cpu_model = "@SUM(A1)".into();
        r.devices
            .iter_mut()
            .filter(|d| d.kind == DeviceKind::Gpu)
            .for_each(|d| d.name = "-2+3".into());
        r.energy_kwh = -0.5;
        let row = codecarbon_row(&r).unwrap();
        let mut rd = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(row.as_bytes());
        let rec = rd.records().next().unwrap().unwrap();
        let get = |name: &str| {
            let i = CODECARBON_3_FIELDS.iter().position(|f| *f == name).unwrap();
            rec.get(i).unwrap().to_string()
        };
        assert_eq!(get("project_name"), "'=HYPERLINK(\"http://x\",\"y\")");
        assert_eq!(get("experiment_id"), "'+1");
        assert_eq!(get("os"), "'\tLinux");
        assert_eq!(get("cpu_model"), "'@SUM(A1)");
        assert_eq!(get("gpu_model"), "'-2+3");
        assert_eq!(get("energy_consumed"), "-0.5");
        assert_eq!(get("run_id"), r.run_id);
    }

    #[test]
    fn summary_states_methods_and_provenance() {
        let s = run_summary(&record());
        assert!(
            s.contains("counter") && s.contains("IEA 2019, 2019") && s.contains("exited 0"),
            "{s}"
        );
        insta::assert_snapshot!("run_summary", s);
    }

    #[test]
    fn codecarbon_row_snapshot() {
        insta::assert_snapshot!("codecarbon_row", codecarbon_row(&record()).unwrap());
    }

    #[test]
    fn merge_summary_snapshot() {
        use amdahl_meter::record::merge;
        let a = record();
        let mut b = record();
        b.host.hostname = "node2".into();
        // Another run (one run id given twice would count once).
        b.run_id = "0f0f0f0f-0000-4000-8000-000000000002".into();
        let m = merge(vec![("a.json".into(), a), ("b.json".into(), b)]);
        assert_eq!(m.total_energy_j.get(), 7200.0);
        insta::assert_snapshot!("merge_summary", merge_summary(&m));
    }

    #[test]
    fn header_equals_codecarbon_3() {
        assert_eq!(CODECARBON_HEADER, CODECARBON_3_FIELDS.join(","));
        assert_eq!(CODECARBON_HEADER.split(',').count(), 38);
    }
}

//! OpenMetrics text of `amdahl exporter` (what Prometheus scrapes from `/metrics`), rendered with
//! the Prometheus project's Rust client (`prometheus-client`) from an attribution
//! [`Snapshot`]. A pure function: the HTTP server lives in the binary.

use amdahl_meter::attribution::{Partition, Snapshot};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::AtomicU64;

/// The `Content-Type` of [`render`]'s output (OpenMetrics 1.0, which Prometheus ≥ 2.5 reads).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = Vec<(String, String)>;

/// A label value as the exposition format needs it: [`crate::escape::prometheus_label`].
pub use crate::escape::prometheus_label as escape_label;

fn labels(
    scope: Partition,
    extra: &[(String, String)],
    device: &str,
    kind: &str,
    method: &str,
) -> Labels {
    let mut l = vec![
        ("scope".to_string(), scope.as_str().to_string()),
        ("device".to_string(), escape_label(device)),
        ("kind".to_string(), kind.to_string()),
        ("method".to_string(), method.to_string()),
    ];
    l.extend(extra.iter().map(|(k, v)| (k.clone(), escape_label(v))));
    l
}

fn kind_str(k: amdahl_meter::DeviceKind) -> &'static str {
    use amdahl_meter::DeviceKind::*;
    match k {
        CpuPackage => "cpu-package",
        Dram => "dram",
        Psys => "psys",
        Gpu => "gpu",
        Cpu => "cpu",
        Ram => "ram",
    }
}

/// Render every series of `snap` as OpenMetrics text (HELP, TYPE and UNIT lines, `# EOF`).
pub fn render(snap: &Snapshot) -> Result<String, std::fmt::Error> {
    let mut reg = Registry::default();
    let energy = Family::<Labels, Counter<f64, AtomicU64>>::default();
    let power = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    reg.register_with_unit(
        "amdahl_energy",
        "Energy since the exporter started, by scope (node, cgroup, job, user, process, unattributed); \
         per device, the cgroup (or user) series plus unattributed sum to node",
        Unit::Joules,
        energy.clone(),
    );
    reg.register_with_unit(
        "amdahl_power",
        "Average power over the latest sampling interval, same labels as amdahl_energy_joules_total",
        Unit::Other("watts".into()),
        power.clone(),
    );
    let ended = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    reg.register_with_unit(
        "amdahl_energy_ended",
        "Energy of the cgroups, jobs, users and processes no longer exported (no process for \
         --retain), per scope and device: a gauge (a cgroup, job or user that comes back takes \
         its energy back), never part of amdahl_energy_joules_total, so no sum of that counter \
         counts it twice; per device, a scope's series plus this plus unattributed equal node",
        Unit::Joules,
        ended.clone(),
    );
    for s in &snap.series {
        let l = labels(
            s.scope,
            &s.labels,
            &s.device,
            kind_str(s.kind),
            s.method.as_str(),
        );
        // From integer µJ that never decrease: the counter never does either.
        energy.get_or_create(&l).inc_by(s.energy_j());
        if let Some(p) = s.power_w.filter(|p| p.is_finite()) {
            power.get_or_create(&l).set(p.max(0.0));
        }
    }
    for s in &snap.ended {
        let l = labels(s.scope, &[], &s.device, kind_str(s.kind), s.method.as_str());
        ended.get_or_create(&l).set(s.energy_j());
    }
    let samples = Counter::<u64>::default();
    samples.inc_by(snap.samples);
    reg.register("amdahl_exporter_samples", "Sensor samples taken", samples);
    let procs = Gauge::<i64>::default();
    procs.set(i64::try_from(snap.processes).unwrap_or(i64::MAX));
    reg.register(
        "amdahl_exporter_processes",
        "Processes seen in the latest sample",
        procs,
    );
    let unknown = Gauge::<i64>::default();
    unknown.set(i64::try_from(snap.unknown_processes).unwrap_or(i64::MAX));
    reg.register(
        "amdahl_exporter_unknown_processes",
        "Processes whose user or cgroup could not be read (attributed to \"unknown\")",
        unknown,
    );
    let incomplete = Family::<Labels, Gauge<i64>>::default();
    reg.register(
        "amdahl_sensor_incomplete",
        "1 for a device whose energy misses intervals (file vanished, impossible step); see the note label",
        incomplete.clone(),
    );
    for (id, note) in &snap.device_notes {
        incomplete
            .get_or_create(&vec![
                ("device".to_string(), escape_label(id)),
                (
                    "note".to_string(),
                    escape_label(&note.chars().take(200).collect::<String>()),
                ),
            ])
            .set(1);
    }
    let rules = Family::<Labels, Gauge<i64>>::default();
    reg.register(
        "amdahl_gpu_attribution_rule",
        "1 for the rule that split each GPU's energy in the latest interval: utilisation \
         (NVML per-process SM utilisation), processes (equally over the processes holding it) or \
         unattributed (no process, or the driver said nothing)",
        rules.clone(),
    );
    for (id, rule) in &snap.gpu_rules {
        rules
            .get_or_create(&vec![
                ("device".to_string(), escape_label(id)),
                ("rule".to_string(), rule.as_str().to_string()),
            ])
            .set(1);
    }
    let mut out = String::new();
    encode(&mut out, &reg)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdahl_meter::attribution::gpu::GpuRule;
    use amdahl_meter::attribution::Series;
    use amdahl_meter::{DeviceKind, Method};

    fn series(scope: Partition, labels: &[(&str, &str)], e: f64) -> Series {
        Series {
            scope,
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            device: "intel-rapl:0".into(),
            kind: DeviceKind::CpuPackage,
            method: Method::Counter,
            energy_uj: (e * 1e6) as u64,
            power_w: Some(2.5),
        }
    }

    #[test]
    fn names_help_type_and_escaped_labels() {
        let snap = Snapshot {
            series: vec![
                series(Partition::Node, &[], 12.5),
                series(
                    Partition::Process,
                    &[("pid", "7"), ("comm", "a\"b\\c\nd")],
                    1.0,
                ),
            ],
            ended: vec![],
            samples: 3,
            processes: 1,
            unknown_processes: 0,
            device_notes: vec![],
            gpu_rules: vec![("gpu:0".into(), GpuRule::Utilisation)],
        };
        let t = render(&snap).unwrap();
        assert!(t.contains("# HELP amdahl_energy_joules "), "{t}");
        assert!(t.contains("# TYPE amdahl_energy_joules counter"), "{t}");
        assert!(t.contains("# TYPE amdahl_power_watts gauge"), "{t}");
        assert!(
            t.contains(r#"amdahl_energy_joules_total{scope="node",device="intel-rapl:0",kind="cpu-package",method="counter"} 12.5"#),
            "{t}"
        );
        assert!(t.contains(r#"comm="a\"b\\c\nd""#), "{t}");
        assert!(t.contains("amdahl_exporter_samples_total 3"), "{t}");
        assert!(
            t.contains(r#"amdahl_gpu_attribution_rule{device="gpu:0",rule="utilisation"} 1"#),
            "{t}"
        );
        assert!(t.ends_with("# EOF\n"), "{t}");
    }
}

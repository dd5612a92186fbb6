//! The `amdahl.run/1` result of one `amdahl run`, and `amdahl.merge/1`, the job total of many.
//!
//! Carbon follows the usual accounting: kWh = J / 3.6e6 × PUE; gCO2e = kWh × intensity
//! (e.g. Green Algorithms, Lannelongue et al. 2021, eq. 1–2).

use crate::cluster::{Cluster, Role};
use crate::estimate;
use crate::meter::DeviceEnergy;
use crate::source::{DeviceKind, Method};
use crate::MeterError;
use amdahl_model::units::{Bytes, GramsCo2e, GramsPerKwh, Joules, Seconds, Watts};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const RUN_SCHEMA: &str = "amdahl.run/1";
pub const MERGE_SCHEMA: &str = "amdahl.merge/1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// Everything the node's sensors see.
    Machine,
    /// The command's share: machine counters × its CPU-time share; estimates from its own CPU
    /// time and RSS. GPUs are charged whole (treated as dedicated to the command).
    Process,
}

/// A grid carbon intensity with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Intensity {
    pub g_per_kwh: GramsPerKwh,
    pub region: String,
    pub source: String,
    pub year: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub hostname: String,
    pub os: String,
    pub cpu_model: String,
    pub cpu_count: usize,
    pub ram_total_gb: f64,
}

/// One device row of a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceRecord {
    pub id: String,
    pub kind: DeviceKind,
    pub name: String,
    pub method: Method,
    /// Energy charged to this run (after process-scope attribution).
    pub energy_j: Joules,
    pub avg_power_w: Watts,
    /// Whether it enters `total_energy_j` (a package and dram leave it when psys covers them).
    pub in_total: bool,
    /// The whole device's energy when process scope charged only a share of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_energy_j: Option<Joules>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub duration_s: Seconds,
    /// Idle power of the devices in the total, measured before the command started.
    pub power_w: Watts,
    /// total_energy_j − power_w × duration_s: the energy above idle (may be negative in noise).
    pub net_energy_j: Joules,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub schema: String,
    pub amdahl_version: String,
    /// Unique id of this run (UUID-shaped; also CodeCarbon's `run_id`).
    pub run_id: String,
    pub command: Vec<String>,
    /// UTC, ISO 8601.
    pub started_at: String,
    pub started_unix_s: f64,
    pub duration_s: Seconds,
    /// The command's exit code as a shell reports it (128 + signal if killed); null while running.
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_signal: Option<String>,
    /// True while the run is in progress and when it was interrupted: the figures cover only
    /// part of the command.
    pub partial: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_by: Option<String>,
    pub scope: Scope,
    pub interval_s: Seconds,
    pub host: Host,
    pub cluster: Cluster,
    pub devices: Vec<DeviceRecord>,
    pub total_energy_j: Joules,
    pub average_power_w: Watts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
    pub pue: f64,
    /// total_energy_j in kWh, multiplied by the PUE.
    pub energy_kwh: f64,
    pub intensity: Intensity,
    pub co2e_g: GramsCo2e,
    /// CPU time of the command (user + system, with waited-for children).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_time_s: Option<Seconds>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rss_bytes: Option<Bytes>,
    /// CPU-time share applied to machine counters in process scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_share: Option<f64>,
    pub warnings: Vec<String>,
}

/// Everything about a run that is fixed before it starts.
#[derive(Debug, Clone)]
pub struct RunContext {
    pub run_id: String,
    pub command: Vec<String>,
    pub started_unix_s: f64,
    pub scope: Scope,
    pub interval: Seconds,
    pub host: Host,
    pub cluster: Cluster,
    pub pue: f64,
    pub intensity: Intensity,
    /// Idle power and how long it was measured.
    pub baseline: Option<(Seconds, Watts)>,
}

/// What is known at the time of building (mid-run or at the end).
#[derive(Debug, Clone, Default)]
pub struct Progress {
    pub duration: Seconds,
    pub exit_code: Option<i32>,
    pub child_signal: Option<i32>,
    pub partial: bool,
    pub interrupted_by: Option<String>,
    pub cpu_time: Option<Seconds>,
    pub max_rss: Option<Bytes>,
    /// CPU-time share for process scope (None in machine scope).
    pub share: Option<f64>,
    pub warnings: Vec<String>,
}

fn is_machine_counter(kind: DeviceKind) -> bool {
    matches!(
        kind,
        DeviceKind::CpuPackage | DeviceKind::Dram | DeviceKind::Psys
    )
}

/// The devices' power averaged over the run, for idle baselines: sum of in-total device energy
/// divided by the duration.
pub fn total_power(devices: &[DeviceEnergy], duration: Seconds) -> Watts {
    let e = total_energy(devices);
    if duration.get() > 0.0 {
        e / duration
    } else {
        Watts::ZERO
    }
}

/// Energy of the devices that enter the total (psys, when present, replaces package and dram).
pub fn total_energy(devices: &[DeviceEnergy]) -> Joules {
    let psys = devices.iter().any(|d| d.kind == DeviceKind::Psys);
    devices
        .iter()
        .filter(|d| in_total(d.kind, psys))
        .map(|d| d.energy_j)
        .sum()
}

/// Whether a device of `kind` enters the total: psys covers the packages and dram, so with a
/// psys zone they leave it (never counted twice).
pub fn in_total(kind: DeviceKind, has_psys: bool) -> bool {
    !(has_psys && matches!(kind, DeviceKind::CpuPackage | DeviceKind::Dram))
}

/// Build the record from the meter's devices.
pub fn build(ctx: &RunContext, devices: &[DeviceEnergy], p: Progress) -> RunRecord {
    let measured = ctx.cluster.role == Role::Measured;
    let has_psys = devices.iter().any(|d| d.kind == DeviceKind::Psys);
    let secs = p.duration.get();
    let rows: Vec<DeviceRecord> = if measured {
        devices
            .iter()
            .map(|d| {
                let (energy, machine) = match p.share {
                    Some(s) if is_machine_counter(d.kind) && d.method != Method::Estimate => {
                        (estimate::attribute(d.energy_j, s), Some(d.energy_j))
                    }
                    _ => (d.energy_j, None),
                };
                DeviceRecord {
                    id: d.id.clone(),
                    kind: d.kind,
                    name: d.name.clone(),
                    method: d.method,
                    energy_j: energy,
                    avg_power_w: if secs > 0.0 {
                        energy / p.duration
                    } else {
                        Watts::ZERO
                    },
                    in_total: in_total(d.kind, has_psys),
                    machine_energy_j: machine,
                    note: d.note.clone(),
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let total: Joules = rows.iter().filter(|r| r.in_total).map(|r| r.energy_j).sum();
    let energy_kwh = total.kwh() * ctx.pue;
    let co2e = GramsCo2e(energy_kwh * ctx.intensity.g_per_kwh.get());
    let baseline = ctx.baseline.filter(|_| measured).map(|(d, pw)| Baseline {
        duration_s: d,
        power_w: pw,
        net_energy_j: total - pw * p.duration,
    });
    RunRecord {
        schema: RUN_SCHEMA.into(),
        amdahl_version: env!("CARGO_PKG_VERSION").into(),
        run_id: ctx.run_id.clone(),
        command: ctx.command.clone(),
        started_at: utc_iso(ctx.started_unix_s),
        started_unix_s: ctx.started_unix_s,
        duration_s: p.duration,
        exit_code: p.exit_code,
        child_signal: p.child_signal.map(crate::runner::signal_name),
        partial: p.partial,
        interrupted_by: p.interrupted_by,
        scope: ctx.scope,
        interval_s: ctx.interval,
        host: ctx.host.clone(),
        cluster: ctx.cluster.clone(),
        devices: rows,
        total_energy_j: total,
        average_power_w: if secs > 0.0 {
            total / p.duration
        } else {
            Watts::ZERO
        },
        baseline,
        pue: ctx.pue,
        energy_kwh,
        intensity: ctx.intensity.clone(),
        co2e_g: co2e,
        cpu_time_s: p.cpu_time,
        max_rss_bytes: p.max_rss,
        process_share: p.share,
        warnings: p.warnings,
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` for a Unix time (days → civil date: H. Hinnant, "chrono-compatible
/// low-level date algorithms", `civil_from_days`).
pub fn utc_iso(unix_s: f64) -> String {
    let secs = unix_s.floor() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A UUID-shaped (version 4 layout) id from the clock, the pid and the host name: unique enough
/// to tell runs apart in a CSV, with no randomness source needed.
pub fn new_run_id(unix_s: f64, pid: u32, host: &str) -> String {
    // FNV-1a 64 (Fowler–Noll–Vo), two seeds for 128 bits.
    let fnv = |seed: u64| {
        let mut h = seed;
        for b in unix_s
            .to_bits()
            .to_le_bytes()
            .iter()
            .chain(&pid.to_le_bytes())
            .chain(host.as_bytes())
        {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h
    };
    let (a, b) = (fnv(0xcbf2_9ce4_8422_2325), fnv(0x8422_2325_cbf2_9ce4));
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        0x8000 | (b >> 48) & 0x3fff,
        b & 0xffff_ffff_ffff
    )
}

/// Read and check one saved record.
pub fn read_record(path: &Path) -> Result<RunRecord, MeterError> {
    let text = std::fs::read_to_string(path).map_err(|e| MeterError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    let r: RunRecord = serde_json::from_str(&text).map_err(|e| MeterError::BadRecord {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    if r.schema != RUN_SCHEMA {
        return Err(MeterError::BadRecord {
            path: path.to_path_buf(),
            message: format!("schema is `{}`, expected `{RUN_SCHEMA}`", r.schema),
        });
    }
    Ok(r)
}

/// One node of a merged job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedNode {
    pub hostname: String,
    pub job_id: Option<String>,
    /// Ranks seen on this node (measured and reference).
    pub ranks: Vec<u32>,
    /// Files whose energy was counted.
    pub counted: Vec<PathBuf>,
    pub energy_j: Joules,
    pub energy_kwh: f64,
    pub co2e_g: GramsCo2e,
    pub methods: Vec<Method>,
    pub partial: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergeResult {
    pub schema: String,
    pub files: usize,
    pub nodes: Vec<MergedNode>,
    pub total_energy_j: Joules,
    /// Sum of each record's PUE-weighted kWh.
    pub energy_kwh: f64,
    /// Sum of each record's emissions (each with its own intensity).
    pub co2e_g: GramsCo2e,
    /// Longest record (wall time of the job if the ranks ran together).
    pub duration_s: Seconds,
    /// First non-zero exit code, else 0.
    pub exit_code: i32,
    pub partial: bool,
    pub warnings: Vec<String>,
}

fn overlaps(a: &RunRecord, b: &RunRecord) -> bool {
    let (a0, a1) = (a.started_unix_s, a.started_unix_s + a.duration_s.get());
    let (b0, b1) = (b.started_unix_s, b.started_unix_s + b.duration_s.get());
    a0 < b1 && b0 < a1
}

/// Sum per-node results into a job total without double counting: on each (job, host),
/// reference records add no energy; of machine-scope records whose time windows overlap only the
/// first is kept (they read the same counters); process-scope records overlapping a kept
/// machine-scope record are inside it and dropped. Sequential runs on one host add up.
pub fn merge(records: Vec<(PathBuf, RunRecord)>) -> MergeResult {
    let files = records.len();
    let mut warnings = Vec::new();
    let mut nodes: Vec<(MergedNode, Vec<RunRecord>)> = Vec::new();
    let mut sorted = records;
    sorted.sort_by(|a, b| a.1.started_unix_s.total_cmp(&b.1.started_unix_s));
    // Machine scope first, so process-scope records are checked against them.
    sorted.sort_by_key(|(_, r)| r.scope != Scope::Machine);
    let (mut total, mut kwh, mut co2, mut dur) =
        (Joules::ZERO, 0.0, GramsCo2e::ZERO, Seconds::ZERO);
    let (mut exit_code, mut partial) = (0, false);
    for (path, r) in sorted {
        if dur < r.duration_s {
            dur = r.duration_s;
        }
        if exit_code == 0 {
            exit_code = r.exit_code.unwrap_or(0);
        }
        partial |= r.partial || r.exit_code.is_none();
        let pos = nodes
            .iter()
            .position(|(n, _)| n.hostname == r.host.hostname && n.job_id == r.cluster.job_id);
        let i = pos.unwrap_or_else(|| {
            nodes.push((
                MergedNode {
                    hostname: r.host.hostname.clone(),
                    job_id: r.cluster.job_id.clone(),
                    ranks: Vec::new(),
                    counted: Vec::new(),
                    energy_j: Joules::ZERO,
                    energy_kwh: 0.0,
                    co2e_g: GramsCo2e::ZERO,
                    methods: Vec::new(),
                    partial: false,
                },
                Vec::new(),
            ));
            nodes.len() - 1
        });
        let Some((node, kept)) = nodes.get_mut(i) else {
            continue;
        };
        node.ranks.extend(r.cluster.rank);
        if r.cluster.role == Role::Reference {
            continue;
        }
        let clash = kept
            .iter()
            .find(|k| overlaps(k, &r) && (k.scope == Scope::Machine || r.scope == Scope::Machine));
        if let Some(k) = clash {
            warnings.push(format!(
                "{}: overlaps a {}-scope record of host {} started at {}; it reads the same counters, not counted again",
                path.display(),
                match k.scope { Scope::Machine => "machine", Scope::Process => "process" },
                r.host.hostname,
                k.started_at
            ));
            continue;
        }
        node.energy_j += r.total_energy_j;
        node.energy_kwh += r.energy_kwh;
        node.co2e_g += r.co2e_g;
        node.partial |= r.partial;
        for d in &r.devices {
            if !node.methods.contains(&d.method) {
                node.methods.push(d.method);
            }
        }
        node.counted.push(path);
        total += r.total_energy_j;
        kwh += r.energy_kwh;
        co2 += r.co2e_g;
        kept.push(r);
    }
    let mut nodes: Vec<MergedNode> = nodes.into_iter().map(|(n, _)| n).collect();
    for n in &mut nodes {
        n.ranks.sort_unstable();
        if n.counted.is_empty() {
            warnings.push(format!(
                "host {}: only reference records (no local rank 0 file given); its energy is missing",
                n.hostname
            ));
        }
    }
    nodes.sort_by(|a, b| a.hostname.cmp(&b.hostname));
    MergeResult {
        schema: MERGE_SCHEMA.into(),
        files,
        nodes,
        total_energy_j: total,
        energy_kwh: kwh,
        co2e_g: co2,
        duration_s: dur,
        exit_code,
        partial,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates() {
        assert_eq!(utc_iso(0.0), "1970-01-01T00:00:00Z");
        // 2024-02-29T12:34:56Z (leap day) = 1709210096.
        assert_eq!(utc_iso(1_709_210_096.5), "2024-02-29T12:34:56Z");
    }

    pub(crate) fn ctx(host: &str, role: Role, rank: u32) -> RunContext {
        RunContext {
            run_id: "00000000-0000-4000-8000-000000000000".into(),
            command: vec!["true".into()],
            started_unix_s: 1000.0,
            scope: Scope::Machine,
            interval: Seconds(1.0),
            host: Host {
                hostname: host.into(),
                os: "Linux".into(),
                cpu_model: "x".into(),
                cpu_count: 8,
                ram_total_gb: 16.0,
            },
            cluster: Cluster {
                launcher: Some("slurm".into()),
                job_id: Some("42".into()),
                rank: Some(rank),
                local_rank: Some(if role == Role::Measured { 0 } else { 1 }),
                role,
            },
            pue: 1.5,
            intensity: Intensity {
                g_per_kwh: GramsPerKwh(475.0),
                region: "world".into(),
                source: "IEA 2019".into(),
                year: Some(2019),
            },
            baseline: None,
        }
    }

    fn dev(kind: DeviceKind, j: f64) -> DeviceEnergy {
        DeviceEnergy {
            id: format!("{kind:?}"),
            kind,
            name: "d".into(),
            method: Method::Counter,
            energy_j: Joules(j),
            note: None,
        }
    }

    fn done(d: f64) -> Progress {
        Progress {
            duration: Seconds(d),
            exit_code: Some(0),
            ..Default::default()
        }
    }

    #[test]
    fn psys_replaces_package_and_dram_in_total_and_carbon_follows() {
        let devs = [
            dev(DeviceKind::CpuPackage, 300.0),
            dev(DeviceKind::Dram, 60.0),
            dev(DeviceKind::Gpu, 3240.0),
        ];
        let r = build(&ctx("a", Role::Measured, 0), &devs, done(10.0));
        assert_eq!(r.total_energy_j, Joules(3600.0));
        // 3600 J = 1e-3 kWh; × PUE 1.5; × 475 g/kWh = 0.7125 g.
        assert!((r.energy_kwh - 1.5e-3).abs() < 1e-15);
        assert!((r.co2e_g.get() - 0.7125).abs() < 1e-12);
        let devs = [
            dev(DeviceKind::CpuPackage, 300.0),
            dev(DeviceKind::Psys, 500.0),
        ];
        let r = build(&ctx("a", Role::Measured, 0), &devs, done(10.0));
        assert_eq!(r.total_energy_j, Joules(500.0));
    }

    #[test]
    fn merge_never_double_counts_a_node() {
        let devs = [dev(DeviceKind::CpuPackage, 100.0)];
        let a0 = build(&ctx("a", Role::Measured, 0), &devs, done(10.0));
        let a1 = build(&ctx("a", Role::Reference, 1), &devs, done(10.0));
        let b0 = build(&ctx("b", Role::Measured, 2), &devs, done(10.0));
        // A second machine-scope record of host b in the same window (e.g. rank detection off).
        let b0dup = build(&ctx("b", Role::Measured, 3), &devs, done(10.0));
        let m = merge(vec![
            ("a0".into(), a0),
            ("a1".into(), a1),
            ("b0".into(), b0.clone()),
            ("b0dup".into(), b0dup),
        ]);
        assert_eq!(m.total_energy_j, Joules(200.0));
        assert_eq!(m.nodes.len(), 2);
        assert_eq!(m.nodes[0].ranks, [0, 1]);
        assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
        // Sequential runs on one host add up.
        let mut later = b0.clone();
        later.started_unix_s += 100.0;
        let m = merge(vec![("x".into(), b0), ("y".into(), later)]);
        assert_eq!(m.total_energy_j, Joules(200.0));
    }

    proptest::proptest! {
        /// However ranks, hosts and duplicates are mixed, the job total never exceeds the sum of
        /// one machine-scope record per host (all records here share one time window).
        #[test]
        fn merge_never_exceeds_one_record_per_host(recs in proptest::collection::vec((0u8..4, proptest::bool::ANY, 0.0f64..1e6), 1..12)) {
            let mut per_host = [0.0f64; 4];
            let mut files = Vec::new();
            for (i, (h, reference, j)) in recs.iter().enumerate() {
                let role = if *reference { Role::Reference } else { Role::Measured };
                let r = build(&ctx(&format!("h{h}"), role, i as u32), &[dev(DeviceKind::CpuPackage, *j)], done(10.0));
                if !reference {
                    let slot = &mut per_host[*h as usize];
                    *slot = slot.max(*j);
                }
                files.push((PathBuf::from(format!("f{i}")), r));
            }
            let m = merge(files);
            let bound: f64 = per_host.iter().sum();
            proptest::prop_assert!(m.total_energy_j.get() <= bound * (1.0 + 1e-12) + 1e-9);
        }
    }

    #[test]
    fn reference_rank_holds_no_energy() {
        let r = build(
            &ctx("a", Role::Reference, 1),
            &[dev(DeviceKind::Gpu, 5.0)],
            done(1.0),
        );
        assert!(r.devices.is_empty());
        assert_eq!(r.total_energy_j, Joules::ZERO);
    }
}

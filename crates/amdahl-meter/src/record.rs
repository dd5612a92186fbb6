//! The `amdahl.run/1` result of one `amdahl run`, and `amdahl.merge/1`, the job total of many.
//!
//! Carbon follows the usual accounting: kWh = J / 3.6e6 × PUE; gCO2e = kWh × intensity
//! (e.g. Green Algorithms, Lannelongue et al. 2021, eq. 1–2).

use crate::cluster::{Cluster, Role};
use crate::estimate;
use crate::meter::DeviceEnergy;
use crate::procfs;
use crate::source::{DeviceKind, Method};
use crate::MeterError;
use amdahl_model::catalog::grid::{Grid, GridIntensity};
use amdahl_model::units::{Bytes, GramsCo2e, GramsPerKwh, Joules, Seconds, Watts};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const RUN_SCHEMA: &str = "amdahl.run/1";
pub const MERGE_SCHEMA: &str = "amdahl.merge/1";

// Which part of the machine a run charges: `Scope` in the JSON schema (no doc comment: it would
// become the schema's description).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[schemars(rename = "Scope")]
pub enum MeasurementScope {
    /// Everything the node's sensors see.
    Machine,
    /// The command's share: machine counters × its CPU-time share; estimates from its own CPU
    /// time and RSS. GPUs are charged whole (treated as dedicated to the command).
    Process,
}

/// A grid carbon intensity with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Intensity {
    pub g_per_kwh: GramsPerKwh,
    pub region: String,
    pub source: String,
    pub year: Option<u16>,
    /// Where the grid is, for the CodeCarbon columns; absent for `world` and custom values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
}

impl Intensity {
    /// A resolved grid intensity as the record keeps it: figure, code, source with its scope,
    /// year, and the location `grid` (the catalog it was resolved from) knows for the code.
    pub fn from_grid(g: &GridIntensity, grid: &Grid) -> Self {
        Intensity {
            g_per_kwh: g.g_per_kwh,
            region: g.code.clone(),
            source: format!("{} ({})", g.source, g.scope),
            year: g.year,
            location: grid.location(&g.code),
        }
    }
}

/// The location of a grid region as CodeCarbon's CSV names it (the grid catalog resolves it).
pub use amdahl_model::catalog::grid::Location;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Host {
    pub hostname: String,
    pub os: String,
    pub cpu_model: String,
    pub cpu_count: usize,
    pub ram_total_gb: f64,
    /// The running kernel's boot id (`/proc/sys/kernel/random/boot_id`): records with the same
    /// one read the same RAPL and NVML counters (containers on one machine share it; two
    /// machines that share a hostname do not). Absent in records of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}

/// One device row of a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// Counter steps rejected as physically impossible (a glitch or a counter that stepped
    /// back); their intervals are missing from `energy_j`.
    #[serde(default, skip_serializing_if = "crate::meter::is_zero")]
    pub rejected_steps: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Baseline {
    pub duration_s: Seconds,
    /// Idle power of the devices in the total, measured before the command started.
    pub power_w: Watts,
    /// total_energy_j − power_w × duration_s: the energy above idle (may be negative in noise).
    pub net_energy_j: Joules,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunRecord {
    pub schema: String,
    pub amdahl_version: String,
    /// Unique id of this run (UUID-shaped; also CodeCarbon's `run_id`).
    pub run_id: String,
    /// The project the run belongs to (`amdahl run --project`, `amdahl.Tracker(project=…)`),
    /// also the CodeCarbon row's `project_name`; absent when none was named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
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
    /// Why the command never ran (not found: exit 127; not executable: 126). Such a record
    /// holds no devices and no energy, and no CodeCarbon row is written for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_started: Option<String>,
    pub scope: MeasurementScope,
    pub interval_s: Seconds,
    pub host: Host,
    pub cluster: Cluster,
    pub devices: Vec<DeviceRecord>,
    pub total_energy_j: Joules,
    pub average_power_w: Watts,
    /// What the total covers (GPU boards, CPU packages, DRAM, …, each with how it was read) and
    /// the model scope it compares with: no counter covers a whole server. Absent when no
    /// device is in the total, and in records of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covers: Option<crate::coverage::Coverage>,
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
    /// The machine's CPU and RAM utilisation over the run (CodeCarbon's utilisation columns);
    /// absent in records of older versions and of ranks that measure nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization: Option<crate::utilization::Utilization>,
    /// The Python interpreter's version when the Python tracker measured the run (CodeCarbon's
    /// `python_version`); absent for `amdahl run`, where no interpreter runs the measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_version: Option<String>,
    pub warnings: Vec<String>,
    /// The whole run projected from the units of work done so far (steps or epochs the job
    /// reports: `--progress-file`, the Python tracker's `step()`); absent without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection: Option<amdahl_model::projection::Projection>,
}

/// Everything about a run that is fixed before it starts.
#[derive(Debug, Clone)]
pub struct RunContext {
    pub run_id: String,
    pub project: Option<String>,
    pub command: Vec<String>,
    pub started_unix_s: f64,
    pub scope: MeasurementScope,
    pub interval: Seconds,
    pub host: Host,
    pub cluster: Cluster,
    pub pue: f64,
    pub intensity: Intensity,
    /// Idle power and how long it was measured.
    pub baseline: Option<(Seconds, Watts)>,
    /// The Python tracker's interpreter version.
    pub python_version: Option<String>,
}

/// What is known at the time of building (mid-run or at the end).
#[derive(Debug, Clone, Default)]
pub struct RunState {
    pub duration: Seconds,
    pub exit_code: Option<i32>,
    pub child_signal: Option<i32>,
    pub partial: bool,
    pub interrupted_by: Option<String>,
    /// The command could not be started, and why.
    pub not_started: Option<String>,
    pub cpu_time: Option<Seconds>,
    pub max_rss: Option<Bytes>,
    /// CPU-time share for process scope (None in machine scope).
    pub share: Option<f64>,
    /// The machine's utilisation so far.
    pub utilization: Option<crate::utilization::Utilization>,
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
pub fn build(ctx: &RunContext, devices: &[DeviceEnergy], p: RunState) -> RunRecord {
    // A command that never started used nothing: its record holds no devices.
    let measured = ctx.cluster.role == Role::Measured && p.not_started.is_none();
    let mut warnings = p.warnings;
    let rejected: u64 = devices.iter().map(|d| d.rejected_steps).sum();
    if measured && rejected > 0 {
        warnings.push(format!(
            "{rejected} physically impossible energy-counter step(s) rejected; see the device notes"
        ));
    }
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
                    rejected_steps: d.rejected_steps,
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
        project: ctx.project.clone(),
        command: ctx.command.clone(),
        started_at: utc_iso(ctx.started_unix_s),
        started_unix_s: ctx.started_unix_s,
        duration_s: p.duration,
        exit_code: p.exit_code,
        child_signal: p.child_signal.map(crate::runner::signal_name),
        partial: p.partial,
        interrupted_by: p.interrupted_by,
        not_started: p.not_started,
        scope: ctx.scope,
        interval_s: ctx.interval,
        host: ctx.host.clone(),
        cluster: ctx.cluster.clone(),
        covers: crate::coverage::Coverage::of(&rows),
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
        utilization: p.utilization.filter(|_| measured),
        python_version: ctx.python_version.clone(),
        warnings,
        projection: None,
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` (RFC 3339, UTC, whole seconds) for a Unix time, through `jiff` rather
/// than hand-written calendar arithmetic. Times outside jiff's range (years ±9999) are clamped.
pub fn utc_iso(unix_s: f64) -> String {
    let secs = if unix_s.is_finite() {
        unix_s.floor().clamp(i64::MIN as f64, i64::MAX as f64) as i64
    } else {
        0
    };
    let t = jiff::Timestamp::from_second(secs).unwrap_or(if secs < 0 {
        jiff::Timestamp::MIN
    } else {
        jiff::Timestamp::MAX
    });
    // Whole seconds: Display prints no fraction for them, and always ends in `Z`.
    jiff::Timestamp::from_second(t.as_second())
        .unwrap_or(t)
        .to_string()
}

/// A random (version 4) UUID. The former hash of clock, pid and hostname collided across
/// identical containers started together (same pid 1 child, same hostname, same second).
pub fn new_run_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Seconds since the Unix epoch now (0 if the clock is before it).
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Host {
    /// The machine this process runs on, from /proc and /etc.
    pub fn this_machine() -> Host {
        Host {
            hostname: procfs::hostname(),
            os: procfs::os_string(),
            cpu_model: procfs::cpu_model().unwrap_or_default(),
            cpu_count: procfs::cpu_count(),
            ram_total_gb: procfs::mem_total_bytes()
                .map(|b| b as f64 / 1e9)
                .unwrap_or(0.0),
            boot_id: procfs::boot_id(),
        }
    }
}

/// Read and check one saved record.
pub fn read_record(path: &Path) -> Result<RunRecord, MeterError> {
    let text = std::fs::read_to_string(path).map_err(|e| MeterError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    parse_record(&text, path)
}

/// Parse and check a record's text (`path` names it in errors). Beyond the JSON shape, every
/// figure must be one a run can produce: finite, energies, durations and emissions ≥ 0, so a
/// hand-edited or corrupt file cannot subtract from a job total.
pub fn parse_record(text: &str, path: &Path) -> Result<RunRecord, MeterError> {
    let bad = |message: String| MeterError::BadRecord {
        path: path.to_path_buf(),
        message,
    };
    let r: RunRecord = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    if r.schema != RUN_SCHEMA {
        return Err(bad(format!(
            "schema is `{}`, expected `{RUN_SCHEMA}`",
            r.schema
        )));
    }
    let mut checks: Vec<(String, f64)> = vec![
        ("duration_s".into(), r.duration_s.get()),
        ("total_energy_j".into(), r.total_energy_j.get()),
        ("energy_kwh".into(), r.energy_kwh),
        ("co2e_g".into(), r.co2e_g.get()),
        ("intensity.g_per_kwh".into(), r.intensity.g_per_kwh.get()),
        ("pue".into(), r.pue),
        ("interval_s".into(), r.interval_s.get()),
    ];
    for (i, d) in r.devices.iter().enumerate() {
        checks.push((format!("devices[{i}].energy_j"), d.energy_j.get()));
        if let Some(m) = d.machine_energy_j {
            checks.push((format!("devices[{i}].machine_energy_j"), m.get()));
        }
    }
    if let Some(c) = r.cpu_time_s {
        checks.push(("cpu_time_s".into(), c.get()));
    }
    for (field, v) in checks {
        if !(v.is_finite() && v >= 0.0) {
            return Err(bad(format!(
                "`{field}` is {v}; it must be a finite number ≥ 0 (was the file edited by hand?)"
            )));
        }
    }
    if !r.started_unix_s.is_finite() {
        return Err(bad("`started_unix_s` is not a finite number".into()));
    }
    // A PUE is total facility energy over IT energy: at least 1 (The Green Grid, WP #49). A
    // `pue: 0` record had merged as zero kWh and zero emissions.
    if r.pue < 1.0 {
        return Err(bad(format!(
            "`pue` is {}; a PUE is at least 1 (facility energy over IT energy)",
            r.pue
        )));
    }
    // merge sums `energy_kwh` and `co2e_g` as given: they must follow from the total.
    let kwh = r.total_energy_j.kwh() * r.pue;
    if (r.energy_kwh - kwh).abs() > 1e-9 * kwh.max(1e-12) {
        return Err(bad(format!(
            "`energy_kwh` is {} but `total_energy_j` × `pue` is {kwh} kWh (was the file edited by \
             hand?)",
            r.energy_kwh
        )));
    }
    // merge counts device rows, carbon --from the total: they must agree.
    let sum: f64 = r
        .devices
        .iter()
        .filter(|d| d.in_total)
        .map(|d| d.energy_j.get())
        .sum();
    let total = r.total_energy_j.get();
    if (sum - total).abs() > 1e-9 * total.max(1.0) {
        return Err(bad(format!(
            "`total_energy_j` is {total} but its in-total devices sum to {sum} (was the file edited by hand?)"
        )));
    }
    Ok(r)
}

/// One node of a merged job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MergedNode {
    pub hostname: String,
    /// The machine's boot id, when its records carry one (tells apart nodes sharing a name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// The first job id its records name (a record without one still belongs to the node).
    pub job_id: Option<String>,
    /// Ranks seen on this node (measured and reference).
    pub ranks: Vec<u32>,
    /// Files whose energy was counted.
    pub counted: Vec<PathBuf>,
    pub energy_j: Joules,
    pub energy_kwh: f64,
    pub co2e_g: GramsCo2e,
    /// How the energy counted was read: the methods of the devices in its records' totals.
    pub methods: Vec<Method>,
    pub partial: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// Whether two records were measured on one machine, i.e. read the same counters. The kernel's
/// boot id decides when both carry one. Otherwise the hostname does, except that under one
/// launcher job each node has exactly one local rank 0, so two local-rank-0 records with
/// different global ranks are two nodes even when their containers share a hostname.
pub fn same_machine(a: &RunRecord, b: &RunRecord) -> bool {
    if let (Some(x), Some(y)) = (&a.host.boot_id, &b.host.boot_id) {
        return x == y;
    }
    if a.host.hostname != b.host.hostname {
        return false;
    }
    let (ca, cb) = (&a.cluster, &b.cluster);
    let two_nodes = ca.job_id.is_some()
        && ca.job_id == cb.job_id
        && ca.local_rank == Some(0)
        && cb.local_rank == Some(0)
        && ca.rank.is_some()
        && cb.rank.is_some()
        && ca.rank != cb.rank;
    !two_nodes
}

/// Whether a device row holds the whole device's reading rather than a CPU-time share of it
/// (process scope charges machine counters by share; estimates in process scope come from the
/// command's own CPU time). Two whole readings of one device over overlapping windows hold
/// the same joules; shares of different commands add up.
fn whole_device(r: &RunRecord, d: &DeviceRecord) -> bool {
    // Only the CPU and RAM estimates are the command's own share; an estimated GPU (unreadable
    // sensor, `hwmon::unreadable`) is the whole GPU at its TDP, like its measurement would be.
    let share_estimate =
        d.method == Method::Estimate && matches!(d.kind, DeviceKind::Cpu | DeviceKind::Ram);
    d.machine_energy_j.is_none() && (r.scope == MeasurementScope::Machine || !share_estimate)
}

/// How complete a record is, to keep the best copy of a run given twice: finished before
/// partial, then the longer one.
fn completeness(r: &RunRecord) -> (bool, f64) {
    (r.exit_code.is_some() && !r.partial, r.duration_s.get())
}

/// Sum per-node results into a job total, counting every joule once. The rule, in order:
///
/// 1. **Run id.** Records with one `run_id` are copies of one run (a file given twice, or the
///    partial and the final file): the most complete copy counts, the others not at all.
/// 2. **Machine.** Records are grouped by machine ([`same_machine`]); `job_id` does not split
///    a machine (a record without one and one with job "42" from one host are one node).
/// 3. **Reference ranks** (not local rank 0) hold no energy; they only add their rank.
/// 4. **Counter identity and time overlap.** Machine-scope records are taken first, then by
///    start time. A device row is left out when an already counted record of the same machine
///    whose time window overlaps has a whole-device row of the same device id: both read that
///    counter. Everything else adds: rows of other devices (two ranks metering different GPUs),
///    CPU-time shares of different commands in process scope, runs that do not overlap.
///
/// A record that overlaps only partly loses its shared devices' energy outside the overlap
/// too (a record holds no per-sample breakdown); the warning says so.
pub fn merge(records: Vec<(PathBuf, RunRecord)>) -> MergeResult {
    let files = records.len();
    let mut warnings = Vec::new();
    let mut sorted = one_copy_per_run(records, &mut warnings);
    sort_machine_scope_first(&mut sorted);
    let mut nodes: Vec<(MergedNode, Vec<RunRecord>)> = Vec::new();
    let mut job = JobTotals::new();
    for (path, r) in sorted {
        job.note_run(&r);
        if let Some(why) = &r.not_started {
            warnings.push(format!(
                "{}: the command never started ({why}); no energy",
                path.display()
            ));
        }
        // 2. The machine's node (the first record seen of it holds the group).
        let Some((node, kept)) = node_of_machine(&mut nodes, &r) else {
            continue;
        };
        if node.job_id.is_none() {
            node.job_id.clone_from(&r.cluster.job_id);
        }
        node.ranks.extend(r.cluster.rank);
        // 3. Reference ranks: grouped (their rank is listed), never counted.
        if r.cluster.role == Role::Reference {
            kept.push(r);
            continue;
        }
        let (energy, rec_kwh, rec_co2) = count_record(node, kept, path, r, &mut warnings);
        job.total += energy;
        job.kwh += rec_kwh;
        job.co2 += rec_co2;
    }
    let nodes = finish_nodes(nodes, &mut warnings);
    MergeResult {
        schema: MERGE_SCHEMA.into(),
        files,
        nodes,
        total_energy_j: job.total,
        energy_kwh: job.kwh,
        co2e_g: job.co2,
        duration_s: job.dur,
        exit_code: job.exit_code,
        partial: job.partial,
        warnings,
    }
}

/// The job's running totals over the records [`merge`] keeps.
struct JobTotals {
    total: Joules,
    kwh: f64,
    co2: GramsCo2e,
    /// Longest record so far.
    dur: Seconds,
    /// First non-zero exit code so far, else 0.
    exit_code: i32,
    partial: bool,
}

impl JobTotals {
    fn new() -> Self {
        JobTotals {
            total: Joules::ZERO,
            kwh: 0.0,
            co2: GramsCo2e::ZERO,
            dur: Seconds::ZERO,
            exit_code: 0,
            partial: false,
        }
    }

    /// Duration, exit code and completeness count for every kept record, reference ranks and
    /// commands that never started included.
    fn note_run(&mut self, r: &RunRecord) {
        if self.dur < r.duration_s {
            self.dur = r.duration_s;
        }
        if self.exit_code == 0 {
            self.exit_code = r.exit_code.unwrap_or(0);
        }
        self.partial |= r.partial || r.exit_code.is_none();
    }
}

/// Step 1 of [`merge`]: one copy per run id, the most complete one (in the order first seen),
/// with a warning for each copy left out.
fn one_copy_per_run(
    records: Vec<(PathBuf, RunRecord)>,
    warnings: &mut Vec<String>,
) -> Vec<(PathBuf, RunRecord)> {
    let mut unique: Vec<(PathBuf, RunRecord)> = Vec::new();
    for (path, r) in records {
        match unique.iter_mut().find(|(_, u)| u.run_id == r.run_id) {
            Some(slot) => {
                let (keep, drop) = if completeness(&r) > completeness(&slot.1) {
                    let old = std::mem::replace(slot, (path, r));
                    (slot.0.clone(), old.0)
                } else {
                    (slot.0.clone(), path)
                };
                warnings.push(format!(
                    "{}: the same run (run_id {}) as {}; counted once",
                    drop.display(),
                    slot.1.run_id,
                    keep.display()
                ));
            }
            None => unique.push((path, r)),
        }
    }
    unique
}

/// Machine-scope records first, then by start time: a whole-machine reading is counted before
/// the process-scope records it would otherwise be counted again with (step 4 of [`merge`]).
///
/// Within a scope the longer record comes first: of two overlapping readings of one counter the
/// one that covers more is kept (by start time, a 19.8 J record kept and a 1,980 J one that
/// contained it dropped). Then by start time, for a stable order.
fn sort_machine_scope_first(records: &mut [(PathBuf, RunRecord)]) {
    records.sort_by(|a, b| {
        (a.1.scope != MeasurementScope::Machine)
            .cmp(&(b.1.scope != MeasurementScope::Machine))
            .then(b.1.duration_s.get().total_cmp(&a.1.duration_s.get()))
            .then(
                b.1.total_energy_j
                    .get()
                    .total_cmp(&a.1.total_energy_j.get()),
            )
            .then(a.1.started_unix_s.total_cmp(&b.1.started_unix_s))
    });
}

/// The node of `r`'s machine with the records kept of it, a new empty one when none yet.
fn node_of_machine<'a>(
    nodes: &'a mut Vec<(MergedNode, Vec<RunRecord>)>,
    r: &RunRecord,
) -> Option<&'a mut (MergedNode, Vec<RunRecord>)> {
    let pos = nodes
        .iter()
        .position(|(_, kept)| kept.first().is_some_and(|k| same_machine(k, r)));
    let i = pos.unwrap_or_else(|| {
        nodes.push((
            MergedNode {
                hostname: r.host.hostname.clone(),
                boot_id: r.host.boot_id.clone(),
                job_id: None,
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
    nodes.get_mut(i)
}

/// Step 4 of [`merge`] for one measured record: adds what it holds that no overlapping kept
/// record of its machine already read to `node`, keeps it, and returns the joules, kWh and
/// emissions it added.
fn count_record(
    node: &mut MergedNode,
    kept: &mut Vec<RunRecord>,
    path: PathBuf,
    r: RunRecord,
    warnings: &mut Vec<String>,
) -> (Joules, f64, GramsCo2e) {
    let (energy, shared, partly) = unshared_energy(kept, &r);
    if !shared.is_empty() {
        warnings.push(format!(
            "{}: overlaps in time a record of the same machine ({}) that read {}; not counted again{}",
            path.display(),
            r.host.hostname,
            shared.join(", "),
            if partly {
                " (it runs past that record, so its energy outside the overlap on these devices is missing)"
            } else {
                ""
            }
        ));
    }
    // kWh and emissions follow the counted share of the record's own total.
    let share = if r.total_energy_j.get() > 0.0 {
        (energy.get() / r.total_energy_j.get()).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let (rec_kwh, rec_co2) = (r.energy_kwh * share, r.co2e_g * share);
    node.energy_j += energy;
    node.energy_kwh += rec_kwh;
    node.co2e_g += rec_co2;
    node.partial |= r.partial;
    // The methods of the energy counted: a device left out of its record's total (a package
    // inside psys) made a merge of estimated devices "partly estimated … others measured".
    for d in r.devices.iter().filter(|d| d.in_total) {
        if !node.methods.contains(&d.method) {
            node.methods.push(d.method);
        }
    }
    node.counted.push(path);
    kept.push(r);
    (energy, rec_kwh, rec_co2)
}

/// The energy of `r`'s devices in its total that no overlapping measured record in `kept`
/// read whole; the ids of the devices left out; and whether `r` runs past a record it shares
/// a device with (its energy outside the overlap on that device is then lost too).
fn unshared_energy<'r>(kept: &[RunRecord], r: &'r RunRecord) -> (Joules, Vec<&'r str>, bool) {
    let mut energy = Joules::ZERO;
    let mut shared: Vec<&str> = Vec::new();
    let mut partly = false;
    for d in r.devices.iter() {
        let clash = kept.iter().find(|k| {
            k.cluster.role == Role::Measured
                && overlaps(k, r)
                && k.devices.iter().any(|e| e.id == d.id && whole_device(k, e))
        });
        match clash {
            Some(k) => {
                shared.push(&d.id);
                let inside = k.started_unix_s <= r.started_unix_s
                    && r.started_unix_s + r.duration_s.get()
                        <= k.started_unix_s + k.duration_s.get();
                partly |= !inside;
            }
            None if d.in_total => energy += d.energy_j,
            None => {}
        }
    }
    (energy, shared, partly)
}

/// The merged nodes sorted by hostname, their ranks sorted once each, with a warning for each
/// node of which only reference records were given.
fn finish_nodes(
    nodes: Vec<(MergedNode, Vec<RunRecord>)>,
    warnings: &mut Vec<String>,
) -> Vec<MergedNode> {
    let mut nodes: Vec<MergedNode> = nodes.into_iter().map(|(n, _)| n).collect();
    for n in &mut nodes {
        n.ranks.sort_unstable();
        n.ranks.dedup();
        if n.counted.is_empty() {
            warnings.push(format!(
                "host {}: only reference records (no local rank 0 file given); its energy is missing",
                n.hostname
            ));
        }
    }
    nodes.sort_by(|a, b| a.hostname.cmp(&b.hostname));
    nodes
}

#[cfg(test)]
pub(crate) mod tests {
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
            project: None,
            command: vec!["true".into()],
            started_unix_s: 1000.0,
            scope: MeasurementScope::Machine,
            interval: Seconds(1.0),
            host: Host {
                hostname: host.into(),
                os: "Linux".into(),
                cpu_model: "x".into(),
                cpu_count: 8,
                ram_total_gb: 16.0,
                boot_id: None,
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
                location: None,
            },
            baseline: None,
            python_version: None,
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
            rejected_steps: 0,
        }
    }

    fn done(d: f64) -> RunState {
        RunState {
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

    /// A record with its own run id (build() copies the context's fixed one).
    fn rec(host: &str, role: Role, rank: u32, devs: &[DeviceEnergy]) -> RunRecord {
        let mut r = build(&ctx(host, role, rank), devs, done(10.0));
        r.run_id = new_run_id();
        r
    }

    fn named(rs: Vec<RunRecord>) -> Vec<(PathBuf, RunRecord)> {
        rs.into_iter()
            .enumerate()
            .map(|(i, r)| (PathBuf::from(format!("f{i}")), r))
            .collect()
    }

    #[test]
    fn merge_never_double_counts_a_node() {
        let devs = [dev(DeviceKind::CpuPackage, 100.0)];
        let a0 = rec("a", Role::Measured, 0, &devs);
        let a1 = rec("a", Role::Reference, 1, &devs);
        let mut b0 = rec("b", Role::Measured, 2, &devs);
        b0.host.boot_id = Some("boot-b".into());
        // A second machine-scope record of machine b in the same window.
        let mut b0dup = rec("b", Role::Measured, 3, &devs);
        b0dup.host.boot_id = Some("boot-b".into());
        let m = merge(named(vec![a0, a1, b0.clone(), b0dup]));
        assert_eq!(m.total_energy_j, Joules(200.0));
        assert_eq!(m.nodes.len(), 2);
        assert_eq!(m.nodes[0].ranks, [0, 1]);
        assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
        // Sequential runs on one host add up.
        let mut later = b0.clone();
        later.run_id = new_run_id();
        later.started_unix_s += 100.0;
        let m = merge(named(vec![b0, later]));
        assert_eq!(m.total_energy_j, Joules(200.0));
    }

    /// Regression: of two overlapping machine-scope records of one machine, the one that
    /// started first (19.8 J over 1 s) was kept and the one that covered the run (1,980 J over
    /// 100 s) dropped. The longer reading of the shared counter is the one counted.
    #[test]
    fn merge_keeps_the_longer_of_two_overlapping_readings_of_one_counter() {
        let short = {
            let mut r = rec("a", Role::Measured, 0, &[dev(DeviceKind::CpuPackage, 19.8)]);
            r.duration_s = Seconds(1.0);
            r
        };
        let long = {
            let mut r = rec(
                "a",
                Role::Measured,
                0,
                &[dev(DeviceKind::CpuPackage, 1980.0)],
            );
            r.duration_s = Seconds(100.0);
            r.started_unix_s = short.started_unix_s + 0.5;
            r
        };
        for order in [vec![short.clone(), long.clone()], vec![long, short]] {
            let m = merge(named(order));
            assert_eq!(m.total_energy_j, Joules(1980.0));
            assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
        }
    }

    #[test]
    fn a_record_with_pue_0_or_a_kwh_that_does_not_follow_is_refused() {
        let r = rec(
            "a",
            Role::Measured,
            0,
            &[dev(DeviceKind::CpuPackage, 360.0)],
        );
        let text = |r: &RunRecord| serde_json::to_string(r).unwrap();
        assert!(parse_record(&text(&r), Path::new("r.json")).is_ok());
        let mut zero = r.clone();
        zero.pue = 0.0;
        let e = parse_record(&text(&zero), Path::new("r.json")).unwrap_err();
        assert!(e.to_string().contains("a PUE is at least 1"), "{e}");
        let mut off = r;
        off.energy_kwh *= 100.0;
        let e = parse_record(&text(&off), Path::new("r.json")).unwrap_err();
        assert!(e.to_string().contains("`energy_kwh`"), "{e}");
    }

    #[test]
    fn merge_counts_one_record_given_three_times_once() {
        let mut ctx = ctx("a", Role::Measured, 0);
        ctx.scope = MeasurementScope::Process;
        let mut est = dev(DeviceKind::Cpu, 22.0);
        est.method = Method::Estimate;
        let r = build(&ctx, &[est], done(10.0));
        let m = merge(named(vec![r.clone(), r.clone(), r]));
        assert_eq!(m.total_energy_j, Joules(22.0));
        assert_eq!(m.warnings.len(), 2, "{:?}", m.warnings);
    }

    #[test]
    fn merge_keeps_the_final_copy_of_a_run_over_its_partial_one() {
        let devs = [dev(DeviceKind::CpuPackage, 100.0)];
        let fin = rec("a", Role::Measured, 0, &devs);
        let mut part = fin.clone();
        part.partial = true;
        part.exit_code = None;
        part.total_energy_j = Joules(40.0);
        let m = merge(named(vec![part, fin]));
        assert_eq!((m.total_energy_j, m.partial), (Joules(100.0), false));
    }

    #[test]
    fn merge_adds_overlapping_process_scope_estimates_of_one_host() {
        // Two commands' own CPU-time estimates share no counter: 22 J + 202 J.
        let mut c = ctx("a", Role::Measured, 0);
        c.scope = MeasurementScope::Process;
        let est = |j| DeviceEnergy {
            method: Method::Estimate,
            ..dev(DeviceKind::Cpu, j)
        };
        let mut x = build(&c, &[est(22.0)], done(10.0));
        x.run_id = new_run_id();
        let mut y = build(&c, &[est(202.0)], done(10.0));
        y.run_id = new_run_id();
        let m = merge(named(vec![x, y]));
        assert_eq!(m.total_energy_j, Joules(224.0));
        assert!(m.warnings.is_empty(), "{:?}", m.warnings);
    }

    #[test]
    fn merge_counts_machine_scope_estimates_of_one_machine_once() {
        // Machine-scope estimates both read the machine's /proc/stat: one counter.
        let est = |j| DeviceEnergy {
            method: Method::Estimate,
            ..dev(DeviceKind::Cpu, j)
        };
        let x = rec("a", Role::Measured, 0, &[est(22.0)]);
        let mut y = rec("a", Role::Measured, 0, &[est(202.0)]);
        y.cluster.job_id = None;
        let m = merge(named(vec![x, y]));
        // Once, and the larger reading of the two windows (equal here): never the smaller.
        assert_eq!(m.total_energy_j, Joules(202.0));
    }

    #[test]
    fn merge_keeps_two_nodes_that_share_a_hostname() {
        let devs = [dev(DeviceKind::CpuPackage, 100.0)];
        // By boot id.
        let mut x = rec("node", Role::Measured, 0, &devs);
        x.host.boot_id = Some("boot-1".into());
        let mut y = rec("node", Role::Measured, 0, &devs);
        y.host.boot_id = Some("boot-2".into());
        let m = merge(named(vec![x, y]));
        assert_eq!((m.total_energy_j, m.nodes.len()), (Joules(200.0), 2));
        // Without boot ids (older records): two local rank 0s of one job, ranks 0 and 4.
        let x = rec("node", Role::Measured, 0, &devs);
        let y = rec("node", Role::Measured, 4, &devs);
        let m = merge(named(vec![x, y]));
        assert_eq!((m.total_energy_j, m.nodes.len()), (Joules(200.0), 2));
    }

    #[test]
    fn merge_job_id_null_and_42_from_one_host_count_once() {
        let devs = [dev(DeviceKind::CpuPackage, 100.0)];
        let x = rec("a", Role::Measured, 0, &devs);
        let mut y = rec("a", Role::Measured, 0, &devs);
        y.cluster = Cluster {
            launcher: None,
            job_id: None,
            rank: None,
            local_rank: None,
            role: Role::Measured,
        };
        let m = merge(named(vec![y, x]));
        assert_eq!((m.total_energy_j, m.nodes.len()), (Joules(100.0), 1));
        assert_eq!(m.nodes[0].job_id.as_deref(), Some("42"));
    }

    #[test]
    fn merge_adds_different_gpus_of_one_machine() {
        // Two ranks metering their own GPU (CUDA_VISIBLE_DEVICES) on one machine, overlapping.
        let g = |id: &str, j| DeviceEnergy {
            id: id.into(),
            ..dev(DeviceKind::Gpu, j)
        };
        let mut x = rec("a", Role::Measured, 0, &[g("gpu:0", 300.0)]);
        x.host.boot_id = Some("b".into());
        let mut y = rec("a", Role::Measured, 0, &[g("gpu:1", 500.0)]);
        y.host.boot_id = Some("b".into());
        let m = merge(named(vec![x, y]));
        assert_eq!(m.total_energy_j, Joules(800.0));
    }

    #[test]
    fn merge_process_share_inside_machine_record_is_not_added() {
        let devs = [dev(DeviceKind::CpuPackage, 100.0)];
        let machine = rec("a", Role::Measured, 0, &devs);
        let mut c = ctx("a", Role::Measured, 0);
        c.scope = MeasurementScope::Process;
        let mut p = RunState {
            share: Some(0.25),
            ..done(10.0)
        };
        p.exit_code = Some(0);
        let mut proc_rec = build(&c, &devs, p);
        proc_rec.run_id = new_run_id();
        let m = merge(named(vec![proc_rec, machine]));
        assert_eq!(m.total_energy_j, Joules(100.0));
    }

    #[test]
    fn record_with_negative_energy_is_rejected() {
        let mut r = rec(
            "a",
            Role::Measured,
            0,
            &[dev(DeviceKind::CpuPackage, 100.0)],
        );
        r.total_energy_j = Joules(-5.0);
        let text = serde_json::to_string(&r).unwrap();
        let e = parse_record(&text, Path::new("neg.json")).unwrap_err();
        assert!(e.to_string().contains("`total_energy_j` is -5"), "{e}");
        let mut r = rec(
            "a",
            Role::Measured,
            0,
            &[dev(DeviceKind::CpuPackage, 100.0)],
        );
        r.devices[0].energy_j = Joules(-1.0);
        let text = serde_json::to_string(&r).unwrap();
        assert!(parse_record(&text, Path::new("neg.json")).is_err());
    }

    #[test]
    fn rejected_rapl_steps_are_counted_in_the_record() {
        let mut d = dev(DeviceKind::CpuPackage, 100.0);
        d.rejected_steps = 2;
        let r = build(&ctx("a", Role::Measured, 0), &[d], done(10.0));
        assert_eq!(r.devices[0].rejected_steps, 2);
        assert!(r
            .warnings
            .iter()
            .any(|w| w.contains("2 physically impossible")));
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains("\"rejected_steps\":2"));
    }

    #[test]
    fn run_ids_are_random_v4_uuids() {
        let (a, b) = (new_run_id(), new_run_id());
        assert_ne!(a, b);
        let u = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(u.get_version_num(), 4);
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

//! Attribution of node energy to processes, cgroups, Slurm jobs and users (`amdahl exporter`).
//!
//! Each sampling interval, every device's energy increase ΔE (from the [`crate::Meter`]) is split
//! among the processes alive in it, by a weight that tracks what the device spends energy on:
//!
//! * CPU package, psys and estimated CPU: the process's CPU ticks in the interval over the
//!   machine's busy ticks (`/proc/stat`), i.e. [`crate::estimate::cpu_share`] per interval;
//! * DRAM and estimated RAM: its resident memory over `MemTotal`;
//! * GPU: the process's SM utilisation over the sum of all processes' on that GPU, else an equal
//!   share of the processes holding the GPU, else nothing ([`gpu`]).
//!
//! A process's share goes to its cgroup, its user, its Slurm job (if any) and to itself. What no
//! process gets (idle power, kernel threads, rounding) is the `unattributed` remainder, computed
//! as node − Σ cgroups, so for every device Σ cgroup + unattributed = node exactly, and likewise
//! Σ user + unattributed (every process has exactly one cgroup and one user, `unknown` when its
//! `/proc` entries cannot be read). Jobs cover only processes of Slurm jobs.
//!
//! State stays bounded: a member (cgroup, user, job, process) with no live process for
//! [`Options::retain_s`] leaves, its energy moved to its scope's `(ended)` series ([`ENDED`]),
//! so the sums above still hold and no counter decreases. Formulas and limits:
//! docs/methodology.md, "Energy attribution (exporter)".

pub mod gpu;
pub mod procs;

use crate::meter::DeviceEnergy;
use crate::source::{DeviceKind, Method};
use gpu::{gpu_weights, GpuRule, GpuUsage, GpuUsageSource};
use procs::{ProcView, ProcessInfo};
use std::collections::{BTreeMap, HashMap};

/// Which partition of the node a series belongs to (the `scope` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Partition {
    Node,
    Cgroup,
    Job,
    User,
    Process,
    Unattributed,
}

impl Partition {
    pub fn as_str(self) -> &'static str {
        match self {
            Partition::Node => "node",
            Partition::Cgroup => "cgroup",
            Partition::Job => "job",
            Partition::User => "user",
            Partition::Process => "process",
            Partition::Unattributed => "unattributed",
        }
    }
}

/// The label `unknown` for a cgroup or user that could not be read.
pub const UNKNOWN: &str = "unknown";

/// One series: cumulative energy of one scope member on one device.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub scope: Partition,
    /// Partition-specific labels, e.g. `[("cgroup", "/system.slice/x")]`, `[("pid","7"),("comm","sh")]`.
    pub labels: Vec<(String, String)>,
    pub device: String,
    pub kind: DeviceKind,
    pub method: Method,
    pub energy_j: f64,
    /// Average power over the latest interval.
    pub power_w: Option<f64>,
}

/// Everything the exporter serves at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub series: Vec<Series>,
    /// Samples taken so far.
    pub samples: u64,
    /// Processes seen in the latest sample, and how many of them had unreadable entries.
    pub processes: u64,
    pub unknown_processes: u64,
    /// Devices whose reading is incomplete (vanished file, rejected steps), with why.
    pub device_notes: Vec<(String, String)>,
    /// The rule that split each GPU's energy in the latest interval.
    pub gpu_rules: Vec<(String, GpuRule)>,
}

/// Choices of the operator.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Export per-process series (pid, comm); off keeps cardinality to cgroups/jobs/users.
    pub processes: bool,
    /// Add the command line to process series (opt-in: arguments can hold secrets).
    pub cmdline: bool,
    /// Seconds a cgroup, job, user or process keeps its own series after its last process was
    /// seen; then its energy moves to its scope's `(ended)` series (`--retain`).
    pub retain_s: f64,
}

/// The default of `--retain`: 5 minutes, Prometheus's staleness window (`lookback-delta`), so a
/// server scraping every minute or faster reads every member's final value several times.
pub const DEFAULT_RETAIN_S: f64 = 300.0;

impl Default for Options {
    fn default() -> Self {
        Options {
            processes: false,
            cmdline: false,
            retain_s: DEFAULT_RETAIN_S,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Weight {
    Cpu,
    Memory,
    Gpu,
}

fn weight_of(kind: DeviceKind) -> Weight {
    match kind {
        DeviceKind::CpuPackage | DeviceKind::Psys | DeviceKind::Cpu => Weight::Cpu,
        DeviceKind::Dram | DeviceKind::Ram => Weight::Memory,
        DeviceKind::Gpu => Weight::Gpu,
    }
}

/// One member of a scope: a cgroup, user, job or process, with its labels.
type Member = (Partition, Vec<(String, String)>);

/// The label value of the per-scope series that keeps the energy of members that ended.
pub const ENDED: &str = "(ended)";

fn ended_member(scope: Partition) -> Member {
    let l = |k: &str| (k.to_string(), ENDED.to_string());
    let labels = match scope {
        Partition::Cgroup => vec![l("cgroup")],
        Partition::User => vec![l("user")],
        Partition::Job => vec![l("job")],
        Partition::Process => vec![l("pid"), l("comm")],
        Partition::Node | Partition::Unattributed => Vec::new(),
    };
    (scope, labels)
}

/// A member's energy per device id: since the start, and in the latest interval.
#[derive(Debug, Default)]
struct Account {
    energy: BTreeMap<String, f64>,
    delta: BTreeMap<String, f64>,
    /// Time of the latest step in which a live process belonged to it (+∞: never retires).
    last_live: f64,
}

impl Account {
    fn add(&mut self, device: &str, e: f64) {
        match self.energy.get_mut(device) {
            Some(x) => *x += e,
            None => {
                self.energy.insert(device.to_string(), e);
            }
        }
        match self.delta.get_mut(device) {
            Some(x) => *x += e,
            None => {
                self.delta.insert(device.to_string(), e);
            }
        }
    }
}

/// What one interval's split needs about the processes alive in it, each list in the order of
/// the processes read ([`Attributor::step`]).
struct IntervalWeights<'a> {
    /// CPU ticks in the interval, and the machine's busy ticks (never below their sum).
    cpu: &'a [u64],
    cpu_den: f64,
    /// Resident bytes, and `MemTotal` (never below their sum).
    mem: &'a [u64],
    mem_den: f64,
    members: &'a [Vec<Member>],
    /// pid → position in the lists above.
    index: &'a HashMap<u32, usize>,
    gpu_usage: &'a HashMap<String, GpuUsage>,
}

/// Running attribution state; feed it every sample with [`Attributor::step`].
pub struct Attributor {
    view: Box<dyn ProcView>,
    gpu: Option<Box<dyn GpuUsageSource>>,
    opts: Options,
    /// pid → (start ticks, CPU ticks) at the previous sample.
    prev_ticks: HashMap<u32, (u64, u64)>,
    prev_busy: Option<u64>,
    prev_energy: HashMap<String, f64>,
    prev_t: Option<f64>,
    accounts: BTreeMap<Member, Account>,
    node_delta: HashMap<String, f64>,
    last_dt: Option<f64>,
    devices: Vec<DeviceEnergy>,
    gpu_rules: Vec<(String, GpuRule)>,
    users: HashMap<u32, String>,
    samples: u64,
    processes: u64,
    unknown_processes: u64,
}

fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| uid.to_string())
}

impl Attributor {
    pub fn new(view: Box<dyn ProcView>, opts: Options) -> Self {
        Attributor {
            view,
            gpu: None,
            opts,
            prev_ticks: HashMap::new(),
            prev_busy: None,
            prev_energy: HashMap::new(),
            prev_t: None,
            accounts: BTreeMap::new(),
            node_delta: HashMap::new(),
            last_dt: None,
            devices: Vec::new(),
            gpu_rules: Vec::new(),
            users: HashMap::new(),
            samples: 0,
            processes: 0,
            unknown_processes: 0,
        }
    }

    /// Split GPU energy by what `source` says about each GPU's processes (without one, GPU
    /// energy is all unattributed).
    pub fn with_gpu(mut self, source: Box<dyn GpuUsageSource>) -> Self {
        self.gpu = Some(source);
        self
    }

    fn user_label(&mut self, uid: Option<u32>) -> String {
        match uid {
            Some(u) => self.users.entry(u).or_insert_with(|| user_name(u)).clone(),
            None => UNKNOWN.into(),
        }
    }

    /// The members a process belongs to: its cgroup, user, job (if any), and itself (if
    /// process series are on).
    fn members_of(&mut self, p: &ProcessInfo) -> Vec<Member> {
        let mut m = vec![
            (
                Partition::Cgroup,
                vec![(
                    "cgroup".to_string(),
                    p.cgroup.clone().unwrap_or_else(|| UNKNOWN.into()),
                )],
            ),
            (
                Partition::User,
                vec![("user".to_string(), self.user_label(p.uid))],
            ),
        ];
        if let Some(j) = &p.job {
            m.push((Partition::Job, vec![("job".to_string(), j.clone())]));
        }
        if self.opts.processes {
            let mut pl = vec![
                ("pid".to_string(), p.pid.to_string()),
                ("comm".to_string(), p.comm.clone()),
            ];
            if let Some(c) = &p.cmdline {
                pl.push(("cmdline".into(), c.clone()));
            }
            m.push((Partition::Process, pl));
        }
        m
    }

    /// The members of a GPU process that `/proc` does not show (another pid namespace, or it
    /// exited between the driver's answer and the read): cgroup and user `unknown`.
    fn unseen_members(&self, pid: u32) -> Vec<Member> {
        let mut m = vec![
            (
                Partition::Cgroup,
                vec![("cgroup".to_string(), UNKNOWN.into())],
            ),
            (Partition::User, vec![("user".to_string(), UNKNOWN.into())]),
        ];
        if self.opts.processes {
            m.push((
                Partition::Process,
                vec![
                    ("pid".to_string(), pid.to_string()),
                    ("comm".to_string(), UNKNOWN.into()),
                ],
            ));
        }
        m
    }

    fn credit(&mut self, members: &[Member], device: &str, e: f64) {
        for m in members {
            match self.accounts.get_mut(m) {
                Some(a) => a.add(device, e),
                None => {
                    let mut a = Account::default();
                    a.add(device, e);
                    self.accounts.insert(m.clone(), a);
                }
            }
        }
    }

    fn mark_live(&mut self, members: &[Member], t_s: f64) {
        for m in members {
            match self.accounts.get_mut(m) {
                Some(a) => a.last_live = a.last_live.max(t_s),
                None => {
                    self.accounts.insert(
                        m.clone(),
                        Account {
                            last_live: t_s,
                            ..Account::default()
                        },
                    );
                }
            }
        }
    }

    /// Move a member's energy into its scope's `(ended)` series and forget it.
    fn retire(&mut self, m: &Member) {
        let Some(a) = self.accounts.remove(m) else {
            return;
        };
        if a.energy.is_empty() {
            return;
        }
        let ended = self.accounts.entry(ended_member(m.0)).or_insert(Account {
            last_live: f64::INFINITY,
            ..Account::default()
        });
        for (d, e) in a.energy {
            *ended.energy.entry(d).or_insert(0.0) += e;
        }
        for (d, e) in a.delta {
            *ended.delta.entry(d).or_insert(0.0) += e;
        }
    }

    /// Take in the meter's cumulative energies at time `t_s` (seconds): read the processes now
    /// and split each device's increase since the previous step.
    pub fn step(&mut self, t_s: f64, energies: &[DeviceEnergy]) {
        self.samples += 1;
        let busy = self.view.busy_ticks();
        let procs = self.read_processes();
        let cpu = self.interval_cpu_ticks(&procs);
        self.retire_recycled_pids(&procs);
        let (mem, mem_den) = self.resident_bytes(&procs);
        let cpu_den = self.cpu_denominator(busy, &cpu);
        let members: Vec<Vec<Member>> = procs.iter().map(|p| self.members_of(p)).collect();
        self.processes = procs.len() as u64;
        self.unknown_processes = procs
            .iter()
            .filter(|p| p.uid.is_none() || p.cgroup.is_none())
            .count() as u64;
        let index: HashMap<u32, usize> =
            procs.iter().enumerate().map(|(i, p)| (p.pid, i)).collect();
        let gpu_usage = self.gpu_usage(energies);
        let weights = IntervalWeights {
            cpu: &cpu,
            cpu_den,
            mem: &mem,
            mem_den,
            members: &members,
            index: &index,
            gpu_usage: &gpu_usage,
        };

        let dt = self.prev_t.map(|t0| t_s - t0).filter(|d| *d > 0.0);
        for a in self.accounts.values_mut() {
            a.delta.clear();
        }
        self.gpu_rules.clear();
        let mut unseen: Vec<Vec<Member>> = Vec::new();
        for d in energies {
            self.split_device(d, &weights, &mut unseen);
        }
        self.retire_idle_members(members.iter().chain(&unseen), t_s);
        self.prev_ticks = procs
            .iter()
            .map(|p| (p.pid, (p.start_ticks, p.ticks)))
            .collect();
        if busy.is_some() {
            self.prev_busy = busy;
        }
        self.prev_t = Some(t_s);
        self.last_dt = dt;
        self.devices = energies.to_vec();
    }

    /// The processes `/proc` shows now (a pid gone between listing and reading is left out).
    fn read_processes(&mut self) -> Vec<ProcessInfo> {
        let pids = self.view.pids();
        pids.into_iter()
            .filter_map(|p| self.view.process(p, self.opts.cmdline))
            .collect()
    }

    /// CPU ticks of each process in this interval. A pid seen before with the same start time
    /// continues; a new one ran entirely inside the interval (after the first step).
    fn interval_cpu_ticks(&self, procs: &[ProcessInfo]) -> Vec<u64> {
        let first = self.prev_busy.is_none() && self.prev_ticks.is_empty();
        procs
            .iter()
            .map(|p| match self.prev_ticks.get(&p.pid) {
                Some(&(start, t)) if start == p.start_ticks => p.ticks.saturating_sub(t),
                _ if first => 0,
                _ => p.ticks,
            })
            .collect()
    }

    /// A recycled pid: the old process's series ends now, before the new one's energy could
    /// land in it (same pid and name give the same labels).
    fn retire_recycled_pids(&mut self, procs: &[ProcessInfo]) {
        let recycled: Vec<u32> = procs
            .iter()
            .filter(|p| {
                self.prev_ticks
                    .get(&p.pid)
                    .is_some_and(|&(start, _)| start != p.start_ticks)
            })
            .map(|p| p.pid)
            .collect();
        if recycled.is_empty() {
            return;
        }
        let old: Vec<Member> = self
            .accounts
            .keys()
            .filter(|(s, l)| {
                *s == Partition::Process
                    && l.first()
                        .and_then(|(_, pid)| pid.parse::<u32>().ok())
                        .is_some_and(|p| recycled.contains(&p))
            })
            .cloned()
            .collect();
        for m in &old {
            self.retire(m);
        }
    }

    /// Each process's resident bytes and their denominator, `MemTotal` but never below their
    /// sum (per-process and machine counters are read apart and can disagree, and shares must
    /// never exceed 1 in total).
    fn resident_bytes(&self, procs: &[ProcessInfo]) -> (Vec<u64>, f64) {
        let page = self.view.page_size();
        let mem: Vec<u64> = procs
            .iter()
            .map(|p| p.rss_pages.saturating_mul(page))
            .collect();
        let den = self
            .view
            .mem_total_bytes()
            .unwrap_or(0)
            .max(mem.iter().sum()) as f64;
        (mem, den)
    }

    /// The machine's busy ticks in this interval, never below the processes' sum (as for
    /// [`Attributor::resident_bytes`]'s denominator).
    fn cpu_denominator(&self, busy: Option<u64>, cpu: &[u64]) -> f64 {
        let dbusy = match (self.prev_busy, busy) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        dbusy.max(cpu.iter().sum()) as f64
    }

    /// What the GPU source says about each GPU's processes; asked only when a GPU is metered.
    fn gpu_usage(&mut self, energies: &[DeviceEnergy]) -> HashMap<String, GpuUsage> {
        match (
            &mut self.gpu,
            energies.iter().any(|d| d.kind == DeviceKind::Gpu),
        ) {
            (Some(g), true) => g.usage().into_iter().collect(),
            _ => HashMap::new(),
        }
    }

    /// Record device `d`'s increase since the previous step and split it among the members by
    /// the weight its kind follows; members of GPU processes `/proc` does not show go to
    /// `unseen`.
    fn split_device(
        &mut self,
        d: &DeviceEnergy,
        w: &IntervalWeights,
        unseen: &mut Vec<Vec<Member>>,
    ) {
        let e = d.energy_j.get();
        let prev = self.prev_energy.insert(d.id.clone(), e).unwrap_or(0.0);
        let de = (e - prev).max(0.0);
        self.node_delta.insert(d.id.clone(), de);
        match weight_of(d.kind) {
            Weight::Cpu => self.split_by_weight(&d.id, de, w.cpu, w.cpu_den, w.members),
            Weight::Memory => self.split_by_weight(&d.id, de, w.mem, w.mem_den, w.members),
            Weight::Gpu => self.split_gpu(&d.id, de, w, unseen),
        }
    }

    /// Credit `de` to each process's members in proportion to its weight over `den`.
    fn split_by_weight(
        &mut self,
        device: &str,
        de: f64,
        weights: &[u64],
        den: f64,
        members: &[Vec<Member>],
    ) {
        if de <= 0.0 || den <= 0.0 {
            return;
        }
        for (w, ms) in weights.iter().zip(members) {
            if *w > 0 {
                self.credit(ms, device, de * (*w as f64 / den));
            }
        }
    }

    /// Credit a GPU's `de` by the rule [`gpu_weights`] picks from its usage (noted in
    /// `gpu_rules`), unattributed without one.
    fn split_gpu(
        &mut self,
        device: &str,
        de: f64,
        w: &IntervalWeights,
        unseen: &mut Vec<Vec<Member>>,
    ) {
        let (rule, weights) = w
            .gpu_usage
            .get(device)
            .map(gpu_weights)
            .unwrap_or((GpuRule::Unattributed, Vec::new()));
        self.gpu_rules.push((device.to_string(), rule));
        let den: f64 = weights.iter().map(|(_, w)| w).sum();
        if de <= 0.0 || den <= 0.0 {
            return;
        }
        for (pid, wt) in weights {
            let share = de * (wt / den);
            match w.index.get(&pid).and_then(|&i| w.members.get(i)) {
                Some(ms) => self.credit(ms, device, share),
                None => {
                    let ms = self.unseen_members(pid);
                    self.credit(&ms, device, share);
                    unseen.push(ms);
                }
            }
        }
    }

    /// Liveness, then retention: a member no live process has belonged to for longer than
    /// `retain_s` leaves, its energy kept in its scope's `(ended)` series so every scope
    /// still sums to the node and no counter goes backwards.
    fn retire_idle_members<'m>(&mut self, live: impl Iterator<Item = &'m Vec<Member>>, t_s: f64) {
        for ms in live {
            self.mark_live(ms, t_s);
        }
        let retain = self.opts.retain_s;
        let expired: Vec<Member> = self
            .accounts
            .iter()
            .filter(|(_, a)| t_s - a.last_live > retain)
            .map(|(m, _)| m.clone())
            .collect();
        for m in &expired {
            self.retire(m);
        }
    }

    /// The series now: node per device, every scope member, and the unattributed remainder.
    pub fn snapshot(&self) -> Snapshot {
        let dev = |id: &str| self.devices.iter().find(|d| d.id == id);
        let mut series = Vec::new();
        for d in &self.devices {
            series.push(Series {
                scope: Partition::Node,
                labels: Vec::new(),
                device: d.id.clone(),
                kind: d.kind,
                method: d.method,
                energy_j: d.energy_j.get(),
                power_w: self.node_power(&d.id),
            });
        }
        // Σ cgroup members per device, total and in the latest interval.
        let mut attributed: HashMap<&str, (f64, f64)> = HashMap::new();
        for ((scope, labels), a) in &self.accounts {
            for (id, e) in &a.energy {
                let Some(d) = dev(id) else { continue };
                let de = a.delta.get(id).copied().unwrap_or(0.0);
                if *scope == Partition::Cgroup {
                    let s = attributed.entry(id.as_str()).or_insert((0.0, 0.0));
                    s.0 += e;
                    s.1 += de;
                }
                series.push(Series {
                    scope: *scope,
                    labels: labels.clone(),
                    device: id.clone(),
                    kind: d.kind,
                    method: d.method,
                    energy_j: *e,
                    power_w: self.last_dt.map(|dt| de / dt),
                });
            }
        }
        for d in &self.devices {
            let (total, now) = attributed.get(d.id.as_str()).copied().unwrap_or((0.0, 0.0));
            series.push(Series {
                scope: Partition::Unattributed,
                labels: Vec::new(),
                device: d.id.clone(),
                kind: d.kind,
                method: d.method,
                energy_j: (d.energy_j.get() - total).max(0.0),
                power_w: self
                    .node_power(&d.id)
                    .zip(self.last_dt)
                    .map(|(p, dt)| (p - now / dt).max(0.0)),
            });
        }
        Snapshot {
            series,
            samples: self.samples,
            processes: self.processes,
            unknown_processes: self.unknown_processes,
            device_notes: self
                .devices
                .iter()
                .filter_map(|d| Some((d.id.clone(), d.note.clone()?)))
                .collect(),
            gpu_rules: self.gpu_rules.clone(),
        }
    }

    /// Members (cgroups, users, jobs, processes, `(ended)` series) held now: bounded by the
    /// live ones plus those within `retain_s` of their end.
    pub fn members(&self) -> usize {
        self.accounts.len()
    }

    /// The node's average power over the latest interval on device `id`.
    fn node_power(&self, id: &str) -> Option<f64> {
        let dt = self.last_dt?;
        Some(self.node_delta.get(id).copied().unwrap_or(0.0) / dt)
    }
}

#[cfg(test)]
mod tests;

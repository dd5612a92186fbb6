//! Attribution of node energy to processes, cgroups, Slurm jobs and users (`amdahl exporter`).
//!
//! Each sampling interval, every device's energy increase ΔE (from the [`crate::Meter`]) is split
//! among the processes alive in it, by a weight that tracks what the device spends energy on:
//!
//! * CPU package, psys and estimated CPU: the process's CPU ticks in the interval over the
//!   machine's busy ticks (`/proc/stat`), i.e. [`crate::estimate::cpu_share`] per interval;
//! * DRAM and estimated RAM: its resident memory over `MemTotal`;
//! * GPU: not split yet (NVML per-process accounting is not wired): all unattributed.
//!
//! A process's share goes to its cgroup, its user, its Slurm job (if any) and to itself. What no
//! process gets (idle power, kernel threads, rounding) is the `unattributed` remainder, computed
//! as node − Σ cgroups, so for every device Σ cgroup + unattributed = node exactly, and likewise
//! Σ user + unattributed (every process has exactly one cgroup and one user, `unknown` when its
//! `/proc` entries cannot be read). Jobs cover only processes of Slurm jobs. Formulas and limits:
//! docs/methodology.md, "Energy attribution (exporter)".

pub mod procs;

use crate::meter::DeviceEnergy;
use crate::source::{DeviceKind, Method};
use procs::{ProcView, ProcessInfo};
use std::collections::{BTreeMap, HashMap};

/// Which partition of the node a series belongs to (the `scope` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Node,
    Cgroup,
    Job,
    User,
    Process,
    Unattributed,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Node => "node",
            Scope::Cgroup => "cgroup",
            Scope::Job => "job",
            Scope::User => "user",
            Scope::Process => "process",
            Scope::Unattributed => "unattributed",
        }
    }
}

/// The label `unknown` for a cgroup or user that could not be read.
pub const UNKNOWN: &str = "unknown";

/// One series: cumulative energy of one scope member on one device.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub scope: Scope,
    /// Scope-specific labels, e.g. `[("cgroup", "/system.slice/x")]`, `[("pid","7"),("comm","sh")]`.
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
}

/// Choices of the operator.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Export per-process series (pid, comm); off keeps cardinality to cgroups/jobs/users.
    pub processes: bool,
    /// Add the command line to process series (opt-in: arguments can hold secrets).
    pub cmdline: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Weight {
    Cpu,
    Memory,
    None,
}

fn weight_of(kind: DeviceKind) -> Weight {
    match kind {
        DeviceKind::CpuPackage | DeviceKind::Psys | DeviceKind::Cpu => Weight::Cpu,
        DeviceKind::Dram | DeviceKind::Ram => Weight::Memory,
        DeviceKind::Gpu => Weight::None,
    }
}

type Key = (Scope, Vec<(String, String)>, String);

/// Running attribution state; feed it every sample with [`Attributor::step`].
pub struct Attributor {
    view: Box<dyn ProcView>,
    opts: Options,
    /// pid → (start ticks, CPU ticks) at the previous sample.
    prev_ticks: HashMap<u32, (u64, u64)>,
    prev_busy: Option<u64>,
    prev_energy: HashMap<String, f64>,
    prev_t: Option<f64>,
    totals: BTreeMap<Key, f64>,
    last_delta: HashMap<Key, f64>,
    node_delta: HashMap<String, f64>,
    last_dt: Option<f64>,
    devices: Vec<DeviceEnergy>,
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
            opts,
            prev_ticks: HashMap::new(),
            prev_busy: None,
            prev_energy: HashMap::new(),
            prev_t: None,
            totals: BTreeMap::new(),
            last_delta: HashMap::new(),
            node_delta: HashMap::new(),
            last_dt: None,
            devices: Vec::new(),
            users: HashMap::new(),
            samples: 0,
            processes: 0,
            unknown_processes: 0,
        }
    }

    fn user_label(&mut self, uid: Option<u32>) -> String {
        match uid {
            Some(u) => self.users.entry(u).or_insert_with(|| user_name(u)).clone(),
            None => UNKNOWN.into(),
        }
    }

    /// Take in the meter's cumulative energies at time `t_s` (seconds): read the processes now
    /// and split each device's increase since the previous step.
    pub fn step(&mut self, t_s: f64, energies: &[DeviceEnergy]) {
        self.samples += 1;
        let busy = self.view.busy_ticks();
        let pids = self.view.pids();
        let procs: Vec<ProcessInfo> = pids
            .into_iter()
            .filter_map(|p| self.view.process(p, self.opts.cmdline))
            .collect();
        let first = self.prev_busy.is_none() && self.prev_ticks.is_empty();
        // CPU ticks of each process in this interval. A pid seen before with the same start
        // time continues; a new one ran entirely inside the interval (after the first step).
        let cpu: Vec<u64> = procs
            .iter()
            .map(|p| match self.prev_ticks.get(&p.pid) {
                Some(&(start, t)) if start == p.start_ticks => p.ticks.saturating_sub(t),
                _ if first => 0,
                _ => p.ticks,
            })
            .collect();
        let page = self.view.page_size();
        let mem: Vec<u64> = procs
            .iter()
            .map(|p| p.rss_pages.saturating_mul(page))
            .collect();
        let dbusy = match (self.prev_busy, busy) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        // Denominators never below the sum of the weights, so shares never exceed 1 in total
        // (per-process and machine counters are read microseconds apart and can disagree).
        let cpu_den = dbusy.max(cpu.iter().sum()) as f64;
        let mem_den = self
            .view
            .mem_total_bytes()
            .unwrap_or(0)
            .max(mem.iter().sum()) as f64;

        let labels: Vec<[Vec<(String, String)>; 4]> = procs
            .iter()
            .map(|p| {
                let user = self.user_label(p.uid);
                let mut pl = vec![
                    ("pid".to_string(), p.pid.to_string()),
                    ("comm".to_string(), p.comm.clone()),
                ];
                if let Some(c) = &p.cmdline {
                    pl.push(("cmdline".into(), c.clone()));
                }
                [
                    vec![(
                        "cgroup".into(),
                        p.cgroup.clone().unwrap_or_else(|| UNKNOWN.into()),
                    )],
                    vec![("user".into(), user)],
                    p.job
                        .iter()
                        .map(|j| ("job".to_string(), j.clone()))
                        .collect(),
                    pl,
                ]
            })
            .collect();
        self.processes = procs.len() as u64;
        self.unknown_processes = procs
            .iter()
            .filter(|p| p.uid.is_none() || p.cgroup.is_none())
            .count() as u64;

        let dt = self.prev_t.map(|t0| t_s - t0).filter(|d| *d > 0.0);
        self.last_delta.clear();
        for d in energies {
            let e = d.energy_j.get();
            let prev = self.prev_energy.insert(d.id.clone(), e).unwrap_or(0.0);
            let de = (e - prev).max(0.0);
            self.node_delta.insert(d.id.clone(), de);
            let (weights, den) = match weight_of(d.kind) {
                Weight::Cpu => (&cpu, cpu_den),
                Weight::Memory => (&mem, mem_den),
                Weight::None => continue,
            };
            if de <= 0.0 || den <= 0.0 {
                continue;
            }
            for (i, w) in weights.iter().enumerate() {
                if *w == 0 {
                    continue;
                }
                let share = de * (*w as f64 / den);
                let Some(ls) = labels.get(i) else { continue };
                let scopes = [Scope::Cgroup, Scope::User, Scope::Job, Scope::Process];
                for (scope, l) in scopes.iter().zip(ls.iter()) {
                    if *scope == Scope::Job && l.is_empty() {
                        continue;
                    }
                    if *scope == Scope::Process && !self.opts.processes {
                        continue;
                    }
                    let key = (*scope, l.clone(), d.id.clone());
                    *self.totals.entry(key.clone()).or_insert(0.0) += share;
                    *self.last_delta.entry(key).or_insert(0.0) += share;
                }
            }
        }
        // Vanished processes leave the process scope (their energy stays in their cgroup, user
        // and job); their pids may be reused.
        let alive: HashMap<u32, ()> = procs.iter().map(|p| (p.pid, ())).collect();
        self.totals.retain(|(s, l, _), _| {
            *s != Scope::Process
                || l.first()
                    .and_then(|(_, pid)| pid.parse::<u32>().ok())
                    .is_some_and(|p| alive.contains_key(&p))
        });
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

    /// The series now: node per device, every scope member, and the unattributed remainder.
    pub fn snapshot(&self) -> Snapshot {
        let dev = |id: &str| self.devices.iter().find(|d| d.id == id);
        let power = |k: &Key| {
            let dt = self.last_dt?;
            Some(self.last_delta.get(k).copied().unwrap_or(0.0) / dt)
        };
        let mut series = Vec::new();
        for d in &self.devices {
            series.push(Series {
                scope: Scope::Node,
                labels: Vec::new(),
                device: d.id.clone(),
                kind: d.kind,
                method: d.method,
                energy_j: d.energy_j.get(),
                power_w: self.node_power(&d.id),
            });
        }
        for (k, e) in &self.totals {
            let Some(d) = dev(&k.2) else { continue };
            series.push(Series {
                scope: k.0,
                labels: k.1.clone(),
                device: k.2.clone(),
                kind: d.kind,
                method: d.method,
                energy_j: *e,
                power_w: power(k),
            });
        }
        for d in &self.devices {
            let attributed: f64 = self
                .totals
                .iter()
                .filter(|((s, _, id), _)| *s == Scope::Cgroup && *id == d.id)
                .map(|(_, e)| e)
                .sum();
            let attributed_now: f64 = self
                .last_delta
                .iter()
                .filter(|((s, _, id), _)| *s == Scope::Cgroup && *id == d.id)
                .map(|(_, e)| e)
                .sum();
            series.push(Series {
                scope: Scope::Unattributed,
                labels: Vec::new(),
                device: d.id.clone(),
                kind: d.kind,
                method: d.method,
                energy_j: (d.energy_j.get() - attributed).max(0.0),
                power_w: self
                    .node_power(&d.id)
                    .zip(self.last_dt)
                    .map(|(p, dt)| (p - attributed_now / dt).max(0.0)),
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
        }
    }

    /// The node's average power over the latest interval on device `id`.
    fn node_power(&self, id: &str) -> Option<f64> {
        let dt = self.last_dt?;
        Some(self.node_delta.get(id).copied().unwrap_or(0.0) / dt)
    }
}

#[cfg(test)]
mod tests;

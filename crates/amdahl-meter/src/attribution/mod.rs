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
//! process gets (idle power, kernel threads, rounding) is the `unattributed` remainder of each
//! interval. Every series is kept in integer microjoules and only ever grows by the non-negative
//! share of an interval, so no counter Prometheus reads can go down (a float recomputed as
//! node − Σ cgroups dipped by ~1e-12 J, which Prometheus reads as a counter reset and adds the
//! whole total again). The shares of an interval are floors of exact 128-bit products, so they
//! never sum above the interval's energy; its remainder is unattributed. For every device, at
//! every step, in µJ exactly: Σ cgroup + ended(cgroup) + unattributed = node, and likewise for
//! users and processes (every process has exactly one cgroup and one user, `unknown` when its
//! `/proc` entries cannot be read). Jobs cover only processes of Slurm jobs.
//!
//! State stays bounded: a member (cgroup, user, job, process) with no live process for
//! [`Options::retain_s`] stops being exported. Its energy is never exported again under another
//! series (an `(ended)` series that took over the total used to count it twice in
//! `sum(increase(...))`); it is reported in [`Snapshot::ended`], a separate gauge. A cgroup, user
//! or job that comes back resumes its counter where it stopped (up to
//! [`Options::remember_ended`] of them are remembered), so Prometheus, which sees a series that
//! went stale and came back higher, counts only the new energy. A process is identified by its
//! pid and start time (a `start` label), so it never comes back. Formulas and limits:
//! docs/methodology.md, "Energy attribution (exporter)".

pub mod gpu;
pub mod kfd;
pub mod procs;

use crate::meter::DeviceEnergy;
use crate::source::{DeviceKind, Method};
use gpu::{gpu_weights, GpuRule, GpuUsage, GpuUsageSource};
use procs::{ProcView, ProcessInfo};
use std::collections::{BTreeMap, HashMap, HashSet};

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

/// A process's own member: pid, command name and start time (and command line if read).
fn process_member(p: &ProcessInfo) -> Member {
    let mut pl = vec![
        ("pid".to_string(), p.pid.to_string()),
        ("comm".to_string(), p.comm.clone()),
        ("start".to_string(), p.start_ticks.to_string()),
    ];
    if let Some(c) = &p.cmdline {
        pl.push(("cmdline".into(), c.clone()));
    }
    (Partition::Process, pl)
}

/// Joules → whole microjoules (the unit RAPL counts in); anything not a positive finite number
/// is 0, so a glitch in a float never becomes a negative or huge step.
fn to_uj(j: f64) -> u64 {
    if j.is_finite() && j > 0.0 {
        // `as` saturates at u64::MAX (≈ 1.8e13 J), far beyond any node's lifetime energy.
        (j * 1e6).round() as u64
    } else {
        0
    }
}

/// Microjoules → joules for rendering. Both steps are monotone (u64 → f64 rounds to nearest,
/// IEEE division is correctly rounded), so a counter that grows as an integer never shrinks
/// as a float, even beyond 2^53 µJ where not every integer is representable.
fn uj_to_j(uj: u64) -> f64 {
    uj as f64 / 1e6
}

/// One series: cumulative energy of one scope member on one device.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub scope: Partition,
    /// Partition-specific labels, e.g. `[("cgroup", "/system.slice/x")]`,
    /// `[("pid","7"),("comm","sh"),("start","5555")]`.
    pub labels: Vec<(String, String)>,
    pub device: String,
    pub kind: DeviceKind,
    pub method: Method,
    /// Energy in whole microjoules (for [`Snapshot::series`]: since the exporter started, and
    /// never less than at any earlier snapshot).
    pub energy_uj: u64,
    /// Average power over the latest interval.
    pub power_w: Option<f64>,
}

impl Series {
    /// [`Series::energy_uj`] in joules.
    pub fn energy_j(&self) -> f64 {
        uj_to_j(self.energy_uj)
    }
}

/// Everything the exporter serves at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Counters: node, the members exported now, unattributed.
    pub series: Vec<Series>,
    /// Per scope (cgroup, job, user, process) and device, the energy of the members no longer
    /// exported (no live process for `--retain`), no labels but the scope's. A gauge, not a
    /// counter: a cgroup, user or job that comes back takes its energy back into its series.
    pub ended: Vec<Series>,
    /// Samples taken so far.
    pub samples: u64,
    /// Processes seen in the latest sample, and how many of them had unreadable entries.
    pub processes: u64,
    pub unknown_processes: u64,
    /// Devices whose latest reading is incomplete (unreadable file, rejected step), with why.
    /// Filled by the caller from [`crate::Meter::incomplete`]; empty from [`Attributor`].
    pub device_notes: Vec<(String, String)>,
    /// The rule that split each GPU's energy in the latest interval.
    pub gpu_rules: Vec<(String, GpuRule)>,
}

/// Choices of the operator.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Export per-process series (pid, comm, start); off keeps cardinality to cgroups/jobs/users.
    pub processes: bool,
    /// Add the command line to process series (opt-in: arguments can hold secrets).
    pub cmdline: bool,
    /// Seconds a cgroup, job, user or process keeps its own series after its last process was
    /// seen; then it is no longer exported (`--retain`).
    pub retain_s: f64,
    /// At most this many processes have a series of their own (`--max-process-series`); the
    /// others are charged to one `pid="other"` series. None: no bound.
    pub max_process_series: Option<usize>,
    /// How many ended cgroups, jobs and users are remembered, so that one coming back resumes
    /// its counter; beyond, the longest-ended are forgotten (one that comes back then starts
    /// again at 0, which Prometheus reads as a counter reset).
    pub remember_ended: usize,
}

/// The default of `--retain`: 5 minutes, Prometheus's staleness window (`lookback-delta`), so a
/// server scraping every minute or faster reads every member's final value several times.
pub const DEFAULT_RETAIN_S: f64 = 300.0;

/// The default of `--max-process-series`: 30,000 processes made a 19 MB scrape; 1,000 keep it
/// near 0.6 MB while showing every process of an ordinary node.
pub const DEFAULT_MAX_PROCESS_SERIES: usize = 1000;

/// The label value of the series that holds the processes beyond `--max-process-series`.
pub const OTHER: &str = "other";

fn other_process() -> Member {
    let l = |k: &str| (k.to_string(), OTHER.to_string());
    (Partition::Process, vec![l("pid"), l("comm"), l("start")])
}

/// The default of [`Options::remember_ended`]: ~100 bytes each, so at most ~1 MB.
pub const DEFAULT_REMEMBER_ENDED: usize = 10_000;

impl Default for Options {
    fn default() -> Self {
        Options {
            processes: false,
            cmdline: false,
            retain_s: DEFAULT_RETAIN_S,
            remember_ended: DEFAULT_REMEMBER_ENDED,
            max_process_series: Some(DEFAULT_MAX_PROCESS_SERIES),
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

/// A member's energy per device id (µJ): since the start, and in the latest interval.
#[derive(Debug, Default)]
struct Account {
    energy: BTreeMap<String, u64>,
    delta: BTreeMap<String, u64>,
    /// Time of the latest step in which a live process belonged to it.
    last_live: f64,
}

impl Account {
    fn add(&mut self, device: &str, uj: u64) {
        for m in [&mut self.energy, &mut self.delta] {
            match m.get_mut(device) {
                Some(x) => *x = x.saturating_add(uj),
                None => {
                    m.insert(device.to_string(), uj);
                }
            }
        }
    }
}

/// The node side of one device (µJ).
#[derive(Debug, Default)]
struct DeviceTotals {
    /// The node's counter: the highest reading of the meter so far. Deltas are taken above it,
    /// so a reading that steps back (the meter switching from integrated power to its counter)
    /// is neither a negative step nor counted twice when it climbs again.
    node: u64,
    node_delta: u64,
    /// Σ of every interval's remainder after the shares: grows by construction.
    unattributed: u64,
    unattributed_delta: u64,
}

/// An ended cgroup, user or job: its energy per device, and when it ended (a sequence number,
/// to forget the longest-ended first).
#[derive(Debug)]
struct Ended {
    energy: BTreeMap<String, u64>,
    seq: u64,
}

/// What one interval's split needs about the processes alive in it, each list in the order of
/// the processes read ([`Attributor::step`]).
struct IntervalWeights<'a> {
    /// CPU ticks in the interval, and the machine's busy ticks (never below their sum).
    cpu: &'a [u64],
    cpu_den: u64,
    /// Resident bytes, and `MemTotal` (never below their sum).
    mem: &'a [u64],
    mem_den: u64,
    members: &'a [Vec<Member>],
    /// pid → position in the lists above.
    index: &'a HashMap<u32, usize>,
    gpu_usage: &'a HashMap<String, GpuUsage>,
}

/// A process at the previous sample: identity, CPU ticks, its reaped children's ticks, parent.
#[derive(Debug, Clone, Copy)]
struct Seen {
    start_ticks: u64,
    ticks: u64,
    child_ticks: u64,
    ppid: u32,
}

/// Running attribution state; feed it every sample with [`Attributor::step`].
pub struct Attributor {
    view: Box<dyn ProcView>,
    gpu: Option<Box<dyn GpuUsageSource>>,
    opts: Options,
    /// pid → what the previous sample saw of it.
    prev_ticks: HashMap<u32, Seen>,
    prev_busy: Option<u64>,
    prev_t: Option<f64>,
    accounts: BTreeMap<Member, Account>,
    totals: BTreeMap<String, DeviceTotals>,
    /// (scope, device) → energy of the members no longer exported.
    ended_energy: BTreeMap<(Partition, String), u64>,
    /// Ended cgroups, users and jobs, to resume their counters if they come back.
    remembered: HashMap<Member, Ended>,
    ended_seq: u64,
    last_dt: Option<f64>,
    devices: Vec<DeviceEnergy>,
    gpu_rules: Vec<(String, GpuRule)>,
    users: HashMap<u32, String>,
    /// Live processes that gave their series up: charged to `other` for good.
    demoted: HashSet<Member>,
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
            prev_t: None,
            accounts: BTreeMap::new(),
            totals: BTreeMap::new(),
            ended_energy: BTreeMap::new(),
            remembered: HashMap::new(),
            ended_seq: 0,
            last_dt: None,
            devices: Vec::new(),
            gpu_rules: Vec::new(),
            users: HashMap::new(),
            demoted: HashSet::new(),
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
    /// process series are on; pid and start time identify it, so a recycled pid is a new
    /// series even with the same name).
    fn members_of(&mut self, p: &ProcessInfo, own_series: &HashSet<u32>) -> Vec<Member> {
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
            if own_series.contains(&p.pid) {
                m.push(process_member(p));
            } else {
                m.push(other_process());
            }
        }
        m
    }

    /// Which live processes have a series of their own this step (all without a bound). Those
    /// that have one keep it; free room goes to the others by CPU time; one with more than
    /// twice the CPU time of the smallest one held takes its place (at most 16 a step). A
    /// process waiting for room is charged to `other` meanwhile (what it used before it gets a
    /// series stays there). One that gave way is charged to `other` for the rest of its life:
    /// its series ends as an ended member's does (its energy into the ended gauge), and no
    /// series ever comes back under its labels, which Prometheus could not tell from the old.
    /// CPU time ranks them: it is what splits CPU energy, and it is known for every process.
    fn own_series(&mut self, procs: &[ProcessInfo]) -> HashSet<u32> {
        let Some(n) = self.opts.max_process_series.filter(|_| self.opts.processes) else {
            return procs.iter().map(|p| p.pid).collect();
        };
        let keys: Vec<Member> = procs.iter().map(process_member).collect();
        let live: HashSet<&Member> = keys.iter().collect();
        self.demoted.retain(|k| live.contains(k));
        let other = other_process();
        let held = self
            .accounts
            .keys()
            .filter(|m| m.0 == Partition::Process && **m != other)
            .count();
        let mut own: Vec<(u64, &Member, u32)> = Vec::new();
        let mut waiting: Vec<(u64, &Member, u32)> = Vec::new();
        for (p, k) in procs.iter().zip(&keys) {
            if self.accounts.contains_key(k) {
                own.push((p.ticks, k, p.pid));
            } else if !self.demoted.contains(k) {
                waiting.push((p.ticks, k, p.pid));
            }
        }
        waiting.sort_unstable_by_key(|w| std::cmp::Reverse(w.0));
        own.sort_unstable_by_key(|w| std::cmp::Reverse(w.0));
        let mut room = n.saturating_sub(held);
        let (mut chosen, mut gone) = (Vec::new(), Vec::new());
        for w in waiting {
            if room > 0 {
                room -= 1;
                chosen.push(w);
            } else if gone.len() < 16 && own.last().is_some_and(|s| w.0 > s.0.saturating_mul(2)) {
                if let Some(s) = own.pop() {
                    gone.push(s.1.clone());
                }
                chosen.push(w);
            }
        }
        let pids: HashSet<u32> = own.iter().chain(&chosen).map(|x| x.2).collect();
        for k in gone {
            self.retire(&k);
            self.demoted.insert(k);
        }
        pids
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
                    ("start".to_string(), UNKNOWN.into()),
                ],
            ));
        }
        m
    }

    /// The account of `m`, created (or resumed, for a remembered ended member) if absent.
    fn account(&mut self, m: &Member) -> &mut Account {
        if !self.accounts.contains_key(m) {
            let mut a = Account::default();
            if *m == other_process() {
                // Never retires: processes keep coming and going in it.
                a.last_live = f64::INFINITY;
            }
            if let Some(e) = self.remembered.remove(m) {
                for (d, uj) in &e.energy {
                    if let Some(x) = self.ended_energy.get_mut(&(m.0, d.clone())) {
                        *x = x.saturating_sub(*uj);
                    }
                }
                a.energy = e.energy;
            }
            self.accounts.insert(m.clone(), a);
        }
        self.accounts.entry(m.clone()).or_default()
    }

    fn credit(&mut self, members: &[Member], device: &str, uj: u64) {
        for m in members {
            self.account(m).add(device, uj);
        }
    }

    fn mark_live(&mut self, members: &[Member], t_s: f64) {
        for m in members {
            let a = self.account(m);
            a.last_live = a.last_live.max(t_s);
        }
    }

    /// Stop exporting a member: its energy goes to the scope's ended total, and a cgroup, user
    /// or job is remembered so it resumes its counter if it comes back.
    fn retire(&mut self, m: &Member) {
        let Some(a) = self.accounts.remove(m) else {
            return;
        };
        if a.energy.is_empty() {
            return;
        }
        for (d, uj) in &a.energy {
            let x = self.ended_energy.entry((m.0, d.clone())).or_insert(0);
            *x = x.saturating_add(*uj);
        }
        if m.0 == Partition::Process || self.opts.remember_ended == 0 {
            return;
        }
        if self.remembered.len() >= self.opts.remember_ended {
            let oldest = self
                .remembered
                .iter()
                .min_by_key(|(_, e)| e.seq)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.remembered.remove(&k);
            }
        }
        self.ended_seq += 1;
        self.remembered.insert(
            m.clone(),
            Ended {
                energy: a.energy,
                seq: self.ended_seq,
            },
        );
    }

    /// Take in the meter's cumulative energies at time `t_s` (seconds): read the processes now
    /// and split each device's increase since the previous step.
    pub fn step(&mut self, t_s: f64, energies: &[DeviceEnergy]) {
        self.samples += 1;
        let busy = self.view.busy_ticks();
        let procs = self.read_processes();
        let cpu = self.interval_cpu_ticks(&procs);
        let (mem, mem_den) = self.resident_bytes(&procs);
        let cpu_den = self.cpu_denominator(busy, &cpu);
        let own = self.own_series(&procs);
        let members: Vec<Vec<Member>> = procs.iter().map(|p| self.members_of(p, &own)).collect();
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
        for t in self.totals.values_mut() {
            t.node_delta = 0;
            t.unattributed_delta = 0;
        }
        self.gpu_rules.clear();
        let mut unseen: Vec<Vec<Member>> = Vec::new();
        for d in energies {
            self.split_device(d, &weights, &mut unseen);
        }
        self.retire_idle_members(members.iter().chain(&unseen), t_s);
        self.prev_ticks = procs
            .iter()
            .map(|p| {
                let seen = Seen {
                    start_ticks: p.start_ticks,
                    ticks: p.ticks,
                    child_ticks: p.child_ticks,
                    ppid: p.ppid,
                };
                (p.pid, seen)
            })
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
    /// continues; a new one (or a recycled pid: a later start time) ran entirely inside the
    /// interval (after the first step).
    ///
    /// A process also gets the ticks of the children it reaped in the interval that no sample
    /// saw: the growth of its cutime + cstime, less what its children that vanished since the
    /// previous sample had already been charged (their own ticks and their reaped children's).
    /// Under build-like churn (compilers living a few ms) 95 % of the busy CPU time's energy
    /// had stayed `unattributed` although the parents' cutime held it.
    fn interval_cpu_ticks(&self, procs: &[ProcessInfo]) -> Vec<u64> {
        let first = self.prev_busy.is_none() && self.prev_ticks.is_empty();
        let alive: HashMap<u32, u64> = procs.iter().map(|p| (p.pid, p.start_ticks)).collect();
        // Ticks already charged to children that have gone since the previous sample, by parent.
        let mut charged_to_gone: HashMap<u32, u64> = HashMap::new();
        for (pid, s) in &self.prev_ticks {
            if alive.get(pid) != Some(&s.start_ticks) {
                *charged_to_gone.entry(s.ppid).or_default() +=
                    s.ticks.saturating_add(s.child_ticks);
            }
        }
        procs
            .iter()
            .map(|p| {
                let (own, reaped) = match self.prev_ticks.get(&p.pid) {
                    Some(s) if s.start_ticks == p.start_ticks => (
                        p.ticks.saturating_sub(s.ticks),
                        p.child_ticks.saturating_sub(s.child_ticks),
                    ),
                    _ if first => (0, 0),
                    _ => (p.ticks, p.child_ticks),
                };
                let unseen =
                    reaped.saturating_sub(charged_to_gone.get(&p.pid).copied().unwrap_or(0));
                own.saturating_add(unseen)
            })
            .collect()
    }

    /// Each process's resident bytes and their denominator, `MemTotal` but never below their
    /// sum (per-process and machine counters are read apart and can disagree, and shares must
    /// never exceed 1 in total).
    fn resident_bytes(&self, procs: &[ProcessInfo]) -> (Vec<u64>, u64) {
        let page = self.view.page_size();
        let mem: Vec<u64> = procs
            .iter()
            .map(|p| p.rss_pages.saturating_mul(page))
            .collect();
        let sum = mem.iter().fold(0u64, |a, b| a.saturating_add(*b));
        let den = self.view.mem_total_bytes().unwrap_or(0).max(sum);
        (mem, den)
    }

    /// The machine's busy ticks in this interval, never below the processes' sum (as for
    /// [`Attributor::resident_bytes`]'s denominator).
    fn cpu_denominator(&self, busy: Option<u64>, cpu: &[u64]) -> u64 {
        let dbusy = match (self.prev_busy, busy) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        dbusy.max(cpu.iter().fold(0u64, |a, b| a.saturating_add(*b)))
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

    /// Record device `d`'s increase since the previous step, split it among the members by
    /// the weight its kind follows, and add what nobody got to unattributed; members of GPU
    /// processes `/proc` does not show go to `unseen`.
    fn split_device(
        &mut self,
        d: &DeviceEnergy,
        w: &IntervalWeights,
        unseen: &mut Vec<Vec<Member>>,
    ) {
        let now = to_uj(d.energy_j.get());
        let t = self.totals.entry(d.id.clone()).or_default();
        let de = now.saturating_sub(t.node);
        t.node = t.node.max(now);
        t.node_delta = de;
        let credited = match weight_of(d.kind) {
            Weight::Cpu => self.split_by_weight(&d.id, de, w.cpu, w.cpu_den, w.members),
            Weight::Memory => self.split_by_weight(&d.id, de, w.mem, w.mem_den, w.members),
            Weight::Gpu => self.split_gpu(&d.id, de, w, unseen),
        };
        if let Some(t) = self.totals.get_mut(&d.id) {
            // Never negative: the shares are at most `de` in all (their split functions).
            let rest = de.saturating_sub(credited);
            t.unattributed = t.unattributed.saturating_add(rest);
            t.unattributed_delta = rest;
        }
    }

    /// Credit each process's members ⌊de · weight / den⌋ µJ (exact in 128 bits); returns the
    /// µJ credited, at most `de` (each share is also capped by what is left, for the case of
    /// weights whose true sum overflowed `den`).
    fn split_by_weight(
        &mut self,
        device: &str,
        de: u64,
        weights: &[u64],
        den: u64,
        members: &[Vec<Member>],
    ) -> u64 {
        if de == 0 || den == 0 {
            return 0;
        }
        let mut left = de;
        for (w, ms) in weights.iter().zip(members) {
            let share = u128::from(de) * u128::from(*w) / u128::from(den);
            let share = u64::try_from(share).unwrap_or(u64::MAX).min(left);
            if share > 0 {
                self.credit(ms, device, share);
                left -= share;
            }
        }
        de - left
    }

    /// Credit a GPU's `de` by the rule [`gpu_weights`] picks from its usage (noted in
    /// `gpu_rules`), nothing without one; returns the µJ credited, at most `de`.
    fn split_gpu(
        &mut self,
        device: &str,
        de: u64,
        w: &IntervalWeights,
        unseen: &mut Vec<Vec<Member>>,
    ) -> u64 {
        let (rule, weights) = w
            .gpu_usage
            .get(device)
            .map(gpu_weights)
            .unwrap_or((GpuRule::Unattributed, Vec::new()));
        self.gpu_rules.push((device.to_string(), rule));
        let den: f64 = weights.iter().map(|(_, w)| w).sum();
        // Also NaN: a weight that is not a number gives nothing rather than garbage.
        if de == 0 || den.is_nan() || den <= 0.0 {
            return 0;
        }
        let mut left = de;
        for (pid, wt) in weights {
            // Floors of a float product, capped by what is left: never above `de` in all.
            let share = ((de as f64) * (wt / den)).floor();
            let share = if share.is_finite() && share > 0.0 {
                (share as u64).min(left)
            } else {
                0
            };
            if share == 0 {
                continue;
            }
            left -= share;
            match w.index.get(&pid).and_then(|&i| w.members.get(i)) {
                Some(ms) => self.credit(ms, device, share),
                None => {
                    let ms = self.unseen_members(pid);
                    self.credit(&ms, device, share);
                    unseen.push(ms);
                }
            }
        }
        de - left
    }

    /// Liveness, then retention: a member no live process has belonged to for longer than
    /// `retain_s` is no longer exported ([`Attributor::retire`]).
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

    fn device(&self, id: &str) -> Option<&DeviceEnergy> {
        self.devices.iter().find(|d| d.id == id)
    }

    fn power(&self, delta_uj: u64) -> Option<f64> {
        self.last_dt.map(|dt| uj_to_j(delta_uj) / dt)
    }

    /// A series of device `d` with no labels but its scope's.
    fn plain(&self, scope: Partition, d: &DeviceEnergy, uj: u64, delta: Option<u64>) -> Series {
        Series {
            scope,
            labels: Vec::new(),
            device: d.id.clone(),
            kind: d.kind,
            method: d.method,
            energy_uj: uj,
            power_w: delta.and_then(|x| self.power(x)),
        }
    }

    /// The series now: node per device, every member exported, the unattributed remainder, and
    /// the ended energy per scope.
    pub fn snapshot(&self) -> Snapshot {
        let mut series = Vec::new();
        let mut unattributed = Vec::new();
        for d in &self.devices {
            let t = self.totals.get(&d.id);
            let (node, dn) = t.map_or((0, 0), |t| (t.node, t.node_delta));
            let (un, du) = t.map_or((0, 0), |t| (t.unattributed, t.unattributed_delta));
            series.push(self.plain(Partition::Node, d, node, Some(dn)));
            unattributed.push(self.plain(Partition::Unattributed, d, un, Some(du)));
        }
        for ((scope, labels), a) in &self.accounts {
            for (id, uj) in &a.energy {
                let Some(d) = self.device(id) else { continue };
                series.push(Series {
                    labels: labels.clone(),
                    ..self.plain(*scope, d, *uj, Some(a.delta.get(id).copied().unwrap_or(0)))
                });
            }
        }
        series.extend(unattributed);
        let ended = self
            .ended_energy
            .iter()
            .filter_map(|((scope, id), uj)| Some(self.plain(*scope, self.device(id)?, *uj, None)))
            .collect();
        Snapshot {
            series,
            ended,
            samples: self.samples,
            processes: self.processes,
            unknown_processes: self.unknown_processes,
            device_notes: Vec::new(),
            gpu_rules: self.gpu_rules.clone(),
        }
    }

    /// Members (cgroups, users, jobs, processes) held now: bounded by the live ones plus those
    /// within `retain_s` of their end (and at most [`Options::remember_ended`] ended ones).
    pub fn members(&self) -> usize {
        self.accounts.len()
    }
}

#[cfg(test)]
mod tests;

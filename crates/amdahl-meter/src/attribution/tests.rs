use super::procs::{fake, ProcFs};
use super::*;
use amdahl_model::units::Joules;
use std::path::Path;

fn dev(id: &str, kind: DeviceKind, j: f64) -> DeviceEnergy {
    DeviceEnergy {
        id: id.into(),
        kind,
        name: id.into(),
        method: Method::Counter,
        energy_j: Joules(j),
        note: None,
        rejected_steps: 0,
    }
}

fn find(s: &Snapshot, scope: Partition, label: &str, device: &str) -> f64 {
    s.series
        .iter()
        .filter(|x| {
            x.scope == scope
                && x.device == device
                && (label.is_empty() || x.labels.iter().any(|(k, v)| k != "start" && v == label))
        })
        .map(|x| x.energy_j())
        .sum()
}

/// The ended energy of `scope` on `device`.
fn ended(s: &Snapshot, scope: Partition, device: &str) -> f64 {
    s.ended
        .iter()
        .filter(|x| x.scope == scope && x.device == device)
        .map(|x| x.energy_j())
        .sum()
}

/// Three processes: cgroup v2 (root), cgroup v1 with a Slurm job, and one whose status and
/// cgroup are unreadable (another user's process).
fn tree(root: &Path, t: u64) {
    let page = crate::procfs::page_size();
    // 1000 kB of memory; process RSS in pages of this machine's size.
    fake::machine(root, 1000 + 200 * t, 1000).unwrap();
    let kb = |k: u64| k * 1024 / page;
    fake::process(
        root,
        10,
        "trainer",
        50 * t,
        kb(100),
        Some(0),
        Some("0::/system.slice/a.service\n"),
        &[],
    )
    .unwrap();
    fake::process(
        root,
        11,
        "srun task",
        30 * t,
        kb(200),
        Some(0),
        Some("4:cpu,cpuacct:/slurm/uid_0/job_42/step_0\n1:name=systemd:/user.slice\n"),
        &[],
    )
    .unwrap();
    fake::process(
        root,
        12,
        "other",
        20 * t,
        0,
        None,
        None,
        &["SLURM_JOB_ID=7"],
    )
    .unwrap();
}

#[test]
fn cpu_split_by_ticks_memory_by_rss_remainder_unattributed() {
    let t = tempfile::tempdir().unwrap();
    tree(t.path(), 0);
    let mut a = Attributor::new(
        Box::new(ProcFs::new(t.path())),
        Options {
            processes: true,
            cmdline: false,
            ..Options::default()
        },
    );
    a.step(
        0.0,
        &[
            dev("pkg", DeviceKind::CpuPackage, 0.0),
            dev("dram", DeviceKind::Dram, 0.0),
        ],
    );
    tree(t.path(), 1);
    // 100 J of package over 200 busy ticks, of which the processes used 50, 30, 20 ticks.
    a.step(
        1.0,
        &[
            dev("pkg", DeviceKind::CpuPackage, 100.0),
            dev("dram", DeviceKind::Dram, 10.0),
        ],
    );
    let s = a.snapshot();
    assert_eq!(find(&s, Partition::Node, "", "pkg"), 100.0);
    assert!((find(&s, Partition::Cgroup, "/system.slice/a.service", "pkg") - 25.0).abs() < 1e-9);
    assert!((find(&s, Partition::Cgroup, "/slurm/uid_0/job_42/step_0", "pkg") - 15.0).abs() < 1e-9);
    assert!((find(&s, Partition::Cgroup, UNKNOWN, "pkg") - 10.0).abs() < 1e-9);
    assert!((find(&s, Partition::User, UNKNOWN, "pkg") - 10.0).abs() < 1e-9);
    assert!((find(&s, Partition::User, "root", "pkg") - 40.0).abs() < 1e-9);
    assert!((find(&s, Partition::Job, "42", "pkg") - 15.0).abs() < 1e-9);
    // Regression: the unreadable process's `SLURM_JOB_ID=7` charged it to job 7; any user can
    // set that variable, so only Slurm's cgroup path names a job.
    assert_eq!(find(&s, Partition::Job, "7", "pkg"), 0.0);
    assert!(s
        .series
        .iter()
        .all(|x| x.scope != Partition::Job || x.labels == [("job".to_string(), "42".to_string())]));
    assert!((find(&s, Partition::Unattributed, "", "pkg") - 50.0).abs() < 1e-9);
    // DRAM: 100 kB and 200 kB of 1000 kB → 10 % and 20 % of 10 J.
    assert!((find(&s, Partition::Cgroup, "/system.slice/a.service", "dram") - 1.0).abs() < 1e-9);
    assert!((find(&s, Partition::Unattributed, "", "dram") - 7.0).abs() < 1e-9);
    for d in ["pkg", "dram"] {
        let parts = find(&s, Partition::Cgroup, "", d) + find(&s, Partition::Unattributed, "", d);
        assert!(
            (parts - find(&s, Partition::Node, "", d)).abs() < 1e-9,
            "{d}"
        );
        let users = find(&s, Partition::User, "", d) + find(&s, Partition::Unattributed, "", d);
        assert!(
            (users - find(&s, Partition::Node, "", d)).abs() < 1e-9,
            "{d}"
        );
    }
    // Power over the 1 s interval equals the energy of that interval.
    let p = s
        .series
        .iter()
        .find(|x| x.scope == Partition::Node && x.device == "pkg")
        .unwrap();
    assert_eq!(p.power_w, Some(100.0));
    assert_eq!(s.unknown_processes, 1);
    // No command lines unless asked for.
    assert!(s
        .series
        .iter()
        .all(|x| x.labels.iter().all(|(k, _)| k != "cmdline")));
}

/// Regression: under build-like churn the children live between two samples and no sample
/// sees them; their CPU time reaches the parent's cutime when it reaps them. It is charged to
/// the parent, less what a child that a sample did see was already charged (no double count).
#[test]
fn reaped_children_are_charged_to_their_parent_once() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let make = Some("0::/system.slice/make.service\n");
    let step = |a: &mut Attributor, t_s: f64, joules: f64| {
        a.step(t_s, &[dev("pkg", DeviceKind::CpuPackage, joules)]);
    };
    fake::machine(root, 0, 1000).unwrap();
    fake::process(root, 10, "make", 0, 0, Some(0), make, &[]).unwrap();
    fake::process(root, 20, "cc1", 0, 0, Some(0), make, &[]).unwrap();
    fake::set_stat(root, 20, "cc1", 10, 0, 0, 0).unwrap();
    let mut a = Attributor::new(Box::new(ProcFs::new(root)), Options::default());
    step(&mut a, 0.0, 0.0);
    // 100 busy ticks: make 10, the seen child cc1 30.
    fake::machine(root, 100, 1000).unwrap();
    fake::set_stat(root, 10, "make", 1, 10, 0, 0).unwrap();
    fake::set_stat(root, 20, "cc1", 10, 30, 0, 0).unwrap();
    step(&mut a, 1.0, 100.0);
    // 100 more: cc1 ran 40 more ticks and was reaped, and children no sample saw ran 50. make's
    // cutime is 30 + 40 + 50 = 120; 30 of it was charged while cc1 was seen: 90 are new.
    std::fs::remove_dir_all(root.join("20")).unwrap();
    fake::machine(root, 200, 1000).unwrap();
    fake::set_stat(root, 10, "make", 1, 10, 120, 0).unwrap();
    step(&mut a, 2.0, 200.0);
    let s = a.snapshot();
    // 1 J per busy tick: 40 J in the first interval, 90 J in the second (before: 0 J).
    let cg = find(&s, Partition::Cgroup, "/system.slice/make.service", "pkg");
    assert!((cg - 130.0).abs() < 1e-9, "{cg}");
    assert!((find(&s, Partition::Unattributed, "", "pkg") - 70.0).abs() < 1e-9);
}

#[test]
fn vanished_process_leaves_process_scope_but_not_its_cgroup() {
    let t = tempfile::tempdir().unwrap();
    tree(t.path(), 0);
    let mut a = Attributor::new(
        Box::new(ProcFs::new(t.path())),
        Options {
            processes: true,
            cmdline: true,
            ..Options::default()
        },
    );
    a.step(0.0, &[dev("pkg", DeviceKind::CpuPackage, 0.0)]);
    tree(t.path(), 1);
    a.step(1.0, &[dev("pkg", DeviceKind::CpuPackage, 100.0)]);
    let s = a.snapshot();
    assert!(s.series.iter().any(|x| x
        .labels
        .iter()
        .any(|(k, v)| k == "cmdline" && v.contains("trainer"))));
    // pid 10's stat disappears (it exited between listing and reading counts the same).
    std::fs::remove_dir_all(t.path().join("10")).unwrap();
    a.step(2.0, &[dev("pkg", DeviceKind::CpuPackage, 100.0)]);
    // Within the retention (default 300 s) its series stays, with its final 25 J.
    let s = a.snapshot();
    assert!((find(&s, Partition::Process, "10", "pkg") - 25.0).abs() < 1e-9);
    assert!((find(&s, Partition::Cgroup, "/system.slice/a.service", "pkg") - 25.0).abs() < 1e-9);
    // After it, the process and its now empty cgroup are no longer exported; their 25 J are
    // the ended energy of their scopes (a gauge apart: never a second counter of the same
    // energy), so series + ended + unattributed still make the node.
    a.step(302.5, &[dev("pkg", DeviceKind::CpuPackage, 100.0)]);
    let s = a.snapshot();
    assert_eq!(find(&s, Partition::Process, "10", "pkg"), 0.0);
    assert_eq!(
        find(&s, Partition::Cgroup, "/system.slice/a.service", "pkg"),
        0.0
    );
    assert!((ended(&s, Partition::Process, "pkg") - 25.0).abs() < 1e-9);
    assert!((ended(&s, Partition::Cgroup, "pkg") - 25.0).abs() < 1e-9);
    assert!(
        (find(&s, Partition::Process, "", "pkg") - find(&s, Partition::Cgroup, "", "pkg")).abs()
            < 1e-9
    );
    assert_partition(&s, Partition::Cgroup, "pkg");
    assert_partition(&s, Partition::Process, "pkg");
    // The live processes' series stay.
    assert!((find(&s, Partition::Process, "11", "pkg") - 15.0).abs() < 1e-9);
}

#[test]
fn recycled_pid_is_a_new_process_not_a_huge_step() {
    let t = tempfile::tempdir().unwrap();
    fake::machine(t.path(), 0, 1000).unwrap();
    fake::process(t.path(), 5, "a", 1000, 0, Some(0), Some("0::/x\n"), &[]).unwrap();
    let mut a = Attributor::new(Box::new(ProcFs::new(t.path())), Options::default());
    a.step(0.0, &[dev("pkg", DeviceKind::CpuPackage, 0.0)]);
    fake::machine(t.path(), 100, 1000).unwrap();
    // Same pid, later start time, 10 ticks so far.
    std::fs::write(
        t.path().join("5/stat"),
        "5 (b) S 1 5 5 0 -1 0 0 0 0 0 10 0 0 0 20 0 1 0 9999 0 0\n",
    )
    .unwrap();
    a.step(1.0, &[dev("pkg", DeviceKind::CpuPackage, 50.0)]);
    let s = a.snapshot();
    // 10 of 100 busy ticks → 5 J, not min(1, 1010/100) of the interval.
    assert!((find(&s, Partition::Cgroup, "/x", "pkg") - 5.0).abs() < 1e-9);
}

#[test]
fn recycled_pid_with_the_same_name_starts_a_new_series() {
    let t = tempfile::tempdir().unwrap();
    fake::machine(t.path(), 0, 1000).unwrap();
    fake::process(t.path(), 5, "w", 0, 0, Some(0), Some("0::/x\n"), &[]).unwrap();
    let opts = Options {
        processes: true,
        ..Options::default()
    };
    let mut a = Attributor::new(Box::new(ProcFs::new(t.path())), opts);
    a.step(0.0, &[dev("pkg", DeviceKind::CpuPackage, 0.0)]);
    fake::machine(t.path(), 100, 1000).unwrap();
    fake::set_ticks(t.path(), 5, "w", 40, 0).unwrap();
    a.step(1.0, &[dev("pkg", DeviceKind::CpuPackage, 50.0)]);
    fake::machine(t.path(), 200, 1000).unwrap();
    // pid 5 exited and was reused by another `w` (later start time, 10 ticks so far).
    std::fs::write(
        t.path().join("5/stat"),
        "5 (w) S 1 5 5 0 -1 0 0 0 0 0 10 0 0 0 20 0 1 0 9999 0 0\n",
    )
    .unwrap();
    a.step(2.0, &[dev("pkg", DeviceKind::CpuPackage, 100.0)]);
    let s = a.snapshot();
    // Two series told apart by their start time: the first `w` keeps its final 20 J (so
    // Prometheus reads it until --retain), the new one has only its own 5 J.
    let of = |start: &str| {
        s.series
            .iter()
            .filter(|x| x.labels.iter().any(|(k, v)| k == "start" && v == start))
            .map(|x| x.energy_j())
            .sum::<f64>()
    };
    assert!((of("1000") - 20.0).abs() < 1e-9);
    assert!((of("9999") - 5.0).abs() < 1e-9);
    assert!((find(&s, Partition::Process, "5", "pkg") - 25.0).abs() < 1e-9);
    assert!((find(&s, Partition::Cgroup, "/x", "pkg") - 25.0).abs() < 1e-9);
}

/// Sum of the series of `scope` on `device`, its ended energy and unattributed, against the
/// node total.
fn assert_partition(s: &Snapshot, scope: Partition, device: &str) {
    let node = find(s, Partition::Node, "", device);
    let parts = find(s, scope, "", device)
        + ended(s, scope, device)
        + find(s, Partition::Unattributed, "", device);
    assert!(
        (parts - node).abs() < 1e-9,
        "{device}: {scope:?} series + unattributed = {parts} J, node {node} J"
    );
}

fn gpu_dev(id: &str, j: f64) -> DeviceEnergy {
    dev(id, DeviceKind::Gpu, j)
}

fn sample(pid: u32, ts: u64, sm: u32) -> crate::gpu::ProcessSample {
    crate::gpu::ProcessSample {
        pid,
        timestamp_us: ts,
        sm_percent: sm,
    }
}

#[test]
fn gpu_energy_split_by_utilisation_else_processes_else_unattributed() {
    use crate::gpu::fake::{FakeBackend, FakeGpu, FakeUsage};
    use gpu::BackendUsage;
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    fake::machine(root, 0, 1000).unwrap();
    let slurm = |j: u32| format!("0::/system.slice/slurmstepd.scope/job_{j}/step_0/user/task_0\n");
    fake::process(root, 20, "train-a", 0, 0, Some(0), Some(&slurm(42)), &[]).unwrap();
    fake::process(root, 21, "train-b", 0, 0, Some(0), Some(&slurm(43)), &[]).unwrap();
    fake::process(
        root,
        22,
        "viz",
        0,
        0,
        Some(0),
        Some("0::/user.slice/user-0.slice\n"),
        &["SLURM_JOB_ID=44"],
    )
    .unwrap();
    let gpus: Vec<FakeGpu> = (0..4)
        .map(|i| FakeGpu {
            name: "Fake H100".into(),
            uuid: format!("GPU-{i}"),
            mj_per_read: Some(1),
            power_mw: None,
            reads: Default::default(),
            usage: Default::default(),
        })
        .collect();
    let usage: Vec<_> = gpus.iter().map(|g| g.usage.clone()).collect();
    let set =
        |i: usize, samples: Option<Vec<crate::gpu::ProcessSample>>, procs: Option<Vec<u32>>| {
            *usage[i].lock().unwrap() = FakeUsage {
                samples,
                processes: procs,
            };
        };
    let mut a = Attributor::new(
        Box::new(ProcFs::new(root)),
        Options {
            processes: true,
            ..Options::default()
        },
    )
    .with_gpu(Box::new(BackendUsage::new(FakeBackend(gpus))));
    let energies = |e: [f64; 4]| -> Vec<DeviceEnergy> {
        e.iter()
            .enumerate()
            .map(|(i, j)| gpu_dev(&format!("gpu:{i}"), *j))
            .collect()
    };
    a.step(0.0, &energies([0.0; 4]));
    // gpu:0: per-process samples, 60 + 0 % for pid 20 and 20 % for pid 21 → 3:1.
    set(
        0,
        Some(vec![
            sample(20, 10, 60),
            sample(21, 10, 20),
            sample(20, 20, 0),
        ]),
        Some(vec![20, 21]),
    );
    // gpu:1: no per-process samples from the driver; two processes hold it (22 twice, as a
    // compute and a graphics context) → halves.
    set(1, None, Some(vec![21, 22, 22]));
    // gpu:2: nobody on it → unattributed.
    set(2, Some(vec![]), Some(vec![]));
    // gpu:3: a pid /proc does not show (another pid namespace) → cgroup and user `unknown`.
    set(3, None, Some(vec![99]));
    a.step(1.0, &energies([100.0, 40.0, 10.0, 8.0]));
    let s = a.snapshot();
    let close = |got: f64, want: f64, what: &str| {
        assert!((got - want).abs() < 1e-9, "{what}: {got} J, want {want} J");
    };
    close(
        find(&s, Partition::Process, "20", "gpu:0"),
        75.0,
        "pid 20 on gpu:0",
    );
    close(
        find(&s, Partition::Process, "21", "gpu:0"),
        25.0,
        "pid 21 on gpu:0",
    );
    close(
        find(&s, Partition::Job, "42", "gpu:0"),
        75.0,
        "job 42 on gpu:0",
    );
    close(
        find(&s, Partition::Job, "43", "gpu:0"),
        25.0,
        "job 43 on gpu:0",
    );
    close(
        find(&s, Partition::Process, "21", "gpu:1"),
        20.0,
        "pid 21 on gpu:1",
    );
    close(
        find(&s, Partition::Process, "22", "gpu:1"),
        20.0,
        "pid 22 on gpu:1",
    );
    close(
        find(&s, Partition::Job, "44", "gpu:1"),
        0.0,
        "SLURM_JOB_ID=44 in the environment is no job",
    );
    close(
        find(&s, Partition::Unattributed, "", "gpu:2"),
        10.0,
        "idle gpu:2",
    );
    close(
        find(&s, Partition::Cgroup, UNKNOWN, "gpu:3"),
        8.0,
        "unseen pid's cgroup",
    );
    close(
        find(&s, Partition::Process, "99", "gpu:3"),
        8.0,
        "unseen pid 99",
    );
    // Every process of gpu:0 is in a job: jobs, like cgroups, users and processes, sum to the
    // node with nothing unattributed (gpu:1's pid 22 is in no job).
    for d in ["gpu:0", "gpu:1"] {
        close(find(&s, Partition::Unattributed, "", d), 0.0, d);
    }
    close(
        find(&s, Partition::Job, "", "gpu:0"),
        find(&s, Partition::Node, "", "gpu:0"),
        "gpu:0",
    );
    for d in ["gpu:0", "gpu:1", "gpu:2", "gpu:3"] {
        for scope in [Partition::Cgroup, Partition::User, Partition::Process] {
            assert_partition(&s, scope, d);
        }
    }
    assert_eq!(
        s.gpu_rules,
        vec![
            ("gpu:0".into(), GpuRule::Utilisation),
            ("gpu:1".into(), GpuRule::Processes),
            ("gpu:2".into(), GpuRule::Unattributed),
            ("gpu:3".into(), GpuRule::Processes),
        ]
    );
    // Next interval: the driver still holds the old samples (timestamps 10, 20) and a new one
    // for pid 21; only samples newer than the last seen count, so all 50 J go to pid 21.
    set(
        0,
        Some(vec![
            sample(20, 10, 60),
            sample(21, 10, 20),
            sample(20, 20, 0),
            sample(21, 30, 50),
        ]),
        Some(vec![20, 21]),
    );
    a.step(2.0, &energies([150.0, 40.0, 10.0, 8.0]));
    let s = a.snapshot();
    close(
        find(&s, Partition::Process, "20", "gpu:0"),
        75.0,
        "pid 20 after",
    );
    close(
        find(&s, Partition::Process, "21", "gpu:0"),
        75.0,
        "pid 21 after",
    );
    let p21 = s
        .series
        .iter()
        .find(|x| {
            x.scope == Partition::Process
                && x.device == "gpu:0"
                && x.labels.iter().any(|(_, v)| v == "21")
        })
        .unwrap();
    assert_eq!(p21.power_w, Some(50.0));
    for scope in [
        Partition::Cgroup,
        Partition::User,
        Partition::Process,
        Partition::Job,
    ] {
        assert_partition(&s, scope, "gpu:0");
    }
}

#[test]
fn ended_members_leave_after_the_retention_and_state_stays_bounded() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    fake::machine(root, 0, 1000).unwrap();
    let mut a = Attributor::new(
        Box::new(ProcFs::new(root)),
        Options {
            processes: true,
            cmdline: false,
            retain_s: 2.0,
            ..Options::default()
        },
    );
    // Each second a new process starts in its own cgroup and Slurm job, with its own user, and
    // the one before it exits: 200 short jobs.
    let mut busy = 0;
    let mut most = 0;
    let mut ended_before = 0.0;
    for k in 0..200u32 {
        if k > 0 {
            std::fs::remove_dir_all(root.join((1000 + k - 1).to_string())).unwrap();
        }
        busy += 100;
        fake::machine(root, busy, 1000).unwrap();
        let cg = format!("0::/system.slice/slurmstepd.scope/job_{k}/step_0\n");
        fake::process(root, 1000 + k, "job", 50, 0, Some(k), Some(&cg), &[]).unwrap();
        a.step(
            f64::from(k),
            &[dev("pkg", DeviceKind::CpuPackage, 10.0 * f64::from(k))],
        );
        let s = a.snapshot();
        for scope in [
            Partition::Cgroup,
            Partition::User,
            Partition::Process,
            Partition::Job,
        ] {
            assert_partition(&s, scope, "pkg");
        }
        let e = ended(&s, Partition::Cgroup, "pkg");
        assert!(e >= ended_before, "ended energy went backwards at {k}");
        ended_before = e;
        most = most.max(a.members());
        if k == 10 {
            // Job 7's process was last seen at t = 7: still shown at t = 9 (2 s after), gone
            // at t = 10 with its energy in the ended gauge.
            assert_eq!(find(&s, Partition::Job, "7", "pkg"), 0.0);
            assert!(find(&s, Partition::Job, "8", "pkg") > 0.0);
            assert!(ended(&s, Partition::Job, "pkg") > 0.0);
        }
    }
    // Live: 1 process → 4 members; within retention: 2 more processes → 8 (the remembered
    // ended ones are not members). Without retention it would be 4 × 200.
    assert!(most <= 16, "members held: {most}");
    let s = a.snapshot();
    assert!(s.series.len() <= 20, "{} series", s.series.len());
    assert_eq!(s.ended.len(), 4, "one ended gauge per scope and device");
    // Nothing lost: the 199 intervals of 10 J each, half of the busy ticks attributed (50 of
    // 100 per interval; the very first process had no previous sample and counts from k = 1).
    let node = find(&s, Partition::Node, "", "pkg");
    assert_eq!(node, 1990.0);
    let cg = find(&s, Partition::Cgroup, "", "pkg") + ended(&s, Partition::Cgroup, "pkg");
    assert!((cg - 995.0).abs() < 1e-6);
}

/// A series' identity: scope, labels, device.
type Key = (Partition, Vec<(String, String)>, String);

/// Regression: `unattributed` was node − Σ cgroups recomputed in floating point every sample,
/// and dipped by ~1e-17–1e-12 J when an interval was attributed whole (here: 0.1 J steps split
/// 30:70, the float sum of the shares drifts around the node's total; the dips at steps 3, 29
/// and 32). Prometheus reads any decrease as a counter reset and adds the whole total again.
#[test]
fn no_series_ever_decreases_when_whole_intervals_are_attributed() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let mut a = Attributor::new(
        Box::new(ProcFs::new(root)),
        Options {
            processes: true,
            ..Options::default()
        },
    );
    let mut last: HashMap<Key, f64> = HashMap::new();
    for k in 0..60u64 {
        fake::machine(root, 100 * k, 1000).unwrap();
        fake::process(root, 1, "a", 30 * k, 0, Some(0), Some("0::/a\n"), &[]).unwrap();
        fake::process(root, 2, "b", 70 * k, 0, Some(0), Some("0::/b\n"), &[]).unwrap();
        a.step(
            k as f64,
            &[dev("pkg", DeviceKind::CpuPackage, k as f64 * 0.1)],
        );
        for x in a.snapshot().series {
            let key = (x.scope, x.labels.clone(), x.device.clone());
            let before = last.insert(key, x.energy_j()).unwrap_or(0.0);
            assert!(
                x.energy_j() >= before,
                "step {k}: {:?} {:?} went from {before} to {} J",
                x.scope,
                x.labels,
                x.energy_j()
            );
        }
    }
}

/// An ended cgroup that comes back resumes its counter, so Prometheus (which sees the series
/// go stale and return higher) counts only its new energy; with nothing remembered it starts
/// again at 0, a counter reset.
#[test]
fn an_ended_cgroup_that_comes_back_resumes_its_counter() {
    for (remember, want) in [(DEFAULT_REMEMBER_ENDED, 15.0), (0, 5.0)] {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let mut a = Attributor::new(
            Box::new(ProcFs::new(root)),
            Options {
                retain_s: 1.0,
                remember_ended: remember,
                ..Options::default()
            },
        );
        fake::machine(root, 0, 1000).unwrap();
        fake::process(root, 1, "a", 0, 0, Some(0), Some("0::/cron.service\n"), &[]).unwrap();
        a.step(0.0, &[dev("pkg", DeviceKind::CpuPackage, 0.0)]);
        fake::machine(root, 100, 1000).unwrap();
        fake::set_ticks(root, 1, "a", 100, 0).unwrap();
        a.step(1.0, &[dev("pkg", DeviceKind::CpuPackage, 10.0)]);
        std::fs::remove_dir_all(root.join("1")).unwrap();
        a.step(5.0, &[dev("pkg", DeviceKind::CpuPackage, 10.0)]);
        let s = a.snapshot();
        assert_eq!(find(&s, Partition::Cgroup, "/cron.service", "pkg"), 0.0);
        assert_eq!(ended(&s, Partition::Cgroup, "pkg"), 10.0);
        // The service runs again (a new process, ticks from 0).
        fake::machine(root, 200, 1000).unwrap();
        fake::process(
            root,
            2,
            "a",
            50,
            0,
            Some(0),
            Some("0::/cron.service\n"),
            &[],
        )
        .unwrap();
        a.step(6.0, &[dev("pkg", DeviceKind::CpuPackage, 20.0)]);
        let s = a.snapshot();
        assert_eq!(
            find(&s, Partition::Cgroup, "/cron.service", "pkg"),
            want,
            "remember {remember}"
        );
        assert_partition(&s, Partition::Cgroup, "pkg");
    }
}

mod churn {
    //! Property tests over random process churn: processes start (reusing pids), run, exit,
    //! move between cgroups, users and jobs; devices advance by arbitrary float amounts; time
    //! jumps past the retention. Checked after every step, as Prometheus would see each one.
    use super::*;
    use proptest::prelude::*;
    use std::sync::{Arc, Mutex};

    #[derive(Default)]
    struct World {
        busy: u64,
        procs: Vec<ProcessInfo>,
    }

    /// `/proc` in memory: the property test changes it between steps.
    struct MemView(Arc<Mutex<World>>);

    impl ProcView for MemView {
        fn busy_ticks(&self) -> Option<u64> {
            self.0.lock().ok().map(|w| w.busy)
        }
        fn mem_total_bytes(&self) -> Option<u64> {
            Some(1 << 30)
        }
        fn page_size(&self) -> u64 {
            4096
        }
        fn pids(&self) -> Vec<u32> {
            let w = self.0.lock().unwrap();
            w.procs.iter().map(|p| p.pid).collect()
        }
        fn process(&self, pid: u32, _: bool) -> Option<ProcessInfo> {
            let w = self.0.lock().unwrap();
            w.procs.iter().find(|p| p.pid == pid).cloned()
        }
    }

    #[derive(Debug, Clone)]
    struct Step {
        dt: f64,
        /// (pid, cgroup, uid, job): a pid already running is recycled (a new start time).
        spawn: Vec<(u32, u8, u8, Option<u8>)>,
        exits: Vec<u32>,
        /// CPU ticks and resident pages of the i-th live process in this interval.
        ticks: Vec<(u64, u64)>,
        idle_busy: u64,
        d_pkg: f64,
        d_dram: f64,
    }

    fn step() -> impl Strategy<Value = Step> {
        (
            prop_oneof![0.05..2.0f64, 2.0..40.0f64],
            prop::collection::vec((1..12u32, 0..4u8, 0..3u8, prop::option::of(0..3u8)), 0..4),
            prop::collection::vec(1..12u32, 0..3),
            prop::collection::vec((0..60u64, 0..1000u64), 12),
            0..50u64,
            prop_oneof![Just(0.0), 0.0..5.0f64, Just(0.1)],
            0.0..1.0f64,
        )
            .prop_map(|(dt, spawn, exits, ticks, idle_busy, d_pkg, d_dram)| Step {
                dt,
                spawn,
                exits,
                ticks,
                idle_busy,
                d_pkg,
                d_dram,
            })
    }

    /// Apply one step to the fake world; `start` numbers process start times.
    fn apply(w: &mut World, s: &Step, start: &mut u64) {
        w.procs.retain(|p| !s.exits.contains(&p.pid));
        for &(pid, cg, uid, job) in &s.spawn {
            w.procs.retain(|p| p.pid != pid);
            *start += 1;
            let cgroup = match job {
                Some(j) => format!("/system.slice/slurmstepd.scope/job_{j}/step_0"),
                None => format!("/system.slice/s{cg}.service"),
            };
            w.procs.push(ProcessInfo {
                pid,
                start_ticks: *start,
                comm: format!("p{}", pid % 3),
                ticks: 0,
                ppid: 1,
                child_ticks: 0,
                rss_pages: 0,
                uid: Some(u32::from(uid) + 60_000),
                cgroup: Some(cgroup),
                job: job.map(|j| j.to_string()),
                cmdline: None,
            });
        }
        let mut used = 0;
        for (p, (t, rss)) in w.procs.iter_mut().zip(&s.ticks) {
            p.ticks += t;
            p.rss_pages = *rss;
            used += t;
        }
        w.busy += used + s.idle_busy;
    }

    /// Prometheus's `increase` over every scrape so far, per series: a value below the last
    /// one seen is a reset (the new value is all increase), a new series counts from 0.
    fn increase(inc: &mut HashMap<Key, u64>, last: &mut HashMap<Key, u64>, snap: &Snapshot) {
        for x in &snap.series {
            let k = (x.scope, x.labels.clone(), x.device.clone());
            let before = last.insert(k.clone(), x.energy_uj);
            let d = match before {
                Some(b) if x.energy_uj >= b => x.energy_uj - b,
                _ => x.energy_uj,
            };
            *inc.entry(k).or_insert(0) += d;
        }
    }

    fn total(map: &HashMap<Key, u64>, scope: Partition, device: &str) -> u64 {
        map.iter()
            .filter(|((s, _, d), _)| *s == scope && d == device)
            .map(|(_, v)| v)
            .sum()
    }

    fn ended_uj(s: &Snapshot, scope: Partition, device: &str) -> u64 {
        s.ended
            .iter()
            .filter(|x| x.scope == scope && x.device == device)
            .map(|x| x.energy_uj)
            .sum()
    }

    fn series_uj(s: &Snapshot, scope: Partition, device: &str) -> u64 {
        s.series
            .iter()
            .filter(|x| x.scope == scope && x.device == device)
            .map(|x| x.energy_uj)
            .sum()
    }

    /// Run `steps`; check every series never decreases while it is exported (and, when ended
    /// members are remembered, not across a gap either), the parts make the node exactly at
    /// every step, and Prometheus's `increase` summed over any scope's series plus unattributed
    /// is the node's increase to the µJ: nothing counted twice, nothing lost.
    fn run(
        steps: &[Step],
        retain_s: f64,
        remember: bool,
        max_process_series: Option<usize>,
    ) -> Result<(), TestCaseError> {
        let world = Arc::new(Mutex::new(World::default()));
        let opts = Options {
            processes: true,
            cmdline: false,
            retain_s,
            remember_ended: if remember { DEFAULT_REMEMBER_ENDED } else { 1 },
            max_process_series,
        };
        let mut a = Attributor::new(Box::new(MemView(Arc::clone(&world))), opts);
        let (mut t, mut pkg, mut dram, mut start) = (0.0, 0.0, 0.0, 0u64);
        let (mut inc, mut last) = (HashMap::new(), HashMap::new());
        let mut prev: HashMap<Key, u64> = HashMap::new();
        for (i, s) in steps.iter().enumerate() {
            apply(&mut world.lock().unwrap(), s, &mut start);
            t += s.dt;
            pkg += s.d_pkg;
            dram += s.d_dram;
            a.step(
                t,
                &[
                    dev("pkg", DeviceKind::CpuPackage, pkg),
                    dev("dram", DeviceKind::Dram, dram),
                ],
            );
            let snap = a.snapshot();
            let now: HashMap<Key, u64> = snap
                .series
                .iter()
                .map(|x| ((x.scope, x.labels.clone(), x.device.clone()), x.energy_uj))
                .collect();
            for (k, v) in &now {
                let seen = if remember { last.get(k) } else { prev.get(k) };
                if let Some(b) = seen {
                    prop_assert!(v >= b, "step {i}: {k:?} went from {b} to {v} µJ");
                }
            }
            if let Some(n) = max_process_series {
                let own: HashSet<&Vec<(String, String)>> = snap
                    .series
                    .iter()
                    .filter(|x| x.scope == Partition::Process && x.labels[0].1 != OTHER)
                    .map(|x| &x.labels)
                    .collect();
                prop_assert!(
                    own.len() <= n,
                    "step {i}: {} process series over {n}",
                    own.len()
                );
            }
            increase(&mut inc, &mut last, &snap);
            prev = now;
            for d in ["pkg", "dram"] {
                let node = series_uj(&snap, Partition::Node, d);
                let un = series_uj(&snap, Partition::Unattributed, d);
                prop_assert_eq!(node, to_uj(if d == "pkg" { pkg } else { dram }));
                for scope in [Partition::Cgroup, Partition::User, Partition::Process] {
                    let parts = series_uj(&snap, scope, d) + ended_uj(&snap, scope, d);
                    prop_assert_eq!(parts + un, node, "step {}: {:?} on {}", i, scope, d);
                    if remember {
                        let got = total(&inc, scope, d) + total(&inc, Partition::Unattributed, d);
                        let want = total(&inc, Partition::Node, d);
                        prop_assert_eq!(got, want, "step {}: increase of {:?} on {}", i, scope, d);
                    }
                }
                let jobs = series_uj(&snap, Partition::Job, d) + ended_uj(&snap, Partition::Job, d);
                prop_assert!(jobs <= node);
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn counters_never_decrease_and_increase_sums_to_the_node(
            steps in prop::collection::vec(step(), 1..50),
            retain_s in prop_oneof![Just(0.0), 0.0..30.0f64, Just(300.0)],
            remember in any::<bool>(),
            max_process_series in prop::option::of(0..4usize),
        ) {
            run(&steps, retain_s, remember, max_process_series)?;
        }
    }
}

/// `--max-process-series`: 10 processes, 3 series of their own, by CPU time; the rest in
/// `other`, and a newcomer with over twice the CPU time of the smallest takes its place.
#[test]
fn process_series_are_bounded_by_cpu_time_with_the_rest_in_other() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let mut a = Attributor::new(
        Box::new(ProcFs::new(root)),
        Options {
            processes: true,
            max_process_series: Some(3),
            ..Options::default()
        },
    );
    let mut busy = 0;
    for k in 0..4u64 {
        busy += 1000;
        fake::machine(root, busy, 1000).unwrap();
        for pid in 1..=10u32 {
            let ticks = u64::from(pid) * 10 * k;
            fake::process(root, pid, "w", ticks, 0, Some(0), Some("0::/x\n"), &[]).unwrap();
        }
        if k == 3 {
            // A newcomer far busier than any.
            fake::process(root, 99, "hog", 500, 0, Some(0), Some("0::/x\n"), &[]).unwrap();
        }
        a.step(
            k as f64,
            &[dev("pkg", DeviceKind::CpuPackage, 100.0 * k as f64)],
        );
        let s = a.snapshot();
        let own: Vec<String> = s
            .series
            .iter()
            .filter(|x| x.scope == Partition::Process && x.labels[0].1 != OTHER)
            .map(|x| x.labels[0].1.clone())
            .collect();
        assert!(own.len() <= 3, "step {k}: {own:?}");
        assert_partition(&s, Partition::Process, "pkg");
        if k == 3 {
            assert!(own.contains(&"99".to_string()), "{own:?}");
            assert!(find(&s, Partition::Process, OTHER, "pkg") > 0.0);
        }
    }
}

/// AMD GPUs through the KFD sysfs tree (`kfd`), on fake trees with the kernel's layout.
mod amd_kfd {
    use super::super::kfd::{self, KfdUsage};
    use super::*;
    use crate::hwmon::{fake as hw, AmdVisible};
    use crate::rapl::{fs_reader, FileReader};
    use proptest::prelude::*;
    use std::sync::Arc;

    const GIB: u64 = 1 << 30;

    /// Two MI300X (hwmon power, PCI c1:00.0 and c2:00.0) and their KFD topology: a CPU node,
    /// then gpu_ids 1111 and 2222 (real gpu_ids are hashes; any u32 does).
    fn two_cards(hwmon: &Path) {
        for (h, addr, uid) in [
            ("hwmon0", "0000:c1:00.0", "a0"),
            ("hwmon1", "0000:c2:00.0", "a1"),
        ] {
            hw::amdgpu(hwmon, h, addr, 0x74a1, uid, Some(300_000_000)).unwrap();
        }
        hw::kfd_cpu(hwmon, 0).unwrap();
        hw::kfd_gpu(hwmon, 1, 1111, "0000:c1:00.0", 0).unwrap();
        hw::kfd_gpu(hwmon, 2, 2222, "0000:c2:00.0", 0).unwrap();
    }

    /// A reader that fails like the kernel: EACCES for pid 103's files, and pid 104 exits as
    /// soon as its first file is read (its directory goes, later reads get ENOENT).
    fn racy_reader(kfd_root: std::path::PathBuf) -> FileReader {
        Arc::new(move |p: &Path| {
            if p.starts_with(kfd_root.join("proc/103")) {
                return Err(std::io::Error::from_raw_os_error(libc::EACCES));
            }
            let gone = kfd_root.join("proc/104");
            if p.starts_with(&gone) {
                let _ = std::fs::remove_dir_all(&gone);
            }
            std::fs::read_to_string(p)
        })
    }

    fn usage_of(u: &[(String, gpu::GpuUsage)], id: &str) -> gpu::GpuUsage {
        u.iter()
            .find(|(d, _)| d == id)
            .map(|(_, g)| g.clone())
            .unwrap_or_else(|| panic!("no usage for {id} in {u:?}"))
    }

    /// Two processes on the first card (CU occupancy 30 and 10), one on the second without a
    /// readable `cu_occupancy`, one whose files are unreadable, one that exits mid-read, one
    /// with a context but no VRAM: the first card splits 3:1, the second goes to its one user.
    #[test]
    fn users_by_vram_weights_by_cu_occupancy() {
        let t = tempfile::tempdir().unwrap();
        let hwmon = t.path().join("hwmon");
        two_cards(&hwmon);
        hw::kfd_process(&hwmon, 100, 1111, GIB, Some(30)).unwrap();
        hw::kfd_process(&hwmon, 101, 1111, 2 * GIB, Some(10)).unwrap();
        hw::kfd_process(&hwmon, 102, 2222, GIB, None).unwrap();
        hw::kfd_process(&hwmon, 103, 2222, GIB, Some(50)).unwrap();
        hw::kfd_process(&hwmon, 104, 1111, GIB, Some(50)).unwrap();
        hw::kfd_process(&hwmon, 105, 2222, 0, Some(0)).unwrap();
        let reader = racy_reader(kfd::root_beside(&hwmon));
        let mut src = kfd::kfd_usage(&hwmon, reader, &AmdVisible::all())
            .unwrap()
            .unwrap();
        let u = src.usage();
        let (rule, w) = gpu::gpu_weights(&usage_of(&u, "amdgpu:0"));
        assert_eq!(
            (rule, w),
            (GpuRule::Utilisation, vec![(100, 30.0), (101, 10.0)])
        );
        let (rule, w) = gpu::gpu_weights(&usage_of(&u, "amdgpu:1"));
        assert_eq!((rule, w), (GpuRule::Processes, vec![(102, 1.0)]));
        // The exited process is gone from the tree; asking again changes nothing.
        assert!(!kfd::root_beside(&hwmon).join("proc/104").exists());
        assert_eq!(src.usage(), u);
    }

    /// A CPX-partitioned card (one PCI function, several KFD nodes): a process on any
    /// partition uses the card, its occupancy summed over them. A card nobody uses is reported
    /// with no process, so its energy is unattributed.
    #[test]
    fn partitions_add_up_to_their_card_and_an_idle_card_is_unattributed() {
        let t = tempfile::tempdir().unwrap();
        let hwmon = t.path().join("hwmon");
        two_cards(&hwmon);
        hw::kfd_gpu(&hwmon, 3, 3333, "0000:c1:00.0", 1).unwrap();
        hw::kfd_process(&hwmon, 100, 1111, GIB, Some(4)).unwrap();
        hw::kfd_process(&hwmon, 100, 3333, GIB, Some(8)).unwrap();
        hw::kfd_process(&hwmon, 101, 3333, GIB, Some(4)).unwrap();
        let mut src = kfd::kfd_usage(&hwmon, fs_reader(), &AmdVisible::all())
            .unwrap()
            .unwrap();
        let u = src.usage();
        assert_eq!(
            gpu::gpu_weights(&usage_of(&u, "amdgpu:0")),
            (GpuRule::Utilisation, vec![(100, 12.0), (101, 4.0)])
        );
        assert_eq!(
            gpu::gpu_weights(&usage_of(&u, "amdgpu:1")),
            (GpuRule::Unattributed, vec![])
        );
    }

    #[test]
    fn no_kfd_tree_says_where_it_looked() {
        let t = tempfile::tempdir().unwrap();
        let hwmon = t.path().join("hwmon");
        hw::amdgpu(&hwmon, "hwmon0", "0000:c1:00.0", 0x74a1, "a", Some(1)).unwrap();
        let e = match kfd::kfd_usage(&hwmon, fs_reader(), &AmdVisible::all()) {
            Ok(_) => panic!("a KFD source without a KFD tree"),
            Err(e) => e,
        };
        // No AMD GPU at all: no source, and nothing to say.
        let none = t.path().join("empty");
        assert!(matches!(
            kfd::kfd_usage(&none, fs_reader(), &AmdVisible::all()),
            Ok(None)
        ));
        assert!(
            e.contains("kfd/kfd/topology/nodes") && e.contains("amdgpu:0 at 0000:c1:00.0"),
            "{e}"
        );
        let cards = [("amdgpu:0".to_string(), "0000:c1:00.0".to_string())];
        assert!(KfdUsage::new(&kfd::root_beside(&hwmon), fs_reader(), &cards).is_err());
    }

    /// Through the attributor, with /proc showing the processes: jobs get the KFD split.
    fn attribute(hwmon: &Path, proc: &Path, e0: f64, e1: f64) -> Snapshot {
        fake::machine(proc, 0, 1000).unwrap();
        for pid in [100, 101, 102] {
            let cg = format!("0::/system.slice/slurmstepd.scope/job_{pid}/step_0/user/task_0\n");
            fake::process(proc, pid, "hip", 0, 0, Some(0), Some(&cg), &[]).unwrap();
        }
        let src = kfd::kfd_usage(hwmon, fs_reader(), &AmdVisible::all())
            .unwrap()
            .unwrap();
        let o = Options {
            processes: true,
            ..Options::default()
        };
        let mut a = Attributor::new(Box::new(ProcFs::new(proc)), o)
            .with_gpu(Box::new(gpu::Chain(vec![src])));
        let d = |a: f64, b: f64| [gpu_dev("amdgpu:0", a), gpu_dev("amdgpu:1", b)];
        a.step(0.0, &d(0.0, 0.0));
        a.step(1.0, &d(e0, e1));
        a.snapshot()
    }

    #[test]
    fn jobs_get_their_processes_share_of_each_amd_gpu() {
        let t = tempfile::tempdir().unwrap();
        let hwmon = t.path().join("hwmon");
        two_cards(&hwmon);
        hw::kfd_process(&hwmon, 100, 1111, GIB, Some(30)).unwrap();
        hw::kfd_process(&hwmon, 101, 1111, GIB, Some(10)).unwrap();
        hw::kfd_process(&hwmon, 102, 2222, GIB, None).unwrap();
        let s = attribute(&hwmon, &t.path().join("proc"), 100.0, 40.0);
        let close = |got: f64, want: f64| assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        close(find(&s, Partition::Job, "100", "amdgpu:0"), 75.0);
        close(find(&s, Partition::Job, "101", "amdgpu:0"), 25.0);
        close(find(&s, Partition::Job, "102", "amdgpu:1"), 40.0);
        assert!(s
            .gpu_rules
            .contains(&("amdgpu:0".into(), GpuRule::Utilisation)));
        assert!(s
            .gpu_rules
            .contains(&("amdgpu:1".into(), GpuRule::Processes)));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Whatever the users, their VRAM and occupancy (readable or not): on every AMD GPU the
        /// processes' shares plus unattributed are the GPU's energy, to the µJ.
        #[test]
        fn attributed_plus_unattributed_is_the_gpu_energy(
            users in prop::collection::vec(
                (100..103u32, prop::bool::ANY, 0..3u64, prop::option::of(0..64u64)), 0..6),
            e0 in 0.0..5000.0f64,
            e1 in 0.0..5000.0f64,
        ) {
            let t = tempfile::tempdir().unwrap();
            let hwmon = t.path().join("hwmon");
            two_cards(&hwmon);
            for (pid, second, vram, cu) in &users {
                let gpu_id = if *second { 2222 } else { 1111 };
                hw::kfd_process(&hwmon, *pid, gpu_id, vram * GIB, *cu).unwrap();
            }
            let s = attribute(&hwmon, &t.path().join("proc"), e0, e1);
            for (dev, e) in [("amdgpu:0", e0), ("amdgpu:1", e1)] {
                let node = find(&s, Partition::Node, "", dev);
                prop_assert!((node - e).abs() < 1e-6, "{dev}: node {node} J, metered {e} J");
                let parts = find(&s, Partition::Process, "", dev)
                    + find(&s, Partition::Unattributed, "", dev);
                prop_assert!((parts - node).abs() < 1e-6, "{dev}: {parts} vs {node}");
            }
        }
    }
}

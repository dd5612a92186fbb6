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
                && (label.is_empty() || x.labels.iter().any(|(_, v)| v == label))
        })
        .map(|x| x.energy_j)
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
    // The job of the unreadable process still comes from its environment.
    assert!((find(&s, Partition::Job, "7", "pkg") - 10.0).abs() < 1e-9);
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
    // After it, the process and its now empty cgroup leave; their 25 J move to the `(ended)`
    // series of their scopes, so processes still sum to cgroups and cgroups to the node.
    a.step(302.5, &[dev("pkg", DeviceKind::CpuPackage, 100.0)]);
    let s = a.snapshot();
    assert_eq!(find(&s, Partition::Process, "10", "pkg"), 0.0);
    assert_eq!(
        find(&s, Partition::Cgroup, "/system.slice/a.service", "pkg"),
        0.0
    );
    assert!((find(&s, Partition::Process, ENDED, "pkg") - 25.0).abs() < 1e-9);
    assert!((find(&s, Partition::Cgroup, ENDED, "pkg") - 25.0).abs() < 1e-9);
    assert!(
        (find(&s, Partition::Process, "", "pkg") - find(&s, Partition::Cgroup, "", "pkg")).abs()
            < 1e-9
    );
    assert_partition(&s, Partition::Cgroup, "pkg");
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
    // The first `w` (20 J) ended; the new one has only its own 5 J, despite equal labels.
    assert!((find(&s, Partition::Process, "5", "pkg") - 5.0).abs() < 1e-9);
    assert!((find(&s, Partition::Process, ENDED, "pkg") - 20.0).abs() < 1e-9);
    assert!((find(&s, Partition::Cgroup, "/x", "pkg") - 25.0).abs() < 1e-9);
}

/// Sum of the series of `scope` on `device` plus unattributed, against the node total.
fn assert_partition(s: &Snapshot, scope: Partition, device: &str) {
    let node = find(s, Partition::Node, "", device);
    let parts = find(s, scope, "", device) + find(s, Partition::Unattributed, "", device);
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
        20.0,
        "job 44 (environ) on gpu:1",
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
    // Every process of gpu:0 and gpu:1 is in a job: jobs, like cgroups, users and processes,
    // sum to the node with nothing unattributed.
    for d in ["gpu:0", "gpu:1"] {
        close(find(&s, Partition::Unattributed, "", d), 0.0, d);
        close(
            find(&s, Partition::Job, "", d),
            find(&s, Partition::Node, "", d),
            d,
        );
    }
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
        let ended = find(&s, Partition::Cgroup, ENDED, "pkg");
        assert!(ended >= ended_before, "(ended) went backwards at {k}");
        ended_before = ended;
        most = most.max(a.members());
        if k == 10 {
            // Job 7's process was last seen at t = 7: still shown at t = 9 (2 s after), gone
            // at t = 10 with its energy in `(ended)`.
            assert_eq!(find(&s, Partition::Job, "7", "pkg"), 0.0);
            assert!(find(&s, Partition::Job, "8", "pkg") > 0.0);
            assert!(find(&s, Partition::Job, ENDED, "pkg") > 0.0);
        }
    }
    // Live: 1 process → 4 members; within retention: 2 more processes → 8; plus 4 `(ended)`
    // series. Without retention it would be 4 × 200.
    assert!(most <= 16, "members held: {most}");
    let s = a.snapshot();
    assert!(s.series.len() <= 20, "{} series", s.series.len());
    // Nothing lost: the 199 intervals of 10 J each, half of the busy ticks attributed (50 of
    // 100 per interval; the very first process had no previous sample and counts from k = 1).
    let node = find(&s, Partition::Node, "", "pkg");
    assert_eq!(node, 1990.0);
    assert!((find(&s, Partition::Cgroup, "", "pkg") - 995.0).abs() < 1e-6);
}

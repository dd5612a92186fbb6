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

fn find(s: &Snapshot, scope: Scope, label: &str, device: &str) -> f64 {
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
    assert_eq!(find(&s, Scope::Node, "", "pkg"), 100.0);
    assert!((find(&s, Scope::Cgroup, "/system.slice/a.service", "pkg") - 25.0).abs() < 1e-9);
    assert!((find(&s, Scope::Cgroup, "/slurm/uid_0/job_42/step_0", "pkg") - 15.0).abs() < 1e-9);
    assert!((find(&s, Scope::Cgroup, UNKNOWN, "pkg") - 10.0).abs() < 1e-9);
    assert!((find(&s, Scope::User, UNKNOWN, "pkg") - 10.0).abs() < 1e-9);
    assert!((find(&s, Scope::User, "root", "pkg") - 40.0).abs() < 1e-9);
    assert!((find(&s, Scope::Job, "42", "pkg") - 15.0).abs() < 1e-9);
    // The job of the unreadable process still comes from its environment.
    assert!((find(&s, Scope::Job, "7", "pkg") - 10.0).abs() < 1e-9);
    assert!((find(&s, Scope::Unattributed, "", "pkg") - 50.0).abs() < 1e-9);
    // DRAM: 100 kB and 200 kB of 1000 kB → 10 % and 20 % of 10 J.
    assert!((find(&s, Scope::Cgroup, "/system.slice/a.service", "dram") - 1.0).abs() < 1e-9);
    assert!((find(&s, Scope::Unattributed, "", "dram") - 7.0).abs() < 1e-9);
    for d in ["pkg", "dram"] {
        let parts = find(&s, Scope::Cgroup, "", d) + find(&s, Scope::Unattributed, "", d);
        assert!((parts - find(&s, Scope::Node, "", d)).abs() < 1e-9, "{d}");
        let users = find(&s, Scope::User, "", d) + find(&s, Scope::Unattributed, "", d);
        assert!((users - find(&s, Scope::Node, "", d)).abs() < 1e-9, "{d}");
    }
    // Power over the 1 s interval equals the energy of that interval.
    let p = s
        .series
        .iter()
        .find(|x| x.scope == Scope::Node && x.device == "pkg")
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
    let s = a.snapshot();
    assert_eq!(find(&s, Scope::Process, "10", "pkg"), 0.0);
    assert!((find(&s, Scope::Cgroup, "/system.slice/a.service", "pkg") - 25.0).abs() < 1e-9);
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
    assert!((find(&s, Scope::Cgroup, "/x", "pkg") - 5.0).abs() < 1e-9);
}

//! A fake node for exporter tests: powercap and /proc trees in a temp dir (the real layouts) and
//! an `amdahl exporter` started over them on an ephemeral loopback port.

use super::real::{spawn, wait_for, Running};
use amdahl_meter::attribution::procs::fake as fproc;
use amdahl_meter::rapl::fake as fcap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub const E: &str = "amdahl_energy_joules_total";
/// The gauge of the energy of members no longer exported.
pub const ENDED: &str = "amdahl_energy_ended_joules";
pub const PKG_MAX: u64 = 50_000_000; // 50 J range, so a test can wrap it quickly.

pub struct Trees {
    pub dir: tempfile::TempDir,
}

impl Trees {
    pub fn powercap(&self) -> PathBuf {
        self.dir.path().join("powercap")
    }
    pub fn proc(&self) -> PathBuf {
        self.dir.path().join("proc")
    }
}

/// package-0 (µJ, 50 J range) with a dram sub-zone; three processes: cgroup v2, cgroup v1 in a
/// Slurm job, and one whose status and cgroup are unreadable.
pub fn trees() -> Trees {
    let dir = tempfile::tempdir().unwrap();
    let t = Trees { dir };
    fcap::zone(&t.powercap(), "intel-rapl:0", "package-0", 0, PKG_MAX).unwrap();
    fcap::zone(&t.powercap(), "intel-rapl:0:2", "dram", 0, 65_712_999_613).unwrap();
    fproc::machine(&t.proc(), 0, 1_000_000).unwrap();
    fproc::process(
        &t.proc(),
        100,
        "trainer",
        0,
        1000,
        Some(0),
        Some("0::/system.slice/train.service\n"),
        &[],
    )
    .unwrap();
    fproc::process(
        &t.proc(),
        200,
        "solver",
        0,
        500,
        Some(0),
        Some("5:cpu,cpuacct:/slurm/uid_0/job_42/step_0\n1:name=systemd:/user.slice\n"),
        &[],
    )
    .unwrap();
    fproc::process(&t.proc(), 300, "hidden", 0, 0, None, None, &[]).unwrap();
    t
}

pub fn set_energy(root: &Path, zone: &str, uj: u64) {
    let dir = if zone.matches(':').count() == 2 {
        root.join("intel-rapl:0").join(zone)
    } else {
        root.join(zone)
    };
    std::fs::write(dir.join("energy_uj"), format!("{uj}\n")).unwrap();
}

/// Start the exporter on an ephemeral loopback port; returns it and its address.
pub fn start(t: &Trees, extra: &[&str]) -> (Running, SocketAddr) {
    start_with(t, extra, |_| {})
}

/// [`start`], with `adjust` applied to the command first (limits, environment).
pub fn start_with(
    t: &Trees,
    extra: &[&str],
    adjust: impl FnOnce(&mut Command),
) -> (Running, SocketAddr) {
    let ready = t.dir.path().join("ready");
    let _ = std::fs::remove_file(&ready);
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("amdahl"));
    c.args([
        "exporter",
        "--listen",
        "127.0.0.1:0",
        "--interval",
        "100ms",
        "--no-gpu",
        "--ready-file",
    ])
    .arg(&ready)
    .arg("--powercap-root")
    .arg(t.powercap())
    .arg("--proc-root")
    .arg(t.proc())
    .args(extra);
    adjust(&mut c);
    let r = spawn(c, &t.dir.path().join("exporter.log"));
    let addr = wait_for(Duration::from_secs(20), "the exporter's ready file", || {
        std::fs::read_to_string(&ready).ok()?.trim().parse().ok()
    });
    (r, addr)
}

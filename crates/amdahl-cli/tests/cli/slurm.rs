//! A real single-node Slurm (Debian `slurm-wlm` and `munge`): munged, slurmctld and slurmd are
//! started here from a generated config in a temp dir (loopback, ephemeral ports, every path
//! inside the temp dir) and stopped by PID. Jobs run `amdahl run` under `sbatch` and `srun`;
//! `amdahl scale` sweeps `srun -n {n}`; `amdahl exporter` attributes two concurrent jobs
//! separately; the Prolog/Epilog scripts of scripts/slurm write a record per job. Needs root
//! (slurmd starts jobs as their user): skips with a message when not root; where Slurm is
//! missing it skips too, except under CI=true (`.ci/run` installs it), where that fails.

use crate::support::fake_node::E;
use crate::support::real::{free_port, get, parse_metrics, require, spawn, sum, wait_for, Running};
use crate::support::ScrubEnv;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One Slurm at a time: the tests share the daemons' ports and the machine's 2 cores.
static SLURM: Mutex<()> = Mutex::new(());

struct Cluster {
    dir: tempfile::TempDir,
    conf: PathBuf,
    _daemons: Vec<Running>,
}

impl Cluster {
    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf)
            .scrub_env()
            .current_dir(self.dir.path());
        c
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
}

fn short_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .split('.')
        .next()
        .unwrap_or("localhost")
        .to_string()
}

/// munged + slurmctld + slurmd, or None (with the reason printed) where they cannot run.
fn cluster(extra_conf: &str) -> Option<Cluster> {
    let munged = require("munged", "munge")?;
    let mungekey = require("mungekey", "munge")?;
    let ctld = require("slurmctld", "slurm-wlm")?;
    let slurmd = require("slurmd", "slurm-wlm")?;
    require("srun", "slurm-wlm")?;
    if !nix_is_root() {
        // Not a missing program but a missing privilege: slurmd must be root to start jobs as
        // their user. Skipped even under CI=true (`.ci/run` as root runs it).
        crate::support::real::skip(
            "the Slurm tests need root (slurmd launches jobs as their user)",
        );
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = d.join("munge");
    for sub in ["state", "spool", "munge"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&m, std::fs::Permissions::from_mode(0o700)).unwrap();
    let key = m.join("munge.key");
    let st = Command::new(mungekey)
        .arg("-c")
        .arg("-k")
        .arg(&key)
        .status()
        .unwrap();
    assert!(st.success(), "mungekey failed");
    let sock = m.join("munge.sock");
    let mut daemons = Vec::new();
    let mut c = Command::new(munged);
    c.arg("-F") // foreground: stays our child, stopped by PID
        .arg("-f")
        .arg(format!("--key-file={}", key.display()))
        .arg(format!("--socket={}", sock.display()))
        .arg(format!("--pid-file={}", m.join("munged.pid").display()))
        .arg(format!("--log-file={}", m.join("munged.log").display()))
        .arg(format!("--seed-file={}", m.join("seed").display()));
    daemons.push(spawn(c, &d.join("munged.out")));
    wait_for(Duration::from_secs(10), "munged's socket", || {
        sock.exists().then_some(())
    });
    let host = short_hostname();
    let (p1, p2) = (free_port(), free_port());
    let conf = d.join("slurm.conf");
    // Slurm's cgroup plugins (v1: the hierarchies this container mounts) when a test asks for
    // them; cgroup.conf is read from slurm.conf's directory.
    let proctrack = if extra_conf.contains("ProctrackType=") {
        std::fs::write(
            d.join("cgroup.conf"),
            "CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nIgnoreSystemd=yes\n",
        )
        .unwrap();
        ""
    } else {
        "ProctrackType=proctrack/linuxproc\n"
    };
    std::fs::write(
        &conf,
        format!(
            "ClusterName=amdahltest\nSlurmctldHost={host}(127.0.0.1)\nSlurmctldPort={p1}\nSlurmdPort={p2}\n\
             SlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={sock}\n\
             StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\nSlurmctldPidFile={d}/slurmctld.pid\n\
             SlurmdPidFile={d}/slurmd.pid\nSlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd.log\n\
             {proctrack}TaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\n\
             SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nSchedulerType=sched/builtin\n\
             ReturnToService=2\nMpiDefault=none\nSlurmdTimeout=30\n\
             NodeName={host} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN\n\
             PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n{extra_conf}",
            sock = sock.display(),
            d = d.display()
        ),
    )
    .unwrap();
    // -D: foreground, so each daemon is our child and is stopped by its PID.
    let mut c = Command::new(ctld);
    c.args(["-D", "-c", "-f"])
        .arg(&conf)
        .env("SLURM_CONF", &conf);
    daemons.push(spawn(c, &d.join("slurmctld.out")));
    let mut c = Command::new(slurmd);
    c.args(["-D", "-f"]).arg(&conf).env("SLURM_CONF", &conf);
    daemons.push(spawn(c, &d.join("slurmd.out")));
    let cl = Cluster {
        dir,
        conf,
        _daemons: daemons,
    };
    wait_for(Duration::from_secs(30), "the Slurm node to be idle", || {
        let o = cl.cmd("sinfo").args(["-h", "-o", "%T"]).output().ok()?;
        String::from_utf8_lossy(&o.stdout)
            .contains("idle")
            .then_some(())
    });
    Some(cl)
}

fn nix_is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn fake_powercap(dir: &Path) -> PathBuf {
    let root = dir.join("powercap");
    crate::support::powercap::package(&root);
    // A dram zone that stays still, so no RAM estimate joins the total.
    let dram_max = crate::support::powercap::DRAM_MAX;
    crate::support::powercap::zone(&root, "intel-rapl:0:2", "dram", 0, dram_max);
    root
}

fn json(p: &Path) -> Value {
    let t = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&t).unwrap()
}

/// Adds 1 J to the fake package counter (only in Slurm task 0, so a step adds it once).
fn add_joule(counter: &Path) -> String {
    format!(
        "if [ \"${{SLURM_PROCID:-0}}\" = 0 ]; then f={c}; echo $(( $(cat $f) + 1000000 )) > $f; fi",
        c = counter.display()
    )
}

/// Submits `sbatch --parsable ARGS` and waits for the job to end, polling its state every 50 ms;
/// its id, or a panic with the job's state and output when it did not complete. `sbatch --wait`
/// would poll at 2 s and then 10 s (slurm 22.05 `sbatch.c`, `_job_wait`: 2 s, ×4 up to 32 s),
/// so a one-second job took ten.
fn sbatch_and_wait(cl: &Cluster, args: &[&std::ffi::OsStr]) -> String {
    let o = cl
        .cmd("sbatch")
        .arg("--parsable")
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "sbatch: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let job = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let state = wait_for(Duration::from_secs(60), "the batch job to end", || {
        let o = cl
            .cmd("scontrol")
            .args(["show", "job", "-o", &job])
            .output()
            .ok()?;
        let line = String::from_utf8_lossy(&o.stdout).into_owned();
        let state = line
            .split_whitespace()
            .find_map(|f| f.strip_prefix("JobState="))?;
        let ended = [
            "COMPLETED",
            "FAILED",
            "CANCELLED",
            "TIMEOUT",
            "NODE_FAIL",
            "OUT_OF_MEMORY",
        ];
        ended.contains(&state).then(|| line.clone())
    });
    assert!(
        state.contains("JobState=COMPLETED") && state.contains("ExitCode=0:0"),
        "job {job} did not complete: {state}"
    );
    job
}

#[test]
fn sbatch_and_srun_under_amdahl_run_and_scale() {
    let _one = SLURM.lock().unwrap_or_else(|p| p.into_inner());
    let Some(cl) = cluster("") else { return };
    let amdahl = assert_cmd::cargo::cargo_bin("amdahl");
    let root = fake_powercap(cl.path());
    let counter = root.join("intel-rapl:0/energy_uj");

    // sbatch: the batch step runs `amdahl run` around a command adding 1 J.
    let out = cl.path().join("batch.json");
    let log = cl.path().join("batch.log");
    let wrap = format!(
        "AMDAHL_POWERCAP_ROOT={r} {a} run --no-gpu --interval 50ms -o {out} -- sh -c '{w}'",
        r = root.display(),
        a = amdahl.display(),
        out = out.display(),
        w = add_joule(&counter)
    );
    let job = sbatch_and_wait(
        &cl,
        &[
            "-o".as_ref(),
            log.as_os_str(),
            "--wrap".as_ref(),
            wrap.as_ref(),
        ],
    );
    let r = json(&out);
    assert_eq!(r["cluster"]["launcher"], "slurm", "{r}");
    assert_eq!(r["cluster"]["job_id"].as_str(), Some(job.as_str()));
    assert_eq!(r["total_energy_j"].as_f64(), Some(1.0));

    // srun -n 2 amdahl run: task 0 measures the node, task 1 refers to it; merged once.
    let o = cl
        .cmd("srun")
        .args(["-n", "2", "sh", "-c"])
        .arg(format!(
            "AMDAHL_POWERCAP_ROOT={r} exec {a} run --no-gpu --interval 50ms -o {d}/rank$SLURM_PROCID.json -- sh -c '{w}'",
            r = root.display(),
            a = amdahl.display(),
            d = cl.path().display(),
            w = add_joule(&counter)
        ))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "srun: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (r0, r1) = (
        json(&cl.path().join("rank0.json")),
        json(&cl.path().join("rank1.json")),
    );
    assert_eq!(
        (
            r0["cluster"]["role"].as_str(),
            r1["cluster"]["role"].as_str()
        ),
        (Some("measured"), Some("reference"))
    );
    let m = cl
        .cmd(amdahl.to_str().unwrap())
        .args(["merge", "--json"])
        .arg(cl.path().join("rank0.json"))
        .arg(cl.path().join("rank1.json"))
        .output()
        .unwrap();
    assert!(m.status.success(), "{}", String::from_utf8_lossy(&m.stderr));
    let merged: Value = serde_json::from_slice(&m.stdout).unwrap();
    assert_eq!(merged["total_energy_j"].as_f64(), Some(1.0), "{merged}");

    // amdahl scale over srun -n {n}: 0.1 s serial in task 0, 2.4 s split over the tasks; three
    // runs per N, the fewest with which the significance test can accept a speedup, and no
    // warm-up (a cold first step launch would have to cost over a second to put an N = 2 run
    // above an N = 1 run). (With 1.2 s split, srun's step launch on a loaded 2-core machine
    // varied enough that the test could not tell N = 2 from N = 1.)
    let out = cl.path().join("scale.json");
    let o = cl
        .cmd(amdahl.to_str().unwrap())
        .env("AMDAHL_POWERCAP_ROOT", &root)
        .args(["scale", "--n", "1,2,3", "--runs", "3", "--warmup", "0"])
        .args(["--n-counts", "processes", "-o"])
        .arg(&out)
        .args(["--", "srun", "--overcommit", "-n", "{n}", "sh", "-c"])
        .arg(format!(
            "[ $SLURM_PROCID = 0 ] && sleep 0.1; sleep $(awk \"BEGIN{{print 2.4/$SLURM_NTASKS}}\"); {w}",
            w = add_joule(&counter)
        ))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "scale: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r = json(&out);
    let pts = r["points"].as_array().unwrap();
    assert_eq!(pts.len(), 3);
    for (p, n) in pts.iter().zip([1.0, 2.0, 3.0]) {
        let t = p["time_s"]["median"].as_f64().unwrap();
        assert!(t >= 2.4 / n && t < 30.0, "N = {n}: {t} s");
        assert_eq!(p["energy_j"]["median"].as_f64(), Some(1.0), "N = {n}");
    }
    assert!(!r["fit"].is_null(), "{}", r["no_fit_reason"]);
}

/// Jobs come only from the cgroups Slurm's own plugin creates (here proctrack/cgroup on cgroup
/// v1: `/slurm/uid_0/job_N/step_batch` in the freezer hierarchy), never from the
/// `SLURM_JOB_ID` in a process's environment, which any user can set.
#[test]
fn exporter_attributes_two_concurrent_jobs_separately() {
    let _one = SLURM.lock().unwrap_or_else(|p| p.into_inner());
    let Some(cl) = cluster("ProctrackType=proctrack/cgroup\n") else {
        return;
    };
    let root = fake_powercap(cl.path());
    let counter = root.join("intel-rapl:0/energy_uj");
    // The real /proc; the package counter advances 0.2 J every 50 ms (4 W).
    let ready = cl.path().join("ready");
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("amdahl"));
    c.args([
        "exporter",
        "--listen",
        "127.0.0.1:0",
        "--interval",
        "200ms",
        "--no-gpu",
        "--no-process-series",
        "--ready-file",
    ])
    .arg(&ready)
    .arg("--powercap-root")
    .arg(&root)
    .args(["--proc-root", "/proc"]);
    let _ex = spawn(c, &cl.path().join("exporter.log"));
    let addr: std::net::SocketAddr = wait_for(Duration::from_secs(20), "exporter ready", || {
        std::fs::read_to_string(&ready).ok()?.trim().parse().ok()
    });
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = Arc::clone(&stop);
    let c2 = counter.clone();
    let ticker = std::thread::spawn(move || {
        let mut uj = 1_000_000u64;
        while !s2.load(Ordering::SeqCst) {
            uj += 200_000;
            let _ = std::fs::write(&c2, format!("{uj}\n"));
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    // Two 1-CPU jobs spinning for 3 s each, at the same time.
    let mut ids = Vec::new();
    for _ in 0..2 {
        let o = cl
            .cmd("sbatch")
            .args(["--parsable", "-n", "1", "-o", "/dev/null", "--wrap"])
            .arg("end=$(( $(date +%s) + 3 )); while [ $(date +%s) -lt $end ]; do :; done")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        ids.push(String::from_utf8_lossy(&o.stdout).trim().to_string());
    }
    wait_for(Duration::from_secs(30), "both jobs to finish", || {
        let o = cl.cmd("squeue").args(["-h", "-o", "%i"]).output().ok()?;
        String::from_utf8_lossy(&o.stdout)
            .trim()
            .is_empty()
            .then_some(())
    });
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::SeqCst);
    let _ = ticker.join();
    let (code, body) = get(addr, "/metrics");
    assert_eq!(code, 200);
    let m = parse_metrics(&body);
    let node = sum(&m, E, &[("scope", "node"), ("device", "intel-rapl:0")]);
    let un = sum(
        &m,
        E,
        &[("scope", "unattributed"), ("device", "intel-rapl:0")],
    );
    let users = sum(&m, E, &[("scope", "user"), ("device", "intel-rapl:0")]);
    assert!(node > 1.0, "node {node} J");
    assert!(
        (users + un - node).abs() < 1e-6,
        "users {users} + unattributed {un} vs node {node}"
    );
    let mut jobs = 0.0;
    for id in &ids {
        let j = sum(
            &m,
            E,
            &[("scope", "job"), ("job", id), ("device", "intel-rapl:0")],
        );
        // Each spinning job used a core for 3 s; other load on the machine (CI shares it) takes
        // its share of the busy ticks too, so only: each job got some, separately.
        assert!(j > 0.0, "job {id}: {j} J of {node} J\n{body}");
        jobs += j;
    }
    assert!(
        jobs <= node - un + 1e-6,
        "jobs {jobs} J exceed what was attributed"
    );
}

#[test]
fn prolog_and_epilog_write_one_record_per_job() {
    let _one = SLURM.lock().unwrap_or_else(|p| p.into_inner());
    // The scripts are the repository's; wrappers give them the settings slurmd's environment
    // would (the binary, where records go, the fake tree).
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/slurm");
    let wrappers = tempfile::tempdir().unwrap();
    let root = fake_powercap(wrappers.path());
    let counter = root.join("intel-rapl:0/energy_uj");
    let jobs = wrappers.path().join("jobs");
    for name in ["prolog", "epilog"] {
        let w = wrappers.path().join(format!("{name}.sh"));
        std::fs::write(
            &w,
            format!(
                "#!/bin/sh\nexport AMDAHL={a} AMDAHL_JOB_DIR={j} AMDAHL_POWERCAP_ROOT={r} AMDAHL_RUN_FLAGS='--no-gpu --interval 50ms'\nexec {s}/{name}.sh\n",
                a = assert_cmd::cargo::cargo_bin("amdahl").display(),
                j = jobs.display(),
                r = root.display(),
                s = scripts.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let extra = format!(
        "Prolog={p}\nEpilog={e}\nPrologFlags=Alloc\n",
        p = wrappers.path().join("prolog.sh").display(),
        e = wrappers.path().join("epilog.sh").display()
    );
    let Some(cl) = cluster(&extra) else { return };
    let wrap = format!("sleep 0.5; {}; sleep 0.5", add_joule(&counter));
    let job = sbatch_and_wait(
        &cl,
        &[
            "-o".as_ref(),
            "/dev/null".as_ref(),
            "--wrap".as_ref(),
            wrap.as_ref(),
        ],
    );
    let host = short_hostname();
    let record = jobs.join(format!("{job}-{host}.json"));
    let pid = jobs.join(format!("{job}-{host}.pid"));
    // The Epilog runs after the job ends; it removes the pid file once the record is final.
    let t0 = std::time::Instant::now();
    let r = loop {
        let done = (!pid.exists())
            .then(|| std::fs::read_to_string(&record).ok())
            .flatten()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .filter(|r| r["interrupted_by"] == "SIGTERM");
        if let Some(r) = done {
            break r;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            let listing: Vec<_> = std::fs::read_dir(&jobs)
                .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
                .unwrap_or_default();
            let log = std::fs::read_to_string(cl.path().join("slurmd.log")).unwrap_or_default()
                + &std::fs::read_to_string(record.with_extension("log")).unwrap_or_default();
            panic!(
                "no final record {}: jobs dir {listing:?}\nslurmd.log:\n{log}",
                record.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(r["schema"], "amdahl.run/1");
    assert_eq!(r["cluster"]["job_id"].as_str(), Some(job.as_str()));
    // The job added exactly 1 J to the package counter while the Prolog's meter ran.
    assert_eq!(r["total_energy_j"].as_f64(), Some(1.0), "{r}");
    // 1 J at the default 436 g/kWh, PUE 1.
    let co2 = r["co2e_g"].as_f64().unwrap_or(f64::NAN);
    assert!((co2 - 436.0 / 3.6e6).abs() < 1e-12, "{co2}");
}

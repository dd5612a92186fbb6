//! What attribution reads about processes, behind the [`ProcView`] trait so tests and the
//! benchmark use fake `/proc` trees in temp dirs (the real file layout, proc(5)).
//!
//! Per process: `PID/stat` (CPU ticks, resident pages, start time, command name), `PID/status`
//! (`Uid:`) and `PID/cgroup` (cgroup v1 or v2 path, and from it the Slurm job). Machine-wide:
//! `stat` (busy ticks) and `meminfo` (`MemTotal`). A process's files are read as bytes: its
//! name is whatever it set (`prctl(PR_SET_NAME)`, its executable's name) and a cgroup's name
//! whatever its creator chose, neither need be UTF-8, and a process must not escape attribution
//! by its name (a non-UTF-8 name made the whole `stat` unreadable, so its CPU time went to
//! `unattributed`).
//!
//! **Trust.** Every process can choose its name, its command line and its environment, so none
//! of them decides who is charged. The cgroup path is written by whoever may create cgroups
//! there: root, systemd, and the Slurm daemons under Slurm's own hierarchy, which is where the
//! job comes from ([`job_from_cgroup_file`]); a process's `SLURM_JOB_ID` is never read (any
//! user can set it to someone else's job). The uid is the kernel's.

use crate::{procfs, small_file};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One process as attribution needs it. `None` fields could not be read (another user's
/// process without privileges, a process exiting mid-read): they are attributed to `unknown`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: u32,
    /// Field 22 of `stat` (ticks after boot): with the pid, identifies the process across
    /// samples, so a recycled pid is a new process and not a huge CPU-time step.
    pub start_ticks: u64,
    /// Field 2 of `stat`, the executable name (at most 15 bytes, no arguments).
    pub comm: String,
    /// utime + stime.
    pub ticks: u64,
    /// Field 4: the parent, whose `child_ticks` take this process's ticks when it is reaped.
    pub ppid: u32,
    /// cutime + cstime: ticks of the children this process has waited for.
    pub child_ticks: u64,
    pub rss_pages: u64,
    pub uid: Option<u32>,
    pub cgroup: Option<String>,
    /// Slurm job id from a cgroup path in Slurm's own hierarchy ([`job_from_cgroup_file`]).
    pub job: Option<String>,
    /// Only read with `--expose-cmdline` (arguments can hold secrets).
    pub cmdline: Option<String>,
}

/// A view of `/proc`.
pub trait ProcView: Send {
    /// Machine busy CPU ticks so far (`stat`, first `cpu ` line).
    fn busy_ticks(&self) -> Option<u64>;
    /// `MemTotal` in bytes.
    fn mem_total_bytes(&self) -> Option<u64>;
    fn page_size(&self) -> u64;
    /// Every pid present now.
    fn pids(&self) -> Vec<u32>;
    /// The process, or None when it is gone (its `stat` vanished or is not parseable).
    fn process(&self, pid: u32, with_cmdline: bool) -> Option<ProcessInfo>;
}

/// `/proc` (or a copy of its layout) under `root`.
///
/// Only `stat` changes every sample (CPU ticks, resident pages); a process's user, cgroup, job
/// and command line rarely change, and reading them is most of the cost (`status` is ~1.4 kB of
/// kernel-generated text). So they are kept per process —
/// a pid with its start time — and read again when the command name changes (an `exec`, which
/// is also when Slurm's and systemd's freshly moved tasks start their program) or after
/// [`ProcFs::refresh`] (10 s by default), which bounds how late a move between cgroups or a
/// change of user is seen.
pub struct ProcFs {
    pub root: PathBuf,
    /// How long kept entries stay valid; zero reads every file on every sample.
    pub refresh: Duration,
    kept: RefCell<HashMap<u32, Kept>>,
}

/// The slowly changing part of a process, with what identifies it.
#[derive(Debug, Clone)]
struct Kept {
    start_ticks: u64,
    comm: String,
    read_at: Instant,
    with_cmdline: bool,
    uid: Option<u32>,
    cgroup: Option<String>,
    job: Option<String>,
    cmdline: Option<String>,
}

/// The default of [`ProcFs::refresh`].
pub const REFRESH: Duration = Duration::from_secs(10);

impl ProcFs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ProcFs {
            root: root.into(),
            refresh: REFRESH,
            kept: RefCell::new(HashMap::new()),
        }
    }
    /// Read every file on every sample (no kept entries): for comparison in benchmarks.
    pub fn uncached(root: impl Into<PathBuf>) -> Self {
        ProcFs::new(root).with_refresh(Duration::ZERO)
    }
    /// Keep entries for `refresh` (zero: read every file on every sample).
    pub fn with_refresh(mut self, refresh: Duration) -> Self {
        self.refresh = refresh;
        self
    }
    fn read(&self, rel: impl AsRef<Path>) -> Option<String> {
        small_file::read(&self.root.join(rel), small_file::TABLE).ok()
    }
    /// A process's file as text, any byte that is not UTF-8 replaced (U+FFFD): the numbers in
    /// it are ASCII, and a name that is not UTF-8 must not make them unreadable.
    fn read_lossy(&self, rel: impl AsRef<Path>) -> Option<String> {
        let b = small_file::read_bytes(&self.root.join(rel), small_file::TABLE).ok()?;
        Some(String::from_utf8_lossy(&b).into_owned())
    }
}

impl ProcView for ProcFs {
    fn busy_ticks(&self) -> Option<u64> {
        procfs::parse_stat_busy_ticks(&self.read("stat")?)
    }
    fn mem_total_bytes(&self) -> Option<u64> {
        procfs::parse_mem_total(&self.read("meminfo")?)
    }
    fn page_size(&self) -> u64 {
        procfs::page_size()
    }
    fn pids(&self) -> Vec<u32> {
        let Ok(rd) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut v: Vec<u32> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        v.sort_unstable();
        // Forget the processes that are gone, so what is kept follows the live ones.
        if let Ok(mut kept) = self.kept.try_borrow_mut() {
            kept.retain(|pid, _| v.binary_search(pid).is_ok());
        }
        v
    }
    fn process(&self, pid: u32, with_cmdline: bool) -> Option<ProcessInfo> {
        let dir = PathBuf::from(pid.to_string());
        let stat = self.read_lossy(dir.join("stat"))?;
        let s = procfs::parse_pid_stat(&stat)?;
        let start_ticks = parse_start_ticks(&stat)?;
        let comm = parse_comm(&stat).unwrap_or_default();
        let fresh = |k: &Kept| {
            k.start_ticks == start_ticks
                && k.comm == comm
                && k.with_cmdline == with_cmdline
                && k.read_at.elapsed() < self.refresh
        };
        let kept = self
            .kept
            .try_borrow()
            .ok()
            .and_then(|m| m.get(&pid).filter(|k| fresh(k)).cloned());
        let k = match kept {
            Some(k) => k,
            None => {
                let cgroup_file = self.read_lossy(dir.join("cgroup"));
                let cgroup = cgroup_file.as_deref().and_then(parse_cgroup);
                let job = cgroup_file.as_deref().and_then(job_from_cgroup_file);
                let cmdline = if with_cmdline {
                    small_file::read_bytes(&self.root.join(&dir).join("cmdline"), small_file::TABLE)
                        .ok()
                        .map(|b| render_cmdline(&b))
                } else {
                    None
                };
                let k = Kept {
                    start_ticks,
                    comm: comm.clone(),
                    read_at: Instant::now(),
                    with_cmdline,
                    uid: self
                        .read_lossy(dir.join("status"))
                        .and_then(|t| parse_uid(&t)),
                    cgroup,
                    job,
                    cmdline,
                };
                // Entries that could not be read are read again next time (permissions may
                // come, a process exiting mid-read leaves).
                let complete = k.uid.is_some() && k.cgroup.is_some();
                if !self.refresh.is_zero() && complete {
                    if let Ok(mut m) = self.kept.try_borrow_mut() {
                        m.insert(pid, k.clone());
                    }
                }
                k
            }
        };
        Some(ProcessInfo {
            pid,
            start_ticks,
            comm,
            ticks: s.ticks,
            ppid: s.ppid,
            child_ticks: s.child_ticks,
            rss_pages: s.rss_pages,
            uid: k.uid,
            cgroup: k.cgroup,
            job: k.job,
            cmdline: k.cmdline,
        })
    }
}

/// The command name: between the first `(` and the last `)` of `stat` (it may contain both).
pub fn parse_comm(stat: &str) -> Option<String> {
    let a = stat.find('(')?;
    let b = stat.rfind(')')?;
    stat.get(a + 1..b).map(str::to_string)
}

/// Field 22 of `stat`, counted after the last `)` like [`procfs::parse_pid_stat`].
pub fn parse_start_ticks(stat: &str) -> Option<u64> {
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// The real uid: the first number of the `Uid:` line of `status`.
pub fn parse_uid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The cgroup a process is charged to, from `PID/cgroup` (cgroups(7)). cgroup v2: the one line
/// `0::/path`. v1: one line per hierarchy `ID:controllers:/path`; CPU time is accounted by the
/// `cpu`/`cpuacct` hierarchy, so its path is used, else systemd's named hierarchy, else the
/// first. A hybrid system (v1 controllers plus an empty-controller `0::` line) uses the v1 `cpu`
/// hierarchy too. Paths keep their leading `/`.
pub fn parse_cgroup(text: &str) -> Option<String> {
    let mut v2 = None;
    let mut named = None;
    let mut first = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(ctrl), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let path = path.trim().to_string();
        if id == "0" && ctrl.is_empty() {
            v2 = Some(path);
            continue;
        }
        if ctrl.split(',').any(|c| c == "cpu" || c == "cpuacct") {
            return Some(path);
        }
        if ctrl == "name=systemd" {
            named = Some(path.clone());
        }
        first.get_or_insert(path);
    }
    v2.or(named).or(first)
}

/// The Slurm job of a process from its whole `PID/cgroup` file: the job directory that Slurm's
/// cgroup plugins create, anchored where only they can write, on any line.
///
/// * cgroup v2 (`cgroup/v2`): `/system.slice/slurmstepd.scope/job_J/step_S/user/task_T`, or
///   `<nodename>_slurmstepd.scope` with several slurmd per host (Slurm's cgroup_v2 guide; the
///   scope sits in systemd's root-owned `system.slice`, delegated to slurmd).
/// * cgroup v1 (`cgroup/v1`: task/cgroup, proctrack/cgroup, jobacct_gather/cgroup):
///   `/slurm/uid_U/job_J/step_S/...` in each controller's hierarchy, or `/slurm_<nodename>/...`
///   with several slurmd (the plugins build `"%s/uid_%u"`, `"%s/job_%u"` under the root
///   `slurm` cgroup; only root can create cgroups in a v1 hierarchy).
///
/// A `job_N` anywhere else is not a job: a user may create any name inside a cgroup delegated
/// to them (`/user.slice/user-1000.slice/user@1000.service/…/job_4242`). Leading `/..`
/// components (a path seen from another cgroup namespace) are skipped; named v1 hierarchies
/// (`name=…`) are not Slurm's and are ignored.
pub fn job_from_cgroup_file(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let mut f = line.splitn(3, ':');
        let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
        if ctrl.starts_with("name=") {
            return None;
        }
        job_from_cgroup(path.trim_end())
    })
}

/// The job of one cgroup path under Slurm's hierarchy ([`job_from_cgroup_file`]), else None.
pub fn job_from_cgroup(path: &str) -> Option<String> {
    let mut parts = path.split('/').skip_while(|c| c.is_empty() || *c == "..");
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let job = |c: Option<&str>| {
        c.and_then(|c| c.strip_prefix("job_"))
            .filter(|id| numeric(id))
            .map(str::to_string)
    };
    let is_slurm_scope =
        |c: &str| c == "slurmstepd.scope" || (c.ends_with("_slurmstepd.scope") && c.len() > 17);
    match parts.next()? {
        "system.slice" if parts.next().is_some_and(is_slurm_scope) => job(parts.next()),
        root if root == "slurm" || root.strip_prefix("slurm_").is_some_and(|n| !n.is_empty()) => {
            let uid = parts.next()?.strip_prefix("uid_")?;
            if !numeric(uid) {
                return None;
            }
            job(parts.next())
        }
        _ => None,
    }
}

/// `cmdline` with its NUL separators as spaces, bounded to 256 characters (a label, not a log).
pub fn render_cmdline(raw: &[u8]) -> String {
    let s: String = String::from_utf8_lossy(raw)
        .trim_end_matches('\0')
        .replace('\0', " ");
    s.chars().take(256).collect()
}

/// Builders of fake `/proc` trees with the real file layout, for tests and the benchmark.
pub mod fake {
    use std::path::Path;

    /// Machine files: `stat` with `busy` busy ticks (all as user time) and `meminfo`.
    pub fn machine(root: &Path, busy_ticks: u64, mem_total_kb: u64) -> std::io::Result<()> {
        std::fs::create_dir_all(root)?;
        std::fs::write(
            root.join("stat"),
            format!("cpu  {busy_ticks} 0 0 1000000 0 0 0 0 0 0\ncpu0 {busy_ticks} 0 0 1000000 0 0 0 0 0 0\n"),
        )?;
        std::fs::write(
            root.join("meminfo"),
            format!("MemTotal:       {mem_total_kb} kB\nMemFree:        1000 kB\n"),
        )
    }

    /// A process. `cgroup` is the whole `cgroup` file text (v1 or v2 form); `None` leaves
    /// `status`/`cgroup` absent, as for an entry the reader may not open.
    #[allow(clippy::too_many_arguments)]
    pub fn process(
        root: &Path,
        pid: u32,
        comm: &str,
        ticks: u64,
        rss_pages: u64,
        uid: Option<u32>,
        cgroup: Option<&str>,
        environ: &[&str],
    ) -> std::io::Result<()> {
        let d = root.join(pid.to_string());
        std::fs::create_dir_all(&d)?;
        set_ticks(root, pid, comm, ticks, rss_pages)?;
        if let Some(u) = uid {
            std::fs::write(
                d.join("status"),
                format!("Name:\t{comm}\nUid:\t{u}\t{u}\t{u}\t{u}\n"),
            )?;
        }
        if let Some(c) = cgroup {
            std::fs::write(d.join("cgroup"), c)?;
        }
        let mut env = Vec::new();
        for kv in environ {
            env.extend_from_slice(kv.as_bytes());
            env.push(0);
        }
        std::fs::write(d.join("environ"), env)?;
        std::fs::write(
            d.join("cmdline"),
            format!("{comm}\0--secret-token=hunter2\0"),
        )
    }

    /// Rewrite a process's `stat` (utime = ticks, stime = 0, parent 1, no reaped children,
    /// start time 1000).
    pub fn set_ticks(
        root: &Path,
        pid: u32,
        comm: &str,
        ticks: u64,
        rss_pages: u64,
    ) -> std::io::Result<()> {
        set_stat(root, pid, comm, 1, ticks, 0, rss_pages)
    }

    /// Rewrite a process's `stat` with its parent and its reaped children's ticks (cutime;
    /// cstime = 0).
    pub fn set_stat(
        root: &Path,
        pid: u32,
        comm: &str,
        ppid: u32,
        ticks: u64,
        child_ticks: u64,
        rss_pages: u64,
    ) -> std::io::Result<()> {
        // Fields 3.. : state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime cutime cstime priority nice threads itrealvalue starttime vsize rss
        std::fs::write(
            root.join(pid.to_string()).join("stat"),
            format!("{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 0 0 0 0 0 {ticks} 0 {child_ticks} 0 20 0 1 0 1000 0 {rss_pages}\n"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_v2_v1_and_hybrid() {
        assert_eq!(
            parse_cgroup("0::/system.slice/docker-abc.scope\n").as_deref(),
            Some("/system.slice/docker-abc.scope")
        );
        let v1 = "12:memory:/user.slice\n4:cpu,cpuacct:/slurm/uid_1000/job_42/step_0\n1:name=systemd:/user.slice/session-1.scope\n";
        assert_eq!(
            parse_cgroup(v1).as_deref(),
            Some("/slurm/uid_1000/job_42/step_0")
        );
        let hybrid = "1:name=systemd:/user.slice\n0::/user.slice/user-1000.slice\n";
        assert_eq!(
            parse_cgroup(hybrid).as_deref(),
            Some("/user.slice/user-1000.slice")
        );
        assert_eq!(parse_cgroup("garbage"), None);
        assert_eq!(parse_cgroup(""), None);
    }

    #[test]
    fn slurm_job_only_from_slurms_own_cgroup_hierarchy() {
        let job = |p: &str| job_from_cgroup(p);
        // The layouts Slurm's plugins write (v2, several slurmd, v1, from another namespace).
        for (path, want) in [
            (
                "/system.slice/slurmstepd.scope/job_17/step_0/user/task_0",
                "17",
            ),
            (
                "/system.slice/slurmstepd.scope/job_17/step_batch/slurm",
                "17",
            ),
            (
                "/system.slice/node3_slurmstepd.scope/job_18/step_extern",
                "18",
            ),
            ("/slurm/uid_1000/job_19/step_0/task_0", "19"),
            ("/slurm_node3/uid_0/job_20/step_batch", "20"),
            ("/../../system.slice/slurmstepd.scope/job_21/step_0", "21"),
        ] {
            assert_eq!(job(path).as_deref(), Some(want), "{path}");
        }
        // Regression: any `job_N` component counted, so a user's own delegated cgroup named
        // job_4242 charged them to job 4242.
        for path in [
            "/user.slice/user-1000.slice/user@1000.service/app.slice/job_4242",
            "/user.slice/user-1000.slice/user@1000.service/system.slice/slurmstepd.scope/job_4242",
            "/job_4242",
            "/system.slice/job_4242",
            "/system.slice/evil.scope/job_4242",
            "/system.slice/_slurmstepd.scope/job_4242",
            "/slurm/job_4242",
            "/slurm/uid_x/job_4242",
            "/slurmx/uid_0/job_4242",
            "/slurm/uid_0/job_x/step_0",
            "/system.slice/slurmstepd.scope/job_/step_0",
            "",
        ] {
            assert_eq!(job(path), None, "{path}");
        }
        // Any controller line may carry it (v1 sites without jobacct_gather/cgroup have Slurm's
        // cgroups only in freezer, cpuset, memory); named hierarchies are not Slurm's.
        let v1 = "12:memory:/slurm/uid_0/job_7/step_0\n4:cpu,cpuacct:/user.slice\n1:name=systemd:/user.slice\n";
        assert_eq!(job_from_cgroup_file(v1).as_deref(), Some("7"));
        assert_eq!(
            job_from_cgroup_file("1:name=evil:/slurm/uid_0/job_7/step_0\n0::/user.slice\n"),
            None
        );
        assert_eq!(
            job_from_cgroup_file("0::/system.slice/slurmstepd.scope/job_8/step_0\n").as_deref(),
            Some("8")
        );
    }

    /// Regression: a process named with bytes that are not UTF-8 vanished from attribution
    /// (`stat` read as a string failed), and so did one whose cgroup name was not UTF-8.
    #[test]
    fn a_process_whose_name_is_not_utf8_is_still_read() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        fake::machine(root, 0, 1000).unwrap();
        fake::process(root, 7, "x", 5, 3, Some(1000), Some("0::/a\n"), &[]).unwrap();
        let d = root.join("7");
        let stat = b"7 (\xff\xfe)x) S 1 7 7 0 -1 0 0 0 0 0 40 2 0 0 20 0 1 0 1234 0 9\n".to_vec();
        std::fs::write(d.join("stat"), &stat).unwrap();
        std::fs::write(
            d.join("status"),
            b"Name:\t\xff\xfe\nUid:\t1000\t1000\t1000\t1000\n",
        )
        .unwrap();
        std::fs::write(
            d.join("cgroup"),
            b"0::/system.slice/slurmstepd.scope/job_9/step_0/\xff\n",
        )
        .unwrap();
        let p = ProcFs::new(root)
            .process(7, false)
            .expect("process 7 is read");
        assert_eq!((p.ticks, p.rss_pages, p.start_ticks), (42, 9, 1234));
        assert_eq!(p.comm, "\u{fffd}\u{fffd})x");
        assert_eq!(p.uid, Some(1000));
        assert_eq!(p.job.as_deref(), Some("9"));
        assert_eq!(
            p.cgroup.as_deref(),
            Some("/system.slice/slurmstepd.scope/job_9/step_0/\u{fffd}")
        );
    }

    #[test]
    fn slow_fields_are_kept_until_an_exec_or_the_refresh() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        fake::machine(root, 0, 1000).unwrap();
        fake::process(root, 7, "sh", 1, 0, Some(0), Some("0::/a\n"), &[]).unwrap();
        let view = ProcFs::new(root);
        let cg = |v: &ProcFs| v.process(7, false).and_then(|p| p.cgroup);
        assert_eq!(cg(&view).as_deref(), Some("/a"));
        // Moved to another cgroup: seen at the next exec (new command name) or refresh.
        std::fs::write(root.join("7/cgroup"), "0::/b\n").unwrap();
        fake::set_ticks(root, 7, "sh", 2, 0).unwrap();
        assert_eq!(cg(&view).as_deref(), Some("/a"));
        assert_eq!(view.process(7, false).map(|p| p.ticks), Some(2));
        fake::set_ticks(root, 7, "python3", 3, 0).unwrap();
        assert_eq!(cg(&view).as_deref(), Some("/b"));
        std::fs::write(root.join("7/cgroup"), "0::/c\n").unwrap();
        assert_eq!(cg(&ProcFs::uncached(root)).as_deref(), Some("/c"));
        let stale = ProcFs {
            refresh: Duration::ZERO,
            ..ProcFs::new(root)
        };
        assert_eq!(cg(&stale).as_deref(), Some("/c"));
        // A process that vanished is forgotten at the next listing.
        std::fs::remove_dir_all(root.join("7")).unwrap();
        assert_eq!(view.pids(), Vec::<u32>::new());
        assert!(view.kept.borrow().is_empty());
    }

    #[test]
    fn stat_fields_with_a_parenthesised_name() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 5555 0 9\n";
        assert_eq!(parse_comm(stat).as_deref(), Some("a (b) c"));
        assert_eq!(parse_start_ticks(stat), Some(5555));
        assert_eq!(
            parse_uid("Name:\tx\nUid:\t1000\t1000\t1000\t1000\n"),
            Some(1000)
        );
        assert_eq!(parse_uid("Uid:\tnope\n"), None);
    }
}

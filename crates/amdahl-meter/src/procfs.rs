//! Small readers of `/proc`: CPU time of the machine and of a process, memory size, CPU model.
//! Parsers are pure functions of the file text (proc(5) field positions).

use crate::small_file;
use amdahl_model::units::Seconds;

/// Clock ticks per second for `/proc` CPU times (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
pub fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Logical CPUs online (the TDP is shared among these).
pub fn cpu_count() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        1
    }
}

/// Busy ticks of all CPUs from the first `cpu ` line of `/proc/stat`: user + nice + system +
/// irq + softirq + steal (guest time is already inside user; idle and iowait are not busy).
pub fn parse_stat_busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let get = |i: usize| f.get(i).copied().unwrap_or(0);
    Some(get(0) + get(1) + get(2) + get(5) + get(6) + get(7))
}

/// Machine-wide busy CPU time so far.
pub fn machine_busy() -> Option<Seconds> {
    let s = small_file::read("/proc/stat".as_ref(), small_file::TABLE).ok()?;
    parse_stat_busy_ticks(&s).map(|t| Seconds(t as f64 / clk_tck()))
}

/// The fields of `/proc/PID/stat` (proc(5)) that the process-scope estimate needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PidStat {
    /// Field 3, the state letter (`R`, `S`, `Z` for a zombie, ...).
    pub state: u8,
    /// Field 4.
    pub ppid: u32,
    /// utime + stime (fields 14, 15): the process's own CPU ticks.
    pub ticks: u64,
    /// cutime + cstime (fields 16, 17): ticks of its children it has waited for.
    pub child_ticks: u64,
    /// Field 24, resident pages.
    pub rss_pages: u64,
}

/// Parse `/proc/PID/stat`. The command name (field 2) may contain spaces and parentheses, so
/// fields are counted after the last `)`: there index 0 is field 3.
pub fn parse_pid_stat(stat: &str) -> Option<PidStat> {
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |field: usize| f.get(field - 3)?.parse::<u64>().ok();
    Some(PidStat {
        state: f.first()?.bytes().next()?,
        ppid: u32::try_from(n(4)?).ok()?,
        ticks: n(14)? + n(15)?,
        child_ticks: n(16)? + n(17)?,
        rss_pages: n(24)?,
    })
}

/// CPU ticks and resident pages of everything `root` started: the times of its waited-for
/// children (its cutime + cstime) plus, for every live descendant, its own and its waited-for
/// children's times. Each finished process is counted once — in its waiter's cutime — and
/// `root`'s own time is excluded. RSS is summed over live descendants (shared pages count twice).
pub fn tree_usage(root: u32, procs: &[(u32, PidStat)]) -> (u64, u64) {
    let mut ticks = procs
        .iter()
        .find(|(p, _)| *p == root)
        .map(|(_, s)| s.child_ticks)
        .unwrap_or(0);
    let mut rss = 0;
    let mut frontier = vec![root];
    let mut seen = 0usize;
    while let Some(parent) = frontier.pop() {
        for (pid, s) in procs.iter().filter(|(_, s)| s.ppid == parent) {
            ticks += s.ticks + s.child_ticks;
            rss += s.rss_pages;
            frontier.push(*pid);
        }
        // A pid cycle cannot happen in /proc, but bound the walk anyway.
        seen += 1;
        if seen > procs.len() {
            break;
        }
    }
    (ticks, rss)
}

/// Every process's stat, read from `/proc` now (processes that exit meanwhile are skipped).
pub fn all_pid_stats() -> Vec<(u32, PidStat)> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let text =
                small_file::read(format!("/proc/{pid}/stat").as_ref(), small_file::TABLE).ok()?;
            Some((pid, parse_pid_stat(&text)?))
        })
        .collect()
}

pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// `MemTotal` of `/proc/meminfo` in bytes.
pub fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

pub fn mem_total_bytes() -> Option<u64> {
    parse_mem_total(&small_file::read("/proc/meminfo".as_ref(), small_file::TABLE).ok()?)
}

/// `VmHWM` (peak resident set) of `/proc/self/status`, in bytes: the Python tracker's
/// `max_rss_bytes` (the process's own peak; `amdahl run` reports its child's from rusage).
pub fn parse_vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

pub fn own_peak_rss_bytes() -> Option<u64> {
    parse_vm_hwm(&small_file::read("/proc/self/status".as_ref(), small_file::TABLE).ok()?)
}

/// The first `model name` of `/proc/cpuinfo`.
pub fn cpu_model() -> Option<String> {
    cpu_info().model
}

/// What `/proc/cpuinfo` says about the CPU packages (x86 field names; absent fields stay `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuInfo {
    /// The first `model name`.
    pub model: Option<String>,
    /// `siblings`: logical CPUs per package, as the (possibly virtual) topology shows it.
    pub siblings: Option<u32>,
    /// `cpu cores`: physical cores per package, same caveat.
    pub cores: Option<u32>,
    /// Distinct `physical id`s (at least 1).
    pub packages: u32,
    /// The `hypervisor` CPU flag: a virtual machine, whose topology says nothing of the host's.
    pub hypervisor: bool,
}

impl CpuInfo {
    pub fn parse(text: &str) -> Self {
        let mut info = CpuInfo::default();
        let mut ids = std::collections::BTreeSet::new();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let (key, value) = (key.trim(), value.trim());
            match key {
                "model name" if info.model.is_none() => info.model = Some(value.to_string()),
                "siblings" if info.siblings.is_none() => info.siblings = value.parse().ok(),
                "cpu cores" if info.cores.is_none() => info.cores = value.parse().ok(),
                "physical id" => {
                    ids.insert(value.to_string());
                }
                "flags" => info.hypervisor |= value.split_whitespace().any(|f| f == "hypervisor"),
                _ => {}
            }
        }
        info.packages = (ids.len() as u32).max(1);
        info
    }
}

/// This machine's `/proc/cpuinfo` (empty where unreadable).
pub fn cpu_info() -> CpuInfo {
    CpuInfo::parse(
        &small_file::read("/proc/cpuinfo".as_ref(), small_file::TABLE).unwrap_or_default(),
    )
}

/// `Linux-<kernel release>-<machine>`, the shape of Python's `platform.platform()`.
pub fn os_string() -> String {
    let rel = small_file::read_small("/proc/sys/kernel/osrelease".as_ref()).unwrap_or_default();
    format!(
        "{}-{}-{}",
        std::env::consts::OS,
        rel.trim(),
        std::env::consts::ARCH
    )
}

/// This machine's host name (`gethostname(2)`).
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// The running kernel's boot id: one per boot, shared by every container on the machine, so
/// it tells which records read the same counters.
pub fn boot_id() -> Option<String> {
    let s = small_file::read_small("/proc/sys/kernel/random/boot_id".as_ref()).ok()?;
    let id = s.trim();
    (!id.is_empty()).then(|| id.to_string())
}

/// Live (not zombie) processes whose parent is `parent`: after the command exits, the ones
/// re-parented to amdahl (its subreaper) are the command's background descendants still running.
pub fn live_children(parent: u32, procs: &[(u32, PidStat)]) -> Vec<u32> {
    procs
        .iter()
        .filter(|(_, s)| s.ppid == parent && s.state != b'Z' && s.state != b'X')
        .map(|(p, _)| *p)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_of_a_two_socket_host_and_of_a_vm() {
        let cpu = |id: u32, pkg: u32, flags: &str| {
            format!(
                "processor\t: {id}\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763 64-Core Processor\n\
                 physical id\t: {pkg}\nsiblings\t: 128\ncore id\t\t: 0\ncpu cores\t: 64\nflags\t\t: fpu sse2 {flags}\n\n"
            )
        };
        let host = format!("{}{}", cpu(0, 0, "avx2"), cpu(128, 1, "avx2"));
        let i = CpuInfo::parse(&host);
        assert_eq!(i.model.as_deref(), Some("AMD EPYC 7763 64-Core Processor"));
        assert_eq!((i.siblings, i.cores, i.packages), (Some(128), Some(64), 2));
        assert!(!i.hypervisor);
        assert!(CpuInfo::parse(&cpu(0, 0, "avx2 hypervisor")).hypervisor);
        assert_eq!(
            CpuInfo::parse(""),
            CpuInfo {
                packages: 1,
                ..CpuInfo::default()
            }
        );
    }

    #[test]
    fn tree_counts_each_process_once_and_not_the_root_itself() {
        let st = |ppid, ticks, child_ticks, rss_pages| PidStat {
            state: b'S',
            ppid,
            ticks,
            child_ticks,
            rss_pages,
        };
        // 10 = amdahl (root), 11 = sh (child), 12 = yes (grandchild), 13 = orphan re-parented to
        // amdahl, 99 = unrelated. Root waited for an earlier child worth 5 ticks.
        let procs = [
            (10, st(1, 1000, 5, 900)),
            (11, st(10, 20, 7, 100)),
            (12, st(11, 300, 0, 50)),
            (13, st(10, 40, 0, 10)),
            (99, st(1, 5000, 0, 1)),
        ];
        assert_eq!(
            parse_vm_hwm("Name:\tpython\nVmHWM:\t  12345 kB\n"),
            Some(12_641_280)
        );
        assert_eq!(parse_vm_hwm("VmHWM: lots kB"), None);
        assert_eq!(tree_usage(10, &procs), (5 + 27 + 300 + 40, 160));
    }

    #[test]
    fn parses_proc_files() {
        let stat = "cpu  100 5 50 1000 20 3 2 1 7 0\ncpu0 1 2 3 4 5 6 7 8 9 0\n";
        assert_eq!(parse_stat_busy_ticks(stat), Some(100 + 5 + 50 + 3 + 2 + 1));
        let pid = "1234 (my (odd) prog) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 30 7 3 20 0 1 0 100 1000 50";
        assert_eq!(
            parse_pid_stat(pid),
            Some(PidStat {
                state: b'S',
                ppid: 1,
                ticks: 280,
                child_ticks: 10,
                rss_pages: 50
            })
        );
        assert_eq!(
            parse_mem_total("MemTotal:       16384000 kB\nMemFree: 1 kB\n"),
            Some(16_384_000 * 1024)
        );
        assert_eq!(parse_pid_stat("garbage"), None);
    }
}

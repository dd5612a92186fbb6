//! Small readers of `/proc`: CPU time of the machine and of a process, memory size, CPU model.
//! Parsers are pure functions of the file text (proc(5) field positions).

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
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    parse_stat_busy_ticks(&s).map(|t| Seconds(t as f64 / clk_tck()))
}

/// utime + stime + cutime + cstime (fields 14–17) of `/proc/PID/stat`; the command name (field
/// 2) may contain spaces and parentheses, so fields are counted after the last `)`.
pub fn parse_pid_stat_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': index 0 is field 3 (state), so field k is index k - 3.
    (11..=14).map(|i| f.get(i)?.parse::<u64>().ok()).sum()
}

/// Resident set size in bytes from `/proc/PID/statm` (second field, pages).
pub fn parse_statm_rss_pages(statm: &str) -> Option<u64> {
    statm.split_whitespace().nth(1)?.parse().ok()
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
    parse_mem_total(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// The first `model name` of `/proc/cpuinfo`.
pub fn cpu_model() -> Option<String> {
    let s = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("model name"))?;
    Some(line.split_once(':')?.1.trim().to_string())
}

/// `Linux-<kernel release>-<machine>`, the shape of Python's `platform.platform()`.
pub fn os_string() -> String {
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{}-{}-{}",
        std::env::consts::OS,
        rel.trim(),
        std::env::consts::ARCH
    )
}

/// This machine's host name (`gethostname(2)`).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        let stat = "cpu  100 5 50 1000 20 3 2 1 7 0\ncpu0 1 2 3 4 5 6 7 8 9 0\n";
        assert_eq!(parse_stat_busy_ticks(stat), Some(100 + 5 + 50 + 3 + 2 + 1));
        let pid = "1234 (my (odd) prog) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 30 7 3 20 0 1 0 100 1000 50";
        assert_eq!(parse_pid_stat_ticks(pid), Some(250 + 30 + 7 + 3));
        assert_eq!(parse_statm_rss_pages("1000 250 100 1 0 50 0"), Some(250));
        assert_eq!(
            parse_mem_total("MemTotal:       16384000 kB\nMemFree: 1 kB\n"),
            Some(16_384_000 * 1024)
        );
        assert_eq!(parse_pid_stat_ticks("garbage"), None);
    }
}

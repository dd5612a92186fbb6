//! What the benchmarks need to know about the machine: logical CPUs, free memory, cache sizes.
//!
//! Every reading is optional: a missing or unreadable file gives `None`, never a panic, and the
//! benchmarks fall back to documented defaults.

use crate::error::{BenchError, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Logical CPUs this process may use (`sched_getaffinity` through std), at least 1.
pub fn logical_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The thread count a benchmark will use, and whether the request was capped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Threads {
    pub used: usize,
    /// The user's request when it exceeded the machine and was capped to `used`.
    pub capped_from: Option<usize>,
}

/// Validate a requested thread count: ≤ 0 is an error, more than `machine` is capped (the
/// caller warns), `None` means all of them.
pub fn resolve_threads(requested: Option<i64>, machine: usize) -> Result<Threads> {
    let machine = machine.max(1);
    match requested {
        None => Ok(Threads {
            used: machine,
            capped_from: None,
        }),
        Some(r) if r < 1 => Err(BenchError::NotPositive {
            what: "--threads",
            value: r,
        }),
        Some(r) => {
            let r = usize::try_from(r).unwrap_or(usize::MAX);
            Ok(if r > machine {
                Threads {
                    used: machine,
                    capped_from: Some(r),
                }
            } else {
                Threads {
                    used: r,
                    capped_from: None,
                }
            })
        }
    }
}

/// Validate one problem size given by the user (matrix order, array length).
pub fn positive_size(what: &'static str, value: i64) -> Result<usize> {
    if value < 1 {
        return Err(BenchError::NotPositive { what, value });
    }
    usize::try_from(value).map_err(|_| BenchError::TooLarge {
        what: what.to_string(),
        detail: format!("{value} does not fit in a machine word"),
    })
}

/// The most timed repeats a benchmark keeps: every repeat's time is kept for the median (8 bytes
/// each, 8 MB at the cap). More repeats would not sharpen a median that a million already pin.
pub const MAX_REPEATS: usize = 1_000_000;

/// `--repeats`: 1 to [`MAX_REPEATS`], with a message that names the cap.
pub fn repeats(value: i64) -> Result<usize> {
    let r = positive_size("--repeats", value)?;
    if r > MAX_REPEATS {
        return Err(BenchError::TooLarge {
            what: "--repeats".into(),
            detail: format!(
                "{r} is above the cap of {MAX_REPEATS} (each repeat's time is kept for the median); \
                 give at most {MAX_REPEATS}, or run the benchmark several times"
            ),
        });
    }
    Ok(r)
}

/// Bytes of memory available to new allocations (`MemAvailable` in /proc/meminfo), if known.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo_available(&text)
}

/// `MemAvailable:   23456789 kB` → bytes.
pub fn parse_meminfo_available(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// Refuse a benchmark whose buffers would not fit in the memory available now. `available` is
/// `None` when unknown, in which case the allocation is attempted.
pub fn check_fits(what: &str, needed: u64, available: Option<u64>) -> Result<()> {
    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
    match available {
        Some(avail) if needed > avail => Err(BenchError::OutOfMemory {
            what: what.to_string(),
            needed_gib: needed as f64 / GIB,
            available_gib: avail as f64 / GIB,
        }),
        _ => Ok(()),
    }
}

/// Bytes for `count` elements of `elem` bytes each, refusing overflow.
pub fn bytes_for(what: &str, count: &[usize], elem: usize) -> Result<u64> {
    count
        .iter()
        .try_fold(elem as u64, |acc, &c| acc.checked_mul(c as u64))
        .ok_or_else(|| BenchError::TooLarge {
            what: what.to_string(),
            detail: "its byte count overflows 64 bits".into(),
        })
}

/// One data or unified cache level as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cache {
    pub level: u8,
    /// "Data", "Unified" (instruction caches are skipped).
    pub kind: String,
    pub size_bytes: u64,
}

/// Data and unified caches of CPU 0 from sysfs (`/sys/devices/system/cpu/cpu0/cache`).
pub fn caches() -> Vec<Cache> {
    caches_under(Path::new("/sys/devices/system/cpu/cpu0/cache"))
}

/// Caches from a sysfs-shaped directory (`index*/{level,type,size}`), sorted by level.
pub fn caches_under(dir: &Path) -> Vec<Cache> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let read = |p: &Path, f: &str| std::fs::read_to_string(p.join(f)).ok();
    let mut out: Vec<Cache> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
        .filter_map(|e| {
            let p = e.path();
            let kind = read(&p, "type")?.trim().to_string();
            if kind == "Instruction" {
                return None;
            }
            let level = read(&p, "level")?.trim().parse().ok()?;
            let size_bytes = parse_cache_size(&read(&p, "size")?)?;
            Some(Cache {
                level,
                kind,
                size_bytes,
            })
        })
        .collect();
    out.sort_by_key(|c| c.level);
    out
}

/// sysfs cache sizes: "48K", "2048K", "32M" (binary multiples, as the kernel prints them).
pub fn parse_cache_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'K' => (&s[..s.len() - 1], 1024),
        'M' => (&s[..s.len() - 1], 1024 * 1024),
        'G' => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// What every benchmark result records about where it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MachineInfo {
    pub cpu_model: Option<String>,
    pub logical_cpus: usize,
    pub threads: Threads,
    pub caches: Vec<Cache>,
}

impl MachineInfo {
    pub fn detect(threads: Threads) -> Self {
        Self {
            cpu_model: amdahl_meter::procfs::cpu_model(),
            logical_cpus: logical_cpus(),
            threads,
            caches: caches(),
        }
    }
}

/// A pool of exactly `n` worker threads, so "n threads" means n and not the global default.
pub fn pool(n: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(n.max(1))
        .build()
        .map_err(|source| BenchError::ThreadPool { threads: n, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_cap_and_reject() {
        assert_eq!(resolve_threads(None, 8).unwrap().used, 8);
        let t = resolve_threads(Some(64), 8).unwrap();
        assert_eq!((t.used, t.capped_from), (8, Some(64)));
        assert_eq!(resolve_threads(Some(3), 8).unwrap().used, 3);
        assert!(matches!(
            resolve_threads(Some(0), 8),
            Err(BenchError::NotPositive { value: 0, .. })
        ));
        assert!(resolve_threads(Some(-2), 8).is_err());
    }

    #[test]
    fn sizes_must_be_positive() {
        assert_eq!(positive_size("--sizes", 5).unwrap(), 5);
        assert!(positive_size("--sizes", 0).is_err());
        assert!(positive_size("--sizes", -1).is_err());
    }

    #[test]
    fn memory_refusal_names_the_need() {
        let e = check_fits("GEMM n=100000", 240_000_000_000, Some(8 << 30)).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("223.52 GiB") && msg.contains("8.00 GiB"),
            "{msg}"
        );
        assert!(check_fits("x", 10, None).is_ok());
        assert!(bytes_for("x", &[usize::MAX, 4], 8).is_err());
        assert_eq!(bytes_for("x", &[3, 10, 10], 8).unwrap(), 2400);
    }

    #[test]
    fn parses_kernel_formats() {
        assert_eq!(
            parse_meminfo_available("MemTotal: 10 kB\nMemAvailable:   2048 kB\n"),
            Some(2048 * 1024)
        );
        assert_eq!(parse_meminfo_available("MemTotal: 10 kB\n"), None);
        assert_eq!(parse_cache_size("48K\n"), Some(48 * 1024));
        assert_eq!(parse_cache_size("32M"), Some(32 << 20));
        assert_eq!(parse_cache_size("x"), None);
    }

    #[test]
    fn reads_a_fake_sysfs_cache_tree() {
        let dir = std::env::temp_dir().join(format!("amdahl-cache-{}", std::process::id()));
        for (i, (lvl, ty, size)) in [
            (1, "Data", "48K"),
            (1, "Instruction", "32K"),
            (2, "Unified", "1024K"),
        ]
        .iter()
        .enumerate()
        {
            let d = dir.join(format!("index{i}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("level"), format!("{lvl}\n")).unwrap();
            std::fs::write(d.join("type"), format!("{ty}\n")).unwrap();
            std::fs::write(d.join("size"), format!("{size}\n")).unwrap();
        }
        let c = caches_under(&dir);
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].level, c[0].size_bytes), (1, 48 * 1024));
        assert_eq!((c[1].level, c[1].size_bytes), (2, 1 << 20));
        assert!(caches_under(Path::new("/nonexistent/amdahl")).is_empty());
    }
}

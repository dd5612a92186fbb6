//! RAPL through the Linux powercap interface (`/sys/class/powercap`).
//!
//! Layout (kernel Documentation/power/powercap/powercap.rst): top-level zones `intel-rapl:N`
//! (`name` = `package-N` or `psys`) with sub-zones `intel-rapl:N:M` (`core`, `uncore`, `dram`).
//! Each zone has `energy_uj` (µJ, wraps at `max_energy_range_uj`). A package already contains
//! its core and uncore sub-zones, so those are never added; `dram` is separate; `psys`, where
//! present, covers the whole platform. `intel-rapl-mmio:*` duplicates the package through MMIO and
//! is skipped. Real sysfs also links every sub-zone at the top level: only nested ones are read.

use crate::source::{DeviceInfo, DeviceKind, EnergySource, Method, Raw};
use crate::MeterError;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The default powercap root.
pub const DEFAULT_ROOT: &str = "/sys/class/powercap";

/// How files are read; injectable so tests can simulate EACCES even when running as root.
pub type FileReader = Arc<dyn Fn(&Path) -> std::io::Result<String> + Send + Sync>;

/// The real reader.
pub fn fs_reader() -> FileReader {
    Arc::new(|p: &Path| crate::small_file::read_small(p))
}

/// One zone found under the root, readable or not.
#[derive(Debug)]
pub struct Zone {
    /// `intel-rapl:0`, `intel-rapl:0:2`.
    pub id: String,
    pub dir: PathBuf,
    /// Content of `name`.
    pub name: String,
    /// None for zones that are deliberately not read (core, uncore: inside their package).
    pub kind: Option<DeviceKind>,
    pub max_uj: Option<u64>,
    /// The first reading, or why it failed.
    pub status: Result<u64, MeterError>,
}

impl Zone {
    pub fn usable(&self) -> bool {
        self.kind.is_some() && self.status.is_ok()
    }
}

/// Everything found under a powercap root.
#[derive(Debug)]
pub struct Scan {
    pub root: PathBuf,
    pub root_exists: bool,
    pub zones: Vec<Zone>,
}

fn read_u64(reader: &FileReader, path: &Path) -> Result<u64, MeterError> {
    let text = reader(path).map_err(|e| MeterError::from_io(path, e))?;
    let t = text.trim();
    t.parse().map_err(|_| MeterError::Parse {
        path: path.to_path_buf(),
        found: t.chars().take(40).collect(),
    })
}

fn kind_of(name: &str) -> Option<DeviceKind> {
    if name.starts_with("package-") {
        Some(DeviceKind::CpuPackage)
    } else if name == "dram" {
        Some(DeviceKind::Dram)
    } else if name == "psys" {
        Some(DeviceKind::Psys)
    } else {
        None
    }
}

/// `intel-rapl:N` has one colon; sub-zones `intel-rapl:N:M` two.
fn zone_depth(file_name: &str) -> Option<usize> {
    let rest = file_name.strip_prefix("intel-rapl:")?;
    let parts: Vec<&str> = rest.split(':').collect();
    if parts
        .iter()
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    {
        Some(parts.len())
    } else {
        None
    }
}

fn sorted_entries(dir: &Path, depth: usize) -> Vec<(String, PathBuf)> {
    let mut v: Vec<(String, PathBuf)> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                (zone_depth(&n) == Some(depth)).then(|| (n, e.path()))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

fn zone(reader: &FileReader, id: String, dir: PathBuf) -> Zone {
    let name = reader(&dir.join("name"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| id.clone());
    let kind = kind_of(&name);
    let max_uj = read_u64(reader, &dir.join("max_energy_range_uj")).ok();
    let status = read_u64(reader, &dir.join("energy_uj"));
    Zone {
        id,
        dir,
        name,
        kind,
        max_uj,
        status,
    }
}

/// List every zone under `root`, reading each once.
pub fn scan(root: &Path, reader: &FileReader) -> Scan {
    let mut zones = Vec::new();
    for (id, dir) in sorted_entries(root, 1) {
        let subs = sorted_entries(&dir, 2);
        zones.push(zone(reader, id, dir));
        for (sid, sdir) in subs {
            zones.push(zone(reader, sid, sdir));
        }
    }
    Scan {
        root: root.to_path_buf(),
        root_exists: root.is_dir(),
        zones,
    }
}

/// The readable package, dram and psys zones as an energy source.
pub struct RaplSource {
    reader: FileReader,
    zones: Vec<(DeviceInfo, PathBuf, Option<u64>)>,
}

impl RaplSource {
    /// Build from a scan, keeping only usable zones. None when nothing is readable.
    pub fn from_scan(scan: &Scan, reader: FileReader) -> Option<Self> {
        Self::from_scan_where(scan, reader, |_| true)
    }

    /// [`RaplSource::from_scan`] keeping only zones whose kind `keep` admits (an APU's socket
    /// power already holds the packages).
    pub fn from_scan_where(
        scan: &Scan,
        reader: FileReader,
        keep: impl Fn(DeviceKind) -> bool,
    ) -> Option<Self> {
        let zones: Vec<_> = scan
            .zones
            .iter()
            .filter(|z| z.usable() && z.kind.is_some_and(&keep))
            .filter_map(|z| {
                let kind = z.kind?;
                Some((
                    DeviceInfo {
                        id: z.id.clone(),
                        kind,
                        name: z.name.clone(),
                        method: Method::Counter,
                    },
                    z.dir.join("energy_uj"),
                    z.max_uj,
                ))
            })
            .collect();
        (!zones.is_empty()).then_some(RaplSource { reader, zones })
    }
}

impl EnergySource for RaplSource {
    fn devices(&self) -> Vec<DeviceInfo> {
        self.zones.iter().map(|(d, _, _)| d.clone()).collect()
    }

    fn read(&mut self) -> Vec<Result<Raw, MeterError>> {
        self.zones
            .iter()
            .map(|(_, path, max)| {
                read_u64(&self.reader, path).map(|value| Raw::Counter {
                    value,
                    units_per_joule: 1e6,
                    max: *max,
                    power: None,
                })
            })
            .collect()
    }
}

/// Builders for fake powercap trees with the real layout, for tests here and in the CLI.
pub mod fake {
    use std::path::{Path, PathBuf};

    /// Create zone `id` (e.g. `intel-rapl:0` or, nested under its parent, `intel-rapl:0:0`).
    pub fn zone(
        root: &Path,
        id: &str,
        name: &str,
        energy_uj: u64,
        max_uj: u64,
    ) -> std::io::Result<PathBuf> {
        let dir = match id.rsplit_once(':') {
            Some((parent, _)) if parent.matches(':').count() >= 1 => root.join(parent).join(id),
            _ => root.join(id),
        };
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("name"), format!("{name}\n"))?;
        std::fs::write(dir.join("energy_uj"), format!("{energy_uj}\n"))?;
        std::fs::write(dir.join("max_energy_range_uj"), format!("{max_uj}\n"))?;
        Ok(dir)
    }

    /// A two-socket-like tree: package-0 with core, uncore and dram sub-zones.
    pub fn standard(root: &Path) -> std::io::Result<()> {
        let max = 262_143_328_850;
        zone(root, "intel-rapl:0", "package-0", 1_000_000, max)?;
        zone(root, "intel-rapl:0:0", "core", 500_000, max)?;
        zone(root, "intel-rapl:0:1", "uncore", 100_000, max)?;
        zone(root, "intel-rapl:0:2", "dram", 2_000_000, 65_712_999_613)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(dir: &Path, v: u64) {
        std::fs::write(dir.join("energy_uj"), format!("{v}\n")).unwrap();
    }

    #[test]
    fn scan_keeps_package_and_dram_never_core_or_uncore() {
        let t = tempfile::tempdir().unwrap();
        fake::standard(t.path()).unwrap();
        let s = scan(t.path(), &fs_reader());
        let ids: Vec<_> = s
            .zones
            .iter()
            .map(|z| (z.id.as_str(), z.usable()))
            .collect();
        assert_eq!(
            ids,
            [
                ("intel-rapl:0", true),
                ("intel-rapl:0:0", false),
                ("intel-rapl:0:1", false),
                ("intel-rapl:0:2", true)
            ]
        );
        let src = RaplSource::from_scan(&s, fs_reader()).unwrap();
        let names: Vec<_> = src.devices().into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["package-0", "dram"]);
    }

    #[test]
    fn top_level_sub_zone_links_and_mmio_are_not_double_counted() {
        let t = tempfile::tempdir().unwrap();
        fake::standard(t.path()).unwrap();
        // Real sysfs also exposes sub-zones and the MMIO package at the top level.
        fake::zone(t.path(), "intel-rapl-mmio:0", "package-0", 1, 10).unwrap();
        std::fs::create_dir_all(t.path().join("intel-rapl:0:2")).unwrap();
        std::fs::write(t.path().join("intel-rapl:0:2/name"), "dram\n").unwrap();
        let s = scan(t.path(), &fs_reader());
        assert_eq!(s.zones.len(), 4);
    }

    #[test]
    fn injected_eacces_is_reported_with_the_fix() {
        let t = tempfile::tempdir().unwrap();
        fake::standard(t.path()).unwrap();
        let reader: FileReader = Arc::new(|p: &Path| {
            if p.ends_with("energy_uj") {
                Err(std::io::Error::from_raw_os_error(libc::EACCES))
            } else {
                std::fs::read_to_string(p)
            }
        });
        let s = scan(t.path(), &reader);
        let z = &s.zones[0];
        let msg = z.status.as_ref().unwrap_err().to_string();
        assert!(
            msg.contains("CVE-2020-8694") && msg.contains("chmod"),
            "{msg}"
        );
        assert!(RaplSource::from_scan(&s, reader).is_none());
    }

    /// Regression: a `name` (or `energy_uj`) linked to `/dev/zero` was read to the end, without
    /// bound (about 1 GB allocated before anything failed). Every read now stops at 4 KiB.
    #[test]
    fn a_zone_file_linked_to_dev_zero_is_unreadable_not_read_without_end() {
        let t = tempfile::tempdir().unwrap();
        fake::standard(t.path()).unwrap();
        let pkg = t.path().join("intel-rapl:0");
        let dram = pkg.join("intel-rapl:0:2");
        for f in [pkg.join("name"), dram.join("energy_uj")] {
            std::fs::remove_file(&f).unwrap();
            std::os::unix::fs::symlink("/dev/zero", &f).unwrap();
        }
        let s = scan(t.path(), &fs_reader());
        let p = s.zones.iter().find(|z| z.id == "intel-rapl:0").unwrap();
        assert_eq!(
            p.name, "intel-rapl:0",
            "an unreadable name falls back to the id"
        );
        assert!(!p.usable());
        let d = s.zones.iter().find(|z| z.id == "intel-rapl:0:2").unwrap();
        let e = d.status.as_ref().unwrap_err().to_string();
        assert!(
            e.contains("energy_uj") && e.contains("longer than 4096 bytes"),
            "{e}"
        );
    }

    #[test]
    fn reads_are_raw_microjoules_with_range() {
        let t = tempfile::tempdir().unwrap();
        fake::standard(t.path()).unwrap();
        let s = scan(t.path(), &fs_reader());
        let mut src = RaplSource::from_scan(&s, fs_reader()).unwrap();
        set(&t.path().join("intel-rapl:0"), 7_000_000);
        let r = src.read();
        assert!(matches!(
            r[0],
            Ok(Raw::Counter {
                value: 7_000_000,
                max: Some(262_143_328_850),
                ..
            })
        ));
        std::fs::remove_dir_all(t.path().join("intel-rapl:0/intel-rapl:0:2")).unwrap();
        assert!(src.read()[1].is_err());
    }
}

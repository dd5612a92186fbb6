//! Which processes use each AMD GPU, from the amdgpu driver's KFD sysfs tree: no ROCm library
//! needed, only the kernel's `/sys/class/kfd/kfd`. The AMD counterpart of NVML's process list for
//! [`super::gpu`].
//!
//! Layout, checked against the Linux kernel source (drivers/gpu/drm/amd/amdkfd):
//! * `kfd_process.c`, `kfd_create_process`: each process with a KFD (ROCm/HIP) context gets
//!   `proc/<pid>/`, named `"%d"` of `lead_thread->pid`, the pid in the initial pid namespace
//!   (so `--proc-root` must be the host's /proc, as for everything else the exporter reads).
//! * `kfd_procfs_add_sysfs_files`: per GPU the process opened, `vram_<gpuid>` (the process's
//!   `vram_usage`, bytes, `"%llu\n"` in `kfd_procfs_show`) and `sdma_<gpuid>` (SDMA activity,
//!   µs); `kfd_procfs_add_sysfs_stats`: `stats_<gpuid>/evicted_ms` and, only where the ASIC has
//!   `get_cu_occupancy`, `stats_<gpuid>/cu_occupancy`: the compute units occupied by the
//!   process's in-flight waves *now* (`kfd_get_cu_occupancy`, waves / max waves per CU rounded
//!   up; 0 without queues; `-EINVAL` where unsupported).
//! * `kfd_topology.c`: `topology/nodes/<n>/gpu_id` (`"%u\n"`, 0 for a CPU node; `-EPERM` where
//!   the device cgroup hides the GPU) and `topology/nodes/<n>/properties`, lines `name value`
//!   (`sysfs_show_32bit_prop`, `"%s %u\n"`) with `domain` (`pci_domain_nr`) and `location_id`
//!   (`pci_dev_id` = bus << 8 | device << 3 | function; on a GPU split into partitions, MI300X in
//!   CPX mode, the partition number is OR-ed into bits 28–31, so each partition is a node of its
//!   own with one PCI address).
//!
//! `sdma_<gpuid>` and `evicted_ms` are not read: neither says how much of the GPU's power a
//! process draws (copies, time evicted). The rule ([`super::gpu::gpu_weights`]): a process with a
//! nonzero `vram_<gpuid>` on any partition of a card uses that card; its weight is its summed
//! `cu_occupancy` where every user's is readable and not all are 0 (reported as the
//! `utilisation` rule), else the users share equally (`processes`); with no user the card's
//! energy stays unattributed. `cu_occupancy` is an instant, read once per interval, not an
//! average over it: a sampled estimate of each process's share of the compute units.

use super::gpu::{GpuUsage, GpuUsageSource};
use crate::gpu::ProcessSample;
use crate::rapl::FileReader;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The KFD tree that sits beside a hwmon root: `/sys/class/hwmon` → `/sys/class/kfd/kfd`, so a
/// container that bind-mounts the host's `/sys/class` (or a test's fake tree) and passes
/// `--hwmon-root` moves both at once.
pub fn root_beside(hwmon_root: &Path) -> PathBuf {
    hwmon_root
        .parent()
        .unwrap_or_else(|| Path::new("/"))
        .join("kfd")
        .join("kfd")
}

/// The PCI address (`0000:c1:00.0`) of a KFD topology node from its `domain` and `location_id`.
pub fn pci_address(domain: u32, location_id: u32) -> String {
    // Bits 28–31 hold the partition of a partitioned GPU (kfd_topology_add_device); the PCI
    // function is the low 16 bits (pci_dev_id).
    let id = location_id & 0xffff;
    format!(
        "{domain:04x}:{:02x}:{:02x}.{:x}",
        id >> 8,
        (id >> 3) & 0x1f,
        id & 0x7
    )
}

fn number(reader: &FileReader, p: &Path) -> Option<u64> {
    reader(p).ok()?.trim().parse().ok()
}

/// `name value` lines of a topology `properties` file.
fn property(text: &str, name: &str) -> Option<u32> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == name).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Every GPU node of the KFD topology: its `gpu_id` and PCI address. CPU nodes (gpu_id 0),
/// nodes hidden by the device cgroup and unreadable ones are left out.
pub fn topology(kfd_root: &Path, reader: &FileReader) -> Vec<(u32, String)> {
    let Ok(rd) = std::fs::read_dir(kfd_root.join("topology/nodes")) else {
        return Vec::new();
    };
    let mut v: Vec<(u32, String)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let dir = e.path();
            let gpu_id = u32::try_from(number(reader, &dir.join("gpu_id"))?).ok()?;
            let props = reader(&dir.join("properties")).ok()?;
            let pci = pci_address(
                property(&props, "domain")?,
                property(&props, "location_id")?,
            );
            (gpu_id != 0).then_some((gpu_id, pci))
        })
        .collect();
    v.sort();
    v
}

/// One process's use of one card: bytes of VRAM over the card's partitions, and compute units
/// occupied (None where a partition's `cu_occupancy` is missing or unreadable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Use {
    vram: u64,
    cu: Option<u64>,
}

/// Per-process GPU usage of the AMD GPUs the hwmon scan meters, keyed by their device ids
/// (`amdgpu:N`).
pub struct KfdUsage {
    root: PathBuf,
    reader: FileReader,
    /// The device id of each KFD gpu_id (several for a partitioned card).
    cards: BTreeMap<u32, String>,
    /// Every card's device id, so a card nobody uses is reported (unattributed), not missing.
    ids: Vec<String>,
}

impl KfdUsage {
    /// `cards`: (device id, PCI address) of each AMD GPU whose energy is metered. Errs, saying
    /// why, where the KFD tree has no GPU node matching them (no amdgpu KFD, a container
    /// without /sys/class/kfd).
    pub fn new(
        kfd_root: &Path,
        reader: FileReader,
        cards: &[(String, String)],
    ) -> Result<Self, String> {
        let by_pci: BTreeMap<u32, String> = topology(kfd_root, &reader)
            .into_iter()
            .filter_map(|(gpu_id, pci)| {
                let (id, _) = cards.iter().find(|(_, p)| p.eq_ignore_ascii_case(&pci))?;
                Some((gpu_id, id.clone()))
            })
            .collect();
        if by_pci.is_empty() {
            return Err(format!(
                "no GPU node under {}/topology/nodes matches the AMD GPUs metered ({}): the \
                 amdgpu driver's KFD is not loaded, or /sys/class/kfd is not mounted here \
                 (bind-mount the host's /sys/class and point --hwmon-root at its hwmon)",
                kfd_root.display(),
                cards
                    .iter()
                    .map(|(id, pci)| format!("{id} at {pci}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(KfdUsage {
            root: kfd_root.to_path_buf(),
            reader,
            cards: by_pci,
            ids: {
                let mut ids: Vec<String> = cards.iter().map(|(id, _)| id.clone()).collect();
                ids.dedup();
                ids
            },
        })
    }

    /// One process's use of each card, from its `vram_<gpuid>` and `cu_occupancy` files. A
    /// process that exits while it is read loses its files (ENOENT): it is then not a user, like
    /// one that was never there.
    fn process(&self, dir: &Path) -> BTreeMap<String, Use> {
        let mut out: BTreeMap<String, Use> = BTreeMap::new();
        for (gpu_id, card) in &self.cards {
            let Some(vram) = number(&self.reader, &dir.join(format!("vram_{gpu_id}"))) else {
                continue;
            };
            let cu = number(
                &self.reader,
                &dir.join(format!("stats_{gpu_id}/cu_occupancy")),
            );
            let u = out.entry(card.clone()).or_insert(Use {
                vram: 0,
                cu: Some(0),
            });
            u.vram = u.vram.saturating_add(vram);
            u.cu = match (u.cu, cu) {
                (Some(a), Some(b)) => Some(a.saturating_add(b)),
                _ => None,
            };
        }
        out.retain(|_, u| u.vram > 0);
        out
    }
}

/// The usage of one card from its users: CU occupancy as weights where every user's is
/// readable and some is nonzero, else the users alone (an equal split).
fn card_usage(users: &[(u32, Use)]) -> GpuUsage {
    let all_cu: Option<Vec<ProcessSample>> = users
        .iter()
        .map(|(pid, u)| {
            Some(ProcessSample {
                pid: *pid,
                timestamp_us: 0,
                sm_percent: u32::try_from(u.cu?).unwrap_or(u32::MAX),
            })
        })
        .collect();
    GpuUsage {
        samples: all_cu,
        processes: Some(users.iter().map(|(pid, _)| *pid).collect()),
    }
}

impl GpuUsageSource for KfdUsage {
    fn usage(&mut self) -> Vec<(String, GpuUsage)> {
        let mut users: BTreeMap<String, Vec<(u32, Use)>> =
            self.ids.iter().map(|id| (id.clone(), Vec::new())).collect();
        let pids: Vec<(u32, PathBuf)> = std::fs::read_dir(self.root.join("proc"))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path())))
                    .collect()
            })
            .unwrap_or_default();
        for (pid, dir) in pids {
            for (card, u) in self.process(&dir) {
                users.entry(card).or_default().push((pid, u));
            }
        }
        users
            .into_iter()
            .map(|(id, mut u)| {
                u.sort_by_key(|(pid, _)| *pid);
                (id, card_usage(&u))
            })
            .collect()
    }
}

/// Usage of the AMD GPUs the hwmon scan under `hwmon_root` meters, from the KFD tree beside it:
/// None without an AMD GPU; an error saying why where there are AMD GPUs but no KFD tree.
pub fn kfd_usage(
    hwmon_root: &Path,
    reader: FileReader,
    visible: &crate::hwmon::AmdVisible,
) -> Result<Option<Box<dyn GpuUsageSource>>, String> {
    let scan = crate::hwmon::scan(hwmon_root, &reader, visible);
    // A card whose power is reported on another (an MI250X's second GCD: amdgpu aldebaran_ppt.c)
    // shares its package's energy: its users are users of the sensor that is metered.
    let metered_of = |package: &str| {
        scan.sensors
            .iter()
            .find(|s| s.usable() && s.package == package)
            .map(|s| s.info.id.clone())
    };
    let cards: Vec<(String, String)> = scan
        .sensors
        .iter()
        .filter(|s| s.driver == "amdgpu" && !s.pci.is_empty())
        .map(|s| {
            let id = metered_of(&s.package).unwrap_or_else(|| s.info.id.clone());
            (id, s.pci.clone())
        })
        .collect();
    if cards.is_empty() {
        return Ok(None);
    }
    let u = KfdUsage::new(&root_beside(hwmon_root), reader, &cards)?;
    Ok(Some(Box::new(u)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_address_from_domain_and_location_id() {
        // c1:00.0 → bus 0xc1 << 8; 05:02.3 → 0x0500 | 2 << 3 | 3.
        assert_eq!(pci_address(0, 0xc100), "0000:c1:00.0");
        assert_eq!(pci_address(1, 0x0513), "0001:05:02.3");
        // A CPX partition's node: partition 5 in bits 28–31, same card.
        assert_eq!(pci_address(0, (5 << 28) | 0xc100), "0000:c1:00.0");
    }

    #[test]
    fn properties_are_name_value_lines() {
        let t = "cpu_cores_count 0\nlocation_id 49408\ndomain 0\n";
        assert_eq!(property(t, "location_id"), Some(49408));
        assert_eq!(property(t, "domain"), Some(0));
        assert_eq!(property(t, "drm_render_minor"), None);
    }
}

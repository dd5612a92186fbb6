//! Power and energy sensors of the Linux hwmon class (`/sys/class/hwmon/hwmon*`): AMD GPUs
//! (`amdgpu`), Intel GPUs (`i915`, `xe`), NVIDIA Grace (`power_meter` with `power1_oem_info`),
//! Ampere Altra (`apm_xgene`) and other chips that expose power or energy.
//!
//! Layout (kernel Documentation/hwmon/sysfs-interface.rst): every chip is a directory
//! `hwmonN` with a `name` file and attributes `energyN_input` (cumulative µJ), `powerN_input`
//! (instantaneous µW), `powerN_average` (µW averaged by the chip), `*_label` naming a channel.
//! Drivers registered with the old `hwmon_device_register()` (ACPI `power_meter`, Grace) put the
//! attributes in the parent device, `hwmonN/device/`, so both places are read. `hwmonN/device`
//! is the parent device; for a GPU, a PCI function whose `vendor`, `device`, `unique_id` and
//! `product_name` (Documentation/gpu/amdgpu/driver-misc.rst) identify it. The DRM path
//! `/sys/class/drm/card*/device/hwmon/hwmon*` is the same chip seen from the card.
//!
//! What each reading covers, and so what may be added, is decided per driver in [`amd`],
//! [`intel`] and [`host`]; [`dedupe`] keeps one reading per shared package.

pub mod amd;
pub mod detect;
pub mod fake;
pub mod host;
pub mod intel;
mod select;
#[cfg(test)]
mod tests;
pub mod unreadable;

use crate::rapl::FileReader;
use crate::source::{DeviceInfo, DeviceKind, EnergySource, Method, Raw};
use crate::MeterError;
use amdahl_model::units::Watts;
use std::path::{Path, PathBuf};

pub use amd::AmdVisible;
pub use intel::ZeMask;
pub use select::HwmonUse;

/// The default hwmon root.
pub const DEFAULT_ROOT: &str = "/sys/class/hwmon";

/// Which file a sensor reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// `energyN_input`: cumulative µJ (hwmon sysfs-interface).
    EnergyUj,
    /// `powerN_average` or `powerN_input`: µW, integrated over time.
    PowerUw,
}

/// Whether a sensor measures a GPU (opened unless `--no-gpu`) or the host (used only where RAPL
/// does not cover the CPU: ARM hosts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    Gpu,
    Host,
}

/// What becomes of a sensor found in the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Use {
    /// Read and added to the total.
    Metered,
    /// Readable but covered by another reading (a tile inside its card, the CPU rail inside the
    /// Grace socket, the second GCD of an MI250X): never added. The text says which.
    Inside(String),
    /// Hidden by `ROCR_VISIBLE_DEVICES` / `HIP_VISIBLE_DEVICES` (AMD) or `ZE_AFFINITY_MASK`
    /// (Intel).
    Hidden(String),
    /// What it covers is not known, so adding it could count a part twice; listed only.
    Unknown(String),
}

/// One power or energy channel of a hwmon chip.
#[derive(Debug)]
pub struct Sensor {
    pub info: DeviceInfo,
    /// The chip's `name` (`amdgpu`, `i915`, `xe`, `power_meter`, ...).
    pub driver: String,
    /// The parent's PCI address (`0000:c1:00.0`), empty when not a PCI device.
    pub pci: String,
    /// What the reading covers, in words, for `detect` and the docs.
    pub covers: String,
    pub path: PathBuf,
    pub reading: Reading,
    pub domain: Domain,
    /// Readings with the same key measure one package; only one of them is added ([`dedupe`]).
    pub package: String,
    /// The reading covers the CPU socket RAPL would also read (MI300A: one power for CPU and GPU),
    /// so RAPL packages leave the total while it is metered.
    pub covers_cpu_package: bool,
    /// The reading covers the host CPU and its memory (Grace socket, MI300A's HBM), so no CPU or
    /// RAM estimate is added next to it.
    pub covers_host: bool,
    pub use_: Use,
    /// The first reading (µJ or µW), or why it failed.
    pub status: Result<u64, MeterError>,
}

impl Sensor {
    /// Read and added, and readable now.
    pub fn usable(&self) -> bool {
        self.use_ == Use::Metered && self.status.is_ok()
    }
}

/// A chip directory and where its attributes are.
#[derive(Debug, Clone)]
pub struct Chip {
    /// `hwmon3`.
    pub hwmon: String,
    pub dir: PathBuf,
    /// `hwmonN` or, for legacy drivers, `hwmonN/device`.
    pub attrs: PathBuf,
    pub name: String,
    pub pci: Pci,
}

/// The parent device's identity, where it is a PCI function.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pci {
    /// `0000:c1:00.0`, from the `device` link's target; empty when unknown.
    pub address: String,
    pub vendor: Option<u16>,
    pub device: Option<u16>,
    pub unique_id: Option<String>,
    pub product_name: Option<String>,
}

impl Chip {
    /// The attribute `file` (e.g. `energy1_input`) where it exists.
    /// Legacy drivers (ACPI `power_meter`) keep some attributes (`power1_oem_info`) on the parent
    /// device even where the rest moved into `hwmonN`, so the parent is the fallback.
    pub fn attr(&self, file: &str) -> Option<PathBuf> {
        [self.attrs.join(file), self.dir.join("device").join(file)]
            .into_iter()
            .find(|p| p.is_file())
    }

    /// A `*_label` or `power1_oem_info` text, trimmed.
    pub fn text(&self, reader: &FileReader, file: &str) -> Option<String> {
        let p = self.attr(file)?;
        let s = reader(&p).ok()?.trim().to_string();
        (!s.is_empty()).then_some(s)
    }

    /// Channel numbers of `kind` (`energy`, `power`) with an `_input` or `_average` file.
    pub fn channels(&self, kind: &str) -> Vec<u32> {
        let mut v: Vec<u32> = std::fs::read_dir(&self.attrs)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| {
                        let n = e.file_name().to_string_lossy().into_owned();
                        let rest = n.strip_prefix(kind)?;
                        let (num, attr) = rest.split_once('_')?;
                        (matches!(attr, "input" | "average")).then_some(())?;
                        num.parse().ok()
                    })
                    .collect()
            })
            .unwrap_or_default();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The best file of channel `n`: `energyN_input` (a counter) before `powerN_average` before
    /// `powerN_input`, as the amdgpu docs (thermal.rst) rank them: the average is the SMU's own
    /// integration, the input an instant.
    pub fn best(&self, n: u32) -> Option<(PathBuf, Reading)> {
        if let Some(p) = self.attr(&format!("energy{n}_input")) {
            return Some((p, Reading::EnergyUj));
        }
        self.attr(&format!("power{n}_average"))
            .or_else(|| self.attr(&format!("power{n}_input")))
            .map(|p| (p, Reading::PowerUw))
    }
}

fn hex(reader: &FileReader, p: &Path) -> Option<u16> {
    let s = reader(p).ok()?;
    u16::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok()
}

fn pci_of(reader: &FileReader, dir: &Path) -> Pci {
    let dev = dir.join("device");
    let address = std::fs::canonicalize(&dev)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .filter(|n| n.matches(':').count() == 2 && n.contains('.'))
        .unwrap_or_default();
    let text = |f: &str| {
        reader(&dev.join(f))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    Pci {
        address,
        vendor: hex(reader, &dev.join("vendor")),
        device: hex(reader, &dev.join("device")),
        unique_id: text("unique_id"),
        product_name: text("product_name"),
    }
}

/// Read one µJ or µW value. hwmon files are world-readable by default, so EACCES means a
/// hardened or containerised /sys: say how to open it.
pub fn read_value(reader: &FileReader, path: &Path) -> Result<u64, MeterError> {
    let text = reader(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            MeterError::HwmonPermission {
                path: path.to_path_buf(),
            }
        } else {
            MeterError::from_io(path, e)
        }
    })?;
    let t = text.trim();
    // hwmon prints `long` values (hwmon sysfs-interface); a negative one is garbage for power
    // or cumulative energy, as is anything not a number.
    t.parse().map_err(|_| MeterError::Parse {
        path: path.to_path_buf(),
        found: t.chars().take(40).collect(),
    })
}

/// Every chip under `root`, in `hwmonN` order.
pub fn chips(root: &Path, reader: &FileReader) -> Vec<Chip> {
    let mut v: Vec<(u64, String, PathBuf)> = std::fs::read_dir(root)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    let k = n.strip_prefix("hwmon")?.parse().ok()?;
                    Some((k, n, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v.into_iter()
        .filter_map(|(_, hwmon, dir)| {
            // `name` is mandatory (sysfs-interface); legacy drivers keep it in `device/`.
            let (name, attrs) = match reader(&dir.join("name")) {
                Ok(s) => (s, dir.clone()),
                Err(_) => (reader(&dir.join("device/name")).ok()?, dir.join("device")),
            };
            let attrs = if attrs == dir
                && !has_power_or_energy(&dir)
                && has_power_or_energy(&dir.join("device"))
            {
                dir.join("device")
            } else {
                attrs
            };
            Some(Chip {
                pci: pci_of(reader, &dir),
                hwmon,
                dir,
                attrs,
                name: name.trim().to_string(),
            })
        })
        .collect()
}

fn has_power_or_energy(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok()).any(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                (n.starts_with("power") || n.starts_with("energy"))
                    && (n.ends_with("_input") || n.ends_with("_average"))
            })
        })
        .unwrap_or(false)
}

/// Everything found under a hwmon root.
#[derive(Debug)]
pub struct Scan {
    pub root: PathBuf,
    pub root_exists: bool,
    /// Chips seen (with or without power sensors), for `detect`'s summary.
    pub chips: usize,
    pub sensors: Vec<Sensor>,
}

impl Scan {
    /// Whether a metered, readable sensor covers the CPU package RAPL reads (MI300A).
    pub fn covers_cpu_package(&self) -> bool {
        self.sensors
            .iter()
            .any(|s| s.usable() && s.covers_cpu_package)
    }
}

/// List every power and energy sensor under `root`, reading each once, deciding what each
/// covers and which are added.
pub fn scan(root: &Path, reader: &FileReader, visible: &AmdVisible) -> Scan {
    let chips = chips(root, reader);
    let mut sensors = amd::sensors(&chips, reader, visible);
    sensors.extend(intel::sensors(&chips, reader, &visible.ze));
    sensors.extend(host::sensors(&chips, reader));
    dedupe(&mut sensors);
    Scan {
        root: root.to_path_buf(),
        root_exists: root.is_dir(),
        chips: chips.len(),
        sensors,
    }
}

/// Keep one metered, readable sensor per package: the first; the others become `Inside` it.
/// MI250X's two GCDs share one package power; Intel tiles share their card's.
pub fn dedupe(sensors: &mut [Sensor]) {
    let mut seen: Vec<(String, String)> = Vec::new();
    for s in sensors.iter_mut() {
        if !s.usable() {
            continue;
        }
        if let Some((_, first)) = seen.iter().find(|(p, _)| *p == s.package) {
            s.use_ = Use::Inside(format!(
                "shares package `{}` with {first}, which is counted; not added again",
                s.package
            ));
        } else {
            seen.push((s.package.clone(), s.info.id.clone()));
        }
    }
}

/// The metered sensors of a scan as an energy source.
pub struct HwmonSource {
    reader: FileReader,
    sensors: Vec<(DeviceInfo, PathBuf, Reading)>,
    fallbacks: Vec<Option<crate::accum::Fallback>>,
}

impl HwmonSource {
    /// The usable sensors of `scan` that `keep` admits, and the GPUs it admits that are visible
    /// but unreadable and have a catalog TDP ([`unreadable`]: metered as estimates); None when
    /// none is left. Every GPU with a catalog TDP gets it as the estimate for the intervals it
    /// cannot measure.
    pub fn from_scan(
        scan: &Scan,
        reader: FileReader,
        keep: impl Fn(&Sensor) -> bool,
    ) -> Option<Self> {
        let mut sensors = Vec::new();
        let mut fallbacks = Vec::new();
        for s in scan.sensors.iter().filter(|s| keep(s)) {
            let f = unreadable::fallback(s).ok();
            let mut info = s.info.clone();
            if !s.usable() {
                if f.is_none() || !unreadable::unreadable(s, &scan.sensors) {
                    continue;
                }
                info.method = Method::Estimate;
            }
            sensors.push((info, s.path.clone(), s.reading));
            fallbacks.push(f);
        }
        (!sensors.is_empty()).then_some(HwmonSource {
            reader,
            sensors,
            fallbacks,
        })
    }
}

impl EnergySource for HwmonSource {
    fn devices(&self) -> Vec<DeviceInfo> {
        self.sensors.iter().map(|(d, _, _)| d.clone()).collect()
    }

    fn fallbacks(&self) -> Vec<Option<crate::accum::Fallback>> {
        self.fallbacks.clone()
    }

    fn read(&mut self) -> Vec<Result<Raw, MeterError>> {
        self.sensors
            .iter()
            .map(|(_, path, reading)| {
                let v = read_value(&self.reader, path)?;
                Ok(match reading {
                    // The drivers extend the hardware's 32-bit register to a 64-bit sum
                    // (i915_hwmon.c and xe_hwmon.c `accum_energy`), so the file has no range to
                    // wrap at: a decrease is a reset (driver reload), handled as one in `accum`.
                    Reading::EnergyUj => Raw::Counter {
                        value: v,
                        units_per_joule: 1e6,
                        max: None,
                        power: None,
                    },
                    Reading::PowerUw => Raw::Power(Watts(v as f64 / 1e6)),
                })
            })
            .collect()
    }
}

/// The device info of a sensor, from its reading's method.
pub(crate) fn info(id: String, kind: DeviceKind, name: String, reading: Reading) -> DeviceInfo {
    DeviceInfo {
        id,
        kind,
        name,
        method: match reading {
            Reading::EnergyUj => Method::Counter,
            Reading::PowerUw => Method::IntegratedPower,
        },
    }
}

//! AMD GPUs through the `amdgpu` driver's hwmon chip.
//!
//! Files (Documentation/gpu/amdgpu/thermal.rst, "hwmon interfaces for GPU power"):
//! `power1_average` and `power1_input`, µW, "power used by the SoC … On APUs this includes the
//! CPU" — socket power, not the GPU die alone. The driver has no energy counter in hwmon; an
//! `energy1_input` (µJ), where a kernel adds one, is preferred as a counter.
//!
//! Packages: an MI250X (Aldebaran) carries two GCDs, each its own PCI function and hwmon chip,
//! but the package has one power: the driver reports it on the primary die only (amdgpu
//! `aldebaran_ppt.c`, `METRICS_AVERAGE_SOCKETPOWER` "only from primary die"), the other shows
//! none. GCDs pair in PCI order (0+1, 2+3, … as the OLCF Frontier user guide numbers them), so a
//! second reading in a pair is never added. MI300A is an APU: its one socket power covers the 24
//! Zen 4 cores, the GPU XCDs and the HBM, so RAPL packages and the RAM estimate leave the total
//! while it is read. A Ryzen APU's integrated GPU reports the socket power too (CPU cores and
//! GPU, not the DIMMs): RAPL packages and the CPU estimate leave, RAM stays.

use super::intel::ZeMask;
use super::{info, read_value, Chip, Domain, Reading, Sensor, Use};
use crate::gpu::{parse_visible, Visible};
use crate::rapl::FileReader;
use crate::source::DeviceKind;

/// AMD's PCI vendor id (hwdata pci.ids `1002  Advanced Micro Devices, Inc. [AMD/ATI]`).
pub const VENDOR: u16 = 0x1002;

/// Instinct device ids and their names, from hwdata pci.ids (vendor 1002): `740c Aldebaran
/// [Instinct MI250X/MI250]`, `7408 … [Instinct MI250X]`, `740f … [Instinct MI210]`, `74a0 Aqua
/// Vanjaram [Instinct MI300A]`, `74a1 … [Instinct MI300X]`, `74a2 … [Instinct MI308X]`,
/// `74a5 … [Instinct MI325X]`, `74a9 … [Instinct MI300X HF]`. Names as AMD SMI's market name,
/// which CodeCarbon writes as `gpu_model`.
const NAMES: &[(u16, &str)] = &[
    (0x7408, "AMD Instinct MI250X"),
    (0x740c, "AMD Instinct MI250X/MI250"),
    (0x740f, "AMD Instinct MI210"),
    (0x74a0, "AMD Instinct MI300A"),
    (0x74a1, "AMD Instinct MI300X"),
    (0x74a2, "AMD Instinct MI308X"),
    (0x74a5, "AMD Instinct MI325X"),
    (0x74a9, "AMD Instinct MI300X HF"),
];

/// Two GCDs per package (MI250X, MI250: AMD CDNA 2 white paper, 2021).
fn two_gcd(device: Option<u16>) -> bool {
    matches!(device, Some(0x7408 | 0x740c))
}

/// APUs whose socket power covers the CPU (MI300A: AMD CDNA 3 white paper, 2023).
fn apu(device: Option<u16>) -> bool {
    matches!(device, Some(0x74a0))
}

/// The integrated GPUs of Ryzen APUs, from hwdata pci.ids (vendor 1002; names as listed there).
/// Checked against public copies: 15dd, 15d8 (`CHIP_RAVEN | AMD_IS_APU`) and 1636, 1638
/// (`CHIP_RENOIR | AMD_IS_APU`) in the kernel's `amdgpu_drv.c` pciidlist; 164c, 164e, 150e, 15bf,
/// 1681 and 1586 in copies of pci.ids. 15c8 (Phoenix2) was not found in a copy here.
/// amdgpu reports their socket power, which "on APUs includes the CPU" (thermal.rst): the CPU
/// cores and the integrated GPU, but not the DDR DIMMs, outside the package.
const RYZEN_APUS: &[(u16, &str)] = &[
    (0x15dd, "Raven Ridge"),
    (0x15d8, "Picasso"),
    (0x1636, "Renoir"),
    (0x1638, "Cezanne"),
    (0x164c, "Lucienne"),
    (0x1681, "Rembrandt"),
    (0x164e, "Raphael"),
    (0x15bf, "Phoenix1"),
    (0x15c8, "Phoenix2"),
    (0x150e, "Strix"),
    (0x1586, "Strix Halo"),
];

/// The codename of a Ryzen APU's integrated GPU.
fn ryzen_apu(device: Option<u16>) -> Option<&'static str> {
    RYZEN_APUS
        .iter()
        .find(|(id, _)| Some(*id) == device)
        .map(|(_, n)| *n)
}

/// The GPUs `ROCR_VISIBLE_DEVICES` and then `HIP_VISIBLE_DEVICES` leave visible. ROCm's GPU
/// isolation docs: ROCR takes indices or UUIDs (`GPU-<unique_id>`, as rocminfo prints them) of
/// all GPUs; HIP takes indices into what ROCR left, so the two compose. It also carries the
/// Intel GPUs' `ZE_AFFINITY_MASK` ([`ZeMask`]), so the environment is read once for every
/// hwmon GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmdVisible {
    pub rocr: Visible,
    pub hip: Visible,
    /// Which Intel GPUs and tiles `ZE_AFFINITY_MASK` leaves.
    pub ze: ZeMask,
}

impl AmdVisible {
    pub fn all() -> Self {
        AmdVisible {
            rocr: Visible::All,
            hip: Visible::All,
            ze: ZeMask::all(),
        }
    }

    /// From the environment through `get` (a closure so tests pass their own).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Self {
        AmdVisible {
            rocr: parse_visible(get("ROCR_VISIBLE_DEVICES").as_deref()),
            hip: parse_visible(get("HIP_VISIBLE_DEVICES").as_deref()),
            ze: ZeMask::parse(get("ZE_AFFINITY_MASK").as_deref()),
        }
    }

    /// For each GPU (by its UUID, in enumeration order), whether the runtime shows it.
    pub fn admitted(&self, uuids: &[String]) -> Vec<bool> {
        let all: Vec<usize> = (0..uuids.len()).collect();
        let rocr = pick(&self.rocr, &all, uuids);
        let hip = pick(&self.hip, &rocr, uuids);
        (0..uuids.len()).map(|i| hip.contains(&i)).collect()
    }

    fn describe(&self) -> String {
        let show = |n: &str, v: &Visible| match v {
            Visible::All => None,
            Visible::List(l) => Some(format!("{n}={}", l.join(","))),
        };
        [
            show("ROCR_VISIBLE_DEVICES", &self.rocr),
            show("HIP_VISIBLE_DEVICES", &self.hip),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" then ")
    }
}

/// The members of `among` (indices into `uuids`) that `v` names: an integer is a position in
/// `among`, a `GPU-…` prefix matches a UUID.
fn pick(v: &Visible, among: &[usize], uuids: &[String]) -> Vec<usize> {
    let Visible::List(items) = v else {
        return among.to_vec();
    };
    let mut out = Vec::new();
    for it in items {
        let found = match it.parse::<usize>() {
            Ok(k) => among.get(k).copied(),
            Err(_) => among.iter().copied().find(|&i| {
                it.len() > 4 && uuids.get(i).is_some_and(|u| u.starts_with(it.as_str()))
            }),
        };
        if let Some(i) = found.filter(|i| !out.contains(i)) {
            out.push(i);
        }
    }
    out
}

fn name(chip: &Chip) -> String {
    NAMES
        .iter()
        .find(|(id, _)| Some(*id) == chip.pci.device)
        .map(|(_, n)| n.to_string())
        .or_else(|| chip.pci.product_name.clone())
        .or_else(|| ryzen_apu(chip.pci.device).map(|c| format!("AMD Ryzen APU graphics ({c})")))
        .unwrap_or_else(|| match chip.pci.device {
            Some(d) => format!("AMD GPU (PCI 1002:{d:04x})"),
            None => "AMD GPU".into(),
        })
}

/// The sensors of every `amdgpu` chip, numbered in PCI order as ROCm enumerates them.
pub fn sensors(chips: &[Chip], reader: &FileReader, visible: &AmdVisible) -> Vec<Sensor> {
    let mut gpus: Vec<&Chip> = chips.iter().filter(|c| c.name == "amdgpu").collect();
    gpus.sort_by(|a, b| (&a.pci.address, &a.hwmon).cmp(&(&b.pci.address, &b.hwmon)));
    let uuids: Vec<String> = gpus
        .iter()
        .map(|c| {
            c.pci
                .unique_id
                .as_ref()
                .map(|u| format!("GPU-{u}"))
                .unwrap_or_default()
        })
        .collect();
    let shown = visible.admitted(&uuids);
    let mut aldebaran = 0usize;
    let mut out = Vec::new();
    for (index, chip) in gpus.into_iter().enumerate() {
        let pair = two_gcd(chip.pci.device).then(|| {
            aldebaran += 1;
            (aldebaran - 1) / 2
        });
        let s = sensor(chip, reader, index, pair);
        let Some(mut s) = s else { continue };
        if !shown.get(index).copied().unwrap_or(true) {
            s.use_ = Use::Hidden(format!(
                "hidden by {}: not one of this job's GPUs",
                visible.describe()
            ));
        }
        out.push(s);
    }
    out
}

fn sensor(chip: &Chip, reader: &FileReader, index: usize, pair: Option<usize>) -> Option<Sensor> {
    let id = format!("amdgpu:{index}");
    let name = name(chip);
    let package = match pair {
        Some(p) => format!("amd-mi250x-package:{p}"),
        None if chip.pci.address.is_empty() => id.clone(),
        None => format!("pci:{}", chip.pci.address),
    };
    let secondary = "second GCD of an MI250X package: the driver reports the package's power on \
                     the first GCD only (amdgpu aldebaran_ppt.c), where it is counted";
    let Some((path, reading)) = chip.best(1) else {
        // No power file: an MI250X's second GCD, or a GPU whose SMU reports none.
        let (use_, status) = if pair.is_some() {
            (Use::Inside(secondary.into()), Ok(0))
        } else {
            (
                Use::Metered,
                Err(crate::MeterError::Gpu {
                    device: id.clone(),
                    message: format!(
                        "{} has no power1_average, power1_input or energy1_input: this GPU's \
                         firmware reports no power; not measured",
                        chip.attrs.display()
                    ),
                }),
            )
        };
        return Some(Sensor {
            info: info(id, DeviceKind::Gpu, name, Reading::PowerUw),
            driver: chip.name.clone(),
            pci: chip.pci.address.clone(),
            covers: "nothing readable".into(),
            path: chip.attrs.join("power1_average"),
            reading: Reading::PowerUw,
            domain: Domain::Gpu,
            package,
            covers_cpu_package: false,
            covers_host: false,
            use_,
            status,
        });
    };
    let status = read_value(reader, &path);
    let is_apu = apu(chip.pci.device);
    let ryzen = ryzen_apu(chip.pci.device).is_some();
    let use_ = match (&status, pair) {
        // A secondary die that shows the file but reads 0 (older kernels): not a device
        // drawing nothing, a die whose power is on its partner.
        (Ok(0), Some(_)) => Use::Inside(secondary.into()),
        _ => Use::Metered,
    };
    let covers = if ryzen {
        "socket power of the Ryzen APU: CPU cores and integrated GPU (power shared between CPU and \
         GPU; RAPL packages and the CPU estimate are not added next to it; the DIMMs are outside \
         it, so RAM is still estimated or read from RAPL's dram zone)"
    } else if is_apu {
        "socket power of the APU: CPU cores, GPU and HBM (power shared between CPU and GPU; RAPL \
         packages and the RAM estimate are not added next to it)"
    } else if pair.is_some() {
        "socket power of the MI250X package (both GCDs and their HBM)"
    } else {
        "socket power of the GPU package (GPU and HBM)"
    };
    Some(Sensor {
        info: info(id, DeviceKind::Gpu, name, reading),
        driver: chip.name.clone(),
        pci: chip.pci.address.clone(),
        covers: covers.into(),
        path,
        reading,
        domain: Domain::Gpu,
        package,
        covers_cpu_package: is_apu || ryzen,
        covers_host: is_apu,
        use_,
        status,
    })
}

//! Choosing the sources for a run, and describing every sensor for `amdahl detect`.

use crate::estimate::{EstimateSource, ProbeSource, Target};
use crate::gpu::Visible;
use crate::hwmon::{self, AmdVisible, HwmonSource, HwmonUse};
use crate::rapl::{self, FileReader, Scan};
use crate::source::{DeviceKind, EnergySource};
use crate::MeterError;
use amdahl_model::units::Watts;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct Options {
    pub powercap_root: PathBuf,
    pub reader: FileReader,
    /// The CPU's TDP for the estimate; None: the CodeCarbon fallback, with a warning.
    pub cpu_tdp: Option<Watts>,
    /// Open the GPU meters: NVML and the AMD/Intel hwmon chips (false in tests and with
    /// `--no-gpu`).
    pub gpus: bool,
    /// Which NVIDIA GPUs `CUDA_VISIBLE_DEVICES` leaves.
    pub visible: Visible,
    /// Where the hwmon chips are (`/sys/class/hwmon`; a fake tree in tests).
    pub hwmon_root: PathBuf,
    /// Which AMD GPUs `ROCR_VISIBLE_DEVICES` / `HIP_VISIBLE_DEVICES` leave.
    pub amd_visible: AmdVisible,
    /// Open AMD SMI (`libamd_smi.so`) for AMD GPUs' energy counters where it loads (with
    /// `gpus`; false in tests that must not find a real ROCm).
    pub amd_smi: bool,
    pub target: Target,
}

/// Whether the CPU is estimated (no readable RAPL package counter), so the note on which TDP
/// the estimate charges matters.
pub fn estimates_cpu(sources: &[Box<dyn EnergySource>]) -> bool {
    sources
        .iter()
        .flat_map(|s| s.devices())
        .any(|d| d.method == crate::source::Method::Estimate && d.kind == DeviceKind::Cpu)
}

pub struct Discovery {
    pub sources: Vec<Box<dyn EnergySource>>,
    /// Things the user must know (printed on stderr): unreadable counters, estimates in use.
    pub warnings: Vec<String>,
    /// Informational (no GPU driver on a CPU machine is normal); kept in `detect`.
    pub notes: Vec<String>,
}

/// Whether we seem to run in a container (Docker, Podman, Kubernetes), where /sys is often
/// masked.
pub fn in_container() -> bool {
    Path::new("/.dockerenv").exists()
        || Path::new("/run/.containerenv").exists()
        || crate::small_file::read("/proc/1/cgroup".as_ref(), crate::small_file::TABLE)
            .map(|s| {
                ["docker", "kubepods", "containerd", "libpod"]
                    .iter()
                    .any(|k| s.contains(k))
            })
            .unwrap_or(false)
}

/// Why no powercap zone exists, and what to do.
pub fn no_powercap_fix(root: &Path) -> String {
    let mut s = format!(
        "no RAPL zones under {}: not an x86 machine with RAPL, or the driver is not loaded \
         (`sudo modprobe intel_rapl_msr`; AMD Zen uses the same driver on Linux ≥ 5.8)",
        root.display()
    );
    if in_container() {
        s.push_str(
            "; this looks like a container, which usually masks /sys/class/powercap: \
             run with `--privileged` or bind-mount it (`-v /sys/class/powercap:/sys/class/powercap:ro`) \
             and point amdahl at it with --powercap-root / AMDAHL_POWERCAP_ROOT",
        );
    }
    s
}

fn gpus(opts: &Options, notes: &mut Vec<String>, sources: &mut Vec<Box<dyn EnergySource>>) {
    if !opts.gpus {
        return;
    }
    let (src, n) = nvml_source(&opts.visible);
    notes.extend(n);
    sources.extend(src);
}

/// The NVIDIA GPUs `visible` admits as one NVML energy source (`None` when NVML does not open
/// or admits none), and notes on what could not be read. `amdahl bench gpu` takes the one GPU
/// it measures this way (`Visible::nth`).
pub fn nvml_source(visible: &Visible) -> (Option<Box<dyn EnergySource>>, Vec<String>) {
    #[cfg(feature = "nvml")]
    match crate::nvml::NvmlBackend::init() {
        Ok(b) => {
            let (src, notes) = crate::gpu::GpuSource::new(b, visible);
            (src.map(|s| Box::new(s) as Box<dyn EnergySource>), notes)
        }
        Err(e) => (None, vec![format!("no NVIDIA GPU measured: {e}")]),
    }
    #[cfg(not(feature = "nvml"))]
    {
        let _ = visible;
        (
            None,
            vec!["no NVIDIA GPU measured: built without the `nvml` feature".into()],
        )
    }
}

/// AMD SMI's energy counters for the AMD GPUs hwmon would meter, where the library opens
/// (ROCm installed); returns the ids it took, which hwmon then leaves alone.
fn amd_smi(
    hw: &hwmon::Scan,
    hw_use: &HwmonUse,
    open: bool,
    notes: &mut Vec<String>,
    sources: &mut Vec<Box<dyn EnergySource>>,
) -> Vec<String> {
    let amd: Vec<&hwmon::Sensor> = hw
        .sensors
        .iter()
        .filter(|s| s.usable() && hw_use.admits(s) && s.driver == "amdgpu")
        .collect();
    if !open || amd.is_empty() {
        return Vec::new();
    }
    match crate::amdsmi::AmdSmi::open() {
        Ok(smi) => {
            let (src, n) = crate::amdsmi::AmdSmiSource::new(smi, &amd);
            notes.extend(n);
            let ids = src.as_ref().map(|s| s.ids()).unwrap_or_default();
            if let Some(s) = src {
                sources.push(Box::new(s));
            }
            ids
        }
        Err(e) => {
            notes.push(format!("AMD SMI not used: {e}"));
            Vec::new()
        }
    }
}

/// Whether a metered APU's socket power (MI300A) holds the CPU package RAPL reads: then RAPL's
/// packages (and psys, which holds them) leave, so the socket is counted once.
fn apu_covers_cpu(gpus: bool, hw: &hwmon::Scan, notes: &mut Vec<String>) -> bool {
    let apu = gpus && hw.covers_cpu_package();
    if apu {
        notes.push(
            "RAPL packages not added: the APU's socket power (amdgpu power1_average, \"on APUs this \
             includes the CPU\") already covers the CPU"
                .into(),
        );
    }
    apu
}

/// The hwmon chips a run adds, with AMD SMI's counters in place of hwmon for the AMD GPUs it
/// reads.
fn hwmon_sources(
    hw: &hwmon::Scan,
    hw_use: &HwmonUse,
    opts: &Options,
    notes: &mut Vec<String>,
    sources: &mut Vec<Box<dyn EnergySource>>,
) {
    let by_smi = amd_smi(hw, hw_use, opts.gpus && opts.amd_smi, notes, sources);
    if let Some(src) = HwmonSource::from_scan(hw, opts.reader.clone(), |s| {
        hw_use.admits(s) && !by_smi.contains(&s.info.id)
    }) {
        sources.push(Box::new(src));
    }
}

/// Pick the sources: readable RAPL zones, NVML GPUs, hwmon chips (AMD/Intel GPUs; Grace, Altra
/// where RAPL does not cover the CPU), and estimates for what no counter covers (CPU unless a
/// package, psys or host sensor reads; RAM unless dram, psys or a sensor covering it reads).
pub fn discover(opts: Options) -> Discovery {
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    let mut sources: Vec<Box<dyn EnergySource>> = Vec::new();
    if let Target::Process(p) = &opts.target {
        sources.push(Box::new(ProbeSource(Arc::clone(p))));
    }
    let scan = rapl::scan(&opts.powercap_root, &opts.reader);
    for z in scan.zones.iter().filter(|z| z.kind.is_some()) {
        if let Err(e) = &z.status {
            warnings.push(format!("RAPL {} ({}) not measured: {e}", z.id, z.name));
        }
    }
    if scan.zones.is_empty() {
        notes.push(no_powercap_fix(&opts.powercap_root));
    }
    let covered = |k: &[DeviceKind]| {
        scan.zones
            .iter()
            .any(|z| z.usable() && z.kind.is_some_and(|x| k.contains(&x)))
    };
    let rapl_cpu = covered(&[DeviceKind::CpuPackage, DeviceKind::Psys]);
    let hw = hwmon::scan(&opts.hwmon_root, &opts.reader, &opts.amd_visible);
    let hw_use = HwmonUse::new(opts.gpus, rapl_cpu);
    warnings.extend(hw_use.warnings(&hw));
    let apu = apu_covers_cpu(opts.gpus, &hw, &mut notes);
    let cpu_covered = rapl_cpu || apu || hw_use.covers_cpu(&hw);
    let ram_covered = covered(&[DeviceKind::Dram, DeviceKind::Psys]) || hw_use.covers_host(&hw);
    if let Some(src) = rapl::RaplSource::from_scan_where(&scan, opts.reader.clone(), |k| {
        !(apu && matches!(k, DeviceKind::CpuPackage | DeviceKind::Psys))
    }) {
        sources.push(Box::new(src));
    }
    gpus(&opts, &mut notes, &mut sources);
    hwmon_sources(&hw, &hw_use, &opts, &mut notes, &mut sources);
    if !cpu_covered || !ram_covered {
        let tdp = if cpu_covered {
            None
        } else {
            if sources.iter().all(|s| s.devices().is_empty()) {
                warnings.push(format!(
                    "no energy counter is readable; running anyway with estimates (CPU time × TDP share, RAM by CodeCarbon's DIMM rule). {}",
                    if scan.zones.is_empty() { no_powercap_fix(&opts.powercap_root) } else { "See the RAPL warnings above.".into() }
                ));
            }
            Some(opts.cpu_tdp.unwrap_or_else(|| {
                // No power given: the embedded catalogs (the binary passes its own choice, made
                // with the user's catalog files, as `cpu_tdp`).
                let p = crate::cpu_power::resolve(
                    None,
                    &crate::procfs::cpu_info(),
                    crate::procfs::cpu_count(),
                    &amdahl_model::catalog::devices::embedded()
                        .cloned()
                        .unwrap_or_default(),
                    amdahl_model::catalog::cpu_power::embedded().ok(),
                );
                warnings.push(p.note);
                p.watts
            }))
        };
        sources.push(Box::new(EstimateSource::new(
            opts.target,
            tdp,
            !ram_covered,
        )));
    }
    Discovery {
        sources,
        warnings,
        notes,
    }
}

/// `amdahl detect`'s view of one sensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SensorReport {
    /// `rapl`, `nvml`, `amdgpu`, `amdsmi`, `i915`, `xe`, `grace`, `hwmon`, `estimate`.
    pub sensor: String,
    pub device: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `ok`, `ignored` (readable but inside another zone) or `unusable`.
    pub status: String,
    /// What it reads, or why it is ignored/unusable.
    pub detail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// The `schema` of an `amdahl detect` result.
pub const DETECT_SCHEMA: &str = "amdahl.detect/1";

/// The `amdahl detect` result: every sensor looked for, and what was found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DetectResult {
    pub schema: String,
    pub powercap_root: String,
    /// Where the hwmon chips were looked for (empty in results saved before hwmon sensors).
    #[serde(default)]
    pub hwmon_root: String,
    pub in_container: bool,
    pub sensors: Vec<SensorReport>,
}

fn split_fix(e: &MeterError) -> (String, Option<String>) {
    match e {
        MeterError::PermissionDenied { .. } => (
            "permission denied: energy_uj is root-only since CVE-2020-8694".into(),
            Some(
                "run as root, or `sudo chmod a+r /sys/class/powercap/intel-rapl:*/energy_uj \
                 /sys/class/powercap/intel-rapl:*:*/energy_uj` (until reboot; a udev rule makes it last)"
                    .into(),
            ),
        ),
        other => (other.to_string(), None),
    }
}

fn rapl_reports(scan: &Scan) -> Vec<SensorReport> {
    let mut v = Vec::new();
    if scan.zones.is_empty() {
        v.push(SensorReport {
            sensor: "rapl".into(),
            device: "-".into(),
            path: Some(scan.root.display().to_string()),
            status: "unusable".into(),
            detail: if scan.root_exists {
                "no intel-rapl zones".into()
            } else {
                "directory missing".into()
            },
            fix: Some(no_powercap_fix(&scan.root)),
        });
    }
    for z in &scan.zones {
        let path = Some(z.dir.join("energy_uj").display().to_string());
        let (status, detail, fix) = match (&z.status, z.kind) {
            (Ok(_), None) => (
                "ignored",
                format!("{}: inside its package zone, never added to it", z.name),
                None,
            ),
            (Ok(uj), Some(_)) => (
                "ok",
                format!(
                    "{}: energy counter, {} µJ now, wraps at {}",
                    z.name,
                    uj,
                    z.max_uj.map(|m| format!("{m} µJ")).unwrap_or_else(|| {
                        "an unknown range (max_energy_range_uj unreadable)".into()
                    })
                ),
                None,
            ),
            (Err(e), _) => {
                let (d, f) = split_fix(e);
                ("unusable", format!("{}: {d}", z.name), f)
            }
        };
        v.push(SensorReport {
            sensor: "rapl".into(),
            device: z.id.clone(),
            path,
            status: status.into(),
            detail,
            fix,
        });
    }
    v
}

fn nvml_reports(nvml: bool, visible: &Visible) -> Vec<SensorReport> {
    let mut v = Vec::new();
    if !nvml {
        return v;
    }
    #[cfg(feature = "nvml")]
    match crate::nvml::NvmlBackend::init() {
        Ok(b) => {
            use crate::gpu::GpuSource;
            let (src, notes) = GpuSource::new(b, visible);
            for d in src.map(|s| s.devices()).unwrap_or_default() {
                v.push(SensorReport {
                    sensor: "nvml".into(),
                    device: d.id,
                    path: None,
                    status: "ok".into(),
                    detail: format!(
                        "{}: {}",
                        d.name,
                        match d.method {
                            crate::Method::Counter => "total-energy counter (mJ)",
                            _ => "power only (mW), integrated: no energy counter before Volta",
                        }
                    ),
                    fix: None,
                });
            }
            for n in notes {
                v.push(SensorReport {
                    sensor: "nvml".into(),
                    device: "-".into(),
                    path: None,
                    status: "unusable".into(),
                    detail: n,
                    fix: None,
                });
            }
        }
        Err(e) => v.push(SensorReport {
            sensor: "nvml".into(),
            device: "-".into(),
            path: None,
            status: "unusable".into(),
            detail: e,
            fix: Some(
                "install the NVIDIA driver, or ignore this on a machine without NVIDIA GPUs".into(),
            ),
        }),
    }
    #[cfg(not(feature = "nvml"))]
    {
        let _ = visible;
        v.push(SensorReport {
            sensor: "nvml".into(),
            device: "-".into(),
            path: None,
            status: "unusable".into(),
            detail: "built without the `nvml` feature".into(),
            fix: Some("rebuild with default features".into()),
        });
    }
    v
}

/// What `amdahl detect` looks at.
pub struct DetectOptions {
    pub powercap_root: PathBuf,
    pub reader: FileReader,
    /// Open the GPU meters (NVML, AMD/Intel hwmon chips).
    pub gpus: bool,
    pub visible: Visible,
    pub hwmon_root: PathBuf,
    pub amd_visible: AmdVisible,
    /// Try AMD SMI for the AMD GPUs found.
    pub amd_smi: bool,
}

/// Describe every sensor: what it reads, or why it cannot and how to fix that.
pub fn detect(o: &DetectOptions) -> DetectResult {
    let scan = rapl::scan(&o.powercap_root, &o.reader);
    let mut sensors = rapl_reports(&scan);
    let rapl_cpu = scan
        .zones
        .iter()
        .any(|z| z.usable() && matches!(z.kind, Some(DeviceKind::CpuPackage | DeviceKind::Psys)));
    sensors.extend(nvml_reports(o.gpus, &o.visible));
    let hw = hwmon::scan(&o.hwmon_root, &o.reader, &o.amd_visible);
    let hw_use = HwmonUse::new(o.gpus, rapl_cpu);
    sensors.extend(hwmon::detect::reports(&hw, &hw_use));
    if o.amd_smi {
        let amd: Vec<&hwmon::Sensor> = hw
            .sensors
            .iter()
            .filter(|s| s.usable() && hw_use.admits(s) && s.driver == "amdgpu")
            .collect();
        sensors.extend(crate::amdsmi::reports(&amd));
    }
    sensors.push(SensorReport {
        sensor: "estimate".into(),
        device: "cpu, ram".into(),
        path: Some("/proc/stat, /proc/meminfo".into()),
        status: "ok".into(),
        detail: format!(
            "always available: CPU time × TDP / {} logical CPUs, RAM by CodeCarbon {}'s DIMM rule ({:.1} for this machine's RAM)",
            crate::procfs::cpu_count(),
            crate::estimate::CODECARBON_VERSION,
            crate::estimate::ram_power(crate::procfs::mem_total_bytes().unwrap_or(0), None, crate::estimate::ARM)
        ),
        fix: None,
    });
    DetectResult {
        schema: DETECT_SCHEMA.into(),
        powercap_root: o.powercap_root.display().to_string(),
        hwmon_root: o.hwmon_root.display().to_string(),
        in_container: in_container(),
        sensors,
    }
}

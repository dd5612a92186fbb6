//! Builders for fake hwmon trees with the real layout, for tests here and in the CLI.
//!
//! As on a real system, `ROOT/hwmonN` is a link to the chip's directory under its parent device
//! (`devices/<parent>/hwmon/hwmonN`), and `hwmonN/device` links back to the parent: a PCI
//! function (`0000:c1:00.0` with `vendor`, `device`, `unique_id`) for a GPU, an ACPI device
//! (`NVDA2008:00`) for Grace's power meters. The `devices` tree sits beside `ROOT`.

use std::path::{Path, PathBuf};

fn devices(root: &Path) -> PathBuf {
    root.with_file_name(format!(
        "{}-devices",
        root.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ))
}

/// A chip `hwmonN` under the parent device `parent`; returns the chip's own directory. With
/// `legacy`, `name` goes on the parent (old `hwmon_device_register()` drivers).
pub fn chip(
    root: &Path,
    hwmon: &str,
    name: &str,
    parent: &str,
    legacy: bool,
) -> std::io::Result<PathBuf> {
    let dev = devices(root).join(parent);
    let dir = dev.join("hwmon").join(hwmon);
    std::fs::create_dir_all(&dir)?;
    std::fs::create_dir_all(root)?;
    let link = root.join(hwmon);
    if !link.exists() {
        std::os::unix::fs::symlink(&dir, &link)?;
    }
    let back = dir.join("device");
    if !back.exists() {
        std::os::unix::fs::symlink(&dev, &back)?;
    }
    let name_file = if legacy {
        dev.join("name")
    } else {
        dir.join("name")
    };
    std::fs::write(name_file, format!("{name}\n"))?;
    Ok(dir)
}

/// Write `file` = `value` (with the newline sysfs prints) in `dir`.
pub fn set(dir: &Path, file: &str, value: impl std::fmt::Display) -> std::io::Result<()> {
    std::fs::write(dir.join(file), format!("{value}\n"))
}

/// The parent device directory of a chip made by [`chip`].
pub fn parent(chip_dir: &Path) -> PathBuf {
    chip_dir.join("device")
}

fn pci(dir: &Path, vendor: u16, device: u16) -> std::io::Result<()> {
    set(&parent(dir), "vendor", format!("0x{vendor:04x}"))?;
    set(&parent(dir), "device", format!("0x{device:04x}"))
}

/// An amdgpu chip at PCI `addr` with device id `device` (0x74a1 = MI300X), `unique_id`, and
/// `power1_average` in µW where given (None: the file is absent, as on an MI250X's second GCD).
pub fn amdgpu(
    root: &Path,
    hwmon: &str,
    addr: &str,
    device: u16,
    unique_id: &str,
    power_uw: Option<u64>,
) -> std::io::Result<PathBuf> {
    let dir = chip(root, hwmon, "amdgpu", addr, false)?;
    pci(&dir, super::amd::VENDOR, device)?;
    set(&parent(&dir), "unique_id", unique_id)?;
    // The hwmon chip's other files (thermal.rst), which must not be taken for power.
    set(&dir, "temp1_input", 45000)?;
    set(&dir, "temp1_label", "edge")?;
    set(&dir, "power1_cap", 750_000_000)?;
    if let Some(uw) = power_uw {
        set(&dir, "power1_average", uw)?;
    }
    Ok(dir)
}

/// An i915 card chip (`energy1_input` µJ) at PCI `addr` with device id `device` (0x0bd5 = Max
/// 1550), and one `i915_gtN` chip per entry of `tiles_uj`.
pub fn i915(
    root: &Path,
    first_hwmon: u32,
    addr: &str,
    device: u16,
    card_uj: u64,
    tiles_uj: &[u64],
) -> std::io::Result<PathBuf> {
    let dir = chip(root, &format!("hwmon{first_hwmon}"), "i915", addr, false)?;
    pci(&dir, super::intel::VENDOR, device)?;
    set(&dir, "energy1_input", card_uj)?;
    set(&dir, "power1_max", 600_000_000)?;
    for (n, uj) in tiles_uj.iter().enumerate() {
        let h = format!("hwmon{}", first_hwmon + 1 + n as u32);
        let t = chip(root, &h, &format!("i915_gt{n}"), addr, false)?;
        set(&t, "energy1_input", uj)?;
    }
    Ok(dir)
}

/// An xe card chip with labelled `card` and `pkg` energy channels (µJ).
pub fn xe(
    root: &Path,
    hwmon: &str,
    addr: &str,
    device: u16,
    card_uj: u64,
    pkg_uj: u64,
) -> std::io::Result<PathBuf> {
    let dir = chip(root, hwmon, "xe", addr, false)?;
    pci(&dir, super::intel::VENDOR, device)?;
    set(&dir, "energy1_input", card_uj)?;
    set(&dir, "energy1_label", "card")?;
    set(&dir, "energy2_input", pkg_uj)?;
    set(&dir, "energy2_label", "pkg")?;
    Ok(dir)
}

/// A Grace power meter (legacy layout: everything in `device/`) for `area` (`Grace`, `CPU`,
/// `SysIO`, `Module`) of socket `socket`, reading `uw` µW.
pub fn grace(
    root: &Path,
    hwmon: &str,
    area: &str,
    socket: u32,
    uw: u64,
) -> std::io::Result<PathBuf> {
    let dir = chip(
        root,
        hwmon,
        "power_meter",
        &format!("NVDA2008:{hwmon}"),
        true,
    )?;
    let dev = parent(&dir);
    set(
        &dev,
        "power1_oem_info",
        format!("{area} Power Socket {socket}"),
    )?;
    set(&dev, "power1_average", uw)?;
    set(&dev, "power1_average_interval", 50)?;
    Ok(dev)
}

/// The KFD tree beside a hwmon root (`ROOT/../kfd/kfd`, where the exporter looks for it:
/// [`crate::attribution::kfd::root_beside`]), with the layout of the kernel's
/// drivers/gpu/drm/amd/amdkfd (cited there).
pub fn kfd_root(hwmon_root: &Path) -> PathBuf {
    crate::attribution::kfd::root_beside(hwmon_root)
}

/// KFD topology node `node` for the GPU at PCI `addr` (`0000:c1:00.0`) with `gpu_id`: `gpu_id`
/// and a `properties` file with `domain` and `location_id` (bus << 8 | device << 3 | function,
/// plus `partition` << 28 for a partition of a split GPU).
pub fn kfd_gpu(
    hwmon_root: &Path,
    node: u32,
    gpu_id: u32,
    addr: &str,
    partition: u32,
) -> std::io::Result<()> {
    let dir = kfd_root(hwmon_root).join(format!("topology/nodes/{node}"));
    std::fs::create_dir_all(&dir)?;
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidInput, addr.to_string());
    let (domain, rest) = addr.split_once(':').ok_or_else(bad)?;
    let (bus, rest) = rest.split_once(':').ok_or_else(bad)?;
    let (dev, func) = rest.split_once('.').ok_or_else(bad)?;
    let hex = |s: &str| u32::from_str_radix(s, 16).map_err(|_| bad());
    let location = (partition << 28) | (hex(bus)? << 8) | (hex(dev)? << 3) | hex(func)?;
    set(&dir, "gpu_id", gpu_id)?;
    // A few of the other properties, in the kernel's order, so the parser must pick its lines.
    std::fs::write(
        dir.join("properties"),
        format!(
            "cpu_cores_count 0\nsimd_count 1216\nvendor_id 4098\nlocation_id {location}\n\
             domain {}\ndrm_render_minor 128\n",
            hex(domain)?
        ),
    )
}

/// A CPU node of the KFD topology (`gpu_id` 0).
pub fn kfd_cpu(hwmon_root: &Path, node: u32) -> std::io::Result<()> {
    let dir = kfd_root(hwmon_root).join(format!("topology/nodes/{node}"));
    std::fs::create_dir_all(&dir)?;
    set(&dir, "gpu_id", 0)?;
    std::fs::write(
        dir.join("properties"),
        "cpu_cores_count 96\nlocation_id 0\ndomain 0\n",
    )
}

/// Process `pid`'s KFD files for `gpu_id`: `vram_<gpu_id>` (bytes), `sdma_<gpu_id>` (µs) and
/// `stats_<gpu_id>/evicted_ms`, with `stats_<gpu_id>/cu_occupancy` where `cu` is given.
pub fn kfd_process(
    hwmon_root: &Path,
    pid: u32,
    gpu_id: u32,
    vram: u64,
    cu: Option<u64>,
) -> std::io::Result<PathBuf> {
    let dir = kfd_root(hwmon_root).join(format!("proc/{pid}"));
    let stats = dir.join(format!("stats_{gpu_id}"));
    std::fs::create_dir_all(&stats)?;
    set(&dir, "pasid", 32768 + pid)?;
    set(&dir, &format!("vram_{gpu_id}"), vram)?;
    set(&dir, &format!("sdma_{gpu_id}"), 0)?;
    set(&stats, "evicted_ms", 0)?;
    if let Some(cu) = cu {
        set(&stats, "cu_occupancy", cu)?;
    }
    Ok(dir)
}

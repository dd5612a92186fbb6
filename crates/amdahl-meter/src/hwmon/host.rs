//! Host (CPU) power sensors of ARM servers, and every other hwmon power or energy channel.
//!
//! NVIDIA Grace (Grace Performance Tuning Guide, "Power and Thermals"; NVIDIA's `power_meter`
//! ACPI devices, drivers/hwmon/acpi_power_meter.c): one `power_meter` chip per area, attributes
//! in `hwmonN/device/` — `power1_average` (µW), `power1_average_interval` (ms) and
//! `power1_oem_info` naming the area: `Module Power Socket N` (a GH200 module: Grace, Hopper,
//! their memory and regulator losses), `Grace Power Socket N` (the Grace socket: CPU rail, SoC
//! rail and LPDDR5X), `CPU Power Socket N` and `SysIO Power Socket N` (the rails, inside the
//! socket). The socket is added as the CPU and covers its memory; the rails are listed; the
//! module is never added, because its parts (the socket here, the GPU through NVML) already are.
//!
//! Ampere Altra / eMAG (drivers/hwmon/xgene-hwmon.c, chip `apm_xgene`): `power1_input` labelled
//! `CPU power` and `power2_input` labelled `IO power`, µW, disjoint rails: both are added.
//!
//! Any other chip's channel is added only where its label says it is the CPU (`CPU`, `SoC`,
//! `socket` — as amd_energy's `Esocket0` —, `package`); otherwise what it covers is unknown and it is listed, not added. AWS Graviton
//! exposes no power sensor at all: the CPU-time estimate is used, and says so.

use super::{info, read_value, Chip, Domain, Reading, Sensor, Use};
use crate::rapl::FileReader;
use crate::source::DeviceKind;

/// Chips measured by their own modules, never as host sensors.
const GPU_DRIVERS: &[&str] = &["amdgpu", "i915", "xe"];

/// `Grace Power Socket 0` → (`Grace`, 0).
fn oem_area(s: &str) -> Option<(String, u32)> {
    let (area, socket) = s.split_once(" Power Socket ")?;
    Some((area.trim().to_string(), socket.trim().parse().ok()?))
}

pub fn sensors(chips: &[Chip], reader: &FileReader) -> Vec<Sensor> {
    let grace: Vec<(&Chip, String, u32)> = chips
        .iter()
        .filter(|c| c.name == "power_meter")
        .filter_map(|c| {
            let (a, n) = oem_area(&c.text(reader, "power1_oem_info")?)?;
            Some((c, a, n))
        })
        .collect();
    let mut out: Vec<Sensor> = Vec::new();
    for (chip, area, n) in &grace {
        out.extend(grace_sensor(chip, reader, area, *n, &grace));
    }
    for chip in chips {
        let is_grace = grace.iter().any(|(c, _, _)| c.hwmon == chip.hwmon);
        let is_gpu = GPU_DRIVERS.contains(&chip.name.as_str()) || chip.name.starts_with("i915_gt");
        if is_grace || is_gpu {
            continue;
        }
        for kind in ["energy", "power"] {
            for n in chip.channels(kind) {
                // A channel with both energy and power is read once, as energy.
                if kind == "power" && chip.channels("energy").contains(&n) {
                    continue;
                }
                out.extend(generic(chip, reader, kind, n));
            }
        }
    }
    out
}

fn grace_sensor(
    chip: &Chip,
    reader: &FileReader,
    area: &str,
    n: u32,
    all: &[(&Chip, String, u32)],
) -> Option<Sensor> {
    let (path, reading) = chip.best(1)?;
    let status = read_value(reader, &path);
    let socket_seen = all.iter().any(|(_, a, k)| a == "Grace" && *k == n);
    let (id, covers, use_, host) = match area {
        "Grace" => (
            format!("grace:socket{n}"),
            "the Grace CPU socket: CPU rail, SoC (SysIO) rail and LPDDR5X memory".to_string(),
            Use::Metered,
            true,
        ),
        "CPU" | "SysIO" if socket_seen => (
            format!("grace:socket{n}:{}", area.to_lowercase()),
            format!("the {area} rail of Grace socket {n}"),
            Use::Inside(format!(
                "rail inside the Grace socket's reading (grace:socket{n}); never added to it"
            )),
            false,
        ),
        "CPU" | "SysIO" => (
            format!("grace:socket{n}:{}", area.to_lowercase()),
            format!("the {area} rail of Grace socket {n}"),
            Use::Metered,
            false,
        ),
        "Module" => (
            format!("grace:module{n}"),
            "the whole module: Grace, Hopper GPU, their memory and regulator losses".to_string(),
            Use::Inside(
                "not added: the Grace socket and the GPU (NVML) are counted, the module is their \
                 sum"
                .into(),
            ),
            false,
        ),
        other => (
            format!("grace:{}{n}", other.to_lowercase()),
            format!("`{other} Power Socket {n}`"),
            Use::Unknown(format!(
                "unknown Grace power area `{other}`; listed, not added"
            )),
            false,
        ),
    };
    Some(Sensor {
        info: info(
            id,
            DeviceKind::CpuPackage,
            match area {
                "Grace" => format!("NVIDIA Grace socket {n}"),
                "Module" => format!("NVIDIA Grace Hopper module {n}"),
                rail => format!("NVIDIA Grace socket {n} {rail} rail"),
            },
            reading,
        ),
        driver: chip.name.clone(),
        pci: chip.pci.address.clone(),
        covers,
        package: format!("grace:{area}:{n}"),
        path,
        reading,
        domain: Domain::Host,
        covers_cpu_package: false,
        covers_host: host,
        use_,
        status,
    })
}

fn generic(chip: &Chip, reader: &FileReader, kind: &str, n: u32) -> Option<Sensor> {
    let (path, reading) = if kind == "energy" {
        (chip.attr(&format!("energy{n}_input"))?, Reading::EnergyUj)
    } else {
        let avg = chip.attr(&format!("power{n}_average"));
        (
            avg.or_else(|| chip.attr(&format!("power{n}_input")))?,
            Reading::PowerUw,
        )
    };
    let label = chip
        .text(reader, &format!("{kind}{n}_label"))
        .unwrap_or_default();
    let status = read_value(reader, &path);
    let lower = label.to_lowercase();
    let cpu = chip.name == "apm_xgene"
        || ["cpu", "soc", "socket", "package"]
            .iter()
            .any(|w| lower.contains(w));
    let shown = if label.is_empty() {
        format!("{kind}{n}")
    } else {
        label.clone()
    };
    let use_ = if cpu {
        Use::Metered
    } else {
        Use::Unknown(format!(
            "`{shown}` of `{}`: what it covers is not known, so adding it could count a part \
             twice; listed, not added",
            chip.name
        ))
    };
    Some(Sensor {
        info: info(
            format!("hwmon:{}:{kind}{n}", chip.hwmon),
            DeviceKind::CpuPackage,
            format!("{} {shown}", chip.name),
            reading,
        ),
        driver: chip.name.clone(),
        pci: chip.pci.address.clone(),
        covers: if cpu {
            format!("`{shown}` (the CPU, by its label)")
        } else {
            format!("`{shown}`")
        },
        path,
        reading,
        domain: Domain::Host,
        package: format!("hwmon:{}:{kind}{n}", chip.hwmon),
        covers_cpu_package: false,
        covers_host: false,
        use_,
        status,
    })
}

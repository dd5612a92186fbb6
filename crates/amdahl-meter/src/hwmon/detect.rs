//! `amdahl detect`'s rows for the hwmon chips: what each reading covers, whether a run adds it,
//! and for an unreadable one how to fix it.

use super::{Domain, HwmonUse, Reading, Scan, Sensor, Use};
use crate::sensors::SensorReport;
use crate::MeterError;

/// The `sensor` column: the driver family.
fn family(s: &Sensor) -> &'static str {
    match s.driver.as_str() {
        "amdgpu" => "amdgpu",
        "xe" => "xe",
        d if d == "i915" || d.starts_with("i915_gt") => "i915",
        "power_meter" if s.info.id.starts_with("grace:") => "grace",
        _ => "hwmon",
    }
}

fn what(s: &Sensor, value: u64) -> String {
    let reading = match s.reading {
        Reading::EnergyUj => format!("energy counter, {value} µJ now"),
        Reading::PowerUw => format!(
            "power only ({:.1} W now), integrated: no energy counter",
            value as f64 / 1e6
        ),
    };
    format!("{}: {}; {reading}", s.info.name, s.covers)
}

fn fix(e: &MeterError) -> Option<String> {
    match e {
        MeterError::HwmonPermission { path } => Some(format!(
            "run as root, or `sudo chmod a+r {}` (until reboot; a udev rule makes it last)",
            path.display()
        )),
        MeterError::Parse { .. } => Some(
            "the file does not hold a number: check the driver (`dmesg | grep hwmon`) or the \
             --hwmon-root tree; the device is not measured until it does"
                .into(),
        ),
        _ => None,
    }
}

fn row(s: &Sensor, u: &HwmonUse, scan: &Scan) -> SensorReport {
    let (status, detail, fix) = match (&s.use_, &s.status) {
        (Use::Metered, Ok(v)) if u.admits(s) => ("ok", what(s, *v), None),
        (Use::Metered, Ok(v)) => (
            "ignored",
            format!(
                "{}; not used: {}",
                what(s, *v),
                match s.domain {
                    Domain::Gpu => "GPUs are off (--no-gpu)",
                    Domain::Host =>
                        "RAPL covers the CPU here, so host sensors are not added next to it",
                }
            ),
            None,
        ),
        (Use::Metered, Err(e)) => {
            let instead = match super::select::estimate(s, scan) {
                Some(Ok(f)) => format!(
                    "; a run estimates it at {:.0} W ({})",
                    f.power.get(),
                    f.basis
                ),
                Some(Err(why)) => format!("; not estimated either: {why}"),
                None => String::new(),
            };
            ("unusable", format!("{}: {e}{instead}", s.info.name), fix(e))
        }
        (Use::Inside(why) | Use::Hidden(why) | Use::Unknown(why), _) => {
            ("ignored", format!("{}: {why}", s.info.name), None)
        }
    };
    SensorReport {
        sensor: family(s).into(),
        device: s.info.id.clone(),
        path: Some(s.path.display().to_string()),
        status: status.into(),
        detail,
        fix,
    }
}

/// One row per sensor, or one saying why there is none.
pub fn reports(scan: &Scan, u: &HwmonUse) -> Vec<SensorReport> {
    if scan.sensors.is_empty() {
        let detail = if !scan.root_exists {
            "directory missing".to_string()
        } else {
            format!(
                "no power or energy sensor among {} hwmon chip(s)",
                scan.chips
            )
        };
        let fix = if std::env::consts::ARCH == "aarch64" {
            "an ARM host without power sensors (AWS Graviton exposes none): the CPU is estimated \
             from CPU time × TDP"
        } else {
            "AMD and Intel GPUs report through their drivers (`modprobe amdgpu`, `i915`, `xe`); \
             in a container bind-mount /sys/class/hwmon and point amdahl at it with \
             --hwmon-root / AMDAHL_HWMON_ROOT"
        };
        return vec![SensorReport {
            sensor: "hwmon".into(),
            device: "-".into(),
            path: Some(scan.root.display().to_string()),
            status: "unusable".into(),
            detail,
            fix: Some(fix.into()),
        }];
    }
    scan.sensors.iter().map(|s| row(s, u, scan)).collect()
}

//! What a run's total covers, said in the scopes amdahl's models use for energy: the **GPU**
//! scope (board counters: what `plan` and `infer` call "GPU") and the **server (wall)** scope
//! (the GPUs, host CPUs, DRAM, NICs, fans, storage and power-supply losses: what a facility meter
//! or a cloud bill sees). No counter amdahl reads covers a whole server: RAPL covers CPU packages
//! and DRAM (psys: the platform of a client machine), NVML, AMD SMI and hwmon the GPU boards. So a
//! measured total is the GPU scope, the GPU scope plus part of the host, or part of the host, and
//! the label says which, so it is never compared with a server-scope figure as if it were one.

use crate::record::DeviceRecord;
use crate::source::{DeviceKind, Method};
pub use amdahl_model::carbon::covered::CoveredScope;
use serde::{Deserialize, Serialize};

/// What the devices in a run's total cover: the parts and how each was read, and the scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Coverage {
    /// E.g. "GPUs (counter) + CPU packages (counter) + DRAM (estimate)".
    pub parts: String,
    pub scope: CoveredScope,
}

impl Coverage {
    /// The devices that enter the total, grouped by kind in a fixed order; `None` when there
    /// are none (a command that never started, a rank that does not measure).
    pub fn of(devices: &[DeviceRecord]) -> Option<Coverage> {
        const ORDER: [(DeviceKind, &str); 6] = [
            (DeviceKind::Gpu, "GPUs"),
            (DeviceKind::Psys, "platform (psys)"),
            (DeviceKind::CpuPackage, "CPU packages"),
            (DeviceKind::Dram, "DRAM"),
            (DeviceKind::Cpu, "CPU"),
            (DeviceKind::Ram, "RAM"),
        ];
        let counted: Vec<&DeviceRecord> = devices.iter().filter(|d| d.in_total).collect();
        let parts: Vec<String> = ORDER
            .iter()
            .filter_map(|(kind, name)| {
                let mut methods: Vec<Method> = counted
                    .iter()
                    .filter(|d| d.kind == *kind)
                    .map(|d| d.method)
                    .collect();
                methods.sort_by_key(|m| m.as_str());
                methods.dedup();
                (!methods.is_empty()).then(|| {
                    let how: Vec<&str> = methods.iter().map(|m| m.as_str()).collect();
                    format!("{name} ({})", how.join(", "))
                })
            })
            .collect();
        if parts.is_empty() {
            return None;
        }
        let gpu = counted.iter().any(|d| d.kind == DeviceKind::Gpu);
        let host = counted.iter().any(|d| d.kind != DeviceKind::Gpu);
        let scope = match (gpu, host) {
            (true, false) => CoveredScope::Gpu,
            (true, true) => CoveredScope::GpuAndPartOfHost,
            _ => CoveredScope::PartOfHost,
        };
        Some(Coverage {
            parts: parts.join(" + "),
            scope,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdahl_model::units::{Joules, Watts};

    fn dev(kind: DeviceKind, method: Method, in_total: bool) -> DeviceRecord {
        DeviceRecord {
            id: "x".into(),
            kind,
            name: "x".into(),
            method,
            energy_j: Joules(1.0),
            avg_power_w: Watts(1.0),
            in_total,
            machine_energy_j: None,
            note: None,
            rejected_steps: 0,
        }
    }

    #[test]
    fn gpus_alone_are_the_gpu_scope() {
        let c = Coverage::of(&[
            dev(DeviceKind::Gpu, Method::Counter, true),
            dev(DeviceKind::Gpu, Method::Counter, true),
        ])
        .unwrap();
        assert_eq!(c.parts, "GPUs (counter)");
        assert_eq!(c.scope, CoveredScope::Gpu);
    }

    #[test]
    fn gpus_with_rapl_are_above_gpu_and_below_server_scope() {
        let c = Coverage::of(&[
            dev(DeviceKind::CpuPackage, Method::Counter, true),
            dev(DeviceKind::Dram, Method::Counter, true),
            dev(DeviceKind::Gpu, Method::IntegratedPower, true),
            dev(DeviceKind::Gpu, Method::Counter, true),
        ])
        .unwrap();
        assert_eq!(
            c.parts,
            "GPUs (counter, integrated-power) + CPU packages (counter) + DRAM (counter)"
        );
        assert_eq!(c.scope, CoveredScope::GpuAndPartOfHost);
        assert!(c.scope.words().contains("below the server (wall) scope"));
    }

    #[test]
    fn devices_outside_the_total_are_not_claimed() {
        // With psys, the packages leave the total: the coverage names the platform only.
        let c = Coverage::of(&[
            dev(DeviceKind::Psys, Method::Counter, true),
            dev(DeviceKind::CpuPackage, Method::Counter, false),
        ])
        .unwrap();
        assert_eq!(c.parts, "platform (psys) (counter)");
        assert_eq!(c.scope, CoveredScope::PartOfHost);
        assert_eq!(Coverage::of(&[]), None);
        assert_eq!(
            Coverage::of(&[dev(DeviceKind::Gpu, Method::Counter, false)]),
            None
        );
    }

    #[test]
    fn estimates_say_so() {
        let c = Coverage::of(&[
            dev(DeviceKind::Cpu, Method::Estimate, true),
            dev(DeviceKind::Ram, Method::Estimate, true),
        ])
        .unwrap();
        assert_eq!(c.parts, "CPU (estimate) + RAM (estimate)");
    }
}

//! The CPU power the estimate charges when no RAPL counter is readable, and where it came from.
//!
//! The estimate (`estimate.rs`) charges W per logical CPU × CPU-seconds. That rate comes, in order:
//! 1. from `--cpu-tdp` (the whole machine's CPU power, shared over its online CPUs);
//! 2. from the device catalog (`data/devices.csv`: TDP and physical cores per package);
//! 3. from the CPU power table (`data/cpu_power.csv`, CodeCarbon's, ~4,900 models: TDP per package);
//! 4. else 4 W per logical CPU ([`FALLBACK_WATTS_PER_CPU`]).
//!
//! A package's TDP is shared over its logical CPUs: `siblings` of `/proc/cpuinfo`, or more when
//! the datasheet or the model name ("64-Core") counts more cores — a VM's virtual topology shows
//! only its own vCPUs, and dividing a 280 W package over 4 of them would charge 70 W per vCPU. In
//! a VM whose model has no known core count, the TDP says nothing per vCPU, so the fallback rate
//! is used (at most TDP / siblings). The machine total never exceeds TDP × packages.

use crate::procfs::CpuInfo;
use amdahl_model::catalog::cpu_power::{cores_in_name, names, CpuPowerTable};
use amdahl_model::catalog::devices::Devices;
use amdahl_model::units::Watts;

/// W per logical CPU for a CPU no catalog knows: CodeCarbon 3.3.2's `DEFAULT_POWER_PER_CORE = 4`
/// (`codecarbon/core/cpu.py`), which CodeCarbon multiplies by the logical CPU count
/// (`psutil.cpu_count()`; under Slurm, the job's CPUs) for a CPU it detects but does not find in
/// its table. For scale: the server CPUs of data/devices.csv have
/// 1.9–3.4 W of TDP per logical CPU (EPYC 9654: 360 W / 192; Xeon Platinum 8380: 270 W / 80),
/// so the fallback errs high for servers.
pub const FALLBACK_WATTS_PER_CPU: Watts = Watts(4.0);

/// Where the CPU power came from.
#[derive(Debug, Clone, PartialEq)]
pub enum Basis {
    /// `--cpu-tdp`.
    Given,
    /// A row of the device catalog (its name).
    DeviceCatalog(String),
    /// A row of the CPU power table (its name).
    CpuPowerTable(String),
    /// No row matched (or a VM hides the package's size): [`FALLBACK_WATTS_PER_CPU`].
    Fallback,
}

/// The CPU power of the estimate.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuPower {
    /// Power of all `online` logical CPUs together when busy (the estimate's "TDP").
    pub watts: Watts,
    pub basis: Basis,
    /// One line for the user: which row matched, or that the fallback was used, and the figures.
    pub note: String,
}

/// Decide the CPU power for `online` logical CPUs described by `info`.
pub fn resolve(
    given: Option<Watts>,
    info: &CpuInfo,
    online: usize,
    devices: &Devices,
    table: Option<&CpuPowerTable>,
) -> CpuPower {
    let online = online.max(1) as f64;
    if let Some(w) = given {
        return CpuPower {
            watts: w,
            basis: Basis::Given,
            note: format!(
                "CPU estimate: --cpu-tdp {:.0} W over {online} logical CPUs",
                w.get()
            ),
        };
    }
    let model = info.model.as_deref().unwrap_or("");
    let fallback = |why: &str, cap: Option<f64>| {
        let per_cpu = cap.map_or(FALLBACK_WATTS_PER_CPU.get(), |c| {
            c.min(FALLBACK_WATTS_PER_CPU.get())
        });
        CpuPower {
            watts: Watts(per_cpu * online),
            basis: Basis::Fallback,
            note: format!(
                "CPU estimate: {why}; using the per-CPU fallback {per_cpu:.1} W × {online} logical CPUs = {:.0} W (CodeCarbon 3.3.2's 4 W per logical CPU; give --cpu-tdp W for a better figure)",
                per_cpu * online
            ),
        }
    };
    // (row name, package TDP, cores per package known from the datasheet or the name, basis)
    // The device catalog's match is by substring; keep it only when a name or alias names the
    // model token by token ("Xeon Platinum 8380" is not the 8380H).
    let device = devices.identify(model).filter(|d| {
        std::iter::once(&d.name)
            .chain(&d.aliases)
            .any(|n| names(n, model))
    });
    let row = match device.and_then(|d| Some((d, d.tdp?))) {
        Some((d, tdp)) => Some((
            d.name.clone(),
            tdp.get(),
            d.cores.or(cores_in_name(model)),
            Basis::DeviceCatalog(d.name.clone()),
        )),
        None => table.and_then(|t| t.identify(model)).map(|r| {
            (
                r.name.clone(),
                r.tdp_w.get(),
                cores_in_name(model),
                Basis::CpuPowerTable(r.name.clone()),
            )
        }),
    };
    let Some((name, tdp, cores, basis)) = row else {
        let why = if model.is_empty() {
            "/proc/cpuinfo names no CPU model".to_string()
        } else {
            format!("no catalog row matches `{model}`")
        };
        return fallback(&why, None);
    };
    let siblings = info.siblings.map(f64::from);
    let threads = match (siblings, cores.map(f64::from)) {
        (Some(s), Some(c)) => s.max(c),
        (Some(s), None) if !info.hypervisor => s,
        (Some(s), None) => {
            return fallback(
                &format!(
                    "`{model}` matched {name} ({tdp:.0} W), but this is a VM and its {s} vCPUs per package say nothing of the host's"
                ),
                Some(tdp / s),
            )
        }
        (None, Some(c)) => c,
        (None, None) => {
            return fallback(
                &format!("`{model}` matched {name} ({tdp:.0} W), but /proc/cpuinfo gives no CPU count per package"),
                None,
            )
        }
    };
    let per_cpu = tdp / threads;
    let watts = (per_cpu * online).min(tdp * f64::from(info.packages.max(1)));
    let table_name = match basis {
        Basis::DeviceCatalog(_) => "data/devices.csv",
        _ => "data/cpu_power.csv (CodeCarbon)",
    };
    CpuPower {
        watts: Watts(watts),
        basis,
        note: format!(
            "CPU estimate: `{model}` matched {name} in {table_name}: {tdp:.0} W per package over {threads} logical CPUs = {per_cpu:.2} W each, × {online} online = {watts:.0} W (give --cpu-tdp W to override)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdahl_model::catalog::{cpu_power, devices};

    fn info(model: &str, siblings: Option<u32>, packages: u32, hypervisor: bool) -> CpuInfo {
        CpuInfo {
            model: Some(model.into()),
            siblings,
            cores: None,
            packages,
            hypervisor,
        }
    }

    fn resolve_real(i: &CpuInfo, online: usize) -> CpuPower {
        resolve(
            None,
            i,
            online,
            devices::embedded().unwrap(),
            cpu_power::embedded().ok(),
        )
    }

    #[test]
    fn a_two_socket_epyc_host_is_charged_both_packages() {
        // devices.csv: EPYC 7763, 280 W, 64 cores; SMT shows 128 siblings per package.
        let p = resolve_real(
            &info("AMD EPYC 7763 64-Core Processor", Some(128), 2, false),
            256,
        );
        assert_eq!(p.basis, Basis::DeviceCatalog("EPYC 7763".into()));
        assert!((p.watts.get() - 560.0).abs() < 1e-9, "{p:?}");
        assert!(p.note.contains("EPYC 7763"), "{}", p.note);
    }

    #[test]
    fn a_vm_with_few_vcpus_is_charged_per_core_not_the_whole_package() {
        // 4 vCPUs of an EPYC 7763: 280 W / 64 cores (from the name and the catalog) × 4.
        let p = resolve_real(
            &info("AMD EPYC 7763 64-Core Processor", Some(4), 1, true),
            4,
        );
        assert!((p.watts.get() - 4.0 * 280.0 / 64.0).abs() < 1e-9, "{p:?}");
    }

    #[test]
    fn the_cpu_power_table_names_its_row() {
        // data/cpu_power.csv: Intel Xeon Gold 6248R, 205 W; 48 siblings (24 cores, SMT).
        let p = resolve_real(
            &info(
                "Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz",
                Some(48),
                2,
                false,
            ),
            96,
        );
        assert_eq!(
            p.basis,
            Basis::CpuPowerTable("Intel Xeon Gold 6248R".into())
        );
        assert!((p.watts.get() - 410.0).abs() < 1e-9, "{p:?}");
        assert!(p.note.contains("Intel Xeon Gold 6248R"), "{}", p.note);
        assert!(p.note.contains("CodeCarbon"), "{}", p.note);
    }

    /// Regression: an unknown CPU was charged 85 W whatever its size, "CodeCarbon's default", which CodeCarbon 3.x no longer uses for a CPU it detects but does not list.
    #[test]
    fn unknown_cpu_uses_the_per_cpu_fallback_and_says_so() {
        let p = resolve_real(&info("Intel(R) Xeon(R) CPU @ 2.20GHz", Some(8), 1, true), 8);
        assert_eq!(p.basis, Basis::Fallback);
        assert!((p.watts.get() - 32.0).abs() < 1e-9, "{p:?}");
        assert!(
            p.note.contains("fallback") && !p.note.contains("85"),
            "{}",
            p.note
        );
    }

    #[test]
    fn a_vm_of_a_model_with_unknown_core_count_falls_back() {
        // Xeon Gold 6248R is only in the CPU power table (no core count); a 2-vCPU VM must not
        // be charged 205 / 2 W per vCPU.
        let p = resolve_real(
            &info(
                "Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz",
                Some(2),
                1,
                true,
            ),
            2,
        );
        assert_eq!(p.basis, Basis::Fallback);
        assert!((p.watts.get() - 8.0).abs() < 1e-9, "{p:?}");
        assert!(p.note.contains("Intel Xeon Gold 6248R"), "{}", p.note);
    }

    /// The device catalog's substring match would take an 8380H for its 8380 (270 W, 40 cores).
    #[test]
    fn a_suffixed_model_is_not_taken_for_the_catalog_device() {
        let p = resolve_real(
            &info(
                "Intel(R) Xeon(R) Platinum 8380H CPU @ 2.90GHz",
                Some(56),
                4,
                false,
            ),
            224,
        );
        assert_eq!(
            p.basis,
            Basis::CpuPowerTable("Intel Xeon Platinum 8380H".into())
        );
        assert!((p.watts.get() - 1000.0).abs() < 1e-9, "{p:?}");
    }

    #[test]
    fn given_tdp_wins() {
        let p = resolve(
            Some(Watts(150.0)),
            &CpuInfo::default(),
            16,
            devices::embedded().unwrap(),
            None,
        );
        assert_eq!((p.watts, p.basis), (Watts(150.0), Basis::Given));
    }
}

//! The measuring flags `run`, `scale`, `exporter`, `bench` and `detect` share, and what they
//! resolve to: where the RAPL counters are, the CPU power for the estimate, NVML, and the cost
//! (grid, PUE, extra catalogs) that turns measured joules into kWh and CO2e.

use super::resolve::{self, GridArgs};
use amdahl_meter::estimate::Target;
use amdahl_meter::gpu::parse_visible;
use amdahl_meter::hwmon::{self, AmdVisible};
use amdahl_meter::record::Intensity;
use amdahl_meter::Meter;
use amdahl_meter::{procfs, rapl, sensors};
use amdahl_model::carbon::Pue;
use amdahl_model::catalog::Catalogs;
use amdahl_model::units::{Seconds, Watts};
use anyhow::Result;
use std::path::PathBuf;
use std::time::Duration;

/// The sensor options `run` and `scale` share.
#[derive(clap::Args, Debug, Clone)]
pub struct SensorArgs {
    #[command(flatten)]
    pub powercap: PowercapArgs,
    /// TDP of the CPU package in watts, for the estimate when no RAPL counter is readable
    /// [default: from the device catalog when /proc/cpuinfo names a known CPU].
    #[arg(long, value_name = "W", value_parser = crate::domain::watts)]
    pub cpu_tdp: Option<f64>,
    /// Do not measure GPUs (neither NVML nor the AMD/Intel hwmon chips).
    #[arg(long)]
    pub no_gpu: bool,
}

/// Where the RAPL counters are: `--powercap-root DIR` or `AMDAHL_POWERCAP_ROOT` (a bind-mounted
/// /sys/class/powercap in a container, a fake tree in tests), and the hwmon chips (AMD/Intel
/// GPUs, Grace, Altra): `--hwmon-root DIR` or `AMDAHL_HWMON_ROOT`. Shared with `amdahl bench`,
/// `detect` and `exporter`.
#[derive(clap::Args, Debug, Clone)]
pub struct PowercapArgs {
    /// Root of the powercap tree (RAPL).
    #[arg(long, env = "AMDAHL_POWERCAP_ROOT", default_value = rapl::DEFAULT_ROOT, value_name = "DIR")]
    pub powercap_root: PathBuf,
    /// Root of the hwmon class (AMD and Intel GPUs, NVIDIA Grace, Ampere Altra power sensors).
    #[arg(long, env = "AMDAHL_HWMON_ROOT", default_value = hwmon::DEFAULT_ROOT, value_name = "DIR")]
    pub hwmon_root: PathBuf,
}

/// What turns measured joules into kWh and CO2e, as `run` and `scale` take it: the grid, the PUE
/// and extra catalog files.
#[derive(clap::Args, Debug, Clone)]
pub struct CostArgs {
    #[command(flatten)]
    pub grid: GridArgs,
    /// PUE: a number ≥ 1 or a preset (local = 1.0, hyperscale, industry) [default: local, as in
    /// every command].
    #[arg(long, value_name = "PUE|PRESET")]
    pub pue: Option<String>,
    /// Extra catalog files (devices, regions, PUE presets); rows override embedded ones by name.
    #[arg(long = "catalog", value_name = "FILE")]
    pub catalogs: Vec<PathBuf>,
}

/// The cost flags resolved: the catalogs (with `--catalog` files), the PUE and the grid.
pub struct Cost {
    pub catalogs: Catalogs,
    pub pue: Pue,
    pub intensity: Intensity,
}

impl CostArgs {
    pub fn resolve(&self) -> Result<Cost> {
        let catalogs = resolve::load(&self.catalogs)?;
        let pue = resolve::pue(self.pue.as_deref(), &catalogs)?;
        let intensity = intensity(&self.grid, &catalogs)?;
        Ok(Cost {
            catalogs,
            pue,
            intensity,
        })
    }
}

/// The grid intensity for the record, from `--region` / `--intensity` through the grid catalog.
pub fn intensity(grid: &GridArgs, c: &Catalogs) -> Result<Intensity> {
    Ok(Intensity::from_grid(&grid.resolve(c)?, &c.grid))
}

impl SensorArgs {
    /// What sensor discovery needs, for `target`, with the CPU power the estimate charges
    /// (see [`cpu_tdp`]) and the line that says where it came from.
    pub fn options(&self, c: &Catalogs, target: Target) -> (sensors::Options, Option<String>) {
        let (tdp, note) = cpu_tdp(self.cpu_tdp, c);
        let options = sensors::Options {
            powercap_root: self.powercap.powercap_root.clone(),
            reader: rapl::fs_reader(),
            cpu_tdp: tdp,
            gpus: !self.no_gpu,
            visible: parse_visible(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref()),
            hwmon_root: self.powercap.hwmon_root.clone(),
            amd_visible: AmdVisible::from_env(|k| std::env::var(k).ok()),
            amd_smi: true,
            target,
        };
        (options, note)
    }
}

/// The CPU power the estimate charges: `--cpu-tdp`, else the catalogs' row for the CPU that
/// /proc/cpuinfo names, else a per-CPU fallback (`amdahl_meter::cpu_power`), with the line that
/// says which (printed and kept in the record's warnings when the estimate is used).
pub fn cpu_tdp(given: Option<f64>, c: &Catalogs) -> (Option<Watts>, Option<String>) {
    let p = amdahl_meter::cpu_power::resolve(
        given.map(Watts),
        &procfs::cpu_info(),
        procfs::cpu_count(),
        &c.devices,
        amdahl_model::catalog::cpu_power::embedded().ok(),
    );
    let note = (p.basis != amdahl_meter::cpu_power::Basis::Given).then_some(p.note);
    (Some(p.watts), note)
}

/// Idle power over `d` before the work starts, said on stderr (`--baseline`, `--idle`).
pub fn measure_baseline(meter: &mut Meter, d: Duration) -> (Seconds, Watts) {
    crate::output::note(&format!(
        "measuring idle power for {} s before starting",
        d.as_secs_f64()
    ));
    meter.measure_idle(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(region: &str) -> GridArgs {
        GridArgs {
            region: Some(region.into()),
            intensity: None,
            intensity_scope: None,
            intensity_year: None,
            intensity_source: None,
        }
    }

    #[test]
    fn region_resolves_through_the_grid_catalog() {
        let c = resolve::load(&[]).unwrap();
        // data/grid.csv: France 56.0 g/kWh (OWID/Ember 2023); world 436 (Ember 2022).
        let fr = intensity(&grid("FR"), &c).unwrap();
        assert_eq!((fr.g_per_kwh.get(), fr.year), (56.0, Some(2023)));
        assert_eq!(
            intensity(&grid("world"), &c).unwrap().g_per_kwh.get(),
            436.0
        );
        let e = format!("{:#}", intensity(&grid("Frnace"), &c).unwrap_err());
        assert!(e.contains("France"), "suggests the nearest name: {e}");
    }
}

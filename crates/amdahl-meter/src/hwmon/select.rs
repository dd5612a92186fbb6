//! Which hwmon sensors a run adds to its total, beside RAPL and NVML.

use super::{Domain, Scan, Sensor, Use};
use crate::source::DeviceKind;

/// Which hwmon sensors a run uses: GPU chips unless `--no-gpu`; host chips (Grace, Altra,
/// labelled CPU sensors) only where no RAPL counter covers the CPU, so an x86 machine's
/// platform sensors never sit next to its RAPL packages.
pub struct HwmonUse {
    gpus: bool,
    host: bool,
}

impl HwmonUse {
    pub fn new(gpus: bool, rapl_cpu: bool) -> Self {
        HwmonUse {
            gpus,
            host: !rapl_cpu,
        }
    }

    pub fn admits(&self, s: &Sensor) -> bool {
        match s.domain {
            Domain::Gpu => self.gpus,
            Domain::Host => self.host,
        }
    }

    fn used<'a>(&'a self, scan: &'a Scan) -> impl Iterator<Item = &'a Sensor> {
        scan.sensors
            .iter()
            .filter(move |s| s.usable() && self.admits(s))
    }

    /// A used host sensor measures the CPU.
    pub fn covers_cpu(&self, scan: &Scan) -> bool {
        self.used(scan)
            .any(|s| s.domain == Domain::Host && s.info.kind == DeviceKind::CpuPackage)
    }

    /// A used sensor covers the host's memory too (Grace socket, MI300A).
    pub fn covers_host(&self, scan: &Scan) -> bool {
        self.used(scan).any(|s| s.covers_host)
    }

    /// Sensors that would be used but cannot be read: said, like unreadable RAPL zones, with
    /// what takes their place (an estimate, [`super::unreadable`]) or why nothing does.
    pub fn warnings(&self, scan: &Scan) -> Vec<String> {
        scan.sensors
            .iter()
            .filter(|s| s.use_ == Use::Metered && self.admits(s))
            .filter_map(|s| {
                let e = s.status.as_ref().err()?;
                let (id, name) = (&s.info.id, &s.info.name);
                Some(match estimate(s, scan) {
                    Some(Ok(f)) => format!(
                        "{id} ({name}) not measured: {e}; estimated at {:.0} W ({}) while it \
                         cannot be read",
                        f.power.get(),
                        f.basis
                    ),
                    Some(Err(why)) => {
                        format!("{id} ({name}) not measured: {e}; not estimated either: {why}")
                    }
                    None => format!("{id} ({name}) not measured: {e}"),
                })
            })
            .collect()
    }
}

/// The estimate that replaces an unreadable GPU, or why there is none; None where no estimate
/// is due (not a GPU, or its card is read through another sensor).
pub fn estimate(s: &Sensor, scan: &Scan) -> Option<Result<crate::accum::Fallback, String>> {
    super::unreadable::unreadable(s, &scan.sensors).then(|| super::unreadable::fallback(s))
}

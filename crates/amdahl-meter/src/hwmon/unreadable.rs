//! A GPU visible in sysfs whose power or energy file cannot be read (EACCES, garbage, no file)
//! is estimated, not dropped: it is metered with the method `estimate` at its catalog TDP while
//! it reads nothing, with the reason in its note. The same estimate covers the intervals a
//! readable GPU loses later (a counter that steps back, a file that turns unreadable, a step
//! rejected as impossible: [`crate::accum::Fallback`]).
//!
//! Why the TDP: while the sensor reads nothing, nothing says how busy the GPU was, and the
//! catalog's `idle_w` is empty for every GPU (no vendor publishes idle power). The TDP bounds
//! the draw from above (the board's power limit: an SMU keeps the socket power under it), so the
//! energy reported is never less than what was drawn, and the note says it is an upper bound.
//! A GPU the device catalog (data/devices.csv, `amdahl catalog`) does not know, or knows
//! without a TDP, cannot be estimated: it stays out of the total and the warning says so.

use super::{Domain, Sensor, Use};
use crate::accum::Fallback;
use amdahl_model::catalog::devices;

/// The estimate for a GPU sensor, or why there is none.
pub fn fallback(s: &Sensor) -> Result<Fallback, String> {
    if s.domain != Domain::Gpu {
        return Err("not a GPU".into());
    }
    if s.covers_cpu_package || s.covers_host {
        // Unreadable, the APU leaves the CPU to RAPL or the CPU estimate (sensors::discover), so
        // its TDP, which holds the CPU cores, would count them twice.
        return Err(format!(
            "{} is an APU whose TDP holds its CPU cores, which RAPL or the CPU estimate already counts",
            s.info.name
        ));
    }
    let d = devices::identify(&s.info.name).ok_or_else(|| {
        format!(
            "`{}` is not in the device catalog, so no TDP to estimate it with (add a row with \
             tdp_w through --catalog)",
            s.info.name
        )
    })?;
    let tdp = d.tdp.ok_or_else(|| {
        format!(
            "the device catalog has no TDP for {} (add tdp_w through --catalog)",
            d.name
        )
    })?;
    Ok(Fallback {
        power: tdp,
        basis: format!(
            "the catalog TDP of {}, an upper bound: the sensor said nothing of how busy it was",
            d.name
        ),
    })
}

/// Whether `s` is a GPU the run would meter, whose first reading failed, and that no readable
/// sensor of the same PCI device covers (an Intel card whose tiles are read instead is not
/// estimated: its tiles already are the card).
pub fn unreadable(s: &Sensor, all: &[Sensor]) -> bool {
    s.domain == Domain::Gpu
        && s.use_ == Use::Metered
        && s.status.is_err()
        && !all
            .iter()
            .any(|o| o.usable() && !o.pci.is_empty() && o.pci == s.pci)
}

//! Embodied carbon of the hardware, charged to a job by the share of the device's life it used
//! (LLMCarbon, Faiz et al. ICLR 2024, Eq. 8; their embodied.py): per device
//! C = die area × CPA(node) + memory GB × DRAM factor, and the job's share is
//! C × count × t_job / lifetime (5 years by default, as in LLMCarbon).

use super::{positive, CarbonError};
use crate::catalog::devices::Device;
use crate::catalog::embodied::Factors;
use crate::units::{GramsCo2e, Seconds};
use serde::Serialize;

/// LLMCarbon's default service life of an accelerator: 5 years.
pub const DEFAULT_LIFETIME_YEARS: f64 = 5.0;

/// The embodied share of one job.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Embodied {
    /// Manufacturing emissions of one device's logic dies, kgCO2e.
    pub logic_kg_per_device: f64,
    /// ... of its memory, kgCO2e.
    pub memory_kg_per_device: f64,
    pub lifetime_years: f64,
    /// Fraction of the fleet's lifetime the job used (t_job / lifetime).
    pub life_share: f64,
    /// count × (logic + memory) × life_share.
    pub co2e: GramsCo2e,
    /// What was left out (a die area that is not published) and the factor sources.
    pub notes: Vec<String>,
}

/// The embodied share of `count` devices busy for `duration`, or `None` when the catalog has neither
/// a die area nor a memory size for the device.
pub fn share(
    device: &Device,
    factors: &Factors,
    count: u32,
    duration: Seconds,
    lifetime_years: f64,
) -> Result<Option<Embodied>, CarbonError> {
    positive("device lifetime (years)", lifetime_years)?;
    positive("device count", f64::from(count))?;
    positive("duration", duration.get())?;
    let mut notes = Vec::new();
    let logic = match (device.die_area_mm2, device.process_nm) {
        (Some(mm2), Some(nm)) => match factors.logic_per_cm2(nm) {
            Some(f) => {
                notes.push(format!(
                    "logic: {mm2} mm2 x {} kgCO2e/cm2 ({}; {})",
                    f.kg_co2e, f.source, device.embodied_source
                ));
                Some(mm2 / 100.0 * f.kg_co2e)
            }
            None => None,
        },
        _ => None,
    };
    if logic.is_none() {
        notes.push(format!(
            "logic dies left out: no published die area for {}",
            device.name
        ));
    }
    let memory = match (device.memory_gb(), factors.dram_per_gb()) {
        (Some(gb), Some(f)) => {
            notes.push(format!(
                "memory: {gb} GB x {} kgCO2e/GB ({})",
                f.kg_co2e, f.source
            ));
            Some(gb * f.kg_co2e)
        }
        _ => None,
    };
    if logic.is_none() && memory.is_none() {
        return Ok(None);
    }
    let (logic, memory) = (logic.unwrap_or(0.0), memory.unwrap_or(0.0));
    let lifetime = Seconds::from_days(365.0 * lifetime_years);
    let life_share = duration / lifetime;
    Ok(Some(Embodied {
        logic_kg_per_device: logic,
        memory_kg_per_device: memory,
        lifetime_years,
        life_share,
        co2e: GramsCo2e((logic + memory) * 1e3 * f64::from(count) * life_share),
        notes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{devices, embodied};

    #[test]
    fn v100_matches_llmcarbon_table() {
        // LLMCarbon hardware table: V100, 815 mm2 at 1.2 kgCO2/cm2 = 9.78 kgCO2e of logic.
        let v = devices::lookup("v100").unwrap();
        let f = embodied::embedded().unwrap();
        let e = share(v, f, 1, Seconds::from_days(365.0 * 5.0), 5.0)
            .unwrap()
            .unwrap();
        assert!((e.logic_kg_per_device - 9.78).abs() < 1e-9);
        // 16 GB HBM2 x 0.4 kg/GB = 6.4 kg; the whole life is charged once.
        assert!((e.co2e.kg() - (9.78 + 6.4)).abs() < 1e-9);
    }

    #[test]
    fn share_scales_with_time_and_count() {
        let h = devices::lookup("h100").unwrap();
        let f = embodied::embedded().unwrap();
        let a = share(h, f, 1, Seconds::from_days(10.0), 5.0)
            .unwrap()
            .unwrap();
        let b = share(h, f, 8, Seconds::from_days(20.0), 5.0)
            .unwrap()
            .unwrap();
        assert!((b.co2e / a.co2e - 16.0).abs() < 1e-9);
    }

    #[test]
    fn unknown_die_counts_memory_and_says_so() {
        let m = devices::lookup("mi300x").unwrap();
        let f = embodied::embedded().unwrap();
        let e = share(m, f, 1, Seconds::from_days(1.0), 5.0)
            .unwrap()
            .unwrap();
        assert_eq!(e.logic_kg_per_device, 0.0);
        assert!(e.notes.iter().any(|n| n.contains("left out")));
    }
}

//! Energy and carbon accounting: IT energy from hardware-hours, from compute (FLOPs ÷ achieved rate)
//! or from a measured result; facility energy (× PUE); operational emissions (× grid intensity);
//! the embodied-carbon share of the hardware; everyday equivalents; and the data of a citable
//! statement. Formulas and sources: docs/methodology.md.

pub mod covered;
pub mod defaults;
pub mod embodied;
pub mod energy;
pub mod equivalents;
pub mod estimate;
pub mod from_result;
pub mod lifetime;
pub mod network;
pub mod sci;
pub mod statement;

pub use embodied::Embodied;
pub use energy::{compute_duration, training_flops, Basis, ItEnergy};
pub use equivalents::Equivalents;
pub use estimate::{estimate, CarbonReport, Comparison, Pue};
pub use statement::Statement;

use crate::units::GramsPerKwh;
use thiserror::Error;

/// kg CO2e per joule of IT energy: PUE × g/kWh ÷ 3.6·10⁹ (3.6·10⁶ J per kWh, 10³ g per kg). What
/// a measured run's projection multiplies its energy by (`amdahl run`, the Python tracker).
pub fn kg_per_joule(pue: f64, intensity: GramsPerKwh) -> f64 {
    pue * intensity.get() / 3.6e9
}

/// What is wrong with the inputs of an estimate.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum CarbonError {
    #[error("{what} must be a positive number (got {})", crate::units::shown(.value))]
    NotPositive { what: &'static str, value: f64 },
    #[error("PUE {} is below 1: PUE = facility energy / IT energy, so it is at least 1 (use 1.0 for a single machine)", crate::units::shown(.0))]
    PueBelowOne(f64),
    #[error("PUE {} is above {max}, the least efficient class The Green Grid defines (\"very inefficient\"); check the figure (a PUE of 1.5 is 1.5, not 150)", crate::units::shown(.0), max = crate::carbon::Pue::MAX)]
    PueAboveMax(f64),
    #[error("{what} {} is outside (0, 1]; give a fraction (0.4 for 40 %)", crate::units::shown(.value))]
    NotFraction { what: &'static str, value: f64 },
    #[error("{file}: {message}")]
    Input { file: String, message: String },
    #[error("{what} is too large to count (the result overflows); {fix}")]
    TooLarge { what: String, fix: &'static str },
    #[error("{what} must be 0 or more (got {})", crate::units::shown(.value))]
    Negative { what: &'static str, value: f64 },
}

/// Check that `value` is finite and > 0.
pub(crate) fn positive(what: &'static str, value: f64) -> Result<f64, CarbonError> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(CarbonError::NotPositive { what, value })
    }
}

/// Check that `value` lies in (0, 1].
pub(crate) fn fraction(what: &'static str, value: f64) -> Result<f64, CarbonError> {
    if value.is_finite() && value > 0.0 && value <= 1.0 {
        Ok(value)
    } else {
        Err(CarbonError::NotFraction { what, value })
    }
}

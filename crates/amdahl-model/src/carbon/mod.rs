//! Energy and carbon accounting: IT energy from hardware-hours, from compute (FLOPs ÷ achieved rate)
//! or from a measured result; facility energy (× PUE); operational emissions (× grid intensity);
//! the embodied-carbon share of the hardware; everyday equivalents; and the data of a citable
//! statement. Formulas and sources: docs/methodology.md.

pub mod embodied;
pub mod energy;
pub mod equivalents;
pub mod estimate;
pub mod from_result;
pub mod statement;

pub use embodied::Embodied;
pub use energy::{compute_duration, training_flops, Basis, ItEnergy};
pub use equivalents::Equivalents;
pub use estimate::{estimate, CarbonReport, Comparison, Pue};
pub use statement::Statement;

use thiserror::Error;

/// What is wrong with the inputs of an estimate.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum CarbonError {
    #[error("{what} must be a positive number (got {value})")]
    NotPositive { what: &'static str, value: f64 },
    #[error("PUE {0} is below 1: PUE = facility energy / IT energy, so it is at least 1 (use 1.0 for a single machine)")]
    PueBelowOne(f64),
    #[error("{what} {value} is outside (0, 1]; give a fraction (0.4 for 40 %)")]
    NotFraction { what: &'static str, value: f64 },
    #[error("{file}: {message}")]
    Input { file: String, message: String },
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

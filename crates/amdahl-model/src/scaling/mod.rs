//! Scaling laws (Amdahl, Gustafson, Karp–Flatt, USL) following J. Végh's reading of Amdahl's law:
//! closed forms ([`laws`]), reading measured runs ([`input`]), fitting and choosing models
//! ([`models`], [`analysis`]), Végh's accelerator what-if ([`whatif`]), attribution of 1−α_eff
//! to phases ([`decompose`]) and embedded measured series ([`builtin`]).

pub mod analysis;
pub mod builtin;
pub mod decompose;
pub mod error;
pub mod input;
pub mod laws;
mod lsq;
pub mod models;
#[cfg(test)]
mod validation;
pub mod whatif;

pub use analysis::{analyse, FitOptions, FitResult, SeriesResult};
pub use error::ScalingError;

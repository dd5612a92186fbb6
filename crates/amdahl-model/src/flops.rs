//! Whole-run FLOP counts that the catalogs and the energy accounting share. A leaf: it imports
//! only the units, so `catalog` and `carbon` both build on it without importing each other.

use crate::units::Flops;

/// Training compute ≈ 6·P·D FLOPs (Kaplan et al. 2020, Section 2.1): 2 per parameter per token in the
/// forward pass, 4 in the backward pass.
pub fn training_flops(params: f64, tokens: f64) -> Flops {
    Flops(6.0 * params * tokens)
}

//! Bytes per parameter of weights, gradients and optimizer state, by precision, gradient dtype
//! and optimizer-state dtype (`--optimizer-dtype`, `--fp32-grads`).
//!
//! Sources: Rajbhandari et al. 2020 (ZeRO) §3.1: mixed-precision Adam keeps fp16/bf16 weights and
//! gradients (2 + 2 bytes) and fp32 master weights, momentum and variance (K = 12): 16 bytes per
//! parameter. Megatron-LM `docs/distrib_optimizer.md` (NVIDIA): with bf16 parameters Megatron
//! accumulates gradients in an fp32 `main_grad` buffer, 2 + 4 + 12 = 18 bytes per parameter, of
//! which the distributed optimizer (ZeRO-1) shards the 12 bytes of master weights and moments:
//! 6 + 12/d. Adam moments in bf16 (as in DeepSeek-V3 §3.3.2, "we adopt BF16 for the first and
//! second moments") halve the 8 bytes of m and v; the fp32 master copy stays.

use super::hardware::ComputePrecision;
use super::spec::Layout;
pub use super::spec::OptimizerDtype;

/// Bytes per parameter of (weights, gradients, optimizer state) before ZeRO sharding.
///
/// - fp32 training: 4 + 4, and Adam's moments (no separate master copy);
/// - mixed precision (bf16, fp16, fp8 — Transformer Engine keeps bf16 weights and casts per
///   GEMM): 2-byte weights, 2-byte gradients (4 with `fp32_grads`, Megatron's `main_grad`), an
///   fp32 master copy (4) and the moments.
pub fn bytes_per_param(l: &Layout) -> (f64, f64, f64) {
    let moments = l.optimizer_dtype.moment_bytes();
    // LoRA: frozen base weights, stored as the run stores them, with no gradient or state.
    if l.lora_rank.is_some() {
        let weights = match l.precision {
            ComputePrecision::Fp32 | ComputePrecision::Tf32 => 4.0,
            _ => 2.0,
        };
        return (weights, 0.0, 0.0);
    }
    match l.precision {
        ComputePrecision::Fp32 | ComputePrecision::Tf32 => (4.0, 4.0, moments),
        ComputePrecision::Bf16
        | ComputePrecision::Fp16
        | ComputePrecision::Fp8
        | ComputePrecision::Fp4 => (2.0, if l.fp32_grads { 4.0 } else { 2.0 }, 4.0 + moments),
    }
}

/// Bytes Adam streams per parameter it updates: read the gradient twice (global-norm clipping,
/// then the update), read and write master weights and both moments, write the low-precision
/// weights (Megatron `optimizer.step()`: `clip_grad_norm` + fused multi-tensor Adam + copy to the
/// model's parameters).
pub fn step_bytes_per_param(l: &Layout) -> f64 {
    // LoRA updates only the adapters (not counted): the base weights are never stepped.
    if l.lora_rank.is_some() {
        return 0.0;
    }
    let (w, g, o) = bytes_per_param(l);
    let low_precision_copy =
        if matches!(l.precision, ComputePrecision::Fp32 | ComputePrecision::Tf32) {
            0.0
        } else {
            w
        };
    2.0 * g + 2.0 * o + low_precision_copy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn megatron_distrib_optimizer_table() {
        // Megatron-LM docs/distrib_optimizer.md: bf16 params + fp32 grads = 18 bytes/param, of
        // which 12 are sharded by the distributed optimizer (6 + 12/d); bf16 grads: 16 (ZeRO §3.1).
        let l = Layout {
            fp32_grads: true,
            ..Layout::default()
        };
        let (w, g, o) = bytes_per_param(&l);
        assert_eq!((w + g, o), (6.0, 12.0));
        let (w, g, o) = bytes_per_param(&Layout::default());
        assert_eq!(w + g + o, 16.0);
        // bf16 moments: 4 bytes less per parameter.
        let l = Layout {
            optimizer_dtype: OptimizerDtype::Bf16,
            ..Layout::default()
        };
        let (w2, g2, o2) = bytes_per_param(&l);
        assert_eq!(w + g + o - (w2 + g2 + o2), 4.0);
        // Adam step with bf16 grads: 2·2 + 2·12 + 2 = 30 bytes.
        assert_eq!(step_bytes_per_param(&Layout::default()), 30.0);
    }

    #[test]
    fn parse_names() {
        assert_eq!(OptimizerDtype::parse("BF16"), Some(OptimizerDtype::Bf16));
        assert_eq!(OptimizerDtype::parse("fp8"), None);
    }
}

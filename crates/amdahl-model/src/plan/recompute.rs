//! Which parts of a layer selective recomputation re-runs: Megatron-Core's `--recompute-modules`
//! (NVIDIA Megatron-LM, `megatron/core/transformer/moe/README.md`, "Checkpointing": the
//! output-discarding recomputation of `layernorm`, `mla_up_proj` and `moe_act`, standard
//! checkpointing of `core_attn` and `mlp`; default `core_attn`). DeepSeek-V3 trained with the
//! first three (DeepSeek-AI 2024, §3.2.3 "recomputation of RMSNorm and MLA up-projection";
//! §3.3.3: the SwiGLU inputs of the MoE are cached and its output recomputed).
//!
//! Each module trades stored activation bytes (Korthikanti et al. 2022's per-layer accounting,
//! `layer_activation_bytes` in the memory module, which calls this one) for forward work
//! re-done in the backward pass.

use super::counts::{mean_routed_width, moe_fraction};
use super::spec::ModelShape;
pub use super::spec::{RecomputeModule, RecomputeModules};

/// Bytes per token-hidden element (of one microbatch, per TP rank, before the activation
/// precision's scale) that the modules other than `core_attn` keep out of a layer's stored
/// activations, in the terms of the memory module's `layer_activation_bytes` (the caller):
/// - `layernorm`: the two norms' 2-byte outputs, 4 (split by TP only with SP, `unsplit_div`);
/// - `mla_up_proj`: the queries (2·q_width/h) and keys and values (4·kv_width/h), less the
///   latents kept instead, 2·(q_lora_rank + kv_lora_rank)/h;
/// - `moe_act`: the routed experts' activation output, 2·(top_k × capacity factor × expert
///   width)/h in the MoE share of the layers;
/// - `mlp`: the dense MLP's inner tensors, (6 gated, else 4)·ffn/h and its 1-byte dropout mask,
///   in the dense share of the layers.
pub fn dropped_bytes(
    model: &ModelShape,
    modules: RecomputeModules,
    t: f64,
    unsplit_div: f64,
) -> f64 {
    let h = f64::from(model.hidden);
    let mut dropped = 0.0;
    if modules.contains(RecomputeModule::Layernorm) {
        dropped += 4.0 / unsplit_div;
    }
    if modules.contains(RecomputeModule::MlaUpProj) {
        let latents = f64::from(model.q_lora_rank.unwrap_or(0) + model.kv_lora_rank.unwrap_or(0));
        dropped +=
            ((2.0 * model.q_width() + 4.0 * model.kv_width() - 2.0 * latents) / h).max(0.0) / t;
    }
    if modules.contains(RecomputeModule::MoeAct) {
        dropped += 2.0 * mean_routed_width(model) / h / t;
    }
    if modules.contains(RecomputeModule::Mlp) {
        let inner = if model.gated_mlp { 6.0 } else { 4.0 } * f64::from(model.ffn) / h / t;
        dropped += (1.0 - moe_fraction(model)) * (inner + 1.0 / unsplit_div);
    }
    dropped
}

/// Forward GEMM FLOPs per token and layer (mean over layers, whole layer, before TP) that the
/// modules re-run: MLA's up-projections, 2·(q_lora_rank·q_width + kv_lora_rank·2·kv_width), and
/// the dense MLP's matrices in the dense share of the layers. Core attention's GEMMs are the
/// caller's (FlashAttention already re-computes them); norms and activations are memory-bound
/// ([`recomputed_elementwise_bytes`]).
pub fn recomputed_gemm_flops_per_token(model: &ModelShape, modules: RecomputeModules) -> f64 {
    let h = f64::from(model.hidden);
    let mut flops = 0.0;
    if modules.contains(RecomputeModule::MlaUpProj) {
        flops += 2.0
            * (f64::from(model.q_lora_rank.unwrap_or(0)) * model.q_width()
                + f64::from(model.kv_lora_rank.unwrap_or(0)) * 2.0 * model.kv_width());
    }
    if modules.contains(RecomputeModule::Mlp) {
        flops +=
            (1.0 - moe_fraction(model)) * 2.0 * model.mlp_matrices() * h * f64::from(model.ffn);
    }
    flops
}

/// Element-wise bytes moved per token-hidden element (per TP rank, before the precision's scale)
/// by re-running the modules' memory-bound parts, in the terms of the planner's element-wise
/// traffic (`perf/layer.rs`: LayerNorms 2×4 per element, the activation function 6 gated / 4 per MLP
/// element): `layernorm` 8 (on `unsplit_div`), `moe_act` and `mlp` their activation functions.
pub fn recomputed_elementwise_bytes(
    model: &ModelShape,
    modules: RecomputeModules,
    t: f64,
    unsplit_div: f64,
) -> f64 {
    let h = f64::from(model.hidden);
    let act = if model.gated_mlp { 6.0 } else { 4.0 };
    let mut bytes = 0.0;
    if modules.contains(RecomputeModule::Layernorm) {
        bytes += 8.0 / unsplit_div;
    }
    if modules.contains(RecomputeModule::MoeAct) {
        bytes += act * mean_routed_width(model) / h / t;
    }
    if modules.contains(RecomputeModule::Mlp) {
        bytes += (1.0 - moe_fraction(model)) * act * f64::from(model.ffn) / h / t;
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::memory::layer_activation_bytes;
    use crate::plan::perf::estimate;
    use crate::plan::shape::catalog_model;
    use crate::plan::spec::{Layout, Recompute};
    use crate::plan::test_support::catalog;
    use crate::plan::validate::validate;
    use crate::plan::PlanError;
    use RecomputeModule::*;

    fn selective(modules: &[RecomputeModule]) -> Layout {
        Layout {
            recompute: Recompute::Selective,
            recompute_modules: RecomputeModules::new(modules),
            flash_attention: true,
            ..Layout::default()
        }
    }

    #[test]
    fn deepseek_v3_modules_drop_what_the_accounting_says() {
        // DeepSeek-V3 (catalog: h 7,168, 128 heads of 128, MLA ranks 1,536 / 512, 58 of 61
        // layers MoE with top-8 experts of 2,048): per token-hidden element, bf16, no TP or SP,
        // the norms' outputs 4 bytes; Q, K, V (2·16,384 + 4·16,384)/7,168 less the latents
        // 2·(1,536 + 512)/7,168; the routed SwiGLU outputs 2·(58/61)·8·2,048/7,168.
        let Ok(m) = catalog_model("deepseek-v3") else {
            panic!("deepseek-v3 missing from the catalog")
        };
        let (s, h) = (4096.0, 7168.0);
        let want =
            4.0 + (6.0 * 16384.0 - 2.0 * 2048.0) / h + 2.0 * (58.0 / 61.0) * 8.0 * 2048.0 / h;
        let base = layer_activation_bytes(&m, &selective(&[CoreAttn]), 1.0, Recompute::Selective);
        let l = selective(&[Layernorm, MlaUpProj, MoeAct]);
        let got = layer_activation_bytes(&m, &l, 1.0, Recompute::Selective);
        assert!(
            ((base - got) / (s * h) / want - 1.0).abs() < 1e-12,
            "{}",
            (base - got) / (s * h)
        );
        // Serialised as Megatron's names; the default (core attention) is left out of JSON.
        let json = serde_json::to_value(l).unwrap_or_default();
        assert_eq!(
            json["recompute_modules"],
            serde_json::json!(["layernorm", "mla_up_proj", "moe_act"])
        );
        let back: Layout = serde_json::from_value(json).unwrap_or_default();
        assert_eq!(back.recompute_modules, l.recompute_modules);
        let plain = serde_json::to_value(selective(&[CoreAttn])).unwrap_or_default();
        assert!(plain.get("recompute_modules").is_none());
        assert_eq!(
            l.recompute_label(),
            "selective(layernorm,mla_up_proj,moe_act)"
        );
    }

    #[test]
    fn dense_mlp_module_keeps_only_the_mlp_input() {
        // GPT-3 175B, no TP: the MLP's GeLU input and output, 4·4h/h = 16 bytes, and its dropout
        // mask, 1 byte, per element (Korthikanti et al. 2022, Table 2: MLP 19·sbh, of which the
        // 2-byte input stays); the norms 4 more with `layernorm`.
        let Ok(m) = catalog_model("gpt3-175b") else {
            panic!("gpt3-175b missing from the catalog")
        };
        let sbh = 2048.0 * 12288.0;
        let at = |ms: &[RecomputeModule]| {
            layer_activation_bytes(&m, &selective(ms), 1.0, Recompute::Selective) / sbh
        };
        assert!((at(&[CoreAttn]) - at(&[CoreAttn, Mlp]) - 17.0).abs() < 1e-9);
        assert!((at(&[CoreAttn]) - at(&[CoreAttn, Layernorm, Mlp]) - 21.0).abs() < 1e-9);
    }

    #[test]
    fn recomputation_costs_the_forward_work_it_redoes() {
        let (m, hw, net) = catalog("h800", "deepseek-v3");
        let l = |ms: &[RecomputeModule]| Layout {
            pp: 16,
            dp: 128,
            ep: 64,
            batch: 15360,
            zero: 1,
            ..selective(ms)
        };
        let base = estimate(&m, &hw, &net, &l(&[CoreAttn]));
        let up = estimate(&m, &hw, &net, &l(&[CoreAttn, MlaUpProj]));
        // Executed FLOPs grow by the up-projections' forward: 61 layers × 2·(1,536·16,384 +
        // 512·2·16,384) per token, over 15,360 × 4,096 tokens.
        let want = 61.0 * 2.0 * (1536.0 * 16384.0 + 512.0 * 32768.0) * 15360.0 * 4096.0;
        let got = up.executed_flops.get() - base.executed_flops.get();
        assert!((got / want - 1.0).abs() < 1e-9, "{got} vs {want}");
        assert!(up.breakdown.compute.get() > base.breakdown.compute.get());
        assert_eq!(up.model_flops, base.model_flops);
        let norms = estimate(&m, &hw, &net, &l(&[CoreAttn, Layernorm, MoeAct]));
        assert!(norms.breakdown.memory_bound.get() > base.breakdown.memory_bound.get());
        assert!(norms.memory.activations.get() < base.memory.activations.get());
    }

    #[test]
    fn modules_the_model_lacks_or_without_selective_are_refused() {
        let (llama, hw, net) = catalog("h100", "llama3-8b");
        let err = |m, l: &Layout| validate(m, &hw, &net, l, None).err().map(|e| e.to_string());
        let e = err(&llama, &selective(&[MlaUpProj])).unwrap_or_default();
        assert!(
            e.contains("mla_up_proj") && e.contains("latent attention"),
            "{e}"
        );
        let e = err(&llama, &selective(&[MoeAct])).unwrap_or_default();
        assert!(e.contains("moe_act") && e.contains("routed experts"), "{e}");
        let full = Layout {
            recompute: Recompute::Full,
            ..selective(&[Layernorm])
        };
        assert!(matches!(
            validate(&llama, &hw, &net, &full, None),
            Err(PlanError::RecomputeModulesNeedSelective { recompute: "full" })
        ));
        assert!(validate(&llama, &hw, &net, &selective(&[Layernorm, Mlp]), None).is_ok());
    }
}

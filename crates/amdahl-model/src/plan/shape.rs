//! The planner's view of a catalogued model: [`ModelShape::from_catalog`] and [`catalog_model`].
//! The shape itself is plain data (plan/spec.rs), its counts are plan/counts.rs.

pub use super::counts::LayerGemms;
use super::error::PlanError;
pub use super::spec::ModelShape;
use super::spec::Moe;
use crate::catalog::models as catalog;

impl ModelShape {
    /// The planner's view of a catalogued model (`data/models.csv`): a decoder-only
    /// transformer. `kv_heads` defaults to `heads`; a `swiglu`/`geglu` MLP is gated; an empty
    /// `tied_embeddings` is tied; `experts` makes it a mixture of experts (with `top_k` and
    /// `expert_ffn`; `moe_layers` defaults to every layer, `shared_experts` to 0,
    /// `capacity_factor` to 1). Encoders, encoder–decoders, CNNs and shapes with missing
    /// dimensions are refused with the reason.
    pub fn from_catalog(m: &catalog::ModelShape) -> Result<Self, PlanError> {
        let refuse = |reason: String| PlanError::ModelShape {
            model: m.name.clone(),
            reason,
        };
        if m.arch != "decoder" {
            return Err(refuse(format!(
                "the planner models decoder-only transformers, this is `{}`",
                if m.arch.is_empty() {
                    "unknown"
                } else {
                    &m.arch
                }
            )));
        }
        let need = |v: Option<u32>, what: &str| {
            v.ok_or_else(|| refuse(format!("the catalog gives no {what}")))
        };
        let layers = need(m.layers, "layers")?;
        let hidden = need(m.hidden, "hidden size")?;
        let heads = need(m.heads, "attention heads")?;
        let ffn = need(m.ffn, "ffn width")?;
        let vocab = need(m.vocab, "vocabulary")?;
        let seq = need(m.seq, "sequence length")?;
        let moe = match m.experts {
            None => None,
            Some(experts) => Some(Moe {
                experts,
                top_k: need(m.top_k, "top_k (experts per token)")?,
                shared_experts: m.shared_experts.unwrap_or(0),
                expert_ffn: need(m.expert_ffn, "expert_ffn (expert MLP width)")?,
                moe_layers: m.moe_layers.unwrap_or(layers),
                capacity_factor: m.capacity_factor.unwrap_or(1.0),
            }),
        };
        // A head width equal to hidden / heads is the default; keep only a different one.
        let head_dim = m
            .head_dim
            .filter(|&d| u64::from(d) * u64::from(heads) != u64::from(hidden));
        Ok(ModelShape {
            name: m.name.clone(),
            layers,
            hidden,
            heads,
            kv_heads: m.kv_heads.unwrap_or(heads),
            ffn,
            vocab,
            seq,
            context: m.context.filter(|&c| c > seq),
            gated_mlp: m.gated_mlp(),
            head_dim,
            q_lora_rank: m.q_lora_rank,
            kv_lora_rank: m.kv_lora_rank,
            parallel_block: m.parallel_block,
            tied_embeddings: m.tied_embeddings.unwrap_or(true),
            moe,
        })
    }
}

/// A model of the embedded catalog as the planner sees it (see [`ModelShape::from_catalog`]).
pub fn catalog_model(name: &str) -> Result<ModelShape, PlanError> {
    ModelShape::from_catalog(catalog::lookup(name)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::too_many_arguments)]
    fn shape(
        name: &str,
        layers: u32,
        hidden: u32,
        heads: u32,
        kv_heads: u32,
        ffn: u32,
        vocab: u32,
        seq: u32,
        gated_mlp: bool,
    ) -> ModelShape {
        ModelShape {
            name: name.into(),
            layers,
            hidden,
            heads,
            kv_heads,
            ffn,
            vocab,
            seq,
            gated_mlp,
            ..ModelShape::default()
        }
    }

    #[test]
    fn gpt3_has_175b_parameters() {
        // Brown et al. 2020 report 175.0B; our count (weights + tied embedding) within 1 %.
        let p = catalog_model("gpt3-175b")
            .map(|m| m.params())
            .unwrap_or(0.0);
        assert!((p / 175.0e9 - 1.0).abs() < 0.01, "{p}");
    }

    #[test]
    fn llama2_70b_has_69b_parameters() {
        // Meta's released checkpoint has 68.98B parameters, its output layer untied, which the
        // planner counts as a second V × h matrix: 0.1 % (norm weights it counts as LayerNorm γ
        // and β).
        let m = catalog_model("llama2-70b").unwrap();
        assert!(m.gated_mlp && m.kv_heads == 8 && !m.tied_embeddings);
        let p = m.params();
        assert!((p / 68.98e9 - 1.0).abs() < 0.002, "{p}");
    }

    #[test]
    fn llama3_8b_matches_the_catalog_within_half_a_percent() {
        // Regression: with one embedding matrix the planner had 7.50B against the catalog's 8.03B
        // (Llama Team 2024, Table 3), 6.5 % low. Untied (input embedding + output layer, each
        // 128,256 × 4,096 = 0.525B): 8.03B. Tolerance 0.5 %.
        let m = catalog_model("llama3-8b").unwrap();
        let published = match crate::catalog::models::lookup("llama3-8b") {
            Ok(c) => c.params,
            Err(e) => panic!("{e}"),
        };
        let p = m.params();
        assert!(
            (p / published - 1.0).abs() < 0.005,
            "{p:e} vs {published:e}"
        );
        // A tied Llama-3-8B would be one 128,256 × 4,096 matrix lighter.
        let tied = ModelShape {
            tied_embeddings: true,
            ..m.clone()
        };
        assert_eq!(p - tied.params(), 128256.0 * 4096.0);
        // Model FLOPs do not change: the output layer was always computed (logit GEMM).
        assert_eq!(m.model_flops(8.0), tied.model_flops(8.0));
    }

    #[test]
    fn a_server_takes_the_checkpoints_context_and_training_keeps_its_sequence() {
        // Llama 3.1 / 3.3 (the Llama-3 rows' aliases): 131,072 tokens served, 8,192 trained
        // (Llama Team 2024 §3.4.2); Llama 2 serves what it trained on, 4,096.
        let llama31 = catalog_model("llama-3.3-70b").unwrap();
        assert_eq!((llama31.seq, llama31.serving_context()), (8192, 131_072));
        let llama2 = catalog_model("llama2-70b").unwrap();
        assert_eq!((llama2.context, llama2.serving_context()), (None, 4096));
        // A context shorter than the training sequence cannot be: the sequence wins.
        let odd = ModelShape {
            context: Some(1024),
            ..llama2
        };
        assert_eq!(odd.serving_context(), 4096);
    }

    #[test]
    fn palm_head_width_256_counts_its_540b_parameters() {
        // Chowdhery et al. 2022, Table 1: 540.35B; 48 heads of width 256 (12,288 ≠ hidden
        // 18,432), multi-query attention, parallel blocks, shared input–output embedding.
        // Within 1 % (the shape has no biases; PaLM has none either, but we count LayerNorm β).
        let m = catalog_model("palm").unwrap();
        assert!(m.parallel_block && m.tied_embeddings);
        assert_eq!(m.q_width(), 48.0 * 256.0);
        assert_eq!(m.kv_width(), 256.0);
        let p = m.params();
        assert!((p / 540.35e9 - 1.0).abs() < 0.01, "{p:e}");
        // Scores and context use the query width, not hidden.
        let g = m.layer_gemms(1.0);
        assert_eq!(g[1], 2.0 * 2048.0 * 2048.0 * 12288.0);
    }

    #[test]
    fn model_flops_match_megatron_72_form() {
        // 3 × forward must equal 72·B·s·l·h²·(1 + s/(6h) + V/(12lh)) exactly for ffn = 4h.
        let m = shape("x", 24, 2304, 24, 24, 9216, 51200, 2048, false);
        let (b, s, l, h, v) = (8.0, 2048.0, 24.0, 2304.0, 51200.0);
        let expect = 72.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h));
        assert!((m.model_flops(b) / expect - 1.0).abs() < 1e-12);
    }

    #[test]
    fn catalog_shapes_the_planner_cannot_model_are_refused() {
        for (name, why) in [("t5-11b", "encoder-decoder"), ("resnet50", "cnn")] {
            let e = catalog_model(name).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("--model-file"), "{e}");
        }
        let e = catalog_model("gpt4").unwrap_err().to_string();
        assert!(e.contains("unknown model"), "{e}");
    }
}

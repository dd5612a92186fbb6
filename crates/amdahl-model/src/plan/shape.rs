//! Shape of a dense decoder-only transformer and its FLOP and parameter counts.

use super::error::PlanError;
use crate::catalog::models as catalog;
use serde::{Deserialize, Serialize};

/// A dense transformer. `kv_heads < heads` is grouped-query attention; `gated_mlp` is a SwiGLU
/// MLP (three `h × ffn` matrices instead of two).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ModelShape {
    pub name: String,
    pub layers: u32,
    pub hidden: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub ffn: u32,
    pub vocab: u32,
    pub seq: u32,
    pub gated_mlp: bool,
}

/// Forward FLOPs of the GEMMs of one layer for `b` sequences, before any parallel split:
/// `[qkv, scores (QKᵀ), context (softmax·V), out-projection, mlp]`. A multiply–add is 2 FLOPs.
/// Source: Narayanan et al. 2021 (SC21) §5.1 / Appendix, generalised to GQA (K and V have
/// `kv_heads/heads` of Q's width) and to gated MLPs.
pub type LayerGemms = [f64; 5];

impl ModelShape {
    /// Width of the K and V projections relative to Q: kv_heads / heads.
    pub fn kv_ratio(&self) -> f64 {
        f64::from(self.kv_heads) / f64::from(self.heads)
    }

    /// Number of `h × ffn` matrices in the MLP.
    pub fn mlp_matrices(&self) -> f64 {
        if self.gated_mlp {
            3.0
        } else {
            2.0
        }
    }

    /// Weights of one transformer layer (QKV, projection, MLP, two LayerNorms' γ and β).
    pub fn layer_params(&self) -> f64 {
        let h = f64::from(self.hidden);
        let f = f64::from(self.ffn);
        h * h * (1.0 + 2.0 * self.kv_ratio()) + h * h + self.mlp_matrices() * h * f + 4.0 * h
    }

    /// Token-embedding weights (tied with the output layer, as in GPT-2/3 and Megatron).
    pub fn embedding_params(&self) -> f64 {
        f64::from(self.vocab) * f64::from(self.hidden)
    }

    /// All weights.
    pub fn params(&self) -> f64 {
        f64::from(self.layers) * self.layer_params() + self.embedding_params()
    }

    /// Forward GEMM FLOPs of one layer for `b` sequences (see [`LayerGemms`]).
    pub fn layer_gemms(&self, b: f64) -> LayerGemms {
        let (s, h, f) = (
            f64::from(self.seq),
            f64::from(self.hidden),
            f64::from(self.ffn),
        );
        let tokens = b * s;
        [
            2.0 * tokens * h * h * (1.0 + 2.0 * self.kv_ratio()),
            2.0 * tokens * s * h,
            2.0 * tokens * s * h,
            2.0 * tokens * h * h,
            2.0 * tokens * h * f * self.mlp_matrices(),
        ]
    }

    /// Forward FLOPs of the output layer (logits) for `b` sequences.
    pub fn logit_flops(&self, b: f64) -> f64 {
        2.0 * b * f64::from(self.seq) * f64::from(self.hidden) * f64::from(self.vocab)
    }

    /// Model FLOPs of one training iteration on `batch` sequences: forward + backward (2× the
    /// forward), no recomputation. For a GPT shape this is Megatron's 72·B·s·l·h²·(1 + s/(6h) +
    /// V/(12·l·h)) (Narayanan et al. 2021, eq. 3 without the recomputation pass).
    pub fn model_flops(&self, batch: f64) -> f64 {
        let layer: f64 = self.layer_gemms(batch).iter().sum();
        3.0 * (f64::from(self.layers) * layer + self.logit_flops(batch))
    }

    /// Megatron's closed form with full recomputation, F = 96·B·s·l·h²·(1 + s/(6h) +
    /// V/(16·l·h)) (Narayanan et al. 2021, SC21, eq. 3). Used to turn published iteration
    /// times into TFLOP/s exactly as the papers did; assumes ffn = 4h and no GQA.
    pub fn megatron_flops(&self, batch: f64) -> f64 {
        let (s, l, h, v) = (
            f64::from(self.seq),
            f64::from(self.layers),
            f64::from(self.hidden),
            f64::from(self.vocab),
        );
        96.0 * batch * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h))
    }
}

impl ModelShape {
    /// The planner's view of a catalogued model (`data/models.csv`): a dense decoder-only
    /// transformer whose per-head width is hidden / heads. `kv_heads` defaults to `heads`; a
    /// `swiglu`/`geglu` MLP is gated. Encoders, encoder–decoders, CNNs, shapes with missing
    /// dimensions and shapes with a separate `head_dim` (PaLM, T5) are refused with the reason.
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
        if let Some(d) = m.head_dim {
            if u64::from(d) * u64::from(heads) != u64::from(hidden) {
                return Err(refuse(format!(
                    "its head width {d} × {heads} heads ≠ hidden {hidden}, and the planner assumes \
                     head width = hidden / heads"
                )));
            }
        }
        Ok(ModelShape {
            name: m.name.clone(),
            layers,
            hidden,
            heads,
            kv_heads: m.kv_heads.unwrap_or(heads),
            ffn,
            vocab,
            seq,
            gated_mlp: m.gated_mlp(),
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
        // Meta's released checkpoint has 68.98B parameters; untied output layer adds 0.26B
        // we do not count (tied embedding assumption), so allow 1 %.
        let m = catalog_model("llama2-70b").unwrap();
        assert!(m.gated_mlp && m.kv_heads == 8);
        let p = m.params();
        assert!((p / 68.98e9 - 1.0).abs() < 0.01, "{p}");
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
        for (name, why) in [
            ("palm", "head width 256"),
            ("t5-11b", "encoder-decoder"),
            ("resnet50", "cnn"),
        ] {
            let e = catalog_model(name).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("--model-file"), "{e}");
        }
        let e = catalog_model("gpt4").unwrap_err().to_string();
        assert!(e.contains("unknown model"), "{e}");
    }
}

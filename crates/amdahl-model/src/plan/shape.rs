//! Shape of a dense decoder-only transformer and its FLOP and parameter counts.

use serde::{Deserialize, Serialize};

/// A dense transformer. `kv_heads < heads` is grouped-query attention; `gated_mlp` is a SwiGLU
/// MLP (three `h × ffn` matrices instead of two).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// A built-in model shape with its source.
#[derive(Debug, Clone)]
pub struct BuiltinModel {
    pub shape: ModelShape,
    pub source: &'static str,
}

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

/// The SC21 Table 1 shapes: (name, heads, hidden, layers). Narayanan et al., "Efficient
/// Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC21, Table 1;
/// vocabulary 51,200 and sequence 2,048 for all (§5.1); ffn = 4h.
pub const SC21_SHAPES: [(&str, u32, u32, u32); 10] = [
    ("megatron-1.7b", 24, 2304, 24),
    ("megatron-3.6b", 32, 3072, 30),
    ("megatron-7.5b", 32, 4096, 36),
    ("megatron-18b", 48, 6144, 40),
    ("megatron-39b", 64, 8192, 48),
    ("megatron-76b", 80, 10240, 60),
    ("megatron-145b", 96, 12288, 80),
    ("megatron-310b", 128, 16384, 96),
    ("megatron-530b", 128, 20480, 105),
    ("megatron-1t", 160, 25600, 128),
];

/// Built-in models, until the shared catalog lands.
pub fn builtin_models() -> Vec<BuiltinModel> {
    let mut v = vec![
        // Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1 (96 layers,
        // d_model 12288, 96 heads, context 2048); GPT-2 BPE vocabulary of 50,257.
        BuiltinModel {
            shape: shape("gpt3-175b", 96, 12288, 96, 96, 49152, 50257, 2048, false),
            source: "Brown et al. 2020, Table 2.1",
        },
        // Smith et al. 2022, "Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B",
        // §3: 105 layers, hidden 20480, 128 heads, sequence 2048; vocabulary 51,200 (§3.2).
        BuiltinModel {
            shape: shape(
                "mt-nlg-530b",
                105,
                20480,
                128,
                128,
                81920,
                51200,
                2048,
                false,
            ),
            source: "Smith et al. 2022, MT-NLG 530B, §3",
        },
        // Touvron et al. 2023, "Llama 2", Table 1 and the released configs: SwiGLU MLP,
        // vocabulary 32,000, context 4,096; 70B uses GQA with 8 KV heads.
        BuiltinModel {
            shape: shape("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, true),
            source: "Touvron et al. 2023, Llama 2, Table 1; released config.json",
        },
        BuiltinModel {
            shape: shape("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, true),
            source: "Touvron et al. 2023, Llama 2, Table 1; released config.json",
        },
    ];
    for (name, heads, hidden, layers) in SC21_SHAPES {
        v.push(BuiltinModel {
            shape: shape(
                name,
                layers,
                hidden,
                heads,
                heads,
                4 * hidden,
                51200,
                2048,
                false,
            ),
            source: "Narayanan et al. 2021 (SC21), Table 1",
        });
    }
    v
}

/// Look a built-in model up by name (case-insensitive).
pub fn builtin_model(name: &str) -> Option<BuiltinModel> {
    let key = name.to_ascii_lowercase();
    builtin_models().into_iter().find(|m| m.shape.name == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt3_has_175b_parameters() {
        // Brown et al. 2020 report 175.0B; our count (weights + tied embedding) within 1 %.
        let m = builtin_model("gpt3-175b").map(|m| m.shape);
        let p = m.map(|m| m.params()).unwrap_or(0.0);
        assert!((p / 175.0e9 - 1.0).abs() < 0.01, "{p}");
    }

    #[test]
    fn llama2_70b_has_69b_parameters() {
        // Meta's released checkpoint has 68.98B parameters; untied output layer adds 0.26B
        // we do not count (tied embedding assumption), so allow 1 %.
        let p = builtin_model("llama2-70b")
            .map(|m| m.shape.params())
            .unwrap_or(0.0);
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
}

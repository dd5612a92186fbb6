//! Parameter, FLOP and byte counts of a model shape: weights per layer and in all, the GEMMs of
//! one layer, model FLOPs of an iteration, and the mixture-of-experts means over dense and MoE
//! layers (docs/methodology.md, "Mixture of experts"). Functions of [`ModelShape`] alone; every
//! later link of the planner's chain (plan/mod.rs) builds on them.

use super::spec::{ModelShape, Moe};

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

    /// Per-head width: `head_dim`, else hidden / heads.
    pub fn head_width(&self) -> f64 {
        match self.head_dim {
            Some(d) => f64::from(d),
            None => f64::from(self.hidden) / f64::from(self.heads.max(1)),
        }
    }

    /// Width of the queries (and of the attention output): heads × head width.
    pub fn q_width(&self) -> f64 {
        f64::from(self.heads) * self.head_width()
    }

    /// Width of the keys (= of the values): kv_heads × head width.
    pub fn kv_width(&self) -> f64 {
        f64::from(self.kv_heads) * self.head_width()
    }

    /// Weights of the Q, K, V projections: full, or MLA's down- and up-projections.
    fn qkv_params(&self) -> f64 {
        let h = f64::from(self.hidden);
        let q = match self.q_lora_rank {
            Some(r) => f64::from(r) * (h + self.q_width()),
            None => h * self.q_width(),
        };
        let kv = match self.kv_lora_rank {
            Some(r) => f64::from(r) * (h + 2.0 * self.kv_width()),
            None => 2.0 * h * self.kv_width(),
        };
        q + kv
    }

    /// Weights of the attention block: Q, K, V and the output projection.
    pub fn attention_params(&self) -> f64 {
        self.qkv_params() + self.q_width() * f64::from(self.hidden)
    }

    /// Weights of one transformer layer (attention, MLP, two LayerNorms' γ and β); for an MoE
    /// model the mean over its dense and MoE layers, counting every expert.
    pub fn layer_params(&self) -> f64 {
        self.attention_params() + mean_mlp_params(self, false) + 4.0 * f64::from(self.hidden)
    }

    /// The layer's weight matrices in the order the forward pass uses them: the fused QKV
    /// projection, the attention output, the MLP's input (gate and up when gated) and output
    /// matrices (MoE: the mean over layers, every expert counted). They sum to the layer's
    /// weights less its LayerNorms.
    pub fn layer_matrices(&self) -> [f64; 4] {
        let mlp = mean_mlp_params(self, false);
        let mlp_in = if self.gated_mlp { 2.0 / 3.0 } else { 0.5 } * mlp;
        [
            self.qkv_params(),
            self.q_width() * f64::from(self.hidden),
            mlp_in,
            mlp - mlp_in,
        ]
    }

    /// Weights one token uses in one layer (mean over layers): only its experts.
    pub fn active_layer_params(&self) -> f64 {
        self.attention_params() + mean_mlp_params(self, true) + 4.0 * f64::from(self.hidden)
    }

    /// Weights of one V × h embedding matrix (the input embedding, and the output layer when
    /// it is a separate matrix).
    pub fn embedding_params(&self) -> f64 {
        f64::from(self.vocab) * f64::from(self.hidden)
    }

    /// V × h matrices the model has: 1 when the output layer is tied to the embedding, 2 when
    /// untied (Llama; the planner once counted one for every model, one too few for Llama).
    pub fn embedding_matrices(&self) -> f64 {
        if self.tied_embeddings {
            1.0
        } else {
            2.0
        }
    }

    /// Embedding weights on the first pipeline stage: the input embedding, and with `pp = 1`
    /// also an untied output layer (with pp > 1 it lives on the last stage; a tied one is the
    /// same matrix, copied to the last stage).
    pub fn first_stage_embedding_params(&self, pp: u32) -> f64 {
        if pp <= 1 {
            self.embedding_matrices() * self.embedding_params()
        } else {
            self.embedding_params()
        }
    }

    /// All weights.
    pub fn params(&self) -> f64 {
        f64::from(self.layers) * self.layer_params()
            + self.embedding_matrices() * self.embedding_params()
    }

    /// Weights one token uses: all but the experts it is not routed to. Equals [`Self::params`]
    /// for a dense model.
    pub fn active_params(&self) -> f64 {
        f64::from(self.layers) * self.active_layer_params()
            + self.embedding_matrices() * self.embedding_params()
    }

    /// Forward GEMM FLOPs of one layer for `b` sequences (see [`LayerGemms`]); for an MoE model
    /// the mean over layers of the experts each token uses, plus the router.
    pub fn layer_gemms(&self, b: f64) -> LayerGemms {
        let (s, h) = (f64::from(self.seq), f64::from(self.hidden));
        let tokens = b * s;
        let qw = self.q_width();
        [
            2.0 * tokens * self.qkv_params(),
            2.0 * tokens * s * qw,
            2.0 * tokens * s * qw,
            2.0 * tokens * qw * h,
            mean_mlp_flops(self, tokens),
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

    /// Model FLOPs of one LoRA fine-tuning iteration: the backward of the frozen dense GEMMs and
    /// of the output layer is their data gradient alone (1× the forward); core attention, which
    /// has no weights, keeps its 2× backward (adapters not counted).
    pub fn lora_model_flops(&self, batch: f64) -> f64 {
        let g = self.layer_gemms(batch);
        let dense = g[0] + g[3] + g[4];
        let attention = g[1] + g[2];
        f64::from(self.layers) * (2.0 * dense + 3.0 * attention) + 2.0 * self.logit_flops(batch)
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

/// Fraction of the layers that are MoE layers (0 for a dense model).
pub fn moe_fraction(m: &ModelShape) -> f64 {
    match &m.moe {
        Some(e) if m.layers > 0 => f64::from(e.moe_layers.min(m.layers)) / f64::from(m.layers),
        _ => 0.0,
    }
}

/// Weights of one MLP of inner width `ffn`.
pub(crate) fn mlp_params(m: &ModelShape, ffn: f64) -> f64 {
    m.mlp_matrices() * f64::from(m.hidden) * ffn
}

/// Router weights of one MoE layer (h × experts), none for a single expert.
pub(crate) fn router_params(m: &ModelShape, e: &Moe) -> f64 {
    if e.routes() {
        f64::from(m.hidden) * f64::from(e.experts)
    } else {
        0.0
    }
}

/// MLP weights of one layer, the mean over dense and MoE layers: all experts (`active =
/// false`) or only those one token uses (`active = true`).
pub fn mean_mlp_params(m: &ModelShape, active: bool) -> f64 {
    let dense = mlp_params(m, f64::from(m.ffn));
    let Some(e) = &m.moe else {
        return dense;
    };
    let used = if active { e.top_k } else { e.experts };
    let moe = mlp_params(m, f64::from(e.expert_ffn)) * f64::from(used + e.shared_experts)
        + router_params(m, e);
    let phi = moe_fraction(m);
    phi * moe + (1.0 - phi) * dense
}

/// Weights of the routed experts in one layer (mean over layers): the part expert parallelism
/// divides. Shared experts and the router are replicated like the dense weights.
pub fn mean_routed_params(m: &ModelShape) -> f64 {
    match &m.moe {
        Some(e) if e.routes() => {
            moe_fraction(m) * mlp_params(m, f64::from(e.expert_ffn)) * f64::from(e.experts)
        }
        _ => 0.0,
    }
}

/// Forward model FLOPs of one layer's MLP for `tokens` tokens (mean over layers): only the
/// experts each token uses, plus the router.
pub fn mean_mlp_flops(m: &ModelShape, tokens: f64) -> f64 {
    2.0 * tokens * mean_mlp_params(m, true)
}

/// Forward FLOPs the capacity factor adds over the model FLOPs, all layers, for `tokens`
/// tokens: the padded expert slots, (capacity_factor − 1) × top_k per token.
pub fn padding_flops(m: &ModelShape, tokens: f64) -> f64 {
    match &m.moe {
        Some(e) if e.routes() => {
            f64::from(m.layers)
                * moe_fraction(m)
                * 2.0
                * tokens
                * (e.capacity_factor - 1.0)
                * f64::from(e.top_k)
                * mlp_params(m, f64::from(e.expert_ffn))
        }
        _ => 0.0,
    }
}

/// Mean MLP inner width per token that element-wise work and activations see: `ffn` for a
/// dense layer, (top_k × capacity_factor + shared) × expert_ffn for an MoE layer.
pub fn mean_mlp_width(m: &ModelShape) -> f64 {
    let dense = f64::from(m.ffn);
    let Some(e) = &m.moe else {
        return dense;
    };
    let slots = if e.routes() {
        f64::from(e.top_k) * e.capacity_factor
    } else {
        f64::from(e.top_k)
    };
    let moe = f64::from(e.expert_ffn) * (slots + f64::from(e.shared_experts));
    let phi = moe_fraction(m);
    phi * moe + (1.0 - phi) * dense
}

/// Inner MLP width per token of the routed experts alone (mean over layers): top_k × capacity
/// factor × expert_ffn in the MoE share of the layers; 0 for dense and single-expert models.
pub fn mean_routed_width(m: &ModelShape) -> f64 {
    match &m.moe {
        Some(e) if e.routes() => f64::from(e.expert_ffn) * mean_dispatched_copies(m),
        _ => 0.0,
    }
}

/// Copies of each token's hidden vector an MoE layer dispatches (mean over layers): top_k ×
/// capacity_factor for a routed layer, 0 for dense layers and single-expert layers.
pub fn mean_dispatched_copies(m: &ModelShape) -> f64 {
    match &m.moe {
        Some(e) if e.routes() => moe_fraction(m) * f64::from(e.top_k) * e.capacity_factor,
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lora_drops_the_weight_gradients_of_the_dense_gemms() {
        // Full training is 3 forwards of every GEMM, LoRA 2 for the dense ones and the output
        // layer (forward and data gradient); core attention keeps its 2× backward, so LoRA's
        // model FLOPs are a little above 2/3 of full training's.
        let m = crate::plan::catalog_model("gpt3-175b").unwrap();
        let ratio = m.lora_model_flops(1.0) / m.model_flops(1.0);
        assert!(ratio > 2.0 / 3.0 && ratio < 0.7, "{ratio}");
    }
}

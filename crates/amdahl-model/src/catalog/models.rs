//! Model shapes: transformer dimensions (layers, hidden, heads, kv-heads, ffn, vocab, seq) and
//! parameter counts; non-transformers as parameters and forward FLOPs per sample.

use super::{normalise, suggest, table, CatalogError};
use crate::units::Flops;
use serde::Serialize;
use std::sync::OnceLock;

const FILE: &str = "data/models.csv";
const TEXT: &str = include_str!("../../../../data/models.csv");

/// One catalogued model.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ModelShape {
    pub name: String,
    pub aliases: Vec<String>,
    /// `decoder`, `encoder`, `encoder-decoder`, `cnn`, ...
    pub arch: String,
    pub layers: Option<u32>,
    pub hidden: Option<u32>,
    pub heads: Option<u32>,
    pub kv_heads: Option<u32>,
    /// Per-head width where it differs from hidden / heads (PaLM: 256, T5: 128).
    pub head_dim: Option<u32>,
    pub ffn: Option<u32>,
    pub vocab: Option<u32>,
    pub seq: Option<u32>,
    /// Longest sequence the released checkpoint serves, where it exceeds `seq` (its
    /// `max_position_embeddings`); None = `seq`.
    pub context: Option<u32>,
    /// Parameter count as published.
    pub params: f64,
    /// Forward FLOPs for one sample (non-transformers).
    pub fwd_flops_per_sample: Option<Flops>,
    pub year: u16,
    pub source: String,
    /// Feed-forward activation: `swiglu`/`geglu` (gated: three `ffn × hidden` matrices), `gelu`,
    /// `relu`; empty for non-transformers.
    pub mlp: String,
    /// Output layer shares the embedding's weights; None = not stated (the planner assumes tied).
    pub tied_embeddings: Option<bool>,
    /// Attention and MLP in parallel from one LayerNorm (GPT-J, GPT-NeoX, PaLM).
    pub parallel_block: bool,
    /// Mixture of experts: routed experts per MoE layer.
    pub experts: Option<u32>,
    /// Routed experts per token.
    pub top_k: Option<u32>,
    /// Experts every token uses (DeepSeekMoE).
    pub shared_experts: Option<u32>,
    /// Inner width of one expert MLP.
    pub expert_ffn: Option<u32>,
    /// Layers that are MoE layers (default: all).
    pub moe_layers: Option<u32>,
    /// Expert capacity factor (default 1: dropless, even load).
    pub capacity_factor: Option<f64>,
    /// Multi-head latent attention (DeepSeek-V2/V3): query and key–value compression ranks.
    pub q_lora_rank: Option<u32>,
    pub kv_lora_rank: Option<u32>,
}

impl ModelShape {
    /// Per-head width: the explicit `head_dim`, else hidden / heads.
    pub fn head_dim(&self) -> Option<u32> {
        self.head_dim.or_else(|| Some(self.hidden? / self.heads?))
    }

    /// A gated MLP (SwiGLU, GeGLU): three `ffn × hidden` matrices instead of two.
    pub fn gated_mlp(&self) -> bool {
        self.mlp.to_ascii_lowercase().ends_with("glu")
    }

    /// Training FLOPs for `tokens` tokens: 6·P·D (Kaplan et al. 2020, Section 2.1: 2 FLOPs per
    /// parameter per token forward, 4 backward).
    pub fn training_flops(&self, tokens: f64) -> Flops {
        crate::flops::training_flops(self.params, tokens)
    }
}

/// The model catalog.
#[derive(Debug, Clone, Default)]
pub struct Models {
    items: Vec<ModelShape>,
}

impl Models {
    /// Parse a models CSV (the format of `data/models.csv`).
    pub fn parse(text: &str, file: &str) -> Result<Self, CatalogError> {
        let items = table::parse(text, file, &["name", "params", "year", "source"], |r| {
            let shape = ModelShape {
                name: r.text("name")?,
                aliases: r.list("aliases"),
                arch: r.cell("arch").to_string(),
                layers: r.opt_count("layers")?,
                hidden: r.opt_count("hidden")?,
                heads: r.opt_count("heads")?,
                kv_heads: r.opt_count("kv_heads")?,
                head_dim: r.opt_count("head_dim")?,
                ffn: r.opt_count("ffn")?,
                vocab: r.opt_count("vocab")?,
                seq: r.opt_count("seq")?,
                context: r.opt_count("context")?,
                params: r.positive("params")?,
                fwd_flops_per_sample: r.opt_positive("fwd_flops_per_sample")?.map(Flops),
                year: r.year("year")?,
                source: r.text("source")?,
                mlp: r.cell("mlp").to_string(),
                tied_embeddings: r.opt_bool("tied_embeddings")?,
                parallel_block: r.opt_bool("parallel_block")?.unwrap_or(false),
                experts: r.opt_count("experts")?,
                top_k: r.opt_count("top_k")?,
                shared_experts: r.opt_count("shared_experts")?,
                expert_ffn: r.opt_count("expert_ffn")?,
                moe_layers: r.opt_count("moe_layers")?,
                capacity_factor: r.opt_positive("capacity_factor")?,
                q_lora_rank: r.opt_count("q_lora_rank")?,
                kv_lora_rank: r.opt_count("kv_lora_rank")?,
            };
            if let (Some(e), Some(k)) = (shape.experts, shape.top_k) {
                if k > e {
                    return Err(r.err("top_k", format!("{k} is more than the {e} experts")));
                }
            }
            if let (Some(h), Some(kv)) = (shape.heads, shape.kv_heads) {
                if kv > h || h % kv != 0 {
                    return Err(r.err("kv_heads", format!("{kv} does not divide heads = {h}")));
                }
            }
            Ok(shape)
        })?;
        Ok(Self { items })
    }

    /// Find a model by name or alias, ignoring case and punctuation.
    pub fn lookup(&self, name: &str) -> Result<&ModelShape, CatalogError> {
        let key = normalise(name);
        self.items
            .iter()
            .find(|m| normalise(&m.name) == key || m.aliases.iter().any(|a| normalise(a) == key))
            .ok_or_else(|| CatalogError::Unknown {
                kind: "model",
                name: name.into(),
                suggestions: suggest::nearest(
                    name,
                    self.items
                        .iter()
                        .flat_map(|m| std::iter::once(&m.name).chain(&m.aliases))
                        .map(String::as_str),
                ),
            })
    }

    pub fn iter(&self) -> impl Iterator<Item = &ModelShape> {
        self.items.iter()
    }

    pub fn merge(&mut self, user: Models) {
        table::merge_by(&mut self.items, user.items, |m| normalise(&m.name));
    }
}

/// The embedded catalog, parsed on first use.
pub fn embedded() -> Result<&'static Models, CatalogError> {
    static CELL: OnceLock<Result<Models, CatalogError>> = OnceLock::new();
    CELL.get_or_init(|| Models::parse(TEXT, FILE))
        .as_ref()
        .map_err(Clone::clone)
}

/// Look a model up in the embedded catalog.
pub fn lookup(name: &str) -> Result<&'static ModelShape, CatalogError> {
    embedded()?.lookup(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decoder parameter count from the shape: 12·l·h² (attention 4h² + MLP 8h² with ffn = 4h) plus
    /// the embedding V·h (Kaplan et al. 2020 Table 1, which leaves out biases and layer norms).
    /// MoE layers count every expert; MLA (q/kv_lora_rank) counts its low-rank projections.
    fn approx_params(m: &ModelShape) -> Option<f64> {
        let (l, h, v, f) = (
            m.layers? as f64,
            m.hidden? as f64,
            m.vocab? as f64,
            m.ffn? as f64,
        );
        let d = m.head_dim()? as f64;
        let (qw, kvw) = (d * m.heads? as f64, d * m.kv_heads? as f64);
        // Attention: Q and O are h×(heads·d), K and V h×(kv_heads·d) (grouped/multi-query),
        // or MLA's down- and up-projections.
        let q = m.q_lora_rank.map_or(h * qw, |r| r as f64 * (h + qw));
        let kv = m
            .kv_lora_rank
            .map_or(2.0 * h * kvw, |r| r as f64 * (h + 2.0 * kvw));
        let attn = q + kv + qw * h;
        // Gated MLPs (SwiGLU) have three ffn×h matrices, others two; untied models (the
        // `tied_embeddings` column) have separate input and output embeddings.
        let mats = if m.gated_mlp() { 3.0 } else { 2.0 };
        let emb = if m.tied_embeddings == Some(false) {
            2.0
        } else {
            1.0
        };
        let mlp = match (m.experts, m.expert_ffn) {
            (Some(e), Some(fe)) => {
                let moe_l = m.moe_layers.unwrap_or(m.layers?) as f64;
                let experts = (e + m.shared_experts.unwrap_or(0)) as f64;
                moe_l * mats * h * fe as f64 * experts + (l - moe_l) * mats * h * f
            }
            _ => l * mats * h * f,
        };
        Some(l * attn + mlp + emb * v * h)
    }

    #[test]
    fn shapes_reproduce_published_parameter_counts() {
        // Within 6 %: biases, norms, position embeddings, untied output layers are left out.
        for m in embedded().unwrap().iter().filter(|m| m.arch == "decoder") {
            let p = approx_params(m).unwrap();
            let r = p / m.params;
            assert!(
                (0.94..1.10).contains(&r),
                "{}: shape gives {p:.3e}, published {:.3e}",
                m.name,
                m.params
            );
        }
    }

    #[test]
    fn llama_family_is_untied_and_gpt3_tied() {
        // Touvron et al. 2023 and Llama Team 2024 release separate embedding and output
        // matrices (HF configs: tie_word_embeddings false), except the small Llama 3.2 models,
        // which tie them (their config.json: true); GPT-3 ties them (Brown et al. 2020,
        // following GPT-2).
        for m in embedded().unwrap().iter() {
            if m.name.starts_with("LLaMA") || m.name.starts_with("Llama") {
                let tied = m.name.starts_with("Llama-3.2");
                assert_eq!(m.tied_embeddings, Some(tied), "{}", m.name);
            }
        }
        assert_ne!(lookup("gpt3").unwrap().tied_embeddings, Some(false));
    }

    #[test]
    fn gpt3_175b() {
        let m = lookup("gpt3").unwrap();
        assert_eq!(
            (m.layers, m.hidden, m.heads),
            (Some(96), Some(12288), Some(96))
        );
        // 6·P·D for 300e9 tokens = 3.15e23 FLOP (Brown et al. 2020 Table D.1: 3.14e23).
        assert!((m.training_flops(300e9).get() / 3.14e23 - 1.0).abs() < 0.01);
    }

    #[test]
    fn non_transformer_has_flops_per_sample() {
        let r = lookup("resnet50").unwrap();
        assert_eq!(r.fwd_flops_per_sample, Some(Flops(7.6e9)));
    }
}

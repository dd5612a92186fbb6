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
    /// Parameter count as published.
    pub params: f64,
    /// Forward FLOPs for one sample (non-transformers).
    pub fwd_flops_per_sample: Option<Flops>,
    pub year: u16,
    pub source: String,
    /// Feed-forward activation: `swiglu`/`geglu` (gated: three `ffn × hidden` matrices), `gelu`,
    /// `relu`; empty for non-transformers.
    pub mlp: String,
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
        crate::carbon::training_flops(self.params, tokens)
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
                params: r.positive("params")?,
                fwd_flops_per_sample: r.opt_positive("fwd_flops_per_sample")?.map(Flops),
                year: r.year("year")?,
                source: r.text("source")?,
                mlp: r.cell("mlp").to_string(),
            };
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
    fn approx_params(m: &ModelShape) -> Option<f64> {
        let (l, h, v, f) = (
            m.layers? as f64,
            m.hidden? as f64,
            m.vocab? as f64,
            m.ffn? as f64,
        );
        let d = m.head_dim()? as f64;
        // Attention: Q and O are h×(heads·d), K and V h×(kv_heads·d) (grouped/multi-query).
        let attn = 2.0 * h * d * (m.heads? as f64 + m.kv_heads? as f64);
        // Gated MLPs (SwiGLU) have three ffn×h matrices, others two; LLaMA-family models also
        // have untied input and output embeddings.
        let llama = m.name.starts_with("LLaMA") || m.name.starts_with("Llama");
        let mats = if m.gated_mlp() { 3.0 } else { 2.0 };
        let emb = if llama { 2.0 } else { 1.0 };
        Some(l * (attn + mats * h * f) + emb * v * h)
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

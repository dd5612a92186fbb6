//! Mixture-of-experts layers: routed experts with top-k routing and a capacity factor, shared
//! experts, expert parallelism and its all-to-all.
//!
//! An MoE layer replaces the MLP with `experts` expert MLPs of width `expert_ffn` and a router
//! (an `h × experts` GEMM); each token goes to `top_k` of them (Shazeer et al. 2017; Lepikhin et
//! al. 2021, GShard; Fedus et al. 2022, Switch) and, in DeepSeekMoE (Dai et al. 2024), also to
//! `shared_experts` experts every token uses. Expert parallelism (EP) places `experts / ep` whole
//! experts on each of `ep` data-parallel ranks; tokens travel to their experts and back by two
//! all-to-alls per layer forward (dispatch, combine) and two backward (Lepikhin et al. 2021 §2.2).
//!
//! Model FLOPs (MFU) count only the experts a token uses, as Mixtral (Jiang et al. 2024) and
//! DeepSeek-V3 (DeepSeek-AI 2024, §4.2 "activated parameters") report; executed FLOPs (HFU) add
//! the padding of the capacity factor. Formulas and approximations: docs/methodology.md
//! ("Mixture of experts").

use super::error::{divisors, nearest, nearest_divisors, PlanError};
use super::layout::Layout;
use super::shape::ModelShape;
use serde::{Deserialize, Serialize};

/// The mixture-of-experts part of a model shape.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Moe {
    /// Routed experts per MoE layer.
    pub experts: u32,
    /// Routed experts each token uses (top-k routing).
    pub top_k: u32,
    /// Experts every token uses besides the routed ones (DeepSeekMoE); 0 = none.
    #[serde(default)]
    pub shared_experts: u32,
    /// Inner width of one expert's MLP (the routed and the shared experts alike).
    pub expert_ffn: u32,
    /// How many of the layers are MoE layers; the others have the dense MLP of width `ffn`.
    /// The planner spreads them evenly over the pipeline stages (GLaM: every other layer;
    /// DeepSeek-V3: all but the first three; docs/methodology.md).
    pub moe_layers: u32,
    /// Expert capacity over the mean load, ≥ 1 (Fedus et al. 2022 §2.2): every expert computes
    /// `capacity_factor × tokens × top_k / experts` slots. For dropless routing (Mixtral,
    /// DeepSeek-V3) it is the load imbalance, the busiest expert's load over the mean; 1 = even.
    #[serde(default = "one")]
    pub capacity_factor: f64,
}

fn one() -> f64 {
    1.0
}

impl Moe {
    /// Whether tokens are routed at all: a single expert takes every token, so there is no
    /// router, no permutation and no all-to-all, and the layer is the dense MLP.
    pub fn routes(&self) -> bool {
        self.experts > 1
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
fn mlp_params(m: &ModelShape, ffn: f64) -> f64 {
    m.mlp_matrices() * f64::from(m.hidden) * ffn
}

/// Router weights of one MoE layer (h × experts), none for a single expert.
fn router_params(m: &ModelShape, e: &Moe) -> f64 {
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

/// Forward GEMM time of one layer's MLP on one device for `tokens` tokens of its microbatch
/// (mean over layers), given the time of one GEMM kernel of `f` FLOPs.
///
/// Dense: `nm` GEMMs split by TP. MoE: the router (replicated); the shared experts as one dense
/// MLP; the routed experts as one grouped GEMM per matrix kind over the `experts / ep` local
/// experts (Megatron-Core `--moe-grouped-gemm`), which together hold, with an even load, the
/// device's own `tokens × top_k × capacity_factor` assignments. Experts are split by TP like
/// the dense MLP (expert tensor parallelism = TP).
pub fn mlp_forward_time(m: &ModelShape, l: &Layout, tokens: f64, gemm: impl Fn(f64) -> f64) -> f64 {
    let (h, t) = (f64::from(m.hidden), f64::from(l.tp));
    let nm = m.mlp_matrices();
    let dense = nm * gemm(2.0 * tokens * h * f64::from(m.ffn) / t);
    let Some(e) = &m.moe else {
        return dense;
    };
    let fe = f64::from(e.expert_ffn);
    let mut moe = 0.0;
    let slots = if e.routes() {
        moe += gemm(2.0 * tokens * router_params(m, e));
        f64::from(e.top_k) * e.capacity_factor
    } else {
        f64::from(e.top_k)
    };
    moe += nm * gemm(2.0 * tokens * slots * h * fe / t);
    if e.shared_experts > 0 {
        moe += nm * gemm(2.0 * tokens * f64::from(e.shared_experts) * h * fe / t);
    }
    let phi = moe_fraction(m);
    phi * moe + (1.0 - phi) * dense
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

/// All-to-alls per MoE layer per microbatch: dispatch and combine forward, their gradients
/// backward, and the forward's two again when the layer is recomputed.
pub fn all_to_alls(full_recompute: bool) -> f64 {
    if full_recompute {
        6.0
    } else {
        4.0
    }
}

/// Expert-parallel degrees the search tries for data-parallel size `dp`: every divisor of
/// `dp` that divides the expert count (just 1 for a dense or single-expert model).
pub fn expert_parallel_degrees(m: &ModelShape, dp: u32) -> Vec<u32> {
    match &m.moe {
        Some(e) if e.routes() => divisors(dp.into())
            .into_iter()
            .filter(|&d| u64::from(e.experts).is_multiple_of(d))
            .filter_map(|d| u32::try_from(d).ok())
            .collect(),
        _ => vec![1],
    }
}

/// Check the MoE part of a shape (see [`Moe`]).
pub fn validate_shape(m: &ModelShape) -> Result<(), PlanError> {
    let Some(e) = &m.moe else {
        return Ok(());
    };
    for (what, v) in [
        ("--experts", e.experts),
        ("--top-k", e.top_k),
        ("--expert-ffn", e.expert_ffn),
        ("--moe-layers", e.moe_layers),
    ] {
        if v == 0 {
            return Err(PlanError::Zero {
                what,
                value: v.into(),
            });
        }
    }
    if e.top_k > e.experts {
        return Err(PlanError::TopK {
            top_k: e.top_k,
            experts: e.experts,
        });
    }
    if e.moe_layers > m.layers {
        return Err(PlanError::MoeLayers {
            moe_layers: e.moe_layers,
            layers: m.layers,
        });
    }
    if !(e.capacity_factor.is_finite() && e.capacity_factor >= 1.0) {
        return Err(PlanError::CapacityFactor {
            value: e.capacity_factor,
        });
    }
    Ok(())
}

/// Check the expert-parallel degree of a layout: it divides the experts and the data-parallel
/// size (EP groups are formed inside the DP group, as in Megatron-Core and DeepSpeed-MoE).
pub fn validate_layout(m: &ModelShape, l: &Layout) -> Result<(), PlanError> {
    if l.ep == 0 {
        return Err(PlanError::Zero {
            what: "--ep",
            value: 0,
        });
    }
    if l.ep == 1 {
        return Ok(());
    }
    let Some(e) = m.moe.as_ref().filter(|e| e.routes()) else {
        return Err(PlanError::EpWithoutMoe {
            ep: l.ep,
            model: m.name.clone(),
        });
    };
    if !e.experts.is_multiple_of(l.ep) {
        return Err(PlanError::EpExperts {
            ep: l.ep,
            experts: e.experts,
            nearest: nearest_common_divisors(e.experts, l.dp, l.ep),
        });
    }
    if !l.dp.is_multiple_of(l.ep) {
        return Err(PlanError::EpDp {
            ep: l.ep,
            dp: l.dp,
            nearest: nearest_common_divisors(e.experts, l.dp, l.ep),
        });
    }
    Ok(())
}

/// Nearest values around `x` dividing both `a` and `b` (the valid EP degrees).
fn nearest_common_divisors(a: u32, b: u32, x: u32) -> String {
    let ds: Vec<u64> = divisors(a.into())
        .into_iter()
        .filter(|d| u64::from(b).is_multiple_of(*d))
        .collect();
    if ds.is_empty() {
        return nearest_divisors(a.into(), x.into(), None);
    }
    let below = ds.iter().rev().find(|&&d| d <= u64::from(x)).copied();
    let above = ds.iter().find(|&&d| d > u64::from(x)).copied();
    nearest(below, above)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::shape::catalog_model;

    #[test]
    fn mixtral_has_47b_parameters_13b_active() {
        // Jiang et al. 2024 (Mixtral of Experts), §2: 47B parameters, 13B active per token.
        // Mistral AI's model card: 46.7B total, 12.9B active. Tolerance 1 %.
        let m = catalog_model("mixtral-8x7b").unwrap_or_else(|e| panic!("{e}"));
        let (p, a) = (m.params(), m.active_params());
        assert!((p / 46.7e9 - 1.0).abs() < 0.01, "{p:e}");
        assert!((a / 12.9e9 - 1.0).abs() < 0.01, "{a:e}");
    }

    #[test]
    fn deepseek_v3_has_671b_parameters_37b_active() {
        // DeepSeek-AI 2024, DeepSeek-V3 Technical Report, §1 and §4.2: 671B total, 37B
        // activated per token (the main model without its 14B multi-token-prediction module).
        // Tolerance 2 %: the planner's MLA approximation leaves out the 64-wide decoupled RoPE
        // key and query parts (docs/methodology.md, "Mixture of experts").
        let m = catalog_model("deepseek-v3").unwrap_or_else(|e| panic!("{e}"));
        let (p, a) = (m.params(), m.active_params());
        assert!((p / 671e9 - 1.0).abs() < 0.02, "{p:e}");
        assert!((a / 37e9 - 1.0).abs() < 0.02, "{a:e}");
    }

    #[test]
    fn bad_moe_input_names_the_constraint_and_the_nearest_values() {
        let m = catalog_model("deepseek-v3").unwrap_or_else(|e| panic!("{e}"));
        let l = Layout {
            dp: 128,
            ep: 48,
            ..Layout::default()
        };
        let e = validate_layout(&m, &l).unwrap_err().to_string();
        assert!(
            e.contains("--ep 48") && e.contains("256") && e.contains("32 or 64"),
            "{e}"
        );
        let l = Layout {
            dp: 96,
            ep: 64,
            ..Layout::default()
        };
        let e = validate_layout(&m, &l).unwrap_err().to_string();
        assert!(e.contains("--dp 96") && e.contains("32"), "{e}");
        let mut bad = m.clone();
        if let Some(x) = bad.moe.as_mut() {
            x.top_k = 300;
        }
        let e = validate_shape(&bad).unwrap_err().to_string();
        assert!(e.contains("--top-k 300") && e.contains("256"), "{e}");
        if let Some(x) = bad.moe.as_mut() {
            x.top_k = 0;
        }
        let e = validate_shape(&bad).unwrap_err().to_string();
        assert!(e.contains("--top-k"), "{e}");
        let dense = catalog_model("llama3-8b").unwrap_or_else(|e| panic!("{e}"));
        let e = validate_layout(&dense, &Layout { dp: 8, ep: 2, ..l })
            .unwrap_err()
            .to_string();
        assert!(e.contains("--ep 2") && e.contains("--experts"), "{e}");
    }

    #[test]
    fn expert_parallel_degrees_divide_dp_and_experts() {
        let m = catalog_model("mixtral-8x7b").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(expert_parallel_degrees(&m, 12), [1, 2, 4]);
        let d = catalog_model("llama3-8b").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(expert_parallel_degrees(&d, 64), [1]);
    }
}

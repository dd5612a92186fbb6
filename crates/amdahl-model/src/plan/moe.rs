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

use super::counts::router_params;
pub use super::counts::{
    mean_dispatched_copies, mean_mlp_flops, mean_mlp_params, mean_mlp_width, mean_routed_params,
    mean_routed_width, moe_fraction, padding_flops,
};
use super::error::divisors;
pub use super::spec::Moe;
use super::spec::{Layout, ModelShape};
pub use super::validate::{
    validate_expert_parallel as validate_layout, validate_moe_shape as validate_shape,
};

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

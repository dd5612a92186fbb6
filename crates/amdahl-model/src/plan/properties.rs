//! Property tests of the model's laws.

use super::cost::CostInputs;
use super::hardware::{catalog_system, ComputePrecision, Network};
use super::perf::estimate;
use super::search::{search, Objective, SearchSpace};
use super::spec::ModelShape;
use super::spec::{Layout, Recompute};
use super::validate::validate;
use proptest::prelude::*;
use std::sync::atomic::AtomicU64;

fn a100() -> (super::hardware::Hardware, Network) {
    match catalog_system("a100-80gb") {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

/// The world-average intensity of the grid catalog (IEA 2019).
fn world() -> crate::units::GramsPerKwh {
    match crate::catalog::grid::lookup("world") {
        Ok(g) => g.g_per_kwh,
        Err(e) => panic!("{e}"),
    }
}

fn model(layers: u32, hidden_k: u32, heads: u32) -> ModelShape {
    ModelShape {
        name: "p".into(),
        layers,
        hidden: hidden_k * 128 * heads / heads.max(1),
        heads,
        kv_heads: heads,
        ffn: 4 * hidden_k * 128,
        vocab: 32000,
        seq: 2048,
        gated_mlp: false,
        ..ModelShape::default()
    }
}

fn recompute(i: u8) -> Recompute {
    Recompute::ALL[usize::from(i % 3)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// More devices (doubling DP, TP or PP at a fixed global batch) never make the predicted
    /// compute time per device larger.
    #[test]
    fn more_devices_never_increase_compute_per_device(
        layers_k in 1u32..8, hidden_k in 8u32..64, tp_e in 0u32..3, pp_e in 0u32..3,
        dp_e in 0u32..6, mbs_e in 0u32..3, rc in 0u8..3, which in 0u8..3, flash: bool,
    ) {
        let (hw, net) = a100();
        let m = model(layers_k * 8, hidden_k, 32);
        let (tp, pp, dp, mbs) = (1 << tp_e, 1 << pp_e, 1 << dp_e, 1 << mbs_e);
        let batch = 2 * 64 * 4; // divisible by every dp × mbs below, doubled included
        let base = Layout {
            tp, pp, dp, interleave: 1, mbs, batch, recompute: recompute(rc), zero: 0, sp: false,
            precision: ComputePrecision::Bf16, overlap_dp: false, flash_attention: flash,
            ..Layout::default()
        };
        let more = match which {
            0 => Layout { dp: dp * 2, ..base },
            1 => Layout { tp: tp * 2, ..base },
            _ => Layout { pp: pp * 2, ..base },
        };
        prop_assume!(validate(&m, &hw, &net, &base, None).is_ok());
        prop_assume!(validate(&m, &hw, &net, &more, None).is_ok());
        let a = estimate(&m, &hw, &net, &base).breakdown.compute.get();
        let b = estimate(&m, &hw, &net, &more).breakdown.compute.get();
        prop_assert!(b <= a * (1.0 + 1e-12), "{} -> {}: {a} -> {b}", base.label(), more.label());
    }

    /// A layout that does not fit is never ranked, whatever the objective.
    #[test]
    fn non_fitting_layouts_are_never_ranked(
        layers_k in 1u32..6, hidden_k in 16u32..160, nodes in 1u64..6, batch in 8u32..600,
        obj in 0u8..3, flash: bool,
    ) {
        let (hw, net) = a100();
        let m = model(layers_k * 12, hidden_k, 32);
        let space = SearchSpace {
            gpus: nodes * 8,
            up_to: true,
            max_batch: batch,
        exact_batch: false,
            microbatches: vec![1, 2, 4],
            max_interleave: 3,
            precisions: vec![ComputePrecision::Bf16],
            flash_attention: flash,
            framework: Default::default(),
            max_cp: 1,
            objective: [Objective::Time, Objective::Energy, Objective::Cost][usize::from(obj)],
            top_k: 5,
            cost: CostInputs {
                tokens: 1e9,
                pue: 1.1,
                intensity: world(),
                price_per_device_hour: None,
            },
        power_caps: Vec::new(),
    };
        let out = search(&m, &hw, &net, &space, &AtomicU64::new(0));
        prop_assert_eq!(out.evaluated, out.fitting + out.rejected.total());
        for c in out.top.iter().chain(out.pareto.iter()) {
            prop_assert!(c.estimate.memory.fits);
            prop_assert!(c.estimate.memory.total.get() <= hw.memory.get());
        }
        // The top list is sorted by the objective.
        for w in out.top.windows(2) {
            prop_assert!(w[0].score <= w[1].score);
        }
    }
}

fn moe_model(layers: u32, hidden_k: u32, experts: u32, top_k: u32) -> ModelShape {
    ModelShape {
        gated_mlp: true,
        tied_embeddings: false,
        moe: Some(super::moe::Moe {
            experts,
            top_k,
            shared_experts: 0,
            expert_ffn: 2 * hidden_k * 128,
            moe_layers: layers,
            capacity_factor: 1.0,
        }),
        ..model(layers, hidden_k, 32)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// A mixture of one expert that every token uses (top-1), as wide as the dense MLP, in
    /// every layer, is the dense model: same parameters, FLOPs, step time and memory, whatever
    /// the layout and capacity factor (a single expert has no router, permutation or
    /// all-to-all).
    #[test]
    fn one_expert_top_1_is_the_dense_model(
        layers_k in 1u32..6, hidden_k in 8u32..48, tp_e in 0u32..4, pp_e in 0u32..3,
        dp_e in 0u32..5, rc in 0u8..3, zero in 0u8..2, flash: bool, tied: bool, cf in 1.0f64..2.0,
    ) {
        let (hw, net) = a100();
        let dense = ModelShape { tied_embeddings: tied, ..model(layers_k * 4, hidden_k, 32) };
        let moe = ModelShape {
            moe: Some(super::moe::Moe {
                experts: 1,
                top_k: 1,
                shared_experts: 0,
                expert_ffn: dense.ffn,
                moe_layers: dense.layers,
                capacity_factor: cf,
            }),
            ..dense.clone()
        };
        let l = Layout {
            tp: 1 << tp_e, pp: 1 << pp_e, dp: 1 << dp_e, batch: 64, zero,
            recompute: recompute(rc), flash_attention: flash, ..Layout::default()
        };
        prop_assume!(validate(&dense, &hw, &net, &l, None).is_ok());
        prop_assert!(validate(&moe, &hw, &net, &l, None).is_ok());
        prop_assert_eq!(dense.params(), moe.params());
        prop_assert_eq!(moe.params(), moe.active_params());
        let (a, b) = (estimate(&dense, &hw, &net, &l), estimate(&moe, &hw, &net, &l));
        prop_assert_eq!(a.model_flops, b.model_flops);
        prop_assert_eq!(a.executed_flops, b.executed_flops);
        prop_assert_eq!(a.step_time, b.step_time);
        prop_assert_eq!(a.memory.total, b.memory.total);
    }

    /// Expert parallelism divides the routed experts' weights, gradients and optimizer state:
    /// doubling EP never increases memory per device, and never changes the model FLOPs.
    /// Model FLOPs grow with top-k (each token computes k experts), parameters do not.
    #[test]
    fn expert_parallelism_shards_and_top_k_costs_flops(
        hidden_k in 8u32..32, experts_e in 1u32..6, ep_e in 0u32..5, zero in 0u8..2,
    ) {
        let (hw, net) = a100();
        let experts = 1 << experts_e;
        let m = moe_model(8, hidden_k, experts, 1);
        let ep = (1u32 << ep_e).min(experts / 2).max(1);
        let l = Layout { dp: 32, batch: 64, ep, zero, ..Layout::default() };
        let more = Layout { ep: ep * 2, ..l };
        prop_assume!(validate(&m, &hw, &net, &more, None).is_ok());
        let (a, b) = (estimate(&m, &hw, &net, &l), estimate(&m, &hw, &net, &more));
        prop_assert!(b.memory.total <= a.memory.total);
        prop_assert!(b.memory.weights < a.memory.weights);
        prop_assert_eq!(a.model_flops, b.model_flops);
        let m2 = moe_model(8, hidden_k, experts, 2);
        prop_assert_eq!(m.params(), m2.params());
        prop_assert!(m2.model_flops(64.0) > m.model_flops(64.0));
        prop_assert!(m2.active_params() > m.active_params());
    }

    /// A parallel block does the same arithmetic with half the tensor-parallel all-reduces.
    #[test]
    fn parallel_block_halves_tp_communication_only(
        layers_k in 1u32..6, hidden_k in 8u32..48, tp_e in 1u32..4, rc in 0u8..3,
    ) {
        let (hw, net) = a100();
        let seq = model(layers_k * 4, hidden_k, 32);
        let par = ModelShape { parallel_block: true, ..seq.clone() };
        let l = Layout { tp: 1 << tp_e, dp: 2, batch: 8, recompute: recompute(rc), ..Layout::default() };
        prop_assume!(validate(&seq, &hw, &net, &l, None).is_ok());
        let (a, b) = (estimate(&seq, &hw, &net, &l), estimate(&par, &hw, &net, &l));
        prop_assert_eq!(a.model_flops, b.model_flops);
        prop_assert_eq!(a.breakdown.compute, b.breakdown.compute);
        prop_assert!((a.breakdown.tp_comm.get() / b.breakdown.tp_comm.get() - 2.0).abs() < 1e-12);
    }

    /// Recomputing one more module (plan/recompute.rs) trades memory for work: stored
    /// activations never grow, executed FLOPs and the busy time never shrink, model FLOPs stay,
    /// on a hybrid MoE model with latent attention (every module applies), in bf16 and fp8.
    #[test]
    fn each_recompute_module_trades_memory_for_work(
        hidden_k in 8u32..32, tp_e in 0u32..3, sp: bool, flash: bool, fp8: bool,
        base_bits in 0u8..32, add in 0usize..5,
    ) {
        use super::recompute::{RecomputeModule, RecomputeModules};
        let (hw, net) = match catalog_system("h100") {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        let mut m = moe_model(8, hidden_k, 8, 2);
        if let Some(e) = m.moe.as_mut() {
            e.moe_layers = 6;
            e.shared_experts = 1;
        }
        m.q_lora_rank = Some(hidden_k * 16);
        m.kv_lora_rank = Some(hidden_k * 8);
        let have: Vec<RecomputeModule> = RecomputeModule::ALL
            .into_iter()
            .enumerate()
            .filter(|(i, _)| base_bits & (1 << i) != 0)
            .map(|(_, r)| r)
            .collect();
        let extra = RecomputeModule::ALL[add];
        prop_assume!(!have.contains(&extra));
        let mut more = have.clone();
        more.push(extra);
        let tp = 1 << tp_e;
        let l = Layout {
            tp,
            dp: 2,
            batch: 8,
            recompute: Recompute::Selective,
            sp: sp && tp > 1,
            flash_attention: flash,
            precision: if fp8 { ComputePrecision::Fp8 } else { ComputePrecision::Bf16 },
            recompute_modules: RecomputeModules::new(&have),
            ..Layout::default()
        };
        let l2 = Layout { recompute_modules: RecomputeModules::new(&more), ..l };
        prop_assume!(validate(&m, &hw, &net, &l, None).is_ok());
        prop_assert!(validate(&m, &hw, &net, &l2, None).is_ok());
        let (a, b) = (estimate(&m, &hw, &net, &l), estimate(&m, &hw, &net, &l2));
        prop_assert!(b.memory.activations.get() <= a.memory.activations.get() * (1.0 + 1e-12));
        prop_assert!(b.executed_flops.get() >= a.executed_flops.get());
        let busy = |e: &super::perf::Estimate| e.breakdown.compute.get() + e.breakdown.memory_bound.get();
        prop_assert!(busy(&b) >= busy(&a) * (1.0 - 1e-12));
        prop_assert_eq!(a.model_flops, b.model_flops);
    }
}

//! Property tests of the model's laws.

use super::cost::CostInputs;
use super::hardware::{catalog_system, Network, Precision};
use super::layout::{validate, Layout, Recompute};
use super::perf::estimate;
use super::search::{search, Objective, SearchSpace};
use super::shape::ModelShape;
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
            precision: Precision::Bf16, overlap_dp: false, flash_attention: flash,
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
            precisions: vec![Precision::Bf16],
            flash_attention: flash,
            max_cp: 1,
            objective: [Objective::Time, Objective::Energy, Objective::Cost][usize::from(obj)],
            top_k: 5,
            cost: CostInputs {
                tokens: 1e9,
                pue: 1.1,
                intensity: world(),
                price_per_device_hour: None,
            },
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

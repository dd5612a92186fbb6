//! Expert parallelism's all-to-alls per MoE layer and microbatch (docs: "Mixture of experts").

use super::layer::LayerTimes;
use super::Setting;
use crate::plan::collective::all_to_all;
use crate::plan::counts;
use crate::plan::moe;
use crate::plan::spec::Recompute;

/// Expert-parallel communication of one layer (mean over layers) for one microbatch, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExpertParallel {
    /// The layer's all-to-alls, all of them (0 without expert parallelism).
    pub layer: f64,
}

/// Per MoE layer, all-to-alls of the dispatched copies of the device's tokens
/// (b·s·top_k·capacity × h) among `ep` ranks `tp` apart. With TP each rank dispatches its 1/t
/// of the tokens (Megatron-Core splits the sequence over the TP ranks before dispatch, as
/// sequence parallelism does); the TP gather and scatter around the experts take the place of
/// the dense MLP's, already in the tensor-parallel time.
pub fn expert_parallel(x: &Setting) -> ExpertParallel {
    let (l, t, net) = (x.l, x.t, x.net);
    let layer = if l.ep > 1 {
        let local = (f64::from(net.gpus_per_node) / t).floor().max(1.0);
        let bytes = x.sbh / t * counts::mean_dispatched_copies(x.model) * x.act;
        moe::all_to_alls(l.recompute == Recompute::Full)
            * all_to_all(net, f64::from(l.ep), local, bytes)
    } else {
        0.0
    };
    ExpertParallel { layer }
}

impl ExpertParallel {
    /// Exposed all-to-all time of a stage of `n` layers for one microbatch. Overlapped
    /// (`overlap_ep`, DualPipe): the all-to-alls of one microbatch run while another computes;
    /// only what exceeds that computation is exposed.
    pub fn stage_exposed(&self, n: f64, lt: &LayerTimes, overlap: bool) -> f64 {
        if overlap {
            (n * self.layer - n * lt.gemm - n * lt.mem).max(0.0)
        } else {
            n * self.layer
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::perf::layer::layer;
    use crate::plan::perf::phase_tests::{base, close, setting, setup};
    use crate::plan::spec::Layout;
    use crate::plan::test_support::catalog;

    #[test]
    fn a_dense_model_has_no_all_to_all() {
        let (m, hw, net) = setup();
        let l = base();
        assert_eq!(expert_parallel(&setting(&m, &hw, &net, &l)).layer, 0.0);
    }

    #[test]
    fn four_all_to_alls_of_the_dispatched_copies() {
        // Mixtral-8x7B (top-2 of 8 experts, every layer MoE, capacity factor 1) with ep 8 on
        // one H100 node: dispatch and combine forward and backward, each of b·s·h·top_k bf16
        // bytes; overlapped, only what exceeds the stage's computation is exposed.
        let (m, hw, net) = catalog("h100", "mixtral-8x7b");
        let l = Layout {
            dp: 8,
            ep: 8,
            batch: 8,
            ..Layout::default()
        };
        let x = setting(&m, &hw, &net, &l);
        let ep = expert_parallel(&x);
        let bytes = f64::from(m.seq) * f64::from(m.hidden) * 2.0 * 2.0;
        close(ep.layer, 4.0 * all_to_all(&net, 8.0, 8.0, bytes));
        let lt = layer(&x);
        assert_eq!(ep.stage_exposed(32.0, &lt, false), 32.0 * ep.layer);
        assert_eq!(
            ep.stage_exposed(32.0, &lt, true),
            (32.0 * ep.layer - 32.0 * lt.gemm - 32.0 * lt.mem).max(0.0)
        );
    }
}

//! Data parallelism: the gradient reduction (ZeRO-0), reduce-scatter and weight all-gather
//! (ZeRO-1/2, the distributed optimizer) or per-microbatch weight gathers (ZeRO-3 / FSDP), and
//! what of it the backward and forward passes hide.

use super::expert_parallel::ExpertParallel;
use super::layer::LayerTimes;
use super::pipeline::Pipeline;
use super::tensor_parallel::TensorParallel;
use super::{link, Setting};
use crate::plan::collective::{all_gather, all_reduce};
use crate::plan::hardware::{Link, Network};
use crate::plan::memory::stage_params;
use crate::plan::optimizer;
use crate::plan::spec::{Recompute, Zero3Prefetch};
use crate::units::BytesPerSecond;

/// Data-parallel traffic of one iteration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DataParallel {
    /// `(parameters, ranks)` of the stage holding the most parameters: its dense weights,
    /// reduced over the DP × CP ranks, and its routed experts, reduced over their
    /// expert-data-parallel group of dp·cp/ep ranks.
    pub groups: [(f64, f64); 2],
    /// Bytes per parameter of the weights and of the gradients.
    pub weight_bytes: f64,
    pub grad_bytes: f64,
    /// Ranks of the data-parallel group on one node.
    pub local: f64,
    /// Exposed data-parallel communication per iteration, seconds.
    pub comm: f64,
}

/// Data parallelism over ranks tp·cp apart: inside the node while tp·cp·dp fits in it. The
/// gradient is reduced over DP × CP ranks (context-parallel ranks hold the same weights).
/// Routed experts are replicated only over their expert-data-parallel group of dp·cp/ep ranks,
/// which reduces their gradients separately (Megatron-Core, DeepSpeed-MoE). The stage holding
/// the most parameters sets the time.
pub fn data_parallel(
    x: &Setting,
    lt: &LayerTimes,
    tp: &TensorParallel,
    ep: &ExpertParallel,
    pipe: &Pipeline,
) -> DataParallel {
    let (model, l, net) = (x.model, x.l, x.net);
    let last = pipe.last();
    let (dense_params, expert_params) = pipe
        .stages
        .iter()
        .enumerate()
        .map(|(i, &n)| stage_params(model, l, n, i == 0, i == last))
        .fold((0.0, 0.0), |best: (f64, f64), stage| {
            if stage.0 + stage.1 > best.0 + best.1 {
                stage
            } else {
                best
            }
        });
    let dcp = f64::from(l.dp) * x.cp;
    let expert_dp = (dcp / f64::from(l.ep.max(1))).max(1.0);
    let (wb, gb, _) = optimizer::bytes_per_param(l);
    let local = (f64::from(net.gpus_per_node) / l.tp_cp() as f64)
        .floor()
        .max(1.0);
    let mut dp = DataParallel {
        groups: [(dense_params, dcp), (expert_params, expert_dp)],
        weight_bytes: wb,
        grad_bytes: gb,
        local,
        comm: 0.0,
    };
    dp.comm = if dcp <= 1.0 {
        0.0
    } else if l.zero == 3 {
        zero3_comm(x, lt, pipe, &dp)
    } else {
        reduce_and_gather_comm(x, lt, tp, ep, pipe, &dp)
    };
    dp
}

/// ZeRO-3/FSDP: per microbatch all-gather weights (forward, backward) + reduce-scatter
/// gradients (Rajbhandari et al. 2020 §7.2: 1.5× the all-reduce volume). Full recomputation
/// re-runs each layer's forward inside the backward, and the weights are gathered for it too:
/// forward, recomputed forward and backward, three gathers and one reduce-scatter (Rajbhandari
/// et al. 2021, ZeRO-Infinity §4.1: with activation checkpointing the parameters are loaded
/// three times per iteration and the gradients once, arithmetic intensity seq × batch).
fn zero3_comm(x: &Setting, lt: &LayerTimes, pipe: &Pipeline, dp: &DataParallel) -> f64 {
    let (model, l, net) = (x.model, x.l, x.net);
    let m = x.microbatches();
    let dp_link = &dp_tier(net, l.tp_cp() * u64::from(l.dp), dp.local);
    let gathers = zero3_gathers(l.recompute, l.zero3_prefetch);
    // The weights are gathered and the gradients reduced layer by layer as the layers run
    // (DeepSpeed's per-module hooks, FSDP's per-layer units; Zhao et al. 2023, PyTorch FSDP
    // §3.2), never as one stage-sized buffer: each collective pays its own ring latency, which
    // the single-buffer volume term below charges once; over thousands of ranks that is
    // milliseconds per collective. Counted once per layer (FSDP's unit; DeepSpeed issues one
    // per matrix, which this leaves out).
    let per_layer_latency = |k: f64| f64::from(pipe.slow_layers) * ring_latency(net, k, dp.local);
    // One gather and one reduce-scatter of the stage's weights, per microbatch.
    let (gather, reduce) =
        dp.groups
            .iter()
            .filter(|&&(n, _)| n > 0.0)
            .fold((0.0, 0.0), |(g, r), &(n, k)| {
                (
                    g + all_gather(dp_link, k, n * dp.weight_bytes) + per_layer_latency(k),
                    r + all_gather(dp_link, k, n * dp.grad_bytes) + per_layer_latency(k),
                )
            });
    if l.overlap_dp {
        // Overlap phase by phase: the forward's gather hides only behind the forward, the
        // backward's gathers and reduce-scatter only behind the backward (and the recomputed
        // forward), each at the granularity the framework prefetches (docs/methodology.md
        // "ZeRO-3 overlap").
        let mb_time = pipe.microbatch.total();
        let fwd = mb_time * lt.fwd_share;
        let matrices = model.layer_matrices();
        let mut backward_order = matrices;
        backward_order.reverse();
        let phases = zero3_phase(l.zero3_prefetch, &matrices, fwd, gather)
            + zero3_phase(
                l.zero3_prefetch,
                &backward_order,
                mb_time - fwd,
                (gathers - 1.0) * gather + reduce,
            );
        m * (phases - mb_time).max(0.0)
    } else {
        m * (gathers * gather + reduce)
    }
}

/// All-reduce of the gradients (ZeRO-0), or reduce-scatter of the gradients + all-gather of the
/// updated 16-bit weights (ZeRO-1/2, Megatron's distributed optimizer): the same volume when
/// gradients are 16-bit, more with fp32 gradients. DeepSpeed's BF16_Optimizer all-reduces the
/// whole gradient and then all-gathers the weights (`grad_all_reduce`). A dense model has no
/// expert group: no collective, no latency.
fn reduce_and_gather_comm(
    x: &Setting,
    lt: &LayerTimes,
    tp: &TensorParallel,
    ep: &ExpertParallel,
    pipe: &Pipeline,
    dp: &DataParallel,
) -> f64 {
    let (l, net) = (x.l, x.net);
    let dp_link = &dp_tier(net, l.tp_cp() * u64::from(l.dp), dp.local);
    let (reduce, gather): (f64, f64) =
        dp.groups
            .iter()
            .filter(|&&(n, _)| n > 0.0)
            .fold((0.0, 0.0), |(r, g), &(n, k)| {
                let reduce = if l.zero == 0 || l.grad_all_reduce {
                    all_reduce(dp_link, k, n * dp.grad_bytes)
                } else {
                    all_gather(dp_link, k, n * dp.grad_bytes)
                };
                let gather = if l.zero == 0 {
                    0.0
                } else {
                    all_gather(dp_link, k, n * dp.weight_bytes)
                };
                (r + reduce, g + gather)
            });
    if l.overlap_dp {
        // The gradient reduction hides behind the last microbatch's backward (bucketed as
        // layers finish); the distributed optimizer's weight all-gather behind the first
        // microbatch's forward of the next step (Megatron-LM `--overlap-grad-reduce`,
        // `--overlap-param-gather`; NeMo `overlap_grad_sync`, `overlap_param_sync`).
        let slow_layers = f64::from(pipe.slow_layers);
        let backward_one_mb = slow_layers
            * (2.0 * lt.dense_fwd
                + lt.attn_bwd
                + 2.0 * lt.fwd_mem
                + tp.layer / 2.0
                + ep.layer / 2.0);
        let forward_one_mb =
            slow_layers * (lt.fwd_gemm + lt.fwd_mem + tp.layer / 2.0 + ep.layer / 2.0);
        (reduce - backward_one_mb).max(0.0) + (gather - forward_one_mb).max(0.0)
    } else {
        reduce + gather
    }
}

/// Weight all-gathers per microbatch under ZeRO-3: forward and backward, plus the recomputed
/// forward under full recomputation where the framework gathers for it separately — DeepSpeed
/// (Rajbhandari et al. 2021, ZeRO-Infinity §4.1: parameters loaded three times per iteration
/// with activation checkpointing). PyTorch FSDP's per-layer unit gathers once for the
/// recomputation and the backward together: its pre-backward hook unshards the layer and the
/// recomputed forward skips FSDP's forward hooks ("When composing with module-hook-based
/// activation checkpointing, the pre-backward hook is responsible for the unshard",
/// `torch/distributed/_composable/fsdp/_fsdp_state.py` `_pre_forward`; `_post_forward` leaves
/// the reshard to the post-backward hook).
pub(crate) fn zero3_gathers(recompute: Recompute, prefetch: Zero3Prefetch) -> f64 {
    if recompute == Recompute::Full && prefetch == Zero3Prefetch::Module {
        3.0
    } else {
        2.0
    }
}

/// Latency of one ring all-gather or reduce-scatter over `k` ranks of which `local` share a node:
/// `k − 1` sequential hops, the `nodes − 1` between nodes at the inter-node α and the others at
/// the intra-node α (NCCL's ring latency model, `src/graph/tuning.cc`: intra- and inter-node hop
/// latencies weighted by their counts). A group inside one node uses only the intra-node α.
pub(crate) fn ring_latency(net: &Network, k: f64, local: f64) -> f64 {
    if k <= 1.0 {
        return 0.0;
    }
    let local = local.clamp(1.0, k);
    let inter_hops = (k / local).ceil() - 1.0;
    inter_hops * net.inter_link().latency.get()
        + (k - 1.0 - inter_hops).max(0.0) * net.intra_link().latency.get()
}

/// Time of one pass (forward or backward) of a layer under ZeRO-3 that computes for `compute`
/// seconds and gathers / reduces for `comm`, the two overlapped as the framework prefetches:
///
/// - [`Zero3Prefetch::Layer`]: the next layer's unit moves while this layer computes, so the
///   pass takes the longer of the two;
/// - [`Zero3Prefetch::Module`]: matrix `i` computes while matrix `i + 1`'s weights move, and
///   matrix `i + 1` waits for both: `Σᵢ max(compute·wᵢ, comm·wᵢ₊₁)` with `wᵢ` the matrices'
///   shares of the layer's weights in the order the pass uses them (the last pairs with the
///   next layer's first). Equal to the longer of the two only when one dominates every pair.
pub(crate) fn zero3_phase(prefetch: Zero3Prefetch, order: &[f64], compute: f64, comm: f64) -> f64 {
    let total: f64 = order.iter().sum();
    if prefetch == Zero3Prefetch::Layer || total <= 0.0 {
        return compute.max(comm);
    }
    order
        .iter()
        .zip(order.iter().cycle().skip(1))
        .map(|(w, next)| (compute * w).max(comm * next) / total)
        .sum()
}

/// The tier a data-parallel collective over `span` consecutive ranks crosses, `local` of its
/// ranks on each node. Across nodes NCCL builds several rings, each through a different network
/// interface, and splits the data among them over NVLink (NVIDIA/nccl issue #601, maintainer:
/// "creates 4 rings, each using a different NIC"; "we can use NVLink to split the operations in
/// N parts then balance the traffic onto the N NICs"), so a group with `local` ranks on a node
/// moves its inter-node bytes over `local` interfaces at once: bus bandwidth `local` times one
/// interface's (two HGX H100 nodes, 8 × 400 Gb/s: ≈ 360 GB/s all-reduce bus bandwidth, issue
/// #1277). `dp_rails` caps the interfaces used (docs/methodology.md, "Communication per
/// iteration").
pub(crate) fn dp_tier(net: &Network, span: u64, local: f64) -> Link {
    let tier = *link(net, span);
    if span <= u64::from(net.gpus_per_node) {
        return tier;
    }
    let rails = net
        .dp_rails
        .map_or(local, |r| local.min(f64::from(r.max(1))));
    Link {
        bandwidth: BytesPerSecond(tier.bandwidth.get() * rails),
        ..tier
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::perf::context_parallel::context_parallel;
    use crate::plan::perf::expert_parallel::expert_parallel;
    use crate::plan::perf::layer::layer;
    use crate::plan::perf::phase_tests::{base, close, setting, setup};
    use crate::plan::perf::pipeline::pipeline;
    use crate::plan::perf::tensor_parallel::tensor_parallel;
    use crate::plan::spec::Layout;

    fn run(l: &Layout) -> DataParallel {
        let (m, hw, net) = setup();
        let x = setting(&m, &hw, &net, l);
        let lt = layer(&x);
        let tp = tensor_parallel(&x, &lt);
        let ep = expert_parallel(&x);
        let pipe = pipeline(&x, &lt, &tp, &context_parallel(&x, &lt), &ep);
        data_parallel(&x, &lt, &tp, &ep, &pipe)
    }

    #[test]
    fn zero0_all_reduces_the_largest_stages_gradient_over_its_dp_ranks() {
        // Dense model: no expert group. The first stage (embedding + 10 layers) holds the most;
        // its bf16 gradient is all-reduced over 24 ranks a node apart, 1 per node (tp = 8).
        let (m, _, net) = setup();
        let l = base();
        let dp = run(&l);
        let (first, _) = stage_params(&m, &l, 10, true, false);
        assert_eq!(dp.groups[1].0, 0.0);
        assert_eq!(dp.groups[0], (first, 24.0));
        assert_eq!((dp.weight_bytes, dp.grad_bytes, dp.local), (2.0, 2.0, 1.0));
        close(dp.comm, all_reduce(net.inter_link(), 24.0, first * 2.0));
    }

    #[test]
    fn zero1_reduce_scatters_and_gathers_and_one_rank_sends_nothing() {
        let (m, _, net) = setup();
        let l = Layout { zero: 1, ..base() };
        let dp = run(&l);
        let (first, _) = stage_params(&m, &l, 10, true, false);
        close(
            dp.comm,
            2.0 * all_gather(net.inter_link(), 24.0, first * 2.0),
        );
        let l = Layout {
            dp: 1,
            batch: 96,
            ..base()
        };
        assert_eq!(run(&l).comm, 0.0);
    }
}

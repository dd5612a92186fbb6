//! Tensor parallelism's communication per layer and microbatch, within the node.

use super::layer::LayerTimes;
use super::Setting;
use crate::plan::collective::{all_gather, all_reduce};
use crate::plan::counts;
use crate::plan::spec::Recompute;

/// Tensor-parallel communication of one layer for one microbatch, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TensorParallel {
    /// One all-reduce's worth of the token-hidden tensor (an fp8 all-gather plus a 16-bit
    /// reduce-scatter under an fp8 recipe with SP).
    pub message: f64,
    /// All-reduces' worth per layer: 4 (6 with full recomputation), halved for a parallel block.
    pub messages: f64,
    /// Sequence parallelism's re-gathers of column-parallel inputs in the backward pass.
    pub sp_regathers: f64,
    /// Everything the layer sends, `messages × message + sp_regathers`.
    pub all: f64,
    /// What stays exposed: `all`, or with `tp_overlap` one chunk in t and what the dense GEMMs
    /// cannot cover.
    pub layer: f64,
}

/// Tensor parallelism: 2 all-reduces forward, 2 backward, 2 more when the forward is re-run
/// (Shoeybi et al. 2019, Fig. 4); with SP the same volume as all-gather + reduce-scatter
/// (Korthikanti et al. 2022 §4.2.2). Within the node. A parallel block sums attention and MLP
/// outputs before one all-reduce: half the messages (Wang & Komatsuzaki 2021, GPT-J; Chowdhery
/// et al. 2022, PaLM §2 "Parallel Layers").
pub fn tensor_parallel(x: &Setting, lt: &LayerTimes) -> TensorParallel {
    let (model, l, t, net) = (x.model, x.l, x.t, x.net);
    let (act, sbh, fp8) = (x.act, x.sbh, x.k.fp8);
    let messages = if l.recompute == Recompute::Full {
        6.0
    } else {
        4.0
    } / if model.parallel_block { 2.0 } else { 1.0 };
    // With SP a column-parallel GEMM (QKV; the MLP's first matrix in a dense layer — an MoE
    // layer's experts get their tokens from the dispatcher instead; one shared input in a
    // parallel block) keeps only its input's sequence shard for the backward and all-gathers it
    // again there for the weight gradient (Megatron-Core
    // `LinearWithGradAccumulationAndAsyncCommunication.backward`,
    // `megatron/core/tensor_parallel/layers.py`; Transformer Engine's `LayerNormLinear` and
    // `LayerNormMLP` backward, "Overlap input AG with dgrad", unless userbuffers' bulk overlap
    // takes it). The gather is issued beside the data-gradient GEMM, yet Korthikanti et al.
    // 2022 Table 4 measures it as exposed: SP saves 0.5 of 7.7 ms in the 22B layer's forward
    // (the model: 0.6) but 0.1 of 11.9 ms in its backward, where the element-wise saving alone
    // is twice the forward's; the ~0.9 ms missing is these gathers at NVLink speed. An fp8
    // recipe stores and gathers the fp8 copy, 1 byte an element (`fp8_linear_input_saving`).
    let sp_regathers = if l.sp && t > 1.0 {
        let inputs = if model.parallel_block {
            1.0
        } else {
            2.0 - counts::moe_fraction(model)
        };
        let bytes = if fp8 { 1.0 } else { act };
        inputs * all_gather(net.intra_link(), t, sbh * bytes)
    } else {
        0.0
    };
    // Under an fp8 recipe with SP, Transformer Engine gathers what it has already cast: the
    // norm outputs going into QKV and the MLP (forward: `layernorm_fwd_fp8`, then
    // `gather_along_first_dim`) and the output gradients going into the row-parallel dgrad
    // GEMMs (backward: "FP8 case with gather", `grad_output_preprocess`), 1 byte an element;
    // the reduce-scatters carry 16-bit partial sums (TE `LayerNormLinear`, `Linear`,
    // `base.py`). Each all-reduce's worth is then an fp8 all-gather plus a 16-bit reduce-scatter.
    let message = if fp8 && l.sp {
        all_gather(net.intra_link(), t, sbh) + all_gather(net.intra_link(), t, sbh * act)
    } else {
        all_reduce(net.intra_link(), t, sbh * act)
    };
    let all = messages * message + sp_regathers;
    let layer = if l.tp_overlap {
        // Split into t chunks pipelined with the GEMMs that consume / produce them (NeMo
        // `tp_comm_overlap`, Transformer Engine userbuffers; Jiang et al. 2024, MegaScale §3.2):
        // one chunk in t stays exposed, and whatever the dense GEMMs cannot cover.
        let dense_all = lt.dense_fwd
            * (3.0
                + if l.recompute == Recompute::Full {
                    1.0
                } else {
                    0.0
                });
        all / t + (all * (1.0 - 1.0 / t) - dense_all).max(0.0)
    } else {
        all
    };
    TensorParallel {
        message,
        messages,
        sp_regathers,
        all,
        layer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::perf::layer::layer;
    use crate::plan::perf::phase_tests::{base, close, setting, setup};
    use crate::plan::spec::Layout;

    #[test]
    fn six_all_reduces_with_full_recomputation_four_without() {
        // Shoeybi et al. 2019 Fig. 4: 2 forward, 2 backward, 2 more for the recomputed forward,
        // each of the b·s·h activation in bf16 over the 8 ranks of the node.
        let (m, hw, net) = setup();
        let l = base();
        let x = setting(&m, &hw, &net, &l);
        let tp = tensor_parallel(&x, &layer(&x));
        let one = all_reduce(net.intra_link(), 8.0, 2048.0 * 12288.0 * 2.0);
        assert_eq!(tp.messages, 6.0);
        assert_eq!(tp.sp_regathers, 0.0);
        close(tp.message, one);
        close(tp.layer, 6.0 * one);
        let l = Layout {
            recompute: Recompute::Selective,
            ..base()
        };
        let x = setting(&m, &hw, &net, &l);
        assert_eq!(tensor_parallel(&x, &layer(&x)).messages, 4.0);
    }

    #[test]
    fn a_parallel_block_halves_the_messages_and_tp1_sends_nothing() {
        let (mut m, hw, net) = setup();
        m.parallel_block = true;
        let l = base();
        let x = setting(&m, &hw, &net, &l);
        assert_eq!(tensor_parallel(&x, &layer(&x)).messages, 3.0);
        let l = Layout { tp: 1, ..base() };
        let x = setting(&m, &hw, &net, &l);
        assert_eq!(tensor_parallel(&x, &layer(&x)).layer, 0.0);
    }

    #[test]
    fn sequence_parallelism_regathers_the_two_column_parallel_inputs() {
        // Dense model, not a parallel block: QKV's and the MLP's first matrix's inputs, each an
        // all-gather of the b·s·h bf16 activation; with overlap one chunk in t stays exposed
        // plus what the dense GEMMs (4 forwards' worth under full recomputation) cannot cover.
        let (m, hw, net) = setup();
        let l = Layout { sp: true, ..base() };
        let x = setting(&m, &hw, &net, &l);
        let lt = layer(&x);
        let tp = tensor_parallel(&x, &lt);
        close(
            tp.sp_regathers,
            2.0 * all_gather(net.intra_link(), 8.0, 2048.0 * 12288.0 * 2.0),
        );
        close(tp.all, tp.messages * tp.message + tp.sp_regathers);
        let l = Layout {
            sp: true,
            tp_overlap: true,
            ..base()
        };
        let x = setting(&m, &hw, &net, &l);
        let ovl = tensor_parallel(&x, &lt);
        close(
            ovl.layer,
            tp.all / 8.0 + (tp.all * (1.0 - 1.0 / 8.0) - 4.0 * lt.dense_fwd).max(0.0),
        );
    }
}

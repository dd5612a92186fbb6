//! The optimizer step and the tied embedding's gradient exchange, once per iteration.

use super::data_parallel::DataParallel;
use super::Setting;
use crate::plan::collective::all_reduce;
use crate::plan::optimizer::step_bytes_per_param;

/// What the iteration spends after the last backward, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptimizerStep {
    /// Parameters this device updates (its stage's, divided by the data-parallel group under
    /// ZeRO ≥ 1).
    pub owned_params: f64,
    /// Adam over the owned parameters (memory-bound).
    pub time: f64,
    /// The tied embedding's gradient all-reduce between the first and the last stage.
    pub tied_embedding: f64,
}

/// Adam over the parameters this device updates (plan/optimizer.rs: bytes streamed per
/// parameter, including the gradient-norm pass and the copy back to 16-bit weights). Tied
/// embedding: its gradient is all-reduced between the first and last stage; untied input and
/// output matrices live on one stage each and need no such step.
pub fn optimizer_step(x: &Setting, dp: &DataParallel) -> OptimizerStep {
    let (model, l) = (x.model, x.l);
    let owned_params: f64 = dp
        .groups
        .iter()
        .map(|&(n, k)| n / if l.zero >= 1 { k } else { 1.0 })
        .sum();
    let time = owned_params * step_bytes_per_param(l) / x.k.mem_rate;
    let tied_embedding = if l.pp > 1 && model.tied_embeddings {
        all_reduce(
            x.net.inter_link(),
            2.0,
            model.embedding_params() / x.t * dp.grad_bytes,
        )
    } else {
        0.0
    };
    OptimizerStep {
        owned_params,
        time,
        tied_embedding,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::memory::stage_params;
    use crate::plan::perf::phase_tests::{base, close, setting, setup};
    use crate::plan::perf::{
        context_parallel, data_parallel, expert_parallel, layer, pipeline, tensor_parallel,
    };
    use crate::plan::spec::Layout;

    fn run(m: &crate::plan::spec::ModelShape, l: &Layout) -> (OptimizerStep, f64) {
        let (_, hw, net) = setup();
        let x = setting(m, &hw, &net, l);
        let lt = layer(&x);
        let tp = tensor_parallel(&x, &lt);
        let ep = expert_parallel(&x);
        let pipe = pipeline(&x, &lt, &tp, &context_parallel(&x, &lt), &ep);
        (
            optimizer_step(&x, &data_parallel(&x, &lt, &tp, &ep, &pipe)),
            x.k.mem_rate,
        )
    }

    #[test]
    fn adam_streams_thirty_bytes_per_owned_parameter() {
        // bf16 weights and gradients: 2·2 + 2·12 + 2 bytes (plan/optimizer.rs); ZeRO-1 owns 1/24.
        let (m, _, _) = setup();
        let l = Layout { zero: 1, ..base() };
        let (first, _) = stage_params(&m, &l, 10, true, false);
        let (step, mem_rate) = run(&m, &l);
        close(step.owned_params, first / 24.0);
        close(step.time, first / 24.0 * 30.0 / mem_rate);
        let (plain, _) = run(&m, &base());
        close(plain.owned_params, first);
    }

    #[test]
    fn only_a_tied_embedding_split_over_stages_is_all_reduced() {
        // Megatron-145B ties its output layer to the embedding: with pp 8 the V × h / t bf16
        // gradient is all-reduced between the first and last stage, across nodes.
        let (m, _, net) = setup();
        let (step, _) = run(&m, &base());
        close(
            step.tied_embedding,
            all_reduce(net.inter_link(), 2.0, 51200.0 * 12288.0 / 8.0 * 2.0),
        );
        let untied = crate::plan::spec::ModelShape {
            tied_embeddings: false,
            ..m.clone()
        };
        assert_eq!(run(&untied, &base()).0.tied_embedding, 0.0);
    }
}

//! Pipeline parallelism: each stage's microbatch time, the slowest stage that sets the pace
//! (plan/stages.rs), the bubble and the point-to-point sends on the critical path.

use super::context_parallel::ContextParallel;
use super::expert_parallel::ExpertParallel;
use super::layer::LayerTimes;
use super::tensor_parallel::TensorParallel;
use super::{link, Setting};
use crate::plan::collective::p2p;
use crate::plan::stages::stage_layers;

/// One microbatch's time on one pipeline stage, by kind, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StageParts {
    pub compute: f64,
    pub mem: f64,
    pub tp: f64,
    pub cp: f64,
    pub ep: f64,
}

impl StageParts {
    pub fn total(&self) -> f64 {
        self.compute + self.mem + self.tp + self.cp + self.ep
    }
}

/// The pipeline of one layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    /// Layers of each stage.
    pub stages: Vec<u32>,
    /// Index of the slowest stage (the first of equals).
    pub slowest: usize,
    /// Layers of the slowest stage.
    pub slow_layers: u32,
    /// The slowest stage's microbatch.
    pub microbatch: StageParts,
    /// Pipeline fill and drain per iteration, (p−1)/v microbatch times.
    pub bubble: f64,
    /// Exposed point-to-point sends per iteration.
    pub p2p: f64,
}

impl Pipeline {
    /// Index of the last stage (the one with the output layer).
    pub fn last(&self) -> usize {
        self.stages.len().saturating_sub(1)
    }
}

/// Each stage's microbatch time (the last stage adds the output layer and loss); the slowest
/// sets the pipeline's pace. Bubble (p−1)/v microbatch times (Narayanan et al. 2021, §2.2);
/// p2p of the scattered activation b·(s/cp)·h/t on the critical path once per chunk forward
/// and backward.
pub fn pipeline(
    x: &Setting,
    lt: &LayerTimes,
    tp: &TensorParallel,
    cp: &ContextParallel,
    ep: &ExpertParallel,
) -> Pipeline {
    let (model, l, t) = (x.model, x.l, x.t);
    let (p, v) = (f64::from(l.pp), f64::from(l.interleave));
    // Output layer and loss, on the last stage.
    let logits = x.local.logit_flops(x.b) / t;
    // Forward, data gradient and weight gradient; a frozen (LoRA) output layer skips the last.
    let logit_passes = if x.l.lora_rank.is_some() { 2.0 } else { 3.0 };
    let logit_mem = 3.0 * 12.0 * x.s * x.b * f64::from(model.vocab) / t / x.k.mem_rate;
    let stages = stage_layers(model.layers, l.pp)
        .unwrap_or_else(|| vec![model.layers.div_ceil(l.pp.max(1)); l.pp.max(1) as usize]);
    let last = stages.len().saturating_sub(1);
    let stage_parts = |i: usize, n: u32| {
        let n = f64::from(n);
        let tail = i == last;
        StageParts {
            compute: n * lt.gemm
                + if tail {
                    logit_passes * x.k.gemm16(logits)
                } else {
                    0.0
                },
            mem: n * lt.mem + if tail { logit_mem } else { 0.0 },
            tp: n * tp.layer,
            cp: n * cp.layer,
            ep: ep.stage_exposed(n, lt, l.overlap_ep),
        }
    };
    let (slowest, _) =
        stages
            .iter()
            .enumerate()
            .fold((0usize, f64::NEG_INFINITY), |(bi, bt), (i, &n)| {
                let time = stage_parts(i, n).total();
                if time > bt {
                    (i, time)
                } else {
                    (bi, bt)
                }
            });
    let slow_layers = stages.get(slowest).copied().unwrap_or(model.layers);
    let microbatch = stage_parts(slowest, slow_layers);
    let mb_time = microbatch.total();
    let bubble = (p - 1.0) / v * mb_time;
    let sends = if l.pp > 1 {
        let transfer = p2p(link(x.net, l.gpus()), x.sbh * x.act / t);
        // Overlapped (interleaved schedule): each transfer runs while the next chunk computes,
        // about a third of a chunk's forward + backward time; only the excess is exposed.
        let exposed = if l.overlap_pp {
            (transfer - mb_time / (3.0 * v)).max(0.0)
        } else {
            transfer
        };
        2.0 * (v * x.microbatches() + p - 1.0) * exposed
    } else {
        0.0
    };
    Pipeline {
        stages,
        slowest,
        slow_layers,
        microbatch,
        bubble,
        p2p: sends,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::perf::context_parallel::context_parallel;
    use crate::plan::perf::expert_parallel::expert_parallel;
    use crate::plan::perf::layer::layer;
    use crate::plan::perf::phase_tests::{base, close, setting, setup};
    use crate::plan::perf::tensor_parallel::tensor_parallel;
    use crate::plan::spec::Layout;

    fn run(l: &Layout) -> (Pipeline, LayerTimes, TensorParallel, f64) {
        let (m, hw, net) = setup();
        let x = setting(&m, &hw, &net, l);
        let lt = layer(&x);
        let tp = tensor_parallel(&x, &lt);
        let pipe = pipeline(
            &x,
            &lt,
            &tp,
            &context_parallel(&x, &lt),
            &expert_parallel(&x),
        );
        let send = p2p(net.inter_link(), 2048.0 * 12288.0 * 2.0 / 8.0);
        (pipe, lt, tp, send)
    }

    #[test]
    fn the_last_of_eight_even_stages_is_the_slowest_and_sets_the_bubble() {
        // 80 layers over 8 stages, 10 each; the last adds the output layer (3 GEMMs' worth of
        // 2·b·s·h·V/t in 16-bit) and the loss. Bubble (p−1)/v = 7 microbatch times (SC21 §2.2).
        let (m, hw, net) = setup();
        let l = base();
        let x = setting(&m, &hw, &net, &l);
        let (pipe, lt, tp, _) = run(&l);
        assert_eq!(pipe.stages, vec![10; 8]);
        assert_eq!((pipe.slowest, pipe.slow_layers, pipe.last()), (7, 10, 7));
        let logits = 2.0 * 2048.0 * 12288.0 * 51200.0 / 8.0;
        close(
            pipe.microbatch.compute,
            10.0 * lt.gemm + 3.0 * x.k.gemm16(logits),
        );
        close(pipe.microbatch.tp, 10.0 * tp.layer);
        close(pipe.bubble, 7.0 * pipe.microbatch.total());
    }

    #[test]
    fn sends_cross_nodes_twice_per_chunk_and_microbatch() {
        // tp 8 fills a node, so stages are a node apart: 2·(v·m + p − 1) sends of the b·s·h/t
        // bf16 activation on the inter-node tier; m = 2304 / 24 = 96. Without PP none.
        let (pipe, _, _, send) = run(&base());
        close(pipe.p2p, 2.0 * (96.0 + 7.0) * send);
        let l = Layout {
            interleave: 2,
            ..base()
        };
        let (pipe, _, _, send) = run(&l);
        close(pipe.p2p, 2.0 * (2.0 * 96.0 + 7.0) * send);
        close(pipe.bubble, 3.5 * pipe.microbatch.total());
        let l = Layout {
            pp: 1,
            dp: 192,
            ..base()
        };
        let (pipe, _, _, _) = run(&l);
        assert_eq!((pipe.p2p, pipe.bubble), (0.0, 0.0));
    }
}

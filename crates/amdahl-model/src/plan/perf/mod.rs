//! Per-iteration time of one layout: compute, memory-bound work, communication, bubble,
//! optimizer. Formulas and their sources: docs/methodology.md.
//!
//! [`estimate`] runs the phases in order, each a module returning a named struct: `layer`
//! ([`LayerTimes`]: one layer's GEMM and memory-bound time) → `tensor_parallel`,
//! `context_parallel` and `expert_parallel` ([`TensorParallel`], [`ContextParallel`],
//! [`ExpertParallel`]: each layer's communication) → `pipeline` ([`Pipeline`]: stages, the
//! slowest one's microbatch, bubble, sends) → `data_parallel` ([`DataParallel`]: gradient and
//! ZeRO traffic) → `optimizer` ([`OptimizerStep`]: Adam's step, the tied embedding). This module holds the
//! kernels' rates every phase shares, the FLOP accounting and the assembled [`Estimate`].

pub mod context_parallel;
pub mod data_parallel;
pub mod expert_parallel;
pub mod layer;
pub mod optimizer;
pub mod pipeline;
pub mod tensor_parallel;

use super::context::local_shape;
use super::error::PlanError;
use super::hardware::{ComputePrecision, Hardware, Link, Network};
use super::memory::{memory, Memory};
use super::recompute;
use super::spec::ModelShape;
use super::spec::{Layout, Recompute, RecomputeModule};
use super::validate::validate;
use crate::power::Activity;
use crate::units::{Flops, Seconds};
use serde::{Deserialize, Serialize};

pub use context_parallel::{context_parallel, ContextParallel};
pub use data_parallel::{data_parallel, DataParallel};
pub use expert_parallel::{expert_parallel, ExpertParallel};
pub use layer::{layer, LayerTimes};
pub use optimizer::{optimizer_step, OptimizerStep};
pub use pipeline::{pipeline, Pipeline, StageParts};
pub use tensor_parallel::{tensor_parallel, TensorParallel};

/// Where one iteration's time goes on the slowest pipeline stage; the parts sum to the step.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Breakdown {
    /// GEMMs (forward, backward, recomputation) outside the bubble.
    pub compute: Seconds,
    /// Memory-bound element-wise work (LayerNorm, softmax, dropout, GeLU, residuals, loss).
    pub memory_bound: Seconds,
    /// Tensor-parallel all-reduces / all-gathers + reduce-scatters (not overlapped).
    pub tp_comm: Seconds,
    /// Pipeline point-to-point sends that sit on the critical path.
    pub pp_comm: Seconds,
    /// Data-parallel gradient (and ZeRO-3 parameter) traffic not hidden behind the backward.
    pub dp_comm: Seconds,
    /// Pipeline fill and drain, (p−1)/v microbatch times.
    pub bubble: Seconds,
    /// Adam step over the parameters this device owns.
    pub optimizer: Seconds,
    /// Tied-embedding gradient all-reduce between the first and last stage.
    pub other: Seconds,
    /// Expert-parallel all-to-alls (MoE dispatch and combine, forward and backward) that sit
    /// on the critical path.
    #[serde(default)]
    pub ep_comm: Seconds,
    /// Context-parallel K/V ring exchange not hidden behind attention (plan/context.rs).
    #[serde(default)]
    pub cp_comm: Seconds,
    /// Fixed time per iteration outside the kernels (framework, launch, host and data-loader
    /// waits) that a calibration fitted to the user's runs ([`Hardware::step_overhead`]); the
    /// model has none of its own.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub overhead: Seconds,
}

fn is_zero(s: &Seconds) -> bool {
    s.get() == 0.0
}

impl Breakdown {
    pub fn total(&self) -> Seconds {
        self.compute
            + self.memory_bound
            + self.tp_comm
            + self.pp_comm
            + self.dp_comm
            + self.bubble
            + self.optimizer
            + self.other
            + self.ep_comm
            + self.cp_comm
            + self.overhead
    }

    /// Work a single device would also do: compute and memory-bound time.
    pub fn work(&self) -> Seconds {
        self.compute + self.memory_bound
    }

    /// Exposed communication of all four kinds.
    pub fn communication(&self) -> Seconds {
        self.tp_comm + self.pp_comm + self.dp_comm + self.ep_comm + self.cp_comm
    }
}

/// The prediction for one layout.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Estimate {
    pub layout: Layout,
    pub gpus: u64,
    pub step_time: Seconds,
    pub breakdown: Breakdown,
    pub tokens_per_s: f64,
    /// Executed (hardware) FLOP/s per device, the figure Megatron papers report.
    pub tflops_per_gpu: f64,
    /// Model FLOP/s per device (no recomputation counted).
    pub model_tflops_per_gpu: f64,
    pub mfu: f64,
    pub hfu: f64,
    /// Fraction of the step the device computes or streams memory (drives the power model).
    pub busy_fraction: f64,
    /// What the device does over the step, as the power model reads it: busy as above, executed
    /// FLOP/s over the dense peak (HFU), and memory-bound time at the achieved bandwidth as a
    /// share of the data-sheet bandwidth.
    #[serde(default)]
    pub activity: Activity,
    pub model_flops: Flops,
    pub executed_flops: Flops,
    pub memory: Memory,
}

/// Validate `layout` and predict its iteration.
pub fn evaluate(
    model: &ModelShape,
    hw: &Hardware,
    net: &Network,
    layout: &Layout,
) -> Result<Estimate, PlanError> {
    validate(model, hw, net, layout, None)?;
    Ok(estimate(model, hw, net, layout))
}

/// The kernels of one layout on one device (docs: "GEMM efficiency"): a GEMM of `f` FLOPs takes
/// `latency + f / rate`; memory-bound work streams at `mem_rate`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Kernels {
    /// Peak FLOP/s of the layout's precision (bf16's where the device lists none).
    pub peak: f64,
    /// Achieved GEMM FLOP/s in the layout's precision.
    pub rate: f64,
    /// Achieved GEMM FLOP/s of the GEMMs an fp8 recipe keeps in 16-bit (core attention, the
    /// output layer); `rate` when the layout is not fp8.
    pub rate16: f64,
    /// Kernel launch latency, seconds.
    pub latency: f64,
    /// Achieved memory bandwidth, bytes/s.
    pub mem_rate: f64,
    /// The layout runs an fp8 recipe.
    pub fp8: bool,
}

impl Kernels {
    pub fn new(hw: &Hardware, l: &Layout) -> Self {
        let curve = hw.curve();
        let peak = hw.peak(l.precision).unwrap_or(hw.peak_bf16).get();
        let rate = curve.efficiency(l.precision) * peak;
        // fp8 recipes (Transformer Engine) run only the Linear layers' GEMMs in fp8: core
        // attention (TE `DotProductAttention`, fp8 only with `fp8_dpa`, off by default) and
        // Megatron's output layer (a plain `ColumnParallelLinear`) stay in 16-bit (docs: "fp8").
        let fp8 = l.precision == ComputePrecision::Fp8;
        let rate16 = if fp8 {
            curve.max_efficiency * hw.peak_bf16.get()
        } else {
            rate
        };
        Kernels {
            peak,
            rate,
            rate16,
            latency: curve.latency.get(),
            mem_rate: hw.memory_bandwidth.get() * curve.memory_efficiency,
            fp8,
        }
    }

    /// One GEMM kernel of `f` FLOPs in the layout's precision.
    pub fn gemm(&self, f: f64) -> f64 {
        self.latency + f / self.rate
    }

    /// One GEMM kernel of `f` FLOPs that stays in 16-bit.
    pub fn gemm16(&self, f: f64) -> f64 {
        self.latency + f / self.rate16
    }
}

/// What every phase reads: the inputs, the shape one context-parallel rank works on (s/cp
/// tokens, plan/context.rs), the kernels, and the sizes of one microbatch as reals.
#[derive(Debug, Clone)]
pub struct Setting<'a> {
    pub model: &'a ModelShape,
    pub net: &'a Network,
    pub l: &'a Layout,
    /// The model as one context-parallel rank sees it.
    pub local: ModelShape,
    pub k: Kernels,
    /// Tensor-parallel degree.
    pub t: f64,
    /// Context-parallel degree (at least 1).
    pub cp: f64,
    /// Microbatch size, sequences.
    pub b: f64,
    /// Local sequence length, s/cp.
    pub s: f64,
    /// Hidden size.
    pub h: f64,
    /// Attention heads.
    pub a: f64,
    /// Bytes per activation element.
    pub act: f64,
    /// Elements of one microbatch's token-hidden tensor, s·b·h.
    pub sbh: f64,
}

impl<'a> Setting<'a> {
    pub fn new(model: &'a ModelShape, hw: &Hardware, net: &'a Network, l: &'a Layout) -> Self {
        let local = local_shape(model, l.cp);
        let (s, h) = (f64::from(local.seq), f64::from(model.hidden));
        let b = f64::from(l.mbs);
        Setting {
            model,
            net,
            l,
            k: Kernels::new(hw, l),
            t: f64::from(l.tp),
            cp: f64::from(l.cp.max(1)),
            b,
            s,
            h,
            a: f64::from(model.heads),
            act: l.precision.activation_bytes(),
            sbh: s * b * h,
            local,
        }
    }

    /// Microbatches per pipeline per iteration.
    pub fn microbatches(&self) -> f64 {
        self.l.microbatches() as f64
    }
}

/// Predict an iteration of a layout the caller has validated (the search's hot path): the
/// phases in order, then the breakdown, FLOPs and rates.
pub fn estimate(model: &ModelShape, hw: &Hardware, net: &Network, l: &Layout) -> Estimate {
    let x = Setting::new(model, hw, net, l);
    let m = x.microbatches();
    let lt = layer(&x);
    let tp = tensor_parallel(&x, &lt);
    let ep = expert_parallel(&x);
    let cp = context_parallel(&x, &lt);
    let pipe = pipeline(&x, &lt, &tp, &cp, &ep);
    let dp = data_parallel(&x, &lt, &tp, &ep, &pipe);
    let opt = optimizer_step(&x, &dp);
    let mb = &pipe.microbatch;
    let breakdown = Breakdown {
        compute: Seconds(m * mb.compute),
        memory_bound: Seconds(m * mb.mem),
        tp_comm: Seconds(m * mb.tp),
        pp_comm: Seconds(pipe.p2p),
        dp_comm: Seconds(dp.comm),
        bubble: Seconds(pipe.bubble),
        optimizer: Seconds(opt.time),
        other: Seconds(opt.tied_embedding),
        ep_comm: Seconds(m * mb.ep),
        cp_comm: Seconds(m * mb.cp),
        overhead: hw.step_overhead().unwrap_or(Seconds(0.0)),
    };
    let flops = iteration_flops(model, l, x.s);
    let n = l.gpus() as f64;
    let peak = x.k.peak;
    let activity_of = |b: &Breakdown| {
        let step = b.total().get();
        let busy = (b.work().get() + opt.time) / step;
        Activity {
            busy,
            compute: flops.executed / step / n / peak,
            memory: b.memory_bound.get() / step * x.k.mem_rate / hw.memory_bandwidth.get(),
        }
    };
    // Under a power cap the compute clock falls until the step's power fits it (crate::power::
    // capped_clock): the compute-bound time stretches, memory-bound time and communication hold.
    let clock = hw.clock_under_cap(
        &activity_of(&breakdown),
        breakdown.compute.get() / breakdown.total().get(),
    );
    let breakdown = Breakdown {
        compute: breakdown.compute * (1.0 / clock),
        ..breakdown
    };
    let step = breakdown.total().get();
    let batch = f64::from(l.batch);
    let activity = activity_of(&breakdown);
    let busy = activity.busy;
    Estimate {
        layout: *l,
        gpus: l.gpus(),
        step_time: Seconds(step),
        breakdown,
        tokens_per_s: batch * f64::from(model.seq) / step,
        tflops_per_gpu: flops.executed / step / n / 1e12,
        model_tflops_per_gpu: flops.model / step / n / 1e12,
        mfu: flops.model / step / n / peak,
        hfu: flops.executed / step / n / peak,
        busy_fraction: busy,
        activity,
        model_flops: Flops(flops.model),
        executed_flops: Flops(flops.executed),
        memory: memory(model, l, hw.memory),
    }
}

/// FLOPs of one iteration, all devices together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IterationFlops {
    /// Model FLOPs: forward and backward, nothing recomputed (MFU's numerator).
    pub model: f64,
    /// Executed FLOPs: model FLOPs, the recomputed forward work (and FlashAttention's
    /// re-computed scores) and the capacity factor's padded expert slots (HFU's numerator).
    pub executed: f64,
}

/// Model and executed FLOPs of one iteration; `s` is the sequence length one context-parallel
/// rank works on, which the padding term counts its tokens by.
pub fn iteration_flops(model: &ModelShape, l: &Layout, s: f64) -> IterationFlops {
    let batch = f64::from(l.batch);
    let modules = l.recompute_modules;
    let model_flops = if l.lora_rank.is_some() {
        model.lora_model_flops(batch)
    } else {
        model.model_flops(batch)
    };
    let g_all = model.layer_gemms(batch);
    let recompute_flops = f64::from(model.layers)
        * (match l.recompute {
            Recompute::None => 0.0,
            Recompute::Selective => {
                let core = if modules.contains(RecomputeModule::CoreAttn) && !l.flash_attention {
                    g_all[1] + g_all[2]
                } else {
                    0.0
                };
                core + recompute::recomputed_gemm_flops_per_token(model, modules)
                    * batch
                    * f64::from(model.seq)
            }
            Recompute::Full => g_all.iter().sum(),
        } + if l.flash_attention {
            // FlashAttention's backward re-computes the scores QKᵀ.
            g_all[1]
        } else {
            0.0
        });
    // The capacity factor's padded expert slots are computed too (forward, backward, and once
    // more when the forward is re-run).
    let padding = super::counts::padding_flops(model, batch * s)
        * if l.recompute == Recompute::Full {
            4.0
        } else {
            3.0
        };
    IterationFlops {
        model: model_flops,
        executed: model_flops + recompute_flops + padding,
    }
}

/// The tier a group of `span` consecutive ranks crosses.
fn link(net: &Network, span: u64) -> &Link {
    if span <= u64::from(net.gpus_per_node) {
        net.intra_link()
    } else {
        net.inter_link()
    }
}

#[cfg(test)]
mod tests {
    use super::data_parallel::{dp_tier, ring_latency, zero3_phase};
    use super::*;
    use crate::plan::collective::{all_gather, all_reduce};
    use crate::plan::spec::Zero3Prefetch;
    use crate::plan::test_support::catalog;

    fn setup() -> (ModelShape, Hardware, Network) {
        catalog("a100-80gb", "megatron-145b")
    }

    fn base() -> Layout {
        Layout {
            tp: 8,
            pp: 8,
            dp: 24,
            batch: 2304,
            recompute: Recompute::Full,
            ..Layout::default()
        }
    }

    #[test]
    fn executed_flops_are_model_flops_plus_what_is_re_run() {
        // Dense model, no FlashAttention: nothing re-run executes the model FLOPs (72/72); full
        // recomputation one more forward of the layers, a third of their share (96/72).
        let (m, _, _) = setup();
        let none = Layout {
            recompute: Recompute::None,
            ..base()
        };
        let f = iteration_flops(&m, &none, 2048.0);
        assert_eq!(f.executed, f.model);
        let f = iteration_flops(&m, &base(), 2048.0);
        let layers: f64 = 80.0 * m.layer_gemms(2304.0).iter().sum::<f64>();
        assert!((f.executed - f.model - layers).abs() / f.model < 1e-12);
    }

    #[test]
    fn bubble_is_p_minus_1_over_v_microbatch_times() {
        // SC21 §2.2: bubble / ideal = (p−1)/(v·m).
        let (m, hw, net) = setup();
        for v in [1, 2, 5] {
            let l = Layout {
                interleave: v,
                ..base()
            };
            let e = evaluate(&m, &hw, &net, &l).unwrap_or_else(|err| panic!("{err}"));
            let ideal = e.breakdown.compute + e.breakdown.memory_bound + e.breakdown.tp_comm;
            let mb = f64::from(l.batch / (l.dp * l.mbs));
            let want = 7.0 / (f64::from(v) * mb);
            assert!((e.breakdown.bubble / ideal - want).abs() < 1e-12, "v = {v}");
        }
    }

    #[test]
    fn overlap_and_zero_do_what_they_say() {
        let (m, hw, net) = setup();
        let plain = estimate(&m, &hw, &net, &base());
        let ovl = estimate(
            &m,
            &hw,
            &net,
            &Layout {
                overlap_dp: true,
                ..base()
            },
        );
        assert!(ovl.breakdown.dp_comm <= plain.breakdown.dp_comm);
        assert_eq!(ovl.breakdown.compute, plain.breakdown.compute);
        let z1 = estimate(&m, &hw, &net, &Layout { zero: 1, ..base() });
        // ZeRO-1 divides the optimizer state by DP = 24 and its update time likewise.
        assert!((plain.memory.optimizer / z1.memory.optimizer - 24.0).abs() < 1e-9);
        assert!((plain.breakdown.optimizer / z1.breakdown.optimizer - 24.0).abs() < 1e-9);
    }

    #[test]
    fn hfu_over_mfu_is_4_over_3_with_full_recompute() {
        // Executed = model + one more forward: 96/72 for the transformer layers, logits 3/3.
        let (m, hw, net) = setup();
        let e = estimate(&m, &hw, &net, &base());
        let r = e.hfu / e.mfu;
        assert!(r > 1.32 && r < 4.0 / 3.0, "{r}");
        let full = m.megatron_flops(f64::from(base().batch));
        assert!((e.executed_flops.get() / full - 1.0).abs() < 1e-9);
    }

    #[test]
    fn breakdown_sums_to_step_and_selective_saves_memory() {
        let (m, hw, net) = setup();
        let sel = Layout {
            recompute: Recompute::Selective,
            sp: true,
            ..base()
        };
        let none = Layout {
            recompute: Recompute::None,
            ..base()
        };
        let es = estimate(&m, &hw, &net, &sel);
        let en = estimate(&m, &hw, &net, &none);
        assert!((es.breakdown.total() / es.step_time - 1.0).abs() < 1e-12);
        assert!(es.memory.activations < en.memory.activations);
        // Selective recomputation costs far less time than full.
        let ef = estimate(&m, &hw, &net, &base());
        assert!(es.step_time < ef.step_time);
    }
    #[test]
    fn zero3_module_prefetch_pairs_each_matrix_with_the_next_gather() {
        // Layer units: the longer of computation and communication.
        assert_eq!(
            zero3_phase(Zero3Prefetch::Layer, &[3.0, 1.0, 4.0, 4.0], 12.0, 6.0),
            12.0
        );
        // GPT matrices 3h², h², 4h², 4h² with computation = communication = 12: matrix i
        // computes while matrix i+1 arrives: max(3,1) + max(1,4) + max(4,4) + max(4,3) = 15.
        let t = zero3_phase(Zero3Prefetch::Module, &[3.0, 1.0, 4.0, 4.0], 12.0, 12.0);
        assert!((t - 15.0).abs() < 1e-12, "{t}");
        // Equal matrices, or one side dominating every pair: no loss against layer units.
        let t = zero3_phase(Zero3Prefetch::Module, &[1.0; 4], 8.0, 5.0);
        assert!((t - 8.0).abs() < 1e-12, "{t}");
        let t = zero3_phase(Zero3Prefetch::Module, &[3.0, 1.0, 4.0, 4.0], 1.0, 100.0);
        assert!((t - 100.0).abs() < 1e-9, "{t}");
    }

    #[test]
    fn data_parallel_collectives_spread_over_the_nodes_interfaces() {
        // NCCL gives each ring its own interface: a group with k ranks on a node reaches k
        // interfaces' bandwidth across nodes (NVIDIA/nccl issue #601); `dp_rails` caps it.
        let (_, _, net) = setup();
        let one = net.inter_link().bandwidth.get();
        assert_eq!(dp_tier(&net, 64, 4.0).bandwidth.get(), 4.0 * one);
        assert_eq!(dp_tier(&net, 64, 4.0).latency, net.inter_link().latency);
        let capped = Network {
            dp_rails: Some(1),
            ..net
        };
        assert_eq!(dp_tier(&capped, 64, 4.0).bandwidth.get(), one);
        let two = Network {
            dp_rails: Some(2),
            ..net
        };
        assert_eq!(dp_tier(&two, 64, 4.0).bandwidth.get(), 2.0 * one);
        // Inside one node the group uses NVLink, rails or not.
        assert_eq!(dp_tier(&net, 8, 8.0), *net.intra_link());

        // End to end: GPT-3 175B at TP 4 × PP 8 × DP 16 on 512 A100 (2 DP ranks per node), the
        // gradient all-reduce not overlapped: the bandwidth term halves, the latency stays.
        let (m, hw, net) = catalog("a100-80gb", "gpt3-175b");
        let l = Layout {
            tp: 4,
            pp: 8,
            dp: 16,
            batch: 512,
            ..Layout::default()
        };
        let dp = |net: &Network| estimate(&m, &hw, net, &l).breakdown.dp_comm.get();
        let (rails, single) = (
            dp(&net),
            dp(&Network {
                dp_rails: Some(1),
                ..net
            }),
        );
        let latency = 2.0 * 15.0 * net.inter_link().latency.get();
        assert!(
            ((rails - latency) / (single - latency) - 0.5).abs() < 1e-9,
            "{rails} vs {single}"
        );
    }

    #[test]
    fn grad_all_reduce_moves_ten_bytes_a_parameter_where_zero1_moves_six() {
        // ZeRO-1 with fp32 gradients and 16-bit weights: a reduce-scatter of 4 bytes and an
        // all-gather of 2 per parameter, (k−1)/k · 6 bytes; DeepSpeed's BF16_Optimizer
        // all-reduces the whole fp32 gradient instead, 2(k−1)/k · 4 + (k−1)/k · 2 = 10 (ring
        // collectives, Thakur et al. 2005). Latency: 2(k−1)α against 3(k−1)α. GPT-3 175B at
        // TP 8 × PP 8 × DP 16, one DP rank per node, nothing overlapped.
        let (m, hw, net) = catalog("a100-80gb", "gpt3-175b");
        let l = Layout {
            tp: 8,
            pp: 8,
            dp: 16,
            batch: 512,
            zero: 1,
            fp32_grads: true,
            ..Layout::default()
        };
        let dp = |l: &Layout| estimate(&m, &hw, &net, l).breakdown.dp_comm.get();
        let alpha = 15.0 * net.inter_link().latency.get();
        let scatter = dp(&l) - 2.0 * alpha;
        let all_reduce = dp(&Layout {
            grad_all_reduce: true,
            ..l
        }) - 3.0 * alpha;
        assert!(
            (all_reduce / scatter - 10.0 / 6.0).abs() < 1e-9,
            "{all_reduce} vs {scatter}"
        );
        // It describes ZeRO-1 only (no pipeline here: ZeRO-3 refuses one first).
        for zero in [0, 2, 3] {
            let bad = Layout {
                zero,
                grad_all_reduce: true,
                pp: 1,
                dp: 128,
                ..l
            };
            assert!(matches!(
                validate(&m, &hw, &net, &bad, None),
                Err(PlanError::GradAllReduceWithoutZero1 { .. })
            ));
        }
    }

    #[test]
    fn ring_latency_counts_hops_between_and_inside_nodes() {
        let (_, _, net) = setup();
        let (inter, intra) = (
            net.inter_link().latency.get(),
            net.intra_link().latency.get(),
        );
        // 16 ranks, 8 per node: 15 hops, one of them between the two nodes.
        let t = ring_latency(&net, 16.0, 8.0);
        assert!((t - (inter + 14.0 * intra)).abs() < 1e-15, "{t}");
        // One rank per node (TP 8): every hop crosses the network.
        assert!((ring_latency(&net, 16.0, 1.0) - 15.0 * inter).abs() < 1e-15);
        assert_eq!(ring_latency(&net, 1.0, 8.0), 0.0);
    }

    #[test]
    fn zero3_with_full_recompute_gathers_three_times_in_deepspeed_twice_in_fsdp() {
        // ZeRO-Infinity §4.1 (DeepSpeed): forward, recomputed forward and backward gathers plus
        // one reduce-scatter, against two gathers and one reduce-scatter without recomputation;
        // 16-bit weights and gradients: 4/3 of the traffic (not overlapped here). PyTorch
        // FSDP's pre-backward unshard serves the recomputation and the backward: no extra
        // gather (`_fsdp_state.py` `_pre_forward`), the same traffic as without recomputation.
        let (m, hw, net) = setup();
        let z3 = |recompute| Layout {
            tp: 1,
            pp: 1,
            dp: 384,
            mbs: 1,
            batch: 384,
            zero: 3,
            recompute,
            zero3_prefetch: Zero3Prefetch::Module,
            ..Layout::default()
        };
        let full = estimate(&m, &hw, &net, &z3(Recompute::Full));
        let sel = estimate(&m, &hw, &net, &z3(Recompute::Selective));
        let r = full.breakdown.dp_comm / sel.breakdown.dp_comm;
        assert!((r - 4.0 / 3.0).abs() < 1e-9, "{r}");
        let fsdp = |recompute| Layout {
            zero3_prefetch: Zero3Prefetch::Layer,
            ..z3(recompute)
        };
        let fsdp_full = estimate(&m, &hw, &net, &fsdp(Recompute::Full));
        let fsdp_sel = estimate(&m, &hw, &net, &fsdp(Recompute::Selective));
        let r = fsdp_full.breakdown.dp_comm / fsdp_sel.breakdown.dp_comm;
        assert!((r - 1.0).abs() < 1e-9, "{r}");
        assert!((full.breakdown.dp_comm / fsdp_full.breakdown.dp_comm - 4.0 / 3.0).abs() < 1e-9);
        // Overlap hides some of it, and DeepSpeed-2021 module prefetch hides less than layers.
        let ovl = |p| Layout {
            overlap_dp: true,
            zero3_prefetch: p,
            ..z3(Recompute::Full)
        };
        let layer = estimate(&m, &hw, &net, &ovl(Zero3Prefetch::Layer));
        let module = estimate(&m, &hw, &net, &ovl(Zero3Prefetch::Module));
        assert!(layer.breakdown.dp_comm < full.breakdown.dp_comm);
        assert!(module.breakdown.dp_comm >= layer.breakdown.dp_comm);
    }

    /// GPT-3 175B on H100 at TP 8 with SP and FlashAttention: the fp8 layout and its bf16 twin.
    fn fp8_setup() -> (ModelShape, Hardware, Network, Layout, Layout) {
        let (m, hw, net) = catalog("h100", "gpt3-175b");
        let l = Layout {
            tp: 8,
            dp: 1,
            batch: 8,
            recompute: Recompute::Selective,
            sp: true,
            flash_attention: true,
            precision: ComputePrecision::Fp8,
            ..Layout::default()
        };
        let bf16 = Layout {
            precision: ComputePrecision::Bf16,
            ..l
        };
        (m, hw, net, l, bf16)
    }

    #[test]
    fn fp8_runs_only_the_linear_layers_in_fp8() {
        // With an fp8 peak that makes the fp8 GEMM rate equal the 16-bit one, an fp8 step
        // computes exactly as a bf16 step: attention and the output layer were at the 16-bit
        // rate all along, and the Linear layers now are too.
        let (m, mut hw, net, l, bf16) = fp8_setup();
        let curve = hw.curve();
        let bf16 = estimate(&m, &hw, &net, &bf16);
        hw.peak_fp8 = Some(hw.peak_bf16 * (curve.max_efficiency / curve.fp8_efficiency));
        let same_rate = estimate(&m, &hw, &net, &l);
        let (a, b) = (
            same_rate.breakdown.compute.get(),
            bf16.breakdown.compute.get(),
        );
        assert!((a / b - 1.0).abs() < 1e-12, "{a} vs {b}");
        // A faster fp8 unit speeds up the Linear layers only: the step cannot fall below the
        // attention and output layer's 16-bit time.
        hw.peak_fp8 = Some(hw.peak_bf16 * 1e6);
        let unbounded = estimate(&m, &hw, &net, &l);
        let g = m.layer_gemms(8.0);
        let attention =
            96.0 * 3.5 * (g[1] + g[2]) / 8.0 / (curve.max_efficiency * hw.peak_bf16.get());
        assert!(unbounded.breakdown.compute.get() > attention);
        assert!(unbounded.breakdown.compute.get() < 0.5 * a);
    }

    #[test]
    fn fp8_casts_move_four_bytes_per_cast_element() {
        // GPT-3 175B, TP 8 (h 12,288, f 49,152): per token and layer the forward casts the QKV
        // and MLP inputs (h each, whole on every rank) and the attention output and MLP
        // activation (q + f)/8: 32,256 elements; the backward the output gradients, 2h +
        // (q + 2kv + f)/8 = 35,328. Each is read in 16-bit and written in fp8 and transposed:
        // 4 bytes (Transformer Engine's fused cast + transpose).
        let (m, hw, net, l, bf16) = fp8_setup();
        let bf16 = estimate(&m, &hw, &net, &bf16);
        let fp8 = estimate(&m, &hw, &net, &l);
        let curve = hw.curve();
        let mem_rate = hw.memory_bandwidth.get() * curve.memory_efficiency;
        let tokens = 8.0 * 2048.0;
        let want = 96.0 * (32256.0 + 35328.0) * 4.0 * tokens / mem_rate;
        let got = fp8.breakdown.memory_bound.get() - bf16.breakdown.memory_bound.get();
        assert!((got / want - 1.0).abs() < 1e-9, "{got} vs {want}");
    }

    #[test]
    fn unfused_attention_gemms_are_bound_by_the_scores_they_move() {
        // SC21's 1.7B (h 2,304, 24 heads of 96, s 2,048) at microbatch 16 without
        // FlashAttention: QKᵀ writes b·a·s² = 1.61e9 scores, 2 bytes each, for 2·96 FLOPs each:
        // 96 FLOP/byte, below A100's achieved ridge (0.72·312 TFLOP/s over 0.80·2,039 GB/s =
        // 138), so each of a layer's six attention GEMMs (2 forward, 4 backward) takes its
        // bytes over the bandwidth, not its FLOPs over the rate. With unbounded bandwidth the
        // compute time is that much shorter, and by nothing else.
        let (m, hw, net) = catalog("a100-80gb", "megatron-1.7b");
        let l = Layout {
            tp: 1,
            mbs: 16,
            batch: 16,
            recompute: Recompute::None,
            ..Layout::default()
        };
        let real = estimate(&m, &hw, &net, &l).breakdown.compute.get();
        let unbounded = Hardware {
            memory_bandwidth: crate::units::BytesPerSecond(1e18),
            ..hw.clone()
        };
        let ideal = estimate(&m, &unbounded, &net, &l).breakdown.compute.get();
        let curve = hw.curve();
        let (b, a, s, h) = (16.0, 24.0, 2048.0, 2304.0);
        let bytes = 2.0 * (b * a * s * s + 2.0 * s * b * h);
        let memory = bytes / (hw.memory_bandwidth.get() * curve.memory_efficiency);
        let flops =
            2.0 * b * s * s * h / (curve.max_efficiency * hw.peak_bf16.get()) + curve.latency.get();
        assert!(memory > flops);
        let want = 24.0 * 6.0 * (memory - flops);
        assert!(
            ((real - ideal) / want - 1.0).abs() < 1e-9,
            "{} vs {want}",
            real - ideal
        );
    }

    #[test]
    fn sequence_parallelism_saves_what_korthikanti_table_4_measured() {
        // Korthikanti et al. 2022, Table 4: one layer of their 22B model (h 6,144, 64 heads,
        // s 2,048, TP 8, batch 4, A100) forward + backward takes 19.6 ms, 19.0 with SP (−3 %);
        // with selective recomputation 20.9 ms, 20.3 with SP. Table 4 rounds to 0.1 ms: the
        // ratios hold to ±0.5 %; 1 % allowed. Without the backward's re-gather of the
        // column-parallel inputs the model's SP saved 7.8 %.
        let (m, hw, net) = catalog("a100-80gb", "megatron-18b");
        let layer = |sp: bool, recompute: Recompute| {
            let time = |layers: u32| {
                let m = ModelShape {
                    layers,
                    heads: 64,
                    kv_heads: 64,
                    ..m.clone()
                };
                let l = Layout {
                    tp: 8,
                    batch: 4,
                    sp,
                    recompute,
                    precision: ComputePrecision::Bf16,
                    ..Layout::default()
                };
                let b = estimate(&m, &hw, &net, &l).breakdown;
                (b.compute + b.memory_bound + b.tp_comm).get()
            };
            (time(48) - time(24)) / 24.0
        };
        let none = layer(false, Recompute::None);
        let sp = layer(true, Recompute::None);
        let sel = layer(false, Recompute::Selective);
        let sel_sp = layer(true, Recompute::Selective);
        assert!((sp / none - 19.0 / 19.6).abs() < 0.01, "{sp} / {none}");
        assert!(
            (sel_sp / sel - 20.3 / 20.9).abs() < 0.01,
            "{sel_sp} / {sel}"
        );
    }

    #[test]
    fn fp8_with_sp_gathers_one_byte_and_reduces_two() {
        // GPT-3 175B, TP 8 with SP: per layer and microbatch four all-gather + reduce-scatter
        // pairs (2 forward, 2 backward) and the two backward re-gathers. Under fp8 every gather
        // moves the cast copy (1 byte an element), every reduce-scatter 16-bit partial sums;
        // under bf16 all move 2 bytes.
        let (m, hw, net, l, bf16) = fp8_setup();
        let fp8 = estimate(&m, &hw, &net, &l).breakdown.tp_comm.get();
        let bf16 = estimate(&m, &hw, &net, &bf16).breakdown.tp_comm.get();
        let sbh = 2048.0 * 12288.0;
        let ag = |bytes: f64| all_gather(net.intra_link(), 8.0, bytes);
        let want = (4.0 * (ag(sbh) + ag(2.0 * sbh)) + 2.0 * ag(sbh))
            / (4.0 * all_reduce(net.intra_link(), 8.0, 2.0 * sbh) + 2.0 * ag(2.0 * sbh));
        assert!(
            ((fp8 / bf16) / want - 1.0).abs() < 1e-9,
            "{} vs {want}",
            fp8 / bf16
        );
        assert!(fp8 / bf16 < 0.8);
    }

    #[test]
    fn overlapped_pipeline_sends_hide_behind_the_next_chunk() {
        // 145B on 1,536 A100, v = 2: a send of b·s·h/t bytes crosses nodes; with overlap only
        // what exceeds a third of a chunk's time is exposed, so the sends of a large model hide.
        let (m, hw, net) = setup();
        let v2 = Layout {
            interleave: 2,
            ..base()
        };
        let plain = estimate(&m, &hw, &net, &v2);
        let ovl = estimate(
            &m,
            &hw,
            &net,
            &Layout {
                overlap_pp: true,
                ..v2
            },
        );
        assert!(plain.breakdown.pp_comm.get() > 0.0);
        assert_eq!(ovl.breakdown.pp_comm.get(), 0.0);
        assert_eq!(ovl.breakdown.compute, plain.breakdown.compute);
        // Megatron overlaps sends only in the interleaved schedule.
        assert!(matches!(
            validate(
                &m,
                &hw,
                &net,
                &Layout {
                    overlap_pp: true,
                    ..base()
                },
                None
            ),
            Err(PlanError::OverlapPpWithoutInterleave)
        ));
    }

    #[test]
    fn distributed_optimizer_gathers_weights_behind_the_first_forward() {
        // ZeRO-1 with overlap: the gradient reduce-scatter hides behind the last microbatch's
        // backward and the weight all-gather behind the first microbatch's forward; without
        // overlap both are exposed.
        let (m, hw, net) = setup();
        let l = Layout { zero: 1, ..base() };
        let plain = estimate(&m, &hw, &net, &l);
        let ovl = estimate(
            &m,
            &hw,
            &net,
            &Layout {
                overlap_dp: true,
                ..l
            },
        );
        assert!(plain.breakdown.dp_comm.get() > 0.0);
        assert!(ovl.breakdown.dp_comm.get() > 0.0);
        assert!(ovl.breakdown.dp_comm.get() < plain.breakdown.dp_comm.get());
        // ZeRO-0's all-reduce moves the same bytes (16-bit gradients) but can hide only behind
        // the backward: ZeRO-1 exposes less by the forward window it also uses.
        let z0 = estimate(
            &m,
            &hw,
            &net,
            &Layout {
                overlap_dp: true,
                ..base()
            },
        );
        assert!(ovl.breakdown.dp_comm.get() < z0.breakdown.dp_comm.get());
    }
}

/// The layouts the phase tests share: Megatron-145B (80 layers, h 12,288, 96 heads, ffn 4h, V
/// 51,200, s 2,048, tied embeddings) on A100-80GB in SC21's layout, tp8 pp8 dp24, full
/// recomputation, bf16, no FlashAttention.
#[cfg(test)]
pub(crate) mod phase_tests {
    use super::Setting;
    use crate::plan::hardware::{Hardware, Network};
    use crate::plan::spec::{Layout, ModelShape, Recompute};
    use crate::plan::test_support::catalog;

    pub fn setup() -> (ModelShape, Hardware, Network) {
        catalog("a100-80gb", "megatron-145b")
    }

    pub fn base() -> Layout {
        Layout {
            tp: 8,
            pp: 8,
            dp: 24,
            batch: 2304,
            recompute: Recompute::Full,
            ..Layout::default()
        }
    }

    /// `|got / want − 1| < 1e-12` (exactly 0 when `want` is): the phases are sums of a few terms, so only rounding differs.
    pub fn close(got: f64, want: f64) {
        if want == 0.0 {
            assert_eq!(got, 0.0);
            return;
        }
        assert!(
            (got / want - 1.0).abs() < 1e-12,
            "got {got}, want {want} (ratio {})",
            got / want
        );
    }

    pub fn setting<'a>(
        m: &'a ModelShape,
        hw: &Hardware,
        net: &'a Network,
        l: &'a Layout,
    ) -> Setting<'a> {
        Setting::new(m, hw, net, l)
    }
}

//! A served configuration evaluated at a batch: latency, throughput, memory, power, energy.
//!
//! Continuous batching in steady state (Yu et al. 2022, Orca; Kwon et al. 2023, vLLM): `batch`
//! sequences are resident; each request's prompt is prefilled once and its `output − 1` further
//! tokens come from decode steps that read the weights once for the whole batch and each
//! sequence's KV cache. Per `batch` requests the devices spend one prefill of `batch` prompts
//! and `output − 1` decode steps at the mean context, so
//! throughput = batch · output / (T_prefill(batch) + (output − 1) · T_decode(batch)).
//! Formulas and sources: docs/methodology.md ("Inference").

use super::engine::{Engine, USABLE_MEMORY};
use super::error::InferError;
use super::precision::{Arithmetic, KvFormat, WeightFormat};
use super::step::{pass, Device, Pass, Shard, Work, ACT_BYTES};
use crate::plan::collective::p2p;
use crate::plan::error::{nearest_divisors, nearest_multiples};
use crate::plan::{validate_model, ComputePrecision, Hardware, ModelShape, Network, PlanError};
use crate::power::Activity;
use crate::units::Bytes;
use serde::{Deserialize, Serialize};

/// How the model is served.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Serving {
    pub tp: u32,
    pub pp: u32,
    /// Independent copies of the model (data parallelism): gpus = tp × pp × replicas.
    pub replicas: u32,
    pub weights: WeightFormat,
    pub kv: KvFormat,
    /// The serving engine: its time per running sequence ([`Engine`]).
    #[serde(default)]
    pub engine: Engine,
    /// The engine's memory share (`--gpu-memory-fraction`, 0 < f ≤ 1): vLLM's
    /// `gpu_memory_utilization`, SGLang's `mem_fraction_static`, TensorRT-LLM's
    /// `free_gpu_memory_fraction` ([`Engine::usable_memory`] says of what); `None`: their
    /// default, [`USABLE_MEMORY`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_fraction: Option<f64>,
}

impl Serving {
    pub fn gpus(&self) -> u64 {
        u64::from(self.tp) * u64::from(self.pp) * u64::from(self.replicas)
    }
}

/// The requests: prompt and generated lengths in tokens, and the beams each keeps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Requests {
    pub input: u32,
    pub output: u32,
    /// Beam search width (1: greedy or sampling). Each of the `beams` candidates of a request is a
    /// sequence of its own in every decode step — its query, its KV reads, its own generated KV —
    /// while the prompt is prefilled once and its KV blocks are shared (copy-on-write,
    /// PagedAttention: Kwon et al. 2023, §4.4); one output of `output` tokens is returned.
    #[serde(default = "one_beam")]
    pub beams: u32,
}

fn one_beam() -> u32 {
    1
}

/// Memory of one device.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InferMemory {
    pub weights: Bytes,
    pub kv_cache: Bytes,
    pub activations: Bytes,
    pub total: Bytes,
    pub usable: Bytes,
    pub capacity: Bytes,
    /// KV cache one running sequence holds on this device: its full length under TensorRT-LLM,
    /// which reserves it at admission; its prompt and half its output, the mean over its life,
    /// under vLLM and SGLang, which allocate as tokens are made.
    pub kv_per_sequence: Bytes,
}

/// The prediction for one configuration at one batch (per replica unless stated).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Evaluation {
    pub batch: u32,
    pub max_batch: u32,
    pub ttft_s: f64,
    pub tpot_s: f64,
    /// TTFT + (output − 1) · TPOT, queueing excluded.
    pub e2e_s: f64,
    /// Prefill of `batch` prompts (one cycle's share of prompt work).
    pub prefill_batch_s: f64,
    /// All replicas together.
    pub output_tokens_per_s: f64,
    pub requests_per_s: f64,
    pub mfu: f64,
    pub mbu: f64,
    /// Of the decode step: arithmetic-bound, memory-bound, TP all-reduce, kernel latency, fixed overhead, PP
    /// point-to-point (seconds).
    pub decode_compute_s: f64,
    pub decode_memory_s: f64,
    pub decode_comm_s: f64,
    pub decode_latency_s: f64,
    pub decode_overhead_s: f64,
    /// The engine's per-sequence time for the step's sequences (GPU work).
    pub decode_host_s: f64,
    pub decode_p2p_s: f64,
    pub power_prefill_w: f64,
    pub power_decode_w: f64,
    /// Mean board power per device over a cycle.
    pub power_per_gpu_w: f64,
    /// IT energy at the devices (before PUE).
    pub energy_per_token_j: f64,
    pub energy_per_request_j: f64,
    /// What one device does during the batch's prefill and during a decode step, as the power
    /// model reads it (`power_prefill_w`, `power_decode_w`).
    #[serde(default)]
    pub activity_prefill: Activity,
    #[serde(default)]
    pub activity_decode: Activity,
    pub memory: InferMemory,
}

/// Everything fixed for a configuration, independent of the batch.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub shard: Shard,
    pub device: Device,
    pub arithmetic: Arithmetic,
    pub serving: Serving,
    pub requests: Requests,
    pub max_batch: u32,
    pub memory_capacity: f64,
    pub usable: f64,
    pub fixed_bytes: f64,
    pub per_seq_bytes: f64,
    /// Tokens of KV cache a running sequence holds (all its beams), on average.
    pub kv_tokens_per_seq: f64,
}

/// Check a configuration and compute what does not depend on the batch (including the largest
/// batch that fits). Errors name the violated constraint and the nearest valid values.
pub fn setup(
    model: &ModelShape,
    hw: &Hardware,
    net: &Network,
    serving: Serving,
    req: Requests,
) -> Result<Setup, InferError> {
    prepare(model, hw, net, serving, req, true)
}

/// [`setup`] without the memory check (`max_batch` may be 0): the what-ifs evaluate
/// configurations that do not fit and flag them.
pub fn setup_unchecked(
    model: &ModelShape,
    hw: &Hardware,
    net: &Network,
    serving: Serving,
    req: Requests,
) -> Result<Setup, InferError> {
    prepare(model, hw, net, serving, req, false)
}

/// The shape and degrees serving can model: the planner's shape checks, no latent attention,
/// every degree and length at least 1, the request within the context, TP dividing the heads
/// (and the KV heads, or they it) within one node, PP dividing the layers.
fn validate_serving(
    model: &ModelShape,
    net: &Network,
    serving: Serving,
    req: Requests,
) -> Result<(), InferError> {
    validate_model(model)?;
    if model.q_lora_rank.is_some() || model.kv_lora_rank.is_some() {
        return Err(InferError::LatentAttention {
            model: model.name.clone(),
        });
    }
    for (what, v) in [
        ("--tp", serving.tp),
        ("--pp", serving.pp),
        ("replicas (--gpus / (--tp × --pp))", serving.replicas),
        ("--input", req.input),
        ("--output", req.output),
        ("--beams", req.beams),
    ] {
        if v == 0 {
            return Err(InferError::Zero {
                what,
                value: v.into(),
            });
        }
    }
    if let Some(f) = serving.memory_fraction.filter(|f| !(*f > 0.0 && *f <= 1.0)) {
        return Err(InferError::MemoryFraction(f));
    }
    let total = u64::from(req.input) + u64::from(req.output);
    if total > u64::from(model.serving_context()) {
        return Err(InferError::Context {
            input: req.input,
            output: req.output,
            total,
            context: model.serving_context(),
            model: model.name.clone(),
        });
    }
    if !model.heads.is_multiple_of(serving.tp) {
        return Err(PlanError::TpHeads {
            tp: serving.tp,
            heads: model.heads,
            nearest: nearest_divisors(model.heads.into(), serving.tp.into(), None),
        }
        .into());
    }
    if !(model.kv_heads.is_multiple_of(serving.tp) || serving.tp.is_multiple_of(model.kv_heads)) {
        return Err(InferError::TpKvHeads {
            tp: serving.tp,
            kv_heads: model.kv_heads,
            nearest: nearest_divisors(model.heads.into(), serving.tp.into(), None),
        });
    }
    if serving.tp > net.gpus_per_node {
        return Err(PlanError::TpNode {
            tp: serving.tp,
            gpus_per_node: net.gpus_per_node,
            nearest: nearest_divisors(
                model.heads.into(),
                serving.tp.into(),
                Some(net.gpus_per_node.into()),
            ),
        }
        .into());
    }
    if !model.layers.is_multiple_of(serving.pp) {
        return Err(PlanError::PpLayers {
            pp: serving.pp,
            layers: model.layers,
            nearest: nearest_divisors(model.layers.into(), serving.pp.into(), None),
        }
        .into());
    }
    Ok(())
}

fn prepare(
    model: &ModelShape,
    hw: &Hardware,
    net: &Network,
    serving: Serving,
    req: Requests,
    check_memory: bool,
) -> Result<Setup, InferError> {
    validate_serving(model, net, serving, req)?;
    if serving.kv == KvFormat::Fp4 && hw.peak(ComputePrecision::Fp4).is_none() {
        return Err(InferError::Fp4Kv {
            device: hw.name.clone(),
        });
    }
    // Replicas are independent: only a replica wider than a node sends anything between nodes.
    net.check_span(
        &hw.name,
        u64::from(serving.tp) * u64::from(serving.pp),
        format!("tp {} × pp {} per replica", serving.tp, serving.pp),
    )?;
    let total = u64::from(req.input) + u64::from(req.output);
    let shard = Shard::new(model, serving.tp, serving.pp, serving.weights, serving.kv);
    let arithmetic = serving.weights.arithmetic(hw);
    let device = Device::new(hw, arithmetic, serving.engine);
    let capacity = hw.memory.get();
    let (input, output) = (f64::from(req.input), f64::from(req.output));
    // Activations of the largest pass (one prompt's prefill) and per sequence in a decode step:
    // the widest live tensors (QKV, MLP up) and fp32 logits.
    let act_per_token = ACT_BYTES
        * (2.0 * shard.hidden
            + shard.q_width
            + 2.0 * shard.kv_width
            + 2.0 * shard.mlp_width() / shard.tp);
    let logits = 4.0 * shard.vocab / shard.tp;
    let fixed = shard.weight_bytes() + input * act_per_token + logits;
    let fraction = serving.memory_fraction.unwrap_or(USABLE_MEMORY);
    let usable = serving.engine.usable_memory(capacity, fixed, fraction);
    // Per request: the shared prompt's KV once, each beam's generated KV and decode activations.
    // What a running sequence holds of its generated KV depends on the engine
    // ([`Engine::output_kv_held`]); one sequence must fit at its full length either way.
    let beams = f64::from(req.beams.max(1));
    let held_tokens = input + beams * output * serving.engine.output_kv_held();
    let full_seq =
        (input + beams * output) * shard.kv_per_token() + beams * (act_per_token + logits);
    let per_seq = held_tokens * shard.kv_per_token() + beams * (act_per_token + logits);
    let room = usable - fixed;
    let max_batch = if room > full_seq {
        (room / per_seq).floor().min(f64::from(u32::MAX)) as u32
    } else {
        0
    };
    let setup = Setup {
        shard,
        device,
        arithmetic,
        serving,
        requests: req,
        max_batch,
        memory_capacity: capacity,
        usable,
        fixed_bytes: fixed,
        per_seq_bytes: per_seq,
        kv_tokens_per_seq: held_tokens,
    };
    if max_batch == 0 && check_memory {
        return Err(InferError::FitsNowhere {
            model: model.name.clone(),
            device: hw.name.clone(),
            tp: serving.tp,
            pp: serving.pp,
            precision: serving.weights.name(),
            weights_gib: fixed / GIB,
            per_seq_gib: full_seq / GIB,
            tokens: total,
            usable_gib: usable / GIB,
            capacity_gib: capacity / GIB,
        });
    }
    Ok(setup)
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Check `gpus` against tp × pp and return the number of replicas.
pub fn replicas(gpus: u64, tp: u32, pp: u32) -> Result<u32, InferError> {
    let tp_pp = u64::from(tp) * u64::from(pp);
    if tp_pp == 0 || gpus == 0 || !gpus.is_multiple_of(tp_pp) {
        return Err(InferError::Gpus {
            gpus,
            tp_pp,
            nearest: nearest_multiples(gpus, tp_pp.max(1)),
        });
    }
    u32::try_from(gpus / tp_pp).map_err(|_| InferError::Gpus {
        gpus,
        tp_pp,
        nearest: "fewer".into(),
    })
}

/// Evaluate at `batch` concurrent sequences (1 ≤ batch ≤ max_batch, else an error).
pub fn evaluate_at(
    s: &Setup,
    hw: &Hardware,
    net: &Network,
    batch: u32,
) -> Result<Evaluation, InferError> {
    if batch == 0 {
        return Err(InferError::Zero {
            what: "--batch",
            value: 0,
        });
    }
    if batch > s.max_batch {
        return Err(InferError::Batch {
            batch,
            max_batch: s.max_batch,
            need_gib: (s.fixed_bytes + f64::from(batch) * s.per_seq_bytes) / GIB,
            usable_gib: s.usable / GIB,
            engine_note: if s.serving.engine.output_kv_held() < 1.0 {
                ""
            } else {
                "; TensorRT-LLM (--engine tensorrt-llm, the default) reserves each request's \
                 whole length, --engine vllm or sglang hold only what has been generated and fit \
                 more"
            },
        });
    }
    Ok(estimate(s, hw, net, batch))
}

/// A pipelined pass: `seqs` sequences split into m = min(seqs, pp) microbatches, each passing
/// the pp stages; the whole batch takes pp microbatch slots plus a point-to-point hop per stage
/// boundary (Narayanan et al. 2021). Returns (time, one stage's pass per microbatch, busy share,
/// p2p seconds).
fn pipelined(
    s: &Setup,
    hw: &Hardware,
    net: &Network,
    seqs: f64,
    work: impl Fn(f64) -> Work,
) -> (f64, Pass, f64, f64) {
    let m = seqs.min(f64::from(s.serving.pp));
    microbatched(s, hw, net, m, &work(seqs / m))
}

/// [`pipelined`] with the microbatch's work given: `m` microbatches of work `w` each.
fn microbatched(
    s: &Setup,
    hw: &Hardware,
    net: &Network,
    m: f64,
    w: &Work,
) -> (f64, Pass, f64, f64) {
    let pp = f64::from(s.serving.pp);
    let one = throttled(s, hw, pass(&s.shard, &s.device, net, w), m / pp);
    let hop = if s.serving.pp > 1 {
        let span = u64::from(s.serving.tp) * u64::from(s.serving.pp);
        let link = if span <= u64::from(net.gpus_per_node) {
            net.intra_link()
        } else {
            net.inter_link()
        };
        (pp - 1.0) * p2p(link, w.tokens * s.shard.hidden * ACT_BYTES / s.shard.tp)
    } else {
        0.0
    };
    (pp * one.time + hop, one, m / pp, hop)
}

/// One iteration of a replica: its wall time, and the power and activity of each of its devices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Iteration {
    pub time: f64,
    /// Board power of one device of the replica over the iteration (the shared power model).
    pub power_w: f64,
    pub activity: Activity,
}

/// One iteration of a continuous-batching engine doing `w` in all: any mix of prefill chunks and
/// decode steps, summed ([`Work`] is additive: tokens, rows, attention pairs and cached tokens
/// read). It is the pass [`estimate`] times for a batch's prefill or decode step: the rows split
/// into min(rows, pp) microbatches over the pipeline, each stage's pass from the step model under
/// the power cap, and the device's power from the power model. `amdahl serve` times every
/// iteration with it, so a lone request's prefill takes exactly `infer`'s TTFT.
pub fn iteration(s: &Setup, hw: &Hardware, net: &Network, w: &Work) -> Iteration {
    let m = w.rows.max(1.0).min(f64::from(s.serving.pp));
    let micro = Work {
        tokens: w.tokens / m,
        rows: w.rows / m,
        pairs: w.pairs / m,
        kv_read: w.kv_read / m,
    };
    let (time, one, busy, _) = microbatched(s, hw, net, m, &micro);
    let activity = activity(s, hw, &one, busy);
    Iteration {
        time,
        power_w: hw.power(&activity).get(),
        activity,
    }
}

/// What one device does in pass `p`, for the power model: its share `busy` of the pipeline
/// slots, its FLOP rate over the arithmetic's data-sheet peak, its byte rate over the data-sheet
/// bandwidth.
fn activity(s: &Setup, hw: &Hardware, p: &Pass, busy: f64) -> Activity {
    let peak = hw
        .peak(s.arithmetic.precision)
        .unwrap_or(hw.peak_bf16)
        .get();
    // The engine's per-sequence time is memory-bound GPU work (sampling over the vocabulary,
    // paged-KV gathers, input preparation): it streams at the achieved bandwidth. Not host time:
    // the runs it was fitted on overlapped the engine's CPU work with the GPU's
    // (docs/methodology.md, "Engine per-sequence time").
    let bytes = p.bytes + p.host * s.device.bandwidth;
    Activity {
        busy,
        compute: busy * p.flops / (p.time * peak),
        memory: busy * bytes / (p.time * hw.memory_bandwidth.get()),
    }
}

/// Pass `p` under the device's power cap: its compute-bound time stretched by the clock the cap
/// leaves (`Hardware::clock_under_cap`); unchanged without a cap.
fn throttled(s: &Setup, hw: &Hardware, p: Pass, busy: f64) -> Pass {
    if hw.power_cap.is_none() || p.time <= 0.0 {
        return p;
    }
    let clock = hw.clock_under_cap(&activity(s, hw, &p, busy), p.compute / p.time);
    let extra = p.compute * (1.0 / clock - 1.0);
    Pass {
        time: p.time + extra,
        compute: p.compute + extra,
        ..p
    }
}

/// Evaluate a batch the caller has checked (the search's hot path).
pub fn estimate(s: &Setup, hw: &Hardware, net: &Network, batch: u32) -> Evaluation {
    let b = f64::from(batch);
    let (input, output) = (f64::from(s.requests.input), f64::from(s.requests.output));
    let gpus_per_replica = f64::from(s.serving.tp) * f64::from(s.serving.pp);
    // TTFT: one prompt prefilled on its own (queueing excluded).
    let (ttft, _, _, _) = pipelined(s, hw, net, 1.0, |n| Work::prefill(n, input));
    // Prefill of the batch's prompts, and a decode step at the mean context of the generation.
    let (prefill, pre, pre_busy, _) = pipelined(s, hw, net, b, |n| Work::prefill(n, input));
    let ctx = input + output / 2.0;
    // A decode step carries every beam of the batch's requests.
    let beams = f64::from(s.requests.beams.max(1));
    let (tpot, dec, dec_busy, dec_p2p) = pipelined(s, hw, net, b * beams, |n| Work::decode(n, ctx));
    let steps = output - 1.0;
    let cycle = prefill + steps * tpot;
    let per_replica_tps = b * output / cycle;
    let replicas = f64::from(s.serving.replicas);

    let peak = hw
        .peak(s.arithmetic.precision)
        .unwrap_or(hw.peak_bf16)
        .get();
    let (a_pre, a_dec) = (
        activity(s, hw, &pre, pre_busy),
        activity(s, hw, &dec, dec_busy),
    );
    let p_pre = hw.power(&a_pre).get();
    let p_dec = hw.power(&a_dec).get();
    let energy_gpu = p_pre * prefill + p_dec * steps * tpot;
    let energy_replica = energy_gpu * gpus_per_replica;
    // Executed FLOPs of a cycle on one device over the cycle at the arithmetic's peak.
    let flops_gpu = pre.flops * pre_busy * f64::from(s.serving.pp)
        + steps * dec.flops * dec_busy * f64::from(s.serving.pp);
    let mfu = flops_gpu / cycle / peak;
    // MBU of the decode step: bytes moved per step over the data-sheet bandwidth.
    let mbu = dec.bytes * dec_busy * f64::from(s.serving.pp) / tpot / hw.memory_bandwidth.get();
    let kv = b * s.kv_tokens_per_seq * s.shard.kv_per_token();
    let weights = s.shard.weight_bytes();
    let total = s.fixed_bytes + b * s.per_seq_bytes;
    Evaluation {
        batch,
        max_batch: s.max_batch,
        ttft_s: ttft,
        tpot_s: tpot,
        e2e_s: ttft + steps * tpot,
        prefill_batch_s: prefill,
        output_tokens_per_s: per_replica_tps * replicas,
        requests_per_s: b / cycle * replicas,
        mfu,
        mbu,
        decode_compute_s: dec.compute * f64::from(s.serving.pp),
        decode_memory_s: dec.memory * f64::from(s.serving.pp),
        decode_comm_s: dec.comm * f64::from(s.serving.pp),
        decode_latency_s: dec.latency * f64::from(s.serving.pp),
        decode_overhead_s: dec.overhead * f64::from(s.serving.pp),
        decode_host_s: dec.host * f64::from(s.serving.pp),
        decode_p2p_s: dec_p2p,
        power_prefill_w: p_pre,
        power_decode_w: p_dec,
        power_per_gpu_w: energy_gpu / cycle,
        activity_prefill: a_pre,
        activity_decode: a_dec,
        energy_per_token_j: energy_replica / (b * output),
        energy_per_request_j: energy_replica / b,
        memory: InferMemory {
            weights: Bytes(weights),
            kv_cache: Bytes(kv),
            activations: Bytes(total - weights - kv),
            total: Bytes(total),
            usable: Bytes(s.usable),
            capacity: Bytes(s.memory_capacity),
            kv_per_sequence: Bytes(s.kv_tokens_per_seq * s.shard.kv_per_token()),
        },
    }
}

/// The smallest batch whose throughput sustains `rate` requests/s (all replicas), or an error
/// giving the most any batch sustains.
pub fn batch_for_rate(
    s: &Setup,
    hw: &Hardware,
    net: &Network,
    rate: f64,
) -> Result<Evaluation, InferError> {
    if !(rate.is_finite() && rate > 0.0) {
        return Err(InferError::RateNotPositive(rate));
    }
    // Throughput grows with the batch; bisect for the smallest that sustains the rate.
    let top = estimate(s, hw, net, s.max_batch);
    if top.requests_per_s < rate {
        return Err(InferError::Rate {
            rate,
            max_rate: top.requests_per_s,
            at_batch: s.max_batch,
        });
    }
    let (mut lo, mut hi) = (1u32, s.max_batch);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if estimate(s, hw, net, mid).requests_per_s >= rate {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(estimate(s, hw, net, lo))
}

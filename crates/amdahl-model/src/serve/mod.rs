//! `amdahl serve`: a discrete-event simulation of an LLM server with continuous batching — a
//! stream of requests (Poisson, gamma or a trace; lengths from distributions or the trace), a
//! router over replicas, and on each replica a scheduler after vLLM's V1 (token budget, chunked
//! prefill, FCFS, preemption by recompute when KV blocks run out). Each iteration's time and
//! power come from the inference step model and the power model
//! ([`crate::infer::iteration`]); this module owns scheduling and queues, nothing else. Method
//! and limits: docs/usage/serve.md ("Methodology").

pub mod client;
pub mod datasets;
pub mod defaults;
pub mod engine;
pub mod error;
pub mod kv;
pub mod lengths;
pub mod max_rate;
pub mod multistep;
pub mod result;
pub mod scheduler;
pub mod search;
pub mod separate;
pub mod steady;
pub mod validation;
pub mod workload;

#[cfg(test)]
mod properties;

pub use client::{Client, FRONTEND_MS};
pub use datasets::Side;
pub use defaults::{default_budget, default_max_num_seqs, vllm_defaults};
pub use engine::{RequestRecord, Router, Run, Sample};
pub use error::ServeError;
pub use kv::BLOCK_SIZE;
pub use lengths::Lengths;
pub use result::{
    EnergyDistribution, PrefixCache, Quantiles, ServeResult, TimelinePoint, Unloaded, SERVE_SCHEMA,
};
pub use scheduler::{Limits, PrefillBatching};
pub use workload::{generate, parse_trace, Arrivals, Generated, Request};

use crate::infer::{setup, Requests, Serving, Setup};
use crate::plan::{Hardware, ModelShape, Network};
use engine::Engine;

/// A served configuration: the model on `serving` (tp × pp × replicas), the scheduler's limits,
/// the router, and the client that sends the requests ([`client`]).
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub serving: Serving,
    pub limits: Limits,
    pub router: Router,
    pub client: Client,
}

/// A checked configuration: the step model's setup and the KV blocks of one replica.
pub struct Prepared {
    pub setup: Setup,
    pub kv_blocks: u64,
}

/// Check the configuration and size the KV cache: what is left of the usable memory (vLLM's
/// `gpu_memory_utilization` 0.9) after the weights, the activations of a full token budget and
/// the logits, in blocks of [`BLOCK_SIZE`] tokens.
pub fn prepare(
    model: &ModelShape,
    hw: &Hardware,
    net: &Network,
    c: &Config,
) -> Result<Prepared, ServeError> {
    for (what, v) in [
        ("--max-num-seqs", c.limits.max_num_seqs),
        ("--max-num-batched-tokens", c.limits.max_num_batched_tokens),
    ] {
        if v == 0 {
            return Err(ServeError::Flag {
                what,
                want: "at least 1",
                got: "0".into(),
            });
        }
    }
    let steps = c.limits.num_scheduler_steps;
    if !(1..=multistep::MAX_STEPS).contains(&steps) {
        return Err(ServeError::Flag {
            what: "--num-scheduler-steps",
            want: multistep::STEPS_RANGE,
            got: steps.to_string(),
        });
    }
    // vLLM 0.6.0 refuses chunked prefill with multi-step (multistep.rs): its prompts are
    // prefilled in iterations of their own.
    if steps > 1 && c.limits.prefill == PrefillBatching::Mixed {
        return Err(ServeError::Flag {
            what: "--prefill-batching",
            want: "separate with --num-scheduler-steps above 1 (vLLM 0.6 prefills apart under multi-step scheduling)",
            got: "mixed".into(),
        });
    }
    // `setup` sizes activations for a prompt of `input` tokens: the budget's worth (within the
    // context, which `setup` checks).
    let req = Requests {
        input: c
            .limits
            .max_num_batched_tokens
            .min(model.serving_context().saturating_sub(1))
            .max(1),
        output: 1,
        beams: 1,
    };
    let s = setup(model, hw, net, c.serving, req)?;
    let room = s.usable - s.fixed_bytes;
    let tokens = (room / s.shard.kv_per_token()).max(0.0).floor();
    let kv_blocks = (tokens / f64::from(BLOCK_SIZE)).floor() as u64;
    Ok(Prepared {
        setup: s,
        kv_blocks,
    })
}

/// Check every request against the context and the KV cache (`source` names them in errors);
/// under multi-step scheduling, whose prompts are not chunked, against the token budget too.
pub fn check_requests(
    model: &ModelShape,
    p: &Prepared,
    limits: &Limits,
    requests: &[Request],
    source: &str,
) -> Result<(), ServeError> {
    let capacity = p.kv_blocks * u64::from(BLOCK_SIZE);
    for (i, r) in requests.iter().enumerate() {
        let total = u64::from(r.input_tokens) + u64::from(r.output_tokens);
        if total > u64::from(model.serving_context()) {
            return Err(ServeError::Context {
                source_name: source.into(),
                row: i + 1,
                input: r.input_tokens,
                output: r.output_tokens,
                total,
                context: model.serving_context(),
                model: model.name.clone(),
            });
        }
        // vLLM 0.6 without chunked prefill ignores a prompt longer than the budget, and refuses
        // to start with a budget below `max_model_len` (`SchedulerConfig._verify_args`): a
        // request must fit one prefill iteration, recomputed after a preemption included.
        let budget = limits.max_num_batched_tokens;
        if limits.num_scheduler_steps > 1 && total > u64::from(budget) {
            return Err(ServeError::Unchunked {
                source_name: source.into(),
                row: i + 1,
                total,
                budget,
            });
        }
        if total > capacity {
            return Err(ServeError::KvTooSmall {
                source_name: source.into(),
                row: i + 1,
                tokens: total,
                capacity,
                blocks: p.kv_blocks,
                block: BLOCK_SIZE,
            });
        }
    }
    Ok(())
}

/// Simulate serving `requests` (sorted by arrival, checked with [`check_requests`]).
pub fn simulate(
    p: &Prepared,
    hw: &Hardware,
    net: &Network,
    c: &Config,
    requests: &[Request],
) -> Run {
    run(p, hw, net, c, requests, false)
}

/// [`simulate`], keeping every iteration and delivery ([`Run::trace`]) for a measurement window.
pub fn simulate_traced(
    p: &Prepared,
    hw: &Hardware,
    net: &Network,
    c: &Config,
    requests: &[Request],
) -> Run {
    run(p, hw, net, c, requests, true)
}

fn run(
    p: &Prepared,
    hw: &Hardware,
    net: &Network,
    c: &Config,
    requests: &[Request],
    trace: bool,
) -> Run {
    Engine {
        setup: &p.setup,
        window_setup: multistep::amortised(&p.setup),
        hw,
        net,
        limits: c.limits,
        router: c.router,
        client: c.client,
        kv_blocks: p.kv_blocks,
        trace,
    }
    .run(requests)
}

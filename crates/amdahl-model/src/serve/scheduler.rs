//! One replica's scheduler, after vLLM's V1 scheduler (`vllm/v1/core/sched/scheduler.py`,
//! `Scheduler.schedule`): every iteration has a budget of `max_num_batched_tokens` tokens;
//! running requests are served first, in order — a decoding request takes one token, a request
//! still prefilling takes the rest of its prompt up to the budget (chunked prefill, always on in
//! V1) — then waiting requests are admitted first come, first served while the budget lasts and
//! fewer than `max_num_seqs` run. When a running request needs a KV-cache block and none is free,
//! the most recently admitted running request is preempted: its blocks are freed, its computed
//! tokens forgotten, and it goes back to the front of the queue to be recomputed (prompt and
//! tokens generated so far) — vLLM V1's only preemption mode. An iteration in which a preemption
//! happened admits no new requests (as V1 does).
//!
//! Two other policies share this replica: prefill and decode in separate iterations
//! ([`PrefillBatching::Separate`], [`super::separate`]) and vLLM 0.6's multi-step windows
//! ([`super::multistep`]).

use super::kv::BlockPool;
use crate::infer::step::Work;
use crate::infer::Engine;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// A request inside a replica.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seq {
    /// Index of the request in the run.
    pub req: usize,
    pub prompt: u32,
    pub output: u32,
    /// Tokens whose keys and values are in the cache.
    pub computed: u32,
    /// Output tokens emitted so far.
    pub generated: u32,
    /// KV blocks held.
    pub blocks: u64,
}

impl Seq {
    pub fn new(req: usize, prompt: u32, output: u32) -> Self {
        Seq {
            req,
            prompt,
            output,
            computed: 0,
            generated: 0,
            blocks: 0,
        }
    }

    /// Tokens of the sequence so far: the prompt and the tokens emitted (the last emitted token
    /// is computed in the next iteration, which emits the one after it).
    pub(crate) fn tokens(&self) -> u32 {
        self.prompt + self.generated
    }
}

/// Whether prompt chunks and decode steps share an iteration (`--prefill-batching`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum PrefillBatching {
    /// One iteration holds the running requests' decode steps and the prompt chunks that fit the
    /// rest of the budget: vLLM V1 (chunked prefill, always on) and TensorRT-LLM's in-flight
    /// batching.
    #[default]
    Mixed,
    /// Prefill first, in iterations of its own; the running requests decode only in iterations
    /// without a prompt: SGLang's default (no `--enable-mixed-chunk`), vLLM V0 without chunked
    /// prefill ([`super::separate`]).
    Separate,
}

impl PrefillBatching {
    pub const ALL: [PrefillBatching; 2] = [PrefillBatching::Mixed, PrefillBatching::Separate];
    pub const NAMES: [&'static str; 2] = ["mixed", "separate"];

    pub fn name(self) -> &'static str {
        match self {
            PrefillBatching::Mixed => "mixed",
            PrefillBatching::Separate => "separate",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "mixed" => Some(PrefillBatching::Mixed),
            "separate" => Some(PrefillBatching::Separate),
            _ => None,
        }
    }

    /// The policy when none is given: separate under multi-step scheduling (`steps` > 1, whose
    /// prompts are prefilled apart), else the engine's default — separate for SGLang
    /// (`enable_mixed_chunk` is off unless asked for, `python/sglang/srt/server_args.py`), mixed
    /// for vLLM V1 and TensorRT-LLM.
    pub fn default_for(engine: Engine, steps: u32) -> Self {
        if steps > 1 || engine == Engine::Sglang {
            PrefillBatching::Separate
        } else {
            PrefillBatching::Mixed
        }
    }
}

crate::names::from_str_by_parse!(PrefillBatching, "prefill batching");

/// The scheduler's knobs (vLLM engine arguments of the same names).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    /// Decode steps per scheduling decision (vLLM 0.6's `--num-scheduler-steps`): 1 is the V1
    /// scheduler above; more is vLLM 0.6's multi-step scheduling ([`super::multistep`]).
    pub num_scheduler_steps: u32,
    /// Whether prompts share iterations with decode steps; multi-step scheduling prefills in
    /// iterations of its own whatever this says.
    pub prefill: PrefillBatching,
}

/// One replica: its queue, its running batch and its KV blocks.
#[derive(Debug)]
pub(crate) struct Replica {
    pub waiting: VecDeque<Seq>,
    pub running: Vec<Seq>,
    pub pool: BlockPool,
    /// End of the iteration in flight, if any.
    pub busy_until: Option<f64>,
    /// The iteration in flight: (index into `running`, tokens scheduled).
    pub scheduled: Vec<(usize, u32)>,
    pub busy_s: f64,
    /// Board power of each device during the iteration in flight (the power model's).
    pub power_w: f64,
    /// Multi-step scheduling: steps of the current window left after the one in flight (always
    /// 0 with one step per decision).
    pub window_left: u32,
    /// Multi-step scheduling: a sequence of the current window has finished (it leaves the
    /// batch when the window ends).
    pub finished_in_window: bool,
    /// Tokens emitted by the last iteration and not yet delivered, under vLLM 0.6's
    /// asynchronous output processing (`super::engine`): (request, first, last).
    pub undelivered: Vec<(usize, bool, bool)>,
}

/// What an iteration does, from [`Replica::schedule`].
pub(crate) struct Batch {
    pub work: Work,
    pub tokens: u32,
    /// Requests preempted in this iteration (indices in the run).
    pub preempted: Vec<usize>,
    /// Whether the iteration pays the engine's per-iteration host time.
    pub host: bool,
}

impl Replica {
    pub fn new(pool: BlockPool) -> Self {
        Replica {
            waiting: VecDeque::new(),
            running: Vec::new(),
            pool,
            busy_until: None,
            scheduled: Vec::new(),
            busy_s: 0.0,
            power_w: 0.0,
            window_left: 0,
            finished_in_window: false,
            undelivered: Vec::new(),
        }
    }

    /// Requests waiting or running (the least-loaded router's measure).
    pub fn load(&self) -> usize {
        self.waiting.len() + self.running.len()
    }

    /// Choose the next iteration's work (into `self.scheduled`); `None` when there is nothing to
    /// do.
    pub fn schedule(&mut self, lim: &Limits) -> Option<Batch> {
        self.scheduled.clear();
        let mut budget = lim.max_num_batched_tokens;
        let mut preempted = Vec::new();
        let mut i = 0;
        while i < self.running.len() && budget > 0 {
            let s = self.running[i];
            let new = (s.tokens() - s.computed).min(budget);
            if self.pool.grow(&mut self.running[i], new) {
                self.scheduled.push((i, new));
                budget -= new;
                i += 1;
                continue;
            }
            // No block free: preempt the last running request (FCFS: the latest admitted).
            self.preempt_last(&mut preempted);
        }
        if preempted.is_empty() || self.scheduled.is_empty() {
            self.admit(lim, &mut budget);
        }
        if self.scheduled.is_empty() {
            return None;
        }
        Some(self.batch(preempted, true))
    }

    /// The work of the iteration in `self.scheduled`; `host`: whether it pays the engine's
    /// per-iteration host time (every iteration but a multi-step window's later steps).
    /// Preempt the most recently admitted running request by recompute: its blocks freed, its
    /// progress dropped, back at the head of the queue; its id added to `preempted`.
    pub(crate) fn preempt_last(&mut self, preempted: &mut Vec<usize>) {
        if let Some(mut victim) = self.running.pop() {
            self.pool.release(&mut victim);
            victim.computed = 0;
            preempted.push(victim.req);
            self.waiting.push_front(victim);
        }
    }

    pub(crate) fn batch(&self, preempted: Vec<usize>, host: bool) -> Batch {
        let mut work = Work {
            tokens: 0.0,
            rows: 0.0,
            pairs: 0.0,
            kv_read: 0.0,
        };
        let mut tokens = 0;
        for &(i, n) in &self.scheduled {
            // n new tokens after c cached: each attends to the cached ones and the new ones up to
            // itself (causal), n·c + n(n+1)/2 pairs; the cache is read once. A whole prompt is
            // infer's prefill (c = 0), one token infer's decode step.
            let (n, c) = (f64::from(n), f64::from(self.running[i].computed));
            work.tokens += n;
            work.rows += 1.0;
            work.pairs += n * c + n * (n + 1.0) / 2.0;
            work.kv_read += c;
            tokens += n as u32;
        }
        Batch {
            work,
            tokens,
            preempted,
            host,
        }
    }

    /// Admit waiting requests first come, first served while the budget lasts, fewer than
    /// `max_num_seqs` run and their blocks fit; the last one admitted may get only a chunk of its
    /// prompt.
    pub(crate) fn admit(&mut self, lim: &Limits, budget: &mut u32) {
        while *budget > 0 && self.running.len() < lim.max_num_seqs as usize {
            let Some(mut s) = self.waiting.front().copied() else {
                break;
            };
            let new = (s.tokens() - s.computed).min(*budget);
            if !self.pool.grow(&mut s, new) {
                break;
            }
            self.waiting.pop_front();
            self.running.push(s);
            self.scheduled.push((self.running.len() - 1, new));
            *budget -= new;
        }
    }

    /// Apply the iteration in flight: computed tokens advance; a sequence whose every token is
    /// computed emits its next token. Calls `emit(req, first, last)` for each token emitted and
    /// removes finished requests (their blocks freed) — under multi-step scheduling only when the
    /// window ends, or at once when every sequence of the window has finished.
    pub fn complete(&mut self, mut emit: impl FnMut(usize, bool, bool)) {
        let mut finished = false;
        for &(i, n) in &self.scheduled {
            let s = &mut self.running[i];
            if s.generated >= s.output {
                // Multi-step: a finished sequence computes to the window's end, emitting nothing.
                continue;
            }
            s.computed += n;
            if s.computed == s.tokens() {
                s.generated += 1;
                let last = s.generated >= s.output;
                emit(s.req, s.generated == 1, last);
                finished |= last;
            }
        }
        self.scheduled.clear();
        if self.window_left > 0 {
            if self.running.iter().all(|s| s.generated >= s.output) {
                self.window_left = 0;
            } else {
                self.finished_in_window |= finished;
                return;
            }
        }
        if finished || std::mem::take(&mut self.finished_in_window) {
            let pool = &mut self.pool;
            self.running.retain_mut(|s| {
                let done = s.generated >= s.output;
                if done {
                    pool.release(s);
                }
                !done
            });
        }
    }
}

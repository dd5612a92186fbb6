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

use super::kv::{BlockPool, BLOCK_SIZE};
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
    /// Blocks of the replica's cached prefix this sequence reads without holding them.
    pub shared: u64,
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
            shared: 0,
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
    /// Tokens every prompt begins with (a system prompt: `--shared-prefix`), which the prefix
    /// cache holds once per replica after the first request computed them (`Replica::reuse`).
    pub shared_prefix: u32,
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
    /// Tokens of the shared prefix in the prefix cache: whole blocks of it, once a request has
    /// computed them; 0 before.
    pub cached_prefix: u32,
    /// Prompt tokens admitted (every admission, re-admissions after preemption too) and those
    /// the prefix cache served: vLLM's prefix-cache queries and hits.
    pub prompt_tokens_admitted: u64,
    pub prefix_hit_tokens: u64,
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
            cached_prefix: 0,
            prompt_tokens_admitted: 0,
            prefix_hit_tokens: 0,
        }
    }

    /// A request about to leave the queue reuses the cached prefix: its first tokens, in whole
    /// blocks and short of its last prompt token (whose logits the first output needs), are
    /// taken as computed from the shared blocks (vLLM's automatic prefix caching; SGLang's radix
    /// cache, Zheng et al. 2024).
    pub(crate) fn reuse(&self, s: &mut Seq) {
        let prompt_room = (s.prompt.saturating_sub(1) / BLOCK_SIZE) * BLOCK_SIZE;
        let hit = self.cached_prefix.min(prompt_room);
        s.computed = hit;
        s.shared = u64::from(hit / BLOCK_SIZE);
    }

    /// Count an admission as a prefix-cache query of its tokens and its hits.
    pub(crate) fn admitted(&mut self, s: &Seq) {
        self.prompt_tokens_admitted += u64::from(s.tokens());
        self.prefix_hit_tokens += s.shared * u64::from(BLOCK_SIZE);
    }

    /// Before the replica schedules (the engine calls it as each iteration starts): the first
    /// sequence to have computed the whole shared prefix hands its blocks to the replica's cache,
    /// which keeps them (no eviction is modelled). A prefix no prompt covers is never cached.
    pub(crate) fn cache_prefix(&mut self, shared_prefix: u32) {
        let whole = (shared_prefix / BLOCK_SIZE) * BLOCK_SIZE;
        if whole == 0 || self.cached_prefix > 0 {
            return;
        }
        if let Some(s) = self
            .running
            .iter_mut()
            .find(|s| s.prompt >= whole && s.computed >= whole && s.shared == 0)
        {
            let blocks = u64::from(whole / BLOCK_SIZE);
            s.blocks -= blocks;
            s.shared = blocks;
            self.cached_prefix = whole;
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
            victim.shared = 0;
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
            self.reuse(&mut s);
            let new = (s.tokens() - s.computed).min(*budget);
            if !self.pool.grow(&mut s, new) {
                break;
            }
            self.admitted(&s);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lim(shared_prefix: u32) -> Limits {
        Limits {
            max_num_seqs: 8,
            max_num_batched_tokens: 4096,
            num_scheduler_steps: 1,
            prefill: PrefillBatching::Mixed,
            shared_prefix,
        }
    }

    /// Run iterations until nothing is left, caching the prefix after each as the engine does.
    fn drain(r: &mut Replica, lim: &Limits) {
        while r.schedule(lim).is_some() {
            r.complete(|_, _, _| {});
            r.cache_prefix(lim.shared_prefix);
        }
    }

    #[test]
    fn a_shared_prefix_is_computed_once_and_its_whole_blocks_are_reused() {
        // A 100-token prefix is 6 whole blocks (96 tokens); the last 4 are recomputed.
        let lim = lim(100);
        let mut r = Replica::new(BlockPool::new(1000));
        r.waiting.push_back(Seq::new(0, 300, 2));
        let first = r.schedule(&lim).unwrap();
        assert_eq!(
            first.tokens, 300,
            "the first request computes its whole prompt"
        );
        r.complete(|_, _, _| {});
        r.cache_prefix(lim.shared_prefix);
        assert_eq!(r.cached_prefix, 96);
        // The prefix's 6 blocks now belong to the cache: the request holds the rest of its 300.
        assert_eq!((r.running[0].blocks, r.running[0].shared), (13, 6));
        // A second request computes only past the cached blocks, attending to them.
        r.waiting.push_back(Seq::new(1, 200, 2));
        let b = r.schedule(&lim).unwrap();
        assert_eq!(r.scheduled, [(0, 1), (1, 104)]);
        assert_eq!(b.work.kv_read, 300.0 + 96.0);
        // A prompt no longer than the prefix reuses whole blocks short of its last token.
        r.complete(|_, _, _| {});
        r.waiting.push_back(Seq::new(2, 40, 1));
        r.schedule(&lim).unwrap();
        let by_request: Vec<(usize, u32)> = r
            .scheduled
            .iter()
            .map(|&(i, n)| (r.running[i].req, n))
            .collect();
        assert!(by_request.contains(&(2, 8)), "{by_request:?}");
        drain(&mut r, &lim);
        // Everything finished: only the cache's blocks stay in use.
        assert_eq!(r.pool.used(), 6);
        // Queries and hits: 300, then 200 (96 from the cache), then 40 (32).
        assert_eq!((r.prompt_tokens_admitted, r.prefix_hit_tokens), (540, 128));
    }

    #[test]
    fn without_a_shared_prefix_nothing_is_cached() {
        let lim = lim(0);
        let mut r = Replica::new(BlockPool::new(1000));
        for i in 0..3 {
            r.waiting.push_back(Seq::new(i, 300, 2));
        }
        drain(&mut r, &lim);
        assert_eq!(
            (r.cached_prefix, r.prefix_hit_tokens, r.pool.used()),
            (0, 0, 0)
        );
    }
}

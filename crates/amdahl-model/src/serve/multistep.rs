//! vLLM 0.6's multi-step scheduling (`--num-scheduler-steps K`, K > 1): the scheduler decides
//! once, and the batch it chose decodes K steps before it is consulted again.
//!
//! What vLLM 0.6.0 does, and where it was read (vllm-project/vllm):
//! - **Why.** Each decode step costs CPU work between two GPU passes — the scheduler, input
//!   preparation, the GPU→CPU copy of the sampled tokens and their conversion to Python
//!   objects — during which the GPU idles; multi-step pays it once per K steps (RFC #6854,
//!   "Multi-Step Scheduling"; PR #7000; the vLLM blog "vLLM v0.6.0: 2.7x Throughput Improvement
//!   and 5x Latency Reduction", Sep 2024).
//! - **A window.** `LLMEngine.step` skips the scheduler while the sequences of the cached
//!   schedule have steps left (`_has_remaining_steps`, `vllm/engine/llm_engine.py`), so the batch
//!   is fixed for the window: a request that arrives meanwhile waits for its end, and nothing
//!   leaves it early. Decoding sequences are given K − 1 lookahead KV slots at the window's start
//!   (`num_lookahead_slots = num_scheduler_steps − 1`, `vllm/core/scheduler.py`
//!   `_schedule_running` / `_can_append_slots`), and are preempted (recompute, the last admitted
//!   first) when those blocks are not free.
//! - **Finished sequences keep their slot.** The GPU runs every step for the whole batch; the
//!   tokens a sequence produces past its end are thrown away when the outputs are processed
//!   (`MultiStepOutputProcessor._process_seq_outputs`, "Truncate to max_tokens if necessary",
//!   `vllm/engine/output_processor/multi_step.py`). They are computed, so here they cost time and
//!   are charged to their request, and emit nothing.
//! - **Prefills are iterations of their own.** vLLM 0.6.0 refuses chunked prefill with multi-step
//!   ("Chunked prefill is not supported with multi-step (--num-scheduler-steps > 1)", issue
//!   #8274, on 0.6.0; mixing prompts into a window came after, PR #8378), so the engine runs
//!   V0's default scheduler (`Scheduler._schedule_default`): waiting prompts are admitted first,
//!   whole, first come first served while the token budget (`max_num_batched_tokens`),
//!   `max_num_seqs` and the KV blocks allow, and "don't schedule decodes if prefills are
//!   scheduled": such an iteration is prefill-only and single-step (a prompt is scheduled with no
//!   lookahead slots, `init_multi_step(num_scheduler_steps = 0 + 1)` in `_schedule_prefills`).
//!   Only when no prompt is admitted does a decode window of K steps start.
//!
//! Assumed, not read from vLLM: when every sequence of a window has finished, the window ends
//! (the engine loop steps only while it has unfinished requests); a sequence near its end
//! reserves no more lookahead blocks than it will ever hold.
//!
//! **Output lag.** 0.6.0's asynchronous output processing (on by default; with multi-step since
//! PRs #7921 and #8050) processes a step's outputs while the next step runs and returns them at
//! its end, so every token reaches the client one iteration after the one that computed it, and
//! the last ones when the engine has nothing left to run (`super::engine`, `output_lag`).
//!
//! **Host time.** The step model's fixed per-iteration overhead stands for the engine's CPU work
//! between two GPU passes, which multi-step exists to amortise: a window pays it once, on its
//! first step ([`amortised`]); a prefill-only iteration pays it in full. vLLM's per-sequence time
//! (`--engine vllm`, `infer::engine::VLLM_PER_SEQUENCE_S`) is GPU work and is paid on every step.
//! vLLM 0.6's own CPU time per sequence, which the window also amortises, has no measurement in
//! amdahl and is not modelled; nothing was set from the rows that run with it.

use super::scheduler::{Batch, Limits, Replica};
use crate::infer::Setup;

/// The most steps a window may have. vLLM sets no bound, but its own benchmarks run 8 to 10
/// (PR #7000, the v0.6.0 blog) and a window longer than most outputs only wastes steps; past a
/// few hundred a value is a typing error.
pub const MAX_STEPS: u32 = 256;

/// The valid range, as error messages say it.
pub const STEPS_RANGE: &str = "a whole number from 1 to 256";

/// The setup of a window's later steps: the step model's fixed per-iteration overhead is paid on
/// the window's first step only. The engine's per-sequence time is GPU work, paid on every step.
pub fn amortised(s: &Setup) -> Setup {
    let mut s = *s;
    s.device.overhead = 0.0;
    s
}

impl Replica {
    /// The next iteration under multi-step scheduling with `k` steps per decision: the next step
    /// of the window in flight; else a prefill-only iteration of the waiting prompts that fit;
    /// else a new decode window of the running sequences. `None` when there is nothing to do.
    pub(crate) fn schedule_multistep(&mut self, lim: &Limits, k: u32) -> Option<Batch> {
        self.scheduled.clear();
        if self.window_left > 0 {
            // The batch is fixed: every sequence of the window computes one token, finished or
            // not; no host time.
            self.window_left -= 1;
            self.scheduled
                .extend((0..self.running.len()).map(|i| (i, 1)));
            return Some(self.batch(Vec::new(), false));
        }
        if self.admit_prompts(lim) {
            return Some(self.batch(Vec::new(), true));
        }
        let preempted = self.open_window(k);
        if self.scheduled.is_empty() {
            return None;
        }
        Some(self.batch(preempted, true))
    }

    /// V0's `_schedule_prefills` without chunking: whole prompts (a preempted request's prompt
    /// and the tokens it had generated), first come first served, while they fit the token
    /// budget, fewer than `max_num_seqs` run and their blocks are free. True if any was admitted.
    fn admit_prompts(&mut self, lim: &Limits) -> bool {
        let mut budget = lim.max_num_batched_tokens;
        while self.running.len() < lim.max_num_seqs as usize {
            let Some(mut s) = self.waiting.front().copied() else {
                break;
            };
            self.reuse(&mut s);
            let new = s.tokens() - s.computed;
            if new > budget || !self.pool.grow(&mut s, new) {
                break;
            }
            self.admitted(&s);
            self.waiting.pop_front();
            self.running.push(s);
            self.scheduled.push((self.running.len() - 1, new));
            budget -= new;
        }
        !self.scheduled.is_empty()
    }

    /// Start a window of `k` decode steps over the running sequences: each reserves the blocks
    /// of the tokens it will compute in the window (at most what it will ever hold); when they
    /// are not free the last admitted sequence is preempted by recompute. Returns the requests
    /// preempted.
    fn open_window(&mut self, k: u32) -> Vec<usize> {
        let mut preempted = Vec::new();
        let mut i = 0;
        while i < self.running.len() {
            let s = self.running[i];
            // A sequence computes prompt + output − 1 tokens in all (the last is emitted, never
            // fed back).
            let left = (s.prompt + s.output - 1).saturating_sub(s.computed);
            if self.pool.grow(&mut self.running[i], k.min(left).max(1)) {
                i += 1;
                continue;
            }
            self.preempt_last(&mut preempted);
        }
        self.scheduled
            .extend((0..self.running.len()).map(|i| (i, 1)));
        if !self.running.is_empty() {
            self.window_left = k - 1;
        }
        preempted
    }
}

#[cfg(test)]
mod tests {
    use super::super::kv::BlockPool;
    use super::super::scheduler::{PrefillBatching, Seq};
    use super::*;

    fn lim() -> Limits {
        Limits {
            max_num_seqs: 8,
            max_num_batched_tokens: 100,
            num_scheduler_steps: 4,
            prefill: PrefillBatching::Separate,
            shared_prefix: 0,
        }
    }

    /// A token emitted: (request, first, last).
    type Emitted = (usize, bool, bool);

    /// Run one iteration: schedule it and complete it, returning the tokens scheduled and those
    /// emitted.
    fn step(r: &mut Replica, lim: &Limits) -> Option<(u32, Vec<Emitted>)> {
        let b = r.schedule_multistep(lim, lim.num_scheduler_steps)?;
        let mut out = Vec::new();
        r.complete(|req, first, last| out.push((req, first, last)));
        Some((b.tokens, out))
    }

    #[test]
    fn a_window_is_fixed_prompts_wait_for_its_end_and_finished_sequences_keep_their_slot() {
        let lim = lim();
        let mut r = Replica::new(BlockPool::new(1000));
        // Request 0: 10-token prompt, 3 output tokens; request 1: 10 + 20.
        r.waiting.push_back(Seq::new(0, 10, 3));
        r.waiting.push_back(Seq::new(1, 10, 20));
        // A prefill-only iteration of both prompts (whole, within the budget): first tokens.
        let (tokens, out) = step(&mut r, &lim).unwrap();
        assert_eq!(tokens, 20);
        assert_eq!(out, vec![(0, true, false), (1, true, false)]);
        assert_eq!(r.window_left, 0);
        // A window of 4 decode steps opens; request 2 arrives during its first step.
        let (tokens, out) = step(&mut r, &lim).unwrap();
        assert_eq!((tokens, r.window_left), (2, 3));
        assert_eq!(out.len(), 2);
        r.waiting.push_back(Seq::new(2, 10, 5));
        // Step 2: request 0 emits its last token (3 of 3) but stays in the batch.
        let (tokens, out) = step(&mut r, &lim).unwrap();
        assert_eq!(tokens, 2);
        assert_eq!(out, vec![(0, false, true), (1, false, false)]);
        assert_eq!(r.running.len(), 2, "a finished sequence keeps its slot");
        // Steps 3 and 4: both still computed, only request 1 emits; request 2 still waits.
        for _ in 0..2 {
            let (tokens, out) = step(&mut r, &lim).unwrap();
            assert_eq!(tokens, 2);
            assert_eq!(out, vec![(1, false, false)]);
            assert_eq!(r.waiting.len(), 1);
        }
        // The window is over: request 0 leaves, request 2's prompt runs alone.
        assert_eq!((r.window_left, r.running.len()), (0, 1));
        let (tokens, out) = step(&mut r, &lim).unwrap();
        assert_eq!(tokens, 10);
        assert_eq!(out, vec![(2, true, false)]);
    }

    #[test]
    fn a_window_whose_sequences_all_finish_ends_early() {
        let lim = lim();
        let mut r = Replica::new(BlockPool::new(1000));
        r.waiting.push_back(Seq::new(0, 10, 2));
        step(&mut r, &lim).unwrap();
        // One decode step finishes it; the 3 steps left are not run.
        let (_, out) = step(&mut r, &lim).unwrap();
        assert_eq!(out, vec![(0, false, true)]);
        assert_eq!((r.window_left, r.running.len()), (0, 0));
        assert!(r.schedule_multistep(&lim, 4).is_none());
    }

    #[test]
    fn a_window_reserves_its_blocks_and_preempts_the_last_admitted_when_they_run_out() {
        // Blocks of 16 tokens; each sequence holds 16 computed tokens after its prompt plus the
        // emitted one, so a window of 4 needs a second block for each; only one is free.
        let lim = lim();
        let mut r = Replica::new(BlockPool::new(3));
        r.waiting.push_back(Seq::new(0, 16, 50));
        r.waiting.push_back(Seq::new(1, 16, 50));
        step(&mut r, &lim).unwrap();
        assert_eq!(r.pool.free, 1);
        let b = r.schedule_multistep(&lim, 4).unwrap();
        assert_eq!(b.preempted, vec![1]);
        assert_eq!(r.running.len(), 1);
        assert_eq!(r.running[0].blocks, 2, "16 computed + 4 in the window");
        assert_eq!(r.waiting.front().map(|s| (s.req, s.computed)), Some((1, 0)));
    }

    #[test]
    fn amortised_steps_pay_no_fixed_overhead() {
        let model = crate::plan::catalog_model("llama3-8b").unwrap();
        let (hw, net) = crate::plan::catalog_system("h100").unwrap();
        let serving = crate::infer::Serving {
            tp: 1,
            pp: 1,
            replicas: 1,
            weights: crate::infer::WeightFormat::Bf16,
            kv: crate::infer::KvFormat::Bf16,
            engine: crate::infer::Engine::Vllm,
            memory_fraction: None,
        };
        let req = crate::infer::Requests {
            input: 512,
            output: 1,
            beams: 1,
        };
        let s = crate::infer::setup(&model, &hw, &net, serving, req).unwrap();
        let w = crate::infer::step::Work {
            tokens: 64.0,
            rows: 64.0,
            pairs: 64.0 * 600.0,
            kv_read: 64.0 * 600.0,
        };
        let full = crate::infer::iteration(&s, &hw, &net, &w).time;
        let later = crate::infer::iteration(&amortised(&s), &hw, &net, &w).time;
        // The difference is exactly the fixed overhead; the 64 sequences' per-sequence time (GPU
        // work) is in both.
        assert!(s.device.per_sequence > 0.0);
        assert!(
            ((full - later) - s.device.overhead).abs() < 1e-12,
            "{full} {later} {}",
            s.device.overhead
        );
    }
}

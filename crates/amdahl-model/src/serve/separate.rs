//! Prefill first, in iterations of its own (`--prefill-batching separate`): an iteration either
//! prefills — prompt chunks only, the running requests' decode steps wait — or decodes every
//! running request one token, never both.
//!
//! What the engines do, and where it was read:
//! - **SGLang** (the default unless `--enable-mixed-chunk`, `enable_mixed_chunk = False` in
//!   `python/sglang/srt/server_args.py`): each loop first tries a new prefill batch and runs a
//!   decode batch only when there is none (0.3: `ModelTpServer.forward_step`,
//!   `python/sglang/srt/managers/tp_worker.py`; later `Scheduler.get_next_batch_to_run`). The
//!   prefill batch (`get_new_prefill_batch`, `PrefillAdder`) takes the request left partly
//!   prefilled by the last one first (the "in-flight" request), then waiting requests first come,
//!   first served while `chunked_prefill_size` tokens and `max_running_requests` allow, the last
//!   cut to what is left of the budget. Here the budget is `max_num_batched_tokens`.
//! - **vLLM V0 without chunked prefill** (`Scheduler._schedule_default`, "don't schedule decodes
//!   if prefills are scheduled") admits whole prompts and waits with a prompt that does not fit
//!   the rest of the budget instead of cutting it; multi-step scheduling
//!   ([`super::multistep`]) is that scheduler with decode windows, and this policy cuts as SGLang
//!   does (with a budget of at least the context, as V0 requires, the two differ only in the
//!   last prompt of a full iteration).
//!
//! Not modelled: SGLang's decode-time reservation of future tokens (`new_token_ratio`, which
//! admits fewer requests than the free blocks allow) and its retraction of decoding requests
//! when memory runs out (here: preemption by recompute, the last admitted first, as in V1).

use super::scheduler::{Batch, Limits, Replica};

impl Replica {
    /// The next iteration with prefill and decode apart: a prefill-only iteration when a prompt
    /// is left partly prefilled or a waiting one can be admitted, else one decode step of every
    /// running request. `None` when there is nothing to do.
    pub(crate) fn schedule_separate(&mut self, lim: &Limits) -> Option<Batch> {
        self.scheduled.clear();
        if self.prefill_chunks(lim) {
            return Some(self.batch(Vec::new(), true));
        }
        let preempted = self.decode_running();
        if self.scheduled.is_empty() {
            return None;
        }
        Some(self.batch(preempted, true))
    }

    /// Schedule a prefill-only iteration: the running requests still prefilling (more than one
    /// token to compute) first, then waiting ones as [`Replica::admit`] does. True if any
    /// prompt token was scheduled.
    fn prefill_chunks(&mut self, lim: &Limits) -> bool {
        let mut budget = lim.max_num_batched_tokens;
        for i in 0..self.running.len() {
            let left = self.running[i].tokens() - self.running[i].computed;
            if budget == 0 {
                break;
            }
            if left <= 1 {
                continue;
            }
            let n = left.min(budget);
            if self.pool.grow(&mut self.running[i], n) {
                self.scheduled.push((i, n));
                budget -= n;
            }
        }
        self.admit(lim, &mut budget);
        !self.scheduled.is_empty()
    }

    /// Schedule one decode step of every running request whose prompt is computed; a request
    /// that needs a KV block when none is free preempts the last admitted (recompute). Returns
    /// the requests preempted.
    fn decode_running(&mut self) -> Vec<usize> {
        let mut preempted = Vec::new();
        let mut i = 0;
        while i < self.running.len() {
            let s = self.running[i];
            if s.tokens() - s.computed > 1 {
                // Still prefilling (its blocks were not free): it waits for a prefill iteration.
                i += 1;
                continue;
            }
            if self.pool.grow(&mut self.running[i], 1) {
                self.scheduled.push((i, 1));
                i += 1;
                continue;
            }
            self.preempt_last(&mut preempted);
        }
        preempted
    }
}

#[cfg(test)]
mod tests {
    use super::super::kv::BlockPool;
    use super::super::scheduler::{PrefillBatching, Seq};
    use super::*;

    fn lim(budget: u32) -> Limits {
        Limits {
            max_num_seqs: 8,
            max_num_batched_tokens: budget,
            num_scheduler_steps: 1,
            prefill: PrefillBatching::Separate,
            shared_prefix: 0,
        }
    }

    /// Tokens of the iteration in flight by request: (request, tokens).
    fn scheduled(r: &Replica) -> Vec<(usize, u32)> {
        r.scheduled
            .iter()
            .map(|&(i, n)| (r.running[i].req, n))
            .collect()
    }

    #[test]
    fn a_prompt_stops_the_decodes_and_a_long_one_is_chunked_across_iterations() {
        let mut r = Replica::new(BlockPool::new(1000));
        r.waiting.push_back(Seq::new(0, 10, 5));
        // Request 0's prompt alone; it emits its first token.
        let b = r.schedule_separate(&lim(64)).unwrap();
        assert_eq!(scheduled(&r), [(0, 10)]);
        assert_eq!(b.tokens, 10);
        r.complete(|_, _, _| {});
        // A prompt of 100 arrives: the budget of 64 cuts it; request 0 does not decode.
        r.waiting.push_back(Seq::new(1, 100, 5));
        r.schedule_separate(&lim(64)).unwrap();
        assert_eq!(scheduled(&r), [(1, 64)]);
        r.complete(|_, _, _| {});
        // The rest of it comes first in the next iteration, still without decodes.
        r.schedule_separate(&lim(64)).unwrap();
        assert_eq!(scheduled(&r), [(1, 36)]);
        r.complete(|_, _, _| {});
        // No prompt left: both decode together, one token each.
        let b = r.schedule_separate(&lim(64)).unwrap();
        assert_eq!(scheduled(&r), [(0, 1), (1, 1)]);
        assert_eq!(b.work.rows, 2.0);
        // 10 and 100 tokens in the cache, each adding the token it emitted last.
        assert_eq!(b.work.kv_read, 10.0 + 100.0);
    }

    #[test]
    fn a_decode_step_that_finds_no_block_preempts_the_last_admitted() {
        // Two blocks of 16 tokens: two 16-token prompts fill them, the next token needs a third.
        let mut r = Replica::new(BlockPool::new(2));
        r.waiting.push_back(Seq::new(0, 16, 4));
        r.waiting.push_back(Seq::new(1, 16, 4));
        r.schedule_separate(&lim(64)).unwrap();
        assert_eq!(scheduled(&r), [(0, 16), (1, 16)]);
        r.complete(|_, _, _| {});
        let b = r.schedule_separate(&lim(64)).unwrap();
        assert_eq!(b.preempted, [1]);
        assert_eq!(scheduled(&r), [(0, 1)]);
        assert_eq!(r.waiting.front().map(|s| (s.req, s.computed)), Some((1, 0)));
    }

    #[test]
    fn nothing_to_do_is_none() {
        let mut r = Replica::new(BlockPool::new(10));
        assert!(r.schedule_separate(&lim(64)).is_none());
    }
}

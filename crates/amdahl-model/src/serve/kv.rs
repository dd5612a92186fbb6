//! KV-cache block accounting (PagedAttention: Kwon et al. 2023): the cache is split into blocks
//! of [`BLOCK_SIZE`] tokens; a sequence holds ⌈tokens / block⌉ blocks and grows block by block.

use super::scheduler::Seq;

/// Tokens per KV block: vLLM's default `--block-size` on CUDA (vLLM engine arguments).
pub const BLOCK_SIZE: u32 = 16;

/// The free blocks of one replica.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockPool {
    pub total: u64,
    pub free: u64,
}

impl BlockPool {
    pub fn new(total: u64) -> Self {
        BlockPool { total, free: total }
    }

    /// Blocks holding `tokens` tokens.
    pub fn blocks(tokens: u64) -> u64 {
        tokens.div_ceil(u64::from(BLOCK_SIZE))
    }

    /// Give `s` the blocks for `new` more computed tokens, beyond the cached prefix blocks it
    /// shares; false (and nothing taken) when too few are free.
    pub fn grow(&mut self, s: &mut Seq, new: u32) -> bool {
        let want = Self::blocks(u64::from(s.computed) + u64::from(new)).saturating_sub(s.shared);
        let extra = want.saturating_sub(s.blocks);
        if extra > self.free {
            return false;
        }
        self.free -= extra;
        s.blocks = s.blocks.max(want);
        true
    }

    pub fn release(&mut self, s: &mut Seq) {
        self.free = (self.free + s.blocks).min(self.total);
        s.blocks = 0;
    }

    pub fn used(&self) -> u64 {
        self.total - self.free
    }
}

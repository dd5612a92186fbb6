//! Context parallelism's K/V ring per layer and microbatch (plan/context.rs).

use super::layer::LayerTimes;
use super::{link, Setting};
use crate::plan::context::{exposed_ring_time, kv_chunk_bytes};
use crate::plan::spec::Recompute;

/// Context-parallel communication of one layer for one microbatch, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextParallel {
    /// The K/V ring exchange not hidden behind the attention blocks (0 without CP).
    pub layer: f64,
}

/// The K/V ring not hidden behind the attention blocks: forward, backward, and under full
/// recomputation the recomputed forward, which passes K and V around the ring again.
pub fn context_parallel(x: &Setting, lt: &LayerTimes) -> ContextParallel {
    let l = x.l;
    let full = l.recompute == Recompute::Full;
    let cp_link = link(x.net, l.tp_cp());
    let layer = exposed_ring_time(
        cp_link,
        l,
        kv_chunk_bytes(x.model, l),
        lt.attn_fwd,
        lt.attn_bwd + if full { lt.attn_fwd } else { 0.0 },
    ) * if full { 4.0 / 3.0 } else { 1.0 };
    ContextParallel { layer }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::perf::layer::layer;
    use crate::plan::perf::phase_tests::{base, close, setting, setup};
    use crate::plan::spec::Layout;

    #[test]
    fn the_ring_is_free_without_cp_and_a_third_longer_with_full_recomputation() {
        let (m, hw, net) = setup();
        let l = base();
        let x = setting(&m, &hw, &net, &l);
        assert_eq!(context_parallel(&x, &layer(&x)).layer, 0.0);
        // cp 2 × tp 8 spans two nodes: the ring runs over the inter-node tier; the recomputed
        // forward sends K and V around once more (4/3 of forward + backward's three passes).
        let l = Layout {
            cp: 2,
            dp: 12,
            ..base()
        };
        let x = setting(&m, &hw, &net, &l);
        let lt = layer(&x);
        let ring = exposed_ring_time(
            net.inter_link(),
            &l,
            kv_chunk_bytes(&m, &l),
            lt.attn_fwd,
            lt.attn_bwd + lt.attn_fwd,
        );
        close(context_parallel(&x, &lt).layer, ring * 4.0 / 3.0);
    }
}

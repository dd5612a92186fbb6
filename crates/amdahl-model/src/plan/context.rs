//! Context parallelism: a sequence split over `cp` ranks, attention computed by passing K and V
//! around a ring (Liu, Zaharia, Abbeel 2023, "Ring Attention with Blockwise Transformers";
//! Megatron-Core / Transformer Engine context parallelism; Llama 3, Dubey et al. 2024 §3.3.2).
//!
//! Each rank keeps `s/cp` tokens of every activation, so every GEMM, element-wise kernel and
//! activation shrinks by `cp`; the core attention of a rank's queries still spans all `s` keys,
//! so its FLOPs shrink by `cp` only (not `cp²`). The ring has `cp − 1` steps per layer: the
//! forward sends this rank's K and V chunk (`2·b·(s/cp)·h·(k/a)/t` elements), the backward sends
//! K, V and their gradients (twice the forward's bytes). Each step overlaps with the attention
//! block computed on the chunk already received, so only the part of a step's transfer longer
//! than its `1/cp` share of the attention compute is exposed.

use super::collective::p2p;
use super::hardware::Link;
use super::spec::Layout;
use super::spec::ModelShape;

/// The shape each context-parallel rank computes on: the sequence divided by `cp`.
pub fn local_shape(model: &ModelShape, cp: u32) -> ModelShape {
    ModelShape {
        seq: model.seq / cp.max(1),
        ..model.clone()
    }
}

/// Bytes of one rank's K and V chunk for one layer and microbatch, split by TP.
pub fn kv_chunk_bytes(model: &ModelShape, l: &Layout) -> f64 {
    let local = f64::from(model.seq) / f64::from(l.cp.max(1));
    2.0 * f64::from(l.mbs) * local * model.kv_width() / f64::from(l.tp)
        * l.precision.activation_bytes()
}

/// Exposed ring time of one layer, one microbatch, forward + backward: `attn_fwd`/`attn_bwd` are
/// this rank's whole core-attention times for the layer.
pub fn exposed_ring_time(link: &Link, l: &Layout, chunk: f64, attn_fwd: f64, attn_bwd: f64) -> f64 {
    if l.cp <= 1 {
        return 0.0;
    }
    let cp = f64::from(l.cp);
    let steps = cp - 1.0;
    let fwd = (p2p(link, chunk) - attn_fwd / cp).max(0.0);
    let bwd = (p2p(link, 2.0 * chunk) - attn_bwd / cp).max(0.0);
    steps * (fwd + bwd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{BytesPerSecond, Seconds};

    #[test]
    fn ring_is_hidden_when_attention_is_long_and_exposed_when_short() {
        let link = Link {
            bandwidth: BytesPerSecond(50e9),
            latency: Seconds(10e-6),
            efficiency: 1.0,
        };
        let l = Layout {
            cp: 4,
            ..Layout::default()
        };
        // 1 MB chunk: 30 µs per forward step, 50 µs backward.
        assert_eq!(exposed_ring_time(&link, &l, 1e6, 1.0, 2.0), 0.0);
        let t = exposed_ring_time(&link, &l, 1e6, 0.0, 0.0);
        assert!((t - 3.0 * (30e-6 + 50e-6)).abs() < 1e-12, "{t}");
        // No context parallelism, no ring.
        assert_eq!(
            exposed_ring_time(&link, &Layout::default(), 1e6, 0.0, 0.0),
            0.0
        );
    }
}

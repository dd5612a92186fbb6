//! α–β costs of the collectives on one network tier.
//!
//! Sources: R. Thakur, R. Rabenseifner, W. Gropp, "Optimization of Collective Communication
//! Operations in MPICH", IJHPCA 19(1) 2005 (ring reduce-scatter/all-gather and all-reduce);
//! P. Patarasuk, X. Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
//! JPDC 69(2) 2009 (ring all-reduce is bandwidth-optimal: 2(p−1)/p · M/β); NCCL's double binary
//! tree (Sanders, Speck, Träff 2009) for latency-bound messages: 2·⌈log₂ p⌉·α + 2·M/β.
//! `M` is the message size per rank in bytes; β the achieved per-rank bandwidth.

use super::hardware::{Link, Network};

/// Ring all-reduce: 2(p−1)·α + 2(p−1)/p · M/β.
pub fn ring_all_reduce(link: &Link, p: f64, bytes: f64) -> f64 {
    if p <= 1.0 {
        return 0.0;
    }
    2.0 * (p - 1.0) * link.latency.get() + 2.0 * (p - 1.0) / p * bytes / link.effective_bandwidth()
}

/// Double-binary-tree all-reduce: 2·⌈log₂ p⌉·α + 2·M/β.
pub fn tree_all_reduce(link: &Link, p: f64, bytes: f64) -> f64 {
    if p <= 1.0 {
        return 0.0;
    }
    2.0 * p.log2().ceil() * link.latency.get() + 2.0 * bytes / link.effective_bandwidth()
}

/// All-reduce as the library picks it: the cheaper of ring and tree.
pub fn all_reduce(link: &Link, p: f64, bytes: f64) -> f64 {
    ring_all_reduce(link, p, bytes).min(tree_all_reduce(link, p, bytes))
}

/// Ring all-gather or reduce-scatter of a buffer of `bytes` in total: (p−1)·α + (p−1)/p · M/β.
pub fn all_gather(link: &Link, p: f64, bytes: f64) -> f64 {
    if p <= 1.0 {
        return 0.0;
    }
    (p - 1.0) * link.latency.get() + (p - 1.0) / p * bytes / link.effective_bandwidth()
}

/// All-to-all of `bytes` per rank (its whole send buffer, an equal share to every rank of the
/// group) among `p` ranks of which `local` share a node: pairwise exchange, (p−1)·α + (p−1)/p ·
/// M/β on one tier (Thakur et al. 2005, §3.6). A group that spans nodes sends (local−1)/p of
/// the buffer over the intra-node link and (p−local)/p over the inter-node network at the same
/// time; the slower of the two is the cost (each device's own network interface is the
/// bottleneck, as in DeepSeek-V3's dispatch, DeepSeek-AI 2024 §3.2.2).
pub fn all_to_all(net: &Network, p: f64, local: f64, bytes: f64) -> f64 {
    if p <= 1.0 {
        return 0.0;
    }
    let local = local.clamp(1.0, p);
    let tier = |link: &Link, peers: f64| {
        if peers <= 0.0 {
            0.0
        } else {
            peers * link.latency.get() + peers / p * bytes / link.effective_bandwidth()
        }
    };
    tier(net.intra_link(), local - 1.0).max(tier(net.inter_link(), p - local))
}

/// Point-to-point send of `bytes`: α + M/β.
pub fn p2p(link: &Link, bytes: f64) -> f64 {
    link.latency.get() + bytes / link.effective_bandwidth()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{BytesPerSecond, Seconds};

    fn link() -> Link {
        Link {
            bandwidth: BytesPerSecond(100e9),
            latency: Seconds(5e-6),
            efficiency: 1.0,
        }
    }

    #[test]
    fn ring_all_reduce_is_twice_all_gather() {
        // Reduce-scatter + all-gather = all-reduce (Thakur et al. 2005, §4).
        let l = link();
        let ar = ring_all_reduce(&l, 8.0, 1e9);
        assert!((ar - 2.0 * all_gather(&l, 8.0, 1e9)).abs() < 1e-12);
        // 2·7/8·1 GB / 100 GB/s = 17.5 ms plus 14·5 µs.
        assert!((ar - (0.0175 + 70e-6)).abs() < 1e-9);
    }

    #[test]
    fn all_to_all_inside_a_node_is_pairwise_exchange_and_across_nodes_is_nic_bound() {
        let net = Network {
            gpus_per_node: 8,
            intra: Some(link()),
            inter: Some(Link {
                bandwidth: BytesPerSecond(50e9),
                latency: Seconds(10e-6),
                efficiency: 1.0,
            }),
            dp_rails: None,
        };
        // 8 ranks in one node, 1 GB each: 7·5 µs + 7/8 GB / 100 GB/s.
        let t = all_to_all(&net, 8.0, 8.0, 1e9);
        assert!((t - (35e-6 + 0.00875)).abs() < 1e-12);
        // 64 ranks over 8 nodes: 56/64 of the buffer leaves the node at 50 GB/s.
        let t = all_to_all(&net, 64.0, 8.0, 1e9);
        assert!((t - (56.0 * 10e-6 + 56.0 / 64.0 * 1e9 / 50e9)).abs() < 1e-12);
        assert_eq!(all_to_all(&net, 1.0, 1.0, 1e9), 0.0);
    }

    #[test]
    fn tree_wins_for_small_messages_on_many_ranks() {
        let l = link();
        assert!(all_reduce(&l, 1024.0, 1e3) < ring_all_reduce(&l, 1024.0, 1e3));
        assert_eq!(all_reduce(&l, 1.0, 1e9), 0.0);
    }
}

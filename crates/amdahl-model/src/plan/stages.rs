//! How the transformer layers are split over pipeline stages when `--pp` does not divide them.
//!
//! Each stage gets ⌈L/p⌉ layers; the p·⌈L/p⌉ − L layers too many are taken one each from the
//! first and the last stage first (they also carry the embedding and the output layer + loss),
//! then from the stages before the last. This is what the published runs did: Llama 3 405B puts
//! 126 layers on 16 stages with one layer fewer on the first and the last (Dubey et al. 2024,
//! §3.3.2); BLOOM puts 70 layers on 12 stages as 5 + 6 × 10 + 5, counting the two embedding
//! stages as a layer each (BigScience, Megatron-DeepSpeed `--pp-partition-method type:transformer|embedding`).

/// Layers on each of the `pp` stages, first to last; `None` when a stage would be empty
/// (pp > layers) or pp = 0.
pub fn stage_layers(layers: u32, pp: u32) -> Option<Vec<u32>> {
    if pp == 0 || pp > layers {
        return None;
    }
    let per = layers.div_ceil(pp);
    let mut stages = vec![per; pp as usize];
    let mut extra = per * pp - layers;
    // Order in which stages give a layer back: first, last, then from the second-to-last down.
    let last = pp as usize - 1;
    let mut order = vec![0, last];
    order.extend((1..last).rev());
    order.dedup();
    // extra < p and every stage starts with ⌈L/p⌉ ≥ 2 when extra > 0: one pass suffices; the
    // bound only guards the loop.
    for &i in order.iter().cycle().take(order.len() * per as usize) {
        if extra == 0 {
            break;
        }
        if let Some(n) = stages.get_mut(i) {
            if *n > 1 {
                *n -= 1;
                extra -= 1;
            }
        }
    }
    Some(stages)
}

/// The largest number of layers any stage holds.
pub fn max_stage_layers(layers: u32, pp: u32) -> u32 {
    stage_layers(layers, pp)
        .and_then(|s| s.into_iter().max())
        .unwrap_or(layers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_splits() {
        // Llama 3 405B (Dubey et al. 2024 §3.3.2): 126 layers, 16 stages, first and last 7.
        let s = stage_layers(126, 16).unwrap_or_default();
        assert_eq!(s.len(), 16);
        assert_eq!(
            (s[0], s[15], s[1..15].iter().all(|&n| n == 8)),
            (7, 7, true)
        );
        // BLOOM: 70 layers on 12 stages, 5 + 10 × 6 + 5.
        let s = stage_layers(70, 12).unwrap_or_default();
        assert_eq!((s[0], s[11], s.iter().sum::<u32>()), (5, 5, 70));
        // Divisible: even.
        assert_eq!(stage_layers(96, 8), Some(vec![12; 8]));
        // Many layers to give back: every stage keeps at least one.
        let s = stage_layers(17, 16).unwrap_or_default();
        assert_eq!(
            (s.iter().sum::<u32>(), *s.iter().min().unwrap_or(&0)),
            (17, 1)
        );
        assert_eq!(stage_layers(4, 5), None);
        assert_eq!(max_stage_layers(126, 16), 8);
    }
}

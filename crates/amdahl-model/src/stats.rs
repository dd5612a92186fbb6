//! Order statistics of repeated measurements: one median and one quantile for every crate that
//! summarises runs (amdahl-bench's timings and cache-level bandwidths, amdahl-meter's scaling
//! runs).
//!
//! The quantile is Hyndman & Fan's (1996) definition 7 — linear interpolation between the order
//! statistics x₍ₖ₎ and x₍ₖ₊₁₎ at h = q·(n − 1), the default of R and NumPy — so the median is
//! the middle value of an odd count and halfway between the middle two of an even one.

/// A copy of `xs` in ascending order ([`f64::total_cmp`]: −0 before +0, NaN last), ready for
/// [`quantile`] and [`median`].
pub fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// The q-quantile of `sorted` (ascending, see [`sorted`]), Hyndman & Fan (1996) definition 7:
/// with h = q·(n − 1), x₍⌊h⌋₎ + (h − ⌊h⌋)·(x₍⌊h⌋+1₎ − x₍⌊h⌋₎). `q` is clamped to [0, 1], so
/// q = 0 is the minimum and q = 1 the maximum. `None` when there is no data.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let h = q.clamp(0.0, 1.0) * last as f64;
    let (lo, frac) = (h.floor() as usize, h - h.floor());
    let a = *sorted.get(lo)?;
    let b = sorted.get(lo + 1).copied().unwrap_or(a);
    Some(a + frac * (b - a))
}

/// A multiset given as (value, count) pairs, ready for [`quantile`]'s definition without
/// being expanded: the serving simulator's inter-token gaps, millions of tokens on a few
/// thousand distinct gaps, are summarised this way.
#[derive(Debug, Clone, Default)]
pub struct Counted {
    values: Vec<f64>,
    /// How many elements lie at or below `values[i]`.
    through: Vec<u64>,
}

impl Counted {
    /// From (value, count) pairs in ascending order of value.
    pub fn new(sorted: &[(f64, u64)]) -> Self {
        let mut seen = 0;
        let (values, through) = sorted
            .iter()
            .filter(|&&(_, c)| c > 0)
            .map(|&(v, c)| {
                seen += c;
                (v, seen)
            })
            .unzip();
        Counted { values, through }
    }

    /// How many elements.
    pub fn count(&self) -> u64 {
        self.through.last().copied().unwrap_or(0)
    }

    /// The q-quantile of the expanded multiset, as [`quantile`] defines it. `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let last = self.count().checked_sub(1)?;
        let h = q.clamp(0.0, 1.0) * last as f64;
        let lo = h.floor() as u64;
        let frac = h - h.floor();
        // The k-th order statistic (0-based): the first value whose running count passes k.
        let at = |k: u64| self.values[self.through.partition_point(|&c| c <= k)];
        let a = at(lo);
        let b = if lo < last { at(lo + 1) } else { a };
        Some(a + frac * (b - a))
    }
}

/// The median of `sorted` (ascending): its 0.5-[`quantile`]. `None` when there is no data.
pub fn median(sorted: &[f64]) -> Option<f64> {
    quantile(sorted, 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[1.0, 2.0, 3.0]), Some(2.0));
        assert_eq!(median(&[1.0, 2.0, 3.0, 4.0]), Some(2.5));
        assert_eq!(median(&[1.0, 2.0, 3.0, 10.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn quantiles_interpolate_as_definition_7() {
        // R: quantile(1:5, c(0, .25, .5, .75, 1)) = 1 2 3 4 5; quantile(1:4, .25) = 1.75.
        let s = [1.0, 2.0, 3.0, 4.0, 5.0];
        let qs: Vec<_> = [0.0, 0.25, 0.5, 0.75, 1.0]
            .iter()
            .map(|&q| quantile(&s, q).unwrap())
            .collect();
        assert_eq!(qs, [1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.25), Some(1.75));
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.75), Some(3.25));
        assert_eq!(quantile(&[], 0.5), None);
        // Out of range q is clamped to the extremes.
        assert_eq!(quantile(&s, -1.0), Some(1.0));
        assert_eq!(quantile(&s, 2.0), Some(5.0));
    }

    #[test]
    fn quantile_of_counts_is_the_quantile_of_the_expanded_multiset() {
        let counted = [(1.0, 3), (2.0, 1), (5.0, 4)];
        let expanded = [1.0, 1.0, 1.0, 2.0, 5.0, 5.0, 5.0, 5.0];
        for q in [0.0, 0.1, 0.25, 0.4, 0.5, 0.9, 0.99, 1.0] {
            assert_eq!(
                Counted::new(&counted).quantile(q),
                quantile(&expanded, q),
                "q {q}"
            );
        }
        assert_eq!(Counted::new(&[(3.0, 0)]).quantile(0.5), None);
        assert_eq!(Counted::new(&[]).quantile(0.5), None);
        assert_eq!(Counted::new(&counted).count(), 8);
    }

    #[test]
    fn sorted_orders_by_total_cmp() {
        assert_eq!(sorted(&[3.0, -1.0, 2.0]), [-1.0, 2.0, 3.0]);
        assert!(sorted(&[f64::NAN, 1.0])[1].is_nan());
    }

    proptest! {
        #[test]
        fn quantile_lies_between_extremes_and_grows_with_q(
            xs in proptest::collection::vec(-1e6f64..1e6, 1..30),
            p in 0.0f64..=1.0,
            q in 0.0f64..=1.0,
        ) {
            let s = sorted(&xs);
            let (lo, hi) = (p.min(q), p.max(q));
            let (a, b) = (quantile(&s, lo).unwrap(), quantile(&s, hi).unwrap());
            prop_assert!(s[0] <= a && a <= b && b <= s[s.len() - 1]);
            prop_assert_eq!(quantile(&s, 0.0), Some(s[0]));
            prop_assert_eq!(quantile(&s, 1.0), Some(s[s.len() - 1]));
        }

        #[test]
        fn median_does_not_depend_on_order_and_splits_the_data(
            mut xs in proptest::collection::vec(-1e6f64..1e6, 1..30),
        ) {
            let m = median(&sorted(&xs)).unwrap();
            xs.reverse();
            prop_assert_eq!(median(&sorted(&xs)), Some(m));
            // At least half the values lie on each side of the median.
            let below = xs.iter().filter(|&&x| x <= m).count();
            let above = xs.iter().filter(|&&x| x >= m).count();
            prop_assert!(2 * below >= xs.len() && 2 * above >= xs.len());
        }

        #[test]
        fn counted_and_expanded_quantiles_agree(
            pairs in proptest::collection::vec((-1e3f64..1e3, 0u64..5), 1..20),
            q in 0.0f64..=1.0,
        ) {
            let mut pairs = pairs;
            pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
            let expanded: Vec<f64> = pairs
                .iter()
                .flat_map(|&(v, c)| std::iter::repeat_n(v, c as usize))
                .collect();
            prop_assert_eq!(Counted::new(&pairs).quantile(q), quantile(&expanded, q));
        }

        #[test]
        fn median_of_an_odd_count_is_a_sample(
            xs in proptest::collection::vec(-1e6f64..1e6, 0..15),
            x in -1e6f64..1e6,
        ) {
            // Duplicate each value and add one: an odd count whose median is the middle sample.
            let mut v: Vec<f64> = xs.iter().flat_map(|&x| [x, x]).collect();
            v.push(x);
            let s = sorted(&v);
            prop_assert_eq!(median(&s), Some(s[s.len() / 2]));
        }
    }
}

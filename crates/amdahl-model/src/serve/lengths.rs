//! Prompt and output length distributions for generated workloads (`--input-dist`,
//! `--output-dist`): fixed, uniform, log-normal, or a named public data set's published means
//! ([`super::datasets`]).

use super::datasets::{self, Side};
use super::error::ServeError;
use rand::Rng;
use rand_distr::{Distribution, LogNormal};
use serde::{Deserialize, Serialize};

/// A distribution of lengths in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Lengths {
    Fixed {
        tokens: u32,
    },
    /// Uniform over the whole numbers `lo..=hi`.
    Uniform {
        lo: u32,
        hi: u32,
    },
    /// Log-normal with σ of the logarithm and the given mean (tokens): a long right tail, as
    /// chat prompts and answers have. (A modelling choice, not a fit to a published trace: give a
    /// trace with --trace for real lengths.) A draw above `max` is cut to it (a benchmark's
    /// prompt filter or `max_tokens`), and `mean` is the mean of the lengths drawn, after the
    /// cut: μ is solved for it ([`log_mu`]), because a published mean is a mean of real lengths,
    /// all within the benchmark's cap. Without a cap μ = ln(mean) − σ²/2.
    LogNormal {
        mean: f64,
        sigma: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<u32>,
    },
}

impl Lengths {
    /// Parse a distribution for one side of the requests: a named data set of
    /// data/serve_datasets.csv (its published mean for that side, log-normal) or any form of
    /// [`Lengths::parse`].
    pub fn parse_side(text: &str, side: Side) -> Result<Self, ServeError> {
        match datasets::find(text.trim()) {
            Some(d) => Ok(d.lengths(side)),
            None => Self::parse(text),
        }
    }

    /// Parse `fixed:N` (or a bare `N`), `uniform:LO:HI`, `lognormal:MEAN:SIGMA[:MAX]`.
    pub fn parse(text: &str) -> Result<Self, ServeError> {
        let bad = |why: &str| ServeError::Lengths {
            text: text.into(),
            why: why.into(),
        };
        let parts: Vec<&str> = text.trim().split(':').map(str::trim).collect();
        let whole = |s: &str| {
            s.parse::<u32>()
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| bad(&format!("{s:?} is not a whole number of tokens ≥ 1")))
        };
        match parts.as_slice() {
            [n] => Ok(Lengths::Fixed { tokens: whole(n)? }),
            ["fixed", n] => Ok(Lengths::Fixed { tokens: whole(n)? }),
            ["uniform", lo, hi] => {
                let (lo, hi) = (whole(lo)?, whole(hi)?);
                if lo > hi {
                    return Err(bad("the low end is above the high end"));
                }
                Ok(Lengths::Uniform { lo, hi })
            }
            ["lognormal", mean, sigma, rest @ ..] if rest.len() <= 1 => {
                let max = rest.first().map(|m| whole(m)).transpose()?;
                let mean: f64 = mean.parse().map_err(|_| bad("the mean is not a number"))?;
                let sigma: f64 = sigma.parse().map_err(|_| bad("sigma is not a number"))?;
                if !(mean.is_finite() && mean >= 1.0) {
                    return Err(bad("the mean must be at least 1 token"));
                }
                if !(sigma.is_finite() && (0.0..=4.0).contains(&sigma)) {
                    return Err(bad("sigma must be between 0 and 4"));
                }
                if max.is_some_and(|m| f64::from(m) < mean) {
                    return Err(bad("the cap is below the mean"));
                }
                Ok(Lengths::LogNormal { mean, sigma, max })
            }
            _ => Err(bad("unknown form")),
        }
    }

    /// The smallest length it can draw (before the context clamp).
    pub fn min(&self) -> u32 {
        match *self {
            Lengths::Fixed { tokens } => tokens,
            Lengths::Uniform { lo, .. } => lo,
            Lengths::LogNormal { .. } => 1,
        }
    }

    /// The mean length (before the context clamp).
    pub fn mean(&self) -> f64 {
        match *self {
            Lengths::Fixed { tokens } => f64::from(tokens),
            Lengths::Uniform { lo, hi } => 0.5 * (f64::from(lo) + f64::from(hi)),
            Lengths::LogNormal { mean, .. } => mean,
        }
    }

    /// The distribution ready to draw from (a capped log-normal's μ solved once).
    pub fn draws(&self) -> Draws {
        let mu = match *self {
            Lengths::LogNormal { mean, sigma, max } => log_mu(mean, sigma, max.map(f64::from)),
            _ => 0.0,
        };
        Draws { lengths: *self, mu }
    }

    /// As a user writes it.
    pub fn label(&self) -> String {
        match *self {
            Lengths::Fixed { tokens } => format!("fixed:{tokens}"),
            Lengths::Uniform { lo, hi } => format!("uniform:{lo}:{hi}"),
            Lengths::LogNormal {
                mean,
                sigma,
                max: None,
            } => format!("lognormal:{mean}:{sigma}"),
            Lengths::LogNormal {
                mean,
                sigma,
                max: Some(m),
            } => format!("lognormal:{mean}:{sigma}:{m}"),
        }
    }
}

/// A [`Lengths`] ready to draw from: a log-normal's μ solved once.
#[derive(Debug, Clone, Copy)]
pub struct Draws {
    lengths: Lengths,
    mu: f64,
}

impl Draws {
    /// One draw, at least 1 token and at most the cap.
    pub fn sample<R: Rng>(&self, rng: &mut R) -> u32 {
        match self.lengths {
            Lengths::Fixed { tokens } => tokens,
            Lengths::Uniform { lo, hi } => rng.random_range(lo..=hi),
            Lengths::LogNormal { mean, sigma, max } => {
                // σ ∈ [0, 4] is checked at parse; LogNormal::new fails only for σ < 0 or NaN.
                let x = LogNormal::new(self.mu, sigma).map_or(mean, |d| d.sample(rng));
                let top = f64::from(max.unwrap_or(u32::MAX));
                x.round().clamp(1.0, top) as u32
            }
        }
    }
}

/// μ of a log-normal of σ whose draws, cut at `cap`, have mean `mean`.
///
/// For X ~ LN(μ, σ) and a cap c, E[min(X, c)] = e^(μ+σ²/2) Φ((ln c − μ − σ²)/σ) + c (1 − Φ((ln c − μ)/σ))
/// (the partial expectation of the log-normal, e.g. Johnson, Kotz & Balakrishnan, "Continuous
/// Univariate Distributions" vol. 1, 2nd ed., §14.3), which rises monotonically from 0 to c with
/// μ: solved by bisection. Without a cap, or with σ = 0, μ = ln(mean) − σ²/2. A mean at the cap
/// puts (almost) every draw on it.
pub fn log_mu(mean: f64, sigma: f64, cap: Option<f64>) -> f64 {
    let free = mean.ln() - 0.5 * sigma * sigma;
    let Some(c) = cap.filter(|_| sigma > 0.0) else {
        return free;
    };
    let phi = |z: f64| 0.5 * libm::erfc(-z / std::f64::consts::SQRT_2);
    let capped_mean = |mu: f64| {
        let lc = c.ln();
        (mu + 0.5 * sigma * sigma).exp() * phi((lc - mu - sigma * sigma) / sigma)
            + c * (1.0 - phi((lc - mu) / sigma))
    };
    // The cut lowers the mean, so μ is at least the uncut one; 8σ above ln c nearly every draw
    // is cut.
    let (mut lo, mut hi) = (free, c.ln() + 8.0 * sigma);
    if capped_mean(hi) <= mean {
        return hi;
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if capped_mean(mid) < mean {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn parses_and_refuses() {
        assert_eq!(
            Lengths::parse("512").unwrap(),
            Lengths::Fixed { tokens: 512 }
        );
        assert_eq!(
            Lengths::parse("uniform:10:20").unwrap(),
            Lengths::Uniform { lo: 10, hi: 20 }
        );
        for bad in [
            "0",
            "uniform:20:10",
            "lognormal:0:1",
            "lognormal:100:-1",
            "normal:1:2",
            "lognormal:100:1:50",
            "lognormal:100:1:200:3",
            "",
        ] {
            let e = Lengths::parse(bad).unwrap_err().to_string();
            assert!(e.contains("fixed:N"), "{bad}: {e}");
        }
    }

    #[test]
    fn named_data_sets_and_caps() {
        // ShareGPT's published means (data/serve_datasets.csv): 161.31 in, 337.99 out.
        let i = Lengths::parse_side("sharegpt", Side::Input).unwrap();
        let o = Lengths::parse_side("ShareGPT", Side::Output).unwrap();
        assert_eq!(i.mean(), 161.31);
        assert_eq!(o.mean(), 337.99);
        let capped = Lengths::parse("lognormal:300:1:1024").unwrap();
        assert_eq!(capped.label(), "lognormal:300:1:1024");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let draws = capped.draws();
        assert!((0..10_000).all(|_| draws.sample(&mut rng) <= 1024));
        let e = Lengths::parse_side("sharegtp", Side::Input)
            .unwrap_err()
            .to_string();
        assert!(e.contains("sharegpt") && e.contains("lmarena"), "{e}");
    }

    #[test]
    fn a_capped_lognormal_keeps_its_mean() {
        // MLPerf's OpenOrca outputs: mean 294.45 tokens under max_new_tokens 1,024
        // (data/serve_datasets.csv). Cutting a log-normal of that mean at 1,024 would give 267
        // (the closed form at μ = ln 294.45 − σ²/2); μ solved for the cut keeps 294.45. 200,000
        // draws: standard error < 0.3 %; 1 % tolerance.
        let d = Lengths::parse("lognormal:294.45:1:1024").unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let draws = d.draws();
        let n = 200_000;
        let xs: Vec<u32> = (0..n).map(|_| draws.sample(&mut rng)).collect();
        let mean = xs.iter().map(|&x| f64::from(x)).sum::<f64>() / f64::from(n);
        assert!((mean / 294.45 - 1.0).abs() < 0.01, "{mean}");
        assert!(xs.iter().all(|&x| x <= 1024));
        // About one draw in 13 is cut: P(X > 1024) = 1 − Φ((ln 1024 − μ)/σ).
        let cut = xs.iter().filter(|&&x| x == 1024).count() as f64 / f64::from(n);
        assert!((0.05..0.10).contains(&cut), "{cut}");
        // The closed form itself: at the uncut μ it gives the lower mean a plain cut would.
        let uncut = log_mu(294.45, 1.0, None);
        assert!((uncut - (294.45f64.ln() - 0.5)).abs() < 1e-12);
        assert!(log_mu(294.45, 1.0, Some(1024.0)) > uncut);
        // A mean at the cap puts the draws on it; σ = 0 is the fixed length.
        let at_cap = Lengths::parse("lognormal:1024:1:1024").unwrap();
        let draws = at_cap.draws();
        assert!((0..100).all(|_| draws.sample(&mut rng) >= 1020));
        assert_eq!(log_mu(300.0, 0.0, Some(1024.0)), 300f64.ln());
    }

    #[test]
    fn lognormal_has_the_mean_it_was_given() {
        // 200,000 draws of a log-normal of σ 0.8: the sample mean's standard error is
        // mean · sqrt(e^{σ²} − 1) / sqrt(n) ≈ 0.2 %; 1 % tolerance.
        let d = Lengths::LogNormal {
            mean: 600.0,
            sigma: 0.8,
            max: None,
        };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let n = 200_000;
        let draws = d.draws();
        let sum: f64 = (0..n).map(|_| f64::from(draws.sample(&mut rng))).sum();
        let mean = sum / f64::from(n);
        assert!((mean / 600.0 - 1.0).abs() < 0.01, "{mean}");
    }

    proptest::proptest! {
        /// `--input-dist` and `--output-dist` are user input: any text parses to a distribution
        /// whose draws are at least 1 token and within its cap, or gives an error; never a panic.
        #[test]
        fn any_text_is_a_distribution_or_an_error(
            text in "(fixed|uniform|lognormal|sharegpt|openorca)?(:-?[0-9]{0,6}(\\.[0-9]{0,3})?(e[0-9]{1,3})?){0,4}|\\PC{0,40}",
            seed in 0u64..1000,
        ) {
            for side in [Side::Input, Side::Output] {
                if let Ok(d) = Lengths::parse_side(&text, side) {
                    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
                    let draws = d.draws();
                    for _ in 0..50 {
                        let n = draws.sample(&mut rng);
                        proptest::prop_assert!(n >= 1, "{text}: {n}");
                        if let Lengths::LogNormal { max: Some(m), .. } = d {
                            proptest::prop_assert!(n <= m, "{text}: {n} > {m}");
                        }
                    }
                }
            }
        }
    }
}

//! Validation against known parameters and published numbers (test-only).

use super::analysis::{analyse, FitOptions};
use super::input::{parse_csv, parse_json};
use super::laws;
use super::models::{fit, ModelKind};

/// SplitMix64 (Steele, Lea & Flood 2014): a tiny deterministic PRNG so the noise is the same on
/// every machine.
struct Rng(u64);
impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    /// Standard normal by Box–Muller.
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// 21 processor counts, 1 … 1024 in half-octaves (N need not be an integer here).
fn ns() -> Vec<f64> {
    (0..=20).map(|k| 2f64.powf(f64::from(k) / 2.0)).collect()
}

/// Synthetic strong-scaling times t = model(N)·(1 + 1 % noise), 20 seeds × 2–3 parameters: each
/// parameter lies within 3 standard errors of the truth. With 21 points the standardised error
/// follows Student's t with 18–19 degrees of freedom, P(|t| > 3) ≈ 0.8 %, so at most 2 misses in
/// 40–60 estimates are allowed (expected ≈ 0.4; the seeds are fixed, so the test is
/// deterministic).
#[test]
fn noisy_synthetic_data_recovers_known_parameters_within_3_sigma() {
    let cases: [(ModelKind, [f64; 3]); 3] = [
        (ModelKind::Amdahl, [0.5, 100.0, 0.0]),
        (ModelKind::AmdahlLog2, [0.5, 100.0, 0.3]),
        (ModelKind::AmdahlLinear, [0.5, 100.0, 0.01]),
    ];
    for (kind, truth) in cases {
        let mut misses = 0;
        for seed in 0..20u64 {
            let mut rng = Rng(seed * 7919 + 1);
            let n = ns();
            let t: Vec<f64> = n
                .iter()
                .map(|&n| {
                    let g = match kind {
                        ModelKind::AmdahlLog2 => n.log2(),
                        _ => n,
                    };
                    (truth[0] + truth[1] / n + truth[2] * g) * (1.0 + 0.01 * rng.normal())
                })
                .collect();
            let f = fit(kind, &n, &t, 1.0).unwrap();
            for (p, want) in f.params.iter().zip(truth) {
                let se = p.stderr.unwrap();
                if (p.value - want).abs() > 3.0 * se {
                    misses += 1;
                }
            }
        }
        assert!(misses <= 2, "{kind:?}: {misses} parameters outside 3σ");
    }
}

#[test]
fn noisy_usl_recovers_sigma_kappa_lambda_within_3_sigma() {
    let (sg, kp, lm) = (0.03, 5e-4, 1000.0);
    let mut misses = 0;
    for seed in 0..20u64 {
        let mut rng = Rng(seed + 42);
        let n: Vec<f64> = (1..=40).map(f64::from).collect();
        let t: Vec<f64> = n
            .iter()
            .map(|&n| 1.0 / (lm * laws::usl_speedup(n, sg, kp) + 20.0 * rng.normal()))
            .collect();
        let f = fit(ModelKind::Usl, &n, &t, 1.0).unwrap();
        for (p, want) in f.params.iter().zip([sg, kp, lm]) {
            if (p.value - want).abs() > 3.0 * p.stderr.unwrap() {
                misses += 1;
            }
        }
    }
    assert!(misses <= 1, "{misses} USL parameters outside 3σ");
}

/// The same runs given as time, speedup, efficiency and Rmax/Rpeak give the same α_eff, and it
/// equals Karp–Flatt e (DESIGN.md: 1−α_eff = (1−E)/(E(N−1)) = e).
#[test]
fn alpha_eff_agrees_across_measures_and_equals_karp_flatt() {
    let n = [1.0, 4.0, 16.0, 64.0];
    let t = [64.0, 17.0, 5.2, 2.1];
    let mut time = String::from("n,time\n");
    let mut sp = String::from("n,speedup\n");
    let mut eff = String::from("n,efficiency\n");
    let mut rm = String::from("[");
    for (i, (&n, &t)) in n.iter().zip(&t).enumerate() {
        let s = 64.0 / t;
        time.push_str(&format!("{n},{t}\n"));
        sp.push_str(&format!("{n},{s}\n"));
        eff.push_str(&format!("{n},{}\n", s / n));
        rm.push_str(&format!(
            "{}{{\"n\":{n},\"rmax\":{},\"rpeak\":{}}}",
            if i > 0 { "," } else { "" },
            s,
            n
        ));
    }
    rm.push(']');
    let opts = FitOptions::default();
    let all = [
        analyse(&parse_csv(&time).unwrap(), &opts).unwrap(),
        analyse(&parse_csv(&sp).unwrap(), &opts).unwrap(),
        analyse(&parse_csv(&eff).unwrap(), &opts).unwrap(),
        analyse(&parse_json(&rm).unwrap(), &opts).unwrap(),
    ];
    for i in 1..n.len() {
        let s = 64.0 / t[i];
        let want = 1.0 - laws::alpha_eff_from_speedup(n[i], s);
        assert!((want - laws::serial_from_efficiency(n[i], s / n[i])).abs() < 1e-14);
        for r in &all {
            let p = &r.series[0].points[i];
            assert!((1.0 - p.alpha_eff.unwrap() - want).abs() < 1e-12);
            assert!((p.karp_flatt.unwrap() - want).abs() < 1e-12);
        }
    }
}

/// Speedup ≤ p and efficiency in (0, 1] for every measured point of an Amdahl-like series, and
/// predictions fall with N.
#[test]
fn predictions_behave() {
    let mut csv = String::from("n,time\n");
    for n in ns() {
        csv.push_str(&format!("{n},{}\n", 0.2 + 50.0 / n));
    }
    let opts = FitOptions {
        predict: vec![1024.0, 4096.0],
        ..Default::default()
    };
    let r = analyse(&parse_csv(&csv).unwrap(), &opts).unwrap();
    let s = &r.series[0];
    for p in &s.points {
        assert!(
            p.speedup <= p.p * (1.0 + 1e-12) && p.efficiency > 0.0 && p.efficiency <= 1.0 + 1e-12
        );
    }
    let (a, b) = (&s.predictions[0], &s.predictions[1]);
    assert!(b.efficiency < a.efficiency && b.speedup > a.speedup);
    // Exact data: 1−α = 0.2/50.2; S(1024) = amdahl_speedup(1024, 1−α).
    let serial = 0.2 / 50.2;
    assert!((s.serial_fraction - serial).abs() < 1e-10);
    assert!((a.speedup - laws::amdahl_speedup(1024.0, serial)).abs() < 1e-6);
}

mod never_panics {
    use super::super::analysis::{analyse, FitOptions};
    use super::super::input::{parse_csv, parse_json};
    use proptest::prelude::*;

    proptest! {
        /// Arbitrary text is an error or a dataset, never a panic; a dataset analyses without
        /// panicking either.
        #[test]
        fn readers_and_analysis_never_panic(text in "[-0-9a-z,.#\"{}\\[\\]:\n eE]{0,200}") {
            for d in [parse_csv(&text), parse_json(&text)].into_iter().flatten() {
                let _ = analyse(&d, &FitOptions { predict: vec![1e6], ..Default::default() });
            }
        }

        #[test]
        fn numeric_tables_never_panic(
            rows in proptest::collection::vec((1.0f64..1e7, 1e-9f64..1e9), 0..12),
            col in prop::sample::select(vec!["time", "throughput", "speedup", "efficiency"]),
        ) {
            let mut csv = format!("n,{col}\n");
            for (n, v) in &rows {
                csv.push_str(&format!("{n},{v}\n"));
            }
            if let Ok(d) = parse_csv(&csv) {
                let _ = analyse(&d, &FitOptions::default());
            }
        }
    }
}

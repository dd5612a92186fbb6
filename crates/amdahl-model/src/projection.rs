//! Projection of a whole run's duration and energy from its first units of work (steps or
//! epochs), what carbontracker does after its first epochs (Anthony, Kanding & Selvan, "Carbontracker:
//! Tracking and Predicting the Carbon Footprint of Training Deep Learning Models", ICML 2020
//! workshop, arXiv:2007.03051, §3), with a stated interval.
//!
//! Input: cumulative marks `(units done, seconds, joules)` taken at every sample of a run.
//! Between marks where the unit count advanced, a *segment* observes `Δu` units costing `ΔE`
//! joules and `Δt` seconds. The first segment (from the start to the first completed unit) is
//! a warm-up and is left out: it holds start-up, compilation and data-loader fill, which the
//! remaining units do not repeat.
//!
//! Method: per-unit cost ĉ = ΣΔE / ΣΔu over the n segments after the warm-up (the ratio
//! estimator, each unit weighted equally whatever the segment length). Remaining units m = U − u;
//! projected total = E_now + m·ĉ. Units are treated as independent with per-unit variance σ²,
//! estimated from the segments as σ̂² = Σ (ΔE − ĉΔu)²/Δu / (n − 1) (a segment of Δu units has
//! variance Δu·σ²). The remaining cost has variance σ²·(m + m²/ΣΔu): the m future units' own
//! spread plus the error of ĉ scaled by m. The interval is ± t₀.₉₇₅,ₙ₋₁ · √that (Student's t,
//! a 95 % prediction interval under normal per-unit costs). The same for duration with Δt.
//! With one segment after the warm-up there is no spread yet: no interval. With only the
//! warm-up, it alone gives ĉ, and no interval.
//!
//! All sums are running sums, so each sample costs O(1) however long the run.

use serde::{Deserialize, Serialize};

/// Cumulative progress at one instant since the start of the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mark {
    pub units: u64,
    pub t_s: f64,
    pub energy_j: f64,
}

/// The full run projected from its first units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Projection {
    /// What a unit is (`step`, `epoch`).
    pub unit: String,
    pub units_done: u64,
    pub units_total: u64,
    /// Units observed after the warm-up unit, from which the per-unit cost is estimated.
    pub units_observed: u64,
    /// Projected duration of the whole run.
    pub duration_s: f64,
    /// 95 % prediction interval of `duration_s` (null until two segments after the warm-up).
    pub duration_interval_s: Option<[f64; 2]>,
    /// Projected energy of the whole run (the same total as the record's `total_energy_j`).
    pub energy_j: f64,
    /// 95 % prediction interval of `energy_j`.
    pub energy_interval_j: Option<[f64; 2]>,
    /// `energy_j` as emissions (× PUE × grid intensity, as the record's `co2e_g`), in kg.
    pub co2e_kg: f64,
    pub co2e_interval_kg: Option<[f64; 2]>,
    /// How the figures were made (see docs/methodology.md, "Projection").
    pub method: String,
    /// Counts that went back or predate the run: the projection holds, but says so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProjectionError {
    #[error("no {unit} has completed yet: a projection needs at least one (mark them with step() / epoch(), or the progress file)")]
    NoUnitYet { unit: String },
    #[error("the run's total number of {unit}s is not known: give it (set_total({unit}s=N), --total-steps N)")]
    NoTotal { unit: String },
}

/// Running sums over segments, fed one mark per sample.
#[derive(Debug, Clone, Default)]
pub struct Projector {
    /// The end of the warm-up segment: the first mark with a completed unit.
    warmup: Option<Mark>,
    /// Where the open segment started (the last mark at which the count advanced).
    boundary: Option<Mark>,
    last: Option<Mark>,
    segments: u64,
    sum_u: f64,
    sum_e: f64,
    sum_t: f64,
    /// Σ ΔE²/Δu and Σ Δt²/Δu, for the variance about the ratio estimate.
    sum_e2: f64,
    sum_t2: f64,
    /// The latest finite (seconds, joules) of any mark, ignored ones included: what was measured
    /// so far, below which no projection may fall.
    measured: Option<(f64, f64)>,
    /// The first time the count went back: (from, to).
    went_back: Option<(u64, u64)>,
    /// A count that was reached before the run started (a progress file's time before it).
    stale: Option<u64>,
}

impl Projector {
    pub fn new() -> Self {
        Self::default()
    }

    /// Take one mark. Marks must come in time order; a mark whose count went backwards or whose
    /// figures are not finite is ignored.
    pub fn observe(&mut self, m: Mark) {
        if !(m.t_s.is_finite() && m.energy_j.is_finite()) {
            return;
        }
        self.measured = Some((m.t_s, m.energy_j));
        if let Some(l) = self.last.filter(|l| m.units < l.units) {
            self.went_back.get_or_insert((l.units, m.units));
            return;
        }
        self.last = Some(m);
        if self.warmup.is_none() {
            if m.units >= 1 {
                self.warmup = Some(m);
                self.boundary = Some(m);
            }
            return;
        }
        let Some(b) = self.boundary else { return };
        if m.units <= b.units {
            return;
        }
        let du = (m.units - b.units) as f64;
        let de = m.energy_j - b.energy_j;
        let dt = m.t_s - b.t_s;
        self.segments += 1;
        self.sum_u += du;
        self.sum_e += de;
        self.sum_t += dt;
        self.sum_e2 += de * de / du;
        self.sum_t2 += dt * dt / du;
        self.boundary = Some(m);
    }

    /// What the run has measured at a sample that marked no new unit: the projection's floor.
    pub fn measured(&mut self, t_s: f64, energy_j: f64) {
        if t_s.is_finite() && energy_j.is_finite() {
            self.measured = Some((t_s, energy_j));
        }
    }

    /// The count `units` was reached before the run started: likely a progress file left by an
    /// earlier run. It is still used (a resumed job counts on), with a warning.
    pub fn note_stale(&mut self, units: u64) {
        self.stale.get_or_insert(units);
    }

    /// What a reader of the projection must know: counts that went back or predate the run.
    fn warnings(&self, unit: &str) -> Vec<String> {
        let mut out = Vec::new();
        if let Some((from, to)) = self.went_back {
            out.push(format!(
                "the {unit} count went back from {from} to {to} (a restarted job, or a progress \
                 file rewritten?); counts below {from} are ignored"
            ));
        }
        if let Some(n) = self.stale {
            out.push(format!(
                "the {unit} count {n} was reached before the run started (a progress file left \
                 by an earlier run?); the projection counts on from it"
            ));
        }
        out
    }

    /// The whole run of `total` units (None: unknown), the unit named `unit` in messages.
    pub fn project(&self, unit: &str, total: Option<u64>) -> Result<Projection, ProjectionError> {
        let (Some(last), Some(w)) = (self.last, self.warmup) else {
            return Err(ProjectionError::NoUnitYet { unit: unit.into() });
        };
        let total = total.ok_or_else(|| ProjectionError::NoTotal { unit: unit.into() })?;
        let m = total.saturating_sub(last.units) as f64;
        let base = |now: f64, per_unit: f64| now + m * per_unit;
        let (energy, duration, e_int, t_int, method) = if self.segments == 0 {
            // Only the warm-up: its average per unit, warm-up included; no spread yet.
            let u = w.units as f64;
            (
                base(last.energy_j, w.energy_j / u),
                base(last.t_s, w.t_s / u),
                None,
                None,
                "mean of the first unit(s), warm-up included; no interval until more units complete",
            )
        } else {
            let c_e = self.sum_e / self.sum_u;
            let c_t = self.sum_t / self.sum_u;
            let e = base(last.energy_j, c_e);
            let t = base(last.t_s, c_t);
            let interval = |now_plus: f64, sum2: f64, sum: f64, c: f64| {
                let n = self.segments;
                if n < 2 {
                    return None;
                }
                // Σ(ΔX − ĉΔu)²/Δu = ΣΔX²/Δu − 2ĉΣΔX + ĉ²ΣΔu.
                let ss = (sum2 - 2.0 * c * sum + c * c * self.sum_u).max(0.0);
                let var_unit = ss / (n - 1) as f64;
                let var = var_unit * (m + m * m / self.sum_u);
                let half = t_975(n - 1) * var.sqrt();
                Some([(now_plus - half).max(0.0), now_plus + half])
            };
            (
                e,
                t,
                interval(e, self.sum_e2, self.sum_e, c_e),
                interval(t, self.sum_t2, self.sum_t, c_t),
                "ratio estimate of per-unit cost after a warm-up unit; 95 % Student-t prediction interval",
            )
        };
        // Never below what was measured: a count that went back (or a finished count from a
        // stale file) projected 99 J after 356 J had been measured, and 0 s and 0 J.
        let (t_now, e_now) = self.measured.unwrap_or((last.t_s, last.energy_j));
        let floor = |x: f64, now: f64| x.max(now);
        let floor_int =
            |i: Option<[f64; 2]>, now: f64| i.map(|[lo, hi]| [lo.max(now), hi.max(now)]);
        Ok(Projection {
            unit: unit.into(),
            units_done: last.units,
            units_total: total,
            units_observed: self.sum_u as u64,
            duration_s: floor(duration, t_now),
            duration_interval_s: floor_int(t_int, t_now),
            energy_j: floor(energy, e_now),
            energy_interval_j: floor_int(e_int, e_now),
            co2e_kg: 0.0,
            co2e_interval_kg: None,
            method: method.into(),
            warnings: self.warnings(unit),
        })
    }
}

impl Projection {
    /// Fill the emissions from the energy: `kg_per_joule` = PUE × g/kWh ÷ 3.6·10⁶ J/kWh ÷ 1000.
    pub fn with_carbon(mut self, kg_per_joule: f64) -> Self {
        self.co2e_kg = self.energy_j * kg_per_joule;
        self.co2e_interval_kg = self
            .energy_interval_j
            .map(|[lo, hi]| [lo * kg_per_joule, hi * kg_per_joule]);
        self
    }
}

/// Two-sided 95 % quantile of Student's t with `df` degrees of freedom (t₀.₉₇₅): the standard
/// table (NIST/SEMATECH e-Handbook of Statistical Methods, §1.3.6.7.2) to 30, then linear in
/// 1/df between 30, 40, 60, 120 and ∞ (1.960), which the table itself recommends.
pub fn t_975(df: u64) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    if df == 0 {
        return f64::INFINITY;
    }
    if let Some(t) = usize::try_from(df - 1).ok().and_then(|i| TABLE.get(i)) {
        return *t;
    }
    let knots = [(30.0, 2.042), (40.0, 2.021), (60.0, 2.000), (120.0, 1.980)];
    let x = 1.0 / df as f64;
    for w in knots.windows(2) {
        let ((d0, t0), (d1, t1)) = (w[0], w[1]);
        if df as f64 <= d1 {
            let (x0, x1) = (1.0 / d0, 1.0 / d1);
            return t0 + (t1 - t0) * (x0 - x) / (x0 - x1);
        }
    }
    // 120 → ∞: linear in 1/df down to 1.960 at 1/df = 0.
    1.960 + (1.980 - 1.960) * x * 120.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(costs: &[f64], startup: f64) -> Vec<Mark> {
        let mut e = startup;
        let mut out = vec![Mark {
            units: 0,
            t_s: 0.0,
            energy_j: e,
        }];
        for (i, c) in costs.iter().enumerate() {
            e += c;
            out.push(Mark {
                units: i as u64 + 1,
                t_s: (i + 1) as f64,
                energy_j: e,
            });
        }
        out
    }

    /// Regression: 356 J measured, 99 J projected when the count went back; 0 s and 0 J
    /// from a stale progress file already at the total. The projection is never below what was
    /// measured, and says why its count is odd.
    #[test]
    fn a_count_that_goes_back_or_predates_the_run_never_projects_below_the_measured() {
        let mut p = Projector::new();
        for m in marks(&[10.0; 9], 0.0) {
            p.observe(m);
        }
        // The job restarts and counts from 1 while energy keeps being measured: 356 J at 30 s.
        p.observe(Mark {
            units: 1,
            t_s: 30.0,
            energy_j: 356.0,
        });
        let r = p.project("step", Some(10)).unwrap();
        // Without the floor: 90 J at 9 steps + 1 step × 10 J = 100 J, 10 s.
        assert_eq!((r.energy_j, r.duration_s), (356.0, 30.0));
        let [lo, hi] = r.energy_interval_j.unwrap();
        assert!(lo >= 356.0 && hi >= lo, "{lo}..{hi}");
        assert_eq!(r.warnings.len(), 1);
        assert!(
            r.warnings[0].contains("went back from 9 to 1"),
            "{:?}",
            r.warnings
        );

        // A stale file already at the total: the first mark is 900 of 900 at t = 0.
        let mut p = Projector::new();
        p.note_stale(900);
        p.observe(Mark {
            units: 900,
            t_s: 0.0,
            energy_j: 0.0,
        });
        p.measured(5.0, 120.0);
        let r = p.project("step", Some(900)).unwrap();
        assert_eq!((r.energy_j, r.duration_s), (120.0, 5.0));
        assert!(r.warnings[0].contains("900 was reached before the run started"));
    }

    #[test]
    fn equal_units_project_exactly() {
        // The projection's acceptance case: 10 units of equal cost, 100 in the run; after 3 within
        // 2 % (here exact).
        let mut p = Projector::new();
        for m in marks(&[50.0; 3], 20.0) {
            p.observe(m);
        }
        let r = p.project("step", Some(100)).unwrap();
        // 20 J start-up + 100 × 50 J.
        assert!((r.energy_j - 5020.0).abs() < 1e-9, "{}", r.energy_j);
        assert!((r.duration_s - 100.0).abs() < 1e-9);
        assert_eq!(r.units_observed, 2);
        // No spread among equal units: a zero-width interval.
        let [lo, hi] = r.energy_interval_j.unwrap();
        assert!((hi - lo).abs() < 1e-6);
    }

    #[test]
    fn first_unit_alone_projects_without_interval() {
        let mut p = Projector::new();
        for m in marks(&[40.0], 0.0) {
            p.observe(m);
        }
        let r = p.project("epoch", Some(10)).unwrap();
        assert!((r.energy_j - 400.0).abs() < 1e-9);
        assert_eq!(r.energy_interval_j, None);
    }

    #[test]
    fn no_unit_or_no_total_is_an_error() {
        let mut p = Projector::new();
        assert!(p.project("step", Some(5)).is_err());
        p.observe(Mark {
            units: 1,
            t_s: 1.0,
            energy_j: 1.0,
        });
        let e = p.project("step", None).unwrap_err().to_string();
        assert!(e.contains("--total-steps"), "{e}");
    }

    #[test]
    fn marks_between_unit_boundaries_and_backwards_counts() {
        // Samples that see no new unit are merged into the next segment; a count that goes
        // backwards (a rewritten progress file) is ignored.
        let mut p = Projector::new();
        let ms = [
            (0, 0.0, 0.0),
            (1, 1.0, 10.0),
            (1, 1.5, 15.0),
            (3, 3.0, 30.0),
            (2, 3.5, 99.0),
            (5, 5.0, 50.0),
        ];
        for (u, t, e) in ms {
            p.observe(Mark {
                units: u,
                t_s: t,
                energy_j: e,
            });
        }
        let r = p.project("step", Some(10)).unwrap();
        assert!((r.energy_j - 100.0).abs() < 1e-9, "{}", r.energy_j);
        assert_eq!(r.units_observed, 4);
    }

    #[test]
    fn t_quantiles_match_the_table() {
        assert_eq!(t_975(1), 12.706);
        assert_eq!(t_975(30), 2.042);
        assert!((t_975(40) - 2.021).abs() < 1e-12);
        assert!((t_975(120) - 1.980).abs() < 1e-12);
        assert!(t_975(1_000_000) < 1.961);
        assert!(t_975(50) < 2.021 && t_975(50) > 2.000);
    }

    /// splitmix64 (Steele, Lea & Flood, OOPSLA 2014): a seeded source for the trials.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 11) as f64 / (1u64 << 53) as f64
        }
        /// Box–Muller.
        fn normal(&mut self) -> f64 {
            let (u1, u2) = (self.next().max(1e-300), self.next());
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        }
    }

    #[test]
    fn interval_covers_the_truth_in_at_least_90_percent_of_noisy_trials() {
        // The projection's acceptance case: 200 seeded trials of 100 units, cost 100 J ± 15 J
        // (normal), projected after 10 units; the stated 95 % interval must cover the true total in
        // ≥ 90 % of them.
        let mut rng = Rng(12);
        let mut covered = 0;
        for _ in 0..200 {
            let costs: Vec<f64> = (0..100).map(|_| 100.0 + 15.0 * rng.normal()).collect();
            let truth: f64 = 5.0 + costs.iter().sum::<f64>();
            let mut p = Projector::new();
            for m in marks(&costs[..10], 5.0) {
                p.observe(m);
            }
            let [lo, hi] = p
                .project("step", Some(100))
                .unwrap()
                .energy_interval_j
                .unwrap();
            if (lo..=hi).contains(&truth) {
                covered += 1;
            }
        }
        assert!(covered >= 180, "{covered} of 200 covered");
    }
}

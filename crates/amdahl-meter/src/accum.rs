//! Turning raw readings into energy: counter differences with wrap-around, and trapezoid
//! integration of power. Pure arithmetic, no I/O.

use crate::source::{Method, Raw};
use amdahl_model::units::{Joules, Seconds, Watts};

/// Increase of a counter from `prev` to `cur`. A counter that went down wrapped once at `max`
/// (RAPL counts 0..=max_energy_range_uj then restarts at 0, so the increase is
/// `max - prev + cur`); with no known `max` a decrease is a reset and yields `None`.
/// Sampling at least once per wrap period (≈ 60 s at 1 kW for a 2^32 µJ range) keeps this exact;
/// [`Accumulator::update`] further rejects a "wrap" of more than half the range (a counter that
/// stepped back a little) and any step above the device's plausible power.
pub fn counter_delta(prev: u64, cur: u64, max: Option<u64>) -> Option<u64> {
    if cur >= prev {
        Some(cur - prev)
    } else {
        max.filter(|&m| m >= prev).map(|m| m - prev + cur)
    }
}

/// Trapezoid-rule energy of a linear power change between two readings dt apart.
pub fn trapezoid(p0: Watts, p1: Watts, dt: Seconds) -> Joules {
    Watts((p0.get() + p1.get()) / 2.0) * dt
}

/// What a device draws by estimate while it cannot be measured, and on what basis (said in the
/// device's note): a GPU whose sensor is unreadable, steps back or is rejected as impossible is
/// charged this power for those intervals, so its energy is estimated, never lost.
#[derive(Debug, Clone, PartialEq)]
pub struct Fallback {
    pub power: Watts,
    /// E.g. "the catalog TDP of MI300X, an upper bound".
    pub basis: String,
}

/// Running energy of one device.
#[derive(Debug, Clone)]
pub struct Accumulator {
    method: Method,
    last: Option<(Seconds, Raw)>,
    /// Counter units summed as integers and converted once, so known deltas come out exact.
    counter_units: u128,
    units_per_joule: f64,
    /// Integral of the power readings (the main value for power sources, a fallback for counters).
    power_energy: Joules,
    /// Average power over the latest interval, for the sample log.
    pub last_power: Option<Watts>,
    /// Why the device stopped reading, if it did (kept: the total misses those intervals).
    pub lost: Option<String>,
    /// Why the latest reading added nothing (unreadable, rejected as impossible, a backwards
    /// step), cleared by the next good one: the exporter's `amdahl_sensor_incomplete`, which
    /// must say whether the sensor reads *now*, not whether it ever failed.
    pub incomplete_now: Option<String>,
    resets: u32,
    /// Largest power the device can plausibly draw; counter steps above it × the interval are
    /// glitches, not energy (None: unchecked, for estimates).
    max_power: Option<Watts>,
    /// Counter steps rejected as physically impossible, and the first of them for the note.
    pub rejected: u64,
    first_rejected: Option<String>,
    /// The estimate for intervals without a measurement; None: such intervals are missing.
    fallback: Option<Fallback>,
    /// Seconds estimated so far by the fallback (not counting a trailing unreadable span).
    estimated_s: f64,
    /// The first and the latest sample time, readable or not ([`Accumulator::seen`]).
    first_t: Option<Seconds>,
    seen_t: Seconds,
}

/// Slack added to each interval before the power check: a counter read ~1 ms late (RAPL's
/// update period) or a sampler woken late must not turn a real step into a rejected one.
const CHECK_SLACK_S: f64 = 0.05;

impl Accumulator {
    pub fn new(method: Method) -> Self {
        Accumulator {
            method,
            last: None,
            counter_units: 0,
            units_per_joule: 1.0,
            power_energy: Joules::ZERO,
            last_power: None,
            lost: None,
            incomplete_now: None,
            resets: 0,
            max_power: None,
            rejected: 0,
            first_rejected: None,
            fallback: None,
            estimated_s: 0.0,
            first_t: None,
            seen_t: Seconds::ZERO,
        }
    }

    /// Estimate the intervals that cannot be measured with `f` instead of leaving them out.
    pub fn with_fallback(mut self, f: Option<Fallback>) -> Self {
        self.fallback = f;
        self
    }

    /// A sample was taken at `t`, whether the device read or not: unreadable spans are timed
    /// from it.
    pub fn seen(&mut self, t: Seconds) {
        self.first_t.get_or_insert(t);
        self.seen_t = t;
    }

    /// Charge `dt` seconds to the fallback, where there is one.
    fn estimate(&mut self, dt: Seconds) {
        if self.fallback.is_some() && dt.get() > 0.0 {
            self.estimated_s += dt.get();
        }
    }

    /// An accumulator that rejects counter steps above `max_power` × interval.
    pub fn with_max_power(method: Method, max_power: Option<Watts>) -> Self {
        Accumulator {
            max_power,
            ..Accumulator::new(method)
        }
    }

    /// Why a counter step of `d` units over `dt` cannot be energy, if it cannot: a "wrap" of
    /// more than half the range is a counter that stepped back (sampling is at least twice per
    /// wrap period, so a true wrap is shorter); a step above the plausible power is a glitch
    /// (a counter jumping to 1e18 µJ would add a terajoule).
    fn implausible(
        &self,
        d: u64,
        wrapped: bool,
        max: Option<u64>,
        upj: f64,
        dt: Seconds,
    ) -> Option<String> {
        let joules = d as f64 / upj;
        if let (true, Some(m)) = (wrapped, max) {
            if d > m / 2 {
                return Some(format!(
                    "counter stepped back {:.6} J (read as a wrap it would add {joules:.0} J)",
                    (m - d) as f64 / upj
                ));
            }
        }
        let limit = self.max_power?;
        let bound = limit.get() * (dt.get().max(0.0) + CHECK_SLACK_S);
        (joules > bound).then(|| {
            format!(
                "+{joules:.0} J in {:.2} s, above {:.0} W × the interval",
                dt.get(),
                limit.get()
            )
        })
    }

    pub fn update(&mut self, t: Seconds, raw: Raw) {
        if let Some((t0, prev)) = self.last {
            let dt = t - t0;
            match (prev, raw) {
                (
                    Raw::Counter {
                        value: v0,
                        power: p0,
                        ..
                    },
                    Raw::Counter {
                        value: v1,
                        units_per_joule,
                        max,
                        power: p1,
                    },
                ) => {
                    self.units_per_joule = units_per_joule;
                    let delta = counter_delta(v0, v1, max);
                    let bad =
                        delta.and_then(|d| self.implausible(d, v1 < v0, max, units_per_joule, dt));
                    self.incomplete_now = match (delta, &bad) {
                        (None, _) => Some("counter went backwards with no known range".into()),
                        (Some(_), b) => b.clone(),
                    };
                    if delta.is_none() || bad.is_some() {
                        self.estimate(dt);
                    }
                    match delta {
                        Some(_) if bad.is_some() => {
                            self.rejected += 1;
                            if self.first_rejected.is_none() {
                                self.first_rejected = bad;
                            }
                        }
                        Some(d) => {
                            self.counter_units += u128::from(d);
                            let e = Joules(d as f64 / units_per_joule);
                            if dt.get() > 0.0 {
                                self.last_power = Some(e / dt);
                            }
                        }
                        None => self.resets += 1,
                    }
                    if let (Some(a), Some(b)) = (p0, p1) {
                        self.power_energy += trapezoid(a, b, dt);
                    }
                }
                (Raw::Power(a), Raw::Power(b)) => {
                    self.incomplete_now = None;
                    self.power_energy += trapezoid(a, b, dt);
                    self.last_power = Some(b);
                }
                // A source never changes kind; ignore a mismatched pair rather than guess.
                _ => {}
            }
        } else {
            // Unreadable from the first sample until now: that span is estimated.
            if let Some(t0) = self.first_t {
                self.estimate(t - t0);
            }
            self.incomplete_now = None;
            if let Raw::Power(p) = raw {
                self.last_power = Some(p);
            }
        }
        self.last = Some((t, raw));
    }

    /// Mark the device unreadable from now on, keeping what was measured so far.
    pub fn lose(&mut self, why: String) {
        self.incomplete_now = Some(why.clone());
        if self.lost.is_none() {
            self.lost = Some(why);
        }
    }

    /// Energy so far and the method that produced it. A counter that never advanced while its
    /// power reading was non-zero (NVML updates its counter coarsely) falls back to the
    /// integrated power, so a device that was seen drawing power is never reported as 0 J.
    fn counter_energy(&self) -> Joules {
        Joules(self.counter_units as f64 / self.units_per_joule)
    }

    /// Energy so far, the method, and why it is less than a measurement. Intervals estimated by
    /// the fallback (and the span since the last good reading, while the device stays
    /// unreadable) are added at its power, and then the whole device is an estimate: its figure
    /// is no longer a measurement, and the note says how much of it was estimated and why.
    pub fn energy(&self) -> (Joules, Method, Option<String>) {
        let (measured, method, note) = self.measured();
        let Some(f) = &self.fallback else {
            return (measured, method, note);
        };
        let since = self.last.map(|(t, _)| t).or(self.first_t);
        let trailing = since.map_or(0.0, |t0| (self.seen_t - t0).get().max(0.0));
        let secs = self.estimated_s + trailing;
        if secs <= 0.0 {
            return (measured, method, note);
        }
        let total = self
            .first_t
            .map_or(secs, |t0| (self.seen_t - t0).get().max(secs));
        let est = format!(
            "estimated for {secs:.1} of {total:.1} s at {:.0} W ({})",
            f.power.get(),
            f.basis
        );
        let note = Some(match note {
            Some(n) => format!("{est}; {n}"),
            None => est,
        });
        (measured + f.power * Seconds(secs), Method::Estimate, note)
    }

    /// What the readings alone give.
    fn measured(&self) -> (Joules, Method, Option<String>) {
        let counter_energy = self.counter_energy();
        let mut note = None;
        if self.resets > 0 {
            note = Some(format!(
                "counter went backwards {} time(s) with no known range; those intervals are missing",
                self.resets
            ));
        }
        if self.rejected > 0 {
            let r = format!(
                "{} physically impossible counter step(s) rejected (first: {}); those intervals are missing",
                self.rejected,
                self.first_rejected.as_deref().unwrap_or("?")
            );
            note = Some(match note {
                Some(n) => format!("{n}; {r}"),
                None => r,
            });
        }
        match self.method {
            Method::Counter if counter_energy.get() == 0.0 && self.power_energy.get() > 0.0 => (
                self.power_energy,
                Method::IntegratedPower,
                Some(
                    "energy counter did not advance; integrated the power readings instead".into(),
                ),
            ),
            Method::Counter => {
                // Counters that also report power (NVML) get the integral of those readings as a
                // cross-check, side by side: the two methods on the same run and intervals.
                let check = (self.power_energy.get() > 0.0 && counter_energy.get() > 0.0).then(|| {
                    let (p, c) = (self.power_energy.get(), counter_energy.get());
                    format!(
                        "integrated power readings over the same intervals: {p:.3} J ({:+.2} % vs the counter)",
                        100.0 * (p / c - 1.0)
                    )
                });
                let note = match (note, check) {
                    (Some(a), Some(b)) => Some(format!("{a}; {b}")),
                    (a, b) => a.or(b),
                };
                (counter_energy, Method::Counter, note)
            }
            Method::IntegratedPower => (self.power_energy, Method::IntegratedPower, note),
            // Estimates come as a CPU-time "counter" or a modelled power; one of the two is 0.
            Method::Estimate => (counter_energy + self.power_energy, Method::Estimate, note),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn uj(value: u64, max: u64) -> Raw {
        Raw::Counter {
            value,
            units_per_joule: 1e6,
            max: Some(max),
            power: None,
        }
    }

    #[test]
    fn wrap_is_corrected_exactly() {
        // max 262_143_328_850 µJ is a real Skylake package range; 1 J before the top, then 2 J
        // past zero: 3 J exactly.
        let max = 262_143_328_850;
        assert_eq!(
            counter_delta(max - 1_000_000, 2_000_000, Some(max)),
            Some(3_000_000)
        );
        let mut a = Accumulator::new(Method::Counter);
        a.update(Seconds(0.0), uj(max - 1_000_000, max));
        a.update(Seconds(1.0), uj(2_000_000, max));
        assert_eq!(a.energy().0, Joules(3.0));
        assert_eq!(a.last_power, Some(Watts(3.0)));
    }

    #[test]
    fn decrease_without_range_is_a_reset_not_energy() {
        assert_eq!(counter_delta(10, 5, None), None);
        let mut a = Accumulator::new(Method::Counter);
        a.update(
            Seconds(0.0),
            Raw::Counter {
                value: 10,
                units_per_joule: 1e3,
                max: None,
                power: None,
            },
        );
        a.update(
            Seconds(1.0),
            Raw::Counter {
                value: 5,
                units_per_joule: 1e3,
                max: None,
                power: None,
            },
        );
        a.update(
            Seconds(2.0),
            Raw::Counter {
                value: 1005,
                units_per_joule: 1e3,
                max: None,
                power: None,
            },
        );
        let (e, m, note) = a.energy();
        assert_eq!((e, m), (Joules(1.0), Method::Counter));
        assert!(note.is_some());
    }

    #[test]
    fn known_power_trace_integrates_within_0_1_percent() {
        // P(t) = 100 + 50 sin(2πt/10) W over 0..10 s sampled at 10 Hz: the exact integral is
        // 1000 J (the sine integrates to 0 over a whole period).
        let mut a = Accumulator::new(Method::IntegratedPower);
        for i in 0..=100 {
            let t = i as f64 * 0.1;
            let p = 100.0 + 50.0 * (2.0 * std::f64::consts::PI * t / 10.0).sin();
            a.update(Seconds(t), Raw::Power(Watts(p)));
        }
        let (e, m, _) = a.energy();
        assert_eq!(m, Method::IntegratedPower);
        assert!((e.get() - 1000.0).abs() / 1000.0 < 1e-3, "{e}");
        // A ramp 0 → 200 W over 10 s is integrated exactly by the trapezoid rule: 1000 J.
        let mut r = Accumulator::new(Method::IntegratedPower);
        for i in 0..=10 {
            r.update(Seconds(i as f64), Raw::Power(Watts(20.0 * i as f64)));
        }
        assert!((r.energy().0.get() - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn stalled_counter_falls_back_to_power_never_zero() {
        let raw = |p| Raw::Counter {
            value: 42,
            units_per_joule: 1e3,
            max: None,
            power: Some(Watts(p)),
        };
        let mut a = Accumulator::new(Method::Counter);
        a.update(Seconds(0.0), raw(60.0));
        a.update(Seconds(0.5), raw(80.0));
        let (e, m, note) = a.energy();
        assert_eq!(m, Method::IntegratedPower);
        assert!((e.get() - 35.0).abs() < 1e-12);
        assert!(note.is_some());
    }

    #[test]
    fn counter_with_power_notes_the_integrated_power_side_by_side() {
        // Counter: 100 J over 1 s; power readings 90 W and 110 W: trapezoid 100 J → +0.00 %.
        // Then 1 s at 110 W → 110 J integrated against another 100 J counted: 210 vs 200 J.
        let raw = |mj, w| Raw::Counter {
            value: mj,
            units_per_joule: 1e3,
            max: None,
            power: Some(Watts(w)),
        };
        let mut a = Accumulator::new(Method::Counter);
        a.update(Seconds(0.0), raw(0, 90.0));
        a.update(Seconds(1.0), raw(100_000, 110.0));
        let (e, m, note) = a.energy();
        assert_eq!((e, m), (Joules(100.0), Method::Counter));
        assert_eq!(
            note.as_deref(),
            Some("integrated power readings over the same intervals: 100.000 J (+0.00 % vs the counter)")
        );
        a.update(Seconds(2.0), raw(200_000, 110.0));
        let note = a.energy().2.unwrap_or_default();
        assert!(note.contains("210.000 J (+5.00 %"), "{note}");
    }

    fn rapl(value: u64) -> Raw {
        uj(value, 262_143_328_850)
    }

    #[test]
    fn rapl_step_back_of_1_uj_is_not_a_wrap() {
        // Was read as a full wrap: +262,193 J in 1.3 s, no warning.
        let mut a = Accumulator::with_max_power(Method::Counter, Some(Watts(1000.0)));
        a.update(Seconds(0.0), rapl(50_000_000));
        a.update(Seconds(1.3), rapl(49_999_999));
        a.update(Seconds(2.3), rapl(149_999_999));
        let (e, m, note) = a.energy();
        assert_eq!((e, m), (Joules(100.0), Method::Counter));
        assert_eq!(a.rejected, 1);
        let note = note.unwrap_or_default();
        assert!(note.contains("stepped back 0.000001 J"), "{note}");
    }

    #[test]
    fn rapl_jump_to_1e18_uj_adds_no_terajoule() {
        let mut a = Accumulator::with_max_power(Method::Counter, Some(Watts(1000.0)));
        a.update(
            Seconds(0.0),
            Raw::Counter {
                value: 5_000_000,
                units_per_joule: 1e6,
                max: None,
                power: None,
            },
        );
        a.update(
            Seconds(1.0),
            Raw::Counter {
                value: 1_000_000_000_000_000_000,
                units_per_joule: 1e6,
                max: None,
                power: None,
            },
        );
        a.update(
            Seconds(2.0),
            Raw::Counter {
                value: 1_000_000_000_100_000_000,
                units_per_joule: 1e6,
                max: None,
                power: None,
            },
        );
        let (e, _, note) = a.energy();
        // Only the plausible second step (100 J in 1 s) counts.
        assert_eq!(e, Joules(100.0));
        assert_eq!(a.rejected, 1);
        assert!(note.unwrap_or_default().contains("above 1000 W"));
    }

    #[test]
    fn real_wrap_within_half_range_and_power_bound_is_kept() {
        let max = 262_143_328_850;
        let mut a = Accumulator::with_max_power(Method::Counter, Some(Watts(1000.0)));
        a.update(Seconds(0.0), rapl(max - 100_000_000));
        a.update(Seconds(1.0), rapl(200_000_000));
        assert_eq!((a.energy().0, a.rejected), (Joules(300.0), 0));
    }

    proptest! {
        #[test]
        fn delta_inverts_addition_modulo_range(max in 1u64..u64::MAX / 2, start_frac in 0.0f64..1.0, d_frac in 0.0f64..1.0) {
            let start = (max as f64 * start_frac) as u64;
            let d = (max as f64 * d_frac) as u64;
            // Adding d to start on a counter that holds 0..=max: wraps past max to 0.
            let cur = if start + d > max { start + d - max } else { start + d };
            prop_assert_eq!(counter_delta(start, cur, Some(max)), Some(d));
        }
    }
}

//! A model's life: training once, then serving `R` requests a day for `D` days. Composes saved
//! results (it does not re-model them): training's IT energy `T_it`, serving's IT energy per
//! request `s_it`, each phase with its own PUE and grid, as `amdahl carbon` applies them
//! (facility = IT × PUE, CO2e = facility × g/kWh; Patterson et al. 2021, Eq. 1).
//!
//! - cumulative energy after `d` days: `T + R·d·s` (facility, kWh);
//! - inference share over the horizon: `R·D·s / (T + R·D·s)`;
//! - the day serving overtakes training: `d* = T / (R·s)` (none when `d* > D`);
//! - between two alternatives, the one whose training costs more (`T_c > T_o`) is the cheaper
//!   over its life after `N* = (T_c − T_o) / (s_o − s_c)` requests, and never when it does not
//!   also serve more cheaply (`s_c ≥ s_o`).
//!
//! Each figure is given for energy and for CO2e: they differ when the phases run on different
//! grids or PUEs. Sources: docs/methodology.md.

use super::from_result::Saved;
use super::{positive, Basis, CarbonError, Pue};
use crate::catalog::grid::GridIntensity;
use crate::units::{shown, Joules};
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "amdahl.lifetime/1";

/// One alternative before it is put on a horizon: its label, training and serving.
pub type Side = (String, Training, Serving);

/// Training: a one-off cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Training {
    pub basis: Basis,
    /// How the IT energy was obtained, in words.
    pub method: String,
    /// IT energy (before facility overhead), kWh.
    pub it_energy_kwh: f64,
    pub pue: Pue,
    pub intensity: GridIntensity,
    /// Facility energy = IT × PUE, kWh.
    pub energy_kwh: f64,
    pub co2e_kg: f64,
}

impl Training {
    pub fn new(
        it: Joules,
        basis: Basis,
        method: impl Into<String>,
        pue: Pue,
        intensity: GridIntensity,
    ) -> Result<Self, CarbonError> {
        positive("training energy", it.get())?;
        let facility = it * pue.value;
        Ok(Self {
            basis,
            method: method.into(),
            it_energy_kwh: it.kwh(),
            energy_kwh: facility.kwh(),
            co2e_kg: (facility * intensity.g_per_kwh).kg(),
            pue,
            intensity,
        })
    }
}

/// Serving: a cost per request, quoted per 1,000 requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Serving {
    pub basis: Basis,
    pub method: String,
    /// IT energy of 1,000 requests, kWh.
    pub it_kwh_per_1000_requests: f64,
    pub pue: Pue,
    pub intensity: GridIntensity,
    /// Facility energy of 1,000 requests, kWh.
    pub kwh_per_1000_requests: f64,
    pub co2e_kg_per_1000_requests: f64,
}

impl Serving {
    /// `per_request`: IT energy of one request.
    pub fn new(
        per_request: Joules,
        basis: Basis,
        method: impl Into<String>,
        pue: Pue,
        intensity: GridIntensity,
    ) -> Result<Self, CarbonError> {
        positive("energy per request", per_request.get())?;
        let thousand = per_request * 1000.0;
        let facility = thousand * pue.value;
        Ok(Self {
            basis,
            method: method.into(),
            it_kwh_per_1000_requests: thousand.kwh(),
            kwh_per_1000_requests: facility.kwh(),
            co2e_kg_per_1000_requests: (facility * intensity.g_per_kwh).kg(),
            pue,
            intensity,
        })
    }
}

/// One alternative (training + serving) over the horizon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Alternative {
    pub label: String,
    pub training: Training,
    pub serving: Serving,
    /// Serving over the horizon (R · D requests), facility kWh and kgCO2e.
    pub serving_energy_kwh: f64,
    pub serving_co2e_kg: f64,
    pub total_energy_kwh: f64,
    pub total_co2e_kg: f64,
    /// Serving's share of the total over the horizon, in [0, 1).
    pub inference_share_energy: f64,
    pub inference_share_co2e: f64,
    /// Days of serving after which cumulative serving energy exceeds training's; `None` when
    /// that is not within the horizon.
    pub overtake_day_energy: Option<f64>,
    pub overtake_day_co2e: Option<f64>,
}

/// The point where the alternative with the costlier training becomes the cheaper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BreakEven {
    /// Label of the alternative whose training costs more.
    pub costlier_training: String,
    pub other: String,
    /// Requests served (by each) after which it is the cheaper in total; `None`: never, because
    /// it does not serve more cheaply either.
    pub requests: Option<f64>,
    /// `requests` ÷ requests per day.
    pub day: Option<f64>,
    /// Whether that happens within the horizon.
    pub within_horizon: bool,
}

/// Break-even by energy and by emissions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Versus {
    pub energy: BreakEven,
    pub co2e: BreakEven,
}

/// The result of `amdahl lifetime` (`"schema": "amdahl.lifetime/1"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LifetimeReport {
    pub schema: String,
    pub requests_per_day: f64,
    pub days: f64,
    /// Requests over the horizon: R · D.
    pub requests: f64,
    pub alternatives: Vec<Alternative>,
    /// With two alternatives: when the costlier-to-train one pays back.
    pub break_even: Option<Versus>,
}

/// The horizon: `R` requests a day for `D` days, both positive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Horizon {
    pub requests_per_day: f64,
    pub days: f64,
}

impl Horizon {
    pub fn new(requests_per_day: f64, days: f64) -> Result<Self, CarbonError> {
        let h = Self {
            requests_per_day: positive("requests per day", requests_per_day)?,
            days: positive("days", days)?,
        };
        if (h.requests_per_day * h.days).is_finite() {
            Ok(h)
        } else {
            Err(CarbonError::TooLarge {
                what: format!(
                    "{} requests a day for {} days",
                    shown(&requests_per_day),
                    shown(&days)
                ),
                fix: "give fewer --days or --requests-per-day",
            })
        }
    }
}

/// Training's IT energy, basis and method from a saved result: an `amdahl.plan/1` or
/// `amdahl.run/1`; a serving result is refused (`file` names it in errors).
pub fn training_from(saved: &Saved, file: &str) -> Result<(Joules, Basis, String), CarbonError> {
    if saved.requests.is_some() {
        return Err(CarbonError::Input {
            file: file.into(),
            message: format!(
                "`{}` is a serving result; give it as --serve, and the training as --train \
                 (amdahl.plan/1 or amdahl.run/1) or --train-kwh",
                saved.schema
            ),
        });
    }
    Ok((
        saved.energy.energy,
        saved.energy.basis,
        saved.energy.method.clone(),
    ))
}

/// Serving's IT energy per request, basis and method from a saved result: an `amdahl.infer/1`
/// or `amdahl.serve/1` (its energy over the requests it names), or an `amdahl.run/1` that served `requests_in_run` requests (a run
/// measures energy, not requests, so the count must be given); a plan is refused.
pub fn serving_from(
    saved: &Saved,
    requests_in_run: Option<f64>,
    file: &str,
) -> Result<(Joules, Basis, String), CarbonError> {
    let err = |message: String| CarbonError::Input {
        file: file.into(),
        message,
    };
    let e = &saved.energy;
    match (saved.requests, requests_in_run, saved.schema) {
        (Some(_), Some(_), schema) => Err(err(format!(
            "--requests-in-run applies to a measured run (amdahl.run/1); this `{schema}` result \
             already gives its energy per request"
        ))),
        (Some(n), None, _) => Ok((e.energy / n, e.basis, e.method.clone())),
        (None, _, "amdahl.plan/1") => Err(err(
            "`amdahl.plan/1` is a training plan; give it as --train, and serving as --serve \
             (amdahl.infer/1 or amdahl.serve/1, or amdahl.run/1 with --requests-in-run) or --kwh-per-1000-requests"
                .into(),
        )),
        (None, None, schema) => Err(err(format!(
            "a `{schema}` result measures energy, not requests; say how many requests the run \
             served with --requests-in-run N"
        ))),
        (None, Some(n), _) => {
            positive("--requests-in-run", n)?;
            Ok((
                e.energy / n,
                e.basis,
                format!("{} over {n} requests", e.method),
            ))
        }
    }
}

/// `d* = T / (R · s)` when it lies within `days`.
fn overtake(training: f64, per_request: f64, h: Horizon) -> Option<f64> {
    let d = training / (h.requests_per_day * per_request);
    (d.is_finite() && d <= h.days).then_some(d)
}

impl Alternative {
    /// `training` and `serving` over the horizon `h`.
    pub fn new(label: impl Into<String>, training: Training, serving: Serving, h: Horizon) -> Self {
        let thousands = h.requests_per_day * h.days / 1000.0;
        let se = serving.kwh_per_1000_requests * thousands;
        let sc = serving.co2e_kg_per_1000_requests * thousands;
        let share = |s: f64, t: f64| if s + t > 0.0 { s / (s + t) } else { 0.0 };
        Self {
            label: label.into(),
            serving_energy_kwh: se,
            serving_co2e_kg: sc,
            total_energy_kwh: training.energy_kwh + se,
            total_co2e_kg: training.co2e_kg + sc,
            inference_share_energy: share(se, training.energy_kwh),
            inference_share_co2e: share(sc, training.co2e_kg),
            overtake_day_energy: overtake(
                training.energy_kwh,
                serving.kwh_per_1000_requests / 1000.0,
                h,
            ),
            overtake_day_co2e: overtake(
                training.co2e_kg,
                serving.co2e_kg_per_1000_requests / 1000.0,
                h,
            ),
            training,
            serving,
        }
    }
}

/// `N* = (T_c − T_o) / (s_o − s_c)`, `(T, s)` per alternative as (training, per request).
fn break_even(a: (&str, f64, f64), b: (&str, f64, f64), h: Horizon) -> BreakEven {
    // Ties in training go to A as the "costlier"; N* is then 0 if A serves more cheaply.
    let (c, o) = if b.1 > a.1 { (b, a) } else { (a, b) };
    let cheaper_serving = o.2 - c.2;
    let requests = (cheaper_serving > 0.0).then(|| (c.1 - o.1) / cheaper_serving);
    let day = requests.map(|n| n / h.requests_per_day);
    BreakEven {
        costlier_training: c.0.into(),
        other: o.0.into(),
        requests,
        day,
        within_horizon: day.is_some_and(|d| d <= h.days),
    }
}

impl LifetimeReport {
    /// One or two alternatives over the horizon `h`; with two, the break-even between them.
    pub fn new(h: Horizon, sides: Vec<Side>) -> Result<Self, CarbonError> {
        if sides.is_empty() || sides.len() > 2 {
            return Err(CarbonError::Input {
                file: "lifetime".into(),
                message: format!("{} alternatives given; compare one or two", sides.len()),
            });
        }
        let alternatives: Vec<Alternative> = sides
            .into_iter()
            .map(|(label, t, s)| Alternative::new(label, t, s, h))
            .collect();
        if let Some(a) = alternatives
            .iter()
            .find(|a| !(a.total_energy_kwh.is_finite() && a.total_co2e_kg.is_finite()))
        {
            return Err(CarbonError::TooLarge {
                what: format!(
                    "{}'s lifetime energy or CO2e ({} kWh per 1,000 requests for {} requests)",
                    a.label,
                    shown(&a.serving.kwh_per_1000_requests),
                    shown(&(h.requests_per_day * h.days))
                ),
                fix: "give fewer --days or --requests-per-day, or check the energy per request \
                      and the grid intensity",
            });
        }
        // Per-request figures: the per-1,000 ones ÷ 1,000.
        let break_even = match alternatives.as_slice() {
            [a, b] => Some(Versus {
                energy: break_even(
                    (
                        &a.label,
                        a.training.energy_kwh,
                        a.serving.kwh_per_1000_requests / 1e3,
                    ),
                    (
                        &b.label,
                        b.training.energy_kwh,
                        b.serving.kwh_per_1000_requests / 1e3,
                    ),
                    h,
                ),
                co2e: break_even(
                    (
                        &a.label,
                        a.training.co2e_kg,
                        a.serving.co2e_kg_per_1000_requests / 1e3,
                    ),
                    (
                        &b.label,
                        b.training.co2e_kg,
                        b.serving.co2e_kg_per_1000_requests / 1e3,
                    ),
                    h,
                ),
            }),
            _ => None,
        };
        Ok(Self {
            schema: SCHEMA.into(),
            requests_per_day: h.requests_per_day,
            days: h.days,
            requests: h.requests_per_day * h.days,
            alternatives,
            break_even,
        })
    }

    /// Read one alternative back from a saved `amdahl.lifetime/1` result (`file` names it).
    pub fn read_alternative(text: &str, file: &str) -> Result<Side, CarbonError> {
        let err = |message: String| CarbonError::Input {
            file: file.into(),
            message,
        };
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| err(format!("not valid JSON: {e}")))?;
        match v.get("schema").and_then(serde_json::Value::as_str) {
            Some(SCHEMA) => {}
            Some(other) => {
                return Err(err(format!(
                    "schema `{other}` is not an alternative; compare the --json output of two \
                     `amdahl lifetime` runs ({SCHEMA}), e.g. `amdahl lifetime --train {other_hint} \
                     ... --json > A.json`",
                    other_hint = if other == "amdahl.infer/1" {
                        "plan.json --serve infer.json"
                    } else {
                        "FILE --serve FILE"
                    }
                )))
            }
            None => {
                return Err(err(
                    "no `schema` field; give the --json output of `amdahl lifetime`".into(),
                ))
            }
        }
        let r: LifetimeReport =
            serde_json::from_value(v).map_err(|e| err(format!("not a {SCHEMA} result: {e}")))?;
        match <[Alternative; 1]>::try_from(r.alternatives) {
            Ok([a]) => {
                // Rebuild both phases from their inputs, so the derived figures are recomputed
                // and the inputs checked as when they were first given (PUE ≥ 1, energy > 0).
                let (t, s) = (a.training, a.serving);
                let check = |e: CarbonError| err(e.to_string());
                let training = Training::new(
                    Joules::from_kwh(t.it_energy_kwh),
                    t.basis,
                    t.method,
                    Pue::new(t.pue.value, t.pue.source).map_err(check)?,
                    t.intensity,
                )
                .map_err(check)?;
                let serving = Serving::new(
                    Joules::from_kwh(s.it_kwh_per_1000_requests / 1000.0),
                    s.basis,
                    s.method,
                    Pue::new(s.pue.value, s.pue.source).map_err(check)?,
                    s.intensity,
                )
                .map_err(check)?;
                Ok((a.label, training, serving))
            }
            Err(v) => Err(err(format!(
                "holds {} alternatives; compare results of single alternatives",
                v.len()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::grid::GridScope;

    fn grid(g: f64) -> GridIntensity {
        GridIntensity::custom(g, GridScope::Lifecycle, Some(2023)).unwrap()
    }
    fn pue(p: f64) -> Pue {
        Pue::new(p, "given").unwrap()
    }
    fn close(x: f64, want: f64) {
        assert!((x / want - 1.0).abs() < 1e-12, "{x} vs {want}");
    }
    fn side(label: &str, train_kwh: f64, kwh_per_1000: f64, g: f64) -> Side {
        (
            label.into(),
            Training::new(
                Joules::from_kwh(train_kwh),
                Basis::Estimated,
                "",
                pue(1.0),
                grid(g),
            )
            .unwrap(),
            Serving::new(
                Joules::from_kwh(kwh_per_1000 / 1000.0),
                Basis::Estimated,
                "",
                pue(1.0),
                grid(g),
            )
            .unwrap(),
        )
    }

    #[test]
    fn one_alternative_by_hand() {
        // Training 1,000 kWh IT × PUE 1.1 = 1,100 kWh on 400 g/kWh = 440 kg.
        // Serving 0.5 kWh IT per 1,000 requests × PUE 1.2 = 0.6 kWh on 50 g/kWh = 0.03 kg.
        // 100,000 requests a day: 60 kWh and 3 kg a day. Over 30 days: 1,800 kWh, 90 kg.
        // Overtakes by energy on day 1,100 / 60 = 18.33; by CO2e on 440 / 3 = 146.7 (> 30).
        let t = Training::new(
            Joules::from_kwh(1000.0),
            Basis::Estimated,
            "",
            pue(1.1),
            grid(400.0),
        )
        .unwrap();
        let s = Serving::new(Joules(1800.0), Basis::Estimated, "", pue(1.2), grid(50.0)).unwrap();
        let r = LifetimeReport::new(Horizon::new(1e5, 30.0).unwrap(), vec![("A".into(), t, s)])
            .unwrap();
        let a = &r.alternatives[0];
        close(a.training.energy_kwh, 1100.0);
        close(a.training.co2e_kg, 440.0);
        close(a.serving.kwh_per_1000_requests, 0.6);
        close(a.serving_energy_kwh, 1800.0);
        close(a.serving_co2e_kg, 90.0);
        close(a.total_energy_kwh, 2900.0);
        close(a.inference_share_energy, 1800.0 / 2900.0);
        close(a.inference_share_co2e, 90.0 / 530.0);
        close(a.overtake_day_energy.unwrap(), 1100.0 / 60.0);
        assert_eq!(a.overtake_day_co2e, None);
        close(r.requests, 3e6);
        assert!(r.break_even.is_none());
    }

    #[test]
    fn break_even_by_hand() {
        // A: big model, short training: 1,000 kWh, 2 kWh per 1,000 requests.
        // B: small model, long training: 3,000 kWh, 1 kWh per 1,000 requests.
        // B pays back after (3,000 − 1,000) / (2 − 1) × 1,000 = 2,000,000 requests = day 20 at
        // 100,000 a day.
        let h = Horizon::new(1e5, 30.0).unwrap();
        let r = LifetimeReport::new(
            h,
            vec![side("A", 1000.0, 2.0, 100.0), side("B", 3000.0, 1.0, 100.0)],
        )
        .unwrap();
        let v = r.break_even.unwrap();
        assert_eq!(v.energy.costlier_training, "B");
        close(v.energy.requests.unwrap(), 2e6);
        close(v.energy.day.unwrap(), 20.0);
        assert!(v.energy.within_horizon);
        close(v.co2e.requests.unwrap(), 2e6);
        // At the break-even the totals are equal: 1,000 + 2 × 2,000 = 3,000 + 1 × 2,000 = 5,000.
        // A 10-day horizon does not reach it.
        let r = LifetimeReport::new(
            Horizon::new(1e5, 10.0).unwrap(),
            vec![side("A", 1000.0, 2.0, 100.0), side("B", 3000.0, 1.0, 100.0)],
        )
        .unwrap();
        assert!(!r.break_even.unwrap().energy.within_horizon);
    }

    #[test]
    fn costlier_training_that_also_serves_dearer_never_pays() {
        let r = LifetimeReport::new(
            Horizon::new(1e5, 30.0).unwrap(),
            vec![side("A", 3000.0, 2.0, 100.0), side("B", 1000.0, 1.0, 100.0)],
        )
        .unwrap();
        let e = r.break_even.unwrap().energy;
        assert_eq!((e.costlier_training.as_str(), e.requests), ("A", None));
        assert!(!e.within_horizon);
    }

    #[test]
    fn zero_requests_and_days_are_errors() {
        for (r, d) in [(0.0, 30.0), (1e5, 0.0), (1e5, -3.0), (f64::NAN, 1.0)] {
            assert!(Horizon::new(r, d).is_err(), "{r} {d}");
        }
        assert!(Serving::new(Joules(0.0), Basis::Estimated, "", pue(1.0), grid(1.0)).is_err());
    }

    #[test]
    fn horizons_and_totals_that_overflow_are_errors_not_inf() {
        // Regression (CI, `numbers` property test): 1.1e6 requests a day for 1e308 days printed
        // "inf requests" and "inf MWh" with exit 0.
        let e = Horizon::new(1.1e6, 1e308).unwrap_err().to_string();
        assert!(
            e.contains("too large to count") && e.contains("--days"),
            "{e}"
        );
        assert!(
            Horizon::new(1e6, 1e300).is_ok(),
            "1e306 requests still count"
        );
        // A countable horizon whose energy is not: 1e300 kWh per 1,000 requests × 1e13.
        let e = LifetimeReport::new(
            Horizon::new(1e6, 1e10).unwrap(),
            vec![side("A", 1000.0, 1e300, 100.0)],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("A's lifetime energy") && e.contains("too large"),
            "{e}"
        );
    }

    #[test]
    fn saved_result_round_trips_and_others_are_refused() {
        let r = LifetimeReport::new(
            Horizon::new(1e5, 30.0).unwrap(),
            vec![side("small", 3000.0, 1.0, 100.0)],
        )
        .unwrap();
        let text = serde_json::to_string(&r).unwrap();
        let (label, t, s) = LifetimeReport::read_alternative(&text, "a.json").unwrap();
        assert_eq!(label, "small");
        assert_eq!(t, r.alternatives[0].training);
        assert_eq!(s, r.alternatives[0].serving);
        for (text, want) in [
            (r#"{"schema":"amdahl.plan/1"}"#, "not an alternative"),
            (r#"{"x":1}"#, "no `schema`"),
            (r#"{"schema":"amdahl.lifetime/1"}"#, "missing field"),
            (
                &text.replace(r#""value":1.0"#, r#""value":0.5"#),
                "PUE 0.5 is below 1",
            ),
        ] {
            let e = LifetimeReport::read_alternative(text, "a.json")
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("a.json: ") && e.contains(want), "{e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn totals_are_equal_at_break_even(
            ta in 1.0f64..1e6, tb in 1.0f64..1e6, sa in 1e-3f64..10.0, sb in 1e-3f64..10.0,
        ) {
            let h = Horizon::new(1e4, 365.0).unwrap();
            let r = LifetimeReport::new(h, vec![side("A", ta, sa, 100.0), side("B", tb, sb, 100.0)]).unwrap();
            if let Some(n) = r.break_even.unwrap().energy.requests {
                let (a, b) = (ta + n * sa / 1000.0, tb + n * sb / 1000.0);
                proptest::prop_assert!((a - b).abs() <= 1e-6 * a.max(b));
            }
        }
    }
}

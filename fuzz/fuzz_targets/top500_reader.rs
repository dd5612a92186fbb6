//! Arbitrary bytes into the TOP500 reader: sniffing (.xls OLE, .xlsx zip, CSV text), the size
//! guards, the workbook parser (calamine), header location in either orientation, and cell
//! parsing. Any input must give `Ok` or a `Top500Error`: never an uncaught panic, never an abort
//! for memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::Once;

static QUIET: Once = Once::new();

fuzz_target!(|data: &[u8]| {
    // The reader catches panics raised inside calamine and returns an error; libfuzzer-sys's
    // hook would abort on those too. Keep aborting on every other panic.
    QUIET.call_once(|| {
        let abort_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_calamine = info
                .location()
                .is_some_and(|l| l.file().contains("calamine"));
            if !in_calamine {
                abort_hook(info);
            }
        }));
    });
    // A name with a list date exercises the unit rule for lists from 2017 on.
    let _ = amdahl_model::top500::read_list("TOP500_201811.xls", data);
});

//! Arbitrary bytes into the TOP500 reader: sniffing (.xls OLE, .xlsx zip, CSV text), the
//! workbook parser (calamine), header location in either orientation, and cell parsing. Any
//! input must give `Ok` or a `Top500Error`, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A name with a list date exercises the unit rule for lists from 2017 on.
    let _ = amdahl_model::top500::read_list("TOP500_201811.xls", data);
});

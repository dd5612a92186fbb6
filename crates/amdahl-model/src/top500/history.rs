//! The built-in TOP500 history: a few systems followed across lists, typed in from the official
//! lists (`data/top500/history.csv`, each row citing its list and rank), so `amdahl top500` and
//! `amdahl surface` work with no file at hand.

use super::error::Top500Error;
use super::read::read_selection;
use super::record::ListFile;

/// The embedded history CSV (same headers as a TOP500 list, plus `List` and `Source`).
pub const HISTORY_CSV: &str = include_str!("../../../../data/top500/history.csv");

/// Parse the built-in history. It is checked by the tests, so an error here is a packaging bug;
/// it is still returned, not unwrapped.
pub fn builtin_history() -> Result<ListFile, Top500Error> {
    read_selection(
        "built-in history (data/top500/history.csv)",
        HISTORY_CSV.as_bytes(),
    )
}

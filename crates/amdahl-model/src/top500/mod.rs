//! The TOP500 list as data: reading the official spreadsheets (`.xls`, `.xlsx`, CSV) into typed
//! records, and the per-system scaling analysis of Végh ("How deep the machine learning can be",
//! arXiv:2005.00872): HPL efficiency E = Rmax/Rpeak, the non-parallel fraction
//! 1−α_eff = (1−E)/(E·(N−1)) with N stated (cores, accelerators or nodes), HPCG efficiency and
//! energy efficiency.
//!
//! Everything here is a pure function of bytes: the CLI reads files, the library parses them, so
//! the reader can be fuzzed and tested without a file system.

mod analysis;
mod devices;
mod error;
mod grid;
mod guard;
mod history;
mod read;
mod record;

pub use analysis::{
    analyse, analyse_system, count_n, NCount, NCounts, Query, SystemAnalysis, Top500Result, SCHEMA,
};
pub use devices::{device_for, Device};
pub use error::{CellProblem, Top500Error};
pub use history::{builtin_history, HISTORY_CSV};
pub use read::{read_all_sheets, read_list};
pub use record::{ListFile, ListId, System};

#[cfg(test)]
mod tests;

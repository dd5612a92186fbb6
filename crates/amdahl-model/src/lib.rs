//! Pure models behind amdahl: typed units, scaling laws and their fits, and (in later modules)
//! the distributed-training performance model, energy and carbon accounting and the embedded
//! catalogs.
//!
//! Nothing in this crate touches processes, files outside `include_str!`, sysfs or terminals:
//! every function is a function of its arguments, so it can be tested exhaustively and reused by
//! the measuring and rendering crates.

pub mod calibrate;
pub mod carbon;
pub mod catalog;
pub mod energy_validation;
pub mod flops;
pub mod infer;
pub mod interval;
pub mod names;
pub mod plan;
pub mod power;
pub mod profile;
pub mod projection;
pub mod scaling;
pub mod serve;
pub mod stats;
pub mod surface;
pub mod top500;
pub mod units;

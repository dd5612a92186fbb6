//! Distributed-training performance model and layout search (`amdahl plan`).
//!
//! Given a dense transformer ([`ModelShape`]), a device ([`Hardware`]) on a two-tier network
//! ([`Network`]) and a parallel [`Layout`] (DP × TP × PP, interleaving, sequence parallelism,
//! ZeRO, microbatch, recomputation, precision), [`evaluate`] predicts the iteration time and
//! where it goes, memory per device, throughput, MFU/HFU; [`cost()`] turns it into time, energy
//! and carbon to train D tokens; [`scaling()`] gives Végh's view (α_eff vs N); [`search()`] ranks
//! every valid layout. Devices and models come from the catalogs ([`crate::catalog`]) through
//! [`system`] and [`ModelShape::from_catalog`]. Every formula's source: docs/methodology.md.
//!
//! The modules form a chain; each imports only modules before it (no cycle):
//!
//! 1. `error`, `hardware` (devices, networks, [`ComputePrecision`]), `stages`, `collective`;
//! 2. `spec`: every input — model shape, mixture of experts, layout and its options (a leaf:
//!    plain data);
//! 3. `counts`: parameters, FLOPs and bytes of a shape; `shape`: the catalog's models;
//! 4. `validate`: the constraints on a shape and a layout;
//! 5. `optimizer`, `recompute`, `memory`, `moe` (expert-parallel time), `context`;
//! 6. `perf`: the iteration, phase by phase;
//! 7. `scaling`, `cost`, `search`, `result`, `validation`.

pub mod collective;
pub mod context;
pub mod cost;
pub mod counts;
pub mod error;
pub mod framework;
pub mod hardware;
pub mod intervals;
pub mod memory;
pub mod moe;
pub mod optimizer;
pub mod perf;
pub mod recompute;
pub mod result;
pub mod scaling;
pub mod search;
pub mod shape;
pub mod spec;
pub mod stages;
pub mod validate;
pub mod validation;

#[cfg(test)]
mod moe_validation;
#[cfg(test)]
pub(crate) mod test_support {
    use super::hardware::{catalog_system, Hardware, Network};
    use super::shape::{catalog_model, ModelShape};

    /// A catalogued model on a catalogued system, for tests.
    pub fn catalog(system: &str, model: &str) -> (ModelShape, Hardware, Network) {
        let (Ok((hw, net)), Ok(m)) = (catalog_system(system), catalog_model(model)) else {
            panic!("catalog entries {system}, {model} missing")
        };
        (m, hw, net)
    }
}
#[cfg(test)]
mod properties;

pub use cost::{cost, Cost, CostInputs};
pub use error::PlanError;
pub use framework::{Framework, Given};
pub use hardware::{
    catalog_system, system, ComputePrecision, DeviceClass, GemmCurve, Hardware, Link, Network,
    Overrides, Tuning, IDLE_FRACTION_OF_TDP,
};
pub use memory::{usable, Memory, USABLE_FRACTION};
pub use moe::Moe;
pub use optimizer::OptimizerDtype;
pub use perf::{estimate, evaluate, Breakdown, Estimate};
pub use recompute::{RecomputeModule, RecomputeModules};
pub use result::{PlanResult, RankedLayout, SearchResult, PLAN_SCHEMA, SEARCH_SCHEMA};
pub use scaling::{scaling, Scaling, ScalingPoint};
pub use search::{
    search, space_size, Objective, PlanCandidate, Rejections, SearchOutcome, SearchSpace,
};
pub use shape::{catalog_model, ModelShape};
pub use spec::{Layout, Recompute, Zero3Prefetch};
pub use validate::{data_parallel_degree, validate, validate_model};
pub use validation::{
    find as find_validation_run, summarise, validation_set, ErrorSummary, ValidationRun,
    ValidationSetError,
};

//! Serving model (`amdahl infer`): prefill and decode of a decoder-only transformer on N devices
//! with tensor (and pipeline) parallelism and continuous batching; latency, throughput, memory,
//! MFU/MBU, power, energy per token and per request, and the search over TP × precision × batch.
//!
//! It shares the planner's model shapes ([`ModelShape`](crate::plan::ModelShape)), devices
//! ([`Hardware`](crate::plan::Hardware), [`Network`](crate::plan::Network)), collectives
//! ([`crate::plan::collective`]), arithmetic precisions and power model
//! ([`Hardware::power`](crate::plan::Hardware::power)); this module adds only what serving
//! needs. Every formula's source: docs/methodology.md ("Inference").

pub mod charging;
pub mod engine;
pub mod error;
pub mod intervals;
pub mod model;
pub mod precision;
pub mod result;
pub mod search;
pub mod step;

#[cfg(test)]
mod properties;
pub mod validation;

pub use engine::{Engine, USABLE_MEMORY};
pub use error::InferError;
pub use model::{
    batch_for_rate, estimate, evaluate_at, iteration, replicas, setup, setup_unchecked, Evaluation,
    InferMemory, Iteration, Requests, Serving, Setup,
};
pub use precision::{Arithmetic, KvFormat, WeightFormat};
pub use result::{
    BatchChoice, Charging, Context, InferResult, InferSearchResult, INFER_SCHEMA,
    INFER_SEARCH_SCHEMA,
};
pub use search::{search, Outcome, ServingCandidate, Space};

//! The model scope a measured energy total compares with. amdahl's models give energy at two
//! scopes, **GPU** (board power) and **server (wall)** (GPUs, host CPUs, DRAM, NICs, fans,
//! storage, power-supply losses); no counter amdahl reads covers a whole server, so a measured
//! total is one of the three below (`amdahl_meter::coverage` decides which from its devices).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CoveredScope {
    /// GPU boards only: the GPU scope of `plan`, `infer` and `serve`.
    Gpu,
    /// GPU boards and some of the host (CPU packages, DRAM): above the GPU scope, below the
    /// server (wall) scope.
    GpuAndPartOfHost,
    /// Host parts only (no GPU in the total).
    PartOfHost,
}

impl CoveredScope {
    /// The scope in words: what the total may be compared with.
    pub fn words(self) -> &'static str {
        match self {
            CoveredScope::Gpu => "GPU scope",
            CoveredScope::GpuAndPartOfHost => {
                "GPU scope plus part of the host, below the server (wall) scope"
            }
            CoveredScope::PartOfHost => "part of the host, no GPU",
        }
    }
}

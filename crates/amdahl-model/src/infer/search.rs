//! `amdahl infer --search`: every TP (divisors of the node size that the heads allow), weight
//! format and batch; ranked by energy per output token under latency limits, with the Pareto
//! front of TPOT vs energy per token.

use super::charging::Charging;
use super::engine::Engine;
use super::error::InferError;
use super::model::{estimate, setup, Requests, Serving, Setup};
use super::precision::{KvFormat, WeightFormat};
use crate::plan::error::divisors;
use crate::plan::{Hardware, ModelShape, Network};
use crate::units::Watts;
use serde::{Deserialize, Serialize};

/// What the search enumerates.
#[derive(Debug, Clone, PartialEq)]
pub struct Space {
    pub gpus: u64,
    pub pp: u32,
    pub kv: KvFormat,
    pub engine: Engine,
    /// The engine's memory share every configuration runs with (`--gpu-memory-fraction`).
    pub memory_fraction: Option<f64>,
    pub precisions: Vec<WeightFormat>,
    pub max_batch: u32,
    pub max_ttft_s: Option<f64>,
    pub max_tpot_s: Option<f64>,
    pub top: usize,
    /// Board power limits to try (`--search-power-cap`); empty: the device as it is.
    pub power_caps: Vec<Watts>,
}

/// One configuration the search evaluated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Candidate")]
pub struct ServingCandidate {
    pub tp: u32,
    pub pp: u32,
    pub replicas: u32,
    pub precision: WeightFormat,
    pub arithmetic: String,
    pub batch: u32,
    pub ttft_s: f64,
    pub tpot_s: f64,
    pub output_tokens_per_s: f64,
    pub requests_per_s: f64,
    pub power_per_gpu_w: f64,
    pub energy_per_token_j: f64,
    pub co2e_per_1000_requests_g: f64,
    pub memory_per_gpu_bytes: f64,
    /// The power limit this candidate ran under (`--search-power-cap`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_cap_w: Option<f64>,
    /// Intervals of its figures (as in `amdahl.infer/1`), for the listed candidates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<super::intervals::InferIntervals>,
}

/// What the search found.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub evaluated: u64,
    pub feasible: u64,
    pub ranked: Vec<ServingCandidate>,
    pub pareto: Vec<ServingCandidate>,
    pub skipped: Vec<String>,
}

/// What the search has seen so far: the candidates within the limits, how many it evaluated, and
/// the best latencies (named when nothing meets the limits).
struct Tally {
    all: Vec<ServingCandidate>,
    evaluated: u64,
    best_ttft: f64,
    best_tpot: f64,
}

/// Every batch of one configuration (TP × weight format) under every cap of the space.
fn evaluate_setup(
    s: &Setup,
    hw: &Hardware,
    net: &Network,
    space: &Space,
    charging: &Charging,
    tally: &mut Tally,
) {
    let sv = s.serving;
    let arithmetic = s.arithmetic.describe(sv.weights);
    // The memory a configuration needs does not depend on the cap: one setup, every cap.
    let caps: Vec<Option<Watts>> = if space.power_caps.is_empty() {
        vec![hw.power_cap]
    } else {
        space
            .power_caps
            .iter()
            .map(|c| (*c < hw.tdp).then_some(*c))
            .collect()
    };
    for cap in caps {
        let capped = Hardware {
            power_cap: cap,
            ..hw.clone()
        };
        for b in 1..=s.max_batch.min(space.max_batch) {
            let e = estimate(s, &capped, net, b);
            tally.evaluated += 1;
            tally.best_ttft = tally.best_ttft.min(e.ttft_s);
            tally.best_tpot = tally.best_tpot.min(e.tpot_s);
            if space.max_ttft_s.is_some_and(|m| e.ttft_s > m)
                || space.max_tpot_s.is_some_and(|m| e.tpot_s > m)
            {
                continue;
            }
            tally.all.push(ServingCandidate {
                tp: sv.tp,
                pp: sv.pp,
                replicas: sv.replicas,
                precision: sv.weights,
                arithmetic: arithmetic.clone(),
                batch: b,
                ttft_s: e.ttft_s,
                tpot_s: e.tpot_s,
                output_tokens_per_s: e.output_tokens_per_s,
                requests_per_s: e.requests_per_s,
                power_per_gpu_w: e.power_per_gpu_w,
                energy_per_token_j: e.energy_per_token_j,
                co2e_per_1000_requests_g: charging.co2e_g(e.energy_per_request_j * 1000.0),
                memory_per_gpu_bytes: e.memory.total.get(),
                power_cap_w: (!space.power_caps.is_empty()).then(|| cap.unwrap_or(hw.tdp).get()),
                intervals: None,
            });
        }
    }
}

/// Enumerate and rank. Fails when nothing fits or nothing meets the limits, saying the best
/// latencies found.
pub fn search(
    model: &ModelShape,
    hw: &Hardware,
    net: &Network,
    req: Requests,
    space: &Space,
    charging: &Charging,
) -> Result<Outcome, InferError> {
    let mut tally = Tally {
        all: Vec::new(),
        evaluated: 0,
        best_ttft: f64::INFINITY,
        best_tpot: f64::INFINITY,
    };
    let mut skipped = Vec::new();
    let mut first_error: Option<InferError> = None;
    for tp in divisors(u64::from(net.gpus_per_node)) {
        let tp = tp as u32;
        let tp_pp = u64::from(tp) * u64::from(space.pp);
        if tp_pp > space.gpus || !space.gpus.is_multiple_of(tp_pp) {
            continue;
        }
        let replicas = u32::try_from(space.gpus / tp_pp).unwrap_or(u32::MAX);
        for &w in &space.precisions {
            let serving = Serving {
                tp,
                pp: space.pp,
                replicas,
                weights: w,
                kv: space.kv,
                engine: space.engine,
                memory_fraction: space.memory_fraction,
            };
            let s = match setup(model, hw, net, serving, req) {
                Ok(s) => s,
                Err(e) => {
                    skipped.push(format!("tp {tp} {}: {e}", w.name()));
                    first_error.get_or_insert(e);
                    continue;
                }
            };
            evaluate_setup(&s, hw, net, space, charging, &mut tally);
        }
    }
    let Tally {
        mut all,
        evaluated,
        best_ttft,
        best_tpot,
    } = tally;
    if evaluated == 0 {
        return Err(first_error.unwrap_or(InferError::Zero {
            what: "--gpus (no TP × PP divides it)",
            value: space.gpus,
        }));
    }
    if all.is_empty() {
        let ms = |x: Option<f64>, name: &str| x.map(|v| format!(" {name} {:.1} ms", v * 1e3));
        let limits: String = [
            ms(space.max_ttft_s, "TTFT ≤"),
            ms(space.max_tpot_s, "TPOT ≤"),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(",");
        return Err(InferError::NoneMeetsLimits {
            limits: format!(" ({})", limits.trim()),
            best_ttft_ms: best_ttft * 1e3,
            best_tpot_ms: best_tpot * 1e3,
        });
    }
    let feasible = all.len() as u64;
    let pareto = pareto(&all);
    // Rank the best batch of each (TP, precision): neighbouring batches of one configuration
    // differ by a fraction of a percent and would fill the list.
    all.sort_by(|a, b| a.energy_per_token_j.total_cmp(&b.energy_per_token_j));
    let mut seen = Vec::new();
    all.retain(|c| {
        let key = (c.tp, c.precision);
        let new = !seen.contains(&key);
        if new {
            seen.push(key);
        }
        new
    });
    all.truncate(space.top.max(1));
    Ok(Outcome {
        evaluated,
        feasible,
        ranked: all,
        pareto,
        skipped,
    })
}

/// The front of TPOT vs energy per token: sorted by TPOT, keep each configuration cheaper than
/// every faster one.
fn pareto(all: &[ServingCandidate]) -> Vec<ServingCandidate> {
    let mut idx: Vec<usize> = (0..all.len()).collect();
    idx.sort_by(|&a, &b| {
        all[a].tpot_s.total_cmp(&all[b].tpot_s).then(
            all[a]
                .energy_per_token_j
                .total_cmp(&all[b].energy_per_token_j),
        )
    });
    let mut best = f64::INFINITY;
    let mut front = Vec::new();
    for i in idx {
        if all[i].energy_per_token_j < best {
            best = all[i].energy_per_token_j;
            front.push(all[i].clone());
        }
    }
    front
}

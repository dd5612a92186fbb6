//! `amdahl serve --search`: the same request stream simulated on every configuration of a space
//! — tensor parallelism, replicas, `max_num_seqs`, weight format and board power cap — to find
//! the cheapest one that sustains the rate and meets the SLOs: by energy per request (idle
//! replicas included, since an idle GPU still draws) and by GPUs; with the Pareto front of p99
//! end-to-end latency against energy per request. A rate nothing sustains, or SLOs nothing meets,
//! is an error that names the best configuration found.

use super::error::ServeError;
use super::max_rate::judge;
use super::scheduler::{Limits, PrefillBatching};
use super::{check_requests, prepare, simulate, Client, Config, Request, Router};
use crate::infer::{Engine, KvFormat, Serving, WeightFormat};
use crate::plan::error::divisors;
use crate::plan::{Hardware, ModelShape, Network};
use crate::stats::{quantile, sorted};
use crate::units::Watts;
use serde::{Deserialize, Serialize};

pub const SERVE_SEARCH_SCHEMA: &str = "amdahl.serve-search/1";

/// What to search over.
#[derive(Debug, Clone)]
pub struct SearchSpace {
    /// The most devices a configuration may use (`--gpus`).
    pub max_gpus: u64,
    pub pp: u32,
    pub kv: KvFormat,
    pub engine: Engine,
    /// The engine's memory share every configuration runs with (`--gpu-memory-fraction`).
    pub memory_fraction: Option<f64>,
    pub precisions: Vec<WeightFormat>,
    pub max_num_seqs: Vec<u32>,
    pub max_num_batched_tokens: u32,
    /// Decode steps per scheduling decision (every configuration runs with it).
    pub num_scheduler_steps: u32,
    /// Whether prompts share iterations with decode steps (every configuration runs with it).
    pub prefill: PrefillBatching,
    /// Tokens every prompt shares, held by each replica's prefix cache (`--shared-prefix`).
    pub shared_prefix: u32,
    /// How the requests reach the server (`--frontend-ms`; [`super::client`]).
    pub client: Client,
    /// Board power limits to try; empty: the device as it is.
    pub power_caps: Vec<Watts>,
    pub router: Router,
    pub slo_ttft_s: Option<f64>,
    pub slo_tpot_s: Option<f64>,
}

/// One simulated configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServeCandidate {
    pub tp: u32,
    pub pp: u32,
    pub replicas: u32,
    pub gpus: u64,
    pub precision: WeightFormat,
    pub max_num_seqs: u32,
    /// The board limit tried (`None`: the device as it is).
    pub power_cap_w: Option<f64>,
    pub ttft_p99_s: f64,
    pub tpot_p99_s: Option<f64>,
    pub e2e_p99_s: f64,
    pub completed_requests_per_s: f64,
    /// GPU energy of the run (iterations and idle replicas) over the requests.
    pub energy_per_request_j: f64,
    pub overloaded: bool,
    /// The worst p99 over its SLO (≤ 1 meets every SLO given; 0 without SLOs).
    pub slo_ratio: f64,
    /// The queue's peak and when (where an overloaded run's queue blew up).
    pub max_waiting: u64,
    pub max_waiting_at_s: f64,
}

impl ServeCandidate {
    pub fn feasible(&self) -> bool {
        !self.overloaded && self.slo_ratio <= 1.0
    }

    /// `tp 2 × 4, fp8, 256 seqs, cap 500 W`.
    pub fn describe(&self) -> String {
        let cap = self
            .power_cap_w
            .map_or(String::new(), |c| format!(", cap {c:.0} W"));
        format!(
            "tp {} × pp {} × {} replica(s) ({} GPUs), {}, max-num-seqs {}{cap}",
            self.tp,
            self.pp,
            self.replicas,
            self.gpus,
            self.precision.name(),
            self.max_num_seqs
        )
    }
}

/// The search's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServeSearch {
    pub schema: String,
    pub model: String,
    pub system: String,
    pub workload: String,
    pub requests: u64,
    /// The client every configuration served (absent from files written before it existed,
    /// which were open loops without a frontend).
    #[serde(default)]
    pub client: Client,
    pub slo_ttft_s: Option<f64>,
    pub slo_tpot_s: Option<f64>,
    /// Configurations simulated.
    pub evaluated: u64,
    /// Configurations refused before simulation (memory, TP), with why.
    pub skipped: Vec<String>,
    pub feasible: u64,
    /// Least energy per request among the feasible.
    pub cheapest_energy: ServeCandidate,
    /// Fewest GPUs among the feasible (least energy on a tie).
    pub fewest_gpus: ServeCandidate,
    /// Feasible configurations no other beats on both p99 end-to-end latency and energy per
    /// request, by latency.
    pub pareto: Vec<ServeCandidate>,
    /// The feasible, by energy per request (at most 20).
    pub ranked: Vec<ServeCandidate>,
}

/// The configurations of the space, in a fixed order.
fn configs(net: &Network, space: &SearchSpace) -> Vec<(Serving, u32, Option<Watts>)> {
    let caps: Vec<Option<Watts>> = if space.power_caps.is_empty() {
        vec![None]
    } else {
        space.power_caps.iter().copied().map(Some).collect()
    };
    let mut out = Vec::new();
    for tp in divisors(u64::from(net.gpus_per_node)) {
        let per = tp * u64::from(space.pp);
        // Without an intra-node figure only replicas of one device per node are simulated;
        // `search` says once per TP why the others are not.
        if net.lacks_intra_for(per) {
            continue;
        }
        for replicas in 1..=space.max_gpus / per.max(1) {
            for &weights in &space.precisions {
                for &seqs in &space.max_num_seqs {
                    for &cap in &caps {
                        let serving = Serving {
                            tp: tp as u32,
                            pp: space.pp,
                            replicas: replicas as u32,
                            weights,
                            kv: space.kv,
                            engine: space.engine,
                            memory_fraction: space.memory_fraction,
                        };
                        out.push((serving, seqs, cap));
                    }
                }
            }
        }
    }
    out
}

/// The TPs `configs` leaves out for want of an intra-node link, each with the refusal that
/// names `--intra-gbs`.
fn no_intra_node(hw: &Hardware, net: &Network, space: &SearchSpace) -> Vec<String> {
    divisors(u64::from(net.gpus_per_node))
        .into_iter()
        .filter(|tp| net.lacks_intra_for(tp * u64::from(space.pp)))
        .filter_map(|tp| {
            let what = format!("tp {tp} × pp {} per replica", space.pp);
            let e = net.check_span(&hw.name, tp * u64::from(space.pp), what);
            e.err().map(|e| format!("tp {tp}: {e}"))
        })
        .collect()
}

/// Simulate one configuration.
fn candidate(
    model: &ModelShape,
    hw: &Hardware,
    net: &Network,
    space: &SearchSpace,
    (serving, seqs, cap): (Serving, u32, Option<Watts>),
    requests: &[Request],
) -> Result<ServeCandidate, ServeError> {
    let hw = Hardware {
        power_cap: cap.filter(|c| *c < hw.tdp).or(hw.power_cap),
        ..hw.clone()
    };
    let config = Config {
        serving,
        limits: Limits {
            max_num_seqs: seqs,
            max_num_batched_tokens: space.max_num_batched_tokens,
            num_scheduler_steps: space.num_scheduler_steps,
            prefill: space.prefill,
            shared_prefix: space.shared_prefix,
        },
        router: space.router,
        client: space.client,
    };
    let p = prepare(model, &hw, net, &config)?;
    check_requests(model, &p, &config.limits, requests, "the workload")?;
    let run = simulate(&p, &hw, net, &config, requests);
    // The p99s, throughput, energy and queue as `serve --max-rate` judges a run (the rate it
    // records is not used here).
    let judged = judge(
        &run,
        &space.client,
        f64::NAN,
        space.slo_ttft_s,
        space.slo_tpot_s,
    );
    let (ttft, tpot) = (judged.ttft_p99_s, judged.tpot_p99_s);
    let e2e = quantile(
        &sorted(&run.records.iter().map(|r| r.e2e_s).collect::<Vec<_>>()),
        0.99,
    )
    .unwrap_or(f64::NAN);
    let ratio = [
        space.slo_ttft_s.map(|s| ttft / s),
        space.slo_tpot_s.zip(tpot).map(|(s, t)| t / s),
    ]
    .into_iter()
    .flatten()
    .fold(0.0, f64::max);
    Ok(ServeCandidate {
        tp: serving.tp,
        pp: serving.pp,
        replicas: serving.replicas,
        gpus: serving.gpus(),
        precision: serving.weights,
        max_num_seqs: seqs,
        power_cap_w: cap.map(|c| c.get()),
        ttft_p99_s: ttft,
        tpot_p99_s: tpot,
        e2e_p99_s: e2e,
        completed_requests_per_s: judged.completed_requests_per_s,
        energy_per_request_j: judged.energy_per_request_j,
        overloaded: judged.overloaded,
        slo_ratio: ratio,
        max_waiting: run.max_waiting,
        max_waiting_at_s: run.max_waiting_at_s,
    })
}

/// Feasible candidates no other is at least as good as on both axes and better on one.
fn pareto(feasible: &[ServeCandidate]) -> Vec<ServeCandidate> {
    let mut by_latency: Vec<&ServeCandidate> = feasible.iter().collect();
    by_latency.sort_by(|a, b| {
        a.e2e_p99_s
            .total_cmp(&b.e2e_p99_s)
            .then(a.energy_per_request_j.total_cmp(&b.energy_per_request_j))
    });
    let mut front: Vec<ServeCandidate> = Vec::new();
    for c in by_latency {
        if front
            .last()
            .is_none_or(|f| c.energy_per_request_j < f.energy_per_request_j)
        {
            front.push(c.clone());
        }
    }
    front
}

/// Why nothing was feasible: the rate is beyond every configuration (the best sustained rate and
/// where its queue blew up), or the SLOs are (the closest configuration).
fn nothing_feasible(all: &[ServeCandidate], rate: f64) -> ServeError {
    let sustained: Vec<&ServeCandidate> = all.iter().filter(|c| !c.overloaded).collect();
    if sustained.is_empty() {
        let best = all
            .iter()
            .max_by(|a, b| {
                a.completed_requests_per_s
                    .total_cmp(&b.completed_requests_per_s)
            })
            .cloned();
        return match best {
            Some(b) => ServeError::NoneSustains {
                rate,
                best: b.completed_requests_per_s,
                config: b.describe(),
                waiting: b.max_waiting,
                at_s: b.max_waiting_at_s,
            },
            None => ServeError::Flag {
                what: "--search",
                want: "a space with at least one configuration that fits",
                got: "none".into(),
            },
        };
    }
    let closest = sustained
        .iter()
        .min_by(|a, b| a.slo_ratio.total_cmp(&b.slo_ratio))
        .map(|c| (*c).clone());
    match closest {
        Some(c) => ServeError::NoneMeetsSlo {
            config: c.describe(),
            ttft_ms: c.ttft_p99_s * 1e3,
            tpot_ms: c.tpot_p99_s.unwrap_or(f64::NAN) * 1e3,
            ratio: c.slo_ratio,
        },
        None => ServeError::Flag {
            what: "--search",
            want: "SLOs",
            got: "none".into(),
        },
    }
}

/// The header of a search result: what was searched.
pub struct Described<'a> {
    pub workload: &'a str,
    pub rate: f64,
}

/// Simulate `requests` on every configuration of `space`.
pub fn search(
    model: &ModelShape,
    hw: &Hardware,
    net: &Network,
    space: &SearchSpace,
    requests: &[Request],
    d: Described,
) -> Result<ServeSearch, ServeError> {
    let mut all = Vec::new();
    let mut skipped = no_intra_node(hw, net, space);
    for cfg in configs(net, space) {
        match candidate(model, hw, net, space, cfg, requests) {
            Ok(c) => all.push(c),
            Err(e) => skipped.push(format!(
                "tp {} × {} {} max-num-seqs {}: {e}",
                cfg.0.tp,
                cfg.0.replicas,
                cfg.0.weights.name(),
                cfg.1
            )),
        }
    }
    let mut feasible: Vec<ServeCandidate> = all.iter().filter(|c| c.feasible()).cloned().collect();
    if feasible.is_empty() {
        return Err(nothing_feasible(&all, d.rate));
    }
    feasible.sort_by(|a, b| a.energy_per_request_j.total_cmp(&b.energy_per_request_j));
    let cheapest_energy = feasible[0].clone();
    let fewest_gpus = feasible
        .iter()
        .min_by(|a, b| {
            a.gpus
                .cmp(&b.gpus)
                .then(a.energy_per_request_j.total_cmp(&b.energy_per_request_j))
        })
        .cloned()
        .unwrap_or_else(|| cheapest_energy.clone());
    Ok(ServeSearch {
        schema: SERVE_SEARCH_SCHEMA.into(),
        model: model.name.clone(),
        system: hw.name.clone(),
        workload: d.workload.into(),
        requests: requests.len() as u64,
        client: space.client,
        slo_ttft_s: space.slo_ttft_s,
        slo_tpot_s: space.slo_tpot_s,
        evaluated: all.len() as u64,
        skipped,
        feasible: feasible.len() as u64,
        cheapest_energy,
        fewest_gpus,
        pareto: pareto(&feasible),
        ranked: feasible.into_iter().take(20).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{catalog_model, catalog_system};
    use crate::serve::{generate, Arrivals, Generated, Lengths};

    fn space(max_gpus: u64, slo_ttft_s: Option<f64>) -> SearchSpace {
        SearchSpace {
            max_gpus,
            pp: 1,
            kv: KvFormat::Bf16,
            engine: Default::default(),
            memory_fraction: None,
            precisions: vec![WeightFormat::Bf16, WeightFormat::Fp8],
            max_num_seqs: vec![64, 256],
            max_num_batched_tokens: 8192,
            num_scheduler_steps: 1,
            prefill: PrefillBatching::Mixed,
            shared_prefix: 0,
            client: Client::HTTP,
            power_caps: vec![],
            router: Router::RoundRobin,
            slo_ttft_s,
            slo_tpot_s: None,
        }
    }

    fn workload(rate: f64) -> Vec<Request> {
        let g = Generated {
            arrivals: Arrivals::Poisson { rate },
            input: Lengths::Fixed { tokens: 512 },
            output: Lengths::Fixed { tokens: 128 },
            requests: 300,
            duration_s: None,
            seed: 1,
        };
        generate(&g, 8192, "m").unwrap().0
    }

    #[test]
    fn the_cheapest_meets_the_slos_and_the_front_is_ordered() {
        // Llama-3-8B on up to 2 H100 at 10 requests/s (a quarter of one H100's capacity,
        // docs/usage/serve.md): tp 1|2 × 1|2 replicas × 2 formats × 2 caps of seqs = 12 runs.
        let m = catalog_model("llama3-8b").unwrap();
        let (hw, net) = catalog_system("h100").unwrap();
        let d = Described {
            workload: "w",
            rate: 10.0,
        };
        let s = search(&m, &hw, &net, &space(2, Some(1.0)), &workload(10.0), d).unwrap();
        assert!(s.evaluated >= 8, "{}", s.evaluated);
        assert!(s.cheapest_energy.feasible());
        assert_eq!(s.fewest_gpus.gpus, 1);
        assert!(s
            .ranked
            .windows(2)
            .all(|w| w[0].energy_per_request_j <= w[1].energy_per_request_j));
        assert!(s.pareto.windows(2).all(|w| w[0].e2e_p99_s <= w[1].e2e_p99_s
            && w[0].energy_per_request_j > w[1].energy_per_request_j));
        assert_eq!(
            s.pareto.last().map(|c| c.energy_per_request_j),
            Some(s.cheapest_energy.energy_per_request_j)
        );
    }

    #[test]
    fn an_impossible_rate_or_slo_says_the_best_found() {
        let m = catalog_model("llama3-8b").unwrap();
        let (hw, net) = catalog_system("h100").unwrap();
        // 2,000 requests/s is ~50× one H100's capacity: every configuration overloads.
        let d = Described {
            workload: "w",
            rate: 2000.0,
        };
        let e = search(&m, &hw, &net, &space(1, None), &workload(2000.0), d).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, ServeError::NoneSustains { .. }), "{text}");
        assert!(
            text.contains("the most any does") && text.contains("queue"),
            "{text}"
        );
        // A TTFT SLO of 1 µs: no prefill is that fast.
        let d = Described {
            workload: "w",
            rate: 5.0,
        };
        let e = search(&m, &hw, &net, &space(1, Some(1e-6)), &workload(5.0), d).unwrap_err();
        assert!(matches!(e, ServeError::NoneMeetsSlo { .. }), "{e}");
        assert!(e.to_string().contains("closest"), "{e}");
    }
}

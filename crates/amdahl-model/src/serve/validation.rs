//! The serving validation set (data/validation/serve.csv): published tail latencies and
//! throughputs of LLM servers under a request stream, each row typed as a user types
//! `amdahl serve`, simulated here and set beside its published figures. `amdahl catalog
//! validation --serve` prints it; data/validation/serve.md says how each source was read.
//!
//! Nothing is fitted to the set: the step model, the power model and the scheduler are the ones
//! `amdahl serve` uses, and a row's knobs are published values or engine defaults (its
//! `settings` column says which). The targets are the specification's: p50 within 20 %, p99
//! within 30 %, throughput within 15 %.

use super::datasets::Side;
use super::{
    check_requests, generate, prepare, simulate, Arrivals, Client, Config, Generated, Lengths,
    Limits, PrefillBatching, Request, Router,
};
use crate::infer::{Engine, KvFormat, Serving, WeightFormat};
use crate::plan::{catalog_model, system, Overrides};
use crate::stats::{median, quantile, sorted, Counted};
use serde::{Deserialize, Serialize};

const SERVE_CSV: &str = include_str!("../../../../data/validation/serve.csv");

/// The seed of every simulated row (the CLI's default).
const SEED: u64 = 0;

/// Requests simulated for a row that does not publish its count: ten minutes of arrivals (MLPerf
/// Inference's minimum server-scenario duration, `min_duration` 600,000 ms) at the row's rate,
/// at most [`MOST_REQUESTS`]; enough for the batch to fill and the warm-up to weigh little.
const DEFAULT_SPAN_S: f64 = 600.0;
const MOST_REQUESTS: u32 = 65_000;

/// The step in offered load by which each Poisson row's sensitivity is measured: the same
/// requests, arriving 5 % faster ([`Metric::load_sensitivity`]). 5 % is below every accuracy
/// amdahl has for a throughput or a step time: the planner's ~5 % on published dense training
/// runs (docs/methodology.md), 7.8 % median on this set's throughputs, 16.9 % mean on `infer`'s
/// serving cases. A figure that a 5 % error in the modelled capacity would carry beyond its
/// target therefore tests the capacity, not the latency model.
pub const LOAD_STEP: f64 = 0.05;

/// Bounds on |predicted / published − 1| by class (the specification's targets).
pub const TARGET_P50: f64 = 0.20;
pub const TARGET_P99: f64 = 0.30;
pub const TARGET_THROUGHPUT: f64 = 0.15;

/// One row of the set, as typed (the file's header explains every column).
#[derive(Debug, Clone, Deserialize)]
struct Row {
    id: String,
    source: String,
    engine: String,
    engine_version: String,
    model: String,
    system: String,
    gpus: u64,
    tp: u32,
    pp: u32,
    replicas: u32,
    precision: String,
    kv_precision: String,
    max_num_seqs: u32,
    max_num_batched_tokens: u32,
    settings: String,
    arrivals: String,
    rate_rps: Option<f64>,
    requests: Option<u32>,
    input_dist: String,
    output_dist: String,
    lengths: String,
    ttft_p50_ms: Option<f64>,
    ttft_p90_ms: Option<f64>,
    ttft_p99_ms: Option<f64>,
    tpot_p50_ms: Option<f64>,
    tpot_p90_ms: Option<f64>,
    tpot_p99_ms: Option<f64>,
    e2e_p50_s: Option<f64>,
    e2e_p99_s: Option<f64>,
    output_tokens_per_s: Option<f64>,
    requests_per_s: Option<f64>,
    in_claim: String,
    why_not: String,
    locator: String,
    inter_gbit: Option<f64>,
    num_scheduler_steps: u32,
    #[serde(default)]
    itl_p50_ms: Option<f64>,
    #[serde(default)]
    itl_p90_ms: Option<f64>,
    #[serde(default)]
    itl_p99_ms: Option<f64>,
    /// `--gpus-per-node` where the run's nodes held fewer GPUs than the catalog's reference
    /// server (a replica spread over two 4-GPU pods); `None`: the catalog's.
    #[serde(default)]
    gpus_per_node: Option<u32>,
    /// `--frontend-ms`: 0 where the client runs in the engine's process (MLPerf's LoadGen);
    /// `None`: the default, [`super::FRONTEND_MS`] (an HTTP client such as `bench_serving`).
    #[serde(default)]
    frontend_ms: Option<f64>,
    /// `--max-concurrency`: the client's limit on requests in flight (bench_serving's
    /// `--max-concurrency`); `None`: each request sent at its scheduled time.
    #[serde(default)]
    max_concurrency: Option<u32>,
    /// `--power-cap`: the board power limit of the run (MLPerf's MaxQ `power_limit`), W;
    /// `None`: the device as it is.
    #[serde(default)]
    power_cap_w: Option<f64>,
    /// Mean wall power of the whole server over the run, W (MLPerf Power's measurement).
    #[serde(default)]
    server_power_w: Option<f64>,
    /// The benchmark's latency limits (MLPerf's server scenario: p99 TTFT and TPOT), ms: where
    /// given, the published rate is also a capacity, the rate the run served within them.
    #[serde(default)]
    slo_ttft_ms: Option<f64>,
    #[serde(default)]
    slo_tpot_ms: Option<f64>,
    /// `--intra-gbs`: the NVLink bandwidth per GPU and direction between a replica's GPUs, GB/s,
    /// where the board's topology gives them less than the catalog's switched figure (a 4-GPU
    /// HGX H100 board: 6 of the 18 links join each pair); `None`: the catalog's.
    #[serde(default)]
    intra_gbs: Option<f64>,
    /// `--gpu-memory-fraction`: the engine's memory share where the run set one other than its
    /// default (MLPerf's `kvcache_free_gpu_mem_frac`); `None`: the engine's default, 0.9.
    #[serde(default)]
    gpu_memory_fraction: Option<f64>,
}

/// One published figure and its prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Metric {
    /// The column: `ttft_p99_ms`, `output_tokens_per_s`, …
    pub metric: String,
    /// `p50`, `p90`, `p99`, `throughput`, `capacity` or `power`.
    pub class: String,
    pub published: f64,
    pub predicted: f64,
    /// predicted / published − 1.
    pub error: f64,
    /// How far the prediction moves when the same requests arrive [`LOAD_STEP`] (5 %) faster:
    /// predicted at 1.05 × the rate / predicted − 1. More load is roughly what a modelled
    /// capacity too high by as much does to the queue, so where this exceeds the class's target
    /// the figure is **ill-conditioned**: near saturation, capacity alone decides it and it
    /// cannot test the simulator's latency model. `None` for all-at-once rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_sensitivity: Option<f64>,
}

/// One row: its configuration and its figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServeCase {
    pub id: String,
    pub source: String,
    pub engine: String,
    pub model: String,
    pub system: String,
    pub gpus: u64,
    pub tp: u32,
    pub replicas: u32,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    /// `--num-scheduler-steps` (vLLM 0.6's multi-step scheduling above 1).
    pub num_scheduler_steps: u32,
    /// `published`, `default` or `assumed` (data/validation/serve.csv header).
    pub settings: String,
    /// Requests per second offered (`None`: all at once).
    pub rate_rps: Option<f64>,
    pub requests: u32,
    /// `dataset`, `derived` or `own`.
    pub lengths: String,
    pub in_claim: bool,
    pub why_not: String,
    /// The simulated run queued more than a tenth of its requests at the last arrival.
    pub overloaded: bool,
    pub metrics: Vec<Metric>,
    pub locator: String,
}

/// A class of figures against its target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServeSummary {
    pub class: String,
    /// `claim` (rows in the accuracy claim), `all`, or `itl` (the inter-token latency figures
    /// of every row, in the claim or not).
    pub subset: String,
    /// Bound on |error|; `None` for p90, which the specification sets no target for.
    pub target: Option<f64>,
    pub figures: usize,
    pub within: usize,
    pub median_abs_error: f64,
    pub worst_abs_error: f64,
    pub worst: String,
    /// The well-conditioned figures, which test the latency model itself: how many, how many
    /// within the target, and their median |error|. The others are ill-conditioned: their
    /// [`Metric::load_sensitivity`] exceeds the target (a 5 % error in the modelled capacity
    /// alone would carry them beyond it), or they are latencies of a row whose simulation is
    /// overloaded (the modelled capacity is below the published rate; its throughput still
    /// tests that capacity).
    #[serde(default)]
    pub well_conditioned: usize,
    #[serde(default)]
    pub well_conditioned_within: usize,
    #[serde(default)]
    pub well_conditioned_median_abs_error: Option<f64>,
}

/// A row amdahl cannot simulate, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServeExcluded {
    pub id: String,
    pub why: String,
}

/// Runs typed alike: rows that `amdahl serve` receives identically (every typed input the
/// same; only the source differs: another submitter of the same system, software and rate), so
/// the simulator predicts them identically. How far their published figures differ is a floor
/// under any model's error on one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServeAlike {
    /// Each group's row ids (two or more per group).
    pub groups: Vec<Vec<String>>,
    /// By class: how far the published figures of one group differ.
    pub spreads: Vec<AlikeSpread>,
}

/// The published spread of one class of figures within groups of runs typed alike.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AlikeSpread {
    /// `p50`, `p90`, `p99` or `throughput`.
    pub class: String,
    /// Figures (a group's metric published by all its rows).
    pub figures: usize,
    /// Median over those figures of max / min − 1 within the group.
    pub median_spread: f64,
    pub max_spread: f64,
    /// The figure with the largest spread: its group's first row and the metric.
    pub widest: String,
}

/// The whole set, simulated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServeValidation {
    pub seed: u64,
    pub cases: Vec<ServeCase>,
    pub summaries: Vec<ServeSummary>,
    pub excluded: Vec<ServeExcluded>,
    #[serde(default)]
    pub alike: ServeAlike,
}

/// The accuracy claim in brief: how many rows it holds and its summaries, as committed in
/// data/validation/serve-claim.json for `amdahl serve` to quote under every table
/// ([`serve_claim_committed`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServeClaim {
    pub rows: usize,
    pub summaries: Vec<ServeSummary>,
}

impl ServeClaim {
    pub fn of(v: &ServeValidation) -> Self {
        ServeClaim {
            rows: v.cases.iter().filter(|c| c.in_claim).count(),
            summaries: v
                .summaries
                .iter()
                .filter(|s| s.subset == "claim")
                .cloned()
                .collect(),
        }
    }

    /// The summary of one class (`p50`, `p99`, `throughput`, …).
    pub fn class(&self, class: &str) -> Option<&ServeSummary> {
        self.summaries.iter().find(|s| s.class == class)
    }
}

/// The claim as last committed (data/validation/serve-claim.json): simulating the set takes
/// seconds, which `amdahl serve` should not pay to quote it. A test recomputes it and fails when
/// the file is stale (`AMDAHL_UPDATE_SERVE_CLAIM=1` rewrites it); `amdahl catalog validation
/// --serve` always simulates afresh.
pub fn serve_claim_committed() -> Result<ServeClaim, ServeSetError> {
    serde_json::from_str(COMMITTED_CLAIM).map_err(|e| ServeSetError {
        row: "serve-claim.json".into(),
        what: e.to_string(),
    })
}

/// The file [`serve_claim_committed`] reads (embedded: no file is read at run time).
const COMMITTED_CLAIM: &str = include_str!("../../../../data/validation/serve-claim.json");

/// A broken row of the embedded set: a bug in amdahl, reported instead of a panic.
#[derive(Debug, Clone, thiserror::Error)]
#[error("data/validation/serve.csv, {row}: {what}")]
pub struct ServeSetError {
    pub row: String,
    pub what: String,
}

fn rows() -> Result<Vec<Row>, ServeSetError> {
    csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .from_reader(SERVE_CSV.as_bytes())
        .deserialize()
        .enumerate()
        .map(|(i, row)| {
            row.map_err(|e| ServeSetError {
                row: format!("row {}", i + 1),
                what: e.to_string(),
            })
        })
        .collect()
}

/// The configuration of a row, or why it cannot be expressed.
fn config(r: &Row) -> Result<Config, String> {
    let weights = WeightFormat::parse(&r.precision).ok_or("unknown precision")?;
    let kv = KvFormat::parse(&r.kv_precision).ok_or("unknown kv_precision")?;
    let engine = Engine::parse(&r.engine).ok_or("unknown engine")?;
    Ok(Config {
        serving: Serving {
            tp: r.tp,
            pp: r.pp,
            replicas: r.replicas,
            weights,
            kv,
            engine,
            memory_fraction: r.gpu_memory_fraction,
        },
        limits: Limits {
            max_num_seqs: r.max_num_seqs,
            max_num_batched_tokens: r.max_num_batched_tokens,
            num_scheduler_steps: r.num_scheduler_steps,
            prefill: PrefillBatching::default_for(engine, r.num_scheduler_steps),
            shared_prefix: 0,
        },
        router: Router::RoundRobin,
        client: Client {
            frontend_s: r.frontend_ms.unwrap_or(super::FRONTEND_MS) * 1e-3,
            max_concurrency: r.max_concurrency,
        },
    })
}

/// The requests of a row: Poisson at its rate, or all at t = 0, with its length distributions:
/// the requests `amdahl serve --rate R|inf --requests N --input-dist … --output-dist … --seed 0`
/// draws.
fn requests(r: &Row, context: u32, model: &str) -> Result<Vec<Request>, String> {
    let input = Lengths::parse_side(&r.input_dist, Side::Input).map_err(|e| e.to_string())?;
    let output = Lengths::parse_side(&r.output_dist, Side::Output).map_err(|e| e.to_string())?;
    let (arrivals, n) = if r.arrivals == "all-at-once" {
        let n = r.requests.ok_or("an all-at-once row needs its requests")?;
        (Arrivals::AllAtOnce, n)
    } else {
        let rate = r.rate_rps.ok_or("a poisson row needs rate_rps")?;
        let n = r
            .requests
            .unwrap_or(((rate * DEFAULT_SPAN_S).ceil() as u32).min(MOST_REQUESTS));
        (Arrivals::Poisson { rate }, n)
    };
    let g = Generated {
        arrivals,
        input,
        output,
        requests: n,
        duration_s: None,
        seed: SEED,
    };
    Ok(generate(&g, context, model).map_err(|e| e.to_string())?.0)
}

/// The published figures of a row, with the class of each.
fn published(r: &Row) -> Vec<(&'static str, &'static str, f64)> {
    [
        ("ttft_p50_ms", "p50", r.ttft_p50_ms),
        ("ttft_p90_ms", "p90", r.ttft_p90_ms),
        ("ttft_p99_ms", "p99", r.ttft_p99_ms),
        ("tpot_p50_ms", "p50", r.tpot_p50_ms),
        ("tpot_p90_ms", "p90", r.tpot_p90_ms),
        ("tpot_p99_ms", "p99", r.tpot_p99_ms),
        ("itl_p50_ms", "p50", r.itl_p50_ms),
        ("itl_p90_ms", "p90", r.itl_p90_ms),
        ("itl_p99_ms", "p99", r.itl_p99_ms),
        ("e2e_p50_s", "p50", r.e2e_p50_s),
        ("e2e_p99_s", "p99", r.e2e_p99_s),
        ("output_tokens_per_s", "throughput", r.output_tokens_per_s),
        ("requests_per_s", "throughput", r.requests_per_s),
        ("server_power_w", "power", r.server_power_w),
        (
            "slo_capacity_rps",
            "capacity",
            r.slo_ttft_ms.or(r.slo_tpot_ms).and(r.rate_rps),
        ),
    ]
    .into_iter()
    .filter_map(|(m, c, v)| v.map(|v| (m, c, v)))
    .collect()
}

/// Simulate one row.
/// Simulate one row; `capacities` holds the SLO capacities found so far by [`typed_inputs`]
/// (rows typed alike share theirs: the search is the set's costliest part).
fn simulate_row(r: &Row, capacities: &mut Vec<(String, f64)>) -> Result<ServeCase, String> {
    let layout = u64::from(r.tp) * u64::from(r.pp) * u64::from(r.replicas);
    if layout != r.gpus {
        return Err(format!(
            "gpus {} is not tp × pp × replicas = {layout}",
            r.gpus
        ));
    }
    let model = catalog_model(&r.model).map_err(|e| e.to_string())?;
    let device = crate::catalog::devices::lookup(&r.system).map_err(|e| e.to_string())?;
    let overrides = Overrides {
        intra_node_bandwidth: r.intra_gbs.map(|g| crate::units::BytesPerSecond(g * 1e9)),
        ..Overrides::default()
    };
    let (mut hw, mut net) = system(device, &overrides, r.inter_gbit).map_err(|e| e.to_string())?;
    if let Some(g) = r.gpus_per_node {
        net.gpus_per_node = g;
    }
    hw.power_cap = r.power_cap_w.map(crate::units::Watts);
    let c = config(r)?;
    let p = prepare(&model, &hw, &net, &c).map_err(|e| e.to_string())?;
    let reqs = requests(r, model.serving_context(), &model.name)?;
    check_requests(&model, &p, &c.limits, &reqs, &r.id).map_err(|e| e.to_string())?;
    let run = simulate(&p, &hw, &net, &c, &reqs);
    let gpus = c.serving.gpus();
    let base = Predictions::of(&run, &hw, gpus);
    let poisson = r.arrivals != "all-at-once";
    let loaded = poisson.then(|| {
        let faster = time_scaled(&reqs, |t| t / (1.0 + LOAD_STEP));
        Predictions::of(&simulate(&p, &hw, &net, &c, &faster), &hw, gpus)
    });
    let key = typed_inputs(r);
    let mut capacity = || match capacities.iter().find(|(k, _)| *k == key) {
        Some((_, x)) => *x,
        None => {
            let x = slo_capacity(r, &reqs, |q| simulate(&p, &hw, &net, &c, q), &c.client);
            capacities.push((key.clone(), x));
            x
        }
    };
    let metrics = published(r)
        .into_iter()
        .map(|(metric, class, value)| {
            let capacity_figure = class == "capacity";
            let predicted = if capacity_figure {
                capacity()
            } else {
                base.get(metric)
            };
            Metric {
                metric: metric.into(),
                class: class.into(),
                published: value,
                predicted,
                error: predicted / value - 1.0,
                load_sensitivity: loaded
                    .as_ref()
                    .filter(|_| !capacity_figure)
                    .map(|l| l.get(metric) / predicted - 1.0),
            }
        })
        .collect();
    let recs = &run.records;
    let n = recs.len() as u64;
    Ok(ServeCase {
        id: r.id.clone(),
        source: r.source.clone(),
        engine: format!("{} {}", r.engine, r.engine_version),
        model: model.name.clone(),
        system: hw.name.clone(),
        gpus,
        tp: r.tp,
        replicas: r.replicas,
        max_num_seqs: r.max_num_seqs,
        max_num_batched_tokens: r.max_num_batched_tokens,
        num_scheduler_steps: r.num_scheduler_steps,
        settings: r.settings.clone(),
        rate_rps: poisson.then_some(r.rate_rps).flatten(),
        requests: reqs.len() as u32,
        lengths: r.lengths.clone(),
        in_claim: r.in_claim == "yes" && r.lengths != "own",
        why_not: r.why_not.clone(),
        overloaded: run.waiting_at_last_arrival as f64
            > super::result::OVERLOAD_QUEUE_SHARE * n as f64,
        metrics,
        locator: r.locator.clone(),
    })
}

/// The highest rate at which the row's requests, time-scaled, meet its SLOs
/// ([`super::max_rate`], from the published rate; `amdahl serve --max-rate` on the same requests):
/// NaN when none passed. The published rate passed them, and submitters raise it until the
/// next step would not, so it is the capacity the run measured.
fn slo_capacity(
    r: &Row,
    reqs: &[Request],
    simulate: impl Fn(&[Request]) -> super::Run,
    client: &Client,
) -> f64 {
    let Some(rate) = r.rate_rps else {
        return f64::NAN;
    };
    let slo = |ms: Option<f64>| ms.map(|m| m * 1e-3);
    // Steps of a quarter from the published rate: submitters ran near the limit.
    let found = super::max_rate::search_by(rate, 1.25, |x| {
        let run = simulate(&time_scaled(reqs, |t| t * rate / x));
        Ok::<_, std::convert::Infallible>(super::max_rate::judge(
            &run,
            client,
            x,
            slo(r.slo_ttft_ms),
            slo(r.slo_tpot_ms),
        ))
    });
    match found {
        Ok(b) => b.passing.unwrap_or(f64::NAN),
        Err(never) => match never {},
    }
}

/// The same requests with every arrival time mapped by `at` (a shrinking map: the same stream,
/// faster).
fn time_scaled(reqs: &[Request], at: impl Fn(f64) -> f64) -> Vec<Request> {
    reqs.iter()
        .map(|q| Request {
            arrival_s: at(q.arrival_s),
            ..*q
        })
        .collect()
}

/// The figures a simulated run predicts, sorted once.
struct Predictions {
    ttft: Vec<f64>,
    tpot: Vec<f64>,
    e2e: Vec<f64>,
    /// Inter-token gaps.
    gaps: Counted,
    out_tokens: f64,
    completed: f64,
    duration: f64,
    /// Mean wall power of the servers over the run (NaN without a catalogued server).
    server_w: f64,
}

impl Predictions {
    fn of(run: &super::Run, hw: &crate::plan::Hardware, gpus: u64) -> Self {
        let duration = (run.end_s - run.first_arrival_s).max(1e-12);
        let gpu_w = (run.energy_busy_j + run.energy_idle_j) / duration;
        let recs = &run.records;
        let pick = |f: fn(&super::RequestRecord) -> Option<f64>| {
            sorted(&recs.iter().filter_map(f).collect::<Vec<_>>())
        };
        Predictions {
            ttft: pick(|r| Some(r.ttft_s)),
            tpot: pick(|r| r.tpot_s),
            e2e: pick(|r| Some(r.e2e_s)),
            gaps: run.gaps.counted(),
            out_tokens: recs.iter().map(|r| f64::from(r.output_tokens)).sum(),
            completed: recs.len() as f64,
            duration,
            server_w: super::result::server_power(hw, gpus, gpu_w).unwrap_or(f64::NAN),
        }
    }

    /// The prediction for one column of the set.
    fn get(&self, metric: &str) -> f64 {
        let q = |xs: &[f64], p: f64| quantile(xs, p).unwrap_or(f64::NAN);
        let itl = |p: f64| self.gaps.quantile(p).unwrap_or(f64::NAN) * 1e3;
        match metric {
            "ttft_p50_ms" => q(&self.ttft, 0.5) * 1e3,
            "ttft_p90_ms" => q(&self.ttft, 0.9) * 1e3,
            "ttft_p99_ms" => q(&self.ttft, 0.99) * 1e3,
            "tpot_p50_ms" => q(&self.tpot, 0.5) * 1e3,
            "tpot_p90_ms" => q(&self.tpot, 0.9) * 1e3,
            "tpot_p99_ms" => q(&self.tpot, 0.99) * 1e3,
            "itl_p50_ms" => itl(0.5),
            "itl_p90_ms" => itl(0.9),
            "itl_p99_ms" => itl(0.99),
            "e2e_p50_s" => q(&self.e2e, 0.5),
            "e2e_p99_s" => q(&self.e2e, 0.99),
            "output_tokens_per_s" => self.out_tokens / self.duration,
            "server_power_w" => self.server_w,
            _ => self.completed / self.duration,
        }
    }
}

/// A figure a 5 % error in the modelled capacity would carry beyond the class's target.
fn ill_conditioned(m: &Metric, target: Option<f64>) -> bool {
    target.is_some_and(|t| m.load_sensitivity.is_some_and(|s| s.abs() > t))
}

/// The figure classes and their targets (the specification's; `None`: reported, no target).
const CLASSES: [(&str, Option<f64>); 6] = [
    ("p50", Some(TARGET_P50)),
    ("p90", None),
    ("p99", Some(TARGET_P99)),
    ("throughput", Some(TARGET_THROUGHPUT)),
    ("capacity", Some(TARGET_THROUGHPUT)),
    ("power", None),
];

impl ServeValidation {
    /// The rows in the claim whose every figure with a target is within it: the specification's
    /// cases, each judged whole.
    pub fn rows_meeting_every_target(&self) -> Vec<&str> {
        let target = |class: &str| CLASSES.iter().find(|(c, _)| *c == class).and_then(|c| c.1);
        self.cases
            .iter()
            .filter(|c| c.in_claim)
            .filter(|c| {
                c.metrics
                    .iter()
                    .all(|m| target(&m.class).is_none_or(|t| m.error.abs() <= t))
            })
            .map(|c| c.id.as_str())
            .collect()
    }
}

/// Summaries of each class, for the claim, for all rows, and for the inter-token latencies.
fn summaries(cases: &[ServeCase]) -> Vec<ServeSummary> {
    let mut out = Vec::new();
    for subset in ["claim", "all", "itl"] {
        let of_subset = |m: &Metric| subset != "itl" || m.metric.starts_with("itl_");
        for (class, target) in CLASSES {
            let in_subset = cases.iter().filter(|c| subset != "claim" || c.in_claim);
            let figures: Vec<(&str, &Metric)> = in_subset
                .clone()
                .flat_map(|c| c.metrics.iter().map(move |m| (c.id.as_str(), m)))
                .filter(|(_, m)| m.class == class && of_subset(m))
                .collect();
            let well: Vec<&Metric> = in_subset
                .filter(|c| !c.overloaded || class == "throughput" || class == "capacity")
                .flat_map(|c| c.metrics.iter())
                .filter(|m| m.class == class && of_subset(m) && !ill_conditioned(m, target))
                .collect();
            if figures.is_empty() {
                continue;
            }
            let abs = sorted(
                &figures
                    .iter()
                    .map(|(_, m)| m.error.abs())
                    .collect::<Vec<_>>(),
            );
            let (worst_id, worst) = figures
                .iter()
                .max_by(|a, b| a.1.error.abs().total_cmp(&b.1.error.abs()))
                .map(|(id, m)| (format!("{id} {}", m.metric), m.error.abs()))
                .unwrap_or_default();
            out.push(ServeSummary {
                class: class.into(),
                subset: subset.into(),
                target,
                figures: figures.len(),
                within: target.map_or(0, |t| abs.iter().filter(|e| **e <= t).count()),
                median_abs_error: median(&abs).unwrap_or(f64::NAN),
                worst_abs_error: worst,
                worst: worst_id,
                well_conditioned: well.len(),
                well_conditioned_within: target
                    .map_or(0, |t| well.iter().filter(|m| m.error.abs() <= t).count()),
                well_conditioned_median_abs_error: median(&sorted(
                    &well.iter().map(|m| m.error.abs()).collect::<Vec<_>>(),
                )),
            });
        }
    }
    out
}

/// Everything `amdahl serve` receives from a row: rows with equal inputs are typed alike. A
/// column added to the set as an input of the simulation belongs here too.
fn typed_inputs(r: &Row) -> String {
    format!(
        "{} {} {} {}x{}x{} {} {} {} {} {} {} {:?} {:?} {} {} {:?} {} {:?} {:?} {:?} {:?} {:?} {:?}",
        r.model,
        r.system,
        r.gpus,
        r.tp,
        r.pp,
        r.replicas,
        r.precision,
        r.kv_precision,
        r.max_num_seqs,
        r.max_num_batched_tokens,
        r.engine,
        r.arrivals,
        r.rate_rps,
        r.requests,
        r.input_dist,
        r.output_dist,
        r.inter_gbit,
        r.num_scheduler_steps,
        r.gpus_per_node,
        r.frontend_ms,
        r.max_concurrency,
        r.power_cap_w,
        r.intra_gbs,
        r.gpu_memory_fraction,
    )
}

/// The groups of runs typed alike among `rows`, and the spread of their published figures.
fn alike(rows: &[Row]) -> ServeAlike {
    let mut groups: Vec<(String, Vec<&Row>)> = Vec::new();
    for r in rows {
        let key = typed_inputs(r);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(r),
            None => groups.push((key, vec![r])),
        }
    }
    groups.retain(|(_, g)| g.len() > 1);
    let mut spreads = Vec::new();
    for class in ["p50", "p90", "p99", "throughput", "power"] {
        let mut figures: Vec<(f64, String)> = Vec::new();
        for (_, g) in &groups {
            let of = |r: &Row| published(r).into_iter().filter(|(_, c, _)| *c == class);
            for (metric, _, _) in of(g[0]) {
                let values: Vec<f64> = g
                    .iter()
                    .filter_map(|r| of(r).find(|(m, _, _)| *m == metric).map(|(_, _, v)| v))
                    .collect();
                if values.len() == g.len() {
                    let (lo, hi) = values.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
                        (lo.min(*v), hi.max(*v))
                    });
                    figures.push((hi / lo - 1.0, format!("{} {metric}", g[0].id)));
                }
            }
        }
        let Some((max_spread, widest)) = figures.iter().max_by(|a, b| a.0.total_cmp(&b.0)).cloned()
        else {
            continue;
        };
        spreads.push(AlikeSpread {
            class: class.into(),
            figures: figures.len(),
            median_spread: median(&sorted(&figures.iter().map(|f| f.0).collect::<Vec<_>>()))
                .unwrap_or(f64::NAN),
            max_spread,
            widest,
        });
    }
    ServeAlike {
        groups: groups
            .into_iter()
            .map(|(_, g)| g.iter().map(|r| r.id.clone()).collect())
            .collect(),
        spreads,
    }
}

/// Simulate every row of the set.
pub fn serve_validation() -> Result<ServeValidation, ServeSetError> {
    let rows = rows()?;
    let mut cases = Vec::new();
    let mut excluded = Vec::new();
    let mut capacities = Vec::new();
    for r in &rows {
        match simulate_row(r, &mut capacities) {
            Ok(c) => cases.push(c),
            Err(why) => excluded.push(ServeExcluded {
                id: r.id.clone(),
                why,
            }),
        }
    }
    let summaries = summaries(&cases);
    Ok(ServeValidation {
        seed: SEED,
        cases,
        summaries,
        excluded,
        alike: alike(&rows),
    })
}

#[cfg(test)]
mod tests;

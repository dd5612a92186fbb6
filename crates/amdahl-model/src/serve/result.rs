//! The summary of a run (`amdahl.serve/1`): latency percentiles, throughput, goodput, queueing,
//! energy per request and per token, CO2e per 1,000 requests.

use super::engine::Run;
use super::steady::SteadyFigures;
use super::{Client, Config, PrefillBatching, Prepared};
use crate::infer::{estimate, evaluate_at, setup, Charging, KvFormat, Requests, WeightFormat};
use crate::plan::{Hardware, ModelShape, Network};
use crate::stats::{quantile, sorted, Counted};
use crate::units::JOULES_PER_KWH;
use serde::{Deserialize, Serialize};

pub const SERVE_SCHEMA: &str = "amdahl.serve/1";

/// Points the timeline is thinned to.
const TIMELINE_POINTS: usize = 200;

/// A run is called overloaded when, at the last arrival, more than this share of all requests
/// were still queued: a stable server's queue stays a small multiple of its batch, an overloaded
/// one holds a fixed share of everything sent (the gap between arrival and service rate).
pub const OVERLOAD_QUEUE_SHARE: f64 = 0.1;

/// Mean, median and 99th percentile of the requests' energies.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EnergyDistribution {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
}

/// One point of the latency distributions: the `q` quantile of each (the CDF read sideways).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Quantiles {
    pub q: f64,
    pub ttft_s: f64,
    pub tpot_s: Option<f64>,
    pub e2e_s: f64,
    /// The inter-token latency's quantile, over tokens, not requests.
    #[serde(default)]
    pub itl_s: Option<f64>,
}

/// `infer`'s steady-state answer for the same configuration at the workload's mean lengths: its
/// latencies of one lone request (the limit of the simulation at a low rate) and the rate its
/// largest batch (at most `max_num_seqs`) sustains.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Unloaded {
    pub input_tokens: u32,
    pub output_tokens: u32,
    pub ttft_s: f64,
    pub tpot_s: f64,
    pub capacity_batch: u32,
    pub capacity_requests_per_s: f64,
}

/// What the prefix cache did with a prompt prefix every request shares (`--shared-prefix`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PrefixCache {
    /// Tokens every prompt begins with.
    pub shared_tokens: u32,
    /// Prompt tokens admitted (re-admissions after preemption too) and those the cache served
    /// instead of computing: vLLM's prefix-cache queries and hits.
    pub prompt_tokens: u64,
    pub hit_tokens: u64,
    /// `hit_tokens / prompt_tokens`.
    pub hit_rate: f64,
}

impl PrefixCache {
    fn of(run: &Run, shared_tokens: u32) -> Option<Self> {
        (shared_tokens > 0).then(|| PrefixCache {
            shared_tokens,
            prompt_tokens: run.prompt_tokens_admitted,
            hit_tokens: run.prefix_hit_tokens,
            hit_rate: run.prefix_hit_tokens as f64 / run.prompt_tokens_admitted.max(1) as f64,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServeResult {
    pub schema: String,
    pub model: String,
    pub system: String,
    pub tp: u32,
    pub pp: u32,
    pub replicas: u32,
    pub gpus: u64,
    pub precision: WeightFormat,
    pub kv_precision: KvFormat,
    /// `poisson 12 req/s`, `gamma 12 req/s cv 3`, or `trace FILE`.
    pub workload: String,
    pub input_dist: Option<String>,
    pub output_dist: Option<String>,
    pub seed: Option<u64>,
    pub router: String,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    /// Decode steps per scheduling decision (1: every iteration; more: vLLM 0.6's multi-step
    /// scheduling). Absent in files written before it existed, which ran with 1.
    #[serde(default = "one_step")]
    pub num_scheduler_steps: u32,
    /// Whether prompt chunks shared iterations with decode steps. Absent in files written before
    /// it existed, which ran mixed (separate under multi-step scheduling).
    #[serde(default)]
    pub prefill_batching: PrefillBatching,
    /// The client: the frontend's time in every TTFT and end-to-end latency below
    /// (`--frontend-ms`), its limit on requests in flight (`--max-concurrency`).
    #[serde(default)]
    pub client: Client,
    pub block_size: u32,
    pub kv_blocks_per_replica: u64,
    pub slo_ttft_s: Option<f64>,
    pub slo_tpot_s: Option<f64>,

    pub requests: u64,
    /// Lengths drawn beyond the context and cut to fit it.
    pub clamped_requests: u32,
    pub mean_input_tokens: f64,
    pub mean_output_tokens: f64,
    /// First arrival to last token: what a benchmark client measures (vLLM's
    /// benchmarks/benchmark_serving.py divides completed requests and tokens by it).
    pub duration_s: f64,
    /// Last arrival to last token: the tail of the run in which no request arrives (long with
    /// long-tailed output lengths or a backlog), which lowers the rates below.
    pub drain_s: f64,
    /// Requests over the span of arrivals.
    pub offered_requests_per_s: f64,
    /// Requests completed over `duration_s`: the capacity when overloaded.
    pub completed_requests_per_s: f64,
    pub output_tokens_per_s: f64,
    /// Requests meeting both SLOs (those given) per second of `duration_s`.
    pub goodput_requests_per_s: f64,
    pub slo_attainment: f64,

    pub ttft_p50_s: f64,
    pub ttft_p90_s: f64,
    pub ttft_p99_s: f64,
    /// `None` when every request generated one token.
    pub tpot_p50_s: Option<f64>,
    pub tpot_p90_s: Option<f64>,
    pub tpot_p99_s: Option<f64>,
    /// Inter-token latency percentiles: every token's gap to the one before it, over all tokens
    /// of all requests (vLLM's `benchmark_serving` ITL). `None` when every request generated one
    /// token.
    #[serde(default)]
    pub itl_p50_s: Option<f64>,
    #[serde(default)]
    pub itl_p90_s: Option<f64>,
    #[serde(default)]
    pub itl_p99_s: Option<f64>,
    pub e2e_p50_s: f64,
    pub e2e_p90_s: f64,
    pub e2e_p99_s: f64,

    pub overloaded: bool,
    /// Every request arrived at t = 0 (`--rate inf`, or such a trace): backlogged by
    /// construction, so `overloaded` says nothing about a rate.
    #[serde(default)]
    pub offline: bool,
    pub max_waiting: u64,
    pub max_waiting_at_s: f64,
    pub waiting_at_last_arrival: u64,
    pub peak_kv_use: f64,
    pub preemptions: u64,
    pub iterations: u64,
    /// The shared prompt prefix and what the prefix cache served (`--shared-prefix`); absent
    /// when no prompt shares anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<PrefixCache>,
    pub unloaded: Option<Unloaded>,

    /// GPU energy of the run: iterations plus idle replicas.
    pub energy_j: f64,
    pub energy_busy_j: f64,
    pub energy_idle_j: f64,
    /// Mean power of all GPUs over `duration_s`.
    pub power_w: f64,
    /// Each request's share of the iterations it was in (GPU scope; they sum to `energy_busy_j`).
    pub energy_per_request_j: EnergyDistribution,
    /// `energy_j` (idle included) over the requests.
    pub energy_per_request_with_idle_j: f64,
    /// `energy_busy_j` over the output tokens.
    pub energy_per_output_token_j: f64,
    /// An offline run (every request at t = 0) measured as the ML.ENERGY benchmark measures it:
    /// over the window from the server filling up to its queue running dry
    /// ([`super::steady`]). Absent for other arrivals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_state: Option<SteadyFigures>,
    /// Server (wall) scope of `energy_j`, where the device has a catalogued server.
    pub energy_server_j: Option<f64>,
    pub pue: f64,
    pub grid: String,
    /// The grid's catalog code (`FR`, `world`; `custom` for `--intensity`), by which a reader of
    /// the saved result (`carbon --from`, `lifetime --serve`) finds the same entry.
    #[serde(default)]
    pub grid_code: String,
    pub grid_g_per_kwh: f64,
    /// The data year of the grid's intensity (`--intensity-year`, or the catalog's), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid_year: Option<u16>,
    /// Where the grid's intensity comes from (`--intensity-source`, or the catalog's source).
    #[serde(default)]
    pub grid_source: String,
    /// kWh × PUE of 1,000 requests at `energy_per_request_with_idle_j`.
    pub kwh_per_1000_requests: f64,
    pub co2e_per_1000_requests_g: f64,
    /// The run over time, at most 200 points (`TIMELINE_POINTS`).
    pub timeline: Vec<TimelinePoint>,
    /// The latency CDFs at q = 0, 0.01, …, 0.99, 0.999, 1.
    pub latency_quantiles: Vec<Quantiles>,
    pub notes: Vec<String>,
}

/// A stretch of the run: the queue, batch and KV cache as it starts, and the devices' mean
/// power over it (to the next point, or the run's end).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimelinePoint {
    pub t_s: f64,
    /// Requests queued (not yet admitted, or preempted), all replicas.
    pub waiting: u64,
    pub running: u64,
    /// Share of all replicas' KV blocks in use.
    pub kv_use: f64,
    /// Mean board power of all GPUs over the stretch (idle replicas at idle power): the
    /// stretches' power × length adds up to `energy_j`. Absent in results written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_power_w: Option<f64>,
    /// The same at the server (wall) scope, where the device has a catalogued server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_power_w: Option<f64>,
}

/// The workload as the summary names it.
pub struct Described {
    pub workload: String,
    pub input_dist: Option<String>,
    pub output_dist: Option<String>,
    pub seed: Option<u64>,
    pub clamped: u32,
}

/// What the summary reads besides the run.
pub struct Context<'a> {
    pub model: &'a ModelShape,
    pub hw: &'a Hardware,
    pub net: &'a Network,
    pub config: &'a Config,
    pub prepared: &'a Prepared,
    pub charging: &'a Charging,
    pub slo_ttft_s: Option<f64>,
    pub slo_tpot_s: Option<f64>,
}

/// `num_scheduler_steps` of a file written before the field existed.
fn one_step() -> u32 {
    1
}

fn p(xs: &[f64], q: f64) -> f64 {
    quantile(xs, q).unwrap_or(f64::NAN)
}

impl ServeResult {
    /// The summary of `run`. Long only for the struct literal: one line per field of the
    /// contract; the parts with logic are the functions below.
    pub fn new(c: &Context, run: &Run, d: Described) -> Self {
        let recs = &run.records;
        let n = recs.len().max(1) as f64;
        let ttft = sorted(&recs.iter().map(|r| r.ttft_s).collect::<Vec<_>>());
        let tpot = sorted(&recs.iter().filter_map(|r| r.tpot_s).collect::<Vec<_>>());
        let e2e = sorted(&recs.iter().map(|r| r.e2e_s).collect::<Vec<_>>());
        let joules = sorted(&recs.iter().map(|r| r.energy_j).collect::<Vec<_>>());
        let gaps = run.gaps.counted();
        let good = meeting_the_slos(c, recs);
        let out_tokens: f64 = recs.iter().map(|r| f64::from(r.output_tokens)).sum();
        let in_tokens: f64 = recs.iter().map(|r| f64::from(r.input_tokens)).sum();
        let duration = (run.end_s - run.first_arrival_s).max(1e-12);
        let last_arrival = recs.last().map_or(0.0, |r| r.arrival_s);
        let offered = offered_rate(recs.len(), last_arrival - run.first_arrival_s, duration);
        let energy = run.energy_busy_j + run.energy_idle_j;
        let per_req_total = energy / n;
        let sv = c.prepared.setup.serving;
        let unloaded = unloaded(c, in_tokens / n, out_tokens / n);
        let completed = recs.len() as f64 / duration;
        let overload = is_overloaded(run, &c.config.client).then_some((offered, completed));
        let notes = notes(c, run, &d, overload, unloaded.as_ref());
        ServeResult {
            schema: SERVE_SCHEMA.into(),
            model: c.model.name.clone(),
            system: c.hw.name.clone(),
            tp: sv.tp,
            pp: sv.pp,
            replicas: sv.replicas,
            gpus: sv.gpus(),
            precision: sv.weights,
            kv_precision: sv.kv,
            workload: d.workload,
            input_dist: d.input_dist,
            output_dist: d.output_dist,
            seed: d.seed,
            router: c.config.router.name().into(),
            max_num_seqs: c.config.limits.max_num_seqs,
            max_num_batched_tokens: c.config.limits.max_num_batched_tokens,
            num_scheduler_steps: c.config.limits.num_scheduler_steps,
            prefill_batching: c.config.limits.prefill,
            client: c.config.client,
            block_size: super::BLOCK_SIZE,
            kv_blocks_per_replica: run.kv_blocks_per_replica,
            slo_ttft_s: c.slo_ttft_s,
            slo_tpot_s: c.slo_tpot_s,
            requests: recs.len() as u64,
            clamped_requests: d.clamped,
            mean_input_tokens: in_tokens / n,
            mean_output_tokens: out_tokens / n,
            duration_s: duration,
            drain_s: (run.end_s - last_arrival).max(0.0),
            offered_requests_per_s: offered,
            completed_requests_per_s: completed,
            output_tokens_per_s: out_tokens / duration,
            goodput_requests_per_s: good / duration,
            slo_attainment: good / n,
            ttft_p50_s: p(&ttft, 0.5),
            ttft_p90_s: p(&ttft, 0.9),
            ttft_p99_s: p(&ttft, 0.99),
            tpot_p50_s: quantile(&tpot, 0.5),
            tpot_p90_s: quantile(&tpot, 0.9),
            tpot_p99_s: quantile(&tpot, 0.99),
            itl_p50_s: gaps.quantile(0.5),
            itl_p90_s: gaps.quantile(0.9),
            itl_p99_s: gaps.quantile(0.99),
            e2e_p50_s: p(&e2e, 0.5),
            e2e_p90_s: p(&e2e, 0.9),
            e2e_p99_s: p(&e2e, 0.99),
            overloaded: overload.is_some(),
            offline: is_offline(run),
            max_waiting: run.max_waiting,
            max_waiting_at_s: run.max_waiting_at_s,
            waiting_at_last_arrival: run.waiting_at_last_arrival,
            peak_kv_use: run.peak_kv_use,
            preemptions: run.preemptions,
            iterations: run.iterations,
            prefix_cache: PrefixCache::of(run, c.config.limits.shared_prefix),
            unloaded,
            energy_j: energy,
            energy_busy_j: run.energy_busy_j,
            energy_idle_j: run.energy_idle_j,
            power_w: energy / duration,
            energy_per_request_j: EnergyDistribution::of(run.energy_busy_j / n, &joules),
            energy_per_request_with_idle_j: per_req_total,
            energy_per_output_token_j: run.energy_busy_j / out_tokens.max(1.0),
            steady_state: SteadyFigures::of(run, c.config),
            energy_server_j: server_energy(c.hw, sv.gpus(), energy, duration),
            pue: c.charging.pue,
            grid: c.charging.grid.name.clone(),
            grid_code: c.charging.grid.code.clone(),
            grid_g_per_kwh: c.charging.intensity().get(),
            grid_year: c.charging.grid.year,
            grid_source: c.charging.grid.source.clone(),
            kwh_per_1000_requests: per_req_total * 1000.0 * c.charging.pue / JOULES_PER_KWH,
            co2e_per_1000_requests_g: c.charging.co2e_g(per_req_total * 1000.0),
            timeline: timeline(run, |w| server_power(c.hw, sv.gpus(), w)),
            latency_quantiles: quantiles(&ttft, &tpot, &e2e, &gaps),
            notes,
        }
    }
}

impl EnergyDistribution {
    /// Mean and percentiles of the requests' energies (`sorted`, ascending).
    fn of(mean: f64, sorted: &[f64]) -> Self {
        EnergyDistribution {
            mean,
            p50: p(sorted, 0.5),
            p99: p(sorted, 0.99),
        }
    }
}

/// Requests that met both SLOs (a missing SLO is met by every request).
fn meeting_the_slos(c: &Context, recs: &[super::RequestRecord]) -> f64 {
    let meets = |r: &super::RequestRecord| {
        c.slo_ttft_s.is_none_or(|s| r.ttft_s <= s)
            && c.slo_tpot_s.is_none_or(|s| r.tpot_s.is_none_or(|t| t <= s))
    };
    recs.iter().filter(|r| meets(r)).count() as f64
}

/// The offered rate: n arrivals span n − 1 gaps; a single request (or all at once) has no rate
/// of its own, and is taken over the run's duration.
fn offered_rate(requests: usize, arrival_span_s: f64, duration_s: f64) -> f64 {
    let n = requests.max(1) as f64;
    if arrival_span_s > 0.0 && requests > 1 {
        (n - 1.0) / arrival_span_s
    } else {
        n / duration_s
    }
}

/// Every request (more than one) arrived at t = 0: an offline run.
fn is_offline(run: &Run) -> bool {
    run.records.len() > 1 && run.records.iter().all(|r| r.arrival_s == 0.0)
}

/// The server (wall) scope of the GPUs' power `gpu_w`: plus their share of the host, through
/// the power supplies.
pub(crate) fn server_power(hw: &Hardware, gpus: u64, gpu_w: f64) -> Option<f64> {
    hw.server
        .as_ref()
        .map(|s| (gpu_w + s.host_w_per_gpu * gpus as f64) / s.psu_efficiency)
}

/// The server (wall) scope of the GPUs' energy over `duration_s`.
fn server_energy(hw: &Hardware, gpus: u64, gpu_energy_j: f64, duration_s: f64) -> Option<f64> {
    server_power(hw, gpus, gpu_energy_j / duration_s).map(|w| w * duration_s)
}

/// More than [`OVERLOAD_QUEUE_SHARE`] of the requests (and more than one) still queued when
/// the last one arrived: the queue was growing without bound. Never for a `client` that keeps at
/// most N requests in flight: it holds the backlog itself, and the server's queue cannot pass N.
pub(crate) fn is_overloaded(run: &Run, client: &Client) -> bool {
    if client.max_concurrency.is_some() {
        return false;
    }
    let n = run.records.len().max(1) as f64;
    run.waiting_at_last_arrival as f64 > OVERLOAD_QUEUE_SHARE * n && run.waiting_at_last_arrival > 1
}

/// The notes under the table: overload (with the offered and completed rates), lengths cut to the
/// context, an estimated idle power.
fn notes(
    c: &Context,
    run: &Run,
    d: &Described,
    overload: Option<(f64, f64)>,
    unloaded: Option<&Unloaded>,
) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some((offered, completed)) = overload {
        notes.push(if is_offline(run) {
            offline_note(run, completed, unloaded)
        } else {
            overload_note(run, offered, completed, unloaded)
        });
    }
    if d.clamped > 0 {
        notes.push(format!(
            "{} of {} requests drew lengths beyond the {}-token context and were cut to fit it",
            d.clamped,
            run.records.len(),
            c.model.serving_context()
        ));
    }
    if c.hw.idle_power_estimated {
        notes.push(format!(
            "idle power {:.0} W is 1/8 of TDP, an estimate; measure it and pass --idle-w",
            c.hw.idle_power.get()
        ));
    }
    notes
}

/// The latency CDFs at q = 0, 0.01, …, 0.99, 0.999, 1 (each list sorted).
fn quantiles(ttft: &[f64], tpot: &[f64], e2e: &[f64], gaps: &Counted) -> Vec<Quantiles> {
    (0..100)
        .map(|i| f64::from(i) / 100.0)
        .chain([0.999, 1.0])
        .map(|q| Quantiles {
            q,
            ttft_s: p(ttft, q),
            tpot_s: quantile(tpot, q),
            e2e_s: p(e2e, q),
            itl_s: gaps.quantile(q),
        })
        .collect()
}

/// `infer` at the mean lengths: a lone request's TTFT and TPOT, and the rate of the largest batch
/// (at most `max_num_seqs`). `None` where `infer` refuses those lengths.
fn unloaded(c: &Context, mean_in: f64, mean_out: f64) -> Option<Unloaded> {
    let req = Requests {
        input: (mean_in.round() as u32).max(1),
        output: (mean_out.round() as u32).max(1),
        beams: 1,
    };
    let s = setup(c.model, c.hw, c.net, c.prepared.setup.serving, req).ok()?;
    let one = evaluate_at(&s, c.hw, c.net, 1).ok()?;
    let batch = s.max_batch.min(c.config.limits.max_num_seqs).max(1);
    let top = estimate(&s, c.hw, c.net, batch);
    Some(Unloaded {
        input_tokens: req.input,
        output_tokens: req.output,
        ttft_s: one.ttft_s,
        tpot_s: one.tpot_s,
        capacity_batch: batch,
        capacity_requests_per_s: top.requests_per_s,
    })
}

fn overload_note(run: &Run, offered: f64, completed: f64, u: Option<&Unloaded>) -> String {
    let cap = u.map_or(String::new(), |u| {
        format!(
            "; infer's steady state at these mean lengths sustains at most {:.3} requests/s (batch {})",
            u.capacity_requests_per_s, u.capacity_batch
        )
    });
    format!(
        "overloaded: requests arrive at {offered:.3}/s but complete at {completed:.3}/s, so the \
         queue grows without bound ({} queued at the last arrival, at most {} at {:.1} s){cap}; \
         lower the rate or add replicas",
        run.waiting_at_last_arrival, run.max_waiting, run.max_waiting_at_s
    )
}

/// An offline run is backlogged by construction, not because its rate is too high: it says so,
/// and how fast the server worked through the backlog.
fn offline_note(run: &Run, completed: f64, u: Option<&Unloaded>) -> String {
    let cap = u.map_or(String::new(), |u| {
        format!(
            " (infer's steady state at these mean lengths: {:.3} requests/s at batch {})",
            u.capacity_requests_per_s, u.capacity_batch
        )
    });
    format!(
        "offline run: all {} requests arrive at t = 0 and {} wait at the start; the server works \
         through them at {completed:.3} requests/s over {:.1} s{cap}",
        run.records.len(),
        run.waiting_at_last_arrival,
        run.end_s - run.first_arrival_s
    )
}

/// The samples in at most [`TIMELINE_POINTS`] stretches of equally many: each starts as its
/// first sample, with the time-weighted mean GPU power of its samples (power is constant between
/// samples: they are taken wherever it changes), the last stretch ending with the run.
fn timeline(run: &Run, server: impl Fn(f64) -> Option<f64>) -> Vec<TimelinePoint> {
    let s = &run.samples;
    let step = s.len().div_ceil(TIMELINE_POINTS).max(1);
    let starts = |k: usize| s.get(k * step).map_or(run.end_s, |x| x.t_s);
    s.chunks(step)
        .enumerate()
        .map(|(k, stretch)| {
            let (first, end) = (stretch[0], starts(k + 1));
            let next = |i: usize| stretch.get(i + 1).map_or(end, |x| x.t_s);
            let joules: f64 = stretch
                .iter()
                .enumerate()
                .map(|(i, x)| x.gpu_power_w * (next(i) - x.t_s))
                .sum();
            let span = end - first.t_s;
            let power = if span > 0.0 {
                joules / span
            } else {
                first.gpu_power_w
            };
            TimelinePoint {
                t_s: first.t_s,
                waiting: first.waiting,
                running: first.running,
                kv_use: first.kv_use,
                gpu_power_w: Some(power),
                server_power_w: server(power),
            }
        })
        .collect()
}

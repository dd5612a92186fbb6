//! The discrete-event loop: requests arrive, a router sends each to a replica, each replica runs
//! iterations back to back while it has work. Every iteration's time and per-device power come
//! from the inference step model and the power model ([`crate::infer::iteration`]); this file
//! owns the queues and the clock, nothing else.

use super::client::{Client, Slots};
use super::kv::BlockPool;
use super::scheduler::{Limits, PrefillBatching, Replica, Seq};
use super::workload::Request;
use crate::infer::{iteration, Setup};
use crate::plan::{Hardware, Network};
use crate::power::Activity;
use crate::stats::Counted;
use serde::{Deserialize, Serialize};

/// How arriving requests are spread over the replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Router {
    /// Replica i mod R for the i-th request.
    RoundRobin,
    /// The replica with the fewest requests waiting or running (ties: the lowest index).
    LeastLoaded,
}

impl Router {
    pub const NAMES: [&'static str; 2] = ["round-robin", "least-loaded"];

    pub fn name(&self) -> &'static str {
        match self {
            Router::RoundRobin => "round-robin",
            Router::LeastLoaded => "least-loaded",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "round-robin" => Some(Router::RoundRobin),
            "least-loaded" => Some(Router::LeastLoaded),
            _ => None,
        }
    }
}

crate::names::from_str_by_parse!(Router, "router");

/// One request's life in the run.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct RequestRecord {
    pub arrival_s: f64,
    pub input_tokens: u32,
    pub output_tokens: u32,
    pub replica: u32,
    /// Arrival to the first output token (queueing, prefill chunks, the iteration that emits it).
    pub ttft_s: f64,
    /// (last token − first token) / (output − 1); `None` for one-token outputs.
    pub tpot_s: Option<f64>,
    pub e2e_s: f64,
    /// Its shares of the energy of the iterations it was in (GPU scope).
    pub energy_j: f64,
    pub preemptions: u32,
    /// When the first token left the engine, on its clock (without the frontend).
    #[serde(skip)]
    pub(crate) first_at: f64,
    /// When the latest token left the engine, on its clock: the last one's, once finished.
    #[serde(skip)]
    pub(crate) last_at: f64,
}

/// A token of `rec` leaving the engine at `at`: its first sets the TTFT, its last the end-to-end
/// latency and the TPOT; every later one adds its gap to the one before to `gaps`.
fn deliver(rec: &mut RequestRecord, gaps: &mut Gaps, at: f64, first: bool, last: bool) {
    if first {
        rec.first_at = at;
        rec.ttft_s = at - rec.arrival_s;
    } else {
        gaps.add(at - rec.last_at);
    }
    rec.last_at = at;
    if last {
        rec.e2e_s = at - rec.arrival_s;
        rec.tpot_s =
            (rec.output_tokens > 1).then(|| (at - rec.first_at) / f64::from(rec.output_tokens - 1));
    }
}

/// Requests queued on all replicas at `now`, kept as the run's peak when it is one. A queue grows
/// when a request arrives at a busy replica (counted once it is routed) or is preempted (counted
/// at the iteration start that preempted it), so the peak is the true one.
fn queued(reps: &[Replica], now: f64, run: &mut Run) -> u64 {
    let waiting: u64 = reps.iter().map(|r| r.waiting.len() as u64).sum();
    if waiting > run.max_waiting {
        run.max_waiting = waiting;
        run.max_waiting_at_s = now;
    }
    waiting
}

/// What one iteration's end delivered: tokens, and the requests whose last token it was.
#[derive(Default)]
struct Delivered {
    tokens: u32,
    finished: usize,
}

impl Delivered {
    fn deliver(
        &mut self,
        rec: &mut RequestRecord,
        gaps: &mut Gaps,
        at: f64,
        first: bool,
        last: bool,
    ) {
        deliver(rec, gaps, at, first, last);
        self.tokens += 1;
        self.finished += usize::from(last);
    }
}

/// The inter-token latencies of a run: the gap between consecutive tokens of a request as the
/// client receives them (vLLM's `benchmark_serving` ITL; the first token's wait is the TTFT, not
/// a gap), kept as (gap, tokens) with runs of equal gaps merged. A continuous batch delivers a
/// token to every running request at each iteration's end, so a run's millions of tokens fall on
/// as many distinct gaps as it has iterations, give or take.
#[derive(Debug, Clone, Default)]
pub struct Gaps(Vec<(f64, u64)>);

impl Gaps {
    fn add(&mut self, gap: f64) {
        match self.0.last_mut() {
            Some((g, n)) if *g == gap => *n += 1,
            _ => self.0.push((gap, 1)),
        }
    }

    /// The gaps in ascending order, ready for their quantiles.
    pub fn counted(&self) -> Counted {
        let mut v = self.0.clone();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        Counted::new(&v)
    }
}

/// A point of the timeline: the state of all replicas when one starts an iteration or falls
/// idle, the two events that change what the devices draw.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sample {
    pub t_s: f64,
    /// Requests queued (not yet admitted, or preempted), all replicas.
    pub waiting: u64,
    pub running: u64,
    /// Share of all replicas' KV blocks in use.
    pub kv_use: f64,
    /// Board power of all devices from `t_s` until the next sample: each replica's iteration
    /// in flight at the power model's draw, idle replicas at idle power.
    pub gpu_power_w: f64,
}

/// What a run produced, before summary.
#[derive(Debug, Clone)]
pub struct Run {
    pub records: Vec<RequestRecord>,
    /// Every token's gap to the one before it (all requests).
    pub gaps: Gaps,
    /// GPU energy of all iterations, all devices (the sum of the requests' energies).
    pub energy_busy_j: f64,
    /// GPU energy of replicas with no work, at idle power, from the first arrival to the end.
    pub energy_idle_j: f64,
    pub iterations: u64,
    pub preemptions: u64,
    /// Prompt tokens admitted (re-admissions too) and those the prefix cache served.
    pub prompt_tokens_admitted: u64,
    pub prefix_hit_tokens: u64,
    /// The most requests queued at once (all replicas), and when.
    pub max_waiting: u64,
    pub max_waiting_at_s: f64,
    /// Requests still queued (not admitted) when the last request arrived.
    pub waiting_at_last_arrival: u64,
    pub first_arrival_s: f64,
    pub end_s: f64,
    pub kv_blocks_per_replica: u64,
    pub peak_kv_use: f64,
    /// Every iteration start (for the timeline; thinned by the summary).
    pub samples: Vec<Sample>,
    /// Every iteration and every delivery of tokens, when asked for ([`Engine::trace`]): what
    /// a measurement window over part of the run needs ([`super::steady`]).
    pub trace: Option<Trace>,
}

impl Run {
    /// Nothing run yet: a record per request, as scheduled.
    fn new(requests: &[Request], kv_blocks: u64, trace: bool) -> Self {
        Run {
            records: requests
                .iter()
                .map(|r| RequestRecord {
                    arrival_s: r.arrival_s,
                    input_tokens: r.input_tokens,
                    output_tokens: r.output_tokens,
                    ..RequestRecord::default()
                })
                .collect(),
            gaps: Gaps::default(),
            energy_busy_j: 0.0,
            energy_idle_j: 0.0,
            iterations: 0,
            preemptions: 0,
            prompt_tokens_admitted: 0,
            prefix_hit_tokens: 0,
            max_waiting: 0,
            max_waiting_at_s: 0.0,
            waiting_at_last_arrival: 0,
            first_arrival_s: requests.first().map_or(0.0, |r| r.arrival_s),
            end_s: 0.0,
            kv_blocks_per_replica: kv_blocks,
            peak_kv_use: 0.0,
            samples: Vec::new(),
            trace: trace.then(Trace::default),
        }
    }
}

/// The iterations of a run and when its tokens reached the client.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub iterations: Vec<TracedIteration>,
    /// (time, tokens delivered then), in time order.
    pub deliveries: Vec<(f64, u32)>,
}

/// One iteration of one replica as the step and power models priced it.
#[derive(Debug, Clone, Copy)]
pub struct TracedIteration {
    pub start_s: f64,
    pub time_s: f64,
    /// Board power of each of the replica's devices.
    pub power_w: f64,
    pub activity: Activity,
    /// Whether it carries prompt tokens (a prefill chunk) besides decode steps.
    pub prefill: bool,
}

/// Everything the loop needs besides the requests.
pub struct Engine<'a> {
    pub setup: &'a Setup,
    /// The setup of a multi-step window's later steps: no per-iteration host time
    /// ([`super::multistep::amortised`]).
    pub window_setup: Setup,
    pub hw: &'a Hardware,
    pub net: &'a Network,
    pub limits: Limits,
    pub router: Router,
    /// How the requests reach it: the frontend's time, the client's concurrency
    /// ([`super::client`]).
    pub client: Client,
    pub kv_blocks: u64,
    /// Keep every iteration and delivery in [`Run::trace`].
    pub trace: bool,
}

impl Engine<'_> {
    /// Serve `requests` (sorted by arrival; every one fits the KV cache, checked by the caller).
    pub fn run(&self, requests: &[Request]) -> Run {
        let n_rep = self.setup.serving.replicas.max(1) as usize;
        let mut reps: Vec<Replica> = (0..n_rep)
            .map(|_| Replica::new(BlockPool::new(self.kv_blocks)))
            .collect();
        let mut run = Run::new(requests, self.kv_blocks, self.trace);
        let mut slots = Slots::new(&self.client, requests.len());
        let mut next = 0;
        loop {
            let busy = reps
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.busy_until.map(|t| (i, t)))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            let arrival = requests
                .get(next)
                .and_then(|r| slots.send_time(r.arrival_s));
            match (arrival, busy) {
                (Some(t), b) if b.is_none_or(|(_, end)| t <= end) => {
                    slots.take();
                    let r = self.route(&reps, next);
                    let q = &requests[next];
                    reps[r]
                        .waiting
                        .push_back(Seq::new(next, q.input_tokens, q.output_tokens));
                    // Sent when the client had a place for it: its latencies count from then.
                    run.records[next].arrival_s = t;
                    run.records[next].replica = r as u32;
                    next += 1;
                    if reps[r].busy_until.is_none() {
                        self.start(&mut reps, r, t, &mut run);
                    }
                    queued(&reps, t, &mut run);
                    if next == requests.len() {
                        run.waiting_at_last_arrival =
                            reps.iter().map(|r| r.waiting.len() as u64).sum();
                    }
                }
                (_, Some((r, end))) => {
                    let finished = self.end_iteration(&mut reps, r, end, &mut run);
                    // The client sees the last token, and sends the next request, the
                    // frontend's time later.
                    slots.release(end + self.client.frontend_s, finished);
                }
                _ => break,
            }
        }
        self.finish(&reps, &mut run);
        run
    }

    /// Replica `r`'s iteration ends at `end`: its tokens go out (under output lag, the iteration
    /// before's), and its next iteration starts. Returns how many requests finished.
    fn end_iteration(&self, reps: &mut [Replica], r: usize, end: f64, run: &mut Run) -> usize {
        let rep = &mut reps[r];
        rep.busy_until = None;
        let (records, gaps) = (&mut run.records, &mut run.gaps);
        let mut out = Delivered::default();
        if self.output_lag() {
            // The tokens of the iteration before were processed during this one and are
            // delivered at its end; this one's wait for the next.
            for (req, first, last) in std::mem::take(&mut rep.undelivered) {
                out.deliver(&mut records[req], gaps, end, first, last);
            }
            let mut emitted = Vec::new();
            rep.complete(|req, first, last| emitted.push((req, first, last)));
            rep.undelivered = emitted;
        } else {
            rep.complete(|req, first, last| out.deliver(&mut records[req], gaps, end, first, last));
        }
        run.end_s = run.end_s.max(end);
        self.start(reps, r, end, run);
        if reps[r].busy_until.is_none() {
            // The replica falls idle: its devices' draw drops to idle power.
            self.sample(reps, end, run);
            // Nothing left to run: the engine drains its output queue at once.
            for (req, first, last) in std::mem::take(&mut reps[r].undelivered) {
                out.deliver(&mut run.records[req], &mut run.gaps, end, first, last);
            }
        }
        if let Some(t) = &mut run.trace {
            t.deliveries.push((end, out.tokens));
        }
        out.finished
    }

    /// vLLM 0.6's asynchronous output processing, on by default and run with its multi-step
    /// scheduling (vllm-project/vllm PRs #7049, #7921, #8050): the outputs of one step are
    /// processed while the next runs and returned at that step's end (`LLMEngine.step`:
    /// `ctx.output_queue`, drained when no request is left), so each token reaches the client
    /// one iteration after it was computed. Modelled with multi-step scheduling only, the vLLM
    /// 0.6 path here; vLLM V1 hands each step's outputs to its output process at once.
    fn output_lag(&self) -> bool {
        self.limits.num_scheduler_steps > 1
    }

    fn route(&self, reps: &[Replica], i: usize) -> usize {
        match self.router {
            Router::RoundRobin => i % reps.len(),
            Router::LeastLoaded => reps
                .iter()
                .enumerate()
                .min_by_key(|(_, r)| r.load())
                .map_or(0, |(i, _)| i),
        }
    }

    /// Start replica `r`'s next iteration at `now`, if it has work: time and power from the step
    /// and power models; the iteration's energy split over its requests by tokens.
    fn start(&self, reps: &mut [Replica], r: usize, now: f64, run: &mut Run) {
        // The iteration that just ended may have computed the shared prefix: cache it first.
        reps[r].cache_prefix(self.limits.shared_prefix);
        let steps = self.limits.num_scheduler_steps;
        let batch = match self.limits.prefill {
            _ if steps > 1 => reps[r].schedule_multistep(&self.limits, steps),
            PrefillBatching::Separate => reps[r].schedule_separate(&self.limits),
            PrefillBatching::Mixed => reps[r].schedule(&self.limits),
        };
        let Some(batch) = batch else {
            return;
        };
        let setup = if batch.host {
            self.setup
        } else {
            &self.window_setup
        };
        let it = iteration(setup, self.hw, self.net, &batch.work);
        if let Some(t) = &mut run.trace {
            t.iterations.push(TracedIteration {
                start_s: now,
                time_s: it.time,
                power_w: it.power_w,
                activity: it.activity,
                prefill: batch.work.tokens > batch.work.rows,
            });
        }
        let devices = self.devices_per_replica();
        let energy = it.power_w * it.time * devices;
        run.energy_busy_j += energy;
        run.iterations += 1;
        run.preemptions += batch.preempted.len() as u64;
        for &req in &batch.preempted {
            run.records[req].preemptions += 1;
        }
        let rep = &mut reps[r];
        // Energy split rule (docs/usage/serve.md, "Energy per request"): each token the
        // iteration processes — a prompt token of a prefill chunk or the one token of a decode
        // step — carries an equal share of the iteration's energy.
        let per_token = energy / f64::from(batch.tokens.max(1));
        for &(i, n) in &rep.scheduled {
            run.records[rep.running[i].req].energy_j += per_token * f64::from(n);
        }
        rep.busy_until = Some(now + it.time);
        rep.busy_s += it.time;
        rep.power_w = it.power_w;
        self.sample(reps, now, run);
    }

    fn sample(&self, reps: &[Replica], now: f64, run: &mut Run) {
        let waiting = queued(reps, now, run);
        let running: u64 = reps.iter().map(|r| r.running.len() as u64).sum();
        let used: u64 = reps.iter().map(|r| r.pool.used()).sum();
        let kv_use = used as f64 / (self.kv_blocks.max(1) * reps.len() as u64) as f64;
        run.peak_kv_use = run.peak_kv_use.max(kv_use);
        let devices = self.devices_per_replica();
        let idle = self.hw.idle_power.get();
        let gpu_power_w = reps
            .iter()
            .map(|r| devices * r.busy_until.map_or(idle, |_| r.power_w))
            .sum();
        run.samples.push(Sample {
            t_s: now,
            waiting,
            running,
            kv_use,
            gpu_power_w,
        });
    }

    /// Devices of one replica: TP × PP.
    fn devices_per_replica(&self) -> f64 {
        f64::from(self.setup.serving.tp) * f64::from(self.setup.serving.pp)
    }

    /// The end of the run: idle replicas draw idle power on every device from the first arrival
    /// to the end; the replicas' prefix-cache counts add up; the frontend's time joins each
    /// latency.
    fn finish(&self, reps: &[Replica], run: &mut Run) {
        run.prompt_tokens_admitted = reps.iter().map(|r| r.prompt_tokens_admitted).sum();
        run.prefix_hit_tokens = reps.iter().map(|r| r.prefix_hit_tokens).sum();
        let span = (run.end_s - run.first_arrival_s).max(0.0);
        let devices = self.devices_per_replica();
        run.energy_idle_j = reps
            .iter()
            .map(|r| {
                // Busy time summed iteration by iteration can exceed the span by rounding.
                let idle = span - r.busy_s;
                let idle = if idle > 1e-9 * span { idle } else { 0.0 };
                idle * self.hw.idle_power.get() * devices
            })
            .sum();
        // The client sees every token the frontend's time after the engine emitted it
        // (super::client): each TTFT and end-to-end latency carries it; the gaps, the TPOT and
        // the engine's own clock (`first_at`, `last_at`, the trace) do not.
        for r in &mut run.records {
            r.ttft_s += self.client.frontend_s;
            r.e2e_s += self.client.frontend_s;
        }
    }
}

//! `amdahl serve`: simulate an LLM server under a stream of requests — continuous batching,
//! tail latency, goodput and energy per request. The simulator is `amdahl_model::serve`; this
//! file only turns flags into its inputs.

use crate::cmd::resolve::{load, pue, GridArgs};
use crate::cmd::shape::{ModelArgs, ServingFormats, SystemArgs};
use crate::domain;
use crate::output::{print_result, write_file, wrote, FormatArgs};
use amdahl_model::infer::{replicas, Charging, Serving, WeightFormat};
use amdahl_model::plan::ModelShape;
use amdahl_model::serve::result::{Context, Described};
use amdahl_model::serve::search::{self, SearchSpace};
use amdahl_model::serve::{
    check_requests, default_budget, default_max_num_seqs, generate, parse_trace, prepare, simulate,
    simulate_traced, Arrivals, Client, Config, Generated, Lengths, Limits, PrefillBatching,
    Request, Router, ServeError, ServeResult, Side,
};
use amdahl_report::render::Render;
use anyhow::{Context as _, Result};
use std::path::PathBuf;
use std::process::ExitCode;

/// Simulate serving a stream of requests: TTFT, TPOT and end-to-end percentiles, goodput under
/// SLOs, queueing, and the energy of each request. The options live behind a `Box` so the
/// subcommand enum stays small.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    opts: Box<Options>,
}

#[derive(clap::Args, Debug)]
pub struct Options {
    #[command(flatten, next_help_heading = "Model")]
    pub shape: ModelArgs,
    #[command(flatten, next_help_heading = "System")]
    pub sys: SystemArgs,
    /// Devices serving [default: --tp × --pp × --replicas]; with --search, the most a
    /// configuration may use [default: one node].
    #[arg(help_heading = "Serving", long, value_parser = domain::count)]
    pub gpus: Option<u32>,
    /// Tensor-parallel size of each replica.
    #[arg(help_heading = "Serving", long, default_value_t = 1, value_parser = domain::count)]
    pub tp: u32,
    /// Pipeline-parallel size of each replica (divides the layers).
    #[arg(help_heading = "Serving", long, default_value_t = 1, value_parser = domain::count)]
    pub pp: u32,
    /// Independent copies of the model behind the router [default: --gpus / (--tp × --pp)].
    #[arg(help_heading = "Serving", long, value_parser = domain::count)]
    pub replicas: Option<u32>,
    /// How requests are spread over replicas.
    #[arg(
        help_heading = "Serving",
        long,
        value_parser = domain::model_enum::<Router>(&Router::NAMES, &[]),
        default_value = "round-robin"
    )]
    pub router: Router,
    #[command(flatten)]
    pub formats: ServingFormats,
    /// Most requests running at once per replica (vLLM's --max-num-seqs) [default: the
    /// engine's: vLLM's 1024 on devices of ≥ 70 GiB other than A100, else 256; SGLang's from
    /// the KV cache, 2048–4096].
    #[arg(help_heading = "Scheduler", long, value_parser = domain::count)]
    pub max_num_seqs: Option<u32>,
    /// Token budget of one iteration, prefill chunks and decodes together (vLLM's
    /// max_num_batched_tokens, SGLang's chunked_prefill_size) [default: the engine's: vLLM's
    /// 8192 on devices of ≥ 70 GiB other than A100, else 2048; SGLang's 2048 below 35 GiB, 8192
    /// below 160 GiB, else 16384].
    #[arg(help_heading = "Scheduler", long, value_parser = domain::count)]
    pub max_num_batched_tokens: Option<u32>,
    /// Decode steps per scheduling decision (vLLM 0.6's --num-scheduler-steps): above 1, vLLM
    /// 0.6's multi-step scheduling — the batch is fixed for that many decode steps, new prompts
    /// wait for the window to end and are prefilled whole in iterations of their own (no chunked
    /// prefill), and the fixed per-step overhead is paid once per window.
    #[arg(help_heading = "Scheduler", long, default_value_t = 1, value_parser = domain::scheduler_steps, value_name = "K")]
    pub num_scheduler_steps: u32,
    /// mixed: prompt chunks share iterations with the running requests' decode steps (vLLM V1,
    /// TensorRT-LLM); separate: prompts are prefilled first, in iterations of their own, while
    /// the decodes wait (SGLang without --enable-mixed-chunk, vLLM V0 without chunked prefill)
    /// [default: separate with --engine sglang or --num-scheduler-steps above 1, else mixed].
    #[arg(
        help_heading = "Scheduler",
        long,
        value_parser = domain::model_enum::<PrefillBatching>(&PrefillBatching::NAMES, &[])
    )]
    pub prefill_batching: Option<PrefillBatching>,
    /// Tokens every prompt begins with (a system prompt), counted in its length: the prefix
    /// cache (vLLM's, on by default in V1; SGLang's radix cache) computes their whole blocks once
    /// per replica and later requests reuse them (0: no prompt shares anything).
    #[arg(help_heading = "Scheduler", long, value_name = "TOKENS", default_value_t = 0, value_parser = domain::natural_u32)]
    pub shared_prefix: u32,

    /// Poisson arrivals at this many requests per second; inf: every request at t = 0 (an offline
    /// run, as bench_serving's --request-rate inf).
    #[arg(help_heading = "Workload", long, value_parser = domain::rate, required_unless_present_any = ["trace", "max_rate"], conflicts_with = "trace")]
    pub rate: Option<f64>,
    /// Gamma-distributed gaps with this coefficient of variation instead of Poisson (1 is
    /// Poisson, above 1 burstier).
    #[arg(help_heading = "Workload", long, value_parser = domain::positive, requires = "rate")]
    pub cv: Option<f64>,
    /// Requests from a CSV file with columns arrival_s,input_tokens,output_tokens (sorted by
    /// arrival), or JSON Lines with those fields (a file whose first character is `{`).
    #[arg(help_heading = "Workload", long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Requests to simulate with --rate.
    #[arg(help_heading = "Workload", long, default_value_t = 1000, value_parser = domain::count, conflicts_with = "trace")]
    pub requests: u32,
    /// Simulate every arrival in this many seconds instead of --requests.
    #[arg(help_heading = "Workload", long, value_name = "SECONDS", value_parser = domain::positive, conflicts_with_all = ["trace", "requests"])]
    pub duration: Option<f64>,
    /// Prompt lengths: fixed:N, uniform:LO:HI, lognormal:MEAN:SIGMA[:MAX] (tokens; a draw above
    /// MAX is cut to it, and MEAN is the mean after the cut), or a data set's published mean
    /// prompt, drawn log-normal: sharegpt, lmarena, cnn-dailymail, openorca
    /// (data/serve_datasets.csv).
    #[arg(help_heading = "Workload", long, default_value = "fixed:512", value_parser = input_lengths, conflicts_with = "trace")]
    pub input_dist: Dist,
    /// Output lengths, as --input-dist (a data set gives its published mean output).
    #[arg(help_heading = "Workload", long, default_value = "fixed:256", value_parser = output_lengths, conflicts_with = "trace")]
    pub output_dist: Dist,
    /// Seed of the arrivals and lengths (the same seed gives the same run).
    #[arg(help_heading = "Workload", long, default_value_t = 0, value_parser = domain::natural)]
    pub seed: u64,

    /// Time a request spends outside the engine, in ms: the HTTP server and the tokeniser before
    /// the scheduler sees it, detokenising and streaming its first token after; added to every
    /// TTFT and end-to-end latency (the TPOT and inter-token gaps keep the engine's). The default
    /// is one published measurement of vLLM's OpenAI server (docs/usage/serve.md, "The client");
    /// 0 for a client in the engine's process, as MLPerf's LoadGen.
    #[arg(help_heading = "Client", long, value_name = "MS", default_value_t = amdahl_model::serve::FRONTEND_MS, value_parser = domain::non_negative)]
    pub frontend_ms: f64,
    /// Keep at most this many requests in flight, as bench_serving's --max-concurrency: a request
    /// is sent at its scheduled time or when an earlier one's response has ended, whichever is
    /// later, and its latencies count from the send; with --rate inf, a closed loop of N users
    /// (with --search, the users every configuration must serve within the SLOs).
    #[arg(help_heading = "Client", long, value_name = "N", value_parser = domain::count)]
    pub max_concurrency: Option<u32>,

    /// Service-level objective on the time to first token, in ms (goodput counts requests meeting
    /// every SLO given; MLPerf Inference's Llama-2-70B server scenario: p99 TTFT ≤ 2000 ms).
    #[arg(help_heading = "SLO", long, value_parser = domain::positive, value_name = "MS")]
    pub slo_ttft_ms: Option<f64>,
    /// Service-level objective on the time per output token, in ms (MLPerf Llama-2-70B server:
    /// p99 TPOT ≤ 200 ms).
    #[arg(help_heading = "SLO", long, value_parser = domain::positive, value_name = "MS")]
    pub slo_tpot_ms: Option<f64>,

    #[command(flatten, next_help_heading = "Cost")]
    pub grid: GridArgs,
    /// PUE: a number ≥ 1 or a preset (local, hyperscale, industry) [default: local = 1.0].
    #[arg(help_heading = "Cost", long)]
    pub pue: Option<String>,

    /// Simulate the stream on every configuration of a space — tp (divisors of a node), replicas
    /// (1 to --gpus / tp), --search-max-num-seqs, --search-precision, --search-power-cap — and
    /// print the cheapest that sustains the rate and meets the SLOs (by energy per request and
    /// by GPUs) with the Pareto front of p99 latency against energy per request.
    #[arg(help_heading = "Search", long, conflicts_with_all = ["replicas", "max_num_seqs", "per_request", "svg"])]
    pub search: bool,
    /// Find the highest request rate this configuration serves within the SLOs given (p99 TTFT
    /// and TPOT; with none, the rate it sustains with a bounded queue), as MLPerf's server
    /// scenario does: every rate draws the same requests (--requests or --duration of them,
    /// --input-dist, --output-dist, --cv, --seed), starting from --rate [default: 1] and
    /// doubling, then bisecting to 1 %; prints every rate tried.
    #[arg(help_heading = "Search", long, conflicts_with_all = ["search", "trace", "max_concurrency", "per_request", "svg"])]
    pub max_rate: bool,
    /// Values of --max-num-seqs the search tries.
    #[arg(help_heading = "Search", long, value_delimiter = ',', value_parser = domain::count, default_value = "64,128,256,512,1024", value_name = "N,N,…")]
    pub search_max_num_seqs: Vec<u32>,
    /// Weight formats the search tries.
    #[arg(help_heading = "Search", long, value_delimiter = ',', value_parser = domain::model_enum::<WeightFormat>(&WeightFormat::NAMES, &[]), default_value = "bf16,fp8", value_name = "F,F,…")]
    pub search_precision: Vec<WeightFormat>,
    /// Board power limits the search tries, in W (default: the device as it is).
    #[arg(help_heading = "Search", long, value_delimiter = ',', value_parser = domain::positive, value_name = "W,W,…")]
    pub search_power_cap: Vec<f64>,

    #[command(flatten, next_help_heading = "Output")]
    pub format: FormatArgs,
    /// Write one CSV row per request here: arrival, lengths, replica, TTFT, TPOT, end-to-end,
    /// joules, preemptions.
    #[arg(help_heading = "Output", long, value_name = "FILE")]
    pub per_request: Option<PathBuf>,
    /// Write an SVG plot here: the TTFT, TPOT and inter-token latency CDFs, and over time the
    /// requests waiting and running, the KV cache in use and the GPUs' and server's power.
    #[arg(help_heading = "Output", long)]
    pub svg: Option<PathBuf>,
}

/// A length distribution and what the user typed for it (a data set's name stays in the label).
#[derive(Debug, Clone)]
pub struct Dist {
    pub lengths: Lengths,
    pub label: String,
}

fn dist(s: &str, side: Side) -> Result<Dist, String> {
    let lengths = Lengths::parse_side(s, side).map_err(|e| e.to_string())?;
    let typed = s.trim().to_ascii_lowercase();
    let label = if typed.contains(':') || typed.parse::<u32>().is_ok() {
        lengths.label()
    } else {
        format!("{typed} ({})", lengths.label())
    };
    Ok(Dist { lengths, label })
}

/// The client the options describe (`--frontend-ms`, `--max-concurrency`).
fn client(a: &Options) -> Client {
    Client {
        frontend_s: a.frontend_ms * 1e-3,
        max_concurrency: a.max_concurrency,
    }
}

fn input_lengths(s: &str) -> Result<Dist, String> {
    dist(s, Side::Input)
}

fn output_lengths(s: &str) -> Result<Dist, String> {
    dist(s, Side::Output)
}

pub fn run(args: Args) -> Result<ExitCode> {
    let a = *args.opts;
    let c = load(&a.sys.catalogs)?;
    let model = a.shape.resolve(&c)?;
    let (hw, net) = a.sys.resolve(&c)?;
    a.sys.check_engine(a.formats.engine)?;
    let charging = Charging {
        pue: pue(a.pue.as_deref(), &c)?.value,
        pue_source: String::new(),
        grid: a.grid.resolve(&c)?,
    };
    if a.search {
        // A closed loop (--max-concurrency with --rate inf) has no rate to sustain, only SLOs.
        if a.rate.is_some_and(f64::is_infinite) && a.max_concurrency.is_none() {
            return Err(ServeError::Flag {
                what: "--rate",
                want: "finite with --search (the rate every configuration must sustain), or \
                       --max-concurrency N (N users in a closed loop)",
                got: "inf".into(),
            }
            .into());
        }
        return run_search(&a, &model, &hw, &net);
    }
    if a.max_rate {
        return crate::cmd::serve_max_rate::run(&a, &model, &hw, &net);
    }
    let (config, prepared) = configured(&a, &model, &hw, &net)?;
    let (requests, described, source) = workload(&a, &model)?;
    check_requests(&model, &prepared, &config.limits, &requests, &source)?;
    // An offline run (every request sent at t = 0) is also measured over ML.ENERGY's window,
    // which needs its iterations kept.
    let run = if a.max_concurrency.is_none() && requests.iter().all(|r| r.arrival_s == 0.0) {
        simulate_traced(&prepared, &hw, &net, &config, &requests)
    } else {
        simulate(&prepared, &hw, &net, &config, &requests)
    };
    let ctx = Context {
        model: &model,
        hw: &hw,
        net: &net,
        config: &config,
        prepared: &prepared,
        charging: &charging,
        slo_ttft_s: a.slo_ttft_ms.map(|m| m * 1e-3),
        slo_tpot_s: a.slo_tpot_ms.map(|m| m * 1e-3),
    };
    let result = ServeResult::new(&ctx, &run, described);
    if let Some(path) = &a.per_request {
        write_file(path, &amdahl_report::serve::requests_csv(&run.records))
            .with_context(|| format!("writing {}", path.display()))?;
        wrote(path);
    }
    print_result(&result, &result.render(a.format.format())?)?;
    if a.format.format() == crate::output::Format::Table {
        crate::cmd::shape::note_tuning(&hw);
        crate::cmd::serve_note::note_serve_accuracy();
        crate::cmd::energy_note::note_energy_accuracy();
    }
    if let Some(p) = &a.svg {
        crate::output::write_plot(p, &amdahl_report::serve::serve_svg(&result))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The configuration the options describe, checked, with its KV cache sized (SGLang's default
/// --max-num-seqs depends on it).
pub fn configured(
    a: &Options,
    model: &ModelShape,
    hw: &amdahl_model::plan::Hardware,
    net: &amdahl_model::plan::Network,
) -> Result<(Config, amdahl_model::serve::Prepared)> {
    let engine = a.formats.engine;
    let mut config = Config {
        serving: serving(a)?,
        limits: Limits {
            max_num_seqs: a.max_num_seqs.unwrap_or(1),
            max_num_batched_tokens: a
                .max_num_batched_tokens
                .unwrap_or(default_budget(engine, hw)),
            num_scheduler_steps: a.num_scheduler_steps,
            prefill: prefill_batching(a),
            shared_prefix: a.shared_prefix,
        },
        router: a.router,
        client: client(a),
    };
    let prepared = prepare(model, hw, net, &config)?;
    if a.max_num_seqs.is_none() {
        config.limits.max_num_seqs =
            default_max_num_seqs(engine, hw, &prepared, model.serving_context());
    }
    Ok((config, prepared))
}

/// `--search`: the workload once, simulated on every configuration of the space.
fn run_search(
    a: &Options,
    model: &ModelShape,
    hw: &amdahl_model::plan::Hardware,
    net: &amdahl_model::plan::Network,
) -> Result<ExitCode> {
    let (requests, described, _) = workload(a, model)?;
    let tp_pp = u64::from(a.tp) * u64::from(a.pp);
    let space = SearchSpace {
        // The budget: --gpus, else one node.
        max_gpus: a
            .gpus
            .map_or(u64::from(net.gpus_per_node).max(tp_pp), u64::from),
        pp: a.pp,
        kv: a.formats.kv_precision,
        engine: a.formats.engine,
        memory_fraction: a.formats.gpu_memory_fraction,
        precisions: a.search_precision.clone(),
        max_num_seqs: a.search_max_num_seqs.clone(),
        max_num_batched_tokens: a
            .max_num_batched_tokens
            .unwrap_or(default_budget(a.formats.engine, hw)),
        num_scheduler_steps: a.num_scheduler_steps,
        prefill: prefill_batching(a),
        shared_prefix: a.shared_prefix,
        client: client(a),
        power_caps: crate::cmd::shape::search_caps(hw, &a.search_power_cap)?,
        router: a.router,
        slo_ttft_s: a.slo_ttft_ms.map(|m| m * 1e-3),
        slo_tpot_s: a.slo_tpot_ms.map(|m| m * 1e-3),
    };
    let rate = requests.len() as f64 / requests.last().map_or(1.0, |r| r.arrival_s).max(1e-9);
    let d = search::Described {
        workload: &described.workload,
        rate: a.rate.unwrap_or(rate),
    };
    let result = search::search(model, hw, net, &space, &requests, d)?;
    print_result(&result, &result.render(a.format.format())?)?;
    if a.format.format() == crate::output::Format::Table {
        crate::cmd::serve_note::note_serve_accuracy();
        crate::cmd::energy_note::note_energy_accuracy();
    }
    Ok(ExitCode::SUCCESS)
}

/// --prefill-batching, else the default of the engine and --num-scheduler-steps.
fn prefill_batching(a: &Options) -> PrefillBatching {
    a.prefill_batching.unwrap_or(PrefillBatching::default_for(
        a.formats.engine,
        a.num_scheduler_steps,
    ))
}

/// tp × pp × replicas on --gpus: every replica whole, no more replicas than the devices hold.
fn serving(a: &Options) -> Result<Serving> {
    let tp_pp = u64::from(a.tp) * u64::from(a.pp);
    let replicas = match (a.replicas, a.gpus) {
        (Some(r), Some(g)) if u64::from(r) * tp_pp != u64::from(g) => {
            return Err(ServeError::Replicas {
                replicas: r,
                tp: a.tp,
                pp: a.pp,
                need: u64::from(r) * tp_pp,
                gpus: g.into(),
                most: u64::from(g) / tp_pp,
            }
            .into())
        }
        (Some(r), _) => r,
        (None, g) => replicas(g.map_or(tp_pp, u64::from), a.tp, a.pp)?,
    };
    Ok(Serving {
        tp: a.tp,
        pp: a.pp,
        replicas,
        weights: a.formats.precision,
        kv: a.formats.kv_precision,
        engine: a.formats.engine,
        memory_fraction: a.formats.gpu_memory_fraction,
    })
}

/// How generated requests arrive: Poisson or gamma gaps at `rate`, or all at t = 0 when it is
/// infinite (`--rate inf`), which no `--cv` can shape.
pub fn arrivals(rate: f64, cv: Option<f64>) -> Result<Arrivals, ServeError> {
    match cv {
        Some(cv) if rate.is_infinite() => Err(ServeError::Flag {
            what: "--cv",
            want: "given with a finite --rate (with --rate inf every request arrives at once)",
            got: cv.to_string(),
        }),
        _ if rate.is_infinite() => Ok(Arrivals::AllAtOnce),
        Some(cv) => Ok(Arrivals::Gamma { rate, cv }),
        None => Ok(Arrivals::Poisson { rate }),
    }
}

/// The client's limit, as the workload line says it.
fn in_flight(a: &Options) -> String {
    a.max_concurrency.map_or(String::new(), |n| {
        format!(", at most {n} in flight (--max-concurrency)")
    })
}

/// The requests: a trace read from its file, or a generated stream.
fn workload(a: &Options, model: &ModelShape) -> Result<(Vec<Request>, Described, String)> {
    if let Some(path) = &a.trace {
        let name = path.display().to_string();
        let text = crate::input::read_text(path)?;
        let reqs = parse_trace(&name, &text)?;
        let d = Described {
            workload: format!("trace {name}{}", in_flight(a)),
            input_dist: None,
            output_dist: None,
            seed: None,
            clamped: 0,
        };
        return Ok((reqs, d, name));
    }
    // clap requires --rate without --trace.
    let g = Generated {
        arrivals: arrivals(a.rate.unwrap_or(1.0), a.cv)?,
        input: a.input_dist.lengths,
        output: a.output_dist.lengths,
        requests: a.requests,
        duration_s: a.duration,
        seed: a.seed,
    };
    let (reqs, clamped) = generate(&g, model.serving_context(), &model.name)?;
    let arrivals = match g.arrivals {
        Arrivals::AllAtOnce if a.max_concurrency.is_some() => {
            "every request ready at t = 0, a closed loop".to_string()
        }
        Arrivals::AllAtOnce => "every request at t = 0 (offline)".to_string(),
        Arrivals::Gamma { rate, cv } => format!("gamma arrivals at {rate} requests/s, cv {cv}"),
        Arrivals::Poisson { rate } => format!("Poisson arrivals at {rate} requests/s"),
    };
    let d = Described {
        workload: match a.duration {
            Some(s) => format!("{arrivals} for {s} s{}", in_flight(a)),
            None => format!("{arrivals}{}", in_flight(a)),
        },
        input_dist: Some(a.input_dist.label.clone()),
        output_dist: Some(a.output_dist.label.clone()),
        seed: Some(a.seed),
        clamped,
    };
    Ok((reqs, d, "--input-dist/--output-dist".into()))
}

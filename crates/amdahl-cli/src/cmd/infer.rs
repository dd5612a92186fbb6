//! `amdahl infer`: predict serving latency, throughput, memory, power, energy and carbon of a
//! model on N devices; or search TP × precision × batch (`--search`). The model is
//! `amdahl_model::infer`; this file only turns flags into its inputs.

use crate::cmd::resolve::{load, pue, GridArgs};
use crate::cmd::shape::{ModelArgs, ServingFormats, SystemArgs};
use crate::output::{print_unchecked, Format, FormatArgs};
use amdahl_model::infer::{
    batch_for_rate, evaluate_at, replicas, search, setup, BatchChoice, Charging, Context,
    InferResult, InferSearchResult, Requests, Serving, Space, WeightFormat, INFER_SEARCH_SCHEMA,
};
use amdahl_report::render::Render;
use anyhow::{bail, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Predict serving latency, throughput, energy per token and carbon; search TP, batch and
/// precision. The options live behind a `Box` so the subcommand enum stays small.
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
    /// Devices serving (replicas = --gpus / (--tp × --pp)); default --tp × --pp, with --search
    /// the devices of one node (--gpus-per-node).
    #[arg(help_heading = "Serving", long, value_parser = crate::domain::natural)]
    pub gpus: Option<u64>,
    /// Tensor-parallel size (with --search: every divisor of --gpus-per-node is tried).
    #[arg(help_heading = "Serving", long, default_value_t = 1)]
    pub tp: u32,
    /// Pipeline-parallel size (divides the layers).
    #[arg(help_heading = "Serving", long, default_value_t = 1)]
    pub pp: u32,
    #[command(flatten)]
    pub formats: ServingFormats,
    /// Concurrent sequences (default: the largest batch that fits, maximum load).
    #[arg(help_heading = "Serving", long, conflicts_with = "rate")]
    pub batch: Option<i64>,
    /// Requests per second to sustain: the smallest batch that does is chosen.
    #[arg(help_heading = "Serving", long)]
    pub rate: Option<f64>,
    /// Prompt length in tokens.
    #[arg(help_heading = "Serving", long, default_value_t = 512)]
    pub input: i64,
    /// Generated tokens per request.
    #[arg(help_heading = "Serving", long, default_value_t = 256)]
    pub output: i64,
    /// Beam search width: each request keeps this many candidate sequences in every decode
    /// step (its prompt prefilled once, its KV blocks shared) and returns one.
    #[arg(help_heading = "Serving", long, default_value_t = 1)]
    pub beams: i64,
    #[command(flatten, next_help_heading = "Cost")]
    pub grid: GridArgs,
    /// PUE: a number ≥ 1 or a preset (local, hyperscale, industry) [default: local = 1.0, the
    /// default of every command].
    #[arg(help_heading = "Cost", long)]
    pub pue: Option<String>,

    /// Search TP × precision × batch, rank by energy per output token under the latency limits.
    #[arg(help_heading = "Search", long, conflicts_with_all = ["batch", "rate"])]
    pub search: bool,
    /// Latency limit on the time to first token, in ms (with --search).
    #[arg(help_heading = "Search", long)]
    pub max_ttft_ms: Option<f64>,
    /// Latency limit on the time per output token, in ms (with --search).
    #[arg(help_heading = "Search", long)]
    pub max_tpot_ms: Option<f64>,
    /// Largest batch the search tries.
    #[arg(help_heading = "Search", long, default_value_t = 1024)]
    pub search_max_batch: u32,
    /// Configurations to list with --search.
    #[arg(help_heading = "Search", long, default_value_t = 10, value_parser = crate::domain::natural_usize)]
    pub top: usize,
    /// Board power limits to search over, in W, comma-separated (with --search): every
    /// configuration is evaluated under each, and the energy-optimal cap is printed (the
    /// question Zeus answers by measurement).
    #[arg(help_heading = "Search", long, value_delimiter = ',', value_parser = crate::domain::positive, value_name = "W,W,…")]
    pub search_power_cap: Vec<f64>,

    #[command(flatten, next_help_heading = "Output")]
    pub format: FormatArgs,
    /// Write an SVG plot here (latency vs throughput, energy per token vs batch).
    #[arg(help_heading = "Output", long)]
    pub svg: Option<PathBuf>,
}

/// A count flag as u32: at least 1, else a clear error naming it.
fn count(what: &str, v: i64) -> Result<u32> {
    match u32::try_from(v) {
        Ok(n) if n >= 1 => Ok(n),
        _ => bail!(
            "{what} must be a whole number from 1 to {} (got {v})",
            u32::MAX
        ),
    }
}

fn positive_ms(what: &str, v: Option<f64>) -> Result<Option<f64>> {
    match v {
        Some(x) if !(x.is_finite() && x > 0.0) => {
            bail!("{what} must be a positive number of milliseconds (got {x})")
        }
        other => Ok(other.map(|x| x * 1e-3)),
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    let a = *args.opts;
    let c = load(&a.sys.catalogs)?;
    let model = a.shape.resolve(&c)?;
    let (hw, net) = a.sys.resolve(&c)?;
    a.sys.check_engine(a.formats.engine)?;
    if net.gpus_per_node == 0 {
        bail!("--gpus-per-node must be at least 1");
    }
    let grid = a.grid.resolve(&c)?;
    let pue = pue(a.pue.as_deref(), &c)?;
    let charging = Charging {
        pue: pue.value,
        pue_source: pue.source,
        grid,
    };
    let req = Requests {
        input: count("--input", a.input)?,
        output: count("--output", a.output)?,
        beams: count("--beams", a.beams)?,
    };
    if a.search {
        return run_search(&a, &model, &hw, &net, req, &charging);
    }
    if a.max_ttft_ms.is_some() || a.max_tpot_ms.is_some() {
        bail!("--max-ttft-ms and --max-tpot-ms apply to --search; add --search");
    }
    if !a.search_power_cap.is_empty() {
        bail!("--search-power-cap applies to --search; add --search, or give one cap with --power-cap");
    }
    let tp = count("--tp", a.tp.into())?;
    let pp = count("--pp", a.pp.into())?;
    let gpus = a.gpus.unwrap_or(u64::from(tp) * u64::from(pp));
    let serving = Serving {
        tp,
        pp,
        replicas: replicas(gpus, tp, pp)?,
        weights: a.formats.precision,
        kv: a.formats.kv_precision,
        engine: a.formats.engine,
        memory_fraction: a.formats.gpu_memory_fraction,
    };
    let s = setup(&model, &hw, &net, serving, req)?;
    let (e, choice) = match (a.batch, a.rate) {
        (Some(b), _) => {
            let b = u32::try_from(b).ok().filter(|&b| b >= 1).ok_or_else(|| {
                anyhow::anyhow!(
                    "--batch must be at least 1 (got {b}); at most {} sequences fit",
                    s.max_batch
                )
            })?;
            (evaluate_at(&s, &hw, &net, b)?, BatchChoice::Given)
        }
        (None, Some(r)) => (
            batch_for_rate(&s, &hw, &net, r)?,
            BatchChoice::Rate { requests_per_s: r },
        ),
        (None, None) => (
            evaluate_at(&s, &hw, &net, s.max_batch)?,
            BatchChoice::MaxLoad,
        ),
    };
    check_cap(&s, &hw, &net, e.batch)?;
    if let BatchChoice::Rate { requests_per_s } = choice {
        eprintln!(
            "amdahl: batch {} is the smallest that sustains {requests_per_s} requests/s ({:.3} requests/s)",
            e.batch, e.requests_per_s
        );
    }
    let ctx = Context {
        model: &model,
        hw: &hw,
        net: &net,
        setup: &s,
        charging: &charging,
    };
    let serving = amdahl_model::infer::validation::infer_validation().map_err(|e| {
        anyhow::anyhow!("the embedded serving validation set (a bug in amdahl): {e}")
    })?;
    let energy = amdahl_model::infer::intervals::energy_cases_with_arch().map_err(|e| {
        anyhow::anyhow!("the embedded energy validation set (a bug in amdahl): {e}")
    })?;
    let mut result =
        InferResult::new(&ctx, &e, choice)?.with_intervals(&serving, &energy, &hw.arch);
    if let (Some(cal), Some(iv)) = (a.sys.calibration()?, result.intervals.as_mut()) {
        amdahl_model::calibrate::intervals::apply_to_infer(&cal, iv);
    }
    print_unchecked(&result, &result.render(a.format.format())?)?;
    if a.format.format() == Format::Table {
        crate::cmd::shape::note_tuning(&hw);
        crate::cmd::energy_note::note_energy_accuracy();
    }
    if let Some(p) = &a.svg {
        crate::output::write_plot(p, &amdahl_report::infer::infer_svg(&result))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What `amdahl calibrate` needs of a measured serving row typed as `infer …` arguments: the
/// model, the device (profile and calibration applied), the network, the serving layout, the
/// requests and the batch, checked as `amdahl infer` checks them. The batch must be given:
/// a row measured at a rate or at the largest batch does not say which batch ran.
pub fn workload(
    args: Args,
    c: &amdahl_model::catalog::Catalogs,
) -> Result<(
    amdahl_model::plan::ModelShape,
    amdahl_model::plan::Hardware,
    amdahl_model::plan::Network,
    Serving,
    Requests,
    u32,
)> {
    let a = *args.opts;
    if a.search {
        bail!("a measured row is one configuration: drop --search");
    }
    let Some(batch) = a.batch else {
        bail!("give the --batch the row was measured at (a measured row cannot choose its batch)");
    };
    let model = a.shape.resolve(c)?;
    let (hw, net) = a.sys.resolve(c)?;
    let req = Requests {
        input: count("--input", a.input)?,
        output: count("--output", a.output)?,
        beams: count("--beams", a.beams)?,
    };
    let tp = count("--tp", a.tp.into())?;
    let pp = count("--pp", a.pp.into())?;
    let gpus = a.gpus.unwrap_or(u64::from(tp) * u64::from(pp));
    let serving = Serving {
        tp,
        pp,
        replicas: replicas(gpus, tp, pp)?,
        weights: a.formats.precision,
        kv: a.formats.kv_precision,
        engine: a.formats.engine,
        memory_fraction: a.formats.gpu_memory_fraction,
    };
    let s = setup(&model, &hw, &net, serving, req)?;
    let batch = count("--batch", batch)?;
    evaluate_at(&s, &hw, &net, batch)?;
    Ok((model, hw, net, serving, req, batch))
}

/// The catalogs the row's `--catalog` files name.
pub fn catalog_files(args: &Args) -> &[PathBuf] {
    &args.opts.sys.catalogs
}

/// A power cap the decode's memory traffic alone exceeds, even at the lowest clock, is refused
/// with the lowest cap that works (rather than reported as power held at the cap).
fn check_cap(
    s: &amdahl_model::infer::Setup,
    hw: &amdahl_model::plan::Hardware,
    net: &amdahl_model::plan::Network,
    batch: u32,
) -> Result<()> {
    let Some(cap) = hw.power_cap else {
        return Ok(());
    };
    let free = amdahl_model::plan::Hardware {
        power_cap: None,
        ..hw.clone()
    };
    let e = evaluate_at(s, &free, net, batch)?;
    if !hw.cap_is_reachable(&e.activity_decode, e.decode_compute_s / e.tpot_s) {
        bail!(
            "--power-cap {:.0} W is below what the decode draws at the lowest clock amdahl models \
             (uncapped it draws {:.0} W, mostly streaming memory, which a lower clock does not \
             slow): raise --power-cap, lower --batch, or choose a narrower --kv-precision",
            cap.get(),
            e.power_decode_w
        );
    }
    Ok(())
}

fn run_search(
    a: &Options,
    model: &amdahl_model::plan::ModelShape,
    hw: &amdahl_model::plan::Hardware,
    net: &amdahl_model::plan::Network,
    req: Requests,
    charging: &Charging,
) -> Result<ExitCode> {
    let pp = count("--pp", a.pp.into())?;
    let gpus = a.gpus.unwrap_or(u64::from(net.gpus_per_node));
    if gpus == 0 {
        bail!("--gpus must be at least 1");
    }
    if a.search_max_batch == 0 || a.top == 0 {
        bail!("--search-max-batch and --top must be at least 1");
    }
    let space = Space {
        gpus,
        pp,
        kv: a.formats.kv_precision,
        engine: a.formats.engine,
        memory_fraction: a.formats.gpu_memory_fraction,
        precisions: WeightFormat::offered(hw),
        max_batch: a.search_max_batch,
        max_ttft_s: positive_ms("--max-ttft-ms", a.max_ttft_ms)?,
        max_tpot_s: positive_ms("--max-tpot-ms", a.max_tpot_ms)?,
        top: a.top,
        power_caps: crate::cmd::shape::search_caps(hw, &a.search_power_cap)?,
    };
    let start = Instant::now();
    let outcome = search(model, hw, net, req, &space, charging)?;
    let wall = start.elapsed().as_secs_f64();
    let result = InferSearchResult {
        schema: INFER_SEARCH_SCHEMA.into(),
        model: model.clone(),
        system: hw.name.clone(),
        gpus,
        pp,
        kv_precision: space.kv,
        engine: space.engine,
        input_tokens: req.input,
        output_tokens: req.output,
        max_ttft_s: space.max_ttft_s,
        max_tpot_s: space.max_tpot_s,
        pue: charging.pue,
        grid_g_per_kwh: charging.grid.g_per_kwh.get(),
        evaluated: outcome.evaluated,
        feasible: outcome.feasible,
        wall_s: wall,
        configs_per_s: outcome.evaluated as f64 / wall.max(1e-9),
        ranked: outcome.ranked,
        pareto: outcome.pareto,
        skipped: outcome.skipped,
    };
    let serving = amdahl_model::infer::validation::infer_validation().map_err(|e| {
        anyhow::anyhow!("the embedded serving validation set (a bug in amdahl): {e}")
    })?;
    let energy = amdahl_model::infer::intervals::energy_cases_with_arch().map_err(|e| {
        anyhow::anyhow!("the embedded energy validation set (a bug in amdahl): {e}")
    })?;
    let mut result = result.with_intervals(&serving, &energy, &hw.arch);
    if let Some(cal) = a.sys.calibration()? {
        let listed = result.ranked.iter_mut().chain(result.pareto.iter_mut());
        for iv in listed.filter_map(|c| c.intervals.as_mut()) {
            amdahl_model::calibrate::intervals::apply_to_infer(&cal, iv);
        }
    }
    print_unchecked(&result, &result.render(a.format.format())?)?;
    if a.format.format() == Format::Table {
        crate::cmd::shape::note_tuning(hw);
        crate::cmd::energy_note::note_energy_accuracy();
    }
    if let Some(p) = &a.svg {
        crate::output::write_plot(p, &amdahl_report::infer::search_svg(&result))?;
    }
    Ok(ExitCode::SUCCESS)
}

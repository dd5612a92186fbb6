//! `amdahl plan`: predict one training layout, or search every layout (`--search`).

use crate::cmd::resolve::{load, pue, GridArgs};
use crate::output::{print, write_file, Format, FormatArgs};
use amdahl_model::carbon::Pue;
use amdahl_model::catalog::grid::GridIntensity;
use amdahl_model::catalog::Catalogs;
use amdahl_model::plan::{
    evaluate, search, space_size, system, validate, validate_model, CostInputs, Hardware, Layout,
    ModelShape, Network, Objective, Overrides, PlanError, PlanResult, Precision, Recompute,
    SearchResult, SearchSpace,
};
use amdahl_model::units::{BytesPerSecond, Seconds, Watts};
use anyhow::{anyhow, bail, Context, Result};
use clap::ValueEnum;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum RecomputeArg {
    None,
    Selective,
    Full,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PrecisionArg {
    Fp32,
    Bf16,
    Fp8,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ObjectiveArg {
    Time,
    Energy,
    Cost,
}

/// Predict step time, memory and cost of distributed training; search for the best layout.
/// The options live behind a `Box` so the subcommand enum stays small.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    opts: Box<Options>,
}

#[derive(clap::Args, Debug)]
pub struct Options {
    /// Model from `amdahl catalog models`, by name or alias (gpt3-175b, mt-nlg-530b, llama2-70b,
    /// llama3-8b, megatron-1.7b … megatron-1t); decoder-only transformers.
    #[arg(long, conflicts_with_all = ["model_file", "layers"])]
    pub model: Option<String>,
    /// Model shape as JSON: {"name", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq", "gated_mlp"}.
    #[arg(long, conflicts_with = "layers")]
    pub model_file: Option<PathBuf>,
    /// Transformer layers (with --hidden, --heads, --seq, --vocab).
    #[arg(long, requires_all = ["hidden", "heads", "seq", "vocab"])]
    pub layers: Option<u32>,
    #[arg(long)]
    pub hidden: Option<u32>,
    #[arg(long)]
    pub heads: Option<u32>,
    /// Key/value heads (grouped-query attention); default: --heads.
    #[arg(long)]
    pub kv_heads: Option<u32>,
    /// MLP width; default 4 × hidden.
    #[arg(long)]
    pub ffn: Option<u32>,
    /// Gated (SwiGLU) MLP with three matrices.
    #[arg(long)]
    pub gated: bool,
    #[arg(long)]
    pub seq: Option<u32>,
    #[arg(long)]
    pub vocab: Option<u32>,

    /// Device from `amdahl catalog devices`, by name or alias (a100-80gb, a100-40gb, h100,
    /// h200, v100-32gb, mi300x, …).
    #[arg(long, default_value = "a100-80gb")]
    pub system: String,
    /// Override or extend a catalog with a CSV file in the format of data/*.csv (repeatable).
    #[arg(long = "catalog", value_name = "FILE")]
    pub catalogs: Vec<PathBuf>,
    #[arg(long, default_value_t = 8)]
    pub gpus_per_node: u32,
    /// Devices in the job (with --search: devices available).
    #[arg(long)]
    pub gpus: u64,
    #[arg(long, default_value_t = 1)]
    pub tp: u32,
    #[arg(long, default_value_t = 1)]
    pub pp: u32,
    /// Data-parallel size; default --gpus / (--tp × --pp).
    #[arg(long)]
    pub dp: Option<u32>,
    /// Model chunks per pipeline stage (interleaved schedule); 1 = none.
    #[arg(long, default_value_t = 1)]
    pub interleave: u32,
    /// Microbatch size (sequences).
    #[arg(long, default_value_t = 1)]
    pub mbs: u32,
    /// Global batch in sequences (with --search: the largest allowed).
    #[arg(long)]
    pub batch: u32,
    #[arg(long, value_enum, default_value = "selective")]
    pub recompute: RecomputeArg,
    /// ZeRO stage 0–3 (3 = FSDP).
    #[arg(long, default_value_t = 0)]
    pub zero: u8,
    /// Sequence parallelism (needs --tp > 1).
    #[arg(long)]
    pub sp: bool,
    /// Overlap data-parallel gradient communication with the backward pass.
    #[arg(long)]
    pub overlap: bool,
    #[arg(long, value_enum, default_value = "bf16")]
    pub precision: PrecisionArg,
    /// Fused attention (FlashAttention): no s × s score tensors stored or streamed.
    #[arg(long)]
    pub flash: bool,

    /// Inter-node bandwidth per GPU in Gbit/s (default: the catalog's reference server).
    #[arg(long)]
    pub inter_gbit: Option<f64>,
    /// Inter-node latency per message in µs.
    #[arg(long)]
    pub inter_latency_us: Option<f64>,
    /// Achieved fraction of the inter-node bandwidth.
    #[arg(long)]
    pub inter_eff: Option<f64>,
    /// Intra-node (NVLink) bandwidth per GPU and direction in GB/s.
    #[arg(long)]
    pub intra_gbs: Option<f64>,
    /// Device idle power in W (default: the catalog's idle_w, else 1/8 of TDP, an estimate).
    #[arg(long)]
    pub idle_w: Option<f64>,
    /// Device TDP in W.
    #[arg(long)]
    pub tdp_w: Option<f64>,

    /// Tokens to train on (time, device-hours, energy, carbon).
    #[arg(long, default_value_t = 300e9)]
    pub tokens: f64,
    #[command(flatten)]
    pub grid: GridArgs,
    /// PUE: a number ≥ 1 or a preset (local, hyperscale, industry) [default: local = 1.0].
    #[arg(long)]
    pub pue: Option<String>,
    /// Price of one device-hour (any currency) for --objective cost.
    #[arg(long)]
    pub price: Option<f64>,

    /// Search every valid layout instead of predicting one.
    #[arg(long)]
    pub search: bool,
    #[arg(long, value_enum, default_value = "time")]
    pub objective: ObjectiveArg,
    /// Layouts to list.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Also consider jobs on fewer devices (every whole number of nodes up to --gpus).
    #[arg(long)]
    pub up_to: bool,
    /// Microbatch sizes the search tries.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    pub search_mbs: Vec<u32>,
    /// Largest interleaving factor the search tries.
    #[arg(long, default_value_t = 4)]
    pub max_interleave: u32,
    /// Hide the progress bar.
    #[arg(long)]
    pub quiet: bool,

    #[command(flatten)]
    pub format: FormatArgs,
    /// Write an SVG plot here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

fn model_of(a: &Options, c: &Catalogs) -> Result<ModelShape> {
    if let Some(name) = &a.model {
        let m = c.models.lookup(name).context("--model")?;
        return Ok(ModelShape::from_catalog(m)?);
    }
    if let Some(path) = &a.model_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading model file {}", path.display()))?;
        return serde_json::from_str(&text).with_context(|| {
            format!(
                "parsing model file {} (expected JSON with name, layers, hidden, heads, \
                 kv_heads, ffn, vocab, seq, gated_mlp)",
                path.display()
            )
        });
    }
    match (a.layers, a.hidden, a.heads, a.seq, a.vocab) {
        (Some(layers), Some(hidden), Some(heads), Some(seq), Some(vocab)) => Ok(ModelShape {
            name: "custom".into(),
            layers,
            hidden,
            heads,
            kv_heads: a.kv_heads.unwrap_or(heads),
            ffn: a.ffn.unwrap_or(hidden.saturating_mul(4)),
            vocab,
            seq,
            gated_mlp: a.gated,
        }),
        _ => bail!(
            "give a model: --model NAME, --model-file F, or --layers L --hidden H --heads A \
             --seq S --vocab V"
        ),
    }
}

fn system_of(a: &Options, c: &Catalogs) -> Result<(Hardware, Network)> {
    let dev = c.devices.lookup(&a.system).context("--system")?;
    let overrides = Overrides {
        intra_node_bandwidth: a.intra_gbs.map(|x| BytesPerSecond(x * 1e9)),
        tdp: a.tdp_w.map(Watts),
        idle_power: a.idle_w.map(Watts),
    };
    let (hw, mut net) = system(dev, &overrides, a.inter_gbit)?;
    net.gpus_per_node = a.gpus_per_node;
    if let Some(x) = a.inter_latency_us {
        if !(x >= 0.0 && x.is_finite()) {
            bail!("--inter-latency-us {x} must be a non-negative number");
        }
        net.inter.latency = Seconds(x * 1e-6);
    }
    if let Some(x) = a.inter_eff {
        if !(x > 0.0 && x <= 1.0) {
            bail!("--inter-eff {x} must be in (0, 1]");
        }
        net.inter.efficiency = x;
    }
    for (what, v) in [
        ("--inter-gbit", net.inter.bandwidth.get()),
        ("--intra-gbs", net.intra.bandwidth.get()),
        ("--tdp-w", hw.tdp.get()),
    ] {
        if !(v > 0.0 && v.is_finite()) {
            bail!("{what} must be a positive number");
        }
    }
    if !(hw.idle_power.get() >= 0.0 && hw.idle_power.get() <= hw.tdp.get()) {
        bail!(
            "--idle-w must be between 0 and the TDP ({} W)",
            hw.tdp.get()
        );
    }
    Ok((hw, net))
}

/// Cost inputs, with the provenance of the grid intensity and the PUE: `--region` (any
/// catalogued country or cloud region; default world) or `--intensity`, and `--pue` (a number or
/// a preset; default local = 1.0), resolved exactly as `amdahl carbon` does.
fn cost_of(a: &Options, c: &Catalogs) -> Result<(CostInputs, GridIntensity, Pue)> {
    let grid = a.grid.resolve(c)?;
    let pue = pue(a.pue.as_deref(), "local", c)?;
    if !(a.tokens > 0.0 && a.tokens.is_finite()) {
        bail!("--tokens must be positive");
    }
    let inputs = CostInputs {
        tokens: a.tokens,
        pue: pue.value,
        intensity: grid.g_per_kwh,
        price_per_device_hour: a.price,
    };
    Ok((inputs, grid, pue))
}

fn precision(p: PrecisionArg) -> Precision {
    match p {
        PrecisionArg::Fp32 => Precision::Fp32,
        PrecisionArg::Bf16 => Precision::Bf16,
        PrecisionArg::Fp8 => Precision::Fp8,
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    let a = *args.opts;
    let c = load(&a.catalogs)?;
    let model = model_of(&a, &c)?;
    let (hw, net) = system_of(&a, &c)?;
    let (inputs, grid, pue) = cost_of(&a, &c)?;
    if a.gpus == 0 {
        bail!("--gpus must be at least 1");
    }
    if a.search {
        return run_search(&a, &model, &hw, &net, inputs, (grid, pue));
    }
    let tp_pp = u64::from(a.tp) * u64::from(a.pp);
    let dp = match a.dp {
        Some(d) => d,
        None if tp_pp > 0 && a.gpus.is_multiple_of(tp_pp) => {
            u32::try_from(a.gpus / tp_pp).map_err(|_| anyhow!("--gpus {} is too large", a.gpus))?
        }
        None if tp_pp > 0 => {
            return Err(PlanError::GpusNotDivisible {
                gpus: a.gpus,
                tp_pp,
                nearest: amdahl_model::plan::error::nearest_multiples(a.gpus, tp_pp),
            }
            .into())
        }
        None => 0,
    };
    let layout = Layout {
        tp: a.tp,
        pp: a.pp,
        dp,
        interleave: a.interleave,
        mbs: a.mbs,
        batch: a.batch,
        recompute: match a.recompute {
            RecomputeArg::None => Recompute::None,
            RecomputeArg::Selective => Recompute::Selective,
            RecomputeArg::Full => Recompute::Full,
        },
        zero: a.zero,
        sp: a.sp,
        precision: precision(a.precision),
        overlap_dp: a.overlap,
        flash_attention: a.flash,
    };
    validate(&model, &hw, &net, &layout, Some(a.gpus))?;
    let e = evaluate(&model, &hw, &net, &layout)?;
    let mut result = PlanResult::new(&model, &hw, &net, &e, &inputs);
    result.grid = Some(grid);
    result.pue_source = Some(pue.source);
    if !result.fits {
        eprintln!(
            "warning: this layout needs {:.1} GiB per device, more than the {:.1} GiB usable \
             (95 % of {:.1} GiB); try --recompute full, --zero 1, --sp, a larger --tp/--pp, or \
             --search",
            e.memory.total.gib(),
            e.memory.capacity.gib() * 0.95,
            e.memory.capacity.gib()
        );
    }
    let text = match a.format.format() {
        Format::Json => amdahl_report::to_json(&result)?,
        Format::Csv => amdahl_report::plan::plan_csv(&result),
        Format::Table => amdahl_report::plan::plan_table(&result),
    };
    print(&text)?;
    if let Some(p) = &a.svg {
        write_file(p, &amdahl_report::plan::plan_svg(&result))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn run_search(
    a: &Options,
    model: &ModelShape,
    hw: &Hardware,
    net: &Network,
    inputs: CostInputs,
    (grid, pue): (GridIntensity, Pue),
) -> Result<ExitCode> {
    let precision = precision(a.precision);
    if hw.peak(precision).is_none() {
        return Err(PlanError::Precision {
            device: hw.name.clone(),
            precision: precision.name(),
        }
        .into());
    }
    validate_model(model)?;
    if a.gpus == 0 || a.batch == 0 || a.search_mbs.contains(&0) || a.gpus_per_node == 0 {
        bail!("--gpus, --gpus-per-node, --batch and --search-mbs must be at least 1");
    }
    if a.top == 0 {
        bail!("--top must be at least 1");
    }
    // --up-to enumerates every node count; a million of them is already far beyond any cluster.
    if a.up_to && a.gpus / u64::from(a.gpus_per_node) > 1_000_000 {
        bail!(
            "--up-to with --gpus {} would enumerate more than a million node counts;              give at most {} GPUs",
            a.gpus,
            1_000_000 * u64::from(a.gpus_per_node)
        );
    }
    let space = SearchSpace {
        gpus: a.gpus,
        up_to: a.up_to,
        max_batch: a.batch,
        microbatches: a.search_mbs.clone(),
        max_interleave: a.max_interleave,
        precisions: vec![precision],
        flash_attention: a.flash,
        objective: match a.objective {
            ObjectiveArg::Time => Objective::Time,
            ObjectiveArg::Energy => Objective::Energy,
            ObjectiveArg::Cost => Objective::Cost,
        },
        top_k: a.top,
        cost: inputs,
    };
    let total = space_size(model, net, &space);
    let progress = AtomicU64::new(0);
    let start = Instant::now();
    let outcome = std::thread::scope(|s| {
        let worker = s.spawn(|| search(model, hw, net, &space, &progress));
        if !a.quiet {
            let bar = indicatif::ProgressBar::with_draw_target(
                Some(total),
                indicatif::ProgressDrawTarget::stderr(),
            );
            while !worker.is_finished() {
                bar.set_position(progress.load(Ordering::Relaxed));
                std::thread::sleep(Duration::from_millis(50));
            }
            bar.finish_and_clear();
        }
        worker.join()
    })
    .map_err(|_| anyhow!("the search thread failed"))?;
    let wall = start.elapsed().as_secs_f64();
    if outcome.fitting == 0 {
        let (need, layout) = outcome
            .leanest
            .map(|l| (l.memory_bytes, l.layout.label()))
            .unwrap_or((f64::NAN, "no valid layout".into()));
        return Err(PlanError::FitsNowhere {
            gpus: a.gpus,
            device: hw.name.clone(),
            need_gib: need / (1024.0 * 1024.0 * 1024.0),
            have_gib: hw.memory.gib() * 0.95,
            layout,
        }
        .into());
    }
    let mut result = SearchResult::new(model, hw, net, &space, &outcome, wall);
    result.grid = Some(grid);
    result.pue_source = Some(pue.source);
    let text = match a.format.format() {
        Format::Json => amdahl_report::to_json(&result)?,
        Format::Csv => amdahl_report::plan::search_csv(&result),
        Format::Table => amdahl_report::plan::search_table(&result),
    };
    print(&text)?;
    if let Some(p) = &a.svg {
        write_file(p, &amdahl_report::plan::search_svg(&result))?;
    }
    Ok(ExitCode::SUCCESS)
}

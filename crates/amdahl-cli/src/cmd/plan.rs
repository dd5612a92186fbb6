//! `amdahl plan`: predict one training layout, or search every layout (`--search`).

use crate::cmd::resolve::{load, pue, GridArgs};
use crate::cmd::shape::{ModelArgs, SystemArgs};
use crate::domain;
use crate::output::{print_result, Format, FormatArgs};
use amdahl_model::carbon::Pue;
use amdahl_model::catalog::grid::GridIntensity;
use amdahl_model::catalog::Catalogs;
use amdahl_model::plan::{
    data_parallel_degree, evaluate, search, space_size, usable, validate, validate_model,
    validation_set, ComputePrecision, CostInputs, ErrorSummary, Hardware, Layout, ModelShape,
    Network, Objective, OptimizerDtype, PlanError, PlanResult, Recompute, RecomputeModule,
    RecomputeModules, SearchOutcome, SearchResult, SearchSpace, Zero3Prefetch, USABLE_FRACTION,
};
use amdahl_model::plan::{Framework, Given};
use amdahl_report::render::Render;
use anyhow::{anyhow, bail, Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Help beside the values of `--recompute-modules` (Megatron-Core's names, plan/recompute.rs).
const RECOMPUTE_MODULE_HELP: &[(&str, &str)] = &[
    (
        "core_attn",
        "Core attention: no s × s scores stored (the default)",
    ),
    (
        "layernorm",
        "Both LayerNorms / RMSNorms: their outputs are recomputed",
    ),
    (
        "mla_up_proj",
        "Multi-head latent attention's up-projections: only the latents are stored",
    ),
    (
        "moe_act",
        "The routed experts' activation function: its output is recomputed",
    ),
    (
        "mlp",
        "The dense MLP of non-MoE layers: only its input is stored",
    ),
];

const PRECISION_HELP: &[(&str, &str)] = &[(
    "fp16",
    "16-bit IEEE half with loss scaling: the 16-bit format of Volta and Turing (no bf16)",
)];

const ZERO3_PREFETCH_HELP: &[(&str, &str)] = &[
    (
        "layer",
        "One unit per layer, the next gathered while this one computes (PyTorch FSDP)",
    ),
    (
        "module",
        "One weight matrix at a time, a blocking fetch and one prefetch in flight (DeepSpeed \
         ZeRO-3 as released in 2021)",
    ),
];

const FRAMEWORK_HELP: &[(&str, &str)] = &[
    (
        "megatron-lm",
        "NVIDIA Megatron-LM: the planner's own defaults",
    ),
    (
        "nemo",
        "NVIDIA NeMo 24.07: DP, TP (with --sp) and pipeline overlaps on",
    ),
    (
        "deepspeed-2021",
        "DeepSpeed (alias deepspeed): ZeRO-3 one matrix at a time, overlap_comm on",
    ),
    (
        "megatron-deepspeed",
        "Megatron on DeepSpeed's engine: bf16 ZeRO-1 under PP all-reduces gradients",
    ),
    (
        "gpt-neox",
        "GPT-NeoX: DeepSpeed's engine, as megatron-deepspeed",
    ),
    (
        "fsdp",
        "PyTorch FSDP (alias metaseq): one ZeRO-3 unit per layer, overlapped",
    ),
    ("meta", "Meta's Llama 3 stack: Megatron-LM's defaults"),
    ("hai-llm", "DeepSeek's HAI-LLM: Megatron-LM's defaults"),
    ("deepspeed", "Alias of deepspeed-2021"),
    ("metaseq", "Alias of fsdp (OPT's training stack)"),
];

/// Predict step time, memory and cost of distributed training; search for the best layout.
/// The options live behind a `Box` so the subcommand enum stays small.
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
    /// Network interfaces per node a data-parallel collective spreads over [default: one per
    /// rank of the group on the node, as NCCL's rings do]; 1 = each rank through its own
    /// interface only.
    #[arg(help_heading = "System", long, value_name = "N", value_parser = domain::count)]
    pub dp_rails: Option<u32>,
    /// Devices in the job (with --search: devices available).
    #[arg(help_heading = "Layout", long, value_parser = domain::natural)]
    pub gpus: u64,
    /// Tensor-parallel size (divides the heads).
    #[arg(help_heading = "Layout", long, default_value_t = 1, value_parser = domain::count)]
    pub tp: u32,
    /// Pipeline-parallel size (at most the layers; uneven splits give the first and last stage
    /// fewer layers).
    #[arg(help_heading = "Layout", long, default_value_t = 1, value_parser = domain::count)]
    pub pp: u32,
    /// Context-parallel size: split each sequence over this many ranks (ring attention; divides
    /// the sequence).
    #[arg(help_heading = "Layout", long, default_value_t = 1, value_parser = domain::count)]
    pub cp: u32,
    /// Data-parallel size; default --gpus / (--tp × --cp × --pp).
    #[arg(help_heading = "Layout", long)]
    pub dp: Option<u32>,
    /// Expert-parallel size (MoE models): the routed experts spread over this many
    /// data-parallel ranks; divides --dp and the experts.
    #[arg(help_heading = "Layout", long, default_value_t = 1, value_parser = domain::count)]
    pub ep: u32,
    /// Overlap the expert-parallel all-to-alls with another microbatch's computation
    /// (DeepSeek-V3's DualPipe).
    #[arg(help_heading = "Layout", long)]
    pub overlap_ep: bool,
    /// Model chunks per pipeline stage (interleaved schedule); 1 = none.
    #[arg(help_heading = "Layout", long, default_value_t = 1, value_parser = domain::count)]
    pub interleave: u32,
    /// Microbatch size (sequences).
    #[arg(help_heading = "Layout", long, default_value_t = 1, value_parser = domain::count)]
    pub mbs: u32,
    /// Global batch in sequences; --search keeps it exactly (DP × mbs must divide it).
    #[arg(help_heading = "Layout", long, required_unless_present = "batch_max", value_parser = domain::count)]
    pub batch: Option<u32>,
    /// Activation recomputation: none, selective (attention only) or full.
    #[arg(
        help_heading = "Layout",
        long,
        value_parser = domain::model_enum::<Recompute>(&Recompute::NAMES, &[]),
        default_value = "selective"
    )]
    pub recompute: Recompute,
    /// With --recompute selective: the parts of each layer to recompute, comma-separated
    /// (Megatron-Core's --recompute-modules; DeepSeek-V3: layernorm,mla_up_proj,moe_act)
    /// [default: core_attn].
    #[arg(
        help_heading = "Layout",
        long,
        value_parser = domain::model_enum::<RecomputeModule>(&RecomputeModule::NAMES, RECOMPUTE_MODULE_HELP),
        value_delimiter = ',',
        conflicts_with = "search"
    )]
    pub recompute_modules: Vec<RecomputeModule>,
    /// ZeRO stage 0–3 (3 = FSDP).
    #[arg(help_heading = "Layout", long, default_value_t = 0)]
    pub zero: u8,
    /// Sequence parallelism (needs --tp > 1).
    #[arg(help_heading = "Layout", long)]
    pub sp: bool,
    /// Overlap data-parallel gradient communication with the backward pass (default: as the
    /// framework's preset sets it; =false turns it off).
    #[arg(help_heading = "Layout", long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub overlap: Option<bool>,
    /// Training precision (mixed precision for bf16, fp16 and fp8; fp16 on devices without bf16).
    #[arg(
        help_heading = "Layout",
        long,
        value_parser = domain::model_enum::<ComputePrecision>(&ComputePrecision::NAMES, PRECISION_HELP),
        default_value = "bf16"
    )]
    pub precision: ComputePrecision,
    /// Overlap the pipeline's sends and receives with the next model chunk's computation
    /// (Megatron-LM overlap_p2p_comm; needs --interleave 2 or more; --search sets it wherever it
    /// interleaves; default: as the framework's preset sets it).
    #[arg(help_heading = "Layout", long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub overlap_pp: Option<bool>,
    /// Fused attention (FlashAttention): no s × s score tensors stored or streamed.
    #[arg(help_heading = "Layout", long)]
    pub flash: bool,
    /// Overlap tensor-parallel communication with the GEMMs (NeMo tp_comm_overlap; needs --sp;
    /// default: as the framework's preset sets it).
    #[arg(help_heading = "Layout", long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub tp_overlap: Option<bool>,
    /// Precision of Adam's moments: fp32 or bf16 (the master weights stay fp32).
    #[arg(
        help_heading = "Layout",
        long,
        value_parser = domain::model_enum::<OptimizerDtype>(&OptimizerDtype::NAMES, &[]),
        default_value = "fp32"
    )]
    pub optimizer_dtype: OptimizerDtype,
    /// Accumulate gradients in fp32 (Megatron's main_grad: 4 bytes per parameter, not 2).
    #[arg(help_heading = "Layout", long)]
    pub fp32_grads: bool,
    /// ZeRO-1 that all-reduces the whole gradient, then all-gathers the updated weights (10 bytes
    /// moved per parameter with fp32 gradients, not 6): DeepSpeed's BF16_Optimizer under
    /// pipeline parallelism (BLOOM). Needs --zero 1 (default: as the framework's preset sets it).
    #[arg(help_heading = "Layout", long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub grad_all_reduce: Option<bool>,
    /// LoRA fine-tuning of rank R: frozen base weights (no weight gradients, no gradients or
    /// optimizer state for them), the backward still through every layer; adapters not counted.
    #[arg(help_heading = "Layout", long, value_name = "R", value_parser = crate::domain::count)]
    pub lora_rank: Option<u32>,
    /// How ZeRO-3 gathers weights ahead of use, which bounds its overlap with --overlap: per
    /// layer (FSDP) or per weight matrix (DeepSpeed ZeRO-3 of 2021); default: as the framework's
    /// preset sets it.
    #[arg(
        help_heading = "Layout",
        long,
        value_parser = domain::model_enum::<Zero3Prefetch>(&Zero3Prefetch::NAMES, ZERO3_PREFETCH_HELP)
    )]
    pub zero3_prefetch: Option<Zero3Prefetch>,
    /// The training software: its preset sets the framework-behaviour knobs not given as flags
    /// (ZeRO-3's gathering unit, ZeRO-1's gradient all-reduce, overlap defaults), from its source
    /// code (docs/methodology.md, "Framework presets"), and picks the validation runs behind the
    /// prediction intervals.
    #[arg(
        help_heading = "Layout",
        long,
        value_parser = domain::model_enum::<Framework>(&Framework::NAMES, FRAMEWORK_HELP),
        default_value = "megatron-lm"
    )]
    pub framework: Framework,

    /// Tokens to train on (time, device-hours, energy, carbon).
    #[arg(help_heading = "Cost", long, default_value_t = 300e9, value_parser = domain::positive)]
    pub tokens: f64,
    #[command(flatten, next_help_heading = "Cost")]
    pub grid: GridArgs,
    /// PUE: a number ≥ 1 or a preset (local, hyperscale, industry) [default: local = 1.0].
    #[arg(help_heading = "Cost", long)]
    pub pue: Option<String>,
    /// Price of one device-hour (any currency) for --objective cost.
    #[arg(help_heading = "Cost", long, value_parser = domain::non_negative)]
    pub price: Option<f64>,

    /// Search every valid layout instead of predicting one.
    #[arg(help_heading = "Search", long)]
    pub search: bool,
    /// What the search ranks by: training time, facility energy or cost (--price).
    #[arg(
        help_heading = "Search",
        long,
        value_parser = domain::model_enum::<Objective>(&Objective::NAMES, &[]),
        default_value = "time"
    )]
    pub objective: Objective,
    /// Layouts to list.
    #[arg(help_heading = "Search", long, default_value_t = 10, value_parser = domain::natural_usize)]
    pub top: usize,
    /// Board power limits to search over, in W, comma-separated (with --search): every layout
    /// is evaluated under each cap (the objective, e.g. --objective energy, picks the best).
    #[arg(help_heading = "Search", long, value_delimiter = ',', value_parser = crate::domain::positive, value_name = "W,W,…")]
    pub search_power_cap: Vec<f64>,
    /// Also consider jobs on fewer devices (every whole number of nodes up to --gpus).
    #[arg(help_heading = "Search", long)]
    pub up_to: bool,
    /// Microbatch sizes the search tries.
    #[arg(
        help_heading = "Search",
        long,
        value_delimiter = ',',
        default_value = "1,2,4,8",
        value_parser = domain::count
    )]
    pub search_mbs: Vec<u32>,
    /// Largest interleaving factor the search tries.
    #[arg(help_heading = "Search", long, default_value_t = 4)]
    pub max_interleave: u32,
    /// Largest context-parallel size the search tries (powers of two dividing the sequence).
    #[arg(help_heading = "Search", long, default_value_t = 1, value_parser = domain::count)]
    pub max_cp: u32,
    /// Let --search train on a smaller batch: each layout takes the largest multiple of DP × mbs
    /// not above this (instead of --batch exactly).
    #[arg(
        help_heading = "Search",
        long,
        conflicts_with = "batch",
        value_name = "B",
        value_parser = domain::count
    )]
    pub batch_max: Option<u32>,

    #[command(flatten, next_help_heading = "Output")]
    pub format: FormatArgs,
    /// Write an SVG plot here.
    #[arg(help_heading = "Output", long)]
    pub svg: Option<PathBuf>,
}

/// Cost inputs, with the provenance of the grid intensity and the PUE: `--region` (any
/// catalogued country or cloud region; default world) or `--intensity`, and `--pue` (a number or
/// a preset; default local = 1.0), resolved exactly as `amdahl carbon` does.
fn cost_of(a: &Options, c: &Catalogs) -> Result<(CostInputs, GridIntensity, Pue)> {
    let grid = a.grid.resolve(c)?;
    let pue = pue(a.pue.as_deref(), c)?;
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

pub fn run(args: Args) -> Result<ExitCode> {
    let a = *args.opts;
    let c = load(&a.sys.catalogs)?;
    let model = a.shape.resolve(&c)?;
    let (hw, mut net) = a.sys.resolve(&c)?;
    net.dp_rails = a.dp_rails;
    let (inputs, grid, pue) = cost_of(&a, &c)?;
    if a.gpus == 0 {
        bail!("--gpus must be at least 1");
    }
    if !a.search && !a.search_power_cap.is_empty() {
        bail!("--search-power-cap applies to --search; add --search, or give one cap with --power-cap");
    }
    if a.search {
        if a.lora_rank.is_some() {
            bail!("--lora-rank plans one layout: the search plans full training; drop --search or --lora-rank");
        }
        return run_search(&a, &model, &hw, &net, inputs, (grid, pue));
    }
    let layout = layout_of(&a)?;
    validate(&model, &hw, &net, &layout, Some(a.gpus))?;
    let e = evaluate(&model, &hw, &net, &layout)?;
    if let Some(cap) = hw.power_cap {
        let free = Hardware {
            power_cap: None,
            ..hw.clone()
        };
        let full = evaluate(&model, &free, &net, &layout)?;
        let compute_share = full.breakdown.compute.get() / full.step_time.get();
        if !hw.cap_is_reachable(&full.activity, compute_share) {
            bail!(
                "--power-cap {:.0} W is below what this step draws at the lowest clock amdahl \
                 models (its memory traffic alone): raise --power-cap",
                cap.get()
            );
        }
    }
    let runs = validation_set().context("the embedded validation set (a bug in amdahl)")?;
    let mut result =
        PlanResult::new(&model, &hw, &net, &e, &inputs).with_intervals(&runs, a.framework);
    if let (Some(cal), Some(iv)) = (a.sys.calibration()?, result.intervals.as_mut()) {
        amdahl_model::calibrate::intervals::apply_to_plan(&cal, iv);
    }
    result.grid = Some(grid);
    result.pue_source = Some(pue.source);
    if !result.fits {
        eprintln!(
            "warning: this layout needs {:.1} GiB per device, more than the {:.1} GiB usable \
             ({:.0} % of {:.1} GiB); try --recompute full, --zero 1, --sp, a larger --tp/--pp, \
             or --search",
            e.memory.total.gib(),
            usable(e.memory.capacity).gib(),
            USABLE_FRACTION * 100.0,
            e.memory.capacity.gib()
        );
    }
    print_result(&result, &result.render(a.format.format())?)?;
    if a.format.format() == Format::Table {
        crate::cmd::shape::note_tuning(&hw);
        note_accuracy();
        crate::cmd::energy_note::note_energy_accuracy();
    }
    if let Some(p) = &a.svg {
        crate::output::write_plot(p, &amdahl_report::plan::plan_svg(&result))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The one layout the flags describe (without `--search`).
fn layout_of(a: &Options) -> Result<Layout> {
    let dp = match a.dp {
        Some(d) => d,
        None => data_parallel_degree(a.gpus, a.tp, a.cp, a.pp)?,
    };
    let mut layout = Layout {
        tp: a.tp,
        pp: a.pp,
        dp,
        interleave: a.interleave,
        mbs: a.mbs,
        batch: a
            .batch
            .context("--batch-max is a --search option; give --batch B for one layout")?,
        recompute: a.recompute,
        zero: a.zero,
        sp: a.sp,
        precision: a.precision,
        overlap_dp: a.overlap.unwrap_or(false),
        flash_attention: a.flash,
        ep: a.ep,
        overlap_ep: a.overlap_ep,
        cp: a.cp,
        tp_overlap: a.tp_overlap.unwrap_or(false),
        optimizer_dtype: a.optimizer_dtype,
        fp32_grads: a.fp32_grads,
        zero3_prefetch: a.zero3_prefetch.unwrap_or_default(),
        overlap_pp: a.overlap_pp.unwrap_or(false),
        grad_all_reduce: a.grad_all_reduce.unwrap_or(false),
        recompute_modules: if a.recompute_modules.is_empty() {
            RecomputeModules::default()
        } else {
            RecomputeModules::new(&a.recompute_modules)
        },
        lora_rank: a.lora_rank,
    };
    a.framework.apply(
        &mut layout,
        Given {
            zero3_prefetch: a.zero3_prefetch.is_some(),
            grad_all_reduce: a.grad_all_reduce.is_some(),
            overlap_dp: a.overlap.is_some(),
            tp_overlap: a.tp_overlap.is_some(),
            overlap_pp: a.overlap_pp.is_some(),
        },
    );
    Ok(layout)
}

/// What `amdahl calibrate` needs of a measured training row typed as `plan …` arguments: the
/// model, the device (with `--device-profile` / `--calibration` applied), the network and the
/// validated layout, exactly as `amdahl plan` would predict them.
pub fn workload(args: Args, c: &Catalogs) -> Result<(ModelShape, Hardware, Network, Layout)> {
    let a = *args.opts;
    if a.search {
        bail!("a measured row is one layout: drop --search");
    }
    let model = a.shape.resolve(c)?;
    let (hw, mut net) = a.sys.resolve(c)?;
    net.dp_rails = a.dp_rails;
    if a.gpus == 0 {
        bail!("--gpus must be at least 1");
    }
    let layout = layout_of(&a)?;
    validate(&model, &hw, &net, &layout, Some(a.gpus))?;
    Ok((model, hw, net, layout))
}

/// The catalogs the row's `--catalog` files name.
pub fn catalog_files(args: &Args) -> &[PathBuf] {
    &args.opts.sys.catalogs
}

fn run_search(
    a: &Options,
    model: &ModelShape,
    hw: &Hardware,
    net: &Network,
    inputs: CostInputs,
    (grid, pue): (GridIntensity, Pue),
) -> Result<ExitCode> {
    let space = search_space(a, model, hw, inputs)?;
    // Every layout of the search spans --gpus (with --up-to, up to it).
    net.check_span(&hw.name, a.gpus, format!("--gpus {}", a.gpus))?;
    let start = Instant::now();
    let outcome = search_with_progress(model, hw, net, &space)?;
    let wall = start.elapsed().as_secs_f64();
    if outcome.fitting == 0 {
        return Err(fits_nowhere(a, hw, &outcome));
    }
    let runs = validation_set().context("the embedded validation set (a bug in amdahl)")?;
    let mut result = SearchResult::new(model, hw, net, &space, &outcome, wall)
        .with_intervals(&runs, a.framework);
    if let Some(cal) = a.sys.calibration()? {
        for iv in result.top.iter_mut().filter_map(|l| l.intervals.as_mut()) {
            amdahl_model::calibrate::intervals::apply_to_plan(&cal, iv);
        }
    }
    result.grid = Some(grid);
    result.pue_source = Some(pue.source);
    print_result(&result, &result.render(a.format.format())?)?;
    if a.format.format() == Format::Table {
        crate::cmd::shape::note_tuning(hw);
        note_accuracy();
        crate::cmd::energy_note::note_energy_accuracy();
    }
    if let Some(p) = &a.svg {
        crate::output::write_plot(p, &amdahl_report::plan::search_svg(&result))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The layouts `--search` enumerates, after checking that the flags bound a search that can
/// run: checked here, before the worker thread starts, so a mistake is an error, not an empty
/// result.
fn search_space(
    a: &Options,
    model: &ModelShape,
    hw: &Hardware,
    inputs: CostInputs,
) -> Result<SearchSpace> {
    let precision = a.precision;
    if hw.peak(precision).is_none() {
        return Err(PlanError::Precision {
            device: hw.name.clone(),
            precision: precision.name(),
        }
        .into());
    }
    validate_model(model)?;
    let (max_batch, exact_batch) = search_batch(a)?;
    if a.top == 0 {
        bail!("--top must be at least 1");
    }
    // --up-to enumerates every node count; a million of them is already far beyond any cluster.
    if a.up_to && a.gpus / u64::from(a.sys.gpus_per_node) > 1_000_000 {
        bail!(
            "--up-to with --gpus {} would enumerate more than a million node counts; give at \
             most {} GPUs",
            a.gpus,
            1_000_000 * u64::from(a.sys.gpus_per_node)
        );
    }
    Ok(SearchSpace {
        gpus: a.gpus,
        up_to: a.up_to,
        max_batch,
        exact_batch,
        microbatches: a.search_mbs.clone(),
        max_interleave: a.max_interleave,
        precisions: vec![precision],
        flash_attention: a.flash,
        framework: a.framework,
        max_cp: a.max_cp,
        objective: a.objective,
        top_k: a.top,
        cost: inputs,
        power_caps: crate::cmd::shape::search_caps(hw, &a.search_power_cap)?,
    })
}

/// The largest batch the search may use and whether it must be exactly that one.
fn search_batch(a: &Options) -> Result<(u32, bool)> {
    // The user's batch is kept exactly unless --batch-max allows a smaller one (a reader asked
    // for 2,520, the search listed B2516, B1424 and B2112 without a word).
    let (max_batch, exact_batch) = match (a.batch, a.batch_max) {
        (Some(b), None) => (b, true),
        (None, Some(m)) => (m, false),
        _ => bail!("give --batch B (kept exactly) or --batch-max B (the largest allowed)"),
    };
    if a.gpus == 0 || max_batch == 0 || a.search_mbs.contains(&0) || a.sys.gpus_per_node == 0 {
        bail!("--gpus, --gpus-per-node, --batch/--batch-max and --search-mbs must be at least 1");
    }
    Ok((max_batch, exact_batch))
}

/// The error of a search in which no layout fits: the leanest layout's memory against what a
/// device has, or, when there was no valid layout at all, what to change (there is no memory
/// figure to quote, and "needs NaN GiB" would say nothing).
fn fits_nowhere(a: &Options, hw: &Hardware, outcome: &SearchOutcome) -> anyhow::Error {
    let Some((need, layout)) = outcome
        .leanest
        .as_ref()
        .map(|l| (l.memory_bytes, l.layout.label()))
    else {
        return anyhow!(
            "no layout of {} {} is valid for --batch {} with --search-mbs {}: a micro-batch \
             must fit in each data-parallel group's share of the batch; give smaller \
             --search-mbs or a larger --batch",
            a.gpus,
            hw.name,
            a.batch.or(a.batch_max).unwrap_or_default(),
            a.search_mbs
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
    };
    PlanError::FitsNowhere {
        gpus: a.gpus,
        device: hw.name.clone(),
        need_gib: need / (1024.0 * 1024.0 * 1024.0),
        have_gib: usable(hw.memory).gib(),
        layout,
    }
    .into()
}

/// The search on a worker thread, with a progress bar over its layouts × caps (unless
/// `--quiet`).
fn search_with_progress(
    model: &ModelShape,
    hw: &Hardware,
    net: &Network,
    space: &SearchSpace,
) -> Result<SearchOutcome> {
    let total = space_size(model, net, space) * space.power_caps.len().max(1) as u64;
    let progress = AtomicU64::new(0);
    std::thread::scope(|s| {
        let worker = s.spawn(|| search(model, hw, net, space, &progress));
        if !crate::output::quiet() {
            let bar = crate::output::progress_bar(Some(total));
            while !worker.is_finished() {
                bar.set_position(progress.load(Ordering::Relaxed));
                std::thread::sleep(Duration::from_millis(50));
            }
            bar.finish_and_clear();
        }
        worker.join()
    })
    .map_err(|_| anyhow!("the search thread failed"))
}

/// One line under a table on how far its numbers can be trusted: the planner at hand predicts
/// the published validation runs (`amdahl catalog validation`, a few milliseconds), so the
/// figures quoted are never stale. Silenced by `--quiet`; JSON and CSV carry no note.
fn note_accuracy() {
    if crate::output::quiet() {
        return;
    }
    let Ok(runs) = validation_set() else {
        return; // `amdahl catalog validation` reports a broken row; a plan is no place for it.
    };
    let modelled = ErrorSummary::of("modelled", runs.iter().filter(|r| r.modelled));
    let others: Vec<f64> = runs
        .iter()
        .filter(|r| !r.modelled)
        .map(|r| r.error)
        .collect();
    let range = match (
        others.iter().copied().reduce(f64::min),
        others.iter().copied().reduce(f64::max),
    ) {
        (Some(lo), Some(hi)) => format!(
            "; on {} runs of other software {:+.1} … {:+.1} %",
            others.len(),
            100.0 * lo,
            100.0 * hi
        ),
        _ => String::new(),
    };
    crate::output::note(&format!(
        "accuracy: on {} published runs of the software it models ({}) the planner's mean \
         |error| is {:.1} %, worst {:+.1} %{range} (+: predicted faster than measured); `amdahl \
         catalog validation` lists them",
        modelled.runs,
        amdahl_model::plan::validation::MODELLED.join(", "),
        100.0 * modelled.mean_abs,
        100.0 * modelled.worst_error,
    ));
}

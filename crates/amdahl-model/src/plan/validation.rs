//! The planner's validation set: published training runs with their exact layouts, typed in
//! from the papers with the source of every number (data/validation/train.csv, whose header
//! explains the columns and the error's sign), each predicted and set beside its published
//! figure. `amdahl catalog validation` prints it; the tests at the end hold the errors reached.

use super::framework::{Framework, Given};
use super::hardware::{system, ComputePrecision, Hardware, Network, Overrides};
use super::optimizer::OptimizerDtype;
use super::perf::{estimate, Breakdown, Estimate};
use super::recompute::{RecomputeModule, RecomputeModules};
use super::shape::{catalog_model, ModelShape};
use super::spec::{Layout, Recompute, Zero3Prefetch};
use super::validate::validate;
use serde::{Deserialize, Serialize};

/// The validation set as committed (embedded: no file is read at run time).
const TRAIN_CSV: &str = include_str!("../../../../data/validation/train.csv");

/// The planner's accuracy targets for the whole set: mean |error| at most 5 %, no run beyond 12 %.
pub const TARGET_MEAN: f64 = 0.05;
pub const TARGET_WORST: f64 = 0.12;

/// Frameworks whose kernels and schedules the planner models: Megatron-LM (its GEMM curve,
/// element-wise traffic and pipeline schedules are taken from the Megatron papers), NVIDIA NeMo
/// (Megatron-Core with Transformer Engine) and Meta's Llama 3 stack (Megatron-style 4D
/// parallelism, Dubey et al. 2024 §3.3.2).
pub const MODELLED: [&str; 3] = ["megatron-lm", "meta", "nemo"];

/// One row of train.csv, as typed in.
#[derive(Debug, Deserialize)]
struct Row {
    name: String,
    layers: u32,
    hidden: u32,
    heads: u32,
    kv_heads: u32,
    ffn: u32,
    vocab: u32,
    seq: u32,
    gated: bool,
    tied: bool,
    parallel_block: bool,
    device: String,
    inter_gbit: Option<f64>,
    gpus: u64,
    tp: u32,
    cp: u32,
    pp: u32,
    dp: u32,
    interleave: String,
    mbs: u32,
    batch: u32,
    recompute: String,
    sp: bool,
    zero: u8,
    precision: String,
    flash: bool,
    overlap_dp: bool,
    tp_overlap: String,
    fp32_grads: bool,
    catalog: String,
    ep: u32,
    overlap_ep: bool,
    recompute_modules: String,
    optimizer_dtype: String,
    overlap_pp: bool,
    /// Knobs inferred from the row's own result (`knob=value;…`): reported apart, never claimed.
    inferred: String,
    metric: String,
    published: f64,
    framework: String,
    source: String,
}

/// One published run and the planner's prediction of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ValidationRun {
    /// The row's name in data/validation/train.csv.
    pub name: String,
    /// The training software that ran it.
    pub framework: String,
    /// Whether the planner models that framework's kernels and schedules ([`MODELLED`]).
    pub modelled: bool,
    /// Catalogued device.
    pub device: String,
    /// Its microarchitecture (the catalog's `arch`: Volta, Ampere, Hopper, …): the interval class.
    #[serde(default)]
    pub arch: String,
    /// Training precision as typed (bf16, fp16, fp8, …).
    #[serde(default)]
    pub precision: String,
    pub gpus: u64,
    /// The layout predicted: the published one; a knob the paper does not publish takes the
    /// fastest choice that fits (a tuned production run).
    pub layout: String,
    /// What the source reports: `hw_tflops` (executed TFLOP/s per GPU, recomputation counted),
    /// `model_tflops`, `tokens_gpu_s` (tokens/s per GPU) or `step_s` (seconds per iteration).
    pub metric: String,
    pub published: f64,
    /// The prediction in the same metric.
    pub predicted: f64,
    /// Predicted throughput / published − 1: positive when the planner is optimistic.
    pub error: f64,
    /// The published figure as seconds per iteration.
    pub published_step_s: f64,
    pub predicted_step_s: f64,
    /// Network interfaces per node its data-parallel collectives use, where the row sets them
    /// (`None`: one per rank of the group on the node, as NCCL's rings do). Rows are predicted as
    /// typed, so this is `None` unless a published figure sets it.
    #[serde(default)]
    pub dp_rails: Option<u32>,
    /// Knobs not published but inferred from the row's own result (`dp_rails=1`), empty if none:
    /// `error` is without them (what a user typing the published layout gets).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub inferred: String,
    /// The error with the inferred knobs applied: reported apart, outside every claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_with_inferred: Option<f64>,
    /// Where the predicted iteration goes.
    pub breakdown: Breakdown,
    pub memory_gib: f64,
    /// The layout fits in the device's memory (every published run should).
    pub fits: bool,
    /// Where every number of the row comes from.
    pub source: String,
}

/// A broken row of the embedded set: a bug in amdahl, reported instead of a panic.
#[derive(Debug, thiserror::Error)]
#[error("data/validation/train.csv, run `{run}`: {what}")]
pub struct ValidationSetError {
    pub run: String,
    pub what: String,
}

fn bad(run: &str, what: impl std::fmt::Display) -> ValidationSetError {
    ValidationSetError {
        run: run.to_string(),
        what: what.to_string(),
    }
}

fn rows() -> Result<Vec<Row>, ValidationSetError> {
    let mut r = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .from_reader(TRAIN_CSV.as_bytes());
    r.deserialize()
        .enumerate()
        .map(|(i, row)| row.map_err(|e| bad(&format!("row {}", i + 1), e)))
        .collect()
}

/// Every run of the set, predicted.
pub fn validation_set() -> Result<Vec<ValidationRun>, ValidationSetError> {
    rows()?.iter().map(predict).collect()
}

/// The run called `name` (case-insensitive), or an error naming the nearest runs.
pub fn find<'a>(
    runs: &'a [ValidationRun],
    name: &str,
) -> Result<&'a ValidationRun, crate::catalog::CatalogError> {
    runs.iter()
        .find(|r| r.name.eq_ignore_ascii_case(name.trim()))
        .ok_or_else(|| crate::catalog::CatalogError::Unknown {
            kind: "validation run",
            name: name.into(),
            suggestions: crate::catalog::suggest::nearest(
                name,
                runs.iter().map(|r| r.name.as_str()),
            ),
        })
}

/// A published choice, or every choice when the paper does not publish it (`auto`).
fn choices<T: Copy>(
    field: &str,
    run: &str,
    all: &[T],
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Vec<T>, ValidationSetError> {
    if field == "auto" {
        return Ok(all.to_vec());
    }
    parse(field)
        .map(|v| vec![v])
        .ok_or_else(|| bad(run, format!("cannot read `{field}`")))
}

fn model_of(run: &Row) -> Result<ModelShape, ValidationSetError> {
    // Built through serde so that shape fields other helpers add (with serde defaults) apply.
    let shape = serde_json::json!({
        "name": run.name, "layers": run.layers, "hidden": run.hidden, "heads": run.heads,
        "kv_heads": run.kv_heads, "ffn": run.ffn, "vocab": run.vocab, "seq": run.seq,
        "gated_mlp": run.gated, "tied_embeddings": run.tied, "parallel_block": run.parallel_block,
    });
    if run.catalog.is_empty() {
        return serde_json::from_value(shape).map_err(|e| bad(&run.name, e));
    }
    // MoE and latent attention from the catalog; the row's shape columns must agree.
    let m = catalog_model(&run.catalog).map_err(|e| bad(&run.name, e))?;
    let have = serde_json::to_value(&m).unwrap_or_default();
    for (k, v) in shape.as_object().into_iter().flatten() {
        if k != "name" && k != "seq" && &have[k] != v {
            return Err(bad(
                &run.name,
                format!(
                    "column {k} is {v}, the catalog's {} has {}",
                    run.catalog, have[k]
                ),
            ));
        }
    }
    Ok(ModelShape { seq: run.seq, ..m })
}

/// The layout choices of one row: the published ones, and every candidate for those the paper
/// does not publish (`auto`).
struct Knobs {
    precision: ComputePrecision,
    recomputes: Vec<Recompute>,
    interleaves: Vec<u32>,
    tp_overlaps: Vec<bool>,
    framework: Framework,
    recompute_modules: RecomputeModules,
    optimizer_dtype: OptimizerDtype,
}

fn knobs(run: &Row) -> Result<Knobs, ValidationSetError> {
    let name = run.name.as_str();
    let precision = ComputePrecision::parse(&run.precision)
        .ok_or_else(|| bad(name, format!("precision `{}`", run.precision)))?;
    let recomputes = choices(&run.recompute, name, &Recompute::ALL, Recompute::parse)?;
    let interleaves = choices(&run.interleave, name, &[1, 2, 3, 4, 5, 6, 7, 8], |v| {
        v.parse().ok()
    })?;
    let tp_overlaps = choices(&run.tp_overlap, name, &[false, true], |v| v.parse().ok())?;
    let framework = Framework::parse(&run.framework)
        .ok_or_else(|| bad(name, format!("framework `{}` has no preset", run.framework)))?;
    let recompute_modules = if run.recompute_modules.is_empty() {
        RecomputeModules::default()
    } else {
        let modules = run
            .recompute_modules
            .split(';')
            .map(|n| {
                RecomputeModule::parse(n)
                    .ok_or_else(|| bad(name, format!("recompute module `{n}`")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        RecomputeModules::new(&modules)
    };
    let optimizer_dtype = match run.optimizer_dtype.as_str() {
        "fp32" => OptimizerDtype::Fp32,
        "bf16" => OptimizerDtype::Bf16,
        v => return Err(bad(name, format!("optimizer_dtype `{v}`"))),
    };
    Ok(Knobs {
        precision,
        recomputes,
        interleaves,
        tp_overlaps,
        framework,
        recompute_modules,
        optimizer_dtype,
    })
}

/// The fastest valid layout among the row's choices. Published runs are judged on the
/// published choice even when it does not fit; among unpublished choices only fitting ones
/// compete.
fn best_estimate(
    run: &Row,
    model: &ModelShape,
    (hw, net): (&Hardware, &Network),
    k: &Knobs,
) -> Result<Estimate, ValidationSetError> {
    let single = k.recomputes.len() * k.interleaves.len() * k.tp_overlaps.len() == 1;
    let mut best: Option<Estimate> = None;
    let mut last_err = None;
    for &recompute in &k.recomputes {
        for &interleave in &k.interleaves {
            for &tp_overlap in &k.tp_overlaps {
                let mut layout = Layout {
                    tp: run.tp,
                    cp: run.cp,
                    pp: run.pp,
                    dp: run.dp,
                    interleave,
                    mbs: run.mbs,
                    batch: run.batch,
                    recompute,
                    sp: run.sp,
                    zero: run.zero,
                    precision: k.precision,
                    flash_attention: run.flash,
                    overlap_dp: run.overlap_dp,
                    tp_overlap,
                    fp32_grads: run.fp32_grads,
                    zero3_prefetch: Zero3Prefetch::default(),
                    ep: run.ep,
                    overlap_ep: run.overlap_ep,
                    recompute_modules: k.recompute_modules,
                    optimizer_dtype: k.optimizer_dtype,
                    overlap_pp: run.overlap_pp,
                    grad_all_reduce: false,
                    lora_rank: None,
                };
                // The framework's preset sets its behaviour; the published overlaps stay as typed.
                k.framework.apply(
                    &mut layout,
                    Given {
                        overlap_dp: true,
                        tp_overlap: true,
                        overlap_pp: true,
                        ..Given::default()
                    },
                );
                if let Err(e) = validate(model, hw, net, &layout, Some(run.gpus)) {
                    last_err = Some(e);
                    continue;
                }
                let e = estimate(model, hw, net, &layout);
                if (single || e.memory.fits)
                    && best.is_none_or(|b| e.step_time.get() < b.step_time.get())
                {
                    best = Some(e);
                }
            }
        }
    }
    best.ok_or_else(|| match last_err {
        Some(err) => bad(&run.name, err),
        None => bad(&run.name, "no choice of its unpublished knobs fits"),
    })
}

/// The row's metric as predicted, and the published figure as a step time. Throughput ∝
/// 1/step: every metric gets the same sign (positive = optimistic).
fn predicted_metric(run: &Row, e: &Estimate) -> Result<(f64, f64), ValidationSetError> {
    let gpus = e.gpus as f64;
    Ok(match run.metric.as_str() {
        "hw_tflops" => (
            e.tflops_per_gpu,
            e.executed_flops.get() / (run.published * 1e12 * gpus),
        ),
        "model_tflops" => (
            e.model_tflops_per_gpu,
            e.model_flops.get() / (run.published * 1e12 * gpus),
        ),
        "tokens_gpu_s" => (
            e.tokens_per_s / gpus,
            f64::from(run.batch) * f64::from(run.seq) / (run.published * gpus),
        ),
        "step_s" => (e.step_time.get(), run.published),
        other => return Err(bad(&run.name, format!("unknown metric `{other}`"))),
    })
}

/// The knobs of a row's `inferred` column (`dp_rails=1;…`) on its network.
fn with_inferred(run: &Row, net: &Network) -> Result<Network, ValidationSetError> {
    let mut net = *net;
    for kv in run.inferred.split(';').filter(|kv| !kv.trim().is_empty()) {
        match kv.trim().split_once('=') {
            Some(("dp_rails", v)) => {
                net.dp_rails = Some(
                    v.parse()
                        .map_err(|_| bad(&run.name, format!("inferred `{kv}`")))?,
                );
            }
            _ => return Err(bad(&run.name, format!("inferred knob `{kv}` unknown"))),
        }
    }
    Ok(net)
}

/// The signed error of a prediction (positive = optimistic), whatever the metric.
fn signed_error(run: &Row, predicted: f64, step: f64) -> f64 {
    if run.metric == "step_s" {
        run.published / step - 1.0
    } else {
        predicted / run.published - 1.0
    }
}

/// One run's prediction, as a user types it: the published layout, its framework's preset and
/// the defaults elsewhere. Knobs the paper does not publish (`auto`) take the fastest value that
/// fits (a production run is tuned); knobs inferred from the row's own result (`inferred`) are
/// applied only to the separate `error_with_inferred`.
fn predict(run: &Row) -> Result<ValidationRun, ValidationSetError> {
    let name = run.name.as_str();
    let model = model_of(run)?;
    let device = crate::catalog::devices::lookup(&run.device).map_err(|e| bad(name, e))?;
    let (hw, net) =
        system(device, &Overrides::default(), run.inter_gbit).map_err(|e| bad(name, e))?;
    let k = knobs(run)?;
    let e = best_estimate(run, &model, (&hw, &net), &k)?;
    let step = e.step_time.get();
    let (predicted, published_step) = predicted_metric(run, &e)?;
    let error_with_inferred = if run.inferred.trim().is_empty() {
        None
    } else {
        let inferred_net = with_inferred(run, &net)?;
        let e = best_estimate(run, &model, (&hw, &inferred_net), &k)?;
        let (p, _) = predicted_metric(run, &e)?;
        Some(signed_error(run, p, e.step_time.get()))
    };
    if run.source.trim().is_empty() {
        return Err(bad(name, "no source"));
    }
    Ok(ValidationRun {
        name: run.name.clone(),
        framework: run.framework.clone(),
        modelled: MODELLED.contains(&run.framework.as_str()),
        device: device.name.clone(),
        arch: hw.arch.clone(),
        precision: k.precision.name().to_string(),
        gpus: e.gpus,
        layout: e.layout.label(),
        metric: run.metric.clone(),
        published: run.published,
        predicted,
        error: signed_error(run, predicted, step),
        published_step_s: published_step,
        predicted_step_s: step,
        dp_rails: net.dp_rails,
        inferred: run.inferred.trim().to_string(),
        error_with_inferred,
        breakdown: e.breakdown,
        memory_gib: e.memory.total.gib(),
        fits: e.memory.fits,
        source: run.source.clone(),
    })
}

/// Mean and worst |error| of a group of runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorSummary {
    /// A framework, `modelled frameworks` or `all`.
    pub group: String,
    pub runs: usize,
    pub mean_abs: f64,
    pub signed_mean: f64,
    /// The run with the largest |error| and its error.
    pub worst: String,
    pub worst_error: f64,
    /// Runs beyond [`TARGET_WORST`].
    pub beyond_target: usize,
}

impl ErrorSummary {
    pub fn of<'a>(group: &str, runs: impl IntoIterator<Item = &'a ValidationRun>) -> Self {
        let runs: Vec<_> = runs.into_iter().collect();
        let n = runs.len().max(1) as f64;
        let worst = runs
            .iter()
            .max_by(|a, b| a.error.abs().total_cmp(&b.error.abs()));
        ErrorSummary {
            group: group.to_string(),
            runs: runs.len(),
            mean_abs: runs.iter().map(|r| r.error.abs()).sum::<f64>() / n,
            signed_mean: runs.iter().map(|r| r.error).sum::<f64>() / n,
            worst: worst.map_or_else(String::new, |r| r.name.clone()),
            worst_error: worst.map_or(0.0, |r| r.error),
            beyond_target: runs.iter().filter(|r| r.error.abs() > TARGET_WORST).count(),
        }
    }

    /// Whether the group meets the accuracy targets ([`TARGET_MEAN`], [`TARGET_WORST`]).
    pub fn meets_targets(&self) -> bool {
        self.mean_abs <= TARGET_MEAN && self.beyond_target == 0
    }
}

/// Per framework (alphabetical), then the modelled frameworks, then all runs.
pub fn summarise(runs: &[ValidationRun]) -> Vec<ErrorSummary> {
    let mut frameworks: Vec<&str> = runs.iter().map(|r| r.framework.as_str()).collect();
    frameworks.sort_unstable();
    frameworks.dedup();
    let mut out: Vec<_> = frameworks
        .iter()
        .map(|fw| ErrorSummary::of(fw, runs.iter().filter(|r| r.framework == *fw)))
        .collect();
    out.push(ErrorSummary::of(
        "modelled frameworks",
        runs.iter().filter(|r| r.modelled),
    ));
    out.push(ErrorSummary::of("all", runs));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The accuracy targets ask for mean |error| ≤ 5 % and none worse than 12 % over the whole set.
    /// The runs of the frameworks the planner models ([`MODELLED`]) meet both: 50 runs, mean 4.9 %,
    /// worst Korthikanti's 530B with full recomputation at −10.4 %. The whole set does not
    /// (docs/methodology.md "Validation against published runs"), so the test holds what is reached
    /// there, to catch regressions. Every run is predicted as a user types it (published layout,
    /// its framework's preset, defaults elsewhere): all 63 runs, mean 21.1 %, worst +306 % (SC21's
    /// DeepSpeed ZeRO-3 on 1,536 GPUs); MT-NLG (Megatron-DeepSpeed), OPT (Metaseq) and GPT-NeoX
    /// are predicted 13–31 % faster than they ran, BLOOM 11 %. Until the rows were typed as a user
    /// types them (the SC21 ZeRO-3 rows carried `dp_rails` 1, inferred from their own step
    /// times), the whole set's mean was 6.6 %, worst +31 %.
    const ALL_MEAN: f64 = 0.212;
    const ALL_WORST: f64 = 3.07;
    /// SC21 Table 2's ZeRO-3 rows (DeepSpeed 2021) as typed: the ZeRO-3 model of
    /// docs/methodology.md ("ZeRO-3: gathers, latency and overlap") with eight network interfaces
    /// per node, the catalog's DGX A100, is +43 % to +306 % optimistic (mean 159.5 %): the rows
    /// ran as if through one interface. With the inferred `dp_rails=1`, reported apart: mean
    /// 7.5 %, worst −14.6 % (530B on 1,120 GPUs), the figures held before presets.
    const DEEPSPEED_TYPED_MEAN: f64 = 1.60;
    const DEEPSPEED_TYPED_WORST: f64 = 3.07;
    const DEEPSPEED_INFERRED_MEAN: f64 = 0.08;
    const DEEPSPEED_INFERRED_WORST: f64 = 0.15;

    fn set() -> Vec<ValidationRun> {
        validation_set().unwrap_or_else(|e| panic!("{e}"))
    }

    /// The set as a table, for failure messages and `--nocapture`.
    fn report(runs: &[ValidationRun], summaries: &[ErrorSummary]) -> String {
        let mut s = String::from(
            "run                          predicted  published  error   mem GiB  fits  layout\n",
        );
        for r in runs {
            s.push_str(&format!(
                "{:<28} {:9.2} {:10.2} {:+6.1} % {:7.1}  {}  {}\n",
                r.name,
                r.predicted,
                r.published,
                100.0 * r.error,
                r.memory_gib,
                r.fits,
                r.layout
            ));
        }
        s.push_str(
            "\nstep time, seconds: published, predicted, and the prediction's parts (exposed)\n\
             run                          published predicted compute memory tp+cp+ep   pp      dp bubble  opt+\n",
        );
        for r in runs {
            let b = r.breakdown;
            s.push_str(&format!(
                "{:<28} {:8.2} {:8.2} {:7.2} {:6.2} {:6.2} {:5.2} {:7.2} {:6.2} {:5.2}\n",
                r.name,
                r.published_step_s,
                r.predicted_step_s,
                b.compute.get(),
                b.memory_bound.get(),
                (b.tp_comm + b.cp_comm + b.ep_comm).get(),
                b.pp_comm.get(),
                b.dp_comm.get(),
                b.bubble.get(),
                (b.optimizer + b.other).get(),
            ));
        }
        s.push('\n');
        for g in summaries {
            s.push_str(&format!(
                "{:<20} {:2} runs: mean |error| {:4.1} %, signed mean {:+5.1} %, worst {} {:+.1} %\n",
                g.group,
                g.runs,
                100.0 * g.mean_abs,
                100.0 * g.signed_mean,
                g.worst,
                100.0 * g.worst_error,
            ));
        }
        s
    }

    fn group<'a>(summaries: &'a [ErrorSummary], name: &str) -> &'a ErrorSummary {
        summaries
            .iter()
            .find(|g| g.group == name)
            .unwrap_or_else(|| panic!("no group {name}"))
    }

    #[test]
    fn published_runs_within_targets_and_fit() {
        let runs = set();
        assert!(runs.len() >= 40, "the set has {} runs", runs.len());
        let summaries = summarise(&runs);
        let report = report(&runs, &summaries);
        eprintln!("{report}");
        let refused: Vec<_> = runs.iter().filter(|r| !r.fits).map(|r| &r.name).collect();
        assert!(
            refused.is_empty(),
            "published runs reported as not fitting: {refused:?}\n{report}"
        );
        let modelled = group(&summaries, "modelled frameworks");
        assert_eq!(modelled.runs, 50, "{report}");
        assert!(modelled.meets_targets(), "{report}");
        let deepspeed = group(&summaries, "deepspeed");
        assert_eq!(deepspeed.runs, 6, "{report}");
        assert!(deepspeed.mean_abs <= DEEPSPEED_TYPED_MEAN, "{report}");
        assert!(
            deepspeed.worst_error.abs() <= DEEPSPEED_TYPED_WORST,
            "{report}"
        );
        assert!(
            deepspeed.signed_mean > 0.4,
            "as typed the rows are optimistic\n{report}"
        );
        // The inferred knob is reported apart: the rows' errors with it.
        let inferred: Vec<f64> = runs.iter().filter_map(|r| r.error_with_inferred).collect();
        assert_eq!(inferred.len(), 6, "{report}");
        assert!(runs
            .iter()
            .filter(|r| r.error_with_inferred.is_some())
            .all(|r| r.framework == "deepspeed" && r.inferred == "dp_rails=1"));
        let mean = inferred.iter().map(|e| e.abs()).sum::<f64>() / 6.0;
        eprintln!("deepspeed with dp_rails=1: {inferred:?}, mean |error| {mean}");
        assert!(mean <= DEEPSPEED_INFERRED_MEAN, "{inferred:?}");
        assert!(
            inferred.iter().all(|e| e.abs() <= DEEPSPEED_INFERRED_WORST),
            "{inferred:?}"
        );
        let all = group(&summaries, "all");
        assert_eq!(all.runs, runs.len());
        assert!(all.mean_abs <= ALL_MEAN, "{report}");
        assert!(all.worst_error.abs() <= ALL_WORST, "{report}");
        // Not met over the whole set (above): the summary must say so rather than pass it.
        assert!(!all.meets_targets());
    }

    #[test]
    fn errors_have_the_throughput_sign_in_every_metric() {
        // A run predicted faster than published has a positive error whatever its metric:
        // for throughputs predicted / published − 1, for step times published / predicted − 1.
        for r in set() {
            let by_step = r.published_step_s / r.predicted_step_s - 1.0;
            assert!(
                (r.error - by_step).abs() < 1e-9,
                "{}: {} vs {by_step}",
                r.name,
                r.error
            );
            assert_eq!(r.modelled, MODELLED.contains(&r.framework.as_str()));
        }
    }

    #[test]
    fn summaries_count_means_and_the_worst_run() {
        let run = |name: &str, framework: &str, error: f64| ValidationRun {
            name: name.into(),
            framework: framework.into(),
            modelled: MODELLED.contains(&framework),
            device: String::new(),
            arch: String::new(),
            precision: String::new(),
            gpus: 1,
            layout: String::new(),
            metric: "step_s".into(),
            published: 1.0,
            predicted: 1.0,
            error,
            published_step_s: 1.0,
            predicted_step_s: 1.0,
            dp_rails: None,
            inferred: String::new(),
            error_with_inferred: None,
            breakdown: Breakdown::default(),
            memory_gib: 1.0,
            fits: true,
            source: "test".into(),
        };
        let runs = [
            run("a", "nemo", 0.02),
            run("b", "nemo", -0.04),
            run("c", "metaseq", 0.20),
        ];
        let s = summarise(&runs);
        let names: Vec<_> = s.iter().map(|g| g.group.as_str()).collect();
        assert_eq!(names, ["metaseq", "nemo", "modelled frameworks", "all"]);
        let nemo = &s[1];
        assert!((nemo.mean_abs - 0.03).abs() < 1e-12 && (nemo.signed_mean + 0.01).abs() < 1e-12);
        assert_eq!((nemo.worst.as_str(), nemo.beyond_target), ("b", 0));
        assert!(nemo.meets_targets());
        let all = &s[3];
        assert_eq!(
            (all.runs, all.worst.as_str(), all.beyond_target),
            (3, "c", 1)
        );
        assert!((all.mean_abs - 0.26 / 3.0).abs() < 1e-12);
        assert!(!all.meets_targets());
    }

    #[test]
    fn runs_are_found_by_name_and_unknown_names_get_the_nearest() {
        let runs = set();
        assert_eq!(
            find(&runs, "NEMO2407-GPT3-20B").map(|r| r.gpus).ok(),
            Some(64)
        );
        let e = find(&runs, "nemo2407-gpt3-20").err().map(|e| e.to_string());
        let e = e.unwrap_or_default();
        assert!(
            e.contains("unknown validation run `nemo2407-gpt3-20`")
                && e.contains("did you mean nemo2407-gpt3-20b")
                && e.contains("`amdahl catalog validation`"),
            "{e}"
        );
    }

    #[test]
    fn llama3_405b_table4_within_10_percent_with_126_layers() {
        // Dubey et al. 2024, Table 4: 430 TFLOP/s on 8,192 H100 (DP 64), 400 on 16,384 (DP 128),
        // both TP 8 PP 16 with 126 layers on 16 stages (§3.3.2).
        let rows = rows().unwrap_or_else(|e| panic!("{e}"));
        let llama: Vec<_> = rows
            .iter()
            .filter(|r| r.name.starts_with("llama3-405b-8k"))
            .collect();
        assert_eq!(llama.len(), 2);
        for row in llama {
            assert_eq!((row.layers, row.pp), (126, 16));
            let r = predict(row).unwrap_or_else(|e| panic!("{e}"));
            assert!(r.fits, "{}", r.name);
            assert!(
                r.error.abs() < 0.10,
                "{}: {:.0} vs {}",
                r.name,
                r.predicted,
                r.published
            );
        }
    }

    #[test]
    fn mt_nlg_530b_flop_formula_within_1_percent() {
        // Smith et al. 2022 (MT-NLG), §3.3: 60.1 / 50.2 / 44.4 s per iteration on 280 / 350 /
        // 420 DGX A100 nodes (2240 / 2800 / 3360 GPUs), batch 1920, reported as 126 / 121 / 113
        // TFLOP/s per GPU. Tolerance 1 % (the paper rounds to integers). The shape from
        // data/models.csv; its vocabulary (50,257, the GPT-2 tokenizer) changes the
        // V/(16·l·h) term by < 0.01 % against Megatron's padded 51,200.
        let m = match catalog_model("mt-nlg-530b") {
            Ok(m) => m,
            Err(e) => panic!("{e}"),
        };
        for (secs, gpus, published) in [
            (60.1, 2240.0, 126.0),
            (50.2, 2800.0, 121.0),
            (44.4, 3360.0, 113.0),
        ] {
            let tflops = m.megatron_flops(1920.0) / secs / gpus / 1e12;
            assert!(
                (tflops / published - 1.0).abs() < 0.01,
                "{tflops} vs {published}"
            );
        }
    }
}

//! Validation against published numbers; each test states its source and tolerance.

use super::hardware::{system, Overrides, Precision};
use super::layout::{validate, Layout, Recompute};
use super::perf::estimate;
use super::shape::{catalog_model, ModelShape};
use serde::Deserialize;

/// The validation set: published training runs with their exact layouts, typed in from the
/// papers with the source of every number (data/validation/train.csv, its header explains the
/// columns and the error's sign).
const TRAIN_CSV: &str = include_str!("../../../../data/validation/train.csv");

#[derive(Debug, Deserialize)]
struct Run {
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
    interleave: u32,
    mbs: u32,
    batch: u32,
    recompute: String,
    sp: bool,
    zero: u8,
    precision: String,
    flash: bool,
    overlap_dp: bool,
    tp_overlap: bool,
    fp32_grads: bool,
    metric: String,
    published: f64,
    source: String,
}

fn runs() -> Vec<Run> {
    let mut r = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .from_reader(TRAIN_CSV.as_bytes());
    r.deserialize()
        .enumerate()
        .map(|(i, row)| row.unwrap_or_else(|e| panic!("train.csv row {}: {e}", i + 1)))
        .collect()
}

/// One run's prediction: (signed error, predicted, memory GiB, fits).
fn predict(run: &Run) -> (f64, f64, f64, bool) {
    // Built through serde so that shape fields other helpers add (with serde defaults) apply.
    let model: ModelShape = serde_json::from_value(serde_json::json!({
        "name": run.name, "layers": run.layers, "hidden": run.hidden, "heads": run.heads,
        "kv_heads": run.kv_heads, "ffn": run.ffn, "vocab": run.vocab, "seq": run.seq,
        "gated_mlp": run.gated, "tied_embeddings": run.tied, "parallel_block": run.parallel_block,
    }))
    .unwrap_or_else(|e| panic!("{}: {e}", run.name));
    let device = crate::catalog::devices::lookup(&run.device)
        .unwrap_or_else(|e| panic!("{}: {e}", run.name));
        let (hw, net) = system(device, &Overrides::default(), run.inter_gbit)
        .unwrap_or_else(|e| panic!("{}: {e}", run.name));
    let layout = Layout {
        tp: run.tp,
        cp: run.cp,
        pp: run.pp,
        dp: run.dp,
        interleave: run.interleave,
        mbs: run.mbs,
        batch: run.batch,
        recompute: Recompute::parse(&run.recompute)
            .unwrap_or_else(|| panic!("{}: recompute {}", run.name, run.recompute)),
        sp: run.sp,
        zero: run.zero,
        precision: Precision::parse(&run.precision)
            .unwrap_or_else(|| panic!("{}: precision {}", run.name, run.precision)),
        flash_attention: run.flash,
        overlap_dp: run.overlap_dp,
        tp_overlap: run.tp_overlap,
        fp32_grads: run.fp32_grads,
        ..Layout::default()
    };
    if let Err(e) = validate(&model, &hw, &net, &layout, Some(run.gpus)) {
        panic!("{}: {e}", run.name);
    }
    let e = estimate(&model, &hw, &net, &layout);
    let (predicted, err) = match run.metric.as_str() {
        "hw_tflops" => (e.tflops_per_gpu, e.tflops_per_gpu / run.published - 1.0),
        "model_tflops" => (
            e.model_tflops_per_gpu,
            e.model_tflops_per_gpu / run.published - 1.0,
        ),
        // Throughput ∝ 1/step: the same sign convention (positive = optimistic).
        "step_s" => (e.step_time.get(), run.published / e.step_time.get() - 1.0),
        other => panic!("{}: unknown metric {other}", run.name),
    };
    (err, predicted, e.memory.total.gib(), e.memory.fits)
}

/// Targets the set is held to: the mean |error| and the worst |error| asserted below. Issue 11
/// asks for 5 % and 12 %; docs/methodology.md ("Validation against published runs") gives the
/// table, the cases beyond the targets and why.
const MEAN_TARGET: f64 = 0.05;
const WORST_TARGET: f64 = 0.12;

#[test]
fn published_runs_within_targets_and_fit() {
    let runs = runs();
    assert!(runs.len() >= 40, "the set has {} runs", runs.len());
    let mut report = String::from(
        "run                          predicted  published  error   mem GiB  fits\n",
    );
    let mut errors = Vec::new();
    let mut refused = Vec::new();
    for run in &runs {
        assert!(!run.source.trim().is_empty(), "{}: no source", run.name);
        let (err, predicted, gib, fits) = predict(run);
        report.push_str(&format!(
            "{:<28} {predicted:9.2} {:10.2} {:+6.1} % {gib:7.1}  {fits}\n",
            run.name,
            run.published,
            100.0 * err
        ));
        errors.push((run.name.as_str(), err));
        if !fits {
            refused.push(run.name.as_str());
        }
    }
    let mean = errors.iter().map(|(_, e)| e.abs()).sum::<f64>() / errors.len() as f64;
    let mut worst = errors.clone();
    worst.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()));
    report.push_str(&format!(
        "{} runs: mean |error| {:.1} %, signed mean {:+.1} %, worst {}\n",
        errors.len(),
        100.0 * mean,
        100.0 * errors.iter().map(|(_, e)| e).sum::<f64>() / errors.len() as f64,
        worst
            .iter()
            .take(5)
            .map(|(n, e)| format!("{n} {:+.1} %", 100.0 * e))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    eprintln!("{report}");
    assert!(refused.is_empty(), "published runs reported as not fitting: {refused:?}\n{report}");
    assert!(mean <= MEAN_TARGET, "mean |error| {:.1} %\n{report}", 100.0 * mean);
    let beyond: Vec<_> = worst.iter().filter(|(_, e)| e.abs() > WORST_TARGET).collect();
    assert!(beyond.is_empty(), "beyond {WORST_TARGET}: {beyond:?}\n{report}");
}

#[test]
fn llama3_405b_table4_within_10_percent_with_126_layers() {
    // Dubey et al. 2024, Table 4: 430 TFLOP/s on 8,192 H100 (DP 64), 400 on 16,384 (DP 128),
    // both TP 8 PP 16 with 126 layers on 16 stages (§3.3.2).
    for run in runs().iter().filter(|r| r.name.starts_with("llama3-405b-8k")) {
        assert_eq!((run.layers, run.pp), (126, 16));
        let (err, predicted, _, fits) = predict(run);
        assert!(fits, "{}", run.name);
        assert!(err.abs() < 0.10, "{}: {predicted:.0} vs {}", run.name, run.published);
    }
}

#[test]
fn mt_nlg_530b_flop_formula_within_1_percent() {
    // Smith et al. 2022 (MT-NLG), §3.3: 60.1 / 50.2 / 44.4 s per iteration on 280 / 350 / 420
    // DGX A100 nodes (2240 / 2800 / 3360 GPUs), batch 1920, reported as 126 / 121 / 113
    // TFLOP/s per GPU. Tolerance 1 % (the paper rounds to integers).
    // The shape from data/models.csv; its vocabulary (50,257, the GPT-2 tokenizer) changes the
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

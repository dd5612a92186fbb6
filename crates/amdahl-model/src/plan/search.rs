//! Exhaustive search over layouts: every TP × PP × DP factorisation (TP within a node and
//! dividing the heads, PP dividing the layers), expert parallelism (every EP dividing DP and
//! the experts, for MoE models), microbatch sizes, interleaving, recomputation,
//! ZeRO stages, sequence parallelism and DP-overlap; non-fitting layouts are rejected before
//! ranking. Parallel with rayon; progress is an atomic counter the caller may poll.

use super::cost::{cost, Cost, CostInputs};
use super::error::divisors;
use super::hardware::{ComputePrecision, Hardware, Network};
use super::memory::memory;
use super::moe::expert_parallel_degrees;
use super::perf::{estimate, Estimate};
use super::spec::ModelShape;
use super::spec::{Layout, Recompute};
use super::stages::stage_layers;
use crate::units::Watts;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

/// What to minimise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Objective {
    /// Wall time to train the requested tokens.
    Time,
    /// Facility energy to train them.
    Energy,
    /// Device-hours (× price where given).
    Cost,
}

impl Objective {
    pub const ALL: [Objective; 3] = [Objective::Time, Objective::Energy, Objective::Cost];
    /// The names of [`Self::ALL`], in order.
    pub const NAMES: [&'static str; 3] = ["time", "energy", "cost"];

    pub fn name(self) -> &'static str {
        match self {
            Objective::Time => "time",
            Objective::Energy => "energy",
            Objective::Cost => "cost",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "time" => Some(Objective::Time),
            "energy" => Some(Objective::Energy),
            "cost" => Some(Objective::Cost),
            _ => None,
        }
    }
}

crate::names::from_str_by_parse!(Objective, "objective");

/// The space to search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SearchSpace {
    /// Devices available.
    pub gpus: u64,
    /// Also consider jobs on fewer devices: every whole number of nodes up to `gpus`.
    pub up_to: bool,
    /// The global batch: with `exact_batch` every layout trains on exactly this batch (DP × mbs
    /// must divide it); without, each layout uses the largest multiple of DP × mbs not above it.
    pub max_batch: u32,
    /// Keep the user's batch (`--batch`); false only when a smaller one is allowed
    /// (`--batch-max`). Regression: the search silently trained on 2,516 when asked for 2,520.
    #[serde(default)]
    pub exact_batch: bool,
    pub microbatches: Vec<u32>,
    /// Largest interleaving factor tried (each divisor of the layers per stage up to it).
    pub max_interleave: u32,
    pub precisions: Vec<ComputePrecision>,
    /// Attention kernel of every layout (an implementation given, not a layout choice).
    pub flash_attention: bool,
    /// The training software whose behaviour every layout has (`--framework`; its preset sets
    /// ZeRO-3's gathering unit and ZeRO-1's gradient reduction, kept fixed by the search).
    #[serde(default)]
    pub framework: super::framework::Framework,
    /// Largest context-parallel size tried (powers of two dividing the sequence); 1 = none.
    #[serde(default = "one")]
    pub max_cp: u32,
    pub objective: Objective,
    pub top_k: usize,
    pub cost: CostInputs,
    /// Board power limits to try (`--search-power-cap`); empty: the device as it is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub power_caps: Vec<Watts>,
}

fn one() -> u32 {
    1
}

/// One ranked layout.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Candidate")]
pub struct PlanCandidate {
    pub estimate: Estimate,
    pub cost: Cost,
    /// The objective's value (seconds, joules or device-hours/price).
    pub score: f64,
    /// The power limit the layout ran under, the TDP for an uncapped pass (with
    /// `--search-power-cap`; absent without), as `infer --search` reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_cap_w: Option<f64>,
}

/// Why layouts were rejected.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Rejections {
    /// Does not fit in device memory.
    pub memory: u64,
    /// Interleaving needs the microbatch count to be a multiple of PP.
    pub interleave_microbatches: u64,
    /// ZeRO-3 with pipeline parallelism (unsupported by DeepSpeed and Megatron).
    pub zero_with_pipeline: u64,
    /// DP × mbs exceeds the largest global batch.
    pub batch_too_small: u64,
    /// DP × mbs does not divide the batch that must be kept exactly.
    #[serde(default)]
    pub batch_not_divisible: u64,
}

impl Rejections {
    pub fn total(&self) -> u64 {
        self.memory
            + self.interleave_microbatches
            + self.zero_with_pipeline
            + self.batch_too_small
            + self.batch_not_divisible
    }
    fn add(&mut self, o: &Rejections) {
        self.memory += o.memory;
        self.interleave_microbatches += o.interleave_microbatches;
        self.zero_with_pipeline += o.zero_with_pipeline;
        self.batch_too_small += o.batch_too_small;
        self.batch_not_divisible += o.batch_not_divisible;
    }
}

/// The leanest layout seen, for "fits nowhere" messages.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Leanest {
    pub layout: Layout,
    pub memory_bytes: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SearchOutcome {
    pub evaluated: u64,
    pub fitting: u64,
    pub rejected: Rejections,
    pub top: Vec<PlanCandidate>,
    /// Layouts no other beats on both training time and energy, fastest first.
    pub pareto: Vec<PlanCandidate>,
    pub leanest: Option<Leanest>,
}

/// One (devices, TP, PP, DP, EP, mbs) cell; the inner knobs are enumerated inside it.
#[derive(Debug, Clone, Copy)]
struct Cell {
    tp: u32,
    cp: u32,
    pp: u32,
    dp: u32,
    /// Expert parallelism: a divisor of dp and of the expert count (1 for dense models).
    ep: u32,
    mbs: u32,
}

fn cells(model: &ModelShape, net: &Network, space: &SearchSpace) -> Vec<Cell> {
    let gpn = u64::from(net.gpus_per_node.max(1));
    let mut counts: Vec<u64> = if space.up_to && space.gpus >= gpn {
        (1..=space.gpus / gpn).map(|k| k * gpn).collect()
    } else if space.up_to {
        (1..=space.gpus).collect()
    } else {
        vec![space.gpus]
    };
    if !counts.contains(&space.gpus) {
        counts.push(space.gpus);
    }
    let tps: Vec<u64> = divisors(gpn)
        .into_iter()
        .filter(|t| {
            (model.heads as u64).is_multiple_of(*t) && (model.kv_heads as u64).is_multiple_of(*t)
        })
        .collect();
    let pps = pipeline_choices(model.layers);
    let cps = cp_choices(model, space.max_cp);
    let mut out = Vec::new();
    for &n in &counts {
        for &tp in &tps {
            for &cp in &cps {
                for &pp in &pps {
                    let tpp = tp * cp * pp;
                    if n % tpp != 0 {
                        continue;
                    }
                    let dp = n / tpp;
                    let (Ok(tp), Ok(cp), Ok(pp), Ok(dp)) = (
                        u32::try_from(tp),
                        u32::try_from(cp),
                        u32::try_from(pp),
                        u32::try_from(dp),
                    ) else {
                        continue;
                    };
                    for ep in expert_parallel_degrees(model, dp) {
                        for &mbs in &space.microbatches {
                            out.push(Cell {
                                tp,
                                cp,
                                pp,
                                dp,
                                ep,
                                mbs,
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// Pipeline sizes tried: every divisor of the layers (even stages), and every other size up to
/// the layers' count whose uneven split differs from an even one only by the first and last
/// stage giving back one layer each (plan/stages.rs: Llama 3's 126 on 16, BLOOM's 70 on 12).
fn pipeline_choices(layers: u32) -> Vec<u64> {
    let mut pps = divisors(layers.into());
    for pp in 2..=u64::from(layers) {
        let extra = pp * u64::from(layers).div_ceil(pp) - u64::from(layers);
        if !pps.contains(&pp) && extra <= 2 {
            pps.push(pp);
        }
    }
    pps.sort_unstable();
    pps
}

/// Context-parallel sizes tried: powers of two up to `max` dividing the sequence.
fn cp_choices(model: &ModelShape, max: u32) -> Vec<u64> {
    (0..=31u32)
        .map(|k| 1u64 << k)
        .take_while(|&c| c <= u64::from(max.max(1)))
        .filter(|&c| u64::from(model.seq).is_multiple_of(c))
        .collect()
}

/// TP-overlap variants: only with sequence parallelism on more than one TP rank (NeMo).
fn tp_overlap_choices(tp: u32, sp: bool) -> &'static [bool] {
    if sp && tp > 1 {
        &[false, true]
    } else {
        &[false]
    }
}

fn interleaves(model: &ModelShape, pp: u32, max: u32) -> Vec<u32> {
    if pp <= 1 {
        return vec![1];
    }
    let max = u64::from(max.max(1));
    if !model.layers.is_multiple_of(pp) {
        // Uneven stages: any v up to the smallest stage (validate::validate).
        let min = stage_layers(model.layers, pp)
            .and_then(|s| s.into_iter().min())
            .unwrap_or(1);
        return (1..=u64::from(min).min(max))
            .filter_map(|v| u32::try_from(v).ok())
            .collect();
    }
    let per_stage = model.layers / pp;
    divisors(per_stage.into())
        .into_iter()
        .filter(|&v| v <= max)
        .filter_map(|v| u32::try_from(v).ok())
        .collect()
}

fn cell_size(model: &ModelShape, c: &Cell, space: &SearchSpace) -> u64 {
    let v = interleaves(model, c.pp, space.max_interleave).len() as u64;
    // Without SP: 1; with SP: with and without TP overlap.
    let sp = if c.tp > 1 { 3 } else { 1 };
    let ovl = if c.dp * c.cp > 1 { 2 } else { 1 };
    let ovl_ep = if c.ep > 1 { 2 } else { 1 };
    v * 3 * 4 * sp * ovl * ovl_ep * space.precisions.len() as u64
}

/// How many layouts [`search`] will evaluate (for a progress bar's length).
pub fn space_size(model: &ModelShape, net: &Network, space: &SearchSpace) -> u64 {
    cells(model, net, space)
        .iter()
        .map(|c| cell_size(model, c, space))
        .sum()
}

/// Deterministic order: score, then time, then the layout's fields.
fn rank(a: &PlanCandidate, b: &PlanCandidate) -> Ordering {
    a.score
        .total_cmp(&b.score)
        .then(a.cost.train_time.get().total_cmp(&b.cost.train_time.get()))
        .then_with(|| key(&a.estimate.layout).cmp(&key(&b.estimate.layout)))
}

/// What makes two layouts different jobs rather than near-duplicates: the parallel degrees, the
/// microbatch, the batch and the precision.
fn shape(l: &Layout) -> (u32, u32, u32, u32, u32, u32, u32, ComputePrecision) {
    (l.tp, l.cp, l.pp, l.dp, l.ep, l.mbs, l.batch, l.precision)
}

/// Tuples order only up to 12 fields: the parallel degrees, then the knobs.
type Key = (
    (u32, u32, u32, u32, u32, u32, u32, u32),
    (u8, u8, bool, u8, bool, bool, bool),
);
fn key(l: &Layout) -> Key {
    (
        (l.tp, l.cp, l.pp, l.dp, l.ep, l.interleave, l.mbs, l.batch),
        (
            l.recompute as u8,
            l.zero,
            l.sp,
            l.precision as u8,
            l.overlap_dp,
            l.overlap_ep,
            l.tp_overlap,
        ),
    )
}

#[derive(Default)]
struct Acc {
    evaluated: u64,
    fitting: u64,
    rejected: Rejections,
    top: Vec<PlanCandidate>,
    front: Vec<PlanCandidate>,
    leanest: Option<Leanest>,
}

impl Acc {
    /// Keep the best `k` layouts, one per parallel shape: variants of one shape (ZeRO stage,
    /// recomputation, SP, overlap, interleaving) differ by fractions of a per cent and would fill
    /// the list with near-duplicates, so only the best of them is listed.
    fn push_top(&mut self, c: PlanCandidate, k: usize) {
        let s = shape(&c.estimate.layout);
        if let Some(t) = self.top.iter_mut().find(|t| shape(&t.estimate.layout) == s) {
            if rank(&c, t) == Ordering::Less {
                *t = c;
            }
            return;
        }
        self.top.push(c);
        if self.top.len() >= 2 * k.max(1) {
            self.top.sort_by(rank);
            self.top.truncate(k);
        }
    }

    fn push_front(&mut self, c: PlanCandidate) {
        let (t, e) = (c.cost.train_time.get(), c.cost.facility_energy.get());
        let dominated = self.front.iter().any(|f| {
            let (ft, fe) = (f.cost.train_time.get(), f.cost.facility_energy.get());
            ft <= t && fe <= e && (ft < t || fe < e || rank(f, &c) != Ordering::Greater)
        });
        if dominated {
            return;
        }
        self.front.retain(|f| {
            let (ft, fe) = (f.cost.train_time.get(), f.cost.facility_energy.get());
            !(t <= ft && e <= fe)
        });
        self.front.push(c);
    }

    fn see_memory(&mut self, l: &Layout, bytes: f64) {
        if self.leanest.is_none_or(|x| bytes < x.memory_bytes) {
            self.leanest = Some(Leanest {
                layout: *l,
                memory_bytes: bytes,
            });
        }
    }

    fn merge(mut self, other: Acc, k: usize) -> Acc {
        self.evaluated += other.evaluated;
        self.fitting += other.fitting;
        self.rejected.add(&other.rejected);
        for c in other.top {
            self.push_top(c, k);
        }
        for c in other.front {
            self.push_front(c);
        }
        if let Some(l) = other.leanest {
            self.see_memory(&l.layout, l.memory_bytes);
        }
        self
    }
}

fn score(objective: Objective, c: &Cost) -> f64 {
    match objective {
        Objective::Time => c.train_time.get(),
        Objective::Energy => c.facility_energy.get(),
        Objective::Cost => c.price.unwrap_or(c.device_hours),
    }
}

/// One layout that passed the cell's rules: refused when it does not fit the memory, else
/// estimated, costed and offered to the front and the top list, with `cap_w` as
/// [`search_cell`]'s.
fn evaluate(
    model: &ModelShape,
    hw: &Hardware,
    net: &Network,
    space: &SearchSpace,
    l: &Layout,
    cap_w: Option<f64>,
    acc: &mut Acc,
) {
    let mem = memory(model, l, hw.memory);
    acc.see_memory(l, mem.total.get());
    if !mem.fits {
        acc.rejected.memory += 1;
        return;
    }
    acc.fitting += 1;
    let e = estimate(model, hw, net, l);
    let k = cost(&e, hw, &space.cost);
    let cand = PlanCandidate {
        estimate: e,
        cost: k,
        score: score(space.objective, &k),
        power_cap_w: cap_w,
    };
    acc.push_front(cand);
    acc.push_top(cand, space.top_k);
}

/// Every layout of one cell. `cap_w`: the power cap this pass runs under, as candidates report
/// it (`None` without `--search-power-cap`; the TDP for the uncapped pass of a cap search).
fn search_cell(
    model: &ModelShape,
    hw: &Hardware,
    net: &Network,
    space: &SearchSpace,
    c: &Cell,
    cap_w: Option<f64>,
    acc: &mut Acc,
) {
    let size = cell_size(model, c, space);
    acc.evaluated += size;
    let unit = u64::from(c.dp) * u64::from(c.mbs);
    if space.exact_batch && u64::from(space.max_batch) % unit != 0 {
        acc.rejected.batch_not_divisible += size;
        return;
    }
    let batch = u64::from(space.max_batch) / unit * unit;
    if batch == 0 {
        acc.rejected.batch_too_small += size;
        return;
    }
    let Ok(batch) = u32::try_from(batch) else {
        acc.rejected.batch_too_small += size;
        return;
    };
    let microbatches = u64::from(batch) / unit;
    let sps: &[bool] = if c.tp > 1 { &[false, true] } else { &[false] };
    let ovls: &[bool] = if c.dp * c.cp > 1 {
        &[false, true]
    } else {
        &[false]
    };
    let ovl_eps: &[bool] = if c.ep > 1 { &[false, true] } else { &[false] };
    for v in interleaves(model, c.pp, space.max_interleave) {
        for &precision in &space.precisions {
            for recompute in Recompute::ALL {
                for zero in 0..=3u8 {
                    for &sp in sps {
                        for (&overlap_dp, &tp_overlap) in ovls
                            .iter()
                            .flat_map(|o| tp_overlap_choices(c.tp, sp).iter().map(move |t| (o, t)))
                        {
                            for &overlap_ep in ovl_eps {
                                let l = Layout {
                                    tp: c.tp,
                                    pp: c.pp,
                                    dp: c.dp,
                                    interleave: v,
                                    mbs: c.mbs,
                                    batch,
                                    recompute,
                                    zero,
                                    sp,
                                    precision,
                                    overlap_dp,
                                    flash_attention: space.flash_attention,
                                    ep: c.ep,
                                    overlap_ep,
                                    cp: c.cp,
                                    tp_overlap,
                                    optimizer_dtype: Default::default(),
                                    fp32_grads: false,
                                    // The framework's behaviour (its preset), never a
                                    // better choice.
                                    zero3_prefetch: space.framework.zero3_prefetch(),
                                    recompute_modules: Default::default(),
                                    overlap_pp: v > 1,
                                    grad_all_reduce: space
                                        .framework
                                        .grad_all_reduce(zero, c.pp, precision),
                                    // The search plans full training (LoRA: one layout).
                                    lora_rank: None,
                                };
                                if v > 1 && microbatches % u64::from(c.pp) != 0 {
                                    acc.rejected.interleave_microbatches += 1;
                                    continue;
                                }
                                if zero >= 3 && c.pp > 1 {
                                    acc.rejected.zero_with_pipeline += 1;
                                    continue;
                                }
                                evaluate(model, hw, net, space, &l, cap_w, acc);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Evaluate every layout in `space`; `progress` counts evaluated layouts as the search runs.
/// Precisions the device lacks are skipped. Never ranks a layout that does not fit.
pub fn search(
    model: &ModelShape,
    hw: &Hardware,
    net: &Network,
    space: &SearchSpace,
    progress: &AtomicU64,
) -> SearchOutcome {
    let mut space = space.clone();
    space.precisions.retain(|p| hw.peak(*p).is_some());
    let k = space.top_k;
    let cells = cells(model, net, &space);
    // Every layout under every cap: the device as it is, or one copy per cap (a cap at the TDP
    // is no cap).
    let devices: Vec<Hardware> = if space.power_caps.is_empty() {
        vec![hw.clone()]
    } else {
        space
            .power_caps
            .iter()
            .map(|c| Hardware {
                power_cap: (*c < hw.tdp).then_some(*c),
                ..hw.clone()
            })
            .collect()
    };
    let acc = devices
        .iter()
        .map(|hw| {
            let cap_w =
                (!space.power_caps.is_empty()).then(|| hw.power_cap.unwrap_or(hw.tdp).get());
            cells
                .par_iter()
                .fold(Acc::default, |mut acc, c| {
                    let before = acc.evaluated;
                    search_cell(model, hw, net, &space, c, cap_w, &mut acc);
                    progress.fetch_add(acc.evaluated - before, AtomicOrdering::Relaxed);
                    acc
                })
                .reduce(Acc::default, |a, b| a.merge(b, k))
        })
        .reduce(|a, b| a.merge(b, k))
        .unwrap_or_default();
    let mut top = acc.top;
    top.sort_by(rank);
    top.truncate(k);
    let mut pareto = acc.front;
    pareto.sort_by(|a, b| {
        a.cost
            .train_time
            .get()
            .total_cmp(&b.cost.train_time.get())
            .then_with(|| key(&a.estimate.layout).cmp(&key(&b.estimate.layout)))
    });
    SearchOutcome {
        evaluated: acc.evaluated,
        fitting: acc.fitting,
        rejected: acc.rejected,
        top,
        pareto,
        leanest: acc.leanest,
    }
}

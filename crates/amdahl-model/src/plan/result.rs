//! The serialisable results of `amdahl plan` (schema `amdahl.plan/1`) and `amdahl plan
//! --search` (schema `amdahl.plan-search/1`), documented in docs/usage/plan.md.

use super::cost::{cost, Cost, CostInputs};
use super::framework::Framework;
use super::hardware::{Hardware, Network};
use super::intervals::{plan_intervals, PlanClass, PlanIntervals};
use super::memory::Memory;
use super::perf::{Breakdown, Estimate};
use super::scaling::{scaling, Scaling};
use super::search::{Objective, PlanCandidate, Rejections, SearchOutcome, SearchSpace};
use super::spec::Layout;
use super::spec::ModelShape;
use super::validation::ValidationRun;
use crate::catalog::grid::GridIntensity;
use crate::interval::Interval;
use serde::{Deserialize, Serialize};

pub const PLAN_SCHEMA: &str = "amdahl.plan/1";

/// Why a plan's training energy has no band: the energy set predicts no training energy (its
/// energy-to-train rows need the runs' step counts; its training rows amdahl predicts are four
/// node wall powers of NeMo on H100, data/validation/energy.csv).
pub const TRAINING_ENERGY_BASIS: &str = "training energy: no validation data (energy.csv holds no \
     training-energy row amdahl predicts; its four training rows are node wall power)";
pub const SEARCH_SCHEMA: &str = "amdahl.plan-search/1";

/// Result of predicting one layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanResult {
    pub schema: String,
    pub model: ModelShape,
    pub parameters: f64,
    pub device: Hardware,
    pub network: Network,
    pub layout: Layout,
    pub gpus: u64,
    pub microbatches: u64,
    pub step_time_s: f64,
    pub tokens_per_s: f64,
    pub tflops_per_gpu: f64,
    pub model_tflops_per_gpu: f64,
    pub mfu: f64,
    pub hfu: f64,
    pub memory_per_gpu_bytes: f64,
    pub fits: bool,
    /// Seconds per iteration by cause; sums to `step_time_s`.
    pub breakdown: Breakdown,
    pub memory: Memory,
    pub training: Cost,
    /// Where `training.intensity` comes from (region, year, scope, source), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<GridIntensity>,
    /// Where `training.pue` comes from (a preset and its source, or "given").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pue_source: Option<String>,
    pub scaling: Scaling,
    /// Weights one token uses (`parameters` less the experts it is not routed to); MFU counts
    /// FLOPs of these. Equal to `parameters` for a dense model.
    #[serde(default)]
    pub active_parameters: f64,
    /// The training software whose preset set the framework-behaviour knobs (`--framework`).
    #[serde(default)]
    pub framework: Framework,
    /// Prediction intervals of the headline figures, from the validation runs of the plan's
    /// class (docs/methodology.md, "Prediction intervals"); absent in results saved before them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<PlanIntervals>,
}

impl PlanResult {
    /// The intervals of this plan's step time, throughput and TFLOP/s from the validation runs
    /// `runs`, classed by `framework`, the device's generation and the precision.
    pub fn with_intervals(mut self, runs: &[ValidationRun], framework: Framework) -> Self {
        let class = PlanClass {
            framework,
            arch: self.device.arch.clone(),
            precision: self.layout.precision.name().to_string(),
        };
        self.framework = framework;
        let mut intervals = plan_intervals(
            runs,
            &class,
            self.step_time_s,
            self.tokens_per_s,
            self.tflops_per_gpu,
        );
        intervals.energy_kwh = Some(Interval::none(
            self.training.facility_energy.kwh(),
            TRAINING_ENERGY_BASIS.into(),
        ));
        self.intervals = Some(intervals);
        self
    }

    pub fn new(
        model: &ModelShape,
        hw: &Hardware,
        net: &Network,
        e: &Estimate,
        inputs: &CostInputs,
    ) -> Self {
        PlanResult {
            schema: PLAN_SCHEMA.into(),
            model: model.clone(),
            parameters: model.params(),
            device: hw.clone(),
            network: *net,
            layout: e.layout,
            gpus: e.gpus,
            microbatches: e.layout.microbatches(),
            step_time_s: e.step_time.get(),
            tokens_per_s: e.tokens_per_s,
            tflops_per_gpu: e.tflops_per_gpu,
            model_tflops_per_gpu: e.model_tflops_per_gpu,
            mfu: e.mfu,
            hfu: e.hfu,
            memory_per_gpu_bytes: e.memory.total.get(),
            fits: e.memory.fits,
            breakdown: e.breakdown,
            memory: e.memory,
            training: cost(e, hw, inputs),
            grid: None,
            pue_source: None,
            scaling: scaling(model, hw, net, &e.layout),
            active_parameters: model.active_params(),
            framework: Framework::default(),
            intervals: None,
        }
    }
}

/// One ranked layout in a search result, flattened for readers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RankedLayout {
    pub rank: usize,
    pub label: String,
    pub layout: Layout,
    pub gpus: u64,
    pub score: f64,
    pub step_time_s: f64,
    pub tflops_per_gpu: f64,
    pub mfu: f64,
    pub memory_per_gpu_bytes: f64,
    pub train_time_s: f64,
    pub device_hours: f64,
    pub energy_kwh: f64,
    pub emissions_kg: f64,
    pub breakdown: Breakdown,
    /// The power limit the layout ran under (with `--search-power-cap`; absent without).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_cap_w: Option<f64>,
    /// Intervals of its step time, throughput and TFLOP/s (as in `amdahl.plan/1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<PlanIntervals>,
}

impl RankedLayout {
    fn new(rank: usize, c: &PlanCandidate) -> Self {
        RankedLayout {
            rank,
            // A layout searched under a power cap (`--search-power-cap`) names its cap.
            label: match c.power_cap_w {
                Some(w) => format!("{} cap{w:.0}W", c.estimate.layout.label()),
                None => c.estimate.layout.label(),
            },
            layout: c.estimate.layout,
            gpus: c.estimate.gpus,
            score: c.score,
            step_time_s: c.estimate.step_time.get(),
            tflops_per_gpu: c.estimate.tflops_per_gpu,
            mfu: c.estimate.mfu,
            memory_per_gpu_bytes: c.estimate.memory.total.get(),
            train_time_s: c.cost.train_time.get(),
            device_hours: c.cost.device_hours,
            energy_kwh: c.cost.facility_energy.kwh(),
            emissions_kg: c.cost.emissions.kg(),
            breakdown: c.estimate.breakdown,
            power_cap_w: c.power_cap_w,
            intervals: None,
        }
    }
}

/// Result of `amdahl plan --search`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SearchResult {
    pub schema: String,
    pub model: ModelShape,
    pub device: Hardware,
    pub network: Network,
    pub space: SearchSpace,
    pub objective: Objective,
    pub evaluated: u64,
    pub fitting: u64,
    pub rejected_total: u64,
    pub rejected: Rejections,
    /// Provenance of `space.cost.intensity` and `space.cost.pue`, as in `amdahl.plan/1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<GridIntensity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pue_source: Option<String>,
    pub wall_time_s: f64,
    pub top: Vec<RankedLayout>,
    pub pareto: Vec<RankedLayout>,
}

impl SearchResult {
    pub fn new(
        model: &ModelShape,
        hw: &Hardware,
        net: &Network,
        space: &SearchSpace,
        out: &SearchOutcome,
        wall_time_s: f64,
    ) -> Self {
        let rank = |v: &[PlanCandidate]| {
            v.iter()
                .enumerate()
                .map(|(i, c)| RankedLayout::new(i + 1, c))
                .collect()
        };
        SearchResult {
            schema: SEARCH_SCHEMA.into(),
            model: model.clone(),
            device: hw.clone(),
            network: *net,
            space: space.clone(),
            objective: space.objective,
            evaluated: out.evaluated,
            fitting: out.fitting,
            rejected_total: out.rejected.total(),
            rejected: out.rejected,
            grid: None,
            pue_source: None,
            wall_time_s,
            top: rank(&out.top),
            pareto: rank(&out.pareto),
        }
    }

    /// Every listed layout with the intervals of its class (`framework`, the device's
    /// generation, the layout's precision), as `amdahl.plan/1` has them. The search itself is
    /// untouched: only the listed layouts get bands.
    pub fn with_intervals(mut self, runs: &[ValidationRun], framework: Framework) -> Self {
        let arch = self.device.arch.clone();
        for l in self.top.iter_mut().chain(self.pareto.iter_mut()) {
            let class = PlanClass {
                framework,
                arch: arch.clone(),
                precision: l.layout.precision.name().to_string(),
            };
            let tokens_per_s =
                f64::from(l.layout.batch) * f64::from(self.model.seq) / l.step_time_s;
            l.intervals = Some(plan_intervals(
                runs,
                &class,
                l.step_time_s,
                tokens_per_s,
                l.tflops_per_gpu,
            ));
        }
        self
    }
}

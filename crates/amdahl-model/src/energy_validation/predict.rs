//! A row of the energy set as amdahl models it: the serving model's activity and throughput for
//! the row's configuration, from which any set of power-model coefficients predicts the row's
//! power or energy. Rows amdahl cannot express yet say why instead.

use super::fit::{PowerFit, Term};
use super::rows::Row;
use super::simulated::Simulations;
use crate::infer::model::{estimate, setup_unchecked, Requests, Serving};
use crate::infer::precision::{KvFormat, WeightFormat};
use crate::infer::Engine;
use crate::plan::{
    catalog_model, estimate as plan_estimate, validate, ComputePrecision, Layout, ModelShape,
    Recompute,
};
use crate::power::ServerShare;
use crate::power::{device_power, Activity};
use crate::units::Watts;

/// What a row measured, as amdahl compares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// Mean board power of one GPU, W (a sum over GPUs is divided by their count).
    PowerPerGpu,
    EnergyPerToken,
    EnergyPerRequest,
    /// Output tokens per second of all the row's GPUs: the time the energy rows depend on.
    Throughput,
    /// Mean wall power of one node (server scope).
    NodeWallPower,
}

impl Quantity {
    pub fn name(self) -> &'static str {
        match self {
            Quantity::PowerPerGpu => "power per GPU (W)",
            Quantity::EnergyPerToken => "energy per output token (J)",
            Quantity::EnergyPerRequest => "energy per request (J)",
            Quantity::Throughput => "output tokens/s",
            Quantity::NodeWallPower => "node wall power (W)",
        }
    }
}

/// The modelled configuration of an expressible row.
#[derive(Debug, Clone)]
pub struct Modelled {
    pub quantity: Quantity,
    /// The device's generation (the catalog's `arch`).
    pub arch: String,
    /// The published value in the quantity's unit (per GPU for power).
    pub published: f64,
    tdp: Watts,
    idle: Watts,
    cap: Option<Watts>,
    /// Time shares of the cycle and what a device does in each: prefill, decode.
    phases: [(f64, Activity); 2],
    gpus: f64,
    tokens_per_s: f64,
    output_tokens: f64,
    /// The typed batch fits the modelled memory.
    pub fits: bool,
    /// The server around the GPUs and how many it holds (server-scope rows).
    server: Option<(ServerShare, f64)>,
    /// Modelled with the vLLM per-sequence time ([`model_row`]'s argument).
    pub uses_host: bool,
}

impl Modelled {
    /// Mean power of one GPU under coefficients `f`, as `amdahl infer` computes it.
    pub fn power(&self, f: &PowerFit) -> f64 {
        let k = f.coefficients(&self.arch);
        self.phases
            .iter()
            .map(|(w, a)| w * device_power(&k, self.tdp, self.idle, self.cap, a).get())
            .sum()
    }

    /// Seconds per output token of the row's GPUs together.
    pub fn seconds_per_token(&self) -> f64 {
        1.0 / self.tokens_per_s
    }

    /// The row's quantity under coefficients `k`.
    pub fn predict(&self, k: &PowerFit) -> f64 {
        let energy_per_token = || self.power(k) * self.gpus / self.tokens_per_s;
        match self.quantity {
            Quantity::PowerPerGpu => self.power(k),
            Quantity::EnergyPerToken => energy_per_token(),
            Quantity::EnergyPerRequest => energy_per_token() * self.output_tokens,
            Quantity::Throughput => self.tokens_per_s,
            Quantity::NodeWallPower => self.server.as_ref().map_or(f64::NAN, |(s, n)| {
                s.wall(crate::units::Watts(self.power(k))).get() * n
            }),
        }
    }

    /// The row's terms of the power model, linear in (active, compute, memory): the published
    /// power per GPU minus the idle share, over the TDP, and its three regressors. `None` for
    /// rows that do not measure power.
    pub fn regression(&self) -> Option<Term> {
        // A capped row's power is held at its cap, not the linear model: it checks the cap model,
        // it does not fit the coefficients.
        if self.quantity != Quantity::PowerPerGpu || self.cap.is_some() {
            return None;
        }
        let tdp = self.tdp.get();
        let mut x = [0.0; 3];
        let mut idle = 0.0;
        for (w, a) in &self.phases {
            x[0] += w * a.busy;
            x[1] += w * a.compute;
            x[2] += w * a.memory;
            idle += w * (1.0 - a.busy) * self.idle.get();
        }
        Some(Term {
            arch: self.arch.clone(),
            x,
            y: (self.published - idle) / tdp,
        })
    }
}

/// The row's device and its node. A device without a catalogued reference-server network (the
/// A40, L40S and L4 are PCIe cards in servers of many makes) has no inter-node tier: a row
/// within one node does not use one, and the serving and training models refuse a wider one.
fn row_system(r: &Row) -> Result<(crate::plan::Hardware, crate::plan::Network), String> {
    let d = crate::catalog::devices::lookup(&r.system)
        .map_err(|_| format!("device `{}` is not in the catalog", r.system))?;
    crate::plan::system(d, &crate::plan::Overrides::default(), None).map_err(|e| e.to_string())
}

/// What an inference row runs: the catalog's model on the row's device and node, served as the
/// row gives it (the framework as a user names it to `--engine`; others, such as Hugging Face
/// generation under FastChat, as the default engine), with the row's power cap and, under vLLM,
/// `vllm_host_s` of time per running sequence.
pub struct RowSetup {
    pub model: ModelShape,
    pub hw: crate::plan::Hardware,
    pub net: crate::plan::Network,
    pub serving: Serving,
}

impl RowSetup {
    pub fn of(r: &Row, vllm_host_s: f64) -> Result<Self, String> {
        let model = catalog_model(&r.model)
            .map_err(|_| format!("model `{}` is not in the catalog", r.model))?;
        let (mut hw, net) = row_system(r)?;
        // A cap below the TDP runs the device at the clock the cap leaves (crate::power).
        hw.power_cap = r
            .power_cap_w
            .filter(|c| *c < hw.tdp.get())
            .map(crate::units::Watts);
        let weights = WeightFormat::parse(&r.precision)
            .ok_or_else(|| format!("precision `{}` is not a serving format", r.precision))?;
        let kv = match r.kv_precision.as_str() {
            // The engines' default (vLLM `kv-cache-dtype auto`): the model's 16-bit dtype.
            "" => KvFormat::Bf16,
            k => KvFormat::parse(k).ok_or_else(|| format!("KV format `{k}` is not modelled"))?,
        };
        let (tp, pp) = (r.tp.unwrap_or(1), r.pp.unwrap_or(1));
        let serving = Serving {
            tp,
            pp,
            replicas: (r.gpus / (tp * pp)).max(1),
            weights,
            kv,
            engine: r.framework.parse().unwrap_or_default(),
            memory_fraction: None,
        };
        if serving.engine == Engine::Vllm {
            hw.tuning.per_sequence_overhead = Some(crate::units::Seconds(vllm_host_s));
        }
        Ok(RowSetup {
            model,
            hw,
            net,
            serving,
        })
    }
}

/// A row modelled, or the reason it cannot be yet. A vLLM row is modelled with `vllm_host_s` of
/// time per running sequence ([`crate::infer::Engine`]; the set's fit varies it). A row that
/// measured an offline run's steady-state window is predicted from that run's simulation in
/// `sims` ([`super::simulated`]); any other from `infer`'s steady state.
pub fn model_row(r: &Row, vllm_host_s: f64, sims: &Simulations) -> Result<Modelled, String> {
    let quantity = match r.measured.as_str() {
        "gpu_power_w_all_gpus" | "gpu_power_w_per_gpu" => Quantity::PowerPerGpu,
        "energy_per_output_token_j" => Quantity::EnergyPerToken,
        "energy_per_request_j" => Quantity::EnergyPerRequest,
        "throughput_output_tokens_per_s" => Quantity::Throughput,
        "node_wall_power_w" => Quantity::NodeWallPower,
        "energy_to_train_j" => {
            return Err("energy to train needs the run's step count to its accuracy target, which the set does not hold".into())
        }
        other => return Err(format!("`{other}` is not a quantity amdahl predicts")),
    };
    if r.kind != "inference" {
        return model_training_row(r, quantity);
    }
    if r.scope != "gpu" {
        return Err(format!(
            "scope `{}`: only GPU counters are modelled yet",
            r.scope
        ));
    }
    let RowSetup {
        model,
        hw,
        net,
        serving,
    } = RowSetup::of(r, vllm_host_s)?;
    let uses_host = serving.engine == Engine::Vllm;
    let (input, output) = match (r.input_tokens, r.output_tokens) {
        (Some(i), Some(o)) => (i, o),
        _ => return Err("input or output length not given".into()),
    };
    let published = match r.measured.as_str() {
        "gpu_power_w_all_gpus" => r.value / f64::from(r.gpus),
        _ => r.value,
    };
    let of = |phases, tokens_per_s, fits| Modelled {
        quantity,
        arch: hw.arch.clone(),
        published,
        tdp: hw.tdp,
        idle: hw.idle_power,
        cap: hw.power_cap,
        phases,
        gpus: serving.gpus() as f64,
        tokens_per_s,
        output_tokens: output,
        fits,
        server: None,
        uses_host,
    };
    let requests = Requests {
        input: input.round() as u32,
        output: output.round() as u32,
        beams: r.beams.unwrap_or(1),
    };
    let s = setup_unchecked(&model, &hw, &net, serving, requests).map_err(|e| e.to_string())?;
    let fits = r.batch <= s.max_batch;
    if let Some(line) = sims.get(r.run()) {
        // The run's window; the shared simulation's refusal is this row's.
        let w = line.as_ref().map_err(Clone::clone)?.at(vllm_host_s);
        return Ok(of(w.phases, 1.0 / w.seconds_per_token, fits));
    }
    let e = estimate(&s, &hw, &net, r.batch);
    let steps = f64::from(requests.output) - 1.0;
    let cycle = e.prefill_batch_s + steps * e.tpot_s;
    Ok(Modelled {
        output_tokens: f64::from(requests.output),
        ..of(
            [
                (e.prefill_batch_s / cycle, e.activity_prefill),
                (steps * e.tpot_s / cycle, e.activity_decode),
            ],
            e.output_tokens_per_s,
            fits,
        )
    })
}

/// A training row: the planner's step at the row's published layout (knobs it does not publish
/// at the NeMo/Megatron defaults: sequence parallelism, FlashAttention, overlapped gradient and
/// TP communication; no recomputation where it fits, selective where not), its power per GPU and
/// the node's wall power with the catalog's server for the device.
fn model_training_row(r: &Row, quantity: Quantity) -> Result<Modelled, String> {
    if r.model == "resnet50" {
        return Err("a convolutional network: amdahl models decoder-only transformers".into());
    }
    if quantity != Quantity::NodeWallPower {
        return Err(format!(
            "`{}` of a training run is not predicted yet",
            r.measured
        ));
    }
    let model = catalog_model(&r.model)
        .map_err(|_| format!("model `{}` is not in the catalog", r.model))?;
    let (hw, net) = row_system(r)?;
    // Said here: the layout search below reads any refusal as "does not fit".
    net.check_span(
        &hw.name,
        u64::from(r.gpus),
        format!("a row of {} GPUs", r.gpus),
    )
    .map_err(|e| e.to_string())?;
    let precision = ComputePrecision::parse(&r.precision)
        .ok_or_else(|| format!("precision `{}` is not a training precision", r.precision))?;
    let model = ModelShape {
        seq: r.input_tokens.map_or(model.seq, |s| s.round() as u32),
        ..model
    };
    let (tp, pp, cp) = (r.tp.unwrap_or(1), r.pp.unwrap_or(1), r.cp.unwrap_or(1));
    let base = Layout {
        tp,
        pp,
        cp,
        dp: r.gpus / (tp * pp * cp),
        lora_rank: r.lora_rank,
        mbs: r.mbs.unwrap_or(1),
        batch: r.batch,
        precision,
        sp: tp > 1,
        flash_attention: true,
        overlap_dp: true,
        tp_overlap: tp > 1,
        ..Layout::default()
    };
    let layout = [Recompute::None, Recompute::Selective]
        .into_iter()
        .map(|recompute| Layout { recompute, ..base })
        .find(|l| validate(&model, &hw, &net, l, Some(u64::from(r.gpus))).is_ok())
        .ok_or_else(|| "the published layout does not fit the modelled memory".to_string())?;
    let e = plan_estimate(&model, &hw, &net, &layout);
    let server = hw
        .server
        .clone()
        .ok_or_else(|| format!("no server in the catalog for `{}`", r.system))?;
    Ok(Modelled {
        quantity,
        arch: hw.arch.clone(),
        published: r.value,
        tdp: hw.tdp,
        idle: hw.idle_power,
        cap: hw.power_cap,
        phases: [(1.0, e.activity), (0.0, Activity::default())],
        gpus: f64::from(r.gpus),
        tokens_per_s: e.tokens_per_s,
        output_tokens: 0.0,
        fits: true,
        server: Some((server, f64::from(net.gpus_per_node))),
        uses_host: false,
    })
}

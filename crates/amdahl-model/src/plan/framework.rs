//! Software presets (`--framework`): the framework-behaviour knobs a user cannot see in a
//! published layout — how ZeRO-3 gathers weights, whether ZeRO-1's gradients are all-reduced
//! whole, which overlaps are on by default — set once per framework from its source code or
//! documentation (cited per preset), so that a published layout typed with `--framework` is
//! predicted as the validation set predicts it. Explicit flags override a preset.
//!
//! Nothing here is inferred from a run's own result: the knobs that were (the SC21 ZeRO-3 rows'
//! `dp_rails`) are marked in data/validation/train.csv's `inferred` column and reported apart.

use super::spec::{Layout, Zero3Prefetch};
use super::ComputePrecision;
use serde::{Deserialize, Serialize};

/// A training framework whose behaviour amdahl knows, versioned where it changed.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Framework {
    /// NVIDIA Megatron-LM: the planner's own defaults (its kernels, schedules and flags).
    #[default]
    MegatronLm,
    /// NVIDIA NeMo (Megatron-Core with Transformer Engine), as of the 24.07 container.
    Nemo,
    /// Microsoft DeepSpeed with ZeRO-3 as released in 2021 (SC21's ZeRO-3 rows).
    #[serde(rename = "deepspeed-2021")]
    Deepspeed2021,
    /// Megatron-DeepSpeed (MT-NLG, BLOOM): Megatron's model code on DeepSpeed's engine.
    MegatronDeepspeed,
    /// EleutherAI GPT-NeoX: Megatron's model code on DeepSpeed's engine.
    GptNeox,
    /// PyTorch FSDP (and FairScale FSDP / Metaseq, which wraps one unit per layer).
    Fsdp,
    /// Meta's Llama 3 training stack (Megatron-style 4D parallelism).
    Meta,
    /// DeepSeek's HAI-LLM.
    HaiLlm,
}

impl Framework {
    /// Every preset, in the order `--framework` lists them.
    pub const ALL: [Framework; 8] = [
        Framework::MegatronLm,
        Framework::Nemo,
        Framework::Deepspeed2021,
        Framework::MegatronDeepspeed,
        Framework::GptNeox,
        Framework::Fsdp,
        Framework::Meta,
        Framework::HaiLlm,
    ];
    /// The names `--framework` takes: each preset's own, in [`Self::ALL`]'s order, then the
    /// aliases `deepspeed` and `metaseq`.
    pub const NAMES: [&'static str; 10] = [
        "megatron-lm",
        "nemo",
        "deepspeed-2021",
        "megatron-deepspeed",
        "gpt-neox",
        "fsdp",
        "meta",
        "hai-llm",
        "deepspeed",
        "metaseq",
    ];

    /// The preset's name (`--framework`).
    pub fn name(self) -> &'static str {
        match self {
            Framework::MegatronLm => "megatron-lm",
            Framework::Nemo => "nemo",
            Framework::Deepspeed2021 => "deepspeed-2021",
            Framework::MegatronDeepspeed => "megatron-deepspeed",
            Framework::GptNeox => "gpt-neox",
            Framework::Fsdp => "fsdp",
            Framework::Meta => "meta",
            Framework::HaiLlm => "hai-llm",
        }
    }

    /// A preset by name; `deepspeed` is the only DeepSpeed behaviour modelled (2021's) and
    /// `metaseq` is FSDP (Zhang et al. 2022 §2.4: OPT trained with FSDP).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().to_ascii_lowercase();
        match s.as_str() {
            "deepspeed" => Some(Framework::Deepspeed2021),
            "metaseq" => Some(Framework::Fsdp),
            _ => Framework::ALL.into_iter().find(|f| f.name() == s),
        }
    }

    /// Whether the planner models this framework's kernels and schedules (its accuracy claim).
    pub fn modelled(self) -> bool {
        matches!(
            self,
            Framework::MegatronLm | Framework::Nemo | Framework::Meta
        )
    }

    /// ZeRO-3's gathering unit and prefetch.
    /// - DeepSpeed 2021: one weight matrix at a time with a blocking fetch and a prefetch only
    ///   when none is in flight (deepspeed/runtime/zero/stage3.py,
    ///   PartitionedParameterCoordinator, as of v0.5).
    /// - FSDP: one unit per transformer layer (torch.distributed.fsdp with a per-layer
    ///   auto-wrap policy; FairScale FSDP as Metaseq wraps it).
    /// - Megatron-LM and the others have no ZeRO-3 of their own: the FSDP unit, the default.
    pub fn zero3_prefetch(self) -> Zero3Prefetch {
        match self {
            Framework::Deepspeed2021 | Framework::MegatronDeepspeed | Framework::GptNeox => {
                Zero3Prefetch::Module
            }
            _ => Zero3Prefetch::Layer,
        }
    }

    /// Whether ZeRO-1 all-reduces the whole gradient: DeepSpeed's pipeline engine with bf16
    /// runs its BF16_Optimizer (deepspeed/runtime/pipe/engine.py `_exec_reduce_grads` →
    /// `_bf16_reduce_grads` → `buffered_allreduce_fallback`); with fp16 it reduces through the
    /// ZeRO optimizer (`reduce_gradients`), a reduce-scatter. Only DeepSpeed's engine, only
    /// ZeRO-1 under pipeline parallelism with bf16.
    pub fn grad_all_reduce(self, zero: u8, pp: u32, precision: ComputePrecision) -> bool {
        matches!(
            self,
            Framework::Deepspeed2021 | Framework::MegatronDeepspeed | Framework::GptNeox
        ) && zero == 1
            && pp > 1
            && precision == ComputePrecision::Bf16
    }

    /// Whether data-parallel communication overlaps the backward pass by default.
    /// - NeMo 24.07: distributed fused Adam with `overlap_grad_sync` and `overlap_param_sync`
    ///   (NeMo-Framework-Launcher training recipes, the H100 fp8 scripts).
    /// - DeepSpeed: `overlap_comm` defaults to true for ZeRO-3 (deepspeed/runtime/zero/config.py:
    ///   "overlap_comm … default True for stage 3").
    /// - FSDP: gradients reduce-scattered as each unit's backward finishes (the default
    ///   `BackwardPrefetch.BACKWARD_PRE`).
    /// - Megatron-LM: `--overlap-grad-reduce` is off unless given (megatron/training/arguments.py).
    pub fn overlap_dp(self, zero: u8) -> bool {
        match self {
            Framework::Nemo | Framework::Fsdp => true,
            Framework::Deepspeed2021 | Framework::MegatronDeepspeed | Framework::GptNeox => {
                zero == 3
            }
            _ => false,
        }
    }

    /// Whether tensor-parallel communication overlaps the GEMMs by default: NeMo's recipes set
    /// `ub_tp_comm_overlap` wherever sequence parallelism runs on TP > 1 (NeMo-Framework-Launcher
    /// conf/training/*: gpt3/175b, llama3_70b, nemotron_*); nobody else does by default.
    pub fn tp_overlap(self, tp: u32, sp: bool) -> bool {
        self == Framework::Nemo && tp > 1 && sp
    }

    /// Whether the pipeline's sends and receives overlap the next chunk by default: NeMo's
    /// recipes set `overlap_p2p_comm` with the interleaved schedule (same recipes).
    pub fn overlap_pp(self, interleave: u32) -> bool {
        self == Framework::Nemo && interleave > 1
    }

    /// The sources of the preset's values, for output and docs.
    pub fn source(self) -> &'static str {
        match self {
            Framework::MegatronLm => {
                "Megatron-LM defaults (megatron/training/arguments.py: no overlap flags on)"
            }
            Framework::Nemo => {
                "NeMo 24.07 recipes (NeMo-Framework-Launcher conf/training: distributed fused \
                 Adam with overlap_grad_sync, ub_tp_comm_overlap with SP, overlap_p2p_comm)"
            }
            Framework::Deepspeed2021 => {
                "DeepSpeed ZeRO-3 of 2021 (runtime/zero/stage3.py PartitionedParameterCoordinator: \
                 one matrix at a time; zero/config.py overlap_comm on for stage 3)"
            }
            Framework::MegatronDeepspeed | Framework::GptNeox => {
                "DeepSpeed's engine (pipe/engine.py: BF16_Optimizer all-reduces gradients under \
                 pipeline parallelism; ZeRO-3 as stage3.py of 2021)"
            }
            Framework::Fsdp => {
                "PyTorch FSDP (one unit per layer, BACKWARD_PRE prefetch, reduce-scatter \
                 overlapped)"
            }
            Framework::Meta => "Megatron-LM defaults (Dubey et al. 2024 §3.3.2: Megatron-style 4D)",
            Framework::HaiLlm => "Megatron-LM defaults (DeepSeek-AI 2024 §3.2: HAI-LLM)",
        }
    }

    /// The preset's knobs on a layout, for the knobs the user did not give (`given` says which
    /// were typed: those are kept).
    pub fn apply(self, l: &mut Layout, given: Given) {
        if !given.zero3_prefetch {
            l.zero3_prefetch = self.zero3_prefetch();
        }
        if !given.grad_all_reduce {
            l.grad_all_reduce = self.grad_all_reduce(l.zero, l.pp, l.precision);
        }
        if !given.overlap_dp {
            l.overlap_dp = self.overlap_dp(l.zero);
        }
        if !given.tp_overlap {
            l.tp_overlap = self.tp_overlap(l.tp, l.sp);
        }
        if !given.overlap_pp {
            l.overlap_pp = self.overlap_pp(l.interleave);
        }
    }
}

/// Which preset knobs the user typed (kept as typed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Given {
    pub zero3_prefetch: bool,
    pub grad_all_reduce: bool,
    pub overlap_dp: bool,
    pub tp_overlap: bool,
    pub overlap_pp: bool,
}

impl Given {
    /// Every knob typed: the preset changes nothing.
    pub const ALL: Given = Given {
        zero3_prefetch: true,
        grad_all_reduce: true,
        overlap_dp: true,
        tp_overlap: true,
        overlap_pp: true,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases_map_to_the_modelled_behaviour() {
        for f in Framework::ALL {
            assert_eq!(Framework::parse(f.name()), Some(f));
        }
        for (f, n) in Framework::ALL.iter().zip(Framework::NAMES) {
            assert_eq!(f.name(), n);
        }
        assert!(Framework::NAMES
            .iter()
            .all(|n| Framework::parse(n).is_some()));
        assert_eq!(
            Framework::parse("DeepSpeed"),
            Some(Framework::Deepspeed2021)
        );
        assert_eq!(Framework::parse("metaseq"), Some(Framework::Fsdp));
        assert_eq!(Framework::parse("torch"), None);
    }

    #[test]
    fn presets_set_only_untyped_knobs_and_follow_their_sources() {
        let base = Layout {
            tp: 4,
            pp: 12,
            zero: 1,
            interleave: 2,
            sp: true,
            ..Layout::default()
        };
        // BLOOM's case: DeepSpeed's bf16 pipeline engine all-reduces ZeRO-1's gradients.
        let mut l = base;
        Framework::MegatronDeepspeed.apply(&mut l, Given::default());
        assert!(l.grad_all_reduce && !l.overlap_dp && !l.tp_overlap);
        // fp16 goes through the ZeRO optimizer's reduce-scatter.
        let mut l = Layout {
            precision: ComputePrecision::Fp16,
            ..base
        };
        Framework::GptNeox.apply(&mut l, Given::default());
        assert!(!l.grad_all_reduce);
        // NeMo overlaps DP, TP (with SP) and the interleaved pipeline.
        let mut l = base;
        Framework::Nemo.apply(&mut l, Given::default());
        assert!(l.overlap_dp && l.tp_overlap && l.overlap_pp && !l.grad_all_reduce);
        // A typed knob is kept.
        let mut l = base;
        Framework::Nemo.apply(
            &mut l,
            Given {
                overlap_dp: true,
                ..Given::default()
            },
        );
        assert!(!l.overlap_dp && l.tp_overlap);
        // ZeRO-3 units.
        let mut l = Layout { zero: 3, ..base };
        Framework::Deepspeed2021.apply(&mut l, Given::default());
        assert_eq!(l.zero3_prefetch, Zero3Prefetch::Module);
        assert!(l.overlap_dp);
        Framework::Fsdp.apply(&mut l, Given::default());
        assert_eq!(l.zero3_prefetch, Zero3Prefetch::Layer);
        // Megatron-LM's preset is the planner's defaults.
        let mut l = base;
        Framework::MegatronLm.apply(&mut l, Given::default());
        assert_eq!(l, base);
    }
}

crate::names::from_str_by_parse!(Framework, "framework");

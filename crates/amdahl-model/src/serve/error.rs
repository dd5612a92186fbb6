//! Errors of the serving simulator: each names what is wrong, where (file, row, field) and how
//! to fix it.

use crate::infer::InferError;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum ServeError {
    /// The configuration itself (shape, TP/PP, memory): `infer`'s checks and messages.
    #[error(transparent)]
    Infer(#[from] InferError),
    #[error("{what} must be {want} (got {got})")]
    Flag {
        what: &'static str,
        want: &'static str,
        got: String,
    },
    #[error(
        "length distribution {text:?}: {why}; write fixed:N, uniform:LO:HI, lognormal:MEAN:SIGMA[:MAX] \
         (mean in tokens, sigma of the logarithm, an optional cap), e.g. lognormal:512:0.8, or a \
         data set of data/serve_datasets.csv: sharegpt, lmarena, cnn-dailymail, openorca"
    )]
    Lengths { text: String, why: String },
    #[error("{file}: no column `{column}` in the header; a trace needs arrival_s,input_tokens,output_tokens")]
    TraceColumn { file: String, column: &'static str },
    #[error("{file}: row {row}, field `{field}`: {why} (got {value:?})")]
    TraceField {
        file: String,
        row: usize,
        field: &'static str,
        value: String,
        why: &'static str,
    },
    #[error(
        "{file}: row {row}, field `arrival_s`: {arrival} s is before the previous row's {previous} s; \
         sort the trace by arrival time"
    )]
    TraceUnsorted {
        file: String,
        row: usize,
        arrival: f64,
        previous: f64,
    },
    #[error("{file}: the trace has no requests (a header and at least one row are needed)")]
    TraceEmpty { file: String },
    #[error(
        "{source_name}: request {row}: input {input} + output {output} = {total} tokens is beyond the \
         {context}-token context of {model}; shorten it, choose a model with a longer context, or give the \
         context your checkpoint serves with --seq N"
    )]
    Context {
        source_name: String,
        row: usize,
        input: u32,
        output: u32,
        total: u64,
        context: u32,
        model: String,
    },
    #[error(
        "{source_name}: request {row} needs {tokens} tokens of KV cache, more than the {capacity} \
         one replica holds ({blocks} blocks of {block} tokens); it could never be scheduled: use a \
         larger --tp, --kv-precision fp8, or shorter requests"
    )]
    KvTooSmall {
        source_name: String,
        row: usize,
        tokens: u64,
        capacity: u64,
        blocks: u64,
        block: u32,
    },
    #[error(
        "{source_name}: request {row}: input + output = {total} tokens is more than \
         --max-num-batched-tokens {budget}; with --num-scheduler-steps above 1 prompts are not \
         chunked (vLLM 0.6 multi-step) and must fit one iteration: raise --max-num-batched-tokens \
         to at least {total} or shorten the request"
    )]
    Unchunked {
        source_name: String,
        row: usize,
        total: u64,
        budget: u32,
    },
    #[error(
        "{replicas} replicas of tp {tp} × pp {pp} need {need} GPUs, but --gpus is {gpus}; use \
         --replicas {most} or fewer, or more --gpus"
    )]
    Replicas {
        replicas: u32,
        tp: u32,
        pp: u32,
        need: u64,
        gpus: u64,
        most: u64,
    },
    #[error(
        "no configuration sustains {rate:.3} requests/s: the most any does is {best:.3} requests/s \
         ({config}), whose queue still grew to {waiting} requests by {at_s:.1} s; lower --rate or \
         raise --gpus"
    )]
    NoneSustains {
        rate: f64,
        best: f64,
        config: String,
        waiting: u64,
        at_s: f64,
    },
    #[error(
        "no configuration meets the SLOs; the closest is {config}: p99 TTFT {ttft_ms:.1} ms, p99 \
         TPOT {tpot_ms:.2} ms ({ratio:.2}× the tightest SLO); loosen --slo-ttft-ms/--slo-tpot-ms, \
         lower --rate or raise --gpus"
    )]
    NoneMeetsSlo {
        config: String,
        ttft_ms: f64,
        tpot_ms: f64,
        ratio: f64,
    },
}

#!/usr/bin/env python3
"""Output lengths of MLPerf Inference's Llama-2-70B runs, from their TEST06 compliance logs.

Every Llama-2-70B submission carries compliance/<system>/llama2-70b-99[.9]/<scenario>/TEST06/
accuracy/mlperf_log_accuracy.json: one entry per generated sample (100 of them) with its
`token_count`, the number of tokens the model generated for that OpenOrca prompt. Pooled over
the submissions, they give the spread of output lengths that MLPerf's summary publishes only as
a mean (294.45 tokens). This prints the pooled count, mean and median, the σ of ln(tokens) (the
log-normal's maximum-likelihood σ, what data/serve_datasets.csv's `output_sigma` holds) and the
coefficient of variation, and the range of σ over the logs.

Used by data/serve_datasets.csv (`openorca`) and data/validation/serve.md.

    python3 scripts/analysis/mlperf_output_lengths.py RESULTS_DIR
        RESULTS_DIR: a checkout of mlcommons/inference_results_v4.1 (or any tree holding such
        logs); every file named mlperf_log_accuracy.json under a TEST06 directory of a
        llama2-70b result is read.
"""
import json
import math
import pathlib
import statistics
import sys


def logs(root):
    """The TEST06 accuracy logs of Llama-2-70B results under `root`, sorted."""
    return sorted(
        p
        for p in pathlib.Path(root).rglob("mlperf_log_accuracy.json")
        if "TEST06" in p.parts and any(part.startswith("llama2-70b") for part in p.parts)
    )


def sigma_ln(counts):
    return statistics.pstdev([math.log(c) for c in counts])


def summary(paths):
    """Pooled statistics of the token counts of every entry in `paths`."""
    per_log, pooled = [], []
    for p in paths:
        counts = [e["token_count"] for e in json.loads(p.read_text())]
        if counts:
            per_log.append(sigma_ln(counts))
            pooled += counts
    if not pooled:
        raise SystemExit("no TEST06 accuracy log of a llama2-70b result found")
    mean = statistics.mean(pooled)
    return {
        "logs": len(per_log),
        "outputs": len(pooled),
        "mean": mean,
        "median": statistics.median(pooled),
        "sigma_ln": sigma_ln(pooled),
        "cv": statistics.pstdev(pooled) / mean,
        "sigma_ln_per_log": [min(per_log), statistics.median(per_log), max(per_log)],
    }


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    s = summary(logs(sys.argv[1]))
    print(
        f"{s['logs']} logs, {s['outputs']} outputs: mean {s['mean']:.1f} tokens, median "
        f"{s['median']:.0f}, sigma of ln {s['sigma_ln']:.3f} (per log "
        f"{s['sigma_ln_per_log'][0]:.3f}-{s['sigma_ln_per_log'][2]:.3f}, median "
        f"{s['sigma_ln_per_log'][1]:.3f}), coefficient of variation {s['cv']:.3f}"
    )

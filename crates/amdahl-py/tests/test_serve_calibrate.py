"""``amdahl.serve`` and ``amdahl.calibrate`` give the CLI's results, and a calibration written
from Python is read back by ``amdahl.plan``."""

import json
import subprocess

import pytest

import amdahl
from amdahl import AmdahlError

# docs/usage/calibrate.md's rows: the model's own step times and powers with a GEMM efficiency of
# 0.60, 30 ms of overhead per step and a busy draw of 0.36 × TDP, rounded to three digits.
ROWS = """command,step_s,power_w
plan --model gpt3-125m --system h100 --gpus 1 --batch 8 --recompute none,0.165,407
plan --model gpt3-350m --system h100 --gpus 1 --batch 16 --mbs 2,0.764,488
plan --model gpt3-1.3b --system h100 --gpus 2 --tp 2 --batch 32 --mbs 4,1.5,506
plan --model gpt3-2.7b --system h100 --gpus 4 --tp 4 --batch 64 --mbs 2,3.34,459
plan --model gpt3-6.7b --system h100 --gpus 8 --tp 8 --batch 64,4.03,396
plan --model gpt3-760m --system h100 --gpus 1 --batch 4 --recompute none,0.239,457
"""
FIT = "gemm_efficiency,step_overhead_s,power_active"


def cli_json(amdahl_cmd, *args, cwd=None):
    out = subprocess.run([amdahl_cmd, *args, "--json"], capture_output=True, text=True, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_serve_equals_the_cli(amdahl_cmd):
    kw = dict(model="llama3-8b", system="h100", rate=4, requests=200, seed=7)
    py = amdahl.serve(**kw)
    cli = cli_json(amdahl_cmd, "serve", "--model", "llama3-8b", "--system", "h100", "--rate", "4",
                   "--requests", "200", "--seed", "7")
    assert py["schema"] == "amdahl.serve/1"
    assert py == cli


def test_serve_takes_the_engines_scheduling():
    # SGLang prefills apart by default and sizes its own limits (docs/usage/serve.md): 8,192-token
    # chunks below 160 GiB and, from the H100's cache over Llama 3.1's 131,072-token context,
    # its floor of 2,048 requests; `prefill_batching` overrides.
    kw = dict(model="llama3-8b", system="h100", rate=8, requests=200, engine="sglang")
    sglang = amdahl.serve(**kw)
    assert sglang["prefill_batching"] == "separate"
    assert (sglang["max_num_seqs"], sglang["max_num_batched_tokens"]) == (2048, 8192)
    assert amdahl.serve(prefill_batching="mixed", **kw)["prefill_batching"] == "mixed"
    with pytest.raises(AmdahlError, match="separate"):
        amdahl.serve(prefill_batching="chunked", **kw)


def test_serve_takes_the_client():
    # docs/usage/serve.md, "The client": the frontend's time (default 10.2 ms) is in every TTFT,
    # and max_concurrency keeps the requests in flight to N (a closed loop with rate="inf").
    kw = dict(model="llama3-8b", system="h100", rate=4, requests=100)
    http, local = amdahl.serve(**kw), amdahl.serve(frontend_ms=0, **kw)
    assert http["client"]["frontend_s"] == pytest.approx(0.0102, abs=1e-12)
    assert http["ttft_p50_s"] - local["ttft_p50_s"] == pytest.approx(0.0102, abs=1e-9)
    closed = amdahl.serve(model="llama3-8b", system="h100", rate="inf", requests=100,
                          max_concurrency=4)
    assert closed["client"]["max_concurrency"] == 4
    assert not closed["overloaded"]
    with pytest.raises(AmdahlError, match="max-concurrency"):
        amdahl.serve(max_concurrency=0, **kw)


def test_serve_finds_the_highest_rate_within_the_slos(amdahl_cmd):
    # docs/usage/serve.md, "The highest rate within the SLOs": max_rate=True is --max-rate, the
    # CLI's result; the failing rate lies within 1 % above the passing one.
    kw = dict(model="llama3-8b", system="h100", requests=300, max_rate=True, slo_tpot_ms=20)
    py = amdahl.serve(**kw)
    cli = cli_json(amdahl_cmd, "serve", "--model", "llama3-8b", "--system", "h100",
                   "--requests", "300", "--max-rate", "--slo-tpot-ms", "20")
    assert py["schema"] == "amdahl.serve-max-rate/1"
    assert py == cli
    assert py["max_rate_rps"] < py["first_failing_rps"] <= py["max_rate_rps"] * 1.01
    with pytest.raises(AmdahlError, match="max-rate"):
        amdahl.serve(search=True, **kw)


def test_calibrate_recovers_the_constants_and_plan_reads_them(amdahl_cmd, tmp_path):
    runs = tmp_path / "train.csv"
    runs.write_text(ROWS)
    out = tmp_path / "h100.json"
    py = amdahl.calibrate(runs, fit=FIT, out=out)
    assert py["schema"] == "amdahl.calibration/1"
    got = {c["name"]: c for c in py["constants"]}
    # The constants the rows were made with, within rounding to three digits: ±0.01, ±1 ms, ±0.01.
    assert got["gemm_efficiency"]["value"] == pytest.approx(0.60, abs=0.01)
    assert got["step_overhead_s"]["value"] == pytest.approx(0.030, abs=0.001)
    assert got["power_active"]["value"] == pytest.approx(0.36, abs=0.01)
    # Same numbers as the command (the CLI reads the CSV by its relative name, as typed).
    assert py["constants"] == cli_json(amdahl_cmd, "calibrate", str(runs), "--fit", FIT)["constants"]
    # The written calibration changes the plan it is given to, and the plan names it.
    layout = dict(model="gpt3-1.3b", system="h100", gpus=8, tp=2, batch=64)
    plain, tuned = amdahl.plan(**layout), amdahl.plan(**layout, calibration=out)
    assert tuned["step_time_s"] != plain["step_time_s"]
    assert "train.csv" in json.dumps(tuned)


def test_calibrate_refuses_a_bad_row(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("command,step_s\nplan --model gpt3-125m --system h100 --gpus 1 --batch 8,NaN\n")
    with pytest.raises(AmdahlError, match="line 2: step_s = NaN"):
        amdahl.calibrate(bad)

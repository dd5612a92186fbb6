"""Tests of the analysis scripts docs/methodology.md quotes (run by scripts/test)."""
import json
import pathlib
import subprocess
import sys

import pytest

from deepspeed_train_schedule import makespan

HERE = pathlib.Path(__file__).parent


@pytest.mark.parametrize("m", [1, 2, 3, 8, 33, 240])
@pytest.mark.parametrize("p", [1, 2, 3, 8, 35])
@pytest.mark.parametrize("f,b", [(1.0, 1.0), (1.0, 3.0), (2.0, 1.0)])
def test_train_schedule_is_1f1b_when_sends_are_free(m, p, f, b):
    # Narayanan et al. 2021 §2.2.1: 1F1B over m microbatches and p stages takes (m + p - 1)(F + B).
    assert makespan(m, p, f, b, 0.0) == pytest.approx((m + p - 1) * (f + b), rel=1e-12)


def test_train_schedule_pays_for_blocking_sends():
    # MT-NLG's shape (docs/methodology.md): each of the 2(m + p - 1) exchanges a stage waits
    # on costs a transfer: the makespan grows by about 1.2 % at sends of 1.25 % of a forward.
    free = makespan(240, 35, 1.0, 3.0, 0.0)
    paid = makespan(240, 35, 1.0, 3.0, 0.0125)
    assert 1.010 < paid / free < 1.013


def test_framework_factor_is_leave_one_out():
    runs = [
        {"name": "a", "framework": "x", "modelled": False, "error": 0.10},
        {"name": "b", "framework": "x", "modelled": False, "error": 0.20},
        {"name": "c", "framework": "y", "modelled": False, "error": 0.30},
        {"name": "d", "framework": "z", "modelled": True, "error": -0.05},
        {"name": "e", "framework": "z", "modelled": True, "error": 0.05},
    ]
    out = subprocess.run(
        [sys.executable, str(HERE / "framework_factor_loo.py")],
        input=json.dumps({"items": runs}), capture_output=True, text=True, check=True,
    ).stdout
    # a: 1.10 / 1.20 - 1 = -8.3 %; b: 1.20 / 1.10 - 1 = +9.1 %; c alone keeps +30 %;
    # modelled runs are never rescaled: mean (8.33 + 9.09 + 30 + 5 + 5) / 5 = 11.5 %.
    assert "-8.3%" in out and "+9.1%" in out
    assert "all 5 runs: mean |error| 11.5%, 1 beyond 12 %" in out


def test_mlperf_output_lengths_pool_the_test06_logs(tmp_path):
    # Two TEST06 logs of llama2-70b results and one of another benchmark (ignored): the pooled
    # σ of ln(tokens) is that of the six llama2 counts, e^1 … e^3 twice over: σ = sqrt(2/3).
    from mlperf_output_lengths import logs, summary

    def write(path, counts):
        path.mkdir(parents=True)
        (path / "mlperf_log_accuracy.json").write_text(
            json.dumps([{"qsl_idx": i, "token_count": c} for i, c in enumerate(counts)])
        )

    e = [round(2.718281828459045**k, 9) for k in (1, 2, 3)]
    write(tmp_path / "a/llama2-70b-99/Server/TEST06/accuracy", e)
    write(tmp_path / "b/llama2-70b-99.9/Offline/TEST06/accuracy", e)
    write(tmp_path / "c/gptj-99/Server/TEST06/accuracy", [1, 1000])
    s = summary(logs(tmp_path))
    assert (s["logs"], s["outputs"]) == (2, 6)
    assert s["sigma_ln"] == pytest.approx((2 / 3) ** 0.5, rel=1e-9)
    assert s["median"] == pytest.approx(e[1])

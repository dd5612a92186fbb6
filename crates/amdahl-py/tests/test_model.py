"""The modelling functions give the CLI's numbers and messages."""

import json
import subprocess

import pytest

import amdahl
from amdahl import AmdahlError


def cli(amdahl_cmd, *args):
    return subprocess.run([amdahl_cmd, *args], capture_output=True, text=True)


def test_plan_equals_the_cli_figure(amdahl_cmd):
    # The issue's example: Megatron 530B on 2,520 A100s (Narayanan et al., SC'21, Table 1).
    py = amdahl.plan(model="megatron-530b", system="a100-80gb", gpus=2520, tp=8, pp=35, mbs=1, batch=2520, recompute="full")
    out = cli(amdahl_cmd, "plan", "--model", "megatron-530b", "--system", "a100-80gb", "--gpus", "2520", "--tp", "8",
              "--pp", "35", "--mbs", "1", "--batch", "2520", "--recompute", "full", "--json")
    assert out.returncode == 0, out.stderr
    assert py["schema"].startswith("amdahl.plan")
    assert py["step_time_s"] == json.loads(out.stdout)["step_time_s"]
    assert py == json.loads(out.stdout)


def test_errors_carry_the_cli_message(amdahl_cmd):
    with pytest.raises(AmdahlError) as e:
        amdahl.plan(model="megatron-530b", system="a100-80gb", gpus=2521, tp=8, pp=35, batch=2520)
    out = cli(amdahl_cmd, "plan", "--model", "megatron-530b", "--system", "a100-80gb", "--gpus", "2521", "--tp", "8",
              "--pp", "35", "--batch", "2520")
    assert out.returncode == 1
    assert out.stderr.strip() == f"error: {e.value}"
    assert isinstance(e.value, ValueError)


def test_usage_errors_name_the_flag():
    with pytest.raises(AmdahlError, match="--gpus"):
        amdahl.plan(model="megatron-530b", system="a100-80gb", gpus="many", batch=8)
    with pytest.raises(AmdahlError, match="--warp-drive"):
        amdahl.plan(model="megatron-530b", warp_drive=9)
    # True is a switch; inside a list it has no meaning and is refused, not turned into "True".
    with pytest.raises(TypeError):
        amdahl.plan(model="megatron-530b", gpus=[True])


def test_fit_recovers_a_known_serial_fraction():
    # T(n) = 100 s × (0.05 + 0.95/n): Amdahl with serial fraction 0.05 exactly.
    points = [{"n": n, "time": 100 * (0.05 + 0.95 / n)} for n in (1, 2, 4, 8, 16, 32)]
    r = amdahl.fit(points)
    pairs = amdahl.fit([(p["n"], p["time"]) for p in points])
    assert r == pairs
    assert (r["schema"], r["source"]) == ("amdahl.fit/1", "points (Python)")
    model = next(m for m in r["series"][0]["models"] if m["model"] == "amdahl")
    # The exact data: serial fraction 0.05 to rounding, Karp-Flatt e = 0.05 at every N.
    assert model["serial_fraction"] == pytest.approx(0.05, abs=1e-12)
    assert all(p["karp_flatt"] == pytest.approx(0.05, abs=1e-12) for p in r["series"][0]["points"][1:])


def test_fit_refuses_bad_points():
    with pytest.raises(AmdahlError, match="no points"):
        amdahl.fit([])
    with pytest.raises(AmdahlError, match="pair"):
        amdahl.fit([(1, 2, 3)])


def test_carbon_equals_the_cli(amdahl_cmd):
    kw = dict(device="h100", count=8, hours=24, region="FR", pue=1.1)
    py = amdahl.carbon(**kw)
    out = cli(amdahl_cmd, "carbon", "--device", "h100", "--count", "8", "--hours", "24", "--region", "FR", "--pue", "1.1", "--json")
    assert out.returncode == 0, out.stderr
    assert py == json.loads(out.stdout)


def test_infer_equals_the_cli(amdahl_cmd):
    py = amdahl.infer(model="llama3-70b", system="h100", tp=4, precision="fp8")
    out = cli(amdahl_cmd, "infer", "--model", "llama3-70b", "--system", "h100", "--tp", "4", "--precision", "fp8", "--json")
    assert out.returncode == 0, out.stderr
    assert py["schema"].startswith("amdahl.infer")
    assert py == json.loads(out.stdout)


def test_the_console_command_is_the_cli(amdahl_cmd):
    out = cli(amdahl_cmd, "--version")
    assert out.returncode == 0 and out.stdout.startswith("amdahl ")
    bad = cli(amdahl_cmd, "plan", "--nope")
    assert bad.returncode == 2 and "--nope" in bad.stderr


def test_version_is_the_clis_and_names_the_distribution(amdahl_cmd):
    # One version for the package, the command and the records; the installed distribution is
    # `amdahl-ml` (PyPI's `amdahl` is another project that also installs a module `amdahl`).
    from importlib import metadata

    out = subprocess.run([amdahl_cmd, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["amdahl", amdahl.__version__]
    assert metadata.version("amdahl-ml") == amdahl.__version__
    with pytest.raises(metadata.PackageNotFoundError):
        metadata.version("amdahl")


def test_concurrent_calls_from_threads_equal_serial_calls():
    # The extension releases the GIL, so these calls really overlap; each thread's output
    # settings (--quiet, the captured result: crates/amdahl-cli/src/output.rs) are its own, so no
    # call may get another's result, nor its error.
    from concurrent.futures import ThreadPoolExecutor

    calls = []
    for i in range(16):
        layout = dict(model="gpt3-175b", system="a100-80gb", gpus=64 * (1 + i % 4), tp=8, pp=8, mbs=1 + i % 2,
                    batch=768 * (1 + i // 8), recompute="full")
        if i in (5, 11):
            layout["gpus"] = 65  # not a multiple of tp × pp: refused
        calls.append((amdahl.plan, layout))
        calls.append((amdahl.infer, dict(model=("llama3-8b", "llama3-70b")[i % 2], system="h100", tp=(1, 2, 4, 8)[i % 4],
                                         precision=("bf16", "fp8")[i % 2], output=128 * (1 + i % 3))))

    def outcome(fn, kw):
        try:
            return fn(**kw)
        except AmdahlError as e:
            return f"refused: {e}"

    def key(fn, kw):
        return fn.__name__, tuple(sorted(kw.items()))

    serial = {key(fn, kw): outcome(fn, kw) for fn, kw in calls}
    # Distinct answers, and some refusals among them, or a mix-up could go unnoticed.
    assert len({json.dumps(r, sort_keys=True) for r in serial.values()}) >= 20
    assert sum(isinstance(r, str) for r in serial.values()) == 2

    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [(key(fn, kw), pool.submit(outcome, fn, kw)) for fn, kw in calls]
        for k, f in futures:
            assert f.result() == serial[k], k

"""Projection of the whole run from its first units: equal units project exactly
enough, noisy ones get an interval that covers the truth. The 200-trial coverage check of the
method itself is a Rust unit test of the pure function
(amdahl-model `projection::tests::interval_covers_the_truth_in_at_least_90_percent_of_noisy_trials`);
here the same method runs end to end through the sampler and the fake counters."""

import json
import random
import time

import pytest

import amdahl
from amdahl import AmdahlError

FAST = dict(scope="machine", no_gpu=True, interval="10ms")
# Long enough for several 10 ms samples per unit.
UNIT_S = 0.05


def unit(powercap, t, joules, seconds=UNIT_S, pieces=25):
    # One unit: its energy drawn over its duration in small advances (a real counter moves
    # every ~1 ms), then step() as a training loop calls it. Returns the unit's wall time.
    t0 = time.perf_counter()
    powercap.burn(joules, seconds, pieces)
    t.step()
    return time.perf_counter() - t0


def test_equal_units_project_the_full_run_within_2_percent_after_3(powercap, tmp_path):
    out = tmp_path / "run.json"
    durations = []
    with amdahl.Tracker(output=out, total_steps=100, **FAST) as t:
        with pytest.raises(AmdahlError, match="no step has completed"):
            t.projection()
        for i in range(10):
            # 2 J in 50 advances of 40 mJ over 0.1 s: the staircase's steps are 2 % of a unit,
            # the resolution the boundaries between samples are interpolated to.
            durations.append(unit(powercap, t, 2.0, seconds=0.1, pieces=50))
            if i == 2:
                time.sleep(0.03)  # counts are marked at samples (every 10 ms here)
                after3 = t.projection()
        time.sleep(0.03)
        last = t.projection()
    # 100 units × 2 J, nothing else drawn (the fake counter is the only source).
    truth = 200.0
    assert after3["units_done"] == 3 and after3["units_total"] == 100
    assert after3["energy_j"] == pytest.approx(truth, rel=0.02)
    assert last["energy_j"] == pytest.approx(truth, rel=0.02)
    # 100 units as long as the ones measured (sleep overshoots on a loaded machine).
    assert last["duration_s"] == pytest.approx(100 * sum(durations[1:]) / 9, rel=0.1)
    # CO2e of the projected energy at the default 436 g/kWh, PUE 1.
    assert last["co2e_kg"] == pytest.approx(last["energy_j"] / 3.6e6 * 0.436, rel=1e-9)
    # The record written to the file carries the projection too.
    assert json.loads(out.read_text())["projection"]["units_total"] == 100


def test_noisy_units_interval_covers_the_truth_and_narrows(powercap):
    rng = random.Random(12)
    costs = [max(0.1, rng.gauss(3.0, 0.5)) for _ in range(40)]
    truth = sum(costs)
    widths = []
    with amdahl.Tracker(**FAST) as t:
        t.set_total(steps=40)
        for i, c in enumerate(costs[:12]):
            # 0.25 s units: a count is marked at the next 10 ms sample, and the energy drawn
            # until then belongs to the next unit; at 0.05 s units (and a sampler delayed by a
            # loaded CI machine) that leak was ~20 % of a unit, larger than the 0.5 J spread
            # under test, and the interval after 12 units came out wider than after 4.
            unit(powercap, t, c, seconds=0.25, pieces=50)
            if i + 1 in (4, 12):
                p = t.projection()
                lo, hi = p["energy_interval_j"]
                assert lo <= p["energy_j"] <= hi
                widths.append(hi - lo)
    # One trial cannot test a 95 % coverage (the Rust test does, over 200): here the interval
    # must be wired through end to end, so the truth lies within 3 half-widths (a miss there
    # has probability ~1e-4 under the model).
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    assert abs(truth - mid) <= 3 * half, (lo, truth, hi)
    # More units observed: a narrower interval (fewer units left, a better mean).
    assert widths[1] < widths[0]


def test_epochs_and_steps_are_separate_units(powercap):
    with amdahl.Tracker(total_epochs=4, total_steps=1000, **FAST) as t:
        for _ in range(3):
            for _ in range(5):
                unit(powercap, t, 1.0)
            t.epoch()
        p_epoch = t.projection()
        p_step = t.projection("step")
    assert p_epoch["unit"] == "epoch" and p_epoch["units_total"] == 4
    # 4 epochs of 5 J.
    assert p_epoch["energy_j"] == pytest.approx(20.0, rel=0.05)
    assert p_step["energy_j"] == pytest.approx(1000.0, rel=0.05)


def test_projection_needs_a_total_and_a_known_unit(powercap):
    with amdahl.Tracker(**FAST) as t:
        unit(powercap, t, 1.0)
        unit(powercap, t, 1.0)
        with pytest.raises(AmdahlError, match="set_total"):
            t.projection()
        with pytest.raises(AmdahlError, match="step"):
            t.projection("fortnight")
        with pytest.raises(AmdahlError, match="at least 1"):
            t.set_total(steps=0)


def test_log_every_logs_the_projection(powercap, caplog):
    caplog.set_level("INFO", logger="amdahl")
    with amdahl.Tracker(total_steps=10, log_every=2, **FAST) as t:
        for _ in range(6):
            unit(powercap, t, 1.0)
    lines = [r.getMessage() for r in caplog.records if "projected" in r.getMessage()]
    assert lines and "/10 steps" in lines[-1]

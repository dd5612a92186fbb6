"""amdahl.Tracker against a fake powercap tree: exact energies, the same file as `amdahl run`,
records kept through exceptions, SIGKILL and misuse."""

import csv
import json
import os
import platform
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import amdahl
from amdahl import AmdahlError

FAST = dict(scope="machine", no_gpu=True, interval="10ms")


def shape(v):
    """The key structure of a JSON value (what the schema fixes), values left out."""
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, list):
        return [shape(x) for x in v[:1]]
    return type(v).__name__ if not isinstance(v, (int, float)) or isinstance(v, bool) else "number"


def test_energy_is_the_sum_of_the_counter_advances(powercap, tmp_path):
    out = tmp_path / "run.json"
    with amdahl.Tracker(output=out, **FAST) as t:
        powercap.add(powercap.package, 2.0)
        time.sleep(0.05)
        powercap.add(powercap.package, 3.0)
        powercap.add(powercap.dram, 3.0)  # wraps: 1 J to the top + 2 J after zero
    r = t.record
    assert r["schema"] == "amdahl.run/1"
    assert (r["exit_code"], r["partial"]) == (0, False)
    energies = {d["id"]: d["energy_j"] for d in r["devices"]}
    # Exactly the advances: 5 J on the package, 3 J on dram (across its wrap).
    assert energies["intel-rapl:0"] == 5.0
    assert energies["intel-rapl:0:2"] == 3.0
    assert r["total_energy_j"] == 8.0
    # 8 J at PUE 1 and the world default 436 g/kWh (Ember 2022), as amdahl run states it.
    assert r["co2e_g"] == pytest.approx(8.0 / 3.6e6 * 436.0, rel=1e-12)
    # The file holds the returned record.
    assert json.loads(out.read_text()) == r


def test_output_file_has_the_same_schema_as_amdahl_run(powercap, tmp_path, amdahl_cmd):
    # The same counter advances measured by `amdahl run` around a child and by the tracker
    # around code in this process: the same fields, the same energies.
    py = f"import os; p={str(powercap.package / 'energy_uj')!r}; v=int(open(p).read())+4000000; open(p+'.t','w').write(str(v)); os.replace(p+'.t', p)"
    run_out, run_cc = tmp_path / "cli.json", tmp_path / "cli.csv"
    subprocess.run(
        [amdahl_cmd, "run", "--scope", "machine", "--no-gpu", "--interval", "10ms", "--region", "FR", "--pue", "1.1",
         "-o", str(run_out), "--codecarbon-csv", str(run_cc), "--", sys.executable, "-c", py],
        check=True, capture_output=True,
    )
    trk_out, trk_cc = tmp_path / "py.json", tmp_path / "py.csv"
    with amdahl.Tracker(region="FR", pue=1.1, output=trk_out, codecarbon_csv=trk_cc, **FAST):
        powercap.add(powercap.package, 4.0)
    a, b = json.loads(run_out.read_text()), json.loads(trk_out.read_text())
    # The tracker names its interpreter (CodeCarbon's `python_version`); `amdahl run` runs none.
    assert b.pop("python_version") == platform.python_version()
    assert "python_version" not in a
    assert shape(a) == shape(b)
    for k in ("schema", "scope", "pue", "total_energy_j", "energy_kwh", "co2e_g", "intensity", "host", "partial", "exit_code"):
        assert a[k] == b[k], k
    assert [(d["id"], d["energy_j"]) for d in a["devices"]] == [(d["id"], d["energy_j"]) for d in b["devices"]]
    # The CodeCarbon rows: the same header, the same energy and emissions columns.
    ra, rb = (list(csv.DictReader(p.open())) for p in (run_cc, trk_cc))
    assert list(ra[0]) == list(rb[0])
    for k in ("energy_consumed", "emissions", "country_name", "pue", "codecarbon_version"):
        assert ra[0][k] == rb[0][k], k
    assert (ra[0]["python_version"], rb[0]["python_version"]) == ("", platform.python_version())
    assert ra[0]["codecarbon_version"].startswith("3.3.2+amdahl.")


def test_project_names_the_record_and_the_codecarbon_row_as_amdahl_run_does(powercap, tmp_path, amdahl_cmd):
    run_out, run_cc = tmp_path / "cli.json", tmp_path / "cli.csv"
    subprocess.run(
        [amdahl_cmd, "run", "--scope", "machine", "--no-gpu", "--project", "bert-large",
         "-o", str(run_out), "--codecarbon-csv", str(run_cc), "--", "true"],
        check=True, capture_output=True,
    )
    trk_out, trk_cc = tmp_path / "py.json", tmp_path / "py.csv"
    with amdahl.Tracker(project="bert-large", output=trk_out, codecarbon_csv=trk_cc, **FAST) as t:
        pass
    assert t.record["project"] == "bert-large"
    assert json.loads(trk_out.read_text())["project"] == json.loads(run_out.read_text())["project"]
    ra, rb = (list(csv.DictReader(p.open())) for p in (run_cc, trk_cc))
    assert ra[0]["project_name"] == rb[0]["project_name"] == "bert-large"
    # The decorator passes it on; without a project the record has none and the row says amdahl.
    calls = []

    @amdahl.track(project="decorated", output=tmp_path / "d.json", **FAST)
    def train():
        calls.append(1)

    train()
    assert calls == [1] and json.loads((tmp_path / "d.json").read_text())["project"] == "decorated"
    with amdahl.Tracker(codecarbon_csv=tmp_path / "none.csv", **FAST) as t:
        pass
    assert "project" not in t.record
    assert next(csv.DictReader((tmp_path / "none.csv").open()))["project_name"] == "amdahl"
    with pytest.raises(AmdahlError, match="--project"):
        amdahl.Tracker(project="", **FAST).start()


def test_every_sample_rewrites_a_partial_record(powercap, tmp_path):
    out = tmp_path / "run.json"
    t = amdahl.Tracker(output=out, **FAST).start()
    powercap.add(powercap.package, 1.0)
    time.sleep(0.1)
    mid = json.loads(out.read_text())
    assert mid["partial"] is True and mid["exit_code"] is None
    assert mid["total_energy_j"] == 1.0
    assert t.so_far()["energy_j"] == 1.0
    t.stop()
    assert json.loads(out.read_text())["partial"] is False


def test_sigkill_mid_run_leaves_a_valid_partial_file(powercap, tmp_path):
    out = tmp_path / "run.json"
    script = textwrap.dedent(f"""
        import time, amdahl
        t = amdahl.Tracker(output={str(out)!r}, scope="machine", no_gpu=True, interval="20ms").start()
        time.sleep(60)
    """)
    p = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                if json.loads(out.read_text())["duration_s"] > 0.1:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.02)
        p.send_signal(signal.SIGKILL)
    finally:
        p.wait()
    assert p.returncode == -signal.SIGKILL
    r = json.loads(out.read_text())  # valid JSON: files are replaced by rename, never half-written
    assert r["schema"] == "amdahl.run/1"
    assert r["partial"] is True and r["exit_code"] is None
    assert r["duration_s"] > 0.1


def test_an_exception_still_writes_the_record_marked_with_its_type(powercap, tmp_path):
    out = tmp_path / "run.json"
    with pytest.raises(ZeroDivisionError):
        with amdahl.Tracker(output=out, **FAST):
            powercap.add(powercap.package, 2.0)
            1 / 0
    r = json.loads(out.read_text())
    assert (r["partial"], r["interrupted_by"], r["exit_code"]) == (True, "ZeroDivisionError", 1)
    assert r["total_energy_j"] == 2.0
    assert any("ZeroDivisionError" in w for w in r["warnings"])


def test_ctrl_c_inside_the_block_is_recorded_as_an_interruption(powercap, tmp_path):
    out = tmp_path / "run.json"
    with pytest.raises(KeyboardInterrupt):
        with amdahl.Tracker(output=out, **FAST):
            raise KeyboardInterrupt
    r = json.loads(out.read_text())
    # 130 = 128 + SIGINT, what a shell reports for a Ctrl-C'd program.
    assert (r["interrupted_by"], r["exit_code"]) == ("KeyboardInterrupt", 130)


def test_decorator_gives_each_call_its_record(powercap, tmp_path):
    out = tmp_path / "run.json"

    @amdahl.track(output=out, **FAST)
    def work(j):
        powercap.add(powercap.package, j)
        return j * 2

    assert work(1.5) == 3.0
    assert json.loads(out.read_text())["total_energy_j"] == 1.5
    work(2.5)
    assert json.loads(out.read_text())["total_energy_j"] == 2.5


def test_nested_trackers_each_keep_their_own_record(powercap, tmp_path):
    with amdahl.Tracker(output=tmp_path / "outer.json", **FAST) as outer:
        powercap.add(powercap.package, 1.0)
        time.sleep(0.03)
        with amdahl.Tracker(output=tmp_path / "inner.json", **FAST) as inner:
            powercap.add(powercap.package, 2.0)
        time.sleep(0.03)
    assert outer.record["run_id"] != inner.record["run_id"]
    assert inner.record["total_energy_j"] == 2.0
    assert outer.record["total_energy_j"] == 3.0


def test_misuse_gets_clear_errors(powercap, tmp_path):
    t = amdahl.Tracker(**FAST)
    with pytest.raises(AmdahlError, match="without start"):
        t.stop()
    t.start()
    with pytest.raises(AmdahlError, match="already running"):
        t.start()
    t.stop()
    with pytest.raises(AmdahlError, match="already been stopped"):
        t.stop()
    with pytest.raises(AmdahlError, match="new Tracker"):
        t.start()
    assert issubclass(AmdahlError, ValueError)


def test_unwritable_output_fails_before_the_work_starts(powercap, tmp_path):
    ran = []
    with pytest.raises(AmdahlError, match="cannot write an output file"):
        with amdahl.Tracker(output=tmp_path, **FAST):  # a directory
            ran.append(1)
    assert ran == []


def test_unknown_region_suggests_the_nearest_as_the_cli_does(powercap, amdahl_cmd):
    with pytest.raises(AmdahlError) as e:
        amdahl.Tracker(region="Frnace", **FAST).start()
    cli = subprocess.run([amdahl_cmd, "run", "--region", "Frnace", "--", "true"], capture_output=True, text=True)
    assert cli.returncode == 1
    assert "France" in str(e.value)
    assert cli.stderr.strip() == f"error: {e.value}"


def test_bad_option_values_are_usage_errors(powercap):
    with pytest.raises(AmdahlError, match="10ms"):
        amdahl.Tracker(interval="1ms").start()
    with pytest.raises(AmdahlError, match="scope"):
        amdahl.Tracker(scope="galaxy").start()
    with pytest.raises(AmdahlError, match="log_every"):
        amdahl.Tracker(log_every=0)


def test_fork_inside_the_block(powercap, tmp_path):
    # The child has no sampler thread: its stop() is refused, the parent's record is intact.
    out = tmp_path / "run.json"
    with amdahl.Tracker(output=out, **FAST) as t:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                t.stop()
                msg = b"stopped"
            except AmdahlError as e:
                msg = str(e).encode()
            os.write(w, msg[:500])
            os._exit(0)
        os.close(w)
        _, status = os.waitpid(pid, 0)
        said = os.read(r, 500).decode()
        powercap.add(powercap.package, 1.0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert "forked child" in said
    assert t.record["partial"] is False and t.record["total_energy_j"] == 1.0


def test_a_tracker_never_stopped_is_written_at_exit(powercap, tmp_path):
    out = tmp_path / "run.json"
    script = f"import amdahl; amdahl.Tracker(output={str(out)!r}, scope='machine', no_gpu=True, interval='10ms').start()"
    subprocess.run([sys.executable, "-c", script], check=True)
    r = json.loads(out.read_text())
    assert (r["partial"], r["interrupted_by"]) == (True, "InterpreterExit")


def test_process_scope_charges_this_process(tmp_path, monkeypatch):
    # No RAPL: the CPU is estimated from this process's CPU time (a busy loop of ~0.3 s).
    monkeypatch.setenv("AMDAHL_POWERCAP_ROOT", str(tmp_path / "none"))
    with amdahl.Tracker(scope="process", no_gpu=True, interval="50ms", cpu_tdp=100.0) as t:
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
    r = t.record
    assert r["scope"] == "process"
    # CPU time of the block, not of the interpreter's life before start(): 0.3 s ± 0.2.
    assert 0.2 <= r["cpu_time_s"] <= 0.6, r["cpu_time_s"]
    cpu = next(d for d in r["devices"] if d["kind"] == "cpu")
    assert cpu["energy_j"] > 0


def test_the_default_scope_is_the_machine_as_amdahl_run_and_codecarbon(powercap):
    # Regression: over a fake counter moving 5.5 J the tracker reported 0.18-2.2 J (its
    # CPU-time share) where `amdahl run` reported 5.5 J. Both now charge the machine by default.
    with amdahl.Tracker(no_gpu=True, interval="10ms") as t:
        powercap.burn(5.5, 0.2, 11)
        time.sleep(0.03)
    r = t.record
    assert r["scope"] == "machine"
    package = next(d for d in r["devices"] if d["id"] == "intel-rapl:0")
    assert package["energy_j"] == pytest.approx(5.5, abs=1e-6)
    assert "process_share" not in r or r["process_share"] is None

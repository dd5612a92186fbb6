"""The modelling commands as functions: keyword arguments are the command's flags
(``gpus=8`` is ``--gpus 8``, ``recompute="full"`` is ``--recompute full``, ``search=True`` is
``--search``; a list repeats the flag), the result is the command's ``--json`` as a dict, and a
refused input raises :class:`AmdahlError` with the message the CLI prints."""

# Only what every `import amdahl` needs is imported here: csv and tempfile when a model function
# runs (json only for a command that prints text rather than one result), typing only for type
# checkers. A training script that only tracks pays for none
# of them (about 4 MB of peak RSS together; scripts/bench/python_overhead.sh).
from __future__ import annotations

import os

from . import _native

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

    Point = Union[Mapping[str, Any], Sequence[Any]]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        raise TypeError("a bool is a switch: pass True to give the flag, False or None to leave it out")
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


def flags(options: Mapping[str, Any]) -> List[str]:
    """``{"gpus_per_node": 8, "search": True}`` → ``["--gpus-per-node", "8", "--search"]``."""
    out: List[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            out.append(flag)
        elif isinstance(value, (list, tuple)):
            for item in value:
                out += [flag, _text(item)]
        else:
            out += [flag, _text(value)]
    return out


def command(name: str, args: Sequence[str] = (), **options: Any) -> Dict[str, Any]:
    """Run ``amdahl NAME ARGS... --flags --json`` and return the result (built as Python objects
    by the extension, no JSON text in between)."""
    argv = ["--quiet", name, *args, *flags(options), "--json"]
    out = _native.call(argv)
    if isinstance(out, str):  # a command that prints its --json as text, not as one result
        import json

        return json.loads(out)
    return out


def plan(**options: Any) -> Dict[str, Any]:
    """``amdahl plan``: step time, memory and cost of a training layout (``search=True``: the
    best layouts). Result: schema ``amdahl.plan/1`` (or ``amdahl.plan-search/1``)."""
    return command("plan", **options)


def infer(**options: Any) -> Dict[str, Any]:
    """``amdahl infer``: serving latency, throughput, energy per token and carbon."""
    return command("infer", **options)


def carbon(**options: Any) -> Dict[str, Any]:
    """``amdahl carbon``: energy and emissions of a job, with a citable statement
    (``from_=path`` reads a saved result: ``from`` is a Python keyword)."""
    if "from_" in options:
        options["from"] = options.pop("from_")
    return command("carbon", **options)



def serve(**options: Any) -> Dict[str, Any]:
    """``amdahl serve``: a simulated request stream (continuous batching) with tail latencies and
    the energy of each request. Result: schema ``amdahl.serve/1`` (``search=True``:
    ``amdahl.serve-search/1``)."""
    return command("serve", **options)


def calibrate(runs: Union[str, "os.PathLike[str]"], **options: Any) -> Dict[str, Any]:
    """``amdahl calibrate RUNS.csv``: the model's constants fitted to measured runs (the CSV's
    ``command`` column typed as for the CLI, e.g. ``plan --model gpt3-125m --gpus 1 --batch 8``,
    beside ``step_s``, ``tokens_per_s``, ``ttft_s``, ``tpot_s`` or ``power_w``), each with its
    standard error and leave-one-out error. ``out=`` writes the calibration for
    ``plan(calibration=…)``/``infer(calibration=…)``. Result: schema ``amdahl.calibration/1``."""
    return command("calibrate", [os.fspath(runs)], **options)


def fit(points: Optional[Iterable[Point]] = None, file: Union[str, "os.PathLike[str]", None] = None, **options: Any) -> Dict[str, Any]:
    """``amdahl fit``: scaling laws fitted to measured runs.

    ``points``: dicts with the CSV columns ``fit`` reads (``{"n": 8, "time": 12.5}``; ``time``,
    ``throughput``, ``speedup`` or ``efficiency``), or ``(n, time)`` pairs. Or ``file=`` a CSV/JSON
    file, or ``builtin=True``."""
    import csv
    import tempfile
    from collections.abc import Mapping

    if points is None:
        args = [os.fspath(file)] if file is not None else []
        return command("fit", args, **options)
    if file is not None:
        raise _native.AmdahlError("fit: give points or file=, not both")
    rows = [dict(p) if isinstance(p, Mapping) else _pair(p) for p in points]
    if not rows:
        raise _native.AmdahlError("fit: no points (give at least two measured runs)")
    columns = list(rows[0])
    with tempfile.TemporaryDirectory(prefix="amdahl-fit-") as d:
        path = os.path.join(d, "points.csv")
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=columns, extrasaction="raise")
            w.writeheader()
            try:
                w.writerows(rows)
            except ValueError as e:
                raise _native.AmdahlError(f"fit: every point must have the columns {columns}: {e}") from None
        result = command("fit", [path], **options)
    # The temporary file is gone: name what the points really came from.
    result["source"] = "points (Python)"
    return result


def _pair(p: Sequence[Any]) -> Dict[str, Any]:
    if len(p) != 2:
        raise _native.AmdahlError(f"fit: a point is a dict or an (n, time) pair, not {p!r}")
    return {"n": p[0], "time": p[1]}

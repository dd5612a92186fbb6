"""``amdahl.Tracker``: ``amdahl run``'s measurement around code in this process.

The sampling runs on a Rust thread (no Python code, no GIL per sample); the result file, the
Prometheus textfile and the CodeCarbon row are written by the same code as ``amdahl run``'s, so
the files are the same (schema ``amdahl.run/1``), rewritten after every sample with
``partial: true`` until the end.

Imports are kept to what tracking needs (no json: the record comes back as a dict built in
Rust; logging and functools only when used; typing only for type checkers), so that tracking
adds little memory to a script (scripts/bench/python_overhead.sh measures it)."""

from __future__ import annotations

import _thread
import atexit
import os
import sys

from . import _native
from ._model import flags

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional, Union

# Trackers running now, stopped at interpreter exit so that no record is lost.
_running: "set[Tracker]" = set()
_running_lock = _thread.allocate_lock()


def _logger() -> Any:
    import logging

    return logging.getLogger("amdahl")


def _interval(value: Union[float, int, str]) -> str:
    if isinstance(value, bool):
        raise _native.AmdahlError("interval: a number of seconds or a duration such as '250ms'")
    return f"{value}s" if isinstance(value, (int, float)) else str(value)


class Tracker:
    """Measure the energy and emissions of the code between ``start()`` and ``stop()`` (or a
    ``with`` block), and project the whole run's cost from its first steps or epochs.

    The options are ``amdahl run``'s (see docs/usage/run.md): ``region`` (grid, e.g. ``"FR"``),
    ``pue``, ``output`` (the JSON record), ``codecarbon_csv``, ``project`` (the record's
    ``project`` and the CodeCarbon row's ``project_name``), ``prometheus`` (textfile),
    ``log`` (sample log), ``interval`` (seconds or ``"250ms"``), ``scope`` (``"machine"``: the whole
    node, the default, as ``amdahl run`` and CodeCarbon's ``EmissionsTracker`` measure;
    ``"process"``: this process and its children, by their CPU-time share), ``intensity``,
    ``catalog``, ``cpu_tdp``, ``no_gpu``, ``powercap_root``, ``hwmon_root``, ``baseline``. For
    projection:
    ``total_steps`` / ``total_epochs`` (or :meth:`set_total`), and ``log_every=N`` logs the
    projection to the ``amdahl`` logger every N steps (and every epoch when epochs are counted).
    """

    def __init__(
        self,
        region: Optional[str] = None,
        pue: Union[float, str, None] = None,
        output: Union[str, "os.PathLike[str]", None] = None,
        codecarbon_csv: Union[str, "os.PathLike[str]", None] = None,
        interval: Union[float, str] = 1.0,
        *,
        project: Optional[str] = None,
        scope: str = "machine",
        intensity: Optional[float] = None,
        prometheus: Union[str, "os.PathLike[str]", None] = None,
        log: Union[str, "os.PathLike[str]", None] = None,
        catalog: Optional[List[str]] = None,
        cpu_tdp: Optional[float] = None,
        no_gpu: bool = False,
        powercap_root: Union[str, "os.PathLike[str]", None] = None,
        hwmon_root: Union[str, "os.PathLike[str]", None] = None,
        baseline: Optional[str] = None,
        total_steps: Optional[int] = None,
        total_epochs: Optional[int] = None,
        log_every: Optional[int] = None,
        command: Optional[List[str]] = None,
    ) -> None:
        options: Dict[str, Any] = {
            "region": region,
            "pue": pue,
            "output": output,
            "codecarbon_csv": codecarbon_csv,
            "interval": _interval(interval),
            "project": project,
            "scope": scope,
            "intensity": intensity,
            "prometheus": prometheus,
            "log": log,
            "catalog": catalog,
            "cpu_tdp": cpu_tdp,
            "no_gpu": no_gpu,
            "powercap_root": powercap_root,
            "hwmon_root": hwmon_root,
            "baseline": baseline,
        }
        if log_every is not None and (isinstance(log_every, bool) or int(log_every) < 1):
            raise _native.AmdahlError(f"log_every={log_every!r}: a number of steps >= 1, or None")
        argv = command if command is not None else [os.path.basename(sys.executable or "python"), *sys.argv]
        self._native = _native.NativeTracker(flags(options), [str(a) for a in argv])
        self._log_every = log_every
        self.record: Optional[Dict[str, Any]] = None
        self.run_id: Optional[str] = None
        self.output = output
        if total_steps is not None or total_epochs is not None:
            self.set_total(steps=total_steps, epochs=total_epochs)
        if log_every is None:
            # The hot path: step() straight into Rust (one atomic add), no Python frame.
            self.step = self._native.step  # type: ignore[method-assign]
            self.epoch = self._native.epoch  # type: ignore[method-assign]

    # -- lifetime ---------------------------------------------------------------------------

    def start(self) -> "Tracker":
        """Start measuring. Raises :class:`AmdahlError`, before any work, for a bad option (an
        unknown region, an output path that cannot be written) or a tracker already used."""
        self.run_id = self._native.start()
        with _running_lock:
            _running.add(self)
        return self

    def stop(self, exception: Optional[BaseException] = None) -> Dict[str, Any]:
        """Stop, write the final record (and CodeCarbon row), and return the record as a dict
        (schema ``amdahl.run/1``). ``exception``: what ended the work early, if anything; the
        record is then ``partial`` with ``interrupted_by`` set to its type."""
        exc_type = type(exception).__name__ if exception is not None else None
        exc_msg = str(exception) if exception is not None else None
        try:
            self.record = self._native.stop(exc_type, exc_msg)
        finally:
            with _running_lock:
                _running.discard(self)
        if self._log_every is not None and self.record.get("projection"):
            self._log_projection(self.record["projection"])
        return self.record

    def __enter__(self) -> "Tracker":
        return self.start()

    def __exit__(self, et: Any, ev: Optional[BaseException], tb: Any) -> bool:
        self.stop(ev if ev is not None else (et() if et is not None else None))
        return False

    @property
    def running(self) -> bool:
        return bool(self._native.running())

    # -- progress and projection --------------------------------------------------------------

    def step(self, n: int = 1) -> int:
        """Mark ``n`` more training steps done; returns the count."""
        c = self._native.step(n)
        if self._log_every is not None and c % self._log_every < n:
            self._log_now()
        return c

    def epoch(self, n: int = 1) -> int:
        """Mark ``n`` more epochs done; returns the count."""
        c = self._native.epoch(n)
        if self._log_every is not None:
            self._log_now()
        return c

    def set_total(self, steps: Optional[int] = None, epochs: Optional[int] = None) -> None:
        """The run's length, for :meth:`projection`."""
        self._native.set_total(steps, epochs)

    def projection(self, unit: Optional[str] = None) -> Dict[str, Any]:
        """The whole run projected from the units done so far: ``duration_s``, ``energy_j``,
        ``co2e_kg`` with 95 % intervals (``*_interval_*``, null until enough units), and how.
        ``unit``: ``"step"`` or ``"epoch"`` (default: epochs when their total is set). Raises
        :class:`AmdahlError` before the first unit or without a total."""
        return self._native.projection(unit)

    def so_far(self) -> Dict[str, float]:
        """The run so far, at the latest sample: ``duration_s``, ``energy_j``, ``co2e_kg``."""
        t, e, kg = self._native.so_far()
        return {"duration_s": t, "energy_j": e, "co2e_kg": kg}

    def _log_now(self) -> None:
        try:
            p = self.projection()
        except _native.AmdahlError:
            return
        self._log_projection(p)

    @staticmethod
    def _log_projection(p: Dict[str, Any]) -> None:
        ci = p.get("energy_interval_j")
        spread = f" (95 % {ci[0] / 3.6e6:.4g}-{ci[1] / 3.6e6:.4g})" if ci else ""
        _logger().info(
            "amdahl: %d/%d %ss; whole run projected: %.4g kWh%s, %.4g kg CO2e, %.0f s",
            p["units_done"], p["units_total"], p["unit"], p["energy_j"] / 3.6e6, spread,
            p["co2e_kg"], p["duration_s"],
        )


def track(func: Optional[Callable[..., Any]] = None, **options: Any) -> Any:
    """Decorator: every call of the function runs under its own :class:`Tracker`
    (``@amdahl.track`` or ``@amdahl.track(region="FR", output="run.json")``)."""

    import functools

    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(f)
        def tracked(*args: Any, **kwargs: Any) -> Any:
            with Tracker(**options):
                return f(*args, **kwargs)

        return tracked

    return wrap(func) if func is not None else wrap


@atexit.register
def _stop_at_exit() -> None:
    # A tracker started without stop(): the interpreter is exiting, the record is written
    # (partial, interrupted_by "InterpreterExit") rather than lost.
    with _running_lock:
        left = list(_running)
    for t in left:
        try:
            t._native.stop("InterpreterExit", "the interpreter exited before stop()")
        except _native.AmdahlError:
            pass


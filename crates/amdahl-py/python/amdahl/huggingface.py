"""A Hugging Face ``transformers`` callback: ``Trainer(..., callbacks=[AmdahlCallback(region="FR",
output="run.json")])``. It starts a :class:`~amdahl.Tracker` at train begin (the run's length
from ``state.max_steps``), marks every step and epoch, adds the energy, CO2e and projection so
far to every log the Trainer writes (so they reach TensorBoard, W&B, … like the loss), and
stops at train end (``callback.record`` then holds the result).

``transformers`` is imported here only: ``import amdahl`` never needs it.
"""

from typing import Any, Dict, Optional

from ._native import AmdahlError
from ._tracker import Tracker

try:
    from transformers import TrainerCallback as _Base
except ImportError as _e:  # pragma: no cover - depends on the environment
    _missing: Optional[ImportError] = _e
    _Base = object
else:
    _missing = None


def metrics(tracker: Tracker) -> Dict[str, float]:
    """The figures added to the Trainer's logs, under ``amdahl/``."""
    now = tracker.so_far()
    out = {
        "amdahl/energy_kwh": now["energy_j"] / 3.6e6,
        "amdahl/co2e_kg": now["co2e_kg"],
    }
    try:
        p = tracker.projection()
    except AmdahlError:
        return out
    out["amdahl/projected_energy_kwh"] = p["energy_j"] / 3.6e6
    out["amdahl/projected_co2e_kg"] = p["co2e_kg"]
    out["amdahl/projected_duration_s"] = p["duration_s"]
    return out


class AmdahlCallback(_Base):  # type: ignore[misc,valid-type]
    """``transformers.TrainerCallback`` measuring the training with :class:`amdahl.Tracker`;
    keyword arguments are the tracker's."""

    def __init__(self, **tracker_options: Any) -> None:
        if _missing is not None:
            raise ImportError(f"amdahl.huggingface needs transformers: {_missing}")
        self.options = tracker_options
        self.tracker: Optional[Tracker] = None
        self.record: Optional[Dict[str, Any]] = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        opts = dict(self.options)
        if state.max_steps and state.max_steps > 0:
            opts.setdefault("total_steps", state.max_steps)
        self.tracker = Tracker(**opts).start()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.tracker is not None:
            self.tracker.step()

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.tracker is not None:
            self.tracker.epoch()

    def on_log(self, args: Any, state: Any, control: Any, logs: Optional[Dict[str, Any]] = None, **kwargs: Any) -> None:
        # The Trainer hands the same dict to every callback, the reporting ones (TensorBoard,
        # W&B, …) after the user's: figures added here are logged with the loss.
        if self.tracker is not None and logs is not None:
            logs.update(metrics(self.tracker))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.tracker is not None:
            self.record = self.tracker.stop()
            self.tracker = None

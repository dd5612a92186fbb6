"""A PyTorch Lightning callback: ``Trainer(callbacks=[AmdahlCallback(region="FR",
output="run.json")])``. It starts a :class:`~amdahl.Tracker` when training starts (the run's
length from ``trainer.estimated_stepping_batches`` or ``max_steps``, epochs from
``max_epochs``), marks every batch and epoch, logs the energy, CO2e and projection so far to
``trainer.loggers`` at every epoch end, and stops when training ends (``callback.record`` then
holds the result).

Lightning is imported here only (``lightning`` or the older ``pytorch_lightning``):
``import amdahl`` never needs it.
"""

from typing import Any, Dict, Optional

from ._tracker import Tracker
from .huggingface import metrics

try:
    from lightning.pytorch.callbacks import Callback as _Base
except ImportError:
    try:
        from pytorch_lightning.callbacks import Callback as _Base
    except ImportError:  # pragma: no cover - depends on the environment
        _Base = object


def _positive_int(x: Any) -> Optional[int]:
    try:
        v = int(x)
    except (TypeError, ValueError, OverflowError):
        return None  # inf (an unbounded run) or unset
    return v if v > 0 else None


class AmdahlCallback(_Base):  # type: ignore[misc,valid-type]
    """``lightning.pytorch.callbacks.Callback`` measuring training with :class:`amdahl.Tracker`;
    keyword arguments are the tracker's."""

    def __init__(self, **tracker_options: Any) -> None:
        super().__init__()
        self.options = tracker_options
        self.tracker: Optional[Tracker] = None
        self.record: Optional[Dict[str, Any]] = None

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        opts = dict(self.options)
        steps = _positive_int(getattr(trainer, "estimated_stepping_batches", None)) or _positive_int(
            getattr(trainer, "max_steps", None)
        )
        if steps:
            opts.setdefault("total_steps", steps)
        epochs = _positive_int(getattr(trainer, "max_epochs", None))
        if epochs:
            opts.setdefault("total_epochs", epochs)
        self.tracker = Tracker(**opts).start()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.tracker is not None:
            self.tracker.step()

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if self.tracker is None:
            return
        self.tracker.epoch()
        m = metrics(self.tracker)
        for logger in getattr(trainer, "loggers", None) or []:
            logger.log_metrics(m, step=getattr(trainer, "global_step", None))

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.tracker is not None:
            self.record = self.tracker.stop()
            self.tracker = None

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        # Lightning calls this instead of on_train_end when training fails (Ctrl-C included):
        # the record is still written, marked with the exception.
        if self.tracker is not None:
            self.record = self.tracker.stop(exception)
            self.tracker = None

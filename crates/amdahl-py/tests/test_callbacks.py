"""The training-framework callbacks (Hugging Face, Lightning).

Hugging Face: the real `transformers` (installed without PyTorch; its TrainerCallback,
TrainerState, TrainerControl and CallbackHandler, the Trainer's own dispatcher, need none).
Lightning: its wheel needs PyTorch (GBs), too heavy for CI, so the callback is driven by a
stand-in trainer calling the hooks with Lightning's signatures and order (Trainer.fit:
on_train_start, then per batch on_train_batch_end(trainer, pl_module, outputs, batch,
batch_idx), per epoch on_train_epoch_end(trainer, pl_module), then on_train_end; on_exception
on failure), and loggers with Lightning's `log_metrics(metrics, step)`."""

import json
import time
import types

import pytest

FAST = dict(scope="machine", no_gpu=True, interval="10ms")


def test_hugging_face_callback_through_the_real_callback_handler(powercap, tmp_path):
    transformers = pytest.importorskip("transformers")
    from transformers.trainer_callback import CallbackHandler, TrainerControl, TrainerState

    from amdahl.huggingface import AmdahlCallback

    cb = AmdahlCallback(output=tmp_path / "run.json", **FAST)
    assert isinstance(cb, transformers.TrainerCallback)
    handler = CallbackHandler([cb], model=None, processing_class=None, optimizer=None, lr_scheduler=None)
    args = types.SimpleNamespace()
    state = TrainerState(max_steps=20, num_train_epochs=2)
    control = TrainerControl()
    handler.on_train_begin(args, state, control)
    logged = []
    for epoch in range(2):
        handler.on_epoch_begin(args, state, control)
        for _ in range(4):
            handler.on_step_begin(args, state, control)
            powercap.burn(1.5, 0.04)
            state.global_step += 1
            handler.on_step_end(args, state, control)
        logs = {"loss": 0.5}
        handler.on_log(args, state, control, logs)
        logged.append(logs)
        handler.on_epoch_end(args, state, control)
    handler.on_train_end(args, state, control)
    # 8 steps × 1.5 J, exactly.
    assert cb.record["total_energy_j"] == 12.0
    assert json.loads((tmp_path / "run.json").read_text())["partial"] is False
    assert logged[-1]["loss"] == 0.5
    assert logged[-1]["amdahl/energy_kwh"] == pytest.approx(12.0 / 3.6e6, rel=0.2)
    # 20 steps of 1.5 J, projected from the first 8 (the step total comes from max_steps).
    assert logged[-1]["amdahl/projected_energy_kwh"] == pytest.approx(30.0 / 3.6e6, rel=0.05)
    assert cb.record["projection"]["units_total"] == 20


class Logger:
    def __init__(self):
        self.rows = []

    def log_metrics(self, metrics, step=None):
        self.rows.append((step, dict(metrics)))


class StandInTrainer:
    """What the callback reads of lightning.Trainer."""

    def __init__(self, epochs, batches):
        self.max_epochs = epochs
        self.max_steps = -1  # Lightning's "unset"
        self.estimated_stepping_batches = epochs * batches
        self.loggers = [Logger()]
        self.global_step = 0

    def fit(self, callbacks, batches, fail_at=None, powercap=None):
        for cb in callbacks:
            cb.on_train_start(self, None)
        try:
            for _ in range(self.max_epochs):
                for i in range(batches):
                    if fail_at == self.global_step:
                        raise RuntimeError("CUDA out of memory")
                    powercap.burn(2.0, 0.03)
                    self.global_step += 1
                    for cb in callbacks:
                        cb.on_train_batch_end(self, None, None, None, i)
                for cb in callbacks:
                    cb.on_train_epoch_end(self, None)
        except BaseException as e:
            for cb in callbacks:
                cb.on_exception(self, None, e)
            raise
        for cb in callbacks:
            cb.on_train_end(self, None)


def test_lightning_callback_with_a_stand_in_trainer(powercap, tmp_path):
    from amdahl.lightning import AmdahlCallback

    cb = AmdahlCallback(output=tmp_path / "run.json", **FAST)
    trainer = StandInTrainer(epochs=4, batches=3)
    trainer.fit([cb], batches=3, powercap=powercap)
    assert cb.record["total_energy_j"] == 24.0
    rows = trainer.loggers[0].rows
    assert [step for step, _ in rows] == [3, 6, 9, 12]
    last = rows[-1][1]
    assert last["amdahl/energy_kwh"] == pytest.approx(24.0 / 3.6e6, rel=0.2)
    # By epochs (max_epochs is known): 4 epochs of 6 J.
    assert rows[2][1]["amdahl/projected_energy_kwh"] == pytest.approx(24.0 / 3.6e6, rel=0.1)


def test_lightning_failure_still_writes_the_record(powercap, tmp_path):
    from amdahl.lightning import AmdahlCallback

    cb = AmdahlCallback(output=tmp_path / "run.json", **FAST)
    trainer = StandInTrainer(epochs=2, batches=3)
    with pytest.raises(RuntimeError):
        trainer.fit([cb], batches=3, fail_at=4, powercap=powercap)
    r = json.loads((tmp_path / "run.json").read_text())
    assert (r["partial"], r["interrupted_by"], r["total_energy_j"]) == (True, "RuntimeError", 8.0)


def test_import_amdahl_needs_neither_framework():
    import subprocess
    import sys

    code = "import sys, amdahl; assert 'transformers' not in sys.modules and 'lightning' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)

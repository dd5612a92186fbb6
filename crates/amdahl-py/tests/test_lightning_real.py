"""The Lightning callback inside a real `lightning.Trainer.fit`.

Lightning needs PyTorch (~5 GB with its CUDA libraries from PyPI), too heavy for CI, so these
tests skip where `lightning` is not installed and CI runs the stand-in trainer of
test_callbacks.py instead. To run them: `target/py-venv/bin/pip install lightning` (the CPU is
enough), then `scripts/test python`. Last run: lightning 2.6.6, torch 2.15.0, 2026-12-01.
"""

import json

import pytest

lightning = pytest.importorskip("lightning", reason="Lightning not installed (pip install lightning)")
torch = pytest.importorskip("torch")

from lightning.pytorch.loggers import Logger  # noqa: E402

FAST = dict(scope="machine", no_gpu=True, interval="10ms")
JOULES_PER_BATCH = 2.0


class CaptureLogger(Logger):
    """A real Lightning logger that keeps what it is given."""

    def __init__(self):
        super().__init__()
        self.rows = []

    @property
    def name(self):
        return "capture"

    @property
    def version(self):
        return 0

    def log_hyperparams(self, params, *args, **kwargs):
        pass

    def log_metrics(self, metrics, step=None):
        self.rows.append((step, dict(metrics)))


class Burner(lightning.LightningModule):
    """One linear layer; each training batch also draws JOULES_PER_BATCH on the fake counter."""

    def __init__(self, powercap, fail_at=None):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.powercap = powercap
        self.fail_at = fail_at

    def training_step(self, batch, batch_idx):
        if self.fail_at is not None and self.global_step == self.fail_at:
            raise RuntimeError("CUDA out of memory")
        self.powercap.burn(JOULES_PER_BATCH, 0.02)
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def fit(powercap, cb, epochs, batches, fail_at=None):
    data = torch.utils.data.TensorDataset(torch.randn(batches * 2, 4), torch.randn(batches * 2, 1))
    logger = CaptureLogger()
    trainer = lightning.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=epochs,
        callbacks=[cb],
        logger=logger,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Burner(powercap, fail_at), torch.utils.data.DataLoader(data, batch_size=2))
    return logger


def test_lightning_callback_in_a_real_trainer(powercap, tmp_path):
    from amdahl.lightning import AmdahlCallback

    cb = AmdahlCallback(output=tmp_path / "run.json", **FAST)
    logger = fit(powercap, cb, epochs=3, batches=4)
    # 12 batches × 2 J, exactly: nothing else advances the fake counter.
    assert cb.record["total_energy_j"] == 12 * JOULES_PER_BATCH
    assert json.loads((tmp_path / "run.json").read_text())["partial"] is False
    # The run's length came from the real trainer (max_epochs = 3): the projection counts epochs.
    assert cb.record["projection"]["units_total"] == 3
    ours = [(step, m) for step, m in logger.rows if "amdahl/energy_kwh" in m]
    assert [step for step, _ in ours] == [4, 8, 12]
    # After epoch 2 of 3 (8 batches), the projection of the whole run is 24 J.
    assert ours[1][1]["amdahl/projected_energy_kwh"] == pytest.approx(24.0 / 3.6e6, rel=0.05)


def test_lightning_failure_inside_a_real_trainer_still_writes_the_record(powercap, tmp_path):
    from amdahl.lightning import AmdahlCallback

    cb = AmdahlCallback(output=tmp_path / "run.json", **FAST)
    with pytest.raises(RuntimeError, match="out of memory"):
        fit(powercap, cb, epochs=2, batches=4, fail_at=5)
    r = json.loads((tmp_path / "run.json").read_text())
    assert (r["partial"], r["interrupted_by"], r["total_energy_j"]) == (True, "RuntimeError", 10.0)

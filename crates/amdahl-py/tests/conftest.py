"""Shared fixtures: a fake powercap tree (the real sysfs layout in a temp dir, as the Rust CLI
tests build it in crates/amdahl-cli/tests/cli/run.rs) whose counters the test advances by known
amounts, so measured energies are exact."""

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Optional

import pytest

# Wrap point of the package counter, as a real Intel package reports it.
MAX = 262_143_328_850


class Powercap:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.package = root / "intel-rapl:0"
        self.dram = root / "intel-rapl:0" / "intel-rapl:0:2"
        self._zone(self.package, "package-0", 1_000_000, MAX)
        self._zone(root / "intel-rapl:0" / "intel-rapl:0:0", "core", 500_000, MAX)
        # dram 1 J below its wrap point: the first 3 J wrap it.
        self._zone(self.dram, "dram", 65_712_999_613 - 1_000_000, 65_712_999_613)

    @staticmethod
    def _zone(d: Path, name: str, uj: int, top: int) -> None:
        d.mkdir(parents=True, exist_ok=True)
        (d / "name").write_text(f"{name}\n")
        (d / "energy_uj").write_text(f"{uj}\n")
        (d / "max_energy_range_uj").write_text(f"{top}\n")

    def burn(self, joules: float, seconds: float, pieces: int = 10, zone: Optional[Path] = None) -> None:
        """Draw `joules` over `seconds` at constant power, as a real counter does (it advances
        about every millisecond): `pieces` equal advances, each after an equal wait."""
        for _ in range(pieces):
            time.sleep(seconds / pieces)
            self.add(zone or self.package, joules / pieces)

    def add(self, zone: Path, joules: float) -> None:
        """Advance a counter by `joules`, wrapping at its max as RAPL does."""
        uj = int((zone / "energy_uj").read_text())
        top = int((zone / "max_energy_range_uj").read_text())
        new = (uj + round(joules * 1e6)) % top
        tmp = zone / "energy_uj.tmp"
        tmp.write_text(f"{new}\n")
        os.replace(tmp, zone / "energy_uj")


@pytest.fixture
def powercap(tmp_path, monkeypatch):
    for var in ("SLURM_PROCID", "SLURM_LOCALID", "LOCAL_RANK", "RANK", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(var, raising=False)
    pc = Powercap(tmp_path / "powercap")
    monkeypatch.setenv("AMDAHL_POWERCAP_ROOT", str(pc.root))
    return pc


@pytest.fixture
def amdahl_cmd():
    """The `amdahl` command the wheel installs (beside this interpreter)."""
    exe = Path(sys.executable).parent / "amdahl"
    if not exe.exists():
        found = shutil.which("amdahl")
        assert found, "the wheel's `amdahl` console script is not installed"
        exe = Path(found)
    return str(exe)

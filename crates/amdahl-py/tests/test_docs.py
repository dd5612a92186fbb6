"""Docs that are executed, the Python half: every ```python block of README.md and
docs/usage/python.md runs here against the installed wheel, in a fresh folder, as a user pastes
it (the console blocks are run by crates/amdahl-cli/tests/cli/docs.rs). A block whose info string
says `python needs=torch` is shown, not run: it needs a training framework CI does not install
(the callbacks themselves are tested in test_callbacks.py and test_lightning_real.py)."""

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGES = ["README.md", "docs/usage/python.md"]
FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```$", re.M | re.S)


def blocks():
    for page in PAGES:
        text = (ROOT / page).read_text()
        for m in FENCE.finditer(text):
            line = text[: m.start()].count("\n") + 1
            yield pytest.param(m.group(1).strip(), m.group(2), id=f"{page}:{line}")


def test_every_page_has_python_examples():
    ids = [p.id for p in blocks()]
    for page in PAGES:
        assert any(i.startswith(page + ":") for i in ids), f"no python block in {page}"


@pytest.mark.parametrize("tags,code", list(blocks()))
def test_example_runs(tags, code, powercap, tmp_path, monkeypatch):
    if "needs=" in tags:
        pytest.skip(f"shown, not run: {tags}")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "amdahl-out").mkdir()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<docs example>", "exec"), {"__name__": "__docs__"})
    # Every example prints what it computed: nothing printed means it did not get there.
    assert out.getvalue().strip(), "the example printed nothing"

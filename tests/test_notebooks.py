"""The notebooks run top to bottom on the committed reports (nbclient, this Python's ipykernel),
and are committed without outputs."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_the_notebooks_exist():
    names = [p.name for p in NOTEBOOKS]
    assert names[:3] == ["01_profile_a_version.ipynb", "02_diff_two_versions.ipynb", "03_bottleneck_migration.ipynb"]
    assert "05_profile_live.ipynb" in names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stripped_in_git(path):
    """What git holds (the committed blob when tracked, else the file) has no outputs or counts."""
    rel = path.relative_to(ROOT).as_posix()
    shown = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=ROOT, capture_output=True, text=True)
    text = shown.stdout if shown.returncode == 0 else path.read_text()
    for source in {text, path.read_text()}:
        nb = nbformat.reads(source, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, f"{rel}: outputs not stripped"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "from profiler import" in code  # logic lives in the package
    assert not re.search(r"^\s*(def|class)\s", code, re.M)  # no logic of their own
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.get("output_type") == "error"]
    assert not errors
    # every figure cell produced a plotly figure
    figs = [c for c in nb.cells if c.cell_type == "code" and ".show()" in c.source]
    for c in figs:
        assert any("application/vnd.plotly.v1+json" in o.get("data", {}) or "text/html" in o.get("data", {})
                   for o in c.outputs), c.source

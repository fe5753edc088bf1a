"""Every notebook runs top to bottom in a real kernel (nbclient), in a scratch folder, in under 2 GB.

The memory bound is docs/course.md's: the kernel, the explorer's worker and every other child of
the kernel together (their proportional set sizes summed, read every 0.1 s: a page they share
counts once, as in a container's limit), since Binder gives a visitor 1-2 GB for all of them.
``benchmarks/notebook_benchmark.py`` prints the figures.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import nbformat
import pytest

from tests.notebooks.executor import execute_with_memory

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MEMORY_LIMIT = 2 * 2**30
"""Kernel + worker + children, summed proportional set sizes: the most a Binder visitor may have."""


COURSE = [
    "00_tour.ipynb",
    "01_why_compilers.ipynb",
    "02_exporting.ipynb",
    "03_graph_optimisation.ipynb",
    "04_onnx_runtime.ipynb",
    "05_tvm.ipynb",
    "06_mobile_npu.ipynb",
    "07_pitfalls.ipynb",
    "08_mlir.ipynb",
    "09_llm.ipynb",
]
"""The course's chapters in order (docs/course.md); explorer.ipynb is the Voila app, not a chapter."""

NEEDS = {"08_mlir.ipynb": ("iree.compiler", "iree.runtime")}
"""Modules a notebook cannot run without that an optional extra installs (``iree``): skipped without them."""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # its parent package is missing
        return False


def test_the_course_has_ten_chapters_and_the_app() -> None:
    assert [p.name for p in NOTEBOOKS] == sorted([*COURSE, "explorer.ipynb"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path: Path, tmp_path: Path) -> None:
    missing = [m for m in NEEDS.get(path.name, ()) if not _installed(m)]
    if missing:
        pytest.skip(f"{path.name} needs {', '.join(missing)} (pip install 'onnx-graph-explorer[iree]')")
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    notebook = nbformat.read(copy, as_version=4)
    run = execute_with_memory(notebook, "python3", tmp_path)
    errors, peak = run.errors, run.peak
    assert not errors, errors[0]["evalue"] if errors else ""
    assert peak.peak_pss_bytes < MEMORY_LIMIT, (
        f"{path.name}: kernel + worker + children peaked at {peak.peak_pss_mib:.0f} MiB"
        f" (PSS; {peak.peak_mib:.0f} MiB RSS over {peak.processes_at_peak} processes),"
        " over the 2 GB a Binder visitor gets"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_are_committed_without_outputs(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    assert all(
        not c.get("outputs") and c.get("execution_count") is None
        for c in notebook.cells
        if c.cell_type == "code"
    )

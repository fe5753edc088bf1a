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
MEMORY_LIMIT = int(1.5 * 2**30)
"""Kernel + worker + children, summed proportional set sizes: docs/course.md's 1.5 GB, so that a
Binder visitor's 2 GB leaves room for the browser's tab and the server."""


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
        " over the 1.5 GB a chapter may take (a Binder visitor gets 2 GB)"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_are_committed_without_outputs(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    assert all(
        not c.get("outputs") and c.get("execution_count") is None
        for c in notebook.cells
        if c.cell_type == "code"
    )


CHAPTERS = [name for name in COURSE if name != "00_tour.ipynb"]
"""The nine chapters (the tour is an introduction, not a chapter)."""


def _tagged(notebook: nbformat.NotebookNode, tag: str) -> list[nbformat.NotebookNode]:
    return [c for c in notebook.cells if tag in c.get("metadata", {}).get("tags", [])]


@pytest.mark.parametrize("name", CHAPTERS)
def test_chapter_keeps_its_claims_checked(name: str) -> None:
    """docs/course.md: a claim a library upgrade could make untrue has a hidden ``assert`` behind it.

    ``test_notebook_runs`` executes those cells, so a course that has become untrue fails CI.
    """
    notebook = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    checks = _tagged(notebook, "check")
    assert checks, f"{name}: no hidden check cell (tags: ['check'])"
    for cell in checks:
        assert cell.cell_type == "code" and cell.metadata.get("jupyter", {}).get("source_hidden"), cell.source
        assert cell.source.startswith("# Check (hidden):") and "assert " in cell.source, cell.source[:200]


@pytest.mark.parametrize("name", CHAPTERS)
def test_chapter_has_a_design_task_and_a_reading_list(name: str) -> None:
    notebook = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    design = _tagged(notebook, "design")
    assert design and all(c.source.startswith("### Exercise") for c in design), (
        f"{name}: no exercise marked as a design task (tags: ['design'])"
    )
    headings = [
        line.strip() for c in notebook.cells if c.cell_type == "markdown" for line in c.source.splitlines()
    ]
    assert "## Reading list" in headings and "## Recap" in headings, name
    assert headings.index("## Reading list") < headings.index("## Recap"), name

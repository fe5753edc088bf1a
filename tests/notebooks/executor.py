"""Run a notebook in a fresh kernel while its process tree's memory is sampled: the tests' one runner.

Examples
--------
>>> import nbformat, tempfile
>>> nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 / 0")])
>>> run = execute_with_memory(nb, "python3", tempfile.mkdtemp())  # doctest: +SKIP
>>> run.errors[0]["ename"]  # doctest: +SKIP
'ZeroDivisionError'
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbclient import NotebookClient

from explorer.isolation.process_memory import MemoryPeak, ProcessTreeSampler

__all__ = ["NotebookExecution", "execute_with_memory"]


@dataclass(frozen=True)
class NotebookExecution:
    """What one run of a notebook left: its error outputs (the notebook holds every output) and its peak.

    Attributes
    ----------
    errors : list of dict
        The ``error`` outputs of its code cells, in order.
    peak : MemoryPeak
        The kernel's tree (the kernel, the explorer's worker, every other child) at its largest.
    """

    errors: list[dict[str, Any]]
    peak: MemoryPeak


def execute_with_memory(
    notebook: Any, kernel_name: str, cwd: str | Path, *, timeout: int = 300
) -> NotebookExecution:
    """Execute ``notebook`` (in place) in a fresh ``kernel_name`` kernel working in ``cwd``.

    Widget state is stored in the notebook, as a saved notebook would hold it. The memory of
    the kernel's process tree is read every 0.1 s from the moment the kernel is up.
    """
    sampler = ProcessTreeSampler(interval_s=0.1)

    def sample_kernel(**_: object) -> None:
        sampler.start(client.km.provisioner.pid)  # the kernel's tree, once it is up

    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(cwd)}},
        store_widget_state=True,
        on_notebook_start=sample_kernel,
    )
    try:
        client.execute()
    finally:
        peak = sampler.stop()
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.output_type == "error"
    ]
    return NotebookExecution(errors, peak)

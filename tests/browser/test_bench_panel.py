"""The BenchPanel in a real JupyterLab: a small benchmark, both runtimes shown, the graph coloured by time."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.browser.jupyter import (
    LabServer,
    cell_errors,
    open_notebook,
    plotly_data,
    run_all,
    screenshot,
    wait_for_outputs,
    write_notebook,
)

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser


def test_running_a_benchmark_shows_both_runtimes_and_the_graph_coloured_by_time(
    page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str]
) -> None:
    cells = [
        "from widgets import BenchPanel\n"
        'panel = BenchPanel("zoo:resnet18", min_runs=3, min_seconds=0.0, max_seconds=5.0)\npanel',
    ]
    path = write_notebook(notebook_dir, "bench.ipynb", cells)
    open_notebook(page, lab, path)
    assert run_all(page, timeout_ms=240_000), cell_errors(page)
    page.wait_for_selector(".oge-bench-run", timeout=60_000)
    page.locator(".oge-bench-run").click()  # as a user does: the run button
    page.wait_for_selector(".oge-bench-status >> text=done", timeout=240_000)
    table = page.locator(".oge-bench-table").inner_text()
    assert "ONNX Runtime CPU (all)" in table and "TVM llvm untuned (default schedules)" in table
    assert "no" not in table.split()
    wait_for_outputs(page, ".oge-bench-panel .js-plotly-plot", count=3)
    plots = [plotly_data(page, i) for i in range(3)]  # the panel's plots, in the order they were drawn
    latency = next(p for p in plots if p and p[0]["type"] == "box")
    assert [t["name"] for t in latency] == ["ONNX Runtime CPU (all)", "TVM llvm untuned (default schedules)"]
    kernels = next(p for p in plots if p and p[0]["type"] == "bar")
    assert len(kernels[0]["y"]) >= 5
    colour = page.locator(".oge-bench-panel .oge-graph-view select").first.input_value()
    assert colour == "time: ONNX Runtime CPU (all)"  # the graph is coloured by where ORT spends its time
    page.locator(".oge-bench-panel").scroll_into_view_if_needed()
    page.wait_for_timeout(1000)
    screenshot(page, "bench-panel-resnet18", page.locator(".oge-bench-panel").first)
    page.locator(".oge-bench-panel .oge-graph-view").scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    screenshot(page, "bench-panel-graph-by-time", page.locator(".oge-bench-panel .oge-graph-view").first)
    assert blocked_requests == []

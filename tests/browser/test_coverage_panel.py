"""The CoveragePanel in a real JupyterLab: the graph coloured by partition, a model made NPU-ready."""

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

_GRAPH_PLOT = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).indexOf(
    document.querySelector('.oge-coverage-panel .oge-graph-view .js-plotly-plot'))"""


def test_the_panel_colours_the_graph_by_partition_and_prepares_for_the_htp(
    page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str]
) -> None:
    cells = [
        "from widgets import CoveragePanel\n"
        'panel = CoveragePanel("zoo:resnet18", targets=("ort-cpu", "coreml-mlprogram", "qnn-htp"),\n'
        '                      input_shapes={"input": [1, 3, 224, 224]})\npanel',
    ]
    path = write_notebook(notebook_dir, "coverage.ipynb", cells)
    open_notebook(page, lab, path)
    assert run_all(page, timeout_ms=180_000), cell_errors(page)
    page.wait_for_selector(".oge-coverage-check", timeout=60_000)
    page.locator(".oge-coverage-check").click()  # as a user does
    page.wait_for_selector(".oge-coverage-status >> text=done", timeout=120_000)
    table = page.locator(".oge-coverage-table").inner_text()
    assert "coreml-mlprogram" in table and "19 partitions" in table and "qnn-htp" in table
    page.wait_for_function(
        f"""() => {{
            const gd = document.querySelectorAll('.js-plotly-plot')[({_GRAPH_PLOT})()];
            return gd && gd.data && gd.data.some((t) => t.name === 'CPU');
        }}""",
        timeout=60_000,
    )
    traces = plotly_data(page, page.evaluate(_GRAPH_PLOT))
    names = {t.get("name") for t in traces if t.get("showlegend", True)}
    assert "CPU" in names and any(str(n).startswith("partition 1") for n in names)
    colour = page.locator(".oge-coverage-panel .oge-graph-view select").first.input_value()
    assert colour == "partition: coreml-mlprogram"  # the first accelerator target, not the CPU
    wait_for_outputs(page, ".oge-coverage-results .js-plotly-plot")  # the op-support heatmap
    page.locator(".oge-coverage-panel .oge-graph-view").scroll_into_view_if_needed()
    page.wait_for_timeout(800)
    screenshot(page, "coverage-panel-partitions", page.locator(".oge-coverage-panel .oge-graph-view").first)
    screenshot(page, "coverage-panel-tables", page.locator(".oge-coverage-results").first)

    page.locator(".oge-coverage-prepare").click()
    page.wait_for_selector(".oge-coverage-status >> text=prepared for qnn-htp", timeout=180_000)
    steps = page.locator("table.oge-coverage-steps").inner_text()
    assert "ort-quant:qnn_qdq" in steps and "100%" in steps
    page.locator(".oge-coverage-pipeline").scroll_into_view_if_needed()
    page.wait_for_timeout(1500)
    screenshot(page, "coverage-panel-npu-ready", page.locator(".oge-coverage-pipeline").first)
    assert blocked_requests == []

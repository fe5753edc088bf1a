"""GraphView in a real JupyterLab, and the HTML report in Chromium, both offline."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from explorer.views.figures import NODES
from tests.browser.jupyter import (
    LabServer,
    cell_errors,
    click_plot_point,
    export_html_page,
    kernel_execute,
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


def _node_index(page: Page, node_id: str, plot_index: int = 0) -> int:
    traces = plotly_data(page, plot_index)
    return list(traces[NODES]["customdata"]).index(node_id)


def test_click_a_node_shows_its_details_and_a_box_expands(
    page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str]
) -> None:
    cells = [
        "from widgets import GraphView",
        'view = GraphView("zoo:resnet18", collapse=1)\nview',
    ]
    path = write_notebook(notebook_dir, "graph_view.ipynb", cells)
    open_notebook(page, lab, path)
    assert run_all(page), cell_errors(page)
    wait_for_outputs(page, ".oge-graph-view .js-plotly-plot")
    wait_for_outputs(page, ".oge-details-panel")

    # a collapsed scope is one box; clicking it expands it in place, one level at a time
    steps = (
        ("scope:layer1", "scope:layer1/layer1.0"),
        ("scope:layer1/layer1.0", "/layer1/layer1.0/conv1/Conv"),
    )
    for box, inside in steps:
        click_plot_point(page, plot_index=0, trace_index=NODES, point_index=_node_index(page, box))
        page.wait_for_function(
            """(item) => Array.from(document.querySelector('.oge-graph-view .js-plotly-plot')
                .data[2].customdata).includes(item)""",
            arg=inside,
            timeout=30_000,
        )

    # clicking a node shows that node in the details panel
    target = "/layer1/layer1.0/conv1/Conv"
    click_plot_point(page, plot_index=0, trace_index=NODES, point_index=_node_index(page, target))
    page.wait_for_selector(f'.oge-details[data-node="{target}"]', timeout=30_000)
    panel = page.locator(".oge-details").first.inner_text()
    assert "layer1.0.conv1.weight" in panel or "weights" in panel
    assert "[64, 64, 3, 3]" in panel
    screenshot(page, "graph-view-resnet18")
    assert blocked_requests == []


#: Records every exception a widget message handler raises in the kernel (they go to Lab's log, not
#: to a cell: ipywidgets catches them and calls ``showtraceback``).
_RECORD_HANDLER_ERRORS = """\
import sys
handler_errors = []
_shell = get_ipython()
_show = _shell.showtraceback
def _record(*args, **kwargs):
    handler_errors.append(repr(sys.exc_info()[1]))
    return _show(*args, **kwargs)
_shell.showtraceback = _record"""


def test_clicks_leave_the_kernel_quiet_and_ring_the_node(
    page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str]
) -> None:
    """Each click's selection restyle used to come back as plotly.js's trace defaults, typed arrays
    written as {"0": ..} objects, on which plotly's Python handler raised: seconds of the kernel
    formatting a traceback while the next click waited behind it."""
    cells = [
        _RECORD_HANDLER_ERRORS,
        'from widgets import GraphView\nview = GraphView("zoo:resnet18", collapse=None)\nview',
    ]
    path = write_notebook(notebook_dir, "clicks.ipynb", cells)
    open_notebook(page, lab, path)
    assert run_all(page), cell_errors(page)
    wait_for_outputs(page, ".oge-graph-view .js-plotly-plot")
    for target in ("/conv1/Conv", "/relu/Relu", "/maxpool/MaxPool"):
        index = _node_index(page, target)
        click_plot_point(page, plot_index=0, trace_index=NODES, point_index=index)
        page.wait_for_selector(f'.oge-details[data-node="{target}"]', timeout=30_000)
        page.wait_for_function(  # the ring, drawn once the details are on screen
            """(index) => {
                const gd = document.querySelector('.oge-graph-view .js-plotly-plot');
                const width = gd.data[2].marker.line.width;
                return Array.isArray(width) || ArrayBuffer.isView(width) ? width[index] > 1 : false;
            }""",
            arg=index,
            timeout=30_000,
        )
    state = "print(handler_errors, view.selected, view.figure._trace_edit_in_process)"
    for _ in range(50):  # the last restyle's answer reaches the kernel after the ring is drawn
        printed = kernel_execute(page, state)
        if not printed.strip().endswith("True"):
            break
        page.wait_for_timeout(200)
    assert printed.strip() == "[] /maxpool/MaxPool False", printed
    assert blocked_requests == []


def test_html_report_renders_offline(page: Page, tmp_path: Path, blocked_requests: list[str]) -> None:
    from explorer.views.report import save

    report = save("zoo:resnet18", tmp_path / "report.html", pipeline="fuse_bn_into_conv")
    export_html_page(page, report)
    wait_for_outputs(page, "#oge-graph .main-svg")
    wait_for_outputs(page, "#oge-final .main-svg")
    graph = page.evaluate("Array.from(document.getElementById('oge-graph').data[2].customdata)")
    assert "/conv1/Conv" in graph
    final = page.evaluate("document.getElementById('oge-final').data[2].marker.color")
    assert "#9467bd" in list(final)  # fused Convs are purple
    assert "BatchNormalization" in page.locator(".oge-summary").inner_text()
    page.locator("#oge-graph").scroll_into_view_if_needed()
    screenshot(page, "report-resnet18")
    assert blocked_requests == []

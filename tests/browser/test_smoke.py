"""Smoke tests of the browser harness: ipywidgets and a plotly FigureWidget in real JupyterLab.

They prove what the GraphView tests rely on: widgets render offline, a scattergl trace is in
the page, a mouse click on a point reaches the Python ``on_click`` callback and its effect
comes back to the page; and a self-contained HTML export renders with no network.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.browser.jupyter import (
    LabServer,
    cell_errors,
    click_plot_point,
    emit_plot_click,
    export_html_page,
    open_notebook,
    plotly_data,
    run_all,
    screenshot,
    step_slider,
    wait_for_outputs,
    wait_for_text,
    write_notebook,
)

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

XS = [0, 1, 2, 3, 4]
YS = [0, 2, 1, 3, 2]

SMOKE_CELLS = [
    "import ipywidgets as widgets\nimport plotly.graph_objects as go",
    f"""\
slider = widgets.IntSlider(value=3, min=0, max=10, description="n")
clicked = widgets.Label(value="clicked: none")
clicked.add_class("smoke-clicked")
seen = widgets.Label(value="slider: 3")
seen.add_class("smoke-slider")
slider.observe(lambda change: setattr(seen, "value", f"slider: {{change.new}}"), names="value")
fig = go.FigureWidget(
    data=[go.Scattergl(x={XS}, y={YS}, mode="markers", marker={{"size": 16}})],
    layout={{"width": 600, "height": 400, "hovermode": "closest", "margin": {{"t": 20}}}},
)


def on_click(trace, points, selector):
    if points.point_inds:
        clicked.value = f"clicked: {{points.point_inds[0]}}"


fig.data[0].on_click(on_click)
widgets.VBox([slider, seen, fig, clicked])""",
]


def test_widgets_render_and_plot_click_reaches_python(
    page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str]
) -> None:
    """Slider and scattergl FigureWidget render; mouse click, emitted click and slider keys reach Python."""
    path = write_notebook(notebook_dir, "smoke.ipynb", SMOKE_CELLS)
    open_notebook(page, lab, path)
    assert run_all(page), cell_errors(page)
    assert cell_errors(page) == []

    wait_for_outputs(page, ".widget-slider")
    wait_for_outputs(page, ".js-plotly-plot")
    label = wait_for_outputs(page, ".smoke-clicked")
    assert label.inner_text() == "clicked: none"

    traces = plotly_data(page)
    assert [t["type"] for t in traces] == ["scattergl"]
    assert traces[0]["x"] == XS and traces[0]["y"] == YS

    point = click_plot_point(page, plot_index=0, trace_index=0, point_index=3)
    assert (point["x"], point["y"]) == (XS[3], YS[3])
    wait_for_text(page, ".smoke-clicked", "clicked: 3")

    step_slider(page.locator(".widget-slider").first, 2)
    wait_for_text(page, ".smoke-slider", "slider: 5")

    emit_plot_click(page, plot_index=0, trace_index=0, point_index=1)
    wait_for_text(page, ".smoke-clicked", "clicked: 1")

    shot = screenshot(page, "smoke-notebook")
    screenshot(page, "smoke-output", target=page.locator(".jp-OutputArea-output").filter(has=label))
    assert shot.stat().st_size > 10_000
    # Lab, ipywidgets, anywidget and plotly need nothing from outside for rendering.
    assert blocked_requests == []


def test_self_contained_html_renders_offline(page: Page, tmp_path: Path, blocked_requests: list[str]) -> None:
    """A ``write_html`` export with inline plotly.js renders from ``file://`` with no network."""
    go = pytest.importorskip("plotly.graph_objects")
    fig = go.Figure(go.Scattergl(x=XS, y=YS, mode="markers"), layout={"width": 600, "height": 400})
    report = tmp_path / "report.html"
    fig.write_html(report, include_plotlyjs=True, full_html=True)

    export_html_page(page, report)
    wait_for_outputs(page, ".js-plotly-plot .main-svg")
    traces = plotly_data(page)
    assert [t["type"] for t in traces] == ["scattergl"]
    screenshot(page, "smoke-html-report")
    assert blocked_requests == []

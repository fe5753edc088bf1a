"""GraphFigureWidget in a real JupyterLab: each figure draws its own data, from the shared bundle.

The figures of a kernel share one evaluated plotly.js (``widgets.plotly_bundle``), but each
model gets its own plotly widget object: plotly's ``{initialize, render}`` keep the model in a
closure, so a view made from another figure's object would draw that figure and follow its
updates (two figures made in one cell, then displayed, is how the panels build their outputs).
"""

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
    wait_for_outputs,
    write_notebook,
)

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

_CELLS = [
    "import plotly.graph_objects as go\n"
    "from widgets.figure_widget import GraphFigureWidget\n"
    "from widgets.plotly_bundle import bundle_source\n"
    'first = GraphFigureWidget(go.Figure(go.Scatter(y=[1, 2], name="first")))\n'
    'second = GraphFigureWidget(go.Figure(go.Bar(y=[3, 1], name="second")))\n'
    "third = GraphFigureWidget(go.Figure(go.Sankey(node={'label': ['a', 'b']}, link={'source': [0],"
    " 'target': [1], 'value': [1]}, name='third')))\n"
    "print(first._oge_bundle_key == second._oge_bundle_key != third._oge_bundle_key,"
    " bundle_source().partial)\n"
    "display(first, second, third)",
    'first.data[0].name = "first, renamed"',
]

_NAMES = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .map((gd) => (gd.data || []).map((trace) => trace.name).join(','))"""


def test_figures_made_together_each_draw_and_follow_their_own_data(
    page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str]
) -> None:
    path = write_notebook(notebook_dir, "figure_widgets.ipynb", _CELLS)
    open_notebook(page, lab, path)
    assert run_all(page), cell_errors(page)
    wait_for_outputs(page, ".js-plotly-plot", count=3)
    # the first two share the partial bundle, the Sankey takes plotly's full one
    assert "True True" in page.locator(".jp-OutputArea-output pre").first.inner_text()
    page.wait_for_function(f"() => ({_NAMES})()[0] === 'first, renamed'", timeout=30_000)
    assert page.evaluate(_NAMES) == ["first, renamed", "second", "third"]
    assert plotly_data(page, 1)[0]["type"] == "bar"
    assert page.locator(".js-plotly-plot").nth(2).locator(".sankey").count() == 1  # drawn, not blank
    assert not cell_errors(page)
    assert not blocked_requests


_LOST_BUNDLE_CELL = """\
from comm import create_comm
import plotly.graph_objects as go
from widgets import plotly_bundle
from widgets.figure_widget import GraphFigureWidget

# as when the kernel opened its bundle widget before this page listened: the page never had it
key = plotly_bundle.bundle_source(["scatter"]).key
lost = create_comm(target_name="oge-test-nowhere", data={})  # the page refuses an unknown target
plotly_bundle._BUNDLES[key] = plotly_bundle._PlotlyBundle(comm=lost, code=b"", key=key)
fig = GraphFigureWidget(go.Figure(go.Scatter(y=[1, 3, 2], name="sent")))
display(fig)
fig.data[0].name = "sent again"  # a restyle before the page has plotly.js: held, then replayed"""


def test_a_figure_whose_bundle_never_reached_the_page_gets_it_sent_again(
    page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str]
) -> None:
    path = write_notebook(notebook_dir, "figure_widget_lost_bundle.ipynb", [_LOST_BUNDLE_CELL])
    open_notebook(page, lab, path)
    # the page forgets what it evaluated: only a bundle sent again can draw the figure
    page.wait_for_function(
        "() => globalThis.__oge_plotly_bundles && globalThis.__oge_plotly_bundles.size > 0"
    )
    page.evaluate("() => globalThis.__oge_plotly_bundles.clear()")
    assert run_all(page), cell_errors(page)
    wait_for_outputs(page, ".js-plotly-plot")
    page.wait_for_function(f"() => ({_NAMES})()[0] === 'sent again'", timeout=60_000)
    assert page.evaluate("() => globalThis.__oge_plotly_bundles.size") == 1
    assert not cell_errors(page)
    assert not blocked_requests

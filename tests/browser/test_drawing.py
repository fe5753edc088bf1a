"""The graph drawing in a real page: op boxes, legend and labels for ResNet-18 and a transformer.

Screenshots land in ``tests/artifacts/browser/`` (``drawing-*.png``); the browser-side time
to draw (from the figure data arriving in the page to plotly's ``plotly_afterplot``) is
measured in the page and printed (run with ``-s`` to see it, e.g. in CI logs).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from explorer.core.op_categories import CATEGORIES
from explorer.views.figures import DETAILS, EDGE_LABELS, HEADS, LABELS, NODES
from tests.browser.jupyter import (
    LabServer,
    cell_errors,
    export_html_page,
    open_notebook,
    run_all,
    screenshot,
    wait_for_outputs,
    wait_for_plot_edits,
    write_notebook,
)

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

VIEWS = ".oge-graph-view .js-plotly-plot"

# Times, in the page, each comm message from the kernel (the figure's data) and each
# plotly_afterplot of every graph plot; `drawTime(plot)` is the time from the last message
# before the plot's latest afterplot to that afterplot.
_TIMING_JS = """() => {
    const panel = window.jupyterapp.shell.currentWidget;
    const kernel = panel.sessionContext.session.kernel;
    window.__ogeMessages = [];
    kernel.iopubMessage.connect((_, msg) => {
        const type = msg.header.msg_type;
        if (type === 'comm_msg' || type === 'comm_open') { window.__ogeMessages.push(performance.now()); }
    });
    window.__ogeAfterplot = {};
    const watch = () => document.querySelectorAll('.oge-graph-view .js-plotly-plot').forEach((gd, i) => {
        if (gd.__ogeWatched || !gd.on) { return; }
        gd.__ogeWatched = true;
        gd.on('plotly_afterplot', () => {
            (window.__ogeAfterplot[i] = window.__ogeAfterplot[i] || []).push(performance.now());
        });
    });
    new MutationObserver(watch).observe(document.body, {childList: true, subtree: true});
    watch();
    window.drawTime = (i) => {
        const after = (window.__ogeAfterplot[i] || []).slice(-1)[0];
        const before = window.__ogeMessages.filter((t) => t <= after).slice(-1)[0];
        return after === undefined || before === undefined ? null : after - before;
    };
}"""


def _drawn(page: Page, plot_index: int) -> dict[str, Any]:
    """What a graph plot shows: boxes per category, legend entries, the text on the page."""
    wait_for_plot_edits(page)
    return page.evaluate(
        """([index, first, count, labels, details, shapes]) => {
            const gd = document.querySelectorAll('.js-plotly-plot')[index];
            const heads = {};
            for (let k = first; k < first + count; k++) {
                const trace = gd._fullData.find((t) => t.index === k);
                const gaps = Array.from(trace.x || []).filter((v) => v === null || Number.isNaN(v));
                heads[trace.name] = gaps.length;
            }
            const legend = Array.from(gd.querySelectorAll('.legend .legendtext')).map((e) => e.textContent);
            const text = Array.from(gd.querySelectorAll('.textpoint')).map((e) => e.textContent);
            return {heads: heads, legend: legend, text: text,
                    labels: gd.data[labels].visible, details: gd.data[details].visible,
                    shapes: gd.data[shapes].visible, items: gd._fullData[2].customdata.length};
        }""",
        [plot_index, HEADS, len(CATEGORIES), LABELS, DETAILS, EDGE_LABELS],
    )


def test_graph_view_draws_op_boxes_for_resnet18_and_a_transformer(
    page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str]
) -> None:
    cells = [
        "from widgets import GraphView\nfrom explorer import zoo",
        'resnet = GraphView("zoo:resnet18", collapse=None)\nresnet',
        'transformer = GraphView("zoo:transformer", collapse=None)\ntransformer',
        'big = GraphView(zoo.build("transformer", layers=16, hidden=32), collapse=1)\nbig',
    ]
    path = write_notebook(notebook_dir, "drawing.ipynb", cells)
    open_notebook(page, lab, path)
    page.evaluate(_TIMING_JS)
    assert run_all(page, timeout_ms=240_000), cell_errors(page)
    wait_for_outputs(page, VIEWS, count=3)
    plots = f"Array.from(document.querySelectorAll('{VIEWS}'))"
    page.wait_for_function(f"() => {plots}.every(p => p.data && p.data.length > {HEADS})")
    page.wait_for_timeout(1500)
    views = page.locator(".oge-graph-view")
    first = []
    for i in range(2):  # colour by scope: new box bodies and colours arrive; time their drawing, go back
        views.nth(i).scroll_into_view_if_needed()
        for color_by in ("scope", "op_type"):
            count = page.evaluate("(i) => (window.__ogeAfterplot[i] || []).length", i)
            views.nth(i).locator("select").first.select_option(color_by)
            page.wait_for_function(
                "([i, n]) => (window.__ogeAfterplot[i] || []).length > n", arg=[i, count], timeout=120_000
            )
            page.wait_for_timeout(1000)
            if color_by == "scope":
                first.append(page.evaluate("(i) => window.drawTime(i)", i))

    resnet = _drawn(page, 0)
    assert resnet["heads"]["Convolution / linear"] == 21  # 20 Conv and the Gemm
    assert resnet["heads"]["Normalization"] == 20
    assert {"Convolution / linear", "Activation", "Normalization", "Pooling"} <= set(resnet["legend"])
    assert resnet["labels"] is True and "BatchNormalization" in resnet["text"] and "Conv" in resnet["text"]
    assert any("W 64×3×7×7" in t for t in resnet["text"])  # the body: weights' shapes
    assert resnet["shapes"] is True and any("×224×224" in t for t in resnet["text"])  # shapes on edges
    views.nth(0).scroll_into_view_if_needed()
    screenshot(page, "drawing-graph-view-resnet18", views.nth(0))

    transformer = _drawn(page, 1)
    assert transformer["heads"]["Convolution / linear"] > 0 and "LayerNormalization" in transformer["text"]
    assert {"Convolution / linear", "Normalization", "Tensor / shape"} <= set(transformer["legend"])
    views.nth(1).scroll_into_view_if_needed()
    screenshot(page, "drawing-graph-view-transformer", views.nth(1))

    # expand a 922-node transformer from its boxes: the figure data arrives, plotly draws it
    big = views.nth(2)
    big.scroll_into_view_if_needed()
    assert _drawn(page, 2)["items"] < 300
    big.locator("button", has_text="expand all").click()
    page.wait_for_function(
        f"() => (document.querySelectorAll('{VIEWS}')[2].data[{NODES}]?.customdata?.length ?? 0) > 900",
        timeout=240_000,
    )
    page.wait_for_timeout(3000)
    expanded = page.evaluate("window.drawTime(2)")
    screenshot(page, "drawing-graph-view-transformer-922", big)
    print(
        "\nbrowser draw time (figure data in the page -> plotly_afterplot): "
        f"colour by scope: resnet18 {first[0]:.0f} ms, transformer {first[1]:.0f} ms; "
        f"922-node transformer expanded {expanded:.0f} ms"
        if None not in (*first, expanded)
        else f"\nbrowser draw time: not measured ({first}, {expanded})"
    )
    assert blocked_requests == []


def test_report_draws_op_boxes_and_redraws_fast(
    page: Page, tmp_path: Path, blocked_requests: list[str]
) -> None:
    from explorer import zoo
    from explorer.views.report import save

    report = save(zoo.build("transformer", layers=16, hidden=32), tmp_path / "t.html", collapse=None)
    export_html_page(page, report)
    wait_for_outputs(page, "#oge-graph .main-svg")
    drawn = _drawn(page, 1)  # plot 0 is the op histogram
    assert drawn["items"] > 900 and drawn["labels"] is True and "LayerNormalization" in drawn["text"]
    # draw the same figure again, from its data, and pan it: both timed in the page
    times = page.evaluate(
        """async () => {
            const gd = document.getElementById('oge-graph');
            const div = document.createElement('div');
            div.style.width = gd.clientWidth + 'px';
            document.body.appendChild(div);
            const data = JSON.parse(JSON.stringify(gd.data)), layout = JSON.parse(JSON.stringify(gd.layout));
            const start = performance.now();
            const drawn = new Promise((resolve) => div.on
                ? div.on('plotly_afterplot', resolve) : resolve());
            await Plotly.newPlot(div, data, layout);
            await drawn;
            const draw = performance.now() - start;
            const xr = gd._fullLayout.xaxis.range, yr = gd._fullLayout.yaxis.range, dy = (yr[1] - yr[0]) / 4;
            const pans = [];
            for (let k = 1; k <= 5; k++) {
                const t = performance.now();
                const moved = [yr[0] - k * dy, yr[1] - k * dy];
                await Plotly.relayout(gd, {'xaxis.range': xr, 'yaxis.range': moved});
                pans.push(performance.now() - t);
            }
            div.remove();
            return {draw: draw, pan: pans.reduce((a, b) => a + b) / pans.length};
        }"""
    )
    page.locator("#oge-graph").scroll_into_view_if_needed()
    screenshot(page, "drawing-report-transformer-922")
    print(
        f"\nreport, 922-node transformer: draw {times['draw']:.0f} ms, "
        f"one pan step (relayout, text shown) {times['pan']:.0f} ms"
    )
    assert blocked_requests == []

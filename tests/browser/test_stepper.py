"""PassStepper in a real JupyterLab: run a two-step pipeline, step, check the highlights match the diff."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from explorer.passes.pipeline import run_pipeline
from explorer.views.figures import DIFF_COLORS, LABELS, NODES, TRACE_COUNT
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

PIPELINE = "fuse_bn_into_conv,ort:extended"
STATUS_OF_COLOR = {color: status for status, color in DIFF_COLORS.items()}
PLOTS = "document.querySelectorAll('.oge-pass-stepper .js-plotly-plot')"
BOTH_DRAWN = (
    f"() => {PLOTS}.length == 2 && Array.from({PLOTS}).every(p => p.data && p.data.length == {TRACE_COUNT})"
)
AFTER_HAS_NEW_NODES = (
    f"() => Array.from({PLOTS}[1].data[{LABELS}].meta.text).some(t => t.includes('FusedConv'))"
)


def _highlights(page: Page, plot_index: int) -> dict[str, str]:
    """Node id -> diff status of every node drawn in a diff colour other than 'kept'."""
    nodes = plotly_data(page, plot_index)[NODES]
    colors = nodes["marker"]["color"]
    return {
        item: STATUS_OF_COLOR[color]
        for item, color in zip(nodes["customdata"], colors, strict=True)
        if color in STATUS_OF_COLOR and STATUS_OF_COLOR[color] != "kept"
    }


def test_stepper_runs_steps_and_highlights_the_diff(
    page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str]
) -> None:
    cells = [
        "from widgets import PassStepper",
        f'stepper = PassStepper("zoo:resnet18", "{PIPELINE}")\nstepper',
    ]
    path = write_notebook(notebook_dir, "stepper.ipynb", cells)
    open_notebook(page, lab, path)
    assert run_all(page, timeout_ms=240_000), cell_errors(page)
    wait_for_outputs(page, ".oge-pass-stepper .js-plotly-plot", count=2)
    page.wait_for_selector(".oge-step-title >> text=step 1: fuse_bn_into_conv", timeout=60_000)
    page.wait_for_function(BOTH_DRAWN, timeout=60_000)

    expected = run_pipeline("zoo:resnet18", PIPELINE, verify=False)

    def check(step: int) -> None:
        d = expected.diff(step)
        want_before = {k: v for k, v in d.status_before().items() if v != "kept"}
        want_after = {k: v for k, v in d.status_after().items() if v != "kept"}
        assert want_before and want_after
        # the step's colours come as an edit of the figure, applied once the page has painted the
        # step's title: wait for them, a few seconds at most
        for _ in range(50):
            if _highlights(page, 0) == want_before and _highlights(page, 1) == want_after:
                break
            page.wait_for_timeout(200)
        assert _highlights(page, 0) == want_before
        assert _highlights(page, 1) == want_after

    check(1)
    assert set(_highlights(page, 0).values()) == {"fused", "changed"}  # BatchNorms fused into changed Convs

    page.locator(".oge-next button, button.oge-next").first.click()
    page.wait_for_selector(".oge-step-title >> text=step 2: ort:extended", timeout=60_000)
    page.wait_for_function(AFTER_HAS_NEW_NODES, timeout=60_000)
    check(2)
    assert "FusedConv" in page.locator(".oge-fusions").inner_text()
    table = page.locator(".oge-steps").inner_text()
    assert "fuse_bn_into_conv" in table and "ort:extended" in table
    panels = page.locator(".oge-pass-stepper .js-plotly-plot").first
    panels.scroll_into_view_if_needed()
    page.wait_for_timeout(1500)  # let plotly finish drawing the new step
    screenshot(page, "stepper-resnet18")
    assert blocked_requests == []

"""A TVM Relax lowering in a real JupyterLab: the stepper steps it, a fused group opens into its members."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from explorer.views.figures import NODES
from tests.browser.jupyter import (
    LabServer,
    cell_errors,
    click_plot_point,
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

VIEW_PLOT = "document.querySelector('.oge-graph-view .js-plotly-plot')"


def test_stepping_a_lowering_timeline_and_opening_a_fused_group(
    page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str]
) -> None:
    cells = [
        "from explorer import load\nfrom explorer.lower import relax_pipeline\n"
        "from widgets import GraphView, TimelineStepper",
        'timeline = relax_pipeline(load("zoo:resnet18"), {"input": [1, 3, 224, 224]}, "zero")\n'
        "stepper = TimelineStepper(timeline)\nstepper",
        "fused = GraphView(timeline[4].graph, collapse=1)\nfused",
        'full = relax_pipeline(load("zoo:mlp"), {"input": [1, 1, 28, 28]})\n'
        'GraphView(full[full.index("StaticPlanBlockMemory")].graph)',
    ]
    path = write_notebook(notebook_dir, "lowering.ipynb", cells)
    open_notebook(page, lab, path)
    assert run_all(page, timeout_ms=240_000), cell_errors(page)
    wait_for_outputs(page, ".oge-timeline-stepper .js-plotly-plot", count=2)
    page.wait_for_selector(".oge-step-title >> text=step 1: LegalizeOps", timeout=60_000)
    for step in ("AnnotateTIROpPattern", "FoldConstant", "FuseOps"):
        page.locator(
            ".oge-timeline-stepper .oge-next button, .oge-timeline-stepper button.oge-next"
        ).first.click()
        page.wait_for_selector(f".oge-step-title >> text={step}", timeout=60_000)
    title = page.locator(".oge-step-title").first.inner_text()
    assert "step 4: FuseOps" in title and "fused functions 0 -> 13" in title
    assert "FuseTIR" in page.locator(".oge-steps").inner_text()
    page.locator(".oge-timeline-stepper .js-plotly-plot").first.scroll_into_view_if_needed()
    page.wait_for_timeout(1000)
    screenshot(page, "lowering-stepper-resnet18-fuseops")

    # the FuseOps graph: each fused function is a box; clicking one opens it into its members
    wait_for_outputs(page, ".oge-graph-view .js-plotly-plot")
    items = list(plotly_data(page, 2)[NODES]["customdata"])
    box = next(item for item in items if item.startswith("scope:fused_"))
    name = box.removeprefix("scope:")
    click_plot_point(page, plot_index=2, trace_index=NODES, point_index=items.index(box))
    page.wait_for_function(
        f"(name) => Array.from({VIEW_PLOT}.data[{NODES}].customdata).some(i => i.startsWith(name + '/'))",
        arg=name,
        timeout=30_000,
    )
    opened = [i for i in plotly_data(page, 2)[NODES]["customdata"] if i.startswith(name + "/")]
    assert len(opened) >= 2 and box not in plotly_data(page, 2)[NODES]["customdata"]
    page.locator(".oge-graph-view").first.scroll_into_view_if_needed()
    page.wait_for_timeout(1000)
    screenshot(page, "lowering-fused-group-opened", page.locator(".oge-graph-view").first)

    # after memory planning: every tensor an allocation, placed in a storage (the memory colour)
    planned = page.locator(".oge-graph-view").nth(1)
    planned.scroll_into_view_if_needed()
    wait_for_outputs(page, ".oge-graph-view .js-plotly-plot", count=2)
    page.wait_for_timeout(1000)
    screenshot(page, "lowering-memory-planned-mlp", planned)
    assert any(trace.get("name") == "Memory (allocate / free)" for trace in plotly_data(page, 3))
    assert blocked_requests == []


def test_stepping_iree_phases_coloured_by_dialect(
    page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str]
) -> None:
    pytest.importorskip("iree.compiler")
    cells = [
        "from explorer import load\nfrom explorer.lower.iree.iree_pipeline import iree_pipeline\n"
        "from widgets import TimelineStepper",
        'timeline = iree_pipeline(load("zoo:resnet18"))\nstepper = TimelineStepper(timeline)\nstepper',
    ]
    path = write_notebook(notebook_dir, "iree-lowering.ipynb", cells)
    open_notebook(page, lab, path)
    assert run_all(page, timeout_ms=240_000), cell_errors(page)
    wait_for_outputs(page, ".oge-timeline-stepper .js-plotly-plot", count=2)
    page.wait_for_selector(".oge-step-title >> text=step 1: input", timeout=60_000)

    def legend() -> set[str]:
        return {
            t.get("name") for plot in (0, 1) for t in plotly_data(page, plot) if t.get("showlegend", True)
        }

    assert {"torch: ONNX ops", "linalg: structured ops"} <= legend()  # before: torch ops, after: linalg
    for step in ("abi", "preprocessing", "global-optimization", "dispatch-creation"):
        page.locator(
            ".oge-timeline-stepper .oge-next button, .oge-timeline-stepper button.oge-next"
        ).first.click()
        page.wait_for_selector(f".oge-step-title >> text={step}", timeout=60_000)
    page.locator(".oge-timeline-stepper .js-plotly-plot").first.scroll_into_view_if_needed()
    page.wait_for_timeout(1000)
    screenshot(page, "lowering-iree-dispatch-creation-resnet18")
    page.locator(
        ".oge-timeline-stepper .oge-next button, .oge-timeline-stepper button.oge-next"
    ).first.click()
    page.wait_for_selector(".oge-step-title >> text=flow", timeout=60_000)
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('.oge-timeline-stepper .js-plotly-plot'))"
        ".some(p => (p.data || []).some(t => t.name === 'flow: dispatches'))",
        timeout=30_000,
    )
    assert "flow: dispatches" in legend()
    assert "MLIR symbol" in page.locator(".oge-timeline-stepper").inner_text()
    page.wait_for_timeout(1000)
    screenshot(page, "lowering-iree-flow-resnet18")
    assert blocked_requests == []

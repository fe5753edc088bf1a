"""A notebook's kernel warms the first GraphView while the user reads: the page has plotly.js first."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.browser.jupyter import (
    LabServer,
    cell_errors,
    open_notebook,
    run_all,
    wait_for_outputs,
    write_notebook,
)

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

#: Resolves to the keys of the plotly bundles this page has evaluated (none: an empty list).
_EVALUATED_BUNDLES = """async () => {
    const cache = globalThis.__oge_plotly_bundles;
    if (!cache) return [];
    const keys = [];
    for (const [key, loading] of cache) {
        const mod = await loading.catch(() => null);
        if (mod && (mod.default || mod.render)) keys.push(key);
    }
    return keys;
}"""


def test_the_kernel_sends_plotly_to_the_page_before_any_cell_runs(
    page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str]
) -> None:
    path = write_notebook(
        notebook_dir, "kernel_warm.ipynb", ['from widgets import GraphView\nGraphView("zoo:resnet18")']
    )
    open_notebook(page, lab, path)
    # nothing has run: the kernel's warm-up alone made the page evaluate plotly's bundle
    page.wait_for_function(
        "() => globalThis.__oge_plotly_bundles && globalThis.__oge_plotly_bundles.size > 0", timeout=120_000
    )
    warmed = page.evaluate(_EVALUATED_BUNDLES)
    assert len(warmed) == 1 and warmed[0].startswith("plotly-")
    assert run_all(page), cell_errors(page)
    wait_for_outputs(page, ".oge-graph-view .js-plotly-plot")
    assert page.evaluate(_EVALUATED_BUNDLES) == warmed  # the view used it: not evaluated again
    assert not cell_errors(page)
    assert not blocked_requests
